//! A job's own memory cap (`allot run --mem 4G!`, `allot set --mem`; docs/memory.md):
//! refused where it cannot be applied, written on the job's directory with the rest of
//! the memory step (memory.rs) and at once when a request sets or clears it (on a systemd
//! host in the job's directory inside allot's scope, memory_job_sd.rs). The
//! decision of what each kernel gets is the model's (`allot_model::memory::job_limits`).

use super::super::core::Daemon;
use super::super::registry::{Class, JobSpec, BACKGROUND};
use crate::proto::{Reason, Refusal};
use allot_linux::cgroup::memory::Memory;
use allot_linux::cgroup::Version;
use allot_model::memory::{job_limits, split_cap, JobPlan};
use std::collections::HashSet;

impl Daemon {
    /// Whether a job's memory cap can be applied on this host; the refusal says why not and
    /// what does work here.
    pub(in crate::daemon) fn check_job_mem(&self) -> Result<(), Refusal> {
        if self.memory().mem.is_some() || self.memory().slices {
            return Ok(());
        }
        Err(Refusal::invalid(if !self.cfg().memory.enable {
            "a job's memory cap (--mem) needs memory by share, which the config turns off ([memory] enable = false)".to_string()
        } else {
            "a job's memory cap (--mem) needs the memory controller beside allot's tree, and this host has none mounted".to_string()
        }))
    }

    /// Whether a job's OOM group (`--oom-group`) can be applied on this host: cgroup v2's
    /// `memory.oom.group` in the job's own directory, on allot's own tree or inside its
    /// scope on a systemd host; the refusal says why not.
    pub(in crate::daemon) fn check_oom_group(&self) -> Result<(), Refusal> {
        match self.memory().mem.as_ref().map(|m| m.version()) {
            Some(Version::V2) => return Ok(()),
            None if self.memory().slices => return Ok(()),
            Some(Version::V1) => {
                return Err(Refusal::invalid(
                    "a job's OOM group (--oom-group) needs cgroup v2's memory.oom.group; this host's memory controller is cgroup v1, where the OOM killer takes one process at a time",
                ))
            }
            None => {}
        }
        Err(Refusal::invalid(if !self.cfg().memory.enable {
            "a job's OOM group (--oom-group) is written with memory by share, which the config turns off ([memory] enable = false)".to_string()
        } else {
            "a job's OOM group (--oom-group) needs cgroup v2's memory controller beside allot's tree, and this host has none mounted".to_string()
        }))
    }

    /// Writes one job's plan to its directory: protection, and its own cap (v2
    /// `memory.high`/`memory.max`, v1 the soft limit and `memory.limit_in_bytes`), and on
    /// v2 its OOM group (`whole`). Only what changed is written. `rels` collects the
    /// directories written (kept in the cache).
    pub(super) fn write_job_mem(&mut self, mem: &Memory, rel: &str, jp: &JobPlan, whole: bool, protect: bool, rels: &mut HashSet<String>) {
        if !mem.has(rel) {
            return;
        }
        rels.insert(rel.to_string());
        let v1 = mem.version() == Version::V1;
        let l = job_limits(jp, v1);
        if protect {
            self.mem_write(mem, rel, "protection", Some(l.protection));
        }
        if !v1 && self.to_write(rel, "high", l.high) {
            self.mem_write(mem, rel, "high", l.high);
        }
        let group = whole.then_some(1);
        if !v1 && self.to_write(rel, "oom_group", group) {
            self.mem_write(mem, rel, "oom_group", group);
        }
        self.write_job_max(mem, rel, l.max);
    }

    /// Whether a job's cap file is to be written: a value, or no limit over one written
    /// before. A job never capped keeps the kernel's default without a write.
    fn to_write(&self, rel: &str, what: &'static str, v: Option<u64>) -> bool {
        v.is_some() || self.memory().written.get(&(rel.to_string(), what)).is_some_and(|w| w.is_some())
    }

    /// A job's hard limit, read against its usage only when it is to change (a limit below
    /// what the job holds and cannot give back is held at its usage, memory.rs).
    fn write_job_max(&mut self, mem: &Memory, rel: &str, max: Option<u64>) {
        let want = max.map(|l| l & !((1 << 20) - 1));
        if !self.to_write(rel, "max", want) || self.memory().written.get(&(rel.to_string(), "max")) == Some(&want) {
            return;
        }
        let usage = mem.usage(rel).unwrap_or(0);
        self.mem_write_limit(mem, rel, max, usage);
    }

    /// Background jobs hold no protection (their memory is what nobody else needs), but a
    /// cap of their own is theirs whatever their class.
    pub(super) fn apply_background_job_mem(&mut self, mem: &Memory, rels: &mut HashSet<String>) {
        let capped: Vec<JobSpec> =
            self.desired().jobs.values().filter(|j| j.class() == Class::Background && (j.mem.is_some() || j.oom_group)).cloned().collect();
        for j in capped {
            let (high, max) = split_cap(j.mem);
            let (m, rel) = job_dir(mem, &j.rel());
            if m.version() == Version::V2 && !self.memory().delegated.contains(&rel) && m.ensure(&rel).is_ok() {
                self.memory_mut().delegated.insert(rel.clone());
            }
            self.write_job_mem(&m, &rel, &JobPlan { protection: 0, high, max }, j.oom_group, false, rels);
        }
    }

