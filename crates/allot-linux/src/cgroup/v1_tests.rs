//! The v1 backend against a fake cgroup v1 tree (cpu, cpuacct, memory and blkio mounted apart,
//! as on the CI runner): what it writes where, what it reads, what it refuses.

use super::*;
use crate::cgroup::fixture::{Fixture, V1_ACCT_FILES, V1_CPU_FILES};
use crate::Error;

/// cpu, cpuacct and memory hierarchies under one fixture, allot's root `allot` and a job
/// `user-1000/j1` made as the kernel would (with their files).
fn tree() -> (Fixture, V1) {
    let fx = Fixture::new("v1");
    for rel in ["cpu", "cpu/allot", "cpu/allot/user-1000", "cpu/allot/user-1000/j1"] {
        fx.cgroup(rel, V1_CPU_FILES);
    }
    for h in ["cpuacct", "memory", "blkio"] {
        for rel in ["", "/allot", "/allot/user-1000", "/allot/user-1000/j1"] {
            fx.cgroup(&format!("{h}{rel}"), V1_ACCT_FILES);
        }
    }
    let p = fx.path().to_path_buf();
    let v1 = V1::new(p.join("cpu"), Some(p.join("cpuacct")), "allot").with_memory(Some(p.join("memory"))).with_blkio(Some(p.join("blkio")));
    (fx, v1)
}

#[test]
fn addresses_the_cpu_hierarchy() {
    let (fx, v1) = tree();
    assert_eq!(v1.version(), Version::V1);
    assert_eq!(v1.root(), fx.path().join("cpu/allot"));
    assert_eq!(v1.mount(), fx.path().join("cpu"));
    assert_eq!(v1.dir("user-1000/j1"), fx.path().join("cpu/allot/user-1000/j1"));
    assert!(v1.exists("user-1000/j1") && !v1.exists("user-1000/j2"));
    assert_eq!(v1.children("").unwrap(), ["user-1000"], "directories only, not files");
    assert!(v1.children("nope").unwrap_err().to_string().contains("cpu/allot/nope"));
}

#[test]
fn every_directory_is_mirrored_into_cpuacct_memory_and_blkio() {
    let (fx, v1) = tree();
    v1.create("ci/j9").unwrap();
    for h in ["cpu", "cpuacct", "memory", "blkio"] {
        assert!(fx.path().join(h).join("allot/ci/j9").is_dir(), "{h}");
    }
    v1.create("ci/j9").unwrap();
    v1.remove("ci/j9").unwrap();
    for h in ["cpu", "cpuacct", "memory", "blkio"] {
        assert!(!fx.path().join(h).join("allot/ci/j9").exists(), "{h}");
        assert!(fx.path().join(h).join("allot/ci").is_dir(), "{h}: only the leaf goes");
    }
    v1.remove("ci/j9").unwrap();
}

#[test]
fn no_mirror_where_a_controller_shares_the_cpu_mount() {
    let fx = Fixture::new("v1-comounted");
    let cpu = fx.cgroup("cpu,cpuacct", V1_CPU_FILES);
    let v1 = V1::new(cpu.clone(), Some(cpu.clone()), "allot").with_memory(Some(cpu.clone())).with_blkio(Some(cpu.clone()));
    assert_eq!(v1.procs_files("j1"), [cpu.join("allot/j1/cgroup.procs")]);
    v1.create("j1").unwrap();
    assert_eq!(std::fs::read_dir(fx.path()).unwrap().count(), 1, "one hierarchy written");
}

#[test]
fn weights_are_shares_scaled_100_to_1024() {
    let (fx, v1) = tree();
    let f = "cpu/allot/user-1000/cpu.shares";
    fx.blank(&[f]);
    v1.set_weight("user-1000", 300).unwrap();
    assert_eq!(fx.read(f), "3072");
    assert_eq!(v1.weight("user-1000").unwrap(), 300);
    fx.blank(&[f]);
    v1.set_weight("user-1000", 1).unwrap();
    assert_eq!(fx.read(f), "10", "1 unit is 10.24 shares, written as 10");
    fx.put(f, "2\n");
    assert_eq!(v1.weight("user-1000").unwrap(), 1, "the kernel's minimum reads as 1 unit");
    fx.put(f, "lots\n");
    let e = v1.weight("user-1000").unwrap_err();
    assert!(matches!(e, Error::Parse { .. }) && e.to_string().contains("cpu.shares"), "{e}");
}

