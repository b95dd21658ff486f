//! The operator's side: the audit trail, `explain`, rules, the metrics endpoint, SIGHUP
//! reloads, real-time tasks in jobs.

mod common;

use common::*;
use std::io::{Read, Write};
use std::process::Command;
use std::time::Duration;

/// A `--json` reply read as the library's type for it.
fn json<T: serde::de::DeserializeOwned>(o: &std::process::Output) -> T {
    serde_json::from_str(&ok(o)).unwrap()
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn every_change_is_audited_and_explained() {
    require_root();
    let _s = serial();
    let mut d = PrivateDaemon::start(exe(), "scan_ms = 200\n[users]\nonly = [\"2901\", \"2902\"]\n").unwrap();
    let mut kids = Kids::default();
    let lab = lab().display().to_string();
    let mine = spawn_as(&d, &mut kids, A, &["sleep", "300"]);
    wait_for("placement", || job_with_pid(&show(&d), mine));
    ok(&d.cli(&["set", &mine.to_string(), "-t", "50", "--cap", "0.4!"], Some(A)).unwrap());
    refused(&d.cli(&["set", &mine.to_string(), "-t", "5000"], Some(B)).unwrap(), &["belongs to"]);
    ok(&d.cli(&["fund", "2901", "200"], None).unwrap());
    let soft = d.run_job(&["--cap", "0.3"], &[&lab, "workload", "cpu"], None).unwrap();
    let rival = d.run_job(&[], &[&lab, "workload", "cpu"], None).unwrap();
    for p in [soft, rival] {
        d.wait_exec(p).unwrap();
        pin(p, 1);
    }
    // The file holds every user's requests: root's only.
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(d.dir.join("audit.log")).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600, "audit.log is root's only");
    // Root sees every record, with who asked and the settings before and after.
    let log = json::<LogView>(&d.cli(&["--json", "log"], None).unwrap());
    let recs = log.records;
    let set = recs.iter().find(|r| r.request.starts_with("set") && r.uid == A).expect("A's set is recorded");
    let c = &set.changes[0];
    assert!(c.before.is_empty() || c.before == "-" || c.before.contains("tickets 100"), "{set:?}");
    assert!(c.after.contains("tickets 50, cap 0.4!"), "{set:?}");
    let refusal = recs.iter().find(|r| r.uid == B).expect("B's refusal is recorded");
    assert!(refusal.refused.as_deref().unwrap().contains("belongs to"));
    let fund = recs.iter().find(|r| r.request == "fund 2901 200").unwrap();
    assert_eq!(fund.changes[0].after, "funding 200");
    assert_eq!(fund.uid, 0);
    assert!(recs.iter().filter(|r| r.request.starts_with("run")).count() >= 2);
    // A sees her own requests and the changes to her jobs, not root's other work.
    let hers = json::<LogView>(&d.cli(&["--json", "log"], Some(A)).unwrap());
    let hers = hers.records;
    assert!(hers.iter().any(|r| r.uid == A) && hers.iter().any(|r| r.request == "fund 2901 200"));
    assert!(!hers.iter().any(|r| r.request.starts_with("run")), "root's runs are not A's business");
    // --job filters.
    let job = job_with_pid(&show(&d), mine).unwrap().id.clone();
    let by_job = json::<LogView>(&d.cli(&["--json", "log", "--job", &job], None).unwrap());
    assert!(by_job.records.iter().all(|r| r.jobs.iter().any(|j| j == &job)));

    // explain: a boosted (sleeping) job, a capped one, a held soft cap.
    let reason = |v: &ExplainView, s: &str| v.reasons.iter().find(|r| r.state == s).cloned().unwrap();
    // Until its first measurement a new job is boosted as "new"; then as "asleep".
    let boosted = wait_for("the job measured", || {
        let v = json::<ExplainView>(&d.cli(&["--json", "explain", &job], Some(A)).unwrap());
        (!reason(&v, "boost").because.starts_with("new")).then_some(v)
    });
    let b = reason(&boosted, "boost");
    assert!(b.on);
    assert!(b.because.contains("asleep"), "{b:?}");
    assert!(reason(&boosted, "cap").because.contains("hard cap 0.4!"), "{boosted:?}");
    let held = wait_for("the soft cap held", || {
        let v = json::<ExplainView>(&d.cli(&["--json", "explain", &soft.to_string()], None).unwrap());
        reason(&v, "held").on.then_some(v)
    });
    let h = reason(&held, "held");
    assert!(h.because.contains("soft cap 0.3") && h.because.contains("waited"), "{h:?}");
    assert!(held.window > 0.0, "{held:?}");
    let cpu_bound = reason(&held, "boost");
    assert!(!cpu_bound.on);
    // Another user's process by pid is not B's to explain (its job id is).
    refused(&d.cli(&["explain", &mine.to_string()], Some(B)).unwrap(), &["not yours"]);
    ok(&d.cli(&["explain", &job], Some(B)).unwrap());
    d.stop().unwrap();
}

