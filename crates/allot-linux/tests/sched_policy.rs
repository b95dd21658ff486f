//! Kernel tests for `allot_linux::process::sched::set_fair_policy`, what a rule gives a login-session
//! process (docs/systemd.md): SCHED_IDLE takes only idle CPU against a nice-0 spinner on
//! the same CPU, the old policy and nice come back, and a real-time task is never demoted.
//! Needs root (nice below the caller's, SCHED_FIFO); fails, never skips. Each test kills
//! only the children it started, by pid.

use allot_linux::process::sched::{self, SCHED_FIFO, SCHED_IDLE, SCHED_OTHER};
use std::process::{Child, Command};
use std::time::Duration;

fn spinner() -> Child {
    Command::new("taskset").args(["-c", "0", "sh", "-c", "while :; do :; done"]).spawn().unwrap()
}

fn cpu_s(pid: u32) -> f64 {
    let st = allot_linux::process::procfs::stat(pid as i32).unwrap();
    (st.utime + st.stime) as f64 / allot_linux::process::procfs::clk_tck() as f64
}

fn stop(mut c: Child) {
    let _ = c.kill();
    let _ = c.wait();
}

/// Kills the spinners it holds when dropped, a failed assertion included.
struct Spinners(Vec<Child>);

impl Drop for Spinners {
    fn drop(&mut self) {
        for c in self.0.drain(..) {
            stop(c);
        }
    }
}

/// CPU each of two pids used over `secs`.
fn used(a: u32, b: u32, secs: f64) -> (f64, f64) {
    let (a0, b0) = (cpu_s(a), cpu_s(b));
    std::thread::sleep(Duration::from_secs_f64(secs));
    ((cpu_s(a) - a0) / secs, (cpu_s(b) - b0) / secs)
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn sched_idle_yields_to_a_nice_0_spinner_and_the_old_policy_comes_back() {
    // Two spinners on CPU 0, the reference at nice 0 whatever nice this test runs at; the
    // machine may be busy with other work, so shares are read against each other.
    let s = Spinners(vec![spinner(), spinner()]);
    let (a, b) = (s.0[0].id(), s.0[1].id());
    std::thread::sleep(Duration::from_millis(200));
    assert!(sched::set_fair_policy(b as i32, SCHED_OTHER, 0).unwrap());
    assert!(sched::set_fair_policy(a as i32, SCHED_OTHER, 3).unwrap());
    assert!(sched::set_fair_policy(a as i32, SCHED_IDLE, 3).unwrap());
    let got = sched::get(a as i32).unwrap();
    assert_eq!((got.sched_policy, got.sched_nice), (SCHED_IDLE, 3));
    let (ua, ub) = used(a, b, 3.0);
    let share = ua / (ua + ub).max(1e-9);
    eprintln!("one CPU: SCHED_IDLE spinner {ua:.3} CPU, nice-0 spinner {ub:.3} CPU: {:.1}% of what the two got", 100.0 * share);
    assert!(ub > 0.05 && share <= 0.05, "SCHED_IDLE took {:.1}% against a nice-0 spinner", 100.0 * share);
    // Given back: SCHED_OTHER at its old nice 3, weighing 526 against nice 0's 1024.
    assert!(sched::set_fair_policy(a as i32, SCHED_OTHER, 3).unwrap());
    let got = sched::get(a as i32).unwrap();
    assert_eq!((got.sched_policy, got.sched_nice), (SCHED_OTHER, 3));
    let (ua, ub) = used(a, b, 3.0);
    eprintln!("given back (nice 3 against nice 0): {ua:.3} and {ub:.3} CPU, ratio {:.2} (kernel weights: 0.51)", ua / ub.max(1e-9));
    assert!((0.3..0.8).contains(&(ua / ub.max(1e-9))), "nice 3 against nice 0: {ua:.3} / {ub:.3}");
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn a_real_time_task_is_never_demoted_and_a_gone_tid_names_itself() {
    let c = Command::new("chrt").args(["-f", "1", "sleep", "30"]).spawn().unwrap();
    let pid = c.id() as i32;
    let t0 = std::time::Instant::now();
    while sched::get(pid).map(|a| a.sched_policy != SCHED_FIFO).unwrap_or(true) && t0.elapsed().as_secs() < 5 {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!sched::set_fair_policy(pid, SCHED_IDLE, 0).unwrap(), "a real-time task is left");
    assert_eq!(sched::get(pid).unwrap().sched_policy, SCHED_FIFO);
    stop(c);
    let e = sched::set_fair_policy(0x3fff_ffff, SCHED_IDLE, 0).unwrap_err().to_string();
    assert!(e.contains("sched_getattr(1073741823)"), "{e}");
}
