//! The discrete-event engine: a nanosecond clock, an event queue ordered by (time,
//! insertion), N CPUs, tasks running their behaviours, and a scheduler deciding. It
//! is deterministic: the same workload, scheduler and seed give the same events in
//! the same order, hence the same bytes out.
//!
//! Model limits (said once here, explained in docs/sim.md): one global run queue for
//! all CPUs; no cache, TLB or migration cost; a context switch and a scheduling
//! decision take no simulated time; SCHED_FIFO tasks are run by the engine above
//! the scheduler under test, like Linux's RT class.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};

use serde::Serialize;

use crate::rng::Rng;
use crate::sched::{CurrencyInfo, Kernel, Pick, Running, SchedSpec, Scheduler, Stop, TaskInfo, TaskState, Wake};
use crate::time::{Ns, FOREVER, MS};
use crate::workload::{Behaviour, Policy, Workload};

/// One dispatch-latency observation: the task became runnable at `at` and was
/// dispatched `lat` later (seed 001 §5.2: setrunqueue() → chosen).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Latency {
    /// When it became runnable.
    pub at: Ns,
    /// Runnable → running.
    pub lat: Ns,
    /// True if it became runnable by waking (false: requeued after preemption/expiry).
    pub wake: bool,
}

/// Per-task outcome.
#[derive(Debug, Clone, Default)]
pub struct TaskResult {
    /// Name (forked children are "parent/N").
    pub name: String,
    /// Currency name.
    pub currency: String,
    /// Job name.
    pub job: String,
    /// Declared in the workload (not forked).
    pub top_level: bool,
    /// CPU time.
    pub cpu: Ns,
    /// Time runnable but not running.
    pub ready: Ns,
    /// Dispatch latencies.
    pub latencies: Vec<Latency>,
    /// Times it left the CPU by its own choice.
    pub voluntary: u64,
    /// Times it was taken off the CPU.
    pub involuntary: u64,
    /// Times it was dispatched.
    pub dispatches: u64,
    /// Completed iterations (frames, events, cycles, children).
    pub iterations: u64,
    /// Created at.
    pub created: Ns,
    /// Exited at.
    pub exited: Option<Ns>,
    /// Spinner probe: lateness of each deadline that found it off the CPU.
    pub lateness: Vec<Ns>,
    /// Spinner probe: number of deadlines observed.
    pub probes: u64,
}

/// Everything a run produced.
#[derive(Debug, Clone)]
pub struct RunResult {
    /// Scheduler label.
    pub scheduler: String,
    /// Seed.
    pub seed: u64,
    /// CPUs.
    pub cpus: usize,
    /// Simulated duration.
    pub duration: Ns,
    /// All tasks, workload tasks first in declaration order, then forked children.
    pub tasks: Vec<TaskResult>,
    /// Sample times.
    pub sample_times: Vec<Ns>,
    /// CPU time of each workload (top-level) task at each sample time.
    pub progress: Vec<Vec<Ns>>,
    /// CPU time of each job at each sample time.
    pub job_progress: BTreeMap<String, Vec<Ns>>,
    /// CPU time of each currency at each sample time.
    pub currency_progress: BTreeMap<String, Vec<Ns>>,
    /// Scheduling decisions taken by the scheduler (picks).
    pub decisions: u64,
    /// Dispatches that changed the task on a CPU.
    pub context_switches: u64,
    /// Idle CPU time summed over CPUs.
    pub idle: Ns,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    Arrive(usize),
    CpuStop(usize, u64),
    Wake(usize, u64),
    Tick,
    Sample,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Run(Ns),
    Sleep(Ns),
    SleepUntil(Ns),
    Block(u8, Ns),
    Fork(Ns),
    WaitChildren,
    Send(Ns),
    WaitRequest,
    Exit,
}

#[derive(Debug, Clone, Default)]
struct BState {
    step: u8,
    next_deadline: Ns,
    started: bool,
    children: u64,
    phase: usize,
    sub: Option<Box<BState>>,
}

