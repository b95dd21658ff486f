//! Linux EEVDF (6.6+, kernel/sched/fair.c after "sched/fair: Implement an EEVDF-like
//! scheduling policy"; Stoica et al. 1996, Petrou et al. 1999 ref. [17]), the fair scheduler of
//! the starved-task tutorial ("It picks tasks by an eligibility + virtual deadline model"):
//!
//! - vruntime advances by ran × 1024 / weight; the load-weighted average vruntime V
//!   of the queue (running tasks included) defines lag = V − vruntime;
//! - a task is eligible when its lag ≥ 0; among eligible tasks the one with the
//!   earliest virtual deadline runs (pick_eevdf());
//! - a request is one slice: deadline = vruntime + slice × 1024 / weight; the slice
//!   is base_slice (0.75 ms × (1 + log2 CPUs)) or the task's custom slice
//!   (sched_setattr sched_runtime, kernel ≥ 6.12); the task runs to its deadline
//!   (RUN_TO_PARITY) and then gets a new request;
//! - on sleep the lag is kept, clipped to ±max(2 × slice, one 4 ms tick) in virtual
//!   time; on wakeup it is restored, scaled by (W + w) / W (PLACE_LAG); a new task
//!   starts at V with half a request (PLACE_DEADLINE_INITIAL);
//! - a waking task preempts when it is eligible and its deadline is earlier than the
//!   running task's.
//!
//! Pick walks queued tasks in deadline order to the first eligible one (the kernel
//! uses an augmented tree; this is usually as fast since early deadlines are mostly
//! eligible).

use std::collections::BTreeSet;

use super::{nice_weight, Kernel, Pick, Scheduler, Stop, TaskId, Wake};
use crate::time::{Ns, MS, US};

/// Virtual time is ns × 1024 / weight, kept with 16 more bits of precision so that a
/// heavy task's short runs still advance it.
const VSCALE: i128 = 1024 << 16;

/// The EEVDF scheduler.
pub struct Eevdf {
    base_slice: Ns,
    by_deadline: BTreeSet<(i128, TaskId)>,
    by_vruntime: BTreeSet<(i128, TaskId)>,
    v: Vec<i128>,
    d: Vec<i128>,
    vlag: Vec<i128>,
    sum_w: i128,
    sum_wv: i128,
}

impl Eevdf {
    /// An EEVDF run queue.
    pub fn new(k: &Kernel) -> Eevdf {
        let f = 1 + (k.ncpus.clamp(1, 8) as u64).ilog2() as u64;
        Eevdf {
            base_slice: 750 * US * f,
            by_deadline: BTreeSet::new(),
            by_vruntime: BTreeSet::new(),
            v: Vec::new(),
            d: Vec::new(),
            vlag: Vec::new(),
            sum_w: 0,
            sum_wv: 0,
        }
    }

    fn w(k: &Kernel, t: TaskId) -> i128 {
        nice_weight(k.tasks[t].nice) as i128
    }

    fn slice(&self, k: &Kernel, t: TaskId) -> Ns {
        k.tasks[t].slice.map(|s| s.clamp(100 * US, 100 * MS)).unwrap_or(self.base_slice)
    }

    fn vslice(&self, k: &Kernel, t: TaskId) -> i128 {
        self.slice(k, t) as i128 * VSCALE / Self::w(k, t)
    }

    fn avg(&self) -> i128 {
        if self.sum_w == 0 {
            0
        } else {
            self.sum_wv.div_euclid(self.sum_w)
        }
    }

    fn eligible_v(&self, v: i128) -> bool {
        self.sum_w == 0 || v * self.sum_w <= self.sum_wv
    }

    fn ensure(&mut self, t: TaskId) {
        if self.v.len() <= t {
            self.v.resize(t + 1, 0);
            self.d.resize(t + 1, 0);
            self.vlag.resize(t + 1, 0);
        }
    }

    fn account_add(&mut self, k: &Kernel, t: TaskId) {
        let w = Self::w(k, t);
        self.sum_w += w;
        self.sum_wv += w * self.v[t];
    }

    fn account_remove(&mut self, k: &Kernel, t: TaskId) {
        let w = Self::w(k, t);
        self.sum_w -= w;
        self.sum_wv -= w * self.v[t];
    }

    fn queue(&mut self, t: TaskId) {
        self.by_deadline.insert((self.d[t], t));
        self.by_vruntime.insert((self.v[t], t));
    }

    fn place(&mut self, k: &Kernel, t: TaskId, initial: bool) {
        let avg = self.avg();
        let w = Self::w(k, t);
        let mut lag = if initial { 0 } else { self.vlag[t] };
        if self.sum_w > 0 {
            lag = lag * (self.sum_w + w) / self.sum_w;
        }
        self.v[t] = avg - lag;
        let vs = self.vslice(k, t);
        self.d[t] = self.v[t] + if initial { vs / 2 } else { vs };
        self.account_add(k, t);
        self.queue(t);
    }
}

impl Scheduler for Eevdf {
    fn name(&self) -> String {
        "eevdf".into()
    }

    fn add(&mut self, k: &Kernel, t: TaskId, _parent: Option<TaskId>) {
        self.ensure(t);
        self.place(k, t, true);
    }

    fn wake(&mut self, k: &Kernel, t: TaskId, _how: Wake) {
        self.ensure(t);
        self.place(k, t, false);
    }

    fn pick(&mut self, k: &Kernel, _cpu: usize) -> Option<Pick> {
        let mut chosen = None;
        for &(_, t) in self.by_deadline.iter() {
            if self.eligible_v(self.v[t]) {
                chosen = Some(t);
                break;
            }
        }
        let t = match chosen {
            Some(t) => t,
            None => self.by_vruntime.iter().next()?.1,
        };
        self.by_deadline.remove(&(self.d[t], t));
        self.by_vruntime.remove(&(self.v[t], t));
        // A request with less than a microsecond left counts as served (the kernel
        // notices at the next update_curr; this avoids nanosecond slices).
        if (self.d[t] - self.v[t]) * Self::w(k, t) / VSCALE < 1_000 {
            self.d[t] = self.v[t] + self.vslice(k, t);
        }
        let slice = ((self.d[t] - self.v[t]) * Self::w(k, t) / VSCALE).max(1) as Ns;
        Some(Pick { task: t, slice })
    }

    fn stop(&mut self, k: &Kernel, t: TaskId, ran: Ns, why: Stop) {
        self.account_remove(k, t);
        self.v[t] += ran as i128 * VSCALE / Self::w(k, t);
        if self.v[t] >= self.d[t] {
            // update_deadline(): the request is served; issue the next one.
            self.d[t] = self.v[t] + self.vslice(k, t);
        }
        self.account_add(k, t);
        if why.runnable() {
            self.queue(t);
        } else {
            let limit = (2 * self.slice(k, t)).max(4 * MS) as i128 * VSCALE / Self::w(k, t);
            self.vlag[t] = (self.avg() - self.v[t]).clamp(-limit, limit);
            self.account_remove(k, t);
        }
    }

    fn wake_preempts(&self, k: &Kernel, woken: TaskId, running: TaskId, ran: Ns) -> bool {
        let cv = self.v[running] + ran as i128 * VSCALE / Self::w(k, running);
        let cd = if cv >= self.d[running] { cv + self.vslice(k, running) } else { self.d[running] };
        self.eligible_v(self.v[woken]) && (self.d[woken] < cd || !self.eligible_v(cv))
    }
}
