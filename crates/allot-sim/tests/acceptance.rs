//! The simulator's acceptance numbers, asserted on the built-in scenarios with fixed
//! seeds. Each tolerance is stated where it is asserted, with why it is enough.
//! Everything here runs in well under a minute in debug mode; CI runs
//! `cargo test --workspace --release`.

use allot_sim::engine::RunResult;
use allot_sim::metrics::{currency_share, latency, share};
use allot_sim::scenario::{builtin, Row};
use allot_sim::time::SEC;

fn run(name: &str, seed: u64) -> (Vec<(String, RunResult)>, Vec<Row>) {
    let s = builtin(name).unwrap();
    let res = s.run(seed);
    let rows = (s.check.unwrap())(&res);
    (res, rows)
}

fn get<'a>(res: &'a [(String, RunResult)], label: &str) -> &'a RunResult {
    &res.iter().find(|(l, _)| l == label).unwrap().1
}

fn assert_rows_pass(rows: &[Row]) {
    for r in rows {
        if let Some(false) = r.pass {
            panic!("{} [{}]: simulated {} outside {:?} (published {})", r.what, r.run, r.simulated, r.expect, r.published);
        }
    }
}

/// Fig 3 over 60 s: lottery within ±3 percentage points of 3:2:1 (1/2, 1/3, 1/6),
/// stride within ±0.5. With 10 ms quanta a 60 s lottery holds 6000 draws; the
/// binomial sd of a 1/2 share is 0.65 points, so ±3 is 4.6 sd: it fails only if the
/// draw is biased. Stride's error is bounded by one quantum per task: 10 ms in
/// 60 s = 0.017 points, so ±0.5 fails only if stride is wrong.
#[test]
fn fig3_ratio_lottery_and_stride() {
    let (res, rows) = run("fig3-ratio", 1);
    assert_rows_pass(&rows);
    for (label, tol) in [("lottery", 0.03), ("stride", 0.005)] {
        let r = get(&res, label);
        for (name, ideal) in [("p3", 0.5), ("p2", 1.0 / 3.0), ("p1", 1.0 / 6.0)] {
            let v = share(r, name, 0, 60 * SEC);
            assert!((v - ideal).abs() <= tol, "{label} {name}: {v} vs {ideal} ± {tol}");
        }
    }
}

/// Table 5: lottery with currencies gives the lone process 50% ±3 and each of the
/// five 10% ±2 (6000 draws at 10 ms quanta: sd 0.65 and 0.39 points); Table 4:
/// 4.4BSD gives each of the six about 1/6 (±2 points; decay usage round-robins
/// equal CPU-bound processes, so the error is a few 100 ms quanta in 60 s).
#[test]
fn table5_insulation() {
    let (res, rows) = run("table5-insulation", 1);
    assert_rows_pass(&rows);
    let d = 60 * SEC;
    let lot = get(&res, "lottery");
    assert!((share(lot, "rc564", 0, d) - 0.5).abs() <= 0.03);
    for i in 1..=5 {
        let v = share(lot, &format!("xoopic.{i}"), 0, d);
        assert!((v - 0.1).abs() <= 0.02, "xoopic.{i}: {v}");
    }
    let bsd = get(&res, "bsd");
    for name in ["rc564", "xoopic.1", "xoopic.2", "xoopic.3", "xoopic.4", "xoopic.5"] {
        let v = share(bsd, name, 0, d);
        assert!((v - 1.0 / 6.0).abs() <= 0.02, "bsd {name}: {v}");
    }
    // No insulation under 4.4BSD: peterm's five get five sixths.
    assert!(currency_share(bsd, "peterm", 0, d) > 0.8);
}

