//! `[memory] enable` and `[memory] oom` are read every step, so a reload turns memory by
//! share, or OOM by share, on or off: off takes back everything the memory step wrote,
//! on starts it afresh (the next step writes it all). The desired state is untouched: a
//! job's `--mem` cap stays in it and holds again once memory by share is on.

use super::super::core::Daemon;
use super::super::registry::{currency_rel, BACKGROUND};
use super::job::job_dir;
use super::state::{give_back, MemoryState};
use allot_linux::cgroup::memory::Memory;
use allot_linux::cgroup::Version;
use std::collections::{BTreeMap, BTreeSet};

impl Daemon {
    /// Follows the config's memory switches (at the start of every memory step).
    pub(super) fn follow_memory_switches(&mut self) {
        let (enable, oom) = (self.cfg().memory.enable, self.cfg().memory.oom);
        if !(enable && oom) {
            // Off, every process allot raised gets its own `oom_score_adj` back (the step
            // reads no process while OOM by share is off, so none would be later).
            for (pid, r) in std::mem::take(&mut self.memory_mut().oom) {
                give_back(pid, r);
            }
            self.memory_mut().raised.clear();
        }
        if enable != self.memory().enabled {
            if !enable {
                self.take_back_memory();
            }
            let mut fresh = MemoryState::new(self.tree().cg(), enable);
            fresh.cleared = !enable;
            *self.memory_mut() = fresh;
            log::info!("memory by share turned {} by the config", if enable { "on" } else { "off" });
        }
        if !enable && !self.memory().cleared {
            // At start too: a run that stopped without its undo (a crash) or with memory
            // by share on leaves its values in allot's own directories.
            self.memory_mut().cleared = true;
            self.take_back_memory();
        }
    }

    /// Takes back every memory value of allot's: on its own tree, each currency's and
    /// job's protection, `memory.high` and limit go back to the kernel's defaults (the
    /// directories the step wrote, and every one of the desired state's jobs and
    /// currencies, which a run before this one may have written); on a systemd host,
    /// what this run sent to the users' slices and the jobs' caps in allot's scopes.
    fn take_back_memory(&mut self) {
        self.undo_slice_memory();
        self.release_slice_job_mem();
        let mut capped: BTreeSet<String> = self.desired().jobs.values().filter(|j| j.mem.is_some()).map(|j| format!("job {}", j.rel())).collect();
        let currencies: BTreeSet<_> = self.desired().jobs.values().map(|j| j.currency.clone()).collect();
        capped.extend(currencies.into_iter().filter(|c| self.memory_cap(c).is_some()).map(|c| format!("currency {}", c.dir())));
        if !capped.is_empty() && !self.cfg().memory.enable {
            let capped: Vec<String> = capped.into_iter().collect();
            log::warn!("memory by share is off: the memory caps of {} no longer hold (they hold again when it is on)", capped.join(", "));
        }
        let Some(mem) = self.memory().mem.clone().or_else(|| Memory::for_tree(self.tree().cg())) else {
            self.memory_mut().written.clear();
            return;
        };
        // Each directory where it is: a background job's and currency's in allot's
        // background sibling (job_dir); a path the step wrote (its cache's key, which
        // job_dir already resolved) may be in either.
        let mut rels: BTreeSet<String> = self.desired().jobs.values().flat_map(|j| [j.rel(), currency_rel(j.class(), &j.currency)]).collect();
        for (rel, _) in self.memory().written.keys() {
            rels.insert(rel.clone());
            rels.insert(format!("{BACKGROUND}/{rel}"));
        }
        let mut dirs: BTreeMap<std::path::PathBuf, (Memory, String)> = BTreeMap::new();
        for rel in &rels {
            let (m, r) = job_dir(&mem, rel);
            dirs.insert(m.root().join(&r), (m, r));
        }
        for (m, rel) in dirs.into_values().filter(|(m, r)| !r.is_empty() && m.has(r)) {
            let v2 = m.version() == Version::V2;
            // Each file on its own: one that cannot be written leaves the others to be.
            let group = v2 && m.root().join(&rel).join("memory.oom.group").exists();
            let writes = [
                m.clear_protection(&rel),
                if v2 { m.set_high(&rel, None) } else { Ok(()) },
                m.set_max(&rel, None),
                if group { m.set_oom_group(&rel, false) } else { Ok(()) },
            ];
            for e in writes.into_iter().filter_map(Result::err) {
                log::warn!("memory: could not take back a memory value of {}: {e}", m.root().join(&rel).display());
            }
        }
        self.memory_mut().written.clear();
    }
}
