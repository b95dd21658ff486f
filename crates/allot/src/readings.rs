//! What the CLI reads from the kernel itself, beside what the daemon reports, for `allot
//! top` and `allot metrics`: a job's throttling (`cpu.stat`) and, on cgroup v2, its CPU
//! pressure (`cpu.pressure`) from its cgroup directory (world-readable files), and its
//! run-queue wait from `/proc/PID/task/TID/schedstat` of the processes the daemon shows
//! this caller (the starved-task tutorial: the kernel's own accounting of time spent runnable but not
//! running). Jobs whose processes the daemon hides from this caller get no wait: the CLI
//! never looks past what `show` reveals.
//!
//! Wait is a rate, so it needs two samples: [`Sampler::sample`] remembers every thread's
//! counters and reports the change since its previous call.

use crate::proto::{ShowView, StatusView};
use allot_linux::cgroup::stat::{self, Throttling};
use allot_linux::cgroup::CpuController;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::Instant;

/// CPU pressure of a job's cgroup (cgroup v2 `cpu.pressure`, PSI).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Pressure {
    /// Share of the last 10 s in which some of its threads waited for a CPU, percent.
    pub some_avg10: f64,
    /// Total time in which some of its threads waited for a CPU, seconds.
    pub some_s: f64,
    /// Total time in which all of its non-idle threads waited at once, seconds.
    pub full_s: Option<f64>,
}

/// Run-queue wait of a job's visible threads over the last sampling window.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Wait {
    /// Waiting time over runnable time (waiting + running), 0..1: Ross and Abel's runtime
    /// ratio turned around (1 − cpu / (cpu + ready)). 0 when nothing ran or waited.
    pub ratio: f64,
    /// Threads waiting on average over the window (waiting seconds per second).
    pub threads: f64,
}

/// The kernel's readings of one job; None where this caller cannot read them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct JobKernel {
    /// Its cgroup's throttling counters.
    pub throttling: Option<Throttling>,
    /// Its cgroup's CPU pressure (cgroup v2 only).
    pub pressure: Option<Pressure>,
    /// Its visible threads' run-queue wait (from the second sample on).
    pub wait: Option<Wait>,
}

/// Kernel readings of every job, by job id, and what could not be read at all.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Readings {
    /// By job id as `show` prints it.
    pub jobs: BTreeMap<String, JobKernel>,
    /// Why a whole kind of reading is missing, in words (e.g. "no per-cgroup PSI on
    /// cgroup v1").
    pub notes: Vec<String>,
    /// The window the wait was measured over, seconds (None on the first sample).
    pub window_s: Option<f64>,
}

/// Reads the kernel for the jobs of successive `show` replies.
#[derive(Debug)]
pub struct Sampler {
    /// allot's own tree as this process sees it; None on a systemd host (jobs' directories
    /// come with `show`) or where it cannot be read.
    cg: Option<Box<dyn CpuController>>,
    /// Jobs' directories are read as `show` gives them (the daemon's view equals ours).
    by_dir: bool,
    v2: bool,
    note: Option<String>,
    /// Every thread's (run ns, wait ns) at the previous sample.
    last: HashMap<i32, (u64, u64)>,
    at: Option<Instant>,
}

impl Sampler {
    /// Finds allot's cgroup tree as the daemon reports it. Where this process sees
    /// another cpu hierarchy (another mount namespace), throttling and pressure are not
    /// read and a note says why.
    pub fn new(status: &StatusView) -> Sampler {
        let root = Path::new(&status.cgroup_root);
        let v2 = status.cgroup_version == "v2";
        if status.manager == "systemd" {
            // Jobs are in scopes systemd made; `show` names each one's directory. Read them
            // only where this process sees the same cgroup2 mount as the daemon.
            let same = allot_linux::cgroup::is_cgroup2_mount(root);
            let note =
                (!same).then(|| format!("throttling and pressure not shown: the daemon's cgroup2 mount {} is not one here", status.cgroup_root));
            return Sampler { cg: None, by_dir: same, v2, note, last: HashMap::new(), at: None };
        }
        let name = root.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let (cg, note) = match allot_linux::cgroup::detect(name) {
            Ok(cg) if cg.root() == root => (Some(cg), None),
            Ok(cg) => (
                None,
                Some(format!(
                    "throttling and pressure not shown: the daemon's cgroup root is {} but this process sees it at {}",
                    status.cgroup_root,
                    cg.root().display()
                )),
            ),
            Err(e) => (None, Some(format!("throttling and pressure not shown: {e}"))),
        };
        Sampler { cg, by_dir: false, v2, note, last: HashMap::new(), at: None }
    }

    /// Reads every job of `show` now; wait is the change since the previous call.
    pub fn sample(&mut self, show: &ShowView) -> Readings {
        let now = Instant::now();
        let window = self.at.map(|t| now.duration_since(t).as_secs_f64()).filter(|w| *w > 0.0);
        let mut threads = HashMap::new();
        let mut out = Readings { window_s: window, ..Readings::default() };
        out.notes.extend(self.note.clone());
        if !self.v2 {
            out.notes.push("no pressure (PSI) per cgroup on cgroup v1".into());
        }
        if show.jobs.iter().any(|j| j.pids.is_none()) {
            out.notes.push("no wait for jobs whose processes are hidden from you".into());
        }
        for j in &show.jobs {
            let mut k = JobKernel::default();
            let dir = match &self.cg {
                Some(cg) => Some(cg.dir(&j.cgroup)),
                None => (self.by_dir && !j.dir.is_empty()).then(|| std::path::PathBuf::from(&j.dir)),
            };
            if let Some(dir) = dir {
                k.throttling = stat::throttling(&dir).ok();
                if self.v2 {
                    k.pressure = stat::pressure(&dir).ok().flatten().map(|p| Pressure {
                        some_avg10: p.some.avg10,
                        some_s: p.some.total_us as f64 / 1e6,
                        full_s: p.full.map(|f| f.total_us as f64 / 1e6),
                    });
                }
            }
            if let Some(pids) = &j.pids {
                let (mut run, mut wait, mut known) = (0u64, 0u64, false);
                for &pid in pids {
                    for tid in allot_linux::process::procfs::tids(pid).unwrap_or_default() {
                        let Ok(s) = allot_linux::process::procfs::task_schedstat(pid, tid) else { continue };
                        threads.insert(tid, (s.run_ns, s.wait_ns));
                        // A thread seen before adds what it did since; a new one (or a
                        // recycled id whose counters went back) starts counting now.
                        if let Some(&(r0, w0)) = self.last.get(&tid) {
                            if s.run_ns >= r0 && s.wait_ns >= w0 {
                                run += s.run_ns - r0;
                                wait += s.wait_ns - w0;
                                known = true;
                            }
                        }
                    }
                }
                if let (Some(w), true) = (window, known) {
                    k.wait = Some(wait_of(run, wait, w));
                }
            }
            out.jobs.insert(j.id.clone(), k);
        }
        self.last = threads;
        self.at = Some(now);
        out
    }
}

/// Wait over a window from the run and wait time (ns) added in it.
fn wait_of(run_ns: u64, wait_ns: u64, window_s: f64) -> Wait {
    let busy = run_ns + wait_ns;
    Wait { ratio: if busy == 0 { 0.0 } else { wait_ns as f64 / busy as f64 }, threads: wait_ns as f64 / 1e9 / window_s }
}

#[cfg(test)]
#[path = "readings_tests.rs"]
mod tests;
