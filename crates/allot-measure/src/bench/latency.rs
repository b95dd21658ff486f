//! `allot-lab bench latency`: the starved-task tutorial's experiment. The probe alone (the baseline), against
//! CPU hogs (one per CPU, the starved-task tutorial step 2), with nice −20 against hogs at nice 19 (step
//! 4), with SCHED_FIFO 50 (step 5), with a short EEVDF custom slice, and under allot (the
//! probe and the hogs as two jobs; the hogs in the background). The starvation factor is
//! a variant's worst lateness over the baseline's (the starved-task tutorial "Now you do it" 1).

use super::common::{self, Allot, Common, Kids, Scratch};
use crate::policy::Policy;
use crate::probe::{fmt_us, Mode};
use crate::report::{table, Progress};
use allot_report::{Axis, BarChart, BarGroup};
use anyhow::bail;
use clap::Args;
use std::time::Duration;

/// `allot-lab bench latency`.
#[derive(Debug, Clone, Args)]
pub struct LatencyArgs {
    /// Wakeups per variant (the tutorial's jitter.py: 2000 at 5 ms = 10 s).
    #[arg(long, default_value_t = 2000)]
    pub count: u64,
    /// Probe interval, more than 0 and at most 60s: 5ms, 500us (a bare number is ms).
    #[arg(long, default_value = "5ms", allow_negative_numbers = true)]
    pub interval: String,
    /// CPU hogs (default: one per CPU, as in the tutorial).
    #[arg(long)]
    pub hogs: Option<usize>,
    /// Probe modes to run: busy (the tutorial's busy-waiting jitter.py) and/or sleep.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Mode::Busy, Mode::Sleep])]
    pub modes: Vec<Mode>,
    /// Rounds: each variant runs this many times (count / rounds wakeups each),
    /// interleaved with the others; the table shows the median p50/p99 of the rounds and
    /// the worst max.
    #[arg(long, default_value_t = 4)]
    pub rounds: usize,
    /// Short run for CI: 400 wakeups per variant, one round.
    #[arg(long)]
    pub quick: bool,
    /// Common options.
    #[command(flatten)]
    pub common: Common,
}

