//! The systemd backend on hybrid and v1 hosts: which mounts it picks (or why it refuses),
//! and against a fake systemd over a v1 cpu,cpuacct hierarchy in a temporary directory,
//! what it asks systemd and what it writes itself.

use super::*;

/// Ubuntu 20.04's default: v1 controllers, systemd's unified hierarchy beside them.
const HYBRID: &str = "\
25 30 0:23 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
26 25 0:24 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate
27 25 0:25 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:11 - cgroup cgroup rw,xattr,name=systemd
31 25 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,cpu,cpuacct
32 25 0:30 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:16 - cgroup cgroup rw,memory
";

/// RHEL 8's default: legacy only, no cgroup2 mount.
const LEGACY: &str = "\
25 30 0:23 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
27 25 0:25 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:11 - cgroup cgroup rw,xattr,name=systemd
31 25 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,cpu,cpuacct
";

#[test]
fn hybrid_tracks_units_in_the_unified_mount_and_works_in_cpu_cpuacct() {
    let m = legacy_mounts(HYBRID).unwrap();
    assert_eq!(m, LegacyMounts { cpu: "/sys/fs/cgroup/cpu,cpuacct".into(), track: "/sys/fs/cgroup/unified".into(), track_line: None });
}

#[test]
fn legacy_tracks_units_in_name_systemd() {
    let m = legacy_mounts(LEGACY).unwrap();
    assert_eq!(
        m,
        LegacyMounts { cpu: "/sys/fs/cgroup/cpu,cpuacct".into(), track: "/sys/fs/cgroup/systemd".into(), track_line: Some("name=systemd") }
    );
}

#[test]
fn what_cannot_work_is_refused_with_one_error_naming_why() {
    let no_cpu: String = LEGACY.lines().filter(|l| !l.contains("cpu,cpuacct")).map(|l| format!("{l}\n")).collect();
    let e = legacy_mounts(&no_cpu).unwrap_err().to_string();
    assert!(e.contains("no cgroup v1 hierarchy has the cpu controller") && e.contains("never at the root"), "{e}");
    let apart = LEGACY.replace(
        "/sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,cpu,cpuacct",
        "/sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu",
    );
    let e = legacy_mounts(&apart).unwrap_err().to_string();
    assert!(e.contains("/sys/fs/cgroup/cpu is mounted without cpuacct") && e.contains("rw,cpu"), "{e}");
    let untracked: String = LEGACY.lines().filter(|l| !l.contains("name=systemd")).map(|l| format!("{l}\n")).collect();
    let e = legacy_mounts(&untracked).unwrap_err().to_string();
    assert!(e.contains("neither a cgroup2 mount nor a name=systemd"), "{e}");
    assert!(legacy_mounts("").is_err() && legacy_mounts("garbage line\n").is_err());
}

use super::super::fake::{holder, FakeSystemd};
use crate::cgroup::fixture::{Fixture, V1_CPU_FILES};
use crate::cgroup::{Delegation, Version};
use crate::ipc::systemd_bus::CpuWeight;

const SCOPE: &str = "cpu/user.slice/user-1000.slice/allot:user-1000.scope";

/// A v1 cpu,cpuacct cgroup's files.
fn v1_files() -> Vec<(&'static str, &'static str)> {
    V1_CPU_FILES.iter().copied().chain([("cpuacct.usage", "0\n")]).collect()
}

/// A hybrid host with user 1000 logged in: the cpu,cpuacct hierarchy at `cpu/`, systemd's
/// units tracked at `unified/`, a fake systemd `version`.
fn host(version: u32) -> (Fixture, FakeSystemd, SystemdTree) {
    let fx = Fixture::new("systemd-v1");
    fx.cgroup("cpu", &v1_files());
    fx.cgroup("unified/user.slice/user-1000.slice", &[]);
    let sd = FakeSystemd::legacy(fx.path().join("cpu"), version);
    sd.add("user.slice", "/user.slice", &[]);
    sd.add("user-1000.slice", "/user.slice/user-1000.slice", &[]);
    let t = SystemdTree::with_manager("allot", fx.path().join("cpu"), holder(), Box::new(sd.clone())).unwrap().on_legacy(&LegacyMounts {
        cpu: fx.path().join("cpu"),
        track: fx.path().join("unified"),
        track_line: None,
    });
    (fx, sd, t)
}

