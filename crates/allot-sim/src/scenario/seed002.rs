//! Ross and Abel's experiments: the fork penalty and the nice pathology.

use super::*;

// ---------------------------------------------------- Ross and Abel 2000 fork penalty

pub(super) fn fork_penalty() -> Scenario {
    // A job of short CPU-bound processes (Ross and Abel 2000 §5.2.3: LaTeX/Metafont, make): the
    // parent computes 0.5 ms, forks a child that computes 10 ms and exits, waits,
    // repeats; against one CPU-bound process.
    let w = Workload::new(1, 30 * SEC)
        .task(TaskSpec::new("latex", "user", Behaviour::ForkHeavy { parent_work: 500 * US, child_work: 10 * MS, children: None }))
        .task(cpu("compile", "user", None));
    Scenario {
        name: "fork-penalty".into(),
        title: "Ross and Abel 2000 fork penalty: a job of short processes vs a CPU-bound one, under each scheduler".into(),
        source: "Ross & Abel 2000 §5.2.3 (runtime ratio, fork splits the counter)".into(),
        seed: 1,
        runs: runs_of(&["linux22", "bsd", "lottery", "stride", "hybrid", "cfs", "eevdf", "ebs"], &w),
        check: Some(|res| {
            let mut rows = Vec::new();
            for (label, r) in res {
                let v = job_share(r, "latex", 0, 30 * SEC);
                rows.push(Row::new(
                    "short-process job CPU share (fair: 50%)",
                    label,
                    if label == "linux22" { "penalised: half the slice lost at each fork (§5.2.3)" } else { "–" },
                    pct(v),
                    v,
                ));
                let rr = runtime_ratio(r, "latex");
                rows.push(Row::new(
                    "short-process job runtime ratio",
                    label,
                    if label == "linux22" { "low: Figs 3–5 left tail" } else { "–" },
                    format!("{rr:.3}"),
                    rr,
                ));
            }
            rows
        }),
        plots: vec![Plot::Progress],
    }
}

// ---------------------------------------------------- Ross and Abel 2000 nice pathology

pub(super) fn nice_pathology() -> Scenario {
    // §5.3: an Atari emulator needing ~90% of the CPU for 60 frames/s, sending each
    // frame to the X server asynchronously; optionally an rc5 cracker; Table 1's nice
    // combinations under Linux 2.2.
    let combos: [(Option<i32>, i32, i32); 10] = [
        (None, 0, 0),
        (None, 0, 19),
        (None, 0, -20),
        (None, -20, 0),
        (None, -20, -20),
        (Some(19), 0, 0),
        (Some(0), 0, 0),
        (Some(0), 0, -20),
        (Some(0), -20, 0),
        (Some(0), -20, -20),
    ];
    let runs = combos
        .iter()
        .map(|&(rc5, x, atari)| {
            let mut w = Workload::new(1, 20 * SEC).task(TaskSpec::new("X", "user", Behaviour::Server).nice(x)).task(
                TaskSpec::new("atari", "user", Behaviour::Client { work: 15 * MS, period: 16_666_667, server: "X".into(), request: MS, spin: true })
                    .nice(atari),
            );
            if let Some(n) = rc5 {
                w = w.task(cpu("rc5", "user", None).nice(n));
            }
            let rc = rc5.map(|n| n.to_string()).unwrap_or_else(|| "-".into());
            Run { label: format!("linux22 / rc5 {rc}, X {x}, atari {atari}"), sched: SchedSpec::named("linux22"), workload: w }
        })
        .collect();
    Scenario {
        name: "nice-pathology".into(),
        title: "Ross and Abel 2000 Table 1: nice pathologies of an emulator, the X server and rc5 under Linux 2.2".into(),
        source: "Ross & Abel 2000 §5.3 Table 1".into(),
        seed: 1,
        runs,
        check: Some(|res| {
            let publ = [
                "59.9 smooth",
                "59.8 smooth",
                "59.8 jerky, unplayable",
                "59.9 smooth",
                "59.9 smooth",
                "57.4 smooth",
                "36.0 slow, but smooth",
                "40.2 jerky, unplayable",
                "38.3 slow, but smooth",
                "40.8 jerky, unplayable",
            ];
            let mut rows = Vec::new();
            for (i, (label, r)) in res.iter().enumerate() {
                let secs = r.duration as f64 / 1e9;
                let fps = task(r, "atari").iterations as f64 / secs;
                let x = task(r, "X");
                let xs = x.dispatches as f64 / secs;
                let xl = x.latencies.iter().map(|l| l.lat).max().unwrap_or(0) as f64 / 1e6;
                let p = publ.get(i).copied().unwrap_or("–");
                rows.push(Row::new("emulator frames/s", label, p, format!("{fps:.1}"), fps));
                rows.push(Row::new(
                    "X screen updates/s (jerky when ~1–2/s)",
                    label,
                    if p.contains("jerky") { "X ran 1–2 times/s" } else { "–" },
                    format!("{xs:.1}"),
                    xs,
                ));
                rows.push(Row::new(
                    "X worst dispatch latency ms",
                    label,
                    if p.contains("jerky") && i != 9 { "400 ms slices of the nice −20 emulator" } else { "–" },
                    format!("{xl:.1}"),
                    xl,
                ));
                let el = task(r, "atari").latencies.iter().map(|l| l.lat).max().unwrap_or(0) as f64 / 1e6;
                rows.push(Row::new(
                    "emulator worst dispatch latency ms",
                    label,
                    if i == 9 { "rc5's whole 210 ms slice: > 10 frames missed" } else { "–" },
                    format!("{el:.1}"),
                    el,
                ));
            }
            rows
        }),
        plots: vec![],
    }
}
