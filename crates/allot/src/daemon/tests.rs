//! The daemon core against a fake kernel (fake.rs): ticks, request sequences, placement
//! and adoption after a crash, without root.

use super::core::Daemon;
use super::fake::{FakeCg, FakeHost, Shared, World, ME};
use super::host::Proc;
use super::trust::Peer;
use crate::config::Config;
use crate::proto::{Request, Response, ShowView};
use std::sync::{Arc, Mutex};

const CFG: &str = "[users]\nmin_uid = 3000\nmax_uid = 60000\n";

pub(super) fn world() -> Shared {
    Arc::new(Mutex::new(World::default()))
}

pub(super) fn start(w: &Shared, state: Option<std::path::PathBuf>) -> Daemon {
    let cfg: Config = toml::from_str(CFG).unwrap();
    Daemon::start(Box::new(FakeCg { w: w.clone() }), Box::new(FakeHost { w: w.clone() }), cfg, state, false).unwrap()
}

pub(super) fn peer(w: &Shared, uid: u32, pid: i32) -> Peer {
    let start = w.lock().unwrap().procs.get(&pid).map_or(0, |p| p.start);
    Peer { uid, gid: uid, groups: vec![], pid, caller: Some(Proc { pid, start, fd: None }) }
}

/// `set PIDS -t T`, with `--background`/`--foreground` and `--force` as given.
pub(super) fn set_req(pids: &[i64], tickets: Option<i64>, background: Option<bool>, force: bool) -> Request {
    let tickets = tickets.map(|t| allot_model::Tickets::new(t).unwrap());
    Request::Set {
        pids: crate::proto::Pids::new(pids.iter().copied()).unwrap(),
        tickets,
        cap: crate::proto::CapChange::Keep,
        background,
        force,
        mem: crate::proto::MemChange::Keep,
        oom_group: None,
    }
}

/// `run [-t T] [--cap C]`.
pub(super) fn run_req(tickets: Option<i64>, cap: Option<&str>) -> Request {
    let (tickets, cap) = (tickets.map(|t| allot_model::Tickets::new(t).unwrap()), cap.map(|c| c.parse().unwrap()));
    Request::Run { tickets, currency: None, cap, background: false, force: false, mem: None, oom_group: false }
}

fn show(d: &mut Daemon, uid: u32) -> ShowView {
    match d.handle(Request::Show { user: None }, &Peer { uid, gid: uid, groups: vec![], pid: 1, caller: None }).unwrap() {
        Response::Show(s) => s,
        r => panic!("{r:?}"),
    }
}

pub(super) fn path_of(w: &Shared, pid: i32) -> String {
    w.lock().unwrap().procs[&pid].path.clone()
}

fn weight(w: &Shared, path: &str) -> u32 {
    w.lock().unwrap().dirs[path].weight
}

