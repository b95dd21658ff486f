//! Helpers shared by the kernel test files. Every test starts a private daemon with its
//! own uniquely named cgroup root (removed at the end even when the test fails) and kills
//! only the processes it started, by pid. Test users are uids without accounts.
#![allow(dead_code)]

pub use allot_measure::harness::{Kids, PrivateDaemon, TEST_UIDS};
#[allow(unused_imports)] // each test file uses some
pub use wait::{check, poll_until, requests_seen, wait_for_requests};

mod wait;
use std::path::Path;
use std::process::Output;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Tests that measure CPU shares or change kernel settings must not overlap.
static SERIAL: Mutex<()> = Mutex::new(());

pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The product: the CLI and the daemon.
pub fn exe() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_allot"))
}

/// The lab: the load generators (`workload`, `flood`) and `selftest`.
pub fn lab() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_allot-lab"))
}

pub fn require_root() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "kernel tests must run as root (CI runs them as root); they do not skip");
}

/// The test users: A, B, C.
pub const A: u32 = TEST_UIDS[0];
pub const B: u32 = TEST_UIDS[1];
pub const C: u32 = TEST_UIDS[2];

/// Starts `cmd` as `uid` the way a login would (in the daemon's shelter), kept by `kids`.
pub fn spawn_as(d: &PrivateDaemon, kids: &mut Kids, uid: u32, cmd: &[&str]) -> u32 {
    kids.add(d.user_command(uid, cmd).spawn().unwrap())
}

pub fn ok(o: &Output) -> String {
    assert!(o.status.success(), "expected success, got {}: {}", o.status, String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Asserts the command failed with one error line containing every `needle`.
pub fn refused(o: &Output, needles: &[&str]) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "expected a refusal containing {needles:?}, but it succeeded: {}", String::from_utf8_lossy(&o.stdout));
    for n in needles {
        assert!(err.contains(n), "error {err:?} should contain {n:?}");
    }
    assert_eq!(err.trim().lines().count(), 1, "one clear error line, got {err:?}");
}

/// The daemon's replies as the CLI's `--json` prints them, read as the library's types: a
/// field renamed in the protocol is a compile error here, not a null at run time.
#[allow(unused_imports)] // each test file uses some
pub use allot::proto::{AuditRecord, CurrencyView, ExplainView, FundingView, JobMade, JobView, LogView, ShowView, StatusView};

/// Runs the CLI with `--json` and `args` as `uid` (None: root), and reads its reply as `T`.
pub fn reply<T: serde::de::DeserializeOwned>(d: &PrivateDaemon, args: &[&str], uid: Option<u32>) -> T {
    let args: Vec<&str> = std::iter::once("--json").chain(args.iter().copied()).collect();
    let out = ok(&d.cli(&args, uid).unwrap());
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}'s reply is not a {}: {e}: {out}", std::any::type_name::<T>()))
}

pub fn show(d: &PrivateDaemon) -> ShowView {
    reply(d, &["show"], None)
}

pub fn status(d: &PrivateDaemon) -> StatusView {
    reply(d, &["status"], None)
}

pub fn job_with_pid(v: &ShowView, pid: u32) -> Option<JobView> {
    v.jobs.iter().find(|j| j.pids.iter().flatten().any(|&p| p as u32 == pid)).cloned()
}

/// A currency of a `show` by name.
pub fn currency<'a>(v: &'a ShowView, name: &str) -> Option<&'a CurrencyView> {
    v.currencies.iter().find(|c| c.name == name)
}

pub fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let t0 = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        // Generous: the events waited for come within a second or two on a quiet machine, and
        // a shared, busy one can delay them several times over; only a failure waits this long.
        assert!(t0.elapsed() < Duration::from_secs(30), "timed out waiting for {what} (30 s)");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The cgroup of a process in the cpu hierarchy, as /proc/PID/cgroup names it.
pub fn cgroup_of(pid: u32) -> String {
    let cg = allot_linux::cgroup::detect("allot").unwrap();
    cg.path_of(pid as i32).unwrap_or_default()
}

/// Pins a process and its threads to one CPU.
pub fn pin(pid: u32, cpu: usize) {
    allot_linux::process::sched::set_affinity(pid as i32, &[cpu]).unwrap();
    for t in allot_linux::process::procfs::tids(pid as i32).unwrap_or_default() {
        let _ = allot_linux::process::sched::set_affinity(t, &[cpu]);
    }
}

/// CPUs a process used over the next `secs` seconds.
pub fn rate(pid: u32, secs: f64) -> f64 {
    let cpu = |p: u32| {
        allot_linux::process::procfs::stat(p as i32)
            .map(|s| (s.utime + s.stime) as f64 / allot_linux::process::procfs::clk_tck() as f64)
            .unwrap_or(0.0)
    };
    let a = cpu(pid);
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(secs));
    (cpu(pid) - a) / t0.elapsed().as_secs_f64()
}