/// Table 1: with windowed ticket boost the bimodal job's mean dispatch latency in
/// 22–35 s is ≤ 0.1 ms; without it ≥ 5 ms. A single lost lottery costs up to one
/// 50 ms waker period, which alone moves a 130-sample mean by ~0.4 ms; while the
/// boost is still ramping at 22–23 s such a loss happens in about one seed in five
/// (docs/sim.md gives the count over 40 seeds). So this asserts the scenario's
/// default seed and, for robustness, the median over seeds 1–9.
#[test]
fn table1_windowed_boost() {
    let s = builtin("table1-bimodal").unwrap();
    let (_, rows) = run("table1-bimodal", s.seed);
    assert_rows_pass(&rows);
    let mut with = Vec::new();
    let mut without = Vec::new();
    for seed in 1..=9 {
        let res = s.run(seed);
        with.push(latency(get(&res, "hybrid"), "bimodal", 22 * SEC, 35 * SEC).mean);
        without.push(latency(get(&res, "hybrid boost=off"), "bimodal", 22 * SEC, 35 * SEC).mean);
    }
    with.sort_by(f64::total_cmp);
    without.sort_by(f64::total_cmp);
    assert!(with[4] <= 0.1, "median with boost {:?}", with);
    assert!(without[4] >= 5.0, "median without boost {:?}", without);
    assert!(without[0] >= 5.0, "every seed without boost ≥ 5 ms: {:?}", without);
}

/// EBS 2004 caps: every row of the scenario is in its stated range.
#[test]
fn ebs_caps() {
    let (_, rows) = run("ebs-caps", 1);
    assert!(rows.iter().all(|r| r.pass.is_some()));
    assert_rows_pass(&rows);
}

/// Ross and Abel 2000 §5.3: a nice −20 CPU-heavy emulator starves the X server under Linux 2.2
/// (X runs a few times a second, waiting a whole ~400 ms slice); with X at the same
/// nice it is smooth.
#[test]
fn nice_pathology() {
    let s = builtin("nice-pathology").unwrap();
    let res = s.run(1);
    let x = |label: &str| {
        let r = get(&res, label);
        let t = r.tasks.iter().find(|t| t.name == "X").unwrap();
        (t.dispatches as f64 / 20.0, t.latencies.iter().map(|l| l.lat).max().unwrap_or(0) as f64 / 1e6)
    };
    let (smooth_rate, _) = x("linux22 / rc5 -, X 0, atari 0");
    let (jerky_rate, jerky_wait) = x("linux22 / rc5 -, X 0, atari -20");
    let (fixed_rate, _) = x("linux22 / rc5 -, X -20, atari -20");
    assert!(smooth_rate > 55.0 && fixed_rate > 55.0, "{smooth_rate} {fixed_rate}");
    assert!(jerky_rate < 5.0, "X updates/s with the emulator at −20: {jerky_rate}");
    assert!(jerky_wait > 350.0, "X waits a −20 slice (400 ms): {jerky_wait}");
}

/// Ross and Abel 2000 §5.2.3: under Linux 2.2 a job of short processes loses CPU to a CPU-bound
/// process (fork halves the counter); stride and EEVDF give it about half.
#[test]
fn fork_penalty() {
    let s = builtin("fork-penalty").unwrap();
    let res = s.run(1);
    let js = |l: &str| allot_sim::metrics::job_share(get(&res, l), "latex", 0, 30 * SEC);
    assert!(js("linux22") < 0.35, "linux22 {}", js("linux22"));
    assert!((js("stride") - 0.5).abs() < 0.03, "stride {}", js("stride"));
    assert!((js("eevdf") - 0.5).abs() < 0.05, "eevdf {}", js("eevdf"));
}

/// the starved-task tutorial: a SCHED_FIFO deadline task is never late; among hogs under CFS it is.
#[test]
fn starved_periodic() {
    let s = builtin("starved-periodic").unwrap();
    let res = s.run(1);
    let worst = |l: &str| get(&res, l).tasks[0].lateness.iter().copied().max().unwrap_or(0);
    assert!(worst("cfs / 2 hogs") > 0);
    assert!(worst("eevdf / 2 hogs") > 0);
    assert_eq!(worst("cfs / SCHED_FIFO 50"), 0);
    assert_eq!(worst("eevdf / SCHED_FIFO 50"), 0);
    assert!(worst("cfs / nice -20, hogs +19") < worst("cfs / 2 hogs"));
}

/// Every built-in runs under every scheduler (--scheduler) without panicking.
#[test]
fn every_scenario_under_every_scheduler() {
    for (name, _) in allot_sim::scenario::builtin_names() {
        for (sched, _) in allot_sim::sched::NAMES {
            let mut s = builtin(&name).unwrap().with_scheduler(&allot_sim::SchedSpec::named(sched));
            for r in &mut s.runs {
                r.workload.duration = r.workload.duration.min(3 * SEC);
            }
            let res = s.run(3);
            assert!(!res.is_empty());
        }
    }
}
