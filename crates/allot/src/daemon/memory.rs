//! Memory by share, applied every tick (docs/memory.md): each foreground currency's
//! memory is read, `allot_model::memory::plan` divides the memory available to users by
//! funding (and a currency's share among its jobs by tickets), and the difference is
//! written: protection (v2 `memory.low`, v1 `memory.soft_limit_in_bytes`), memory caps
//! (`memory.high`, `memory.max` / `memory.limit_in_bytes`), on v1 the guard limit, and each
//! process's `oom_score_adj`. Background jobs get no protection: like their CPU, their
//! memory is what nobody else needs. On a systemd host the same plan goes to the users'
//! slices through systemd instead (memory_sd.rs).

use super::core::Daemon;
use super::oom_audit::OomWhat;
use super::registry::{currency_rel, Class, CurrencyId};
use crate::memory_view::CurrencyMemory;
use allot_linux::cgroup::memory::{self as kmem, Memory};
use allot_linux::cgroup::Version;
use allot_model::memory::{self as model, CurrencyMem, JobMem};
use state::{give_back, Raised};
use std::collections::BTreeMap;

impl Daemon {
    /// One memory step: observe, plan, write what differs.
    /// At rest (nothing ran) once a second, else every tick: memory held still changes
    /// little, and a new currency's guard is written as its directory is made.
    pub fn apply_memory(&mut self) {
        self.follow_memory_switches();
        if self.memory().mem.is_none() && !self.memory().slices {
            return;
        }
        if !self.obs().busy && self.memory().at.is_some_and(|t| t.elapsed() < std::time::Duration::from_secs(1)) {
            return;
        }
        self.memory_mut().at = Some(std::time::Instant::now());
        if self.memory().slices {
            return self.apply_slice_memory();
        }
        let Some(mem) = self.memory().mem.clone() else { return };
        let total = kmem::mem_total().unwrap_or(0);
        // In a container, its own limit above allot's root is its MemTotal (/proc/meminfo
        // is the host's), and the reserve is kept of it.
        let above = mem.bound_above();
        let total = model::least(Some(total), above.limit).unwrap_or(total);
        let reserved = model::available(total, self.cfg().memory.reserve, mem.max("").ok().flatten());
        // Foreground currencies with jobs, their jobs in a stable order.
        let mut ids: Vec<CurrencyId> = vec![];
        let mut jobs: Vec<Vec<super::registry::JobSpec>> = vec![];
        let mut specs: Vec<_> = self.desired().jobs.values().filter(|j| j.class() == Class::Foreground).collect();
        specs.sort_by_key(|j| j.rel());
        for j in specs {
            let i = match ids.iter().position(|c| *c == j.currency) {
                Some(i) => i,
                None => {
                    ids.push(j.currency.clone());
                    jobs.push(vec![]);
                    ids.len() - 1
                }
            };
            jobs[i].push(j.clone());
        }
        let ins: Vec<CurrencyMem> = ids
            .iter()
            .zip(&jobs)
            .map(|(c, js)| CurrencyMem {
                funding: self.funding_of(c),
                usage: mem.usage(&currency_rel(Class::Foreground, c)).unwrap_or(0),
                cap: self.memory_cap(c),
                jobs: js.iter().map(|j| JobMem { tickets: j.tickets.get(), cap: j.mem }).collect(),
            })
            .collect();
        // v2: no more than the machine has room for, as on a systemd host's slices
        // (memory_sd.rs): `memory.high` at what the others leave a currency then keeps it
        // from running the machine short. v1 writes hard guards from it, so it keeps the
        // reserve alone. The background sibling's charge is the users' too: it is what
        // their reclaim takes first (it has no protection), not the system's.
        let bg = self.desired().jobs.values().any(|j| j.class() == Class::Background).then(|| {
            // allot's background sibling, beside its root at the top of the hierarchy
            let (sibling, rel) = job::job_dir(&mem, &format!("{}/", super::registry::BACKGROUND));
            sibling.usage(&rel).ok()
        });
        let bg = bg.flatten();
        let users = ins.iter().map(|i| i.usage).sum::<u64>() + bg.unwrap_or(0);
        let available = match mem.version() {
            Version::V2 => model::room(reserved, users, model::least(mem.mem_available().ok(), above.headroom), self.memory().room),
            Version::V1 => reserved,
        };
        self.memory_mut().room = Some(available);
        let plan = model::plan(available, &ins);
        self.memory_mut().last = (ins.clone(), available);
        let mut seen = std::collections::HashSet::new();
        let mut rels = std::collections::HashSet::new();
        let mut raised = std::collections::HashSet::new();
        let mut view = BTreeMap::new();
        for ((c, js), (p, i)) in ids.iter().zip(&jobs).zip(plan.iter().zip(&ins)) {
            let crel = currency_rel(Class::Foreground, c);
            // v2: the controller is enabled down to each job once (its files appear then).
            for rel in js.iter().map(|j| j.rel()) {
                if mem.version() == Version::V2 && !self.memory().delegated.contains(&rel) {
                    match mem.ensure(&rel) {
                        Ok(()) => _ = self.memory_mut().delegated.insert(rel.clone()),
                        Err(e) => log::warn!("memory: could not enable the memory controller down to {rel}: {e}"),
                    }
                }
            }
            if !mem.has(&crel) {
                continue;
            }
            let v1 = mem.version() == Version::V1;
            // v1: a soft cap lowers the soft limit (reclaimed first above it); v2: memory.high.
            let soft = if v1 { p.high.map_or(p.protection, |h| h.min(p.protection)) } else { p.protection };
            self.mem_write(&mem, &crel, "protection", Some(soft));
            let limit = if v1 { Some(p.guard).filter(|g| *g < available || p.max.is_some()) } else { p.max };
            let limit = self.mem_write_limit(&mem, &crel, limit, i.usage);
            if !v1 {
                // What the others leave it (or its soft cap, if lower), as on a systemd
                // host's slices: above it a currency reclaims its own pages, before the
                // machine runs short and the kernel's reclaim takes every user's CPU.
                self.mem_write(&mem, &crel, "high", model::soft_limit(p));
            }
            rels.insert(crel.clone());
            // Processes are read only while the currency is over its share, or was.
            let scan = self.oom_scan(c, p.oom_score_adj);
            for (j, jp) in js.iter().zip(&p.jobs) {
                let rel = j.rel();
                rels.insert(rel.clone());
                self.write_job_mem(&mem, &rel, jp, j.oom_group, true, &mut rels);
                for pid in if scan { self.tree().cg().procs(&rel).unwrap_or_default() } else { vec![] } {
                    seen.insert(pid);
                    let what = self.oom_adj(pid, p.oom_score_adj);
                    self.audit_oom(c, i.usage, p.protection, what);
                }
            }
            if scan && p.oom_score_adj > model::WITHIN_SHARE_ADJ {
                raised.insert(c.clone());
            }
            view.insert(
                c.clone(),
                CurrencyMemory {
                    usage: i.usage,
                    protection: p.protection,
                    available,
                    limit,
                    cap: i.cap.map(|m| m.to_string()),
                    oom_score_adj: self.cfg().memory.oom.then_some(p.oom_score_adj),
                    oom_kills: 0,
                    pressure: Default::default(),
                },
            );
        }
        self.apply_background_job_mem(&mem, &mut rels);
        self.memory_mut().oom.retain(|pid, _| seen.contains(pid));
        self.memory_mut().foreign.retain(|pid, _| seen.contains(pid));
        self.memory_mut().written.retain(|(rel, _), _| rels.contains(rel));
        self.memory_mut().delegated.retain(|rel| rels.contains(rel));
        self.memory_mut().raised = raised;
        self.memory_mut().view = view;
    }

