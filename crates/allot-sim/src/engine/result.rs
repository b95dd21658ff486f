//! What a run produced: per-task results, progress samples and the run's totals,
//! and the engine's sampling and final accounting that fill them.

use std::collections::BTreeMap;

use serde::Serialize;

use super::Sim;
use crate::sched::TaskState;
use crate::time::Ns;
use crate::workload::Behaviour;

/// One dispatch-latency observation: the task became runnable at `at` and was
/// dispatched `lat` later (Petrou et al. 1999 §5.2: setrunqueue() → chosen).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Latency {
    /// When it became runnable.
    pub at: Ns,
    /// Runnable → running.
    pub lat: Ns,
    /// True if it became runnable by waking (false: requeued after preemption/expiry).
    pub wake: bool,
}

/// Per-task outcome.
#[derive(Debug, Clone, Default)]
pub struct TaskResult {
    /// Name (forked children are "parent/N").
    pub name: String,
    /// Currency name.
    pub currency: String,
    /// Job name.
    pub job: String,
    /// Declared in the workload (not forked).
    pub top_level: bool,
    /// CPU time.
    pub cpu: Ns,
    /// Time runnable but not running.
    pub ready: Ns,
    /// Dispatch latencies.
    pub latencies: Vec<Latency>,
    /// Times it left the CPU by its own choice.
    pub voluntary: u64,
    /// Times it was taken off the CPU.
    pub involuntary: u64,
    /// Times it was dispatched.
    pub dispatches: u64,
    /// Completed iterations (frames, events, cycles, children).
    pub iterations: u64,
    /// Created at.
    pub created: Ns,
    /// Exited at.
    pub exited: Option<Ns>,
    /// Spinner probe: lateness of each deadline that found it off the CPU.
    pub lateness: Vec<Ns>,
    /// Spinner probe: number of deadlines observed.
    pub probes: u64,
}

/// Everything a run produced.
#[derive(Debug, Clone)]
pub struct RunResult {
    /// Scheduler label.
    pub scheduler: String,
    /// Seed.
    pub seed: u64,
    /// CPUs.
    pub cpus: usize,
    /// Simulated duration.
    pub duration: Ns,
    /// All tasks, workload tasks first in declaration order, then forked children.
    pub tasks: Vec<TaskResult>,
    /// Sample times.
    pub sample_times: Vec<Ns>,
    /// CPU time of each workload (top-level) task at each sample time.
    pub progress: Vec<Vec<Ns>>,
    /// CPU time of each job at each sample time.
    pub job_progress: BTreeMap<String, Vec<Ns>>,
    /// CPU time of each currency at each sample time.
    pub currency_progress: BTreeMap<String, Vec<Ns>>,
    /// Scheduling decisions taken by the scheduler (picks).
    pub decisions: u64,
    /// Dispatches that changed the task on a CPU.
    pub context_switches: u64,
    /// Idle CPU time summed over CPUs.
    pub idle: Ns,
}

impl Sim {
    pub(super) fn live_cpu(&self, t: usize) -> Ns {
        let tr = &self.tasks[t];
        match self.k.tasks[t].state {
            TaskState::Running(_) => tr.res.cpu + (self.k.now - tr.seg_start),
            _ => tr.res.cpu,
        }
    }

    pub(super) fn sample(&mut self) {
        self.sample_times.push(self.k.now);
        for t in 0..self.top_level {
            let v = self.live_cpu(t);
            self.progress[t].push(v);
        }
        let mut job = self.job_cpu.clone();
        let mut cur = self.cur_cpu.clone();
        for c in &self.cpus {
            if let Some(t) = c.cur {
                let d = self.k.now - self.tasks[t].seg_start;
                job[self.tasks[t].job] += d;
                cur[self.k.tasks[t].currency] += d;
            }
        }
        for (j, v) in job.into_iter().enumerate() {
            self.job_progress[j].push(v);
        }
        for (j, v) in cur.into_iter().enumerate() {
            self.cur_progress[j].push(v);
        }
    }

    pub(super) fn finish(mut self) -> RunResult {
        self.k.now = self.duration;
        for c in 0..self.cpus.len() {
            match self.cpus[c].cur {
                Some(t) => self.account(t),
                None => self.idle += self.duration - self.cpus[c].idle_since,
            }
        }
        if self.sample_times.last() != Some(&self.duration) {
            self.sample();
        }
        for t in 0..self.tasks.len() {
            if let Behaviour::Spinner { period } = self.tasks[t].behaviour {
                let tr = &mut self.tasks[t];
                tr.res.probes = self.duration.saturating_sub(tr.start).div_ceil(period);
            }
            if self.k.tasks[t].state == TaskState::Runnable {
                let tr = &mut self.tasks[t];
                tr.res.ready += self.duration - tr.runnable_since;
            }
        }
        let jobs = self.jobs.clone();
        let job_progress = jobs.into_iter().zip(self.job_progress).collect();
        let currency_progress = self.k.currencies.iter().map(|c| c.name.clone()).zip(self.cur_progress).collect();
        RunResult {
            scheduler: self.sched_label,
            seed: self.seed,
            cpus: self.cpus.len(),
            duration: self.duration,
            tasks: self.tasks.into_iter().map(|t| t.res).collect(),
            sample_times: self.sample_times,
            progress: self.progress,
            job_progress,
            currency_progress,
            decisions: self.decisions,
            context_switches: self.context_switches,
            idle: self.idle,
        }
    }
}
