//! The *observed* state: what each job did since the last tick, rebuilt every tick from
//! the kernel (this is the one place that reads the cgroup counters and /proc for the
//! tick), plus the estimates derived from it over time (usage rate, window).
//!
//! Cost grows with the jobs that ran, not with the jobs that exist: allot's two roots are
//! read first, then each currency; a currency whose counter did not move had no job run,
//! so none of its jobs is read. A job that did not run cannot have forked, exited or
//! changed nice, so its thread list stands; the daemon marks a job dirty itself when it
//! moves a process in or out, and inotify reports moves by anyone else.
//!
//! A job that runs costs what its size costs only now and then: the kernel builds and
//! sorts a job's whole member list for every read of `tasks` or `cgroup.procs` (about
//! 1 µs per thread here, 12 ms for 10,000), so a job's lists are read again no sooner than
//! [`LIST_GAP_PER_THREAD`] per thread after the last read. Up to 100 threads that is
//! every tick; a job of 10,000 threads is re-listed every 10 s, and listing a busy job of
//! any size costs about 0.2% of one CPU. Between lists, its known threads are sampled
//! every tick as before.

use super::host::Host;
use super::registry::{currency_rel, Class, CurrencyId, JobId, JobSpec};
use allot_linux::cgroup::CpuController;
use allot_model::plan::Usage;
use allot_model::usage::BoostWindow;
use allot_model::UsageRate;
use std::collections::{HashMap, HashSet};
use std::time::Instant;

/// What is known of one job.
#[derive(Debug)]
pub struct Tracker {
    /// When the job was made or adopted.
    pub created: Instant,
    /// Its empty directory could not be removed (part of it removed by hand, a process
    /// left in the cpuacct half): not tried again before this.
    pub reap_after: Option<Instant>,
    last: Option<(u64, Instant)>,
    /// EBS usage rate (EBS 2004: EWMA with a half-life).
    pub rate: UsageRate,
    window: BoostWindow,
    /// Usage over the window and over the last tick; None until measured twice.
    pub usage: Option<Usage>,
    /// Thread ids in it.
    pub threads: Vec<i32>,
    /// Its processes, for re-placing them if its directory is removed.
    pub procs: Vec<i32>,
    /// Bumped whenever `threads` changes (the boost slice is re-applied only then).
    pub threads_gen: u64,
    samples: HashMap<i32, (u64, u64)>,
    nice_of: HashMap<i32, i32>,
    cursor: usize,
    reads: u64,
    /// Threads that ran or waited during the last observation in which it ran.
    pub runnable: u32,
    /// The lowest nice of its processes.
    pub nice: i32,
    /// CPUs its first thread may run on.
    pub cpus: Vec<usize>,
    /// Its threads waited for CPU during the last tick.
    pub waiting: bool,
    /// Idle CPU on its CPUs during the last tick.
    pub idle_cpus: f64,
    /// Re-read its threads at the next tick (a process was moved in or out).
    pub dirty: bool,
    /// It had no threads at its last read.
    pub empty: bool,
    /// When its member lists were last read.
    listed: Option<Instant>,
}

impl Tracker {
    /// A tracker for a job made or adopted now.
    pub fn new(half_life_ms: u64) -> Self {
        Self {
            created: Instant::now(),
            reap_after: None,
            last: None,
            rate: UsageRate::new(half_life_ms),
            window: BoostWindow::default(),
            usage: None,
            threads: vec![],
            procs: vec![],
            threads_gen: 0,
            samples: HashMap::new(),
            nice_of: HashMap::new(),
            cursor: 0,
            reads: 0,
            runnable: 0,
            nice: 0,
            cpus: vec![],
            waiting: false,
            idle_cpus: 0.0,
            dirty: true,
            empty: false,
            listed: None,
        }
    }

    fn account(&mut self, used_s: f64, dt: f64, window_s: f64) {
        self.rate.observe(used_s, dt);
        self.usage = Some(self.window.push(used_s, dt, window_s));
    }
}

