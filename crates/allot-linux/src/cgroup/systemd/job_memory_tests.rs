//! A job's memory cap on a systemd host against the fake systemd: written in the job's
//! own directory inside allot's scope (delegated), the controller enabled from the scope
//! down, never a file of a cgroup systemd made; refused where the scope does not delegate
//! memory.

use super::super::fake::{holder, FakeSystemd};
use super::super::memory::SliceProp;
use super::super::SystemdTree;
use crate::cgroup::fixture::{Fixture, V2_FILES};
use crate::cgroup::CpuController;

const M: u64 = 1 << 20;
const SCOPE: &str = "user.slice/user-1000.slice/allot:user-1000.scope";
const BG: &str = "allot_background.slice/allot:background.scope";

fn host() -> (Fixture, FakeSystemd, SystemdTree) {
    let fx = Fixture::new("systemd-job-memory");
    fx.cgroup("", V2_FILES);
    let sd = FakeSystemd::new(fx.path().to_path_buf(), 252);
    sd.add("user.slice", "/user.slice", &[]);
    sd.add("user-1000.slice", "/user.slice/user-1000.slice", &[]);
    let t = SystemdTree::with_manager("allot", fx.path().to_path_buf(), holder(), Box::new(sd.clone())).unwrap();
    (fx, sd, t)
}

/// The files the kernel gives a new job directory and the scope (the fixture cannot).
fn kernel_files(fx: &Fixture, dir: &str, controllers: &str) {
    fx.cgroup(
        dir,
        &[
            ("cgroup.controllers", controllers),
            ("memory.max", "max            "),
            ("memory.high", "max            "),
            ("memory.oom.group", "0"),
            ("memory.current", "1048576\n"),
        ],
    );
}

#[test]
fn a_jobs_cap_is_its_own_directorys_memory_max_and_high_inside_the_delegated_scope() {
    let (fx, sd, t) = host();
    t.create("user-1000/j1").unwrap();
    t.create("user-1000/j2").unwrap();
    let scope = sd.unit("allot:user-1000.scope").unwrap();
    assert_eq!(scope.props["DelegateControllers"], "[\"cpu\", \"memory\"]");
    kernel_files(&fx, SCOPE, "cpu memory pids");
    fx.blank(&[&format!("{SCOPE}/cgroup.subtree_control")]);
    for j in ["j1", "j2"] {
        kernel_files(&fx, &format!("{SCOPE}/{j}"), "cpu memory");
    }
    let before = sd.calls().len();
    let m = t.slice_memory().unwrap();
    m.set_job_memory("user-1000/j1", None, Some(64 * M)).unwrap();
    assert_eq!(fx.read(&format!("{SCOPE}/cgroup.subtree_control")).trim(), "+memory", "the scope gives memory to its jobs");
    assert_eq!(fx.read(&format!("{SCOPE}/j1/memory.max")).trim(), (64 * M).to_string());
    assert_eq!(fx.read(&format!("{SCOPE}/j1/memory.high")).trim(), "max");
    assert_eq!(fx.read(&format!("{SCOPE}/j2/memory.max")).trim(), "max", "the user's other job is untouched");
    assert_eq!(m.job_usage("user-1000/j1").unwrap(), M);
    // A soft cap, then none: the kernel's default again.
    fx.blank(&[&format!("{SCOPE}/j1/memory.max"), &format!("{SCOPE}/j1/memory.high")]);
    m.set_job_memory("user-1000/j1", Some(32 * M), None).unwrap();
    assert_eq!(fx.read(&format!("{SCOPE}/j1/memory.high")).trim(), (32 * M).to_string());
    assert_eq!(fx.read(&format!("{SCOPE}/j1/memory.max")).trim(), "max");
    // The OOM group: the job's own file, on and off.
    m.set_job_oom_group("user-1000/j1", true).unwrap();
    assert_eq!(fx.read(&format!("{SCOPE}/j1/memory.oom.group")).trim(), "1");
    assert_eq!(fx.read(&format!("{SCOPE}/j2/memory.oom.group")).trim(), "0", "the user's other job is untouched");
    m.set_job_oom_group("user-1000/j1", false).unwrap();
    assert_eq!(fx.read(&format!("{SCOPE}/j1/memory.oom.group")).trim(), "0");
    assert!(m.set_job_oom_group("user-1000", true).is_err(), "a currency's path is no job's");
    assert_eq!(sd.calls().len(), before, "nothing asked of systemd: a job is no unit");
    assert!(!fx.path().join("user.slice/user-1000.slice/memory.max").exists(), "no file of a cgroup systemd made is written");
}