/// Steps a behaviour. `chunked` turns an endless CPU burst into 1 ms pieces so that a
/// phased task notices its phase change.
#[allow(clippy::too_many_arguments)]
fn next_action(b: &Behaviour, st: &mut BState, start: Ns, now: Ns, rng: &mut Rng, chunked: bool, res: &[(String, u8)], iters: &mut u64) -> Action {
    match b {
        Behaviour::Cpu { work } => {
            if chunked && work.is_none() {
                return Action::Run(MS);
            }
            if st.step == 0 {
                st.step = 1;
                Action::Run(work.unwrap_or(FOREVER))
            } else {
                Action::Exit
            }
        }
        Behaviour::Spinner { .. } => Action::Run(FOREVER),
        Behaviour::Periodic { work, sleep, absolute, jitter } => {
            if !st.started {
                st.started = true;
                st.next_deadline = start;
            }
            let mut jit = |v: Ns| {
                if *jitter > 0.0 {
                    ((v as f64) * (1.0 + jitter * (2.0 * rng.f64() - 1.0))).round().max(1.0) as Ns
                } else {
                    v
                }
            };
            if st.step == 0 {
                st.step = 1;
                Action::Run(jit(*work))
            } else {
                st.step = 0;
                *iters += 1;
                if *absolute {
                    st.next_deadline += *sleep;
                    Action::SleepUntil(st.next_deadline)
                } else {
                    Action::Sleep(jit(*sleep))
                }
            }
        }
        Behaviour::Interactive { work, think } => {
            if st.step == 0 {
                st.step = 1;
                Action::Sleep(rng.exp(*think as f64).round() as Ns)
            } else {
                st.step = 0;
                *iters += 1;
                Action::Run(*work)
            }
        }
        Behaviour::Phased { phases } => {
            // The phase containing `now`; the last one lasts forever.
            let mut idx = phases.len() - 1;
            let mut pstart = start + phases[..idx].iter().map(|p| p.0).sum::<Ns>();
            let mut acc = start;
            for (i, (len, _)) in phases.iter().enumerate() {
                if now < acc + len {
                    idx = i;
                    pstart = acc;
                    break;
                }
                acc += len;
            }
            if st.sub.is_none() || st.phase != idx {
                st.phase = idx;
                st.sub = Some(Box::default());
            }
            let sub = st.sub.as_mut().unwrap();
            next_action(&phases[idx].1, sub, pstart, now, rng, true, res, iters)
        }
        Behaviour::ForkHeavy { parent_work, child_work, children } => match st.step {
            0 => {
                st.step = 1;
                Action::Run(*parent_work)
            }
            1 => {
                if children.map(|n| st.children >= n).unwrap_or(false) {
                    return Action::Exit;
                }
                st.children += 1;
                st.step = 2;
                Action::Fork(*child_work)
            }
            _ => {
                st.step = 0;
                *iters += 1;
                Action::WaitChildren
            }
        },
        Behaviour::Server => Action::WaitRequest,
        Behaviour::Client { work, period, request, spin, .. } => {
            if !st.started {
                st.started = true;
                st.next_deadline = start;
            }
            match st.step {
                0 => {
                    st.step = 1;
                    Action::Run(*work)
                }
                1 => {
                    st.step = 2;
                    *iters += 1;
                    Action::Send(*request)
                }
                2 if *spin && *period > 0 => {
                    // Busy-wait to the next frame: one more burst, then start it.
                    st.next_deadline += *period;
                    st.step = 0;
                    Action::Run(st.next_deadline.saturating_sub(now))
                }
                _ => {
                    if *period > 0 {
                        st.next_deadline += *period;
                        st.step = 0;
                        Action::SleepUntil(st.next_deadline)
                    } else {
                        st.step = 1;
                        Action::Run(*work)
                    }
                }
            }
        }
        Behaviour::Kernel { work, resource, block } => {
            if st.step == 0 {
                st.step = 1;
                Action::Run(*work)
            } else {
                st.step = 0;
                *iters += 1;
                let prio = res.iter().find(|(n, _)| n == resource).map(|(_, p)| *p).unwrap_or(20);
                Action::Block(prio, *block)
            }
        }
    }
}

enum Next {
    Run,
    Sleep(Option<Ns>, Wake, TaskState),
    Exit,
}

struct TaskRt {
    behaviour: Behaviour,
    st: BState,
    start: Ns,
    policy: Policy,
    burst: Ns,
    pending: VecDeque<Ns>,
    runnable_since: Ns,
    woke: bool,
    pick_at: Ns,
    seg_start: Ns,
    wake_gen: u64,
    live_children: u32,
    known: bool,
    rng: Rng,
    server: Option<usize>,
    job: usize,
    off_since: Option<Ns>,
    st_block: u8,
    res: TaskResult,
}

