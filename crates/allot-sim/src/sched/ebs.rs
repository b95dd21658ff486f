//! The Entitlement Based Scheduler (EBS 2004: John Lee of Aurema, LKML RFC; docs/references.md):
//!
//! - shares: 1..420, default 20; nice ≥ 0 → 20 − nice, nice < 0 → 20 + nice²
//!   ("CPU shares");
//! - usage rate: a Kalman-filter estimate with a response half-life (default 5000 ms),
//!   "similar to ... a running average over twice the half life". For a task that is
//!   either on or off the CPU the steady-state filter is first order: over an
//!   interval Δ, u ← u·2^(−Δ/h) + x·(1 − 2^(−Δ/h)), x = 1 on the CPU, 0 off it;
//! - effective entitlement per share: the highest usage per share observed among
//!   tasks that run, the yardstick of every priority ("Effective entitlement per
//!   share"); here it decays with the same half-life when nothing refreshes it;
//! - priority: usage_per_share / min(cap per share, eeps) mapped onto the 40
//!   SCHED_NORMAL priorities with 1.0 at the mean (20): below 1 linearly onto 0..20,
//!   above 1 as 39 − 19/ratio ("Task priorities"; the RFC gives the properties, the
//!   exact curve is ours); recalculated on fork, wakeup, timeslice expiry and
//!   promotion; soft cap 0 = background, below every normal priority;
//! - caps: a soft cap acts only through the priority (it can be exceeded when CPU
//!   would otherwise idle); a hard-capped task whose usage exceeds its cap is put in
//!   the "sinbin" until its usage decays to the cap ("CPU usage rate caps");
//! - one heuristic: a forked child starts with its parent's usage rate;
//! - promotion: a waiting task's usage decays, so at enqueue time the time until it
//!   deserves the next better priority is computed by inverting the filter and the
//!   mapping; it is promoted then if it has not run ("O(1) task promotion"; here a
//!   timer heap rather than the patch's promotion lists — the same promotions);
//! - a fixed 100 ms timeslice; a waking task preempts a worse-priority running one.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

use super::{Kernel, Pick, Running, Scheduler, Stop, TaskId, Wake};
use crate::time::{Ns, MS, SEC};

const TICK: Ns = 10 * MS;
const BACKGROUND: u8 = 40;

/// EBS shares of a nice value (EBS 2004 "CPU shares"), allot-model's map.
pub fn shares(nice: i32) -> f64 {
    f64::from(allot_model::nice::ebs_shares(nice))
}

/// The EBS scheduler.
pub struct Ebs {
    half_life: f64,
    timeslice: Ns,
    usage: Vec<f64>,
    last: Vec<Ns>,
    on_cpu: Vec<bool>,
    prio: Vec<u8>,
    key: Vec<Option<(u8, u64)>>,
    denom: Vec<f64>,
    promo_gen: Vec<u64>,
    queue: BTreeSet<(u8, u64, TaskId)>,
    seq: u64,
    eeps: f64,
    eeps_at: Ns,
    promotions: BinaryHeap<Reverse<(Ns, u64, TaskId)>>,
    sinbin: BinaryHeap<Reverse<(Ns, TaskId)>>,
}

impl Ebs {
    /// An EBS run queue with the default half-life (5 s) and timeslice (100 ms).
    pub fn new(_k: &Kernel) -> Ebs {
        Ebs {
            half_life: 5.0 * SEC as f64,
            timeslice: 100 * MS,
            usage: Vec::new(),
            last: Vec::new(),
            on_cpu: Vec::new(),
            prio: Vec::new(),
            key: Vec::new(),
            denom: Vec::new(),
            promo_gen: Vec::new(),
            queue: BTreeSet::new(),
            seq: 0,
            eeps: 0.0,
            eeps_at: 0,
            promotions: BinaryHeap::new(),
            sinbin: BinaryHeap::new(),
        }
    }

    fn ensure(&mut self, t: TaskId) {
        if self.usage.len() <= t {
            let n = t + 1;
            self.usage.resize(n, 0.0);
            self.last.resize(n, 0);
            self.on_cpu.resize(n, false);
            self.prio.resize(n, 20);
            self.key.resize(n, None);
            self.denom.resize(n, 0.0);
            self.promo_gen.resize(n, 0);
        }
    }

    fn decay(&self, dt: Ns) -> f64 {
        (-(dt as f64) / self.half_life).exp2()
    }

    /// Brings the usage-rate estimate up to now.
    fn update_usage(&mut self, now: Ns, t: TaskId) {
        let d = self.decay(now - self.last[t]);
        self.usage[t] = if self.on_cpu[t] { 1.0 - (1.0 - self.usage[t]) * d } else { self.usage[t] * d };
        self.last[t] = now;
    }

    fn update_eeps(&mut self, now: Ns) {
        let d = self.decay(now - self.eeps_at);
        self.eeps *= d;
        self.eeps_at = now;
    }

    fn map(r: f64) -> u8 {
        if r <= 1.0 {
            (20.0 * r).floor().clamp(0.0, 20.0) as u8
        } else {
            (39.0 - (19.0 / r).floor()).clamp(20.0, 39.0) as u8
        }
    }

