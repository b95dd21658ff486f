//! Logout against the fake: a job started from a login session is tied to it; when
//! logind stops the session (the fake's tether disappears, as a `PartOf=` tether does)
//! the job's processes get SIGTERM, SIGHUP and SIGCONT, then SIGKILL after the grace;
//! nothing else is signalled, and a job that ended lets go of its tie.

use super::super::fake::Shared;
use super::super::tests::{peer, start, world};
use super::*;
use crate::proto::{Request, Response};

const SESSION: &str = "/user.slice/user-3000.slice/session-4.scope";

fn run(d: &mut Daemon, w: &Shared, pid: i32) -> String {
    let r = d
        .handle(
            Request::Run {
                tickets: allot_model::Tickets::new(50).ok(),
                currency: None,
                cap: None,
                background: false,
                force: false,
                mem: None,
                oom_group: false,
            },
            &peer(w, 3000, pid),
        )
        .unwrap();
    let Response::Job(j) = r else { panic!("{r:?}") };
    j.cgroup.rsplit('/').next().unwrap().to_string()
}

fn signals(w: &Shared) -> Vec<(i32, i32)> {
    std::mem::take(&mut w.lock().unwrap().signals)
}

#[test]
fn a_job_from_a_session_ends_when_logind_stops_the_session_and_only_then() {
    let w = world();
    {
        let mut x = w.lock().unwrap();
        x.systemd = true;
        x.spawn(100, 3000, SESSION, "sh");
        x.spawn(101, 3000, SESSION, "sh");
        x.spawn(102, 3000, "/", "sh");
    }
    let mut d = start(&w, None);
    let tied = run(&mut d, &w, 100);
    let also_tied = run(&mut d, &w, 101);
    let free = run(&mut d, &w, 102);
    let ties = w.lock().unwrap().tethers.clone();
    assert!(ties.contains(&tied) && ties.contains(&also_tied) && !ties.contains(&free), "{ties:?}");
    w.lock().unwrap().fork(100, 103, 3000);
    // The session abandoned (no stop): nothing happens.
    let t0 = Instant::now();
    d.tick_at(t0);
    assert!(signals(&w).is_empty());
    // logind stops the session: the tether of the first job goes.
    w.lock().unwrap().tethers.remove(&tied);
    d.tick_at(t0 + Duration::from_millis(100));
    let mut got = signals(&w);
    got.sort();
    let want: Vec<(i32, i32)> = [100, 103]
        .iter()
        .flat_map(|&p| [(p, libc::SIGTERM), (p, libc::SIGHUP), (p, libc::SIGCONT)])
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(got, want, "the tied job's processes only");
    // Within the grace: nothing more; after it, SIGKILL to what is left.
    d.tick_at(t0 + GRACE / 2);
    assert!(signals(&w).is_empty());
    d.tick_at(t0 + GRACE + Duration::from_millis(200));
    let mut got = signals(&w);
    got.sort();
    assert_eq!(got, vec![(100, libc::SIGKILL), (103, libc::SIGKILL)]);
    // The other processes were never signalled; the second tied job keeps its tie.
    assert!(w.lock().unwrap().tethers.contains(&also_tied));
}

#[test]
fn a_job_that_ended_lets_go_of_its_tie_and_release_lets_go_of_all() {
    let w = world();
    {
        let mut x = w.lock().unwrap();
        x.systemd = true;
        x.spawn(100, 3000, SESSION, "sh");
        x.spawn(101, 3000, SESSION, "sh");
    }
    let mut d = start(&w, None);
    let first = run(&mut d, &w, 100);
    let second = run(&mut d, &w, 101);
    // The first job's process exits; the job is reaped after its grace, its tie let go.
    w.lock().unwrap().procs.remove(&100);
    let t0 = Instant::now();
    for s in 0..6 {
        d.tick_at(t0 + Duration::from_secs(s));
    }
    let ties = w.lock().unwrap().tethers.clone();
    assert!(!ties.contains(&first) && ties.contains(&second), "{ties:?}");
    assert!(signals(&w).is_empty(), "a job that ended by itself is nobody's logout");
    d.untie_all();
    assert!(w.lock().unwrap().tethers.is_empty());
}

/// One job (pid 100) run from a session of uid 3000, then its session stopped (its tether
/// gone) with the daemon unable to send signals (no CAP_KILL).
fn session_stopped_without_kill_cap() -> (Shared, Daemon) {
    let w = world();
    {
        let mut x = w.lock().unwrap();
        x.systemd = true;
        x.spawn(100, 3000, SESSION, "sh");
    }
    let mut d = start(&w, None);
    let tied = run(&mut d, &w, 100);
    let mut x = w.lock().unwrap();
    x.no_kill_cap = true;
    x.tethers.remove(&tied);
    drop(x);
    (w, d)
}

#[test]
fn without_the_right_to_signal_the_job_is_killed_through_its_cgroup_at_once() {
    let (w, mut d) = session_stopped_without_kill_cap();
    d.tick_at(Instant::now());
    assert_eq!(signals(&w), vec![(100, libc::SIGKILL)], "cgroup.kill, not a SIGTERM that cannot be sent");
    assert!(w.lock().unwrap().procs[&100].zombie);
}

/// A killed job's usage does not move (cgroup v1's `cpuacct.usage` at an exit, the fake's
/// counters always): the job is still read again, seen empty and reaped.
#[test]
fn a_killed_job_is_reaped_though_its_usage_did_not_move() {
    let (w, mut d) = session_stopped_without_kill_cap();
    let t0 = Instant::now();
    d.tick_at(t0);
    assert_eq!(signals(&w), vec![(100, libc::SIGKILL)]);
    // The killed process exits (the kernel takes it out of its cgroup's lists).
    w.lock().unwrap().procs.remove(&100);
    for k in 1..=10 {
        d.tick_at(t0 + Duration::from_secs(k));
    }
    assert!(d.desired().jobs.is_empty(), "the emptied job is reaped: {:?}", d.desired().jobs.keys().collect::<Vec<_>>());
}
