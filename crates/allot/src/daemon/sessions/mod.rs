//! Login sessions on a systemd host: the processes in `session-N.scope`, which systemd
//! owns. allot never moves them out nor writes a file of their scopes; the policy reaches
//! them per task, and the plan counts their load (allot_model::session):
//!
//! - **observed** each tick from their scopes' `cpu.stat` and `cgroup.threads` (read
//!   only) and each thread's `/proc/TID/schedstat`: one claimant per user for the plan,
//!   and each thread's usage for its boost (on a v1 host, whose `name=systemd` hierarchy
//!   keeps no usage, a scope's usage is the sum of its threads');
//! - **boosted** per task: a thread the model boosts gets the boost slice by
//!   sched_setattr (its own given back when it is no longer boosted);
//! - **rules** (rules.rs): a rule's `background` is SCHED_IDLE on the process's threads,
//!   its tickets a nice; both given back when the rule stops matching, at `--release`
//!   and at a clean stop; or, with `[sessions] background = "job"`, a background rule's
//!   process is moved into a background job tied to its session (moved.rs).
//!
//! Every write to a task checks first, and again after, that the thread id still names the
//! task that was read (its start time): a thread that exited and whose id was reused is
//! never written as if it were the one seen.

mod explain;
mod moved;
mod rules;
pub mod state;

pub use rules::RuleOutcome;

use super::core::Daemon;
use allot_model::plan::JobPlan;
use allot_model::session::SessionIn;
use allot_model::usage::BoostWindow;
use state::{Scope, ScopeSample, Task};
use std::time::Instant;

/// A session scope read this tick: its usage (None: a v1 scope, summed from its threads)
/// and the threads to read (None: its usage did not move, so none ran).
pub(in crate::daemon) type Row = (allot_linux::cgroup::sessions::SessionScope, Option<u64>, Option<Vec<i32>>);

/// Threads of session scopes read per tick, all users together: a login node of a
/// hundred sessions of ten threads each is followed whole; past it, each scope's reads go
/// round its threads, its part of the budget a tick (each costs one schedstat read).
pub const MAX_TASKS: usize = 1024;

/// Threads of session scopes kept, all users together, divided as [`MAX_TASKS`] is: the
/// ones the reads go round (each read about once every `MAX_KEPT / MAX_TASKS` ticks when
/// every user has that many), so the daemon's memory for them stays bounded. A scope's
/// thread list is read as far as this (32 KiB); its threads past its part of it are not
/// followed.
pub const MAX_KEPT: usize = 4 * MAX_TASKS;

/// A kept thread not read for this many ticks in a row is forgotten (its slice given back
/// if it was boosted), so nothing the daemon did to it outlives what it knows of it.
pub const MAX_SKIPPED_TICKS: u32 = 16;

/// How often the session scopes are listed again (two directory reads per user): a login
/// is counted by the plan within a second; between lists, each scope listed costs one
/// pread of its `cpu.stat` a tick.
pub const SCOPE_LIST_GAP: std::time::Duration = std::time::Duration::from_secs(1);

/// The slice a boosted session task gets when `policy.boost_slice_us` is 0 (weight only
/// for jobs): a session has no weight of allot's to raise, so its boost is the slice. The
/// kernel's shortest, 100 µs (docs/systemd.md has what it measured).
pub const SESSION_BOOST_SLICE_NS: u64 = 100_000;

/// A scope's thread ids, as far as the reads may go round ([`MAX_KEPT`]).
pub(in crate::daemon) fn scope_threads(s: &allot_linux::cgroup::sessions::SessionScope) -> allot_linux::Result<Vec<i32>> {
    s.threads_upto(MAX_KEPT)
}