/// Machine-wide observations: idle CPU and the load outside allot (the plan's `allot_model::plan::Machine` is made from it).
#[derive(Debug, Default)]
pub struct MachineLoad {
    last_cpu: Option<(allot_linux::process::machine::CpuTimes, u64, Instant)>,
    /// Idle CPU per CPU during the last tick.
    pub idle: Vec<f64>,
    /// CPUs used by processes outside allot's trees (smoothed over the window).
    pub outside: f64,
}

impl MachineLoad {
    /// Per CPU, the fraction of it that was busy during the last tick (empty: not yet
    /// measured).
    pub fn busy(&self) -> Vec<f64> {
        self.idle.iter().map(|i| (1.0 - i).clamp(0.0, 1.0)).collect()
    }
}

/// The observer: trackers per job, counters per currency and root.
#[derive(Debug, Default)]
pub struct Observer {
    /// Per job.
    pub jobs: HashMap<JobId, Tracker>,
    counters: HashMap<String, u64>,
    /// Machine-wide.
    pub machine: MachineLoad,
    /// CPU time login sessions used (sessions/, never decreasing), ns: load the plan
    /// counts as sessions, not as load outside allot.
    pub sessions_ns: u64,
    /// Something ran, moved or still shows in a usage window at the last observation:
    /// the plan may change, so plan and tick fast. False at rest.
    pub busy: bool,
}

/// One tick's inputs.
pub struct Ctx<'a> {
    /// The cgroup tree.
    pub cg: &'a dyn CpuController,
    /// Processes and threads.
    pub host: &'a dyn Host,
    /// The boost window, s.
    pub window_s: f64,
    /// Usage-rate half-life, ms.
    pub half_life_ms: u64,
    /// Now.
    pub now: Instant,
    /// CPUs on the machine.
    pub ncpu: usize,
}

impl Observer {
    /// Reads a job again at the next observation (something arrived or left).
    pub fn read_again(&mut self, id: &JobId) {
        if let Some(t) = self.jobs.get_mut(id) {
            t.dirty = true;
        }
    }
    /// Tracks a job just made or changed, with its threads and processes now, read again
    /// at the next observation.
    pub fn track(&mut self, id: JobId, half_life_ms: u64, threads: Vec<i32>, procs: Vec<i32>) {
        let t = self.jobs.entry(id).or_insert_with(|| Tracker::new(half_life_ms));
        t.threads = threads;
        t.procs = procs;
        t.dirty = true;
    }
    /// Stops tracking a job.
    pub fn untrack(&mut self, id: &JobId) {
        self.jobs.remove(id);
    }
    /// Whether a job is active ([`Usage::active`]) over the time since it was last observed,
    /// from one read of its usage counter (a job not observed yet, or whose counter cannot
    /// be read, counts as active).
    pub fn active_since_observed(&self, cg: &dyn CpuController, id: &JobId, rel: &str, now: Instant) -> bool {
        let Some((ns, at)) = self.jobs.get(id).and_then(|t| t.last) else { return true };
        let dt = now.saturating_duration_since(at).as_secs_f64().max(1e-3);
        cg.usage_ns(rel).map_or(true, |cur| Usage { window: 0.0, last: cur.saturating_sub(ns) as f64 / 1e9 / dt }.active())
    }
    /// Counter of a directory if it moved since the last read (None: unchanged or unreadable).
    fn moved(&mut self, cg: &dyn CpuController, rel: &str) -> Option<u64> {
        let ns = cg.usage_ns(rel).ok()?;
        let prev = self.counters.insert(rel.to_string(), ns);
        (prev != Some(ns)).then_some(ns)
    }