fn live(fx: &Fixture, rel: &str) -> Vec<i32> {
    fx.read(rel).split_whitespace().filter_map(|p| p.parse().ok()).filter(|&p| unsafe { libc::kill(p, 0) } == 0).collect()
}

#[test]
fn a_job_is_made_in_the_delegated_scope_in_the_v1_cpu_hierarchy() {
    let (fx, sd, t) = host(252);
    assert!(t.systemd() && t.is_legacy() && t.version() == Version::V1);
    assert_eq!(t.root(), fx.path().join("cpu"), "no root of allot's: the cpu mount");
    t.create("user-1000/j1").unwrap();
    let scope = sd.unit("allot:user-1000.scope").expect("the currency's scope was started");
    assert!(scope.delegate);
    assert_eq!(scope.props["DelegateControllers"], "[\"cpu\"]");
    assert_eq!(live(&fx, &format!("{SCOPE}/.holder/cgroup.procs")).len(), 1, "the holder, moved by allot inside its scope");
    assert!(
        sd.calls().iter().any(|c| c.starts_with("AttachProcessesToUnit allot:user-1000.scope  [")),
        "systemd takes the holder to the scope's top: {:?}",
        sd.calls()
    );
    assert!(!fx.path().join(SCOPE).join("cgroup.subtree_control").exists(), "v1 has no subtree_control, and none is made");
    assert!(fx.path().join(SCOPE).join("j1").is_dir());
    assert_eq!(t.children("user-1000").unwrap(), ["j1"]);
    assert_eq!(t.user_slices().unwrap(), [1000], "read from systemd's own hierarchy");
}

#[test]
fn a_jobs_v1_files_are_written_directly() {
    let (fx, sd, t) = host(252);
    t.create("user-1000/j1").unwrap();
    let job = format!("{SCOPE}/j1");
    fx.cgroup(&job, &v1_files());
    let calls = sd.calls().len();
    fx.blank(&[&format!("{job}/cpu.shares"), &format!("{job}/cpu.cfs_quota_us"), &format!("{job}/cpu.cfs_period_us")]);
    t.set_weight("user-1000/j1", 300).unwrap();
    assert_eq!(fx.read(&format!("{job}/cpu.shares")), "3072");
    fx.blank(&[&format!("{job}/cpu.cfs_quota_us"), &format!("{job}/cpu.cfs_period_us")]);
    t.set_max("user-1000/j1", Some(Max { quota_us: 20_000, period_us: 100_000 })).unwrap();
    assert_eq!((fx.read(&format!("{job}/cpu.cfs_quota_us")), fx.read(&format!("{job}/cpu.cfs_period_us"))), ("20000".into(), "100000".into()));
    assert_eq!(t.weight("user-1000/j1").unwrap(), 300);
    assert_eq!(t.max("user-1000/j1").unwrap(), Some(Max { quota_us: 20_000, period_us: 100_000 }));
    let e = t.set_idle("user-1000/j1", true).unwrap_err().to_string();
    assert!(e.contains("cpu.idle"), "the background is the slice's share on v1, not cpu.idle: {e}");
    assert!(!t.has_idle() && !t.idle("user-1000/j1").unwrap());
    fx.put(&format!("{job}/cpuacct.usage"), "2500000\n");
    fx.put(&format!("{SCOPE}/cpuacct.usage"), "7000000\n");
    assert_eq!(t.usage_ns("user-1000/j1").unwrap(), 2_500_000);
    assert_eq!(t.usage_ns("").unwrap(), 7_000_000, "the root: every currency scope's");
    fx.put(&format!("{job}/tasks"), "8\n9\n");
    assert_eq!(t.threads("user-1000/j1").unwrap(), [8, 9]);
    assert!(t.slice_memory().is_none(), "MemoryLow= and MemoryHigh= are cgroup v2's");
    assert_eq!(sd.calls().len(), calls, "none of this goes through systemd");
}

#[test]
fn funding_and_caps_go_to_the_slice_through_systemd_which_writes_v1_files() {
    let (fx, sd, t) = host(252);
    t.create("user-1000/j1").unwrap();
    t.set_weight("user-1000", 300).unwrap();
    assert!(sd.calls().contains(&"SetUnitProperties user-1000.slice CPUWeight=300".to_string()), "{:?}", sd.calls());
    assert_eq!(fx.read("cpu/user.slice/user-1000.slice/cpu.shares"), "3072", "written by systemd, not allot");
    assert_eq!(t.weight("user-1000").unwrap(), 300, "read back from the slice's cpu.shares");
    t.set_max("user-1000", Some(Max { quota_us: 50_000, period_us: 100_000 })).unwrap();
    assert!(sd.calls().contains(&"SetUnitProperties user-1000.slice CPUQuotaPerSecUSec=500000".to_string()));
    assert_eq!(t.max("user-1000").unwrap(), Some(Max { quota_us: 50_000, period_us: 100_000 }), "read from the slice's cfs quota");
    t.set_max("user-1000", None).unwrap();
    assert_eq!(t.max("user-1000").unwrap(), None);
}