impl Daemon {
    /// Reads every session scope (systemd hosts only): called each tick, before the jobs
    /// are observed, so load outside allot excludes the sessions the plan counts.
    pub fn observe_sessions(&mut self, now: Instant) {
        if !self.backend().has_sessions() {
            return;
        }
        if self.sessions().listed.as_ref().is_none_or(|(_, at)| now.saturating_duration_since(*at) >= SCOPE_LIST_GAP) {
            let units = self.tree().cg().delegation().and_then(|d| d.units_mount()).map(std::path::Path::to_path_buf);
            let list = allot_linux::cgroup::sessions::list(units.as_deref().unwrap_or(self.tree().cg().mount()));
            self.sessions_mut().listed = Some((list, now));
        }
        let scopes = self.sessions().listed.as_ref().map(|(l, _)| l.clone()).unwrap_or_default();
        // Each scope's usage (None: a v1 scope, summed from its threads below) and the
        // threads to read: none when its usage did not move.
        let mut read: Vec<Row> = vec![];
        for s in scopes {
            let usage_ns = if s.counted() {
                // Gone since the list (a logout): left out, and forgotten.
                let Ok(ns) = s.usage_ns_with(&self.sessions().files) else { continue };
                if self.sessions().scopes.get(&s.name()).and_then(|x| x.last).is_some_and(|(last, _)| last == ns) {
                    read.push((s, Some(ns), None));
                    continue;
                }
                Some(ns)
            } else {
                None
            };
            let threads = match scope_threads(&s) {
                Ok(t) => t,
                // A v1 scope gone since the list (a logout): left out, and forgotten, as a
                // counted one whose usage cannot be read.
                Err(_) if usage_ns.is_none() => continue,
                Err(_) => vec![],
            };
            read.push((s, usage_ns, Some(threads)));
        }
        let samples = self.samples(read);
        self.observe_session_samples(samples, now);
    }

    /// The tick's samples of the scopes read: the budget divided, then a v1 scope's usage
    /// summed from its threads.
    pub(in crate::daemon) fn samples(&mut self, mut read: Vec<Row>) -> Vec<ScopeSample> {
        let skipped = self.divide_thread_budget(&mut read);
        read.into_iter()
            .zip(skipped)
            .map(|((s, usage_ns, threads), skipped)| {
                let smp = match (usage_ns, threads) {
                    (Some(usage_ns), threads) => ScopeSample { uid: s.uid, name: s.name(), usage_ns, threads, ..Default::default() },
                    (None, threads) => self.summed_sample(&s, threads.unwrap_or_default()),
                };
                ScopeSample { skipped, ..smp }
            })
            .collect()
    }

    /// The threads read a tick, [`MAX_TASKS`] in all, and those kept, [`MAX_KEPT`], each
    /// divided max-min fair among the users whose sessions ran and then among each user's
    /// sessions ([`allot_model::session::fair_division`]): a user's thousands of threads
    /// take only what the other users' sessions do not need. A scope with more kept than
    /// its part to read is read from where the last tick stopped, going round, so each of
    /// its kept threads is read in turn (a v1 session's usage, summed from its threads,
    /// then misses none of them for good). Returns, per row, the kept threads not read.
    pub(in crate::daemon) fn divide_thread_budget(&mut self, read: &mut [Row]) -> Vec<Vec<i32>> {
        use allot_model::session::fair_division_turn as fair_division;
        // What the rounding leaves over goes to other users and sessions each tick.
        let turn = self.sessions().turn;
        self.sessions_mut().turn = turn.wrapping_add(1);
        let mut uids: Vec<u32> = read.iter().filter(|r| r.2.is_some()).map(|r| r.0.uid).collect();
        uids.sort_unstable();
        uids.dedup();
        let wants =
            |read: &[Row], uid: u32| -> Vec<usize> { read.iter().filter(|r| r.0.uid == uid).filter_map(|r| r.2.as_ref().map(Vec::len)).collect() };
        let user_wants: Vec<usize> = uids.iter().map(|&u| wants(read, u).iter().sum()).collect();
        let (to_read, to_keep) = (fair_division(MAX_TASKS, &user_wants, turn), fair_division(MAX_KEPT, &user_wants, turn));
        let mut skipped = vec![vec![]; read.len()];
        let old = std::mem::take(&mut self.sessions_mut().cursors);
        let mut cut = false;
        for (k, &uid) in uids.iter().enumerate() {
            let w = wants(read, uid);
            let (parts, kept) = (fair_division(to_read[k], &w, turn), fair_division(to_keep[k], &w, turn));
            let rows = read.iter_mut().zip(&mut skipped).filter(|(r, _)| r.0.uid == uid && r.2.is_some());
            for (((row, skip), part), keep) in rows.zip(parts).zip(kept) {
                let threads = row.2.as_mut().expect("filtered");
                cut |= threads.len() > part;
                threads.truncate(keep);
                if threads.len() > part {
                    let name = row.0.name();
                    let at = old.get(&name).copied().unwrap_or(0) % threads.len();
                    threads.rotate_left(at);
                    *skip = threads.split_off(part);
                    self.sessions_mut().cursors.insert(name, (at + part) % (part + skip.len()));
                }
            }
        }
        // Scopes whose usage did not move keep their place.
        for r in read.iter().filter(|r| r.2.is_none()) {
            if let Some(&at) = old.get(&r.0.name()) {
                self.sessions_mut().cursors.insert(r.0.name(), at);
            }
        }
        if cut && !self.sessions().capped_logged {
            log::warn!("login sessions have more than {MAX_TASKS} threads: each tick reads {MAX_TASKS}, divided fairly among the users, and goes round the rest");
            self.sessions_mut().capped_logged = true;
        }
        skipped
    }

