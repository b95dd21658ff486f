//! The scheduler interface the engine drives, and the schedulers, each faithful to
//! its source (the section is cited in each module).

use crate::time::Ns;
use crate::workload::Cap;

pub mod bsd;
pub mod cfs;
pub mod ebs;
pub mod eevdf;
pub mod hybrid;
pub mod linux22;
pub mod lottery;
pub mod stride;
pub mod tree;

/// Index of a task in `Kernel::tasks`.
pub type TaskId = usize;

/// Where a task is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskState {
    /// Not started yet.
    New,
    /// On a run queue (or held back by the scheduler, e.g. EBS's sinbin).
    Runnable,
    /// On a CPU.
    Running(usize),
    /// Asleep (timer, event, request, children).
    Sleeping,
    /// Asleep in the kernel on a resource.
    Blocked,
    /// Gone.
    Exited,
}

/// What the scheduler may read about a task.
#[derive(Debug, Clone)]
pub struct TaskInfo {
    /// Name.
    pub name: String,
    /// Index into `Kernel::currencies`.
    pub currency: usize,
    /// Tickets in its currency.
    pub tickets: u32,
    /// nice.
    pub nice: i32,
    /// Usage-rate cap.
    pub cap: Option<Cap>,
    /// Requested slice.
    pub slice: Option<Ns>,
    /// Parent task, if forked.
    pub parent: Option<TaskId>,
    /// Current state.
    pub state: TaskState,
    /// When it last went to sleep (for "asleep more than ten seconds", Petrou et al. 1999 §4.1).
    pub slept_at: Ns,
    /// Total CPU time so far (excluding the current run).
    pub cpu: Ns,
}

/// What the scheduler may read about a currency.
#[derive(Debug, Clone)]
pub struct CurrencyInfo {
    /// Name.
    pub name: String,
    /// Parent currency; None = base.
    pub parent: Option<usize>,
    /// Funding in parent tickets.
    pub funding: u32,
}

/// The read-only world the scheduler sees.
#[derive(Debug, Clone)]
pub struct Kernel {
    /// Now.
    pub now: Ns,
    /// CPUs.
    pub ncpus: usize,
    /// The workload's quantum, if it sets one.
    pub quantum: Option<Ns>,
    /// Every task ever created.
    pub tasks: Vec<TaskInfo>,
    /// Currencies.
    pub currencies: Vec<CurrencyInfo>,
}

/// Why a task becomes runnable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// An ordinary wakeup (timer, event, request, child exit).
    User,
    /// Woken from a kernel sleep on a resource of this kernel priority (Petrou et al. 1999 §3.1).
    Kernel(u8),
}

/// Why a running task stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// Its slice ran out; it stays runnable.
    Expired,
    /// Preempted by a wakeup (abbreviated quanta, wakeup preemption) or an RT task; it
    /// stays runnable.
    Preempted,
    /// It went to sleep.
    Sleep,
    /// It blocked in the kernel.
    Block,
    /// It exited.
    Exit,
}

impl Stop {
    /// True if the task stays runnable.
    pub fn runnable(self) -> bool {
        matches!(self, Stop::Expired | Stop::Preempted)
    }
}

/// A scheduling decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pick {
    /// The task to run.
    pub task: TaskId,
    /// How long it may run before the engine stops it with `Stop::Expired`
    /// (`FOREVER` when the scheduler preempts from `tick`).
    pub slice: Ns,
}

/// A running task as `tick` sees it.
#[derive(Debug, Clone, Copy)]
pub struct Running {
    /// Task.
    pub task: TaskId,
    /// CPU time since it was picked.
    pub ran: Ns,
    /// Total CPU time including the current run.
    pub cpu: Ns,
}

/// A CPU scheduler. The engine calls `add` for each new task, `wake` for each wakeup,
/// `pick` when a CPU needs work, `stop` whenever a running task leaves the CPU (and it
/// stays queued if `why.runnable()`), `wake_preempts` to decide wakeup preemption and
/// `tick` every `tick_ns`.
pub trait Scheduler {
    /// Name as given on the command line.
    fn name(&self) -> String;
    /// A task appears, runnable. `parent` is set for forks.
    fn add(&mut self, k: &Kernel, t: TaskId, parent: Option<TaskId>);
    /// A sleeping task becomes runnable.
    fn wake(&mut self, k: &Kernel, t: TaskId, how: Wake);
    /// Chooses a runnable task for `cpu` and takes it off the run queue.
    fn pick(&mut self, k: &Kernel, cpu: usize) -> Option<Pick>;
    /// A running task leaves the CPU after `ran` since it was picked.
    fn stop(&mut self, k: &Kernel, t: TaskId, ran: Ns, why: Stop);
    /// Should `woken` preempt `running` (which has run `ran` since picked)?
    fn wake_preempts(&self, k: &Kernel, woken: TaskId, running: TaskId, ran: Ns) -> bool;
    /// Period of `tick`, if the scheduler needs one.
    fn tick_ns(&self) -> Option<Ns> {
        None
    }
    /// Periodic work; returns the CPUs (indexes into `running`) to reschedule.
    fn tick(&mut self, _k: &Kernel, _running: &[Option<Running>]) -> Vec<usize> {
        Vec::new()
    }
}

/// Options of a scheduler, from the command line ("hybrid", "hybrid:boost=off") or a
/// scenario file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SchedSpec {
    /// One of `NAMES`.
    pub name: String,
    /// key=value options.
    pub options: Vec<(String, String)>,
}

