//! The dynamic policy as one pure function: what every job and currency should look like
//! in the kernel now, given what users asked for and what was measured.
//!
//! The daemon observes (usage, threads, nice, waits), calls [`plan`], and writes only what
//! differs from what it last wrote. Everything the policy decides is here, in one place:
//!
//! - **entitlement** — one formula, the two-level max–min water-fill of
//!   [`crate::entitlements`] over the *effective* weights (nice emulation applied), the
//!   threads a job can actually run, the CPUs it may use, and the CPU that load outside
//!   allot takes; [`entitlement_if_joined`] is the same formula with an idle job added;
//! - **boost** (Petrou et al. 1999 §3.3, windowed ticket boost) — one rule, [`boost_rule`],
//!   which returns why ([`Boost`]);
//! - **soft caps** (EBS 2004) — held while others want the CPU, [`crate::policy::soft_cap_hold`],
//!   which returns why ([`crate::policy::Hold`]);
//! - **nice emulation** (Petrou et al. 1999 §3.4) — [`crate::policy::nice_emulation`];
//! - **cpu.max** — one composition: a hard cap, or a soft cap while it is held. Nothing else
//!   ever writes a quota, so a program that sizes its thread pool from the cgroup quota (Rust's
//!   `available_parallelism`, the JVM, Go's automaxprocs) sees every CPU it may use unless
//!   its user or the admin set a cap.
//!
//! The boost buys latency, never CPU: its weight is withdrawn at the first tick in which the
//! job used its entitlement (see [`boost_rule`]), and nothing about it survives a restart,
//! because every adjustment is recomputed from the users' settings, never read back.
//!
//! Each decision comes with its reason and the thresholds that made it ([`JobPlan::boost`],
//! [`JobPlan::boost_limits`], [`JobPlan::hold`]): `allot explain` renders these, never
//! recomputes them. Every threshold is a named constant here or in [`crate::policy`].

use crate::entitlement::{entitlements, Claimant, CurrencyClaim};
use crate::policy::{nice_emulation, soft_cap_hold, Hold, NiceClaim};
use crate::Cap;

/// A job that used more than this many CPUs, over the boost window or in the last tick, is
/// active: it competes for CPU now and counts in the water-fill (half a percent of a CPU).
pub const ACTIVE_CPUS: f64 = 0.005;

/// A job that used at least this fraction of its entitlement in the last tick loses its
/// boost at once, whatever its window says, so the boost's weight never buys CPU for longer
/// than one tick (see [`boost_rule`]).
pub const BOOST_LAST_TICK_BELOW: f64 = 0.75;

/// Default [`Params::boost_below`]: half the entitlement, so a CPU-bound job, which gets
/// about its entitlement, is not boosted by noise (docs/policy.md).
pub const DEFAULT_BOOST_BELOW: f64 = 0.5;

/// Default [`Params::boost_weight`]: a boosted job's weight is its own times 100 (at most
/// 10000), so it is eligible whenever it wakes.
pub const DEFAULT_BOOST_WEIGHT: f64 = 100.0;

/// Default boost window, ms: the usage compared with the entitlement is taken over this
/// long (the daemon's `policy.boost_window_ms`; Petrou et al. 1999 used 10 × 1 s).
pub const DEFAULT_BOOST_WINDOW_MS: u64 = 500;

/// The shortest boost window, ms: the shortest `tick_ms` (the daemon's window is at least
/// its tick).
pub const MIN_BOOST_WINDOW_MS: u64 = 50;

/// The longest boost window, ms.
pub const MAX_BOOST_WINDOW_MS: u64 = 60_000;

/// The policy's parameters (the daemon's `[policy]` config).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// Boost jobs that use less than their entitlement.
    pub boost: bool,
    /// Interactive while usage over the window is below this fraction of the entitlement.
    pub boost_below: f64,
    /// A boosted job's weight is its effective weight times this (at most 10000).
    pub boost_weight: f64,
    /// The EEVDF slice a boosted job's tasks get, ns; None: slices are left alone.
    pub boost_slice_ns: Option<u64>,
    /// Emulate nice across currencies (Petrou et al. 1999 §3.4).
    pub nice_emulation: bool,
}

impl Default for Params {
    fn default() -> Self {
        Self { boost: true, boost_below: DEFAULT_BOOST_BELOW, boost_weight: DEFAULT_BOOST_WEIGHT, boost_slice_ns: None, nice_emulation: true }
    }
}

