//! Login-session processes against the fake kernel: rules per task, the boost slice, the
//! plan's session claimants, and the hostile cases (another user's pid, a recycled pid, a
//! process that exits between decision and write, a name that is not UTF-8).

use super::super::core::Daemon;
use super::super::fake::{FakeCg, FakeHost, Shared, World};
use super::super::tests::peer;
use super::ScopeSample;
use crate::config::Config;
use crate::proto::{Request, Response};
use allot_linux::process::sched::SCHED_IDLE;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const S4: &str = "/user.slice/user-3001.slice/session-4.scope";
const S9: &str = "/user.slice/user-3002.slice/session-9.scope";
const RULES: &str = "[users]\nmin_uid = 3000\nmax_uid = 60000\n[[rules]]\nname = \"bg\"\ncomm = \"hog*\"\nbackground = true\n[[rules]]\nname = \"low\"\ncomm = \"batch\"\ntickets = 10\n";

fn start(w: &Shared) -> Daemon {
    let path = std::env::temp_dir().join(format!("allot-sessions-{}-{:?}.toml", std::process::id(), std::thread::current().id()));
    std::fs::write(&path, RULES).unwrap();
    let cfg = Config::load(&path, true).unwrap();
    let _ = std::fs::remove_file(&path);
    let mut d = Daemon::start(Box::new(FakeCg { w: w.clone() }), Box::new(FakeHost { w: w.clone() }), cfg, None, false).unwrap();
    d.features_mut().custom_slices = true;
    d.set_ncpu(2);
    d
}

fn world() -> Shared {
    Arc::new(Mutex::new(World::default()))
}

fn policy(w: &Shared, tid: i32) -> Option<(u32, i32)> {
    w.lock().unwrap().policies.get(&tid).copied()
}

fn explain(d: &mut Daemon, uid: u32, pid: i32, asker: i32) -> Result<crate::proto::ExplainView, String> {
    match d
        .handle(Request::Explain { target: pid.to_string() }, &super::super::trust::Peer { uid, gid: uid, groups: vec![], pid: asker, caller: None })
    {
        Ok(Response::Explain(e)) => Ok(e),
        Ok(r) => panic!("{r:?}"),
        Err(e) => Err(e.to_string()),
    }
}

#[test]
fn a_background_rule_makes_a_session_process_sched_idle_in_place_and_gives_it_back() {
    let w = world();
    w.lock().unwrap().spawn(300, 3001, S4, "hog --spin");
    let mut d = start(&w);
    d.scan();
    assert_eq!(w.lock().unwrap().procs[&300].path, S4, "it stays in its session");
    assert_eq!(policy(&w, 300), Some((SCHED_IDLE, 0)));
    let e = explain(&mut d, 3001, 300, 300).unwrap();
    let bg = e.reasons.iter().find(|r| r.state == "background").expect("a background reason");
    assert!(bg.on && bg.because.contains("rule bg") && bg.because.contains("SCHED_IDLE"), "{bg:?}");
    assert!(e.job.contains("session-4.scope"), "{}", e.job);
    // It exec's something no rule matches: its own policy back.
    w.lock().unwrap().procs.get_mut(&300).unwrap().cmdline = "vim".into();
    d.on_process(300, true);
    assert_eq!(policy(&w, 300), Some((0, 0)));
    // Matched again, then the daemon stops: given back.
    w.lock().unwrap().procs.get_mut(&300).unwrap().cmdline = "hog".into();
    d.on_process(300, true);
    assert_eq!(policy(&w, 300), Some((SCHED_IDLE, 0)));
    d.undo_dynamic();
    assert_eq!(policy(&w, 300), Some((0, 0)));
}

#[test]
fn a_tickets_rule_is_a_nice_and_the_old_nice_comes_back() {
    let w = world();
    w.lock().unwrap().spawn(310, 3001, S4, "batch");
    w.lock().unwrap().procs.get_mut(&310).unwrap().nice = 3;
    let mut d = start(&w);
    d.scan();
    assert_eq!(policy(&w, 310), Some((0, 10)), "10 tickets: nice 10");
    d.undo_dynamic();
    assert_eq!(policy(&w, 310), Some((0, 3)));
}

