//! The discrete-event engine: a nanosecond clock, an event queue ordered by (time,
//! insertion), N CPUs, tasks running their behaviours, and a scheduler deciding. It
//! is deterministic: the same workload, scheduler and seed give the same events in
//! the same order, hence the same bytes out.
//!
//! Model limits (said once here, explained in docs/sim.md): one global run queue for
//! all CPUs; no cache, TLB or migration cost; a context switch and a scheduling
//! decision take no simulated time; SCHED_FIFO tasks are run by the engine above
//! the scheduler under test, like Linux's RT class.
//!
//! Submodules: `behaviour` (what a task does next), `dispatch` (the CPU side: stop,
//! dispatch, tick) and `result` (what a run produced, sampling and final accounting).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use crate::rng::Rng;
use crate::sched::{CurrencyInfo, Kernel, SchedSpec, Scheduler, Stop, TaskInfo, TaskState, Wake};
use crate::time::Ns;
use crate::workload::{Behaviour, Policy, Workload};

mod behaviour;
mod dispatch;
mod result;

pub use result::{Latency, RunResult, TaskResult};

use behaviour::{next_action, Action, BState};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    Arrive(usize),
    CpuStop(usize, u64),
    Wake(usize, u64),
    Tick,
    Sample,
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
}

impl TaskRt {
    fn st_block_prio(&self) -> u8 {
        self.st_block
    }
    fn st_set_block_prio(&mut self, p: u8) {
        self.st_block = p;
    }
}
