//! A job's own memory cap on this machine's cgroup v1 memory controller (docs/memory.md,
//! "A job's memory cap"): `allot run --mem 64M!` holds the job's hog to 64 MiB (the kernel
//! reclaims, then its OOM killer acts inside the job), while another job of the same user,
//! without a cap, holds more and runs on untouched; `allot set --mem` changes and removes
//! a cap. A private daemon with its own cgroup root, bounded (512 MiB) so the host is never
//! pushed. Needs root; fails, never skips.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;
/// What cgroup v1 reads for no limit (the largest page-aligned value).
const UNLIMITED: u64 = 9223372036854771712;

fn mem_file(d: &PrivateDaemon, rel: &str, f: &str) -> u64 {
    let p = Path::new("/sys/fs/cgroup/memory").join(&d.root_name).join(rel).join(f);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())).trim().parse().unwrap()
}

fn job_rel(d: &PrivateDaemon, pid: u32) -> String {
    let j = wait_for("the job in show", || job_with_pid(&show(d), pid));
    j.cgroup.clone()
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn a_jobs_hard_memory_cap_holds_its_hog_and_leaves_another_job_untouched() {
    require_root();
    let _s = serial();
    assert!(
        Path::new("/sys/fs/cgroup/memory/memory.usage_in_bytes").exists(),
        "this test needs the cgroup v1 memory controller at /sys/fs/cgroup/memory"
    );
    let mut d = PrivateDaemon::start(exe(), &format!("[users]\nonly = [\"{A}\"]\n")).unwrap();
    std::fs::write(Path::new("/sys/fs/cgroup/memory").join(&d.root_name).join("memory.limit_in_bytes"), (512 * MIB).to_string()).unwrap();
    let lab = lab().to_str().unwrap();

    // A bad size is refused by the CLI, naming it, before anything is sent.
    refused(&d.cli(&["run", "--strict", "--mem", "512K!", "--", "true"], Some(A)).unwrap(), &["\"512K!\"", "less than 1M"]);

    // Job 2, no cap: 2 x 60 MiB of anonymous memory, touched over and over.
    let other = d.run_job(&["--strict"], &[lab, "workload", "mem", "--mib", "60"], Some(A)).unwrap();
    d.wait_exec(other).unwrap();
    let other_rel = job_rel(&d, other);
    poll_until("the other job holding more than 64 MiB", Duration::from_secs(30), || {
        let u = mem_file(&d, &other_rel, "memory.usage_in_bytes");
        check(u > 100 * MIB, || format!("{} MiB", u / MIB))
    });

    // Job 1 capped hard at 64M: a hog of 2 x 100 MiB cannot fit and is killed inside it.
    let t0 = Instant::now();
    let hog = d.run_job(&["--strict", "--mem", "64M!"], &[lab, "workload", "mem", "--mib", "100"], Some(A)).unwrap();
    // Held here from now on, so a failure below still kills them (by pid) on the way out.
    let mut jobs = Kids::default();
    for c in d.take_jobs() {
        jobs.add(c);
    }
    let status = poll_until("the capped hog to end", Duration::from_secs(60), || {
        let c = jobs.0.iter_mut().find(|c| c.id() == hog).unwrap();
        c.try_wait().unwrap().ok_or("running")
    });
    // Reaped: never signalled again (its pid may be reused).
    jobs.0.retain(|c| c.id() != hog);
    eprintln!("the 64M! job's hog of 200 MiB ended after {:.1} s: {status}", t0.elapsed().as_secs_f64());
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(libc::SIGKILL), "killed by the OOM killer inside its job: {status}");
    // The kernel counted the OOM kill in A's currency (its job's count kept once reaped).
    let kills = wait_for("the OOM kill counted", || {
        let s = show(&d);
        // The currency's memory view may be absent for a tick around the kill: wait on.
        let c = s.currencies.iter().find(|c| c.name == A.to_string().as_str())?;
        c.memory.as_ref().map(|m| m.oom_kills).filter(|k| *k > 0)
    });
    eprintln!("OOM kills in A's currency: {kills}");
    let s = ok(&d.cli(&["log", "--limit", "50"], None).unwrap());
    assert!(s.contains("run --strict --mem 64M!") || s.contains("run --mem 64M!"), "the audit trail has the request: {s}");
    assert!(s.contains("memory cap 64M!"), "and the job's settings: {s}");

    // The other job ran on, untouched: alive, holding more than the hog was allowed,
    // with no limit of its own.
    let alive = |p: u32| std::fs::read_to_string(format!("/proc/{p}/stat")).is_ok_and(|s| !s.contains(") Z"));
    assert!(alive(other), "the other job's process survived the hog");
    let (u, lim) = (mem_file(&d, &other_rel, "memory.usage_in_bytes"), mem_file(&d, &other_rel, "memory.limit_in_bytes"));
    eprintln!("the other job: {} MiB held, limit {lim}", u / MIB);
    assert!(u > 100 * MIB && lim == UNLIMITED, "untouched: {} MiB, limit {lim}", u / MIB);

    // set: a hard cap the job already fits under, shown and explained; then soft; then none.
    ok(&d.cli(&["set", &other.to_string(), "--mem", "256M!"], Some(A)).unwrap());
    assert_eq!(mem_file(&d, &other_rel, "memory.limit_in_bytes"), 256 * MIB);
    let j = job_with_pid(&show(&d), other).unwrap();
    assert_eq!(j.mem.as_deref(), Some("256M!"), "{j:#?}");
    let x = ok(&d.cli(&["explain", &other.to_string()], Some(A)).unwrap());
    eprintln!("{x}");
    assert!(x.contains("hard memory cap 256M!: never more") && x.contains("memory.limit_in_bytes"), "{x}");
    ok(&d.cli(&["set", &other.to_string(), "--mem", "32M"], Some(A)).unwrap());
    assert_eq!(mem_file(&d, &other_rel, "memory.limit_in_bytes"), UNLIMITED, "the hard cap taken away");
    poll_until("the soft cap as the job's soft limit", Duration::from_secs(5), || {
        let v = mem_file(&d, &other_rel, "memory.soft_limit_in_bytes");
        check(v == 32 * MIB, || v)
    });
    assert!(alive(other), "a soft cap on v1 acts only when the machine is short");
    ok(&d.cli(&["set", &other.to_string(), "--mem", "none"], Some(A)).unwrap());
    assert!(job_with_pid(&show(&d), other).unwrap().mem.is_none());
    poll_until("the soft limit back to the job's protection", Duration::from_secs(5), || {
        let v = mem_file(&d, &other_rel, "memory.soft_limit_in_bytes");
        check(v > 32 * MIB, || v)
    });

    // A background job's cap is its own too: its directory is under allot's background
    // sibling (`<root>-background`), which the memory hierarchy mirrors. It runs only on
    // idle CPU, so on this shared machine its hog may take long to grow: the limit and
    // what it holds are read, and its end, if it comes, must be the OOM killer's.
    let bg = d.run_job(&["--strict", "--background", "--mem", "64M!"], &[lab, "workload", "mem", "--mib", "100"], Some(A)).unwrap();
    for c in d.take_jobs() {
        jobs.add(c);
    }
    // Exec'd: moved into its job (before, show may list it in A's default job, where a
    // user's process is placed as it starts).
    d.wait_exec(bg).unwrap();
    let bg_rel = job_rel(&d, bg);
    let sibling = Path::new("/sys/fs/cgroup/memory").join(format!("{}-background", d.root_name)).join(bg_rel.strip_prefix("background/").unwrap());
    let read = |f: &str| std::fs::read_to_string(sibling.join(f)).map(|s| s.trim().parse::<u64>().unwrap()).unwrap_or(0);
    assert_eq!(read("memory.limit_in_bytes"), 64 * MIB, "the background job's limit in {}", sibling.display());
    let t0 = Instant::now();
    let mut peak = 0;
    let ended = loop {
        peak = peak.max(read("memory.max_usage_in_bytes"));
        let c = jobs.0.iter_mut().find(|c| c.id() == bg).unwrap();
        if let Some(st) = c.try_wait().unwrap() {
            break Some(st);
        }
        if t0.elapsed() > Duration::from_secs(15) {
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    eprintln!("the background 64M! job: peak {} MiB, {ended:?} after {:.1} s", peak / MIB, t0.elapsed().as_secs_f64());
    assert!(peak <= 64 * MIB, "the background job held at most its cap: {} MiB", peak / MIB);
    if let Some(st) = ended {
        jobs.0.retain(|c| c.id() != bg);
        assert_eq!(std::os::unix::process::ExitStatusExt::signal(&st), Some(libc::SIGKILL), "{st}");
    }
    assert!(alive(other), "the other job still runs");
    // Its I/O weighs the least: allot's background sibling in the blkio hierarchy.
    let bfq = Path::new("/sys/fs/cgroup/blkio").join(format!("{}-background", d.root_name)).join("blkio.bfq.weight");
    if bfq.exists() {
        let w = poll_until("the background's I/O weight", Duration::from_secs(5), || {
            let w = std::fs::read_to_string(&bfq).unwrap_or_default().trim().to_string();
            check(w == "1", || w.clone()).map(|()| w.clone())
        });
        eprintln!("the background sibling's blkio.bfq.weight: {w}");
    }

    let root = d.root_name.clone();
    jobs.kill_all();
    d.stop().unwrap();
    assert!(!PathBuf::from("/sys/fs/cgroup/memory").join(&root).exists(), "memory cgroup {root} removed");
}
