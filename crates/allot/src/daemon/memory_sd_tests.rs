//! The memory step on a systemd host against the fake kernel's slices (fake_slices.rs):
//! which slices get what, through systemd's API only, and OOM by share reaching a
//! user's login session.

use crate::daemon::fake::Shared;
use crate::daemon::registry::CurrencyId;
use crate::daemon::tests::{peer, start, world};
use crate::proto::{Request, Response};

const M: u64 = 1 << 20;
const G: u64 = 1 << 30;
const SESSION: &str = "/user.slice/user-3000.slice/session-4.scope";

fn sent(w: &Shared) -> Vec<String> {
    std::mem::take(&mut w.lock().unwrap().slice_mem.sent)
}

/// A systemd host: user 3000 logged in with a job, 3001 logged in without one, uid 120
/// (no human user: below min_uid) with a slice too; all users' slices bounded at 512 MiB.
fn host() -> (Shared, crate::daemon::core::Daemon) {
    let w = world();
    {
        let mut x = w.lock().unwrap();
        x.systemd = true;
        x.spawn(100, 3000, SESSION, "sh");
        x.slice_mem.logged_in = vec![120, 3000, 3001];
        x.slice_mem.users_max = Some(512 * M);
        x.slice_mem.usage.insert("user-3000".into(), 100 * M);
        x.slice_mem.usage.insert("user-3001".into(), 10 * M);
    }
    let mut d = start(&w, None);
    let r = d
        .handle(
            Request::Run { tickets: None, currency: None, cap: None, background: false, force: false, mem: None, oom_group: false },
            &peer(&w, 3000, 100),
        )
        .unwrap();
    assert!(matches!(r, Response::Job(_)), "{r:?}");
    d.registry_mut().set_funding(CurrencyId::User(3000), 300);
    d.cfg_mut().funding.insert("3001".into(), crate::config_funding::FundingEntry { mem: Some("64M!".parse().unwrap()), ..Default::default() });
    sent(&w);
    (w, d)
}

fn step(d: &mut crate::daemon::core::Daemon) {
    d.memory_mut().at = None;
    d.apply_memory();
}

#[test]
fn each_users_slice_gets_its_share_and_cap_through_systemd_and_user_slice_the_sum() {
    let (w, mut d) = host();
    assert!(d.memory().slices && d.memory().mem.is_none(), "no cgroup file of systemd's is written: no memory tree of allot's");
    step(&mut d);
    assert_eq!(
        sent(&w),
        [
            format!("user-3000 MemoryLow={}", 384 * M),
            format!("user-3000 MemoryHigh={}", 480 * M),
            format!("user-3001 MemoryLow={}", 128 * M),
            format!("user-3001 MemoryMax={}", 64 * M),
            format!("user.slice MemoryLow={}", 512 * M),
        ],
        "funding 300:100 of 512 MiB; 3000's MemoryHigh= what 3001 holds within its share leaves (512 - 10 - 16, to 16 MiB); 3001's hard cap (under its guard: no MemoryHigh=); nothing for uid 120"
    );
    let v = d.memory_view(&CurrencyId::User(3001)).unwrap();
    assert_eq!((v.usage, v.protection, v.available, v.limit, v.cap.as_deref()), (10 * M, 128 * M, 512 * M, Some(64 * M), Some("64M!")));
    // show lists the logged-in user without jobs, whose slice is protected, with its memory.
    let row = d.currency_views().into_iter().find(|c| c.name == "3001").expect("3001 listed: its slice shares memory");
    assert_eq!((row.jobs, row.memory.map(|m| m.protection)), (0, Some(128 * M)));
    // Nothing changed: nothing is sent again. 3001 logs out: the protection is 3000's alone.
    step(&mut d);
    assert!(sent(&w).is_empty());
    w.lock().unwrap().slice_mem.logged_in = vec![3000];
    step(&mut d);
    assert_eq!(sent(&w), [format!("user-3000 MemoryLow={}", 512 * M), format!("user-3000 MemoryHigh={}", 512 * M)], "alone: all of it");
    assert!(d.memory_view(&CurrencyId::User(3001)).is_none());
    assert!(d.currency_views().iter().all(|c| c.name != "3001"), "logged out, no jobs: not listed");
    // At stop, what allot sent is taken back.
    d.undo_memory();
    let back = sent(&w);
    assert!(back.contains(&"user-3000 MemoryLow=none".to_string()) && back.contains(&"user.slice MemoryLow=none".to_string()), "{back:?}");
}

