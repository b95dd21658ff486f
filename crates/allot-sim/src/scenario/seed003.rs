//! The starved-task tutorial's starved task: a busy-waiting periodic probe against CPU hogs.

use super::*;

// ---------------------------------------------------- the starved-task tutorial starved task

pub(super) fn starved() -> Scenario {
    // jitter.py: busy-waits to a deadline every 5 ms, 2000 times (10 s), and reports
    // its worst lateness; nproc CPU hogs (2 here). Variants of the starved-task tutorial steps 1, 2, 4, 5.
    let mk = |s: &str, label: &str, hogs: usize, hog_nice: i32, probe: TaskSpec| {
        let mut w = Workload::new(2, 10 * SEC).task(probe);
        for i in 0..hogs {
            w = w.task(cpu(&format!("hog.{i}"), "user", None).nice(hog_nice));
        }
        Run { label: format!("{s} / {label}"), sched: SchedSpec::named(s), workload: w }
    };
    let probe = || TaskSpec::new("jitter", "user", Behaviour::Spinner { period: 5 * MS });
    let mut runs = vec![mk("cfs", "idle box", 0, 0, probe())];
    for s in ["cfs", "eevdf"] {
        runs.push(mk(s, "2 hogs", 2, 0, probe()));
        runs.push(mk(s, "nice -20, hogs +19", 2, 19, probe().nice(-20)));
        runs.push(mk(s, "SCHED_FIFO 50", 2, 0, probe().policy(Policy::Fifo(50))));
    }
    // The deadline-sleeper the tutorial's EEVDF note has in mind: 1 ms of work every
    // 5 ms, sleeping in between, against 3 hogs on 2 CPUs; EEVDF with the default
    // slice and with a 0.1 ms custom slice (sched_setattr, kernel ≥ 6.12).
    let sleeper = || TaskSpec::new("jitter", "user", Behaviour::Periodic { work: MS, sleep: 5 * MS, absolute: true, jitter: 0.0 });
    for (s, label, slice) in [("cfs", "sleeper", None), ("eevdf", "sleeper", None), ("eevdf", "sleeper, slice 0.1ms", Some(100 * US))] {
        let mut t = sleeper();
        t.slice = slice;
        runs.push(mk(s, label, 3, 0, t));
    }
    Scenario {
        name: "starved-periodic".into(),
        title: "Catch the scheduler starving a task: a 5 ms deadline task starved by CPU hogs; default, nice −20, SCHED_FIFO, under CFS and EEVDF"
            .into(),
        source: "\"Catch the scheduler starving a task\" (tutorial), steps 1, 2, 4, 5".into(),
        seed: 1,
        runs,
        check: Some(|res| {
            let mut rows = Vec::new();
            for (label, r) in res {
                let t = task(r, "jitter");
                if label.contains("sleeper") {
                    let s = latency(r, "jitter", 0, r.duration);
                    let wake: Vec<f64> = t.latencies.iter().filter(|l| l.wake).map(|l| l.lat as f64 / 1e6).collect();
                    let worst = wake.iter().cloned().fold(0.0, f64::max);
                    rows.push(Row::new(
                        "sleeper wakeup latency, worst",
                        label,
                        "EEVDF helps tasks that run briefly and often (FAQ)",
                        format!("{worst:.2} ms"),
                        worst,
                    ));
                    rows.push(Row::new(
                        "sleeper dispatch latency incl. requeues, mean (max)",
                        label,
                        "–",
                        format!("{:.2} ({:.2}) ms", s.mean, s.max),
                        s.mean,
                    ));
                    continue;
                }
                let worst = t.lateness.iter().copied().max().unwrap_or(0) as f64 / 1e6;
                let publ = if label.contains("idle") {
                    "0.3 ms (step 1)"
                } else if label.contains("nice") {
                    "6.2 ms (step 4)"
                } else if label.contains("FIFO") {
                    "0.4 ms (step 5)"
                } else {
                    "47.8 ms (step 2)"
                };
                rows.push(Row::new("jitter worst wakeup lateness", label, publ, format!("{worst:.1} ms"), worst));
                let late = t.lateness.len() as f64 / t.probes.max(1) as f64;
                rows.push(Row::new("deadlines found off-CPU", label, "–", pct(late), late));
            }
            rows
        }),
        plots: vec![Plot::Progress],
    }
}
