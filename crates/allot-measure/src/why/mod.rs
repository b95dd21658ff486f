//! `allot why PID`: seed 003's diagnosis in one command. Samples the kernel's per-thread
//! accounting (/proc/PID/task/*/schedstat and sched) for a few seconds, puts it next to
//! the machine's context (runnable tasks vs CPUs, PSI cpu), and gives a verdict:
//! starved by scheduling, CPU-bound at its fair share, or mostly sleeping or blocked.

mod render;
mod sample;

pub use render::render;
pub use sample::{diagnose, diagnose_every};

use clap::Args;
use std::time::Duration;

/// `allot why PID`: is this process being starved by the scheduler? Samples its threads'
/// run-queue wait for a few seconds and gives a verdict with the evidence and the allot
/// command that would help.
#[derive(Debug, Clone, Args)]
pub struct WhyArgs {
    /// The process to diagnose.
    #[arg(allow_negative_numbers = true)]
    pub pid: i64,
    /// How long to sample, at most an hour: 3s, 500ms (a bare number is seconds).
    #[arg(long, short = 'd', default_value = "3s", allow_negative_numbers = true)]
    pub duration: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The three verdicts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// It wants the CPU, and the scheduler makes it wait for it: a task that sleeps and
    /// waits longer than it runs whenever it wakes, or a CPU-bound one held well below an
    /// equal share.
    Starved,
    /// It is CPU-bound and gets (at least about) an equal share: fairness, not starvation.
    CpuBoundFairShare,
    /// It is mostly sleeping or blocked; scheduling is not what delays it.
    Sleeping,
}

impl Verdict {
    /// Words for people.
    pub fn words(&self) -> &'static str {
        match self {
            Verdict::Starved => "starved by scheduling",
            Verdict::CpuBoundFairShare => "CPU-bound at its fair share",
            Verdict::Sleeping => "mostly sleeping or blocked",
        }
    }
}

/// Another process that used CPU during the window.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Competitor {
    /// Its pid.
    pub pid: i32,
    /// Its command name.
    pub comm: String,
    /// CPUs it used on average.
    pub cpus: f64,
}

/// The machine during the window.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct MachineContext {
    /// Online CPUs.
    pub ncpu: usize,
    /// Runnable tasks (running or waiting for a CPU), machine-wide, averaged over the
    /// window, not counting the sampler itself.
    pub runnable_avg: f64,
    /// Share of the window in which some task waited for a CPU (PSI cpu "some"), %.
    pub psi_some_pct: Option<f64>,
    /// PSI cpu some avg10 at the end, %.
    pub psi_some_avg10: Option<f64>,
    /// The processes that used the most CPU during the window (not the target).
    pub top: Vec<Competitor>,
}

/// What `why` found.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Diagnosis {
    /// The process.
    pub pid: i32,
    /// Its command line.
    pub cmdline: String,
    /// Threads seen.
    pub threads: usize,
    /// Scheduling policy and nice of the main thread, e.g. "SCHED_OTHER nice 0".
    pub policy: String,
    /// Its cpu cgroup (e.g. an allot job).
    pub cgroup: Option<String>,
    /// Seconds sampled.
    pub window_s: f64,
    /// CPU time used in the window, s (schedstat field 1, all threads).
    pub cpu_s: f64,
    /// Runnable-but-waiting time in the window, s (schedstat field 2, run_delay).
    pub wait_s: f64,
    /// CPUs used on average (cpu_s / window).
    pub cpu_rate: f64,
    /// Waiting per second of wall time, ms.
    pub wait_ms_per_s: f64,
    /// Seed 002 §5.2.3 runtime ratio = cpu / (cpu + ready); None if it never ran or waited.
    pub runtime_ratio: Option<f64>,
    /// Fraction of the window the busiest thread was runnable (running or waiting).
    pub busiest_runnable: f64,
    /// Waits per second: times put on a CPU (schedstat field 3), each after a wait.
    pub waits_per_s: f64,
    /// Mean wait per dispatch, ms (run_delay / timeslices).
    pub mean_wait_ms: f64,
    /// Involuntary switches per second (preempted while it wanted to run).
    pub involuntary_per_s: f64,
    /// Voluntary switches per second (it slept or blocked).
    pub voluntary_per_s: f64,
    /// Worst single wait, ms, where the kernel keeps one (see `worst_wait_source`).
    pub worst_wait_ms: Option<f64>,
    /// Where `worst_wait_ms` comes from.
    pub worst_wait_source: Option<String>,
    /// Longest continuous wait seen by sampling every few ms (an estimate).
    pub longest_wait_estimate_ms: f64,
    /// An equal share of the machine per runnable thread, CPUs: ncpu / runnable.
    pub equal_share: f64,
    /// The machine.
    pub machine: MachineContext,
    /// The verdict.
    pub verdict: Verdict,
    /// Why, in one sentence.
    pub reason: String,
    /// What allot command would help.
    pub help: Vec<String>,
}

// Verdict thresholds. Each is a judgement about what a person would call "starved"; the
// numbers come from the seeds:
/// A thread runnable at least this fraction of the window is CPU-bound: a busy loop is
/// runnable ~100% of the time; the margin covers page faults, brief syscalls and
/// sampling granularity.
pub const CPU_BOUND_RUNNABLE: f64 = 0.9;
/// Seed 002 §5.2.3: a runtime ratio below 0.5 means that when the task was ready it spent
/// more time waiting for the CPU than running.
pub const STARVED_RATIO: f64 = 0.5;
/// Waiting at least 50 ms per second: seed 001 §5.2 puts the latency people notice at
/// 50–150 ms, and seed 003's starved probe waited far more than this; a sleepy daemon
/// that waits 100 µs per wakeup has a low ratio but is not starved.
pub const STARVED_WAIT_MS_PER_S: f64 = 50.0;
/// A CPU-bound task getting less than half of an equal share is held down (by weight,
/// policy or cgroup), not just sharing fairly.
pub const BELOW_SHARE: f64 = 0.5;
/// Runnable less than this fraction of the window (all threads together): sleeping.
pub const SLEEPING_DEMAND: f64 = 0.05;

/// `allot why`.
pub fn run(args: WhyArgs) -> anyhow::Result<i32> {
    let window = crate::args::positive_duration("--duration", &args.duration, allot_model::duration::Unit::S, Duration::from_secs(3600))?;
    let pid =
        i32::try_from(args.pid).ok().filter(|p| *p > 0).ok_or_else(|| anyhow::anyhow!("PID must be a positive process id, got {}", args.pid))?;
    let d = diagnose(pid, window)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&d)?);
    } else {
        print!("{}", render(&d));
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duration_takes_units() {
        let e = |d: &str| run(WhyArgs { pid: 1, duration: d.into(), json: false }).unwrap_err().to_string();
        assert_eq!(e("0"), "--duration must be more than 0, got \"0\"");
        assert_eq!(e("2h"), "--duration must be a duration like 5ms, 500us or 0.2s (a bare number is seconds), got \"2h\": unknown unit \"h\"; units are ns, us (or µs), ms, s, min");
        assert_eq!(e("61min"), "--duration must be at most 3600s, got \"61min\"");
    }
}
