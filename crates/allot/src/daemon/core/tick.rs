//! The tick's three named steps: `gather` (the observed state from the kernel), `plan`
//! (desired + observed → the model's decisions and the writes they mean, computed without
//! writing anything), and `apply` (the writes that differ from the applied state, the
//! boost slices, the sessions' share; every failure returned). `replan` is plan → apply →
//! report → keep, run each busy tick and right after a request changed the job set.

use super::{Daemon, Planned};
use crate::daemon::applied::{Failure, Node, Setting, Write};
use crate::daemon::observe::Ctx;
use crate::daemon::registry::{Class, CurrencyId, JobId};
use allot_model::plan::{CurrencyIn, JobIn, JobPlan, Machine, Params, Plan};
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

/// One plan: its inputs, the model's decisions, and what they mean for the tree.
pub(in crate::daemon) struct TickPlan {
    /// Jobs in the order of `jobs_in` and `out.jobs`.
    ids: Vec<JobId>,
    /// Currencies in the order of `cur_in` and `out.currencies`.
    cur_ids: Vec<CurrencyId>,
    cur_in: Vec<CurrencyIn>,
    jobs_in: Vec<JobIn>,
    out: Plan,
    /// Login sessions (systemd): the users with sessions, each one's input and plan.
    sessions: (Vec<u32>, Vec<allot_model::session::SessionIn>, Vec<JobPlan>),
    /// Weights and caps of currencies, scopes and jobs, in the order they are written.
    writes: Vec<Write>,
}

/// The apply step's own memory: per boosted job and thread the slice it had before, per
/// job the slice decision and thread-list generation last applied, and when each kind of
/// failure was last logged.
#[derive(Default)]
pub(in crate::daemon) struct Applier {
    slices: HashMap<JobId, HashMap<i32, u64>>,
    slices_done: HashMap<JobId, (Option<u64>, u64)>,
    logged: HashMap<String, Instant>,
}

impl Applier {
    /// A job gone from every kind of state.
    pub(super) fn forget(&mut self, id: JobId) {
        self.slices.remove(&id);
        self.slices_done.remove(&id);
    }
    /// Applies every job's slice decision again at the next plan.
    pub(super) fn redo_slices(&mut self) {
        self.slices_done.clear();
    }
    /// The jobs whose threads carry the boost slice.
    pub(super) fn boosted(&self) -> Vec<JobId> {
        self.slices.keys().copied().collect()
    }
}

impl Daemon {
    /// Gather: observes the login sessions and every job (usage, threads, waits), and
    /// re-sends what the backend held back. Returns the jobs whose directory is gone.
    pub(super) fn gather(&mut self, now: Instant) -> Vec<JobId> {
        self.observe_sessions(now);
        self.obs.sessions_ns = self.sessions.used_ns;
        let ctx = Ctx {
            cg: self.tree.cg(),
            host: self.host.as_ref(),
            window_s: self.cfg.policy.boost_window_ms as f64 / 1000.0,
            half_life_ms: self.cfg.half_life_ms,
            now,
            ncpu: self.kernel.ncpu(),
        };
        let gone = self.obs.observe(&ctx, self.registry.desired().jobs.values());
        self.obs.busy |= self.sessions.busy();
        // The backend's upkeep (systemd: held-back funding writes, holders): what it could
        // not write is counted and forgotten, so the plan writes it again.
        for (rel, e) in self.tree.cg().upkeep() {
            log::error!("{rel}: {e}");
            self.serving.counters_mut().write_errors += 1;
            self.forget_applied(Node::of_rel(&rel).as_ref());
        }
        gone
    }

    /// Forgets what was written to `node` (None: everywhere), so the next plan writes it
    /// again; every job's slice decision is applied again too.
    pub fn forget_applied(&mut self, node: Option<&Node>) {
        match node {
            Some(n) => self.tree.applied_mut().forget(n),
            None => self.tree.applied_mut().forget_all(),
        }
        self.applier.redo_slices();
    }

    pub(super) fn params(&self) -> Params {
        self.cfg.policy.params(self.kernel.features().custom_slices)
    }

    fn machine(&self) -> Machine {
        Machine { ncpu: self.kernel.ncpu(), outside: self.obs.machine.outside, busy: self.obs.machine.busy() }
    }