    /// A session scope on a v1 host, whose `name=systemd` hierarchy keeps no usage: its
    /// usage is a running sum of what `threads` (its threads within its part of the budget)
    /// used since the last tick, each thread's /proc/TID/schedstat against what it read then
    /// (the same baselines the boost keeps, a thread known by its id and start time). A
    /// thread seen for the first time counts from then, not its whole life, and one that
    /// exits takes only its last partial tick with it, so the sum never jumps and never goes
    /// back. What it read is kept in the sample, so no thread is read twice a tick.
    pub(in crate::daemon) fn summed_sample(&self, s: &allot_linux::cgroup::sessions::SessionScope, threads: Vec<i32>) -> ScopeSample {
        let name = s.name();
        let ss = self.sessions();
        let prev = ss.scopes.get(&name).and_then(|x| x.last).map_or(0, |(ns, _)| ns);
        let mut read = std::collections::HashMap::new();
        let mut ran = 0u64;
        for &tid in &threads {
            let Some(t) = ss.tasks.get(&tid).filter(|t| t.scope == name) else { continue };
            let Some((run, _, _)) = t.last else { continue };
            let Some(smp) = self.host().thread(tid) else { continue };
            read.insert(tid, smp);
            // Not read since a tick before: the id may name a thread that took it since
            // (checked after the read, so the counters read are the one seen's). Its time
            // is not counted; the observation starts it afresh.
            if t.skipped > 0 && self.host().start_of(tid) != Some(t.start) {
                continue;
            }
            ran += smp.run_ns.saturating_sub(run);
        }
        ScopeSample { uid: s.uid, name, usage_ns: prev + ran, threads: Some(threads), read, skipped: vec![] }
    }