#[test]
fn a_user_changed_by_hand_is_kept_at_release() {
    let w = world();
    w.lock().unwrap().spawn(320, 3001, S4, "hog");
    let mut d = start(&w);
    d.scan();
    // Its user made it nice 5 (still idle): not what allot set, so left as they made it.
    w.lock().unwrap().policies.insert(320, (SCHED_IDLE, 5));
    d.undo_dynamic();
    assert_eq!(policy(&w, 320), Some((SCHED_IDLE, 5)));
}

#[test]
fn hostile_another_users_session_process_is_not_explained_to_them_nor_changed_by_setuid() {
    let w = world();
    w.lock().unwrap().spawn(330, 3001, S4, "hog");
    w.lock().unwrap().spawn(331, 3002, S9, "sh");
    // A setuid process in a session (uids not all one user's): no rule reaches it.
    w.lock().unwrap().spawn(332, 3002, S9, "hog");
    w.lock().unwrap().procs.get_mut(&332).unwrap().uids = [3002, 0, 0, 0];
    let mut d = start(&w);
    d.scan();
    let e = explain(&mut d, 3002, 330, 331).unwrap_err();
    assert!(e.contains("not yours") && e.contains("uid 3001"), "{e}");
    assert!(explain(&mut d, 3001, 330, 330).is_ok());
    assert_eq!(policy(&w, 332), None, "a setuid process is never written");
    // `set` by another user is refused as before.
    let r = d.handle(
        Request::Set {
            pids: crate::proto::Pids::new(vec![330]).unwrap(),
            tickets: allot_model::Tickets::new(5).ok(),
            cap: crate::proto::CapChange::Keep,
            background: None,
            force: false,
            mem: crate::proto::MemChange::Keep,
            oom_group: None,
        },
        &peer(&w, 3002, 331),
    );
    assert!(r.is_err(), "{r:?}");
}

#[test]
fn hostile_a_recycled_pid_is_never_written_as_the_old_process() {
    let w = world();
    w.lock().unwrap().spawn(340, 3001, S4, "hog");
    let mut d = start(&w);
    d.scan();
    assert_eq!(policy(&w, 340), Some((SCHED_IDLE, 0)));
    // It exits; another process (another user's) takes pid 340.
    {
        let mut x = w.lock().unwrap();
        x.procs.remove(&340);
        x.policies.remove(&340);
        x.spawn(340, 3002, S9, "sh");
    }
    d.undo_dynamic();
    assert_eq!(policy(&w, 340), None, "the new pid 340 was never written");
    d.scan();
    assert_eq!(policy(&w, 340), None);
}

#[test]
fn hostile_a_process_that_exits_between_decision_and_write_leaves_nothing() {
    let w = world();
    w.lock().unwrap().spawn(350, 3001, S4, "hog");
    w.lock().unwrap().exit_on_write = Some(350);
    let mut d = start(&w);
    d.scan();
    assert!(!w.lock().unwrap().procs.contains_key(&350));
    assert_eq!(policy(&w, 350), None);
    assert_eq!(d.sessions().rule_of(350, 1), None, "nothing kept for a process that is gone");
    d.undo_dynamic();
}

#[test]
fn hostile_a_name_that_is_not_utf8_still_meets_the_rules() {
    let w = world();
    // /proc text is read lossily: bytes 0xff 0xfe after "hog" arrive as U+FFFD.
    let name = String::from_utf8_lossy(b"hog\xff\xfe").into_owned();
    w.lock().unwrap().spawn(360, 3001, S4, &name);
    let mut d = start(&w);
    d.scan();
    assert_eq!(policy(&w, 360), Some((SCHED_IDLE, 0)));
}

fn sample(uid: u32, name: &str, usage_ns: u64, threads: &[i32]) -> ScopeSample {
    ScopeSample { uid, name: name.into(), usage_ns, threads: Some(threads.to_vec()), ..Default::default() }
}

