//! `allot why PID`: the starved-task tutorial's diagnosis in one command. Samples the kernel's per-thread
//! accounting (/proc/PID/task/*/schedstat and sched) for a few seconds, puts it next to
//! the machine's context (runnable tasks and idle CPU, PSI cpu), and gives a verdict:
//! starved by scheduling, held by a CPU quota, CPU-bound at its fair share, stalled on
//! memory or on I/O (with whose use caused it), or mostly sleeping or blocked. Where
//! allot's daemon manages the process, the verdict names what allot holds it by — its
//! job's own cap, the background class, nice emulation or its currency's funding — and
//! every suggestion is a command the one asking may run (docs/trust.md); what only
//! someone else may do is said apart, naming who.
//!
//! - `sample`: the kernel, read over the window;
//! - `stall`: waits on memory and I/O, sampled, and who holds the memory or moves the
//!   data (the verdict is allot_model::stall's);
//! - `verdict`: the kernel's verdict and the machine's context in words, pure;
//! - `allot`: what the daemon knows (filled in by the `allot` binary: this crate does not
//!   speak its protocol) and what allot holds the process by, pure;
//! - `advice`: who may do what, and the suggestions, pure;
//! - `render`: the text.

mod advice;
mod allot;
mod render;
mod sample;
mod stall;
#[cfg(test)]
mod tests;
mod verdict;

pub use advice::{advise, may_fund, may_set};
pub use allot::{held_by, DaemonAnswers, JobFacts, JobRef, Managed, ReasonFact, Rival, AT_CAP, AT_ENTITLEMENT, SATURATED, THROTTLED_SHARE};
pub use render::render;
pub use sample::{diagnose, diagnose_every};
pub use stall::{decide, CurrencyShare, ProcUse, Sampler, Stall};
pub use verdict::{kernel_verdict, machine_words};

use clap::Args;
use std::time::Duration;

/// `allot why PID`: is this process being starved by the scheduler, held by allot, or
/// stalled on memory or I/O (and by whose use)? Samples its threads' run-queue wait and
/// their waits in the kernel for a few seconds, reads its allot job from the daemon, and
/// gives a verdict with the evidence and the commands you may run that would help.
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

/// The verdicts: six from the kernel's accounting alone, four that name what allot holds
/// the process by (only for a process in an allot job that wants more CPU than it gets).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// It wants the CPU, and the scheduler makes it wait for it: a task that sleeps and
    /// waits longer than it runs whenever it wakes, or a CPU-bound one held well below an
    /// equal share.
    Starved,
    /// It wants the CPU and its cgroup's CPU quota (`cpu.max`) stops it: the kernel's
    /// `cpu.stat` counted the group throttled for a good part of the window.
    Throttled,
    /// It is CPU-bound and gets (at least about) an equal share: fairness, not starvation.
    CpuBoundFairShare,
    /// It is mostly sleeping or blocked; scheduling is not what delays it.
    Sleeping,
    /// It waits for memory: reclaim, major faults, or its cache read back after the kernel
    /// reclaimed it for someone's growth.
    MemoryStall,
    /// It waits for its disk, with no sign of memory pressure behind it.
    IoStall,
    /// Its allot job's own cap holds it: a hard cap, or a soft cap held while others want
    /// the CPU.
    Capped,
    /// Its allot job is in the background class: it runs only on CPU nothing else wants.
    Background,
    /// Nice emulation: its nice lowers its job's base tickets (Petrou et al. 1999 §3.4).
    Niced,
    /// Its job gets its entitlement and its currency its share: the currency's funding,
    /// against the other active currencies', is what limits it.
    Funding,
}

impl Verdict {
    /// Words for people.
    pub fn words(&self) -> &'static str {
        match self {
            Verdict::Starved => "starved by scheduling",
            Verdict::Throttled => "held by its cgroup's CPU quota",
            Verdict::CpuBoundFairShare => "CPU-bound at its fair share",
            Verdict::Sleeping => "mostly sleeping or blocked",
            Verdict::MemoryStall => "stalled on memory",
            Verdict::IoStall => "stalled on I/O",
            Verdict::Capped => "held by its job's cap",
            Verdict::Background => "in the background class",
            Verdict::Niced => "held down by its nice",
            Verdict::Funding => "limited by its currency's funding",
        }
    }
}

/// Another process that used CPU during the window.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Competitor {
    /// Its pid.
    pub pid: i32,
    /// Its command name.
    pub comm: String,
    /// CPUs it used on average.
    pub cpus: f64,
    /// Its real, effective, saved and filesystem uid (None: it exited).
    pub uids: Option<[u32; 4]>,
    /// Its cgroup in the cpu hierarchy.
    pub cgroup: Option<String>,
    /// Its allot job, where the daemon was asked and has it in one.
    pub job: Option<JobRef>,
}

/// The machine during the window.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct MachineContext {
    /// Online CPUs.
    pub ncpu: usize,
    /// Runnable tasks (running or waiting for a CPU), machine-wide, averaged over the
    /// window, not counting the sampler itself. Tasks a CPU quota has stopped are not
    /// counted: the kernel takes them off the run queue.
    pub runnable_avg: f64,
    /// CPUs idle on average over the window (/proc/stat idle and iowait time).
    pub idle_cpus: Option<f64>,
    /// Share of the window in which some task waited for a CPU (PSI cpu "some"), %.
    pub psi_some_pct: Option<f64>,
    /// PSI cpu some avg10 at the end, %.
    pub psi_some_avg10: Option<f64>,
    /// The processes that used the most CPU during the window (not the target).
    pub top: Vec<Competitor>,
}

