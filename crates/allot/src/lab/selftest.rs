//! `allot-lab selftest`: proves enforcement on the running kernel, with a private daemon
//! (its own cgroup root, socket and state) so it runs beside a real one and leaves
//! nothing behind. The same checks run in CI on this machine's cgroup v1 and inside a
//! cgroup v2 VM (tests/vm/run.sh). Shares are read from the kernel's own cgroup
//! accounting (cpuacct.usage, or cpu.stat usage_usec).

use allot_linux::cgroup::CpuController;
use allot_measure::harness::{Kids, PrivateDaemon};
use allot_measure::test_uids::{users_config, TestUids};
use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod load;

/// One check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Check {
    /// Three CPU-bound jobs at 300/200/100 tickets on one CPU get 3:2:1 (±5% of each share).
    Ratio,
    /// One user's 1 process vs another's 5 on one CPU: 50% ±5; after `fund B 300`: 75% ±5.
    Insulation,
    /// A job with --cap 0.25! alone on a CPU uses <= 0.27 CPU.
    Cap,
    /// A foreground job, and a process outside allot, keep >= 95% of their work against a
    /// background job of 2 × ncpu hogs.
    Background,
}

/// `allot-lab selftest`.
#[derive(Debug, Args)]
pub struct SelftestArgs {
    /// Checks to run (default: all).
    #[arg(value_enum)]
    pub checks: Vec<Check>,
    /// How long each measurement window lasts, 1s..10min: 6s, 30s, 1.5min (a bare number
    /// is seconds).
    #[arg(long, default_value = "6s")]
    pub window: String,
    /// The two uids the insulation check runs processes as.
    #[command(flatten)]
    pub uids: TestUids,
}

/// `--window` in seconds: a duration with a unit (a bare number is seconds), 1 s..10 min.
fn window_arg(s: &str) -> anyhow::Result<f64> {
    let d = allot_measure::args::duration("--window", s, allot_model::duration::Unit::S)?;
    if !(Duration::from_secs(1)..=Duration::from_secs(600)).contains(&d) {
        bail!("--window must be 1s..10min, got {s:?}");
    }
    Ok(d.as_secs_f64())
}

#[derive(Debug, serde::Serialize)]
struct Outcome {
    check: Check,
    passed: bool,
    detail: String,
    values: serde_json::Value,
    /// The check missed while other load used at least [`load::BUSY`] CPU: it says nothing
    /// about allot, and is reported as inconclusive, not failed.
    #[serde(default)]
    inconclusive: bool,
    /// CPU used by processes outside the check (in CPUs): the most seen over the windows
    /// it measured in and before and after them.
    #[serde(default)]
    outside: f64,
}

/// Completes an outcome with the outside load: the larger of `other` (the most seen in the
/// windows the check measured in, and before them) and a look now (the check's jobs
/// gone); a miss under [`load::BUSY`] or more of it is inconclusive ([`load::inconclusive`]).
fn judge(d: &PrivateDaemon, other: f64, mut o: Outcome) -> Outcome {
    o.outside = other.max(load::over(d, 0.5));
    o.inconclusive = load::inconclusive(o.passed, o.outside);
    o
}

