//! The fork storm: one user forks as fast as the machine lets it (`allot-lab workload fork`:
//! fork + exit, no exec) for the storm's length while other users log in; the daemon's CPU
//! over the storm, where every surviving process ended up, and the daemon's RSS before
//! and after.

use super::logins::{dies_with_us, Latencies, LoginTimer};
use super::meter::{self, Places, Window};
use super::scale::{daemon, populate};
use anyhow::Context;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The storm's shape.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The users' uids (the first one storms).
    pub uids: Vec<u32>,
    /// Sleeping processes of those users before the storm.
    pub processes: usize,
    /// How long the storm lasts.
    pub length: Duration,
    /// The at-rest windows before and after.
    pub rest: Duration,
    /// Every Nth child of the storm lives on (until the storm's process ends).
    pub keep_every: u64,
    /// How long after the storm the survivors are looked at.
    pub settle: Duration,
    /// How long to wait for misplaced survivors to be placed after all (the daemon's safety
    /// scan), to report when they were.
    pub wait_misplaced: Duration,
}

/// What the storm did and what the daemon did meanwhile.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Storm {
    /// The storming uid.
    pub uid: u32,
    /// Forks made.
    pub forks: u64,
    /// Forks per second achieved.
    pub forks_per_s: f64,
    /// Seconds the storm lasted.
    pub storm_s: f64,
    /// The daemon at rest before.
    pub before: Window,
    /// The daemon's CPU over the storm, % of one CPU (placing the logins timed meanwhile
    /// included).
    pub cpu_percent: f64,
    /// The daemon at rest after.
    pub after: Window,
    /// RSS after / RSS before.
    pub rss_ratio: f64,
    /// Processes alive after the storm that should be in a job: every process of the
    /// storming user and every login started during the storm.
    pub survivors: usize,
    /// Of those, not in their user's currency `settle` after the storm.
    pub misplaced: usize,
    /// Kept children of the storm born while the storm's process was still outside allot
    /// (it forks at once; the daemon places it on its uid change, moments later).
    pub born_before_placed: usize,
    /// Of the misplaced, how many were born so.
    pub misplaced_born_before_placed: usize,
    /// A few of them: (pid, uid, the cgroup it was in).
    pub misplaced_sample: Vec<(u32, u32, String)>,
    /// Seconds after the storm until the misplaced ones were in their currencies (None:
    /// none was misplaced, or still not at the end of the wait).
    pub misplaced_fixed_after_s: Option<f64>,
    /// Placement latency of the logins started during the storm.
    pub logins: Latencies,
}

