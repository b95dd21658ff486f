//! Built-in workloads, so no benchmark or test needs anything external.
//!
//! Each one runs until its duration ends or it gets SIGTERM/SIGINT, then prints one
//! JSON line: `{"kind":..,"work":N,"cpu_s":..,"wall_s":..}` where `work` counts units
//! of fixed work done (the seeds' "operations": seed 001 Fig 3, seed 000's work rate).

use clap::{Args, ValueEnum};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// Which workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A CPU-bound loop: fixed units of integer work, as fast as it can.
    Cpu,
    /// A memory looper (seed 000 Figure 2): two arrays, each twice the last-level cache
    /// (at least 32 MiB), read, written and xored in turn; `work` counts MiB processed.
    Mem,
    /// A fixed amount of CPU work (`--units`), then exit, printing the elapsed time.
    Work,
    /// Seed 001 §5.2's bimodal job: CPU-bound, then interactive (about 5 ms of work every
    /// 100 ms), then CPU-bound again (`--phases`, default 15,20,15 s); reports each
    /// phase's work and its mean dispatch latency from the kernel's accounting.
    Bimodal,
}

/// `allot workload`: a built-in load generator (hidden; used by tests and benchmarks).
#[derive(Debug, Args)]
pub struct WorkloadArgs {
    /// The workload.
    #[arg(value_enum)]
    pub kind: Kind,
    /// Stop after this many seconds (default: run until SIGTERM/SIGINT).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Threads (each does the same work; `work` is their sum). cpu, mem and work only.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// work: units of CPU work to do before exiting (one unit is about 10 µs).
    #[arg(long, default_value_t = 100_000)]
    pub units: u64,
    /// mem: size of each of the two arrays in MiB (default: twice the last-level cache,
    /// at least 32 MiB, so the working set is well above the cache).
    #[arg(long)]
    pub mib: Option<u64>,
    /// bimodal: seconds of the CPU, interactive and CPU phases (seed 001 §5.2: 15,20,15).
    #[arg(long, value_delimiter = ',', default_values_t = [15.0, 20.0, 15.0])]
    pub phases: Vec<f64>,
    /// bimodal: ms of work per burst in the interactive phase.
    #[arg(long, default_value_t = 5.0)]
    pub burst_ms: f64,
    /// bimodal: ms of sleep between bursts in the interactive phase.
    #[arg(long, default_value_t = 100.0)]
    pub sleep_ms: f64,
    /// Also write the JSON report line to this file (for runs whose stdout is not ours).
    #[arg(long)]
    pub output: Option<std::path::PathBuf>,
}

/// One unit of CPU work: a short, data-independent integer mix (about 10 µs on a
/// current x86 core); returns a value so the optimiser cannot drop it.
#[inline(never)]
pub fn cpu_unit(seed: u64) -> u64 {
    let mut x = seed | 1;
    for _ in 0..4096 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    x
}

/// Runs the workload; prints the JSON report line.
pub fn run(args: WorkloadArgs) -> anyhow::Result<i32> {
    validate(&args)?;
    install_stop_handlers();
    let start = Instant::now();
    let mut line = match args.kind {
        Kind::Cpu => run_loop(&args, start, |_t, sink, _| cpu_unit(sink)),
        Kind::Mem => run_mem(&args, start),
        Kind::Work => run_work(&args, start),
        Kind::Bimodal => run_bimodal(&args, start),
    };
    let wall = start.elapsed().as_secs_f64();
    line["cpu_s"] = serde_json::json!(process_cpu_s());
    line["wall_s"] = serde_json::json!(wall);
    let text = line.to_string();
    println!("{text}");
    if let Some(path) = &args.output {
        crate::report::write_file(path, &(text + "\n"))?;
    }
    Ok(0)
}

fn validate(args: &WorkloadArgs) -> anyhow::Result<()> {
    if args.threads == 0 || args.threads > 4096 {
        anyhow::bail!("--threads must be 1..4096, got {}", args.threads);
    }
    if let Some(d) = args.duration {
        if !(d > 0.0 && d.is_finite()) {
            anyhow::bail!("--duration must be a positive number of seconds, got {d}");
        }
    }
    if args.kind == Kind::Work && args.units == 0 {
        anyhow::bail!("--units must be at least 1, got 0");
    }
    if args.mib == Some(0) {
        anyhow::bail!("--mib must be at least 1, got 0");
    }
    if args.kind == Kind::Bimodal {
        if args.phases.len() != 3 || args.phases.iter().any(|p| !(*p >= 0.0 && p.is_finite())) {
            anyhow::bail!("--phases must be three non-negative seconds (cpu,interactive,cpu), got {:?}", args.phases);
        }
        if !(args.burst_ms > 0.0 && args.sleep_ms > 0.0 && args.burst_ms.is_finite() && args.sleep_ms.is_finite()) {
            anyhow::bail!("--burst-ms and --sleep-ms must be positive, got {} and {}", args.burst_ms, args.sleep_ms);
        }
    }
    Ok(())
}

