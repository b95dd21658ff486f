//! `allot-lab bench policies`: Judin's experiment on this machine. Foreground workers (1,
//! and one per CPU) do fixed units of CPU work for a fixed time against 0..K × ncpu
//! background loopers (CPU loopers, Judin 2016 Figure 1; memory loopers with a working set
//! well above the last-level cache, Figure 2), the background started under each policy.
//! The result is Judin's Tables 1–4: the foreground's work relative to no background.
//!
//! As in Judin 2016 the foreground runs at the default policy; each background looper is a
//! process of its own. For the allot variants, the background loopers are one job (a
//! single process with one thread per looper; allot's unit is a job) and the foreground is
//! a job too (default tickets; for "tickets 100:1" 100 tickets against the background's 1).

use super::common::{self, Allot, Common, Kids, Scratch};
use crate::policy::Policy;
use crate::report::{table, Progress};
use allot_report::{Axis, Chart, Panel, Series};
use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use std::time::{Duration, Instant};

/// A background policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BgPolicy {
    /// SCHED_OTHER, nice 0 (Judin 2016 "default priority").
    Default,
    /// SCHED_BATCH (chrt --batch 0).
    Batch,
    /// nice 10.
    Nice10,
    /// nice 19.
    Nice19,
    /// nice 19 + SCHED_BATCH.
    Nice19Batch,
    /// SCHED_IDLE (chrt --idle 0).
    Idle,
    /// allot run --background.
    AllotBackground,
    /// Foreground job -t 100, background job -t 1.
    AllotTickets,
}

impl BgPolicy {
    fn label(&self) -> &'static str {
        match self {
            BgPolicy::Default => "nice 0 vs default",
            BgPolicy::Batch => "nice 0 vs sched batch",
            BgPolicy::Nice10 => "nice 0 vs nice 10",
            BgPolicy::Nice19 => "nice 0 vs nice 19",
            BgPolicy::Nice19Batch => "nice 0 vs nice 19 batch",
            BgPolicy::Idle => "nice 0 vs sched idle",
            BgPolicy::AllotBackground => "allot background",
            BgPolicy::AllotTickets => "allot tickets 100:1",
        }
    }
    fn policy(&self) -> Policy {
        match self {
            BgPolicy::Default => Policy::Nice(0),
            BgPolicy::Batch => Policy::Batch(0),
            BgPolicy::Nice10 => Policy::Nice(10),
            BgPolicy::Nice19 => Policy::Nice(19),
            BgPolicy::Nice19Batch => Policy::Batch(19),
            BgPolicy::Idle => Policy::Idle,
            BgPolicy::AllotBackground | BgPolicy::AllotTickets => Policy::Nice(0),
        }
    }
    fn is_allot(&self) -> bool {
        matches!(self, BgPolicy::AllotBackground | BgPolicy::AllotTickets)
    }
}

/// Background looper kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Looper {
    /// CPU loopers (Judin 2016 Figure 1, tables 1–2).
    Cpu,
    /// Memory loopers (Judin 2016 Figure 2, tables 3–4).
    Mem,
}

/// `allot-lab bench policies`.
#[derive(Debug, Clone, Args)]
pub struct PoliciesArgs {
    /// How long one cell (one measurement of the foreground) runs, 0.5s..1h: 3.5s,
    /// 1500ms (a bare number is seconds). The default full run (2 worker counts × 2 looper
    /// kinds × (8 policies × (3 loads + 1 baseline) + 2 baselines)) takes about 9 minutes on 2 CPUs.
    #[arg(long, default_value = "3.5s", allow_negative_numbers = true)]
    pub cell: String,
    /// Background load levels 1..K (× ncpu loopers); Judin 2016 went to 7.
    #[arg(long, default_value_t = 3)]
    pub max_k: usize,
    /// Foreground worker counts (default 1 and ncpu; Judin 2016 used 1 and 7 of 8).
    #[arg(long, value_delimiter = ',')]
    pub workers: Vec<usize>,
    /// Looper kinds.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Looper::Cpu, Looper::Mem])]
    pub loopers: Vec<Looper>,
    /// Background policies (default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub policies: Vec<BgPolicy>,
    /// An external foreground command instead of the built-in workers (e.g. John the
    /// Ripper's `john --format=bcrypt -test`, as Judin 2016): it runs once per cell and its
    /// work is 1 / its elapsed time. Split on whitespace.
    #[arg(long)]
    pub foreground: Option<String>,
    /// Short run for CI: 1.5 s cells, K = 1, CPU loopers only, policies default, idle and
    /// allot background.
    #[arg(long)]
    pub quick: bool,
    /// Common options.
    #[command(flatten)]
    pub common: Common,
}

