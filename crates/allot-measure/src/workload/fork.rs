//! `allot-lab workload fork`: a fork storm. One thread forks as fast as it can (or at
//! `--rate`); each child exits at once, except every `--keep-every`-th, which sleeps until
//! the storm's process ends (the kernel kills it then: PR_SET_PDEATHSIG), so a benchmark
//! can check where processes born in the storm ended up. Each kept child is reported with
//! the cgroup it was born in (this process's, read just before and after the fork; "?"
//! when they differ: it was being moved), so a child born before its parent was placed
//! can be told apart. With `--hold` the process stays after the storm, keeping those
//! children, until SIGTERM.
//!
//! Children are plain fork(2)s of this process, no exec: the cheapest process a user can
//! make, so the storm is as dense as the machine allows. Forking happens on the main
//! thread only, and the children call only async-signal-safe functions (prctl, getppid,
//! pause, _exit), so forking a process that has other threads would be safe too.

use super::{WorkloadArgs, STOP};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Forks until `duration` ends or a signal arrives; returns the report line.
pub(super) fn run(args: &WorkloadArgs, duration: Option<Duration>, start: Instant) -> serde_json::Value {
    let deadline = duration.map(|d| start + d);
    let parent = std::process::id() as i32;
    let mut forks = 0u64;
    let mut failed = 0u64;
    let mut kept: Vec<i32> = vec![];
    let mut born_in: std::collections::HashMap<i32, String> = Default::default();
    let mut reaped = 0u64;
    let pace = (args.rate > 0).then(|| Duration::from_secs_f64(1.0 / args.rate as f64));
    while !STOP.load(Ordering::Relaxed) {
        if forks % 64 == 0 && deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        if let Some(p) = pace {
            let due = start + p * forks as u32;
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
        }
        let keep = args.keep_every > 0 && forks % args.keep_every == 0;
        let before = if keep { own_cgroup() } else { String::new() };
        // SAFETY: the child only makes async-signal-safe calls, then _exit or pause.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: async-signal-safe calls only, in the child.
            unsafe {
                if keep {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0);
                    // The parent may have died before the prctl: then nobody will kill us.
                    if libc::getppid() == parent {
                        loop {
                            libc::pause();
                        }
                    }
                }
                libc::_exit(0);
            }
        }
        if pid < 0 {
            failed += 1;
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        forks += 1;
        if keep {
            kept.push(pid);
            let after = own_cgroup();
            born_in.insert(pid, if after == before { after } else { "?".into() });
        }
        reaped += reap(&mut kept, false);
    }
    let wall = start.elapsed().as_secs_f64();
    // The short-lived children still exiting.
    let t0 = Instant::now();
    while reaped + (kept.len() as u64) < forks && t0.elapsed() < Duration::from_secs(5) {
        let n = reap(&mut kept, true);
        if n == 0 {
            break;
        }
        reaped += n;
    }
    serde_json::json!({
        "kind": args.kind,
        "work": forks,
        "forks_per_s": forks as f64 / wall.max(1e-9),
        "storm_s": wall,
        "fork_errors": failed,
        "kept": kept.iter().map(|p| serde_json::json!({"pid": p, "born_in": born_in.get(p)})).collect::<Vec<_>>(),
    })
}

/// This process's cgroup in the cpu hierarchy (v1), or its v2 cgroup.
fn own_cgroup() -> String {
    let s = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let p = allot_linux::process::procfs::parse_cgroup(&s, Some("cpu")).or_else(|| allot_linux::process::procfs::parse_cgroup(&s, None));
    p.unwrap_or_else(|| "?".into())
}

/// Reaps exited children (blocking for one if `block`); a kept child that died is
/// dropped from `kept`, so its pid is never signalled or reported after reuse.
fn reap(kept: &mut Vec<i32>, block: bool) -> u64 {
    let mut n = 0;
    loop {
        let mut st = 0;
        // SAFETY: plain syscall with a valid out-pointer.
        let pid = unsafe { libc::waitpid(-1, &mut st, if block && n == 0 { 0 } else { libc::WNOHANG }) };
        if pid <= 0 {
            return n;
        }
        kept.retain(|&k| k != pid);
        n += 1;
    }
}

/// `--hold`: waits for SIGTERM or SIGINT, keeping the kept children alive; they die with
/// this process (PR_SET_PDEATHSIG). It sleeps in sigsuspend, never waking on its own: a
/// job holding the storm's survivors is at rest, as the benchmark's window after the
/// storm assumes (a 50 ms poll here kept the job busy, and the daemon at 1.3% of one
/// CPU re-reading its 867 processes).
pub(super) fn hold() {
    // SAFETY: signal masks of this thread, on local sets.
    unsafe {
        let (mut block, mut old): (libc::sigset_t, libc::sigset_t) = (std::mem::zeroed(), std::mem::zeroed());
        libc::sigemptyset(&mut block);
        libc::sigaddset(&mut block, libc::SIGTERM);
        libc::sigaddset(&mut block, libc::SIGINT);
        libc::pthread_sigmask(libc::SIG_BLOCK, &block, &mut old);
        // Blocked between the check and the wait, so a signal cannot slip in between.
        while !STOP.load(Ordering::Relaxed) {
            libc::sigsuspend(&old);
        }
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
    }
}
