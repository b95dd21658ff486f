//! A job's own memory cap on a systemd host against the fake kernel's slices
//! (fake_slices.rs): written in the job's directory inside allot's scope when the request
//! is served, never on another job, changed and cleared by `set`, not written again when
//! nothing changed, refused for another user's job, taken back by `--release`.

use super::super::tests::{peer, start, world};
use super::job_tests::{set_group, set_mem};
use crate::daemon::fake::Shared;
use crate::proto::{ErrorKind, MemChange, Request, Response};

const M: u64 = 1 << 20;
const SESSION: &str = "/user.slice/user-3000.slice/session-4.scope";

fn run(mem: Option<&str>, background: bool) -> Request {
    Request::Run { tickets: None, currency: None, cap: None, background, force: false, mem: mem.map(|m| m.parse().unwrap()), oom_group: false }
}

fn jobs_sent(w: &Shared) -> Vec<String> {
    std::mem::take(&mut w.lock().unwrap().slice_mem.sent).into_iter().filter(|s| s.starts_with("job ")).collect()
}

fn step(d: &mut crate::daemon::core::Daemon) {
    d.memory_mut().at = None;
    d.apply_memory();
}

/// A systemd host, user 3000 logged in with two processes in a session, 3001 with one.
fn host() -> (Shared, crate::daemon::core::Daemon) {
    let w = world();
    {
        let mut x = w.lock().unwrap();
        x.systemd = true;
        x.spawn(100, 3000, SESSION, "sh");
        x.spawn(101, 3000, SESSION, "sh");
        x.spawn(102, 3001, "/user.slice/user-3001.slice/session-5.scope", "sh");
        x.slice_mem.logged_in = vec![3000, 3001];
    }
    let d = start(&w, None);
    (w, d)
}

#[test]
fn a_jobs_cap_on_systemd_is_its_own_directorys_and_set_changes_it() {
    let (w, mut d) = host();
    assert!(d.memory().slices && d.memory().mem.is_none());
    let r = d.handle(run(None, false), &peer(&w, 3000, 101)).unwrap();
    assert!(matches!(r, Response::Job(_)), "{r:?}");
    let r = d.handle(run(Some("64M!"), false), &peer(&w, 3000, 100)).unwrap();
    let Response::Job(j) = r else { panic!("{r:?}") };
    let rel = d.desired().jobs.values().find(|s| s.mem.is_some()).unwrap().rel();
    assert_eq!(jobs_sent(&w), [format!("job {rel} memory.high=max,memory.max={}", 64 * M)], "written as the request is served, on this job only");
    step(&mut d);
    step(&mut d);
    assert!(jobs_sent(&w).is_empty(), "kept: nothing written again when nothing changed");
    let Response::Explain(x) = d.explain(&peer(&w, 3000, 100), &j.job).unwrap() else { panic!("not an explanation") };
    let r = x.reasons.iter().find(|r| r.state == "memory cap").expect("a memory cap reason");
    assert!(r.because.starts_with("hard memory cap 64M!") && r.because.contains("(memory.max)"), "{}", r.because);
    // Soft, then none.
    d.handle(set_mem(100, MemChange::Set("32M".parse().unwrap())), &peer(&w, 3000, 100)).unwrap();
    assert_eq!(jobs_sent(&w), [format!("job {rel} memory.high={},memory.max=max", 32 * M)]);
    d.handle(set_mem(100, MemChange::Clear), &peer(&w, 3000, 100)).unwrap();
    assert_eq!(jobs_sent(&w), [format!("job {rel} memory.high=max,memory.max=max")]);
    step(&mut d);
    assert!(jobs_sent(&w).is_empty(), "a cap taken away is not written again");
}

#[test]
fn another_users_job_cannot_be_capped_and_is_written_nothing() {
    let (w, mut d) = host();
    d.handle(run(Some("1G!"), false), &peer(&w, 3000, 100)).unwrap();
    jobs_sent(&w);
    for mem in [MemChange::Set("64M!".parse().unwrap()), MemChange::Clear] {
        let e = d.handle(set_mem(100, mem), &peer(&w, 3001, 102)).unwrap_err();
        assert_eq!(e.kind, ErrorKind::NotPermitted, "{}", e.message);
    }
    step(&mut d);
    assert!(jobs_sent(&w).is_empty(), "3000's job keeps its own cap");
    assert_eq!(w.lock().unwrap().slice_mem.jobs.values().next(), Some(&(None, Some(1 << 30))));
}

#[test]
fn a_background_jobs_cap_and_release_takes_every_cap_back() {
    let (w, mut d) = host();
    d.handle(run(Some("256M"), true), &peer(&w, 3000, 100)).unwrap();
    d.handle(run(Some("64M!"), false), &peer(&w, 3000, 101)).unwrap();
    let mut sent = jobs_sent(&w);
    sent.sort();
    assert!(sent[0].starts_with("job background/user-3000/") && sent[0].ends_with(&format!("memory.high={},memory.max=max", 256 * M)), "{sent:?}");
    assert!(sent[1].starts_with("job user-3000/") && sent[1].ends_with(&format!("memory.max={}", 64 * M)), "{sent:?}");
    d.release();
    let mut back = jobs_sent(&w);
    back.sort();
    assert_eq!(back.len(), 2, "{back:?}");
    assert!(back.iter().all(|s| s.ends_with("memory.high=max,memory.max=max")), "{back:?}");
}

