//! Reach against a fake systemd host: the hostile cases first (a uid change that is not
//! what it seems, a process in another manager's unit, a recycled pid, a process that
//! exits, a storm of uid changes), then cron and su.

use super::super::super::fake::Shared;
use super::super::super::tests::{path_of, start, world};
use super::*;
use allot_linux::ipc::systemd_bus::UnitOf;
use allot_linux::procevents::ProcEvent;
use std::time::Duration;

const ALICE: u32 = 3000;
const BOB: u32 = 3001;
const CRON: &str = "/system.slice/cron.service";
const ALICE_DEFAULT: &str = "/fake/user-3000/default";

fn systemd_world() -> Shared {
    let w = world();
    {
        let mut x = w.lock().unwrap();
        x.systemd = true;
        x.spawn(10, 0, CRON, "cron");
        x.units.insert(CRON.into(), UnitOf { name: "cron.service".into(), cgroup: CRON.into(), own_pids: [10, 0], ..Default::default() });
    }
    w
}

/// The kernel reports that `pid`'s uids changed (the event itself carries nothing the
/// daemon trusts: it reads the process).
fn uid_event(pid: i32) -> ProcEvent {
    ProcEvent::Uid { pid, ruid: ALICE, euid: ALICE }
}

fn become_user(w: &Shared, pid: i32, uid: u32) {
    w.lock().unwrap().procs.get_mut(&pid).unwrap().uids = [uid; 4];
}

fn lookups(w: &Shared) -> u32 {
    w.lock().unwrap().unit_lookups
}

#[test]
fn a_uid_change_that_is_not_what_it_claims_moves_nothing() {
    let w = systemd_world();
    let mut d = start(&w, None);
    {
        let mut x = w.lock().unwrap();
        // Root's process in cron.service: the event names alice, the process is root's.
        x.fork(10, 20, 0);
        // Bob's process in his own session, named by an event that says alice.
        x.spawn(21, BOB, "/user.slice/user-3001.slice/session-4.scope", "bash");
        // Half changed: real uid alice, effective root (a setuid program mid-way).
        x.fork(10, 22, 0);
        x.procs.get_mut(&22).unwrap().uids = [ALICE, 0, 0, 0];
    }
    d.on_process_events(vec![uid_event(20), uid_event(21), uid_event(22), uid_event(99_999)]);
    assert_eq!(path_of(&w, 20), CRON);
    assert_eq!(path_of(&w, 21), "/user.slice/user-3001.slice/session-4.scope", "a login session's own user stays in it");
    assert_eq!(path_of(&w, 22), CRON, "not wholly a human user's: not moved");
    assert_eq!(lookups(&w), 0, "none of them was worth a unit lookup");
    assert!(!d.desired().jobs.keys().any(|j| matches!(j, super::super::super::registry::JobId::Default(ALICE))), "no job made for alice");
}

#[test]
fn other_managers_units_keep_their_processes() {
    let w = systemd_world();
    let cases: &[(&str, UnitOf)] = &[
        // A container: Delegate= on.
        ("/system.slice/docker-ab.scope", UnitOf { name: "docker-ab.scope".into(), delegate: true, ..Default::default() }),
        // Below a unit's own cgroup: a subtree someone else made.
        (
            "/system.slice/slurmd.service/job_7",
            UnitOf { name: "slurmd.service".into(), cgroup: "/system.slice/slurmd.service".into(), ..Default::default() },
        ),
        // A service that runs as alice by its admin's choice (User=).
        ("/system.slice/jupyter.service", UnitOf { name: "jupyter.service".into(), user: "3000".into(), ..Default::default() }),
        // A service's main process that dropped privileges to alice.
        ("/system.slice/odd.service", UnitOf { name: "odd.service".into(), own_pids: [33, 0], ..Default::default() }),
        // Not a service or a scope.
        ("/system.slice/x.mount", UnitOf { name: "x.mount".into(), ..Default::default() }),
    ];
    {
        let mut x = w.lock().unwrap();
        for (i, (path, u)) in cases.iter().enumerate() {
            let mut u = u.clone();
            if u.cgroup.is_empty() {
                u.cgroup = path.to_string();
            }
            x.units.insert(if path.ends_with("job_7") { "/system.slice/slurmd.service/job_7".into() } else { path.to_string() }, u);
            x.spawn(30 + i as i32, ALICE, path, "work");
        }
        // Alice's user manager and a `systemd-run --user` unit under it: her slice already.
        x.spawn(40, ALICE, "/user.slice/user-3000.slice/user@3000.service/app.slice/run-u4.service", "work");
    }
    let mut d = start(&w, None);
    let pids: Vec<i32> = (30..30 + cases.len() as i32).chain([40]).collect();
    d.on_process_events(pids.iter().map(|&p| uid_event(p)).collect());
    for (i, (path, _)) in cases.iter().enumerate() {
        assert_eq!(path_of(&w, 30 + i as i32), *path, "{path}");
    }
    assert!(path_of(&w, 40).contains("user@3000.service"));
    assert_eq!(lookups(&w), cases.len() as u32, "her own slice needs no lookup");
    // Told again, the verdicts are remembered: no new lookups.
    d.on_process_events(pids.iter().map(|&p| uid_event(p)).collect());
    assert_eq!(lookups(&w), cases.len() as u32);
}

