//! allot's cgroup tree and the *applied* state: what the daemon last wrote to each file.
//! Writes go out only where the plan differs from it; it starts empty (everything is
//! written once after a start, so no adjustment left by a dead daemon survives), and a
//! change made from outside (reconcile.rs) resets an entry so the plan is written again.
//! Every failed write is logged with its path, value and error, once per path and error.

use super::host::{Host, Proc};
use super::registry::JobId;
use allot_linux::cgroup::{CpuController, Max};
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

/// cpu.max period allot uses (the kernel's default).
pub const PERIOD_US: u64 = 100_000;

/// What was last written to one directory (None: not known, write it).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Written {
    /// Weight in allot units.
    pub weight: Option<u32>,
    /// Quota µs per PERIOD_US (Some(None): unlimited).
    pub max: Option<Option<u64>>,
}

/// Why a verified move failed.
#[derive(Debug, Clone, PartialEq)]
pub enum MoveError {
    /// The process exited before or during the move.
    Gone,
    /// The kernel refused, in its words.
    Kernel(String),
}

/// allot's cgroups and what was written to them.
pub struct Tree {
    /// The cpu controller, rooted at allot's root.
    pub cg: Box<dyn CpuController>,
    /// Per directory (relative to allot's root).
    pub applied: HashMap<String, Written>,
    /// Per boosted job, per thread: the slice it had before, to restore.
    pub slices: HashMap<JobId, HashMap<i32, u64>>,
    /// Per job: the slice decision and thread-list generation last applied.
    pub slices_done: HashMap<JobId, (Option<u64>, u64)>,
    failed: HashMap<String, Instant>,
    /// Writes that failed since start.
    pub write_errors: u64,
    rt: Option<Rt>,
}

/// Real-time budget on kernels with RT group scheduling (cgroup v1, CONFIG_RT_GROUP_SCHED):
/// a new cgroup gets `cpu.rt_runtime_us = 0`, so no real-time task could run in a job.
/// allot takes half of the root's runtime that no other cgroup holds (at most half of the
/// root's) for its two trees (3/4 foreground, 1/4 background) and gives every job an equal quantum, budget / 2^k with 2^k ≥ jobs (at
/// least 16), so adding a job rewrites only its own and its currency's runtime except when
/// the count crosses a power of two. Parents are raised before children and children
/// lowered before parents, so the kernel's sum rule holds at every write.
#[derive(Debug)]
struct Rt {
    /// Budget per tree (foreground, background); -1: unlimited (kernel.sched_rt_runtime_us = -1).
    budget: [i64; 2],
    written: HashMap<String, i64>,
}

impl Tree {
    /// A tree over a controller.
    pub fn new(cg: Box<dyn CpuController>) -> Self {
        Self { cg, applied: HashMap::new(), slices: HashMap::new(), slices_done: HashMap::new(), failed: HashMap::new(), write_errors: 0, rt: None }
    }

    fn report(&mut self, what: &str, rel: &str, value: &str, e: &allot_linux::Error) {
        self.write_errors += 1;
        let key = format!("{what} {rel} {e}");
        let now = Instant::now();
        if self.failed.get(&key).is_none_or(|t| now.duration_since(*t) > Duration::from_secs(60)) {
            log::error!("could not {what} {rel} to {value}: {e}");
            self.failed.insert(key, now);
        }
    }

    /// Creates a directory (and its parents) if missing.
    pub fn create(&mut self, rel: &str) -> Result<(), String> {
        if self.cg.exists(rel) {
            return Ok(());
        }
        self.cg.create(rel).map_err(|e| e.to_string())?;
        self.applied.insert(rel.to_string(), Written::default());
        Ok(())
    }

    /// Removes an empty directory and forgets what was written to it.
    pub fn remove(&mut self, rel: &str) -> Result<(), String> {
        self.applied.remove(rel);
        if let Some(rt) = &mut self.rt {
            // A removed cgroup's task group stays among its parent's children until the
            // kernel frees it, its real-time runtime still counted against the parent's:
            // giving it back first keeps the next division from failing with EINVAL.
            rt.written.remove(rel);
            let _ = self.cg.set_rt_runtime(rel, 0);
        }
        self.cg.remove(rel).map_err(|e| e.to_string())
    }

