//! allot's cgroups and the *applied* state (applied.rs): what the daemon last wrote to each
//! node. Writes go out only where the plan differs from it; it starts empty (everything is
//! written once after a start, so no adjustment left by a dead daemon survives), and a
//! change made from outside (reconcile.rs) resets an entry so the plan is written again.
//! Every failed write is returned as a [`Failure`]; the tick logs and counts them.

use super::applied::{Applied, Failure, Node, Setting, Write};
use super::host::{Host, Proc};
use allot_linux::cgroup::{CpuController, Max};
use allot_model::realtime;
use std::collections::{BTreeMap, HashMap};

pub use super::applied::PERIOD_US;

/// Why a verified move failed.
#[derive(Debug, Clone, PartialEq)]
pub enum MoveError {
    /// The process exited before or during the move.
    Gone,
    /// The kernel refused, in its words.
    Kernel(String),
}

/// allot's cgroups and what was written to them.
pub struct AppliedTree {
    /// The cpu controller, rooted at allot's root.
    cg: Box<dyn CpuController>,
    /// What was last written, per node.
    applied: Applied,
    rt: Option<Rt>,
}

/// Real-time budget on kernels with RT group scheduling (cgroup v1, CONFIG_RT_GROUP_SCHED):
/// a new cgroup gets `cpu.rt_runtime_us = 0`, so no real-time task could run in a job. How
/// the runtime is divided is allot-model's [`allot_model::realtime`]; this writes it,
/// raising parents before children and lowering children before parents, so the kernel's
/// sum rule holds at every write.
#[derive(Debug)]
struct Rt {
    /// Budget per tree (foreground, background); -1: unlimited (kernel.sched_rt_runtime_us = -1).
    budget: [i64; 2],
    written: HashMap<String, i64>,
}

impl AppliedTree {
    /// A tree over a controller.
    pub fn new(cg: Box<dyn CpuController>) -> Self {
        Self { cg, applied: Applied::default(), rt: None }
    }

    /// The cpu controller, rooted at allot's root.
    pub fn cg(&self) -> &dyn CpuController {
        self.cg.as_ref()
    }

    /// What was last written, per node.
    pub fn applied(&self) -> &Applied {
        &self.applied
    }

    /// What was last written, to forget (outside changes, lost events, held writes).
    pub fn applied_mut(&mut self) -> &mut Applied {
        &mut self.applied
    }

    /// A directory adopted at start: known, nothing written yet.
    pub fn adopted(&mut self, rel: &str) {
        if let Some(n) = Node::of_rel(rel) {
            self.applied.made(n);
        }
    }

    /// Creates a directory (and its parents) if missing.
    pub fn create(&mut self, rel: &str) -> Result<(), String> {
        if self.cg.exists(rel) {
            return Ok(());
        }
        self.cg.create(rel).map_err(|e| e.to_string())?;
        self.adopted(rel);
        Ok(())
    }

    /// Removes an empty directory and forgets what was written to it.
    pub fn remove(&mut self, rel: &str) -> Result<(), String> {
        if let Some(n) = Node::of_rel(rel) {
            self.applied.removed(&n);
        }
        if let Some(rt) = &mut self.rt {
            // A removed cgroup's task group stays among its parent's children until the
            // kernel frees it, its real-time runtime still counted against the parent's:
            // giving it back first keeps the next division from failing with EINVAL.
            rt.written.remove(rel);
            let _ = self.cg.set_rt_runtime(rel, 0);
        }
        self.cg.remove(rel).map_err(|e| e.to_string())
    }

    /// Writes one value unless it is what was last written to its node.
    pub fn write(&mut self, w: &Write) -> Result<(), Failure> {
        if self.applied.holds(&w.node, w.setting) {
            return Ok(());
        }
        let rel = w.rel.as_str();
        let r = match w.setting {
            Setting::Weight(v) => self.cg.set_weight(rel, v).map_err(|e| ("set the weight of", v.to_string(), e)),
            // A scope's weight exists only inside systemd's delegation: nothing to do elsewhere.
            Setting::ScopeWeight(v) => {
                self.cg.delegation().map_or(Ok(()), |d| d.set_scope_weight(rel, v)).map_err(|e| ("set the scope weight of", v.to_string(), e))
            }
            Setting::Max(cpus) => {
                let quota = Setting::quota_us(cpus);
                self.cg.set_max(rel, quota.map(|q| Max { quota_us: q, period_us: PERIOD_US })).map_err(|e| {
                    let v = quota.map_or("max".into(), |q| format!("{q} {PERIOD_US}"));
                    ("set cpu.max of", v, e)
                })
            }
        };
        self.applied.record(&w.node, w.setting, r.is_ok());
        r.map_err(|(what, value, e)| Failure { what, place: rel.to_string(), value, error: e.to_string() })
    }

    /// Writes every value that differs from what was last written; returns every failure.
    pub fn apply(&mut self, writes: &[Write]) -> Vec<Failure> {
        writes.iter().filter_map(|w| self.write(w).err()).collect()
    }