/// The chart of a run, from its JSON document (so a saved `--output` can be re-plotted):
/// one panel per table, the foreground's relative work against the load, a line per
/// background policy (allot's dashed).
pub fn svg(json: &serde_json::Value) -> String {
    let ncpu = json["machine"]["cpus"].as_u64().unwrap_or(1);
    let mut chart = Chart::new("Judin 2016 on this machine: foreground work vs background loopers, by background policy").per_row(2);
    for t in json["tables"].as_array().into_iter().flatten() {
        let w = t["workers"].as_u64().unwrap_or(1);
        let lk = t["looper"].as_str().unwrap_or("?");
        let title = format!("{} worker{} vs {} loopers", w, if w == 1 { "" } else { "s" }, lk);
        let mut p = Panel::new(title, Axis::linear(format!("background loopers (× {ncpu} CPUs)")), Axis::linear("foreground work, % of alone"));
        for r in t["rows"].as_array().into_iter().flatten() {
            let label = r["label"].as_str().unwrap_or("");
            let points =
                r["relative_pct"].as_array().into_iter().flatten().enumerate().map(|(k, y)| (k as f64, y.as_f64().unwrap_or(f64::NAN))).collect();
            let bounds = |k: &str| r[k].as_array().into_iter().flatten().map(|y| y.as_f64().unwrap_or(f64::NAN)).collect::<Vec<_>>();
            let (lo, hi) = (bounds("relative_lo_pct"), bounds("relative_hi_pct"));
            let bars = lo.iter().zip(&hi).enumerate().skip(1).map(|(k, (l, h))| (k as f64, *l, *h)).collect();
            let s = Series::line(label.replace("nice 0 vs ", ""), points).error_bars(bars);
            p = p.series(if label.starts_with("allot") { s.dashed() } else { s });
        }
        chart = chart.panel(p);
    }
    chart.to_svg()
}

struct Plan {
    cell: f64,
    max_k: usize,
    workers: Vec<usize>,
    loopers: Vec<Looper>,
    policies: Vec<BgPolicy>,
}

