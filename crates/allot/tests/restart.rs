//! Desired, observed and applied state kept apart: a crash never turns an
//! adjustment into a setting, a dead daemon leaves no job worse off than its settings, an
//! outside change is re-asserted, and no program sees fewer CPUs than it may use.

mod common;

use common::*;
use std::process::Command;
use std::time::{Duration, Instant};

const CONFIG: &str = "scan_ms = 200\n[users]\nonly = [\"2901\", \"2902\"]\n";

/// What a user set, per job: id, tickets, cap, background, focus.
fn settings(v: &ShowView) -> Vec<String> {
    let mut k: Vec<String> = v
        .jobs
        .iter()
        .filter(|j| !j.pids.as_ref().is_some_and(|p| p.is_empty()))
        .map(|j| format!("{} t={} cap={:?} bg={} focus={}", j.id, j.tickets, j.cap, j.background, j.focus))
        .collect();
    k.sort();
    k
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn a_crash_never_turns_an_adjustment_into_a_setting() {
    require_root();
    let _s = serial();
    let mut d = PrivateDaemon::start_persistent(exe(), CONFIG).unwrap();
    let mut kids = Kids::default();
    let lab = lab().display().to_string();
    // A's idle login process (auto-placed, boosted: it sleeps).
    let idle = spawn_as(&d, &mut kids, A, &["sleep", "300"]);
    // B's busy process and a niced one beside it: nice emulation splits the niced one off.
    let busy = spawn_as(&d, &mut kids, B, &[&lab, "workload", "cpu"]);
    let niced = spawn_as(&d, &mut kids, B, &["nice", "-n", "10", &lab, "workload", "cpu"]);
    pin(busy, 0);
    pin(niced, 0);
    // Jobs made by request: 300 tickets; focused; a soft cap held against a rival.
    let run300 = d.run_job(&["-t", "300"], &["sleep", "300"], Some(A)).unwrap();
    let focused = d.run_job(&[], &["sleep", "300"], Some(A)).unwrap();
    let soft = d.run_job(&["--cap", "0.3"], &[&lab, "workload", "cpu"], None).unwrap();
    let rival = d.run_job(&[], &[&lab, "workload", "cpu"], None).unwrap();
    for p in [run300, focused, soft, rival] {
        d.wait_exec(p).unwrap();
    }
    pin(soft, 1);
    pin(rival, 1);
    ok(&d.cli(&["focus", &focused.to_string()], Some(A)).unwrap());
    let before = wait_for("boost, split and hold", || {
        let v = show(&d);
        let j = |p| job_with_pid(&v, p);
        let idle_boosted = j(idle)?.boost;
        let split = j(niced)?.id != j(busy)?.id;
        let held = j(soft)?.held;
        (idle_boosted && split && held).then_some(v)
    });
    let cg = d.controller().unwrap();
    let idle_rel = job_with_pid(&before, idle).unwrap().cgroup.clone();
    let soft_rel = job_with_pid(&before, soft).unwrap().cgroup.clone();
    assert_eq!(cg.weight(&idle_rel).unwrap(), 10_000, "the idle default job's boost is applied (weight x100)");
    assert!(cg.max(&soft_rel).unwrap().is_some(), "the held soft cap is written as cpu.max");
    let want = settings(&before);
    for round in 0..5 {
        d.crash();
        // While the daemon is down, the tree holds odd adjusted values (as a dead daemon, or
        // another tool, could leave them): none may come back as a setting.
        cg.set_weight(&idle_rel, 4242).unwrap();
        cg.set_max(&soft_rel, Some(allot_linux::cgroup::Max { quota_us: 80_000, period_us: 100_000 })).unwrap();
        d.launch(false).unwrap();
        let w = cg.weight(&idle_rel).unwrap();
        assert!(w == 100 || w == 10_000, "round {round}: the weight is recomputed from 100 tickets (boosted or not), not inherited: {w}");
        let q = cg.max(&soft_rel).unwrap().map(|m| m.quota_us);
        assert!(q.is_none() || q == Some(30_000), "round {round}: the soft cap's quota is recomputed, not inherited: {q:?}");
        let after = show(&d);
        assert_eq!(settings(&after), want, "round {round}: every job keeps what its user set, nothing else");
        let j = job_with_pid(&after, soft).unwrap();
        assert_eq!(j.cap.as_deref(), Some("0.3"), "a held soft cap stays soft");
        assert!(job_with_pid(&after, focused).unwrap().focus);
        // The adjustments come back by the plan, from measurements, not from the tree.
        wait_for("the plan re-applied", || {
            let v = show(&d);
            (job_with_pid(&v, idle)?.boost && job_with_pid(&v, soft)?.held).then_some(())
        });
    }
    // A lost state file loses what it held (300 tickets, the soft cap, the focus), never
    // more, and never turns an adjustment into a setting.
    d.crash();
    std::fs::remove_file(d.dir.join("state.json")).unwrap();
    d.launch(false).unwrap();
    let lost = show(&d);
    for j in &lost.jobs {
        assert_eq!(j.tickets, 100, "{j:?}");
        assert!(j.cap.is_none(), "no quota read back as a cap: {j:?}");
        assert!(!j.focus);
    }
    assert!(job_with_pid(&lost, run300).is_some() && job_with_pid(&lost, soft).is_some(), "jobs are adopted, not lost");
    d.stop().unwrap();
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn a_dead_daemon_leaves_a_boosted_job_all_the_cpu_its_settings_allow() {
    require_root();
    let _s = serial();
    let mut d = PrivateDaemon::start(exe(), CONFIG).unwrap();
    let lab = lab().display().to_string();
    let script = format!("sleep 2; exec {lab} workload cpu");
    let j = d.run_job(&[], &["sh", "-c", &script], Some(A)).unwrap();
    d.wait_exec(j).unwrap();
    pin(j, 1);
    let rel = wait_for("boosted", || {
        let v = job_with_pid(&show(&d), j)?;
        v.boost.then(|| v.cgroup.clone())
    });
    d.crash();
    let cg = d.controller().unwrap();
    assert_eq!(cg.max(&rel).unwrap(), None, "the boost leaves no quota behind");
    // It wakes and burns with no daemon: compare with the same program outside allot,
    // on the same CPU, measured right after (the machine may be busy with other work).
    // (Its shell's command line names the hog from the start: the program it runs is the event.)
    poll_until("the job to wake and exec its hog", Duration::from_secs(10), || {
        let exe = std::fs::read_link(format!("/proc/{j}/exe"));
        check(exe.as_ref().is_ok_and(|e| e.as_path() == lab.as_ref() as &std::path::Path), || exe)
    });
    let t0 = Instant::now();
    let inside = rate(j, 2.0);
    unsafe { libc::kill(j as i32, libc::SIGKILL) };
    let mut plain = Command::new(&lab).args(["workload", "cpu"]).stdout(std::process::Stdio::null()).spawn().unwrap();
    pin(plain.id(), 1);
    std::thread::sleep(Duration::from_millis(200));
    let outside = rate(plain.id(), 2.0);
    plain.kill().unwrap();
    plain.wait().unwrap();
    eprintln!(
        "burning after the crash: {inside:.3} CPU in the job vs {outside:.3} CPU outside allot (measured {:.1} s after the crash)",
        t0.elapsed().as_secs_f64()
    );
    assert!(inside >= 0.9 * outside, "a job left boosted by a dead daemon gets what a plain process gets: {inside:.3} vs {outside:.3}");
    let mut d = d;
    d.launch(true).unwrap();
    d.stop().unwrap();
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn an_outside_change_is_reasserted_within_a_second_and_logged_once() {
    require_root();
    let _s = serial();
    let d = {
        let mut d = PrivateDaemon::start(exe(), CONFIG).unwrap();
        let j = d.run_job(&["-t", "300", "--cap", "0.5!"], &["sleep", "300"], None).unwrap();
        d.wait_exec(j).unwrap();
        (d, j)
    };
    let (d, j) = d;
    let v = wait_for("the job", || job_with_pid(&show(&d), j));
    let rel = v.cgroup.clone();
    let cg = d.controller().unwrap();
    let weight = cg.weight(&rel).unwrap();
    let quota = cg.max(&rel).unwrap();
    // Someone rewrites the weight and the quota by hand.
    cg.set_weight(&rel, 7).unwrap();
    cg.set_max(&rel, Some(allot_linux::cgroup::Max { quota_us: 90_000, period_us: 100_000 })).unwrap();
    let t0 = Instant::now();
    wait_for("weight and quota re-asserted", || (cg.weight(&rel).ok()? == weight && cg.max(&rel).ok()? == quota).then_some(()));
    let took = t0.elapsed();
    assert!(took < Duration::from_secs(1), "re-asserted after {took:?}");
    // Someone removes the job's directory (moving its process out first, as rmdir needs).
    for p in cg.procs(&rel).unwrap() {
        cg.move_to_path("/", p).unwrap();
    }
    cg.remove(&rel).unwrap();
    let t1 = Instant::now();
    while t1.elapsed() < Duration::from_secs(5) && !(cg.exists(&rel) && cg.procs(&rel).unwrap_or_default().contains(&(j as i32))) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(cg.exists(&rel) && cg.procs(&rel).unwrap_or_default().contains(&(j as i32)), "not re-created: {}", d.log());
    let took2 = t1.elapsed();
    assert!(took2 < Duration::from_secs(1), "re-created after {took2:?}");
    assert_eq!(cg.max(&rel).unwrap(), quota, "with its cap");
    // Each outside change is logged once it is handled: wait for the three, then count.
    let needles = ["weight changed from outside to 7", "cpu.max changed from outside", "was removed from outside"];
    poll_until("the three outside changes logged", Duration::from_secs(5), || {
        let log = d.log();
        check(needles.iter().all(|n| log.contains(n)), || log.lines().filter(|l| l.contains("outside")).map(String::from).collect::<Vec<_>>())
    });
    let log = d.log();
    let lines = |needle: &str| log.lines().filter(|l| l.contains(needle)).count();
    eprintln!("re-asserted in {took:?}, re-created in {took2:?}\n{}", log.lines().filter(|l| l.contains("outside")).collect::<Vec<_>>().join("\n"));
    assert_eq!(lines("weight changed from outside to 7"), 1, "{log}");
    assert_eq!(lines("cpu.max changed from outside"), 1, "{log}");
    assert_eq!(lines("was removed from outside"), 1, "{log}");
    assert!(log.contains(&rel), "the log names the cgroup");
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn a_new_job_on_a_busy_machine_sees_every_cpu_it_may_use() {
    require_root();
    let _s = serial();
    let mut d = PrivateDaemon::start(exe(), CONFIG).unwrap();
    let lab = lab().display().to_string();
    let mut kids = Kids::default();
    let hogs: Vec<u32> = (0..allot_linux::ncpu()).map(|_| spawn_as(&d, &mut kids, B, &[&lab, "workload", "cpu"])).collect();
    // Busy: every hog placed in a job the daemon has seen compete for CPU.
    poll_until("every hog in an active job", Duration::from_secs(10), || {
        let v = show(&d);
        let jobs: Vec<_> = hogs.iter().map(|&p| job_with_pid(&v, p)).collect();
        check(jobs.iter().all(|j| j.as_ref().is_some_and(|j| j.active)), || jobs)
    });
    let o = d.cli(&["run", "--", &lab, "workload", "ncpu"], Some(A)).unwrap();
    let v: serde_json::Value = serde_json::from_str(&ok(&o)).unwrap();
    eprintln!("{v}");
    assert_eq!(v["available_parallelism"], v["online"], "a new (boosted) job's runtime sees every CPU: {v}");
    d.stop().unwrap();
}

/// `allot daemon --release` (the package's prerm): refused while a daemon serves; then it
/// takes allot's own tree down, and every process runs on, moved back where placement
/// found it.
#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn release_lets_go_of_everything_and_keeps_every_process_running() {
    require_root();
    let _s = serial();
    let mut d = PrivateDaemon::start_persistent(exe(), CONFIG).unwrap();
    let mut kids = Kids::default();
    let job = d.run_job(&["-t", "300", "--cap", "0.5!"], &["sleep", "300"], Some(A)).unwrap();
    d.wait_exec(job).unwrap();
    let placed = spawn_as(&d, &mut kids, B, &["sleep", "301"]);
    wait_for("placement", || {
        let v = show(&d);
        (job_with_pid(&v, job).is_some() && job_with_pid(&v, placed).is_some()).then_some(())
    });
    let release = |d: &PrivateDaemon| {
        let mut c = Command::new(exe());
        c.args(["daemon", "--release", "--cgroup-root", &d.root_name])
            .arg("--socket")
            .arg(&d.socket)
            .arg("--state-dir")
            .arg(&d.dir)
            .arg("--config")
            .arg(d.dir.join("allot.toml"));
        c.output().unwrap()
    };
    let o = release(&d);
    assert!(!o.status.success(), "refused while the daemon serves");
    assert!(String::from_utf8_lossy(&o.stderr).contains("stop it first"), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(job_with_pid(&show(&d), job).is_some(), "a refused release changes nothing");
    d.terminate().unwrap();
    let tree = d.controller().unwrap().root().to_path_buf();
    assert!(tree.is_dir(), "a stopped daemon keeps its tree (restart keeps jobs)");
    let o = release(&d);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!tree.exists(), "the tree {} is gone", tree.display());
    for pid in [job, placed] {
        assert!(std::path::Path::new(&format!("/proc/{pid}")).exists(), "process {pid} still runs");
        assert_eq!(cgroup_of(pid), d.shelter.path(), "process {pid} is back where placement found it");
    }
    drop(kids);
    d.stop().unwrap();
}
