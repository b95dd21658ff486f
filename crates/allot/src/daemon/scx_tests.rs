//! The runner (scx.rs) against fake loaders: shell scripts that speak the loader's
//! protocol (`allot-scx serve`, crates/allot-scx/src/serve.rs) without a kernel.

use super::scx::{Change, Scx, State, TableJob};
use std::path::Path;
use std::time::{Duration, Instant};

/// A fake loader: says it loaded, logs every line it reads to $1, confirms each table,
/// and after table number $2 (0: never) says it was ejected and exits 3, as the real one
/// does on sysrq-S. At the end of its input it says it unloaded.
const FAKE: &str = r#"
echo "loaded allot_stride partial"
n=0
while read -r line; do
  echo "$line" >> "$1"
  if [ "$line" = end ]; then
    n=$((n + 1)); echo "table $n jobs 0 threads"
    if [ "$n" = "$2" ]; then echo "ejected 67 sysrq-S: disabled by sysrq-S"; exit 3; fi
  fi
done
echo "unloaded unregistered (64): unregistered from user space"
"#;

fn start(script: &str, args: &[&str]) -> Scx {
    let mut s = Scx::default();
    let mut a = vec!["-c", script, "fake-allot-scx"];
    a.extend(args);
    s.start(Path::new("/bin/sh"), &a);
    s
}

