//! Hand-written SVG: one panel per run, progress over time (like seed 001 Figs 3, 4,
//! 7) or dispatch latency over time (Figs 5, 6).

use std::fmt::Write;

use crate::engine::RunResult;
use crate::scenario::{Plot, Scenario};

const W: f64 = 640.0;
const H: f64 = 260.0;
const ML: f64 = 60.0;
const MR: f64 = 130.0;
const MT: f64 = 30.0;
const MB: f64 = 40.0;
const COLORS: [&str; 8] = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

fn nice_max(v: f64) -> f64 {
    if v <= 0.0 {
        return 1.0;
    }
    let p = 10f64.powf(v.log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if v <= m * p {
            return m * p;
        }
    }
    10.0 * p
}

fn axes(out: &mut String, y0: f64, title: &str, xmax: f64, ymax: f64, ylabel: &str) {
    let (pw, ph) = (W - ML - MR, H - MT - MB);
    let _ = writeln!(out, r#"<text x="{}" y="{}" font-size="13" font-weight="bold">{}</text>"#, ML, y0 + 18.0, esc(title));
    let _ = writeln!(out, r#"<rect x="{ML}" y="{}" width="{pw}" height="{ph}" fill="none" stroke="black"/>"#, y0 + MT);
    for i in 0..=5 {
        let fx = i as f64 / 5.0;
        let x = ML + fx * pw;
        let y = y0 + MT + ph - fx * ph;
        let _ = writeln!(
            out,
            r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="#ccc"/><text x="{x:.1}" y="{:.1}" font-size="10" text-anchor="middle">{}</text>"##,
            y0 + MT,
            y0 + MT + ph,
            y0 + MT + ph + 14.0,
            fmt(fx * xmax)
        );
        let _ = writeln!(
            out,
            r##"<line x1="{ML}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#eee"/><text x="{:.1}" y="{:.1}" font-size="10" text-anchor="end">{}</text>"##,
            ML + pw,
            ML - 4.0,
            y + 3.0,
            fmt(fx * ymax)
        );
    }
    let _ = writeln!(out, r#"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="middle">time (s)</text>"#, ML + pw / 2.0, y0 + H - 8.0);
    let _ = writeln!(
        out,
        r#"<text x="14" y="{:.1}" font-size="11" transform="rotate(-90 14 {:.1})" text-anchor="middle">{}</text>"#,
        y0 + MT + ph / 2.0,
        y0 + MT + ph / 2.0,
        esc(ylabel)
    );
}

fn fmt(x: f64) -> String {
    if x == x.round() || x >= 10.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

/// Renders the scenario's plots for every run.
pub fn render(s: &Scenario, results: &[(String, RunResult)]) -> String {
    let plots = if s.plots.is_empty() { vec![Plot::Progress] } else { s.plots.clone() };
    let panels = plots.len() * results.len();
    let mut out = String::new();
    let _ = writeln!(out, r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{}" font-family="sans-serif">"#, H * panels as f64);
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let (pw, ph) = (W - ML - MR, H - MT - MB);
    let mut panel = 0;
    for plot in &plots {
        for (label, r) in results {
            let y0 = panel as f64 * H;
            panel += 1;
            let xmax = r.duration as f64 / 1e9;
            match plot {
                Plot::Progress => {
                    let ymax = nice_max(r.progress.iter().flat_map(|p| p.iter()).copied().max().unwrap_or(0) as f64 / 1e9);
                    axes(&mut out, y0, &format!("{} — {}", s.name, label), xmax, ymax, "CPU seconds (progress)");
                    for (i, p) in r.progress.iter().enumerate() {
                        let c = COLORS[i % COLORS.len()];
                        let mut d = String::new();
                        let step = (r.sample_times.len() / 400).max(1);
                        let last = r.sample_times.len().saturating_sub(1);
                        for (j, (&t, &v)) in r.sample_times.iter().zip(p.iter()).enumerate().filter(|(j, _)| j % step == 0 || *j == last) {
                            let x = ML + t as f64 / 1e9 / xmax * pw;
                            let y = y0 + MT + ph - v as f64 / 1e9 / ymax * ph;
                            let _ = write!(d, "{}{x:.1},{y:.1}", if j == 0 { "M" } else { " L" });
                        }
                        let _ = writeln!(out, r#"<path d="{d}" fill="none" stroke="{c}" stroke-width="1.5"/>"#);
                        let ly = y0 + MT + 14.0 + 14.0 * i as f64;
                        let _ = writeln!(
                            out,
                            r#"<rect x="{:.1}" y="{:.1}" width="12" height="3" fill="{c}"/><text x="{:.1}" y="{:.1}" font-size="11">{}</text>"#,
                            ML + pw + 8.0,
                            ly - 4.0,
                            ML + pw + 24.0,
                            ly,
                            esc(&r.tasks[i].name)
                        );
                    }
                }
                Plot::Latency(name) => {
                    let t = r.tasks.iter().find(|t| t.name == *name);
                    let lats: Vec<(f64, f64)> =
                        t.map(|t| t.latencies.iter().map(|l| (l.at as f64 / 1e9, l.lat as f64 / 1e6)).collect()).unwrap_or_default();
                    let ymax = nice_max(lats.iter().map(|l| l.1).fold(0.0, f64::max));
                    axes(&mut out, y0, &format!("{} — {} — dispatch latency of {}", s.name, label, name), xmax, ymax, "dispatch latency (ms)");
                    for (at, lat) in lats {
                        let x = ML + at / xmax * pw;
                        let y = y0 + MT + ph - lat / ymax * ph;
                        let _ = writeln!(out, r##"<circle cx="{x:.1}" cy="{y:.1}" r="1.2" fill="#1f77b4"/>"##);
                    }
                }
            }
        }
    }
    out.push_str("</svg>\n");
    out
}
