//! The memory step's state (memory.rs): what it knows and last wrote. A leaf the core
//! holds without importing the memory step itself.

use super::super::registry::CurrencyId;
use crate::memory_view::CurrencyMemory;
use allot_linux::cgroup::memory::Memory;
use allot_linux::cgroup::Version;
use allot_model::memory::CurrencyMem;
use std::collections::{BTreeMap, HashMap};

/// What the memory step knows and last wrote.
#[derive(Debug, Default)]
pub struct MemoryState {
    /// allot's tree in the memory controller (None: no controller, a systemd host, or off).
    pub mem: Option<Memory>,
    /// Per currency, what `show` reports.
    pub view: BTreeMap<CurrencyId, CurrencyMemory>,
    /// Per directory and file, the value last written (None: unlimited).
    pub(super) written: HashMap<(String, &'static str), Option<u64>>,
    /// A systemd host: per job directory and file, the kernel's refusal of the last write
    /// (a scope that does not delegate memory), for `explain`; gone once a write succeeds.
    pub(in crate::daemon) refused: HashMap<(String, &'static str), String>,
    /// Per process allot raised: its identity and the `oom_score_adj` it had before.
    pub(super) oom: HashMap<i32, Raised>,
    /// The last step's inputs and available memory (for a currency made between ticks).
    pub(super) last: (Vec<CurrencyMem>, u64),
    /// Currencies whose processes' `oom_score_adj` allot raised (read again until given back).
    pub(super) raised: std::collections::HashSet<CurrencyId>,
    /// cgroup v2: job directories the memory controller was delegated down to.
    pub(super) delegated: std::collections::HashSet<String>,
    /// A systemd host and cgroup v2: the memory available to users the last step used,
    /// bounded by what the machine has room for ([`allot_model::memory::room`]: kept while it still fits).
    pub(super) room: Option<u64>,
    /// When the last step ran.
    pub(super) at: Option<std::time::Instant>,
    /// cgroup v1 per currency: OOM kills counted in its jobs that are gone.
    pub(super) retired_kills: HashMap<CurrencyId, u64>,
    /// Processes someone else set below 0 (left alone), by pid and start time.
    pub(super) foreign: HashMap<i32, u64>,
    /// A systemd host: memory is shared on the currencies' slices, through systemd (memory_sd.rs).
    pub slices: bool,
    /// There, whether a slice's protection reaches the scopes in it (memory_recursiveprot).
    pub recursive: bool,
    /// `[memory] enable` when this state was made: a reload that changes it makes the
    /// state again (memory_switch.rs).
    pub(super) enabled: bool,
    /// Off: whatever an earlier run or setting left in allot's memory files was taken back.
    pub(super) cleared: bool,
}

/// A process whose `oom_score_adj` allot raised: the pid with its start time (who it is),
/// and the value to give back, written only to that same process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Raised {
    pub(super) start: u64,
    pub(super) orig: i16,
}

/// Gives a raised process its own `oom_score_adj` back, if it is still the process allot
/// raised: a pid that now names another process (the raised one exited and its pid was
/// reused) is written nothing.
pub(super) fn give_back(pid: i32, r: Raised) {
    if let Some(d) = allot_linux::process::procfs::ProcDir::open_if(pid, r.start) {
        let _ = d.set_oom_score_adj(r.orig);
    }
}

impl MemoryState {
    /// The memory controller for `cg`'s tree, when memory by share is on.
    pub fn new(cg: &dyn allot_linux::cgroup::CpuController, enable: bool) -> Self {
        let mem = if enable && cg.root().is_dir() { Memory::for_tree(cg) } else { None };
        let slices = enable && cg.slice_memory().is_some();
        let recursive = slices && cg.slice_memory().is_some_and(|s| s.recursive_protection());
        MemoryState { mem, slices, recursive, enabled: enable, ..Default::default() }
    }

    /// What is short of memory by share here, in words (`status`'s degraded lines): None
    /// on cgroup v2 without systemd, where `memory.low` does all of it.
    pub fn degraded(&self, enable: bool) -> Option<String> {
        match (&self.mem, enable) {
            (_, false) => Some("memory: not shared by funding ([memory] enable = false)".into()),
            (None, true) if self.slices && self.recursive => Some("memory: shared per user's slice through systemd (MemoryLow=, MemoryHigh=, MemoryMax=); a currency's jobs share its protection with its login sessions, not divided by tickets".into()),
            (None, true) if self.slices => Some("memory: shared per user's slice through systemd, but the cgroup2 mount lacks memory_recursiveprot (systemd 248 mounts it so on Linux 5.7 or later), so a slice's MemoryLow= does not reach the sessions and jobs in it: protection does nothing here; memory caps (MemoryHigh=, MemoryMax=) and OOM by share work".into()),
            (None, true) => Some("memory: not shared by funding: no memory controller beside allot's tree".into()),
            (Some(m), true) if m.version() == Version::V1 => Some("memory: cgroup v1 has no memory.low and its soft limits act only when the whole machine is short; allot keeps each currency out of what others hold within their share with hard limits (memory.limit_in_bytes) kept in step with what each holds".into()),
            (Some(_), true) => None,
        }
    }
}
