//! Stride scheduling (Waldspurger & Weihl, "Stride Scheduling: Deterministic
//! Proportional-Share Resource Management", MIT/LCS/TM-528, 1995): each client has
//! stride = stride1 / tickets and a pass; the client with the minimum pass runs and
//! its pass advances by stride × (time used / quantum) (§3, fractional quanta §3.3);
//! a global pass advancing at stride1 / (total active tickets) places joining
//! clients (pass = global_pass + remain) and remembers leaving ones (remain = pass −
//! global_pass) (§3.2 dynamic participation).
//!
//! Currencies use hierarchical stride scheduling (§4.4): each currency is a client of
//! its parent with tickets = its funding; a decision descends from the base currency
//! choosing the minimum-pass child at each level, and the time used is charged at
//! every level. Time is charged in nanoseconds: pass += ns × stride1 / tickets.

use std::collections::BTreeSet;

use super::tree::{self, Holder};
use super::{Kernel, Pick, Scheduler, Stop, TaskId, Wake};
use crate::time::{Ns, MS};

const STRIDE1: u128 = 1 << 32;
/// Passes start far from zero so that negative remains never underflow.
const ORIGIN: i128 = 1 << 100;

#[derive(Default)]
struct Node {
    set: BTreeSet<(i128, Holder)>,
    global_pass: i128,
    active: u64,
    pass: i128,
    remain: i128,
    key: Option<i128>,
    parent: Option<usize>,
    funding: u64,
}

/// The stride scheduler.
pub struct Stride {
    quantum: Ns,
    nodes: Vec<Node>,
    pass: Vec<i128>,
    remain: Vec<Option<i128>>,
    key: Vec<Option<i128>>,
}

fn stride_of(ns: Ns, tickets: u64) -> i128 {
    (ns as u128 * STRIDE1 / tickets.max(1) as u128) as i128
}

impl Stride {
    /// A stride scheduler over `k`'s currencies.
    pub fn new(k: &Kernel) -> Stride {
        let n = k.currencies.len();
        let nodes = (0..=n)
            .map(|i| Node {
                global_pass: ORIGIN,
                pass: ORIGIN,
                parent: if i == n { None } else { Some(tree::parent(k, i)) },
                funding: if i == n { 1 } else { k.currencies[i].funding as u64 },
                ..Default::default()
            })
            .collect();
        Stride { quantum: k.quantum.unwrap_or(100 * MS), nodes, pass: Vec::new(), remain: Vec::new(), key: Vec::new() }
    }

    fn ensure(&mut self, t: TaskId) {
        if self.pass.len() <= t {
            self.pass.resize(t + 1, ORIGIN);
            self.remain.resize(t + 1, None);
            self.key.resize(t + 1, None);
        }
    }

    /// A node becomes active in its parent (§3.2 client_join), recursively.
    fn node_join(&mut self, n: usize) {
        let Some(p) = self.nodes[n].parent else {
            return;
        };
        let f = self.nodes[n].funding;
        let g = self.nodes[p].global_pass;
        self.nodes[n].pass = g + self.nodes[n].remain;
        let was = self.nodes[p].active;
        self.nodes[p].active += f;
        if was == 0 {
            self.node_join(p);
        }
    }

    fn node_leave(&mut self, n: usize) {
        let Some(p) = self.nodes[n].parent else {
            return;
        };
        let f = self.nodes[n].funding;
        self.nodes[n].remain = self.nodes[n].pass - self.nodes[p].global_pass;
        self.nodes[p].active -= f;
        if self.nodes[p].active == 0 {
            self.node_leave(p);
        }
    }

    /// Inserts a holder into node `n`'s selectable set; a node with a non-empty set is
    /// selectable in its parent.
    fn insert(&mut self, n: usize, pass: i128, h: Holder) {
        let was_empty = self.nodes[n].set.is_empty();
        self.nodes[n].set.insert((pass, h));
        if was_empty {
            if let Some(p) = self.nodes[n].parent {
                let np = self.nodes[n].pass;
                self.nodes[n].key = Some(np);
                self.insert(p, np, Holder::Node(n));
            }
        }
    }

