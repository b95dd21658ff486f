//! `allot why` recognises a memory stall and names whose use caused it, on this machine's
//! cgroup v1 memory controller. A private daemon places two test users' processes; its
//! memory root (where the v1 backend mirrors its tree) is bounded to 160 MiB, so the
//! pressure stays inside it and the host is never pushed. A's reader reads a 100 MiB file
//! over and over: alone, the file fits and stays cached. B's hog then holds 100 MiB of
//! anonymous memory (no swap: it cannot be reclaimed), so the kernel reclaims A's cache
//! and A reads it back from disk. Memory by share is off, so nothing of allot's protects A.
//! Root; fails, never skips.

mod common;

use allot_measure::why::{Diagnosis, Verdict};
use common::*;
use std::path::{Path, PathBuf};
use std::time::Duration;

const MIB: u64 = 1 << 20;

/// The test's file, removed (with its directory) when dropped.
struct File(PathBuf);

impl File {
    /// A file of `mib` MiB that every user may read, written with O_DIRECT: none of it is
    /// cached (and charged to the test) before a test user reads it.
    fn new(name: &str, mib: u64) -> File {
        use std::os::unix::fs::PermissionsExt;
        let dir = File(std::env::temp_dir().join(format!("allot-{name}-{}", std::process::id())));
        std::fs::create_dir_all(&dir.0).unwrap();
        std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o755)).unwrap();
        let st = std::process::Command::new("dd")
            .args(["if=/dev/zero", &format!("of={}", dir.path().display()), "bs=1M", &format!("count={mib}"), "oflag=direct", "status=none"])
            .status()
            .unwrap();
        assert!(st.success(), "dd {}", dir.path().display());
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o644)).unwrap();
        dir
    }

    fn path(&self) -> PathBuf {
        self.0.join("f")
    }
}