#[test]
fn session_load_is_a_claimant_and_its_threads_are_boosted_against_their_users_share() {
    let w = world();
    {
        let mut x = w.lock().unwrap();
        x.spawn(400, 3001, S4, "probe");
        x.spawn(401, 3001, S4, "spin");
        x.spawn(402, 3002, S9, "spin");
    }
    let mut d = start(&w);
    let t0 = Instant::now();
    let dt = Duration::from_millis(100);
    // Three ticks: the probe uses 5 ms a tick, each spinner 100 ms (a whole CPU).
    for k in 0..3u64 {
        {
            let mut x = w.lock().unwrap();
            x.runs.insert(400, (k * 5_000_000, 0));
            x.runs.insert(401, (k * 100_000_000, k * 20_000_000));
            x.runs.insert(402, (k * 100_000_000, 0));
        }
        let now = t0 + dt * k as u32;
        d.observe_session_samples(
            vec![sample(3001, "session-4.scope", k * 105_000_000, &[400, 401]), sample(3002, "session-9.scope", k * 100_000_000, &[402])],
            now,
        );
        d.replan();
    }
    let ent = |d: &Daemon, uid| d.sessions().planned[&uid].entitlement;
    assert!((ent(&d, 3001) - 1.0).abs() < 1e-6 && (ent(&d, 3002) - 1.0).abs() < 1e-6, "{:?}", d.sessions().planned);
    let slices = w.lock().unwrap().slices.clone();
    assert_eq!(slices.get(&400), Some(&super::SESSION_BOOST_SLICE_NS), "the probe is boosted: {slices:?}");
    assert_eq!(slices.get(&401), Some(&3_000_000), "the spinner is CPU-bound against its user's share: its own slice (boosted only while new)");
    let e = explain(&mut d, 3001, 400, 400).unwrap();
    let b = e.reasons.iter().find(|r| r.state == "boost").unwrap();
    assert!(b.on && b.because.contains("interactive") && b.because.contains("100 µs EEVDF slice"), "{b:?}");
    assert!((e.entitlement - 1.0).abs() < 1e-6, "judged against its user's share: {}", e.entitlement);
    // The probe turns into a hog: its own slice back.
    w.lock().unwrap().runs.insert(400, (10_000_000 + 100_000_000, 0));
    d.observe_session_samples(
        vec![sample(3001, "session-4.scope", 410_000_000, &[400, 401]), sample(3002, "session-9.scope", 300_000_000, &[402])],
        t0 + dt * 3,
    );
    d.replan();
    assert_eq!(w.lock().unwrap().slices.get(&400), Some(&3_000_000), "its own slice back");
    // Busy sessions count as load that is not outside allot: sessions_ns moves with them.
    assert_eq!(d.sessions().used_ns, 410_000_000 + 300_000_000);
    // A session whose usage did not move is not read: its threads used nothing.
    d.observe_session_samples(
        vec![
            ScopeSample { uid: 3001, name: "session-4.scope".into(), usage_ns: 410_000_000, threads: None, ..Default::default() },
            sample(3002, "session-9.scope", 400_000_000, &[402]),
        ],
        t0 + dt * 4,
    );
    assert_eq!(d.sessions().tasks[&400].usage.map(|u| u.last), Some(0.0));
    assert_eq!(d.sessions().claims().iter().map(|c| c.0).collect::<Vec<_>>(), [3001, 3002], "3001's window still shows its use");
}

#[test]
fn hostile_a_reused_thread_id_gets_no_slice_meant_for_the_old_one() {
    let w = world();
    w.lock().unwrap().spawn(410, 3001, S4, "probe");
    let mut d = start(&w);
    let t0 = Instant::now();
    for k in 0..2u32 {
        d.observe_session_samples(vec![sample(3001, "session-4.scope", 0, &[410])], t0 + Duration::from_millis(100) * k);
        d.replan();
    }
    assert_eq!(w.lock().unwrap().slices.get(&410), Some(&super::SESSION_BOOST_SLICE_NS), "asleep: boosted");
    // It exits; a new process takes the id and sets its own 7 ms slice.
    {
        let mut x = w.lock().unwrap();
        x.procs.remove(&410);
        x.spawn(410, 3002, S9, "other");
        x.slices.insert(410, 7_000_000);
    }
    d.undo_dynamic();
    assert_eq!(w.lock().unwrap().slices.get(&410), Some(&7_000_000), "the new task keeps its own slice");
}

