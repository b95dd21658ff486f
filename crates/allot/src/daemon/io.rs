//! I/O by share (docs/memory.md, "I/O by share"): a currency's funding is its I/O weight,
//! and its jobs' tickets divide it, as they divide its CPU. The weights are the model's
//! (`allot_model::io`), written where the kernel has a file for them: on allot's own tree
//! v2 `io.weight` and `io.bfq.weight`, v1 `blkio.bfq.weight` (or CFQ's `blkio.weight`);
//! on a systemd host the slice's `IOWeight=` through systemd, as memory goes there
//! (memory_sd.rs). Whether a device honours them is the kernel's: `status` says which do.
//! Only what changed is written; at stop what was sent to a slice is taken back (allot's
//! own directories go with its tree).

use super::core::Daemon;
use super::registry::{currency_rel, Class, CurrencyId, BACKGROUND};
use crate::memory_view::{CurrencyPressure, Stall};
use allot::io_view::{IoDevice, IoView};
use allot_linux::cgroup::systemd::SliceProp;
use allot_linux::cgroup::Version;
use allot_model::io::BACKGROUND_UNITS;
use std::collections::HashSet;

impl Daemon {
    /// One I/O step: each foreground currency's weight is its funding, each job's its
    /// tickets; only changes are written.
    pub fn apply_io(&mut self) {
        if !self.cfg().io.by_share {
            return self.io_off();
        }
        if self.io().slices {
            return self.apply_slice_io();
        }
        let Some(io) = self.io().io.clone() else { return };
        let mut specs: Vec<_> = self.desired().jobs.values().filter(|j| j.class() == Class::Foreground).collect();
        specs.sort_by_key(|j| j.rel());
        let mut want: Vec<(String, u32)> = vec![];
        let mut seen: HashSet<CurrencyId> = HashSet::new();
        for j in specs {
            if seen.insert(j.currency.clone()) {
                want.push((currency_rel(Class::Foreground, &j.currency), self.funding_of(&j.currency)));
            }
            want.push((j.rel(), j.tickets.get()));
        }
        let mut failed = None;
        for (rel, units) in &want {
            if io.version() == Version::V2 && !self.io().delegated.contains(rel) {
                match io.ensure(rel) {
                    Ok(()) => _ = self.io_mut().delegated.insert(rel.clone()),
                    Err(e) => failed = Some(format!("could not enable the io controller down to {rel}: {e}")),
                }
            }
            if self.io().written.get(rel) == Some(units) || !io.has(rel) {
                continue;
            }
            match io.set_weight(rel, *units) {
                Ok(files) => {
                    self.io_mut().wrote(&files);
                    self.io_mut().written.insert(rel.clone(), *units);
                }
                Err(e) => failed = Some(format!("could not set the I/O weight of {rel}: {e}")),
            }
        }
        if let Some(f) = self.apply_background_io(&io) {
            failed = Some(f);
        }
        let keep: HashSet<&String> = want.iter().map(|(r, _)| r).collect();
        let st = self.io_mut();
        st.written.retain(|r, _| keep.contains(r) || r == BACKGROUND);
        st.delegated.retain(|r| keep.contains(r));
        if failed != st.failed {
            if let Some(f) = &failed {
                log::warn!("io: {f}");
            }
            st.failed = failed;
        }
    }

    /// On a systemd host: each currency's slice gets its funding as `IOWeight=`, scaled so
    /// the largest is 100 (systemd turns IOWeight= above 100 into a BFQ weight out of
    /// proportion; `allot_model::io::slice_weights`). Its jobs share it with its login
    /// sessions, not divided by tickets there. The background slice gets the least, 1.
    fn apply_slice_io(&mut self) {
        let ids = self.slice_currencies();
        let fundings: Vec<u32> = ids.iter().map(|c| self.funding_of(c)).collect();
        let weights = allot_model::io::slice_weights(&fundings);
        let Some(sm) = self.tree().cg().slice_memory() else { return };
        let mut failed = None;
        let mut sent = vec![];
        for (c, w) in ids.iter().zip(weights) {
            let rel = currency_rel(Class::Foreground, c);
            // Only a slice that runs now: setting a property of a stopped user slice
            // brought it back (systemd VM: user-59800.slice, whose last scope had ended,
            // was left running after allot's purge), and it has nothing to weigh.
            if sm.slice_usage(&rel).is_err() {
                continue;
            }
            match sm.set_slice_memory(&rel, SliceProp::IoWeight, Some(w as u64)) {
                Ok(()) => sent.push((rel, w)),
                Err(e) => failed = Some(format!("could not set IOWeight= of {rel}'s slice: {e}")),
            }
        }
        // The background slice (allot's own, while background jobs run) weighs the least.
        let bg = self.desired().jobs.values().any(|j| j.class() == Class::Background) && sm.slice_usage(BACKGROUND).is_ok();
        if bg {
            match sm.set_slice_memory(BACKGROUND, SliceProp::IoWeight, Some(BACKGROUND_UNITS as u64)) {
                Ok(()) => sent.push((BACKGROUND.to_string(), BACKGROUND_UNITS)),
                Err(e) => failed = Some(format!("could not set IOWeight= of the background slice: {e}")),
            }
        }
        let st = self.io_mut();
        if !bg {
            // Gone with its slice (stopped with the last background job).
            st.written.remove(BACKGROUND);
        }
        for (rel, w) in sent {
            st.written.insert(rel, w);
        }
        if !st.written.is_empty() {
            st.files.insert("IOWeight=");
        }
        if failed != st.failed {
            if let Some(f) = &failed {
                log::info!("io: {f}");
            }
            st.failed = failed;
        }
    }

