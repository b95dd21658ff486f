//! `allot-lab sim live`: a built-in scenario turned into a live run under allot's
//! sched_ext scheduler (`allot-scx`), and the live run compared with the simulator's.
//!
//! The plan ([`plan`]) gives each task of the scenario a job of its own (a cgroup),
//! its tickets and currency, the currencies' funding as `allot-scx run` takes them, and
//! the task's behaviour as `allot-scx work` runs it; the guest script
//! (tests/vm/scx/sim.sh) runs it and hands back each task's `/proc/PID/schedstat` at
//! the plan's marks. [`compare`](compare::compare) then runs the same workload in the
//! simulator and holds the two to the same shares (within [`SHARE_TOL`]) or the same
//! ordering of dispatch latencies. Nothing here touches the system.

use std::fmt::Write as _;

use crate::sched::SchedSpec;
use crate::time::{Ns, MS, SEC, US};
use crate::workload::{Behaviour, Policy, Workload};

pub mod compare;

/// How far a live share may be from the simulated one (a fraction of the CPU): the
/// 2% within which the live scheduler and the simulator should agree, as the VM checks' 0.02.
pub const SHARE_TOL: f64 = 0.02;

/// The scenarios that have a live form, and what is compared for each.
pub const LIVE: &[(&str, &str)] = &[
    ("fig3-ratio", "shares of three CPU-bound jobs at tickets 3:2:1"),
    ("table5-insulation", "shares of one currency's one job against another's five"),
    ("table1-bimodal", "the ordering of a bimodal job's mean dispatch latencies, with and without the boost"),
];

/// One task of the scenario as a job of its own.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveJob {
    /// The task's name in the scenario.
    pub task: String,
    /// The job's cgroup directory name (under the guest's cgroup root).
    pub dir: String,
    /// Tickets in its currency.
    pub tickets: u32,
    /// Its currency.
    pub currency: String,
    /// What `allot-scx work` runs (its BEHAVIOUR argument).
    pub behaviour: String,
}

/// One live run of the plan's jobs, and the simulated runs it is set beside.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveRun {
    /// Its label ("allot-scx", "boost", "no-boost").
    pub label: String,
    /// Extra `allot-scx run` options ("--no-boost").
    pub loader: Vec<String>,
    /// The simulated runs: (label, scheduler).
    pub sims: Vec<(String, SchedSpec)>,
}

/// A (run, window) cell of a latency comparison: indices into the plan's runs and the
/// comparison's windows.
pub type Cell = (usize, usize);

/// What is compared.
#[derive(Debug, Clone, PartialEq)]
pub enum Compare {
    /// Every job's share of the CPU in [from, to).
    Shares {
        /// Window start.
        from: Ns,
        /// Window end.
        to: Ns,
    },
    /// `task`'s mean dispatch latency in each window, ordered pairwise.
    Latency {
        /// The task whose latency is measured.
        task: String,
        /// Windows (from, to).
        windows: Vec<(Ns, Ns)>,
        /// Pairs of cells whose order (the first below the second) must agree.
        pairs: Vec<(Cell, Cell)>,
    },
}

/// A scenario's live form.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The scenario's name.
    pub scenario: String,
    /// Its seed (the simulated runs use it).
    pub seed: u64,
    /// The workload the simulated runs run (the scenario's own).
    pub workload: Workload,
    /// Jobs, one per task.
    pub jobs: Vec<LiveJob>,
    /// Currencies' funding.
    pub funding: Vec<(String, u32)>,
    /// How long each live run lasts.
    pub seconds: u64,
    /// The live runs.
    pub runs: Vec<LiveRun>,
    /// What is compared.
    pub compare: Compare,
}

impl Plan {
    /// The times (s since the workload's start) at which each task's schedstat is read.
    pub fn marks(&self) -> Vec<Ns> {
        let mut m = match &self.compare {
            Compare::Shares { from, to } => vec![*from, *to],
            Compare::Latency { windows, .. } => windows.iter().flat_map(|w| [w.0, w.1]).collect(),
        };
        m.sort_unstable();
        m.dedup();
        m
    }
}