#[test]
fn a_rule_removed_at_reload_gives_the_process_back_its_policy() {
    let w = world();
    w.lock().unwrap().spawn(370, 3001, S4, "hog");
    let mut d = start(&w);
    d.scan();
    assert_eq!(policy(&w, 370), Some((SCHED_IDLE, 0)));
    d.set_cfg(toml::from_str("[users]\nmin_uid = 3000\nmax_uid = 60000\n").unwrap());
    d.recheck_session_rules();
    assert_eq!(policy(&w, 370), Some((0, 0)));
}

#[test]
fn a_boosted_thread_that_leaves_its_session_gets_its_own_slice_back() {
    let w = world();
    w.lock().unwrap().spawn(420, 3001, S4, "probe");
    let mut d = start(&w);
    let t0 = Instant::now();
    for k in 0..2u32 {
        d.observe_session_samples(vec![sample(3001, "session-4.scope", 0, &[420])], t0 + Duration::from_millis(100) * k);
        d.replan();
    }
    assert_eq!(w.lock().unwrap().slices.get(&420), Some(&super::SESSION_BOOST_SLICE_NS));
    // `allot set` took it into a job: no longer in the session's threads.
    d.observe_session_samples(vec![sample(3001, "session-4.scope", 1, &[])], t0 + Duration::from_millis(300));
    assert_eq!(w.lock().unwrap().slices.get(&420), Some(&3_000_000), "its own slice back");
    assert!(d.sessions().tasks.is_empty());
}

#[test]
fn a_session_whose_running_threads_are_niced_weighs_its_users_currency_by_the_nice_threshold() {
    let w = world();
    {
        let mut x = w.lock().unwrap();
        x.spawn(450, 3001, S4, "spin");
        x.procs.get_mut(&450).unwrap().nice = 19;
        // A shell that does not run: its nice 0 does not count.
        x.spawn(451, 3001, S4, "sh");
        x.spawn(452, 3002, S9, "spin");
    }
    let mut d = start(&w);
    d.set_ncpu(1);
    let t0 = Instant::now();
    let dt = Duration::from_millis(100);
    for k in 0..3u64 {
        {
            let mut x = w.lock().unwrap();
            x.runs.insert(450, (k * 10_000_000, k * 90_000_000));
            x.runs.insert(452, (k * 90_000_000, k * 10_000_000));
        }
        d.observe_session_samples(
            vec![sample(3001, "session-4.scope", k * 10_000_000, &[450, 451]), sample(3002, "session-9.scope", k * 90_000_000, &[452])],
            t0 + dt * k as u32,
        );
        d.replan();
    }
    let claims = d.sessions().claims();
    assert_eq!(claims.iter().map(|c| (c.0, c.1.nice)).collect::<Vec<_>>(), [(3001, 19), (3002, 0)]);
    use super::super::registry::CurrencyId;
    // §3.4: at most 10^((20 - 19)/20 + 1) = 11.2 base tickets against 3002's 100.
    assert_eq!(d.session_weight(&CurrencyId::User(3001)), Some(11));
    assert_eq!(d.session_weight(&CurrencyId::User(3002)), None, "its funding");
    let e = d.sessions().planned[&3001].entitlement;
    assert!((e - 11.0 / 111.0).abs() < 0.01, "{e}");
    // A tick in which the niced thread got no CPU (its scope's usage did not move): still
    // niced, so the slice's weight does not flap between 11 and the funding.
    w.lock().unwrap().runs.insert(452, (3 * 90_000_000, 3 * 10_000_000));
    d.observe_session_samples(
        vec![
            ScopeSample { uid: 3001, name: "session-4.scope".into(), usage_ns: 20_000_000, threads: None, ..Default::default() },
            sample(3002, "session-9.scope", 3 * 90_000_000, &[452]),
        ],
        t0 + dt * 3,
    );
    d.replan();
    assert_eq!(d.session_weight(&CurrencyId::User(3001)), Some(11));
    // The niced thread stops; 3001's currency has its funding back.
    w.lock().unwrap().procs.get_mut(&450).unwrap().nice = 0;
    for k in 3..6u64 {
        w.lock().unwrap().runs.insert(450, (20_000_000 + (k - 2) * 50_000_000, 180_000_000));
        w.lock().unwrap().runs.insert(452, (k * 90_000_000, k * 10_000_000));
        d.observe_session_samples(
            vec![
                sample(3001, "session-4.scope", 20_000_000 + (k - 2) * 50_000_000, &[450, 451]),
                sample(3002, "session-9.scope", k * 90_000_000, &[452]),
            ],
            t0 + dt * k as u32,
        );
        d.replan();
    }
    assert_eq!(d.session_weight(&CurrencyId::User(3001)), None);
}

