//! The latency probe's arms, shared by the policy bench's latency scenarios
//! (policy_bench.rs) and the spread scenario (latency_spread.rs): the probe (5 ms period,
//! 0.5 ms work) idle in a job, against 2 × ncpu plain hogs, and in a job among 2 × ncpu hog
//! jobs under a private daemon.

use allot_measure::harness::{Kids, PrivateDaemon};
use anyhow::{bail, Context};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub(super) fn exe_s(exe: &Path) -> String {
    exe.display().to_string()
}

pub(super) fn cpu_s_of(pid: u32) -> f64 {
    allot_linux::process::procfs::stat(pid as i32).map(|s| (s.utime + s.stime) as f64 / allot_linux::process::procfs::clk_tck() as f64).unwrap_or(0.0)
}

pub(super) const CONFIG: &str = "[users]\nauto_place = false\n";

pub(super) fn probe_args(exe: &Path, secs: f64) -> Vec<String> {
    [exe_s(exe), "probe".into(), "-i".into(), "5".into(), "-w".into(), "500".into(), "-d".into(), format!("{secs}"), "--json".into()].to_vec()
}

pub(super) fn p99(report: &serde_json::Value) -> anyhow::Result<f64> {
    report["lateness_us"]["p99"].as_f64().context("probe report has no p99")
}

/// The probe in a job against 2 × ncpu hog jobs under a daemon with `config`:
/// (probe report, hogs' CPUs).
pub(super) fn probe_under(exe: &Path, config: &str, secs: f64) -> anyhow::Result<(serde_json::Value, f64)> {
    let n = allot_linux::ncpu();
    let mut d = PrivateDaemon::start(exe, config)?;
    let e = exe_s(exe);
    let mut pids = vec![];
    for _ in 0..2 * n {
        pids.push(d.run_job(&[], &[&e, "workload", "cpu"], None)?);
    }
    for &p in &pids {
        d.wait_exec(p)?;
    }
    std::thread::sleep(Duration::from_millis(1500));
    let c0: f64 = pids.iter().map(|&p| cpu_s_of(p)).sum();
    let t0 = Instant::now();
    let mut a = vec!["run".to_string(), "--".into()];
    a.extend(probe_args(exe, secs));
    let a: Vec<&str> = a.iter().map(|s| s.as_str()).collect();
    let o = d.cli(&a, None)?;
    let hogs = (pids.iter().map(|&p| cpu_s_of(p)).sum::<f64>() - c0) / t0.elapsed().as_secs_f64();
    if !o.status.success() {
        bail!("probe in a job failed: {}", String::from_utf8_lossy(&o.stderr));
    }
    Ok((serde_json::from_slice(&o.stdout)?, hogs))
}

/// The probe as a plain process with `extra` probe arguments, against 2 × ncpu plain hogs:
/// (report, hogs' CPUs).
pub(super) fn plain_probe(exe: &Path, secs: f64, extra: &[&str]) -> anyhow::Result<(serde_json::Value, f64)> {
    let n = allot_linux::ncpu();
    let mut kids = Kids::default();
    for _ in 0..2 * n {
        kids.add(Command::new(exe).args(["workload", "cpu"]).stdout(Stdio::null()).spawn()?);
    }
    std::thread::sleep(Duration::from_millis(500));
    let c0: f64 = kids.0.iter().map(|k| cpu_s_of(k.id())).sum();
    let t0 = Instant::now();
    let args = probe_args(exe, secs);
    let o = Command::new(&args[0]).args(&args[1..]).args(extra).output()?;
    let hogs = (kids.0.iter().map(|k| cpu_s_of(k.id())).sum::<f64>() - c0) / t0.elapsed().as_secs_f64();
    drop(kids);
    if !o.status.success() {
        bail!("probe {} failed: {}", extra.join(" "), String::from_utf8_lossy(&o.stderr).trim());
    }
    Ok((serde_json::from_slice(&o.stdout).context("plain probe report")?, hogs))
}

/// The probe in a job on the idle machine (a private daemon, no other load).
pub(super) fn idle_probe(exe: &Path, secs: f64) -> anyhow::Result<serde_json::Value> {
    let d = PrivateDaemon::start(exe, CONFIG)?;
    let args = probe_args(exe, secs);
    let mut a = vec!["run", "--"];
    a.extend(args.iter().map(|s| s.as_str()));
    let o = d.cli(&a, None)?;
    if !o.status.success() {
        bail!("probe in a job failed: {}", String::from_utf8_lossy(&o.stderr).trim());
    }
    Ok(serde_json::from_slice(&o.stdout)?)
}
