//! Built-in workloads, so no benchmark or test needs anything external.
//!
//! Each one runs until its duration ends or it gets SIGTERM/SIGINT, then prints one
//! JSON line: `{"kind":..,"work":N,"cpu_s":..,"wall_s":..}` where `work` counts units
//! of fixed work done (the papers' "operations": Petrou et al. 1999 Fig 3, Judin's work rate).

mod fork;
mod read;

use clap::{Args, ValueEnum};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
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
    /// A memory looper (Judin 2016 Figure 2): two arrays, each twice the last-level cache
    /// (at least 32 MiB), read, written and xored in turn; `work` counts MiB processed.
    Mem,
    /// A fixed amount of CPU work (`--units`), then exit, printing the elapsed time.
    Work,
    /// Petrou et al. 1999 §5.2's bimodal job: CPU-bound, then interactive (about 5 ms of work every
    /// 100 ms), then CPU-bound again (`--phases`, default 15,20,15 s); reports each
    /// phase's work and its mean dispatch latency from the kernel's accounting.
    Bimodal,
    /// A fork storm: forks as fast as it can (or at `--rate`), each child exiting at once
    /// except every `--keep-every`-th, which lives as long as this process (`--hold`
    /// keeps it after the storm, until SIGTERM); `work` counts forks.
    Fork,
    /// Reads `--file` over and over, 1 MiB at a time (a working set in the page cache);
    /// `work` counts MiB read.
    Read,
    /// No work: prints the CPU count the way language runtimes read it (Rust's
    /// `available_parallelism`: affinity and the cgroup quota), and the machine's.
    Ncpu,
}

/// `allot-lab workload`: a built-in load generator (hidden; used by tests and benchmarks).
#[derive(Debug, Args)]
pub struct WorkloadArgs {
    /// The workload.
    #[arg(value_enum)]
    pub kind: Kind,
    /// Stop after this long: 3s, 500ms (a bare number is seconds; default: run until
    /// SIGTERM/SIGINT).
    #[arg(long, allow_negative_numbers = true)]
    pub duration: Option<String>,
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
    /// bimodal: lengths of the CPU, interactive and CPU phases (Petrou et al. 1999 §5.2: 15,20,15;
    /// a bare number is seconds).
    #[arg(long, value_delimiter = ',', default_values = ["15s", "20s", "15s"], allow_negative_numbers = true)]
    pub phases: Vec<String>,
    /// bimodal: CPU work per burst in the interactive phase (a bare number is ms).
    #[arg(long, default_value = "5ms", allow_negative_numbers = true)]
    pub burst_ms: String,
    /// bimodal: sleep between bursts in the interactive phase (a bare number is ms).
    #[arg(long, default_value = "100ms", allow_negative_numbers = true)]
    pub sleep_ms: String,
    /// fork: forks per second to aim at (0: as fast as possible).
    #[arg(long, default_value_t = 0)]
    pub rate: u64,
    /// fork: every Nth child lives as long as this process (0: none does).
    #[arg(long, default_value_t = 0)]
    pub keep_every: u64,
    /// fork: after the storm, print the report and stay (keeping the kept children)
    /// until SIGTERM.
    #[arg(long)]
    pub hold: bool,
    /// read: the file to read over and over.
    #[arg(long)]
    pub file: Option<std::path::PathBuf>,
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
    let tm = validate(&args)?;
    install_stop_handlers();
    let start = Instant::now();
    let mut line = match args.kind {
        Kind::Cpu => run_loop(&args, &tm, start, |_t, sink, _| cpu_unit(sink)),
        Kind::Mem => run_mem(&args, &tm, start),
        Kind::Work => run_work(&args, start),
        Kind::Bimodal => run_bimodal(&args, &tm, start),
        Kind::Fork => fork::run(&args, tm.duration, start),
        Kind::Read => read::run(args.file.as_deref().ok_or_else(|| anyhow::anyhow!("read needs --file FILE"))?, tm.duration.map(|d| start + d))?,
        Kind::Ncpu => serde_json::json!({
            "kind": "ncpu",
            "available_parallelism": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
            "online": allot_linux::ncpu(),
        }),
    };
    let wall = start.elapsed().as_secs_f64();
    line["cpu_s"] = serde_json::json!(process_cpu_s());
    line["wall_s"] = serde_json::json!(wall);
    let text = line.to_string();
    println!("{text}");
    if let Some(path) = &args.output {
        crate::report::write_file(path, &(text + "\n"))?;
    }
    if args.kind == Kind::Fork && args.hold {
        use std::io::Write;
        let _ = std::io::stdout().flush();
        fork::hold();
    }
    Ok(0)
}