impl LatencyArgs {
    /// The probe interval.
    fn interval_duration(&self) -> anyhow::Result<Duration> {
        crate::args::positive_duration("--interval", &self.interval, allot_model::duration::Unit::Ms, Duration::from_secs(60))
    }
    /// The probe interval in ms.
    fn interval_ms(&self) -> anyhow::Result<f64> {
        Ok(self.interval_duration()?.as_secs_f64() * 1e3)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
enum Variant {
    Alone,
    Hogs,
    Nice,
    Fifo,
    Slice,
    AllotJobs,
    AllotBackground,
}

impl Variant {
    fn label(&self) -> &'static str {
        match self {
            Variant::Alone => "alone (baseline)",
            Variant::Hogs => "vs hogs",
            Variant::Nice => "nice -20 vs hogs at nice 19",
            Variant::Fifo => "SCHED_FIFO 50 vs hogs",
            Variant::Slice => "slice 0.1 ms vs hogs",
            Variant::AllotJobs => "allot: probe job vs hogs job",
            Variant::AllotBackground => "allot: hogs --background",
        }
    }
    fn needs_allot(&self) -> bool {
        matches!(self, Variant::AllotJobs | Variant::AllotBackground)
    }
}

/// `allot-lab bench latency`.
pub fn run(a: LatencyArgs) -> anyhow::Result<i32> {
    if let Some(j) = &a.common.replot {
        return common::replot(&a.common, j, "latency", svg);
    }
    let interval_ms = a.interval_ms()?;
    if a.count == 0 {
        bail!("--count must be at least 1, got 0");
    }
    if a.modes.is_empty() {
        bail!("--modes needs at least one of busy, sleep");
    }
    let count = if a.quick { 400 } else { a.count };
    let ncpu = allot_linux::ncpu();
    let nhogs = a.hogs.unwrap_or(ncpu);
    let exe = a.common.exe()?;
    let scratch = Scratch::new("latency")?;
    let mut allot = Allot::start(&a.common, &exe);
    let slices = allot_linux::process::sched::custom_slices_supported();
    let mut variants = vec![Variant::Alone, Variant::Hogs, Variant::Nice, Variant::Fifo];
    if slices {
        variants.push(Variant::Slice);
    }
    if allot.daemon.is_some() {
        variants.extend([Variant::AllotJobs, Variant::AllotBackground]);
    }
    let rounds = if a.quick { 1 } else { a.rounds.max(1) };
    let mut prog = Progress::new(variants.len() * a.modes.len() * rounds, "bench latency");
    // Rounds: every variant runs `rounds` times, interleaved, so a shared machine's load
    // drifting over the run falls on all variants alike.
    let per_round = (count / rounds as u64).max(1);
    let mut raw: Vec<(Mode, Variant, Vec<serde_json::Value>)> = vec![];
    for &mode in &a.modes {
        for &v in &variants {
            raw.push((mode, v, vec![]));
        }
    }
    for round in 0..rounds {
        for (mode, v, rs) in raw.iter_mut() {
            prog.set(&format!("round {}/{rounds} {:?} {}", round + 1, mode, v.label()));
            let r = one(&a, &exe, &scratch, &mut allot, *v, *mode, per_round, nhogs);
            allot.kill_jobs();
            rs.push(r?);
            prog.step();
        }
    }
    prog.finish();
    let results: Vec<(Mode, Variant, serde_json::Value)> = raw.into_iter().map(|(m, v, rs)| (m, v, combine(&rs))).collect();

    // Tables and factors.
    let mut text = format!(
        "allot-lab bench latency (as in \"Catch the scheduler starving a task\"): probe every {} ms, {} wakeups per variant in {} interleaved rounds, {} hogs on {} CPUs\n",
        interval_ms,
        per_round * rounds as u64,
        rounds,
        nhogs,
        ncpu
    );
    let mut json_rows = vec![];
    let mut checks = vec![];
    for &mode in &a.modes {
        let base = results.iter().find(|(m, v, _)| *m == mode && *v == Variant::Alone).map(|x| &x.2).unwrap();
        let (bmax, bp99) = (base["lateness_us"]["max"].as_f64().unwrap_or(1.0).max(1.0), base["lateness_us"]["p99"].as_f64().unwrap_or(1.0).max(1.0));
        let mut rows = vec![];
        for (m, v, r) in results.iter().filter(|(m, _, _)| *m == mode) {
            let l = &r["lateness_us"];
            let g = |k: &str| l[k].as_f64().unwrap_or(f64::NAN);
            let k = &r["kernel"];
            let factor = g("max") / bmax;
            let p99f = g("p99") / bp99;
            rows.push(vec![
                v.label().to_string(),
                fmt_us(g("p50")),
                fmt_us(g("p99")),
                fmt_us(g("max")),
                fmt_factor(factor),
                fmt_factor(p99f),
                format!("{:.0} ms", k["run_delay_ms"].as_f64().unwrap_or(0.0)),
                fmt_us(k["worst_cycle_wait_us"].as_f64().unwrap_or(0.0)),
                k["involuntary_switches"].to_string(),
            ]);
            json_rows.push(serde_json::json!({
                "mode": m, "variant": v, "label": v.label(),
                "p50_us": g("p50"), "p90_us": g("p90"), "p99_us": g("p99"), "p999_us": g("p999"), "max_us": g("max"),
                "starvation_factor_max": factor, "starvation_factor_p99": p99f,
                "missed": r["missed"], "kernel": k, "cgroup": r["cgroup"], "rounds": r["rounds"],
            }));
        }
        text += &format!(
            "\nprobe mode: {}\n",
            match mode {
                Mode::Busy => "busy-wait (as the tutorial's jitter.py)",
                Mode::Sleep => "sleep (clock_nanosleep)",
            }
        );
        let hdr: Vec<String> = ["variant", "p50", "p99", "max", "factor(max)", "factor(p99)", "run_delay", "worst wait/cycle", "invol."]
            .iter()
            .map(|s| s.to_string())
            .collect();
        text += &table(&hdr, &rows);
        // --check: the shape the starved-task tutorial teaches. Contention shows at p99; FIFO removes it.
        let p99 = |v: Variant| results.iter().find(|(m, vv, _)| *m == mode && *vv == v).and_then(|x| x.2["lateness_us"]["p99"].as_f64());
        let wait = |v: Variant| results.iter().find(|(m, vv, _)| *m == mode && *vv == v).and_then(|x| x.2["kernel"]["worst_cycle_wait_us"].as_f64());
        if let (Some(h), Some(f), Some(b)) = (p99(Variant::Hogs), p99(Variant::Fifo), p99(Variant::Alone)) {
            // The starved-task tutorial's starvation is a busy-wait (always runnable) probe's; under EEVDF a
            // short sleeper is served early and may not see it (the starved-task tutorial "What changed with
            // EEVDF"), so only the busy mode is held to it.
            if mode == Mode::Busy {
                checks.push((format!("{mode:?}: hogs raise p99 lateness above the baseline ({} vs {})", fmt_us(h), fmt_us(b)), h > b));
            }
            if mode == Mode::Busy {
                checks.push((format!("{mode:?}: SCHED_FIFO p99 below the hogs' p99 ({} vs {})", fmt_us(f), fmt_us(h)), f < h));
            } else {
                // The hogs may barely touch a sleeper (above), so "below the hogs" would
                // compare two noise-level numbers. The starved-task tutorial's claim is that FIFO brings the
                // probe back to its baseline: hold its p99 lateness to that, within noise.
                // A sleeper's lateness also holds the timer's and this VM's delays, which no
                // class removes, and --quick's p99 is the 4th worst of 400 wakeups: one CI
                // run saw 561 µs against 154 µs alone while the kernel counted at most 12 µs
                // of waiting for a CPU in any cycle. So --quick also accepts the scheduler's
                // own account: the probe's worst wait for a CPU in a cycle under 0.5 ms
                // (12–14 µs here; CFS against the hogs: 3.7 ms; once 701 µs, with the
                // lateness p99 at 122 µs against 197 µs alone).
                let bound = 2.0 * b + 100.0;
                let fw = wait(Variant::Fifo).unwrap_or(f64::INFINITY);
                let ok = f <= bound || (a.quick && fw < 500.0);
                let how = if a.quick { format!("; or, --quick, its worst wait for a CPU {} < 0.5 ms", fmt_us(fw)) } else { String::new() };
                checks.push((format!("{mode:?}: SCHED_FIFO p99 back to baseline ({} <= 2 x {} + 100 µs{how})", fmt_us(f), fmt_us(b)), ok));
            }
        }
        if let (Some(h), Some(bg), Mode::Busy) = (p99(Variant::Hogs), p99(Variant::AllotBackground), mode) {
            checks.push((format!("{mode:?}: allot background hogs: p99 below plain hogs' ({} vs {})", fmt_us(bg), fmt_us(h)), bg < h));
        }
    }
    if let Some(s) = &allot.skipped {
        text += &format!("\nallot variants skipped: {s}\n");
    }
    text += "\nfactor = lateness / the baseline's (the tutorial's starvation factor); run_delay and worst wait/cycle are the probe's own kernel accounting.\n";
    let failed = if a.common.check { common::render_checks(&mut text, &checks) } else { 0 };
    let json = serde_json::json!({
        "bench": "latency", "machine": common::machine(), "interval_ms": interval_ms, "count": per_round * rounds as u64, "rounds": rounds, "hogs": nhogs,
        "allot_skipped": allot.skipped, "results": json_rows,
        "checks": checks.iter().map(|(w, ok)| serde_json::json!({"check": w, "passed": ok})).collect::<Vec<_>>(),
    });
    a.common.emit(&json, &text, Some(svg(&json)))?;
    Ok(if failed > 0 { 1 } else { 0 })
}

#[allow(clippy::too_many_arguments)]
fn one(
    a: &LatencyArgs,
    exe: &std::path::Path,
    scratch: &Scratch,
    allot: &mut Allot,
    v: Variant,
    mode: Mode,
    count: u64,
    nhogs: usize,
) -> anyhow::Result<serde_json::Value> {
    let out = scratch.file(&format!("probe-{v:?}-{mode:?}.json"));
    let _ = std::fs::remove_file(&out);
    let mut kids = Kids::default();
    let hog_args = vec!["workload".to_string(), "cpu".to_string()];
    // Hogs first.
    match v {
        Variant::Alone => {}
        Variant::Hogs | Variant::Fifo | Variant::Slice => {
            for _ in 0..nhogs {
                kids.0.push(common::spawn(exe, &hog_args, Policy::Nice(0), None, None)?);
            }
        }
        Variant::Nice => {
            for _ in 0..nhogs {
                kids.0.push(common::spawn(exe, &hog_args, Policy::Nice(19), None, None)?);
            }
        }
        Variant::AllotJobs | Variant::AllotBackground => {
            let threads = nhogs.to_string();
            let args = vec!["workload".into(), "cpu".into(), "--threads".into(), threads];
            let run: &[&str] = if v == Variant::AllotBackground { &["--background"] } else { &[] };
            allot.job(run, exe, &args, None, None)?;
        }
    }
    std::thread::sleep(Duration::from_millis(if v.needs_allot() { 500 } else { 300 }));
    let mut probe: Vec<String> = [
        "probe",
        "--json",
        "--count",
        &count.to_string(),
        "--interval",
        &format!("{}ns", a.interval_duration()?.as_nanos()),
        "--mode",
        match mode {
            Mode::Busy => "busy",
            Mode::Sleep => "sleep",
        },
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    probe.extend(["--output".into(), out.display().to_string()]);
    let policy = match v {
        Variant::Nice => "nice:-20",
        Variant::Fifo => "fifo:50",
        _ => "normal",
    };
    probe.extend(["--policy".into(), policy.into()]);
    if v == Variant::Slice {
        probe.extend(["--slice".into(), "100".into()]);
    }
    // The probe sets its own policy (so a refusal is its error, not ours).
    let limit = Duration::from_secs_f64(count as f64 * a.interval_ms()? / 1e3 * 20.0 + 30.0);
    if v.needs_allot() {
        let pid = allot.job(&[], exe, &probe, None, None)?;
        if !common::wait_gone(pid, limit) {
            bail!("probe job {pid} did not finish within {:.0} s", limit.as_secs_f64());
        }
    } else {
        let mut c = std::process::Command::new(exe);
        c.args(&probe).stdin(std::process::Stdio::null()).stdout(std::process::Stdio::null());
        let st = c.status()?;
        if !st.success() {
            bail!("probe ({}) failed: {st}", v.label());
        }
    }
    let r = common::read_report(&out, Duration::from_secs(5))?;
    kids.kill_all();
    Ok(r)
}

/// The chart of a run, from its JSON document (so a saved `--output` can be re-plotted):
/// p50, p99 and max lateness of every variant on a log axis, whiskers spanning the
/// rounds where there were several.
pub fn svg(json: &serde_json::Value) -> String {
    let (hogs, ncpu, rounds) = (&json["hogs"], &json["machine"]["cpus"], json["rounds"].as_u64().unwrap_or(1));
    let title = format!("wakeup lateness, µs ({hogs} hogs on {ncpu} CPUs)");
    let mut chart = BarChart::new(title, Axis::log("µs (log scale)"), &["p50", "p99", "max"]);
    for r in json["results"].as_array().into_iter().flatten() {
        let g = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
        let label = format!("{} ({})", r["label"].as_str().unwrap_or("?"), r["mode"].as_str().unwrap_or("?")).to_lowercase();
        chart = chart.group(BarGroup::new(label, vec![g("p50_us"), g("p99_us"), g("max_us")]).spread(spread_of_rounds(r)));
    }
    if rounds > 1 {
        let whiskers = if chart.groups.iter().any(|g| g.spread.iter().any(Option::is_some)) { ", whiskers: the rounds' range" } else { "" };
        chart.axis.label = format!("µs (log scale); bars: median of {rounds} rounds (max: the worst){whiskers}");
    }
    chart.to_svg()
}

/// The range of p50, p99 and max over a variant's rounds (none for a single round).
fn spread_of_rounds(r: &serde_json::Value) -> Vec<Option<(f64, f64)>> {
    let rounds = r["rounds"].as_array().map(|a| a.as_slice()).unwrap_or(&[]);
    ["p50", "p99", "max"]
        .iter()
        .map(|k| {
            let v: Vec<f64> = rounds.iter().filter_map(|x| x[*k].as_f64()).collect();
            (v.len() > 1).then(|| (v.iter().copied().fold(f64::INFINITY, f64::min), v.iter().copied().fold(f64::NEG_INFINITY, f64::max)))
        })
        .collect()
}

fn fmt_factor(f: f64) -> String {
    if f < 1.0 {
        format!("{f:.2}×")
    } else {
        format!("{f:.1}×")
    }
}

/// Combines rounds of one variant: median p50/p90/p99/p99.9 of the rounds, the worst max,
/// summed kernel counters and the worst per-cycle wait.
fn combine(rs: &[serde_json::Value]) -> serde_json::Value {
    if rs.len() == 1 {
        return rs[0].clone();
    }
    let med = |path: &[&str]| -> f64 {
        let mut v: Vec<f64> = rs.iter().filter_map(|r| path.iter().fold(r, |x, k| &x[*k]).as_f64()).collect();
        v.sort_by(|a, b| a.total_cmp(b));
        if v.is_empty() {
            f64::NAN
        } else if v.len() % 2 == 1 {
            v[v.len() / 2]
        } else {
            (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
        }
    };
    let sum = |path: &[&str]| -> f64 { rs.iter().filter_map(|r| path.iter().fold(r, |x, k| &x[*k]).as_f64()).sum() };
    let max = |path: &[&str]| -> f64 { rs.iter().filter_map(|r| path.iter().fold(r, |x, k| &x[*k]).as_f64()).fold(f64::NAN, f64::max) };
    let mut k = rs[0]["kernel"].clone();
    k["run_ms"] = sum(&["kernel", "run_ms"]).into();
    k["run_delay_ms"] = sum(&["kernel", "run_delay_ms"]).into();
    k["timeslices"] = (sum(&["kernel", "timeslices"]) as u64).into();
    k["involuntary_switches"] = (sum(&["kernel", "involuntary_switches"]) as u64).into();
    k["voluntary_switches"] = (sum(&["kernel", "voluntary_switches"]) as u64).into();
    k["worst_cycle_wait_us"] = max(&["kernel", "worst_cycle_wait_us"]).into();
    serde_json::json!({
        "lateness_us": {
            "n": sum(&["lateness_us", "n"]) as u64,
            "p50": med(&["lateness_us", "p50"]), "p90": med(&["lateness_us", "p90"]),
            "p99": med(&["lateness_us", "p99"]), "p999": med(&["lateness_us", "p999"]),
            "max": max(&["lateness_us", "max"]), "mean": med(&["lateness_us", "mean"]),
        },
        "missed": sum(&["missed"]) as u64,
        "kernel": k,
        "cgroup": rs[0]["cgroup"],
        "rounds": rs.iter().map(|r| serde_json::json!({"p50": r["lateness_us"]["p50"], "p99": r["lateness_us"]["p99"], "max": r["lateness_us"]["max"]})).collect::<Vec<_>>(),
    })
}
