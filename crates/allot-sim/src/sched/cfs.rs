//! Linux CFS (2.6.23–6.5, kernel/sched/fair.c), the default fair scheduler of the starved-task tutorial
//! ("The default Linux scheduler (CFS, now EEVDF on 6.6+) is a fair scheduler"):
//!
//! - weight from nice (sched_prio_to_weight, nice 0 = 1024); vruntime advances by
//!   ran × 1024 / weight;
//! - the task with the smallest vruntime runs (red-black tree; here a B-tree);
//! - its slice is period × weight / total weight, period = sched_latency (6 ms), or
//!   nr_running × min_granularity (0.75 ms) when more than latency/min_granularity
//!   tasks run; both scaled by 1 + log2(CPUs) (SCHED_TUNABLESCALING_LOG);
//! - a waking task is placed at max(its vruntime, min_vruntime − latency/2)
//!   (GENTLE_FAIR_SLEEPERS), a new one at min_vruntime + its slice (START_DEBIT);
//! - a waking task preempts the running one if the running one's vruntime exceeds
//!   the woken one's by more than wakeup_granularity (1 ms, scaled, in the woken
//!   task's virtual time).

use std::collections::BTreeSet;

use super::{nice_weight, Kernel, Pick, Scheduler, Stop, TaskId, Wake};
use crate::time::{Ns, MS, US};

/// The CFS scheduler.
pub struct Cfs {
    latency: Ns,
    min_gran: Ns,
    wakeup_gran: Ns,
    tree: BTreeSet<(i64, TaskId)>,
    vruntime: Vec<i64>,
    on_rq_weight: u64,
    nr_on_rq: u64,
    min_vruntime: i64,
    running: BTreeSet<(i64, TaskId)>,
}

fn scale(ncpus: usize) -> u64 {
    1 + (ncpus.clamp(1, 8) as u64).ilog2() as u64
}

impl Cfs {
    /// A CFS run queue for `k.ncpus` CPUs (one global queue, see engine docs).
    pub fn new(k: &Kernel) -> Cfs {
        let f = scale(k.ncpus);
        Cfs {
            latency: 6 * MS * f,
            min_gran: 750 * US * f,
            wakeup_gran: MS * f,
            tree: BTreeSet::new(),
            vruntime: Vec::new(),
            on_rq_weight: 0,
            nr_on_rq: 0,
            min_vruntime: 0,
            running: BTreeSet::new(),
        }
    }

    fn w(k: &Kernel, t: TaskId) -> u64 {
        nice_weight(k.tasks[t].nice)
    }

    fn vdelta(ns: Ns, w: u64) -> i64 {
        (ns as u128 * 1024 / w as u128) as i64
    }

    fn period(&self, nr: u64) -> Ns {
        let n = self.latency / self.min_gran;
        if nr > n {
            nr * self.min_gran
        } else {
            self.latency
        }
    }

    fn slice(&self, k: &Kernel, t: TaskId) -> Ns {
        let total = self.on_rq_weight.max(1);
        (self.period(self.nr_on_rq) as u128 * Self::w(k, t) as u128 / total as u128) as Ns
    }

    fn update_min_vruntime(&mut self) {
        let mut m: Option<i64> = None;
        if let Some(&(v, _)) = self.running.iter().next() {
            m = Some(v);
        }
        if let Some(&(v, _)) = self.tree.iter().next() {
            m = Some(m.map_or(v, |x| x.min(v)));
        }
        if let Some(v) = m {
            self.min_vruntime = self.min_vruntime.max(v);
        }
    }

    fn ensure(&mut self, t: TaskId) {
        if self.vruntime.len() <= t {
            self.vruntime.resize(t + 1, 0);
        }
    }

    fn enqueue(&mut self, k: &Kernel, t: TaskId) {
        self.on_rq_weight += Self::w(k, t);
        self.nr_on_rq += 1;
        self.tree.insert((self.vruntime[t], t));
    }
}

impl Scheduler for Cfs {
    fn name(&self) -> String {
        "cfs".into()
    }

    fn add(&mut self, k: &Kernel, t: TaskId, _parent: Option<TaskId>) {
        self.ensure(t);
        self.update_min_vruntime();
        // START_DEBIT: a new task starts one slice behind.
        let w = Self::w(k, t);
        let slice = (self.period(self.nr_on_rq + 1) as u128 * w as u128 / (self.on_rq_weight + w) as u128) as Ns;
        self.vruntime[t] = self.min_vruntime + Self::vdelta(slice, w);
        self.enqueue(k, t);
    }

    fn wake(&mut self, k: &Kernel, t: TaskId, _how: Wake) {
        self.ensure(t);
        self.update_min_vruntime();
        let thresh = (self.latency / 2) as i64;
        self.vruntime[t] = self.vruntime[t].max(self.min_vruntime - thresh);
        self.enqueue(k, t);
    }

    fn pick(&mut self, k: &Kernel, _cpu: usize) -> Option<Pick> {
        let &(v, t) = self.tree.iter().next()?;
        self.tree.remove(&(v, t));
        self.running.insert((v, t));
        // The kernel checks ideal_runtime at ticks and never preempts for the
        // leftmost before min_granularity: a slice is at least min_granularity.
        let slice = self.slice(k, t).max(self.min_gran);
        Some(Pick { task: t, slice })
    }

    fn stop(&mut self, k: &Kernel, t: TaskId, ran: Ns, why: Stop) {
        self.running.remove(&(self.vruntime[t], t));
        self.vruntime[t] += Self::vdelta(ran, Self::w(k, t));
        self.update_min_vruntime();
        if why.runnable() {
            self.tree.insert((self.vruntime[t], t));
        } else {
            self.on_rq_weight -= Self::w(k, t);
            self.nr_on_rq -= 1;
        }
    }

    fn wake_preempts(&self, k: &Kernel, woken: TaskId, running: TaskId, ran: Ns) -> bool {
        let curr = self.vruntime[running] + Self::vdelta(ran, Self::w(k, running));
        let gran = Self::vdelta(self.wakeup_gran, Self::w(k, woken));
        curr - self.vruntime[woken] > gran
    }
}
