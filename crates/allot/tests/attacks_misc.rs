//! Smaller ways in, each closed: pids given from another pid namespace.

mod common;

use common::*;
use std::process::Stdio;

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn pids_from_another_pid_namespace_are_refused_not_misread() {
    require_root();
    let _s = serial();
    let d = PrivateDaemon::start(exe(), "[users]\nonly = [\"2901\"]\n").unwrap();
    let mut kids = Kids::default();
    // A's own process on the host: its pid is what a request from the host means.
    let mine = spawn_as(&d, &mut kids, A, &["sleep", "300"]);
    let e = exe().display().to_string();
    let sock = d.socket.display().to_string();
    // The same request from a new pid namespace (a container) names another process there.
    let in_ns = |pid: u32| {
        std::process::Command::new("unshare")
            .args(["--pid", "--fork", "--", "setpriv", &format!("--reuid={A}"), &format!("--regid={A}"), "--clear-groups"])
            .args([&e, "--socket", &sock, "set", &pid.to_string(), "-t", "7"])
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    refused(&in_ns(mine), &["another pid namespace", "run allot from the host's pid namespace"]);
    let j = job_with_pid(&show(&d), mine);
    assert!(j.as_ref().is_none_or(|j| j.tickets != 7), "nothing changed: {j:?}");
    // From the host's namespace the same request is A's to make.
    ok(&d.cli(&["set", &mine.to_string(), "-t", "7"], Some(A)).unwrap());
    assert_eq!(job_with_pid(&show(&d), mine).unwrap().tickets, 7);
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn two_daemons_never_race_for_the_processes_of_one_source() {
    require_root();
    let _s = serial();
    let first = PrivateDaemon::start(exe(), "scan_ms = 200\n[users]\nonly = [\"2901\"]\n").unwrap();
    // A second daemon told to place from the first one's source.
    let cfg = format!("scan_ms = 200\n[users]\nonly = [\"2901\"]\n[placement]\nfrom = [\"{}\"]\n", first.shelter.path());
    let second = PrivateDaemon::start(exe(), &cfg).unwrap();
    let st = status(&second);
    assert!(st.placement.contains("another allot daemon places from there"), "{st:?}");
    assert!(second.log().contains("another allot daemon places processes from cgroup"), "{}", second.log());
    let mut kids = Kids::default();
    let pids: Vec<u32> = (0..20).map(|_| spawn_as(&first, &mut kids, A, &["sleep", "300"])).collect();
    for &p in &pids {
        wait_for("placed by the first daemon", || cgroup_of(p).contains(&first.root_name).then_some(()));
    }
    // What must not happen has no event to wait for: give both daemons three scans
    // (scan_ms 200), then look.
    std::thread::sleep(std::time::Duration::from_millis(600));
    for &p in &pids {
        let cg = cgroup_of(p);
        assert!(cg.contains(&first.root_name) && !cg.contains(&second.root_name), "process {p} is in {cg}");
    }
    assert!(show(&second).jobs.is_empty(), "the second daemon took nothing");
}