#[test]
fn a_scope_that_cannot_take_the_cap_is_not_asked_every_tick() {
    let (w, mut d) = host();
    w.lock().unwrap().slice_mem.undelegated.insert("user-3000/j1-u3000".into());
    d.handle(run(Some("64M!"), false), &peer(&w, 3000, 100)).unwrap();
    assert!(w.lock().unwrap().slice_mem.jobs.is_empty());
    assert_eq!(jobs_sent(&w), ["job user-3000/j1-u3000 refused"], "tried once, as the request is served");
    step(&mut d);
    step(&mut d);
    assert!(jobs_sent(&w).is_empty(), "not tried again every tick");
}

/// A cap and an OOM group the scope refused are not said to be in force: `explain` names
/// the kernel's refusal, until a later write (the scope delegating memory) succeeds.
#[test]
fn explain_says_when_the_scope_refused_a_jobs_cap_or_oom_group() {
    let (w, mut d) = host();
    w.lock().unwrap().slice_mem.undelegated.insert("user-3000/j1-u3000".into());
    let r = Request::Run {
        tickets: None,
        currency: None,
        cap: None,
        background: false,
        force: false,
        mem: Some("64M!".parse().unwrap()),
        oom_group: true,
    };
    d.handle(r, &peer(&w, 3000, 100)).unwrap();
    assert_eq!(jobs_sent(&w), ["job user-3000/j1-u3000 refused", "job user-3000/j1-u3000 refused"]);
    let explain = |d: &crate::daemon::core::Daemon| {
        let Ok(Response::Explain(x)) = d.explain(&peer(&w, 3000, 100), "1") else { panic!("not an explanation") };
        x.reasons.into_iter().filter(|r| r.state == "memory cap" || r.state == "OOM group").collect::<Vec<_>>()
    };
    let rs = explain(&d);
    assert_eq!(rs.len(), 2, "{rs:?}");
    for r in &rs {
        assert!(!r.on && r.because.contains("not in force: it could not be written") && r.because.contains("does not delegate"), "{r:?}");
    }
    step(&mut d);
    assert!(jobs_sent(&w).is_empty(), "not tried again every tick");
    // The scope takes them now: asking for them again tries again and puts them in force.
    w.lock().unwrap().slice_mem.undelegated.clear();
    d.handle(set_mem(100, MemChange::Set("64M!".parse().unwrap())), &peer(&w, 3000, 100)).unwrap();
    assert_eq!(jobs_sent(&w), ["job user-3000/j1-u3000 memory.high=max,memory.max=67108864", "job user-3000/j1-u3000 memory.oom.group=1"]);
    let rs = explain(&d);
    assert!(rs.iter().all(|r| r.on && !r.because.contains("refused")), "{rs:?}");
}

#[test]
fn release_in_a_daemon_of_its_own_takes_back_the_state_files_caps() {
    // `allot daemon --release` starts from the state file and writes nothing before it
    // lets go: the caps it takes back are the jobs'.
    let (w, mut d) = host();
    d.handle(run(Some("64M!"), false), &peer(&w, 3000, 100)).unwrap();
    jobs_sent(&w);
    d.memory_mut().written.clear();
    d.release();
    assert_eq!(jobs_sent(&w), ["job user-3000/j1-u3000 memory.high=max,memory.max=max"]);
}

/// `--oom-group` on a systemd host: the job's `memory.oom.group` inside allot's scope, sent
/// as the request is served, not again while unchanged, off by `set`, taken back by
/// `--release` from a job that outlives allot.
#[test]
fn a_jobs_oom_group_on_systemd_is_its_own_directorys_and_release_takes_it_back() {
    let (w, mut d) = host();
    let r = Request::Run { tickets: None, currency: None, cap: None, background: false, force: false, mem: None, oom_group: true };
    let r = d.handle(r, &peer(&w, 3000, 100)).unwrap();
    assert!(matches!(r, Response::Job(_)), "{r:?}");
    let rel = d.desired().jobs.values().find(|s| s.oom_group).unwrap().rel();
    assert_eq!(jobs_sent(&w), [format!("job {rel} memory.high=max,memory.max=max"), format!("job {rel} memory.oom.group=1")]);
    step(&mut d);
    step(&mut d);
    assert!(jobs_sent(&w).is_empty(), "kept: nothing written again");
    d.handle(set_group(100, false), &peer(&w, 3000, 100)).unwrap();
    assert_eq!(jobs_sent(&w).last().map(String::as_str), Some(format!("job {rel} memory.oom.group=0").as_str()));
    step(&mut d);
    assert!(jobs_sent(&w).is_empty(), "off, and nothing more");
    // On again, then --release: the job runs on without allot's OOM group.
    d.handle(set_group(100, true), &peer(&w, 3000, 100)).unwrap();
    jobs_sent(&w);
    d.release_slice_job_mem();
    assert!(jobs_sent(&w).contains(&format!("job {rel} memory.oom.group=0")), "taken back at --release");
}
