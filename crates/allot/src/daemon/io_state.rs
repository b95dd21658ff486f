//! What the I/O step knows and last wrote (I/O by share, io.rs): a leaf, so the daemon's
//! core holds it without importing the step.

use allot_linux::cgroup::io::{Io, WeightFile};
use std::collections::{BTreeSet, HashMap};

/// The I/O step's state.
#[derive(Debug, Default)]
pub struct IoState {
    /// allot's tree in the I/O controller (None: no controller beside it, or a systemd host).
    pub io: Option<Io>,
    /// A systemd host: a currency's I/O weight is its slice's `IOWeight=`.
    pub slices: bool,
    /// Per directory (raw tree) or currency path (slices), the units last written.
    pub written: HashMap<String, u32>,
    /// cgroup v2: directories the io controller was delegated down to.
    pub delegated: BTreeSet<String>,
    /// Every weight file written since start (what `status` says was done).
    pub files: BTreeSet<&'static str>,
    /// The last write that failed, in words (None: none failed).
    pub failed: Option<String>,
}

impl IoState {
    /// The I/O controller for `cg`'s tree (or its slices, on a systemd host).
    pub fn new(cg: &dyn allot_linux::cgroup::CpuController) -> Self {
        IoState { io: if cg.root().is_dir() { Io::for_tree(cg) } else { None }, slices: cg.slice_memory().is_some(), ..Default::default() }
    }

    /// Records a weight file written (its name under the controller's version).
    pub fn wrote(&mut self, files: &[WeightFile]) {
        let Some(io) = &self.io else { return };
        let v = io.version();
        self.files.extend(files.iter().filter_map(|f| f.name(v)));
    }
}
