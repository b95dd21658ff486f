//! Memory by share on this machine's cgroup v1 memory controller (docs/memory.md). A
//! private daemon with its own cgroup root; the root's memory is bounded (512 MiB) so the
//! pressure stays inside it and the host is never pushed. Each test user reads a file of
//! its own over and over: its working set is page cache, charged to its currency, which
//! the kernel can reclaim without swap. Needs root; fails, never skips.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;

/// Files read by the test users, removed when dropped.
struct Files(PathBuf);

impl Files {
    /// `n` files of `mib` MiB each, written with O_DIRECT so no page of them is cached
    /// (and charged to the test) before a test user reads it.
    fn new(n: usize, mib: u64) -> Files {
        let dir = std::env::temp_dir().join(format!("allot-memory-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        for i in 0..n {
            let f = dir.join(format!("f{i}"));
            let st = std::process::Command::new("dd")
                .args(["if=/dev/zero", &format!("of={}", f.display()), "bs=1M", &format!("count={mib}"), "oflag=direct", "status=none"])
                .status()
                .unwrap();
            assert!(st.success(), "dd {}", f.display());
            std::fs::set_permissions(&f, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
        }
        Files(dir)
    }
    fn path(&self, i: usize) -> String {
        self.0.join(format!("f{i}")).display().to_string()
    }
}

impl Drop for Files {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn mem_dir(d: &PrivateDaemon) -> PathBuf {
    Path::new("/sys/fs/cgroup/memory").join(&d.root_name)
}

fn usage(d: &PrivateDaemon, currency: &str) -> u64 {
    std::fs::read_to_string(mem_dir(d).join(currency).join("memory.usage_in_bytes")).map(|s| s.trim().parse().unwrap_or(0)).unwrap_or(0)
}

/// A reader of `file`, over and over, as `uid`.
fn reader(d: &PrivateDaemon, kids: &mut Kids, uid: u32, file: &str) -> u32 {
    spawn_as(d, kids, uid, &[lab().to_str().unwrap(), "workload", "read", "--file", file])
}

/// Mean usage of each currency over `secs`, sampled every 100 ms.
fn mean_usage(d: &PrivateDaemon, currencies: &[&str], secs: u64) -> Vec<f64> {
    let mut sums = vec![0.0; currencies.len()];
    let mut n = 0.0;
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(secs) {
        for (s, c) in sums.iter_mut().zip(currencies) {
            *s += usage(d, c) as f64;
        }
        n += 1.0;
        std::thread::sleep(Duration::from_millis(100));
    }
    sums.iter().map(|s| s / n / MIB as f64).collect()
}

/// A reload that turns memory by share off gives every value allot wrote back to the
/// kernel's defaults (an unlimited soft limit and limit: no guard, no cap), while the
/// jobs run on; one that turns it on again writes them again from the unchanged funding.
#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn a_reload_turns_memory_by_share_off_and_on_again() {
    require_root();
    let _s = serial();
    let cfg = format!("[users]\nonly = [\"{A}\", \"{C}\"]\n[funding]\n\"{A}\" = 300\n\"{C}\" = {{ mem = \"64M!\" }}\n");
    let mut d = PrivateDaemon::start(exe(), &cfg).unwrap();
    let mut kids = Kids::default();
    let (ua, uc) = (format!("user-{A}"), format!("user-{C}"));
    let a = spawn_as(&d, &mut kids, A, &["sleep", "600"]);
    let c = spawn_as(&d, &mut kids, C, &["sleep", "600"]);
    wait_for("A and C placed", || {
        let s = show(&d);
        (job_with_pid(&s, a).is_some() && job_with_pid(&s, c).is_some()).then_some(())
    });
    let read = |rel: &str, f: &str| std::fs::read_to_string(mem_dir(&d).join(rel).join(f)).map(|s| s.trim().parse::<u64>().unwrap_or(0)).unwrap_or(0);
    const UNLIMITED: u64 = 1 << 62;
    let on = || (read(&ua, "memory.soft_limit_in_bytes") < UNLIMITED && read(&uc, "memory.limit_in_bytes") == 64 * MIB).then_some(());
    wait_for("A protected and C capped", on);
    let hup = |d: &PrivateDaemon, text: &str| {
        std::fs::write(d.dir.join("allot.toml"), text).unwrap();
        unsafe { libc::kill(d.daemon_pid().unwrap() as i32, libc::SIGHUP) };
    };
    hup(&d, &format!("{cfg}[memory]\nenable = false\n"));
    wait_for("every value given back", || {
        [(&ua, "memory.soft_limit_in_bytes"), (&ua, "memory.limit_in_bytes"), (&uc, "memory.soft_limit_in_bytes"), (&uc, "memory.limit_in_bytes")]
            .iter()
            .all(|(rel, f)| read(rel, f) >= UNLIMITED)
            .then_some(())
    });
    let st = ok(&d.cli(&["status"], None).unwrap());
    assert!(st.contains("memory: not shared by funding ([memory] enable = false)"), "{st}");
    assert!(d.log().contains("memory by share is off: the memory caps of"), "C's cap no longer holding is said: {}", d.log());
    // Off, nothing is written again: a value put back by hand stays.
    std::fs::write(mem_dir(&d).join(&ua).join("memory.soft_limit_in_bytes"), (100 * MIB).to_string()).unwrap();
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(read(&ua, "memory.soft_limit_in_bytes"), 100 * MIB);
    hup(&d, &cfg);
    // Written again, the hand-written value too (one step writes both files, one after
    // the other: wait for the two).
    wait_for("A protected and C capped again", || on().filter(|_| read(&ua, "memory.soft_limit_in_bytes") != 100 * MIB));
    drop(kids);
    d.stop().unwrap();
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn funding_3_to_1_protects_3_to_1_a_hard_cap_holds_and_release_leaves_nothing() {
    require_root();
    let _s = serial();
    assert!(
        Path::new("/sys/fs/cgroup/memory/memory.usage_in_bytes").exists(),
        "this test needs the cgroup v1 memory controller at /sys/fs/cgroup/memory"
    );
    let files = Files::new(3, 460);
    let cfg = format!("[users]\nonly = [\"{A}\", \"{B}\", \"{C}\"]\n[funding]\n\"{A}\" = 300\n\"{B}\" = 100\n\"{C}\" = {{ mem = \"64M!\" }}\n");
    let mut d = PrivateDaemon::start(exe(), &cfg).unwrap();
    // The pressure stays inside allot's root: 512 MiB for all of its users.
    std::fs::write(mem_dir(&d).join("memory.limit_in_bytes"), (512 * MIB).to_string()).unwrap();
    let mut kids = Kids::default();
    let (ua, ub, uc) = (format!("user-{A}"), format!("user-{B}"), format!("user-{C}"));

    // C alone, capped hard at 64M: its 460M file never takes more.
    let c = reader(&d, &mut kids, C, &files.path(2));
    wait_for("C placed", || job_with_pid(&show(&d), c));
    // Its reads have filled its cap's worth of page cache (or more, were the cap broken).
    poll_until("C's charge near its cap", Duration::from_secs(20), || {
        let u = usage(&d, &uc);
        check(u >= 56 * MIB, || format!("{} MiB", u / MIB))
    });
    let c_peak = (0..20)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(100));
            usage(&d, &uc)
        })
        .max()
        .unwrap();
    eprintln!("C under a 64M! memory cap: at most {} MiB over 2 s", c_peak / MIB);
    assert!(c_peak <= 64 * MIB, "C's hard memory cap held: {} MiB", c_peak / MIB);
    kids.kill(c);