/// Polls until a change or `within`; returns it and how long it took.
fn until_change(s: &mut Scx, within: Duration) -> Option<(Change, Duration)> {
    let t0 = Instant::now();
    while t0.elapsed() < within {
        if let Some(c) = s.poll() {
            return Some((c, t0.elapsed()));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("allot-scx-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_file(&d);
    d
}

#[test]
fn feeds_tables_only_when_they_change_and_unloads_at_stop() {
    let log = tmp("feed");
    let mut s = start(FAKE, &[log.to_str().unwrap(), "0"]);
    assert_eq!(s.state(), &State::Loading);
    assert_eq!(until_change(&mut s, Duration::from_secs(5)).map(|c| c.0), Some(Change::Loaded));
    assert!(matches!(s.state(), State::Loaded { mode, .. } if mode == "partial"));
    let t = vec![TableJob::new("/sys/fs/cgroup/allot/u/j2", 33_333), TableJob::new("/sys/fs/cgroup/allot/u/j1", 50_000)];
    assert!(s.feed(t.clone()));
    // the same table in another order is not sent again
    assert!(!s.feed(t.into_iter().rev().collect()));
    let capped = TableJob { cap: Some(0.3), background: true, ..TableJob::new("/sys/fs/cgroup/allot/u/j1", 100_000) };
    assert!(s.feed(vec![capped.clone()]));
    // a change of cap alone is a new table
    assert!(s.feed(vec![TableJob { cap: Some(0.5), ..capped }]));
    let t0 = Instant::now();
    while s.tables() < 3 && t0.elapsed() < Duration::from_secs(5) {
        s.poll();
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(s.tables(), 3);
    let last = s.stop(Duration::from_secs(5));
    assert_eq!(s.state(), &State::Off);
    assert!(last.is_some_and(|l| l.starts_with("unloaded")));
    let got = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        got,
        "job 50000 /sys/fs/cgroup/allot/u/j1\njob 33333 /sys/fs/cgroup/allot/u/j2\nend\n\
         job 100000 cap=0.3 background /sys/fs/cgroup/allot/u/j1\nend\njob 100000 cap=0.5 background /sys/fs/cgroup/allot/u/j1\nend\n"
    );
    let _ = std::fs::remove_file(&log);
}

#[test]
fn an_ejection_is_noticed_with_the_kernels_reason() {
    let log = tmp("eject");
    let mut s = start(FAKE, &[log.to_str().unwrap(), "2"]);
    assert_eq!(until_change(&mut s, Duration::from_secs(5)).map(|c| c.0), Some(Change::Loaded));
    s.feed(vec![TableJob::new("/a", 1)]);
    s.feed(vec![TableJob::new("/a", 2)]);
    let (c, took) = until_change(&mut s, Duration::from_secs(5)).expect("the exit is noticed");
    assert_eq!(c, Change::Fell("ejected by the kernel: 67 sysrq-S: disabled by sysrq-S".into()));
    assert!(took < Duration::from_secs(1), "{took:?}");
    assert!(matches!(s.state(), State::Fallen { reason, .. } if reason.contains("disabled by sysrq-S")));
    assert_eq!(s.ejections(), 1);
    // nothing more to say or feed; the loader is reaped
    assert!(!s.feed(vec![TableJob::new("/a", 3)]));
    let t0 = Instant::now();
    while s.pid().is_some() && t0.elapsed() < Duration::from_secs(5) {
        assert_eq!(s.poll(), None);
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(s.pid(), None);
    assert_eq!(s.stop(Duration::from_secs(1)), None);
    let _ = std::fs::remove_file(&log);
}

#[test]
fn a_failure_to_load_says_why() {
    let mut s = start("echo 'Error: loading the BPF scheduler: Permission denied' >&2; exit 1", &[]);
    let (c, _) = until_change(&mut s, Duration::from_secs(5)).expect("the exit is noticed");
    assert_eq!(c, Change::Fell("failed to load: Error: loading the BPF scheduler: Permission denied".into()));
    assert_eq!(s.ejections(), 0, "it never loaded, so it was not ejected");
    let mut s = Scx::default();
    s.start(Path::new("/nonexistent/allot-scx"), &["serve"]);
    assert!(matches!(s.state(), State::Fallen { reason, .. } if reason.contains("could not start /nonexistent/allot-scx")));
    assert_eq!(s.poll(), None);
}

#[test]
fn a_loader_that_ignores_its_pipe_is_stopped_by_signal() {
    let mut s = start("echo 'loaded allot_stride all'; trap 'echo unloaded on SIGTERM; exit 0' TERM; while :; do sleep 0.05; done", &[]);
    assert_eq!(until_change(&mut s, Duration::from_secs(5)).map(|c| c.0), Some(Change::Loaded));
    let pid = s.pid().unwrap();
    let t0 = Instant::now();
    let last = s.stop(Duration::from_millis(300));
    assert!(t0.elapsed() < Duration::from_secs(3));
    assert_eq!(last.as_deref(), Some("unloaded on SIGTERM"));
    assert!(!Path::new(&format!("/proc/{pid}")).exists() || std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z")));
}

#[test]
fn the_daemon_sends_its_plan_flattened_and_falls_back_keeping_every_job() {
    use super::tests::{peer, start as daemon, world};
    use crate::proto::{Request, Response};
    let w = world();
    for pid in [100, 101, 102] {
        w.lock().unwrap().spawn(pid, 3000, "/", "hog");
    }
    let mut d = daemon(&w, None);
    let mut dirs = vec![];
    for (pid, t) in [(100, 3), (101, 2), (102, 1)] {
        let r = d
            .handle(
                Request::Run {
                    tickets: Some(allot_model::Tickets::new(t).unwrap()),
                    currency: None,
                    cap: None,
                    background: false,
                    force: false,
                    mem: None,
                    oom_group: false,
                },
                &peer(&w, 3000, pid),
            )
            .unwrap();
        let Response::Job(j) = r else { panic!("{r:?}") };
        dirs.push(format!("/fake/{}", j.cgroup));
    }
    // the plan's weights, flattened: one currency, so shares 3:2:1 of one nice-0 task
    let table: std::collections::HashMap<String, u64> = d.scx_table().into_iter().map(|j| (j.dir, j.share)).collect();
    // (the fake controller's directories are under /fake-mount)
    let shares: Vec<u64> = dirs.iter().map(|d| *table.get(&format!("/fake-mount{d}")).unwrap_or_else(|| panic!("{d} not in {table:?}"))).collect();
    assert_eq!(shares, vec![50_000, 33_333, 16_666]);
    // a loader that takes one table and is then ejected
    let log = tmp("daemon");
    let mut a = vec!["-c", FAKE, "fake-allot-scx", log.to_str().unwrap(), "1"];
    a.truncate(5);
    d.scx_mut().start(Path::new("/bin/sh"), &a);
    let t0 = Instant::now();
    while !matches!(d.scx().state(), State::Loaded { .. }) && t0.elapsed() < Duration::from_secs(5) {
        d.poll_scx();
    }
    assert_eq!(d.scheduler_view().kind, "scx");
    assert!(d.scheduler_view().scx_loaded);
    d.feed_scx();
    let t0 = Instant::now();
    while !matches!(d.scx().state(), State::Fallen { .. }) && t0.elapsed() < Duration::from_secs(5) {
        d.poll_scx();
        std::thread::sleep(Duration::from_millis(10));
    }
    let v = d.scheduler_view();
    assert_eq!((v.kind.as_str(), v.scx_loaded, v.scx_ejections), ("cgroup", false, 1));
    assert!(crate::config_scheduler::line(&v).contains("fell back at") && v.scx.contains("disabled by sysrq-S"), "{v:?}");
    // every job kept, its cgroup weight still written
    assert_eq!(d.desired().jobs.len(), 3);
    let sent = std::fs::read_to_string(&log).unwrap();
    for dir in &dirs {
        assert!(sent.contains(dir.as_str()), "{sent}");
        assert!(w.lock().unwrap().dirs[dir].weight >= 1);
    }
    let _ = std::fs::remove_file(&log);
}

#[test]
fn a_loader_that_cannot_start_is_a_fall_said_at_once() {
    let w = super::tests::world();
    let mut d = super::tests::start(&w, None);
    d.start_scx(Path::new("/nonexistent/allot-scx"));
    let v = d.scheduler_view();
    assert_eq!((v.kind.as_str(), v.scx_loaded, v.scx_ejections), ("cgroup", false, 0));
    assert!(v.scx.contains("could not start /nonexistent/allot-scx"), "{v:?}");
    // stopped (a reload to kind = "cgroup", the daemon's stop): nothing more is said of it
    d.stop_scx();
    assert_eq!(d.scx().state(), &State::Off);
    let line = crate::config_scheduler::line(&d.scheduler_view());
    assert!(line.starts_with("scheduler         cgroup (sched_ext ") && !line.contains("fell back"), "{line}");
}

#[test]
fn the_table_carries_a_hard_cap_background_and_the_boost() {
    use super::tests::{peer, start as daemon, world};
    use crate::proto::{Request, Response};
    let w = world();
    for pid in [100, 101, 102] {
        w.lock().unwrap().spawn(pid, 3000, "/", "hog");
    }
    let mut d = daemon(&w, None);
    let mut dirs = vec![];
    let runs: [(i32, Option<&str>, bool); 3] = [(100, Some("0.3!"), false), (101, None, true), (102, None, false)];
    for (pid, cap, background) in runs {
        let cap = cap.map(|c| c.parse::<allot_model::Cap>().unwrap());
        let r = d
            .handle(Request::Run { tickets: None, currency: None, cap, background, force: false, mem: None, oom_group: false }, &peer(&w, 3000, pid))
            .unwrap();
        let Response::Job(j) = r else { panic!("{r:?}") };
        dirs.push(j.cgroup.rsplit('/').next().unwrap().to_string());
    }
    let table = d.scx_table();
    let row = |name: &str| table.iter().find(|r| r.dir.ends_with(&format!("/{name}"))).unwrap_or_else(|| panic!("{name} not in {table:?}")).clone();
    let (capped, bg, plain) = (row(&dirs[0]), row(&dirs[1]), row(&dirs[2]));
    assert_eq!((capped.cap, capped.background), (Some(0.3), false));
    assert_eq!((bg.cap, bg.background), (None, true));
    assert_eq!((plain.cap, plain.background), (None, false));
    // [policy] boost is on by default: a foreground job carries its entitlement over the
    // boost window (the BPF side boosts its wakeups by it), a background job none
    let ent = |share| allot_model::wake::entitlement_ns(share, 100, allot_model::wake::DEFAULT_WINDOW_NS);
    assert_eq!((capped.boost_ns, plain.boost_ns, bg.boost_ns), (ent(capped.share), ent(plain.share), 0));
    assert!(plain.boost_ns > 0, "{table:?}");
    let want = format!(" cap=0.3 boost={} /fake-mount/", capped.boost_ns);
    assert!(capped.line().starts_with("job ") && capped.line().contains(&want), "{}", capped.line());
    assert!(bg.line().contains(" background /fake-mount/") && !bg.line().contains("boost="), "{}", bg.line());
    // background weighs as an idle cgroup beside the foreground jobs
    assert!(bg.share * 100 < plain.share, "{table:?}");
    // The default line is the BPF side's own (no line= term); focus moves a job's line to
    // the whole window, a configured boost_below every other job's to that fraction.
    assert_eq!(plain.line_ns, 0);
    let r = d.handle(Request::Focus { pid: crate::proto::Pid::new(102).unwrap(), on: true }, &peer(&w, 3000, 102)).unwrap();
    assert!(matches!(r, Response::Changed(_)), "{r:?}");
    d.cfg_mut().policy.boost_below = 0.25;
    let table = d.scx_table();
    let row = |name: &str| table.iter().find(|r| r.dir.ends_with(&format!("/{name}"))).unwrap().clone();
    let (capped, bg, plain) = (row(&dirs[0]), row(&dirs[1]), row(&dirs[2]));
    assert_eq!(plain.line_ns, allot_model::wake::DEFAULT_WINDOW_NS, "focused");
    assert!(plain.line().contains(&format!(" boost={} line=500000000 /", plain.boost_ns)), "{}", plain.line());
    assert_eq!(capped.line_ns, allot_model::wake::line_ns(capped.boost_ns, 0.25, false, allot_model::wake::DEFAULT_WINDOW_NS));
    assert!(capped.line_ns > 0 && capped.line_ns * 4 <= capped.boost_ns + 2, "{capped:?}");
    assert_eq!(bg.line_ns, 0, "background: never boosted, no line");
    // [policy] boost_window_ms: the entitlement and a focused job's line are over it, and
    // the loader is told it
    d.cfg_mut().policy.boost_window_ms = 100;
    let table = d.scx_table();
    let row = |name: &str| table.iter().find(|r| r.dir.ends_with(&format!("/{name}"))).unwrap().clone();
    let (capped100, plain100) = (row(&dirs[0]), row(&dirs[2]));
    assert_eq!(capped100.boost_ns, allot_model::wake::entitlement_ns(capped100.share, 100, 100_000_000));
    assert!(capped100.boost_ns * 5 <= capped.boost_ns + 5 && capped100.boost_ns > 0, "{capped100:?} {capped:?}");
    assert!(plain100.line().contains(" line=100000000 /"), "{}", plain100.line());
    assert_eq!(d.loader_args()[1..], ["--boost-window-ms", "100"]);
    // A loader started with another window is sent no table made for this one (a reload
    // that changed it plans before the new loader starts).
    d.scx_mut().start(Path::new("/nonexistent/allot-scx"), &["serve", "--boost-window-ms", "500"]);
    assert!(!d.loader_window_current());
    d.cfg_mut().policy.boost_window_ms = 500;
    assert!(d.loader_window_current());
    d.cfg_mut().policy.boost_window_ms = 100;
    // The boost off: no boost term, so no line either, focused or not.
    d.cfg_mut().policy.boost = false;
    assert!(d.scx_table().iter().all(|r| r.boost_ns == 0 && r.line_ns == 0 && !r.line().contains("line=")));
}

#[test]
fn every_job_of_a_capped_currency_carries_the_currencys_cap() {
    use super::tests::{peer, start as daemon, world};
    use crate::proto::{Request, Response};
    let w = world();
    for (pid, uid) in [(100, 3000), (101, 3000), (102, 3001)] {
        w.lock().unwrap().spawn(pid, uid, "/", "hog");
    }
    let mut d = daemon(&w, None);
    d.set_cfg(
        crate::config::Config::parse("t.toml".as_ref(), "[users]\nmin_uid = 3000\n[funding]\n3000 = { funding = 100, cap = \"0.4!\" }\n").unwrap(),
    );
    let mut dirs = vec![];
    for (pid, uid) in [(100, 3000), (101, 3000), (102, 3001)] {
        let r = d
            .handle(
                Request::Run { tickets: None, currency: None, cap: None, background: pid == 101, force: false, mem: None, oom_group: false },
                &peer(&w, uid, pid),
            )
            .unwrap();
        let Response::Job(j) = r else { panic!("{r:?}") };
        dirs.push(j.cgroup.rsplit('/').next().unwrap().to_string());
    }
    let table = d.scx_table();
    let row = |name: &str| table.iter().find(|r| r.dir.ends_with(&format!("/{name}"))).unwrap_or_else(|| panic!("{name} not in {table:?}")).clone();
    // both of user 3000's jobs, the background one too, name the same budget; 3001's none
    let want = Some(("user-3000".to_string(), 0.4));
    assert_eq!((row(&dirs[0]).currency_cap, row(&dirs[1]).currency_cap), (want.clone(), want));
    assert_eq!(row(&dirs[2]).currency_cap, None);
    assert!(row(&dirs[0]).line().contains(" currency-cap=user-3000:0.4 "), "{}", row(&dirs[0]).line());
    assert!(!row(&dirs[2]).line().contains("currency-cap"), "{}", row(&dirs[2]).line());
}