/// A v1 host: systemd's `name=systemd` hierarchy has a session's `tasks` but no usage, so
/// the session's usage is what its threads used, and the plan counts it as on cgroup v2.
#[test]
fn on_a_v1_host_a_sessions_usage_is_its_threads() {
    let w = world();
    {
        let mut x = w.lock().unwrap();
        x.spawn(400, 3001, S4, "spin");
        x.spawn(401, 3001, S4, "sh");
    }
    let mut d = start(&w);
    let top = std::env::temp_dir().join(format!("allot-v1-session-{}", std::process::id()));
    let dir = top.join("session-4.scope");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("tasks"), "400\n401\n").unwrap();
    let scope = allot_linux::cgroup::sessions::SessionScope { uid: 3001, dir: dir.clone() };
    let t0 = Instant::now();
    let dt = Duration::from_millis(100);
    for k in 0..3u64 {
        {
            let mut x = w.lock().unwrap();
            x.runs.insert(400, (k * 100_000_000, 0));
            x.runs.insert(401, (k * 1_000_000, 0));
        }
        let reads = w.lock().unwrap().thread_reads;
        let smp = d.summed_sample(&scope, scope.threads_upto(1024).unwrap());
        // The first read is the baseline (the threads start at 0 here).
        assert_eq!(smp.usage_ns, k * 101_000_000, "the threads' time since first seen");
        d.observe_session_samples(vec![smp], t0 + dt * k as u32);
        assert_eq!(w.lock().unwrap().thread_reads - reads, 2, "each of the two threads read once a tick");
        d.replan();
    }
    let used = d.sessions().scopes["session-4.scope"].usage.expect("a usage after two ticks").last;
    assert!((used - 1.01).abs() < 0.02, "one CPU and a bit over the last tick: {used}");
    assert!(d.sessions().planned.contains_key(&3001), "a claimant of the plan: {:?}", d.sessions().planned);
    // A thread that has run for an hour, listed for the first time (it was past the
    // budget, or new to the session), adds nothing at once; one that exits takes its
    // time with it without the sum going back.
    let before = d.summed_sample(&scope, scope.threads_upto(1024).unwrap()).usage_ns;
    w.lock().unwrap().spawn(402, 3001, S4, "old");
    w.lock().unwrap().runs.insert(402, (3_600_000_000_000, 0));
    std::fs::write(dir.join("tasks"), "400\n401\n402\n").unwrap();
    assert_eq!(d.summed_sample(&scope, scope.threads_upto(1024).unwrap()).usage_ns, before, "no jump");
    std::fs::write(dir.join("tasks"), "401\n").unwrap();
    assert_eq!(d.summed_sample(&scope, scope.threads_upto(1024).unwrap()).usage_ns, before, "no step back");
    let _ = std::fs::remove_dir_all(&top);
}