    /// [`Self::observe_sessions`] from scopes already read.
    pub fn observe_session_samples(&mut self, samples: Vec<ScopeSample>, now: Instant) {
        let window_s = self.cfg().policy.boost_window_ms as f64 / 1000.0;
        let ncpu = self.ncpu();
        let (ss, host) = self.sessions_with_host();
        ss.scopes.retain(|name, _| samples.iter().any(|s| &s.name == name));
        for t in ss.tasks.values_mut() {
            t.seen = false;
        }
        for s in samples {
            let sc = ss.scopes.entry(s.name.clone()).or_insert(Scope {
                uid: s.uid,
                last: None,
                window: BoostWindow::default(),
                usage: None,
                runnable: 0,
                waiting: false,
                cpus: vec![],
            });
            if let Some((prev, at)) = sc.last {
                let dt = now.duration_since(at).as_secs_f64();
                let used = s.usage_ns.saturating_sub(prev);
                ss.used_ns = ss.used_ns.wrapping_add(used);
                if dt > 0.0 {
                    sc.usage = Some(sc.window.push(used as f64 / 1e9, dt, window_s));
                }
            }
            sc.last = Some((s.usage_ns, now));
            let (mut runnable, mut waited, mut dt_max) = (0u32, 0u64, 0f64);
            let mut cpus: std::collections::BTreeSet<usize> = Default::default();
            let mut all_cpus = false;
            let Some(threads) = s.threads else {
                // Nothing in it ran: its known threads used nothing, and none waited.
                for t in ss.tasks.values_mut().filter(|t| t.scope == s.name) {
                    if let Some((run, wait, at)) = t.last {
                        let dt = now.duration_since(at).as_secs_f64();
                        if dt > 0.0 {
                            t.usage = Some(t.window.push(0.0, dt, window_s));
                        }
                        t.last = Some((run, wait, now));
                    }
                    t.seen = true;
                }
                sc.runnable = 0;
                sc.waiting = false;
                continue;
            };
            for tid in threads {
                let Some(smp) = s.read.get(&tid).copied().or_else(|| host.thread(tid)) else { continue };
                let t = ss.tasks.entry(tid).or_insert_with(|| Task::new(s.uid, &s.name, 0));
                // A new task, or the id reused (its counters went back, or, for one not read
                // at the last tick, its start time is not the one seen): start afresh.
                let reused = t.last.is_some_and(|(run, wait, _)| smp.run_ns < run || smp.wait_ns < wait);
                if t.last.is_none() || reused || std::mem::take(&mut t.skipped) > 0 {
                    let Some(start) = host.start_of(tid) else { continue };
                    if reused || t.start != start {
                        *t = Task::new(s.uid, &s.name, start);
                    }
                }
                t.seen = true;
                t.uid = s.uid;
                t.scope.clone_from(&s.name);
                if let Some((run, wait, at)) = t.last {
                    let dt = now.duration_since(at).as_secs_f64();
                    if dt > 0.0 {
                        t.usage = Some(t.window.push(smp.run_ns.saturating_sub(run) as f64 / 1e9, dt, window_s));
                        dt_max = dt_max.max(dt);
                    }
                    if smp.run_ns > run || smp.wait_ns > wait {
                        runnable += 1;
                        t.nice = host.nice(tid).unwrap_or(0);
                        let aff = host.affinity(tid);
                        all_cpus |= aff.is_empty() || aff.len() >= ncpu;
                        cpus.extend(aff);
                    }
                    waited += smp.wait_ns.saturating_sub(wait);
                }
                t.last = Some((smp.run_ns, smp.wait_ns, now));
            }
            // Listed past the scope's part of the budget: kept as last read, and read in turn;
            // forgotten when not read for too long.
            for tid in s.skipped {
                if let Some(t) = ss.tasks.get_mut(&tid).filter(|t| t.scope == s.name && t.skipped < MAX_SKIPPED_TICKS) {
                    t.seen = true;
                    t.skipped += 1;
                }
            }
            sc.runnable = runnable;
            sc.cpus = if all_cpus { vec![] } else { cpus.into_iter().collect() };
            sc.waiting = allot_model::policy::waiting(waited as f64, dt_max);
        }
        // A boosted thread that left its session (exited, or moved into a job by `allot
        // set`): its own slice back if it still lives, so no boost outlives the session.
        let left: Vec<(i32, u64, u64)> =
            ss.tasks.iter().filter(|(_, t)| !t.seen).filter_map(|(&tid, t)| t.boosted_from.map(|o| (tid, t.start, o))).collect();
        ss.tasks.retain(|_, t| t.seen);
        for (tid, start, orig) in left {
            self.write_slice(tid, start, orig);
        }
    }

    /// The plan's session claimants: one per user with an active session, in the user's
    /// currency (added to `currencies`, at its funding, when the user has no job).
    pub fn session_inputs(
        &self,
        cur_ids: &[super::registry::CurrencyId],
        currencies: &mut Vec<allot_model::plan::CurrencyIn>,
    ) -> (Vec<u32>, Vec<SessionIn>) {
        use super::registry::CurrencyId;
        let (mut uids, mut ins) = (vec![], vec![]);
        let mut extra: Vec<CurrencyId> = vec![];
        for (uid, claim) in self.sessions().claims() {
            let c = CurrencyId::User(uid);
            let currency = match cur_ids.iter().chain(&extra).position(|x| *x == c) {
                Some(i) => i,
                None => {
                    currencies.push(allot_model::plan::CurrencyIn { funding: self.funding_of(&c), cap: self.currency_cap(&c).map(|k| k.cpus) });
                    extra.push(c);
                    currencies.len() - 1
                }
            };
            uids.push(uid);
            ins.push(SessionIn { currency, ..claim });
        }
        (uids, ins)
    }

