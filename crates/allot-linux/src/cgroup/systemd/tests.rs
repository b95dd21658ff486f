//! The systemd backend against a fake systemd (fake.rs) over a cgroup2 hierarchy in a
//! temporary directory, without root or a bus: which units it starts, what it asks
//! systemd and what it writes itself, what it refuses.

use super::fake::{holder, FakeSystemd};
use super::*;
use crate::cgroup::fixture::{Fixture, V2_FILES};

/// A host with user 1000 logged in (their slice exists) and a fake systemd `version`.
fn host(version: u32) -> (Fixture, FakeSystemd, SystemdTree) {
    let fx = Fixture::new("systemd");
    fx.cgroup("", V2_FILES);
    let sd = FakeSystemd::new(fx.path().to_path_buf(), version);
    sd.add("user.slice", "/user.slice", &[]);
    sd.add("user-1000.slice", "/user.slice/user-1000.slice", &[]);
    let t = SystemdTree::with_manager("allot", fx.path().to_path_buf(), holder(), Box::new(sd.clone())).unwrap();
    (fx, sd, t)
}

const SCOPE: &str = "user.slice/user-1000.slice/allot:user-1000.scope";

/// The live pids in a cgroup.procs file of the fixture.
fn live(fx: &Fixture, rel: &str) -> Vec<i32> {
    fx.read(rel).split_whitespace().filter_map(|p| p.parse().ok()).filter(|&p| unsafe { libc::kill(p, 0) } == 0).collect()
}

#[test]
fn background_is_idle_from_252_and_the_smallest_weight_before() {
    assert_eq!(idle_weight(252), CpuWeight::Idle);
    assert_eq!(idle_weight(251), CpuWeight::Weight(1));
    assert_eq!(idle_weight(crate::ipc::systemd_bus::MIN_VERSION), CpuWeight::Weight(1));
}

#[test]
fn a_job_is_made_in_a_delegated_scope_in_the_users_slice() {
    let (fx, sd, t) = host(252);
    assert!(t.systemd() && t.root() == fx.path());
    assert!(!t.exists("user-1000"));
    t.create("user-1000/j1").unwrap();
    let scope = sd.unit("allot:user-1000.scope").expect("the currency's scope was started");
    assert_eq!(scope.cgroup, format!("/{SCOPE}"));
    assert!(scope.delegate);
    assert_eq!(scope.props["Slice"], "\"user-1000.slice\"");
    assert_eq!(scope.props["DelegateControllers"], "[\"cpu\", \"memory\"]", "cpu and memory (a job's memory cap) only, not every controller");
    // The holder left the scope's top for .holder, so the top may delegate cpu.
    assert_eq!(live(&fx, &format!("{SCOPE}/.holder/cgroup.procs")).len(), 1);
    assert_eq!(fx.read(&format!("{SCOPE}/cgroup.subtree_control")), "+cpu");
    assert!(fx.path().join(SCOPE).join("j1").is_dir());
    assert!(t.exists("user-1000") && t.exists("user-1000/j1"));
    assert_eq!(t.dir("user-1000/j1"), fx.path().join(SCOPE).join("j1"));
    assert_eq!(t.children("").unwrap(), ["user-1000"]);
    assert_eq!(t.children("user-1000").unwrap(), ["j1"], "the holder's directory is not a job");
    // A second create finds the scope and its live holder: nothing is started again.
    let starts = |sd: &FakeSystemd| sd.calls().iter().filter(|c| c.starts_with("StartTransientUnit")).count();
    let before = starts(&sd);
    t.create("user-1000/j2").unwrap();
    assert_eq!(starts(&sd), before);
    assert!(!sd.calls().iter().any(|c| c.starts_with("AttachProcessesToUnit") && c.contains("j2")));
}

#[test]
fn a_jobs_own_files_are_written_directly() {
    let (fx, sd, t) = host(252);
    t.create("user-1000/j1").unwrap();
    let job = format!("{SCOPE}/j1");
    fx.cgroup(&job, V2_FILES);
    let calls = sd.calls().len();
    fx.blank(&[&format!("{job}/cpu.weight"), &format!("{job}/cpu.max"), &format!("{job}/cpu.idle")]);
    t.set_weight("user-1000/j1", 300).unwrap();
    t.set_max("user-1000/j1", Some(Max { quota_us: 20_000, period_us: 100_000 })).unwrap();
    t.set_idle("user-1000/j1", true).unwrap();
    assert_eq!(fx.read(&format!("{job}/cpu.weight")), "300");
    assert_eq!(fx.read(&format!("{job}/cpu.max")), "20000 100000");
    assert_eq!(fx.read(&format!("{job}/cpu.idle")), "1");
    assert_eq!(t.weight("user-1000/j1").unwrap(), 300);
    assert_eq!(t.max("user-1000/j1").unwrap(), Some(Max { quota_us: 20_000, period_us: 100_000 }));
    assert!(t.idle("user-1000/j1").unwrap());
    fx.put(&format!("{job}/cpu.stat"), "usage_usec 2500\n");
    fx.put(&format!("{SCOPE}/cpu.stat"), "usage_usec 7000\n");
    assert_eq!(t.usage_ns("user-1000/j1").unwrap(), 2_500_000);
    assert_eq!(t.usage_ns("").unwrap(), 7_000_000, "the root: every currency scope's");
    fx.put(&format!("{job}/cgroup.threads"), "8\n9\n");
    assert_eq!(t.threads("user-1000/j1").unwrap(), [8, 9]);
    assert_eq!(sd.calls().len(), calls, "none of this goes through systemd");
}

