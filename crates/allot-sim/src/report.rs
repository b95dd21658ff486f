//! Human tables and JSON for `allot-lab sim run`.

use std::fmt::Write;

use allot_report::{for_terminal, Rule, Table};
use serde::Serialize;

use crate::engine::RunResult;
use crate::metrics::{summarize, RunSummary};
use crate::scenario::{Row, Scenario};

/// The JSON document of a scenario run.
#[derive(Debug, Serialize)]
pub struct Report {
    /// Scenario name.
    pub scenario: String,
    /// Title.
    pub title: String,
    /// Source of the experiment.
    pub source: String,
    /// Seed.
    pub seed: u64,
    /// Runs.
    pub runs: Vec<RunSummary>,
    /// Published beside simulated.
    pub reproduction: Vec<Row>,
}

/// Builds the report (progress thinned to ~1 s points).
pub fn build(s: &Scenario, seed: u64, results: &[(String, RunResult)]) -> Report {
    let runs = results
        .iter()
        .map(|(l, r)| {
            let every = ((1_000_000_000 / r.sample_times.get(1).copied().unwrap_or(1).max(1)) as usize).max(1);
            summarize(l, r, every)
        })
        .collect();
    let reproduction = s.check.map(|c| c(results)).unwrap_or_default();
    Report { scenario: s.name.clone(), title: s.title.clone(), source: s.source.clone(), seed, runs, reproduction }
}

/// The simulator's table style: every column left-aligned, dashes under each header.
fn table(out: &mut String, head: &[&str], rows: &[Vec<String>]) {
    out.push_str(&Table::new(head.iter().copied()).all_left().rule(Rule::Columns).with_rows(rows.iter().cloned()).render());
}

/// Renders the report for a person.
pub fn text(r: &Report) -> String {
    let mut out = String::new();
    // A scenario file names its scenario, tasks and runs: print them as text, never as
    // terminal control sequences (table cells are escaped by the table itself).
    let t = |s: &str| for_terminal(s).into_owned();
    let _ = writeln!(out, "{} — {}\nsource: {}   seed: {}\n", t(&r.scenario), t(&r.title), t(&r.source), r.seed);
    for run in &r.runs {
        let _ = writeln!(
            out,
            "run: {}  (scheduler {}, {} CPU, {:.0} s; {} decisions = {:.0}/s simulated; {} context switches; idle {:.1}%)",
            t(&run.label),
            t(&run.scheduler),
            run.cpus,
            run.duration_s,
            run.decisions,
            run.decisions_per_s,
            run.context_switches,
            100.0 * run.idle
        );
        let rows: Vec<Vec<String>> = run
            .tasks
            .iter()
            .map(|t| {
                vec![
                    t.name.clone(),
                    t.currency.clone(),
                    format!("{:.2}", t.cpu_s),
                    format!("{:.2}%", 100.0 * t.share),
                    format!("{:.3}", t.runtime_ratio),
                    format!("{:.2}", t.latency_ms.mean),
                    format!("{:.2}", t.latency_ms.max),
                    t.dispatches.to_string(),
                    format!("{}/{}", t.voluntary, t.involuntary),
                    t.iterations.to_string(),
                ]
            })
            .collect();
        table(
            &mut out,
            &["task", "currency", "cpu s", "share", "runtime ratio", "lat mean ms", "lat max ms", "dispatches", "vol/invol", "iterations"],
            &rows,
        );
        let forked = run.jobs.iter().any(|j| j.processes > 1);
        if forked {
            let rows: Vec<Vec<String>> = run
                .jobs
                .iter()
                .map(|j| vec![j.name.clone(), j.processes.to_string(), format!("{:.2}%", 100.0 * j.share), format!("{:.3}", j.runtime_ratio)])
                .collect();
            table(&mut out, &["job", "processes", "share", "runtime ratio"], &rows);
        }
        if run.currencies.len() > 1 {
            let rows: Vec<Vec<String>> = run.currencies.iter().map(|j| vec![j.name.clone(), format!("{:.2}%", 100.0 * j.share)]).collect();
            table(&mut out, &["currency", "share"], &rows);
        }
        out.push('\n');
    }
    if !r.reproduction.is_empty() {
        let _ = writeln!(out, "reproduction: published beside simulated");
        let rows: Vec<Vec<String>> = r
            .reproduction
            .iter()
            .map(|x| {
                vec![
                    x.what.clone(),
                    x.run.clone(),
                    x.published.clone(),
                    x.simulated.clone(),
                    match (x.expect, x.pass) {
                        (Some((lo, hi)), Some(p)) => format!("{} [{}, {}]", if p { "ok" } else { "FAIL" }, fmt_bound(lo), fmt_bound(hi)),
                        _ => String::new(),
                    },
                ]
            })
            .collect();
        table(&mut out, &["measure", "run", "published", "simulated", "acceptance"], &rows);
    }
    out
}

fn fmt_bound(x: f64) -> String {
    if x.is_infinite() {
        "∞".into()
    } else {
        format!("{x:.4}").trim_end_matches('0').trim_end_matches('.').to_string()
    }
}
