//! A live run's schedstat readings set beside the simulator's run of the same workload.
//!
//! The readings are lines `RUN TASK mark SECS RUN_NS DELAY_NS TIMESLICES`: at SECS after
//! the workload's start, the task's `/proc/PID/schedstat` (time on a CPU, time waiting
//! on a run queue, times it was put on a CPU). A job's share of a window is its time on
//! a CPU over all the jobs' time on a CPU in it, as the simulator's share is of one busy
//! CPU; a window's mean dispatch latency is the time waited over the times put on a CPU
//! (every runnable → running episode, as the simulator's `latency` counts them,
//! Petrou et al. 1999 §5.2).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::{ms, Cell, Compare, Plan, SHARE_TOL};
use crate::engine::{RunResult, Sim};
use crate::metrics;
use crate::time::{Ns, SEC};

/// One schedstat reading.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reading {
    /// ns on a CPU.
    pub run: u64,
    /// ns waiting on a run queue.
    pub delay: u64,
    /// Times put on a CPU.
    pub slices: u64,
}

/// Readings by (run label, task), then by mark (ns since start).
pub type Readings = BTreeMap<(String, String), BTreeMap<Ns, Reading>>;

/// Parses the readings; an error names the line.
pub fn parse(text: &str) -> Result<Readings, String> {
    let mut r = Readings::new();
    for (i, line) in text.lines().enumerate() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.is_empty() || f[0].starts_with('#') {
            continue;
        }
        let bad = || format!("line {}: {line:?}: wanted RUN TASK mark SECS RUN_NS DELAY_NS TIMESLICES", i + 1);
        if f.len() != 7 || f[2] != "mark" {
            return Err(bad());
        }
        let secs: f64 = f[3].parse().ok().filter(|s: &f64| s.is_finite() && *s >= 0.0).ok_or_else(bad)?;
        let n = |s: &str| s.parse::<u64>().map_err(|_| bad());
        let at = (secs * SEC as f64).round() as Ns;
        r.entry((f[0].to_string(), f[1].to_string())).or_default().insert(at, Reading { run: n(f[4])?, delay: n(f[5])?, slices: n(f[6])? });
    }
    Ok(r)
}

/// The comparison: a text report, and whether every check held.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The report.
    pub text: String,
    /// Every check held.
    pub pass: bool,
}

fn reading(r: &Readings, run: &str, task: &str, at: Ns) -> Result<Reading, String> {
    r.get(&(run.to_string(), task.to_string()))
        .and_then(|m| m.get(&at))
        .copied()
        .ok_or_else(|| format!("no reading of task {task:?} in run {run:?} at {} s", at as f64 / SEC as f64))
}

/// Runs the plan's simulated runs and compares the live readings with them.
pub fn compare(p: &Plan, live: &Readings) -> Result<Outcome, String> {
    let sims: Vec<Vec<(String, RunResult)>> =
        p.runs.iter().map(|r| r.sims.iter().map(|(l, s)| (l.clone(), Sim::new(&p.workload, s, p.seed).run())).collect()).collect();
    match &p.compare {
        Compare::Shares { from, to } => shares(p, live, &sims, *from, *to),
        Compare::Latency { task, windows, pairs } => latencies(p, live, &sims, task, windows, pairs),
    }
}