/// What `why` found.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
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
    /// Its real, effective, saved and filesystem uid: whose it is (docs/trust.md: a user
    /// may change only processes whose uids are all theirs).
    pub uids: Option<[u32; 4]>,
    /// Nice of the thread diagnosed (None under a real-time policy).
    pub nice: Option<i32>,
    /// The lowest nice its owner may give it without privilege: 20 − its RLIMIT_NICE
    /// (setpriority(2)); None where /proc/PID/limits could not be read.
    pub nice_floor: Option<i32>,
    /// Who asks (effective uid, as the daemon's SO_PEERCRED sees it): the suggestions are
    /// the ones this uid may run.
    pub asker: u32,
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
    /// Ross and Abel 2000 §5.2.3 runtime ratio = cpu / (cpu + ready); None if it never ran or waited.
    pub runtime_ratio: Option<f64>,
    /// Fraction of the window the busiest thread was runnable (running or waiting).
    pub busiest_runnable: f64,
    /// Threads runnable at least [`CPU_BOUND_RUNNABLE`] of the window (at least 1).
    pub busy_threads: usize,
    /// Time its cgroup's CPU quota kept it stopped during the window, s (`cpu.stat`
    /// throttled time, summed over CPUs); None where its cgroup keeps no such counter.
    pub throttled_s: Option<f64>,
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
    /// Its waits on memory and I/O, and who holds the memory or moves the data.
    pub stall: Stall,
    /// What the kernel's accounting alone says.
    pub kernel_verdict: Verdict,
    /// Why, in one sentence.
    pub kernel_reason: String,
    /// What allot's daemon says about the process.
    pub allot: Managed,
    /// The verdict: the kernel's, or what allot holds the process by.
    pub verdict: Verdict,
    /// Why, in one sentence.
    pub reason: String,
    /// Commands that would help and that the one asking may run (`#` says why), and notes
    /// in parentheses.
    pub help: Vec<String>,
    /// What would help that only someone else may do, naming who (root, the job's owner,
    /// a named currency's owners).
    pub ask: Vec<String>,
}

// Verdict thresholds. Each is a judgement about what a person would call "starved"; the
// numbers come from the source papers:
/// A thread runnable at least this fraction of the window is CPU-bound: a busy loop is
/// runnable ~100% of the time; the margin covers page faults, brief syscalls and
/// sampling granularity.
pub const CPU_BOUND_RUNNABLE: f64 = 0.9;
/// Ross and Abel 2000 §5.2.3: a runtime ratio below 0.5 means that when the task was ready it spent
/// more time waiting for the CPU than running.
pub const STARVED_RATIO: f64 = 0.5;
/// Waiting at least 50 ms per second: Petrou et al. 1999 §5.2 puts the latency people notice at
/// 50–150 ms, and the starved-task tutorial's starved probe waited far more than this; a sleepy daemon
/// that waits 100 µs per wakeup has a low ratio but is not starved.
pub const STARVED_WAIT_MS_PER_S: f64 = 50.0;
/// A CPU-bound task getting less than half of an equal share is held down (by weight,
/// policy or cgroup), not just sharing fairly.
pub const BELOW_SHARE: f64 = 0.5;
/// Runnable less than this fraction of the window (all threads together): sleeping.
pub const SLEEPING_DEMAND: f64 = 0.05;
/// At least this many CPUs idle on average: the machine had CPU to spare, so a process
/// that waited was held by a limit (a quota, its affinity, SCHED_IDLE), not crowded out.
pub const SPARE_CPUS: f64 = 0.5;

/// Asks the daemon about the process and its competitors, then gives the verdict and the
/// suggestions again with what it says.
pub fn ask_daemon(d: &mut Diagnosis, daemon: &mut dyn DaemonAnswers) {
    d.allot = daemon.job_of(d.pid);
    if !matches!(d.allot, Managed::NoDaemon { .. }) {
        for c in &mut d.machine.top {
            c.job = daemon.job_ref(c.pid);
        }
        // Whose memory and I/O: a process in a job counts for its currency.
        for u in d.stall.memory_users.iter_mut().chain(d.stall.io_users.iter_mut()) {
            if let Some(j) = daemon.job_ref(u.pid) {
                u.who = format!("currency {}", j.currency);
                u.currency = Some(j.currency);
            }
        }
        d.stall.shares = daemon.memory_shares();
        if let Some(j) = d.allot.job() {
            d.stall.own = format!("currency {}", j.currency);
        }
    }
    advise(d);
}

/// `allot why`: `daemon` answers what allot's daemon knows about a process (the `allot`
/// binary asks it over the socket; `|_| Managed::NotAsked` asks nobody).
pub fn run(args: WhyArgs, daemon: &mut dyn DaemonAnswers) -> anyhow::Result<i32> {
    let window = crate::args::positive_duration("--duration", &args.duration, allot_model::duration::Unit::S, Duration::from_secs(3600))?;
    let pid =
        i32::try_from(args.pid).ok().filter(|p| *p > 0).ok_or_else(|| anyhow::anyhow!("PID must be a positive process id, got {}", args.pid))?;
    let mut d = diagnose(pid, window)?;
    ask_daemon(&mut d, daemon);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&d)?);
    } else {
        print!("{}", render(&d));
    }
    Ok(0)
}