#[derive(Clone, Copy, Default)]
struct Cpu {
    cur: Option<usize>,
    last: Option<usize>,
    gen: u64,
    slice_end: Ns,
    idle_since: Ns,
}

/// One simulation: workload + scheduler + seed.
pub struct Sim {
    k: Kernel,
    sched: Box<dyn Scheduler>,
    sched_label: String,
    seed: u64,
    duration: Ns,
    sample_ns: Ns,
    resources: Vec<(String, u8)>,
    tasks: Vec<TaskRt>,
    cpus: Vec<Cpu>,
    events: BinaryHeap<Reverse<(Ns, u64, Ev)>>,
    seq: u64,
    rt_queue: Vec<(u8, u64, usize)>,
    jobs: Vec<String>,
    job_cpu: Vec<Ns>,
    cur_cpu: Vec<Ns>,
    top_level: usize,
    sample_times: Vec<Ns>,
    progress: Vec<Vec<Ns>>,
    job_progress: Vec<Vec<Ns>>,
    cur_progress: Vec<Vec<Ns>>,
    decisions: u64,
    context_switches: u64,
    idle: Ns,
    to_wake: Vec<usize>,
}

impl Sim {
    /// Prepares a run. The workload must have been validated (names resolve).
    pub fn new(w: &Workload, spec: &SchedSpec, seed: u64) -> Sim {
        let mut currencies: Vec<CurrencyInfo> = Vec::new();
        for c in &w.currencies {
            currencies.push(CurrencyInfo { name: c.name.clone(), parent: None, funding: c.funding });
        }
        for t in &w.tasks {
            if !currencies.iter().any(|c| c.name == t.currency) {
                currencies.push(CurrencyInfo { name: t.currency.clone(), parent: None, funding: 100 });
            }
        }
        for (i, c) in w.currencies.iter().enumerate() {
            currencies[i].parent = c.parent.as_ref().and_then(|p| currencies.iter().position(|x| &x.name == p));
        }
        let k = Kernel { now: 0, ncpus: w.cpus, quantum: w.quantum, tasks: Vec::new(), currencies };
        let sched = spec.build(&k, seed);
        let mut sim = Sim {
            k,
            sched,
            sched_label: spec.label(),
            seed,
            duration: w.duration,
            sample_ns: w.sample.max(1),
            resources: w.resources.iter().map(|r| (r.name.clone(), r.priority)).collect(),
            tasks: Vec::new(),
            cpus: vec![Cpu::default(); w.cpus],
            events: BinaryHeap::new(),
            seq: 0,
            rt_queue: Vec::new(),
            jobs: Vec::new(),
            job_cpu: Vec::new(),
            cur_cpu: Vec::new(),
            top_level: w.tasks.len(),
            sample_times: Vec::new(),
            progress: vec![Vec::new(); w.tasks.len()],
            job_progress: Vec::new(),
            cur_progress: Vec::new(),
            decisions: 0,
            context_switches: 0,
            idle: 0,
            to_wake: Vec::new(),
        };
        sim.cur_cpu = vec![0; sim.k.currencies.len()];
        sim.cur_progress = vec![Vec::new(); sim.k.currencies.len()];
        for (i, t) in w.tasks.iter().enumerate() {
            let cur = sim.k.currencies.iter().position(|c| c.name == t.currency).unwrap();
            sim.new_task(
                t.name.clone(),
                cur,
                &t.job,
                t.tickets,
                t.nice,
                t.policy,
                t.cap,
                t.slice,
                None,
                t.behaviour.clone(),
                t.start,
                true,
                i as u64,
            );
            sim.push(t.start, Ev::Arrive(i));
        }
        // Resolve client → server names.
        for i in 0..w.tasks.len() {
            if let Behaviour::Client { server, .. } = &w.tasks[i].behaviour {
                sim.tasks[i].server = w.tasks.iter().position(|t| &t.name == server);
            }
        }
        sim
    }