    /// Keeps the sessions' plan and gives each session thread its boost slice, or its own
    /// slice back ([`allot_model::session::task_boost`] against its session's entitlement).
    /// `ins` and `currencies` (the plan's) give each user's currency weight: one that is
    /// not the funding (nice emulation) is what a job-less user's slice carries
    /// ([`Self::session_weight`]).
    pub fn apply_sessions(&mut self, uids: Vec<u32>, ins: &[SessionIn], plans: Vec<JobPlan>, currencies: &[allot_model::plan::CurrencyPlan]) {
        use super::registry::CurrencyId;
        let weights = uids
            .iter()
            .zip(ins)
            .filter_map(|(&uid, s)| Some((uid, currencies.get(s.currency)?.weight)))
            .filter(|&(uid, w)| w != self.funding_of(&CurrencyId::User(uid)))
            .collect();
        self.sessions_mut().weights = weights;
        self.sessions_mut().planned = uids.into_iter().zip(plans).collect();
        let p = self.cfg().policy.params(self.features().custom_slices);
        let slice = self.features().custom_slices.then(|| p.boost_slice_ns.unwrap_or(SESSION_BOOST_SLICE_NS)).filter(|_| p.boost);
        self.sessions_mut().slice_ns = slice;
        let tids: Vec<i32> = self.sessions().tasks.keys().copied().collect();
        for tid in tids {
            let t = &self.sessions().tasks[&tid];
            let ent = self.sessions().planned.get(&t.uid).map_or(0.0, |j| j.entitlement);
            let idle = self.sessions().is_idle_by_rule(tid);
            let boost = if idle { allot_model::plan::Boost::Background } else { allot_model::session::task_boost(&p, t.usage, ent) };
            let want = slice.filter(|_| boost.on());
            self.sessions_mut().tasks.get_mut(&tid).expect("listed").boost = Some(boost);
            let t = &self.sessions().tasks[&tid];
            match (want, t.boosted_from) {
                (Some(ns), None) => {
                    let Some(orig) = self.host().slice(tid) else { continue };
                    let start = t.start;
                    if self.write_slice(tid, start, ns) {
                        // A slice equal to the boost's was inherited from a boosted parent.
                        self.sessions_mut().tasks.get_mut(&tid).expect("listed").boosted_from = Some(if orig == ns { 0 } else { orig });
                    }
                }
                (None, Some(orig)) => {
                    let start = t.start;
                    self.write_slice(tid, start, orig);
                    self.sessions_mut().tasks.get_mut(&tid).expect("listed").boosted_from = None;
                }
                _ => {}
            }
        }
    }

    /// The weight the plan gives currency `c` for its user's sessions when it is not the
    /// funding (a job-less user whose running session threads are all niced: Petrou et al.
    /// 1999 §3.4 across users, as for a niced job); None: the funding.
    pub fn session_weight(&self, c: &super::registry::CurrencyId) -> Option<u32> {
        match c {
            super::registry::CurrencyId::User(uid) => self.sessions().weights.get(uid).copied(),
            _ => None,
        }
    }

    /// Sets a session thread's slice if the id still names the task that was seen
    /// (`start`), before and after the write; true if it was written to that task.
    fn write_slice(&self, tid: i32, start: u64, ns: u64) -> bool {
        if self.host().start_of(tid) != Some(start) {
            return false;
        }
        let ok = self.host().set_slice(tid, ns).is_ok();
        if self.host().start_of(tid) != Some(start) {
            log::warn!("thread {tid} exited while its slice was set; a task that took its id may carry a {} µs slice", ns / 1000);
            return false;
        }
        ok
    }

    /// Gives back every session thread's slice and every attribute a rule set (at a clean
    /// stop and at `--release`).
    pub fn undo_sessions(&mut self) {
        let boosted: Vec<(i32, u64, u64)> = self.sessions().tasks.iter().filter_map(|(&tid, t)| t.boosted_from.map(|o| (tid, t.start, o))).collect();
        for (tid, start, orig) in boosted {
            self.write_slice(tid, start, orig);
            if let Some(t) = self.sessions_mut().tasks.get_mut(&tid) {
                t.boosted_from = None;
            }
        }
        self.undo_session_rules();
    }
}

#[cfg(test)]
mod moved_tests;
#[cfg(test)]
mod tests;