/// Hostile: one user's sessions of thousands of threads cannot take the whole per-tick
/// budget of thread reads and leave other users' sessions unread (their boost unfollowed,
/// and on a v1 host their usage not summed). Before the budget was divided, the first
/// scopes listed took it all.
#[test]
fn hostile_one_users_many_threads_leave_the_other_users_sessions_read() {
    let w = world();
    let mut d = start(&w);
    let scope = |uid: u32, n: u32| allot_linux::cgroup::sessions::SessionScope { uid, dir: format!("/user-{uid}.slice/session-{n}.scope").into() };
    let tids = |n: i32| Some((0..n).collect::<Vec<i32>>());
    let parts = |d: &mut Daemon, mut read: Vec<super::Row>| {
        let skipped = d.divide_thread_budget(&mut read);
        let kept: usize = read.iter().zip(&skipped).map(|(r, s)| r.2.as_ref().map_or(0, Vec::len) + s.len()).sum();
        assert!(kept <= super::MAX_KEPT, "at most {} kept: {kept}", super::MAX_KEPT);
        read.iter().map(|r| r.2.as_ref().map_or(0, Vec::len)).collect::<Vec<_>>()
    };
    // A user listed first with a full list, two others small (one on v1, in two sessions),
    // one idle (nothing to read, nothing taken): the small ones are read whole.
    let read = vec![
        (scope(3001, 1), Some(0), tids(1024)),
        (scope(3002, 2), Some(0), tids(10)),
        (scope(3003, 3), None, tids(200)),
        (scope(3003, 4), None, tids(100)),
        (scope(3004, 5), Some(0), None),
    ];
    assert_eq!(parts(&mut d, read), [714, 10, 200, 100, 0]);
    // Two users of many threads, one in two sessions: halves per user, then per session.
    let read = vec![(scope(3001, 1), Some(0), tids(1024)), (scope(3001, 6), Some(0), tids(1024)), (scope(3002, 2), Some(0), tids(1024))];
    assert_eq!(parts(&mut d, read), [256, 256, 512]);
    assert!(d.sessions().capped_logged, "the cut is logged");
    // Six full sessions of one user: 170 or 171 read of each, and the kept (what the reads
    // go round) bounded too, at 682 or 683 of each.
    let read: Vec<super::Row> = (1..=6).map(|n| (scope(3001, n), Some(0), tids(1024))).collect();
    let got = parts(&mut d, read);
    assert_eq!(got.iter().sum::<usize>(), 1024);
    assert!(got.iter().all(|&p| p == 170 || p == 171), "{got:?}");
    // More sessions than reads (1100 users of one session each): the 76 left unread at
    // one tick are read at the next, not left unread tick after tick by the rounding.
    let many = || (0..1100u32).map(|u| (scope(4000 + u, 1), Some(0), tids(5))).collect::<Vec<super::Row>>();
    let (a, b) = (parts(&mut d, many()), parts(&mut d, many()));
    assert_eq!(a.iter().filter(|&&p| p == 0).count(), 76);
    assert!(a.iter().zip(&b).all(|(x, y)| x + y > 0), "every session read within two ticks");
}

/// v1 scopes of `n` threads each (ids from `first`, `per` apart between scopes), in files
/// under a directory of the test's; the fake kernel's processes for them.
fn v1_scopes(w: &Shared, top: &std::path::Path, uid: u32, scopes: u32, n: i32) -> Vec<allot_linux::cgroup::sessions::SessionScope> {
    (0..scopes)
        .map(|k| {
            let dir = top.join(format!("session-{}.scope", 10 + k));
            std::fs::create_dir_all(&dir).unwrap();
            let tids: Vec<i32> = (0..n).map(|i| 10_000 * (k as i32 + 1) + i).collect();
            for &t in &tids {
                w.lock().unwrap().spawn(t, uid, &format!("/user.slice/user-{uid}.slice/session-{}.scope", 10 + k), "make");
            }
            std::fs::write(dir.join("tasks"), tids.iter().map(|t| format!("{t}\n")).collect::<String>()).unwrap();
            allot_linux::cgroup::sessions::SessionScope { uid, dir }
        })
        .collect()
}

