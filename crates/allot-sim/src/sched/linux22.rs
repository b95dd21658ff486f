//! Linux 2.2 (2.2.13, the kernel traced by Ross and Abel 2000), as Ross and Abel 2000 §3.3 describes it:
//!
//! - priority = 20 − nice (1..40); counter is the remaining time slice in 10 ms ticks;
//! - goodness = counter + priority (0 when counter is 0); the runnable process with
//!   the highest goodness runs (ties: the previous process, then run-queue order,
//!   newly woken processes at the front as add_to_runqueue() puts them);
//! - each tick the running process's counter drops by one; when it would go below
//!   zero it is rescheduled, so counter 20 gives the 210 ms default slice of §3.3;
//! - when no runnable process has a non-zero counter, every process (sleeping ones
//!   too) is recalculated: counter = counter/2 + priority, so sleepers converge
//!   towards 2 × priority;
//! - a waking process preempts the running one if its goodness is higher
//!   (reschedule_idle());
//! - fork splits the parent's remaining counter: half stays, half goes to the child
//!   (§5.2.3, the "fork penalty": kernel/fork.c `current->counter >>= 1;
//!   p->counter = current->counter;`); nothing is returned at exit.

use super::{Kernel, Pick, Running, Scheduler, Stop, TaskId, TaskState, Wake};
use crate::time::{Ns, FOREVER, MS};

const TICK: Ns = 10 * MS;

/// The Linux 2.2 scheduler.
pub struct Linux22 {
    counter: Vec<i64>,
    runq: Vec<TaskId>, // index 0 = front
    prev: Option<TaskId>,
}

impl Linux22 {
    /// A fresh scheduler.
    pub fn new(_k: &Kernel) -> Linux22 {
        Linux22 { counter: Vec::new(), runq: Vec::new(), prev: None }
    }

    fn priority(k: &Kernel, t: TaskId) -> i64 {
        20 - k.tasks[t].nice.clamp(-20, 19) as i64
    }

    fn goodness(&self, k: &Kernel, t: TaskId) -> i64 {
        let c = self.counter[t];
        if c == 0 {
            0
        } else {
            c + Self::priority(k, t)
        }
    }

    fn ensure(&mut self, t: TaskId) {
        if self.counter.len() <= t {
            self.counter.resize(t + 1, 0);
        }
    }
}

impl Scheduler for Linux22 {
    fn name(&self) -> String {
        "linux22".into()
    }

    fn add(&mut self, k: &Kernel, t: TaskId, parent: Option<TaskId>) {
        self.ensure(t);
        match parent {
            Some(p) => {
                self.counter[p] >>= 1;
                self.counter[t] = self.counter[p];
            }
            None => self.counter[t] = Self::priority(k, t),
        }
        self.runq.insert(0, t);
    }

    fn wake(&mut self, _k: &Kernel, t: TaskId, _how: Wake) {
        self.ensure(t);
        self.runq.insert(0, t);
    }

    fn pick(&mut self, k: &Kernel, _cpu: usize) -> Option<Pick> {
        if self.runq.is_empty() {
            return None;
        }
        loop {
            let mut best: Option<(usize, i64)> = None;
            if let Some(p) = self.prev.take() {
                if let Some(i) = self.runq.iter().position(|&x| x == p) {
                    best = Some((i, self.goodness(k, p)));
                }
            }
            for (i, &t) in self.runq.iter().enumerate() {
                let g = self.goodness(k, t);
                if best.map(|(_, bg)| g > bg).unwrap_or(true) {
                    best = Some((i, g));
                }
            }
            let (i, g) = best.unwrap();
            if g > 0 {
                let t = self.runq.remove(i);
                return Some(Pick { task: t, slice: FOREVER });
            }
            // Recalculate every process's counter.
            for t in 0..self.counter.len() {
                if !matches!(k.tasks[t].state, TaskState::Exited | TaskState::New) {
                    self.counter[t] = (self.counter[t] >> 1) + Self::priority(k, t);
                }
            }
        }
    }

    fn stop(&mut self, _k: &Kernel, t: TaskId, _ran: Ns, why: Stop) {
        if why.runnable() {
            self.runq.insert(0, t);
            self.prev = Some(t);
        }
    }

    fn wake_preempts(&self, k: &Kernel, woken: TaskId, running: TaskId, _ran: Ns) -> bool {
        self.goodness(k, woken) > self.goodness(k, running)
    }

    fn tick_ns(&self) -> Option<Ns> {
        Some(TICK)
    }

    fn tick(&mut self, _k: &Kernel, running: &[Option<Running>]) -> Vec<usize> {
        let mut out = Vec::new();
        for (c, r) in running.iter().enumerate() {
            if let Some(r) = r {
                self.counter[r.task] -= 1;
                if self.counter[r.task] < 0 {
                    self.counter[r.task] = 0;
                    out.push(c);
                }
            }
        }
        out
    }
}