    /// Writes a weight unless it is what was last written.
    pub fn weight(&mut self, rel: &str, w: u32) {
        if self.applied.get(rel).is_some_and(|a| a.weight == Some(w)) {
            return;
        }
        match self.cg.set_weight(rel, w) {
            Ok(()) => self.applied.entry(rel.to_string()).or_default().weight = Some(w),
            Err(e) => {
                self.applied.entry(rel.to_string()).or_default().weight = None;
                self.report("set the weight of", rel, &w.to_string(), &e)
            }
        }
    }

    /// Weighs the scope of currency `rel`'s jobs (systemd: against the user's sessions),
    /// unless it is what was last written. Kept as applied under `rel` + `/#scope`, the key
    /// the backend reports a failed held write under.
    pub fn scope_weight(&mut self, rel: &str, w: u32) {
        let key = format!("{rel}/#scope");
        if self.applied.get(&key).is_some_and(|a| a.weight == Some(w)) {
            return;
        }
        match self.cg.set_scope_weight(rel, w) {
            Ok(()) => self.applied.entry(key).or_default().weight = Some(w),
            Err(e) => {
                self.applied.entry(key).or_default().weight = None;
                self.report("set the scope weight of", rel, &w.to_string(), &e)
            }
        }
    }

    /// Writes cpu.max (None: unlimited) unless it is what was last written.
    pub fn max(&mut self, rel: &str, cpus: Option<f64>) {
        let quota = cpus.map(|c| ((c * PERIOD_US as f64).round() as u64).max(1000));
        if self.applied.get(rel).is_some_and(|a| a.max == Some(quota)) {
            return;
        }
        match self.cg.set_max(rel, quota.map(|q| Max { quota_us: q, period_us: PERIOD_US })) {
            Ok(()) => self.applied.entry(rel.to_string()).or_default().max = Some(quota),
            Err(e) => {
                self.applied.entry(rel.to_string()).or_default().max = None;
                let v = quota.map_or("max".into(), |q| format!("{q} {PERIOD_US}"));
                self.report("set cpu.max of", rel, &v, &e)
            }
        }
    }

    /// Forgets what was written to `rel`, so the next apply writes it again.
    pub fn forget(&mut self, rel: &str) {
        self.applied.insert(rel.to_string(), Written::default());
        self.slices_done.clear();
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
                    let ppid = allot_linux::procfs::stat(p.pid).map(|s| s.ppid).unwrap_or(1);
                    let home = self.cg.path_of(ppid).unwrap_or_else(|_| "/".into());
                    let back = self.cg.move_to_path(&home, p.pid);
                    log::error!("pid {} was reused while it was being moved into {rel}; the new process was put back in {home} ({back:?})", p.pid);
                }
            }
        }
        Err(MoveError::Gone)
    }

    /// Sets up real-time budgets where the kernel has RT group scheduling (see [`Rt`]).
    /// Returns a sentence for `allot status`.
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
        let share = ((root - taken) / 2).min(root / 2).max(0);
        let budget = if root < 0 { [-1, -1] } else { [share * 3 / 4, share / 4] };
        self.rt = Some(Rt { budget, written: HashMap::new() });
        self.rt_assign();
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
    pub fn rt_assign(&mut self) {
        let Some(rt) = &self.rt else { return };
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
            let slots = leaves.len().max(16).next_power_of_two() as i64;
            for (cur, leaf) in leaves {
                let q = if budget < 0 { -1 } else { budget / slots };
                want.insert(leaf, q);
                let e = want.entry(cur).or_insert(0);
                *e = if budget < 0 { -1 } else { *e + q };
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
                Err(e) => errs.push((r.clone(), v, e)),
            }
        }
        for (r, v, e) in errs {
            self.report("set cpu.rt_runtime_us of", &r, &v.to_string(), &e);
        }
    }
}