fn shares(p: &Plan, live: &Readings, sims: &[Vec<(String, RunResult)>], from: Ns, to: Ns) -> Result<Outcome, String> {
    let mut text = format!(
        "{}: each job's share of the CPU in {}-{} s, live against simulated (random seed {}), allowed {SHARE_TOL}\n",
        p.scenario,
        from / SEC,
        to / SEC,
        p.seed
    );
    let mut pass = true;
    for (run, sim) in p.runs.iter().zip(sims) {
        let mut got = Vec::new();
        for j in &p.jobs {
            let (a, b) = (reading(live, &run.label, &j.task, from)?, reading(live, &run.label, &j.task, to)?);
            got.push(b.run.saturating_sub(a.run) as f64);
        }
        let total: f64 = got.iter().sum();
        if total <= 0.0 {
            return Err(format!("run {:?}: no CPU time measured in the window", run.label));
        }
        let _ = writeln!(text, "{:<14} {:>8} {}", "job", run.label, sim.iter().map(|(l, _)| format!("{l:>8} {:>7}", "diff")).collect::<String>());
        let sim_shares: Vec<Vec<f64>> = sim
            .iter()
            .map(|(_, r)| {
                let v: Vec<f64> = p.jobs.iter().map(|j| metrics::share(r, &j.task, from, to)).collect();
                let t: f64 = v.iter().sum();
                v.iter().map(|x| x / t).collect()
            })
            .collect();
        for (i, j) in p.jobs.iter().enumerate() {
            let l = got[i] / total;
            let mut line = format!("{:<14} {l:>8.4}", j.task);
            for s in &sim_shares {
                let d = l - s[i];
                pass &= d.abs() <= SHARE_TOL;
                let _ = write!(line, " {:>8.4} {d:>+7.4}", s[i]);
            }
            let _ = writeln!(text, "{line}");
        }
    }
    let _ = writeln!(text, "{}", if pass { "shares agree" } else { "shares DIFFER: a job is more than the allowed share from the simulator's" });
    Ok(Outcome { text, pass })
}

/// Mean ms waited per time put on a CPU, in [a, b).
fn live_latency(live: &Readings, run: &str, task: &str, a: Ns, b: Ns) -> Result<f64, String> {
    let (x, y) = (reading(live, run, task, a)?, reading(live, run, task, b)?);
    let n = y.slices.saturating_sub(x.slices);
    if n == 0 {
        return Err(format!("run {run:?}: task {task:?} was not put on a CPU in {}-{} s", a / SEC, b / SEC));
    }
    Ok(ms(y.delay.saturating_sub(x.delay)) / n as f64)
}

fn latencies(
    p: &Plan,
    live: &Readings,
    sims: &[Vec<(String, RunResult)>],
    task: &str,
    windows: &[(Ns, Ns)],
    pairs: &[(Cell, Cell)],
) -> Result<Outcome, String> {
    let name = |w: (Ns, Ns)| format!("{}-{} s", w.0 / SEC, w.1 / SEC);
    let mut text = format!("{}: {task}'s mean dispatch latency (ms) by window, live against simulated (random seed {})\n", p.scenario, p.seed);
    // lat[run][window] = (live, simulated: the run's first simulated model)
    let mut lat = vec![vec![(0.0, 0.0); windows.len()]; p.runs.len()];
    for (ri, (run, sim)) in p.runs.iter().zip(sims).enumerate() {
        let (sl, sr) = sim.first().ok_or_else(|| format!("run {:?} has no simulated run", run.label))?;
        let _ = writeln!(text, "{:<10} {:>10} {:>18}", "window", run.label, sl);
        for (wi, w) in windows.iter().enumerate() {
            let l = live_latency(live, &run.label, task, w.0, w.1)?;
            let s = metrics::latency(sr, task, w.0, w.1).mean;
            lat[ri][wi] = (l, s);
            // The totals behind the live mean: a job put on a CPU more often per burst
            // has a lower mean for the same time waited (measured, not checked).
            let (x, y) = (reading(live, &run.label, task, w.0)?, reading(live, &run.label, task, w.1)?);
            let _ = writeln!(
                text,
                "{:<10} {l:>10.3} {s:>18.3}   live: waited {:.3} s over {} dispatches, {:.3} s on a CPU",
                name(*w),
                y.delay.saturating_sub(x.delay) as f64 / 1e9,
                y.slices.saturating_sub(x.slices),
                y.run.saturating_sub(x.run) as f64 / 1e9
            );
        }
    }
    let mut pass = true;
    for ((ra, wa), (rb, wb)) in pairs {
        let (a, b) = (lat[*ra][*wa], lat[*rb][*wb]);
        let (live_lt, sim_lt) = (a.0 < b.0, a.1 < b.1);
        pass &= live_lt == sim_lt;
        let word = |lt: bool| if lt { "below" } else { "not below" };
        let _ = writeln!(
            text,
            "{} {} against {} {}: live {} ({:.3} vs {:.3}), simulated {} ({:.3} vs {:.3}){}",
            p.runs[*ra].label,
            name(windows[*wa]),
            p.runs[*rb].label,
            name(windows[*wb]),
            word(live_lt),
            a.0,
            b.0,
            word(sim_lt),
            a.1,
            b.1,
            if live_lt == sim_lt { "" } else { ": ORDER DIFFERS" }
        );
    }
    let _ = writeln!(text, "{}", if pass { "orderings agree" } else { "orderings DIFFER" });
    Ok(Outcome { text, pass })
}

