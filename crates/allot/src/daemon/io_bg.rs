//! I/O by share's two edges (io.rs): the background, whose jobs weigh the least
//! (`allot_model::io::BACKGROUND_UNITS`, written on allot's background sibling, beside
//! allot's root at the top of the hierarchy as `cpu.idle` is, so all background I/O
//! together weighs the least against everything else), and the switch that turns I/O by
//! share off (`[io] by_share = false`), which gives back every weight allot wrote.

use super::super::core::Daemon;
use super::super::registry::BACKGROUND;
use allot_linux::cgroup::io::Io;
use allot_linux::cgroup::systemd::SliceProp;
use allot_linux::cgroup::Version;
use allot_model::io::BACKGROUND_UNITS;

/// What a weight is given back as when I/O by share is turned off: the default funding
/// (`allot_model::units::DEFAULT`), which each interface writes as the kernel's own default
/// (100; CFQ's 500).
const KERNEL_DEFAULT_UNITS: u32 = allot_model::units::DEFAULT;

impl Daemon {
    /// The background sibling's weight, once (and again if it was taken back). Returns a
    /// failure in words.
    pub(in crate::daemon) fn apply_background_io(&mut self, io: &Io) -> Option<String> {
        if self.io().written.get(BACKGROUND) == Some(&BACKGROUND_UNITS) {
            return None;
        }
        let bg = sibling(io)?;
        if bg.version() == Version::V2 {
            if let Err(e) = bg.ensure("") {
                return Some(format!("could not enable the io controller for the background: {e}"));
            }
        }
        if !bg.has("") {
            return None;
        }
        match bg.set_weight("", BACKGROUND_UNITS) {
            Ok(files) => {
                let st = self.io_mut();
                st.wrote(&files);
                st.written.insert(BACKGROUND.to_string(), BACKGROUND_UNITS);
                None
            }
            Err(e) => Some(format!("could not set the I/O weight of the background: {e}")),
        }
    }

    /// `[io] by_share = false`: nothing is written, and every weight allot wrote is given
    /// back: a slice's `IOWeight=` taken back (systemd's default again), a directory of
    /// allot's given the kernel's default weight.
    pub(in crate::daemon) fn io_off(&mut self) {
        if self.io().written.is_empty() {
            return;
        }
        if self.io().slices {
            // Only IOWeight= (a slice's memory properties are the memory step's), and only
            // on a slice that runs (setting one would start a stopped slice again).
            let rels: Vec<String> = std::mem::take(&mut self.io_mut().written).into_keys().collect();
            self.io_mut().files.clear();
            let Some(sm) = self.tree().cg().slice_memory() else { return };
            for rel in rels {
                if sm.slice_usage(&rel).is_ok() {
                    if let Err(e) = sm.set_slice_memory(&rel, SliceProp::IoWeight, None) {
                        log::info!("io: could not take back the IOWeight= of {rel}'s slice: {e}");
                    }
                }
            }
            return;
        }
        let Some(io) = self.io().io.clone() else { return };
        for rel in std::mem::take(&mut self.io_mut().written).into_keys() {
            let r = if rel == BACKGROUND {
                sibling(&io).map(|bg| bg.set_weight("", KERNEL_DEFAULT_UNITS))
            } else {
                Some(io.set_weight(&rel, KERNEL_DEFAULT_UNITS))
            };
            if let Some(Err(e)) = r {
                log::info!("io: could not give back the I/O weight of {rel}: {e}");
            }
        }
        self.io_mut().files.clear();
    }
}

/// allot's background sibling in the I/O hierarchy (`<root>-background`, beside the root),
/// which the hierarchy mirrors as the cpu one has it.
fn sibling(io: &Io) -> Option<Io> {
    let mount = io.root().parent()?;
    let name = io.root().file_name()?.to_string_lossy();
    Some(Io::at(io.version(), mount.to_path_buf(), mount.join(format!("{name}-{BACKGROUND}"))))
}