/// `allot-lab bench policies`.
pub fn run(a: PoliciesArgs) -> anyhow::Result<i32> {
    if let Some(j) = &a.common.replot {
        return common::replot(&a.common, j, "policies", svg);
    }
    let ncpu = allot_linux::ncpu();
    let mut p = Plan {
        cell: crate::args::positive_duration("--cell", &a.cell, allot_model::duration::Unit::S, Duration::from_secs(3600))?.as_secs_f64(),
        max_k: a.max_k,
        workers: if a.workers.is_empty() {
            if ncpu > 1 {
                vec![1, ncpu]
            } else {
                vec![1]
            }
        } else {
            a.workers.clone()
        },
        loopers: a.loopers.clone(),
        policies: if a.policies.is_empty() {
            vec![
                BgPolicy::Default,
                BgPolicy::Batch,
                BgPolicy::Nice10,
                BgPolicy::Nice19,
                BgPolicy::Nice19Batch,
                BgPolicy::Idle,
                BgPolicy::AllotBackground,
                BgPolicy::AllotTickets,
            ]
        } else {
            a.policies.clone()
        },
    };
    if a.quick {
        p.cell = 1.5;
        p.max_k = 1;
        p.loopers = vec![Looper::Cpu];
        if a.policies.is_empty() {
            p.policies = vec![BgPolicy::Default, BgPolicy::Idle, BgPolicy::AllotBackground];
        }
    }
    if p.cell < 0.5 {
        bail!("--cell must be at least 0.5s, got {:?}", a.cell);
    }
    if p.max_k == 0 || p.max_k > 16 {
        bail!("--max-k must be 1..16, got {}", p.max_k);
    }
    if let Some(w) = p.workers.iter().find(|w| **w == 0 || **w > 256) {
        bail!("--workers must be 1..256 each, got {w}");
    }
    if p.loopers.is_empty() {
        bail!("--loopers needs at least one of cpu, mem");
    }
    let fg_cmd: Option<Vec<String>> = a.foreground.as_ref().map(|s| s.split_whitespace().map(String::from).collect());
    if fg_cmd.as_ref().is_some_and(|v| v.is_empty()) {
        bail!("--foreground must name a command, got an empty string");
    }
    let exe = a.common.exe()?;
    let scratch = Scratch::new("policies")?;
    let mut allot = if p.policies.iter().any(|x| x.is_allot()) { Allot::start(&a.common, &exe) } else { Allot { daemon: None, skipped: None } };
    if allot.daemon.is_none() {
        p.policies.retain(|x| !x.is_allot());
    }
    let n_base = p.policies.len() + if p.policies.iter().any(|x| x.is_allot()) { 2 } else { 1 };
    let cells = p.workers.len() * p.loopers.len() * (n_base + p.policies.len() * p.max_k);
    let mut prog = Progress::new(cells, "bench policies");
    let t_start = Instant::now();
    let mut tables = vec![];
    let mut text = format!(
        "allot-lab bench policies (Judin 2016): relative work (%) of the foreground against 0..{} × {} background loopers, {} s per cell\n",
        p.max_k, ncpu, p.cell
    );
    if let Some(c) = &fg_cmd {
        text += &format!("foreground: {} (work = 1 / elapsed)\n", c.join(" "));
    }
    for &w in &p.workers {
        for &lk in &p.loopers {
            let mut cell = |pol: Option<BgPolicy>, k: usize, fg_job: bool, prog: &mut Progress| -> anyhow::Result<f64> {
                prog.set(&format!("{w} worker(s), {k}×{ncpu} {lk:?} loopers, {}", pol.map(|x| x.label()).unwrap_or("no background")));
                let r = measure_cell(&exe, &scratch, &mut allot, &p, fg_cmd.as_deref(), w, lk, pol, k * ncpu, fg_job);
                allot.kill_jobs();
                prog.step();
                r
            };
            // Interleaved baselines: the foreground alone right before each policy's row
            // (as a job for allot's rows, which compete from inside allot's tree), and
            // once more of each kind at the end. A row is relative to the baselines that
            // bracket it (before it, and the next of the same kind), so drift on a shared
            // machine is measured where it happens; the two give each point its spread.
            let with_allot = p.policies.iter().any(|x| x.is_allot());
            let mut measured = vec![];
            for &pol in &p.policies {
                let before = cell(None, 0, pol.is_allot(), &mut prog)?;
                let mut vals = vec![];
                for k in 1..=p.max_k {
                    vals.push(cell(Some(pol), k, false, &mut prog)?);
                }
                measured.push((pol, before, vals));
            }
            let end_plain = cell(None, 0, false, &mut prog)?;
            let end_job = if with_allot { cell(None, 0, true, &mut prog)? } else { 0.0 };
            let mut rows = vec![];
            let mut baselines = vec![];
            for (i, (pol, before, vals)) in measured.iter().enumerate() {
                let after = measured[i + 1..]
                    .iter()
                    .find(|(q, _, _)| q.is_allot() == pol.is_allot())
                    .map(|(_, b, _)| *b)
                    .unwrap_or(if pol.is_allot() { end_job } else { end_plain });
                if *before <= 0.0 || after <= 0.0 {
                    bail!("the foreground did no work without background: cannot compute relative work");
                }
                let base = (before + after) / 2.0;
                baselines.push(*before);
                let rel = |b: f64| std::iter::once(100.0).chain(vals.iter().map(|x| x / b * 100.0)).collect::<Vec<_>>();
                let (a, b) = (rel(*before), rel(after));
                rows.push(serde_json::json!({
                    "policy": pol, "label": pol.label(),
                    "baseline_work": [before, after],
                    "relative_pct": rel(base),
                    "relative_lo_pct": a.iter().zip(&b).map(|(x, y)| x.min(*y)).collect::<Vec<_>>(),
                    "relative_hi_pct": a.iter().zip(&b).map(|(x, y)| x.max(*y)).collect::<Vec<_>>(),
                    "work": vals,
                }));
            }
            baselines.push(end_plain);
            if with_allot {
                baselines.push(end_job);
            }
            let (lo, hi) = baselines.iter().fold((f64::MAX, f64::MIN), |(l, h), &b| (l.min(b), h.max(b)));
            let mean = baselines.iter().sum::<f64>() / baselines.len() as f64;
            tables.push(serde_json::json!({
                "workers": w, "looper": lk,
                "baselines": baselines,
                "baseline_spread_pct": (hi - lo) / mean * 100.0,
                "rows": rows,
            }));
        }
    }
    prog.finish();
    for (i, t) in tables.iter().enumerate() {
        let w = t["workers"].as_u64().unwrap_or(1);
        let lk = t["looper"].as_str().unwrap_or("?");
        let mut hdr = vec![format!("{} worker{}, {} loopers", w, if w == 1 { "" } else { "s" }, lk)];
        hdr.extend((0..=p.max_k).map(|k| k.to_string()));
        let rows: Vec<Vec<String>> = t["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let mut row = vec![r["label"].as_str().unwrap_or("").to_string()];
                row.extend(r["relative_pct"].as_array().unwrap().iter().map(|x| format!("{:.1}", x.as_f64().unwrap_or(f64::NAN))));
                row
            })
            .collect();
        text += &format!("\nTable {}: {}\n", i + 1, hdr[0]);
        text += &table(&hdr, &rows);
        text += &format!(
            "(each row relative to the foreground alone measured right before it and after it (as a job for allot's rows); the {} baselines of this table spread {:.1}% of their mean)\n",
            t["baselines"].as_array().map_or(0, |b| b.len()),
            t["baseline_spread_pct"].as_f64().unwrap_or(0.0)
        );
    }
    if let Some(s) = &allot.skipped {
        text += &format!("\nallot variants skipped: {s}\n");
    }
    text += &format!("\nrun took {:.0} s\n", t_start.elapsed().as_secs_f64());
    // --check: Judin's conclusion. SCHED_IDLE (and allot background) keep most of the
    // foreground's work against CPU loopers; the default policy does not.
    let mut checks = vec![];
    for t in &tables {
        if t["looper"] != "cpu" {
            continue;
        }
        let last = |pol: &str| {
            t["rows"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["policy"] == pol)
                .and_then(|r| r["relative_pct"].as_array().unwrap().last().and_then(|x| x.as_f64()))
        };
        let w = &t["workers"];
        if let Some(v) = last("idle") {
            checks.push((format!("{w} worker(s), cpu loopers: sched idle keeps >= 75% at K = {} ({v:.1}%)", p.max_k), v >= 75.0));
        }
        if let Some(v) = last("allot-background") {
            checks.push((format!("{w} worker(s), cpu loopers: allot background keeps >= 75% at K = {} ({v:.1}%)", p.max_k), v >= 75.0));
        }
        if let (Some(d), Some(i)) = (last("default"), last("idle")) {
            checks.push((format!("{w} worker(s), cpu loopers: default keeps less than sched idle ({d:.1}% < {i:.1}%)"), d < i));
        }
    }
    let failed = if a.common.check { common::render_checks(&mut text, &checks) } else { 0 };
    let json = serde_json::json!({
        "bench": "policies", "machine": common::machine(), "cell_s": p.cell, "max_k": p.max_k,
        "foreground": fg_cmd, "allot_skipped": allot.skipped, "tables": tables,
        "elapsed_s": t_start.elapsed().as_secs_f64(),
        "checks": checks.iter().map(|(w, ok)| serde_json::json!({"check": w, "passed": ok})).collect::<Vec<_>>(),
    });
    a.common.emit(&json, &text, Some(svg(&json)))?;
    Ok(if failed > 0 { 1 } else { 0 })
}

