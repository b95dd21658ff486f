//! Safe placement: allot places a user's process only from where no other
//! manager put it, only for human users' uids, and knows users and groups through NSS.

mod common;

use allot_measure::harness::Shelter;
use common::*;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("allot-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn placement_takes_only_what_no_manager_owns_and_only_human_uids() {
    require_root();
    let _s = serial();
    // The daemon sees a subordinate uid range of its own (a rootless container's uids).
    let t = tmpdir("subuid");
    std::fs::write(t.join("subuid"), "someone:66000:100\n").unwrap();
    // The login is a uid above login.defs' UID_MAX (60000), which this daemon's config takes
    // in: a system daemon running beside the test (defaults) never races it for the
    // process, both placing from the root cgroup.
    let cfg = "scan_ms = 200\n[users]\nmax_uid = 70000\nonly = [\"2901\", \"60902\", \"66005\"]\n[placement]\nfrom = [\"/\"]\n";
    let mut d = PrivateDaemon::start(exe(), cfg).unwrap();
    d.binds.push((t.join("subuid"), "/etc/subuid".into()));
    d.terminate().unwrap();
    d.launch(true).unwrap();
    // Declared before the processes, so it is removed after they are gone, even on failure.
    let foreign_cg = Shelter::new().unwrap();
    let mut kids = Kids::default();
    let as_uid = |uid: u32, arg: &str| {
        Command::new("setpriv")
            .args([&format!("--reuid={uid}"), &format!("--regid={uid}"), "--clear-groups", "sleep", arg])
            .stdin(Stdio::null())
            .spawn()
            .unwrap()
    };
    // A plain login process in the root cgroup: placed.
    let login = kids.add(as_uid(60902, "301"));
    // A human user's process that another manager put in its own cgroup: never moved.
    let foreign = kids.add(foreign_cg.command("sleep", Some(A)).arg("302").stdin(Stdio::null()).spawn().unwrap());
    // A subordinate uid in the root cgroup: never placed, whatever the config lists.
    let sub = kids.add(as_uid(66005, "303"));
    // Another allot's job: never taken.
    let mut other = PrivateDaemon::start(exe(), "[users]\nauto_place = false\n").unwrap();
    let theirs = other.run_job(&[], &["sleep", "304"], None).unwrap();
    other.wait_exec(theirs).unwrap();
    let theirs_cg = cgroup_of(theirs);
    wait_for("the login process placed", || job_with_pid(&show(&d), login));
    // What must not happen has no event to wait for: give it several scans (scan_ms 200)
    // after the events, then look.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(cgroup_of(foreign), foreign_cg.path(), "a process in another manager's cgroup is never moved");
    assert_eq!(cgroup_of(sub), "/", "a subordinate uid is never placed");
    assert_eq!(cgroup_of(theirs), theirs_cg, "another allot's job is never taken");
    let st = status(&d);
    let placement = st.placement.as_str();
    assert!(placement.contains("66000") || placement.contains("subordinate"), "status names the exclusions: {placement}");
    // A subordinate uid may look but changes nothing: each would be a currency of its own.
    ok(&d.cli(&["show"], Some(66005)).unwrap());
    refused(&d.cli(&["run", "--", "true"], Some(66005)).unwrap(), &["uid 66005 is not a login user's", "subordinate uids of someone"]);
    refused(&d.cli(&["set", &sub.to_string(), "-t", "5"], Some(66005)).unwrap(), &["not a login user's"]);
    // An explicit request on the foreign process is refused, unless root forces it.
    refused(&d.cli(&["set", &foreign.to_string(), "-t", "5"], Some(A)).unwrap(), &["another manager owns"]);
    refused(&d.cli(&["set", &foreign.to_string(), "-t", "5"], None).unwrap(), &["--force"]);
    ok(&d.cli(&["set", &foreign.to_string(), "-t", "5", "--force"], None).unwrap());
    drop(kids);
    other.stop().unwrap();
    d.stop().unwrap();
    let _ = std::fs::remove_dir_all(&t);
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn users_and_groups_come_through_nss() {
    require_root();
    let _s = serial();
    assert!(
        std::path::Path::new("/var/lib/extrausers").is_dir() && glob_exists("libnss_extrausers.so"),
        "this test needs Debian's libnss-extrausers (apt-get install libnss-extrausers; .ci/run installs it)"
    );
    let t = tmpdir("nss");
    std::fs::create_dir_all(t.join("extrausers")).unwrap();
    std::fs::write(t.join("nsswitch.conf"), "passwd: files extrausers\ngroup: files extrausers\nshadow: files\n").unwrap();
    std::fs::write(
        t.join("extrausers/passwd"),
        "nssuser:x:2950:2950:only in extrausers:/nonexistent:/usr/sbin/nologin\nnssother:x:2951:2951::/nonexistent:/usr/sbin/nologin\n",
    )
    .unwrap();
    std::fs::write(t.join("extrausers/group"), "nssuser:x:2950:\nnssother:x:2951:\nnssgrp:x:2960:nssuser\n").unwrap();
    assert!(allot_linux::process::procfs::user_uid("nssuser").is_none(), "the test user is not visible outside the daemon's namespace");
    let cfg = "scan_ms = 200\n[users]\nonly = [\"nssuser\", \"nssother\"]\n[currencies.lab]\ngroups = [\"nssgrp\"]\n";
    let mut d = PrivateDaemon::start(exe(), cfg).unwrap();
    d.binds.push((t.join("nsswitch.conf"), "/etc/nsswitch.conf".into()));
    d.binds.push((t.join("extrausers"), "/var/lib/extrausers".into()));
    d.terminate().unwrap();
    d.launch(true).unwrap();
    // A user known only to NSS (not /etc/passwd) gets a currency, by name.
    ok(&d.cli(&["fund", "nssuser", "300"], None).unwrap());
    let mut kids = Kids::default();
    let p = spawn_as(&d, &mut kids, 2950, &["sleep", "300"]);
    let j = wait_for("the NSS user's process placed", || job_with_pid(&show(&d), p));
    assert_eq!((j.user.as_str(), j.currency.as_str(), j.funding), ("nssuser", "nssuser", 300), "{j:?}");
    // Group rights: a member of nssgrp (through NSS membership, or a supplementary group the
    // process runs with) may run in lab; someone else may not.
    ok(&d.cli(&["run", "--currency", "lab", "--", "true"], Some(2950)).unwrap());
    let e = exe().display().to_string();
    let sock = d.socket.display().to_string();
    let mut with_group = d.shelter.command("setpriv", None);
    with_group
        .args(["--reuid=2951", "--regid=2951", "--groups=2960", &e, "--socket", &sock, "run", "--currency", "lab", "--", "true"])
        .stdin(Stdio::null());
    ok(&with_group.output().unwrap());
    refused(&d.cli(&["run", "--currency", "lab", "--", "true"], Some(2951)).unwrap(), &["may not run jobs in currency \"lab\""]);
    drop(kids);
    d.stop().unwrap();
    let _ = std::fs::remove_dir_all(&t);
}

fn glob_exists(lib: &str) -> bool {
    ["/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib"]
        .iter()
        .any(|d| std::fs::read_dir(d).map(|r| r.flatten().any(|e| e.file_name().to_string_lossy().starts_with(lib))).unwrap_or(false))
}
