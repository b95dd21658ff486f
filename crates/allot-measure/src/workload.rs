//! Built-in workloads, so no benchmark or test needs anything external.
//!
//! Each one runs until its duration ends or it gets SIGTERM/SIGINT, then prints one
//! JSON line: `{"kind":..,"work":N,"cpu_s":..,"wall_s":..}` where `work` counts units
//! of fixed work done (the seeds' "operations": seed 001 Fig 3, seed 000's work rate).

use clap::{Args, ValueEnum};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
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
    /// Threads (each does the same work; `work` is their sum).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
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
    if args.threads == 0 || args.threads > 4096 {
        anyhow::bail!("--threads must be 1..4096, got {}", args.threads);
    }
    if let Some(d) = args.duration {
        if !(d > 0.0 && d.is_finite()) {
            anyhow::bail!("--duration must be a positive number of seconds, got {d}");
        }
    }
    // SAFETY: installing a signal handler that only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGTERM, on_signal as extern "C" fn(libc::c_int) as usize);
        libc::signal(libc::SIGINT, on_signal as extern "C" fn(libc::c_int) as usize);
    }
    let start = Instant::now();
    let deadline = args.duration.map(|d| start + Duration::from_secs_f64(d));
    let work = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..args.threads)
        .map(|t| {
            let work = work.clone();
            std::thread::spawn(move || {
                let mut sink = t as u64;
                let mut n = 0u64;
                while !STOP.load(Ordering::Relaxed) {
                    sink = cpu_unit(sink);
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
            })
        })
        .collect();
    for h in handles {
        let _ = h.join();
    }
    let wall = start.elapsed().as_secs_f64();
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let cpu = ru.ru_utime.tv_sec as f64 + ru.ru_utime.tv_usec as f64 / 1e6 + ru.ru_stime.tv_sec as f64 + ru.ru_stime.tv_usec as f64 / 1e6;
    println!(
        "{}",
        serde_json::json!({"kind": args.kind, "work": work.load(Ordering::Relaxed), "cpu_s": cpu, "wall_s": wall})
    );
    Ok(0)
}
