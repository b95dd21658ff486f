//! The hybrid lottery scheduler of Petrou et al. 1999 (Petrou, Milford & Gibson, USENIX ATC),
//! implemented as its Figure 2 `lott_choose_next_runner()`: O(n) in the runnable
//! processes, as theirs is (§4.1).
//!
//! - Kernel priorities (§3.1): a process woken from a kernel sleep on a resource goes
//!   on `kern_pri_list`, sorted by the resource's priority; that list is served
//!   before any lottery. The time a process runs between two lottery selections is
//!   accumulated; compensation is quantum / that time, so a process that ran longer
//!   than a quantum holds *negative* compensation (10 tickets overrunning by 25% hold
//!   8). A process dispatched from the kernel list is forced off the CPU once it has
//!   used more than one quantum since its last lottery selection.
//! - Abbreviated quanta (§3.2): every wakeup preempts a running process; the
//!   preempted process is compensated for the fraction of its quantum it used.
//! - Windowed ticket boost (§3.3, §4.1): every second, record each process's CPU
//!   use and the time it deserved (its base tickets over the system's, among
//!   processes runnable or asleep for less than ten seconds); over the last ten
//!   seconds f = used / deserved; if f < 1 the process's effective tickets are
//!   multiplied by ticket_boost = (1/f)^4, clipped at 10000, instead of being
//!   compensated; a process asleep for more than ten seconds wakes with the maximum
//!   boost.
//! - nice emulation (§3.4, §4.1): a nice'd process holds 10^((20−nice)/20) tickets,
//!   and after conversion its base tickets are forced to be at most (nice > 0) or at
//!   least (nice < 0) 10^((20−nice)/20 + 2).
//!
//! The quantum is FreeBSD's 100 ms (§2.1) unless the workload sets one.

use std::collections::VecDeque;

use super::{Kernel, Pick, Running, Scheduler, Stop, TaskId, TaskState, Wake};
use crate::rng::Rng;
use crate::time::{Ns, MS, SEC};

/// Which of the paper's extensions are on (all by default).
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Windowed ticket boost (§3.3).
    pub boost: bool,
    /// Abbreviated quanta (§3.2).
    pub abbreviated_quanta: bool,
    /// Kernel priorities (§3.1).
    pub kernel_priorities: bool,
    /// nice emulation (§3.4).
    pub nice_emulation: bool,
    /// Count processes asleep for less than ten seconds in the per-second ticket
    /// totals (option deserved=active) instead of only runnable ones.
    pub count_sleepers: bool,
}

const WINDOW: usize = 10;
const MAX_BOOST: f64 = 10_000.0;
/// Time a process dispatched from the kernel list needs to get back to user level
/// before it can be forced off (our assumption; the paper gives none).
const KERNEL_EXIT: Ns = 100_000;

/// The hybrid lottery scheduler.
pub struct Hybrid {
    opts: Options,
    rng: Rng,
    quantum: Ns,
    kern: Vec<(u8, u64, TaskId)>,
    lottery: Vec<TaskId>,
    pos: Vec<Option<usize>>,
    seq: u64,
    run_since: Vec<Ns>,
    boost: Vec<f64>,
    /// Per task ring of (used, deserved) per second.
    window: Vec<VecDeque<(f64, f64)>>,
    cpu_at_tick: Vec<Ns>,
}

impl Hybrid {
    /// A hybrid lottery scheduler.
    pub fn new(k: &Kernel, seed: u64, opts: Options) -> Hybrid {
        Hybrid {
            opts,
            rng: Rng::new(seed, 1),
            quantum: k.quantum.unwrap_or(100 * MS),
            kern: Vec::new(),
            lottery: Vec::new(),
            pos: Vec::new(),
            seq: 0,
            run_since: Vec::new(),
            boost: Vec::new(),
            window: Vec::new(),
            cpu_at_tick: Vec::new(),
        }
    }

