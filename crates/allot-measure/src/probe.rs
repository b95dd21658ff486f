//! `allot probe`: a periodic, latency-sensitive task that measures how late each wakeup
//! is (the starved-task tutorial step 1's jitter.py, cyclictest's idea) under any policy, and reads its own
//! run-queue wait from the kernel's books (the starved-task tutorial step 3) so the two can be compared.
//!
//! Unlike cyclictest, the policy is whatever you ask for (normal, nice, batch, idle, fifo,
//! rr), with an optional EEVDF custom slice, and it runs unchanged inside an allot job
//! (`allot run -t 300 -- allot probe`).

use crate::args;
use crate::policy::Policy;
use crate::report::{log2_histogram, percentiles, render_histogram, Bucket, Percentiles};
use allot_model::duration::Unit;
use allot_report::for_terminal;
use anyhow::Context;
use clap::{Args, ValueEnum};
use std::os::unix::fs::FileExt;
use std::time::Duration;

/// How the probe waits for its next deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Sleep until the deadline (clock_nanosleep, absolute): measures wakeup latency of a
    /// task that blocks, like a request handler or cyclictest.
    Sleep,
    /// Busy-wait until the deadline, as the jitter.py of the tutorial "Catch the scheduler starving a task" does: the probe is always
    /// runnable, so lateness is time spent preempted.
    Busy,
}

/// `allot probe`: a periodic latency probe. Prints wakeup lateness percentiles, a log2
/// histogram, and the probe's own run-queue wait, timeslices and involuntary switches
/// from the kernel's accounting.
#[derive(Debug, Clone, Args)]
pub struct ProbeArgs {
    /// Wakeup interval, more than 0 and at most 60s: 5ms, 500us, 0.2s (a bare number is
    /// ms).
    #[arg(long, short = 'i', default_value = "5ms", allow_negative_numbers = true)]
    pub interval: String,
    /// CPU work per wakeup, in thread CPU time so preemption does not shorten it: 500us,
    /// 0.5ms (a bare number is µs).
    #[arg(long, short = 'w', default_value = "0us", allow_negative_numbers = true)]
    pub work: String,
    /// Number of wakeups (default 2000, as jitter.py in "Catch the scheduler starving a task"; conflicts with --duration).
    #[arg(long, short = 'n', allow_negative_numbers = true, conflicts_with = "duration")]
    pub count: Option<i64>,
    /// Run this long instead of a count: 10s, 1.5min (a bare number is seconds).
    #[arg(long, short = 'd', allow_negative_numbers = true)]
    pub duration: Option<String>,
    /// Scheduling policy: normal, nice:N (-20..19), batch, batch:N, idle, fifo:P (1..99),
    /// rr:P (1..99).
    #[arg(long, short = 'p', default_value = "normal")]
    pub policy: String,
    /// EEVDF custom slice, 100us..100ms: 0.1ms, 3ms (a bare number is µs;
    /// sched_setattr sched_runtime, Linux 6.12+). Normal and batch policies only.
    #[arg(long, allow_negative_numbers = true)]
    pub slice: Option<String>,
    /// Sleep or busy-wait to each deadline.
    #[arg(long, short = 'm', value_enum, default_value_t = Mode::Sleep)]
    pub mode: Mode,
    /// Pin the probe to these CPUs (comma-separated, e.g. 0 or 0,1).
    #[arg(long, value_delimiter = ',')]
    pub cpu: Vec<usize>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also write the JSON report to this file.
    #[arg(long)]
    pub output: Option<std::path::PathBuf>,
}

/// A validated probe configuration.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ProbeConfig {
    /// Wakeup interval.
    #[serde(serialize_with = "ser_us")]
    pub interval: Duration,
    /// CPU work per wakeup.
    #[serde(serialize_with = "ser_us")]
    pub work: Duration,
    /// Wakeups to measure (used when `duration` is None).
    pub count: u64,
    /// Or: how long to run.
    pub duration: Option<f64>,
    /// Policy of the probe thread.
    pub policy: Policy,
    /// EEVDF custom slice, ns (0 = kernel default).
    pub slice_ns: u64,
    /// Sleep or busy-wait.
    pub mode: Mode,
    /// CPUs to pin to (empty = no pinning).
    pub cpus: Vec<usize>,
}