    fn remove(&mut self, n: usize, pass: i128, h: Holder) {
        self.nodes[n].set.remove(&(pass, h));
        if self.nodes[n].set.is_empty() {
            if let (Some(p), Some(key)) = (self.nodes[n].parent, self.nodes[n].key.take()) {
                self.remove(p, key, Holder::Node(n));
            }
        }
    }

    fn join(&mut self, k: &Kernel, t: TaskId) {
        let c = k.tasks[t].currency;
        let tickets = k.tasks[t].tickets.max(1) as u64;
        let remain = self.remain[t].unwrap_or_else(|| stride_of(self.quantum, tickets));
        self.pass[t] = self.nodes[c].global_pass + remain;
        let was = self.nodes[c].active;
        self.nodes[c].active += tickets;
        if was == 0 {
            self.node_join(c);
        }
        self.make_selectable(k, t);
    }

    fn make_selectable(&mut self, k: &Kernel, t: TaskId) {
        let c = k.tasks[t].currency;
        self.key[t] = Some(self.pass[t]);
        self.insert(c, self.pass[t], Holder::Task(t));
    }

    /// Charges `ran` to the task and every currency above it.
    fn charge(&mut self, k: &Kernel, t: TaskId, ran: Ns) {
        let c = k.tasks[t].currency;
        self.pass[t] += stride_of(ran, k.tasks[t].tickets.max(1) as u64);
        let mut n = c;
        loop {
            let active = self.nodes[n].active;
            if active > 0 {
                self.nodes[n].global_pass += stride_of(ran, active);
            }
            let Some(p) = self.nodes[n].parent else { break };
            let f = self.nodes[n].funding;
            let new_pass = self.nodes[n].pass + stride_of(ran, f);
            if let Some(key) = self.nodes[n].key {
                self.nodes[p].set.remove(&(key, Holder::Node(n)));
                self.nodes[p].set.insert((new_pass, Holder::Node(n)));
                self.nodes[n].key = Some(new_pass);
            }
            self.nodes[n].pass = new_pass;
            n = p;
        }
    }
}

impl Scheduler for Stride {
    fn name(&self) -> String {
        "stride".into()
    }

    fn add(&mut self, k: &Kernel, t: TaskId, _parent: Option<TaskId>) {
        self.ensure(t);
        self.remain[t] = None;
        self.join(k, t);
    }

    fn wake(&mut self, k: &Kernel, t: TaskId, _how: Wake) {
        self.ensure(t);
        self.join(k, t);
    }

    fn pick(&mut self, k: &Kernel, _cpu: usize) -> Option<Pick> {
        let mut n = tree::root(k);
        loop {
            let &(_, h) = self.nodes[n].set.iter().next()?;
            match h {
                Holder::Node(c) => n = c,
                Holder::Task(t) => {
                    let key = self.key[t].take().unwrap();
                    self.remove(k.tasks[t].currency, key, Holder::Task(t));
                    return Some(Pick { task: t, slice: self.quantum });
                }
            }
        }
    }

    fn stop(&mut self, k: &Kernel, t: TaskId, ran: Ns, why: Stop) {
        self.charge(k, t, ran);
        if why.runnable() {
            self.make_selectable(k, t);
        } else {
            let c = k.tasks[t].currency;
            self.remain[t] = Some(self.pass[t] - self.nodes[c].global_pass);
            self.nodes[c].active -= k.tasks[t].tickets.max(1) as u64;
            if self.nodes[c].active == 0 {
                self.node_leave(c);
            }
        }
    }

    fn wake_preempts(&self, _k: &Kernel, _w: TaskId, _r: TaskId, _ran: Ns) -> bool {
        false
    }
}
