//! allot's state as Prometheus metrics: the text exposition format (version 0.0.4, what
//! node_exporter's textfile collector reads) or OpenMetrics 1.0. [`render`] is pure — a
//! function from the daemon's `status` and `show` replies and the kernel readings to the
//! text — so a metrics endpoint in the daemon can serve the same families later.
//!
//! Names follow Prometheus's conventions: an `allot_` prefix, the unit last (`_cpus`,
//! `_seconds`), `_total` on counters, labels `job_id`, `user` and `currency`. The job's
//! label is `job_id`, not `job`: Prometheus sets `job` (and `instance`) on every series
//! from its scrape config, and renames a scraped `job` to `exported_job`, so a label
//! named `job` would not survive node_exporter's textfile collector. Label values are
//! escaped as the formats require (`\\`, `\"`, `\n`).

use crate::proto::{JobView, ShowView, StatusView};
use crate::readings::Readings;
use crate::{currency_fields, fields, memory_fields};
use std::fmt::Write;

/// Which exposition format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Prometheus text format 0.0.4 (`text/plain; version=0.0.4`).
    Prometheus,
    /// OpenMetrics 1.0 (`application/openmetrics-text; version=1.0.0`): counters are
    /// declared without `_total`, the info metric as `info`, and the text ends in `# EOF`.
    OpenMetrics,
}

impl Format {
    /// The HTTP content type of the format.
    #[allow(dead_code)] // for the daemon's endpoint
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Gauge,
    Counter,
    Info,
}

/// One metric family and its samples: label pairs and a value.
struct Family {
    name: String,
    kind: Kind,
    help: &'static str,
    samples: Vec<(Vec<(&'static str, String)>, f64)>,
}

impl Family {
    fn new(name: impl Into<String>, kind: Kind, help: &'static str) -> Family {
        Family { name: name.into(), kind, help, samples: vec![] }
    }
    fn add(&mut self, labels: Vec<(&'static str, String)>, v: f64) {
        self.samples.push((labels, v));
    }
}

fn flag(b: bool) -> f64 {
    if b {
        1.0
    } else {
        0.0
    }
}

fn job_labels(j: &JobView) -> Vec<(&'static str, String)> {
    vec![("job_id", j.id.clone()), ("user", j.user.clone()), ("currency", j.currency.clone())]
}

/// The metric families, in the order they are written. Every family with no sample is
/// left out (e.g. pressure on cgroup v1).
fn families(status: &StatusView, show: &ShowView, kernel: &Readings) -> Vec<Family> {
    use Kind::*;
    let mut out = vec![];
    let mut f = Family::new("allot_daemon_info", Info, "The allot daemon's version, protocol, cgroup version and process tracking.");
    f.add(
        vec![
            ("version", status.version.clone()),
            ("protocol", status.protocol.to_string()),
            ("cgroup_version", status.cgroup_version.clone()),
            ("tracking", status.tracking.clone()),
        ],
        1.0,
    );
    out.push(f);
    let daemon = |name, kind, help, v: f64| {
        let mut f = Family::new(name, kind, help);
        f.add(vec![], v);
        f
    };
    let c = &status.counters;
    out.push(daemon("allot_daemon_uptime_seconds", Gauge, "Time since the allot daemon started.", status.uptime_s as f64));
    out.push(daemon("allot_daemon_requests_total", Counter, "Requests the daemon served.", c.requests as f64));
    out.push(daemon("allot_daemon_requests_limited_total", Counter, "Requests or connections refused by a per-user limit.", c.limited as f64));
    out.push(daemon("allot_daemon_placed_processes_total", Counter, "Processes the daemon placed in a job automatically.", c.placed as f64));
    out.push(daemon(
        "allot_daemon_reconciled_values_total",
        Counter,
        "Kernel values changed from outside allot that the daemon re-asserted.",
        c.reconciled as f64,
    ));
    out.push(daemon("allot_daemon_kernel_write_errors_total", Counter, "Kernel writes by the daemon that failed.", c.write_errors as f64));
    out.push(daemon(
        "allot_config_last_reload_successful",
        Gauge,
        "0 if the last reload of the config was refused (the config in force is older than the file, and a restart would fail on it), else 1.",
        flag(status.last_reload.as_ref().is_none_or(|r| r.refused.is_none())),
    ));
    out.push(daemon(
        "allot_config_last_reload_timestamp_seconds",
        Gauge,
        "When the config was last reloaded, taken or refused (Unix time); 0 if not since the daemon started.",
        status.last_reload.as_ref().map_or(0.0, |r| r.time),
    ));
    let mut f =
        Family::new("allot_daemon_kernel_feature", Gauge, "1 if the kernel has the feature (cpu_idle, custom_slices, psi, delay_accounting).");
    for (k, v) in &status.features {
        f.add(vec![("feature", k.clone())], flag(*v));
    }
    out.push(f);
    out.push(daemon(
        "allot_daemon_degraded_features",
        Gauge,
        "Features the daemon runs without (allot status says why).",
        status.degraded.len() as f64,
    ));
    out.push(daemon("allot_machine_cpus", Gauge, "CPUs of the machine.", show.ncpu as f64));
    out.push(daemon("allot_outside_usage_cpus", Gauge, "CPUs used lately by processes outside allot's tree.", show.outside));
    out.push(daemon(
        "allot_scheduler_scx_loaded",
        Gauge,
        "1 while allot's sched_ext scheduler is loaded ([scheduler] kind = \"scx\"), else 0 (the cgroup backend alone).",
        flag(status.scheduler.scx_loaded),
    ));
    out.push(daemon(
        "allot_scheduler_scx_ejections_total",
        Counter,
        "Times allot's sched_ext scheduler left without being asked (the kernel ejected it); the cgroup backend then holds every job.",
        status.scheduler.scx_ejections as f64,
    ));

    // A currency's families: every currency field the schema gives a metric.
    for field in currency_fields::currency_shown_in(|i| i.metric) {
        let mut f = Family::new(field.metric_name(), Gauge, field.spec().help);
        for c in &show.currencies {
            if let Some(x) = field.number(c, &show.jobs) {
                f.add(vec![("currency", c.name.clone()), ("kind", c.kind.clone())], x);
            }
        }
        out.push(f);
    }
    // Memory by share (docs/memory.md): every memory field the schema gives a metric, for
    // the currencies whose memory the daemon shares.
    for field in memory_fields::memory_shown_in(|i| i.metric) {
        let spec = field.spec();
        let mut f = Family::new(field.metric_name(), if spec.counter { Counter } else { Gauge }, spec.help);
        for (c, x) in show.currencies.iter().filter_map(|c| Some((c, field.number(c.memory.as_ref()?)?))) {
            f.add(vec![("currency", c.name.clone()), ("kind", c.kind.clone())], x);
        }
        out.push(f);
    }

    // A job's families: every field the schema gives a metric, named, described and read
    // as `show` and `top` read it.
    for field in fields::shown_in(|i| i.metric) {
        let spec = field.spec();
        let mut f = Family::new(field.metric_name(), if spec.counter { Counter } else { Gauge }, spec.help);
        for j in &show.jobs {
            let k = kernel.jobs.get(&j.id).copied().unwrap_or_default();
            if let Some(x) = field.number(j, &k) {
                let mut l = job_labels(j);
                l.extend(field.label(j));
                f.add(l, x);
            }
        }
        out.push(f);
    }
    out.retain(|f| !f.samples.is_empty());
    out
}

/// A label value escaped for both formats: backslash, double quote and line feed.
pub fn escape_label(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => o.push_str("\\\\"),
            '"' => o.push_str("\\\""),
            '\n' => o.push_str("\\n"),
            c => o.push(c),
        }
    }
    o
}

/// A sample value: integers without a fraction, non-finite values by the formats' names.
fn value(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        // + 0.0 turns -0.0 into 0 (a sum of no f64 is -0.0); other values are unchanged.
        format!("{}", v + 0.0)
    }
}