    /// At stop: every `IOWeight=` sent to a slice is taken back (allot's own tree's
    /// directories, and their weights, go with the tree).
    pub fn undo_io(&mut self) {
        let rels: Vec<String> = std::mem::take(&mut self.io_mut().written).into_keys().collect();
        if !self.io().slices {
            return;
        }
        let Some(sm) = self.tree().cg().slice_memory() else { return };
        for rel in rels {
            // A slice that stopped took its runtime properties with it; setting one would
            // start it again.
            if sm.slice_usage(&rel).is_err() {
                continue;
            }
            if let Err(e) = sm.reset_memory(Some(&rel)) {
                log::warn!("io: could not take back the IOWeight= of {rel}'s slice: {e}");
            }
        }
    }

    /// `status`'s io part: how funding reaches the kernel here, and each device's
    /// scheduler and whether it honours weights (/sys/block, and io.cost.qos at the
    /// cgroup v2 root where there is one: a handful of small files, read at each status).
    pub fn io_view(&self) -> IoView {
        let v2 = ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"].into_iter().map(std::path::Path::new).find(|p| p.join("cgroup.controllers").is_file());
        let devices = allot_linux::cgroup::block::devices(std::path::Path::new("/sys"), v2)
            .into_iter()
            .map(|d| IoDevice { honours_weight: d.honours_weight(), why: d.why(), name: d.name, scheduler: d.scheduler })
            .collect();
        let st = self.io();
        let how = match (&st.io, st.slices) {
            _ if !self.cfg().io.by_share => "off: [io] by_share = false leaves I/O to the kernel".to_string(),
            (_, true) => "IOWeight= on each currency's slice (the least, 1, on the background's), through systemd".to_string(),
            (Some(io), _) if st.files.is_empty() => format!(
                "no weight file in allot's {} tree yet ({})",
                if io.version() == Version::V1 { "blkio" } else { "io" },
                if io.version() == Version::V1 { "blkio.bfq.weight or blkio.weight" } else { "io.weight or io.bfq.weight" }
            ),
            (Some(_), _) => format!("{} in allot's tree", st.files.iter().copied().collect::<Vec<_>>().join(" and ")),
            (None, false) => "no I/O controller beside allot's tree".to_string(),
        };
        let shared = self.cfg().io.by_share && (st.slices || !st.files.is_empty());
        IoView { shared, how: Some(how), failed: st.failed.clone(), devices }
    }
}

impl Daemon {
    /// A currency's memory and I/O pressure, read now: its cgroup's `memory.pressure` and
    /// `io.pressure` on cgroup v2 (allot's tree) or its slice on a systemd host; none on
    /// cgroup v1, which has no PSI per cgroup.
    pub fn currency_pressure(&self, c: &CurrencyId) -> CurrencyPressure {
        let rel = currency_rel(Class::Foreground, c);
        let p = if let Some(sm) = self.tree().cg().slice_memory().filter(|_| self.memory().slices || self.io().slices) {
            sm.slice_pressure(&rel)
        } else if let Some(m) = self.memory().mem.as_ref().filter(|m| m.version() == Version::V2) {
            allot_linux::cgroup::io::cgroup_pressure(&m.root().join(&rel))
        } else if let Some(io) = &self.io().io {
            io.pressure(&rel)
        } else {
            Default::default()
        };
        CurrencyPressure { memory: p.memory.map(stall), io: p.io.map(stall) }
    }
}

/// One PSI file's readings as a reply carries them (seconds, not µs).
fn stall(p: allot_linux::process::procfs::Psi) -> Stall {
    Stall {
        some_avg10: p.some.avg10,
        some_s: p.some.total_us as f64 / 1e6,
        full_avg10: p.full.map(|f| f.avg10),
        full_s: p.full.map(|f| f.total_us as f64 / 1e6),
    }
}

#[path = "io_bg.rs"]
mod bg;

#[cfg(test)]
#[path = "io_tests.rs"]
mod tests;
