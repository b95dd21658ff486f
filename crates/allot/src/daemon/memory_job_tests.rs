//! A job's own memory cap against the fake kernel and a cgroup v2 memory fixture: written
//! on the job's directory when the request is served, changed and cleared by `set`, never
//! on another job; refused, naming why, where it cannot be applied.

use super::super::tests::{peer, start, world};
use super::tests::{files, read, Fixture};
use crate::proto::{MemChange, Pids, Request, Response};
use allot_linux::cgroup::memory::Memory;
use allot_linux::cgroup::Version;

const M: u64 = 1 << 20;

fn run(mem: Option<&str>) -> Request {
    Request::Run { tickets: None, currency: None, cap: None, background: false, force: false, mem: mem.map(|m| m.parse().unwrap()), oom_group: false }
}

pub(super) fn set_mem(pid: i64, mem: MemChange) -> Request {
    Request::Set {
        pids: Pids::new([pid]).unwrap(),
        tickets: None,
        cap: crate::proto::CapChange::Keep,
        background: None,
        force: false,
        mem,
        oom_group: None,
    }
}

pub(super) fn set_group(pid: i64, on: bool) -> Request {
    Request::Set {
        pids: Pids::new([pid]).unwrap(),
        tickets: None,
        cap: crate::proto::CapChange::Keep,
        background: None,
        force: false,
        mem: MemChange::Keep,
        oom_group: Some(on),
    }
}

#[test]
fn a_jobs_memory_cap_is_written_on_its_directory_only_and_set_changes_it() {
    let w = world();
    w.lock().unwrap().spawn(100, 3000, "/", "sh");
    w.lock().unwrap().spawn(101, 3000, "/", "sh");
    let mut d = start(&w, None);
    d.scan();
    let mount = std::env::temp_dir().join(format!("allot-memory-job-{}", std::process::id()));
    let _f = Fixture(mount.clone());
    let root = mount.join("fake");
    files(&mount, &[("cgroup.subtree_control", "")]);
    files(&root, &[("cgroup.subtree_control", ""), ("memory.max", "536870912\n")]);
    files(
        &root.join("user-3000"),
        &[("cgroup.subtree_control", ""), ("memory.current", "0\n"), ("memory.low", ""), ("memory.high", ""), ("memory.max", "")],
    );
    for j in ["default", "j1-u3000"] {
        files(&root.join("user-3000").join(j), &[("memory.current", "0\n"), ("memory.low", ""), ("memory.high", ""), ("memory.max", "")]);
    }
    d.memory_mut().mem = Some(Memory::at(Version::V2, mount.clone(), root.clone()));
    d.cfg_mut().memory.oom = false;
    let job = root.join("user-3000/j1-u3000");
    let r = d.handle(run(Some("64M!")), &peer(&w, 3000, 100)).unwrap();
    assert!(matches!(&r, Response::Job(j) if j.job == "1"), "{r:?}");
    assert_eq!(read(job.join("memory.max")), (64 * M).to_string(), "written as the request is served");
    assert_eq!(read(job.join("memory.high")), "max", "no soft cap: none");
    assert_eq!(d.desired().jobs.values().find(|j| j.mem.is_some()).map(|j| j.mem.unwrap().to_string()), Some("64M!".into()));
    d.apply_memory();
    assert_eq!(read(job.join("memory.max")), (64 * M).to_string(), "kept by the memory step");
    let Response::Explain(x) = d.explain(&peer(&w, 3000, 100), "1").unwrap() else { panic!("not an explanation") };
    let r = x.reasons.iter().find(|r| r.state == "memory cap").expect("a memory cap reason");
    assert!(r.on && r.because.starts_with("hard memory cap 64M!: never more") && r.because.contains("(memory.max); it holds 0 now"), "{}", r.because);
    assert_eq!(read(job.join("memory.low")), (256 * M).to_string(), "half its currency's protection: two jobs of 100 tickets");
    for f in ["memory.max", "memory.high"] {
        assert_eq!(read(root.join("user-3000/default").join(f)), "", "the other job's {f} is untouched");
    }
    assert_eq!(read(root.join("user-3000/memory.max")), "max", "the currency has no cap");
    assert_eq!(read(root.join("user-3000/memory.high")), (512 * M).to_string(), "alone: all the available memory is left it");
    // Soft: memory.high, and the hard limit taken away.
    d.handle(set_mem(100, MemChange::Set("32M".parse().unwrap())), &peer(&w, 3000, 100)).unwrap();
    // (A kernel file is written in place, so the fixture's regular file keeps the tail of a
    // longer value under a shorter one: "max" over "67108864" reads "max08864".)
    assert_eq!(read(job.join("memory.high")), (32 * M).to_string());
    assert!(read(job.join("memory.max")).starts_with("max"), "the hard cap taken away");
    d.handle(set_mem(100, MemChange::Clear), &peer(&w, 3000, 100)).unwrap();
    assert!(read(job.join("memory.high")).starts_with("max"), "--mem none clears it");
    assert!(d.desired().jobs.values().all(|j| j.mem.is_none()));
    // Another user may not cap this job.
    w.lock().unwrap().spawn(102, 3001, "/", "sh");
    let e = d.handle(set_mem(100, MemChange::Set("1G!".parse().unwrap())), &peer(&w, 3001, 102)).unwrap_err();
    assert_eq!(e.kind, crate::proto::ErrorKind::NotPermitted, "{}", e.message);
}

