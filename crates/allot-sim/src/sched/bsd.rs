//! 4.4BSD decay-usage scheduling, the FreeBSD 2.2.5 baseline of Petrou et al. 1999 (§2.1: "a
//! multi-level feedback queue ... round-robin from the highest priority non-empty
//! run-queue ... 100ms time slices ... lowering the priority of processes as they
//! consume CPU time ... preempting ... if a higher priority sleeping process wakes up
//! ... periodically raising the priority of processes that have not recently run ...
//! kernel priorities"). The formulas are those of McKusick et al., *The Design and
//! Implementation of the 4.4BSD Operating System* §4.4 (Petrou et al. 1999 ref. [14]):
//!
//! - every clock tick (10 ms) the running process's p_estcpu += 1;
//! - every 4 ticks, p_usrpri = PUSER + p_estcpu/4 + 2·p_nice (≤ MAXPRI 127);
//! - every 100 ms roundrobin() forces a reschedule (the quantum);
//! - every second schedcpu(): p_estcpu = (2·load)/(2·load+1) · p_estcpu + p_nice,
//!   where load is the 1-minute load average;
//! - a process asleep for more than a second has its p_estcpu decayed on wakeup by
//!   the same factor per second slept (updatepri);
//! - 32 run queues of 4 priorities each, FIFO inside a queue;
//! - a process woken from a kernel sleep runs at the sleep's priority (< PUSER)
//!   until it returns to user mode; a wakeup preempts if its priority is better.
//!
//! Forked children start with p_estcpu = 0 (Ross and Abel 2000 §5.2.3, citing Endo: BSD does
//! not copy CPU usage history on fork).

use std::collections::VecDeque;

use super::{Kernel, Pick, Running, Scheduler, Stop, TaskId, TaskState, Wake};
use crate::time::{Ns, FOREVER, MS, SEC};

const PUSER: f64 = 50.0;
const MAXPRI: f64 = 127.0;
const TICK: Ns = 10 * MS;

/// The 4.4BSD scheduler.
pub struct Bsd {
    estcpu: Vec<f64>,
    kprio: Vec<Option<u8>>,
    queues: Vec<VecDeque<TaskId>>,
    queued: Vec<bool>,
    ticks: u64,
    load: f64,
}

impl Bsd {
    /// A fresh scheduler.
    pub fn new(_k: &Kernel) -> Bsd {
        Bsd { estcpu: Vec::new(), kprio: Vec::new(), queues: vec![VecDeque::new(); 32], queued: Vec::new(), ticks: 0, load: 0.0 }
    }

    fn ensure(&mut self, t: TaskId) {
        if self.estcpu.len() <= t {
            self.estcpu.resize(t + 1, 0.0);
            self.kprio.resize(t + 1, None);
            self.queued.resize(t + 1, false);
        }
    }

    fn usrpri(&self, k: &Kernel, t: TaskId) -> u8 {
        (PUSER + (self.estcpu[t] / 4.0).floor() + 2.0 * k.tasks[t].nice as f64).clamp(PUSER, MAXPRI) as u8
    }

    fn prio(&self, k: &Kernel, t: TaskId) -> u8 {
        self.kprio[t].unwrap_or_else(|| self.usrpri(k, t))
    }

    fn setrunqueue(&mut self, k: &Kernel, t: TaskId) {
        let q = (self.prio(k, t) / 4) as usize;
        self.queues[q].push_back(t);
        self.queued[t] = true;
    }

    fn decay(&self) -> f64 {
        let l = 2.0 * self.load;
        l / (l + 1.0)
    }
}

impl Scheduler for Bsd {
    fn name(&self) -> String {
        "bsd".into()
    }

    fn add(&mut self, k: &Kernel, t: TaskId, _parent: Option<TaskId>) {
        self.ensure(t);
        self.setrunqueue(k, t);
    }

    fn wake(&mut self, k: &Kernel, t: TaskId, how: Wake) {
        self.ensure(t);
        // updatepri(): decay p_estcpu once per second slept, or zero it after a long sleep.
        let slept = (k.now - k.tasks[t].slept_at) / SEC;
        if slept > 1 {
            let loadfac = 2.0 * self.load;
            if slept as f64 > 5.0 * loadfac {
                self.estcpu[t] = 0.0;
            } else {
                let d = self.decay();
                for _ in 0..slept {
                    self.estcpu[t] = (self.estcpu[t] * d).floor();
                }
            }
        }
        self.kprio[t] = match how {
            Wake::Kernel(p) => Some(p),
            Wake::User => None,
        };
        self.setrunqueue(k, t);
    }

    fn pick(&mut self, _k: &Kernel, _cpu: usize) -> Option<Pick> {
        for q in self.queues.iter_mut() {
            if let Some(t) = q.pop_front() {
                self.queued[t] = false;
                return Some(Pick { task: t, slice: FOREVER });
            }
        }
        None
    }

    fn stop(&mut self, k: &Kernel, t: TaskId, _ran: Ns, why: Stop) {
        // Leaving the CPU means returning to user mode first: the kernel priority ends.
        self.kprio[t] = None;
        if why.runnable() {
            self.setrunqueue(k, t);
        }
    }

    fn wake_preempts(&self, k: &Kernel, woken: TaskId, running: TaskId, _ran: Ns) -> bool {
        self.prio(k, woken) < self.prio(k, running)
    }

    fn tick_ns(&self) -> Option<Ns> {
        Some(TICK)
    }

    fn tick(&mut self, k: &Kernel, running: &[Option<Running>]) -> Vec<usize> {
        self.ticks += 1;
        for r in running.iter().flatten() {
            self.ensure(r.task);
            self.estcpu[r.task] = (self.estcpu[r.task] + 1.0).min(255.0);
        }
        if self.ticks % 500 == 0 {
            // Load average every 5 s over one minute: exp(-5/60).
            let nrun = k.tasks.iter().filter(|t| matches!(t.state, TaskState::Runnable | TaskState::Running(_))).count();
            let e = (-5.0f64 / 60.0).exp();
            self.load = self.load * e + nrun as f64 * (1.0 - e);
        }
        if self.ticks % 100 == 0 {
            // schedcpu(): decay every process not asleep for more than a second, and
            // move queued ones to the queue of their new priority (keeping order).
            let d = self.decay();
            for t in 0..self.estcpu.len() {
                let st = k.tasks[t].state;
                let asleep_long = matches!(st, TaskState::Sleeping | TaskState::Blocked) && k.now - k.tasks[t].slept_at > SEC;
                if st == TaskState::Exited || asleep_long {
                    continue;
                }
                self.estcpu[t] = (d * self.estcpu[t] + k.tasks[t].nice as f64).clamp(0.0, 255.0).floor();
            }
            let mut all = Vec::new();
            for q in self.queues.iter_mut() {
                all.extend(q.drain(..));
            }
            for t in all {
                self.setrunqueue(k, t);
            }
        }
        if self.ticks % 10 == 0 {
            // roundrobin(): the 100 ms quantum.
            return (0..running.len()).filter(|&c| running[c].is_some()).collect();
        }
        Vec::new()
    }
}