/// Runs the checks; exit code 1 if any failed.
pub fn run(args: SelftestArgs, json: bool) -> anyhow::Result<i32> {
    let window = window_arg(&args.window)?;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("allot-lab selftest must run as root (it starts a private daemon that writes cgroups)");
    }
    let exe = std::env::current_exe().context("find the allot binary")?;
    // The checks measure enforcement at nice 0: started under `nice`, the hogs would
    // inherit it and the daemon's nice emulation would (rightly) weigh them less and keep
    // them apart from a user's nice-0 processes, so every check would measure that instead.
    let was = allot_linux::process::sched::nice(0).unwrap_or(0);
    if was != 0 {
        allot_linux::process::sched::set_nice(0, 0).context("run the checks at nice 0")?;
        if !json {
            println!("note: started at nice {was}; the checks run at nice 0");
        }
    }
    let checks = if args.checks.is_empty() { vec![Check::Ratio, Check::Insulation, Check::Cap, Check::Background] } else { args.checks };
    // Chosen before any check runs, so a range with no free uids is the only error.
    let users = if checks.contains(&Check::Insulation) { args.uids.pick(2)? } else { vec![] };
    let mut outcomes = vec![];
    for c in checks {
        let t0 = Instant::now();
        let out = match c {
            Check::Ratio => ratio(&exe, window),
            Check::Insulation => insulation(&exe, window, [users[0], users[1]]),
            Check::Cap => cap(&exe, window),
            Check::Background => background(&exe, window),
        };
        let o = out.unwrap_or_else(|e| Outcome {
            check: c,
            passed: false,
            detail: format!("could not run: {e:#}"),
            values: serde_json::Value::Null,
            inconclusive: false,
            outside: 0.0,
        });
        if !json {
            let verdict = if o.passed {
                "PASS"
            } else if o.inconclusive {
                "INCONCLUSIVE"
            } else {
                "FAIL"
            };
            // The outside load beside every verdict: a pass or a failure on a busy machine
            // says how busy it was.
            let other = if o.inconclusive {
                format!(" [inconclusive: {:.2} CPU of other load on the machine; run it again when the machine is quieter]", o.outside)
            } else {
                format!(" [other load on the machine: up to {:.2} CPU]", o.outside)
            };
            println!("{verdict} {:?}: {}{other} ({:.0} s)", o.check, o.detail, t0.elapsed().as_secs_f64());
        }
        outcomes.push(o);
    }
    let failed = outcomes.iter().filter(|o| !o.passed && !o.inconclusive).count();
    let unsure = outcomes.iter().filter(|o| o.inconclusive).count();
    if json {
        println!("{}", serde_json::to_string_pretty(&outcomes)?);
    }
    println!("selftest: {} passed, {failed} failed, {unsure} inconclusive", outcomes.len() - failed - unsure);
    // 3: nothing failed, but a check missed under other load and proves nothing either way.
    Ok(if failed > 0 {
        1
    } else if unsure > 0 {
        3
    } else {
        0
    })
}

/// A private daemon's config that places the processes of `uids` only (none: no one's).
fn config(uids: &[u32]) -> String {
    format!("scan_ms = 200\n{}", users_config(uids))
}

pub(crate) fn pin(pid: u32, cpu: usize) -> anyhow::Result<()> {
    // sched_setaffinity acts on one thread. Pin the main thread first (threads it creates
    // from now on inherit), then every thread that already exists.
    allot_linux::process::sched::set_affinity(pid as i32, &[cpu]).with_context(|| format!("pin {pid} to CPU {cpu}"))?;
    for tid in allot_linux::process::procfs::tids(pid as i32).unwrap_or_default() {
        let _ = allot_linux::process::sched::set_affinity(tid, &[cpu]);
    }
    Ok(())
}

