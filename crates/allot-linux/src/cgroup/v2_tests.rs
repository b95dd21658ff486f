//! The v2 backend against a fake unified hierarchy: what it writes where, what it reads,
//! what it refuses.

use super::*;
use crate::cgroup::fixture::{Fixture, V2_FILES};
use crate::cgroup::Tree;
use crate::Error;

/// A v2 mount with allot's root `allot`, `user-1000` and its job `j1` made as the kernel
/// would; the mount already distributes cpu and memory.
fn tree() -> (Fixture, V2) {
    let fx = Fixture::new("v2");
    for rel in ["", "allot", "allot/user-1000", "allot/user-1000/j1"] {
        fx.cgroup(rel, V2_FILES);
    }
    fx.put("cgroup.subtree_control", "cpu memory\n");
    let v2 = V2::new(fx.path().to_path_buf(), "allot");
    (fx, v2)
}

#[test]
fn addresses_its_root_under_the_mount() {
    let (fx, v2) = tree();
    assert_eq!(v2.version(), Version::V2);
    assert_eq!(v2.root(), fx.path().join("allot"));
    assert_eq!(v2.mount(), fx.path());
    assert_eq!(v2.dir(""), fx.path().join("allot"));
    assert_eq!(v2.children("user-1000").unwrap(), ["j1"]);
    assert_eq!(v2.procs_files("user-1000/j1"), [fx.path().join("allot/user-1000/j1/cgroup.procs")]);
}

#[test]
fn creating_a_job_delegates_cpu_down_to_it_but_not_in_it() {
    let (fx, v2) = tree();
    v2.create("user-1000/j1").unwrap();
    assert_eq!(fx.read("cgroup.subtree_control"), "cpu memory\n", "enabled already: not written");
    assert_eq!(fx.read("allot/cgroup.subtree_control"), "+cpu");
    assert_eq!(fx.read("allot/user-1000/cgroup.subtree_control"), "+cpu");
    assert_eq!(fx.read("allot/user-1000/j1/cgroup.subtree_control"), "", "a leaf takes processes: no controller below it");
    // A new leaf: the kernel would give it its files; this fixture's mkdir does not.
    v2.create("user-1000/j2").unwrap();
    assert!(fx.path().join("allot/user-1000/j2").is_dir());
    // An ancestor without cgroup.subtree_control is no cgroup: refused, naming it.
    let e = v2.create("user-1000/j2/deeper").unwrap_err();
    assert!(e.to_string().contains("allot/user-1000/j2/cgroup.subtree_control"), "{e}");
    assert!(!fx.path().join("allot/user-1000/j2/deeper").exists(), "nothing made past the refusal");
    v2.remove("user-1000/j2").unwrap();
    v2.remove("user-1000/j2").unwrap();
    assert!(!fx.path().join("allot/user-1000/j2").exists());
}

#[test]
fn weights_are_cpu_weight_clamped() {
    let (fx, v2) = tree();
    let f = "allot/user-1000/cpu.weight";
    for (units, written) in [(300, "300"), (0, "1"), (20_000, "10000")] {
        fx.blank(&[f]);
        v2.set_weight("user-1000", units).unwrap();
        assert_eq!(fx.read(f), written, "{units}");
    }
    assert_eq!(v2.weight("user-1000").unwrap(), 10_000);
    fx.put(f, "idle\n");
    assert!(matches!(v2.weight("user-1000").unwrap_err(), Error::Parse { .. }));
}

#[test]
fn a_hard_limit_is_cpu_max() {
    let (fx, v2) = tree();
    let f = "allot/user-1000/j1/cpu.max";
    assert_eq!(v2.max("user-1000/j1").unwrap(), None);
    fx.blank(&[f]);
    v2.set_max("user-1000/j1", Some(Max { quota_us: 50_000, period_us: 100_000 })).unwrap();
    assert_eq!(fx.read(f), "50000 100000");
    assert_eq!(v2.max("user-1000/j1").unwrap(), Some(Max { quota_us: 50_000, period_us: 100_000 }));
    fx.blank(&[f]);
    v2.set_max("user-1000/j1", None).unwrap();
    assert_eq!(fx.read(f), "max");
    for bad in ["half 100000\n", "50000 often\n"] {
        fx.put(f, bad);
        let e = v2.max("user-1000/j1").unwrap_err();
        assert!(matches!(e, Error::Parse { what: "cpu.max", .. }), "{bad:?}: {e}");
    }
}