/// Runs the storm.
pub fn run(exe: &Path, plan: Plan) -> anyhow::Result<Storm> {
    let uids = &plan.uids;
    let uid = uids[0];
    let mut d = daemon(exe, uids)?;
    let pid = d.daemon_pid().context("the private daemon is not running")?;
    let places = Places::new(&d.root_name)?;
    let mut pop = populate(&d, exe, &places, uids, plan.processes.max(uids.len()), Duration::from_secs(60))?;
    meter::quiet(pid, plan.settle, plan.settle + Duration::from_secs(60), super::scale::QUIET)?;
    let before = meter::window(pid, plan.rest)?;

    let mut timer = LoginTimer::new(&d, exe, &places, &pop.firsts)?;
    let secs = format!("{}ms", plan.length.as_millis());
    let keep = plan.keep_every.to_string();
    let mut c = dies_with_us(d.shelter.command(exe, Some(uid)));
    c.args(["workload", "fork", "--duration", &secs, "--keep-every", &keep, "--hold"]).stdin(Stdio::null()).stdout(Stdio::piped());
    let c0 = meter::cpu_ns(pid)?;
    let t0 = Instant::now();
    let mut forker = c.spawn().context("start the fork storm (allot-lab workload fork)")?;
    let out = forker.stdout.take().context("the storm's stdout")?;
    // Others log in while it storms (the storming user too: round-robin from it).
    let logins = timer.time(usize::MAX, Some(t0 + plan.length), Duration::from_secs(2));
    let mut line = String::new();
    let read = BufReader::new(out).read_line(&mut line);
    let cpu_percent = (meter::cpu_ns(pid)? - c0) as f64 / 1e9 / t0.elapsed().as_secs_f64() * 100.0;
    let finish = |mut f: std::process::Child| {
        // SAFETY: our own unreaped child; its kept children die with it (PR_SET_PDEATHSIG).
        unsafe { libc::kill(f.id() as i32, libc::SIGKILL) };
        let _ = f.wait();
    };
    let (logins, report) = match (logins, read) {
        (Ok(l), Ok(n)) if n > 0 => (l, line),
        (l, r) => {
            finish(forker);
            let l = l?;
            r.context("read the storm's report")?;
            anyhow::bail!("the storm printed no report (it exited early?); {} logins were timed", l.n);
        }
    };
    let v: serde_json::Value = serde_json::from_str(&report).with_context(|| format!("the storm's report is not JSON: {report:?}"))?;
    let storm_end = Instant::now();

    std::thread::sleep(plan.settle);
    // Only this benchmark's processes: in this daemon's trees or its shelter (another run
    // may use the same uid at the same time).
    let mine = |p: u32| {
        let at = allot_linux::process::procfs::cgroup_of(p as i32, Some("cpu"))
            .or_else(|_| allot_linux::process::procfs::cgroup_of(p as i32, None))
            .unwrap_or_default();
        at == d.shelter.path() || at.starts_with(&format!("/{}/", d.root_name)) || at.starts_with(&format!("/{}-background/", d.root_name))
    };
    let mut check: Vec<(u32, u32)> = meter::pids_of_uid(uid).into_iter().filter(|&p| mine(p)).map(|p| (p, uid)).collect();
    check.extend(timer.started.iter().copied().filter(|&(_, u)| u != uid));
    let survivors = check.len();
    let misplaced_now = |c: &[(u32, u32)]| -> Vec<(u32, u32)> {
        c.iter().copied().filter(|&(p, u)| !places.in_currency(p, u) && std::path::Path::new(&format!("/proc/{p}")).exists()).collect()
    };
    let misplaced = misplaced_now(&check);
    let inside = format!("/{}/", d.root_name);
    let early: std::collections::HashSet<u32> = v["kept"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|k| !k["born_in"].as_str().unwrap_or("?").starts_with(&inside))
        .filter_map(|k| k["pid"].as_u64().map(|p| p as u32))
        .collect();
    let misplaced_sample =
        misplaced.iter().take(5).map(|&(p, u)| (p, u, allot_linux::process::procfs::cgroup_of(p as i32, Some("cpu")).unwrap_or_default())).collect();
    let mut misplaced_fixed_after_s = None;
    if !misplaced.is_empty() {
        let mut left = misplaced.clone();
        while storm_end.elapsed() < plan.settle + plan.wait_misplaced {
            std::thread::sleep(Duration::from_millis(250));
            left = misplaced_now(&left);
            if left.is_empty() {
                misplaced_fixed_after_s = Some(storm_end.elapsed().as_secs_f64());
                break;
            }
        }
    }
    let after = meter::window(pid, plan.rest)?;
    finish(forker);
    // Its kept children die with it, asynchronously: wait for them, so the shelter and the
    // jobs are empty when they are removed.
    let kept: Vec<u32> = v["kept"].as_array().into_iter().flatten().filter_map(|k| k["pid"].as_u64().map(|p| p as u32)).collect();
    let t = Instant::now();
    while kept.iter().any(|p| std::path::Path::new(&format!("/proc/{p}")).exists()) && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(timer);
    pop.launcher.kill_all()?;
    d.stop()?;
    Ok(Storm {
        uid,
        forks: v["work"].as_u64().unwrap_or(0),
        forks_per_s: v["forks_per_s"].as_f64().unwrap_or(0.0),
        storm_s: v["storm_s"].as_f64().unwrap_or(0.0),
        rss_ratio: after.rss_mb / before.rss_mb.max(1e-9),
        before,
        cpu_percent,
        after,
        survivors,
        misplaced: misplaced.len(),
        born_before_placed: early.len(),
        misplaced_born_before_placed: misplaced.iter().filter(|(p, _)| early.contains(p)).count(),
        misplaced_sample,
        misplaced_fixed_after_s,
        logins,
    })
}
