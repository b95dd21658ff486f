//! Metrics over a run: CPU share in a window (per task, job, currency), dispatch
//! latency statistics, runtime ratio = cpu / (cpu + ready) (Ross and Abel 2000 §5.2.3), and the
//! serialisable summary printed by `allot-lab sim run`.

use serde::Serialize;

use crate::engine::{RunResult, TaskResult};
use crate::time::{Ns, SEC};

/// Mean, standard deviation, max (ms) and count.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Stats {
    /// Mean.
    pub mean: f64,
    /// Population standard deviation.
    pub std: f64,
    /// Maximum.
    pub max: f64,
    /// Observations.
    pub n: usize,
}

/// Stats of values (already in the unit wanted).
pub fn stats(v: &[f64]) -> Stats {
    if v.is_empty() {
        return Stats::default();
    }
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
    Stats { mean, std: var.sqrt(), max: v.iter().cloned().fold(f64::MIN, f64::max), n: v.len() }
}

/// The task named `name` (panics if absent: scenario code names its own tasks).
pub fn task<'a>(r: &'a RunResult, name: &str) -> &'a TaskResult {
    r.tasks.iter().find(|t| t.name == name).unwrap_or_else(|| panic!("no task {name}"))
}

fn idx(r: &RunResult, at: Ns) -> usize {
    match r.sample_times.binary_search(&at) {
        Ok(i) => i,
        Err(i) => i.saturating_sub(1).min(r.sample_times.len() - 1),
    }
}

fn window(series: &[Ns], r: &RunResult, from: Ns, to: Ns) -> f64 {
    let (a, b) = (idx(r, from), idx(r, to));
    let dt = r.sample_times[b].saturating_sub(r.sample_times[a]);
    if dt == 0 {
        return 0.0;
    }
    (series[b] - series[a]) as f64 / dt as f64
}

/// CPU share (fraction of one CPU) of a workload task in [from, to).
pub fn share(r: &RunResult, name: &str, from: Ns, to: Ns) -> f64 {
    let i = r.tasks.iter().position(|t| t.name == name && t.top_level).unwrap_or_else(|| panic!("no task {name}"));
    window(&r.progress[i], r, from, to)
}

/// CPU share of a job (all its processes) in [from, to).
pub fn job_share(r: &RunResult, job: &str, from: Ns, to: Ns) -> f64 {
    window(&r.job_progress[job], r, from, to)
}

/// CPU share of a currency in [from, to).
pub fn currency_share(r: &RunResult, cur: &str, from: Ns, to: Ns) -> f64 {
    window(&r.currency_progress[cur], r, from, to)
}

/// CPU time of a workload task at time `at` (from samples).
pub fn cpu_at(r: &RunResult, name: &str, at: Ns) -> Ns {
    let i = r.tasks.iter().position(|t| t.name == name && t.top_level).unwrap();
    r.progress[i][idx(r, at)]
}

/// Dispatch latency stats (ms) of a task for latencies that began in [from, to).
pub fn latency(r: &RunResult, name: &str, from: Ns, to: Ns) -> Stats {
    let v: Vec<f64> = task(r, name).latencies.iter().filter(|l| l.at >= from && l.at < to).map(|l| l.lat as f64 / 1e6).collect();
    stats(&v)
}

/// Runtime ratio of all processes of a job (Ross and Abel 2000 §5.2.3).
pub fn runtime_ratio(r: &RunResult, job: &str) -> f64 {
    let (c, rd) = r.tasks.iter().filter(|t| t.job == job).fold((0u64, 0u64), |a, t| (a.0 + t.cpu, a.1 + t.ready));
    if c + rd == 0 {
        0.0
    } else {
        c as f64 / (c + rd) as f64
    }
}

/// Summary of one task.
#[derive(Debug, Clone, Serialize)]
pub struct TaskSummary {
    /// Name.
    pub name: String,
    /// Currency.
    pub currency: String,
    /// Job.
    pub job: String,
    /// CPU seconds.
    pub cpu_s: f64,
    /// CPU share over the run (of one CPU).
    pub share: f64,
    /// Seconds runnable but waiting.
    pub ready_s: f64,
    /// cpu / (cpu + ready).
    pub runtime_ratio: f64,
    /// Dispatch latency, ms.
    pub latency_ms: Stats,
    /// Dispatches.
    pub dispatches: u64,
    /// Voluntary switches.
    pub voluntary: u64,
    /// Involuntary switches.
    pub involuntary: u64,
    /// Completed iterations.
    pub iterations: u64,
    /// Exit time, s.
    pub exited_s: Option<f64>,
    /// Spinner probe: worst lateness, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worst_lateness_ms: Option<f64>,
}

