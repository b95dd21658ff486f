//! Smaller ways in, each closed: pids given from another pid namespace.

mod common;

use common::*;
use std::process::Stdio;

#[test]
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
    assert!(j.as_ref().is_none_or(|j| j["tickets"] != 7), "nothing changed: {j:?}");
    // From the host's namespace the same request is A's to make.
    ok(&d.cli(&["set", &mine.to_string(), "-t", "7"], Some(A)).unwrap());
    assert_eq!(job_with_pid(&show(&d), mine).unwrap()["tickets"], 7);
}
