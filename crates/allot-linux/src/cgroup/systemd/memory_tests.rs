//! Memory on the users' slices against the fake systemd: what is asked of systemd, what
//! is read, what is held back, what is refused.

use super::super::fake::{holder, FakeSystemd};
use super::*;
use crate::cgroup::fixture::{Fixture, V2_FILES};
use crate::cgroup::systemd::WEIGHT_INTERVAL;
use crate::cgroup::CpuController;

const M: u64 = 1 << 20;

fn host() -> (Fixture, FakeSystemd, SystemdTree) {
    let fx = Fixture::new("systemd-memory");
    fx.cgroup("", V2_FILES);
    let sd = FakeSystemd::new(fx.path().to_path_buf(), 252);
    sd.add("user.slice", "/user.slice", &[]);
    sd.add("user-1000.slice", "/user.slice/user-1000.slice", &[]);
    let t = SystemdTree::with_manager("allot", fx.path().to_path_buf(), holder(), Box::new(sd.clone())).unwrap();
    (fx, sd, t)
}

fn sets(sd: &FakeSystemd) -> Vec<String> {
    sd.calls().into_iter().filter(|c| c.starts_with("SetUnitProperties")).collect()
}

#[test]
fn protection_and_caps_go_to_the_slice_through_systemd_once_and_rate_bounded() {
    let (fx, sd, t) = host();
    let m = t.slice_memory().expect("a systemd tree shares memory on slices");
    let slice = fx.path().join("user.slice/user-1000.slice");
    std::fs::write(slice.join("memory.current"), "104857600\n").unwrap();
    assert_eq!(m.slice_usage("user-1000").unwrap(), 100 * M);
    m.set_slice_memory("user-1000", SliceProp::Low, Some(384 * M + 4095)).unwrap();
    m.set_slice_memory("user-1000", SliceProp::Max, Some(64 * M)).unwrap();
    // No soft cap, and allot never sent one: the slice's own MemoryHigh= (an
    // administrator's) is left alone, not overridden with infinity.
    m.set_slice_memory("user-1000", SliceProp::High, None).unwrap();
    m.set_users_low(Some(512 * M)).unwrap();
    assert_eq!(
        sets(&sd),
        [
            "SetUnitProperties user-1000.slice MemoryLow=402653184",
            "SetUnitProperties user-1000.slice MemoryMax=67108864",
            "SetUnitProperties user.slice MemoryLow=536870912",
        ],
        "whole MiB, each property once, the protection's parent too"
    );
    // systemd wrote the slice's files; allot wrote none of them.
    assert_eq!(std::fs::read_to_string(slice.join("memory.low")).unwrap(), (384 * M).to_string());
    assert_eq!(std::fs::read_to_string(slice.join("memory.max")).unwrap(), (64 * M).to_string());
    // The same values again: nothing is sent. A change within the second is held back,
    // the latest value winning, and goes out from upkeep when its second is up.
    m.set_slice_memory("user-1000", SliceProp::Low, Some(384 * M)).unwrap();
    m.set_slice_memory("user-1000", SliceProp::Low, Some(200 * M)).unwrap();
    m.set_slice_memory("user-1000", SliceProp::Low, Some(256 * M)).unwrap();
    assert_eq!(sets(&sd).len(), 3, "held back within the second");
    assert!(t.upkeep().is_empty());
    assert_eq!(sets(&sd).len(), 3, "not due yet");
    std::thread::sleep(WEIGHT_INTERVAL);
    assert!(t.upkeep().is_empty());
    assert_eq!(sets(&sd)[3], "SetUnitProperties user-1000.slice MemoryLow=268435456");
    assert_eq!(sets(&sd).len(), 4);
    // Unset: a protection goes to 0, a cap to infinity.
    std::thread::sleep(WEIGHT_INTERVAL);
    m.set_slice_memory("user-1000", SliceProp::Low, None).unwrap();
    m.set_slice_memory("user-1000", SliceProp::Max, None).unwrap();
    assert_eq!(sets(&sd)[4..], ["SetUnitProperties user-1000.slice MemoryLow=0", "SetUnitProperties user-1000.slice MemoryMax=18446744073709551615"]);
    assert_eq!(std::fs::read_to_string(slice.join("memory.max")).unwrap(), "max");
}

#[test]
fn a_reset_takes_back_at_once_only_what_allot_sent() {
    let (_fx, sd, t) = host();
    let m = t.slice_memory().unwrap();
    m.set_slice_memory("user-1000", SliceProp::Low, Some(300 * M)).unwrap();
    m.set_slice_memory("user-1000", SliceProp::Low, Some(310 * M)).unwrap();
    m.set_users_low(Some(300 * M)).unwrap();
    let n = sets(&sd).len();
    // Within the second of the last sends (a held value pending): the reset still goes now.
    m.reset_memory(Some("user-1000")).unwrap();
    m.reset_memory(None).unwrap();
    assert_eq!(
        sets(&sd)[n..],
        ["SetUnitProperties user-1000.slice MemoryLow=0", "SetUnitProperties user.slice MemoryLow=0"],
        "no cap was sent: none is reset"
    );
    assert!(t.upkeep().is_empty());
    std::thread::sleep(WEIGHT_INTERVAL);
    assert!(t.upkeep().is_empty());
    assert_eq!(sets(&sd).len(), n + 2, "the held value is dropped, not sent after the reset");
    m.reset_memory(Some("user-1000")).unwrap();
    assert_eq!(sets(&sd).len(), n + 2, "nothing left to take back");
}