#[test]
fn a_memory_cap_is_refused_where_it_cannot_be_applied_naming_why() {
    let w = world();
    w.lock().unwrap().spawn(100, 3000, "/", "sh");
    let mut d = start(&w, None);
    d.scan();
    // The fake kernel has no memory controller beside allot's tree.
    let e = d.handle(run(Some("64M!")), &peer(&w, 3000, 100)).unwrap_err();
    assert!(e.message.contains("--mem") && e.message.contains("memory controller"), "{}", e.message);
    assert!(d.desired().jobs.values().all(|j| j.mem.is_none()), "nothing was made");
    d.cfg_mut().memory.enable = false;
    let e = d.handle(set_mem(100, MemChange::Set("4G".parse().unwrap())), &peer(&w, 3000, 100)).unwrap_err();
    assert!(e.message.contains("[memory] enable = false"), "{}", e.message);
    // Clearing needs no controller: there is nothing to write.
    let e = d.handle(set_mem(100, MemChange::Keep), &peer(&w, 3000, 100)).unwrap_err();
    assert!(e.message.contains("--mem SIZE|none"), "nothing to change: {}", e.message);
}

/// `--oom-group`: the job's own `memory.oom.group` on cgroup v2, written as the request is
/// served and kept by the step, never on another job; `set --oom-group off` gives the
/// kernel's default back; another user may not set it; refused on v1, naming why.
#[test]
fn a_jobs_oom_group_is_its_own_memory_oom_group_on_v2_and_refused_on_v1() {
    let w = world();
    w.lock().unwrap().spawn(100, 3000, "/", "sh");
    w.lock().unwrap().spawn(102, 3001, "/", "sh");
    let mut d = start(&w, None);
    d.scan();
    let mount = std::env::temp_dir().join(format!("allot-oom-group-{}", std::process::id()));
    let _f = Fixture(mount.clone());
    let root = mount.join("fake");
    files(&mount, &[("cgroup.subtree_control", "")]);
    files(&root, &[("cgroup.subtree_control", ""), ("memory.max", "536870912\n")]);
    let dir = [
        ("cgroup.subtree_control", ""),
        ("memory.current", "0\n"),
        ("memory.low", ""),
        ("memory.high", ""),
        ("memory.max", ""),
        ("memory.oom.group", ""),
    ];
    files(&root.join("user-3000"), &dir);
    for j in ["default", "j1-u3000"] {
        files(&root.join("user-3000").join(j), &dir);
    }
    d.memory_mut().mem = Some(Memory::at(Version::V2, mount.clone(), root.clone()));
    d.cfg_mut().memory.oom = false;
    let job = root.join("user-3000/j1-u3000");
    let mut req = run(None);
    if let Request::Run { oom_group, .. } = &mut req {
        *oom_group = true;
    }
    d.handle(req, &peer(&w, 3000, 100)).unwrap();
    assert_eq!(read(job.join("memory.oom.group")), "1", "written as the request is served");
    assert!(d.desired().jobs.values().any(|j| j.oom_group));
    std::fs::write(job.join("memory.oom.group"), "").unwrap();
    d.apply_memory();
    assert_eq!(read(job.join("memory.oom.group")), "", "kept: not written again when nothing changed");
    assert_eq!(read(root.join("user-3000/default/memory.oom.group")), "", "the other job is untouched");
    let Response::Explain(x) = d.explain(&peer(&w, 3000, 100), "1").unwrap() else { panic!("not an explanation") };
    assert!(x.reasons.iter().any(|r| r.state == "OOM group" && r.because.contains("memory.oom.group")), "{:?}", x.reasons);
    // Another user may not set it.
    let e = d.handle(set_group(100, false), &peer(&w, 3001, 102)).unwrap_err();
    assert_eq!(e.kind, crate::proto::ErrorKind::NotPermitted, "{}", e.message);
    assert!(d.desired().jobs.values().any(|j| j.oom_group), "nothing changed");
    d.handle(set_group(100, false), &peer(&w, 3000, 100)).unwrap();
    assert_eq!(read(job.join("memory.oom.group")), "0", "off: the kernel's default");
    assert!(d.desired().jobs.values().all(|j| !j.oom_group));
    // cgroup v1 has no memory.oom.group: refused, nothing changed.
    d.memory_mut().mem = Some(Memory::at(Version::V1, mount.clone(), root.clone()));
    let e = d.handle(set_group(100, true), &peer(&w, 3000, 100)).unwrap_err();
    assert!(e.message.contains("--oom-group") && e.message.contains("cgroup v1"), "{}", e.message);
    assert!(d.desired().jobs.values().all(|j| !j.oom_group));
    // Without a memory controller, or with memory by share off: refused, saying which;
    // a job that has it set says it is not in force.
    d.memory_mut().mem = Some(Memory::at(Version::V2, mount.clone(), root.clone()));
    d.handle(set_group(100, true), &peer(&w, 3000, 100)).unwrap();
    d.memory_mut().mem = None;
    let Response::Explain(x) = d.explain(&peer(&w, 3000, 100), "1").unwrap() else { panic!("not an explanation") };
    let r = x.reasons.iter().find(|r| r.state == "OOM group").expect("an OOM group reason");
    assert!(!r.on && r.because.starts_with("set (--oom-group) but not in force: ") && r.because.contains("none mounted"), "{r:?}");
    let e = d.handle(set_group(100, true), &peer(&w, 3000, 100)).unwrap_err();
    assert!(e.message.contains("none mounted"), "{}", e.message);
    let e = d.handle(set_group(100, false), &peer(&w, 3000, 100));
    assert!(e.is_ok(), "off needs nothing written: {e:?}");
}