    /// Observes every job; returns the jobs whose directory is gone.
    pub fn observe<'j>(&mut self, c: &Ctx, jobs: impl Iterator<Item = &'j JobSpec> + Clone) -> Vec<JobId> {
        let mut gone = vec![];
        // Which currencies (per class) ran: only their jobs are read.
        let roots_moved = [self.moved(c.cg, "").is_some(), self.moved(c.cg, super::registry::BACKGROUND).is_some()];
        // The machine (idle per CPU, load outside allot) matters only while allot plans.
        if roots_moved[0] || roots_moved[1] || self.busy {
            self.observe_machine(c);
        }
        let mut busy = false;
        // Per currency and class: does any of its jobs need reading anyway (new, or a
        // process was moved in or out)?
        let mut groups: HashMap<(bool, CurrencyId), bool> = HashMap::new();
        for j in jobs.clone() {
            let dirty = self.jobs.get(&j.id).is_none_or(|t| t.dirty || t.last.is_none());
            *groups.entry((j.background, j.currency.clone())).or_insert(false) |= dirty;
        }
        let mut ran: HashSet<(bool, CurrencyId)> = HashSet::new();
        for ((bg, cur), dirty) in groups {
            let class = if bg { Class::Background } else { Class::Foreground };
            let moved = roots_moved[bg as usize] && self.moved(c.cg, &currency_rel(class, &cur)).is_some();
            if moved || dirty {
                ran.insert((bg, cur));
            }
        }
        for j in jobs {
            let t = self.jobs.entry(j.id).or_insert_with(|| Tracker::new(c.half_life_ms));
            let rel = j.rel();
            let read = ran.contains(&(j.background, j.currency.clone())) || t.last.is_none();
            let dt = t.last.map_or(0.0, |(_, at)| c.now.duration_since(at).as_secs_f64());
            if !read {
                // Did not run: zero usage for the interval, nothing read.
                if let Some((ns, _)) = t.last {
                    t.account(0.0, dt, c.window_s);
                    t.last = Some((ns, c.now));
                    t.waiting = false;
                }
                busy |= t.usage.is_some_and(|u| u.window > 0.0);
                continue;
            }
            busy = true;
            let Ok(ns) = c.cg.usage_ns(&rel) else {
                gone.push(j.id);
                continue;
            };
            let changed = t.last.is_none_or(|(prev, _)| prev != ns);
            if let Some((prev, _)) = t.last {
                t.account(ns.saturating_sub(prev) as f64 / 1e9, dt, c.window_s);
            }
            t.last = Some((ns, c.now));
            if changed || t.dirty {
                // Its lists when they are due; else later (still dirty), and its known
                // threads sampled now.
                if t.listed.is_none_or(|at| c.now.duration_since(at) >= list_gap(t.threads.len())) {
                    t.dirty = false;
                    t.listed = Some(c.now);
                    read_lists(c, &rel, t);
                } else {
                    t.dirty = true;
                }
                sample(c, t, dt);
            } else {
                t.waiting = false;
            }
            t.idle_cpus =
                if t.cpus.is_empty() { self.machine.idle.iter().sum() } else { t.cpus.iter().filter_map(|&k| self.machine.idle.get(k)).sum() };
        }
        self.busy = busy || !gone.is_empty();
        gone
    }

    fn observe_machine(&mut self, c: &Ctx) {
        let Some(now) = c.host.cpu_times() else { return };
        // The roots' counters were just read (moved()).
        let root = |r: &str| self.counters.get(r).copied().unwrap_or(0);
        let allot = root("") + root(super::registry::BACKGROUND) + self.sessions_ns;
        if let Some((prev, prev_allot, at)) = &self.machine.last_cpu {
            let dt = c.now.duration_since(*at).as_secs_f64().max(1e-3);
            let hz = allot_linux::process::procfs::clk_tck() as f64;
            self.machine.idle = now.idle.iter().enumerate().map(|(i, v)| v.saturating_sub(*prev.idle.get(i).unwrap_or(v)) as f64 / hz / dt).collect();
            let busy = now.busy.saturating_sub(prev.busy) as f64 / hz / dt;
            let mine = allot.saturating_sub(*prev_allot) as f64 / 1e9 / dt;
            self.machine.outside = allot_model::usage::smooth_outside(self.machine.outside, busy - mine, dt);
        }
        self.machine.last_cpu = Some((now, allot, c.now));
    }
}

/// Threads whose scheduling counters are read per job per observation (a rotating sample
/// beyond that: a job of ten thousand threads costs what one of 64 does).
const SAMPLE: usize = 64;
/// New processes whose nice is read per observation (the rest on the following ones).
const NEW_NICE: usize = 256;

/// The least time between two reads of a job's member lists, per thread it had (see the
/// module's comment): 1 ms, so listing (about 1 µs per thread per list, measured, and the
/// nice of new processes) takes about 0.2% of one CPU however large the job. At 250 µs,
/// hackbench's 400 processes in a job were listed every tick and the daemon used 1.5–1.7%
/// of one CPU beside it (`allot-lab bench overhead`).
pub const LIST_GAP_PER_THREAD: std::time::Duration = std::time::Duration::from_millis(1);