/// OOM by share reaches every process in an over-share user's slice, their login
/// session's too (a real child of the test stands for it: oom_score_adj is the kernel's),
/// and gives it back when the user is within their share again; a user within their
/// share is never raised.
#[test]
fn an_over_share_users_session_processes_are_ranked_first_and_given_back() {
    use allot_linux::process::procfs::ProcDir;
    let (w, mut d) = host();
    let mut over = std::process::Command::new("sleep").arg("30").spawn().unwrap();
    let mut within = std::process::Command::new("sleep").arg("30").spawn().unwrap();
    let (po, pw) = (over.id() as i32, within.id() as i32);
    let (od, wd) = (ProcDir::open(po).unwrap(), ProcDir::open(pw).unwrap());
    let before = od.oom_score_adj().unwrap();
    {
        let mut x = w.lock().unwrap();
        x.slice_mem.procs.insert("user-3001".into(), vec![po]);
        x.slice_mem.procs.insert("user-3000".into(), vec![pw]);
        x.slice_mem.usage.insert("user-3001".into(), 300 * M);
    }
    step(&mut d);
    let adj = d.memory_view(&CurrencyId::User(3001)).unwrap().oom_score_adj.unwrap();
    assert!(adj > 0, "3001 holds 300 MiB over its 128 MiB share: {adj}");
    assert_eq!(od.oom_score_adj().unwrap(), adj.max(before));
    assert_eq!(wd.oom_score_adj().unwrap(), before, "3000 is within its share");
    // Within its share again: its own value back.
    w.lock().unwrap().slice_mem.usage.insert("user-3001".into(), 10 * M);
    step(&mut d);
    assert_eq!(od.oom_score_adj().unwrap(), before);
    for c in [&mut over, &mut within] {
        c.kill().unwrap();
        c.wait().unwrap();
    }
}

#[test]
fn status_says_what_works_on_systemd() {
    let (_w, d) = host();
    let line = d.memory().degraded(true).unwrap();
    assert!(line.contains("memory_recursiveprot") && line.contains("protection does nothing"), "{line}");
    let w = world();
    {
        let mut x = w.lock().unwrap();
        x.systemd = true;
        x.slice_mem.recursive = true;
    }
    let d = start(&w, None);
    let line = d.memory().degraded(true).unwrap();
    assert!(line.contains("MemoryLow=") && line.contains("not divided by tickets") && !line.contains("protection does nothing"), "{line}");
    assert!(d.memory().degraded(false).unwrap().contains("enable = false"));
}

#[test]
fn a_stopped_slice_gets_no_memory_property() {
    // Setting a property of a user slice that stopped starts it again (the systemd VM,
    // 2026-11-27: user-59800.slice was there after allot's purge): only a running slice
    // is sent its share.
    let (w, mut d) = host();
    w.lock().unwrap().slice_mem.stopped.insert("user-3001".into());
    step(&mut d);
    let sent = sent(&w);
    assert!(!sent.iter().any(|s| s.starts_with("user-3001 ")), "{sent:?}");
    assert!(sent.iter().any(|s| s.starts_with("user-3000 Memory")), "the running slice still gets its share: {sent:?}");
}