    /// A currency's memory as `show` reports it, its OOM kills and pressure read now.
    pub fn memory_view(&self, c: &CurrencyId) -> Option<CurrencyMemory> {
        let mut v = self.memory_kills(c)?;
        v.pressure = self.currency_pressure(c);
        Some(v)
    }

    /// A currency's memory from the last step, its OOM kills read now (not its pressure).
    pub(super) fn memory_kills(&self, c: &CurrencyId) -> Option<CurrencyMemory> {
        let mut v = self.memory().view.get(c)?.clone();
        if let Some(sm) = self.tree().cg().slice_memory().filter(|_| self.memory().slices) {
            v.oom_kills = sm.slice_oom_kills(&currency_rel(Class::Foreground, c)).unwrap_or(0);
        }
        if let Some(mem) = &self.memory().mem {
            v.oom_kills = mem.oom_kills(&currency_rel(Class::Foreground, c)).unwrap_or(0) + self.memory().retired_kills.get(c).copied().unwrap_or(0);
        }
        Some(v)
    }

    /// A currency's directory was just made, before its first process moves in: on cgroup v1
    /// its guard is written now, not at the next tick, or a fast-growing first process
    /// (a hog) would meet allot's root's limit first, which reclaims every currency alike.
    pub fn guard_fresh_currency(&mut self, class: Class, c: &CurrencyId) {
        let Some(mem) = self.memory().mem.clone() else { return };
        if mem.version() != Version::V1 || class != Class::Foreground {
            return;
        }
        let (mut ins, available) = self.memory().last.clone();
        if available == 0 {
            return;
        }
        ins.push(CurrencyMem { funding: self.funding_of(c), usage: 0, cap: self.memory_cap(c), jobs: vec![JobMem { tickets: 100, cap: None }] });
        let p = model::plan(available, &ins).pop().expect("one plan per currency");
        let rel = currency_rel(Class::Foreground, c);
        if ins.len() > 1 || p.max.is_some() {
            self.mem_write_limit(&mem, &rel, Some(p.guard), 0);
        }
    }