fn list_gap(threads: usize) -> std::time::Duration {
    LIST_GAP_PER_THREAD * u32::try_from(threads).unwrap_or(u32::MAX)
}

/// Re-reads a job's threads, processes, nice and affinity, with bounded work: two list
/// reads, the nice of new processes (and a few known ones, in rotation, for renice).
fn read_lists(c: &Ctx, rel: &str, t: &mut Tracker) {
    let threads = c.cg.threads(rel).unwrap_or_default();
    if threads != t.threads {
        t.threads_gen += 1;
        t.threads = threads;
    }
    t.empty = t.threads.is_empty();
    let procs = c.cg.procs(rel).unwrap_or_default();
    if t.nice_of.len() > procs.len() {
        let live: HashSet<i32> = procs.iter().copied().collect();
        t.nice_of.retain(|p, _| live.contains(p));
    }
    let mut budget = NEW_NICE;
    for &p in &procs {
        if budget == 0 {
            break;
        }
        if let std::collections::hash_map::Entry::Vacant(e) = t.nice_of.entry(p) {
            if let Some(n) = c.host.nice(p) {
                e.insert(n);
            }
            budget -= 1;
        }
    }
    // A known process may have been reniced: look at a few, every eighth read.
    if t.reads % 8 == 0 {
        for k in 0..procs.len().min(16) {
            let p = procs[(t.cursor + k) % procs.len()];
            if let Some(n) = c.host.nice(p) {
                t.nice_of.insert(p, n);
            }
        }
    }
    t.reads = t.reads.wrapping_add(1);
    t.procs = procs;
    t.nice = t.nice_of.values().copied().min().unwrap_or(0);
    if let Some(&first) = t.threads.first() {
        t.cpus = c.host.affinity(first);
    }
}

/// Samples the scheduling counters of at most `SAMPLE` of a job's known threads: does it
/// run, does it wait for CPU.
fn sample(c: &Ctx, t: &mut Tracker, dt: f64) {
    // How many threads to sample: what the plan needs is whether the job can use a CPU or
    // more (up to the machine's CPUs: plan.rs caps it there), so a job using little
    // samples few (its last usage, in CPUs, sets the count), and none samples more than
    // eight per CPU.
    let n = t.threads.len();
    let busy = t.usage.map_or(1.0, |u| u.last);
    let k = n.min((4.0 + 32.0 * busy).ceil() as usize).min(SAMPLE).min(8 * c.ncpu.max(1));
    // Fewer than all: rotate, so every thread is looked at in turn.
    let start = if n > k { t.cursor % n } else { 0 };
    t.cursor = t.cursor.wrapping_add(k.max(1));
    let (mut runnable, mut waited) = (0u32, 0u64);
    for i in 0..k {
        let tid = t.threads[(start + i) % n];
        let Some(s) = c.host.thread(tid) else { continue };
        match t.samples.insert(tid, (s.run_ns, s.wait_ns)) {
            Some((run, wait)) => {
                if s.run_ns > run || s.wait_ns > wait {
                    runnable += 1;
                }
                waited += s.wait_ns.saturating_sub(wait);
            }
            None => runnable += 1,
        }
    }
    if t.samples.len() > 2 * n + SAMPLE {
        let live: HashSet<i32> = t.threads.iter().copied().collect();
        t.samples.retain(|tid, _| live.contains(tid));
    }
    let scale = if k == 0 { 0.0 } else { n as f64 / k as f64 };
    t.runnable = (runnable as f64 * scale).ceil() as u32;
    // Waited more than a fraction of the interval: it wants CPU it is not getting.
    t.waiting = allot_model::policy::waiting(waited as f64 * scale, dt);
}

impl Tracker {
    /// Its processes whose nice is not 0, as last read.
    pub fn niced(&self) -> impl Iterator<Item = i32> + '_ {
        self.nice_of.iter().filter(|(_, &n)| n != 0).map(|(&p, _)| p)
    }
}