/// One cell: start `n_bg` loopers under `pol` (none when `pol` is None), let them settle,
/// run the foreground for `cell` seconds, return its work.
#[allow(clippy::too_many_arguments)]
fn measure_cell(
    exe: &std::path::Path,
    scratch: &Scratch,
    allot: &mut Allot,
    p: &Plan,
    fg_cmd: Option<&[String]>,
    workers: usize,
    lk: Looper,
    pol: Option<BgPolicy>,
    n_bg: usize,
    fg_job: bool,
) -> anyhow::Result<f64> {
    let mut kids = Kids::default();
    let kind = match lk {
        Looper::Cpu => "cpu",
        Looper::Mem => "mem",
    };
    if let Some(pol) = pol {
        if pol.is_allot() {
            let args = vec!["workload".into(), kind.into(), "--threads".into(), n_bg.to_string()];
            let run: &[&str] = if pol == BgPolicy::AllotBackground { &["--background"] } else { &["-t", "1"] };
            allot.job(run, exe, &args, None, None)?;
        } else {
            for _ in 0..n_bg {
                kids.0.push(common::spawn(exe, &["workload".into(), kind.into()], pol.policy(), None, None)?);
            }
        }
        // Let the loopers start (and the memory loopers touch their arrays).
        std::thread::sleep(Duration::from_millis(if lk == Looper::Mem { 800 } else { 300 }));
    }
    // Under allot the foreground is a job too: allot's tree competes with processes
    // outside it as one entity at the top level, so "background" means background among
    // allot's jobs (on a machine running allot, users' processes are placed in jobs).
    let fg_in_job = fg_job || pol.is_some_and(|p| p.is_allot());
    let fg_run: &[&str] = if pol == Some(BgPolicy::AllotTickets) { &["-t", "100"] } else { &[] };
    let work = match fg_cmd {
        Some(cmd) => {
            let t0 = Instant::now();
            let st = if fg_in_job {
                let pid = allot.job(fg_run, std::path::Path::new(&cmd[0]), &cmd[1..], None, None)?;
                common::wait_gone(pid, Duration::from_secs(3600));
                true
            } else {
                std::process::Command::new(&cmd[0])
                    .args(&cmd[1..])
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::null())
                    .status()
                    .with_context(|| format!("run {}", cmd[0]))?
                    .success()
            };
            if !st {
                bail!("foreground command {} failed", cmd.join(" "));
            }
            1.0 / t0.elapsed().as_secs_f64()
        }
        None => {
            static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let out = scratch.file(&format!("fg-{}.json", SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed)));
            let _ = std::fs::remove_file(&out);
            let args: Vec<String> =
                ["workload", "cpu", "--threads", &workers.to_string(), "--duration", &p.cell.to_string(), "--output", &out.display().to_string()]
                    .iter()
                    .map(|s| s.to_string())
                    .collect();
            if fg_in_job {
                let pid = allot.job(fg_run, exe, &args, None, None)?;
                common::wait_gone(pid, Duration::from_secs_f64(p.cell * 4.0 + 30.0));
            } else {
                let st =
                    std::process::Command::new(exe).args(&args).stdin(std::process::Stdio::null()).stdout(std::process::Stdio::null()).status()?;
                if !st.success() {
                    bail!("foreground workload failed: {st}");
                }
            }
            let v = common::read_report(&out, Duration::from_secs(5))?;
            v["work"].as_f64().context("foreground report has no work")?
        }
    };
    kids.kill_all();
    Ok(work)
}