fn install_stop_handlers() {
    // SAFETY: installing a signal handler that only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGTERM, on_signal as extern "C" fn(libc::c_int) as usize);
        libc::signal(libc::SIGINT, on_signal as extern "C" fn(libc::c_int) as usize);
    }
}

/// CPU time of this process (all threads), seconds.
pub fn process_cpu_s() -> f64 {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    ru.ru_utime.tv_sec as f64 + ru.ru_utime.tv_usec as f64 / 1e6 + ru.ru_stime.tv_sec as f64 + ru.ru_stime.tv_usec as f64 / 1e6
}

/// CPU time of the calling thread, ns.
pub fn thread_cpu_ns() -> u64 {
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Spins doing CPU work until the calling thread has used `ns` more CPU time; returns
/// the units done. Uses CPU time, not wall time, so being preempted does not shorten it.
pub fn burn_cpu_ns(ns: u64) -> u64 {
    let end = thread_cpu_ns() + ns;
    let mut sink = ns;
    let mut n = 0;
    while thread_cpu_ns() < end {
        // About 1/16 of a unit per check: fine-grained enough for 5 µs bursts.
        let mut x = sink | 1;
        for _ in 0..256 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        sink = x;
        n += 1;
    }
    std::hint::black_box(sink);
    n / 16
}

/// Runs `step` on `--threads` threads until the duration ends or a signal arrives;
/// `step(thread, sink, state)` does one unit of work.
fn run_loop(args: &WorkloadArgs, start: Instant, step: impl Fn(usize, u64, &mut ()) -> u64 + Sync) -> serde_json::Value {
    let deadline = args.duration.map(|d| start + Duration::from_secs_f64(d));
    let work = AtomicU64::new(0);
    std::thread::scope(|sc| {
        for t in 0..args.threads {
            let (work, step) = (&work, &step);
            sc.spawn(move || {
                let mut sink = t as u64;
                let mut n = 0u64;
                while !STOP.load(Ordering::Relaxed) {
                    sink = step(t, sink, &mut ());
                    n += 1;
                    if n % 64 == 0 {
                        work.fetch_add(64, Ordering::Relaxed);
                        if deadline.is_some_and(|d| Instant::now() >= d) {
                            STOP.store(true, Ordering::Relaxed);
                        }
                    }
                }
                work.fetch_add(n % 64, Ordering::Relaxed);
                std::hint::black_box(sink);
            });
        }
    });
    serde_json::json!({"kind": args.kind, "work": work.load(Ordering::Relaxed)})
}

/// Bytes per array for the memory looper.
pub fn mem_array_bytes(mib: Option<u64>) -> u64 {
    match mib {
        Some(m) => m << 20,
        None => (allot_linux::procfs::llc_bytes().unwrap_or(32 << 20) * 2).max(32 << 20),
    }
}

fn run_mem(args: &WorkloadArgs, start: Instant) -> serde_json::Value {
    let bytes = mem_array_bytes(args.mib);
    let items = (bytes / 8) as usize;
    let deadline = args.duration.map(|d| start + Duration::from_secs_f64(d));
    let mib_done = AtomicU64::new(0);
    // Work is counted per 1 MiB chunk (131072 longs) of one loop of seed 000 Figure 2.
    const CHUNK: usize = 1 << 17;
    std::thread::scope(|sc| {
        for _ in 0..args.threads {
            let mib_done = &mib_done;
            sc.spawn(move || {
                let mut src = vec![0i64; items];
                let mut dst = vec![0i64; items];
                'outer: loop {
                    for pass in 0..2 {
                        for c in (0..items).step_by(CHUNK) {
                            let e = (c + CHUNK).min(items);
                            if pass == 0 {
                                for i in c..e {
                                    src[i] = dst[i].wrapping_add(1);
                                }
                            } else {
                                for i in c..e {
                                    dst[i] ^= src[i];
                                }
                            }
                            std::hint::black_box(&mut src);
                            std::hint::black_box(&mut dst);
                            mib_done.fetch_add(1, Ordering::Relaxed);
                            if STOP.load(Ordering::Relaxed) {
                                break 'outer;
                            }
                            if deadline.is_some_and(|d| Instant::now() >= d) {
                                STOP.store(true, Ordering::Relaxed);
                            }
                        }
                    }
                }
            });
        }
    });
    serde_json::json!({"kind": args.kind, "work": mib_done.load(Ordering::Relaxed), "array_mib": bytes >> 20})
}

