//! `allot-lab bench memory`'s report as files: the JSON (`--output FILE`), the chart drawn
//! from it (`--svg FILE`) and the chart drawn again from a saved JSON (`--replot`). Both
//! flavours of the bench (cgroup v1's three arms, a systemd host's five) write one JSON
//! shape at the top (`bench`, `host`, `a_alone_hog_mib`, `rows`, `passed`), so one chart
//! draws either.

use allot_report::{Axis, BarChart, BarGroup};
use anyhow::bail;
use clap::Args;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The `bench` word of the JSON report, checked by `--replot`.
pub const BENCH: &str = "memory";

/// What `--check` asks of allot's arm, as a fraction: B keeps this much of its rate alone
/// (systemd host) and A alone holds this much of its hog. Drawn as the chart's bar.
pub const BAR: f64 = 0.9;

/// `allot-lab bench memory`'s options for its report as files.
#[derive(Debug, Clone, Default, Args)]
pub struct ReportFiles {
    /// Also write the JSON report (every arm's numbers) to this file.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Write a chart to this file (SVG): per arm, B's rate beside A's hog against its rate
    /// alone and what A alone held, against the 90% bar, and what B lost.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Measure nothing: draw the chart (--svg FILE) again from a JSON report this bench
    /// wrote with --output.
    #[arg(long, value_name = "JSON", requires = "svg")]
    pub replot: Option<PathBuf>,
}

impl ReportFiles {
    /// Refuses, before anything is measured, files the bench could not write at its end:
    /// a directory that does not exist, or one file named for both.
    pub fn check_paths(&self) -> anyhow::Result<()> {
        for (flag, p) in [("--output", &self.output), ("--svg", &self.svg)] {
            let Some(p) = p else { continue };
            let dir = p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
            if !dir.is_dir() {
                bail!("{flag} {}: the directory {} does not exist; make it first or name a file in one that does", p.display(), dir.display());
            }
        }
        if let (Some(o), Some(s)) = (&self.output, &self.svg) {
            if o == s {
                bail!("--output and --svg both name {}: give the JSON and the chart a file each", o.display());
            }
        }
        Ok(())
    }

    /// Writes the JSON report and its chart where `--output` and `--svg` ask.
    pub fn emit(&self, report: &Value) -> anyhow::Result<()> {
        if let Some(p) = &self.output {
            allot_measure::report::write_file(p, &(serde_json::to_string_pretty(report)? + "\n"))?;
        }
        if let Some(p) = &self.svg {
            allot_measure::report::write_file(p, &svg(report))?;
        }
        Ok(())
    }

    /// `--replot JSON --svg FILE`: the chart of a saved report; measures nothing.
    pub fn replot(&self) -> anyhow::Result<i32> {
        let Some(json) = &self.replot else { bail!("--replot names no JSON report") };
        allot_measure::bench::common::replot_to(json, self.svg.as_deref(), BENCH, svg)
    }
}

/// The chart of a report: per arm, B's rate beside A's memory hog as a percent of its rate
/// alone and A alone's most memory as a percent of its hog, against the 90% bar; each arm's
/// label says what B lost.
pub fn svg(report: &Value) -> String {
    let hog = report["a_alone_hog_mib"].as_f64().filter(|h| *h > 0.0);
    let title = match (&report["sizes_mib"]["ram"], &report["sizes_mib"]["swap"]) {
        (Value::Number(ram), Value::Number(swap)) => {
            format!("allot-lab bench memory: MemTotal {ram} MiB, swap {swap} MiB")
        }
        _ => format!("allot-lab bench memory: users share {} MiB (cgroup v1)", report["limit_mib"]),
    };
    let mut chart = BarChart::new(
        title,
        Axis::linear("% (dashed: the 90% that --check asks of allot)"),
        &["B's rate beside A's hog, % of B's rate alone", "A alone: memory held, % of its hog"],
    )
    .mark(BAR * 100.0, "90%")
    .show_values();
    for r in report["rows"].as_array().into_iter().flatten() {
        let arm = r["arm"].as_str().or(r["mode"].as_str()).unwrap_or("?");
        let kept = r["kept"].as_f64().map_or(f64::NAN, |k| (k * 100.0).round());
        let held = r["a_alone_mib"].as_f64().or(r["a_alone_peak"].as_f64());
        let held = match (held, hog) {
            (Some(m), Some(h)) => (m / h * 100.0).round(),
            _ => f64::NAN,
        };
        chart = chart.group(BarGroup::new(format!("{arm}: B {}", lost(r)), vec![kept, held]));
    }
    chart.to_svg()
}