#[test]
fn a_hard_limit_is_quota_and_period() {
    let (fx, v1) = tree();
    let (q, p) = ("cpu/allot/user-1000/j1/cpu.cfs_quota_us", "cpu/allot/user-1000/j1/cpu.cfs_period_us");
    assert_eq!(v1.max("user-1000/j1").unwrap(), None, "-1 is no limit");
    fx.blank(&[q, p]);
    v1.set_max("user-1000/j1", Some(Max { quota_us: 25_000, period_us: 50_000 })).unwrap();
    // Written in place: "-1" first (so a shorter period always fits), then the quota.
    assert_eq!((fx.read(q).as_str(), fx.read(p).as_str()), ("25000", "50000"));
    assert_eq!(v1.max("user-1000/j1").unwrap(), Some(Max { quota_us: 25_000, period_us: 50_000 }));
    fx.blank(&[q]);
    v1.set_max("user-1000/j1", None).unwrap();
    assert_eq!(fx.read(q), "-1");
    fx.put(q, "a lot\n");
    let e = v1.max("user-1000/j1").unwrap_err();
    assert!(e.to_string().contains("cpu.cfs_quota_us"), "{e}");
}

#[test]
fn processes_move_in_every_hierarchy() {
    let (fx, v1) = tree();
    v1.move_pid("user-1000/j1", 4242).unwrap();
    for h in ["cpu", "cpuacct", "memory", "blkio"] {
        assert_eq!(fx.read(&format!("{h}/allot/user-1000/j1/cgroup.procs")), "4242", "{h}");
    }
    let files = v1.procs_files("user-1000/j1");
    assert_eq!(files.len(), 4);
    assert!(files.iter().all(|f| f.ends_with("allot/user-1000/j1/cgroup.procs")));
    v1.release_pid(4243).unwrap();
    for h in ["cpu", "cpuacct", "memory", "blkio"] {
        assert_eq!(fx.read(&format!("{h}/cgroup.procs")), "4243", "{h}: to the hierarchy's top");
    }
}

#[test]
fn a_move_back_uses_the_same_path_where_a_mirror_has_it() {
    let (fx, v1) = tree();
    fx.cgroup("cpu/system.slice/cron.service", V1_CPU_FILES);
    fx.cgroup("cpuacct/system.slice/cron.service", V1_ACCT_FILES);
    v1.move_to_path("/system.slice/cron.service", 77).unwrap();
    assert_eq!(fx.read("cpu/system.slice/cron.service/cgroup.procs"), "77");
    assert_eq!(fx.read("cpuacct/system.slice/cron.service/cgroup.procs"), "77");
    assert_eq!(fx.read("memory/cgroup.procs"), "77", "memory has no such cgroup: its top");
}

#[test]
fn usage_is_cpuacct_usage() {
    let (fx, v1) = tree();
    fx.put("cpuacct/allot/user-1000/j1/cpuacct.usage", "123456789\n");
    assert_eq!(v1.usage_ns("user-1000/j1").unwrap(), 123_456_789);
    fx.put("cpuacct/allot/user-1000/j1/cpuacct.usage", "12x\n");
    let e = v1.usage_ns("user-1000/j1").unwrap_err();
    assert!(e.to_string().contains("cpuacct/allot/user-1000/j1/cpuacct.usage"), "{e}");
}

#[test]
fn threads_real_time_and_idle_files() {
    let (fx, v1) = tree();
    fx.put("cpu/allot/user-1000/j1/tasks", "5\n6\n7\n");
    fx.put("cpu/allot/user-1000/j1/cgroup.procs", "5\n");
    assert_eq!(v1.threads("user-1000/j1").unwrap(), [5, 6, 7], "v1 lists threads in tasks");
    assert_eq!(v1.procs("user-1000/j1").unwrap(), [5]);
    assert_eq!(v1.rt_runtime("user-1000/j1").unwrap(), Some(0));
    fx.blank(&["cpu/allot/user-1000/j1/cpu.rt_runtime_us"]);
    v1.set_rt_runtime("user-1000/j1", 9500).unwrap();
    assert_eq!(v1.rt_runtime("user-1000/j1").unwrap(), Some(9500));
    std::fs::remove_file(fx.path().join("cpu/allot/user-1000/j1/cpu.rt_runtime_us")).unwrap();
    assert_eq!(v1.rt_runtime("user-1000/j1").unwrap(), None, "no CONFIG_RT_GROUP_SCHED");
    assert!(!v1.has_idle(), "v1 has no cpu.idle");
    assert!(!v1.idle("user-1000").unwrap());
}

#[test]
fn a_file_the_kernel_lacks_is_an_error_naming_it() {
    let (fx, v1) = tree();
    // Writers never create a file: the kernel has it or the write fails.
    let e = v1.set_weight("user-1000/j2", 100).unwrap_err();
    assert_eq!(e.io_kind(), Some(std::io::ErrorKind::NotFound));
    assert!(e.to_string().contains("cpu/allot/user-1000/j2/cpu.shares"), "{e}");
    assert!(!fx.path().join("cpu/allot/user-1000/j2").exists());
    let e = v1.set_idle("user-1000", true).unwrap_err();
    assert!(e.to_string().contains("cpu.idle"), "{e}");
    let e = v1.kill_all("user-1000/j1").unwrap_err();
    assert!(e.to_string().contains("cgroup.kill"), "{e}: v1 has no cgroup.kill");
    assert!(v1.remove("user-1000").is_err(), "a directory with children is not removed");
}
