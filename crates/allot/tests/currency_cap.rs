//! A currency's hard cap on this machine's real cgroups: two jobs of one user, each a CPU
//! hog, under `allot fund USER --cap 0.5!` use 0.5 CPU together, and `--cap none` takes
//! the quota off the currency's directory again.

mod common;
use common::*;
use std::time::{Duration, Instant};

/// CPUs a set of processes used together over the next `secs` seconds, and the CPUs the
/// machine left idle over the same window (/proc/stat), so a shortfall can be told from
/// outside load.
fn rate_of(pids: &[u32], secs: f64) -> (f64, f64) {
    let tck = allot_linux::process::procfs::clk_tck() as f64;
    let cpu = |p: u32| allot_linux::process::procfs::stat(p as i32).map(|s| (s.utime + s.stime) as f64 / tck).unwrap_or(0.0);
    let sum = || pids.iter().map(|&p| cpu(p)).sum::<f64>();
    let idle = || allot_linux::process::procfs::cpu_idle_ticks().unwrap().iter().sum::<u64>() as f64 / tck;
    let (a, i) = (sum(), idle());
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(secs));
    let t = t0.elapsed().as_secs_f64();
    ((sum() - a) / t, (idle() - i) / t)
}

/// The periods in which the kernel throttled a directory (cpu.stat's nr_throttled, in
/// cgroup v1 and v2 alike).
fn throttled_periods(dir: &std::path::Path) -> u64 {
    let s = std::fs::read_to_string(dir.join("cpu.stat")).unwrap_or_default();
    s.lines().find_map(|l| l.strip_prefix("nr_throttled ")?.trim().parse().ok()).unwrap_or(0)
}

/// The quota on a directory: cgroup v2's cpu.max, or v1's cpu.cfs_quota_us (-1: none).
fn quota(dir: &std::path::Path) -> String {
    std::fs::read_to_string(dir.join("cpu.max")).or_else(|_| std::fs::read_to_string(dir.join("cpu.cfs_quota_us"))).unwrap().trim().to_string()
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn a_users_two_hogs_under_a_currency_cap_of_half_a_cpu_use_half_a_cpu() {
    require_root();
    let _s = serial();
    let mut d = PrivateDaemon::start(exe(), "").unwrap();
    let lab = lab().display().to_string();
    let hog = [lab.as_str(), "workload", "cpu", "--duration", "60s"];
    let a = d.run_job(&[], &hog, Some(A)).unwrap();
    let b = d.run_job(&[], &hog, Some(A)).unwrap();
    d.wait_exec(a).unwrap();
    d.wait_exec(b).unwrap();
    let user = A.to_string();
    let out = ok(&d.cli(&["fund", &user, "--cap", "0.5!"], None).unwrap());
    assert!(out.contains("cap 0.5!"), "{out}");
    let v = show(&d);
    let cur = currency(&v, &user).cloned().unwrap();
    assert_eq!(cur.cap.as_deref(), Some("0.5!"), "{cur:?}");
    // The currency's directory is the parent of each job's.
    let job = job_with_pid(&v, a).expect("the first hog is in a job");
    let dir = std::path::PathBuf::from(job.dir.as_str());
    let cdir = dir.parent().unwrap().to_path_buf();
    let q = quota(&cdir);
    assert!(q == "50000" || q == "50000 100000", "{}: {q}", cdir.display());
    // A user may not lift it.
    refused(&d.cli(&["fund", &user, "--cap", "none"], Some(A)).unwrap(), &["setting the cap of", "root's"]);
    // The cap has taken hold: the kernel has throttled the currency's directory.
    poll_until("the currency throttled by its cap", Duration::from_secs(10), || {
        let n = throttled_periods(&cdir);
        check(n > 0, || format!("nr_throttled {n}"))
    });
    let (used, idle) = rate_of(&[a, b], 6.0);
    eprintln!("two hogs of uid {A} under a currency cap of 0.5!: {used:.3} CPU together; the machine left {idle:.2} CPU idle");
    // A cap is never exceeded, whatever else runs.
    assert!(used <= 0.55, "two hogs under a currency cap of 0.5! used {used:.3} CPU");
    // Below it only when something else took the CPU: with a CPU left idle, the hogs
    // (always runnable) were held by the cap alone and must have had their 0.5.
    if idle >= 0.5 {
        assert!(used >= 0.45, "two hogs under a currency cap of 0.5! used {used:.3} CPU while {idle:.2} CPU stood idle");
    } else {
        eprintln!("outside load: only {idle:.2} CPU idle, so {used:.3} CPU shows the cap held but not that it gave 0.5");
    }
    ok(&d.cli(&["fund", &user, "--cap", "none"], None).unwrap());
    let q = quota(&cdir);
    assert!(q == "-1" || q.starts_with("max"), "{}: {q}", cdir.display());
    d.stop().unwrap();
}
