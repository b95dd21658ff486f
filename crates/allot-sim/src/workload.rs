//! What runs in a simulation: CPUs, currencies, kernel resources and tasks with
//! behaviours. Built-in scenarios construct these in code; scenario files are parsed
//! into them by `scenario_file`.

use crate::time::Ns;
use serde::Serialize;

/// A funding domain (allot's word: currency). `parent` None = funded in base tickets.
#[derive(Debug, Clone, Serialize)]
pub struct CurrencySpec {
    /// Name (a user, or a named currency such as "ci").
    pub name: String,
    /// The currency funding this one; None for the base currency (Petrou et al. 1999 §2.2 has
    /// only base + per-user; Waldspurger & Weihl nest indefinitely).
    pub parent: Option<String>,
    /// Tickets of the parent (base tickets when `parent` is None) funding it.
    pub funding: u32,
}

/// A kernel resource a task can block on; waking from it confers a kernel priority
/// (Petrou et al. 1999 §3.1). Lower number = more important, as in 4.4BSD (PRIBIO = 16).
#[derive(Debug, Clone, Serialize)]
pub struct ResourceSpec {
    /// wmesg-like name ("biowait", "getblk").
    pub name: String,
    /// Kernel priority, 0..49 (below PUSER = 50).
    pub priority: u8,
}

/// Scheduling class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    /// Scheduled by the scheduler under test.
    Normal,
    /// SCHED_FIFO at this priority (1..99): runs ahead of every normal task, whatever
    /// the scheduler (the starved-task tutorial step 5). Handled by the engine, as Linux's RT class is
    /// above the fair class.
    Fifo(u8),
}

/// A CPU usage-rate cap (EBS 2004): CPUs, soft or hard; allot-model's, so the
/// simulator and allot read `1/2`, `0.5!` and `50%` alike. A simulated task's cap is at
/// most 1 CPU (EBS caps one task; see [`crate::scenario_file::parse_cap`]).
pub use allot_model::Cap;

/// What a task does.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Behaviour {
    /// Computes for `work` of CPU time (forever if None), then exits.
    Cpu {
        /// Total CPU work.
        work: Option<Ns>,
    },
    /// Computes `work`, then sleeps `sleep` (or, if `absolute`, until the next multiple
    /// of `sleep` since start: a deadline sleeper), repeatedly.
    Periodic {
        /// CPU per cycle.
        work: Ns,
        /// Sleep per cycle, or period when `absolute`.
        sleep: Ns,
        /// Sleep until the next period boundary instead of a fixed time.
        absolute: bool,
        /// Each work and sleep is drawn uniformly within ±jitter of its value (a
        /// fraction, 0 = exact); Petrou et al.'s interactive phase computes
        /// "approximately 5ms" and sleeps "about 100ms".
        jitter: f64,
    },
    /// CPU-bound, but probed every `period` for lateness like the starved-task tutorial's jitter.py:
    /// at each deadline, how long until the task is on a CPU.
    Spinner {
        /// Probe period.
        period: Ns,
    },
    /// Waits for events arriving after exponentially distributed think times (mean
    /// `think`), handling each with `work` of CPU.
    Interactive {
        /// CPU per event.
        work: Ns,
        /// Mean think time.
        think: Ns,
    },
    /// Phases by wall-clock time, each its own behaviour (the bimodal job of Petrou et al. 1999
    /// §5.2: CPU 15 s, interactive 20 s, CPU 15 s).
    Phased {
        /// (wall-clock length, behaviour) in order; the last lasts forever.
        phases: Vec<(Ns, Behaviour)>,
    },
    /// A shell/make/LaTeX-like job (Ross and Abel 2000 §5.2.3): computes `parent_work`, forks a
    /// child that computes `child_work` and exits, waits for it, repeats.
    ForkHeavy {
        /// Parent CPU between forks.
        parent_work: Ns,
        /// CPU of each short child.
        child_work: Ns,
        /// How many children (None = forever).
        children: Option<u64>,
    },
    /// A server doing work on behalf of clients (the X server of Ross and Abel 2000 §5.3): it
    /// sleeps until a request arrives, then runs each request's work.
    Server,
    /// A client: computes `work`, sends a request of `request` CPU to `server`, then
    /// (if `period` > 0) sleeps until its next period (a frame-paced game).
    Client {
        /// CPU per iteration (frame).
        work: Ns,
        /// Period (frame interval); 0 = run back to back.
        period: Ns,
        /// Task name of the server.
        server: String,
        /// Server CPU per request.
        request: Ns,
        /// Wait for the next period by busy-waiting (an emulator pacing its frames
        /// by polling the clock) instead of sleeping.
        spin: bool,
    },
    /// Computes `work`, then blocks in the kernel on `resource` for `block`,
    /// repeatedly (Petrou et al. 1999 §3.1 kernel priorities).
    Kernel {
        /// CPU between blocks.
        work: Ns,
        /// Resource name.
        resource: String,
        /// Time blocked.
        block: Ns,
    },
}