    /// A job's directory is about to go: on cgroup v1, where the kernel counts an OOM kill
    /// only in the killed process's own group, its count is kept for its currency.
    pub fn retire_memory(&mut self, rel: &str, c: &CurrencyId) {
        let Some(mem) = &self.memory().mem else { return };
        if mem.version() == Version::V1 && mem.has(rel) {
            *self.memory_mut().retired_kills.entry(c.clone()).or_default() += mem.oom_kills(rel).unwrap_or(0);
        }
    }

    /// A currency's memory cap: its `[funding]` entry's `mem`, by currency name or uid.
    fn memory_cap(&self, c: &CurrencyId) -> Option<model::MemCap> {
        let by = |k: &str| self.cfg().funding.get(k).and_then(|e| e.mem);
        match c {
            CurrencyId::Named(n) => by(n),
            // The name as remembered for a minute (trust/names.rs): this runs every tick for
            // every currency, and an NSS lookup may wait on a directory server.
            CurrencyId::User(uid) => by(&super::trust::user_label(*uid)).or_else(|| by(&uid.to_string())),
        }
    }

    pub(super) fn mem_write(&mut self, mem: &Memory, rel: &str, what: &'static str, v: Option<u64>) {
        let key = (rel.to_string(), what);
        if self.memory().written.get(&key) == Some(&v) {
            return;
        }
        let r = match what {
            "protection" => mem.set_protection(rel, v.unwrap_or(0)),
            "high" => mem.set_high(rel, v),
            "oom_group" => mem.set_oom_group(rel, v.is_some()),
            _ => mem.set_max(rel, v),
        };
        match r {
            Ok(()) => {
                self.memory_mut().written.insert(key, v);
            }
            Err(e) => log::warn!("memory: could not set {what} of {rel} to {v:?}: {e}"),
        }
    }

    /// Writes a hard limit; a limit the kernel cannot reclaim down to (v1: EBUSY, memory
    /// that cannot be reclaimed without swap) is written at the usage instead, so the
    /// currency cannot grow, and tried again next tick. Returns what is in force.
    pub(super) fn mem_write_limit(&mut self, mem: &Memory, rel: &str, limit: Option<u64>, usage: u64) -> Option<u64> {
        // Whole MiB: the guard moves with every page others touch; a write per MiB is plenty.
        let limit = limit.map(|l| l & !((1 << 20) - 1));
        let key = (rel.to_string(), "max");
        if self.memory().written.get(&key) == Some(&limit) {
            return limit;
        }
        match mem.set_max(rel, limit) {
            Ok(()) => {
                self.memory_mut().written.insert(key, limit);
                limit
            }
            Err(e) => {
                log::info!("memory: {rel} could not be brought down to {limit:?} yet ({e}); held at its usage, {usage}");
                let hold = limit.map(|l| l.max(usage.next_multiple_of(1 << 20)));
                if mem.set_max(rel, hold).is_ok() {
                    self.memory_mut().written.remove(&key);
                }
                hold
            }
        }
    }