impl Drop for File {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `allot why --json`, read as the instruments' `Diagnosis`.
fn why(d: &PrivateDaemon, pid: u32, uid: Option<u32>) -> Diagnosis {
    let o = d.cli(&["why", "--json", "-d", "2", &pid.to_string()], uid).unwrap();
    serde_json::from_str(&ok(&o)).unwrap()
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn why_says_a_reader_whose_cache_a_hog_reclaims_is_stalled_on_memory_and_names_the_hogs_currency() {
    require_root();
    let _s = serial();
    assert!(
        Path::new("/sys/fs/cgroup/memory/memory.usage_in_bytes").exists(),
        "this test needs the cgroup v1 memory controller at /sys/fs/cgroup/memory"
    );
    let f = File::new("why-stall", 100);
    let file = f.path();

    let cfg = format!("scan_ms = 200\n[users]\nonly = [\"{A}\", \"{B}\"]\n[memory]\nenable = false\n");
    let mut d = PrivateDaemon::start(exe(), &cfg).unwrap();
    let mem = Path::new("/sys/fs/cgroup/memory").join(&d.root_name);
    std::fs::write(mem.join("memory.limit_in_bytes"), (160 * MIB).to_string()).unwrap();
    let lab = lab().display().to_string();
    // Each started with `allot run`, so it is in its job's memory cgroup before it reads
    // or allocates a page: v1 does not move a charge with a process, and a cache charged
    // outside allot's bounded root would never be reclaimed there.
    let reader = d.run_job(&[], &[&lab, "workload", "read", "--file", file.to_str().unwrap()], Some(A)).unwrap();
    d.wait_exec(reader).unwrap();
    wait_for("A's reader placed", || job_with_pid(&show(&d), reader));
    let root = d.root_name.clone();
    let in_mem = |p: u32| std::fs::read_to_string(format!("/proc/{p}/cgroup")).unwrap().lines().any(|l| l.contains(":memory:/") && l.contains(&root));
    assert!(in_mem(reader), "A's reader is in allot's memory root");

    // Alone, its file fits in 160 MiB: once cached, it does not stall.
    std::thread::sleep(Duration::from_secs(3));
    let alone = why(&d, reader, Some(A));
    eprintln!("alone: verdict {:?}, stall {:?}", alone.verdict, alone.stall.facts);
    assert_ne!(alone.verdict, Verdict::MemoryStall, "{alone:#?}");

    // B's hog: two arrays of 50 MiB, touched over and over.
    let hog = d.run_job(&[], &[&lab, "workload", "mem", "--mib", "50"], Some(B)).unwrap();
    d.wait_exec(hog).unwrap();
    let hog_job = wait_for("B's hog placed", || job_with_pid(&show(&d), hog));
    assert!(in_mem(hog), "B's hog is in allot's memory root");
    let b_currency = hog_job.currency.clone();
    let v = poll_until("why to say stalled on memory", Duration::from_secs(60), || {
        let v = why(&d, reader, Some(A));
        if v.verdict == Verdict::MemoryStall {
            Ok(v)
        } else {
            Err(format!("{:?}: {}", v.verdict, v.reason))
        }
    });
    eprintln!("with B's hog: {}", v.reason);
    let culprit = v.stall.culprit.as_ref().expect("whose use is named");
    assert_eq!(culprit.name, format!("currency {b_currency}"), "{v:#?}");
    assert!(!culprit.own);
    assert!(culprit.pids.contains(&(hog as i32)), "the hog's pid is named: {v:#?}");
    let reason = v.reason.as_str();
    assert!(reason.contains(&format!("whose use caused it: currency {b_currency} holds the most memory there")), "{reason}");
    assert_eq!(v.stall.domain.as_ref().map(|d| d.0.clone()), Some(format!("/{}", d.root_name)), "reclaimed first in allot's bounded root: {v:#?}");
    assert!(v.ask.iter().any(|a| a.starts_with(&format!("currency {b_currency} causes it"))), "{v:#?}");

    // Root sees the same; another user (B) may not read A's /proc/PID/io, and is told so.
    let text = ok(&d.cli(&["why", "-d", "2", &reader.to_string()], None).unwrap());
    eprintln!("{text}");
    assert!(text.contains("memory and I/O (") && text.contains("pages refaulted per second"), "{text}");
    let other = why(&d, reader, Some(B));
    assert!(other.stall.io_unreadable.as_deref().is_some_and(|e| e.contains("/io")), "{other:#?}");
    assert_eq!(other.asker, B);

    d.stop().unwrap();
    assert!(!mem.exists(), "memory cgroup {} removed", mem.display());
}

/// A reader that bypasses the page cache (`dd iflag=direct`, 4 KiB at a time) waits for
/// its disk, with no memory behind it: stalled on I/O.
#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn why_says_a_direct_reader_is_stalled_on_io() {
    require_root();
    let _s = serial();
    let f = File::new("why-io", 256);
    let file = f.path();
    let cfg = format!("scan_ms = 200\n[users]\nonly = [\"{A}\", \"{B}\"]\n[memory]\nenable = false\n");
    let mut d = PrivateDaemon::start(exe(), &cfg).unwrap();
    let script = format!("while :; do dd if={} of=/dev/null bs=4k iflag=direct status=none; done", file.display());
    let sh = d.run_job(&[], &["sh", "-c", &script], Some(A)).unwrap();
    let _loop = Loop(sh);
    d.wait_exec(sh).unwrap();
    // Each dd reads the file once and exits; ask about whichever runs now, again if it
    // exits mid-sample.
    let t0 = std::time::Instant::now();
    let mut last = String::new();
    let v = loop {
        assert!(t0.elapsed() < Duration::from_secs(60), "why never said stalled on I/O; last: {last}");
        let kids = std::fs::read_to_string(format!("/proc/{sh}/task/{sh}/children")).unwrap_or_default();
        let Some(dd) = kids.split_whitespace().next().map(str::to_string) else { continue };
        let o = d.cli(&["why", "--json", "-d", "1", &dd], Some(A)).unwrap();
        if !o.status.success() {
            last = String::from_utf8_lossy(&o.stderr).into_owned();
            continue;
        }
        let v: Diagnosis = serde_json::from_str(&String::from_utf8_lossy(&o.stdout)).unwrap();
        if v.verdict == Verdict::IoStall {
            break v;
        }
        last = format!("{:#?}", v.stall);
    };
    eprintln!("{}", v.reason);
    let f = &v.stall.facts;
    assert!(f.disk_read_per_s.is_some_and(|r| r > 0.0) && f.blocked_share >= 0.1, "{v:#?}");
    assert!(v.stall.culprit.is_some(), "whose I/O is named: {v:#?}");
    assert_eq!(v.help.first().map(String::as_str), Some("(no CPU setting will help: it waits for its disk)"));
    drop(_loop);
    d.stop().unwrap();
}

/// A shell loop this test started, ended on drop (even when the test fails) with the
/// children it has: a dd left reading after the shell dies would outlive the test, in the
/// shelter. The shell is stopped first so it forks no other, then each child and the shell
/// are killed by pid.
struct Loop(u32);

impl Drop for Loop {
    fn drop(&mut self) {
        stop_loop(self.0);
    }
}

fn stop_loop(sh: u32) {
    // SAFETY: plain kill(2) calls on pids this test started (the shell) or that the shell,
    // stopped, forked and has not reaped (its children: their pids cannot be reused).
    unsafe { libc::kill(sh as i32, libc::SIGSTOP) };
    let kids = std::fs::read_to_string(format!("/proc/{sh}/task/{sh}/children")).unwrap_or_default();
    for k in kids.split_whitespace().filter_map(|k| k.parse::<i32>().ok()) {
        // SAFETY: as above.
        unsafe { libc::kill(k, libc::SIGKILL) };
    }
    // SAFETY: as above.
    unsafe { libc::kill(sh as i32, libc::SIGKILL) };
}

/// With memory by share on (the default), the daemon's shares decide whose use caused a
/// memory stall: A's reader of a 200 MiB file in allot's root bounded to 256 MiB (funding
/// 100 each: a share of 128 MiB) thrashes beside B's hog of 2 × 50 MiB, within its share;
/// A's own currency, over its share, is named, not B's.
#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn with_memory_by_share_why_names_the_currency_over_its_share() {
    require_root();
    let _s = serial();
    let f = File::new("why-share", 200);
    let file = f.path();
    let cfg = format!("scan_ms = 200\n[users]\nonly = [\"{A}\", \"{B}\"]\n");
    let mut d = PrivateDaemon::start(exe(), &cfg).unwrap();
    let mem = Path::new("/sys/fs/cgroup/memory").join(&d.root_name);
    std::fs::write(mem.join("memory.limit_in_bytes"), (256 * MIB).to_string()).unwrap();
    let lab = lab().display().to_string();
    let hog = d.run_job(&[], &[&lab, "workload", "mem", "--mib", "50"], Some(B)).unwrap();
    d.wait_exec(hog).unwrap();
    let reader = d.run_job(&[], &[&lab, "workload", "read", "--file", file.to_str().unwrap()], Some(A)).unwrap();
    d.wait_exec(reader).unwrap();
    wait_for("both placed", || {
        let s = show(&d);
        (job_with_pid(&s, hog).is_some() && job_with_pid(&s, reader).is_some()).then_some(())
    });
    let v = poll_until("why to name A's own currency", Duration::from_secs(60), || {
        let v = why(&d, reader, None);
        if v.verdict == Verdict::MemoryStall && v.stall.culprit.as_ref().is_some_and(|c| c.own) {
            Ok(v)
        } else {
            Err(format!("{:?}: {}", v.verdict, v.reason))
        }
    });
    eprintln!("{}", v.reason);
    eprintln!("{:?}", v.stall.shares);
    let shares = &v.stall.shares;
    assert_eq!(shares.len(), 2, "the daemon's shares are used: {v:#?}");
    assert!(shares.iter().all(|c| c.protection == 128 * MIB), "{v:#?}");
    let reason = v.reason.as_str();
    assert!(reason.contains(&format!("whose use caused it: its own currency {A} uses ")) && reason.contains("against its share of 128M"), "{reason}");
    assert!(v.help[1].starts_with(&format!("(its own currency {A} uses more than its memory share (pid {reader}")), "{v:#?}");
    assert!(v.ask.is_empty(), "nobody else is named: {v:#?}");
    d.stop().unwrap();
}