/// The workload's durations, parsed.
struct Timing {
    /// Stop after this long.
    duration: Option<Duration>,
    /// bimodal: the three phases.
    phases: Vec<Duration>,
    /// bimodal: work per burst.
    burst: Duration,
    /// bimodal: sleep between bursts.
    sleep: Duration,
}

fn validate(args: &WorkloadArgs) -> anyhow::Result<Timing> {
    use crate::args::{duration, positive_duration};
    use allot_model::duration::Unit;
    if args.threads == 0 || args.threads > 4096 {
        anyhow::bail!("--threads must be 1..4096, got {}", args.threads);
    }
    const WEEK: Duration = Duration::from_secs(7 * 24 * 3600);
    let tm = Timing {
        duration: args.duration.as_deref().map(|d| positive_duration("--duration", d, Unit::S, WEEK)).transpose()?,
        phases: args.phases.iter().map(|p| duration("--phases", p, Unit::S)).collect::<anyhow::Result<_>>()?,
        burst: positive_duration("--burst-ms", &args.burst_ms, Unit::Ms, Duration::from_secs(60))?,
        sleep: positive_duration("--sleep-ms", &args.sleep_ms, Unit::Ms, Duration::from_secs(60))?,
    };
    if args.kind == Kind::Work && args.units == 0 {
        anyhow::bail!("--units must be at least 1, got 0");
    }
    if args.kind == Kind::Fork && args.duration.is_none() {
        anyhow::bail!("fork needs --duration (a storm that never ends is not a benchmark)");
    }
    if args.mib == Some(0) {
        anyhow::bail!("--mib must be at least 1, got 0");
    }
    if args.kind == Kind::Bimodal && (tm.phases.len() != 3 || tm.phases.iter().any(|p| *p > WEEK)) {
        anyhow::bail!("--phases must be three durations (cpu,interactive,cpu), each at most a week, got {:?}", args.phases.join(","));
    }
    Ok(tm)
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

/// A start line: every thread waits at it until the last one arrives, which wakes them
/// all with one futex wake. (A `std::sync::Barrier` wakes its threads one after another
/// through its mutex, each by the one before: with 1000 threads on one busy CPU that
/// chain took over a minute under emulation, and under a scheduler that had taken them
/// meanwhile it ran at the pace of their job's turns.)
struct StartLine {
    waiting: AtomicU64,
    open: AtomicU32,
    all: u64,
}

impl StartLine {
    fn new(all: usize) -> Self {
        StartLine { waiting: AtomicU64::new(0), open: AtomicU32::new(0), all: all as u64 }
    }

    fn wait(&self) {
        if self.waiting.fetch_add(1, Ordering::SeqCst) + 1 >= self.all {
            self.open.store(1, Ordering::SeqCst);
            // SAFETY: a futex wake on a live atomic of this process.
            unsafe { libc::syscall(libc::SYS_futex, self.open.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, i32::MAX) };
            return;
        }
        while self.open.load(Ordering::SeqCst) == 0 {
            // SAFETY: waits only while the word is still 0; a null timeout waits for a wake.
            unsafe {
                libc::syscall(
                    libc::SYS_futex,
                    self.open.as_ptr(),
                    libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                    0u32,
                    std::ptr::null::<libc::timespec>(),
                )
            };
        }
    }
}

/// Runs `step` on `--threads` threads until the duration ends or a signal arrives;
/// `step(thread, sink, state)` does one unit of work. The threads start their work
/// together, once all exist ([`StartLine`]): threads that spun as they came would slow the
/// making of the rest on a busy CPU (2000 threads on one CPU took minutes under emulation).
fn run_loop(args: &WorkloadArgs, tm: &Timing, start: Instant, step: impl Fn(usize, u64, &mut ()) -> u64 + Sync) -> serde_json::Value {
    let deadline = tm.duration.map(|d| start + d);
    let work = AtomicU64::new(0);
    let all_there = StartLine::new(args.threads);
    std::thread::scope(|sc| {
        for t in 0..args.threads {
            let (work, step, all_there) = (&work, &step, &all_there);
            sc.spawn(move || {
                all_there.wait();
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
        None => (allot_linux::process::procfs::llc_bytes().unwrap_or(32 << 20) * 2).max(32 << 20),
    }
}

fn run_mem(args: &WorkloadArgs, tm: &Timing, start: Instant) -> serde_json::Value {
    let bytes = mem_array_bytes(args.mib);
    let items = (bytes / 8) as usize;
    let deadline = tm.duration.map(|d| start + d);
    let mib_done = AtomicU64::new(0);
    // Work is counted per 1 MiB chunk (131072 longs) of one loop of Judin 2016 Figure 2.
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
                // Held until the process exits: its cgroup then holds the working set for as
                // long as the process has its memory (the memory bench samples it so).
                std::mem::forget(src);
                std::mem::forget(dst);
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
fn own_schedstat() -> allot_linux::process::procfs::SchedStat {
    allot_linux::process::procfs::schedstat_at("/proc/thread-self/schedstat").unwrap_or_default()
}

const PHASE_NAMES: [&str; 3] = ["cpu", "interactive", "cpu"];

fn run_bimodal(args: &WorkloadArgs, tm: &Timing, start: Instant) -> serde_json::Value {
    let mut phases = Vec::new();
    let mut total = 0u64;
    let mut t0 = start;
    for (i, len) in tm.phases.iter().enumerate() {
        let end = t0 + *len;
        let s0 = own_schedstat();
        let c0 = thread_cpu_ns();
        let mut work = 0u64;
        let mut late = Vec::new();
        if i == 1 {
            // Interactive: a burst of CPU, then a sleep (Petrou et al. 1999 §5.2: ~5 ms every ~100 ms).
            while Instant::now() < end && !STOP.load(Ordering::Relaxed) {
                work += burn_cpu_ns(tm.burst.as_nanos() as u64);
                let want = tm.sleep;
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
            // Petrou et al. 1999 Table 1's dispatch latency (runnable until chosen), here the mean
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

    fn args(a: &[&str]) -> WorkloadArgs {
        #[derive(clap::Parser)]
        struct P {
            #[command(flatten)]
            a: WorkloadArgs,
        }
        use clap::Parser;
        P::try_parse_from(std::iter::once("workload").chain(a.iter().copied())).unwrap().a
    }

    #[test]
    fn durations_take_units_and_bare_numbers_keep_their_old_unit() {
        let tm = validate(&args(&["bimodal", "--duration", "3", "--phases", "1,2.5s,500ms", "--burst-ms", "0.5ms", "--sleep-ms", "20"])).unwrap();
        assert_eq!(tm.duration, Some(Duration::from_secs(3)));
        assert_eq!(tm.phases, [Duration::from_secs(1), Duration::from_millis(2500), Duration::from_millis(500)]);
        assert_eq!((tm.burst, tm.sleep), (Duration::from_micros(500), Duration::from_millis(20)));
        let tm = validate(&args(&["bimodal"])).unwrap();
        assert_eq!(tm.phases, [Duration::from_secs(15), Duration::from_secs(20), Duration::from_secs(15)]);
        assert_eq!((tm.duration, tm.burst, tm.sleep), (None, Duration::from_millis(5), Duration::from_millis(100)));
        let e = |a: &[&str]| validate(&args(a)).err().map(|e| e.to_string()).unwrap_or_default();
        assert_eq!(e(&["cpu", "--duration", "0"]), "--duration must be more than 0, got \"0\"");
        assert!(e(&["cpu", "--duration", "-1"]).contains("cannot be negative"));
        assert!(e(&["bimodal", "--phases", "1,2"]).contains("--phases must be three durations"));
        assert!(e(&["bimodal", "--sleep-ms", "5 parsecs"]).contains("unknown unit \"parsecs\""));
    }

    #[test]
    fn a_fork_storm_must_end() {
        let e = validate(&args(&["fork", "--keep-every", "100"])).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("fork needs --duration"), "{e}");
        let a = args(&["fork", "--duration", "2s", "--rate", "5000", "--keep-every", "100", "--hold"]);
        assert!(validate(&a).is_ok() && a.rate == 5000 && a.keep_every == 100 && a.hold);
    }

    #[test]
    fn mem_working_set_is_above_the_cache() {
        let b = mem_array_bytes(None);
        assert!(b >= 32 << 20);
        if let Some(llc) = allot_linux::process::procfs::llc_bytes() {
            assert!(2 * b >= 4 * llc);
        }
        assert_eq!(mem_array_bytes(Some(3)), 3 << 20);
    }
}