/// Share of a group (job or currency).
#[derive(Debug, Clone, Serialize)]
pub struct GroupSummary {
    /// Name.
    pub name: String,
    /// CPU seconds.
    pub cpu_s: f64,
    /// Share of one CPU over the run.
    pub share: f64,
    /// Processes (forked ones included).
    pub processes: usize,
    /// Runtime ratio of its processes.
    pub runtime_ratio: f64,
}

/// Summary of a run.
#[derive(Debug, Clone, Serialize)]
pub struct RunSummary {
    /// Run label.
    pub label: String,
    /// Scheduler.
    pub scheduler: String,
    /// Seed.
    pub seed: u64,
    /// CPUs.
    pub cpus: usize,
    /// Simulated seconds.
    pub duration_s: f64,
    /// Scheduling decisions.
    pub decisions: u64,
    /// Decisions per simulated second.
    pub decisions_per_s: f64,
    /// Context switches.
    pub context_switches: u64,
    /// Idle fraction of CPU capacity.
    pub idle: f64,
    /// Workload tasks.
    pub tasks: Vec<TaskSummary>,
    /// Jobs.
    pub jobs: Vec<GroupSummary>,
    /// Currencies.
    pub currencies: Vec<GroupSummary>,
    /// Sample times, s.
    pub progress_t_s: Vec<f64>,
    /// CPU seconds of each workload task at each sample.
    pub progress_cpu_s: Vec<(String, Vec<f64>)>,
}

fn s(ns: Ns) -> f64 {
    ns as f64 / SEC as f64
}

/// Builds the summary; `every` thins the progress series (1 = every sample).
pub fn summarize(label: &str, r: &RunResult, every: usize) -> RunSummary {
    let dur = r.duration as f64;
    let tasks = r
        .tasks
        .iter()
        .filter(|t| t.top_level)
        .map(|t| {
            let lat: Vec<f64> = t.latencies.iter().map(|l| l.lat as f64 / 1e6).collect();
            TaskSummary {
                name: t.name.clone(),
                currency: t.currency.clone(),
                job: t.job.clone(),
                cpu_s: s(t.cpu),
                share: t.cpu as f64 / dur,
                ready_s: s(t.ready),
                runtime_ratio: if t.cpu + t.ready == 0 { 0.0 } else { t.cpu as f64 / (t.cpu + t.ready) as f64 },
                latency_ms: stats(&lat),
                dispatches: t.dispatches,
                voluntary: t.voluntary,
                involuntary: t.involuntary,
                iterations: t.iterations,
                exited_s: t.exited.map(s),
                worst_lateness_ms: if t.probes > 0 || !t.lateness.is_empty() {
                    Some(t.lateness.iter().copied().max().unwrap_or(0) as f64 / 1e6)
                } else {
                    None
                },
            }
        })
        .collect();
    let group = |name: &str, series: &Vec<Ns>, f: &dyn Fn(&TaskResult) -> bool| {
        let cpu = *series.last().unwrap_or(&0);
        let members: Vec<&TaskResult> = r.tasks.iter().filter(|t| f(t)).collect();
        let (c, rd) = members.iter().fold((0u64, 0u64), |a, t| (a.0 + t.cpu, a.1 + t.ready));
        GroupSummary {
            name: name.to_string(),
            cpu_s: s(cpu),
            share: cpu as f64 / dur,
            processes: members.len(),
            runtime_ratio: if c + rd == 0 { 0.0 } else { c as f64 / (c + rd) as f64 },
        }
    };
    let jobs = r.job_progress.iter().map(|(j, v)| group(j, v, &|t: &TaskResult| &t.job == j)).collect();
    let currencies = r.currency_progress.iter().map(|(c, v)| group(c, v, &|t: &TaskResult| &t.currency == c)).collect();
    let every = every.max(1);
    let keep: Vec<usize> = (0..r.sample_times.len()).filter(|i| i % every == 0 || *i == r.sample_times.len() - 1).collect();
    RunSummary {
        label: label.to_string(),
        scheduler: r.scheduler.clone(),
        seed: r.seed,
        cpus: r.cpus,
        duration_s: s(r.duration),
        decisions: r.decisions,
        decisions_per_s: r.decisions as f64 / s(r.duration),
        context_switches: r.context_switches,
        idle: r.idle as f64 / (dur * r.cpus as f64),
        tasks,
        jobs,
        currencies,
        progress_t_s: keep.iter().map(|&i| s(r.sample_times[i])).collect(),
        progress_cpu_s: r.tasks.iter().zip(r.progress.iter()).map(|(t, p)| (t.name.clone(), keep.iter().map(|&i| s(p[i])).collect())).collect(),
    }
}
