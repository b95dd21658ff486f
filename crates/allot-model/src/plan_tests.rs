use super::*;
use proptest::prelude::*;

fn m(ncpu: usize) -> Machine {
    Machine { ncpu, outside: 0.0, ..Default::default() }
}

fn hog(currency: usize, tickets: u32, usage: f64) -> JobIn {
    JobIn {
        currency,
        tickets,
        cap: None,
        background: false,
        focus: false,
        usage: Some(Usage { window: usage, last: usage }),
        runnable: 1,
        cpus: vec![],
        nice: 0,
        waiting: false,
        held: false,
        idle_cpus: 0.0,
    }
}

fn idle(currency: usize, tickets: u32) -> JobIn {
    JobIn { usage: Some(Usage::default()), runnable: 0, ..hog(currency, tickets, 0.0) }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

#[test]
fn tickets_and_currencies_divide_the_machine() {
    // Petrou et al. 1999 Table 5's insulation: user A's one job against user B's five, one CPU.
    let cur = [CurrencyIn { funding: 100, cap: None }, CurrencyIn { funding: 100, cap: None }];
    let mut jobs = vec![hog(0, 100, 0.5)];
    jobs.extend((0..5).map(|_| hog(1, 100, 0.1)));
    let pl = plan(&Params::default(), &m(1), &cur, &jobs);
    assert!(close(pl.jobs[0].entitlement, 0.5));
    assert!(pl.jobs[1..].iter().all(|j| close(j.entitlement, 0.1)));
    assert_eq!(pl.currencies[0].weight, 100);
}

#[test]
fn a_sleeping_parent_does_not_raise_the_entitlement() {
    // One single-threaded hog whose shell sleeps: one runnable thread, not two.
    let j = JobIn { runnable: 1, ..hog(0, 100, 1.0) };
    let pl = plan(&Params::default(), &m(2), &[CurrencyIn { funding: 100, cap: None }], &[j]);
    assert!(close(pl.jobs[0].entitlement, 1.0), "{:?}", pl.jobs[0]);
}

#[test]
fn load_outside_allot_is_not_given_away() {
    // A lone hog against three of root's (outside allot) on two CPUs gets about half.
    let m = Machine { ncpu: 2, outside: 1.49, ..Default::default() };
    let pl = plan(&Params::default(), &m, &[CurrencyIn { funding: 100, cap: None }], &[hog(0, 100, 0.51)]);
    assert!(close(pl.jobs[0].entitlement, 0.51), "{}", pl.jobs[0].entitlement);
}

#[test]
fn nice_19_lowers_the_entitlement_and_a_cpu_bound_niced_job_is_not_boosted() {
    // A nice-19 hog of user A against user B's hog, one CPU: 11.2 vs 100 (Petrou et al. 1999 §3.4).
    let cur = [CurrencyIn { funding: 100, cap: None }, CurrencyIn { funding: 100, cap: None }];
    let a = JobIn { nice: 19, ..hog(0, 100, 0.098) };
    let pl = plan(&Params::default(), &m(1), &cur, &[a, hog(1, 100, 0.9)]);
    assert!((pl.jobs[0].entitlement - 11.22 / 111.22).abs() < 0.01, "{}", pl.jobs[0].entitlement);
    assert!(!pl.jobs[0].boosted, "CPU-bound at its (niced) entitlement: no boost");
    assert!(pl.jobs[0].niced);
    assert_eq!(pl.currencies[0].weight, 11);
}

#[test]
fn the_boost_reason_names_the_branch_and_its_thresholds() {
    let p = Params::default();
    let cur = [CurrencyIn { funding: 100, cap: None }, CurrencyIn { funding: 100, cap: None }];
    // Two hogs on one CPU: entitlement 0.5 each.
    let reason = |a: JobIn| {
        let pl = plan(&p, &m(1), &cur, &[a, hog(1, 100, 0.9)]);
        (pl.jobs[0].boost, pl.jobs[0].boost_limits)
    };
    let (b, l) = reason(hog(0, 100, 0.9));
    assert_eq!(b, Boost::CpuBound);
    assert!(close(l.entitlement, 0.5));
    assert_eq!((l.last_fraction, l.window_fraction), (BOOST_LAST_TICK_BELOW, DEFAULT_BOOST_BELOW), "the constants, not copies");
    assert!(close(l.last, BOOST_LAST_TICK_BELOW * 0.5) && close(l.window, DEFAULT_BOOST_BELOW * 0.5));
    // Just under the last tick's limit but at the window's: busy, not boosted.
    let under = BOOST_LAST_TICK_BELOW * 0.5 - 0.01;
    assert_eq!(reason(JobIn { usage: Some(Usage { window: DEFAULT_BOOST_BELOW * 0.5, last: under }), ..hog(0, 100, 0.0) }).0, Boost::Busy);
    assert_eq!(reason(hog(0, 100, 0.05)).0, Boost::Interactive);
    // Active is the constant's: at ACTIVE_CPUS asleep, just above it not.
    assert_eq!(reason(hog(0, 100, ACTIVE_CPUS)).0, Boost::Asleep);
    assert_eq!(reason(hog(0, 100, ACTIVE_CPUS * 2.0)).0, Boost::Interactive);
    assert_eq!(reason(JobIn { usage: None, ..hog(0, 100, 0.0) }).0, Boost::New);
    assert_eq!(reason(JobIn { focus: true, ..hog(0, 100, 0.9) }).0, Boost::Focused);
    assert_eq!(reason(JobIn { background: true, ..hog(0, 100, 0.0) }).0, Boost::Background);
    let off = plan(&Params { boost: false, ..p }, &m(1), &cur, &[hog(0, 100, 0.0)]);
    assert_eq!(off.jobs[0].boost, Boost::Off);
}

#[test]
fn the_boost_follows_the_job() {
    let p = Params::default();
    let cur = [CurrencyIn { funding: 100, cap: None }, CurrencyIn { funding: 100, cap: None }];
    // Interactive: 5% of a CPU against an entitlement of 0.5.
    let pl = plan(&p, &m(1), &cur, &[hog(0, 100, 0.05), hog(1, 100, 0.95)]);
    assert!(pl.jobs[0].boosted && !pl.jobs[1].boosted);
    assert_eq!(pl.jobs[0].weight, 10_000);
    assert_eq!(pl.jobs[0].slice_ns, None, "by default the boost is weight only (docs/policy.md)");
    let with_slice = Params { boost_slice_ns: Some(100_000), ..Params::default() };
    let pl2 = plan(&with_slice, &m(1), &cur, &[hog(0, 100, 0.05), hog(1, 100, 0.95)]);
    assert_eq!(pl2.jobs[0].slice_ns, Some(100_000));
    assert_eq!(pl2.jobs[1].slice_ns, None, "only a boosted job gets the slice");
    assert_eq!(pl.jobs[0].quota, None, "the boost never writes a quota");
    // Asleep or new: boosted (f = 0).
    let pl = plan(&p, &m(1), &cur, &[idle(0, 100), JobIn { usage: None, ..hog(1, 100, 0.0) }]);
    assert!(pl.jobs[0].boosted && pl.jobs[1].boosted);
    // the weight without the boost, for the sched_ext scheduler
    assert_eq!((pl.jobs[0].weight, pl.jobs[0].base_weight), (10_000, 100));
    // It used its entitlement in the last tick: the boost goes at once, whatever the window says.
    let burst = JobIn { usage: Some(Usage { window: 0.1, last: 0.5 }), ..hog(0, 100, 0.0) };
    let pl = plan(&p, &m(1), &cur, &[burst, hog(1, 100, 0.5)]);
    assert!(!pl.jobs[0].boosted);
    // Focus wins; background never.
    let f = JobIn { focus: true, ..hog(0, 100, 0.5) };
    let bg = JobIn { background: true, ..idle(1, 100) };
    let pl = plan(&p, &m(1), &cur, &[f, bg]);
    assert!(pl.jobs[0].boosted && !pl.jobs[1].boosted);
    assert_eq!(pl.jobs[1].weight, 100);
    // Off means off.
    let pl = plan(&Params { boost: false, ..p }, &m(1), &cur, &[idle(0, 100)]);
    assert!(!pl.jobs[0].boosted && pl.jobs[0].weight == 100);
}

#[test]
fn soft_caps_hold_only_under_contention_and_hard_caps_always() {
    let p = Params::default();
    let cur = [CurrencyIn { funding: 100, cap: None }];
    let soft = JobIn { cap: Some(Cap { cpus: 0.5, hard: false }), ..hog(0, 100, 0.9) };
    let rival = JobIn { waiting: true, ..hog(0, 50, 0.1) };
    let pl = plan(&p, &m(1), &cur, &[soft.clone(), rival]);
    assert!(pl.jobs[0].held && pl.jobs[0].quota == Some(0.5));
    let pl = plan(&p, &m(1), &cur, std::slice::from_ref(&soft));
    assert!(!pl.jobs[0].held && pl.jobs[0].quota.is_none(), "alone: free");
    let held_idle = JobIn { held: true, idle_cpus: 0.5, ..soft };
    assert!(!plan(&p, &m(1), &cur, &[held_idle]).jobs[0].held, "released when its CPU goes idle");
    let hard = JobIn { cap: Some(Cap { cpus: 0.25, hard: true }), ..hog(0, 100, 0.25) };
    let pl = plan(&p, &m(1), &cur, &[hard]);
    assert_eq!(pl.jobs[0].quota, Some(0.25));
    assert!(close(pl.jobs[0].entitlement, 0.25));
}

#[test]
fn an_idle_job_is_entitled_to_what_it_would_get_if_it_joined() {
    let p = Params::default();
    let cur = [CurrencyIn { funding: 100, cap: None }, CurrencyIn { funding: 300, cap: None }];
    let jobs = [hog(0, 100, 1.0), idle(1, 100)];
    let pl = plan(&p, &m(1), &cur, &jobs);
    assert_eq!(pl.jobs[1].entitlement, 0.0);
    assert!(close(entitlement_if_joined(&p, &m(1), &cur, &jobs, 1), 0.75));
    assert_eq!(entitlement_if_joined(&p, &m(1), &cur, &jobs, 9), 0.0);
}

fn arb_job(ncur: usize, ncpu: usize) -> impl Strategy<Value = JobIn> {
    (
        0..ncur,
        1u32..=10_000,
        prop::option::of((0.01f64..8.0, any::<bool>())),
        any::<bool>(),
        any::<bool>(),
        prop::option::of((0.0f64..4.0, 0.0f64..4.0)),
        0u32..16,
        prop::collection::vec(0..ncpu, 0..3),
        -20i32..=19,
        (any::<bool>(), any::<bool>(), 0.0f64..2.0),
    )
        .prop_map(|(currency, tickets, cap, background, focus, usage, runnable, cpus, nice, (waiting, held, idle_cpus))| JobIn {
            currency,
            tickets,
            cap: cap.map(|(cpus, hard)| Cap { cpus, hard }),
            background,
            focus,
            usage: usage.map(|(window, last)| Usage { window, last }),
            runnable,
            cpus,
            nice,
            waiting,
            held,
            idle_cpus,
        })
}

fn arb_input() -> impl Strategy<Value = (Params, Machine, Vec<CurrencyIn>, Vec<JobIn>)> {
    (1usize..6, 1usize..5, 0.0f64..3.0, any::<bool>(), any::<bool>()).prop_flat_map(|(ncur, ncpu, outside, boost, nice)| {
        (
            Just(Params { boost, nice_emulation: nice, ..Params::default() }),
            Just(Machine { ncpu, outside, ..Default::default() }),
            prop::collection::vec((1u32..=10_000).prop_map(|funding| CurrencyIn { funding, cap: None }), ncur),
            prop::collection::vec(arb_job(ncur, ncpu), 0..12),
        )
    })
}

/// Jobs pinned to CPU 0 while other work keeps both CPUs busy: only the outside load on
/// CPU 0 (its busy time less what the jobs used) is taken from what they are entitled to,
/// not the machine's whole outside load (which took all of one CPU and most of the other).
#[test]
fn pinned_jobs_lose_only_the_outside_load_on_their_cpus() {
    let pinned = |t: u32, used: f64| JobIn { cpus: vec![0], ..hog(0, t, used) };
    let jobs = [pinned(100, 0.07), pinned(200, 0.13), pinned(300, 0.20)];
    let all = |_: usize| true;
    let mut m = Machine { ncpu: 2, outside: 1.58, busy: vec![1.0, 0.98] };
    let cap = capacity(&m, &jobs, all);
    assert!((cap - 0.40).abs() < 1e-9, "CPU 0 was busy 1.0, 0.40 of it the jobs': {cap}");
    // Unmeasured, or the jobs not all pinned: the machine's outside load, as before.
    m.busy.clear();
    assert_eq!(capacity(&m, &jobs, all), 0.0);
    m.busy = vec![1.0, 0.98];
    let mut free = jobs.clone();
    free[0].cpus.clear();
    assert!((capacity(&m, &free, all) - (2.0 - 1.58)).abs() < 1e-9);
    // Never more than the machine's outside load, never below none.
    let quiet = Machine { ncpu: 2, outside: 0.1, busy: vec![1.0, 0.0] };
    assert!((capacity(&quiet, &jobs, all) - 0.9).abs() < 1e-9);
    let idle = Machine { ncpu: 2, outside: 0.5, busy: vec![0.2, 1.0] };
    assert!((capacity(&idle, &jobs, all) - 1.0).abs() < 1e-9, "the jobs used more than CPU 0's busy time: no outside load there");
    let pl = plan(&Params::default(), &Machine { ncpu: 2, outside: 1.58, busy: vec![1.0, 0.98] }, &[CurrencyIn { funding: 100, cap: None }], &jobs);
    assert!(pl.jobs.iter().all(|j| j.entitlement > 0.0), "{:?}", pl.jobs);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn plan_invariants((p, m, cur, jobs) in arb_input()) {
        let pl = plan(&p, &m, &cur, &jobs);
        prop_assert_eq!(pl.jobs.len(), jobs.len());
        prop_assert_eq!(pl.clone(), plan(&p, &m, &cur, &jobs), "deterministic");
        // Entitlements: active jobs share at most the CPUs they may use (less outside load),
        // and all of it when their demand exceeds it.
        let cap = capacity(&m, &jobs, |i| jobs[i].active());
        let sum: f64 = pl.jobs.iter().map(|j| j.entitlement).sum();
        prop_assert!(sum <= cap + 1e-6, "sum {} > capacity {}", sum, cap);
        let held: Vec<bool> = pl.jobs.iter().map(|j| j.held).collect();
        let demand: f64 = jobs.iter().enumerate().filter(|(_, j)| j.active()).map(|(i, j)| ceiling(&m, j, held[i])).sum();
        if demand >= cap + 1e-6 && jobs.iter().any(|j| j.active()) {
            prop_assert!((sum - cap).abs() < 1e-6, "demand {} >= capacity {} but only {} given", demand, cap, sum);
        }
        for (j, o) in jobs.iter().zip(&pl.jobs) {
            prop_assert!((1..=10_000).contains(&o.weight));
            prop_assert!(o.entitlement >= 0.0);
            if !j.active() { prop_assert_eq!(o.entitlement, 0.0); }
            match j.cap {
                // A hard cap always bounds the quota.
                Some(c) if c.hard => prop_assert_eq!(o.quota, Some(c.cpus)),
                // Without a cap: never a quota, so never one below the CPUs it may use.
                None => prop_assert_eq!(o.quota, None),
                Some(c) => prop_assert!(o.quota.is_none() || o.quota == Some(c.cpus)),
            }
            if j.background {
                prop_assert!(!o.boosted);
                prop_assert_eq!(o.weight, j.tickets, "background keeps its tickets, never foreground or boost weight");
                prop_assert!(!o.held);
            }
            if !p.boost { prop_assert!(!o.boosted && o.slice_ns.is_none()); }
            // The reasons are the decisions: one never says other than the flag.
            prop_assert_eq!(o.boosted, o.boost.on());
            prop_assert_eq!(o.held, o.hold.is_some_and(crate::policy::Hold::held));
            prop_assert_eq!(o.boost_limits, BoostLimits::new(&p, o.entitlement));
            if o.boosted != o.slice_ns.is_some() { prop_assert!(o.slice_ns.is_none()); }
        }
        for c in &pl.currencies {
            prop_assert!((1..=10_000).contains(&c.weight));
        }
    }

    #[test]
    fn if_joined_is_bounded_by_the_machine((p, m, cur, jobs) in arb_input(), k in 0usize..12) {
        let e = entitlement_if_joined(&p, &m, &cur, &jobs, k);
        prop_assert!(e >= 0.0 && e <= m.ncpu as f64 + 1e-9);
        if k >= jobs.len() { prop_assert_eq!(e, 0.0); }
    }

    #[test]
    fn if_joined_for_all_is_if_joined_for_each((p, m, cur, mut jobs) in arb_input(), copies in 0usize..4) {
        // Copies of a job make the interchangeable jobs the memo is for.
        if let Some(j) = jobs.first().cloned() { jobs.extend(std::iter::repeat_n(j, copies)); }
        let all = entitlements_if_joined(&p, &m, &cur, &jobs);
        prop_assert_eq!(all.len(), jobs.len());
        for (k, e) in all.iter().enumerate() {
            match e {
                None => prop_assert!(jobs[k].active()),
                Some(e) => {
                    let one = entitlement_if_joined(&p, &m, &cur, &jobs, k);
                    prop_assert!((e - one).abs() < 1e-9, "job {}: {} for all, {} alone", k, e, one);
                }
            }
        }
    }
}

#[test]
fn a_capped_currencys_jobs_are_entitled_to_its_cap_together_and_not_boosted_at_it() {
    let cur = [CurrencyIn { funding: 100, cap: Some(0.5) }, CurrencyIn { funding: 100, cap: None }];
    let jobs = [hog(0, 100, 0.25), hog(0, 300, 0.25), hog(1, 100, 1.0)];
    let pl = plan(&Params::default(), &m(2), &cur, &jobs);
    let e: Vec<f64> = pl.jobs.iter().map(|j| j.entitlement).collect();
    assert!(close(e[0], 0.125) && close(e[1], 0.375) && close(e[2], 1.0), "{e:?}");
    // Without the cap each would be entitled to more than it uses, and boosted for it.
    let free = plan(&Params::default(), &m(2), &[CurrencyIn { cap: None, ..cur[0] }, cur[1]], &jobs);
    assert!(free.jobs[1].entitlement > 0.6 && free.jobs[1].boosted, "{:?}", free.jobs[1]);
    assert!(!pl.jobs[1].boosted, "at its share of the cap it is not starved");
}

#[test]
fn a_job_nothing_adjusts_is_planned_at_rest() {
    // Not boosted (boost off), no soft cap held, no nice emulation: the plan's values are
    // the ones a new job's directory is given before its first plan, and a stop leaves.
    let p = Params { boost: false, nice_emulation: false, ..Params::default() };
    for cap in [None, Some(Cap::parse_form("0.5!").unwrap()), Some(Cap::parse_form("1").unwrap())] {
        let mut j = hog(0, 300, 1.0);
        j.cap = cap;
        let out = plan(&p, &m(2), &[CurrencyIn { funding: 100, cap: None }], &[j]);
        let (weight, quota) = at_rest(300, cap);
        assert_eq!((out.jobs[0].weight, out.jobs[0].quota), (weight, quota), "cap {cap:?}");
    }
}

#[test]
fn a_niced_process_is_split_off_a_shared_default_job_only_while_it_competes() {
    assert!(splits_niced(2, Some(ACTIVE_CPUS * 2.0)));
    assert!(!splits_niced(1, Some(1.0)), "alone in its job: its nice is the job's");
    assert!(!splits_niced(5, Some(ACTIVE_CPUS)), "not above the active threshold");
    assert!(!splits_niced(5, None), "not measured yet");
}