    // A (funding 300) and B (funding 100) both read 460M files under 512M: 3:1.
    let a = reader(&d, &mut kids, A, &files.path(0));
    let b = reader(&d, &mut kids, B, &files.path(1));
    wait_for("A and B placed", || {
        let s = show(&d);
        (job_with_pid(&s, a).is_some() && job_with_pid(&s, b).is_some()).then_some(())
    });
    std::thread::sleep(Duration::from_secs(5));
    let m = mean_usage(&d, &[&ua, &ub], 10);
    let s = show(&d);
    eprintln!("A (funding 300): {:.0} MiB, B (funding 100): {:.0} MiB, ratio {:.2}", m[0], m[1], m[0] / m[1]);
    eprintln!("{}", ok(&d.cli(&["show"], None).unwrap()));
    assert!(m[0] / m[1] > 2.4 && m[0] / m[1] < 3.6, "memory follows funding 3:1 under pressure: A {:.0} MiB, B {:.0} MiB", m[0], m[1]);
    assert!(m[0] + m[1] > 400.0, "the 512M were used, not wasted: {:.0} MiB", m[0] + m[1]);
    let cur = |s: &ShowView, name: String| s.currencies.iter().find(|c| c.name == name.as_str()).cloned().unwrap();
    assert_eq!(cur(&s, A.to_string()).memory.as_ref().unwrap().protection, 384 * MIB, "{s:#?}");
    assert_eq!(cur(&s, B.to_string()).memory.as_ref().unwrap().protection, 128 * MIB, "{s:#?}");
    // I/O by share: the funding is each currency's I/O weight in the blkio hierarchy, which
    // mirrors allot's tree, with the currencies' processes in it; status says what was
    // written and which devices honour it.
    let blk = Path::new("/sys/fs/cgroup/blkio").join(&d.root_name);
    let weight = |c: &str| std::fs::read_to_string(blk.join(c).join("blkio.bfq.weight")).map(|s| s.trim().to_string());
    let status = ok(&d.cli(&["status"], None).unwrap());
    let io_line = status.lines().find(|l| l.starts_with("io ")).expect("status has an io line").to_string();
    eprintln!("{io_line}");
    let blkio_of =
        |p: u32| std::fs::read_to_string(format!("/proc/{p}/cgroup")).unwrap().lines().find(|l| l.contains(":blkio:")).unwrap_or("").to_string();
    assert!(blkio_of(a).contains(&format!("/{}/{ua}/", d.root_name)), "A's reader in the blkio mirror: {}", blkio_of(a));
    if blk.join(&ua).join("blkio.bfq.weight").exists() {
        assert_eq!((weight(&ua).unwrap(), weight(&ub).unwrap()), ("300".to_string(), "100".to_string()), "funding 300:100 as BFQ weights");
        assert!(io_line.contains("funding is each currency's I/O weight, tickets its jobs': blkio.bfq.weight in allot's tree"), "{io_line}");
    }
    // Both within their share (the guard keeps them there): their OOM rank is their own.
    let adj = |p: u32| std::fs::read_to_string(format!("/proc/{p}/oom_score_adj")).unwrap().trim().parse::<i32>().unwrap();
    assert_eq!((adj(a), adj(b)), (0, 0), "{}", d.log());

