//! The daemon's state and its tick: `observe → plan → apply the difference`, with the
//! steps that change the job set (reaping empty jobs, re-creating a job whose directory
//! was removed from outside, splitting a niced process off a shared default job) as
//! explicit steps of their own. Requests (requests.rs), placement (placement.rs) and
//! reconciliation (reconcile.rs) are further `impl Daemon` blocks, each one concern.
//!
//! Three kinds of state, kept apart (docs/kernel.md, "The daemon loop"):
//! - *desired* (`desired`, registry.rs): what users asked for; persisted; the only intent;
//! - *observed* (`obs`, observe.rs): rebuilt each tick from the kernel;
//! - *applied* (`tree.applied`, tree.rs): what was last written; writes go out only where
//!   the plan differs from it.

pub use super::features::Features;
use super::host::{Host, OpenError};
use super::observe::{Ctx, Observer};
use super::registry::{Class, CurrencyId, Desired, JobId, JobSpec};
use super::tree::{MoveError, Tree};
use crate::config::Config;
use crate::proto::Counters;
use allot_model::plan::{self, CurrencyIn, JobIn, JobPlan, Machine, Params};
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A job younger than this is not reaped while empty (its first process is on its way).
pub const GRACE: Duration = Duration::from_secs(3);

/// The config's defaults for one user: funding of their currency, cap of their default job,
/// hard cap of their currency.
pub type UserDefaults = (Option<u32>, Option<allot_model::Cap>, Option<allot_model::Cap>);

/// The last plan, kept for `show`.
#[derive(Debug, Default)]
pub struct Planned {
    /// Per job.
    pub jobs: HashMap<JobId, JobPlan>,
    /// Foreground currency weights.
    pub currencies: HashMap<CurrencyId, u32>,
    /// The plan's inputs, for `entitlement_if_joined`.
    pub inputs: Option<(Vec<CurrencyIn>, Vec<JobIn>, Vec<JobId>)>,
}

/// The daemon.
pub struct Daemon {
    /// The config in force.
    pub cfg: Config,
    /// Processes and threads.
    pub host: Box<dyn Host>,
    /// The cgroup tree and what was written to it.
    pub tree: Tree,
    /// What users asked for.
    pub desired: Desired,
    /// Where `desired` is persisted (None: ephemeral daemon for tests).
    pub state_path: Option<PathBuf>,
    /// What was measured.
    pub obs: Observer,
    /// The last plan.
    pub planned: Planned,
    /// Kernel features.
    pub features: Features,
    /// Counters since start.
    pub counters: Counters,
    /// CPUs.
    pub ncpu: usize,
    /// Real-time group scheduling, in words.
    pub rt_note: String,
    /// Start time.
    pub started: Instant,
    /// Placement's memory (placement.rs).
    pub placement: super::placement::Placement,
    /// Login sessions: their load, boost and rules (sessions/, systemd hosts).
    pub sessions: super::sessions::Sessions,
    /// Per-uid request budgets (requests.rs).
    pub limits: super::limits::Shared,
    /// `show` leaves pids and command lines to the connection thread (views.rs `fill`).
    pub defer_reads: bool,
    /// Outside changes to watch (reconcile.rs).
    pub watch: super::reconcile::Watch,
    /// The audit trail (audit.rs).
    pub audit: super::audit::Audit,
    /// When each job's boost, hold and nice emulation last changed (explain.rs).
    pub since: HashMap<JobId, [Option<Instant>; 3]>,
    /// The config's per-user defaults, looked up once (`user_defaults`).
    pub defaults_cache: std::cell::RefCell<HashMap<u32, UserDefaults>>,
    /// Jobs whose login session ended, and when what is left of them gets SIGKILL (logout.rs).
    pub logout_kills: HashMap<String, Instant>,
    /// How the last reload ended (status, metrics).
    pub last_reload: Option<crate::proto::ReloadOutcome>,
    /// Memory by share (memory.rs).
    pub memory: super::memory::MemoryState,
}