    #[allow(clippy::too_many_arguments)]
    fn new_task(
        &mut self,
        name: String,
        currency: usize,
        job: &str,
        tickets: u32,
        nice: i32,
        policy: Policy,
        cap: Option<crate::workload::Cap>,
        slice: Option<Ns>,
        parent: Option<usize>,
        behaviour: Behaviour,
        start: Ns,
        top: bool,
        stream: u64,
    ) -> usize {
        let id = self.tasks.len();
        let job_idx = match self.jobs.iter().position(|j| j == job) {
            Some(j) => j,
            None => {
                self.jobs.push(job.to_string());
                self.job_cpu.push(0);
                self.job_progress.push(vec![0; self.sample_times.len()]);
                self.jobs.len() - 1
            }
        };
        self.k.tasks.push(TaskInfo { name: name.clone(), currency, tickets, nice, cap, slice, parent, state: TaskState::New, slept_at: 0, cpu: 0 });
        let res = TaskResult {
            name,
            currency: self.k.currencies[currency].name.clone(),
            job: job.to_string(),
            top_level: top,
            created: start,
            ..Default::default()
        };
        self.tasks.push(TaskRt {
            behaviour,
            st: BState::default(),
            start,
            policy,
            burst: 0,
            pending: VecDeque::new(),
            runnable_since: start,
            woke: true,
            pick_at: 0,
            seg_start: 0,
            wake_gen: 0,
            live_children: 0,
            known: false,
            rng: Rng::new(self.seed, 1000 + stream),
            server: None,
            job: job_idx,
            off_since: Some(start),
            st_block: 0,
            res,
        });
        id
    }

    fn push(&mut self, at: Ns, ev: Ev) {
        self.seq += 1;
        self.events.push(Reverse((at, self.seq, ev)));
    }

    /// Runs to the end and returns the results.
    pub fn run(mut self) -> RunResult {
        if let Some(tick) = self.sched.tick_ns() {
            self.push(tick, Ev::Tick);
        }
        self.push(0, Ev::Sample);
        while let Some(Reverse((at, _, ev))) = self.events.pop() {
            if at > self.duration {
                break;
            }
            self.k.now = at;
            match ev {
                Ev::Arrive(t) => self.arrive(t),
                Ev::CpuStop(c, gen) => {
                    if self.cpus[c].gen == gen {
                        self.cpu_stop(c);
                    }
                }
                Ev::Wake(t, gen) => {
                    if self.tasks[t].wake_gen == gen && matches!(self.k.tasks[t].state, TaskState::Sleeping | TaskState::Blocked) {
                        let how = if self.k.tasks[t].state == TaskState::Blocked { Wake::Kernel(self.tasks[t].st_block_prio()) } else { Wake::User };
                        self.wake(t, how);
                    }
                }
                Ev::Tick => {
                    self.tick();
                    let tick = self.sched.tick_ns().unwrap();
                    self.push(at + tick, Ev::Tick);
                }
                Ev::Sample => {
                    self.sample();
                    self.push(at + self.sample_ns, Ev::Sample);
                }
            }
            while !self.to_wake.is_empty() {
                let s = self.to_wake.remove(0);
                if self.k.tasks[s].state == TaskState::Sleeping {
                    self.wake(s, Wake::User);
                }
            }
            self.dispatch_idle();
        }
        self.finish()
    }

    fn account(&mut self, t: usize) {
        let now = self.k.now;
        let tr = &mut self.tasks[t];
        let d = now - tr.seg_start;
        tr.seg_start = now;
        tr.res.cpu += d;
        tr.burst = tr.burst.saturating_sub(d);
        self.k.tasks[t].cpu += d;
        self.job_cpu[tr.job] += d;
        self.cur_cpu[self.k.tasks[t].currency] += d;
    }