#[test]
fn processes_threads_and_usage() {
    let (fx, v2) = tree();
    v2.move_pid("user-1000/j1", 4242).unwrap();
    assert_eq!(fx.read("allot/user-1000/j1/cgroup.procs"), "4242");
    v2.release_pid(4243).unwrap();
    assert_eq!(fx.read("cgroup.procs"), "4243", "to the hierarchy's top");
    fx.cgroup("system.slice/cron.service", V2_FILES);
    v2.move_to_path("/system.slice/cron.service", 77).unwrap();
    assert_eq!(fx.read("system.slice/cron.service/cgroup.procs"), "77");
    fx.put("allot/user-1000/j1/cgroup.threads", "5\n6\n");
    fx.put("allot/user-1000/j1/cgroup.procs", "5\n");
    assert_eq!(v2.threads("user-1000/j1").unwrap(), [5, 6]);
    assert_eq!(v2.procs("user-1000/j1").unwrap(), [5]);
    fx.put("allot/user-1000/j1/cpu.stat", "usage_usec 1500\nuser_usec 1000\n");
    assert_eq!(v2.usage_ns("user-1000/j1").unwrap(), 1_500_000);
    fx.put("allot/user-1000/j1/cpu.stat", "user_usec 1000\n");
    assert!(v2.usage_ns("user-1000/j1").unwrap_err().to_string().contains("usage_usec"));
    fx.blank(&["allot/user-1000/j1/cgroup.kill"]);
    v2.kill_all("user-1000/j1").unwrap();
    assert_eq!(fx.read("allot/user-1000/j1/cgroup.kill"), "1");
}

#[test]
fn idle_and_no_real_time_groups() {
    let (fx, v2) = tree();
    assert!(v2.has_idle());
    fx.blank(&["allot/user-1000/cpu.idle"]);
    v2.set_idle("user-1000", true).unwrap();
    assert!(v2.idle("user-1000").unwrap());
    std::fs::remove_file(fx.path().join("allot/cpu.idle")).unwrap();
    assert!(!v2.has_idle(), "a kernel before 5.15");
    assert!(!v2.idle("").unwrap());
    assert_eq!(v2.rt_runtime("user-1000").unwrap(), None, "v2 has no real-time groups");
    assert!(v2.set_rt_runtime("user-1000", 1000).unwrap_err().to_string().contains("cpu.rt_runtime_us"));
}

#[test]
fn the_background_sibling_takes_paths_under_background() {
    let (fx, _) = tree();
    for rel in ["allot-background", "allot-background/ci"] {
        fx.cgroup(rel, V2_FILES);
    }
    let t = Tree::new(Box::new(V2::new(fx.path().to_path_buf(), "allot")), Box::new(V2::new(fx.path().to_path_buf(), "allot-background")));
    assert_eq!(t.dir("background"), fx.path().join("allot-background"));
    assert_eq!(t.dir("background/ci/j3"), fx.path().join("allot-background/ci/j3"));
    assert_eq!(t.dir("backgrounds"), fx.path().join("allot/backgrounds"), "only the whole name");
    t.create("background/ci/j3").unwrap();
    assert!(fx.path().join("allot-background/ci/j3").is_dir());
    fx.blank(&["allot-background/cpu.idle", "allot-background/ci/cpu.weight"]);
    t.set_idle("background", true).unwrap();
    t.set_weight("background/ci", 50).unwrap();
    assert_eq!(fx.read("allot-background/cpu.idle"), "1");
    assert_eq!(fx.read("allot-background/ci/cpu.weight"), "50");
    assert_eq!(t.children("background").unwrap(), ["ci"]);
    assert_eq!(t.root(), fx.path().join("allot"));
}
