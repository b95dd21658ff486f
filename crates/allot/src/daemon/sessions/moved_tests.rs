//! `[sessions] background = "job"` against the fake systemd host: the hostile cases first
//! (another user's process, a setuid one, a process of a service, a user manager or a
//! delegated unit, a process that exits between the decision and the move, a pid reused
//! meanwhile), then the move itself, one job per session and its end with the session.

use super::super::core::Daemon;
use super::super::fake::{FakeCg, FakeHost, Shared, World};
use super::super::registry::BACKGROUND;
use allot_linux::ipc::systemd_bus::UnitOf;
use allot_linux::process::sched::SCHED_IDLE;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const S4: &str = "/user.slice/user-3001.slice/session-4.scope";
const S5: &str = "/user.slice/user-3001.slice/session-5.scope";
const S9: &str = "/user.slice/user-3002.slice/session-9.scope";
const CONF: &str = "[users]\nmin_uid = 3000\nmax_uid = 60000\n[sessions]\nbackground = \"job\"\n[[rules]]\nname = \"bg\"\ncomm = \"hog*\"\nbackground = true\n[[rules]]\nname = \"low\"\ncomm = \"batch\"\ntickets = 10\n";

fn start_with(w: &Shared, conf: &str) -> Daemon {
    let path = std::env::temp_dir().join(format!("allot-moved-{}-{:?}.toml", std::process::id(), std::thread::current().id()));
    std::fs::write(&path, conf).unwrap();
    let cfg = crate::config::Config::load(&path, true).unwrap();
    let _ = std::fs::remove_file(&path);
    let mut d = Daemon::start(Box::new(FakeCg { w: w.clone() }), Box::new(FakeHost { w: w.clone() }), cfg, None, false).unwrap();
    d.features_mut().custom_slices = true;
    d.set_ncpu(2);
    d
}

fn world() -> Shared {
    let w = Arc::new(Mutex::new(World::default()));
    w.lock().unwrap().systemd = true;
    w
}

fn path(w: &Shared, pid: i32) -> String {
    w.lock().unwrap().procs.get(&pid).map(|p| p.path.clone()).unwrap_or_default()
}

/// The background job made for a session's processes (its cgroup in the fake).
fn job_path(d: &Daemon, uid: u32, scope: &str) -> Option<String> {
    let id = d.session_job(uid, "bg", scope)?;
    Some(format!("/fake/{}", d.desired().jobs[&id].rel()).replace(&format!("/fake/{BACKGROUND}"), "/fake-background"))
}

fn tethers(w: &Shared) -> Vec<String> {
    w.lock().unwrap().tethers.iter().cloned().collect()
}

#[test]
fn hostile_setuid_other_users_services_user_managers_and_containers_stay() {
    let w = world();
    {
        let mut x = w.lock().unwrap();
        // A setuid process in 3002's session (uids not all one user's).
        x.spawn(500, 3002, S9, "hog");
        x.procs.get_mut(&500).unwrap().uids = [3002, 0, 0, 0];
        // Root's process in a user's session: not a human user's.
        x.spawn(501, 0, S4, "hog");
        // 3001's processes in a service run as them, their own systemd, a container.
        x.spawn(502, 3001, "/system.slice/jupyter.service", "hog");
        x.units.insert("/system.slice/jupyter.service".into(), UnitOf { name: "jupyter.service".into(), user: "3001".into(), ..Default::default() });
        let um = "/user.slice/user-3001.slice/user@3001.service/app.slice/x.service";
        x.spawn(503, 3001, um, "hog");
        x.spawn(504, 3001, "/system.slice/docker-ab.scope", "hog");
        x.units.insert("/system.slice/docker-ab.scope".into(), UnitOf { name: "docker-ab.scope".into(), delegate: true, ..Default::default() });
    }
    let mut d = start_with(&w, CONF);
    d.scan();
    assert_eq!(path(&w, 500), S9);
    assert_eq!(path(&w, 501), S4);
    assert_eq!(path(&w, 502), "/system.slice/jupyter.service");
    assert!(path(&w, 503).ends_with("/x.service"));
    assert_eq!(path(&w, 504), "/system.slice/docker-ab.scope");
    assert!(tethers(&w).is_empty(), "no job tied to any session: {:?}", tethers(&w));
    for pid in 500..=504 {
        assert_eq!(w.lock().unwrap().policies.get(&pid), None, "process {pid} was written");
    }
}

#[test]
fn hostile_a_user_in_someone_elses_session_joins_their_own_currency_untied() {
    let w = world();
    // su to 3002 inside 3001's session: reach's case (their currency), never a job tied
    // to 3001's session.
    w.lock().unwrap().spawn(510, 3002, S4, "hog");
    let mut d = start_with(&w, CONF);
    d.scan();
    assert!(path(&w, 510).contains("user-3002"), "{}", path(&w, 510));
    assert!(tethers(&w).is_empty(), "{:?}", tethers(&w));
    assert_eq!(job_path(&d, 3002, "session-4.scope"), None);
}

#[test]
fn hostile_a_process_that_exits_before_its_move_moves_nothing() {
    let w = world();
    w.lock().unwrap().spawn(520, 3001, S4, "hog");
    w.lock().unwrap().exit_on_move = Some((520, None));
    let mut d = start_with(&w, CONF);
    d.scan();
    assert!(!w.lock().unwrap().procs.contains_key(&520));
    let job = job_path(&d, 3001, "session-4.scope").expect("the job was made and tied before the move");
    assert!(w.lock().unwrap().procs.values().all(|p| p.path != job), "nothing is in it");
}

