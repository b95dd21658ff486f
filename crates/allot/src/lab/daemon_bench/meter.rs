//! What the benchmark reads about the daemon and the processes it places: CPU time, memory,
//! and where a process is.

use allot_linux::cgroup::CpuController;
use anyhow::Context;
use std::time::{Duration, Instant};

/// The daemon's CPU time (all its threads, the dead ones included), ns, from its process
/// CPU clock (clock_getcpuclockid): the scheduler's own runtime sum, to the nanosecond.
/// utime + stime in /proc/PID/stat count 10 ms ticks: over a 60 s window one tick is
/// 0.017% of a CPU, too coarse to judge 0.1%.
pub fn cpu_ns(pid: u32) -> anyhow::Result<u64> {
    let mut clock: libc::clockid_t = 0;
    // SAFETY: valid out-pointer; the pid is our own child (the private daemon).
    let r = unsafe { libc::clock_getcpuclockid(pid as libc::pid_t, &mut clock) };
    if r != 0 {
        anyhow::bail!("clock_getcpuclockid({pid}): {}", std::io::Error::from_raw_os_error(r));
    }
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: valid clock id and out-pointer.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        anyhow::bail!("clock_gettime(CPU clock of {pid}): {}", std::io::Error::last_os_error());
    }
    Ok(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// utime + stime from /proc/PID/stat, ns (10 ms resolution; the cross-check).
pub fn ticks_ns(pid: u32) -> anyhow::Result<u64> {
    let s = allot_linux::process::procfs::stat(pid as i32)?;
    Ok((s.utime + s.stime) * 1_000_000_000 / allot_linux::process::procfs::clk_tck())
}

/// VmRSS and VmHWM (peak) of a process, MB.
pub fn mem_mb(pid: u32) -> anyhow::Result<(f64, f64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).with_context(|| format!("read /proc/{pid}/status"))?;
    let kb = |key: &str| -> Option<f64> { s.lines().find_map(|l| l.strip_prefix(key)).and_then(|v| v.split_whitespace().next()?.parse().ok()) };
    Ok((kb("VmRSS:").context("no VmRSS")? / 1024.0, kb("VmHWM:").context("no VmHWM")? / 1024.0))
}

/// The daemon over one window.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Window {
    /// Length, s.
    pub seconds: f64,
    /// CPU over the window, % of one CPU (process CPU clock).
    pub cpu_percent: f64,
    /// The same from /proc/PID/stat's 10 ms ticks.
    pub cpu_ticks_percent: f64,
    /// The busiest second of the window, % of one CPU (a safety scan shows here).
    pub peak_1s_percent: f64,
    /// Each second's CPU, % of one CPU (the safety scan, or a burst of work, shows here).
    pub per_second: Vec<f64>,
    /// RSS at the end, MB.
    pub rss_mb: f64,
    /// Peak RSS since the daemon started, MB.
    pub hwm_mb: f64,
    /// Processes forked on the whole machine per second over the window: the daemon hears
    /// of process events machine-wide, so another user's fork storm costs it CPU here.
    #[serde(default)]
    pub machine_forks_per_s: f64,
}

/// Processes forked on the whole machine since boot (/proc/stat's `processes`).
pub fn machine_forks() -> u64 {
    std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("processes ").and_then(|v| v.trim().parse().ok())))
        .unwrap_or(0)
}

/// Measures the daemon `pid` for `len`, sampling its CPU clock once a second.
pub fn window(pid: u32, len: Duration) -> anyhow::Result<Window> {
    let (c0, k0, t0, f0) = (cpu_ns(pid)?, ticks_ns(pid)?, Instant::now(), machine_forks());
    let mut per_second = vec![];
    let (mut last_c, mut last_t) = (c0, t0);
    while t0.elapsed() < len {
        std::thread::sleep((len - t0.elapsed()).min(Duration::from_secs(1)));
        let (c, t) = (cpu_ns(pid)?, Instant::now());
        let dt = (t - last_t).as_secs_f64();
        if dt > 0.5 {
            per_second.push((c - last_c) as f64 / 1e9 / dt * 100.0);
        }
        (last_c, last_t) = (c, t);
    }
    let secs = t0.elapsed().as_secs_f64();
    let (rss_mb, hwm_mb) = mem_mb(pid)?;
    Ok(Window {
        seconds: secs,
        cpu_percent: (cpu_ns(pid)? - c0) as f64 / 1e9 / secs * 100.0,
        cpu_ticks_percent: (ticks_ns(pid)? - k0) as f64 / 1e9 / secs * 100.0,
        peak_1s_percent: per_second.iter().copied().fold(0.0, f64::max),
        per_second,
        rss_mb,
        hwm_mb,
        machine_forks_per_s: machine_forks().saturating_sub(f0) as f64 / secs,
    })
}

/// Waits until the daemon is quiet, so an at-rest window does not measure it catching up
/// with what came before (placing a burst of logins can keep it busy long after the last
/// one is in its job): at least `min`, then until two 1 s samples in a row are under
/// `busy` % of one CPU, at most `max`. Returns the seconds waited and whether it went quiet.
pub fn quiet(pid: u32, min: Duration, max: Duration, busy: f64) -> anyhow::Result<(f64, bool)> {
    let t0 = Instant::now();
    std::thread::sleep(min);
    let mut calm = 0;
    while calm < 2 {
        if t0.elapsed() >= max {
            return Ok((t0.elapsed().as_secs_f64(), false));
        }
        let (c, t) = (cpu_ns(pid)?, Instant::now());
        std::thread::sleep(Duration::from_secs(1));
        let pct = (cpu_ns(pid)? - c) as f64 / 1e9 / t.elapsed().as_secs_f64() * 100.0;
        calm = if pct < busy { calm + 1 } else { 0 };
    }
    Ok((t0.elapsed().as_secs_f64(), true))
}

/// Where processes are, read from the kernel (/proc/PID/cgroup), not from the daemon.
pub struct Places {
    cg: Box<dyn CpuController>,
}

impl Places {
    /// For the private daemon whose cgroup root is `root_name`.
    pub fn new(root_name: &str) -> anyhow::Result<Self> {
        Ok(Self { cg: allot_linux::cgroup::detect(root_name)? })
    }

    /// The job a process is in (relative to allot's root: `user-UID/default`), None when
    /// it is outside allot's tree or gone.
    pub fn job_of(&self, pid: u32) -> Option<String> {
        self.cg.rel_of(pid as i32).ok().flatten()
    }

    /// Is the process in a job of `uid`'s currency (`user-UID/...`, docs/kernel.md)?
    pub fn in_currency(&self, pid: u32, uid: u32) -> bool {
        self.job_of(pid).is_some_and(|r| r.starts_with(&format!("user-{uid}/")))
    }

    /// The job's directory in the cpu hierarchy.
    pub fn dir(&self, rel: &str) -> std::path::PathBuf {
        self.cg.dir(rel)
    }
}

/// Processes running as `uid` now (the owner of /proc/PID is the effective uid), for
/// finding every survivor of a storm.
pub fn pids_of_uid(uid: u32) -> Vec<u32> {
    use std::os::unix::fs::MetadataExt;
    let pids = allot_linux::process::procfs::pids().unwrap_or_default();
    pids.into_iter().filter(|p| std::fs::metadata(format!("/proc/{p}")).is_ok_and(|m| m.uid() == uid)).map(|p| p as u32).collect()
}