    /// Whether a currency's processes are read for their `oom_score_adj` this step: only
    /// while it is over its share (`adj` raised), or was at the last step (to give back).
    pub(super) fn oom_scan(&self, c: &CurrencyId, adj: i16) -> bool {
        self.cfg().memory.oom && (adj > model::WITHIN_SHARE_ADJ || self.memory().raised.contains(c))
    }

    /// Keeps one process's `oom_score_adj` in step with its currency's: raised while the
    /// currency is over its share (re-asserted every tick, since its owner may write a
    /// lower value back), given back when it is within its share. allot never lowers a
    /// value it did not write: a process someone set below 0 (an administrator's choice)
    /// is left alone, one set above the currency's keeps its own. Returns what it changed
    /// (for the audit trail, memory_audit.rs).
    fn oom_adj(&mut self, pid: i32, adj: i16) -> Option<OomWhat> {
        // Everything below is read and written through the process's own /proc directory,
        // so a pid reused by another process between the listing and the write is never
        // touched; an entry whose start time no longer matches is another process's.
        let dir = allot_linux::process::procfs::ProcDir::open(pid).ok();
        let start = dir.as_ref().map(|d| d.start());
        if self.memory().oom.get(&pid).is_some_and(|r| Some(r.start) != start) {
            self.memory_mut().oom.remove(&pid);
        }
        if self.memory().foreign.get(&pid).is_some_and(|s| Some(*s) != start) {
            self.memory_mut().foreign.remove(&pid);
        }
        if adj <= model::WITHIN_SHARE_ADJ {
            let r = self.memory_mut().oom.remove(&pid)?;
            let from = dir.as_ref().filter(|d| d.start() == r.start).and_then(|d| d.oom_score_adj().ok());
            give_back(pid, r);
            return from.filter(|f| *f != r.orig).map(|from| OomWhat::GivenBack { pid, from, to: r.orig });
        }
        let d = dir?;
        if self.memory().foreign.contains_key(&pid) {
            return None;
        }
        let now = d.oom_score_adj().ok()?;
        let orig = match self.memory().oom.get(&pid) {
            Some(r) => r.orig,
            None if now < 0 => {
                self.memory_mut().foreign.insert(pid, d.start());
                return None;
            }
            None => now,
        };
        let want = adj.max(orig);
        let mut changed = None;
        if now != want {
            if let Err(e) = d.set_oom_score_adj(want) {
                log::warn!("memory: could not set oom_score_adj of {pid} to {want}: {e}");
                return None;
            }
            changed = Some(OomWhat::Raised { pid, from: now, to: want });
        }
        self.memory_mut().oom.insert(pid, Raised { start: d.start(), orig });
        changed
    }

    /// Takes back what is dynamic: every `oom_score_adj` allot wrote goes back to what the
    /// process had, every guard limit to the currency's hard cap (or none), and on v2
    /// every currency's `memory.high` (what the others left it) to its soft cap (or none).
    pub fn undo_memory(&mut self) {
        for (pid, r) in std::mem::take(&mut self.memory_mut().oom) {
            give_back(pid, r);
        }
        self.undo_slice_memory();
        let Some(mem) = self.memory().mem.clone() else { return };
        let caps: Vec<(String, Option<model::MemCap>)> =
            self.memory().view.keys().map(|c| (currency_rel(Class::Foreground, c), self.memory_cap(c))).collect();
        for (rel, cap) in caps {
            if mem.has(&rel) {
                let (soft, hard) = model::split_cap(cap);
                let _ = mem.set_max(&rel, hard);
                if mem.version() == Version::V2 {
                    let _ = mem.set_high(&rel, soft);
                }
            }
        }
        self.memory_mut().written.clear();
    }
}

#[path = "memory_sd.rs"]
mod sd;

#[path = "memory_state.rs"]
pub mod state;

#[path = "memory_switch.rs"]
mod switch;

#[path = "memory_audit.rs"]
mod audit;

#[path = "memory_job.rs"]
mod job;

#[path = "memory_job_sd.rs"]
mod job_sd;

#[cfg(test)]
#[path = "memory_job_tests.rs"]
mod job_tests;

#[cfg(test)]
#[path = "memory_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "memory_job_sd_tests.rs"]
mod job_sd_tests;
