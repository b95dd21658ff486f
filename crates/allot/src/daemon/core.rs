//! The daemon's state and its tick: `gather → plan → apply` (core/tick.rs), with the
//! steps that change the job set (reaping empty jobs, re-creating a job whose directory
//! was removed from outside, splitting a niced process off a shared default job) as
//! explicit steps of their own between gathering and planning. Requests (requests.rs),
//! placement (placement.rs) and reconciliation (reconcile.rs) are further `impl Daemon`
//! blocks, each one concern, reaching the state only through methods (core/access.rs).
//!
//! Three kinds of state, kept apart (docs/kernel.md, "The daemon loop"):
//! - *desired* (`registry`, registry.rs): what users asked for; persisted; the only intent;
//! - *observed* (`obs`, observe.rs): rebuilt each tick from the kernel;
//! - *applied* (`tree`, applied.rs and tree.rs): what was last written, per node; writes
//!   go out only where the plan differs from it.

use super::applied::{Setting, Write};
pub use super::features::{Features, Kernel};
use super::host::{Host, OpenError};
use super::observe::Observer;
use super::registry::{Class, CurrencyId, JobId, JobSpec};
use super::serving::Serving;
use super::state::Registry;
use super::tree::{AppliedTree, MoveError};
use crate::config::Config;
use crate::proto::Refusal;
use allot_model::plan::{self, CurrencyIn, JobIn, JobPlan};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// A job younger than this is not reaped while empty (its first process is on its way).
pub const GRACE: Duration = Duration::from_secs(3);

pub use super::state::UserDefaults;

/// The last plan, kept for `show` and `explain`.
#[derive(Debug, Default)]
pub struct Planned {
    /// Per job.
    pub jobs: HashMap<JobId, JobPlan>,
    /// Foreground currency weights.
    pub currencies: HashMap<CurrencyId, u32>,
    /// The plan's inputs, for `entitlement_if_joined`.
    pub inputs: Option<(Vec<CurrencyIn>, Vec<JobIn>, Vec<JobId>)>,
    /// When each job's boost, hold and nice emulation last changed (explain.rs).
    pub since: HashMap<JobId, [Option<Instant>; 3]>,
}

/// The daemon: its state as components, each owning its data, reached from the other
/// files only through methods (core/access.rs).
pub struct Daemon {
    /// The config in force.
    cfg: Config,
    /// Processes and threads.
    host: Box<dyn Host>,
    /// The cgroup tree and what was written to it (the *applied* state).
    tree: AppliedTree,
    /// What users asked for (the *desired* state), persisted.
    registry: Registry,
    /// What was measured (the *observed* state).
    obs: Observer,
    /// The last plan.
    planned: Planned,
    /// What was found about the kernel at start.
    kernel: Kernel,
    /// Placement's memory (placement.rs).
    placement: super::placement::state::Placement,
    /// Login sessions: their load, boost and rules (sessions/, systemd hosts).
    sessions: super::sessions::state::Sessions,
    /// Counters, request budgets, the audit trail, the last reload (serving.rs).
    serving: Serving,
    /// Outside changes to watch (reconcile.rs).
    watch: super::watch::Watch,
    /// Jobs whose login session ended, and when what is left of them gets SIGKILL (logout.rs).
    logout_kills: HashMap<String, Instant>,
    /// Memory by share (memory.rs).
    memory: super::memory::state::MemoryState,
    /// I/O by share (io.rs).
    io: super::io_state::IoState,
    /// OOM decisions for the audit trail, bounded (oom_audit.rs).
    oom_audit: super::oom_audit::OomAudit,
    /// How allot's tree is held on this host (backend.rs), chosen at start.
    backend: std::rc::Rc<dyn super::backend::Backend<Daemon>>,
    /// The apply step's memory: boost slices given, failures logged (core/tick.rs).
    applier: tick::Applier,
    /// When the last full tick ran, for the tick's pace (core/pace.rs).
    pace: pace::Pace,
    /// allot's sched_ext scheduler, run beside the cgroup backend (scx_backend.rs).
    scx: super::scx::Scx,
}

mod access;
mod pace;
mod tick;

impl Daemon {
    /// Funding of a currency: set with `allot fund`, else the config's.
    pub fn funding_of(&self, c: &CurrencyId) -> u32 {
        if self.cfg.funding_authority == crate::config::FundingAuthority::Local {
            if let Some(f) = self.registry.desired().funding.get(c) {
                return *f;
            }
        }
        match c {
            CurrencyId::Named(n) => self
                .cfg
                .funding
                .get(n)
                .and_then(|e| e.funding)
                .or_else(|| self.cfg.currencies.get(n).and_then(|x| x.funding))
                .unwrap_or(self.cfg.default_funding),
            CurrencyId::User(uid) => self.user_defaults(*uid).0.unwrap_or(self.cfg.default_funding),
        }
    }

