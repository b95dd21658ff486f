//! `allot metrics`: asks the daemon for `status` and `show`, reads the kernel for each
//! job (throttling, pressure, and the run-queue wait over a short window), and prints
//! the exposition [`crate::metrics::render`] makes. One-shot, for node_exporter's
//! textfile collector: `allot metrics > allot.prom.tmp && mv allot.prom.tmp allot.prom`.

use crate::client;
use crate::metrics::{render, Format};
use crate::proto::{Request, Response, ShowView, StatusView};
use crate::readings::{Readings, Sampler};
use allot_model::duration::Unit;
use anyhow::{bail, Context};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Print allot's state as Prometheus metrics (text format 0.0.4, or OpenMetrics).
#[derive(Debug, clap::Args)]
pub struct MetricsArgs {
    /// Write OpenMetrics 1.0 instead of the Prometheus text format 0.0.4 (which
    /// node_exporter's textfile collector reads).
    #[arg(long)]
    openmetrics: bool,
    /// How long to watch the jobs' threads for their run-queue wait, 0..60s: 1s, 500ms (a
    /// bare number is seconds); 0 leaves the wait out.
    #[arg(long, default_value = "1s")]
    window: String,
    /// Render a saved `{"status": STATUS, "show": SHOW}` (the `--json` replies) instead of
    /// asking the daemon; no kernel readings. For checking the format offline.
    #[arg(long, hide = true)]
    replay: Option<PathBuf>,
}

fn show(socket: &Path) -> anyhow::Result<ShowView> {
    match client::call(socket, &Request::Show { user: None })? {
        Response::Show(s) => Ok(s),
        other => bail!("the allot daemon answered show with {other:?}"),
    }
}

/// The daemon's `status`.
pub fn status(socket: &Path) -> anyhow::Result<StatusView> {
    match client::call(socket, &Request::Status {})? {
        Response::Status(s) => Ok(*s),
        other => bail!("the allot daemon answered status with {other:?}"),
    }
}

/// `allot metrics`.
pub fn run(a: MetricsArgs, socket: &Path, json: bool) -> anyhow::Result<i32> {
    if json {
        bail!("allot metrics prints the Prometheus text format, not JSON; for the same values as JSON use: allot top --json --iterations 1");
    }
    let window = allot_measure::args::duration("--window", &a.window, Unit::S)?;
    if window > Duration::from_secs(60) {
        bail!("--window must be at most 60s, got {:?}", a.window);
    }
    let format = if a.openmetrics { Format::OpenMetrics } else { Format::Prometheus };
    let text = match &a.replay {
        Some(p) => {
            #[derive(serde::Deserialize)]
            struct Saved {
                status: StatusView,
                show: ShowView,
            }
            let s = std::fs::read_to_string(p).with_context(|| format!("read {}", p.display()))?;
            let saved: Saved = serde_json::from_str(&s).with_context(|| format!("{} is not {{\"status\": ..., \"show\": ...}}", p.display()))?;
            render(&saved.status, &saved.show, &Readings::default(), format)
        }
        None => {
            let st = status(socket)?;
            let mut sampler = Sampler::new(&st);
            if !window.is_zero() {
                sampler.sample(&show(socket)?);
                std::thread::sleep(window);
            }
            let sh = show(socket)?;
            let readings = sampler.sample(&sh);
            render(&st, &sh, &readings, format)
        }
    };
    // The formats carry label values as they are (only \\, \" and line feeds are
    // escaped), so a user name could hold an escape code. On a terminal, where a person
    // reads it, every line goes through for_terminal as all of allot's output does;
    // piped or redirected, the text is exact.
    // SAFETY: isatty has no preconditions.
    let text = if unsafe { libc::isatty(1) } == 1 { text.lines().map(|l| allot_report::for_terminal(l).into_owned() + "\n").collect() } else { text };
    std::io::stdout().lock().write_all(text.as_bytes()).context("write the metrics to stdout")?;
    Ok(0)
}