#[test]
fn funding_and_a_currency_cap_go_to_the_slice_through_systemd() {
    let (fx, sd, t) = host(252);
    t.create("user-1000/j1").unwrap();
    t.set_weight("user-1000", 300).unwrap();
    assert!(sd.calls().contains(&"SetUnitProperties user-1000.slice CPUWeight=300".to_string()), "{:?}", sd.calls());
    assert_eq!(fx.read("user.slice/user-1000.slice/cpu.weight"), "300", "written by systemd, not allot");
    assert_eq!(t.weight("user-1000").unwrap(), 300);
    // At most one write a second per slice: the next is held, and reads as the value to be.
    let n = sd.calls().len();
    t.set_weight("user-1000", 400).unwrap();
    assert_eq!(sd.calls().len(), n, "held back");
    assert_eq!(t.weight("user-1000").unwrap(), 400);
    assert!(t.upkeep().is_empty(), "not due yet, and nothing failed");
    t.set_scope_weight("user-1000", 50).unwrap();
    assert!(sd.calls().contains(&"SetUnitProperties allot:user-1000.scope CPUWeight=50".to_string()));
    t.set_max("user-1000", Some(Max { quota_us: 50_000, period_us: 100_000 })).unwrap();
    assert!(sd.calls().contains(&"SetUnitProperties user-1000.slice CPUQuotaPerSecUSec=500000".to_string()));
    assert_eq!(t.max("user-1000").unwrap(), Some(Max { quota_us: 50_000, period_us: 100_000 }), "read from the slice's cpu.max");
    t.set_max("user-1000", None).unwrap();
    assert_eq!(t.max("user-1000").unwrap(), None);
    assert_eq!(fx.read(&format!("{SCOPE}/cpu.weight")), "50", "the scope's weight among the user's units");
}

#[test]
fn the_background_is_an_idle_slice_of_its_own() {
    for (version, weight, idle) in [(252, "CPUWeight=0", true), (251, "CPUWeight=1", false)] {
        let (fx, sd, t) = host(version);
        t.create("background").unwrap();
        let bg = "allot_background.slice/allot:background.scope";
        fx.cgroup(&format!("{bg}/ci"), V2_FILES);
        t.create("background/ci/j3").unwrap();
        assert!(fx.path().join(bg).join("ci/j3").is_dir());
        assert_eq!(fx.read(&format!("{bg}/ci/cgroup.subtree_control")), "+cpu", "the currency delegates to its jobs");
        let slice = sd.calls().into_iter().find(|c| c.starts_with("StartTransientUnit allot_background.slice")).unwrap();
        assert!(slice.contains(weight), "systemd {version}: {slice}");
        assert_eq!(t.has_idle(), idle, "systemd {version}");
        assert_eq!(t.idle("background").unwrap(), idle);
        assert_eq!(t.children("background").unwrap(), ["ci"]);
    }
}

#[test]
fn what_systemd_owns_is_refused_without_a_call() {
    let (fx, sd, t) = host(252);
    t.create("user-1000/j1").unwrap();
    let n = sd.calls().len();
    let refused = |r: Result<()>, what: &str| {
        let e = r.expect_err(what).to_string();
        assert!(e.contains(what), "{e} should name {what}");
    };
    refused(t.set_weight("", 100), "\"\"");
    refused(t.set_max("background", None), "cpu.max");
    refused(t.set_idle("user-1000", true), "cpu.idle");
    refused(t.set_rt_runtime("user-1000/j1", 1000), "cpu.rt_runtime_us");
    refused(t.release_pid(1), "root cgroup");
    refused(t.move_pid("user-1000", 1), "not a scope's top");
    refused(t.create("user-1000/j1/deeper"), "deeper than allot's tree");
    refused(t.create("user-1000/.holder"), ".holder");
    refused(t.set_scope_weight("user-1000/j1", 5), "scope weight");
    assert_eq!(t.rt_runtime("user-1000/j1").unwrap(), None);
    assert_eq!(sd.calls().len(), n, "no call for a refusal");
    assert!(!fx.path().join(SCOPE).join("j1/deeper").exists());
}