#[cfg(test)]
mod tests {
    use super::super::plan;
    use super::*;

    fn readings(run: &str, rows: &[(&str, f64, u64, u64, u64)]) -> String {
        rows.iter().map(|(t, s, r, d, n)| format!("{run} {t} mark {s} {r} {d} {n}\n")).collect()
    }

    #[test]
    fn shares_at_3_2_1_agree_and_a_drift_of_3_points_fails() {
        let p = plan("fig3-ratio").unwrap();
        let at = |a: u64, b: u64, c: u64| {
            readings(
                "allot-scx",
                &[
                    ("p3", 5.0, 0, 0, 1),
                    ("p2", 5.0, 0, 0, 1),
                    ("p1", 5.0, 0, 0, 1),
                    ("p3", 25.0, a, 0, 9),
                    ("p2", 25.0, b, 0, 9),
                    ("p1", 25.0, c, 0, 9),
                ],
            )
        };
        let ok = compare(&p, &parse(&at(10_000, 6_700, 3_300)).unwrap()).unwrap();
        assert!(ok.pass, "{}", ok.text);
        let bad = compare(&p, &parse(&at(10_000, 6_000, 4_000)).unwrap()).unwrap();
        assert!(!bad.pass, "{}", bad.text);
    }

    #[test]
    fn a_missing_reading_is_named() {
        let p = plan("fig3-ratio").unwrap();
        let e = compare(&p, &parse("allot-scx p3 mark 5 0 0 1\n").unwrap()).unwrap_err();
        assert!(e.contains("\"p3\"") && e.contains("25 s"), "{e}");
    }

    #[test]
    fn latency_orderings_follow_the_simulator_or_fail() {
        let p = plan("table1-bimodal").unwrap();
        // (delay ms, slices) accumulated at the marks 0, 15, 22, 35, 50.
        let series = |per_window: [f64; 4]| {
            // windows: 0-15, 15-22, 22-35, 35-50; 100 slices each
            let mut acc = (0.0, 0u64);
            let mut v = vec![(0.0, acc.0, acc.1)];
            for (i, m) in [15.0, 22.0, 35.0, 50.0].iter().enumerate() {
                acc = (acc.0 + per_window[i] * 100.0, acc.1 + 100);
                v.push((*m, acc.0, acc.1));
            }
            v
        };
        let text = |boost: [f64; 4], off: [f64; 4]| {
            let mut s = String::new();
            for (run, w) in [("boost", boost), ("no-boost", off)] {
                for (at, d, n) in series(w) {
                    s += &format!("{run} bimodal mark {at} 0 {} {n}\n", (d * 1e6) as u64);
                }
            }
            s
        };
        let good = compare(&p, &parse(&text([20.0, 0.5, 0.4, 20.0], [20.0, 10.0, 10.0, 20.0])).unwrap()).unwrap();
        assert!(good.pass, "{}", good.text);
        // 15-35 s with the boost: 0.5 ms and 0.4 ms over 100 dispatches each.
        assert!(good.text.contains("live: waited 0.090 s over 200 dispatches"), "{}", good.text);
        // The boost making the interactive phase slower than without it: the order differs.
        let bad = compare(&p, &parse(&text([20.0, 12.0, 12.0, 20.0], [20.0, 10.0, 10.0, 20.0])).unwrap()).unwrap();
        assert!(!bad.pass && bad.text.contains("ORDER DIFFERS"), "{}", bad.text);
    }

    #[test]
    fn bad_lines_are_refused_with_their_number() {
        let e = parse("allot-scx p3 mark 5 0 0 1\nallot-scx p3 mark five 0 0 1\n").unwrap_err();
        assert!(e.starts_with("line 2:"), "{e}");
    }
}