    // B's working set shrinks (its file's cache dropped, B now reads 16 MiB of it): A may
    // grow into what B left, over its share, and ranks first for the OOM killer.
    kids.kill(b);
    let st = std::process::Command::new("dd").args([&format!("if={}", files.path(1)), "iflag=nocache", "count=0", "status=none"]).status().unwrap();
    assert!(st.success());
    let small = files.0.join("small");
    let st = std::process::Command::new("dd")
        .args(["if=/dev/zero", &format!("of={}", small.display()), "bs=1M", "count=16", "oflag=direct", "status=none"])
        .status()
        .unwrap();
    assert!(st.success());
    std::fs::set_permissions(&small, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let b = reader(&d, &mut kids, B, small.to_str().unwrap());
    // A small process of A's beside its reader: the OOM killer may take the reader after
    // the hog (both are A's), this one is the smallest and shows the value given back.
    let a_small = spawn_as(&d, &mut kids, A, &["sleep", "600"]);
    let (adj_a, adj_b) = wait_for("A over its share", || {
        std::thread::sleep(Duration::from_millis(200));
        (adj(a) > 0 && adj(a_small) > 0).then(|| (adj(a), adj(b)))
    });
    eprintln!("A over its share ({} MiB): oom_score_adj {adj_a}; B ({} MiB): {adj_b}", usage(&d, &ua) / MIB, usage(&d, &ub) / MIB);
    assert_eq!(adj_b, 0, "B within its share keeps its OOM rank");

    // A's hog (2 x 300 MiB of anonymous memory, no swap) runs out of memory: the process
    // killed is A's hog, B's reader runs on.
    let hog = spawn_as(&d, &mut kids, A, &[lab().to_str().unwrap(), "workload", "mem", "--mib", "300"]);
    let t0 = Instant::now();
    while kids.0.iter_mut().find(|c| c.id() == hog).is_some_and(|c| c.try_wait().unwrap().is_none()) {
        assert!(t0.elapsed() < Duration::from_secs(60), "A's hog was not stopped by its currency's limit");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Reaped: never signalled again (its pid may be reused).
    kids.0.retain(|c| c.id() != hog);
    let alive = |p: u32| Path::new(&format!("/proc/{p}")).exists() && kids.0.iter().any(|c| c.id() == p);
    assert!(alive(b), "B's reader survived A's hog");
    let state = |p: u32| {
        std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default().split(") ").nth(1).unwrap_or("?").chars().next().unwrap_or('?')
    };
    eprintln!("after the OOM: A's reader state {}, B's reader state {}", state(a), state(b));
    // The kill is counted in A's currency (the daemon reads it on its next tick).
    let s = wait_for("the OOM kill counted", || {
        let s = show(&d);
        (cur(&s, A.to_string()).memory.as_ref().unwrap().oom_kills > 0).then_some(s)
    });
    let kills = cur(&s, A.to_string()).memory.as_ref().unwrap().oom_kills;
    eprintln!(
        "A's hog killed after {:.1} s; OOM kills in A's currency: {kills}; B's: {}",
        t0.elapsed().as_secs_f64(),
        cur(&s, B.to_string()).memory.as_ref().unwrap().oom_kills
    );
    assert!(kills >= 1 && cur(&s, B.to_string()).memory.as_ref().unwrap().oom_kills == 0, "{s:#?}");
    // The audit trail has the OOM decisions: A's processes raised, and the kill seen in
    // A's currency, each naming its use against its share; A sees them as her own.
    let oom_records = |uid: Option<u32>| {
        let log: LogView = reply(&d, &["log", "--limit", "1000"], uid);
        log.records.into_iter().map(|r| r.request).filter(|r| r.starts_with("oom: ")).collect::<Vec<_>>()
    };
    let recs = wait_for("the OOM kill audited", || {
        let r = oom_records(None);
        r.iter().any(|x| x.contains("OOM killer killed")).then_some(r)
    });
    for r in &recs {
        eprintln!("audit: {r}");
    }
    let raised = format!("oom: currency {A} uses ");
    assert!(recs.iter().any(|r| r.starts_with(&raised) && r.contains(": oom_score_adj of pid ") && r.contains(" 0 -> ")), "{recs:#?}");
    assert!(recs.iter().any(|r| r.contains(&format!("in currency {A}, which uses ")) && r.contains("against its share of 384M")), "{recs:#?}");
    let of = |uid: u32| recs.iter().filter(|r| r.contains(&format!("currency {uid} "))).count();
    let hers = oom_records(Some(A));
    assert!(
        hers.len() >= of(A) && hers.iter().all(|r| r.contains(&format!("currency {A}"))),
        "A sees the decisions about her currency, and only those: {hers:#?}"
    );

    // Stopped: no cgroup of allot's is left in either hierarchy, and A's processes run on
    // with the oom_score_adj they had.
    let root = d.root_name.clone();
    d.stop().unwrap();
    assert!(!Path::new("/sys/fs/cgroup/memory").join(&root).exists(), "memory cgroup {root} removed");
    assert!(!Path::new("/sys/fs/cgroup/cpu").join(&root).exists(), "cpu cgroup {root} removed");
    assert!(!Path::new("/sys/fs/cgroup/blkio").join(&root).exists(), "blkio cgroup {root} removed");
    assert_eq!(state(a_small), 'S', "A's small process runs on");
    assert_eq!(adj(a_small), 0, "A's oom_score_adj given back");
    drop(files);
    kids.kill_all();
}

/// A memory cgroup of the test's, removed with everything the daemon left in it.
struct Container(PathBuf);

impl Drop for Container {
    fn drop(&mut self) {
        // Deepest first: a cgroup directory goes only once its children have.
        let mut dirs = vec![];
        let mut todo = vec![self.0.clone()];
        while let Some(d) = todo.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    todo.push(e.path());
                }
            }
            dirs.push(d);
        }
        for d in dirs.iter().rev() {
            let _ = std::fs::remove_dir(d);
        }
    }
}

