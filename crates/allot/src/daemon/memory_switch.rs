//! `[memory] enable` and `[memory] oom` are read every step, so a reload turns memory by
//! share, or OOM by share, on or off: off takes back everything the memory step wrote,
//! on starts it afresh (the next step writes it all). The desired state is untouched: a
//! job's `--mem` cap stays in it and holds again once memory by share is on.

use super::super::core::Daemon;
use super::super::registry::currency_rel;
use super::state::{give_back, MemoryState};
use allot_linux::cgroup::memory::Memory;
use allot_linux::cgroup::Version;
use std::collections::BTreeSet;

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
            let fresh = MemoryState::new(self.tree().cg(), enable);
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
        let mut rels: BTreeSet<String> = self.memory().written.keys().map(|(rel, _)| rel.clone()).collect();
        for j in self.desired().jobs.values() {
            rels.insert(j.rel());
            rels.insert(currency_rel(j.class(), &j.currency));
        }
        let groups: BTreeSet<String> =
            self.memory().written.iter().filter(|((_, what), v)| *what == "oom_group" && v.is_some()).map(|((r, _), _)| r.clone()).collect();
        for rel in rels.iter().filter(|r| mem.has(r)) {
            if groups.contains(rel) {
                if let Err(e) = mem.set_oom_group(rel, false) {
                    log::warn!("memory: could not take back the OOM group of {rel}: {e}");
                }
            }
            let high = if mem.version() == Version::V2 { mem.set_high(rel, None) } else { Ok(()) };
            if let Err(e) = mem.clear_protection(rel).and(high).and(mem.set_max(rel, None)) {
                log::warn!("memory: could not take back the memory values of {rel}: {e}");
            }
        }
        self.memory_mut().written.clear();
    }
}
