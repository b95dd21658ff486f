//! The scenario's plots as SVG (drawn by allot-report): one panel per run, progress
//! over time (like Petrou et al. 1999 Figs 3, 4, 7) or dispatch latency over time (Figs 5, 6).

use allot_report::{Axis, Chart, Panel, Series};

use crate::engine::RunResult;
use crate::scenario::{Plot, Scenario};

/// Latencies below this are drawn on the floor of the log axis (ms). A dispatch in the
/// simulator costs nothing, so most latencies with boost are exactly 0; Petrou et al.'s
/// Table 1 floor is 0.05 ms (cpu_switch() itself), so 0.01 keeps it a decade clear.
const LATENCY_FLOOR_MS: f64 = 0.01;

/// Progress curves are thinned to about this many points: a 60 s run sampled every
/// 100 ms has 600, more than a 450 px wide panel can show.
const MAX_POINTS: usize = 400;

/// Renders the scenario's plots for every run.
pub fn render(s: &Scenario, results: &[(String, RunResult)]) -> String {
    let plots = if s.plots.is_empty() { vec![Plot::Progress] } else { s.plots.clone() };
    let mut chart = Chart::new("").panel_size(640.0, 280.0);
    for plot in &plots {
        for (label, r) in results {
            let xmax = r.duration as f64 / 1e9;
            let time = Axis::linear("time (s)").max(xmax);
            chart = chart.panel(match plot {
                Plot::Progress => progress(&format!("{} — {}", s.name, label), time, r),
                Plot::Latency(name) => latency(&format!("{} — {} — dispatch latency of {}", s.name, label, name), time, r, name),
            });
        }
    }
    chart.to_svg()
}

fn progress(title: &str, time: Axis, r: &RunResult) -> Panel {
    let mut p = Panel::new(title, time, Axis::linear("CPU seconds (progress)"));
    let step = (r.sample_times.len() / MAX_POINTS).max(1);
    let last = r.sample_times.len().saturating_sub(1);
    for (i, prog) in r.progress.iter().enumerate() {
        let pts = r
            .sample_times
            .iter()
            .zip(prog)
            .enumerate()
            .filter(|(j, _)| j % step == 0 || *j == last)
            .map(|(_, (&t, &v))| (t as f64 / 1e9, v as f64 / 1e9))
            .collect();
        p = p.series(Series::line(r.tasks[i].name.clone(), pts));
    }
    p
}

fn latency(title: &str, time: Axis, r: &RunResult, name: &str) -> Panel {
    let pts: Vec<(f64, f64)> = r
        .tasks
        .iter()
        .find(|t| t.name == name)
        .map(|t| t.latencies.iter().map(|l| (l.at as f64 / 1e9, l.lat as f64 / 1e6)).collect())
        .unwrap_or_default();
    Panel::new(title, time, Axis::log("dispatch latency (ms, log)").min(LATENCY_FLOOR_MS)).series(Series::dots(name, pts))
}