fn run_work(args: &WorkloadArgs, start: Instant) -> serde_json::Value {
    let per = args.units / args.threads as u64;
    let extra = args.units % args.threads as u64;
    let done = AtomicU64::new(0);
    std::thread::scope(|sc| {
        for t in 0..args.threads {
            let done = &done;
            let mine = per + u64::from((t as u64) < extra);
            sc.spawn(move || {
                let mut sink = t as u64;
                let mut n = 0;
                while n < mine && !STOP.load(Ordering::Relaxed) {
                    sink = cpu_unit(sink);
                    n += 1;
                }
                std::hint::black_box(sink);
                done.fetch_add(n, Ordering::Relaxed);
            });
        }
    });
    let work = done.load(Ordering::Relaxed);
    serde_json::json!({"kind": args.kind, "work": work, "complete": work == args.units, "elapsed_s": start.elapsed().as_secs_f64()})
}

/// The calling thread's schedstat (run ns, wait ns, timeslices).
fn own_schedstat() -> allot_linux::procfs::SchedStat {
    allot_linux::procfs::schedstat_at("/proc/thread-self/schedstat").unwrap_or_default()
}

const PHASE_NAMES: [&str; 3] = ["cpu", "interactive", "cpu"];

fn run_bimodal(args: &WorkloadArgs, start: Instant) -> serde_json::Value {
    let mut phases = Vec::new();
    let mut total = 0u64;
    let mut t0 = start;
    for (i, secs) in args.phases.iter().enumerate() {
        let end = t0 + Duration::from_secs_f64(*secs);
        let s0 = own_schedstat();
        let c0 = thread_cpu_ns();
        let mut work = 0u64;
        let mut late = Vec::new();
        if i == 1 {
            // Interactive: a burst of CPU, then a sleep (seed 001 §5.2: ~5 ms every ~100 ms).
            while Instant::now() < end && !STOP.load(Ordering::Relaxed) {
                work += burn_cpu_ns((args.burst_ms * 1e6) as u64);
                let want = Duration::from_secs_f64(args.sleep_ms / 1e3);
                let before = Instant::now();
                std::thread::sleep(want);
                late.push((before.elapsed().saturating_sub(want)).as_secs_f64() * 1e3);
            }
        } else {
            let mut sink = i as u64;
            while Instant::now() < end && !STOP.load(Ordering::Relaxed) {
                for _ in 0..16 {
                    sink = cpu_unit(sink);
                }
                work += 16;
            }
            std::hint::black_box(sink);
        }
        let s1 = own_schedstat();
        let slices = s1.timeslices.saturating_sub(s0.timeslices);
        let wait_ms = s1.wait_ns.saturating_sub(s0.wait_ns) as f64 / 1e6;
        let p = crate::report::percentiles(&late);
        phases.push(serde_json::json!({
            "phase": PHASE_NAMES[i],
            "start_s": (t0 - start).as_secs_f64(),
            "wall_s": t0.elapsed().as_secs_f64(),
            "work": work,
            "cpu_s": (thread_cpu_ns() - c0) as f64 / 1e9,
            "run_delay_ms": wait_ms,
            "dispatches": slices,
            // Seed 001 Table 1's dispatch latency (runnable until chosen), here the mean
            // from the kernel's own books: run-queue wait / times run.
            "mean_dispatch_latency_ms": if slices > 0 { wait_ms / slices as f64 } else { 0.0 },
            "wakeup_lateness_ms": if i == 1 { serde_json::json!({"mean": p.mean, "p50": p.p50, "p99": p.p99, "max": p.max}) } else { serde_json::Value::Null },
        }));
        total += work;
        t0 = Instant::now();
        if STOP.load(Ordering::Relaxed) {
            break;
        }
    }
    serde_json::json!({"kind": args.kind, "work": total, "phases": phases})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burn_uses_cpu_time() {
        let c0 = thread_cpu_ns();
        burn_cpu_ns(2_000_000);
        let used = thread_cpu_ns() - c0;
        assert!((2_000_000..20_000_000).contains(&used), "used {used} ns");
    }

    #[test]
    fn mem_working_set_is_above_the_cache() {
        let b = mem_array_bytes(None);
        assert!(b >= 32 << 20);
        if let Some(llc) = allot_linux::procfs::llc_bytes() {
            assert!(2 * b >= 4 * llc);
        }
        assert_eq!(mem_array_bytes(Some(3)), 3 << 20);
    }
}