    fn advance(&mut self, t: usize) -> Next {
        let now = self.k.now;
        for _ in 0..10_000 {
            let tr = &mut self.tasks[t];
            let a = next_action(&tr.behaviour, &mut tr.st, tr.start, now, &mut tr.rng, false, &self.resources, &mut tr.res.iterations);
            match a {
                Action::Run(0) => {}
                Action::Run(w) => {
                    tr.burst = w;
                    return Next::Run;
                }
                Action::Sleep(0) => {}
                Action::Sleep(d) => return Next::Sleep(Some(now + d), Wake::User, TaskState::Sleeping),
                Action::SleepUntil(at) => {
                    if at > now {
                        return Next::Sleep(Some(at), Wake::User, TaskState::Sleeping);
                    }
                }
                Action::Block(p, d) => {
                    tr.st_set_block_prio(p);
                    return Next::Sleep(Some(now + d), Wake::Kernel(p), TaskState::Blocked);
                }
                Action::Fork(work) => {
                    self.fork(t, work);
                }
                Action::WaitChildren => {
                    if tr.live_children > 0 {
                        return Next::Sleep(None, Wake::User, TaskState::Sleeping);
                    }
                }
                Action::Send(work) => {
                    if let Some(s) = tr.server {
                        self.tasks[s].pending.push_back(work);
                        if self.k.tasks[s].state == TaskState::Sleeping
                            && matches!(self.tasks[s].behaviour, Behaviour::Server)
                            && !self.to_wake.contains(&s)
                        {
                            // Deferred: the sender is mid-step on a CPU.
                            self.to_wake.push(s);
                        }
                    }
                }
                Action::WaitRequest => {
                    if let Some(w) = tr.pending.pop_front() {
                        tr.burst = w.max(1);
                        tr.res.iterations += 1;
                        return Next::Run;
                    }
                    return Next::Sleep(None, Wake::User, TaskState::Sleeping);
                }
                Action::Exit => return Next::Exit,
            }
        }
        panic!("task {} does no work: its behaviour loops without running", self.k.tasks[t].name);
    }

    fn fork(&mut self, parent: usize, work: Ns) {
        let p = &self.k.tasks[parent];
        let n = self.tasks[parent].st.children;
        let name = format!("{}/{}", p.name, n);
        let (cur, tickets, nice, cap, slice) = (p.currency, p.tickets, p.nice, p.cap, p.slice);
        let job = self.jobs[self.tasks[parent].job].clone();
        let policy = self.tasks[parent].policy;
        let stream = (parent as u64) << 32 | n;
        let child = self.new_task(
            name,
            cur,
            &job,
            tickets,
            nice,
            policy,
            cap,
            slice,
            Some(parent),
            Behaviour::Cpu { work: Some(work) },
            self.k.now,
            false,
            stream,
        );
        self.tasks[parent].live_children += 1;
        self.start_task(child, Some(parent));
    }

    fn arrive(&mut self, t: usize) {
        self.start_task(t, None);
    }

    fn start_task(&mut self, t: usize, parent: Option<usize>) {
        match self.advance(t) {
            Next::Run => {
                self.k.tasks[t].state = TaskState::Runnable;
                self.tasks[t].runnable_since = self.k.now;
                self.tasks[t].woke = true;
                self.tasks[t].known = true;
                if let Policy::Fifo(p) = self.tasks[t].policy {
                    self.rt_enqueue(t, p);
                } else {
                    self.sched.add(&self.k, t, parent);
                }
            }
            Next::Sleep(at, _, state) => self.sleep(t, at, state),
            Next::Exit => self.exit(t),
        }
    }

    fn sleep(&mut self, t: usize, at: Option<Ns>, state: TaskState) {
        self.k.tasks[t].state = state;
        self.k.tasks[t].slept_at = self.k.now;
        self.tasks[t].wake_gen += 1;
        if let Some(at) = at {
            let g = self.tasks[t].wake_gen;
            self.push(at, Ev::Wake(t, g));
        }
    }

    fn exit(&mut self, t: usize) {
        self.k.tasks[t].state = TaskState::Exited;
        self.tasks[t].res.exited = Some(self.k.now);
        if let Some(p) = self.k.tasks[t].parent {
            self.tasks[p].live_children -= 1;
            if self.tasks[p].live_children == 0
                && self.k.tasks[p].state == TaskState::Sleeping
                && matches!(self.tasks[p].behaviour, Behaviour::ForkHeavy { .. })
            {
                self.wake(p, Wake::User);
            }
        }
    }

    fn rt_enqueue(&mut self, t: usize, prio: u8) {
        self.seq += 1;
        self.rt_queue.push((prio, self.seq, t));
    }