/// One task (process) of the workload.
#[derive(Debug, Clone, Serialize)]
pub struct TaskSpec {
    /// Unique name.
    pub name: String,
    /// Currency (user) holding its tickets.
    pub currency: String,
    /// Job it belongs to (forked children inherit it); defaults to the name.
    pub job: String,
    /// Tickets in its currency (lottery family).
    pub tickets: u32,
    /// nice -20..19 (Linux-like schedulers, 4.4BSD, EBS, hybrid nice emulation).
    pub nice: i32,
    /// Scheduling class.
    pub policy: Policy,
    /// Usage-rate cap (EBS).
    pub cap: Option<Cap>,
    /// Requested slice (EEVDF custom slices, sched_setattr runtime).
    pub slice: Option<Ns>,
    /// When it starts.
    pub start: Ns,
    /// What it does.
    pub behaviour: Behaviour,
}

impl TaskSpec {
    /// A task with defaults (100 tickets, nice 0, currency = job = name's user "user").
    pub fn new(name: &str, currency: &str, behaviour: Behaviour) -> TaskSpec {
        TaskSpec {
            name: name.to_string(),
            currency: currency.to_string(),
            job: name.to_string(),
            tickets: 100,
            nice: 0,
            policy: Policy::Normal,
            cap: None,
            slice: None,
            start: 0,
            behaviour,
        }
    }
    /// Builder: tickets.
    pub fn tickets(mut self, t: u32) -> Self {
        self.tickets = t;
        self
    }
    /// Builder: nice.
    pub fn nice(mut self, n: i32) -> Self {
        self.nice = n;
        self
    }
    /// Builder: policy.
    pub fn policy(mut self, p: Policy) -> Self {
        self.policy = p;
        self
    }
    /// Builder: cap.
    pub fn cap(mut self, cpus: f64, hard: bool) -> Self {
        self.cap = Some(Cap { cpus, hard });
        self
    }
    /// Builder: job.
    pub fn job(mut self, j: &str) -> Self {
        self.job = j.to_string();
        self
    }
}

/// Everything a run needs besides the scheduler.
#[derive(Debug, Clone, Serialize)]
pub struct Workload {
    /// Number of CPUs.
    pub cpus: usize,
    /// Simulated time.
    pub duration: Ns,
    /// Scheduling quantum for schedulers that take one from the workload (lottery,
    /// stride, hybrid); None = the scheduler's own default.
    pub quantum: Option<Ns>,
    /// Progress sampling interval.
    pub sample: Ns,
    /// Currencies; tasks naming an unknown currency get one with funding 100.
    pub currencies: Vec<CurrencySpec>,
    /// Kernel resources.
    pub resources: Vec<ResourceSpec>,
    /// Tasks.
    pub tasks: Vec<TaskSpec>,
}

impl Workload {
    /// An empty workload.
    pub fn new(cpus: usize, duration: Ns) -> Workload {
        Workload { cpus, duration, quantum: None, sample: 100 * crate::time::MS, currencies: Vec::new(), resources: Vec::new(), tasks: Vec::new() }
    }
    /// Adds a currency.
    pub fn currency(mut self, name: &str, funding: u32) -> Self {
        self.currencies.push(CurrencySpec { name: name.into(), parent: None, funding });
        self
    }
    /// Adds a currency funded by `parent`'s tickets.
    pub fn sub_currency(mut self, name: &str, parent: &str, funding: u32) -> Self {
        self.currencies.push(CurrencySpec { name: name.into(), parent: Some(parent.into()), funding });
        self
    }
    /// Adds a task.
    pub fn task(mut self, t: TaskSpec) -> Self {
        self.tasks.push(t);
        self
    }
    /// Sets the quantum.
    pub fn quantum(mut self, q: Ns) -> Self {
        self.quantum = Some(q);
        self
    }
}
