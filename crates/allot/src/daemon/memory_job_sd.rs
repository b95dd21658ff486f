//! A job's own memory cap on a systemd host (`allot run --mem 4G!`, docs/memory.md): the
//! job's directory inside allot's scope, which delegates the memory controller, takes
//! `memory.max` (hard) or `memory.high` (soft) through allot-linux's `SliceMemory`
//! (job_memory.rs there: a job is no unit of systemd's, so no property is sent; no file of
//! a cgroup systemd made is written). Written when a request sets or clears the cap and
//! kept by the memory step; taken back by `--release` from jobs that outlive allot. A
//! job's OOM group (`--oom-group`) is its `memory.oom.group` there, kept the same way.

use super::super::core::Daemon;
use super::super::registry::JobSpec;
use allot_model::memory::split_cap;
use std::collections::HashSet;

impl Daemon {
    /// Every job's cap on a systemd host, written where it differs from what was (the
    /// step's cache, by the job's path); a job whose cap went is given no limit once.
    pub(super) fn apply_slice_job_mem(&mut self) {
        let specs: Vec<JobSpec> = self.desired().jobs.values().cloned().collect();
        let mut rels = HashSet::new();
        for j in &specs {
            let rel = j.rel();
            let (high, max) = split_cap(j.mem);
            let was = |what| self.memory().written.get(&(rel.clone(), what)).copied();
            let never = j.mem.is_none() && was("high").flatten().is_none() && was("max").flatten().is_none();
            let whole = j.oom_group.then_some(1);
            let group = (j.oom_group || was("oom_group").flatten().is_some()) && was("oom_group") != Some(whole);
            if !never && (was("high") != Some(high) || was("max") != Some(max)) {
                self.send_job_mem(&rel, high, max);
            }
            if group {
                self.send_job_oom_group(&rel, j.oom_group);
            }
            rels.insert(rel);
        }
        // A job that is gone took its directory, and its cap, with it.
        self.memory_mut().written.retain(|(r, _), _| rels.contains(r));
        self.memory_mut().refused.retain(|(r, _), _| rels.contains(r));
    }

    /// A request set or cleared these jobs' caps: written now, before `allot run`'s
    /// command starts.
    pub(super) fn apply_slice_job_mem_now(&mut self, specs: &[JobSpec]) {
        for j in specs {
            let (high, max) = split_cap(j.mem);
            self.send_job_mem(&j.rel(), high, max);
            if j.oom_group || self.memory().written.get(&(j.rel(), "oom_group")).is_some_and(|w| w.is_some()) {
                self.send_job_oom_group(&j.rel(), j.oom_group);
            }
        }
    }

    fn send_job_oom_group(&mut self, rel: &str, whole: bool) {
        let Some(sm) = self.tree().cg().slice_memory() else { return };
        let r = sm.set_job_oom_group(rel, whole);
        if let Err(e) = &r {
            log::warn!("memory: could not set the OOM group of job {rel}: {e}");
        }
        self.note_refusal(rel, "oom_group", r);
        self.memory_mut().written.insert((rel.to_string(), "oom_group"), whole.then_some(1));
    }

    fn send_job_mem(&mut self, rel: &str, high: Option<u64>, max: Option<u64>) {
        let Some(sm) = self.tree().cg().slice_memory() else { return };
        let r = sm.set_job_memory(rel, high, max);
        if let Err(e) = &r {
            log::warn!("memory: could not set the memory cap of job {rel}: {e}");
        }
        self.note_refusal(rel, "max", r);
        // Kept as written either way: a scope that cannot take it is not asked every tick.
        let w = &mut self.memory_mut().written;
        w.insert((rel.to_string(), "high"), high);
        w.insert((rel.to_string(), "max"), max);
    }

    /// Keeps the kernel's refusal of a job's file for `explain` (kept as written either
    /// way, so not tried every tick), or forgets an earlier one.
    fn note_refusal(&mut self, rel: &str, what: &'static str, r: allot_linux::Result<()>) {
        let key = (rel.to_string(), what);
        match r {
            Ok(()) => self.memory_mut().refused.remove(&key),
            Err(e) => self.memory_mut().refused.insert(key, e.to_string()),
        };
    }

    /// `--release`: a job that runs on after allot is removed keeps no cap of allot's.
    /// The jobs are the state file's (`--release` is a daemon of its own, which has
    /// written nothing yet) and whatever this one wrote.
    pub(in crate::daemon) fn release_slice_job_mem(&mut self) {
        let w = &self.memory().written;
        let mut rels: HashSet<String> = w.iter().filter(|((_, what), v)| v.is_some() && *what != "oom_group").map(|((r, _), _)| r.clone()).collect();
        rels.extend(self.desired().jobs.values().filter(|j| j.mem.is_some()).map(|j| j.rel()));
        let mut groups: HashSet<String> =
            w.iter().filter(|((_, what), v)| v.is_some() && *what == "oom_group").map(|((r, _), _)| r.clone()).collect();
        groups.extend(self.desired().jobs.values().filter(|j| j.oom_group).map(|j| j.rel()));
        self.memory_mut().refused.clear();
        let Some(sm) = self.tree().cg().slice_memory() else { return };
        for rel in rels {
            if let Err(e) = sm.set_job_memory(&rel, None, None) {
                log::info!("memory: could not take back the memory cap of job {rel}: {e}");
            }
        }
        for rel in groups {
            if let Err(e) = sm.set_job_oom_group(&rel, false) {
                log::info!("memory: could not take back the OOM group of job {rel}: {e}");
            }
        }
        self.memory_mut().written.clear();
    }
}