#[test]
fn the_io_weight_goes_to_the_slice_in_systemds_range_and_is_taken_back() {
    let (fx, sd, t) = host();
    let m = t.slice_memory().unwrap();
    let slice = fx.path().join("user.slice/user-1000.slice");
    m.set_slice_memory("user-1000", SliceProp::IoWeight, Some(300)).unwrap();
    m.set_slice_memory("user-1000", SliceProp::IoWeight, Some(300)).unwrap();
    assert_eq!(sets(&sd), ["SetUnitProperties user-1000.slice IOWeight=300"], "the weight itself, once");
    assert_eq!(std::fs::read_to_string(slice.join("io.weight")).unwrap(), "default 300", "as systemd writes it");
    std::thread::sleep(WEIGHT_INTERVAL);
    m.set_slice_memory("user-1000", SliceProp::IoWeight, Some(50_000)).unwrap();
    assert_eq!(sets(&sd)[1], "SetUnitProperties user-1000.slice IOWeight=10000", "systemd's range ends at 10000");
    m.reset_memory(Some("user-1000")).unwrap();
    assert_eq!(sets(&sd)[2], "SetUnitProperties user-1000.slice IOWeight=18446744073709551615", "no weight: the default again");
    assert_eq!(std::fs::read_to_string(slice.join("io.weight")).unwrap(), "default 100");
    std::fs::write(slice.join("io.pressure"), "some avg10=4.00 avg60=1.00 avg300=0.00 total=900\nfull avg10=1.00 avg60=0.00 avg300=0.00 total=300\n")
        .unwrap();
    std::fs::write(slice.join("memory.pressure"), "garbage\n").unwrap();
    let p = m.slice_pressure("user-1000");
    assert_eq!((p.io.map(|x| x.some.total_us), p.memory), (Some(900), None), "a garbled file gives none");
    assert_eq!(m.slice_pressure("../x"), Default::default());
}

#[test]
fn a_refused_send_is_sent_again_and_bad_paths_are_refused() {
    let (_fx, sd, t) = host();
    let m = t.slice_memory().unwrap();
    // No such slice (user 1001 is not logged in): systemd's error, and the next offer sends.
    let e = m.set_slice_memory("user-1001", SliceProp::Low, Some(M)).unwrap_err();
    assert!(e.to_string().contains("user-1001.slice"), "{e}");
    sd.add("user-1001.slice", "/user.slice/user-1001.slice", &[]);
    std::thread::sleep(WEIGHT_INTERVAL);
    m.set_slice_memory("user-1001", SliceProp::Low, Some(M)).unwrap();
    assert_eq!(sd.unit("user-1001.slice").unwrap().props["MemoryLow"], M.to_string());
    for bad in ["", "background", "user-1000/j1", "../x"] {
        assert!(m.set_slice_memory(bad, SliceProp::Low, Some(M)).is_err(), "{bad:?}");
        assert!(m.slice_usage(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn a_slices_processes_and_oom_kills_are_read_below_it() {
    let (fx, _sd, t) = host();
    let m = t.slice_memory().unwrap();
    let slice = "user.slice/user-1000.slice";
    fx.cgroup(&format!("{slice}/session-3.scope"), V2_FILES);
    // allot's scope has no files of its own here: as if it ended while the slice was walked.
    fx.cgroup(&format!("{slice}/allot:user-1000.scope/j1"), V2_FILES);
    std::fs::write(fx.path().join(slice).join("session-3.scope/cgroup.procs"), "41\n42\n").unwrap();
    std::fs::write(fx.path().join(slice).join("allot:user-1000.scope/j1/cgroup.procs"), "43\n").unwrap();
    let mut p = m.slice_procs("user-1000").unwrap();
    p.sort();
    assert_eq!(p, [41, 42, 43]);
    std::fs::write(fx.path().join(slice).join("memory.events"), "low 0\nhigh 0\nmax 0\noom 2\noom_kill 2\n").unwrap();
    assert_eq!(m.slice_oom_kills("user-1000").unwrap(), 2);
    std::fs::write(fx.path().join("user.slice/memory.max"), "max\n").unwrap();
    assert_eq!(m.users_max().unwrap(), None);
    std::fs::write(fx.path().join("user.slice/memory.max"), "1073741824\n").unwrap();
    assert_eq!(m.users_max().unwrap(), Some(1 << 30));
    assert!(!m.recursive_protection(), "a fixture is no cgroup2 mount");
}

#[test]
fn recursive_protection_is_read_from_the_mount_options() {
    let on = "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n";
    let off = "30 23 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n";
    let elsewhere = "30 23 0:26 / /mnt/cg rw shared:4 - cgroup2 cgroup2 rw,memory_recursiveprot\n";
    assert!(has_recursiveprot(on, "/sys/fs/cgroup"));
    assert!(!has_recursiveprot(off, "/sys/fs/cgroup"));
    assert!(!has_recursiveprot(elsewhere, "/sys/fs/cgroup"));
    assert!(!has_recursiveprot("garbage", "/sys/fs/cgroup"));
    assert_eq!(to_mib(Some(M - 1)), 0);
    assert_eq!(to_mib(None), u32::MAX);
    assert_eq!(to_mib(Some(u64::MAX - 1)), u32::MAX - 1, "a huge cap stays a cap");
}
