//! Waiting for an event instead of sleeping a fixed time before an assertion: poll a
//! condition until it holds or a deadline passes, and on the deadline fail with what was
//! last seen, so a slow machine costs time, not a wrong verdict, and a failure says why.

use std::fmt::Debug;
use std::time::{Duration, Instant};

/// Polls `f` every 50 ms until it returns `Ok`, for at most `within`. On the deadline it
/// panics naming `what`, the time waited and the last `Err` it saw (what stood in the way).
pub fn poll_until<T, E: Debug>(what: &str, within: Duration, mut f: impl FnMut() -> Result<T, E>) -> T {
    let t0 = Instant::now();
    loop {
        match f() {
            Ok(v) => return v,
            Err(seen) if t0.elapsed() >= within => {
                panic!("timed out after {:.1} s waiting for {what}; last seen: {seen:?}", t0.elapsed().as_secs_f64())
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// `Ok(())` if `cond`, else `Err(seen)`: a condition and what to report while it is false.
pub fn check<E>(cond: bool, seen: impl FnOnce() -> E) -> Result<(), E> {
    if cond {
        Ok(())
    } else {
        Err(seen())
    }
}

/// The daemon's requests served and refused by limits so far, as `status` counts them (the
/// status request itself included).
pub fn requests_seen(d: &super::PrivateDaemon) -> Result<u64, String> {
    let o = d.cli(&["--json", "status"], None).map_err(|e| e.to_string())?;
    let v: allot::proto::StatusView =
        serde_json::from_slice(&o.stdout).map_err(|e| format!("status: {e}: {}", String::from_utf8_lossy(&o.stderr)))?;
    Ok(v.counters.requests + v.counters.limited)
}

/// Waits until the daemon has seen at least `n` requests or refusals from others since
/// `before` (a [`requests_seen`]): a load generator is in full swing, not merely started.
pub fn wait_for_requests(d: &super::PrivateDaemon, before: u64, n: u64) {
    let mut mine = 0;
    poll_until(&format!("{n} requests from the load"), Duration::from_secs(15), || {
        mine += 1;
        let seen = requests_seen(d)?;
        let others = seen.saturating_sub(before + mine);
        check(others >= n, || format!("{others} requests from others so far"))
    });
}

#[test]
fn poll_until_returns_the_value_once_the_condition_holds() {
    let mut n = 0;
    let v = poll_until("three tries", Duration::from_secs(5), || {
        n += 1;
        if n >= 3 {
            Ok(n)
        } else {
            Err(format!("try {n}"))
        }
    });
    assert_eq!(v, 3);
}

#[test]
fn poll_until_reports_what_it_last_saw() {
    let r = std::panic::catch_unwind(|| poll_until::<(), _>("never", Duration::from_millis(120), || Err("still 7 jobs")));
    let msg = *r.unwrap_err().downcast::<String>().unwrap();
    assert!(msg.contains("waiting for never") && msg.contains("last seen: \"still 7 jobs\""), "{msg}");
}