    /// A request set or cleared jobs' memory caps: written now, not at the next tick, so a
    /// job that starts growing at once meets its cap (the protection and v1's soft limit
    /// follow at the next tick).
    pub(in crate::daemon) fn apply_job_mem_now(&mut self, specs: &[JobSpec]) {
        if self.memory().slices {
            return self.apply_slice_job_mem_now(specs);
        }
        let Some(top) = self.memory().mem.clone() else { return };
        for j in specs {
            let (mem, rel) = job_dir(&top, &j.rel());
            // Written whatever the step wrote before: a job that changed class has a new
            // directory (the same path below the other sibling), and a cap taken away is
            // the kernel's default written back.
            self.memory_mut().written.retain(|(r, _), _| *r != rel);
            if mem.version() == Version::V2 && !self.memory().delegated.contains(&rel) && mem.ensure(&rel).is_ok() {
                self.memory_mut().delegated.insert(rel.clone());
            }
            if !mem.has(&rel) {
                continue;
            }
            let (high, max) = split_cap(j.mem);
            if mem.version() == Version::V2 {
                self.mem_write(&mem, &rel, "high", high);
                self.mem_write(&mem, &rel, "oom_group", j.oom_group.then_some(1));
            }
            let usage = mem.usage(&rel).unwrap_or(0);
            self.mem_write_limit(&mem, &rel, max, usage);
        }
    }

    /// `explain`'s reason for a job's OOM group (None: the kernel's default); set but not
    /// in force here (memory by share turned off since), it says why.
    pub(in crate::daemon) fn oom_group_reason(&self, j: &JobSpec) -> Option<Reason> {
        if !j.oom_group {
            return None;
        }
        let refused = self.memory().refused.get(&(j.rel(), "oom_group"));
        let (on, because) = match (self.check_oom_group(), refused) {
            (Err(e), _) => (false, format!("set (--oom-group) but not in force: {}", e.message)),
            (Ok(()), Some(e)) => (false, format!("set (--oom-group) but not in force: it could not be written: {e}")),
            (Ok(()), None) => {
                (true, "an OOM kill in the job kills all of its processes, not one (memory.oom.group, allot run --oom-group)".to_string())
            }
        };
        Some(Reason { state: "OOM group".into(), on, since_s: None, because })
    }

    /// `explain`'s reason for a job's memory cap, with what the job holds now and the file
    /// that enforces it on this kernel (None: no cap).
    pub(in crate::daemon) fn mem_reason(&self, j: &JobSpec) -> Option<Reason> {
        let cap = j.mem?;
        let mem = self.memory().mem.as_ref();
        let usage = match (mem, self.tree().cg().slice_memory().filter(|_| self.memory().slices)) {
            (Some(m), _) => {
                let (m, rel) = job_dir(m, &j.rel());
                m.usage(&rel).ok()
            }
            (None, Some(sm)) => sm.job_usage(&j.rel()).ok(),
            _ => None,
        };
        let held = usage.map(|u| format!("; it holds {} now", allot_model::memory::human_size(u))).unwrap_or_default();
        let file = match (mem.map(|m| m.version()), cap.hard) {
            (Some(Version::V1), true) => "memory.limit_in_bytes",
            (Some(Version::V1), false) => {
                "memory.soft_limit_in_bytes (cgroup v1 has no memory.high: reclaimed first above it when the machine runs short)"
            }
            (_, true) => "memory.max",
            (_, false) => "memory.high",
        };
        let what = if cap.hard {
            "never more: above it the kernel reclaims the job's memory, then its OOM killer acts inside the job"
        } else {
            "above it the kernel throttles the job's allocations and reclaims its memory"
        };
        let kind = if cap.hard { "hard" } else { "soft" };
        if let Some(e) = self.memory().refused.get(&(j.rel(), "max")) {
            let because = format!("{kind} memory cap {cap} set but not in force: it could not be written: {e}");
            return Some(Reason { state: "memory cap".into(), on: false, since_s: None, because });
        }
        Some(Reason { state: "memory cap".into(), on: true, since_s: None, because: format!("{kind} memory cap {cap}: {what} ({file}){held}") })
    }
}

/// A job's directory in the memory hierarchy: a foreground job's is under allot's root; a
/// background job's is under allot's background sibling (`<root>-background`, beside the
/// root at the top of the hierarchy), which the memory hierarchy mirrors as the cpu one
/// has it, so `background/C/J` is `C/J` there.
pub(super) fn job_dir(mem: &Memory, rel: &str) -> (Memory, String) {
    let bg = rel.strip_prefix(BACKGROUND).and_then(|r| r.strip_prefix('/'));
    match (bg, mem.root().parent(), mem.root().file_name()) {
        (Some(r), Some(mount), Some(name)) => {
            let sibling = mount.join(format!("{}-{BACKGROUND}", name.to_string_lossy()));
            (Memory::at(mem.version(), mount.to_path_buf(), sibling), r.to_string())
        }
        _ => (mem.clone(), rel.to_string()),
    }
}
