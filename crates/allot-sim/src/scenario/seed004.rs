//! EBS's caps: soft, hard and soft 0 (background), alone and contended.

use super::*;

// ------------------------------------------------------------- EBS 2004 caps

pub(super) fn ebs_caps() -> Scenario {
    let mk = |label: &str, capped: TaskSpec, hog: bool| {
        let mut w = Workload::new(1, 60 * SEC).task(capped);
        if hog {
            w = w.task(cpu("hog", "user", None));
        }
        Run { label: format!("ebs / {label}"), sched: SchedSpec::named("ebs"), workload: w }
    };
    let t = || cpu("capped", "user", None).nice(-20);
    Scenario {
        name: "ebs-caps".into(),
        title: "EBS 2004 caps: soft 1/2 alone vs contended, hard 1/2, soft 0 (background)".into(),
        source: "Lee (Aurema) 2004, EBS RFC on LKML: CPU usage rate caps".into(),
        seed: 1,
        runs: vec![
            mk("no cap, contended", t(), true),
            mk("soft 1/2, alone", t().cap(0.5, false), false),
            mk("soft 1/2, contended", t().cap(0.5, false), true),
            mk("hard 1/2!, alone", t().cap(0.5, true), false),
            mk("hard 1/2!, contended", t().cap(0.5, true), true),
            mk("soft 0, alone", t().cap(0.0, false), false),
            mk("soft 0, contended", t().cap(0.0, false), true),
        ],
        check: Some(|res| {
            let mut rows = Vec::new();
            // Measured after four half-lives, when the usage estimate has converged.
            let (a, b) = (30 * SEC, 60 * SEC);
            let cases: [(&str, &str, (f64, f64)); 7] = [
                ("no cap, contended", "420 of 440 shares: 95.5%", (0.90, 1.0)),
                ("soft 1/2, alone", "may exceed a soft cap when CPU is free: ~100%", (0.95, 1.0)),
                ("soft 1/2, contended", "held to the cap when others want CPU: ≤ 50%", (0.45, 0.55)),
                ("hard 1/2!, alone", "a hard cap always holds: ≤ 50%", (0.45, 0.52)),
                ("hard 1/2!, contended", "≤ 50%", (0.45, 0.52)),
                ("soft 0, alone", "runs when nothing else does: ~100%", (0.95, 1.0)),
                ("soft 0, contended", "background: ~0%", (0.0, 0.01)),
            ];
            for (label, publ, (lo, hi)) in cases {
                let l = format!("ebs / {label}");
                let Some(r) = get(res, &l) else { continue };
                let v = share(r, "capped", a, b);
                rows.push(Row::new("capped task (nice −20) CPU share 30–60 s", &l, publ, pct(v), v).expect(lo, hi));
            }
            rows
        }),
        plots: vec![Plot::Progress],
    }
}