fn tmp_state(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("allot-core-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d.join("state.json")
}

#[test]
fn placement_takes_only_what_no_other_manager_owns() {
    let w = world();
    {
        let mut x = w.lock().unwrap();
        x.spawn(100, 3000, "/", "sh");
        x.spawn(101, 0, "/", "sshd");
        x.spawn(102, 3000, "/docker/abc", "container");
        x.spawn(103, 120_000, "/", "subordinate");
        x.spawn(104, 65534, "/", "nobody");
        x.spawn(105, 3000, "/other-allot/user-3000/default", "theirs");
    }
    let mut d = start(&w, None);
    d.scan();
    assert_eq!(path_of(&w, 100), "/fake/user-3000/default");
    for (pid, home) in [(101, "/"), (102, "/docker/abc"), (104, "/"), (105, "/other-allot/user-3000/default")] {
        assert_eq!(path_of(&w, pid), home, "pid {pid} must not be moved");
    }
    let _ = (103, ME);
}

#[test]
fn a_crash_never_turns_an_adjustment_into_a_setting() {
    let w = world();
    let state = tmp_state("crash");
    w.lock().unwrap().spawn(100, 3000, "/", "idle shell");
    w.lock().unwrap().spawn(200, 3001, "/", "allot run");
    let mut d = start(&w, Some(state.clone()));
    d.scan();
    let made = d.handle(run_req(Some(300), Some("0.5")), &peer(&w, 3001, 200));
    assert!(matches!(made, Ok(Response::Job(_))), "{made:?}");
    d.tick();
    d.tick();
    // The idle default job is boosted: weight ×100 in the kernel, 100 tickets as set.
    assert_eq!(weight(&w, "/fake/user-3000/default"), 10_000);
    let key = |s: &ShowView| {
        let mut v: Vec<String> = s.jobs.iter().map(|j| format!("{} {} {:?} {} {}", j.id, j.tickets, j.cap, j.background, j.focus)).collect();
        v.sort();
        v
    };
    let before = key(&show(&mut d, 0));
    assert!(before.iter().any(|k| k.starts_with("3000/default 100 ")), "{before:?}");
    for _ in 0..5 {
        drop(d); // kill -9: nothing is undone
        d = start(&w, Some(state.clone()));
        assert_eq!(key(&show(&mut d, 0)), before, "same tickets, caps, background and focus after a restart");
        assert_eq!(weight(&w, "/fake/user-3000/default"), 100, "the boost's weight was not inherited");
        d.tick();
    }
    // A lost state file loses what it held (the 300 tickets, the cap), never more.
    drop(d);
    std::fs::remove_file(&state).unwrap();
    let mut d = start(&w, Some(state.clone()));
    let after = show(&mut d, 0);
    assert!(after.jobs.iter().any(|j| j.pids.as_deref() == Some(&[200][..])), "the run job is adopted");
    assert!(after.jobs.iter().all(|j| j.tickets == 100 && j.cap.is_none()), "{:?}", key(&after));
    std::fs::remove_dir_all(state.parent().unwrap()).unwrap();
}

#[test]
fn every_operation_on_a_process_goes_through_one_owner_check() {
    let w = world();
    {
        let mut x = w.lock().unwrap();
        x.spawn(100, 3000, "/", "mine");
        x.spawn(101, 3001, "/", "theirs");
        x.spawn(102, 0, "/", "root's");
        x.spawn(103, 3000, "/", "setuid");
        x.procs.get_mut(&103).unwrap().uids = [3000, 0, 0, 0];
        x.spawn(104, 3000, "/system.slice/cron.service", "in a service");
        x.spawn(105, 0, "/", "[kthreadd]");
        x.procs.get_mut(&105).unwrap().kernel = true;
        x.spawn(106, 3000, "/", "zombie");
        x.procs.get_mut(&106).unwrap().zombie = true;
        x.spawn(1, 0, "/", "init");
        x.spawn(ME, 0, "/", "allot daemon");
    }
    let mut d = start(&w, None);
    d.scan();
    let a = peer(&w, 3000, 100);
    let set = |pid: i64| set_req(&[pid], Some(5), None, false);
    let refused = |d: &mut Daemon, p: &Peer, r: Request, needle: &str| {
        let e = d.handle(r, p).unwrap_err();
        assert!(e.message.contains(needle), "{e:?} should say {needle:?}");
        // A process that is not there is not found; every other refusal here is the
        // caller's rights.
        let kind = if needle.starts_with("no process") || needle == "zombie" {
            crate::proto::ErrorKind::NotFound
        } else {
            crate::proto::ErrorKind::NotPermitted
        };
        assert_eq!(e.kind, kind, "{e:?}");
    };
    refused(&mut d, &a, set(101), "belongs to");
    refused(&mut d, &a, set(102), "belongs to");
    refused(&mut d, &a, set(103), "not wholly yours");
    refused(&mut d, &a, set(104), "another manager owns");
    refused(&mut d, &a, set(105), "kernel thread");
    refused(&mut d, &a, set(106), "zombie");
    refused(&mut d, &a, set(1), "init");
    refused(&mut d, &a, set(ME as i64), "the allot daemon itself");
    refused(&mut d, &a, set(99999), "no process 99999");
    // A pid that cannot be a process never reaches the daemon: the decoder refuses it.
    assert!(crate::proto::Pids::new(vec![-3]).unwrap_err().contains("not a process id"));
    refused(&mut d, &a, Request::Focus { pid: crate::proto::Pid::new(101).unwrap(), on: true }, "belongs to");
    refused(&mut d, &a, Request::Move { pid: crate::proto::Pid::new(100).unwrap(), currency: "3001".into(), force: false }, "root's");
    // Root may act on anyone's process but pid 1 and the daemon, and takes a process out of
    // another manager's cgroup only when forced.
    let root = peer(&w, 0, 102);
    refused(&mut d, &root, set(1), "init");
    refused(&mut d, &root, set(104), "unless you add --force");
    assert!(d.handle(set_req(&[104], Some(5), None, true), &root).is_ok());
    // A job of root's that holds a user's process is root's to change.
    assert!(d.handle(Request::Move { pid: crate::proto::Pid::new(100).unwrap(), currency: "0".into(), force: false }, &root).is_ok());
    refused(&mut d, &a, set(100), "which you (uid 3000) may not use");
    refused(&mut d, &a, Request::Focus { pid: crate::proto::Pid::new(100).unwrap(), on: true }, "may not use");
}

#[test]
fn a_multi_pid_set_is_all_or_nothing() {
    let w = world();
    {
        let mut x = w.lock().unwrap();
        x.spawn(100, 3000, "/", "a");
        x.spawn(101, 3000, "/", "b");
        x.spawn(102, 3001, "/", "not hers");
    }
    let mut d = start(&w, None);
    d.scan();
    let a = peer(&w, 3000, 100);
    let before = show(&mut d, 0).jobs;
    assert!(d.handle(set_req(&[100, 101, 102], Some(7), None, false), &a).is_err());
    assert_eq!(show(&mut d, 0).jobs, before, "nothing changed");
    assert_eq!(path_of(&w, 100), "/fake/user-3000/default");
    // Both hers: both get jobs of their own with 7 tickets.
    let r = d.handle(set_req(&[100, 101], Some(7), Some(true), false), &a).unwrap();
    let Response::Changed(c) = r else { panic!() };
    assert_eq!(c.jobs.len(), 2);
    assert!(path_of(&w, 100).starts_with("/fake-background/user-3000/j"));
    assert!(show(&mut d, 3000).jobs.iter().filter(|j| j.tickets == 7 && j.background).count() == 2);
}

#[test]
fn show_hides_other_users_pids_and_commands() {
    let w = world();
    {
        let mut x = w.lock().unwrap();
        x.spawn(100, 3000, "/", "mysql --password=hunter2");
        x.spawn(101, 3001, "/", "\x1b]0;pwned\x07 editor");
    }
    let mut d = start(&w, None);
    d.scan();
    let s = show(&mut d, 3001);
    assert!(s.hidden);
    let theirs = s.jobs.iter().find(|j| j.uid == 3000).unwrap();
    assert!(theirs.pids.is_none() && theirs.command.is_none(), "{theirs:?}");
    let mine = s.jobs.iter().find(|j| j.uid == 3001).unwrap();
    assert_eq!(mine.pids.as_deref(), Some(&[101][..]));
    assert!(mine.command.as_deref().unwrap().contains("editor"), "the command as the kernel has it");
    let all = show(&mut d, 0);
    assert!(!all.hidden && all.jobs.iter().all(|j| j.pids.is_some()));
}

#[test]
fn a_process_that_changes_user_is_placed_again() {
    let w = world();
    w.lock().unwrap().spawn(100, 3000, "/", "su");
    w.lock().unwrap().spawn(101, 3000, "/", "sudo");
    let mut d = start(&w, None);
    d.scan();
    assert_eq!(path_of(&w, 100), "/fake/user-3000/default");
    {
        let mut x = w.lock().unwrap();
        x.procs.get_mut(&100).unwrap().uids = [3001; 4];
        x.procs.get_mut(&101).unwrap().uids = [0; 4];
    }
    // The new user may not change it while it sits in the old user's job.
    let b = peer(&w, 3001, 100);
    let e = d.handle(set_req(&[100], Some(9), None, false), &b).unwrap_err();
    assert!(e.message.contains("only its owner or root"), "{e}");
    d.scan();
    assert_eq!(path_of(&w, 100), "/fake/user-3001/default", "into the new user's currency");
    assert_eq!(path_of(&w, 101), "/", "root's: out of allot");
    assert!(d.handle(set_req(&[100], Some(9), None, false), &b).is_ok());
}

#[test]
fn a_removed_job_directory_is_recreated_and_its_processes_put_back() {
    let w = world();
    w.lock().unwrap().spawn(100, 3000, "/", "job");
    let mut d = start(&w, None);
    d.scan();
    let r = d.handle(set_req(&[100], Some(300), None, false), &peer(&w, 3000, 100)).unwrap();
    let Response::Changed(_) = r else { panic!() };
    d.tick();
    let job = path_of(&w, 100);
    {
        let mut x = w.lock().unwrap();
        x.procs.get_mut(&100).unwrap().path = "/".into();
        x.dirs.remove(&job);
    }
    // inotify reports the removal (IN_DELETE_SELF); without it the next scan notices.
    d.scan();
    d.tick();
    assert_eq!(path_of(&w, 100), job);
    assert_eq!(d.counters().reconciled, 1);
    let s = show(&mut d, 3000);
    assert_eq!(s.jobs.iter().find(|j| j.pids.as_deref() == Some(&[100][..])).unwrap().tickets, 300);
}

#[test]
fn a_new_job_is_planned_at_once_and_the_boost_never_writes_a_quota() {
    let w = world();
    w.lock().unwrap().spawn(100, 3000, "/", "allot run");
    let mut d = start(&w, None);
    let r = d.handle(run_req(Some(50), None), &peer(&w, 3000, 100)).unwrap();
    let Response::Job(j) = r else { panic!() };
    let dir = format!("/fake/{}", j.cgroup);
    let x = w.lock().unwrap();
    assert_eq!(x.dirs[&dir].weight, 5000, "boosted from the start: it has used nothing (Petrou et al. 1999 §3.3, f = 0)");
    assert_eq!(x.dirs[&dir].max, None, "no quota: programs see every CPU");
    assert_eq!(x.slices.get(&100), None, "weight only by default: no slice is set");
}

#[test]
fn a_configured_boost_slice_is_set_on_a_boosted_job_s_tasks() {
    let w = world();
    w.lock().unwrap().spawn(100, 3000, "/", "allot run");
    let mut d = start(&w, None);
    d.cfg_mut().policy.boost_slice_us = 100;
    // The fake kernel honours custom slices whatever this one does, or whatever policy the
    // test runs under (the probe reads its own thread: a SCHED_IDLE one reads "no").
    d.features_mut().custom_slices = true;
    let r = d.handle(run_req(Some(50), None), &peer(&w, 3000, 100)).unwrap();
    let Response::Job(_) = r else { panic!() };
    assert_eq!(w.lock().unwrap().slices.get(&100), Some(&100_000), "the boost slice");
}

/// The kernel copies a custom slice at fork: a boosted job's children start with the boost
/// slice. Given back when the boost ends, it must become the kernel's default, never stay
/// as if it were their own (an adjustment turned into a setting).
#[test]
fn an_inherited_boost_slice_is_given_back_as_the_default() {
    let w = world();
    w.lock().unwrap().spawn(100, 3000, "/", "allot run");
    let mut d = start(&w, None);
    d.cfg_mut().policy.boost_slice_us = 100;
    // The fake kernel honours custom slices whatever this one does, or whatever policy the
    // test runs under (the probe reads its own thread: a SCHED_IDLE one reads "no").
    d.features_mut().custom_slices = true;
    let Response::Job(_) = d.handle(run_req(None, None), &peer(&w, 3000, 100)).unwrap() else { panic!() };
    let job = path_of(&w, 100);
    let slice = |t: i32| w.lock().unwrap().slices.get(&t).copied();
    assert_eq!(slice(100), Some(100_000), "boosted");
    // Another user's process outside allot that happens to run with the same slice: never
    // in the job's list, never touched.
    {
        let mut x = w.lock().unwrap();
        x.spawn(900, 4000, "/system.slice/other.service", "a stranger");
        x.slices.insert(900, 100_000);
    }
    // A child, forked while boosted, listed while boosted.
    {
        let mut x = w.lock().unwrap();
        x.spawn(101, 3000, &job, "child");
        x.slices.insert(101, 100_000);
    }
    let t0 = std::time::Instant::now();
    // Ticks 100 ms apart from `from` to `to`, the job using `cpus` meanwhile.
    let run = |d: &mut Daemon, from: u32, to: u32, cpus: f64| {
        for k in from..to {
            w.lock().unwrap().dirs.get_mut(&job).unwrap().usage_ns += (cpus * 1e8) as u64;
            d.tick_at(t0 + std::time::Duration::from_millis(100) * k);
        }
    };
    run(&mut d, 0, 2, 0.01);
    assert_eq!(slice(101), Some(100_000), "still boosted");
    // It uses a whole CPU for 2 s: the boost ends.
    run(&mut d, 2, 20, 1.0);
    assert_eq!(slice(100), Some(3_000_000), "the parent's own slice, given back");
    assert_eq!(slice(101), Some(0), "the child's inherited boost: the default, not 100 µs");
    // A child of a thread boosted before this daemon (or forked after the last list) that
    // allot never saw boosted: listed now, it is given the default too.
    {
        let mut x = w.lock().unwrap();
        x.spawn(102, 3000, &job, "grandchild");
        x.slices.insert(102, 100_000);
    }
    run(&mut d, 20, 22, 1.0);
    assert_eq!(slice(102), Some(0));
    assert_eq!(slice(900), Some(100_000), "a process outside the job keeps its own slice");
    assert_eq!(slice(100), Some(3_000_000), "a slice of its own is left alone");
}

#[test]
fn a_large_busy_job_is_listed_as_often_as_its_size_allows_and_a_small_one_every_tick() {
    let w = world();
    {
        let mut x = w.lock().unwrap();
        x.spawn(100, 3000, "/", "a build of 1000 threads");
        x.procs.get_mut(&100).unwrap().threads = std::iter::once(100).chain(20_000..20_999).collect();
        x.spawn(9000, 3001, "/", "an editor");
    }
    let mut d = start(&w, None);
    d.scan();
    let (big, small) = (path_of(&w, 100), path_of(&w, 9000));
    assert!(big.ends_with("user-3000/default") && small.ends_with("user-3001/default"), "{big} {small}");
    // Both run through every tick of 2 s (100 ms apart): both counters move each time.
    let t0 = std::time::Instant::now();
    let lists = |w: &Shared, p: &str| w.lock().unwrap().lists.get(p).copied().unwrap_or(0);
    let before = (lists(&w, &big), lists(&w, &small));
    for k in 0..20u32 {
        {
            let mut x = w.lock().unwrap();
            for p in [&big, &small] {
                x.dirs.get_mut(p.as_str()).unwrap().usage_ns += 50_000_000;
            }
        }
        d.tick_at(t0 + std::time::Duration::from_millis(100) * k);
    }
    let big_lists = lists(&w, &big) - before.0;
    let small_lists = lists(&w, &small) - before.1;
    // 1000 threads: one list a second at most (1 ms per thread): at 0 and at 1 s.
    assert_eq!(big_lists, 2, "the large job was listed {big_lists} times in 20 ticks");
    assert_eq!(small_lists, 20, "a job of one thread is listed at every tick its counter moved");
    // A process moved in makes it due again only once its gap has passed: still listed.
    w.lock().unwrap().spawn(101, 3000, "/", "one more");
    d.on_process(101, false);
    assert_eq!(path_of(&w, 101), big, "placed at once, whatever the job's size");
    d.tick_at(t0 + std::time::Duration::from_millis(1950));
    assert_eq!(lists(&w, &big) - before.0, big_lists, "not listed again before its gap");
    d.tick_at(t0 + std::time::Duration::from_millis(2050));
    assert_eq!(lists(&w, &big) - before.0, big_lists + 1, "listed once its gap has passed, though its counter stood still");
}

fn start_with(w: &Shared, text: &str) -> Daemon {
    let path = std::env::temp_dir().join(format!("allot-unit-{}-{:?}.toml", std::process::id(), std::thread::current().id()));
    std::fs::write(&path, format!("{CFG}{text}")).unwrap();
    let cfg = Config::load(&path, true).unwrap();
    let _ = std::fs::remove_file(&path);
    Daemon::start(Box::new(FakeCg { w: w.clone() }), Box::new(FakeHost { w: w.clone() }), cfg, None, false).unwrap()
}

fn job_of(d: &mut Daemon, pid: i32) -> crate::proto::JobView {
    show(d, 0).jobs.into_iter().find(|j| j.pids.as_deref().is_some_and(|p| p.contains(&pid))).unwrap_or_else(|| panic!("pid {pid} in no job"))
}

/// A process changes user and forks before the daemon hears of it: its children and
/// grandchildren of the new user go with it; a child forked before the change stays.
#[test]
fn descendants_forked_after_a_user_change_go_with_their_parent() {
    let w = world();
    w.lock().unwrap().spawn(100, 3000, "/", "su");
    let mut d = start(&w, None);
    d.scan();
    assert_eq!(path_of(&w, 100), "/fake/user-3000/default");
    {
        let mut x = w.lock().unwrap();
        x.fork(100, 104, 3000);
        x.procs.get_mut(&100).unwrap().uids = [3001; 4];
        x.fork(100, 101, 3001);
        x.fork(100, 102, 3001);
        x.fork(101, 103, 3001);
    }
    d.on_process(100, false);
    for pid in [100, 101, 102, 103] {
        assert_eq!(path_of(&w, pid), "/fake/user-3001/default", "pid {pid}: the new user's, with its parent");
    }
    assert_eq!(path_of(&w, 104), "/fake/user-3000/default", "forked before the change: still the old user's");
    // And out of allot when the new user is root's.
    {
        let mut x = w.lock().unwrap();
        x.procs.get_mut(&102).unwrap().uids = [0; 4];
        x.fork(102, 105, 0);
    }
    d.on_process(102, false);
    assert_eq!((path_of(&w, 102), path_of(&w, 105)), ("/".into(), "/".into()));
}

/// A rule's currency is the admin's default for what a process looks like, and its name
/// is its user's to choose: a user who may not use the currency gets the rule's job in
/// their own currency, at placement and at exec.
#[test]
fn a_rule_never_grants_a_currency_its_user_may_not_use() {
    let w = world();
    {
        let mut x = w.lock().unwrap();
        x.spawn(100, 3000, "/", "cc1sh");
        x.spawn(101, 3001, "/", "cc1sh");
        x.spawn(102, 3000, "/", "sh");
    }
    let rules = "[currencies.adv]\nusers = [\"3001\"]\n[[rules]]\nname = \"builds\"\ncomm = \"cc1*\"\ncurrency = \"adv\"\ntickets = 500\n";
    let mut d = start_with(&w, rules);
    d.scan();
    let (theirs, rightful) = (job_of(&mut d, 100), job_of(&mut d, 101));
    assert_eq!((theirs.currency.as_str(), theirs.tickets), ("3000", 500), "{theirs:?}");
    assert_eq!((rightful.currency.as_str(), rightful.tickets), ("adv", 500), "{rightful:?}");
    // A shell that execs into the renamed program: the same.
    w.lock().unwrap().procs.get_mut(&102).unwrap().cmdline = "cc1sh x".into();
    d.on_process(102, true);
    assert_eq!(job_of(&mut d, 102).id, theirs.id);
    // `rules test` says so.
    let Ok(Response::Rules(r)) = d.rules_test(&peer(&w, 3000, 100), crate::proto::Pid::new(100).unwrap()) else { panic!() };
    assert!(r.matched.as_deref().is_some_and(|m| m.contains("may not use")), "{r:?}");
}

/// A thread group whose leader exited while its threads run is a live process: placed,
/// and changeable by root. One with no thread left is left alone.
#[test]
fn a_group_whose_leader_exited_is_placed_while_its_threads_run() {
    let w = world();
    {
        let mut x = w.lock().unwrap();
        x.spawn(100, 3000, "/", "leader gone");
        let p = x.procs.get_mut(&100).unwrap();
        (p.leader_exited, p.threads) = (true, vec![100, 150]);
        x.spawn(101, 3000, "/", "all gone");
        let p = x.procs.get_mut(&101).unwrap();
        (p.leader_exited, p.threads) = (true, vec![101]);
    }
    let mut d = start(&w, None);
    d.scan();
    assert_eq!(path_of(&w, 100), "/fake/user-3000/default");
    assert_eq!(path_of(&w, 101), "/", "no thread lives: nothing to place");
    let root = Peer { uid: 0, gid: 0, groups: vec![], pid: 1, caller: None };
    assert!(d.handle(set_req(&[100], Some(42), None, false), &root).is_ok());
    assert_eq!(job_of(&mut d, 100).tickets, 42);
}

/// A currency with no jobs used no CPU: its usage is +0, never -0.0 (a sum of no `f64`),
/// which `fund`, `top`, the metrics and the JSON printed as "-0.00", "-0" or "-0.0".
#[test]
fn a_currency_without_jobs_reports_zero_usage_not_negative_zero() {
    let w = world();
    let mut d = start_with(&w, "[currencies.ci]\nusers = [\"3001\"]\n");
    d.tick();
    let s = show(&mut d, 0);
    let ci = s.currencies.iter().find(|c| c.name == "ci").expect("the named currency is shown");
    assert!(ci.jobs == 0 && ci.usage == 0.0 && ci.usage.is_sign_positive(), "{ci:?}");
    let json = serde_json::to_string(&s).unwrap();
    assert!(!json.contains("-0"), "{json}");
}

/// The daemon refuses a cap above the machine with the CLI's message (other clients speak
/// the protocol directly): the value, the CPU count and the forms, not "give at most 2!".
#[test]
fn a_cap_above_the_machine_is_refused_with_the_value_the_cpus_and_the_forms() {
    let w = world();
    w.lock().unwrap().spawn(200, 3001, "/", "allot run");
    let mut d = start(&w, None);
    d.set_ncpu(2);
    let r = d.handle(run_req(None, Some("3")), &peer(&w, 3001, 200));
    let e = format!("{:?}", r.unwrap_err());
    assert!(e.contains("cap \\\"3\\\" is more than this machine's 2 CPUs: give at most 2 CPUs") && e.contains("1/2") && e.contains("50%"), "{e}");
}

/// `set` on a process in a login session takes it out of the session's scope for good:
/// the reply says so (logout no longer ends it); a process already in a job gets no warning.
#[test]
fn set_on_a_session_process_warns_that_it_left_its_session() {
    let w = world();
    w.lock().unwrap().spawn(300, 3001, "/user.slice/user-3001.slice/session-4.scope", "vim");
    let mut d = start(&w, None);
    let set = || set_req(&[300], Some(50), None, false);
    let Ok(Response::Changed(c)) = d.handle(set(), &peer(&w, 3001, 300)) else { panic!("set refused") };
    assert_eq!(c.warnings.len(), 1, "{c:?}");
    let msg = &c.warnings[0];
    assert!(msg.contains("process 300 left its login session (session-4.scope)") && msg.contains(&format!("job {}", c.jobs[0])), "{msg}");
    assert!(msg.contains("logging out") && msg.contains("no longer ends it"), "{msg}");
    assert!(!path_of(&w, 300).contains("session-4.scope"), "it was moved into its job");
    let Ok(Response::Changed(again)) = d.handle(set(), &peer(&w, 3001, 300)) else { panic!("second set refused") };
    assert!(again.warnings.is_empty(), "{again:?}");
}

/// `explain` renders the plan's reason and the model's thresholds, never its own copy of
/// them: the numbers in its words are formatted from allot_model's constants.
#[test]
fn explain_renders_the_plan_s_reason_with_the_model_s_thresholds() {
    use allot_model::plan::{Boost, BOOST_LAST_TICK_BELOW};
    let w = world();
    w.lock().unwrap().spawn(100, 3000, "/", "allot run");
    let mut d = start(&w, None);
    d.set_ncpu(1);
    let Ok(Response::Job(made)) = d.handle(run_req(None, None), &peer(&w, 3000, 100)) else { panic!("run refused") };
    let dir = path_of(&w, 100);
    let explain = |d: &Daemon| match d.explain(&peer(&w, 3000, 100), &made.job) {
        Ok(Response::Explain(x)) => x,
        r => panic!("{r:?}"),
    };
    let boost = |d: &Daemon| explain(d).reasons.into_iter().find(|r| r.state == "boost").unwrap();
    assert!(boost(&d).because.starts_with("new"), "{:?}", boost(&d));
    let t0 = std::time::Instant::now();
    // It uses the whole CPU through 2 s of ticks: CPU-bound in the last tick.
    for k in 0..20u32 {
        w.lock().unwrap().dirs.get_mut(&dir).unwrap().usage_ns += 100_000_000;
        d.tick_at(t0 + std::time::Duration::from_millis(100) * k);
    }
    let id = d.desired().jobs.values().find(|j| d.show_id(j) == made.job).unwrap().id;
    assert_eq!(d.planned().jobs[&id].boost, Boost::CpuBound);
    let b = boost(&d);
    assert!(!b.on, "{b:?}");
    let ent = d.planned().jobs[&id].boost_limits.entitlement;
    assert!(b.because.contains(&format!("at least {BOOST_LAST_TICK_BELOW} × its entitlement {ent:.3}")), "{b:?}");
    // Then it uses 3% of it: interactive, below both limits, named from the plan.
    for k in 20..40u32 {
        w.lock().unwrap().dirs.get_mut(&dir).unwrap().usage_ns += 3_000_000;
        d.tick_at(t0 + std::time::Duration::from_millis(100) * k);
    }
    let x = explain(&d);
    let b = x.reasons.iter().find(|r| r.state == "boost").unwrap();
    assert!(b.on && b.because.starts_with("interactive"), "{b:?}");
    assert!(b.because.contains(&format!("(below {BOOST_LAST_TICK_BELOW} × ")), "{b:?}");
    assert_eq!(x.threshold, d.planned().jobs[&id].boost_limits.window, "the plan's threshold, not a recomputed one");
    // Niced to 19: the bound nice emulation put on its base tickets, in the model's numbers.
    w.lock().unwrap().procs.get_mut(&100).unwrap().nice = 19;
    for k in 40..45u32 {
        w.lock().unwrap().dirs.get_mut(&dir).unwrap().usage_ns += 3_000_000;
        d.tick_at(t0 + std::time::Duration::from_millis(100) * k);
    }
    let n = explain(&d).reasons.into_iter().find(|r| r.state == "nice").unwrap();
    let bound = allot_model::nice::base_ticket_threshold(19);
    assert!(n.on && n.because.contains(&format!("it holds at most {bound:.1} base tickets")), "{n:?}");
}