#[test]
fn a_currency_is_stopped_only_when_empty_and_its_funding_goes_with_it() {
    let (fx, sd, t) = host(252);
    t.create("user-1000/j1").unwrap();
    let holder = live(&fx, &format!("{SCOPE}/.holder/cgroup.procs"));
    let e = t.remove("user-1000").unwrap_err().to_string();
    assert!(e.contains("still holds j1"), "{e}");
    assert!(sd.unit("allot:user-1000.scope").is_some());
    t.remove("user-1000/j1").unwrap();
    t.remove("user-1000").unwrap();
    let calls = sd.calls();
    let unset = calls.iter().position(|c| c == &format!("SetUnitProperties user-1000.slice CPUWeight={}", u64::MAX)).expect("funding taken off");
    let stop = calls.iter().position(|c| c == "StopUnit allot:user-1000.scope").expect("scope stopped");
    assert!(unset < stop, "funding is unset while the slice is loaded: {calls:?}");
    assert!(sd.unit("user-1000.slice").is_some(), "the user's slice is logind's: never stopped");
    assert!(!t.exists("user-1000") && !fx.path().join(SCOPE).exists());
    assert!(holder.iter().all(|&p| unsafe { libc::kill(p, 0) } != 0), "the holder was ended");
    t.remove("user-1000").unwrap();
}

#[test]
fn a_restarted_tree_finds_its_scopes_and_clears_a_failed_one() {
    let (fx, sd, t) = host(252);
    t.create("user-1000/j1").unwrap();
    drop(t);
    sd.add("allot:ci.scope", "/user.slice/user-allot_ci.slice/allot:ci.scope", &[]);
    sd.set_state("allot:ci.scope", "failed");
    sd.add("allot2:user-1000.scope", "/user.slice/user-1000.slice/allot2:user-1000.scope", &[]);
    let t = SystemdTree::with_manager("allot", fx.path().to_path_buf(), holder(), Box::new(sd.clone())).unwrap();
    assert_eq!(t.children("").unwrap(), ["user-1000"], "not the failed one, nor another root's");
    assert!(t.exists("user-1000/j1"));
    assert!(sd.calls().contains(&"ResetFailedUnit allot:ci.scope".to_string()));
    assert!(sd.unit("allot:ci.scope").is_none(), "its name can be used again");
    assert!(SystemdTree::with_manager("allot", fx.path().to_path_buf(), holder(), Box::new(FakeSystemd::new(fx.path().into(), 238)))
        .unwrap_err()
        .to_string()
        .contains("systemd 238 is older than 239"));
    assert!(SystemdTree::with_manager("a/b", fx.path().to_path_buf(), holder(), Box::new(sd.clone())).is_err());
}

#[test]
fn processes_from_outside_are_moved_by_systemd() {
    let (fx, sd, t) = host(252);
    t.create("user-1000/j1").unwrap();
    // This test's process is in no scope of allot's: it is attached through systemd.
    let me = std::process::id();
    t.move_pid("user-1000/j1", me as i32).unwrap();
    assert!(sd.calls().contains(&format!("AttachProcessesToUnit allot:user-1000.scope /j1 [{me}]")), "{:?}", sd.calls());
    assert_eq!(fx.read(&format!("{SCOPE}/j1/cgroup.procs")), format!("{me}\n"));
    // Back to a service: systemd moves only into delegated units, and says so.
    sd.add("cron.service", "/system.slice/cron.service", &[]);
    let e = t.move_to_path("/system.slice/cron.service", me as i32).unwrap_err().to_string();
    assert!(e.contains("non-delegated") && e.contains("cron.service"), "{e}");
    sd.add_session(me, Session { id: "3".into(), uid: 1000, scope: "session-3.scope".into() });
    assert_eq!(t.session_of(me as i32).unwrap().unwrap().scope, "session-3.scope");
    assert_eq!(t.session_of(1).unwrap(), None);
    sd.add_pid(me, crate::ipc::systemd_bus::UnitOf { name: "session-3.scope".into(), ..Default::default() });
    assert_eq!(t.unit_of(me as i32).unwrap().unwrap().name, "session-3.scope");
}

#[test]
fn a_tether_reports_its_job_when_the_session_is_stopped() {
    let (_fx, sd, t) = host(252);
    sd.add("session-3.scope", "/user.slice/user-1000.slice/session-3.scope", &[("Slice", "user-1000.slice")]);
    assert!(t.tether("", "session-3.scope").is_err(), "not a job's name");
    t.tether("j7-u1000", "session-3.scope").unwrap();
    let tether = sd.unit("allot_logout_j7-u1000.scope").expect("the tether's scope");
    assert_eq!(tether.props["PartOf"], "[\"session-3.scope\"]");
    assert!(tether.cgroup.starts_with("/user.slice/user-1000.slice/"), "in the session's slice");
    assert_eq!(t.tethered(), ["j7-u1000"]);
    // logind stops the session, and with it (PartOf=) the tether.
    sd.stop_from_outside("allot_logout_j7-u1000.scope");
    assert_eq!(t.cut_tethers().unwrap(), ["j7-u1000"]);
    assert!(t.tethered().is_empty());
    t.untether("j7-u1000").unwrap();
}

#[test]
fn users_with_a_slice_are_read_from_the_hierarchy() {
    let (fx, _sd, t) = host(252);
    for d in ["user.slice/user-1001.slice", "user.slice/user-allot_ci.slice", "user.slice/user-x.slice"] {
        fx.cgroup(d, V2_FILES);
    }
    assert_eq!(t.user_slices().unwrap(), [1000, 1001]);
}