    /// The config's funding, default-job cap and currency cap for a user: `[funding]` by
    /// name or uid, else the first of its groups (in name order) in `[groups]` that sets
    /// each. Looked up through NSS once per user and kept until the config is reloaded.
    pub fn user_defaults(&self, uid: u32) -> UserDefaults {
        if let Some(v) = self.registry.cached_defaults(uid) {
            return v;
        }
        let user = allot_linux::process::users::user_by_uid(uid);
        let named = user.as_ref().and_then(|u| self.cfg.funding.get(&u.name)).or_else(|| self.cfg.funding.get(&uid.to_string())).copied();
        let groups: Vec<u32> = user.as_ref().map(allot_linux::process::users::groups_of).unwrap_or_default();
        let member = |g: &str| allot_linux::process::users::group_by_name(g).is_some_and(|g| groups.contains(&g.gid));
        let (mut funding, mut cap, mut ccap) = (named.and_then(|e| e.funding), None, named.and_then(|e| e.cap));
        for (g, d) in &self.cfg.groups {
            let wants = (funding.is_none() && d.funding.is_some())
                || (cap.is_none() && d.default_cap.is_some())
                || (ccap.is_none() && d.currency_cap.is_some());
            if wants && member(g) {
                funding = funding.or(d.funding);
                cap = cap.or_else(|| d.default_cap.as_deref().and_then(|c| c.parse().ok()));
                ccap = ccap.or_else(|| d.currency_cap.as_deref().and_then(|c| allot_model::Cap::parse_currency(c).ok()));
            }
        }
        self.registry.cache_defaults(uid, (funding, cap, ccap));
        (funding, cap, ccap)
    }

    /// One tick: observe → reap and repair → plan → apply (the loop paces them:
    /// [`Self::pace_tick`]).
    #[cfg(test)]
    pub fn tick(&mut self) {
        self.tick_at(Instant::now());
    }

    /// [`Self::tick`] at a given time (tests drive time themselves).
    pub fn tick_at(&mut self, now: Instant) {
        let gone = self.gather(now);
        // The steps that change the job set, between gathering and planning.
        self.repair(gone);
        self.reap(now);
        self.logouts(now);
        // At rest (nothing ran, no usage left in any window) the plan cannot have changed.
        if self.obs.busy {
            self.split_niced();
            self.replan();
        }
        self.apply_memory();
        self.audit_oom_kills();
        self.apply_io();
    }

    /// Jobs whose directory was removed from outside: re-created and their processes
    /// put back, when they still run where they were left (the root, or a source allot
    /// places from); otherwise the job is forgotten.
    fn repair(&mut self, gone: Vec<JobId>) {
        for id in gone {
            let Some(spec) = self.registry.desired().jobs.get(&id).cloned() else { continue };
            let procs = self.obs.jobs.get(&id).map(|t| t.procs.clone()).unwrap_or_default();
            let mut back = vec![];
            for pid in procs {
                let Ok(p) = self.host.open(pid) else { continue };
                let here = self.tree.cg().path_of(pid).unwrap_or_default();
                // Still its owner's, and left where a request may take it from.
                let owner = self.host.info(&p).is_some_and(|i| i.creds.all(spec.owner));
                if owner && self.placement.is_source(&here) {
                    back.push(p);
                }
            }
            if back.is_empty() {
                log::warn!("{}: its cgroup {} was removed from outside and none of its processes is left to re-place; forgetting it", id, spec.rel());
                self.forget(id);
                continue;
            }
            if let Err(e) = self.make_job_dir(&spec) {
                log::error!("{}: its cgroup {} was removed from outside and could not be re-created: {e}", id, spec.rel());
                self.forget(id);
                continue;
            }
            let n = back.iter().filter(|p| self.tree.move_verified(self.host.as_ref(), p, &spec.rel()).is_ok()).count();
            self.serving.counters_mut().reconciled += 1;
            log::warn!("{}: its cgroup {} was removed from outside; re-created it and put back {n} of its processes", id, spec.rel());
            if let Some(t) = self.obs.jobs.get_mut(&id) {
                t.dirty = true;
            }
        }
    }