#[test]
fn a_recycled_pid_is_judged_afresh() {
    let w = systemd_world();
    w.lock().unwrap().units.insert(
        "/system.slice/jupyter.service".into(),
        UnitOf { name: "jupyter.service".into(), cgroup: "/system.slice/jupyter.service".into(), user: "3000".into(), ..Default::default() },
    );
    w.lock().unwrap().spawn(50, ALICE, "/system.slice/jupyter.service", "kernel");
    let mut d = start(&w, None);
    d.on_process_events(vec![uid_event(50)]);
    assert_eq!(path_of(&w, 50), "/system.slice/jupyter.service");
    // It exits; its pid comes back as alice's cron job: not "stays" by memory.
    {
        let mut x = w.lock().unwrap();
        x.procs.remove(&50);
        x.fork(10, 50, 0);
    }
    become_user(&w, 50, ALICE);
    d.on_process_events(vec![uid_event(50)]);
    assert_eq!(path_of(&w, 50), ALICE_DEFAULT);
}

#[test]
fn a_process_that_exits_before_the_move_is_left_alone() {
    let w = systemd_world();
    let mut d = start(&w, None);
    w.lock().unwrap().fork(10, 60, 0);
    become_user(&w, 60, ALICE);
    w.lock().unwrap().procs.get_mut(&60).unwrap().zombie = true;
    w.lock().unwrap().fork(10, 61, 0);
    become_user(&w, 61, ALICE);
    w.lock().unwrap().procs.remove(&61);
    d.on_process_events(vec![uid_event(60), uid_event(61)]);
    assert_eq!(path_of(&w, 60), CRON, "a zombie is not moved");
    assert!(!w.lock().unwrap().procs.contains_key(&61));
}

#[test]
fn a_storm_of_uid_changes_costs_a_bounded_number_of_lookups() {
    let w = systemd_world();
    // 10,000 processes of alice in a service that runs as her, each changing uid; and,
    // in the same batch, one of bob's cron jobs.
    w.lock().unwrap().units.insert(
        "/system.slice/jupyter.service".into(),
        UnitOf { name: "jupyter.service".into(), cgroup: "/system.slice/jupyter.service".into(), user: "3000".into(), ..Default::default() },
    );
    {
        let mut x = w.lock().unwrap();
        for pid in 1000..11_000 {
            x.spawn(pid, ALICE, "/system.slice/jupyter.service", "storm");
        }
        x.fork(10, 70, 0);
    }
    become_user(&w, 70, BOB);
    let mut d = start(&w, None);
    let mut evs: Vec<ProcEvent> = (1000..11_000).map(uid_event).collect();
    evs.push(uid_event(70));
    let t0 = std::time::Instant::now();
    d.on_process_events(evs);
    let took = t0.elapsed();
    assert!(lookups(&w) <= BURST as u32 + 1 + (took.as_secs_f64() * RATE) as u32 + 1, "{} lookups", lookups(&w));
    assert_eq!(path_of(&w, 70), "/fake/user-3001/default", "another user's cron job is not held up by the storm");
    assert!(took < Duration::from_secs(2), "the batch took {took:?}");
    // One process changing uid again and again: one lookup.
    let before = lookups(&w);
    d.on_process_events((0..10_000).map(|_| uid_event(1000)).collect());
    assert_eq!(lookups(&w), before);
}

#[test]
fn cron_jobs_and_su_join_their_users_currency() {
    let w = systemd_world();
    {
        let mut x = w.lock().unwrap();
        // cron forks, the child becomes alice and runs her job; a grandchild forked
        // before the daemon heard goes with it.
        x.fork(10, 80, 0);
        x.procs.get_mut(&80).unwrap().uids = [ALICE; 4];
        x.fork(80, 81, ALICE);
        // root's login session: `su - alice -c ...`; and alice's own login shell.
        x.spawn(90, 0, "/user.slice/user-0.slice/session-2.scope", "bash");
        x.fork(90, 91, ALICE);
        x.spawn(92, ALICE, "/user.slice/user-3000.slice/session-5.scope", "bash");
        // `sudo -u bob` from alice's session.
        x.fork(92, 93, BOB);
    }
    let mut d = start(&w, None);
    d.on_process_events(vec![uid_event(80), uid_event(91), uid_event(92), uid_event(93)]);
    assert_eq!((path_of(&w, 80), path_of(&w, 81)), (ALICE_DEFAULT.into(), ALICE_DEFAULT.into()));
    assert_eq!(path_of(&w, 91), ALICE_DEFAULT, "su into alice from root's session");
    assert_eq!(path_of(&w, 92), "/user.slice/user-3000.slice/session-5.scope", "her own login stays in her session");
    assert_eq!(path_of(&w, 93), "/fake/user-3001/default", "sudo -u bob from alice's session");
    assert_eq!(path_of(&w, 10), CRON, "cron itself stays");
    // Not on a systemd host: another manager's cgroup is never left.
    let w2 = world();
    w2.lock().unwrap().spawn(10, 0, CRON, "cron");
    w2.lock().unwrap().fork(10, 80, ALICE);
    let mut d2 = start(&w2, None);
    d2.on_process_events(vec![uid_event(80)]);
    assert_eq!(path_of(&w2, 80), CRON);
}