/// The live form of a built-in scenario, or why there is none.
pub fn plan(name: &str) -> Result<Plan, String> {
    let scen = crate::scenario::builtin(name).filter(|_| LIVE.iter().any(|(n, _)| *n == name)).ok_or_else(|| {
        let names: Vec<&str> = LIVE.iter().map(|(n, _)| *n).collect();
        format!("scenario {name:?} has no live form; the scenarios that have one: {}", names.join(", "))
    })?;
    let w = scen.runs.first().ok_or_else(|| format!("scenario {name:?} has no run"))?.workload.clone();
    let jobs = jobs_of(&w)?;
    let funding = w.currencies.iter().map(|c| (c.name.clone(), c.funding)).collect();
    let both = |label: &str, loader: &[&str]| LiveRun {
        label: label.into(),
        loader: loader.iter().map(|s| s.to_string()).collect(),
        sims: vec![("stride".into(), SchedSpec::named("stride")), ("lottery".into(), SchedSpec::named("lottery"))],
    };
    let (seconds, runs, compare) = match name {
        // Warm 5 s, then a 20 s window, as tests/vm/scx/checks.sh measures.
        "fig3-ratio" | "table5-insulation" => (25, vec![both("allot-scx", &[])], Compare::Shares { from: 5 * SEC, to: 25 * SEC }),
        _ => {
            // Petrou et al. 1999 Table 1's windows; the paper's hybrid lottery with and
            // without its windowed ticket boost beside allot's scheduler with and without
            // its boost per wakeup (allot_model::wake).
            let windows = vec![(0, 15 * SEC), (15 * SEC, 35 * SEC), (35 * SEC, 50 * SEC), (22 * SEC, 35 * SEC)];
            let pairs = vec![((0, 1), (0, 0)), ((0, 1), (0, 2)), ((1, 1), (1, 0)), ((1, 1), (1, 2)), ((0, 1), (1, 1)), ((0, 3), (1, 3))];
            let runs = vec![
                LiveRun { label: "boost".into(), loader: vec![], sims: vec![("hybrid".into(), SchedSpec::named("hybrid"))] },
                LiveRun {
                    label: "no-boost".into(),
                    loader: vec!["--no-boost".into()],
                    sims: vec![("hybrid boost=off".into(), SchedSpec::named("hybrid").with("boost", "off"))],
                },
            ];
            (50, runs, Compare::Latency { task: "bimodal".into(), windows, pairs })
        }
    };
    Ok(Plan { scenario: name.into(), seed: scen.seed, workload: w, jobs, funding, seconds, runs, compare })
}

/// One job per task; refuses what the live run cannot reproduce.
fn jobs_of(w: &Workload) -> Result<Vec<LiveJob>, String> {
    if w.cpus != 1 {
        return Err(format!("the live run pins every job to one CPU; the workload has {} CPUs", w.cpus));
    }
    if let Some(c) = w.currencies.iter().find(|c| c.parent.is_some()) {
        return Err(format!("currency {:?} is funded by another currency; allot-scx run takes currencies funded in base units only", c.name));
    }
    w.tasks
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let refuse =
                |what: String| Err(format!("task {:?}: {what}; the live run takes nice 0, the normal policy, no cap and a start at 0", t.name));
            if t.nice != 0 {
                return refuse(format!("nice {}", t.nice));
            }
            if t.policy != Policy::Normal || t.cap.is_some() || t.start != 0 {
                return refuse("a real-time policy, a cap or a later start".into());
            }
            let behaviour = behaviour(&t.behaviour).map_err(|e| format!("task {:?}: {e}", t.name))?;
            Ok(LiveJob { task: t.name.clone(), dir: format!("sim{i}"), tickets: t.tickets, currency: t.currency.clone(), behaviour })
        })
        .collect()
}

/// A behaviour as `allot-scx work` reads it: `cpu`, `periodic:WORK_US:SLEEP_US:JITTER:rel|abs`,
/// or `phases/SECS=B/SECS=B/...` (the last phase lasts to the end).
pub fn behaviour(b: &Behaviour) -> Result<String, String> {
    match b {
        Behaviour::Cpu { .. } => Ok("cpu".into()),
        Behaviour::Periodic { work, sleep, absolute, jitter } => {
            Ok(format!("periodic:{}:{}:{jitter}:{}", work / US, sleep / US, if *absolute { "abs" } else { "rel" }))
        }
        Behaviour::Phased { phases } => {
            let mut s = String::from("phases");
            for (len, p) in phases {
                if matches!(p, Behaviour::Phased { .. }) {
                    return Err("a phase that is itself phased".into());
                }
                let _ = write!(s, "/{}={}", *len as f64 / SEC as f64, behaviour(p)?);
            }
            Ok(s)
        }
        other => Err(format!("behaviour {:?} has no live form (cpu, periodic and phases do)", kind(other))),
    }
}