    /// Plan: the model's decisions from desired + observed, and the writes they mean.
    /// Writes nothing.
    pub(in crate::daemon) fn plan(&self) -> TickPlan {
        let mut cur_ids: Vec<CurrencyId> = vec![];
        let mut cur_in: Vec<CurrencyIn> = vec![];
        let mut ids = vec![];
        let mut jobs_in = vec![];
        for j in self.registry.desired().jobs.values() {
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
        let mut writes = vec![];
        // Currencies: both classes' weights from the plan; only the directories allot made
        // or adopted (no stat per currency per tick).
        for (i, c) in cur_ids.iter().enumerate() {
            for (class, w) in [(Class::Foreground, out.currencies[i].weight), (Class::Background, out.currencies[i].background_weight)] {
                let wr = Write::currency(class, c, Setting::Weight(w));
                if self.tree.applied().knows(&wr.node) {
                    writes.push(wr);
                }
            }
        }
        // On a systemd host a user's slice exists without jobs, from the first login:
        // the slices are listed once per plan, for funding and caps alike.
        let logged_in = self.logged_in();
        writes.extend(self.backend.plan_writes(self, &cur_ids, &logged_in, &ids, &out.jobs));
        writes.extend(self.currency_caps(&cur_ids, &logged_in));
        for (id, p) in ids.iter().zip(&out.jobs) {
            let spec = &self.registry.desired().jobs[id];
            writes.push(Write::job(spec, Setting::Weight(p.weight)));
            writes.push(Write::job(spec, Setting::Max(p.quota)));
        }
        TickPlan { ids, cur_ids, cur_in, jobs_in, out, sessions: (sess_uids, sess_in, sess_out), writes }
    }

    /// Apply: the sessions' share, every write that differs from the applied state, and
    /// each job's boost slice. Returns every failure.
    pub(in crate::daemon) fn apply(&mut self, plan: &TickPlan) -> Vec<Failure> {
        // A niced session user's currency weight reaches their slice with the next plan's
        // funding writes (session_weight), one tick after it is decided here.
        self.apply_sessions(plan.sessions.0.clone(), &plan.sessions.1, plan.sessions.2.clone(), &plan.out.currencies);
        let mut failures = self.tree.apply(&plan.writes);
        for (id, p) in plan.ids.iter().zip(&plan.out.jobs) {
            failures.extend(self.apply_slices(*id, p.slice_ns));
        }
        failures
    }

    /// Logs each failure (once a minute per place, value kind and error) and counts it.
    pub fn report(&mut self, failures: Vec<Failure>) {
        let now = Instant::now();
        for f in failures {
            self.serving.counters_mut().write_errors += 1;
            let key = format!("{} {} {}", f.what, f.place, f.error);
            if self.applier.logged.get(&key).is_none_or(|t| now.duration_since(*t) > Duration::from_secs(60)) {
                log::error!("{f}");
                self.applier.logged.insert(key, now);
            }
        }
    }

    /// Keeps the plan for `show` and `explain`, with when each job's boost, hold and nice
    /// emulation last changed.
    fn keep(&mut self, plan: TickPlan) {
        let now = Instant::now();
        let mut since = std::mem::take(&mut self.planned.since);
        for (id, p) in plan.ids.iter().zip(&plan.out.jobs) {
            let e = since.entry(*id).or_default();
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
        since.retain(|id, _| self.registry.desired().jobs.contains_key(id));
        self.planned = Planned {
            jobs: plan.ids.iter().copied().zip(plan.out.jobs).collect(),
            currencies: plan.cur_ids.iter().cloned().zip(plan.out.currencies.iter().map(|c| c.weight)).collect(),
            inputs: Some((plan.cur_in, plan.jobs_in, plan.ids)),
            since,
        };
    }

    /// Plans from desired + observed and applies the difference. Also called right after a
    /// request changed the job set, so a new job is planned (boosted: it has used nothing)
    /// by the same function as every other, at once.
    pub fn replan(&mut self) {
        let plan = self.plan();
        let failures = self.apply(&plan);
        self.report(failures);
        self.keep(plan);
        self.feed_scx();
    }

    /// Gives a boosted job's fair threads the boost slice (remembering theirs), or gives
    /// them back their own. The kernel copies a custom slice at fork, so a thread born of
    /// a boosted one starts with the boost slice, as does every thread of a job boosted
    /// when a daemon before this one stopped: a boost slice allot did not write here is
    /// taken for inherited and given back as the kernel's default (0), never kept as the
    /// thread's own. A thread that exited or left the fair class is no failure.
    pub(super) fn apply_slices(&mut self, id: JobId, slice: Option<u64>) -> Vec<Failure> {
        let mut failures = vec![];
        // Nothing to do unless the decision or the thread list changed since last time.
        let gen = self.obs.jobs.get(&id).map_or(0, |t| t.threads_gen);
        if self.applier.slices_done.get(&id) == Some(&(slice, gen)) {
            return failures;
        }
        self.applier.slices_done.insert(id, (slice, gen));
        let threads: HashSet<i32> = self.obs.jobs.get(&id).map(|t| t.threads.iter().copied().collect()).unwrap_or_default();
        let boost = self.params().boost_slice_ns;
        let host = self.host.as_ref();
        let mut set = |t: i32, ns: u64| match host.set_slice(t, ns) {
            Ok(()) => true,
            Err(e) => {
                if host.slice(t).is_some() {
                    failures.push(Failure { what: "set the slice of", place: format!("thread {t} of {id}"), value: format!("{ns} ns"), error: e });
                }
                false
            }
        };
        match slice {
            Some(ns) => {
                let have = self.applier.slices.entry(id).or_default();
                have.retain(|t, _| threads.contains(t));
                for &t in &threads {
                    if have.contains_key(&t) {
                        continue;
                    }
                    if let Some(orig) = host.slice(t) {
                        if set(t, ns) {
                            have.insert(t, if orig == ns { 0 } else { orig });
                        }
                    }
                }
            }
            None => {
                let have = self.applier.slices.remove(&id).unwrap_or_default();
                for (&t, &orig) in &have {
                    if threads.contains(&t) {
                        set(t, orig);
                    }
                }
                // Threads never seen boosted that carry the boost slice: born of a boosted
                // thread since the last list, or boosted before a restart.
                if let Some(ns) = boost {
                    for &t in threads.iter().filter(|t| !have.contains_key(t)) {
                        if host.slice(t) == Some(ns) {
                            set(t, 0);
                        }
                    }
                }
            }
        }
        failures
    }
}