    fn ensure(&mut self, t: TaskId) {
        if self.pos.len() <= t {
            self.pos.resize(t + 1, None);
            self.run_since.resize(t + 1, 0);
            self.boost.resize(t + 1, 1.0);
            self.window.resize(t + 1, VecDeque::new());
            self.cpu_at_tick.resize(t + 1, 0);
        }
    }

    /// Tickets after nice emulation (§4.1).
    fn tickets(&self, k: &Kernel, t: TaskId) -> f64 {
        let n = k.tasks[t].nice;
        if self.opts.nice_emulation && n != 0 {
            allot_model::nice::paper_tickets(n)
        } else {
            k.tasks[t].tickets.max(1) as f64
        }
    }

    /// setrunqueue(): derive ticket_boost from the window (§4.1).
    fn setrunqueue(&mut self, k: &Kernel, t: TaskId, woke: bool) {
        self.boost[t] = 1.0;
        if self.opts.boost {
            if woke && k.now.saturating_sub(k.tasks[t].slept_at) > WINDOW as u64 * SEC {
                self.boost[t] = MAX_BOOST;
            } else {
                let (used, deserved) = self.window[t].iter().fold((0.0, 0.0), |a, b| (a.0 + b.0, a.1 + b.1));
                if deserved > 0.0 {
                    let f = used / deserved;
                    if f < 1.0 {
                        self.boost[t] = if f <= 0.0 { MAX_BOOST } else { (1.0 / f).powi(4).min(MAX_BOOST) };
                    }
                }
            }
        }
        self.pos[t] = Some(self.lottery.len());
        self.lottery.push(t);
    }

    fn remove_lottery(&mut self, t: TaskId) {
        let i = self.pos[t].take().unwrap();
        self.lottery.swap_remove(i);
        if i < self.lottery.len() {
            let moved = self.lottery[i];
            self.pos[moved] = Some(i);
        }
    }

    fn active(k: &Kernel, t: TaskId) -> bool {
        match k.tasks[t].state {
            TaskState::Runnable | TaskState::Running(_) => true,
            TaskState::Sleeping | TaskState::Blocked => k.now - k.tasks[t].slept_at <= WINDOW as u64 * SEC,
            _ => false,
        }
    }
}

impl Scheduler for Hybrid {
    fn name(&self) -> String {
        "hybrid".into()
    }

    fn add(&mut self, k: &Kernel, t: TaskId, _parent: Option<TaskId>) {
        self.ensure(t);
        self.cpu_at_tick[t] = k.tasks[t].cpu;
        self.setrunqueue(k, t, false);
    }

    fn wake(&mut self, k: &Kernel, t: TaskId, how: Wake) {
        self.ensure(t);
        match how {
            Wake::Kernel(p) if self.opts.kernel_priorities => {
                self.seq += 1;
                let key = (p, self.seq, t);
                let i = self.kern.partition_point(|x| *x < key);
                self.kern.insert(i, key);
            }
            _ => self.setrunqueue(k, t, true),
        }
    }

