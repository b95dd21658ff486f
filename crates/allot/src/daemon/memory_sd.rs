//! Memory by share on a systemd host (docs/memory.md): a currency is its slice
//! (`user-UID.slice`, a named currency's slice beside it), so each slice of a currency
//! with jobs, and each logged-in human user's slice, gets its funded share of the memory
//! available to users as `MemoryLow=`, `MemoryHigh=` at what the others leave it (their
//! use within their shares: [`model::soft_limit`]) or its soft cap, and its hard cap as
//! `MemoryMax=`, all through systemd's API (allot-linux's `SliceMemory`: only changed values, at most
//! once a second per property of a slice). The plan reads each slice's `memory.current`;
//! the memory available to users is bounded by `user.slice`'s own limit, and `user.slice`
//! carries the sum of the protections (a protection acts only under ancestors that carry
//! one). Within a slice the jobs share the protection with the user's login sessions:
//! it is not divided by tickets here. OOM by share ranks every process in an over-share
//! currency's slice, its login sessions' too: they are the user's.

use crate::daemon::core::Daemon;
use crate::daemon::registry::{currency_rel, Class, CurrencyId, BACKGROUND};
use crate::memory_view::CurrencyMemory;
use allot_linux::cgroup::systemd::SliceProp;
use allot_model::memory::{self as model, CurrencyMem};
use std::collections::{BTreeMap, HashSet};

impl Daemon {
    /// The currencies whose slice memory is shared: foreground currencies with jobs, then
    /// logged-in human users without (their slice exists from their first login).
    pub(in crate::daemon) fn slice_currencies(&self) -> Vec<CurrencyId> {
        let mut ids: Vec<CurrencyId> = self.desired().jobs.values().filter(|j| j.class() == Class::Foreground).map(|j| j.currency.clone()).collect();
        ids.sort();
        ids.dedup();
        for uid in self.backend().logged_in(self.tree().cg()) {
            let c = CurrencyId::User(uid);
            if self.placement().is_human(uid) && !ids.contains(&c) {
                ids.push(c);
            }
        }
        ids
    }

    /// One memory step on a systemd host: read the slices, plan, send what differs.
    pub(super) fn apply_slice_memory(&mut self) {
        let ids = self.slice_currencies();
        let Some(sm) = self.tree().cg().slice_memory() else { return };
        let total = allot_linux::cgroup::memory::mem_total().unwrap_or(0);
        // A slice's memory.current, or None: it does not run.
        let usages: Vec<Option<u64>> = ids.iter().map(|c| sm.slice_usage(&currency_rel(Class::Foreground, c)).ok()).collect();
        // MemTotal less the reserve, and no more than the machine has room for: what the
        // system really uses (the kernel's MemAvailable beside the users' charges), so a
        // currency held at what the others leave it does not run the machine short. The
        // background slice's charge is the users' too: it is what their reclaim takes
        // first (it has no protection), not the system's.
        // In a container, its own limit above user.slice is its MemTotal (/proc/meminfo is
        // the host's), and the reserve is kept of it.
        let above = sm.above_users();
        let total = model::least(Some(total), above.limit).unwrap_or(total);
        let reserved = model::available(total, self.cfg().memory.reserve, sm.users_max().ok().flatten());
        let bg = self.desired().jobs.values().any(|j| j.class() == Class::Background).then(|| sm.slice_usage(BACKGROUND).ok()).flatten();
        let users = usages.iter().flatten().sum::<u64>() + bg.unwrap_or(0);
        let available = model::room(reserved, users, model::least(sm.mem_available().ok(), above.headroom), self.memory().room);
        let ins: Vec<CurrencyMem> = ids
            .iter()
            .zip(&usages)
            .map(|(c, u)| CurrencyMem { funding: self.funding_of(c), usage: u.unwrap_or(0), cap: self.memory_cap(c), jobs: vec![] })
            .collect();
        let plan = model::plan(available, &ins);
        let mut failed = vec![];
        let mut sum = 0u64;
        let mut adjust: Vec<(i32, i16, usize)> = vec![];
        let mut raised = HashSet::new();
        let mut view = BTreeMap::new();
        for (k, ((c, p), i)) in ids.iter().zip(&plan).zip(&ins).enumerate() {
            let rel = currency_rel(Class::Foreground, c);
            // Only a slice that runs (as io.rs): setting a property of a stopped slice starts
            // it again (systemd VM, 2026-11-27: user-59800.slice was there after the purge).
            // MemoryHigh= is the guard (or a lower soft cap): above what the others leave it, a
            // currency reclaims its own pages, before the machine runs short.
            let props = [(SliceProp::Low, Some(p.protection)), (SliceProp::High, model::soft_limit(p)), (SliceProp::Max, p.max)];
            for (prop, v) in props.into_iter().filter(|_| usages[k].is_some()) {
                if let Err(e) = sm.set_slice_memory(&rel, prop, v) {
                    failed.push(format!("{}= of {rel}'s slice: {e}", prop.name()));
                }
            }
            sum += p.protection;
            // Processes are read only while the currency is over its share, or was.
            if self.oom_scan(c, p.oom_score_adj) {
                adjust.extend(sm.slice_procs(&rel).unwrap_or_default().into_iter().map(|pid| (pid, p.oom_score_adj, k)));
                if p.oom_score_adj > model::WITHIN_SHARE_ADJ {
                    raised.insert(c.clone());
                }
            }
            view.insert(
                c.clone(),
                CurrencyMemory {
                    usage: i.usage,
                    protection: p.protection,
                    available,
                    limit: p.max,
                    cap: i.cap.map(|m| m.to_string()),
                    oom_score_adj: self.cfg().memory.oom.then_some(p.oom_score_adj),
                    oom_kills: 0,
                    pressure: Default::default(),
                },
            );
        }
        if let Err(e) = sm.set_users_low((!ids.is_empty()).then_some(sum)) {
            failed.push(format!("MemoryLow= of user.slice: {e}"));
        }
        for f in failed {
            log::info!("memory: could not set {f}");
        }
        let seen: HashSet<i32> = adjust.iter().map(|(p, _, _)| *p).collect();
        for (pid, adj, k) in adjust {
            let what = self.oom_adj(pid, adj);
            self.audit_oom(&ids[k], ins[k].usage, plan[k].protection, what);
        }
        let m = self.memory_mut();
        m.oom.retain(|pid, _| seen.contains(pid));
        m.foreign.retain(|pid, _| seen.contains(pid));
        m.raised = raised;
        m.view = view;
        m.room = Some(available);
        self.apply_slice_job_mem();
    }

    /// At stop: every memory property allot sent to a slice is taken back at once.
    pub(super) fn undo_slice_memory(&mut self) {
        let Some(sm) = self.tree().cg().slice_memory() else { return };
        let rels: Vec<String> = self.memory().view.keys().map(|c| currency_rel(Class::Foreground, c)).collect();
        for rel in rels.iter().map(|r| Some(r.as_str())).chain([None]) {
            if let Err(e) = sm.reset_memory(rel) {
                log::warn!("memory: could not take back the memory properties of {}'s slice: {e}", rel.unwrap_or("user.slice"));
            }
        }
    }
}

#[cfg(test)]
#[path = "memory_sd_tests.rs"]
mod tests;
