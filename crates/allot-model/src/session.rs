//! Login sessions on a systemd host: processes the policy reaches without a cgroup of its
//! own (systemd owns `session-N.scope`; allot never moves a process out of it nor writes a
//! file of it). Three decisions, each pure:
//!
//! - **The plan counts them.** A user's busy session scopes are one claimant of
//!   [`crate::scope::SESSION_WEIGHT`] tickets in the user's currency, beside the user's
//!   jobs, as the user's other processes are the `default` job in allot's own tree
//!   (docs/concepts.md). Without it the plan saw a job of user B against a busy session of
//!   user A as alone on the machine (entitled to 1.5–1.8 of 2 CPUs in the systemd VM) and
//!   boosted B's CPU-bound job. [`plan_with_sessions`] is [`crate::plan::plan`] with them.
//! - **A rule reaches a session process per task** ([`task_attrs`]): `background` is
//!   SCHED_IDLE (the kernel's per-task "only idle CPU"), tickets are the nice whose kernel
//!   weight is to nice 0's as the tickets are to a default job's 100, within the session's
//!   scope. A cap needs a cgroup: a session process gets none.
//! - **The boost reaches a session task** ([`task_boost`]): a task that used less than half
//!   its session's entitlement (its user's share, not CPUs ÷ runnable tasks) is boosted by
//!   the same rule as a job (Petrou et al. 1999 §3.3, [`crate::plan::boost_rule`]), through
//!   the EEVDF slice only: the scope's weight is systemd's.

use crate::nice::kernel_weight;
use crate::plan::{boost_rule, plan, Boost, CurrencyIn, JobIn, JobPlan, Machine, Params, Plan, Usage};
use crate::scope::SESSION_WEIGHT;

/// One user's login sessions together, as measured.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SessionIn {
    /// Index of the user's currency in the currencies slice.
    pub currency: usize,
    /// CPUs used over the boost window and the last tick (None: not measured twice yet).
    pub usage: Option<Usage>,
    /// Threads that ran or waited for CPU lately.
    pub runnable: u32,
    /// Its threads waited for CPU during the last tick.
    pub waiting: bool,
    /// The CPUs its threads that ran may use (their affinities together); empty: all. A
    /// session pinned to one CPU claims that CPU only, as a pinned job does.
    pub cpus: Vec<usize>,
    /// The lowest nice of its threads that ran (0 when none did): a job's nice, for nice
    /// emulation across users (Petrou et al. 1999 §3.4): a session whose running threads
    /// are all niced lowers its user's currency, as a niced job does.
    pub nice: i32,
}

impl SessionIn {
    fn as_job(&self) -> JobIn {
        JobIn {
            currency: self.currency,
            tickets: SESSION_WEIGHT,
            cap: None,
            background: false,
            focus: false,
            // Never "new": a session not measured yet has used nothing allot knows of.
            usage: Some(self.usage.unwrap_or_default()),
            runnable: self.runnable,
            cpus: self.cpus.clone(),
            nice: self.nice,
            waiting: self.waiting,
            held: false,
            idle_cpus: 0.0,
        }
    }
}

/// [`plan`] with each user's sessions as a claimant beside their jobs: the jobs' plans
/// (indexed like `jobs`) and the sessions' (indexed like `sessions`). A session's waiting
/// threads also count as "others waiting" for a soft cap, so a soft cap is held against a
/// busy session as against a job.
pub fn plan_with_sessions(p: &Params, m: &Machine, currencies: &[CurrencyIn], jobs: &[JobIn], sessions: &[SessionIn]) -> (Plan, Vec<JobPlan>) {
    if sessions.is_empty() {
        return (plan(p, m, currencies, jobs), vec![]);
    }
    let mut all = jobs.to_vec();
    all.extend(sessions.iter().map(SessionIn::as_job));
    let mut out = plan(p, m, currencies, &all);
    let sess = out.jobs.split_off(jobs.len());
    (out, sess)
}

/// What a rule gives a task it cannot put in a job: the scheduling policy and nice to set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskAttrs {
    /// SCHED_IDLE: it runs only on CPU no other task wants (`background`).
    pub idle: bool,
    /// The nice to set; None: its own.
    pub nice: Option<i32>,
}

