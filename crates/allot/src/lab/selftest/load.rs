//! The load a check did not make: the CPU the machine spent over a window (/proc/stat,
//! steal time in a VM included) less what the check's own daemon, jobs and processes used
//! over the same window. A check that misses while other load took [`BUSY`] or more says
//! nothing about allot: it is INCONCLUSIVE with that load named, not FAIL.

use allot_measure::harness::PrivateDaemon;
use std::time::{Duration, Instant};

/// Outside load from which a missed check proves nothing: a quarter of a CPU. Each check
/// keeps ±5% of what it measures; other load beyond this moves that much.
pub const BUSY: f64 = 0.25;

/// Whether a check is inconclusive rather than failed: it missed, and other load of at
/// least [`BUSY`] CPU ran while it measured. A pass stands whatever the load.
pub fn inconclusive(passed: bool, outside: f64) -> bool {
    !passed && outside >= BUSY
}

/// Other load in CPUs: `busy_s` CPU-seconds the machine spent over `wall_s` seconds, less
/// `ours_s` of the check's own (never below 0: counters read a moment apart).
pub fn other_load(busy_s: f64, ours_s: f64, wall_s: f64) -> f64 {
    if wall_s <= 0.0 {
        return 0.0;
    }
    ((busy_s - ours_s) / wall_s).max(0.0)
}

/// Measures other load over a window: started before the check measures, finished after.
/// The check's own CPU is its daemon's, its background job's, its processes' that ended
/// in the window (this process's reaped children: a foreground job's `allot run` execs its
/// command, and a plain process outside allot), and what the caller measured of the jobs
/// that ran through the window. Counted so, not from the daemon's whole tree, it is the
/// same on every backend: on a systemd host the jobs are scopes in users' slices, and a
/// scope removed in the window takes its usage with it.
pub struct Meter {
    busy: Option<u64>,
    ours: f64,
    t0: Instant,
    d: Option<u32>,
    cg: Option<Box<dyn allot_linux::cgroup::CpuController>>,
}

impl Meter {
    /// Starts a window now.
    pub fn start(d: &PrivateDaemon) -> Self {
        let mut m = Meter { busy: None, ours: 0.0, t0: Instant::now(), d: d.daemon_pid(), cg: d.controller().ok() };
        m.ours = m.ours_now();
        m.busy = allot_linux::process::machine::cpu_times().ok().map(|t| t.busy);
        m.t0 = Instant::now();
        m
    }

    /// Other load since [`Self::start`], in CPUs, given `jobs_s`: the CPU-seconds the
    /// check's jobs that lived through the window used in it (0 when it had none).
    pub fn finish(&self, jobs_s: f64) -> f64 {
        let (Some(a), Ok(b)) = (self.busy, allot_linux::process::machine::cpu_times()) else { return 0.0 };
        let wall = self.t0.elapsed().as_secs_f64();
        let busy = b.busy.saturating_sub(a) as f64 / allot_linux::process::procfs::clk_tck() as f64;
        other_load(busy, self.ours_now() - self.ours + jobs_s, wall)
    }

    /// CPU-seconds so far of the daemon, the background job and the reaped children.
    fn ours_now(&self) -> f64 {
        let tck = allot_linux::process::procfs::clk_tck() as f64;
        let daemon = self.d.and_then(|p| allot_linux::process::procfs::stat(p as i32).ok()).map_or(0.0, |s| (s.utime + s.stime) as f64 / tck);
        let bg = self.cg.as_ref().map_or(0, |c| c.usage_ns(allot_linux::cgroup::BACKGROUND).unwrap_or(0));
        daemon + bg as f64 / 1e9 + children_cpu()
    }
}

/// Other load over `secs` from now, while the check has no job but the background.
pub fn over(d: &PrivateDaemon, secs: f64) -> f64 {
    let m = Meter::start(d);
    std::thread::sleep(Duration::from_secs_f64(secs));
    m.finish(0.0)
}

/// CPU-seconds of this process's children that have been waited for.
fn children_cpu() -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a rusage.
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) } != 0 {
        return 0.0;
    }
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    s(u.ru_utime) + s(u.ru_stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_miss_under_other_load_is_inconclusive_and_a_pass_stands() {
        // Another build on a 2-CPU machine: 2 CPUs of outside load.
        assert!(inconclusive(false, 2.0));
        assert!(inconclusive(false, BUSY), "from a quarter CPU on");
        assert!(!inconclusive(false, 0.24), "a quiet machine: a miss is a failure");
        assert!(!inconclusive(false, 0.0));
        assert!(!inconclusive(true, 2.0), "a pass under load is still a pass");
    }

    #[test]
    fn other_load_is_the_machine_less_the_check() {
        // 2 CPUs busy for 4 s, the check's own 5 CPU-s of it: 3 CPU-s of others, 0.75 CPU.
        assert_eq!(other_load(8.0, 5.0, 4.0), 0.75);
        assert_eq!(other_load(8.0, 8.0, 4.0), 0.0);
        assert_eq!(other_load(8.0, 8.5, 4.0), 0.0, "counters read a moment apart never make it negative");
        assert_eq!(other_load(1.0, 0.0, 0.0), 0.0, "no window, no load");
    }

    /// A busy child outside allot, waited for in the window, is the check's own.
    #[test]
    fn reaped_children_count_as_the_checks_own() {
        let before = children_cpu();
        let st = std::process::Command::new("sh").args(["-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"]).status().unwrap();
        assert!(st.success());
        let used = children_cpu() - before;
        assert!(used > 0.01, "the child's CPU is counted once reaped: {used}");
    }
}