/// The scheduler names, with a line of help each.
pub const NAMES: &[(&str, &str)] = &[
    ("lottery", "Waldspurger & Weihl lottery: tickets, nested currencies, compensation tickets, O(log n) draw"),
    ("stride", "Waldspurger & Weihl stride scheduling, hierarchical over currencies"),
    ("hybrid", "Petrou et al. 1999 hybrid lottery: kernel priorities, abbreviated quanta, windowed ticket boost, nice emulation (options: boost, abbrev, kernel, nice, sleepers = on|off)"),
    ("bsd", "4.4BSD decay-usage scheduler, the FreeBSD 2.2 baseline of Petrou et al. 1999"),
    ("linux22", "Linux 2.2 goodness = counter + priority (Ross and Abel 2000 §3.3)"),
    ("cfs", "Linux CFS: vruntime, sched_latency, wakeup granularity"),
    ("eevdf", "Linux EEVDF (6.6+): eligibility, virtual deadlines, lag, custom slices"),
    ("ebs", "EBS 2004 entitlement-based scheduler: shares, Kalman usage rate, caps with sinbin, promotion"),
];

impl SchedSpec {
    /// Parses "name" or "name:key=value,key=value".
    pub fn parse(s: &str) -> Result<SchedSpec, String> {
        let (name, opts) = match s.split_once(':') {
            Some((n, o)) => (n, o),
            None => (s, ""),
        };
        if !NAMES.iter().any(|(n, _)| *n == name) {
            let valid: Vec<&str> = NAMES.iter().map(|(n, _)| *n).collect();
            return Err(format!("unknown scheduler {name:?}; valid schedulers: {}", valid.join(", ")));
        }
        let mut options = Vec::new();
        for kv in opts.split(',').filter(|x| !x.is_empty()) {
            let (k, v) = kv.split_once('=').ok_or_else(|| format!("scheduler option {kv:?} must be key=value (e.g. hybrid:boost=off)"))?;
            options.push((k.to_string(), v.to_string()));
        }
        let spec = SchedSpec { name: name.to_string(), options };
        spec.check_options()?;
        Ok(spec)
    }

    /// Plain spec without options.
    pub fn named(name: &str) -> SchedSpec {
        SchedSpec { name: name.to_string(), options: Vec::new() }
    }

    /// With an option.
    pub fn with(mut self, k: &str, v: &str) -> SchedSpec {
        self.options.push((k.to_string(), v.to_string()));
        self
    }

    fn allowed(&self) -> &'static [&'static str] {
        match self.name.as_str() {
            "hybrid" => &["boost", "abbrev", "kernel", "nice", "sleepers"],
            "lottery" | "stride" => &[],
            "bsd" | "linux22" | "ebs" => &[],
            "cfs" | "eevdf" => &[],
            _ => &[],
        }
    }

    fn check_options(&self) -> Result<(), String> {
        for (k, v) in &self.options {
            if !self.allowed().contains(&k.as_str()) {
                return Err(format!(
                    "scheduler {} has no option {k:?}; options: {}",
                    self.name,
                    if self.allowed().is_empty() { "none".to_string() } else { self.allowed().join(", ") }
                ));
            }
            if v != "on" && v != "off" {
                return Err(format!("option {k} of {} must be on or off, got {v:?}", self.name));
            }
        }
        Ok(())
    }

    /// Boolean option, default `d`.
    pub fn flag(&self, k: &str, d: bool) -> bool {
        self.options.iter().rev().find(|(kk, _)| kk == k).map(|(_, v)| v == "on").unwrap_or(d)
    }

    /// Display form.
    pub fn label(&self) -> String {
        if self.options.is_empty() {
            self.name.clone()
        } else {
            let o: Vec<String> = self.options.iter().map(|(k, v)| format!("{k}={v}")).collect();
            format!("{}:{}", self.name, o.join(","))
        }
    }

    /// Builds the scheduler. `seed` feeds the randomised ones.
    pub fn build(&self, k: &Kernel, seed: u64) -> Box<dyn Scheduler> {
        match self.name.as_str() {
            "lottery" => Box::new(lottery::Lottery::new(k, seed)),
            "stride" => Box::new(stride::Stride::new(k)),
            "hybrid" => Box::new(hybrid::Hybrid::new(
                k,
                seed,
                hybrid::Options {
                    boost: self.flag("boost", true),
                    abbreviated_quanta: self.flag("abbrev", true),
                    kernel_priorities: self.flag("kernel", true),
                    nice_emulation: self.flag("nice", true),
                    count_sleepers: self.flag("sleepers", false),
                },
            )),
            "bsd" => Box::new(bsd::Bsd::new(k)),
            "linux22" => Box::new(linux22::Linux22::new(k)),
            "cfs" => Box::new(cfs::Cfs::new(k)),
            "eevdf" => Box::new(eevdf::Eevdf::new(k)),
            "ebs" => Box::new(ebs::Ebs::new(k)),
            other => unreachable!("checked in parse: {other}"),
        }
    }
}

/// Load weight of a nice value: the kernel's sched_prio_to_weight, from allot-model
/// (one table for allot and the simulated CFS and EEVDF).
pub fn nice_weight(nice: i32) -> u64 {
    u64::from(allot_model::nice::kernel_weight(nice))
}