impl Daemon {
    /// Funding of a currency: set with `allot fund`, else the config's.
    pub fn funding_of(&self, c: &CurrencyId) -> u32 {
        if self.cfg.funding_authority == crate::config::FundingAuthority::Local {
            if let Some(f) = self.desired.funding.get(c) {
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
        if let Some(v) = self.defaults_cache.borrow().get(&uid) {
            return *v;
        }
        let user = allot_linux::users::user_by_uid(uid);
        let named = user.as_ref().and_then(|u| self.cfg.funding.get(&u.name)).or_else(|| self.cfg.funding.get(&uid.to_string())).copied();
        let groups: Vec<u32> = user.as_ref().map(allot_linux::users::groups_of).unwrap_or_default();
        let member = |g: &str| allot_linux::users::group_by_name(g).is_some_and(|g| groups.contains(&g.gid));
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
        self.defaults_cache.borrow_mut().insert(uid, (funding, cap, ccap));
        (funding, cap, ccap)
    }

    /// Persists the desired state; a failure is logged (intent stays in memory) and returned.
    pub fn save(&mut self) -> Result<(), String> {
        let Some(p) = &self.state_path else { return Ok(()) };
        super::state::save(p, &self.desired).map_err(|e| {
            log::error!("could not save the state file (settings are kept in memory until it can be written): {e:#}");
            format!("{e:#}")
        })
    }

    /// One tick: observe → reap and repair → plan → apply.
    pub fn tick(&mut self) {
        self.tick_at(Instant::now());
    }

    /// [`Self::tick`] at a given time (tests drive time themselves).
    pub fn tick_at(&mut self, now: Instant) {
        self.observe_sessions(now);
        self.obs.sessions_ns = self.sessions.used_ns;
        let ctx = Ctx {
            cg: self.tree.cg.as_ref(),
            host: self.host.as_ref(),
            window_s: self.cfg.policy.boost_window_ms as f64 / 1000.0,
            half_life_ms: self.cfg.half_life_ms,
            now,
            ncpu: self.ncpu,
        };
        let gone = self.obs.observe(&ctx, self.desired.jobs.values());
        self.obs.busy |= self.sessions.busy();
        // The backend's upkeep (systemd: held-back funding writes, holders): what it could
        // not write is forgotten, so the plan writes it again.
        for (rel, e) in self.tree.cg.upkeep() {
            log::error!("{rel}: {e}");
            self.tree.forget(&rel);
        }
        self.repair(gone);
        self.reap(now);
        self.logouts(now);
        // At rest (nothing ran, no usage left in any window) the plan cannot have changed.
        if self.obs.busy {
            self.split_niced();
            self.replan();
        }
        self.apply_memory();
    }

    /// How long until the next tick: `tick_ms` while anything runs, slower at rest (the
    /// first tick after something starts finds it, then ticks are fast again).
    pub fn tick_interval(&self) -> Duration {
        let t = Duration::from_millis(self.cfg.tick_ms);
        if self.obs.busy {
            t
        } else {
            t.max(Duration::from_millis(500))
        }
    }

    fn params(&self) -> Params {
        self.cfg.policy.params(self.features.custom_slices)
    }

    fn machine(&self) -> Machine {
        Machine { ncpu: self.ncpu, outside: self.obs.machine.outside }
    }

    /// Plans from desired + observed and applies the difference. Also called right after a
    /// request changed the job set, so a new job is planned (boosted: it has used nothing)
    /// by the same function as every other, at once.
    pub fn replan(&mut self) {
        let mut cur_ids: Vec<CurrencyId> = vec![];
        let mut cur_in: Vec<CurrencyIn> = vec![];
        let mut ids = vec![];
        let mut jobs_in = vec![];
        for j in self.desired.jobs.values() {
            let ci = match cur_ids.iter().position(|c| *c == j.currency) {
                Some(i) => i,
                None => {
                    cur_ids.push(j.currency.clone());
                    cur_in.push(CurrencyIn { funding: self.funding_of(&j.currency), cap: self.currency_cap(&j.currency).map(|c| c.cpus) });
                    cur_ids.len() - 1
                }
            };
            let t = self.obs.jobs.get(&j.id);
            jobs_in.push(JobIn {
                currency: ci,
                tickets: j.tickets.get(),
                cap: j.cap,
                background: j.background,
                focus: j.focus,
                usage: t.and_then(|t| t.usage),
                runnable: t.map_or(0, |t| t.runnable),
                cpus: t.map(|t| t.cpus.clone()).unwrap_or_default(),
                nice: t.map_or(0, |t| t.nice),
                waiting: t.is_some_and(|t| t.waiting),
                held: self.planned.jobs.get(&j.id).is_some_and(|p| p.held),
                idle_cpus: t.map_or(0.0, |t| t.idle_cpus),
            });
            ids.push(j.id);
        }
        // Login sessions (systemd): a claimant per user beside their jobs.
        let mut plan_cur = cur_in.clone();
        let (sess_uids, sess_in) = self.session_inputs(&cur_ids, &mut plan_cur);
        let (out, sess_out) = allot_model::session::plan_with_sessions(&self.params(), &self.machine(), &plan_cur, &jobs_in, &sess_in);
        self.apply_sessions(sess_uids, &sess_in, sess_out, &out.currencies);
        // Currencies: foreground weight from the plan, background always its funding.
        for (i, c) in cur_ids.iter().enumerate() {
            // Only the directories allot made or adopted (no stat per currency per tick).
            let fg = super::registry::currency_rel(Class::Foreground, c);
            if self.tree.applied.contains_key(&fg) {
                self.tree.weight(&fg, out.currencies[i].weight);
            }
            let bg = super::registry::currency_rel(Class::Background, c);
            if self.tree.applied.contains_key(&bg) {
                self.tree.weight(&bg, cur_in[i].funding);
            }
        }
        // On a systemd host a user's slice exists without jobs, from the first login:
        // the slices are listed once per plan, for funding and caps alike.
        let logged_in = self.logged_in();
        self.fund_slices(&cur_ids, &logged_in);
        self.weigh_scopes(&ids, &out.jobs);
        self.apply_currency_caps(&cur_ids, &logged_in);
        for (k, id) in ids.iter().enumerate() {
            let rel = self.desired.jobs[id].rel();
            let p = &out.jobs[k];
            self.tree.weight(&rel, p.weight);
            self.tree.max(&rel, p.quota);
            self.apply_slices(*id, p.slice_ns);
        }
        let now = Instant::now();
        for (k, id) in ids.iter().enumerate() {
            let p = &out.jobs[k];
            let e = self.since.entry(*id).or_default();
            match self.planned.jobs.get(id) {
                Some(old) => {
                    for (i, (a, b)) in [(old.boosted, p.boosted), (old.held, p.held), (old.niced, p.niced)].into_iter().enumerate() {
                        if a != b {
                            e[i] = Some(now);
                        }
                    }
                }
                None => *e = [Some(now); 3],
            }
        }
        self.since.retain(|id, _| self.desired.jobs.contains_key(id));
        self.planned = Planned {
            jobs: ids.iter().copied().zip(out.jobs).collect(),
            currencies: cur_ids.iter().cloned().zip(out.currencies.iter().map(|c| c.weight)).collect(),
            inputs: Some((cur_in, jobs_in, ids)),
        };
    }

    /// Gives a boosted job's fair threads the boost slice (remembering theirs), or gives
    /// them back their own. The kernel copies a custom slice at fork, so a thread born of
    /// a boosted one starts with the boost slice, as does every thread of a job boosted
    /// when a daemon before this one stopped: a boost slice allot did not write here is
    /// taken for inherited and given back as the kernel's default (0), never kept as the
    /// thread's own.
    fn apply_slices(&mut self, id: JobId, slice: Option<u64>) {
        // Nothing to do unless the decision or the thread list changed since last time.
        let gen = self.obs.jobs.get(&id).map_or(0, |t| t.threads_gen);
        if self.tree.slices_done.get(&id) == Some(&(slice, gen)) {
            return;
        }
        self.tree.slices_done.insert(id, (slice, gen));
        let threads: std::collections::HashSet<i32> = self.obs.jobs.get(&id).map(|t| t.threads.iter().copied().collect()).unwrap_or_default();
        let boost = self.params().boost_slice_ns;
        match slice {
            Some(ns) => {
                let have = self.tree.slices.entry(id).or_default();
                have.retain(|t, _| threads.contains(t));
                for &t in &threads {
                    if have.contains_key(&t) {
                        continue;
                    }
                    if let Some(orig) = self.host.slice(t) {
                        if self.host.set_slice(t, ns).is_ok() {
                            have.insert(t, if orig == ns { 0 } else { orig });
                        }
                    }
                }
            }
            None => {
                let have = self.tree.slices.remove(&id).unwrap_or_default();
                for (&t, &orig) in &have {
                    if threads.contains(&t) {
                        let _ = self.host.set_slice(t, orig);
                    }
                }
                // Threads never seen boosted that carry the boost slice: born of a boosted
                // thread since the last list, or boosted before a restart.
                if let Some(ns) = boost {
                    for &t in threads.iter().filter(|t| !have.contains_key(t)) {
                        if self.host.slice(t) == Some(ns) {
                            let _ = self.host.set_slice(t, 0);
                        }
                    }
                }
            }
        }
    }

    /// Jobs whose directory was removed from outside: re-created and their processes
    /// put back, when they still run where they were left (the root, or a source allot
    /// places from); otherwise the job is forgotten.
    fn repair(&mut self, gone: Vec<JobId>) {
        for id in gone {
            let Some(spec) = self.desired.jobs.get(&id).cloned() else { continue };
            let procs = self.obs.jobs.get(&id).map(|t| t.procs.clone()).unwrap_or_default();
            let mut back = vec![];
            for pid in procs {
                let Ok(p) = self.host.open(pid) else { continue };
                let here = self.tree.cg.path_of(pid).unwrap_or_default();
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
            self.counters.reconciled += 1;
            log::warn!("{}: its cgroup {} was removed from outside; re-created it and put back {n} of its processes", id, spec.rel());
            if let Some(t) = self.obs.jobs.get_mut(&id) {
                t.dirty = true;
            }
        }
    }

    /// Removes jobs that have been empty past the grace period.
    fn reap(&mut self, now: Instant) {
        let empty: Vec<JobId> = self
            .desired
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
            let spec = &self.desired.jobs[&id];
            let (rel, class, currency) = (spec.rel(), spec.class(), spec.currency.clone());
            match self.tree.cg.procs(&rel) {
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
        self.tree.rt_assign();
        let _ = self.save();
    }

    /// A currency's directory goes with its last job, so nothing allot made outlives its use
    /// (on a systemd host, the scope and the user's slice it started). It is made again, with
    /// its funding, for the next job. Kept on a systemd host while the currency is funded:
    /// there the funding is the slice's weight, which also weighs the user's logins.
    fn remove_currency_if_unused(&mut self, class: Class, c: &CurrencyId) {
        if self.desired.jobs.values().any(|j| j.class() == class && j.currency == *c) {
            return;
        }
        if self.tree.cg.systemd() && class == Class::Foreground && self.desired.funding.contains_key(c) {
            return;
        }
        let rel = super::registry::currency_rel(class, c);
        if !self.tree.cg.exists(&rel) {
            return;
        }
        self.watch.unwatch(&rel);
        if let Err(e) = self.tree.remove(&rel) {
            log::debug!("kept the currency directory {rel}: {e}");
            self.watch.watch(self.tree.cg.as_ref(), &rel);
        }
    }

    /// Drops a job from every kind of state (its directory is already gone).
    pub fn forget(&mut self, id: JobId) {
        self.desired.jobs.remove(&id);
        self.obs.jobs.remove(&id);
        self.planned.jobs.remove(&id);
        self.tree.slices.remove(&id);
        self.tree.slices_done.remove(&id);
    }

    /// Creates a job's directory (and its currency's) with the job's settings written.
    pub fn make_job_dir(&mut self, spec: &JobSpec) -> Result<(), String> {
        let crel = super::registry::currency_rel(spec.class(), &spec.currency);
        let fresh_currency = !self.tree.cg.exists(&crel);
        self.tree.create(&crel)?;
        if fresh_currency {
            let f = self.funding_of(&spec.currency);
            self.tree.weight(&crel, f);
            self.cap_currency_dir(&crel, &spec.currency);
            self.guard_fresh_currency(spec.class(), &spec.currency);
            self.watch.watch(self.tree.cg.as_ref(), &crel);
        }
        let rel = spec.rel();
        self.tree.create(&rel)?;
        self.tree.weight(&rel, spec.tickets.get());
        self.tree.max(&rel, spec.cap.filter(|c| c.hard).map(|c| c.cpus));
        self.tree.rt_assign();
        self.watch.watch(self.tree.cg.as_ref(), &rel);
        Ok(())
    }

    /// Petrou et al. 1999 §3.4 acts per process: a niced process in a user's shared default job gets
    /// a job of its own, so nice lowers that process and not the user's others.
    fn split_niced(&mut self) {
        if !self.cfg.policy.nice_emulation {
            return;
        }
        let mut todo = vec![];
        for j in self.desired.jobs.values().filter(|j| matches!(j.id, JobId::Default(_)) && !j.background) {
            let Some(t) = self.obs.jobs.get(&j.id) else { continue };
            if t.procs.len() < 2 || t.usage.is_none_or(|u| u.window <= plan::ACTIVE_CPUS) {
                continue;
            }
            for pid in t.niced().take(16) {
                todo.push((pid, j.clone()));
            }
        }
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
            let mut spec = JobSpec::new(self.desired.take_id(), parent.currency.clone(), parent.owner);
            spec.tickets = parent.tickets;
            if self.make_job_dir(&spec).is_err() {
                continue;
            }
            match self.tree.move_verified(self.host.as_ref(), &p, &spec.rel()) {
                Ok(()) => {
                    log::debug!("process {pid} (nice {}) of {} got a job of its own: {}", self.host.nice(pid).unwrap_or(0), parent.id, spec.id);
                    self.desired.jobs.insert(spec.id, spec);
                    if let Some(t) = self.obs.jobs.get_mut(&parent.id) {
                        t.dirty = true;
                    }
                }
                Err(_) => {
                    let _ = self.tree.remove(&spec.rel());
                }
            }
        }
        let _ = self.save();
    }

    /// Takes back every dynamic adjustment: slices, boost and nice weights, held soft caps
    /// (a clean stop, so nothing outlives the daemon's attention).
    pub fn undo_dynamic(&mut self) {
        self.undo_memory();
        self.undo_sessions();
        for id in self.tree.slices.keys().copied().collect::<Vec<_>>() {
            self.apply_slices(id, None);
        }
        let specs: Vec<JobSpec> = self.desired.jobs.values().cloned().collect();
        for j in &specs {
            self.tree.weight(&j.rel(), j.tickets.get());
            self.tree.max(&j.rel(), j.cap.filter(|c| c.hard).map(|c| c.cpus));
            let f = self.funding_of(&j.currency);
            for class in [Class::Foreground, Class::Background] {
                let c = super::registry::currency_rel(class, &j.currency);
                if self.tree.cg.exists(&c) {
                    self.tree.weight(&c, f);
                }
            }
        }
    }

    /// Opens a pid for a request, naming what is wrong in the user's words.
    pub fn open_for_request(&self, pid: i32) -> Result<super::host::Proc, String> {
        self.host.open(pid).map_err(|e| match e {
            OpenError::Gone => format!("no process {pid} (it does not exist or has exited)"),
            OpenError::Other(k) => format!("cannot open process {pid}: {k}"),
        })
    }

    /// Moves a held process, in words for a request.
    pub fn move_for_request(&mut self, p: &super::host::Proc, rel: &str) -> Result<(), String> {
        self.tree.move_verified(self.host.as_ref(), p, rel).map_err(|e| match e {
            MoveError::Gone => format!("process {} exited; nothing was changed", p.pid),
            MoveError::Kernel(k) => format!("could not move process {} into {rel}: {k}", p.pid),
        })
    }
}