    /// Removes jobs that have been empty past the grace period.
    fn reap(&mut self, now: Instant) {
        let empty: Vec<JobId> = self
            .registry
            .desired()
            .jobs
            .keys()
            .filter(|id| {
                self.obs
                    .jobs
                    .get(id)
                    .is_some_and(|t| t.empty && !t.dirty && now.duration_since(t.created) > GRACE && t.reap_after.is_none_or(|a| now >= a))
            })
            .copied()
            .collect();
        if empty.is_empty() {
            return;
        }
        let mut emptied = vec![];
        for id in empty {
            let spec = &self.registry.desired().jobs[&id];
            let (rel, class, currency) = (spec.rel(), spec.class(), spec.currency.clone());
            match self.tree.cg().procs(&rel) {
                Ok(p) if !p.is_empty() => {
                    // Something arrived since the observation: keep it, read again next tick.
                    if let Some(t) = self.obs.jobs.get_mut(&id) {
                        t.dirty = true;
                    }
                    continue;
                }
                _ => {}
            }
            self.retire_memory(&rel, &currency);
            if let Err(e) = self.tree.remove(&rel) {
                // Said once, then tried again quietly once a minute (it goes when its last
                // process does), not every tick.
                if let Some(t) = self.obs.jobs.get_mut(&id) {
                    if t.reap_after.is_none() {
                        log::warn!("could not remove the empty job directory {rel}: {e}; trying again every minute");
                    }
                    t.reap_after = Some(now + Duration::from_secs(60));
                }
                continue;
            }
            self.watch.unwatch(&rel);
            self.forget(id);
            emptied.push((class, currency));
        }
        emptied.dedup();
        for (class, c) in emptied {
            self.remove_currency_if_unused(class, &c);
        }
        let failures = self.tree.rt_assign();
        self.report(failures);
        let _ = self.save();
    }

    /// A currency's directory goes with its last job, so nothing allot made outlives its use
    /// (on a systemd host, the scope and the user's slice it started). It is made again, with
    /// its funding, for the next job. Kept on a systemd host while the currency is funded:
    /// there the funding is the slice's weight, which also weighs the user's logins.
    fn remove_currency_if_unused(&mut self, class: Class, c: &CurrencyId) {
        if self.registry.desired().jobs.values().any(|j| j.class() == class && j.currency == *c) {
            return;
        }
        if self.backend.currency_is_slice(class) && self.registry.desired().funding.contains_key(c) {
            return;
        }
        let rel = super::registry::currency_rel(class, c);
        if !self.tree.cg().exists(&rel) {
            return;
        }
        self.watch.unwatch(&rel);
        if let Err(e) = self.tree.remove(&rel) {
            log::debug!("kept the currency directory {rel}: {e}");
            self.watch.watch(self.tree.cg(), &rel);
        }
    }

    /// Drops a job from every kind of state (its directory is already gone).
    pub fn forget(&mut self, id: JobId) {
        self.registry.drop_job(&id);
        self.obs.jobs.remove(&id);
        self.planned.jobs.remove(&id);
        self.applier.forget(id);
    }

    /// Creates a job's directory (and its currency's) with the job's settings at rest
    /// written: for the steps that make a job with no plan right behind them (placement,
    /// repair, start), so its tickets and cap hold before the next busy tick.
    pub fn make_job_dir(&mut self, spec: &JobSpec) -> Result<(), String> {
        self.make_dir(spec, true)
    }

    /// Creates a job's directory for a step that plans before it returns (a request's
    /// commit, a nice split): its cpu.max at rest is written at once, so a hard cap holds
    /// from the first process moved in, and its weight is left to the plan, which writes
    /// it once (not at rest here and then boosted there).
    pub fn make_job_dir_for_plan(&mut self, spec: &JobSpec) -> Result<(), String> {
        self.make_dir(spec, false)
    }

    fn make_dir(&mut self, spec: &JobSpec, weight_at_rest: bool) -> Result<(), String> {
        let crel = super::registry::currency_rel(spec.class(), &spec.currency);
        let fresh_currency = !self.tree.cg().exists(&crel);
        self.tree.create(&crel)?;
        if fresh_currency {
            let f = self.funding_of(&spec.currency);
            let mut writes = vec![Write::currency(spec.class(), &spec.currency, Setting::Weight(f))];
            writes.extend(self.cap_write(spec.class(), &spec.currency));
            let failures = self.tree.apply(&writes);
            self.report(failures);
            self.guard_fresh_currency(spec.class(), &spec.currency);
            self.watch.watch(self.tree.cg(), &crel);
        }
        let rel = spec.rel();
        self.tree.create(&rel)?;
        let (weight, quota) = plan::at_rest(spec.tickets.get(), spec.cap);
        let mut writes = vec![Write::job(spec, Setting::Max(quota))];
        if weight_at_rest {
            writes.push(Write::job(spec, Setting::Weight(weight)));
        }
        let mut failures = self.tree.apply(&writes);
        failures.extend(self.tree.rt_assign());
        self.report(failures);
        self.watch.watch(self.tree.cg(), &rel);
        Ok(())
    }