/// What a matching rule gives a session process ([`TaskAttrs`]); None when the rule does
/// nothing a task can carry (a cap or a currency only). `background` wins over tickets,
/// as in a job (a background job's tickets weigh only among background jobs).
pub fn task_attrs(background: bool, tickets: Option<u32>) -> Option<TaskAttrs> {
    if background {
        return Some(TaskAttrs { idle: true, nice: None });
    }
    tickets.map(|t| TaskAttrs { idle: false, nice: Some(nice_for_tickets(t)) })
}

/// How a `background` rule reaches a login-session process (`[sessions] background`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BackgroundIn {
    /// SCHED_IDLE on its threads, in its session's scope: it yields to the other tasks
    /// of its session only (the kernel's SCHED_IDLE is weighed within its cgroup).
    #[default]
    Task,
    /// Moved into a background job of allot's (idle weight beside every user), tied to its
    /// session so that stopping the session still ends it.
    Job,
}

/// Where a rule sends a login-session process: `Some(true)` into a job of allot's tied to
/// its session, `Some(false)` per task ([`task_attrs`]), None: nowhere (no rule matches).
/// Only a `background` rule moves a process, only when the config asks for it, and only
/// where the job can be tied to the session (`tie`: a systemd host that makes tethers);
/// a rule of tickets stays per task (a nice), as its weight is meant within the session.
pub fn to_job(mode: BackgroundIn, background: Option<bool>, tie: bool) -> Option<bool> {
    background.map(|bg| bg && mode == BackgroundIn::Job && tie)
}

/// The nice whose kernel weight is closest (by ratio) to `tickets`/100 of nice 0's: a task
/// in a session weighs against the session's other tasks as a job of `tickets` weighs
/// against a default job of 100. 100 ↦ 0, 10 ↦ 10, 1000 ↦ −10, 1 ↦ 19 (the kernel's
/// lightest, 15/1024), 10000 ↦ −20.
pub fn nice_for_tickets(tickets: u32) -> i32 {
    let want = f64::from(tickets.max(1)) / 100.0 * f64::from(kernel_weight(0));
    (-20..=19).min_by(|&a, &b| ratio_gap(kernel_weight(a), want).total_cmp(&ratio_gap(kernel_weight(b), want))).unwrap_or(0)
}

fn ratio_gap(w: u32, want: f64) -> f64 {
    (f64::from(w) / want).ln().abs()
}

/// The boost of one session task: [`boost_rule`] for a job of its usage whose entitlement
/// is its session's (its user's share of the machine beside the user's jobs). A task not
/// measured twice yet is [`Boost::New`]; one asleep is [`Boost::Asleep`]: both boosted, as a
/// job would be, so a task that wakes has its slice already.
pub fn task_boost(p: &Params, usage: Option<Usage>, session_entitlement: f64) -> Boost {
    let j = JobIn {
        currency: 0,
        tickets: SESSION_WEIGHT,
        cap: None,
        background: false,
        focus: false,
        usage,
        runnable: 1,
        cpus: vec![],
        nice: 0,
        waiting: false,
        held: false,
        idle_cpus: 0.0,
    };
    boost_rule(p, &j, session_entitlement)
}

/// `budget` items divided among claimants that want `wants` each, max-min fair: none gets
/// more than it wants, what one does not want goes to the others, and one that gets less
/// than it wants gets at least as much as any other. The daemon reads a bounded number of
/// session threads a tick; divided this way among users (and within a user among their
/// sessions), one user's thousands of threads cannot leave another user's session unread.
pub fn fair_division(budget: usize, wants: &[usize]) -> Vec<usize> {
    fair_division_turn(budget, wants, 0)
}

