//! The memory step against the fake kernel and a cgroup v2 memory fixture: what it writes
//! where, without root (the v1 path runs on the real kernel in tests/memory.rs).

use super::super::fake::Shared;
use super::super::registry::CurrencyId;
use super::super::tests::{start, world};
use allot_linux::cgroup::memory::Memory;
use allot_linux::cgroup::Version;
use std::path::{Path, PathBuf};

const M: u64 = 1 << 20;

/// A memory hierarchy of files, removed when dropped.
pub(super) struct Fixture(pub(super) PathBuf);
impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Kernel files are written in place, never created: make them, empty or with a value.
pub(super) fn files(dir: &Path, names: &[(&str, &str)]) {
    std::fs::create_dir_all(dir).unwrap();
    for (n, v) in names {
        std::fs::write(dir.join(n), v).unwrap();
    }
}

pub(super) fn read(p: PathBuf) -> String {
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A v2 fixture: allot's root bounded at 512 MiB (the memory available to users), users
/// 3000 (100 MiB, funded 300) and 3001 (10 MiB, a hard cap of 64 MiB), and a
/// /proc/meminfo whose `MemAvailable` is `available_kb`.
fn two_users(tag: &str, available_kb: u64) -> (super::super::core::Daemon, Fixture, PathBuf, PathBuf) {
    two_users_in(&world(), tag, available_kb)
}

fn two_users_in(w: &Shared, tag: &str, available_kb: u64) -> (super::super::core::Daemon, Fixture, PathBuf, PathBuf) {
    w.lock().unwrap().spawn(100, 3000, "/", "sh");
    w.lock().unwrap().spawn(101, 3001, "/", "sh");
    let mut d = start(w, None);
    d.scan();
    let mount = std::env::temp_dir().join(format!("allot-memory-{tag}-{}", std::process::id()));
    let f = Fixture(mount.clone());
    let root = mount.join("fake");
    files(&mount, &[("cgroup.subtree_control", ""), ("meminfo", &format!("MemTotal: 25165824 kB\nMemAvailable: {available_kb} kB\n"))]);
    files(&root, &[("cgroup.subtree_control", ""), ("memory.max", "536870912\n")]);
    for c in ["user-3000", "user-3001"] {
        let cur = if c == "user-3000" { "104857600\n" } else { "10485760\n" };
        files(&root.join(c), &[("cgroup.subtree_control", ""), ("memory.current", cur), ("memory.low", ""), ("memory.high", ""), ("memory.max", "")]);
        files(&root.join(c).join("default"), &[("memory.current", "0\n"), ("memory.low", "")]);
    }
    d.memory_mut().mem = Some(Memory::at(Version::V2, mount.clone(), root.clone()).with_meminfo(mount.join("meminfo")));
    d.cfg_mut().memory.oom = false;
    d.registry_mut().set_funding(CurrencyId::User(3000), 300);
    d.cfg_mut().funding.insert("3001".into(), crate::config_funding::FundingEntry { mem: Some("64M!".parse().unwrap()), ..Default::default() });
    (d, f, mount, root)
}

#[test]
fn v2_protection_follows_funding_and_tickets_and_caps_are_written() {
    // Plenty of room (16 GiB available): the 512 MiB bound is the memory available.
    let (mut d, _f, mount, root) = two_users("step", 16 << 20);
    d.apply_memory();
    assert_eq!(read(root.join("user-3000/memory.low")), (384 * M).to_string());
    assert_eq!(read(root.join("user-3001/memory.low")), (128 * M).to_string());
    assert_eq!(read(root.join("user-3000/default/memory.low")), (384 * M).to_string(), "one job: all its currency's protection");
    assert_eq!(read(root.join("user-3001/memory.max")), (64 * M).to_string(), "the hard memory cap");
    assert_eq!(read(root.join("user-3001/memory.high")), "max", "its hard cap is below what the other leaves it: no memory.high");
    assert_eq!(read(root.join("user-3000/memory.max")), "max", "no cap, and no guard on v2 (memory.low does it)");
    // memory.high is what the other currency leaves it: 512 MiB less what 3001 holds
    // within its share (10 MiB) and 16 MiB, rounded down to 16 MiB.
    assert_eq!(read(root.join("user-3000/memory.high")), (480 * M).to_string());
    for dir in [mount.clone(), root.clone(), root.join("user-3000"), root.join("user-3001")] {
        assert_eq!(read(dir.join("cgroup.subtree_control")), "+memory", "memory delegated through {}", dir.display());
    }
    let v = d.memory_view(&CurrencyId::User(3000)).unwrap();
    assert_eq!((v.usage, v.protection, v.available, v.limit), (100 * M, 384 * M, 512 * M, None));
    assert_eq!(d.memory_view(&CurrencyId::User(3001)).unwrap().limit, Some(64 * M));
    // At stop, what the others left a currency (memory.high) is taken back: none here,
    // 3001's hard cap kept.
    std::fs::write(root.join("user-3000/memory.high"), "").unwrap();
    d.undo_memory();
    assert_eq!(read(root.join("user-3000/memory.high")), "max", "memory.high taken back at stop");
    assert_eq!(read(root.join("user-3001/memory.max")), (64 * M).to_string(), "the hard cap kept");
    d.memory_mut().at = None;
    d.apply_memory();
    // Written once: a second step with nothing changed writes nothing (the file is left as we
    // overwrite it by hand, so a write would show).
    std::fs::write(root.join("user-3000/memory.low"), "untouched").unwrap();
    d.memory_mut().at = None;
    d.apply_memory();
    assert_eq!(read(root.join("user-3000/memory.low")), "untouched");
}

/// cgroup v2 without systemd: the memory available to users is no more than the machine
/// has room for (the users' charges and `MemAvailable`, less 32 MiB), as on a systemd
/// host's slices; kept while the room grows by less than 32 MiB, lowered at once.
#[test]
fn v2_memory_available_is_what_the_machine_has_room_for() {
    // The users hold 110 MiB, the kernel has 82 MiB more: room for 160 of the 512.
    let (mut d, _f, mount, root) = two_users("room", 82 << 10);
    d.apply_memory();
    assert_eq!(read(root.join("user-3000/memory.low")), (120 * M).to_string(), "3/4 of 160 MiB");
    assert_eq!(read(root.join("user-3001/memory.low")), (40 * M).to_string(), "1/4 of 160 MiB");
    assert_eq!(d.memory_view(&CurrencyId::User(3000)).unwrap().available, 160 * M);
    // Room for 168 now: less than 32 MiB more, so the value stays and nothing is written.
    std::fs::write(mount.join("meminfo"), "MemAvailable: 92160 kB\n").unwrap();
    std::fs::write(root.join("user-3000/memory.low"), "untouched").unwrap();
    d.memory_mut().at = None;
    d.apply_memory();
    assert_eq!(read(root.join("user-3000/memory.low")), "untouched");
    // Room for 128: lowered at once.
    std::fs::write(mount.join("meminfo"), "MemAvailable: 51200 kB\n").unwrap();
    d.memory_mut().at = None;
    d.apply_memory();
    assert_eq!(read(root.join("user-3000/memory.low")), (96 * M).to_string(), "3/4 of 128 MiB");
    // No MemAvailable to read: the 512 MiB bound alone.
    std::fs::write(mount.join("meminfo"), "MemTotal: 25165824 kB\n").unwrap();
    d.memory_mut().at = None;
    d.apply_memory();
    assert_eq!(d.memory_view(&CurrencyId::User(3000)).unwrap().available, 512 * M);
}

/// cgroup v2 without systemd: a background job's charge is in the users' room (their
/// reclaim takes it first: it has no protection), not the system's.
#[test]
fn v2_the_background_jobs_memory_is_in_the_users_room() {
    let w = world();
    let (mut d, _f, _mount, root) = two_users_in(&w, "bgroom", 82 << 10);
    // allot's background sibling, beside its root
    files(&root.with_file_name("fake-background"), &[("memory.current", &(64 * M).to_string())]);
    d.apply_memory();
    assert_eq!(d.memory_view(&CurrencyId::User(3000)).unwrap().available, 160 * M, "no background job: not read");
    let run = crate::proto::Request::Run { tickets: None, currency: None, cap: None, background: true, force: false, mem: None, oom_group: false };
    d.handle(run, &super::super::tests::peer(&w, 3000, 100)).unwrap();
    d.memory_mut().at = None;
    d.apply_memory();
    // 110 + 64 + 82 - 32 = 224 MiB, against 160 with the background's 64 counted as the system's.
    assert_eq!(d.memory_view(&CurrencyId::User(3000)).unwrap().available, 224 * M);
    assert_eq!(read(root.join("user-3000/memory.low")), (168 * M).to_string(), "3/4 of 224 MiB");
}

/// cgroup v2 without systemd, in a container: /proc/meminfo is the host's (16 GiB
/// available here), the container's own cgroup (the mount's top) is limited to 256 MiB
/// and holds 200; the users may hold what it leaves them, not what the host has.
#[test]
fn v2_in_a_container_its_own_limit_bounds_the_users() {
    let (mut d, _f, mount, root) = two_users("container", 16 << 20);
    files(&mount, &[("memory.max", &(256 * M).to_string()), ("memory.current", &(200 * M).to_string())]);
    d.apply_memory();
    // 110 MiB held + 56 left under the container's limit - 32 = 134, to 16 MiB: 128 (the
    // host's MemAvailable would have left the root's 512).
    assert_eq!(d.memory_view(&CurrencyId::User(3000)).unwrap().available, 128 * M);
    assert_eq!(read(root.join("user-3000/memory.low")), (96 * M).to_string(), "3/4 of 128 MiB");
    // Room to spare under it: the container's limit less the 10% reserve, below the root's 512.
    std::fs::write(mount.join("memory.current"), (10 * M).to_string()).unwrap();
    d.memory_mut().at = None;
    d.apply_memory();
    assert_eq!(d.memory_view(&CurrencyId::User(3000)).unwrap().available, 256 * M - 256 * M / 10);
}

/// Hostile: allot raised a process's `oom_score_adj`, the process exited and its pid now
/// names another process (here: a child of the test, with its own start time). Neither
/// the give-back when the currency is within its share again nor the undo at stop may
/// write the old process's value onto the new one; the same process gets its own back.
#[test]
fn a_raised_pid_that_now_names_another_process_is_given_nothing_back() {
    use super::Raised;
    use crate::daemon::oom_audit::OomWhat;
    use allot_linux::process::procfs::ProcDir;
    let w = world();
    let mut d = start(&w, None);
    let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
    let pid = child.id() as i32;
    let dir = ProcDir::open(pid).unwrap();
    let before = dir.oom_score_adj().unwrap();
    let other = Raised { start: dir.start() + 1, orig: 700 };
    d.memory_mut().oom.insert(pid, other);
    d.oom_adj(pid, allot_model::memory::WITHIN_SHARE_ADJ);
    assert_eq!(dir.oom_score_adj().unwrap(), before, "the give-back went to another process");
    assert!(d.memory_mut().oom.is_empty(), "the other process's entry is dropped");
    d.memory_mut().oom.insert(pid, other);
    d.undo_memory();
    assert_eq!(dir.oom_score_adj().unwrap(), before, "the undo went to another process");
    // Over its share: raised, recorded with this process's start, and given back to it;
    // each change said for the audit trail, a repeat not.
    let what = d.oom_adj(pid, 600);
    if before < 600 {
        assert_eq!(what, Some(OomWhat::Raised { pid, from: before, to: 600 }));
    }
    assert_eq!(d.oom_adj(pid, 600), None, "already raised: no decision to record");
    assert_eq!(dir.oom_score_adj().unwrap(), 600.max(before));
    assert_eq!(d.memory_mut().oom.get(&pid), Some(&Raised { start: dir.start(), orig: before }));
    d.memory_mut().oom.insert(pid, Raised { start: dir.start(), orig: 700 });
    d.undo_memory();
    assert_eq!(dir.oom_score_adj().unwrap(), 700, "the same process gets its value back");
    child.kill().unwrap();
    child.wait().unwrap();
}

/// A reload that turns memory by share off takes back every value the step wrote (the
/// kernel's defaults, not 0 limits), and writes nothing more while off; on again, the
/// state is made afresh and the next step writes everything again. The desired state
/// (a funding, a cap) is untouched.
#[test]
fn memory_by_share_turned_off_by_a_reload_gives_every_value_back_and_on_again_writes_them() {
    let w = world();
    w.lock().unwrap().spawn(100, 3000, "/", "sh");
    let mut d = start(&w, None);
    d.scan();
    let mount = std::env::temp_dir().join(format!("allot-memory-switch-{}", std::process::id()));
    let _f = Fixture(mount.clone());
    let root = mount.join("fake");
    files(&mount, &[("cgroup.subtree_control", "")]);
    files(&root, &[("cgroup.subtree_control", ""), ("memory.max", "536870912\n")]);
    let all = [("cgroup.subtree_control", ""), ("memory.current", "0\n"), ("memory.low", ""), ("memory.high", ""), ("memory.max", "")];
    files(&root.join("user-3000"), &all);
    files(&root.join("user-3000/default"), &all);
    // A background job with a cap and an OOM group: its directory is in allot's
    // background sibling, which the memory hierarchy mirrors.
    let bg = mount.join("fake-background");
    files(&bg, &[("cgroup.subtree_control", "")]);
    files(&bg.join("user-3000"), &[("cgroup.subtree_control", "")]);
    files(
        &bg.join("user-3000/j1-u3000"),
        &[("memory.current", "0\n"), ("memory.low", ""), ("memory.high", ""), ("memory.max", ""), ("memory.oom.group", "")],
    );
    let fixture = Memory::at(Version::V2, mount.clone(), root.clone());
    d.memory_mut().mem = Some(fixture.clone());
    d.cfg_mut().memory.oom = false;
    d.cfg_mut().funding.insert("3000".into(), crate::config_funding::FundingEntry { mem: Some("64M!".parse().unwrap()), ..Default::default() });
    let run = crate::proto::Request::Run {
        tickets: None,
        currency: None,
        cap: None,
        background: true,
        force: false,
        mem: Some("32M!".parse().unwrap()),
        oom_group: true,
    };
    d.handle(run, &super::super::tests::peer(&w, 3000, 100)).unwrap();
    let bj = bg.join("user-3000/j1-u3000");
    assert_eq!((read(bj.join("memory.max")), read(bj.join("memory.oom.group"))), ((32 * M).to_string(), "1".to_string()));
    d.apply_memory();
    assert_eq!(read(root.join("user-3000/memory.low")), (512 * M).to_string(), "alone: all of it");
    assert_eq!(read(root.join("user-3000/memory.max")), (64 * M).to_string());
    // A kernel file is written in place: the fixture's files are emptied, so what the
    // take-back writes reads whole.
    for dir in [root.join("user-3000"), root.join("user-3000/default"), bj.clone()] {
        for f in ["memory.low", "memory.high", "memory.max"] {
            std::fs::write(dir.join(f), "").unwrap();
        }
    }
    std::fs::write(bj.join("memory.oom.group"), "").unwrap();
    d.cfg_mut().memory.enable = false;
    d.apply_memory();
    for dir in [root.join("user-3000"), root.join("user-3000/default")] {
        assert_eq!(read(dir.join("memory.low")), "0", "{} protection given back", dir.display());
        assert_eq!(read(dir.join("memory.max")), "max", "{} limit given back", dir.display());
        assert_eq!(read(dir.join("memory.high")), "max", "{}", dir.display());
    }
    assert_eq!(read(bj.join("memory.max")), "max", "the background job's cap given back, in the sibling");
    assert_eq!(read(bj.join("memory.oom.group")), "0", "and its OOM group");
    assert!(d.memory().mem.is_none() && d.memory().view.is_empty() && d.memory().written.is_empty());
    assert!(d.memory_view(&CurrencyId::User(3000)).is_none(), "show has no memory row while off");
    std::fs::write(root.join("user-3000/memory.low"), "untouched").unwrap();
    d.memory_mut().at = None;
    d.apply_memory();
    assert_eq!(read(root.join("user-3000/memory.low")), "untouched", "off: nothing written again");
    // On again: a fresh state (this fixture stands in for the controller the real tree
    // has), and every value written again from the unchanged desired state.
    d.cfg_mut().memory.enable = true;
    d.apply_memory();
    assert!(d.memory().enabled);
    d.memory_mut().mem = Some(fixture);
    d.memory_mut().at = None;
    d.apply_memory();
    assert_eq!(read(root.join("user-3000/memory.low")), (512 * M).to_string());
    assert_eq!(read(root.join("user-3000/memory.max")), (64 * M).to_string(), "the funding's cap holds again");
}

/// Hostile to the audit of a reload: OOM by share turned off while a process is raised
/// must give it its own value back (the step reads no process while off, so a raised one
/// would otherwise stay raised, forgotten).
#[test]
fn oom_by_share_turned_off_gives_every_raised_process_its_value_back() {
    use super::Raised;
    use allot_linux::process::procfs::ProcDir;
    let w = world();
    let mut d = start(&w, None);
    let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
    let pid = child.id() as i32;
    let dir = ProcDir::open(pid).unwrap();
    // Raising is allowed to anyone; the value given back (700) is above the one now (0).
    d.memory_mut().oom.insert(pid, Raised { start: dir.start(), orig: 700 });
    d.memory_mut().raised.insert(CurrencyId::User(3000));
    d.cfg_mut().memory.oom = false;
    d.apply_memory();
    assert_eq!(dir.oom_score_adj().unwrap(), 700, "given back");
    assert!(d.memory().oom.is_empty() && d.memory().raised.is_empty());
    child.kill().unwrap();
    child.wait().unwrap();
}