/// The machine as the plan sees it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Machine {
    /// CPUs online.
    pub ncpu: usize,
    /// CPUs that load outside allot's tree took lately (smoothed): what allot cannot give.
    pub outside: f64,
    /// Per CPU, the fraction of it that was busy over the last tick, whoever ran (empty:
    /// not measured). Tells how much of the outside load falls on the CPUs pinned jobs
    /// may use.
    pub busy: Vec<f64>,
}

/// One currency's input.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CurrencyIn {
    /// Its funding, 1..10000.
    pub funding: u32,
    /// Its hard cap, CPUs (None: none): its jobs together are entitled to no more.
    pub cap: Option<f64>,
}

/// What was measured of a job (None in [`JobIn::usage`]: not measured yet, a new job).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Usage {
    /// CPUs used over the boost window.
    pub window: f64,
    /// CPUs used over the last tick.
    pub last: f64,
}

impl Usage {
    /// It used more than [`ACTIVE_CPUS`] over the window or in the last tick.
    pub fn active(&self) -> bool {
        self.window > ACTIVE_CPUS || self.last > ACTIVE_CPUS
    }
}

/// One job's input: what its user asked for and what was measured.
#[derive(Debug, Clone, PartialEq)]
pub struct JobIn {
    /// Index of its currency in the currencies slice.
    pub currency: usize,
    /// Tickets as the user set them, 1..10000.
    pub tickets: u32,
    /// Cap as the user set it (never the background soft 0: that is `background`).
    pub cap: Option<Cap>,
    /// Runs on idle CPU only.
    pub background: bool,
    /// Focused by its user (Ross and Abel's foreground hint): boosted whatever its history.
    pub focus: bool,
    /// Measured usage; None until the job has been observed twice.
    pub usage: Option<Usage>,
    /// Threads that ran or waited for CPU lately (a sleeping parent does not count).
    pub runnable: u32,
    /// CPUs it may run on (its affinity); empty: all of them.
    pub cpus: Vec<usize>,
    /// The lowest nice of its processes.
    pub nice: i32,
    /// Its threads waited for CPU during the last tick (it wants CPU it is not getting).
    pub waiting: bool,
    /// Its soft cap was held in the previous plan (holding has hysteresis).
    pub held: bool,
    /// Idle CPU lately on the CPUs it may run on (a held soft cap is released when more than
    /// [`crate::policy::RELEASE_IDLE_CPUS`]).
    pub idle_cpus: f64,
}

impl JobIn {
    /// Competing for CPU now: it used more than [`ACTIVE_CPUS`] lately ([`Usage::active`]).
    pub fn active(&self) -> bool {
        self.usage.is_some_and(|u| u.active())
    }
}

/// What one job should look like now.
#[derive(Debug, Clone, PartialEq)]
pub struct JobPlan {
    /// CPUs it gets now among the active claimants (for an idle job: 0; see
    /// [`entitlement_if_joined`]).
    pub entitlement: f64,
    /// Boosted: its weight is multiplied and its tasks get the boost slice (`boost.on()`).
    pub boosted: bool,
    /// Why it is or is not boosted.
    pub boost: Boost,
    /// The usages at which its boost ends, for its entitlement now.
    pub boost_limits: BoostLimits,
    /// Its soft cap is held (written as cpu.max; `hold.is_some_and(Hold::held)`).
    pub held: bool,
    /// Why its soft cap is or is not held; None: it has no soft cap (or is background).
    pub hold: Option<Hold>,
    /// Nice emulation lowered (or raised) its weight.
    pub niced: bool,
    /// The job's weight, 1..10000.
    pub weight: u32,
    /// Its weight without the boost, 1..10000 (its tickets, or as nice emulation set them):
    /// what allot's sched_ext scheduler is sent, which does not take the boost per tick
    /// (docs/scx.md).
    pub base_weight: u32,
    /// cpu.max in CPUs: a hard cap, or a held soft cap. None: unlimited.
    pub quota: Option<f64>,
    /// The EEVDF slice its fair tasks should have, ns (None: their own).
    pub slice_ns: Option<u64>,
}

/// What one currency should look like now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CurrencyPlan {
    /// Its weight, 1..10000: its funding, or under nice emulation the sum of its active
    /// jobs' thresholded base tickets.
    pub weight: u32,
    /// Its background directory's weight: its funding always (background jobs run on idle
    /// CPU only, so nice emulation has nothing to weigh there).
    pub background_weight: u32,
}