/// [`fair_division`], with what the division leaves over among equal claimants (one more
/// each, for some of them; none at all when the budget is smaller than their number) going
/// to the next ones as listed at each `turn`, as many as had it. The daemon turns it every
/// tick, so no session is left unread tick after tick by the rounding: ten equal sessions
/// sharing three reads are each read within four turns.
pub fn fair_division_turn(budget: usize, wants: &[usize], turn: usize) -> Vec<usize> {
    let n = wants.len().max(1);
    // Equal claimants are ordered from `shift` on, and the last ones get the leftover; the
    // leftover's count is the budget's remainder by their number, so a shift of that much
    // a turn hands it to the ones after.
    let shift = (turn % n) * (budget % n) % n;
    let mut order: Vec<usize> = (0..wants.len()).collect();
    order.sort_by_key(|&i| (wants[i], (i + n - shift) % n));
    let mut give = vec![0; wants.len()];
    let mut left = budget;
    for (k, &i) in order.iter().enumerate() {
        give[i] = wants[i].min(left / (wants.len() - k));
        left -= give[i];
    }
    give
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Cap;

    #[test]
    fn only_a_background_rule_asked_to_and_tied_moves_a_session_process() {
        use BackgroundIn::*;
        assert_eq!(to_job(Job, Some(true), true), Some(true));
        assert_eq!(to_job(Job, Some(true), false), Some(false), "no tie: stays per task");
        assert_eq!(to_job(Task, Some(true), true), Some(false), "the default: per task");
        assert_eq!(to_job(Job, Some(false), true), Some(false), "tickets stay a nice");
        assert_eq!(to_job(Job, None, true), None);
        assert_eq!(BackgroundIn::default(), Task);
    }

    fn hog(currency: usize, threads: u32) -> JobIn {
        JobIn {
            currency,
            tickets: 100,
            cap: None,
            background: false,
            focus: false,
            usage: Some(Usage { window: 1.0, last: 1.0 }),
            runnable: threads,
            cpus: vec![],
            nice: 0,
            waiting: true,
            held: false,
            idle_cpus: 0.0,
        }
    }

    fn busy_session(currency: usize) -> SessionIn {
        SessionIn { currency, usage: Some(Usage { window: 1.0, last: 1.0 }), runnable: 1, waiting: false, cpus: vec![], nice: 0 }
    }

    #[test]
    fn another_users_busy_session_halves_a_cpu_bound_job_and_it_is_not_boosted() {
        // The scene: user B's job of 4 hogs on 2 CPUs, user A in a session with one
        // hog. Alone, B's job is entitled to both CPUs and its 1 CPU is half of that: the
        // boost limit, boosted by noise. With A's session counted: 1 CPU each.
        let p = Params::default();
        let m = Machine { ncpu: 2, outside: 0.0, ..Default::default() };
        let cur = [CurrencyIn { funding: 100, cap: None }, CurrencyIn { funding: 100, cap: None }];
        let mut b = hog(0, 4);
        b.usage = Some(Usage { window: 0.98, last: 0.98 });
        let alone = plan(&p, &m, &cur, std::slice::from_ref(&b));
        assert_eq!(alone.jobs[0].entitlement, 2.0, "the premise: blind to the session, B gets the machine");
        assert!(alone.jobs[0].boosted, "the premise: 0.98 of 2.0 is under half: boosted");
        let (out, sess) = plan_with_sessions(&p, &m, &cur, &[b], &[busy_session(1)]);
        assert!((out.jobs[0].entitlement - 1.0).abs() < 1e-9 && (sess[0].entitlement - 1.0).abs() < 1e-9, "{out:?} {sess:?}");
        assert_eq!(out.jobs[0].boost, Boost::CpuBound);
        assert_eq!(out.jobs.len(), 1, "sessions are not jobs: nothing of theirs is written");
    }

    #[test]
    fn a_nice_19_session_against_another_users_hog_gets_the_nice_threshold() {
        // One CPU: user A's session runs only a nice-19 hog, user B's session a nice-0
        // one. §3.4: A's currency holds at most 10^((20 - 19)/20 + 1) = 11.2 base tickets
        // against B's 100, so A is entitled to 11.2 / 111.2 = 0.101 of the CPU, and the
        // plan weighs A's currency 11 (the slice's weight on systemd).
        let p = Params::default();
        let m = Machine { ncpu: 1, outside: 0.0, ..Default::default() };
        let cur = [CurrencyIn { funding: 100, cap: None }, CurrencyIn { funding: 100, cap: None }];
        let mut a = busy_session(0);
        a.nice = 19;
        let (out, sess) = plan_with_sessions(&p, &m, &cur, &[], &[a.clone(), busy_session(1)]);
        assert_eq!((out.currencies[0].weight, out.currencies[1].weight), (11, 100));
        assert!((sess[0].entitlement - 11.22 / 111.22).abs() < 0.002, "{sess:?}");
        // Nice emulation off: the funding.
        let off = Params { nice_emulation: false, ..Params::default() };
        let (out, _) = plan_with_sessions(&off, &m, &cur, &[], &[a, busy_session(1)]);
        assert_eq!(out.currencies[0].weight, 100);
    }

    #[test]
    fn a_pinned_session_claims_only_its_cpu() {
        // Jobs of 300 and 100 tickets and a busy session, all pinned to CPU 1 of 2: the
        // session claims CPU 1 only, so the 100-ticket job is entitled to 0.2 (its use)
        // and not boosted; counted on both CPUs it would be entitled to 0.5 and boosted.
        let p = Params { nice_emulation: false, ..Params::default() };
        let m = Machine { ncpu: 2, outside: 0.0, ..Default::default() };
        let cur = [CurrencyIn { funding: 100, cap: None }];
        let mut a = hog(0, 1);
        (a.tickets, a.cpus, a.usage) = (300, vec![1], Some(Usage { window: 0.6, last: 0.6 }));
        let mut b = hog(0, 1);
        (b.cpus, b.usage) = (vec![1], Some(Usage { window: 0.2, last: 0.2 }));
        let mut s = busy_session(0);
        s.usage = Some(Usage { window: 0.2, last: 0.2 });
        s.cpus = vec![1];
        let (out, _) = plan_with_sessions(&p, &m, &cur, &[a.clone(), b.clone()], &[s.clone()]);
        assert!((out.jobs[1].entitlement - 0.2).abs() < 1e-9 && !out.jobs[1].boosted, "{:?}", out.jobs[1]);
        s.cpus = vec![];
        let (out, _) = plan_with_sessions(&p, &m, &cur, &[a, b], &[s]);
        assert!(out.jobs[1].boosted, "the premise: a session counted on every CPU makes room that is not there");
    }

    #[test]
    fn a_session_beside_its_users_jobs_weighs_as_a_default_job() {
        // One currency: jobs of 300 and 100 tickets and a busy session on 1 CPU: 0.6/0.2/0.2.
        let p = Params { nice_emulation: false, ..Params::default() };
        let m = Machine { ncpu: 1, outside: 0.0, ..Default::default() };
        let cur = [CurrencyIn { funding: 100, cap: None }];
        let mut a = hog(0, 1);
        a.tickets = 300;
        let (out, sess) = plan_with_sessions(&p, &m, &cur, &[a, hog(0, 1)], &[busy_session(0)]);
        let e: Vec<f64> = out.jobs.iter().chain(&sess).map(|j| j.entitlement).collect();
        for (got, want) in e.iter().zip([0.6, 0.2, 0.2]) {
            assert!((got - want).abs() < 1e-9, "{e:?}");
        }
    }

    #[test]
    fn a_soft_cap_is_held_while_a_session_waits_and_released_when_none_does() {
        let p = Params::default();
        let m = Machine { ncpu: 2, outside: 0.0, ..Default::default() };
        let cur = [CurrencyIn { funding: 100, cap: None }, CurrencyIn { funding: 100, cap: None }];
        let mut capped = hog(0, 4);
        capped.cap = Some(Cap { cpus: 0.5, hard: false });
        capped.waiting = false;
        capped.idle_cpus = 0.0;
        let mut s = busy_session(1);
        s.waiting = true;
        let (out, _) = plan_with_sessions(&p, &m, &cur, std::slice::from_ref(&capped), &[s.clone()]);
        assert!(out.jobs[0].held && out.jobs[0].quota == Some(0.5), "{:?}", out.jobs[0].hold);
        s.waiting = false;
        let (out, _) = plan_with_sessions(&p, &m, &cur, &[capped], &[s]);
        assert!(!out.jobs[0].held, "no job or session waits: {:?}", out.jobs[0].hold);
    }

    #[test]
    fn an_idle_session_takes_nothing_and_no_session_is_the_plain_plan() {
        let p = Params::default();
        let m = Machine { ncpu: 2, outside: 0.0, ..Default::default() };
        let cur = [CurrencyIn { funding: 100, cap: None }, CurrencyIn { funding: 100, cap: None }];
        let idle = SessionIn { currency: 1, usage: Some(Usage::default()), runnable: 0, waiting: false, cpus: vec![], nice: 0 };
        let (out, sess) = plan_with_sessions(&p, &m, &cur, &[hog(0, 4)], &[idle]);
        assert_eq!((out.jobs[0].entitlement, sess[0].entitlement), (2.0, 0.0));
        let unmeasured = SessionIn { currency: 1, usage: None, runnable: 0, waiting: false, cpus: vec![], nice: 0 };
        let (_, sess) = plan_with_sessions(&p, &m, &cur, &[hog(0, 4)], &[unmeasured]);
        assert_ne!(sess[0].boost, Boost::New, "a session is never new: it was there before allot looked");
        let (plain, none) = plan_with_sessions(&p, &m, &cur, &[hog(0, 4)], &[]);
        assert_eq!((plain, none), (plan(&p, &m, &cur, &[hog(0, 4)]), vec![]));
    }

    #[test]
    fn rules_give_session_tasks_idle_or_the_nice_of_their_tickets() {
        assert_eq!(task_attrs(true, Some(500)), Some(TaskAttrs { idle: true, nice: None }));
        assert_eq!(task_attrs(false, None), None, "a cap or a currency alone: nothing a task carries");
        assert_eq!(task_attrs(false, Some(100)), Some(TaskAttrs { idle: false, nice: Some(0) }));
        let cases = [(100, 0), (10, 10), (1000, -10), (1, 19), (10_000, -20), (50, 3), (200, -3)];
        for (t, n) in cases {
            assert_eq!(nice_for_tickets(t), n, "{t} tickets");
        }
        // Monotone: more tickets never a higher nice.
        for t in 1..10_000 {
            assert!(nice_for_tickets(t + 1) <= nice_for_tickets(t), "{t}");
        }
        assert_eq!(nice_for_tickets(0), 19, "0 is read as 1, never a division by zero");
    }

    #[test]
    fn a_session_task_is_judged_against_its_sessions_share() {
        let p = Params::default();
        // A probe using 0.1 CPU of a session entitled to 1 CPU: interactive, boosted.
        let probe = Some(Usage { window: 0.1, last: 0.1 });
        assert_eq!(task_boost(&p, probe, 1.0), Boost::Interactive);
        // The same probe against a share of 0.15 is busy, not boosted.
        assert!(!task_boost(&p, probe, 0.15).on());
        // A hog at its session's share: CPU-bound.
        assert_eq!(task_boost(&p, Some(Usage { window: 1.0, last: 1.0 }), 1.0), Boost::CpuBound);
        assert_eq!(task_boost(&p, Some(Usage::default()), 0.0), Boost::Asleep);
        assert_eq!(task_boost(&p, None, 1.0), Boost::New);
        assert_eq!(task_boost(&Params { boost: false, ..p }, probe, 1.0), Boost::Off);
    }

    #[test]
    fn a_budget_is_divided_max_min_fair() {
        // One user's 5000 threads against two users' 10 and 300: the small ones whole.
        assert_eq!(fair_division(1024, &[5000, 10, 300]), [714, 10, 300]);
        // Two big claimants: halves; the last takes what the division leaves.
        assert_eq!(fair_division(1024, &[5000, 5000]), [512, 512]);
        assert_eq!(fair_division(10, &[100, 100, 100]), [3, 3, 4]);
        assert_eq!(fair_division(1024, &[3, 4]), [3, 4], "all of a want within budget");
        assert_eq!(fair_division(0, &[3, 4]), [0, 0]);
        assert!(fair_division(5, &[]).is_empty());
    }

    #[test]
    fn the_leftover_goes_round_with_the_turn() {
        // Three reads for ten equal sessions: three of them each turn, all ten within four.
        let mut read = [0usize; 10];
        for turn in 0..4 {
            let got = fair_division_turn(3, &[50; 10], turn);
            assert_eq!(got.iter().sum::<usize>(), 3);
            for (r, g) in read.iter_mut().zip(&got) {
                *r += g;
            }
        }
        assert!(read.iter().all(|&r| r >= 1), "each read within four turns: {read:?}");
        assert_eq!(fair_division_turn(10, &[100, 100, 100], 0), [3, 3, 4]);
        assert_eq!(fair_division_turn(10, &[100, 100, 100], 1), [4, 3, 3]);
        assert_eq!(fair_division_turn(1024, &[5000, 10, 300], 2), [714, 10, 300], "only ties turn");
    }

    proptest::proptest! {
        #[test]
        fn a_fair_division_gives_what_it_can_and_no_one_less_than_an_equal_part(
            budget in 0usize..5000, wants in proptest::collection::vec(0usize..3000, 0..12), turn in 0usize..100
        ) {
            let got = fair_division_turn(budget, &wants, turn);
            proptest::prop_assert_eq!(got.len(), wants.len());
            proptest::prop_assert_eq!(got.iter().sum::<usize>(), budget.min(wants.iter().sum()));
            for (g, w) in got.iter().zip(&wants) {
                proptest::prop_assert!(g <= w);
                // Short of its want: at least an equal part, and no other has more (but one).
                if g < w {
                    proptest::prop_assert!(*g >= budget / wants.len());
                    proptest::prop_assert!(got.iter().all(|o| *o <= g + 1));
                }
            }
        }
    }
}