fn ser_us<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1e6)
}

impl Default for ProbeConfig {
    fn default() -> Self {
        ProbeConfig {
            interval: Duration::from_millis(5),
            work: Duration::ZERO,
            count: 2000,
            duration: None,
            policy: Policy::default(),
            slice_ns: 0,
            mode: Mode::Sleep,
            cpus: vec![],
        }
    }
}

impl ProbeArgs {
    /// Checks every value; one clear error naming the value and what is allowed.
    pub fn config(&self) -> anyhow::Result<ProbeConfig> {
        let interval = args::positive_duration("--interval", &self.interval, Unit::Ms, Duration::from_secs(60))?;
        let work = args::duration("--work", &self.work, Unit::Us)?;
        let count = match self.count {
            Some(n) if n < 1 => anyhow::bail!("--count must be at least 1, got {n}"),
            Some(n) => n as u64,
            None => 2000,
        };
        let duration = match &self.duration {
            Some(d) => Some(args::positive_duration("--duration", d, Unit::S, Duration::from_secs(7 * 24 * 3600))?.as_secs_f64()),
            None => None,
        };
        let policy: Policy = self.policy.parse().map_err(|e: String| anyhow::anyhow!(e))?;
        let slice_ns = match &self.slice {
            None => 0,
            Some(s) => {
                let d = args::duration("--slice", s, Unit::Us)?;
                if !(Duration::from_micros(100)..=Duration::from_millis(100)).contains(&d) {
                    anyhow::bail!("--slice must be 100us..100ms (the kernel's range for custom slices), got {s:?}");
                }
                d.as_nanos() as u64
            }
        };
        let n = allot_linux::ncpu();
        if let Some(c) = self.cpu.iter().find(|&&c| c >= n.max(1024)) {
            anyhow::bail!("--cpu {c} does not exist: this machine's CPUs are 0..{}", n - 1);
        }
        Ok(ProbeConfig { interval, work, count, duration, policy, slice_ns, mode: self.mode, cpus: self.cpu.clone() })
    }
}

/// The kernel's accounting of the probe thread over the run (the starved-task tutorial step 3).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct KernelAccount {
    /// Time on the CPU, ms (schedstat field 1).
    pub run_ms: f64,
    /// Time runnable but waiting on a run queue, ms (schedstat field 2, run_delay).
    pub run_delay_ms: f64,
    /// Timeslices (schedstat field 3: times it was put on a CPU).
    pub timeslices: u64,
    /// Involuntary switches: preempted while it still wanted to run.
    pub involuntary_switches: u64,
    /// Voluntary switches: it slept.
    pub voluntary_switches: u64,
    /// Worst run-queue wait within one cycle (between going to sleep and waking), µs:
    /// the kernel's side of "worst lateness" (the starved-task tutorial: wait_max matches jitter).
    pub worst_cycle_wait_us: f64,
    /// Longest single wait from /proc/…/sched wait_max, ms (CONFIG_SCHEDSTATS only).
    pub wait_max_ms: Option<f64>,
    /// The EEVDF slice the kernel used, µs.
    pub slice_us: Option<f64>,
    /// The policy the kernel reports (SCHED_*).
    pub policy: String,
}

/// What one probe run measured.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ProbeReport {
    /// The configuration.
    pub config: ProbeConfig,
    /// Wakeup lateness, µs.
    pub lateness_us: Percentiles,
    /// Log2 histogram of lateness, µs.
    pub histogram: Vec<Bucket>,
    /// Deadlines skipped because the probe was more than an interval late.
    pub missed: u64,
    /// The kernel's accounting.
    pub kernel: KernelAccount,
    /// The cgroup (cpu controller) the probe ran in, e.g. an allot job.
    pub cgroup: Option<String>,
    /// The measuring thread's id (to find its wakeups in a scheduler trace).
    pub tid: i32,
    /// Wall time, s.
    pub wall_s: f64,
    /// Per-wakeup lateness, µs (only kept when asked; not serialized).
    #[serde(skip)]
    pub samples_us: Vec<f64>,
    /// Per-wakeup kernel wait, µs (not serialized).
    #[serde(skip)]
    pub cycle_wait_us: Vec<f64>,
}