#[test]
fn the_memory_available_to_users_is_what_the_machine_has_room_for() {
    // The system uses more than the reserve: the users' 110 MiB and 300 MiB MemAvailable
    // leave room for 378 MiB (less 32), under user.slice's 512: 368, to 16 MiB.
    let (w, mut d) = host();
    w.lock().unwrap().slice_mem.mem_available = Some(300 * M);
    step(&mut d);
    assert_eq!(
        sent(&w),
        [
            format!("user-3000 MemoryLow={}", 276 * M),
            format!("user-3000 MemoryHigh={}", 336 * M),
            format!("user-3001 MemoryLow={}", 92 * M),
            format!("user-3001 MemoryMax={}", 64 * M),
            format!("user.slice MemoryLow={}", 368 * M),
        ],
        "300:100 of 368; 3000's MemoryHigh= 368 - 10 - 16, to 16 MiB"
    );
    assert_eq!(d.memory_view(&CurrencyId::User(3001)).unwrap().available, 368 * M);
    // The room grows by less than 32 MiB, or falls to just the value used: nothing is sent.
    for a in [320 * M, 290 * M] {
        w.lock().unwrap().slice_mem.mem_available = Some(a);
        step(&mut d);
        assert!(sent(&w).is_empty(), "MemAvailable {a}");
    }
    // It falls below: at once. Room to spare: the reserve's value again.
    w.lock().unwrap().slice_mem.mem_available = Some(280 * M);
    step(&mut d);
    assert!(sent(&w).contains(&format!("user.slice MemoryLow={}", 352 * M)));
    w.lock().unwrap().slice_mem.mem_available = Some(G);
    step(&mut d);
    assert!(sent(&w).contains(&format!("user.slice MemoryLow={}", 512 * M)));
}

/// A systemd host in a container: /proc/meminfo is the host's (plenty available), the
/// container's cgroup above `user.slice` is limited to 400 MiB with 200 left: the users'
/// memory is bounded by it, not by the host's, and the reserve is kept of its 400.
#[test]
fn in_a_container_its_own_limit_bounds_the_users() {
    let (w, mut d) = host();
    {
        let mut x = w.lock().unwrap();
        x.slice_mem.mem_available = Some(16 * G);
        x.slice_mem.above = allot_linux::cgroup::memory::Bound { limit: Some(400 * M), headroom: Some(200 * M) };
    }
    step(&mut d);
    // 110 held + 200 left - 32 = 278, to 16 MiB: 272 (under its 400 less the reserve).
    assert_eq!(d.memory_view(&CurrencyId::User(3001)).unwrap().available, 272 * M);
    w.lock().unwrap().slice_mem.above.headroom = Some(G);
    step(&mut d);
    assert_eq!(d.memory_view(&CurrencyId::User(3001)).unwrap().available, 360 * M, "its limit less the 10% reserve, below user.slice's");
}

/// A background job's memory is the users' in the room bound, not the system's: the
/// background slice has no protection, so the users' reclaim takes it first. Counted as
/// the system's, it shrank every user's share while it held memory.
#[test]
fn the_background_slices_memory_is_in_the_users_room() {
    let (w, mut d) = host();
    {
        let mut x = w.lock().unwrap();
        x.slice_mem.mem_available = Some(300 * M);
        x.slice_mem.usage.insert("background".into(), 96 * M);
    }
    step(&mut d);
    assert_eq!(d.memory_view(&CurrencyId::User(3001)).unwrap().available, 368 * M, "no background job: its slice is not read");
    let bg = Request::Run { tickets: None, currency: None, cap: None, background: true, force: false, mem: None, oom_group: false };
    d.handle(bg, &peer(&w, 3000, 100)).unwrap();
    w.lock().unwrap().slice_mem.mem_available = Some(204 * M);
    step(&mut d);
    // 110 + 96 + 204 - 32 = 378, to 16 MiB: 368, as before the background took 96 MiB of
    // MemAvailable (counted as the system's, 272 to 16 MiB).
    assert_eq!(d.memory_view(&CurrencyId::User(3001)).unwrap().available, 368 * M);
    assert!(sent(&w).iter().all(|s| !s.starts_with("background ") || s.contains("IOWeight")), "no memory property on the background slice");
}