/// Hostile, on a v1 host: a user whose sessions have more threads than the tick's budget
/// of reads had their usage summed from the same first threads each tick, so the plan saw
/// about half of what two sessions of 1000 busy threads used. The reads now go round
/// each scope's threads: every thread's time is counted, no tick reads more than
/// [`super::MAX_TASKS`], and a thread whose id is taken while it is not read adds nothing.
#[test]
fn hostile_on_v1_threads_past_the_budget_are_read_in_turn_and_counted() {
    let w = world();
    let mut d = start(&w);
    let top = std::env::temp_dir().join(format!("allot-v1-rotate-{}-{:?}", std::process::id(), std::thread::current().id()));
    let scopes = v1_scopes(&w, &top, 3001, 2, 1000);
    let t0 = Instant::now();
    let tick = |d: &mut Daemon, k: u64| {
        let rows = scopes.iter().map(|s| (s.clone(), None, Some(super::scope_threads(s).unwrap()))).collect();
        let reads = w.lock().unwrap().thread_reads;
        let samples = d.samples(rows);
        let usage: Vec<u64> = samples.iter().map(|s| s.usage_ns).collect();
        d.observe_session_samples(samples, t0 + Duration::from_millis(100) * k as u32);
        let read = w.lock().unwrap().thread_reads - reads;
        assert!(read <= super::MAX_TASKS, "tick {k} read {read} threads");
        usage
    };
    // Each thread runs 1 ms a tick.
    let run = |k: u64| {
        let mut x = w.lock().unwrap();
        for s in 1..=2 {
            for i in 0..1000 {
                x.runs.insert(10_000 * s + i, (k * 1_000_000, 0));
            }
        }
    };
    let mut usage = vec![];
    for k in 0..=10 {
        run(k);
        usage = tick(&mut d, k);
    }
    // Each thread first read at tick 0 or 1 and last at tick 9 or 10: at least 8 ms of
    // each counted, at most 10 (the first 512 of each, always, counted 5.12 s).
    for u in &usage {
        assert!((8_000_000_000..=10_000_000_000).contains(u), "a scope's summed usage after 10 ticks: {u} ns");
    }
    assert!(d.sessions().tasks.len() <= super::MAX_KEPT);
    // A thread not read at the last tick (past its part) exits and its id is taken by a
    // thread that has run for an hour: when the reads come round to it, nothing jumps.
    assert_eq!(d.sessions().cursors.len(), 2, "both scopes go round: {:?}", d.sessions().cursors);
    let victim = d.sessions().tasks.iter().find(|(_, t)| t.skipped > 0).map(|(&tid, _)| tid).expect("a thread not read at the last tick");
    {
        let mut x = w.lock().unwrap();
        x.procs.remove(&victim);
        x.spawn(victim, 3001, "/user.slice/user-3001.slice/session-10.scope", "intruder");
        x.runs.insert(victim, (3_600_000_000_000, 0));
    }
    let before: u64 = usage.iter().sum();
    let mut after = 0;
    for k in 11..=13 {
        run(k);
        let mut x = w.lock().unwrap();
        x.runs.insert(victim, (3_600_000_000_000 + k * 1_000_000, 0));
        drop(x);
        after = tick(&mut d, k).iter().sum();
    }
    assert!(
        after - before <= 3 * 2_000 * 1_000_000 + 2_000 * 2_000_000,
        "the hour of the thread that took the id is not counted: {} ns more",
        after - before
    );
    let _ = std::fs::remove_dir_all(&top);
}

/// Hostile, on a v1 host: one session of 3000 threads. Its thread list was read only as
/// far as the tick's 1024 reads, so the 1976 after them were never counted; now the list
/// is read as far as what is kept (4096) and the reads go round all of it.
#[test]
fn hostile_on_v1_one_session_of_3000_threads_is_counted_whole() {
    let w = world();
    let mut d = start(&w);
    let top = std::env::temp_dir().join(format!("allot-v1-big-{}-{:?}", std::process::id(), std::thread::current().id()));
    let scopes = v1_scopes(&w, &top, 3001, 1, 3000);
    let t0 = Instant::now();
    let mut usage = 0;
    for k in 0..=10u64 {
        {
            let mut x = w.lock().unwrap();
            for i in 0..3000 {
                x.runs.insert(10_000 + i, (k * 1_000_000, 0));
            }
        }
        let rows = vec![(scopes[0].clone(), None, Some(super::scope_threads(&scopes[0]).unwrap()))];
        let reads = w.lock().unwrap().thread_reads;
        let samples = d.samples(rows);
        usage = samples[0].usage_ns;
        d.observe_session_samples(samples, t0 + Duration::from_millis(100) * k as u32);
        assert!(w.lock().unwrap().thread_reads - reads <= super::MAX_TASKS, "tick {k}");
    }
    // Each thread first read at tick 0, 1 or 2 and last at 8, 9 or 10: 6 to 10 ms of each.
    assert!(
        (18_000_000_000..=30_000_000_000).contains(&usage),
        "the session's summed usage after 10 ticks: {usage} ns (its first 1024 alone: 10.24 s)"
    );
    assert!(d.sessions().tasks.len() <= super::MAX_KEPT);
    let _ = std::fs::remove_dir_all(&top);
}