/// In a container: the daemon starts in a memory cgroup of the test's limited to 256 MiB,
/// in a cgroup namespace with the memory hierarchy mounted again, so that cgroup is the
/// top it sees, while /proc/meminfo stays the host's (24 GiB). The memory available to
/// users is the container's 256 MiB less the reserve (10%), not the host's MemTotal less it.
#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn in_a_container_its_limit_bounds_the_memory_available_to_users() {
    require_root();
    let _s = serial();
    let ctr = Container(Path::new("/sys/fs/cgroup/memory").join(format!("allot-test-container-{}", std::process::id())));
    std::fs::create_dir(&ctr.0).unwrap();
    std::fs::write(ctr.0.join("memory.limit_in_bytes"), (256 * MIB).to_string()).unwrap();
    let mut d = PrivateDaemon::start(exe(), &format!("[users]\nonly = [\"{A}\"]\n")).unwrap();
    d.memory_container = Some(ctr.0.clone());
    d.terminate().unwrap();
    d.launch(true).unwrap();
    let mut kids = Kids::default();
    let a = spawn_as(&d, &mut kids, A, &["sleep", "600"]);
    wait_for("A placed", || job_with_pid(&show(&d), a).map(|_| ()));
    let user = format!("user-{A}");
    let t0 = Instant::now();
    let available = loop {
        if let Some(m) = currency(&show(&d), &A.to_string()).and_then(|c| c.memory.clone()) {
            break m.available;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "no memory view of {user} in 30 s; status: {}; the daemon's log: {}",
            ok(&d.cli(&["status"], None).unwrap()),
            d.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(available, 256 * MIB - 256 * MIB / 10, "the container's limit less the reserve, not the host's MemTotal less it");
    // Its memory tree is inside the container: the daemon's top is the container's cgroup.
    let inside = ctr.0.join(&d.root_name).join(&user);
    assert!(inside.is_dir(), "{} exists", inside.display());
    assert!(!Path::new("/sys/fs/cgroup/memory").join(&d.root_name).exists(), "nothing at the host's top");
    drop(kids);
    d.stop().unwrap();
}
