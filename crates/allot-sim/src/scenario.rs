//! Scenarios: a workload run under one or more schedulers, plus the reproduction
//! rows that set each published number beside the simulated one. The built-ins
//! reproduce the papers' experiments; users write their own as TOML
//! (`scenario_file`).

use serde::Serialize;

use crate::engine::{RunResult, Sim};
use crate::metrics::{self, cpu_at, currency_share, job_share, latency, runtime_ratio, share, task};
use crate::sched::SchedSpec;
use crate::time::{Ns, MS, SEC, US};
use crate::workload::{Behaviour, Policy, TaskSpec, Workload};

mod seed001;
mod seed002;
mod seed003;
mod seed004;

/// One run of a scenario.
#[derive(Debug, Clone)]
pub struct Run {
    /// Label ("lottery", "hybrid boost off", "nice 0/-20").
    pub label: String,
    /// Scheduler.
    pub sched: SchedSpec,
    /// Workload.
    pub workload: Workload,
}

/// The same workload under each of the named schedulers, labelled by name.
fn runs_of(scheds: &[&str], w: &Workload) -> Vec<Run> {
    scheds.iter().map(|s| Run { label: s.to_string(), sched: SchedSpec::named(s), workload: w.clone() }).collect()
}

/// A published number beside a simulated one.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// What is measured.
    pub what: String,
    /// Which run.
    pub run: String,
    /// The published value (with its source).
    pub published: String,
    /// The simulated value, formatted.
    pub simulated: String,
    /// The simulated value.
    pub value: f64,
    /// Acceptance range, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expect: Option<(f64, f64)>,
    /// Whether `value` is in `expect`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pass: Option<bool>,
}

impl Row {
    fn new(what: impl Into<String>, run: &str, published: impl Into<String>, simulated: String, value: f64) -> Row {
        Row { what: what.into(), run: run.to_string(), published: published.into(), simulated, value, expect: None, pass: None }
    }
    fn expect(mut self, lo: f64, hi: f64) -> Row {
        self.expect = Some((lo, hi));
        self.pass = Some(self.value >= lo && self.value <= hi);
        self
    }
}

/// Computes the reproduction rows from the runs' results.
pub type Check = fn(&[(String, RunResult)]) -> Vec<Row>;

/// What the SVG shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plot {
    /// CPU seconds of each workload task over time (Figs 3, 4, 7).
    Progress,
    /// Dispatch latency of one task over time (Figs 5, 6).
    Latency(&'static str),
}

/// A scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Name used on the command line.
    pub name: String,
    /// One line.
    pub title: String,
    /// Where the experiment comes from.
    pub source: String,
    /// Default seed.
    pub seed: u64,
    /// Runs.
    pub runs: Vec<Run>,
    /// Reproduction rows (built-ins).
    pub check: Option<Check>,
    /// Plots.
    pub plots: Vec<Plot>,
}

impl Scenario {
    /// Runs every run with `seed`; results in run order.
    pub fn run(&self, seed: u64) -> Vec<(String, RunResult)> {
        self.runs.iter().map(|r| (r.label.clone(), Sim::new(&r.workload, &r.sched, seed).run())).collect()
    }

    /// Replaces every run's scheduler with `s`, keeping one run per distinct workload
    /// (runs that differed only by scheduler collapse into one).
    pub fn with_scheduler(mut self, s: &SchedSpec) -> Scenario {
        let mut runs: Vec<Run> = Vec::new();
        for r in self.runs {
            let variant = r.label.split(" / ").nth(1).map(|v| v.to_string());
            if let Some(v) = &variant {
                if runs.iter().any(|x| x.label.ends_with(&format!(" / {v}"))) {
                    continue;
                }
            } else if runs.iter().any(|x| !x.label.contains(" / ")) {
                continue;
            }
            let label = match variant {
                Some(v) => format!("{} / {v}", s.label()),
                None => s.label(),
            };
            runs.push(Run { label, sched: s.clone(), workload: r.workload });
        }
        self.runs = runs;
        self.check = None;
        self
    }
}

fn get<'a>(res: &'a [(String, RunResult)], label: &str) -> Option<&'a RunResult> {
    res.iter().find(|(l, _)| l == label).map(|(_, r)| r)
}

fn pct(x: f64) -> String {
    format!("{:.2}%", 100.0 * x)
}

fn cpu(name: &str, cur: &str, work: Option<Ns>) -> TaskSpec {
    TaskSpec::new(name, cur, Behaviour::Cpu { work })
}

/// Names and titles of the built-in scenarios.
pub fn builtin_names() -> Vec<(String, String)> {
    builtins().into_iter().map(|s| (s.name, s.title)).collect()
}

/// A built-in scenario by name.
pub fn builtin(name: &str) -> Option<Scenario> {
    builtins().into_iter().find(|s| s.name == name)
}

/// All built-in scenarios.
pub fn builtins() -> Vec<Scenario> {
    use self::{seed001::*, seed002::*, seed003::*, seed004::*};
    vec![fig3(), fig4(), table5(), table1(), ww_ratio(), ebs_caps(), fork_penalty(), nice_pathology(), starved()]
}