fn show(d: &PrivateDaemon) -> anyhow::Result<serde_json::Value> {
    let out = d.cli(&["--json", "show"], None)?;
    if !out.status.success() {
        bail!("allot show failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// The cgroup (relative to the root) of the job holding `pid`, waiting up to 10 s.
pub(crate) fn job_of(d: &PrivateDaemon, pid: u32) -> anyhow::Result<String> {
    let t0 = Instant::now();
    loop {
        let v = show(d)?;
        for j in v["jobs"].as_array().into_iter().flatten() {
            if j["pids"].as_array().into_iter().flatten().any(|p| p.as_u64() == Some(pid as u64)) {
                return Ok(j["cgroup"].as_str().unwrap_or_default().to_string());
            }
        }
        if t0.elapsed() > Duration::from_secs(10) {
            bail!("process {pid} was not placed in a job within 10 s; daemon log: {}", d.log());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// CPU seconds each cgroup used over `secs`, from the kernel's accounting.
fn measure(cg: &dyn CpuController, rels: &[String], secs: f64) -> anyhow::Result<(Vec<f64>, f64)> {
    let before: Vec<u64> = rels.iter().map(|r| cg.usage_ns(r)).collect::<Result<_, _>>()?;
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(secs));
    let after: Vec<u64> = rels.iter().map(|r| cg.usage_ns(r)).collect::<Result<_, _>>()?;
    let wall = t0.elapsed().as_secs_f64();
    Ok((before.iter().zip(after).map(|(b, a)| a.saturating_sub(*b) as f64 / 1e9).collect(), wall))
}

fn hog(exe: &Path) -> Vec<String> {
    vec![exe.display().to_string(), "workload".into(), "cpu".into()]
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(|s| s.as_str()).collect()
}

fn ratio(exe: &Path, window: f64) -> anyhow::Result<Outcome> {
    let mut d = PrivateDaemon::start(exe, &config(&[]))?;
    let mut other = load::over(&d, 0.5);
    let cg = d.controller()?;
    let h = hog(exe);
    let tickets = [300u32, 200, 100];
    let mut rels = vec![];
    for t in tickets {
        let pid = d.run_job(&["-t", &t.to_string()], &strs(&h), None)?;
        pin(pid, 0)?;
        rels.push(job_of(&d, pid)?);
    }
    std::thread::sleep(Duration::from_millis(1500));
    let m = load::Meter::start(&d);
    let (used, _) = measure(cg.as_ref(), &rels, window)?;
    other = other.max(m.finish(used.iter().sum()));
    let total: f64 = used.iter().sum();
    let shares: Vec<f64> = used.iter().map(|u| u / total).collect();
    let ideal: Vec<f64> = tickets.iter().map(|&t| t as f64 / 600.0).collect();
    let worst = shares.iter().zip(&ideal).map(|(s, i)| (s / i - 1.0).abs()).fold(0.0, f64::max);
    d.kill_jobs();
    Ok(judge(
        &d,
        other,
        Outcome {
            check: Check::Ratio,
            // The jobs must really have run (other load on the CPU may take a share).
            passed: worst <= 0.05 && total > 0.2 * window,
            detail: format!(
                "shares {:.3} {:.3} {:.3} of {:.2} CPU-s (ideal {:.3} {:.3} {:.3}); worst relative error {:.1}% (allowed 5%)",
                shares[0],
                shares[1],
                shares[2],
                total,
                ideal[0],
                ideal[1],
                ideal[2],
                worst * 100.0
            ),
            values: serde_json::json!({"shares": shares, "ideal": ideal, "cpu_s": total, "worst_rel_err": worst}),
            inconclusive: false,
            outside: 0.0,
        },
    ))
}

fn insulation(exe: &Path, window: f64, [a, b]: [u32; 2]) -> anyhow::Result<Outcome> {
    let d = PrivateDaemon::start(exe, &config(&[a, b]))?;
    let mut other = load::over(&d, 0.5);
    let cg = d.controller()?;
    let h = hog(exe);
    let mut kids = Kids::default();
    // Plain processes, as a user's shell would start them: the daemon finds and places them.
    for (uid, n) in [(a, 1), (b, 5)] {
        for _ in 0..n {
            let c = d.user_command(uid, &strs(&h)).spawn()?;
            pin(c.id(), 0)?;
            kids.0.push(c);
        }
    }
    let rel_a = job_of(&d, kids.0[0].id())?;
    let rel_b = job_of(&d, kids.0[1].id())?;
    for k in &kids.0[2..] {
        if job_of(&d, k.id())? != rel_b {
            bail!("user B's processes landed in different jobs");
        }
    }
    std::thread::sleep(Duration::from_millis(1000));
    let rels = [rel_a, rel_b];
    let m = load::Meter::start(&d);
    let (u, _) = measure(cg.as_ref(), &rels, window)?;
    other = other.max(m.finish(u.iter().sum()));
    let a_share = u[0] / (u[0] + u[1]);
    let out = d.cli(&["fund", &b.to_string(), "300"], None)?;
    if !out.status.success() {
        bail!("allot fund {b} 300 failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    std::thread::sleep(Duration::from_millis(1000));
    let m = load::Meter::start(&d);
    let (u2, _) = measure(cg.as_ref(), &rels, window)?;
    other = other.max(m.finish(u2.iter().sum()));
    let b_share = u2[1] / (u2[0] + u2[1]);
    let ok1 = (a_share - 0.5).abs() <= 0.05;
    let ok2 = (b_share - 0.75).abs() <= 0.05;
    drop(kids);
    Ok(judge(
        &d,
        other,
        Outcome {
            check: Check::Insulation,
            passed: ok1 && ok2,
            detail: format!(
                "equal funding: A (1 process) {:.1}% (want 50 ±5); after `fund B 300`: B (5 processes) {:.1}% (want 75 ±5)",
                a_share * 100.0,
                b_share * 100.0
            ),
            values: serde_json::json!({"uids": [a, b], "a_share_equal": a_share, "b_share_funded_300": b_share}),
            inconclusive: false,
            outside: 0.0,
        },
    ))
}

fn cap(exe: &Path, window: f64) -> anyhow::Result<Outcome> {
    let mut d = PrivateDaemon::start(exe, &config(&[]))?;
    let mut other = load::over(&d, 0.5);
    let cg = d.controller()?;
    let pid = d.run_job(&["--cap", "0.25!"], &strs(&hog(exe)), None)?;
    let cpu = allot_linux::ncpu() - 1;
    pin(pid, cpu)?;
    let rel = job_of(&d, pid)?;
    std::thread::sleep(Duration::from_millis(1000));
    let m = load::Meter::start(&d);
    let (u, wall) = measure(cg.as_ref(), &[rel], window)?;
    other = other.max(m.finish(u[0]));
    let rate = u[0] / wall;
    d.kill_jobs();
    Ok(judge(
        &d,
        other,
        Outcome {
            check: Check::Cap,
            // It must be held under the cap, and still run (a stopped job would pass trivially).
            passed: (0.15..=0.27).contains(&rate),
            detail: format!("--cap 0.25! used {rate:.3} CPU alone on CPU {cpu} (allowed <= 0.27, and >= 0.15 to show it runs)"),
            values: serde_json::json!({"usage_cpus": rate}),
            inconclusive: false,
            outside: 0.0,
        },
    ))
}

/// One run of the CPU workload: its work, and the share of its wall time its threads were
/// on a CPU (`cpu_s / (wall_s × threads)`).
#[derive(Debug, Clone, Copy, serde::Serialize)]
struct Ran {
    work: f64,
    on_cpu: f64,
}

impl Ran {
    fn of(report: &[u8], threads: usize) -> anyhow::Result<Ran> {
        let v: serde_json::Value = serde_json::from_slice(report)?;
        let get = |k: &str| v[k].as_f64().with_context(|| format!("no {k} in {v}"));
        let (work, cpu, wall) = (get("work")?, get("cpu_s")?, get("wall_s")?);
        if wall <= 0.0 {
            bail!("a run of no time: {v}");
        }
        Ok(Ran { work, on_cpu: cpu / (wall * threads as f64) })
    }
}

fn background(exe: &Path, window: f64) -> anyhow::Result<Outcome> {
    let mut d = PrivateDaemon::start(exe, &config(&[]))?;
    let mut other = load::over(&d, 0.5);
    let cg = d.controller()?;
    let n = allot_linux::ncpu();
    let secs = format!("{:.1}", (window / 2.0).max(1.0));
    let fg = |d: &PrivateDaemon| -> anyhow::Result<Ran> {
        let e = exe.display().to_string();
        let out = d.cli(&["run", "--", &e, "workload", "cpu", "--threads", &n.to_string(), "--duration", &secs], None)?;
        if !out.status.success() {
            bail!("foreground job failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ran::of(&out.stdout, n).context("foreground job's report")
    };
    let mut args = hog(exe);
    args.extend(["--threads".into(), (2 * n).to_string()]);
    // Alone and with the background, interleaved twice, so drift in the machine's speed
    // (other load on the host, a VM's stolen time) falls on both sides alike.
    let (mut alone, mut with, mut bg_idle, mut bg_during, mut idle_other) = (vec![], vec![], vec![], vec![], vec![]);
    for _ in 0..2 {
        let m = load::Meter::start(&d);
        alone.push(fg(&d)?);
        other = other.max(m.finish(0.0));
        let bg = d.run_job(&["--background"], &strs(&args), None)?;
        let rel = job_of(&d, bg)?;
        if !rel.starts_with("background/") {
            bail!("background job is in {rel}, not under background/");
        }
        std::thread::sleep(Duration::from_millis(500));
        // Other load in this window takes CPU the background would have had: "otherwise
        // idle" is only true when it is small.
        let m = load::Meter::start(&d);
        let (u, w) = measure(cg.as_ref(), std::slice::from_ref(&rel), 1.0)?;
        idle_other.push(m.finish(0.0));
        other = other.max(idle_other[idle_other.len() - 1]);
        bg_idle.push(u[0] / w);
        let (t0, bg0, m) = (Instant::now(), cg.usage_ns(&rel)?, load::Meter::start(&d));
        with.push(fg(&d)?);
        other = other.max(m.finish(0.0));
        bg_during.push(cg.usage_ns(&rel)?.saturating_sub(bg0) as f64 / 1e9 / t0.elapsed().as_secs_f64());
        d.kill_jobs();
    }
    // The same for a plain process outside allot (root's, so never placed): background
    // must yield to everything on the machine, not only to allot's jobs.
    let plain = || -> anyhow::Result<Ran> {
        let out = Command::new(exe).args(["workload", "cpu", "--threads", &n.to_string(), "--duration", &secs]).stdin(Stdio::null()).output()?;
        Ran::of(&out.stdout, n).context("plain process's report")
    };
    let (mut p_alone, mut p_with) = (vec![], vec![]);
    for _ in 0..2 {
        let m = load::Meter::start(&d);
        p_alone.push(plain()?);
        other = other.max(m.finish(0.0));
        d.run_job(&["--background"], &strs(&args), None)?;
        std::thread::sleep(Duration::from_millis(500));
        let m = load::Meter::start(&d);
        p_with.push(plain()?);
        other = other.max(m.finish(0.0));
        d.kill_jobs();
    }
    // What the background must not take is CPU time: the share of its wall time each run's
    // threads were on a CPU, with the background against alone. Work done is shown too,
    // but it also follows the machine's speed (a VM's host, turbo), which the scheduler
    // does not decide: one TCG guest's foreground kept 74.9% of its work in one run and
    // 118.5% in the next, with the same CPU time.
    let ratio = |a: &[Ran], b: &[Ran], f: fn(&Ran) -> f64| b.iter().map(f).sum::<f64>() / a.iter().map(f).sum::<f64>().max(1e-9);
    let (kept, p_kept) = (ratio(&alone, &with, |r| r.on_cpu), ratio(&p_alone, &p_with, |r| r.on_cpu));
    let (work_kept, p_work_kept) = (ratio(&alone, &with, |r| r.work), ratio(&p_alone, &p_with, |r| r.work));
    let idle_rate = bg_idle.iter().sum::<f64>() / 2.0;
    let during = bg_during.iter().sum::<f64>() / 2.0;
    d.kill_jobs();
    Ok(judge(&d, other, Outcome {
        check: Check::Background,
        // The background must really run when the CPU is free (else "kept" proves nothing).
        passed: kept >= 0.95 && p_kept >= 0.95 && idle_rate > 0.2,
        detail: format!(
            "foreground job ({n} threads) kept {:.1}% of its CPU time and a plain process outside allot {:.1}% (want >= 95 each; work kept {:.1}% and {:.1}%) against {} background hogs; background used {:.2} CPU while allot ran nothing else (other load on the machine then: {:.2} CPU) and {:.3} CPU during the foreground runs",
            kept * 100.0,
            p_kept * 100.0,
            work_kept * 100.0,
            p_work_kept * 100.0,
            2 * n,
            idle_rate,
            // The mean of the same two windows the background's idle use is the mean of.
            idle_other.iter().sum::<f64>() / idle_other.len().max(1) as f64,
            during
        ),
        values: serde_json::json!({"kept": kept, "plain_kept": p_kept, "work_kept": work_kept, "plain_work_kept": p_work_kept, "plain_alone": p_alone, "plain_with_background": p_with, "alone": alone, "with_background": with, "background_cpus_idle": bg_idle, "other_cpus_idle": idle_other, "background_cpus_during": bg_during}),
        inconclusive: false,
        outside: 0.0,
    }))
}

#[cfg(test)]
mod tests {
    use super::{window_arg, Ran};

    #[test]
    fn a_run_is_its_work_and_its_share_of_wall_time_on_a_cpu() {
        let r = Ran::of(br#"{"kind":"cpu","work":1000,"cpu_s":5.7,"wall_s":3.0}"#, 2).unwrap();
        assert_eq!(r.work, 1000.0);
        assert!((r.on_cpu - 0.95).abs() < 1e-9, "{r:?}");
        assert!(Ran::of(br#"{"work":1,"cpu_s":1,"wall_s":0}"#, 2).is_err());
        let e = Ran::of(br#"{"work":1,"wall_s":1}"#, 2).unwrap_err().to_string();
        assert!(e.contains("no cpu_s"), "{e}");
    }

    #[test]
    fn window_takes_units_and_a_bare_number_is_seconds() {
        assert_eq!(window_arg("6").unwrap(), 6.0);
        assert_eq!(window_arg("2s").unwrap(), 2.0);
        assert_eq!(window_arg("1500ms").unwrap(), 1.5);
        assert_eq!(window_arg("1.5min").unwrap(), 90.0);
        let e = window_arg("500ms").unwrap_err().to_string();
        assert_eq!(e, "--window must be 1s..10min, got \"500ms\"");
        let e = window_arg("5 parsecs").unwrap_err().to_string();
        assert!(e.starts_with("--window must be a duration like 5ms, 500us or 0.2s") && e.contains("5 parsecs"), "{e}");
    }
}