#[test]
fn lookups_are_budgeted_per_user() {
    let t0 = std::time::Instant::now();
    let mut r = Reach::default();
    let now = (0..1000).filter(|_| r.admit(ALICE, t0)).count();
    assert_eq!(now, BURST as usize);
    assert!(r.admit(BOB, t0), "another user is not held up");
    assert_eq!(r.deferred, 1000 - BURST as u64);
    let later = (0..100).filter(|_| r.admit(ALICE, t0 + Duration::from_secs(1))).count();
    assert_eq!(later, RATE as usize, "a second refills the rate");
}

#[test]
fn a_move_says_how_long_the_kernels_report_waited_and_only_within_its_batch() {
    let mut r = Reach::default();
    let read = Instant::now();
    assert_eq!(r.waited(read), "", "outside a batch of events: nothing to say");
    r.heard = Some((read, read + Duration::from_millis(40)));
    let s = r.waited(read + Duration::from_millis(250));
    assert!(s.contains("250 ms after the kernel's report was read") && s.contains("40 ms of it waiting for the daemon's loop"), "{s}");
    // The daemon forgets the batch once handled: a later scan's move says nothing of it.
    let w = systemd_world();
    let mut d = start(&w, None);
    d.placement_mut().heard(read);
    assert!(d.placement().reach.heard.is_some());
    d.on_process_events(vec![]);
    assert!(d.placement().reach.heard.is_none(), "kept past its batch");
}

#[test]
fn a_cron_job_over_its_users_budget_joins_at_a_tick_not_at_the_next_scan() {
    let w = systemd_world();
    w.lock().unwrap().fork(10, 100, 0);
    become_user(&w, 100, ALICE);
    let mut d = start(&w, None);
    // Alice's lookups are spent (a cron minute of hers just started 50 jobs; well below
    // zero, so no refill during the test gives her one).
    d.placement_mut().reach.budgets.insert(ALICE, (-100.0, Instant::now()));
    d.on_process_events(vec![uid_event(100)]);
    assert_eq!(path_of(&w, 100), CRON, "over budget: not looked up now");
    let ino = w.lock().unwrap().procs[&100].start;
    assert!(d.placement().reach.later.contains_key(&(100, ino)), "kept for the next tick");
    // Still spent at the next tick: it waits on.
    d.due_later();
    assert_eq!(path_of(&w, 100), CRON);
    assert_eq!(d.placement().reach.later.len(), 1);
    // The budget refills: the next tick moves it, with no scan.
    d.placement_mut().reach.budgets.insert(ALICE, (BURST, Instant::now()));
    d.due_later();
    assert_eq!(path_of(&w, 100), ALICE_DEFAULT);
    assert!(d.placement().reach.later.is_empty());
    // A process that exited meanwhile, or whose pid was reused, is dropped, not looked at.
    w.lock().unwrap().fork(10, 101, 0);
    become_user(&w, 101, ALICE);
    d.placement_mut().reach.budgets.insert(ALICE, (0.0, Instant::now()));
    d.on_process_events(vec![uid_event(101)]);
    w.lock().unwrap().procs.remove(&101);
    let before = lookups(&w);
    d.placement_mut().reach.budgets.insert(ALICE, (BURST, Instant::now()));
    d.due_later();
    assert!(d.placement().reach.later.is_empty());
    assert_eq!(lookups(&w), before, "an exited process costs no lookup");
}

#[test]
fn waiting_processes_are_bounded_in_number_and_in_looks() {
    let mut r = Reach::default();
    assert!(r.put_later(1, 7, 1));
    assert!(!r.put_later(1, 7, state::LATER_TRIES), "tried enough: left to the next scan");
    assert!(r.later.is_empty());
    for pid in 0..state::LATER_MAX as i32 {
        assert!(r.put_later(pid, 1, 1));
    }
    assert!(!r.put_later(-1, 1, 1), "past the bound a new one waits for the scan");
    assert!(r.put_later(5, 1, 2), "one already waiting keeps its place");
    assert_eq!(r.later.len(), state::LATER_MAX);
}
