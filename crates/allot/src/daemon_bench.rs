//! `allot bench daemon`: what the daemon costs when nothing changes.
//!
//! Starts a private daemon, then measures its CPU (utime + stime from /proc/PID/stat)
//! and memory (VmRSS, VmHWM) over a window, twice in one run: with no user processes,
//! and with N sleeping processes spread over U users (default 1000 over 20), all placed
//! into their users' currencies by the daemon's scan. Goal (issue 2): under 1% of one
//! CPU and under 30 MB RSS.

use allot_measure::harness::{Kids, PrivateDaemon};
use anyhow::{bail, Context};
use clap::Args;

use std::time::{Duration, Instant};

/// `allot bench daemon`.
#[derive(Debug, Args)]
pub struct DaemonBenchArgs {
    /// Sleeping processes to create.
    #[arg(long, default_value_t = 1000)]
    pub processes: usize,
    /// Users to spread them over (uids 2800.. without accounts: nothing is added to /etc/passwd).
    #[arg(long, default_value_t = 20)]
    pub users: usize,
    /// Seconds each measurement window lasts.
    #[arg(long, default_value_t = 30.0)]
    pub window: f64,
    /// Exit non-zero unless CPU < 1% of one CPU and RSS < 30 MB with the processes.
    #[arg(long)]
    pub check: bool,
}

#[derive(Debug, serde::Serialize)]
struct Row {
    scenario: String,
    processes: usize,
    jobs: usize,
    cpu_percent: f64,
    rss_mb: f64,
    peak_rss_mb: f64,
}

fn cpu_s(pid: u32) -> anyhow::Result<f64> {
    let s = allot_linux::procfs::stat(pid as i32)?;
    Ok((s.utime + s.stime) as f64 / allot_linux::procfs::clk_tck() as f64)
}

fn mem_mb(pid: u32, key: &str) -> anyhow::Result<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kb: f64 = s.lines().find_map(|l| l.strip_prefix(key)).and_then(|v| v.split_whitespace().next()?.parse().ok()).context("no VmRSS")?;
    Ok(kb / 1024.0)
}

fn measure(d: &PrivateDaemon, scenario: &str, processes: usize, window: f64) -> anyhow::Result<Row> {
    let pid = d.daemon_pid().context("daemon not running")?;
    let c0 = cpu_s(pid)?;
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(window));
    let cpu = (cpu_s(pid)? - c0) / t0.elapsed().as_secs_f64();
    let out = d.cli(&["--json", "show"], None)?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    Ok(Row {
        scenario: scenario.into(),
        processes,
        jobs: v["jobs"].as_array().map(|a| a.len()).unwrap_or(0),
        cpu_percent: cpu * 100.0,
        rss_mb: mem_mb(pid, "VmRSS:")?,
        peak_rss_mb: mem_mb(pid, "VmHWM:")?,
    })
}

/// Runs the benchmark.
pub fn run(args: DaemonBenchArgs, json: bool) -> anyhow::Result<i32> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("allot bench daemon must run as root (it starts a private daemon and creates test users)");
    }
    if args.users == 0 || args.users > 100 || args.processes > 20_000 {
        bail!("--users must be 1..100 and --processes 0..20000, got {} and {}", args.users, args.processes);
    }
    if !(1.0..=3600.0).contains(&args.window) {
        bail!("--window must be 1..3600 seconds, got {}", args.window);
    }
    let uids: Vec<u32> = (0..args.users as u32).map(|i| 2800 + i).collect();
    let only = uids.iter().map(|n| format!("\"{n}\"")).collect::<Vec<_>>().join(", ");
    let exe = std::env::current_exe()?;
    let d = PrivateDaemon::start(&exe, &format!("[users]\nonly = [{only}]\n"))?;
    let mut rows = vec![measure(&d, "idle, no user processes", 0, args.window)?];

    let mut kids = Kids::default();
    for i in 0..args.processes {
        let uid = uids[i % uids.len()];
        let c = d.user_command(uid, &["sleep", "3600"]).spawn().context("spawn sleep")?;
        kids.0.push(c);
    }
    // Wait until the scan has placed them all.
    let t0 = Instant::now();
    loop {
        let out = d.cli(&["--json", "show"], None)?;
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)?;
        let placed: usize = v["jobs"].as_array().into_iter().flatten().map(|j| j["pids"].as_array().map(|p| p.len()).unwrap_or(0)).sum();
        if placed >= args.processes {
            break;
        }
        if t0.elapsed() > Duration::from_secs(60) {
            bail!("only {placed} of {} processes were placed within 60 s", args.processes);
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let placed_in = t0.elapsed().as_secs_f64();
    rows.push(measure(&d, &format!("{} sleeping processes of {} users", args.processes, args.users), args.processes, args.window)?);
    drop(kids);

    let last = rows.last().unwrap();
    let pass = last.cpu_percent < 1.0 && last.rss_mb < 30.0;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({"rows": rows, "placed_all_in_s": placed_in, "window_s": args.window, "goal": {"cpu_percent_below": 1.0, "rss_mb_below": 30.0}, "pass": pass})
            )?
        );
    } else {
        println!("{:<40} {:>6} {:>10} {:>8} {:>9}", "SCENARIO", "JOBS", "CPU %", "RSS MB", "PEAK MB");
        for r in &rows {
            println!("{:<40} {:>6} {:>10.3} {:>8.1} {:>9.1}", r.scenario, r.jobs, r.cpu_percent, r.rss_mb, r.peak_rss_mb);
        }
        println!(
            "all {} processes placed {:.1} s after they started; window {} s; goal: < 1% of one CPU, < 30 MB RSS: {}",
            args.processes,
            placed_in,
            args.window,
            if pass { "met" } else { "MISSED" }
        );
    }
    Ok(if args.check && !pass { 1 } else { 0 })
}