    fn wake(&mut self, t: usize, how: Wake) {
        self.tasks[t].wake_gen += 1;
        match self.advance(t) {
            Next::Run => {}
            Next::Sleep(at, _, state) => return self.sleep(t, at, state),
            Next::Exit => return self.exit(t),
        }
        self.k.tasks[t].state = TaskState::Runnable;
        self.tasks[t].runnable_since = self.k.now;
        self.tasks[t].woke = true;
        let rt = if let Policy::Fifo(p) = self.tasks[t].policy {
            self.rt_enqueue(t, p);
            Some(p)
        } else {
            if self.tasks[t].known {
                self.sched.wake(&self.k, t, how);
            } else {
                self.tasks[t].known = true;
                self.sched.add(&self.k, t, None);
            }
            None
        };
        // Wakeup preemption: only when no CPU is idle.
        if self.cpus.iter().any(|c| c.cur.is_none()) {
            return;
        }
        for c in 0..self.cpus.len() {
            let r = self.cpus[c].cur.unwrap();
            let r_rt = match self.tasks[r].policy {
                Policy::Fifo(p) => Some(p),
                Policy::Normal => None,
            };
            let preempt = match (rt, r_rt) {
                (Some(p), Some(q)) => p > q,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => {
                    let ran = self.k.now - self.tasks[r].pick_at;
                    self.sched.wake_preempts(&self.k, t, r, ran)
                }
            };
            if preempt {
                self.stop_running(c, Stop::Preempted);
                return;
            }
        }
    }

    fn stop_running(&mut self, c: usize, why: Stop) {
        let t = self.cpus[c].cur.take().expect("cpu running");
        self.account(t);
        self.cpus[c].gen += 1;
        self.cpus[c].idle_since = self.k.now;
        let ran = self.k.now - self.tasks[t].pick_at;
        self.tasks[t].off_since = Some(self.k.now);
        if why.runnable() {
            self.tasks[t].res.involuntary += 1;
            self.k.tasks[t].state = TaskState::Runnable;
            self.tasks[t].runnable_since = self.k.now;
            self.tasks[t].woke = false;
        } else {
            self.tasks[t].res.voluntary += 1;
            self.k.tasks[t].state = match why {
                Stop::Block => TaskState::Blocked,
                Stop::Exit => TaskState::Exited,
                _ => TaskState::Sleeping,
            };
        }
        match self.tasks[t].policy {
            Policy::Fifo(p) => {
                if why.runnable() {
                    // A preempted FIFO task goes back to the head of its priority.
                    self.rt_queue.push((p, 0, t));
                }
            }
            Policy::Normal => self.sched.stop(&self.k, t, ran, why),
        }
    }

    fn cpu_stop(&mut self, c: usize) {
        let t = self.cpus[c].cur.expect("cpu running");
        self.account(t);
        if self.tasks[t].burst == 0 {
            match self.advance(t) {
                Next::Run => {
                    if self.k.now < self.cpus[c].slice_end {
                        let end = (self.k.now + self.tasks[t].burst).min(self.cpus[c].slice_end);
                        self.cpus[c].gen += 1;
                        let g = self.cpus[c].gen;
                        self.push(end, Ev::CpuStop(c, g));
                    } else {
                        self.stop_running(c, Stop::Expired);
                    }
                }
                Next::Sleep(at, w, state) => {
                    let why = if matches!(w, Wake::Kernel(_)) { Stop::Block } else { Stop::Sleep };
                    self.k.tasks[t].state = state;
                    self.stop_running(c, why);
                    self.sleep(t, at, state);
                }
                Next::Exit => {
                    self.stop_running(c, Stop::Exit);
                    self.exit(t);
                }
            }
        } else {
            self.stop_running(c, Stop::Expired);
        }
    }

    fn dispatch_idle(&mut self) {
        for c in 0..self.cpus.len() {
            if self.cpus[c].cur.is_some() {
                continue;
            }
            let pick = if !self.rt_queue.is_empty() {
                // Highest RT priority, then FIFO order.
                let (i, _) = self.rt_queue.iter().enumerate().max_by(|a, b| a.1 .0.cmp(&b.1 .0).then(b.1 .1.cmp(&a.1 .1))).unwrap();
                let (_, _, t) = self.rt_queue.remove(i);
                Some(Pick { task: t, slice: FOREVER })
            } else {
                let p = self.sched.pick(&self.k, c);
                if p.is_some() {
                    self.decisions += 1;
                }
                p
            };
            if let Some(p) = pick {
                self.dispatch(c, p);
            }
        }
    }

