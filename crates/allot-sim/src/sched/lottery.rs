//! Lottery scheduling (Waldspurger & Weihl, "Lottery Scheduling: Flexible
//! Proportional-Share Resource Management", OSDI '94): each runnable task holds
//! tickets in a currency; currencies are funded by tickets of their parent (nested
//! to any depth, §3.3); a draw picks a ticket uniformly at random among the active
//! tickets' base values (§2); a task that uses only a fraction f of its quantum holds
//! compensation tickets, its tickets inflated by 1/f until it next wins (§3.4); the
//! quantum is 100 ms as in their Mach prototype (§4) unless the workload sets one.
//!
//! The draw walks the currency tree: at each node, a Fenwick tree of partial sums
//! over its children (tasks by effective tickets, child currencies by funding if
//! active) picks a child in O(log n) (§4.2 suggests a tree of partial ticket sums).
//! Drawing a currency with probability funding/Σactive funding, then a task with
//! probability tickets/Σactive tickets in it, is exactly the flat draw over base
//! values: P = (F_c/ΣF) · (t/Σt_c) = base value / total base value.

use super::tree::{self, Holder};
use super::{Kernel, Pick, Scheduler, Stop, TaskId, Wake};
use crate::fenwick::Fenwick;
use crate::rng::Rng;
use crate::time::{Ns, MS};

/// Fixed-point scale of weights: sums stay exact integers, draws reproducible.
const FP: f64 = 65536.0;
/// Compensation is capped so weights stay far from overflow (a 1 µs run of a
/// 100 ms quantum already gives 100000×).
const MAX_COMP: f64 = 1e5;

struct Node {
    fen: Fenwick,
    holders: Vec<Holder>,
    parent: Option<usize>,
    slot_in_parent: usize,
    funding: u64,
}

/// The lottery scheduler.
pub struct Lottery {
    rng: Rng,
    quantum: Ns,
    nodes: Vec<Node>,
    slot: Vec<Option<usize>>,
    comp: Vec<f64>,
}

impl Lottery {
    /// A lottery over `k`'s currencies.
    pub fn new(k: &Kernel, seed: u64) -> Lottery {
        let n = k.currencies.len();
        let mut nodes: Vec<Node> = (0..=n)
            .map(|i| Node {
                fen: Fenwick::new(),
                holders: Vec::new(),
                parent: if i == n { None } else { Some(tree::parent(k, i)) },
                slot_in_parent: 0,
                funding: if i == n { 0 } else { k.currencies[i].funding as u64 },
            })
            .collect();
        for c in 0..n {
            let p = nodes[c].parent.unwrap();
            let s = nodes[p].fen.push();
            nodes[p].holders.push(Holder::Node(c));
            nodes[c].slot_in_parent = s;
        }
        Lottery { rng: Rng::new(seed, 1), quantum: k.quantum.unwrap_or(100 * MS), nodes, slot: Vec::new(), comp: Vec::new() }
    }

    fn ensure(&mut self, k: &Kernel, t: TaskId) {
        if self.slot.len() <= t {
            self.slot.resize(t + 1, None);
            self.comp.resize(t + 1, 1.0);
        }
        if self.slot[t].is_none() {
            let c = k.tasks[t].currency;
            let s = self.nodes[c].fen.push();
            self.nodes[c].holders.push(Holder::Task(t));
            self.slot[t] = Some(s);
        }
    }

    /// Sets a task's weight and propagates activity changes up the currency tree.
    fn set_weight(&mut self, k: &Kernel, t: TaskId, w: u64) {
        let mut node = k.tasks[t].currency;
        let mut slot = self.slot[t].unwrap();
        let mut w = w;
        loop {
            let was_active = self.nodes[node].fen.total() > 0;
            self.nodes[node].fen.set(slot, w);
            let active = self.nodes[node].fen.total() > 0;
            if was_active == active {
                return;
            }
            match self.nodes[node].parent {
                None => return,
                Some(p) => {
                    w = if active { self.nodes[node].funding * FP as u64 } else { 0 };
                    slot = self.nodes[node].slot_in_parent;
                    node = p;
                }
            }
        }
    }

    fn weight(&self, k: &Kernel, t: TaskId) -> u64 {
        ((k.tasks[t].tickets.max(1) as f64) * self.comp[t] * FP).round().max(1.0) as u64
    }
}

impl Scheduler for Lottery {
    fn name(&self) -> String {
        "lottery".into()
    }

    fn add(&mut self, k: &Kernel, t: TaskId, _parent: Option<TaskId>) {
        self.ensure(k, t);
        self.comp[t] = 1.0;
        let w = self.weight(k, t);
        self.set_weight(k, t, w);
    }

    fn wake(&mut self, k: &Kernel, t: TaskId, _how: Wake) {
        self.ensure(k, t);
        let w = self.weight(k, t);
        self.set_weight(k, t, w);
    }

    fn pick(&mut self, k: &Kernel, _cpu: usize) -> Option<Pick> {
        let mut node = tree::root(k);
        loop {
            let total = self.nodes[node].fen.total();
            if total == 0 {
                return None;
            }
            let u = self.rng.below(total);
            let s = self.nodes[node].fen.find(u);
            match self.nodes[node].holders[s] {
                Holder::Node(c) => node = c,
                Holder::Task(t) => {
                    // The winner loses its compensation tickets (§3.4) and leaves the
                    // lottery while it runs.
                    self.comp[t] = 1.0;
                    self.set_weight(k, t, 0);
                    return Some(Pick { task: t, slice: self.quantum });
                }
            }
        }
    }

    fn stop(&mut self, k: &Kernel, t: TaskId, ran: Ns, why: Stop) {
        // §3.4: used fraction f of the quantum → tickets × 1/f until it next wins.
        self.comp[t] = if ran < self.quantum { (self.quantum as f64 / ran.max(1) as f64).min(MAX_COMP) } else { 1.0 };
        if why.runnable() {
            let w = self.weight(k, t);
            self.set_weight(k, t, w);
        }
    }

    fn wake_preempts(&self, _k: &Kernel, _w: TaskId, _r: TaskId, _ran: Ns) -> bool {
        false
    }
}