/// The whole plan, indexed like the inputs.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Per job.
    pub jobs: Vec<JobPlan>,
    /// Per currency (foreground weights; background currencies always weigh their funding).
    pub currencies: Vec<CurrencyPlan>,
}

/// A job's cpu.max in CPUs: its hard cap always, its soft cap while held; None: unlimited.
pub fn quota(cap: Option<Cap>, held: bool) -> Option<f64> {
    cap.filter(|c| c.hard || held).map(|c| c.cpus)
}

/// A job's settings at rest, with no adjustment: its tickets as its weight and its hard cap
/// as its quota. What a new job's directory gets before its first plan (so a hard cap
/// holds from the first process in it) and what a clean stop leaves; the plan of a job
/// nothing adjusts (not boosted, not held, not niced, alone in its currency's weighting)
/// is the same.
pub fn at_rest(tickets: u32, cap: Option<Cap>) -> (u32, Option<f64>) {
    (weight(tickets as f64), quota(cap, false))
}

/// Whether a user's shared default job gives its niced processes jobs of their own
/// (Petrou et al. 1999 §3.4 acts per process, so nice lowers that process and not the
/// user's others): it holds more than one process and is active over the boost window
/// (`window_cpus` above [`ACTIVE_CPUS`]; None: not measured yet).
pub fn splits_niced(processes: usize, window_cpus: Option<f64>) -> bool {
    processes >= 2 && window_cpus.is_some_and(|w| w > ACTIVE_CPUS)
}

/// Clamps a weight into the kernel range allot uses (tickets' and funding's).
pub fn weight(w: f64) -> u32 {
    if w.is_finite() {
        (w.round().clamp(crate::units::MIN as f64, crate::units::MAX as f64)) as u32
    } else {
        1
    }
}

/// Why a job is or is not boosted: the branch of [`boost_rule`] that decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Boost {
    /// Not boosted: the boost is off ([`Params::boost`]).
    Off,
    /// Not boosted: background jobs take only idle CPU.
    Background,
    /// Boosted: focused by its user, whatever it uses.
    Focused,
    /// Boosted: not measured yet, so it counts as having used none of its entitlement.
    New,
    /// Boosted: it used at most [`ACTIVE_CPUS`], over the window and in the last tick.
    Asleep,
    /// Boosted: below both [`BoostLimits`].
    Interactive,
    /// Not boosted: it used at least [`BoostLimits::last`] in the last tick.
    CpuBound,
    /// Not boosted: it used at least [`BoostLimits::window`] over the window.
    Busy,
}

impl Boost {
    /// Boosted.
    pub fn on(self) -> bool {
        matches!(self, Boost::Focused | Boost::New | Boost::Asleep | Boost::Interactive)
    }
}

/// The usages at which a measured, active job stops being boosted, for its entitlement now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BoostLimits {
    /// The job's entitlement, CPUs.
    pub entitlement: f64,
    /// [`Params::boost_below`].
    pub window_fraction: f64,
    /// Boosted only while the window's usage is below this: `window_fraction` × entitlement.
    pub window: f64,
    /// [`BOOST_LAST_TICK_BELOW`].
    pub last_fraction: f64,
    /// Boosted only while the last tick's usage is below this: `last_fraction` × entitlement.
    pub last: f64,
}

impl BoostLimits {
    /// The limits for an entitlement.
    pub fn new(p: &Params, entitlement: f64) -> Self {
        Self {
            entitlement,
            window_fraction: p.boost_below,
            window: p.boost_below * entitlement,
            last_fraction: BOOST_LAST_TICK_BELOW,
            last: BOOST_LAST_TICK_BELOW * entitlement,
        }
    }
}

/// The boost rule (Petrou et al. 1999 §3.3): a job that used less than it deserved is interactive
/// and boosted; one asleep or never measured (f = 0, "the maximum boost") is too, and so
/// is a focused job. Two differences from the paper, both measured in docs/policy.md:
/// the threshold is half the entitlement over a short window (a CPU-bound job at its
/// entitlement is not boosted by noise, and the boost follows a change within a few
/// ticks, where the paper needed about 7 s); and a job that used at least [`BOOST_LAST_TICK_BELOW`] of
/// its entitlement in the last tick loses the boost at once, so the boost's weight never
/// buys CPU for longer than one tick. Background jobs are never boosted: they take only idle
/// CPU. Returns the branch that decided ([`Boost::on`]: boosted).
pub fn boost_rule(p: &Params, job: &JobIn, entitlement: f64) -> Boost {
    if job.background {
        return Boost::Background;
    }
    if !p.boost {
        return Boost::Off;
    }
    if job.focus {
        return Boost::Focused;
    }
    let l = BoostLimits::new(p, entitlement);
    match job.usage {
        None => Boost::New,
        Some(u) if !u.active() => Boost::Asleep,
        Some(u) if u.window < l.window && u.last < l.last => Boost::Interactive,
        Some(u) if u.last >= l.last => Boost::CpuBound,
        Some(_) => Boost::Busy,
    }
}