/// The exposition text of allot's state: the daemon's `status` and `show` replies and
/// the kernel readings the caller made (throttling, pressure, wait). Pure: no I/O.
pub fn render(status: &StatusView, show: &ShowView, kernel: &Readings, format: Format) -> String {
    let mut out = String::new();
    for f in families(status, show, kernel) {
        let (family, sample) = match (format, f.kind) {
            (Format::OpenMetrics, Kind::Counter) => (f.name.strip_suffix("_total").unwrap_or(&f.name), &*f.name),
            (Format::OpenMetrics, Kind::Info) => (f.name.strip_suffix("_info").unwrap_or(&f.name), &*f.name),
            _ => (&*f.name, &*f.name),
        };
        let kind = match (format, f.kind) {
            (_, Kind::Gauge) | (Format::Prometheus, Kind::Info) => "gauge",
            (_, Kind::Counter) => "counter",
            (Format::OpenMetrics, Kind::Info) => "info",
        };
        // HELP escapes backslash and line feed (and, in OpenMetrics, the double quote);
        // allot's help texts have none, but the rule is kept so a new text cannot break it.
        let help = match format {
            Format::Prometheus => f.help.replace('\\', "\\\\").replace('\n', "\\n"),
            Format::OpenMetrics => escape_label(f.help),
        };
        let _ = writeln!(out, "# HELP {family} {help}");
        let _ = writeln!(out, "# TYPE {family} {kind}");
        for (labels, v) in &f.samples {
            out.push_str(sample);
            if !labels.is_empty() {
                out.push('{');
                for (i, (k, lv)) in labels.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    let _ = write!(out, "{k}=\"{}\"", escape_label(lv));
                }
                out.push('}');
            }
            let _ = writeln!(out, " {}", value(*v));
        }
    }
    if format == Format::OpenMetrics {
        out.push_str("# EOF\n");
    }
    out
}

/// Every metric name [`render`] can write (for checks of dashboards and docs).
#[cfg(test)]
pub fn names() -> Vec<String> {
    let (status, mut show) = (tests::status(), tests::show());
    show.jobs[0].cap = Some("0.5!".into());
    show.jobs[0].quota = Some(0.5);
    let mut r = Readings::default();
    r.jobs.insert(
        "1".into(),
        crate::readings::JobKernel {
            throttling: Some(Default::default()),
            pressure: Some(crate::readings::Pressure { full_s: Some(0.0), ..Default::default() }),
            wait: Some(Default::default()),
        },
    );
    families(&status, &show, &r).into_iter().map(|f| f.name).collect()
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
pub(crate) mod tests;