fn kind(b: &Behaviour) -> &'static str {
    match b {
        Behaviour::Cpu { .. } => "cpu",
        Behaviour::Periodic { .. } => "periodic",
        Behaviour::Spinner { .. } => "spinner",
        Behaviour::Interactive { .. } => "interactive",
        Behaviour::Phased { .. } => "phased",
        Behaviour::ForkHeavy { .. } => "fork_heavy",
        Behaviour::Server => "server",
        Behaviour::Client { .. } => "client",
        Behaviour::Kernel { .. } => "kernel",
    }
}

/// The plan as lines a shell reads (`while read`): `seconds N`, `marks S,S,...`,
/// `funding CURRENCY N`, `job DIR TASK TICKETS CURRENCY BEHAVIOUR`, and
/// `run LABEL [LOADER-OPTIONS]`.
pub fn text(p: &Plan) -> String {
    let mut s = format!("# allot-lab sim live {}: one job per task; tests/vm/scx/sim.sh runs it\n", p.scenario);
    let _ = writeln!(s, "seconds {}", p.seconds);
    let marks: Vec<String> = p.marks().iter().map(|m| format!("{}", *m as f64 / SEC as f64)).collect();
    let _ = writeln!(s, "marks {}", marks.join(","));
    for (c, n) in &p.funding {
        let _ = writeln!(s, "funding {c} {n}");
    }
    for j in &p.jobs {
        let _ = writeln!(s, "job {} {} {} {} {}", j.dir, j.task, j.tickets, j.currency, j.behaviour);
    }
    for r in &p.runs {
        let _ = writeln!(s, "run {}{}", r.label, r.loader.iter().map(|o| format!(" {o}")).collect::<String>());
    }
    s
}

/// Milliseconds, for messages.
pub(crate) fn ms(ns: Ns) -> f64 {
    ns as f64 / MS as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fig3_is_three_jobs_at_3_2_1_in_one_currency() {
        let p = plan("fig3-ratio").unwrap();
        let t: Vec<(String, u32, String)> = p.jobs.iter().map(|j| (j.task.clone(), j.tickets, j.behaviour.clone())).collect();
        assert_eq!(t, [("p3".to_string(), 300, "cpu".to_string()), ("p2".into(), 200, "cpu".into()), ("p1".into(), 100, "cpu".into())]);
        assert_eq!(p.funding, [("user".to_string(), 100)]);
        assert_eq!(p.marks(), [5 * SEC, 25 * SEC]);
        let txt = text(&p);
        assert!(txt.contains("\njob sim0 p3 300 user cpu\n"), "{txt}");
        assert!(txt.contains("\nmarks 5,25\n"), "{txt}");
    }

    #[test]
    fn table1_bimodal_job_is_phased_and_runs_twice() {
        let p = plan("table1-bimodal").unwrap();
        let b = p.jobs.iter().find(|j| j.task == "bimodal").unwrap();
        assert_eq!(b.behaviour, "phases/15=cpu/20=periodic:5000:100000:0.1:rel/15=cpu");
        let w = p.jobs.iter().find(|j| j.task == "waker").unwrap();
        assert_eq!(w.behaviour, "periodic:20:50000:0:abs");
        assert_eq!(p.marks(), [0, 15 * SEC, 22 * SEC, 35 * SEC, 50 * SEC]);
        assert!(text(&p).contains("\nrun no-boost --no-boost\n"));
    }

    #[test]
    fn scenarios_without_a_live_form_are_refused_by_name() {
        let e = plan("ebs-caps").unwrap_err();
        assert!(e.contains("\"ebs-caps\" has no live form") && e.contains("fig3-ratio"), "{e}");
        let e = plan("no-such").unwrap_err();
        assert!(e.contains("no live form"), "{e}");
    }

    #[test]
    fn behaviours_without_a_live_form_are_named() {
        let e = behaviour(&Behaviour::Server).unwrap_err();
        assert!(e.contains("\"server\""), "{e}");
    }
}