    fn dispatch(&mut self, c: usize, p: Pick) {
        let now = self.k.now;
        let t = p.task;
        debug_assert_eq!(self.k.tasks[t].state, TaskState::Runnable, "{}", self.k.tasks[t].name);
        self.idle += now - self.cpus[c].idle_since;
        let tr = &mut self.tasks[t];
        let lat = now - tr.runnable_since;
        tr.res.latencies.push(Latency { at: tr.runnable_since, lat, wake: tr.woke });
        tr.res.ready += lat;
        tr.res.dispatches += 1;
        tr.pick_at = now;
        tr.seg_start = now;
        if let Behaviour::Spinner { period } = tr.behaviour {
            if let Some(off) = tr.off_since.take() {
                // Deadlines start + k*period in (off, now] found it off the CPU.
                let k0 = if off <= tr.start { 0 } else { (off - tr.start).div_ceil(period) };
                let mut d = tr.start + k0 * period;
                while d <= now {
                    if d < self.duration && now > d {
                        tr.res.lateness.push(now - d);
                    }
                    d += period;
                }
            }
        }
        self.k.tasks[t].state = TaskState::Running(c);
        let cpu = &mut self.cpus[c];
        cpu.cur = Some(t);
        if cpu.last != Some(t) {
            self.context_switches += 1;
        }
        cpu.last = Some(t);
        cpu.slice_end = now.saturating_add(p.slice.max(1));
        cpu.gen += 1;
        let g = cpu.gen;
        let end = (now + self.tasks[t].burst.max(1)).min(self.cpus[c].slice_end);
        self.push(end, Ev::CpuStop(c, g));
    }

    fn tick(&mut self) {
        let running: Vec<Option<Running>> = self
            .cpus
            .iter()
            .map(|c| {
                c.cur.filter(|&t| self.tasks[t].policy == Policy::Normal).map(|t| Running {
                    task: t,
                    ran: self.k.now - self.tasks[t].pick_at,
                    cpu: self.live_cpu(t),
                })
            })
            .collect();
        let resched = self.sched.tick(&self.k, &running);
        for c in resched {
            if running.get(c).copied().flatten().is_some() {
                self.stop_running(c, Stop::Expired);
            }
        }
    }

    fn live_cpu(&self, t: usize) -> Ns {
        let tr = &self.tasks[t];
        match self.k.tasks[t].state {
            TaskState::Running(_) => tr.res.cpu + (self.k.now - tr.seg_start),
            _ => tr.res.cpu,
        }
    }

    fn sample(&mut self) {
        self.sample_times.push(self.k.now);
        for t in 0..self.top_level {
            let v = self.live_cpu(t);
            self.progress[t].push(v);
        }
        let mut job = self.job_cpu.clone();
        let mut cur = self.cur_cpu.clone();
        for c in &self.cpus {
            if let Some(t) = c.cur {
                let d = self.k.now - self.tasks[t].seg_start;
                job[self.tasks[t].job] += d;
                cur[self.k.tasks[t].currency] += d;
            }
        }
        for (j, v) in job.into_iter().enumerate() {
            self.job_progress[j].push(v);
        }
        for (j, v) in cur.into_iter().enumerate() {
            self.cur_progress[j].push(v);
        }
    }

    fn finish(mut self) -> RunResult {
        self.k.now = self.duration;
        for c in 0..self.cpus.len() {
            match self.cpus[c].cur {
                Some(t) => self.account(t),
                None => self.idle += self.duration - self.cpus[c].idle_since,
            }
        }
        if self.sample_times.last() != Some(&self.duration) {
            self.sample();
        }
        for t in 0..self.tasks.len() {
            if let Behaviour::Spinner { period } = self.tasks[t].behaviour {
                let tr = &mut self.tasks[t];
                tr.res.probes = self.duration.saturating_sub(tr.start).div_ceil(period);
            }
            if self.k.tasks[t].state == TaskState::Runnable {
                let tr = &mut self.tasks[t];
                tr.res.ready += self.duration - tr.runnable_since;
            }
        }
        let jobs = self.jobs.clone();
        let job_progress = jobs.into_iter().zip(self.job_progress).collect();
        let currency_progress = self.k.currencies.iter().map(|c| c.name.clone()).zip(self.cur_progress).collect();
        RunResult {
            scheduler: self.sched_label,
            seed: self.seed,
            cpus: self.cpus.len(),
            duration: self.duration,
            tasks: self.tasks.into_iter().map(|t| t.res).collect(),
            sample_times: self.sample_times,
            progress: self.progress,
            job_progress,
            currency_progress,
            decisions: self.decisions,
            context_switches: self.context_switches,
            idle: self.idle,
        }
    }
}

impl TaskRt {
    fn st_block_prio(&self) -> u8 {
        self.st_block
    }
    fn st_set_block_prio(&mut self, p: u8) {
        self.st_block = p;
    }
}