    /// Recomputes the priority (and the denominator used for promotion).
    fn calc_prio(&mut self, k: &Kernel, t: TaskId) -> u8 {
        if let Some(cap) = k.tasks[t].cap {
            if cap.cpus <= 0.0 && !cap.hard {
                self.prio[t] = BACKGROUND;
                return BACKGROUND;
            }
        }
        let sh = shares(k.tasks[t].nice);
        let ups = self.usage[t] / sh;
        // The yardstick is the highest usage per share observed, this task's included.
        let mut denom = self.eeps.max(ups);
        if let Some(cap) = k.tasks[t].cap {
            denom = denom.min(cap.cpus / sh);
        }
        self.denom[t] = denom;
        let r = if ups <= 0.0 {
            0.0
        } else if denom <= 0.0 {
            f64::INFINITY
        } else {
            ups / denom
        };
        let p = Self::map(r);
        self.prio[t] = p;
        p
    }

    fn enqueue(&mut self, k: &Kernel, t: TaskId) {
        let now = k.now;
        if let Some(cap) = k.tasks[t].cap {
            if cap.hard && self.usage[t] > cap.cpus {
                // Sinbin until the usage decays to the cap: u·2^(−t/h) = cap.
                let wait = (self.half_life * (self.usage[t] / cap.cpus).log2()).ceil() as Ns;
                self.sinbin.push(Reverse((now + wait.max(1), t)));
                return;
            }
        }
        let p = self.calc_prio(k, t);
        self.seq += 1;
        self.queue.insert((p, self.seq, t));
        self.key[t] = Some((p, self.seq));
        self.schedule_promotion(k, now, t);
    }

    fn schedule_promotion(&mut self, k: &Kernel, now: Ns, t: TaskId) {
        self.promo_gen[t] += 1;
        let p = self.prio[t];
        if p == 0 || p == BACKGROUND || self.denom[t] <= 0.0 {
            return;
        }
        // The ratio needed for priority p − 1, inverted from `map`; while waiting the
        // usage decays as 2^(−t/h) (the denominator is frozen at enqueue time).
        let target = if p <= 20 { p as f64 / 20.0 } else { 19.0 / (40.0 - p as f64) };
        let r0 = self.usage[t] / shares(k.tasks[t].nice) / self.denom[t];
        // r0 ≥ target always (the bands are [p/20, (p+1)/20) and (19/(40−p), 19/(39−p)]);
        // strictly below the band's lower edge is the next priority.
        if r0 < target {
            return;
        }
        let wait = (self.half_life * (r0 / target).log2()).ceil() as Ns + 1;
        self.promotions.push(Reverse((now + wait, self.promo_gen[t], t)));
    }
}

impl Scheduler for Ebs {
    fn name(&self) -> String {
        "ebs".into()
    }

    fn add(&mut self, k: &Kernel, t: TaskId, parent: Option<TaskId>) {
        self.ensure(t);
        self.last[t] = k.now;
        if let Some(p) = parent {
            // The one heuristic: a child starts with its parent's usage rate.
            self.ensure(p);
            self.update_usage(k.now, p);
            self.usage[t] = self.usage[p];
        }
        self.enqueue(k, t);
    }

    fn wake(&mut self, k: &Kernel, t: TaskId, _how: Wake) {
        self.ensure(t);
        self.update_usage(k.now, t);
        self.update_eeps(k.now);
        self.enqueue(k, t);
    }

    fn pick(&mut self, k: &Kernel, _cpu: usize) -> Option<Pick> {
        let &(p, s, t) = self.queue.iter().next()?;
        self.queue.remove(&(p, s, t));
        self.key[t] = None;
        self.promo_gen[t] += 1;
        self.update_usage(k.now, t);
        self.on_cpu[t] = true;
        let mut slice = self.timeslice;
        if let Some(cap) = k.tasks[t].cap {
            if cap.hard && self.usage[t] < cap.cpus {
                // Run until the usage would reach the cap: 1 − (1−u)·2^(−t/h) = cap.
                let until = self.half_life * ((1.0 - self.usage[t]) / (1.0 - cap.cpus).max(1e-9)).log2();
                slice = slice.min((until.ceil() as Ns).max(TICK));
            }
        }
        Some(Pick { task: t, slice })
    }

    fn stop(&mut self, k: &Kernel, t: TaskId, _ran: Ns, why: Stop) {
        self.update_usage(k.now, t);
        self.on_cpu[t] = false;
        self.update_eeps(k.now);
        let ups = self.usage[t] / shares(k.tasks[t].nice);
        let background = k.tasks[t].cap.map(|c| c.cpus <= 0.0 && !c.hard).unwrap_or(false);
        if !background && ups > self.eeps {
            self.eeps = ups;
        }
        if why.runnable() {
            self.enqueue(k, t);
        }
    }

    fn wake_preempts(&self, _k: &Kernel, woken: TaskId, running: TaskId, _ran: Ns) -> bool {
        self.prio[woken] < self.prio[running]
    }

    fn tick_ns(&self) -> Option<Ns> {
        Some(TICK)
    }

    fn tick(&mut self, k: &Kernel, _running: &[Option<Running>]) -> Vec<usize> {
        let now = k.now;
        while let Some(&Reverse((at, t))) = self.sinbin.peek() {
            if at > now {
                break;
            }
            self.sinbin.pop();
            self.update_usage(now, t);
            self.enqueue(k, t);
        }
        while let Some(&Reverse((at, gen, t))) = self.promotions.peek() {
            if at > now {
                break;
            }
            self.promotions.pop();
            if gen != self.promo_gen[t] || self.key[t].is_none() {
                continue;
            }
            // Promote by one priority (keeping the frozen denominator).
            self.update_usage(now, t);
            let (p, s) = self.key[t].unwrap();
            self.queue.remove(&(p, s, t));
            let np = p.saturating_sub(1);
            self.prio[t] = np;
            self.queue.insert((np, s, t));
            self.key[t] = Some((np, s));
            self.schedule_promotion(k, now, t);
        }
        Vec::new()
    }
}