#[test]
fn a_background_jobs_cap_enables_memory_down_through_its_currency() {
    let (fx, _sd, t) = host();
    t.create("background").unwrap();
    fx.cgroup(&format!("{BG}/ci"), V2_FILES);
    t.create("background/ci/j3").unwrap();
    kernel_files(&fx, BG, "cpu memory");
    kernel_files(&fx, &format!("{BG}/ci"), "cpu memory");
    kernel_files(&fx, &format!("{BG}/ci/j3"), "cpu memory");
    fx.blank(&[&format!("{BG}/cgroup.subtree_control")]);
    fx.blank(&[&format!("{BG}/ci/cgroup.subtree_control")]);
    t.slice_memory().unwrap().set_job_memory("background/ci/j3", Some(128 * M), Some(256 * M)).unwrap();
    assert_eq!(fx.read(&format!("{BG}/cgroup.subtree_control")).trim(), "+memory");
    assert_eq!(fx.read(&format!("{BG}/ci/cgroup.subtree_control")).trim(), "+memory");
    assert_eq!(fx.read(&format!("{BG}/ci/j3/memory.max")).trim(), (256 * M).to_string());
    assert_eq!(fx.read(&format!("{BG}/ci/j3/memory.high")).trim(), (128 * M).to_string());
}

#[test]
fn a_scope_without_memory_or_a_path_that_is_not_a_job_is_refused_saying_why() {
    let (fx, _sd, t) = host();
    t.create("user-1000/j1").unwrap();
    // A scope an older allot started with cpu only: no memory controller to give.
    kernel_files(&fx, SCOPE, "cpu pids");
    kernel_files(&fx, &format!("{SCOPE}/j1"), "cpu");
    let m = t.slice_memory().unwrap();
    let e = m.set_job_memory("user-1000/j1", None, Some(64 * M)).unwrap_err().to_string();
    assert!(e.contains("allot:user-1000.scope does not delegate the memory controller"), "{e}");
    assert_eq!(fx.read(&format!("{SCOPE}/j1/memory.max")).trim(), "max");
    for bad in ["user-1000", "", "user-1000/../x", "user-1000/.holder"] {
        assert!(m.set_job_memory(bad, None, Some(64 * M)).is_err(), "{bad:?}");
    }
    let e = m.set_job_memory("user-2000/j1", None, Some(M)).unwrap_err().to_string();
    assert!(e.contains("not running"), "{e}");
}

#[test]
fn the_background_slice_takes_an_io_weight_and_a_new_one_is_sent_its_own() {
    let (fx, sd, t) = host();
    t.create("background").unwrap();
    fx.cgroup(&format!("{BG}/ci"), V2_FILES);
    t.create("background/ci/j3").unwrap();
    let m = t.slice_memory().unwrap();
    m.set_slice_memory("background", SliceProp::IoWeight, Some(1)).unwrap();
    let sets = |sd: &FakeSystemd| sd.calls().into_iter().filter(|c| c.starts_with("SetUnitProperties")).collect::<Vec<_>>();
    assert_eq!(sets(&sd), ["SetUnitProperties allot_background.slice IOWeight=1"]);
    // The background's jobs end: its scope and slice stop; the next slice is sent its weight.
    t.remove("background/ci/j3").unwrap();
    std::fs::remove_dir_all(fx.path().join(BG).join("ci")).unwrap(); // the kernel's rmdir of a cgroup with its files
    t.remove("background").unwrap();
    t.create("background").unwrap();
    fx.cgroup(&format!("{BG}/ci"), V2_FILES);
    t.create("background/ci/j4").unwrap();
    std::thread::sleep(super::super::WEIGHT_INTERVAL);
    m.set_slice_memory("background", SliceProp::IoWeight, Some(1)).unwrap();
    assert_eq!(sets(&sd).len(), 2, "{:?}", sets(&sd));
}

#[test]
fn memory_is_enabled_as_directories_are_made_so_each_job_is_charged_its_own() {
    let (fx, _sd, t) = host();
    t.create("background").unwrap();
    fx.cgroup(&format!("{BG}/ci"), &[V2_FILES, &[("cgroup.controllers", "cpu memory")]].concat());
    fx.cgroup(&format!("{BG}/ok"), V2_FILES);
    t.create("background/ci/j3").unwrap();
    t.create("background/ok/j4").unwrap();
    assert!(fx.read(&format!("{BG}/ci/cgroup.subtree_control")).contains("+memory"), "a currency's directory gives memory to its jobs");
    assert!(!fx.read(&format!("{BG}/ok/cgroup.subtree_control")).contains("memory"), "none where memory is not delegated");
}