#[test]
fn the_background_slice_weighs_the_smallest_share_on_v1() {
    let (fx, sd, t) = host(252);
    assert_eq!(t.idle_weight(), CpuWeight::Idle, "asked as on v2; systemd writes cpu.shares 2");
    t.create("background").unwrap();
    assert!(sd.calls().iter().any(|c| c.starts_with("StartTransientUnit allot_background.slice") && c.contains("CPUWeight=0")));
    assert_eq!(fx.read("cpu/allot_background.slice/cpu.shares"), "2");
    assert!(
        !t.has_idle() && !t.idle("background").unwrap(),
        "systemd writes no cpu.idle on v1: the background is the smallest share, not SCHED_IDLE"
    );
    let n = sd.calls().len();
    t.create("background/ci").unwrap();
    assert_eq!(sd.calls().len(), n, "a directory inside the scope is allot's own");
    assert!(fx.path().join("cpu/allot_background.slice/allot:background.scope/ci").is_dir());
}

#[test]
fn a_process_from_outside_goes_to_the_scope_through_systemd_then_to_its_job() {
    let (fx, sd, t) = host(252);
    t.create("user-1000/j1").unwrap();
    fx.cgroup(&format!("{SCOPE}/j1"), &v1_files());
    let me = std::process::id() as i32;
    let dir = fx.path().join(SCOPE);
    t.attach_into(&mut t.lock(), "allot:user-1000.scope", &dir, "j1", me).unwrap();
    assert!(sd.calls().contains(&format!("AttachProcessesToUnit allot:user-1000.scope  [{me}]")), "{:?}", sd.calls());
    assert_eq!(fx.read(&format!("{SCOPE}/j1/cgroup.procs")), me.to_string(), "written by allot inside its scope");
}

/// v1 has no cgroup.kill: SIGKILL to each live process still listed after its pidfd was
/// opened; a listed pid that names no live process is skipped. (A process that cannot be
/// signalled, another user's without CAP_KILL, is the systemd VM's: tests/vm/systemd/hybrid.sh.)
#[test]
fn a_job_is_killed_without_cgroup_kill() {
    let (fx, _sd, t) = host(252);
    t.create("user-1000/j1").unwrap();
    fx.cgroup(&format!("{SCOPE}/j1"), &v1_files());
    let mut child = std::process::Command::new("/bin/sleep").arg("30").spawn().unwrap();
    fx.put(&format!("{SCOPE}/j1/cgroup.procs"), &format!("{}\n", child.id()));
    t.kill_all("user-1000/j1").unwrap();
    let st = child.wait().unwrap();
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&st), Some(libc::SIGKILL));
    // A pid that is gone: nothing to kill.
    fx.put(&format!("{SCOPE}/j1/cgroup.procs"), &format!("{}\n", child.id()));
    t.kill_all("user-1000/j1").unwrap();
}

#[test]
fn a_hierarchy_is_the_cpu_one_only_by_its_whole_controller_name() {
    // cpuset and a name= hierarchy that mentions cpu are not the cpu controller.
    let lookalikes = "\
27 25 0:25 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,xattr,name=systemd
28 25 0:26 / /sys/fs/cgroup/cpuset rw - cgroup cgroup rw,cpuset
29 25 0:27 / /sys/fs/cgroup/cpux rw - cgroup cgroup rw,name=cpu
30 25 0:28 / /sys/fs/cgroup/cpuacct rw - cgroup cgroup rw,cpuacct
";
    let e = legacy_mounts(lookalikes).unwrap_err().to_string();
    assert!(e.contains("no cgroup v1 hierarchy has the cpu controller"), "{e}");
    // A mount point with a space (mountinfo's \040) is read back as it is.
    let spaced = LEGACY.replace("/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpu\\040acct");
    assert_eq!(legacy_mounts(&spaced).unwrap().cpu, std::path::PathBuf::from("/sys/fs/cgroup/cpu acct"));
}