use crate::launcher::monotonic_ns as mono_ns;

fn sleep_until_ns(t: u64) {
    let ts = libc::timespec { tv_sec: (t / 1_000_000_000) as libc::time_t, tv_nsec: (t % 1_000_000_000) as libc::c_long };
    // SAFETY: valid timespec; EINTR just retries.
    while unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &ts, std::ptr::null_mut()) } == libc::EINTR {}
}

/// Reads the wait field of an open schedstat file (pread at 0 regenerates it).
fn wait_ns(f: &std::fs::File, buf: &mut [u8; 128]) -> u64 {
    let n = f.read_at(buf, 0).unwrap_or(0);
    std::str::from_utf8(&buf[..n]).ok().and_then(|s| s.split_whitespace().nth(1)?.parse().ok()).unwrap_or(0)
}

fn gettid() -> i32 {
    // SAFETY: no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

/// Runs the probe on the calling thread: applies the policy (and pinning, slice) to it,
/// measures, then restores the thread's previous policy and affinity as best it can.
pub fn measure(cfg: &ProbeConfig) -> anyhow::Result<ProbeReport> {
    let tid = gettid();
    let before = allot_linux::process::sched::get(tid).context("read the probe thread's scheduling attributes")?;
    if cfg.slice_ns != 0 && !allot_linux::process::sched::custom_slices_supported() {
        anyhow::bail!("--slice needs a kernel that honours EEVDF custom slices (Linux 6.12+); this one ignores sched_runtime");
    }
    if !cfg.cpus.is_empty() {
        allot_linux::process::sched::set_affinity(tid, &cfg.cpus).context("pin the probe")?;
    }
    cfg.policy.apply(tid, cfg.slice_ns)?;
    // Timer slack 1 ns: the default 50 µs slack would show up as lateness.
    // SAFETY: prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1, 0, 0, 0) };
    let result = measure_loop(cfg);
    let _ = allot_linux::process::sched::set(tid, &before);
    if !cfg.cpus.is_empty() {
        let all: Vec<usize> = (0..allot_linux::ncpu()).collect();
        let _ = allot_linux::process::sched::set_affinity(tid, &all);
    }
    result
}

fn measure_loop(cfg: &ProbeConfig) -> anyhow::Result<ProbeReport> {
    let ss = std::fs::File::open("/proc/thread-self/schedstat").context("open /proc/thread-self/schedstat")?;
    let sched0 = allot_linux::process::procfs::parse_task_sched(&allot_linux::read("/proc/thread-self/sched")?);
    let st0 = allot_linux::process::procfs::schedstat_at("/proc/thread-self/schedstat")?;
    let interval = cfg.interval.as_nanos() as u64;
    let work = cfg.work.as_nanos() as u64;
    let n_max = match cfg.duration {
        Some(d) => ((d * 1e9) as u64 / interval.max(1)).max(1),
        None => cfg.count,
    };
    let mut late = Vec::with_capacity(n_max.min(10_000_000) as usize);
    let mut cyc = Vec::with_capacity(late.capacity());
    let mut buf = [0u8; 128];
    let mut missed = 0u64;
    let t_start = mono_ns();
    let end = cfg.duration.map(|d| t_start + (d * 1e9) as u64);
    let mut next = t_start + interval;
    while (late.len() as u64) < n_max {
        let w0 = wait_ns(&ss, &mut buf);
        match cfg.mode {
            Mode::Sleep => sleep_until_ns(next),
            Mode::Busy => while mono_ns() < next {},
        }
        let now = mono_ns();
        let w1 = wait_ns(&ss, &mut buf);
        late.push(now.saturating_sub(next) as f64 / 1e3);
        cyc.push(w1.saturating_sub(w0) as f64 / 1e3);
        if work > 0 {
            crate::workload::burn_cpu_ns(work);
        }
        next += interval;
        let now = mono_ns();
        // cyclictest-style: a deadline already past is skipped and counted, not measured
        // as a burst of late wakeups.
        while next <= now {
            next += interval;
            missed += 1;
        }
        if end.is_some_and(|e| next > e) {
            break;
        }
    }
    let wall_s = (mono_ns() - t_start) as f64 / 1e9;
    let st1 = allot_linux::process::procfs::schedstat_at("/proc/thread-self/schedstat")?;
    let sched1 = allot_linux::process::procfs::parse_task_sched(&allot_linux::read("/proc/thread-self/sched")?);
    let kernel = KernelAccount {
        run_ms: st1.run_ns.saturating_sub(st0.run_ns) as f64 / 1e6,
        run_delay_ms: st1.wait_ns.saturating_sub(st0.wait_ns) as f64 / 1e6,
        timeslices: st1.timeslices.saturating_sub(st0.timeslices),
        involuntary_switches: sched1.nr_involuntary_switches.saturating_sub(sched0.nr_involuntary_switches),
        voluntary_switches: sched1.nr_voluntary_switches.saturating_sub(sched0.nr_voluntary_switches),
        worst_cycle_wait_us: cyc.iter().copied().fold(0.0, f64::max),
        wait_max_ms: sched1.wait_max_ms,
        slice_us: sched1.slice_ns.map(|s| s as f64 / 1e3),
        policy: sched1.policy.map(allot_linux::process::sched::policy_name).unwrap_or("?").to_string(),
    };
    Ok(ProbeReport {
        // SAFETY: the gettid system call has no preconditions (called by number: the
        // packaged binary links against glibc 2.28, which has no gettid wrapper).
        tid: unsafe { libc::syscall(libc::SYS_gettid) } as i32,
        config: cfg.clone(),
        lateness_us: percentiles(&late),
        histogram: log2_histogram(&late),
        missed,
        kernel,
        cgroup: allot_linux::process::procfs::cgroup_of(std::process::id() as i32, Some("cpu"))
            .or_else(|_| allot_linux::process::procfs::cgroup_of(std::process::id() as i32, None))
            .ok(),
        wall_s,
        samples_us: late,
        cycle_wait_us: cyc,
    })
}

/// Formats µs for people: µs below 10 ms, ms above.
pub fn fmt_us(us: f64) -> String {
    if us < 10_000.0 {
        format!("{us:.0} µs")
    } else {
        format!("{:.1} ms", us / 1e3)
    }
}

/// The report as text.
pub fn render(r: &ProbeReport) -> String {
    let c = &r.config;
    let l = &r.lateness_us;
    let k = &r.kernel;
    let slice = if c.slice_ns > 0 { format!("{} µs", c.slice_ns / 1000) } else { "default".into() };
    let mut s = format!(
        "allot probe: {} wakeups every {} ms ({} mode), work {} µs, policy {} ({}), slice {} (kernel: {}), cgroup {}\n\n",
        l.n,
        c.interval.as_secs_f64() * 1e3,
        match c.mode {
            Mode::Sleep => "sleep",
            Mode::Busy => "busy-wait",
        },
        c.work.as_secs_f64() * 1e6,
        c.policy,
        k.policy,
        slice,
        k.slice_us.map(|x| format!("{x:.0} µs")).unwrap_or("?".into()),
        for_terminal(r.cgroup.as_deref().unwrap_or("?")),
    );
    s += &format!(
        "wakeup lateness: p50 {}  p90 {}  p99 {}  p99.9 {}  max {}   (deadlines missed: {})\n\n",
        fmt_us(l.p50),
        fmt_us(l.p90),
        fmt_us(l.p99),
        fmt_us(l.p999),
        fmt_us(l.max),
        r.missed
    );
    s += &render_histogram(&r.histogram);
    s += &format!(
        "\nkernel's accounting of the probe thread (/proc/thread-self/schedstat and sched):\n  on CPU {:.1} ms, runnable but waiting (run_delay) {:.1} ms, timeslices {}, involuntary switches {}, voluntary {}\n  worst wait within one cycle: {}   vs worst lateness {}{}\n",
        k.run_ms,
        k.run_delay_ms,
        k.timeslices,
        k.involuntary_switches,
        k.voluntary_switches,
        fmt_us(k.worst_cycle_wait_us),
        fmt_us(l.max),
        k.wait_max_ms.map(|m| format!("   (sched wait_max {m:.3} ms)")).unwrap_or_default(),
    );
    s
}

/// `allot probe`.
pub fn run(args: ProbeArgs) -> anyhow::Result<i32> {
    let cfg = args.config()?;
    let r = measure(&cfg)?;
    let json = serde_json::to_string_pretty(&r)?;
    if let Some(p) = &args.output {
        crate::report::write_file(p, &(json.clone() + "\n"))?;
    }
    if args.json {
        println!("{json}");
    } else {
        print!("{}", render(&r));
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> ProbeArgs {
        #[derive(clap::Parser)]
        struct P {
            #[command(flatten)]
            a: ProbeArgs,
        }
        use clap::Parser;
        P::try_parse_from(std::iter::once("probe").chain(extra.iter().copied())).unwrap().a
    }

    #[test]
    fn bad_input_one_clear_error() {
        let e = |a: &[&str]| args(a).config().unwrap_err().to_string();
        assert_eq!(e(&["--interval", "0"]), "--interval must be more than 0, got \"0\"");
        assert_eq!(
            e(&["--interval", "-3"]),
            "--interval must be a duration like 5ms, 500us or 0.2s (a bare number is milliseconds), got \"-3\": a duration cannot be negative"
        );
        assert_eq!(
            e(&["--interval", "5 parsecs"]),
            "--interval must be a duration like 5ms, 500us or 0.2s (a bare number is milliseconds), got \"5 parsecs\": unknown unit \"parsecs\"; units are ns, us (or µs), ms, s, min"
        );
        assert_eq!(e(&["--interval", "2min"]), "--interval must be at most 60s, got \"2min\"");
        assert_eq!(e(&["--count", "0"]), "--count must be at least 1, got 0");
        assert!(e(&["--policy", "fast"]).starts_with("unknown policy \"fast\": use normal, nice:N (-20..19)"));
        assert_eq!(e(&["--slice", "5"]), "--slice must be 100us..100ms (the kernel's range for custom slices), got \"5\"");
        assert!(e(&["--work", "-1"]).contains("--work"));
        assert!(e(&["--duration", "0s"]).contains("--duration must be more than 0"));
    }

    #[test]
    fn durations_take_units_and_bare_numbers_keep_their_old_unit() {
        let c = |a: &[&str]| args(a).config().unwrap();
        // --work 0.5ms used to be refused (it took bare µs while --interval took bare ms).
        assert_eq!(c(&["--work", "0.5ms"]).work, Duration::from_micros(500));
        assert_eq!(c(&["--work", "500"]).work, Duration::from_micros(500));
        assert_eq!(c(&["--work", "250µs"]).work, Duration::from_micros(250));
        assert_eq!(c(&["--interval", "5"]).interval, Duration::from_millis(5));
        assert_eq!(c(&["--interval", "500us"]).interval, Duration::from_micros(500));
        assert_eq!(c(&["--interval", "0.2s"]).interval, Duration::from_millis(200));
        assert_eq!(c(&[]).interval, Duration::from_millis(5));
        assert_eq!(c(&["--duration", "2"]).duration, Some(2.0));
        assert_eq!(c(&["--duration", "1.5min"]).duration, Some(90.0));
        assert_eq!(c(&["--slice", "100"]).slice_ns, 100_000);
        assert_eq!(c(&["--slice", "0.1ms"]).slice_ns, 100_000);
    }

    #[test]
    fn short_run_measures() {
        // At this process's own nice: nice 0 from a test run under `nice -n 19` would be
        // a raise, which needs root.
        let own = allot_linux::process::sched::nice(std::process::id() as i32).unwrap();
        let cfg = ProbeConfig { count: 20, interval: Duration::from_millis(1), policy: Policy::Nice(own), ..Default::default() };
        let r = measure(&cfg).unwrap();
        assert!(r.lateness_us.n + r.missed as usize >= 20);
        assert!(r.kernel.timeslices >= 1);
        assert!(render(&r).contains("usecs"));
    }
}