    /// Moves a process into `rel`, proving it is the process held: alive before the write
    /// and after it (while a pidfd is alive its pid cannot be reused, so the pid written
    /// was its). If it exited in between and another process took its pid in that instant
    /// and was moved instead, that process is put back where it was born (its parent's
    /// cgroup) and the move is refused.
    pub fn move_verified(&mut self, host: &dyn Host, p: &Proc, rel: &str) -> Result<(), MoveError> {
        if !host.alive(p) {
            return Err(MoveError::Gone);
        }
        let r = self.cg.move_pid(rel, p.pid);
        if host.alive(p) {
            return r.map_err(|e| if e.is_gone() { MoveError::Gone } else { MoveError::Kernel(e.to_string()) });
        }
        if r.is_ok() && host.start_of(p.pid).is_some_and(|s| s != p.start) {
            if let Ok(Some(now)) = self.cg.rel_of(p.pid) {
                if now == rel {
                    let ppid = allot_linux::process::procfs::stat(p.pid).map(|s| s.ppid).unwrap_or(1);
                    let home = self.cg.path_of(ppid).unwrap_or_else(|_| "/".into());
                    let back = self.cg.move_to_path(&home, p.pid);
                    log::error!("pid {} was reused while it was being moved into {rel}; the new process was put back in {home} ({back:?})", p.pid);
                }
            }
        }
        Err(MoveError::Gone)
    }

    /// Sets up real-time budgets where the kernel has RT group scheduling (see [`Rt`]),
    /// assigned by [`Self::rt_assign`]. Returns a sentence for `allot status`.
    pub fn rt_setup(&mut self) -> String {
        let top = self.cg.mount().join("cpu.rt_runtime_us");
        let Ok(text) = std::fs::read_to_string(&top) else {
            return "no real-time group scheduling in this kernel: real-time tasks work in jobs as anywhere".into();
        };
        let root: i64 = text.trim().parse().unwrap_or(0);
        // What the root's other children (other managers, other allot trees) do not hold.
        let mine = [self.cg.dir(""), self.cg.dir(super::registry::BACKGROUND)];
        let taken: i64 = std::fs::read_dir(self.cg.mount())
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().is_dir() && !mine.contains(&e.path()))
            .filter_map(|e| std::fs::read_to_string(e.path().join("cpu.rt_runtime_us")).ok()?.trim().parse::<i64>().ok())
            .filter(|&v| v > 0)
            .sum();
        let share = realtime::allot_share(root, taken);
        let budget = realtime::budgets(root, taken);
        self.rt = Some(Rt { budget, written: HashMap::new() });
        if root < 0 {
            "real-time group scheduling, unlimited (kernel.sched_rt_runtime_us = -1): every job may run real-time tasks".into()
        } else if share == 0 {
            "real-time group scheduling, but other cgroups hold all the real-time runtime: real-time tasks cannot run in allot's jobs".into()
        } else {
            format!(
                "real-time group scheduling (cgroup v1): allot's jobs share {} µs of real-time CPU per period, equally, so real-time tasks work in every job",
                budget[0] + budget[1]
            )
        }
    }

    /// Re-divides the real-time budget after jobs came or went (no-op without RT groups).
    pub fn rt_assign(&mut self) -> Vec<Failure> {
        let Some(rt) = &self.rt else { return vec![] };
        let mut want: BTreeMap<String, i64> = BTreeMap::new();
        for (t, base) in [(0usize, String::new()), (1, super::registry::BACKGROUND.to_string())] {
            let budget = rt.budget[t];
            let cur_base = |c: &str| if base.is_empty() { c.to_string() } else { format!("{base}/{c}") };
            let mut leaves: Vec<(String, String)> = vec![];
            for c in self.cg.children(&base).unwrap_or_default() {
                if base.is_empty() && c == super::registry::BACKGROUND {
                    continue;
                }
                for j in self.cg.children(&cur_base(&c)).unwrap_or_default() {
                    leaves.push((cur_base(&c), format!("{}/{j}", cur_base(&c))));
                }
            }
            want.insert(base.clone(), budget);
            let q = realtime::per_job(budget, leaves.len());
            let mut per_currency: BTreeMap<String, usize> = BTreeMap::new();
            for (cur, leaf) in leaves.iter() {
                want.insert(leaf.clone(), q);
                *per_currency.entry(cur.clone()).or_default() += 1;
            }
            for (cur, n) in per_currency {
                want.insert(cur, realtime::per_currency(budget, leaves.len(), n));
            }
        }
        let rt = self.rt.as_mut().expect("checked above");
        // What the kernel has where this daemon has not written yet (new or adopted).
        for r in want.keys() {
            if !rt.written.contains_key(r) {
                if let Ok(Some(v)) = self.cg.rt_runtime(r) {
                    rt.written.insert(r.clone(), v);
                }
            }
        }
        let inf = |x: i64| if x < 0 { i64::MAX } else { x };
        let depth = |r: &str| if r.is_empty() { 0 } else { r.matches('/').count() + 1 };
        let mut down: Vec<(&String, i64)> =
            want.iter().filter(|(r, &v)| rt.written.get(*r).is_some_and(|&w| inf(v) < inf(w))).map(|(r, &v)| (r, v)).collect();
        let mut up: Vec<(&String, i64)> =
            want.iter().filter(|(r, &v)| rt.written.get(*r).is_none_or(|&w| inf(v) > inf(w))).map(|(r, &v)| (r, v)).collect();
        down.sort_by_key(|(r, _)| std::cmp::Reverse(depth(r)));
        up.sort_by_key(|(r, _)| depth(r));
        let mut errs = vec![];
        for (r, v) in down.into_iter().chain(up) {
            if rt.written.get(r) == Some(&v) {
                continue;
            }
            match self.cg.set_rt_runtime(r, v) {
                Ok(()) => {
                    rt.written.insert(r.clone(), v);
                }
                Err(e) => errs.push(Failure { what: "set cpu.rt_runtime_us of", place: r.clone(), value: v.to_string(), error: e.to_string() }),
            }
        }
        errs
    }
}
