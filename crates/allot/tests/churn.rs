//! Job churn: jobs made and reaped by the hundred leave the tree consistent: every
//! real-time budget write the kernel is given is one it accepts, and a job emptied by a
//! request is reaped like one whose processes ended.

mod common;

use common::*;
use std::process::Stdio;

/// Real-time group scheduling (cgroup v1 with CONFIG_RT_GROUP_SCHED) is on this kernel.
fn rt_groups() -> bool {
    std::path::Path::new("/sys/fs/cgroup/cpu/cpu.rt_runtime_us").exists()
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn short_jobs_by_the_hundred_leave_every_real_time_write_accepted() {
    require_root();
    let _s = serial();
    let d = PrivateDaemon::start(
        exe(),
        "[users]\nauto_place = false\n[limits]\nrequests_per_second = 1000\nrequest_burst = 1000\n[currencies.lab]\n[currencies.lab2]\n",
    )
    .unwrap();
    let e = exe().display().to_string();
    let sock = d.socket.display().to_string();
    // 180 jobs in three currencies, each living 0–0.8 s: dying task groups pile up while
    // jobs keep coming, and each arrival or departure divides the real-time budget again.
    let script = format!(
        "for i in $(seq 1 60); do for c in lab lab2 root; do {e} --socket {sock} run --strict --currency $c -- sleep 0.$((i % 9)) & done; sleep 0.1; done; wait"
    );
    let o = std::process::Command::new("bash").args(["-c", &script]).stdin(Stdio::null()).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    wait_for("every churned job reaped", || {
        let v = show(&d);
        v.jobs.is_empty().then_some(())
    });
    let st = status(&d);
    let log = d.log();
    let refused = log.lines().filter(|l| l.contains("cpu.rt_runtime_us")).count();
    eprintln!("180 jobs made and reaped; {refused} real-time budget writes refused; status rt: {}", st.rt);
    if rt_groups() {
        assert!(st.rt.contains("real-time group scheduling"), "{st:?}");
    }
    assert_eq!(refused, 0, "real-time budget writes the kernel refused:\n{log}");
    assert_eq!(st.counters.write_errors, 0, "{st:?}");
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn a_job_emptied_by_move_or_set_is_reaped() {
    require_root();
    let _s = serial();
    let mut d = PrivateDaemon::start(exe(), "[users]\nauto_place = false\n[currencies.lab]\n").unwrap();
    let p = d.run_job(&[], &["sleep", "300"], None).unwrap();
    d.wait_exec(p).unwrap();
    let first = job_with_pid(&show(&d), p).unwrap().id.clone();
    // A tick has read the job holding the process and planned it idle: a job in the last
    // plan has an entitlement (an idle one, what it would get if it woke), one not yet read
    // has none.
    poll_until("the job read and planned idle", std::time::Duration::from_secs(10), || {
        let j = job_with_pid(&show(&d), p);
        check(j.as_ref().is_some_and(|j| j.entitlement > 0.0 && !j.active), || j.map(|j| (j.entitlement, j.active)))
    });
    ok(&d.cli(&["move", &p.to_string(), "lab"], None).unwrap());
    ok(&d.cli(&["move", &p.to_string(), "lab"], None).unwrap());
    let last = job_with_pid(&show(&d), p).unwrap().id.clone();
    // Past the grace period (3 s) the jobs it left are gone; its own stays.
    let jobs = wait_for("the emptied jobs reaped", || {
        let v = show(&d);
        let ids: Vec<String> = v.jobs.iter().map(|j| j.id.clone()).collect();
        (ids.len() == 1).then_some(ids)
    });
    assert_eq!(jobs, vec![last.clone()], "only the job it is in is left (it started in {first})");
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn a_job_removed_by_hand_from_one_hierarchy_only_is_reported_once() {
    require_root();
    let _s = serial();
    // The development machine and CI mount cpu and cpuacct apart (cgroup v1): a job is a
    // directory in each, and an admin may remove one half.
    assert!(
        std::path::Path::new("/sys/fs/cgroup/cpuacct/cgroup.procs").exists(),
        "this test needs cgroup v1 with cpuacct mounted apart from cpu (as on the machines CI runs on)"
    );
    let mut d = PrivateDaemon::start(exe(), "[users]\nauto_place = false\n").unwrap();
    let p = d.run_job(&[], &["sleep", "300"], None).unwrap();
    d.wait_exec(p).unwrap();
    let rel = job_with_pid(&show(&d), p).unwrap().cgroup.clone();
    // By hand: the process out of the job's cpu half, and that half removed.
    std::fs::write("/sys/fs/cgroup/cpu/cgroup.procs", p.to_string()).unwrap();
    std::fs::remove_dir(format!("/sys/fs/cgroup/cpu/{}/{rel}", d.root_name)).unwrap();
    std::thread::sleep(std::time::Duration::from_secs(6));
    let n = d.log().lines().filter(|l| l.contains("could not remove the empty job directory")).count();
    eprintln!("the half-removed job was reported {n} time(s) in 6 s");
    assert!(n <= 1, "reported once, not every tick:\n{}", d.log());
    d.kill_jobs();
}
