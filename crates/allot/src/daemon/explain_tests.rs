//! explain's words against the thresholds the plan and the model decide by: change one and
//! the words follow, because explain holds none of its own.

use super::{boost_words, hold_words};
use allot_model::plan::{
    boost_rule, Boost, BoostLimits, JobIn, Params, Usage, ACTIVE_CPUS, BOOST_LAST_TICK_BELOW, DEFAULT_BOOST_BELOW, DEFAULT_BOOST_WINDOW_MS,
};
use allot_model::policy::{soft_cap_hold, Hold, RELEASE_IDLE_CPUS, WAITING_FRACTION};

fn job(window: f64, last: f64) -> JobIn {
    JobIn {
        currency: 0,
        tickets: 100,
        cap: None,
        background: false,
        focus: false,
        usage: Some(Usage { window, last }),
        runnable: 1,
        cpus: vec![],
        nice: 0,
        waiting: false,
        held: false,
        idle_cpus: 0.0,
    }
}

/// The plan's decision for a job and explain's words for it.
fn words(p: &Params, j: &JobIn, ent: f64) -> (Boost, String) {
    let b = boost_rule(p, j, ent);
    let u = j.usage.unwrap();
    (b, boost_words(b, u.window, u.last, &BoostLimits::new(p, ent), DEFAULT_BOOST_WINDOW_MS, "job"))
}

#[test]
fn a_changed_boost_threshold_changes_the_decision_and_explain_s_numbers() {
    // 0.6 of its entitlement over the window and in the last tick: busy at the default
    // threshold (half), interactive when the threshold is 0.9.
    let j = job(0.6, 0.6);
    let p = Params::default();
    assert_eq!(p.boost_below, DEFAULT_BOOST_BELOW);
    let (b, w) = words(&p, &j, 1.0);
    assert_eq!(b, Boost::Busy);
    assert!(w.contains(&format!("not below {DEFAULT_BOOST_BELOW:.2} × its entitlement 1.000 = {DEFAULT_BOOST_BELOW:.3}")), "{w}");
    let p = Params { boost_below: 0.9, ..Params::default() };
    let (b, w) = words(&p, &j, 1.0);
    assert_eq!(b, Boost::Interactive);
    assert!(w.contains("below 0.90 × its entitlement 1.000 = 0.900"), "{w}");
    assert!(w.contains(&format!("(below {BOOST_LAST_TICK_BELOW} × 1.000)")), "{w}");
    assert!(w.contains(&format!("over the last {DEFAULT_BOOST_WINDOW_MS} ms")), "{w}");
}

#[test]
fn the_constants_at_their_edges_are_the_ones_explain_names() {
    let p = Params::default();
    // At ACTIVE_CPUS a job is asleep, just above it is not; explain names the constant.
    let (b, w) = words(&p, &job(ACTIVE_CPUS, ACTIVE_CPUS), 1.0);
    assert_eq!(b, Boost::Asleep);
    assert!(w.contains(&format!("neither above {ACTIVE_CPUS} CPU")), "{w}");
    assert_ne!(words(&p, &job(ACTIVE_CPUS, ACTIVE_CPUS * 1.5), 1.0).0, Boost::Asleep);
    // At BOOST_LAST_TICK_BELOW × its entitlement in the last tick, CPU-bound.
    let (b, w) = words(&p, &job(0.1, BOOST_LAST_TICK_BELOW * 0.8), 0.8);
    assert_eq!(b, Boost::CpuBound);
    assert!(w.contains(&format!("at least {BOOST_LAST_TICK_BELOW} × its entitlement 0.800")), "{w}");
}

/// explain.rs's code (its comments aside) has no number with a fraction but zero (nothing
/// measured yet): every threshold it prints comes from the plan or a model constant.
#[test]
fn explain_rs_has_no_threshold_literal() {
    let src = include_str!("explain.rs");
    let code: String = src.lines().map(|l| l.split("//").next().unwrap()).collect::<Vec<_>>().join("\n");
    let b = code.as_bytes();
    let mut found = vec![];
    for i in 1..b.len().saturating_sub(1) {
        if b[i] == b'.' && b[i - 1].is_ascii_digit() && b[i + 1].is_ascii_digit() {
            let start = (0..i).rev().take_while(|&k| b[k].is_ascii_digit()).last().unwrap();
            let end = (i + 1..b.len()).take_while(|&k| b[k].is_ascii_digit()).last().unwrap() + 1;
            let literal = &code[start..end];
            if literal.parse::<f64>() != Ok(0.0) {
                found.push(literal.to_string());
            }
        }
    }
    assert!(found.is_empty(), "threshold-like literals in explain.rs: {found:?}");
    for name in ["ACTIVE_CPUS", "RELEASE_IDLE_CPUS", "WAITING_FRACTION"] {
        assert!(code.contains(&format!("{{{name}}}")), "explain names {name} from the model");
    }
}

#[test]
fn each_soft_cap_branch_has_its_own_words_with_the_model_s_thresholds() {
    // The model's decision, then explain's words for it.
    let (tick, idle) = (format!("more than {WAITING_FRACTION} of a tick"), format!("until more than {RELEASE_IDLE_CPUS} CPU sits idle"));
    let sat = format!("more than {RELEASE_IDLE_CPUS} CPU sat idle");
    // (held, usage over the window, others waiting, idle CPU), the decision, its words.
    type Case<'a> = ((bool, f64, bool, f64), Hold, Vec<&'a str>);
    let cases: [Case; 5] = [
        ((false, 0.5, true, 0.0), Hold::Imposed, vec!["held from this tick", "above 0.300", "waited", &tick]),
        ((true, 0.3, false, 0.0), Hold::Kept, vec!["kept", "waited", &idle]),
        ((true, 0.3, false, 0.9), Hold::Released, vec!["released", &sat, "(0.90)"]),
        ((false, 0.2, true, 0.0), Hold::UnderCap, vec!["not held", "0.200 CPU, not above 0.300"]),
        ((false, 0.5, false, 0.0), Hold::Alone, vec!["not held", "no other job waited"]),
    ];
    for ((held, usage, others, idle), want, words) in cases {
        let hold = soft_cap_hold(held, usage, 0.3, others, idle);
        assert_eq!(hold, want);
        let w = hold_words(Some(hold), 0.3, usage, idle);
        for part in words {
            assert!(w.contains(part), "{hold:?}: {part:?} not in {w:?}");
        }
        // Only a held cap is said to be written as cpu.max.
        assert_eq!(w.contains("written as cpu.max"), hold.held(), "{hold:?}: {w}");
    }
}