    fn pick(&mut self, k: &Kernel, _cpu: usize) -> Option<Pick> {
        if !self.kern.is_empty() {
            let (_, _, t) = self.kern.remove(0);
            let slice = self.quantum.saturating_sub(self.run_since[t]).max(KERNEL_EXIT);
            return Some(Pick { task: t, slice });
        }
        if self.lottery.is_empty() {
            return None;
        }
        // Figure 2: per currency, the tickets of its runnable processes (exchange rate).
        let mut cur_tickets = vec![0.0f64; k.currencies.len()];
        for &t in &self.lottery {
            cur_tickets[k.tasks[t].currency] += self.tickets(k, t);
        }
        let mut base = Vec::with_capacity(self.lottery.len());
        let mut total = 0.0;
        for &t in &self.lottery {
            let tickets = self.tickets(k, t);
            let eff = if self.boost[t] > 1.0 {
                tickets * self.boost[t]
            } else if self.run_since[t] > 0 {
                // Compensation, positive (< 1 quantum used) or negative (> 1 quantum),
                // clipped like ticket_boost at 10000 (§4.1: the clip prevents overflow
                // in this same multiplication).
                tickets * (self.quantum as f64 / self.run_since[t] as f64).min(MAX_BOOST)
            } else {
                tickets
            };
            let c = k.tasks[t].currency;
            let mut b = eff * k.currencies[c].funding as f64 / cur_tickets[c];
            let nice = k.tasks[t].nice;
            if self.opts.nice_emulation && nice != 0 {
                let th = allot_model::nice::paper_base_ticket_threshold(nice);
                b = if nice > 0 { b.min(th) } else { b.max(th) };
            }
            total += b;
            base.push(b);
        }
        let u = self.rng.f64() * total;
        let mut acc = 0.0;
        let mut win = self.lottery[self.lottery.len() - 1];
        for (i, &t) in self.lottery.iter().enumerate() {
            acc += base[i];
            if u < acc {
                win = t;
                break;
            }
        }
        self.remove_lottery(win);
        self.run_since[win] = 0;
        Some(Pick { task: win, slice: self.quantum })
    }

    fn stop(&mut self, k: &Kernel, t: TaskId, ran: Ns, why: Stop) {
        self.run_since[t] += ran;
        if why.runnable() {
            self.setrunqueue(k, t, false);
        }
    }

    fn wake_preempts(&self, _k: &Kernel, _w: TaskId, _r: TaskId, _ran: Ns) -> bool {
        self.opts.abbreviated_quanta
    }

    fn tick_ns(&self) -> Option<Ns> {
        Some(SEC)
    }

    fn tick(&mut self, k: &Kernel, running: &[Option<Running>]) -> Vec<usize> {
        // Every second: the circular arrays of §4.1.
        let n = k.tasks.len();
        self.ensure(n.saturating_sub(1));
        let mut cpu_now: Vec<Ns> = k.tasks.iter().map(|t| t.cpu).collect();
        for r in running.iter().flatten() {
            cpu_now[r.task] = r.cpu;
        }
        // The arrays hold the tickets of each currency and the base tickets of the
        // system among the processes the lottery counts: runnable ones (§2.2), or,
        // with option deserved=active, also those asleep for less than ten seconds.
        let active: Vec<bool> = (0..n).map(|t| Self::active(k, t)).collect();
        let counted: Vec<bool> = (0..n)
            .map(|t| if self.opts.count_sleepers { active[t] } else { matches!(k.tasks[t].state, TaskState::Runnable | TaskState::Running(_)) })
            .collect();
        let mut cur_tickets = vec![0.0f64; k.currencies.len()];
        for t in 0..n {
            if counted[t] {
                cur_tickets[k.tasks[t].currency] += self.tickets(k, t);
            }
        }
        let base_total: f64 = (0..k.currencies.len()).filter(|&c| cur_tickets[c] > 0.0).map(|c| k.currencies[c].funding as f64).sum();
        for t in 0..n {
            let used = cpu_now[t].saturating_sub(self.cpu_at_tick[t]) as f64;
            self.cpu_at_tick[t] = cpu_now[t];
            // A process asleep for more than ten seconds is discounted (§4.1).
            let deserved = if active[t] {
                let c = k.tasks[t].currency;
                let mine = self.tickets(k, t);
                let (ct, bt) = if cur_tickets[c] > 0.0 { (cur_tickets[c], base_total) } else { (mine, base_total + k.currencies[c].funding as f64) };
                let share = k.currencies[c].funding as f64 / bt * mine / ct;
                (share * k.ncpus as f64).min(1.0) * SEC as f64
            } else {
                0.0
            };
            let w = &mut self.window[t];
            w.push_back((used, deserved));
            if w.len() > WINDOW {
                w.pop_front();
            }
        }
        Vec::new()
    }
}