/// Effective (nice-emulated) weights: per currency, and per job inside its currency.
fn effective_weights(p: &Params, currencies: &[CurrencyIn], jobs: &[JobIn]) -> (Vec<f64>, Vec<f64>, Vec<bool>) {
    let mut cur_w: Vec<f64> = currencies.iter().map(|c| c.funding as f64).collect();
    let mut job_w: Vec<f64> = jobs.iter().map(|j| j.tickets as f64).collect();
    let mut niced = vec![false; jobs.len()];
    if !p.nice_emulation {
        return (cur_w, job_w, niced);
    }
    let mut members: Vec<Vec<usize>> = vec![vec![]; currencies.len()];
    for (i, j) in jobs.iter().enumerate().filter(|(_, j)| !j.background) {
        if let Some(m) = members.get_mut(j.currency) {
            m.push(i);
        }
    }
    for (ci, idxs) in members.iter().enumerate() {
        if idxs.is_empty() {
            continue;
        }
        let claims: Vec<NiceClaim> =
            idxs.iter().map(|&i| NiceClaim { tickets: jobs[i].tickets as f64, nice: jobs[i].nice, active: jobs[i].active() }).collect();
        let (cw, jw) = nice_emulation(currencies[ci].funding as f64, &claims);
        cur_w[ci] = cw;
        for (k, &i) in idxs.iter().enumerate() {
            niced[i] = (jw[k] - jobs[i].tickets as f64).abs() > 1e-9;
            job_w[i] = jw[k];
        }
    }
    (cur_w, job_w, niced)
}

/// The most CPUs a job can use now: its runnable threads, its CPUs, its hard cap (or a
/// held soft cap), the machine.
fn ceiling(m: &Machine, j: &JobIn, held: bool) -> f64 {
    let mut c = (j.runnable.max(1) as f64).min(m.ncpu.max(1) as f64);
    if !j.cpus.is_empty() {
        c = c.min(j.cpus.len() as f64);
    }
    if let Some(cap) = j.cap {
        if cap.hard || held {
            c = c.min(cap.cpus);
        }
    }
    c
}

/// CPUs allot can give: the CPUs its active jobs may use (all, unless they are pinned),
/// less what load outside allot takes of them. When every active job is pinned to a set
/// of CPUs, the outside load there is what those CPUs were busy with less what allot's
/// jobs used (all of which ran there), at most the machine's outside load: outside load
/// on the other CPUs takes nothing from them.
fn capacity(m: &Machine, jobs: &[JobIn], active: impl Fn(usize) -> bool) -> f64 {
    let n = m.ncpu.max(1);
    let mut allowed = vec![false; n];
    let mut any = false;
    for (_, j) in jobs.iter().enumerate().filter(|(i, _)| active(*i)) {
        any = true;
        if j.cpus.is_empty() {
            allowed.iter_mut().for_each(|a| *a = true);
        }
        for &c in &j.cpus {
            if c < n {
                allowed[c] = true;
            }
        }
    }
    let count = if any { allowed.iter().filter(|&&a| a).count().max(1) } else { n };
    let outside = m.outside.max(0.0);
    let outside = if any && count < n && m.busy.len() == n {
        let busy: f64 = m.busy.iter().zip(&allowed).filter(|(_, &a)| a).map(|(b, _)| b.clamp(0.0, 1.0)).sum();
        let used: f64 = jobs.iter().enumerate().filter(|(i, _)| active(*i)).filter_map(|(_, j)| j.usage).map(|u| u.last.max(0.0)).sum();
        (busy - used).clamp(0.0, outside)
    } else {
        outside
    };
    (count as f64 - outside).max(0.0)
}