#[test]
fn hostile_a_pid_reused_during_the_move_is_not_left_in_the_job() {
    let w = world();
    w.lock().unwrap().spawn(530, 3001, S4, "hog");
    // It exits as it is moved, and 3002's process takes its pid.
    w.lock().unwrap().exit_on_move = Some((530, Some((3002, S9.into(), "sh".into()))));
    let mut d = start_with(&w, CONF);
    d.scan();
    let job = job_path(&d, 3001, "session-4.scope").unwrap();
    assert_ne!(path(&w, 530), job, "the new pid 530 (uid 3002) is not in 3001's job");
    // Later, the new 530 is looked at as what it is: 3002's shell, no rule.
    d.on_process(530, true);
    assert_ne!(path(&w, 530), job);
}

#[test]
fn hostile_a_recycled_pid_is_judged_as_the_new_process() {
    let w = world();
    w.lock().unwrap().spawn(540, 3001, S4, "hog");
    let mut d = start_with(&w, CONF);
    d.scan();
    let j4 = job_path(&d, 3001, "session-4.scope").unwrap();
    assert_eq!(path(&w, 540), j4);
    // It exits; 3002's hog in its own session takes pid 540: it goes to 3002's own job,
    // tied to 3002's session, never to 3001's.
    {
        let mut x = w.lock().unwrap();
        x.procs.remove(&540);
        x.spawn(540, 3002, S9, "hog");
    }
    d.on_process(540, true);
    let j9 = job_path(&d, 3002, "session-9.scope").unwrap();
    assert_eq!(path(&w, 540), j9);
    assert_ne!(j4, j9);
}

#[test]
fn a_background_rule_moves_a_session_process_into_a_job_per_session_that_ends_with_it() {
    let w = world();
    {
        let mut x = w.lock().unwrap();
        x.spawn(550, 3001, S4, "hog");
        x.spawn(551, 3001, S4, "hog2");
        x.spawn(552, 3001, S5, "hog");
        x.spawn(553, 3001, S4, "vim");
        // A tickets rule stays a nice in the session.
        x.spawn(554, 3001, S4, "batch");
    }
    let mut d = start_with(&w, CONF);
    d.scan();
    let j4 = job_path(&d, 3001, "session-4.scope").unwrap();
    let j5 = job_path(&d, 3001, "session-5.scope").unwrap();
    assert!(j4.starts_with("/fake-background/user-3001/"), "in the background class: {j4}");
    assert_ne!(j4, j5, "one job per session");
    assert_eq!((path(&w, 550), path(&w, 551), path(&w, 552)), (j4.clone(), j4.clone(), j5.clone()));
    assert_eq!(path(&w, 553), S4, "no rule: stays");
    assert_eq!(path(&w, 554), S4);
    assert_eq!(w.lock().unwrap().policies.get(&554), Some(&(0, 10)));
    assert_ne!(w.lock().unwrap().policies.get(&550).map(|p| p.0), Some(SCHED_IDLE), "its job is idle: the task is not");
    let leaf4 = j4.rsplit('/').next().unwrap().to_string();
    let leaf5 = j5.rsplit('/').next().unwrap().to_string();
    assert_eq!(tethers(&w), {
        let mut v = vec![leaf4.clone(), leaf5];
        v.sort();
        v
    });
    // logind stops session 4: its job's processes are ended, session 5's are not.
    let t0 = Instant::now();
    d.tick_at(t0);
    w.lock().unwrap().tethers.remove(&leaf4);
    d.tick_at(t0 + Duration::from_millis(1100));
    let sig: Vec<i32> = w.lock().unwrap().signals.iter().filter(|s| s.1 == libc::SIGTERM).map(|s| s.0).collect();
    assert!(sig.contains(&550) && sig.contains(&551) && !sig.contains(&552) && !sig.contains(&553), "{sig:?}");
}

#[test]
fn task_mode_keeps_the_process_in_its_session() {
    let w = world();
    w.lock().unwrap().spawn(560, 3001, S4, "hog");
    let mut d = start_with(&w, &CONF.replace("background = \"job\"", "background = \"task\""));
    d.scan();
    assert_eq!(path(&w, 560), S4);
    assert_eq!(w.lock().unwrap().policies.get(&560), Some(&(SCHED_IDLE, 0)));
    assert!(tethers(&w).is_empty());
}

#[test]
fn a_reload_to_job_moves_a_process_made_sched_idle_and_gives_its_policy_back_first() {
    let w = world();
    w.lock().unwrap().spawn(570, 3001, S4, "hog");
    let task = CONF.replace("background = \"job\"", "background = \"task\"");
    let mut d = start_with(&w, &task);
    d.scan();
    assert_eq!(w.lock().unwrap().policies.get(&570), Some(&(SCHED_IDLE, 0)));
    d.cfg_mut().sessions.background = allot_model::session::BackgroundIn::Job;
    d.recheck_session_rules();
    assert_eq!(path(&w, 570), job_path(&d, 3001, "session-4.scope").unwrap());
    assert_eq!(w.lock().unwrap().policies.get(&570), Some(&(0, 0)), "its own policy back");
    assert_eq!(tethers(&w).len(), 1);
}