/// What B lost in an arm, in words: its processes of two (systemd host) or its reader.
fn lost(row: &Value) -> String {
    match (row["b_lost"].as_u64(), row["b_survived"].as_bool()) {
        (Some(0), _) | (None, Some(true)) => "lost none".into(),
        (Some(n), _) => format!("lost {n} of 2"),
        (None, Some(false)) => "lost its reader".into(),
        (None, None) => "lost ?".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// Five arms as a systemd host's bench writes them (numbers of a kind the VM reads).
    fn fixture() -> Value {
        let row = |arm: &str, kept: f64, lost: u64, alone: u64| serde_json::json!({"arm": arm, "b_alone": 800.0, "b_with_hog": 800.0 * kept, "kept": kept, "b_lost": lost, "a_alone_mib": alone, "hog": "ran to its end"});
        serde_json::json!({
            "bench": "memory", "host": "systemd", "a_alone_hog_mib": 696, "passed": true,
            "sizes_mib": {"ram": 966, "swap": 511},
            "rows": [row("kernel alone", 0.74, 0, 702), row("systemd-oomd", 0.94, 1, 700), row("earlyoom", 0.70, 0, 704),
                     row("static MemoryMax=", 0.97, 0, 435), row("allot", 0.98, 0, 702)],
        })
    }

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: ReportFiles,
    }

    fn parse(words: &[&str]) -> Result<ReportFiles, clap::Error> {
        Cli::try_parse_from(std::iter::once("bench-memory").chain(words.iter().copied())).map(|c| c.args)
    }

    #[test]
    fn the_chart_has_every_arm_its_values_and_the_bar() {
        let s = svg(&fixture());
        assert!(s.starts_with("<svg") && s.ends_with("</svg>\n"));
        assert!(s.contains("MemTotal 966 MiB, swap 511 MiB"), "{s}");
        for (label, kept) in [
            ("kernel alone: B lost none", 74),
            ("systemd-oomd: B lost 1 of 2", 94),
            ("earlyoom: B lost none", 70),
            ("static MemoryMax=: B lost none", 97),
            ("allot: B lost none", 98),
        ] {
            assert!(s.contains(&format!(">{label}<")), "{label} in {s}");
            assert!(s.contains(&format!(">{kept}<")), "{kept} in {s}");
        }
        // A alone held 435 of its 696 MiB under the static limit: 63%.
        assert!(s.contains(">63<") && s.contains(">101<"), "{s}");
        assert!(s.contains(">90%<") && s.contains("stroke-dasharray"), "{s}");
    }

    #[test]
    fn the_cgroup_v1_report_draws_too() {
        let r = serde_json::json!({"bench": "memory", "host": "cgroup v1", "limit_mib": 512, "a_alone_hog_mib": 408,
            "rows": [{"mode": "allot", "kept": 0.5, "b_survived": false, "a_alone_peak": 408.0}]});
        let s = svg(&r);
        assert!(s.contains("users share 512 MiB") && s.contains(">allot: B lost its reader<") && s.contains(">50<") && s.contains(">100<"), "{s}");
    }

    #[test]
    fn replot_draws_the_saved_report_and_refuses_another_benchs() {
        let dir = std::env::temp_dir().join(format!("allot-memory-chart-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (json, out) = (dir.join("r.json"), dir.join("r.svg"));
        std::fs::write(&json, serde_json::to_string_pretty(&fixture()).unwrap()).unwrap();
        let a = parse(&["--replot", json.to_str().unwrap(), "--svg", out.to_str().unwrap()]).unwrap();
        assert_eq!(a.replot().unwrap(), 0);
        assert_eq!(std::fs::read_to_string(&out).unwrap(), svg(&fixture()));
        std::fs::write(&json, r#"{"bench": "latency"}"#).unwrap();
        let e = format!("{:#}", a.replot().unwrap_err());
        assert!(e.contains("is a report of bench \"latency\", not of bench memory"), "{e}");
        std::fs::write(&json, "not json").unwrap();
        let e = format!("{:#}", a.replot().unwrap_err());
        assert!(e.contains("r.json is not JSON"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_arguments_get_one_clear_error() {
        let e = parse(&["--replot", "r.json"]).unwrap_err().to_string();
        assert!(e.contains("--svg"), "{e}");
        let a = parse(&["--svg", "/nonexistent-allot-dir/r.svg"]).unwrap();
        let e = a.check_paths().unwrap_err().to_string();
        assert_eq!(
            e,
            "--svg /nonexistent-allot-dir/r.svg: the directory /nonexistent-allot-dir does not exist; make it first or name a file in one that does"
        );
        let a = parse(&["--output", "r", "--svg", "r"]).unwrap();
        assert_eq!(a.check_paths().unwrap_err().to_string(), "--output and --svg both name r: give the JSON and the chart a file each");
        parse(&["--output", "r.json", "--svg", "r.svg"]).unwrap().check_paths().unwrap();
    }
}