    /// Petrou et al. 1999 §3.4 acts per process: a niced process in a user's shared default job gets
    /// a job of its own, so nice lowers that process and not the user's others.
    fn split_niced(&mut self) {
        if !self.cfg.policy.nice_emulation {
            return;
        }
        let mut todo = vec![];
        for j in self.registry.desired().jobs.values().filter(|j| matches!(j.id, JobId::Default(_)) && !j.background) {
            let Some(t) = self.obs.jobs.get(&j.id) else { continue };
            if !plan::splits_niced(t.procs.len(), t.usage.map(|u| u.window)) {
                continue;
            }
            for pid in t.niced().take(16) {
                todo.push((pid, j.clone()));
            }
        }
        // The state file is written only when a process got a job of its own: this runs
        // every busy tick, and a save is a write, two fsyncs and a rename.
        let mut split = false;
        for (pid, parent) in todo.into_iter().take(16) {
            // pidfd first, then identity, then alive just before the move.
            let Ok(p) = self.host.open(pid) else { continue };
            if self.host.info(&p).is_none_or(|i| !i.creds.all(parent.owner) || i.nice == 0) {
                continue;
            }
            // A split is a job like any other: a user at the job limit keeps a niced
            // process in the default job (its nice then acts inside its currency only).
            if self.check_job_limit(parent.owner).is_err() {
                continue;
            }
            let mut spec = JobSpec::new(self.registry.take_id(), parent.currency.clone(), parent.owner);
            spec.tickets = parent.tickets;
            if self.make_job_dir_for_plan(&spec).is_err() {
                continue;
            }
            match self.tree.move_verified(self.host.as_ref(), &p, &spec.rel()) {
                Ok(()) => {
                    log::debug!("process {pid} (nice {}) of {} got a job of its own: {}", self.host.nice(pid).unwrap_or(0), parent.id, spec.id);
                    self.registry.put_job(spec);
                    split = true;
                    if let Some(t) = self.obs.jobs.get_mut(&parent.id) {
                        t.dirty = true;
                    }
                }
                Err(_) => {
                    let _ = self.tree.remove(&spec.rel());
                }
            }
        }
        if split {
            let _ = self.save();
        }
    }

    /// Takes back every dynamic adjustment: slices, boost and nice weights, held soft caps
    /// (a clean stop, so nothing outlives the daemon's attention).
    pub fn undo_dynamic(&mut self) {
        self.undo_memory();
        self.undo_io();
        self.undo_sessions();
        let mut failures = vec![];
        for id in self.applier.boosted() {
            failures.extend(self.apply_slices(id, None));
        }
        let mut writes = vec![];
        for j in self.registry.desired().jobs.values() {
            let (weight, quota) = plan::at_rest(j.tickets.get(), j.cap);
            writes.push(Write::job(j, Setting::Weight(weight)));
            writes.push(Write::job(j, Setting::Max(quota)));
            let f = self.funding_of(&j.currency);
            for class in [Class::Foreground, Class::Background] {
                if self.tree.cg().exists(&super::registry::currency_rel(class, &j.currency)) {
                    writes.push(Write::currency(class, &j.currency, Setting::Weight(f)));
                }
            }
        }
        failures.extend(self.tree.apply(&writes));
        self.report(failures);
        self.take_back_slices();
    }

    /// Opens a pid for a request, naming what is wrong in the user's words.
    pub fn open_for_request(&self, pid: i32) -> Result<super::host::Proc, Refusal> {
        self.host.open(pid).map_err(|e| match e {
            OpenError::Gone => Refusal::not_found(format!("no process {pid} (it does not exist or has exited)")),
            OpenError::Other(k) => Refusal::internal(format!("cannot open process {pid}: {k}")),
        })
    }

    /// Moves a held process, in words for a request.
    pub fn move_for_request(&mut self, p: &super::host::Proc, rel: &str) -> Result<(), Refusal> {
        self.tree.move_verified(self.host.as_ref(), p, rel).map_err(|e| match e {
            MoveError::Gone => Refusal::not_found(format!("process {} exited; nothing was changed", p.pid)),
            MoveError::Kernel(k) => Refusal::internal(format!("could not move process {} into {rel}: {k}", p.pid)),
        })
    }
}