fn water(
    m: &Machine,
    cur: &[CurrencyIn],
    cur_w: &[f64],
    job_w: &[f64],
    jobs: &[JobIn],
    held: &[bool],
    active: impl Fn(usize) -> bool + Copy,
) -> Vec<f64> {
    let mut claims: Vec<CurrencyClaim> =
        cur_w.iter().zip(cur).map(|(&f, c)| CurrencyClaim { funding: f, cap: c.cap.unwrap_or(f64::INFINITY), jobs: vec![] }).collect();
    let mut place = Vec::with_capacity(jobs.len());
    for (i, j) in jobs.iter().enumerate() {
        let Some(c) = claims.get_mut(j.currency) else {
            place.push(None);
            continue;
        };
        place.push(Some((j.currency, c.jobs.len())));
        c.jobs.push(Claimant { tickets: job_w[i], ceiling: ceiling(m, j, held[i]), active: active(i), background: j.background });
    }
    let e = entitlements(capacity(m, jobs, active), &claims);
    place.iter().map(|p| p.map_or(0.0, |(c, k)| e[c][k])).collect()
}

/// The plan. Pure and deterministic: the same input gives the same plan.
pub fn plan(p: &Params, m: &Machine, currencies: &[CurrencyIn], jobs: &[JobIn]) -> Plan {
    let (cur_w, job_w, niced) = effective_weights(p, currencies, jobs);
    // Soft caps first: a held cap is a ceiling the entitlement must respect.
    let others_waiting = jobs.iter().filter(|j| j.waiting).count();
    let hold: Vec<Option<Hold>> = jobs
        .iter()
        .map(|j| match j.cap {
            Some(c) if !c.hard && !j.background => {
                let others = others_waiting - usize::from(j.waiting) > 0;
                Some(soft_cap_hold(j.held, j.usage.map_or(0.0, |u| u.window), c.cpus, others, j.idle_cpus))
            }
            _ => None,
        })
        .collect();
    let held: Vec<bool> = hold.iter().map(|h| h.is_some_and(Hold::held)).collect();
    let ent = water(m, currencies, &cur_w, &job_w, jobs, &held, |i| jobs[i].active());
    let out = jobs
        .iter()
        .enumerate()
        .map(|(i, j)| {
            let boost = boost_rule(p, j, ent[i]);
            let boosted = boost.on();
            let mut w = if j.background { j.tickets as f64 } else { job_w[i] };
            let base_weight = weight(w);
            if boosted {
                w *= p.boost_weight;
            }
            let quota = quota(j.cap, held[i]);
            JobPlan {
                entitlement: ent[i],
                boosted,
                boost,
                boost_limits: BoostLimits::new(p, ent[i]),
                held: held[i],
                hold: hold[i],
                niced: niced[i],
                weight: weight(w),
                base_weight,
                quota,
                slice_ns: if boosted { p.boost_slice_ns } else { None },
            }
        })
        .collect();
    let currencies = cur_w.iter().zip(currencies).map(|(&w, c)| CurrencyPlan { weight: weight(w), background_weight: c.funding }).collect();
    Plan { jobs: out, currencies }
}

/// What an idle job would get if it woke now: the same water-fill with it added to the
/// active claimants. O(jobs); for display (`allot show`), not for every tick.
pub fn entitlement_if_joined(p: &Params, m: &Machine, currencies: &[CurrencyIn], jobs: &[JobIn], job: usize) -> f64 {
    if job >= jobs.len() {
        return 0.0;
    }
    // The job as if it ran: it counts in its currency's nice emulation too.
    let mut woke = jobs.to_vec();
    woke[job].usage = Some(Usage { window: 1.0, last: 1.0 });
    let (cur_w, job_w, _) = effective_weights(p, currencies, &woke);
    let held: Vec<bool> = woke.iter().map(|j| j.held).collect();
    water(m, currencies, &cur_w, &job_w, &woke, &held, |i| woke[i].active())[job]
}

/// [`entitlement_if_joined`] for every job that is not active (`None` for an active one),
/// each distinct job computed once: jobs equal in every input are interchangeable, so they
/// would get the same. A user with 250 identical idle jobs costs one water-fill a `show`,
/// not 250 (a `show` is built in the daemon's loop, which serves everyone).
pub fn entitlements_if_joined(p: &Params, m: &Machine, currencies: &[CurrencyIn], jobs: &[JobIn]) -> Vec<Option<f64>> {
    let mut seen: Vec<(&JobIn, f64)> = vec![];
    jobs.iter()
        .enumerate()
        .map(|(k, j)| {
            if j.active() {
                return None;
            }
            if let Some(&(_, e)) = seen.iter().find(|(s, _)| *s == j) {
                return Some(e);
            }
            let e = entitlement_if_joined(p, m, currencies, jobs, k);
            seen.push((j, e));
            Some(e)
        })
        .collect()
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
