//! One row of the scale curve: a fresh private daemon, N sleeping processes of U users
//! started as logins, the daemon at rest over a window, then the placement latency of
//! new logins.

use super::logins::{launcher, Latencies, LoginTimer};
use super::meter::{self, Places, Window};
use allot_measure::harness::PrivateDaemon;
use allot_measure::launcher::Launcher;
use anyhow::{bail, Context};
use std::path::Path;
use std::time::{Duration, Instant};

/// A private daemon that places exactly these users (uids without accounts, that
/// `--test-uids` chose: the kernel runs a process as any uid).
pub fn daemon(exe: &Path, uids: &[u32]) -> anyhow::Result<PrivateDaemon> {
    PrivateDaemon::start(exe, &allot_measure::test_uids::users_config(uids))
}

/// Sleeping processes started as logins, and how their placement went.
pub struct Population {
    /// What started them (and kills them: `kill_all`, or on drop).
    pub launcher: Launcher,
    /// (uid, pid) of one process per user.
    pub firsts: Vec<(u32, u32)>,
    /// Seconds to start them all.
    pub start_s: f64,
    /// Seconds from the last start until all were in jobs.
    pub placed_after_s: f64,
}

/// Starts `n` `sleep` processes round-robin over `uids`, each as a login, and waits (up
/// to `limit`) until the daemon has put every one into a job.
pub fn populate(d: &PrivateDaemon, exe: &Path, places: &Places, uids: &[u32], n: usize, limit: Duration) -> anyhow::Result<Population> {
    let mut launcher = launcher(d, exe)?;
    let t0 = Instant::now();
    let mut pending = Vec::with_capacity(n);
    let mut firsts = vec![];
    for i in 0..n {
        let uid = uids[i % uids.len()];
        let pid = launcher.launch(uid, &["sleep", "3600"]).context("start a sleeping process")?.pid;
        if i < uids.len() {
            firsts.push((uid, pid));
        }
        pending.push(pid);
    }
    let start_s = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    while !pending.is_empty() {
        pending.retain(|&p| places.job_of(p).is_none());
        if pending.is_empty() {
            break;
        }
        if t1.elapsed() > limit {
            bail!("{} of {n} processes were not in a job {:.0} s after the last one started", pending.len(), limit.as_secs_f64());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(Population { launcher, firsts, start_s, placed_after_s: t1.elapsed().as_secs_f64() })
}

/// The daemon is quiet under this CPU, % of one CPU.
pub const QUIET: f64 = 5.0;

/// One row's numbers.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Row {
    /// Sleeping processes.
    pub processes: usize,
    /// Users they belong to.
    pub users: usize,
    /// Seconds to start them (as logins, one after another).
    pub start_s: f64,
    /// Seconds from the last start until all were in jobs.
    pub placed_after_s: f64,
    /// Seconds from then until the daemon was quiet (under 5% of one CPU for 2 s in a row),
    /// when the at-rest window began.
    pub quiet_after_s: f64,
    /// It went quiet (false: the window began at the wait's limit anyway).
    pub quiet: bool,
    /// The daemon at rest.
    pub rest: Window,
    /// Placement latency of new logins (None: no processes, so no job to watch).
    pub latency: Option<Latencies>,
    /// How the daemon finds new processes (`allot status`).
    pub tracking: String,
    /// The machine's 1-minute load average as the window began and as it ended (others
    /// share this machine).
    pub load: [f64; 2],
}

/// How the daemon says it finds new processes.
pub fn tracking(d: &PrivateDaemon) -> String {
    match crate::client::call(&d.socket, &crate::proto::Request::Status {}) {
        Ok(crate::proto::Response::Status(s)) => s.tracking,
        Ok(_) => "?".into(),
        Err(e) => format!("? ({e})"),
    }
}

/// The 1-minute load average now.
pub fn load() -> f64 {
    allot_linux::process::procfs::loadavg().map(|l| l.avg1).unwrap_or(f64::NAN)
}

/// Measures one row: `processes` of the users `uids`.
pub fn row(exe: &Path, processes: usize, uids: &[u32], window: Duration, logins: usize, settle: [Duration; 2]) -> anyhow::Result<Row> {
    let users = uids.len();
    let mut d = daemon(exe, uids)?;
    let pid = d.daemon_pid().context("the private daemon is not running")?;
    let places = Places::new(&d.root_name)?;
    let mut pop = populate(&d, exe, &places, uids, processes, Duration::from_secs(120))?;
    let (quiet_after_s, quiet) = meter::quiet(pid, settle[0], settle[1], QUIET)?;
    let load0 = load();
    let rest = meter::window(pid, window)?;
    let load = [load0, load()];
    let latency = if processes > 0 && logins > 0 {
        let mut t = LoginTimer::new(&d, exe, &places, &pop.firsts)?;
        Some(t.time(logins, None, Duration::from_secs(2))?)
    } else {
        None
    };
    let tracking = tracking(&d);
    // The processes go first: the daemon removes its tree on stop, and a cgroup with
    // processes in it cannot be removed.
    pop.launcher.kill_all()?;
    d.stop()?;
    Ok(Row { processes, users, start_s: pop.start_s, placed_after_s: pop.placed_after_s, quiet_after_s, quiet, rest, latency, tracking, load })
}
