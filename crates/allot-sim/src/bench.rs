//! `allot-lab sim bench`: scheduling decisions per second against n runnable CPU-bound
//! tasks, for each scheduler. A decision is pick + (tick when due) + stop after a
//! 10 ms run, driving the scheduler directly, with simulated time advancing 10 ms per
//! decision. `check` compares ratios within one run, never absolute times.

use std::fmt::Write;
use std::time::Instant;

use allot_report::Table;
use serde::Serialize;

use crate::sched::{CurrencyInfo, Kernel, Running, SchedSpec, Stop, TaskInfo, TaskState};
use crate::time::MS;

/// One measurement.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    /// Scheduler.
    pub scheduler: String,
    /// Runnable tasks.
    pub tasks: usize,
    /// Decisions timed.
    pub decisions: u64,
    /// Nanoseconds per decision (best of 3 repetitions).
    pub ns_per_decision: f64,
    /// Decisions per second.
    pub decisions_per_s: f64,
}

/// All measurements.
#[derive(Debug, Clone, Serialize)]
pub struct Bench {
    /// CPUs of the host (for the record).
    pub host_cpus: usize,
    /// Measurements.
    pub points: Vec<Point>,
}

fn kernel(n: usize) -> Kernel {
    let tasks = (0..n)
        .map(|i| TaskInfo {
            name: format!("t{i}"),
            currency: i % 10,
            tickets: 100 + (i % 7) as u32 * 50,
            nice: 0,
            cap: None,
            slice: None,
            parent: None,
            state: TaskState::Runnable,
            slept_at: 0,
            cpu: 0,
        })
        .collect();
    let currencies = (0..10).map(|i| CurrencyInfo { name: format!("u{i}"), parent: None, funding: 100 }).collect();
    Kernel { now: 0, ncpus: 1, quantum: Some(10 * MS), tasks, currencies }
}

fn measure(spec: &SchedSpec, n: usize) -> (u64, f64) {
    let mut k = kernel(n);
    let mut s = spec.build(&k, 1);
    for t in 0..n {
        s.add(&k, t, None);
    }
    let tick = s.tick_ns();
    let mut next_tick = tick.unwrap_or(u64::MAX);
    let run = 10 * MS;
    let mut step = |k: &mut Kernel, s: &mut Box<dyn crate::sched::Scheduler>| {
        let p = s.pick(k, 0).expect("runnable tasks");
        let t = p.task;
        k.tasks[t].state = TaskState::Running(0);
        k.now += run;
        k.tasks[t].cpu += run;
        while k.now >= next_tick {
            let r = [Some(Running { task: t, ran: run, cpu: k.tasks[t].cpu })];
            s.tick(k, &r);
            next_tick += tick.unwrap();
        }
        k.tasks[t].state = TaskState::Runnable;
        s.stop(k, t, run, Stop::Expired);
    };
    for _ in 0..200 {
        step(&mut k, &mut s);
    }
    let mut best = f64::MAX;
    let mut total = 0;
    for _ in 0..3 {
        let start = Instant::now();
        let mut d = 0u64;
        while d < 100 || (start.elapsed().as_millis() < 80 && d < 1_000_000) {
            for _ in 0..50 {
                step(&mut k, &mut s);
            }
            d += 50;
        }
        let ns = start.elapsed().as_nanos() as f64 / d as f64;
        best = best.min(ns);
        total += d;
    }
    (total, best)
}

/// Measures every scheduler at every size.
pub fn run(specs: &[SchedSpec], sizes: &[usize]) -> Bench {
    let mut points = Vec::new();
    for spec in specs {
        for &n in sizes {
            let (d, ns) = measure(spec, n);
            points.push(Point { scheduler: spec.label(), tasks: n, decisions: d, ns_per_decision: ns, decisions_per_s: 1e9 / ns });
        }
    }
    Bench { host_cpus: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1), points }
}

/// The table: a row per scheduler, decisions per second per size, and the growth of
/// the per-decision cost.
pub fn text(b: &Bench) -> String {
    let mut sizes: Vec<usize> = b.points.iter().map(|p| p.tasks).collect();
    sizes.sort();
    sizes.dedup();
    let mut head = vec!["scheduler".to_string()];
    head.extend(sizes.iter().map(|n| format!("n={n} dec/s")));
    head.push("cost nmax/nmin".into());
    let mut scheds: Vec<String> = Vec::new();
    for p in &b.points {
        if !scheds.contains(&p.scheduler) {
            scheds.push(p.scheduler.clone());
        }
    }
    let mut t = Table::new(head);
    for s in &scheds {
        let mut row = vec![s.clone()];
        for n in &sizes {
            row.push(match b.points.iter().find(|p| &p.scheduler == s && p.tasks == *n) {
                Some(p) => format!("{:.0}", p.decisions_per_s),
                None => "-".into(),
            });
        }
        row.push(format!("{:.1}", growth(b, s).unwrap_or(f64::NAN)));
        t.row(row);
    }
    let mut out = t.render();
    let _ =
        writeln!(out, "(decisions per second on this host, {} CPUs; last column: per-decision cost at the largest n ÷ at the smallest)", b.host_cpus);
    out
}

fn cost(b: &Bench, s: &str, n: usize) -> Option<f64> {
    b.points.iter().find(|p| p.scheduler == s && p.tasks == n).map(|p| p.ns_per_decision)
}

/// Per-decision cost at the largest size over the smallest.
pub fn growth(b: &Bench, s: &str) -> Option<f64> {
    let sizes: Vec<usize> = b.points.iter().filter(|p| p.scheduler == s).map(|p| p.tasks).collect();
    let (lo, hi) = (*sizes.iter().min()?, *sizes.iter().max()?);
    Some(cost(b, s, hi)? / cost(b, s, lo)?)
}

/// The scaling claims, as ratios within this run. Returns the failures.
pub fn check(b: &Bench) -> Vec<String> {
    let mut fails = Vec::new();
    let sizes: Vec<usize> = {
        let mut v: Vec<usize> = b.points.iter().map(|p| p.tasks).collect();
        v.sort();
        v.dedup();
        v
    };
    if sizes.len() < 2 {
        return vec!["need at least two sizes".into()];
    }
    let (lo, hi) = (sizes[0], *sizes.last().unwrap());
    let linear = hi as f64 / lo as f64;
    for s in ["lottery", "stride"] {
        if let Some(g) = growth(b, s) {
            // O(log n): the cost may grow by log(hi)/log(lo) (4× from 10 to 10000)
            // plus cache effects; linear growth would be `linear` (1000×). Allow a
            // fifth of linear growth per order of magnitude of slack: far from O(n).
            let bound = (linear.log10() * 5.0).max(4.0);
            if g > bound {
                fails.push(format!(
                    "{s}: per-decision cost grew {g:.1}× from n={lo} to n={hi}; O(log n) allows ≤ {bound:.0}× (linear would be {linear:.0}×)"
                ));
            }
        }
    }
    if let (Some(l), Some(h)) = (growth(b, "lottery"), growth(b, "hybrid")) {
        if l >= h {
            fails.push(format!("lottery (tree draw, {l:.1}×) should grow slower than hybrid (O(n) Figure 2 scan, {h:.1}×)"));
        }
    }
    fails
}