const RULES: &str = r#"scan_ms = 200
[users]
only = ["2901", "2902"]
[currencies.ci]
# A rule never grants a currency: B may use ci, so by-user may put B there.
users = ["2901", "2902"]

[[rules]]
name = "by-comm"
comm = "sleep"
tickets = 42

[[rules]]
name = "by-exe"
exe = "*/yes"
cap = "0.2!"

[[rules]]
name = "by-cmdline"
cmdline = "re:^tail -f /dev/null"
background = true

[[rules]]
name = "by-group"
group = "2977"
comm = "cat"
tickets = 77

[[rules]]
name = "by-user"
user = "2902"
currency = "ci"
"#;

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn rules_place_processes_by_every_kind_of_match() {
    require_root();
    let _s = serial();
    let d = PrivateDaemon::start(exe(), RULES).unwrap();
    let mut kids = Kids::default();
    let sleeper = spawn_as(&d, &mut kids, A, &["sleep", "300"]);
    let yes = spawn_as(&d, &mut kids, A, &["yes"]);
    let tail = spawn_as(&d, &mut kids, A, &["tail", "-f", "/dev/null"]);
    let cat = kids.add(
        d.shelter
            .command("setpriv", None)
            .args(["--reuid=2901", "--regid=2901", "--groups=2977", "cat"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let other = spawn_as(&d, &mut kids, B, &["tail", "-f", "/etc/passwd"]);
    let plain = spawn_as(&d, &mut kids, A, &["tail", "-f", "/etc/hostname"]);
    // A process is placed at its uid change (still `setpriv`) and placed again by its rule
    // at exec: wait for the whole outcome, which a missed exec event would never reach.
    let v = wait_for("rules applied", || {
        let v = show(&d);
        let placed = [sleeper, yes, tail, cat, other, plain].iter().all(|&p| job_with_pid(&v, p).is_some());
        let j = |p| job_with_pid(&v, p).unwrap();
        let ruled = placed
            && j(sleeper).tickets == 42
            && j(yes).cap.as_deref() == Some("0.2!")
            && j(tail).background
            && j(cat).tickets == 77
            && j(other).currency == "ci";
        ruled.then_some(v)
    });
    let j = |p| job_with_pid(&v, p).unwrap();
    assert_eq!(j(sleeper).tickets, 42);
    assert_eq!(j(yes).cap.as_deref(), Some("0.2!"));
    assert!(j(tail).background);
    assert_eq!(j(cat).tickets, 77);
    assert_eq!(j(other).currency, "ci", "by-user puts B's processes in ci");
    assert!(j(plain).id.ends_with("/default"), "no rule: the default job");
    // rules test agrees.
    let t = json::<allot::proto::RulesView>(&d.cli(&["--json", "rules", "test", &yes.to_string()], None).unwrap());
    assert!(t.matched.as_deref().unwrap().starts_with("by-exe"), "{t:?}");
    let t = json::<allot::proto::RulesView>(&d.cli(&["--json", "rules", "test", &plain.to_string()], Some(A)).unwrap());
    assert!(t.matched.is_none(), "{t:?}");
    assert!(t.checked.iter().all(|c| !c.matches));
    drop(kids);
    // A bad rule is refused with file:line, and the daemon does not start.
    let mut bad = PrivateDaemon::start(exe(), "[users]\nonly = [\"2901\"]\n").unwrap();
    let path = bad.dir.join("allot.toml");
    std::fs::write(&path, "[users]\nonly = [\"2901\"]\n\n[[rules]]\ncomm = \"x\"\ntickets = 0\n").unwrap();
    bad.terminate().unwrap();
    let err = bad.launch(true).unwrap_err().to_string();
    assert!(err.contains("allot.toml:4: rule 1: tickets must be a whole number 1..10000"), "{err}");
    std::fs::write(&path, "[users]\nonly = [\"2901\"]\n").unwrap();
    bad.launch(true).unwrap();
    bad.stop().unwrap();
}

/// The daemon hears of execs only while its config has rules (a build host's execs would
/// wake it a thousand times a second for nothing): a reload that adds the first rule
/// subscribes to them, and the rule applies at the next exec of a process already placed.
#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn a_rule_added_by_a_reload_applies_at_the_next_exec() {
    require_root();
    let _s = serial();
    let cfg = "scan_ms = 200\n[users]\nonly = [\"2901\"]\n";
    let mut d = PrivateDaemon::start(exe(), cfg).unwrap();
    let mut kids = Kids::default();
    // Placed as `sh` (no rule then), it execs `sleep` two seconds later.
    let pid = spawn_as(&d, &mut kids, A, &["sh", "-c", "sleep 2; exec sleep 300"]);
    wait_for("placed as sh", || job_with_pid(&show(&d), pid).filter(|j| j.id.ends_with("/default")));
    std::fs::write(d.dir.join("allot.toml"), format!("{cfg}\n[[rules]]\nname = \"by-comm\"\ncomm = \"sleep\"\ntickets = 42\n")).unwrap();
    unsafe { libc::kill(d.daemon_pid().unwrap() as i32, libc::SIGHUP) };
    wait_for("the reload", || {
        let log = json::<LogView>(&d.cli(&["--json", "log"], None).unwrap());
        log.records.iter().any(|r| r.request.starts_with("reload") && r.refused.is_none()).then_some(())
    });
    let j = wait_for("the rule applied at exec", || job_with_pid(&show(&d), pid).filter(|j| j.tickets == 42));
    assert!(!j.id.ends_with("/default"), "{j:?}");
    drop(kids);
    d.stop().unwrap();
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn metrics_are_served_on_loopback_and_sighup_reloads() {
    require_root();
    let _s = serial();
    let port = 20000 + (std::process::id() % 20000) as u16;
    let cfg = format!("[metrics]\nlisten = \"127.0.0.1:{port}\"\n");
    let mut d = PrivateDaemon::start(exe(), &cfg).unwrap();
    let j = d.run_job(&["-t", "321"], &["sleep", "300"], None).unwrap();
    d.wait_exec(j).unwrap();
    let get = |path: &str| {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes()).unwrap();
        let mut r = String::new();
        s.read_to_string(&mut r).unwrap();
        r
    };
    let r = get("/metrics");
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    let id = job_with_pid(&show(&d), j).unwrap().id.clone();
    assert!(r.lines().any(|l| l.starts_with("allot_job_tickets{") && l.contains(&format!("job_id=\"{id}\"")) && l.ends_with(" 321")), "{r}");
    assert!(get("/other").starts_with("HTTP/1.1 404"));
    // SIGHUP: a good config is taken, a bad one is refused and the old one kept.
    let path = d.dir.join("allot.toml");
    std::fs::write(&path, format!("default_funding = 150\n{cfg}")).unwrap();
    let pid = d.daemon_pid().unwrap() as i32;
    unsafe { libc::kill(pid, libc::SIGHUP) };
    wait_for("the reload", || (json::<FundingView>(&d.cli(&["--json", "fund", "root"], None).unwrap()).funding == 150).then_some(()));
    let st = json::<StatusView>(&d.cli(&["--json", "status"], None).unwrap());
    let r = st.last_reload.as_ref().expect("a reload");
    assert!(r.refused.is_none() && r.time > 0.0, "{st:?}");
    assert!(get("/metrics").lines().any(|l| l == "allot_config_last_reload_successful 1"));
    std::fs::write(&path, "default_funding = 0\n").unwrap();
    unsafe { libc::kill(pid, libc::SIGHUP) };
    // The outcome is in status, the metrics and the log: a refused reload never looks taken.
    let refused = wait_for("the refused reload in status", || {
        json::<StatusView>(&d.cli(&["--json", "status"], None).unwrap()).last_reload.and_then(|r| r.refused)
    });
    assert!(refused.contains("allot.toml:1") && refused.contains("default_funding"), "FILE:LINE and the setting: {refused}");
    let text = ok(&d.cli(&["status"], None).unwrap());
    assert!(text.lines().any(|l| l.starts_with("last reload") && l.contains("REFUSED") && l.contains("allot.toml:1")), "{text}");
    // (a scrape's snapshot is reused for 200 ms)
    wait_for("the refused reload in the metrics", || get("/metrics").lines().any(|l| l == "allot_config_last_reload_successful 0").then_some(()));
    assert_eq!(json::<FundingView>(&d.cli(&["--json", "fund", "root"], None).unwrap()).funding, 150, "the old config stays");
    assert!(d.log().contains("reload refused") && d.log().contains("the config in force is kept"), "{}", d.log());
    assert!(d.daemon_pid().is_some_and(|p| unsafe { libc::kill(p as i32, 0) } == 0), "the daemon lives");
    let log = json::<LogView>(&d.cli(&["--json", "log"], None).unwrap());
    assert!(log.records.iter().any(|r| r.request.starts_with("reload") && r.refused.is_some()));
    d.stop().unwrap();
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn real_time_tasks_work_in_jobs() {
    require_root();
    let _s = serial();
    let d = PrivateDaemon::start(exe(), "").unwrap();
    let o = d.cli(&["run", "--", "chrt", "-f", "10", "true"], None).unwrap();
    assert!(o.status.success(), "chrt -f 10 in a job: {}", String::from_utf8_lossy(&o.stderr));
    let st = json::<StatusView>(&d.cli(&["--json", "status"], None).unwrap());
    eprintln!("{}", st.rt);
    if std::path::Path::new("/sys/fs/cgroup/cpu/cpu.rt_runtime_us").exists() {
        assert!(st.rt.contains("real-time group scheduling"), "{st:?}");
    }
    // A real-time process moves into a job too (the kernel refuses it where runtime is 0).
    let mut rt = Command::new("chrt").args(["-f", "5", "sleep", "300"]).spawn().unwrap();
    let o = d.cli(&["set", &rt.id().to_string(), "-t", "200"], None).unwrap();
    rt.kill().unwrap();
    rt.wait().unwrap();
    assert!(o.status.success(), "a SCHED_FIFO process given a job: {}", String::from_utf8_lossy(&o.stderr));
}

/// `[outside] weight`: allot's whole tree against a process outside it, on one CPU (the
/// jobs' share follows the weight, 300:100 then 100:100 after a SIGHUP reload).
#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn the_tree_weighs_what_the_config_says_against_load_outside() {
    require_root();
    let _s = serial();
    let cfg = "[outside]\nweight = 300\n";
    let mut d = PrivateDaemon::start(exe(), cfg).unwrap();
    assert_eq!(d.controller().unwrap().weight("").unwrap(), 300);
    let lab = lab().display().to_string();
    let inside = d.run_job(&[], &[&lab, "workload", "cpu"], None).unwrap();
    d.wait_exec(inside).unwrap();
    let mut outside = Command::new(&lab).args(["workload", "cpu"]).stdout(std::process::Stdio::null()).spawn().unwrap();
    pin(inside, 1);
    pin(outside.id(), 1);
    let share = |what: &str| {
        std::thread::sleep(Duration::from_millis(1500));
        let (a, b) = std::thread::scope(|s| {
            let a = s.spawn(|| rate(inside, 3.0));
            let b = s.spawn(|| rate(outside.id(), 3.0));
            (a.join().unwrap(), b.join().unwrap())
        });
        let f = a / (a + b);
        eprintln!("{what}: the job {a:.3} CPU, outside {b:.3} CPU: share {f:.3}");
        f
    };
    let heavy = share("weight 300");
    std::fs::write(d.dir.join("allot.toml"), format!("{}\n[placement]\nfrom = [\"{}\"]\n", "[outside]\nweight = 100\n", d.shelter.path())).unwrap();
    unsafe { libc::kill(d.daemon_pid().unwrap() as i32, libc::SIGHUP) };
    wait_for("the reload", || (d.controller().unwrap().weight("").unwrap() == 100).then_some(()));
    let even = share("weight 100");
    outside.kill().unwrap();
    outside.wait().unwrap();
    d.stop().unwrap();
    assert!((heavy - 0.75).abs() < 0.07, "weight 300 against one nice-0 process: 0.75 of the CPU, got {heavy:.3}");
    assert!((even - 0.5).abs() < 0.07, "weight 100: half, got {even:.3}");
}
