//! Tests of the exposition, and fixtures (a status, a job, a show reply) other unit tests
//! share.

use super::*;
use crate::proto::{Counters, CurrencyView};
use crate::readings::{JobKernel, Pressure, Wait};
use allot_linux::cgroup::stat::Throttling;

pub(crate) fn status() -> StatusView {
    StatusView {
        version: "0.1.0".into(),
        protocol: 2,
        pid: 42,
        uptime_s: 3600,
        cgroup_version: "v1".into(),
        cgroup_root: "/nonexistent/allot-unit-test".into(),
        manager: "allot".into(),
        ncpu: 2,
        jobs: 1,
        features: [("cpu_idle".to_string(), true), ("psi".to_string(), false)].into_iter().collect(),
        degraded: vec!["no custom slices".into()],
        tracking: "events".into(),
        placement: "uid >= 1000".into(),
        rt: "none".into(),
        outside: 0.25,
        outside_weight: Some(100),
        scheduler: Default::default(),
        io: Default::default(),
        counters: Counters { placed: 7, reconciled: 1, write_errors: 0, requests: 120, limited: 2 },
        last_reload: None,
    }
}

pub(crate) fn job(id: &str, pids: Option<Vec<i32>>) -> JobView {
    JobView {
        id: id.into(),
        uid: 1000,
        user: "alice".into(),
        currency: "alice".into(),
        tickets: 300,
        funding: 100,
        entitlement: 0.75,
        active: true,
        usage: 0.5,
        cap: None,
        mem: None,
        oom_group: false,
        background: false,
        held: false,
        boost: true,
        focus: false,
        nice: 0,
        niced: false,
        recent: 0.4,
        runnable: 2,
        weight: 450,
        quota: None,
        command: pids.as_ref().map(|_| "make -j8".to_string()),
        pids,
        cgroup: format!("user-1000/{id}"),
        dir: format!("/sys/fs/cgroup/allot/user-1000/{id}"),
    }
}

pub(crate) fn show() -> ShowView {
    ShowView {
        ncpu: 2,
        outside: 0.25,
        jobs: vec![job("1", Some(vec![10, 11]))],
        currencies: vec![CurrencyView {
            name: "alice".into(),
            kind: "user".into(),
            funding: 100,
            cap: Some("0.5!".into()),
            weight: 100,
            jobs: 1,
            active: 1,
            usage: 0.5,
            memory: None,
        }],
        hidden: false,
        unread: vec![],
    }
}

fn lines_of(s: &str, prefix: &str) -> Vec<String> {
    s.lines().filter(|l| l.starts_with(prefix)).map(String::from).collect()
}

#[test]
fn prometheus_text_names_units_and_counters() {
    let mut r = Readings::default();
    r.jobs.insert(
        "1".into(),
        JobKernel {
            throttling: Some(Throttling { periods: 10, throttled_periods: 4, throttled_ns: 1_500_000_000 }),
            pressure: None,
            wait: Some(Wait { ratio: 0.25, threads: 0.5 }),
        },
    );
    let t = render(&status(), &show(), &r, Format::Prometheus);
    let l = "job_id=\"1\",user=\"alice\",currency=\"alice\"";
    for want in [
        "# TYPE allot_daemon_requests_total counter".to_string(),
        "allot_daemon_requests_total 120".into(),
        "# TYPE allot_daemon_info gauge".into(),
        "allot_daemon_info{version=\"0.1.0\",protocol=\"2\",cgroup_version=\"v1\",tracking=\"events\"} 1".into(),
        "allot_daemon_uptime_seconds 3600".into(),
        "allot_daemon_kernel_feature{feature=\"psi\"} 0".into(),
        "allot_currency_funding{currency=\"alice\",kind=\"user\"} 100".into(),
        "allot_currency_cap_cpus{currency=\"alice\",kind=\"user\"} 0.5".into(),
        format!("allot_job_tickets{{{l}}} 300"),
        format!("allot_job_entitlement_cpus{{{l}}} 0.75"),
        format!("allot_job_usage_cpus{{{l}}} 0.5"),
        format!("allot_job_boosted{{{l}}} 1"),
        format!("allot_job_held{{{l}}} 0"),
        format!("allot_job_processes{{{l}}} 2"),
        format!("allot_job_throttled_seconds_total{{{l}}} 1.5"),
        format!("allot_job_throttled_periods_total{{{l}}} 4"),
        format!("allot_job_run_queue_wait_ratio{{{l}}} 0.25"),
    ] {
        assert!(t.lines().any(|x| x == want), "missing {want:?} in\n{t}");
    }
    // No pressure on v1, no cap or quota on an uncapped job: those families are left out.
    for absent in ["allot_job_pressure", "allot_job_cap_cpus", "allot_job_quota_cpus", "# EOF"] {
        assert!(!t.contains(absent), "{absent} in\n{t}");
    }
    // Every family has HELP and TYPE once, before its samples, and every name has the prefix.
    let types = lines_of(&t, "# TYPE ");
    assert_eq!(types.len(), lines_of(&t, "# HELP ").len());
    let mut seen = std::collections::HashSet::new();
    for ty in &types {
        let name = ty.split_whitespace().nth(2).unwrap();
        assert!(seen.insert(name.to_string()) && name.starts_with("allot_"), "{ty}");
        let counter = ty.ends_with(" counter");
        assert_eq!(counter, name.ends_with("_total"), "counters and only counters end in _total: {ty}");
    }
    for s in t.lines().filter(|l| !l.starts_with('#')) {
        let name = s.split(['{', ' ']).next().unwrap();
        assert!(seen.contains(name), "sample {s} has no TYPE of its own name");
    }
}

#[test]
fn openmetrics_declares_counters_without_total_and_ends_in_eof() {
    let mut show = show();
    show.jobs[0].cap = Some("1/2!".into());
    show.jobs[0].quota = Some(0.5);
    let mut r = Readings::default();
    r.jobs
        .insert("1".into(), JobKernel { throttling: None, pressure: Some(Pressure { some_avg10: 1.0, some_s: 2.5, full_s: Some(0.5) }), wait: None });
    let t = render(&status(), &show, &r, Format::OpenMetrics);
    assert!(t.ends_with("# EOF\n"), "{t}");
    assert!(t.contains("# TYPE allot_daemon_requests counter\n"), "{t}");
    assert!(t.contains("\nallot_daemon_requests_total 120\n"), "{t}");
    assert!(t.contains("# TYPE allot_daemon info\n") && t.contains("\nallot_daemon_info{version="), "{t}");
    assert!(t.contains("# TYPE allot_job_pressure_cpu_waiting_seconds counter\n"), "{t}");
    assert!(t.contains("allot_job_pressure_cpu_waiting_seconds_total{job_id=\"1\",user=\"alice\",currency=\"alice\"} 2.5\n"), "{t}");
    assert!(t.contains("allot_job_cap_cpus{job_id=\"1\",user=\"alice\",currency=\"alice\",kind=\"hard\"} 0.5\n"), "{t}");
    assert!(t.contains("allot_job_quota_cpus{job_id=\"1\",user=\"alice\",currency=\"alice\"} 0.5\n"), "{t}");
}

#[test]
fn label_values_are_escaped_and_nothing_else_changes() {
    assert_eq!(escape_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    assert_eq!(escape_label("日本 \x1b[2J\t"), "日本 \x1b[2J\t", "the formats escape only \\, \" and line feed");
    let mut show = show();
    show.jobs[0].user = "ev\"il\\\nuser".into();
    let t = render(&status(), &show, &Readings::default(), Format::Prometheus);
    assert!(t.contains("allot_job_tickets{job_id=\"1\",user=\"ev\\\"il\\\\\\nuser\",currency=\"alice\"} 300\n"), "{t}");
    assert_eq!(t.lines().filter(|l| l.starts_with("allot_job_tickets")).count(), 1, "a line feed in a label does not start a line");
}

#[test]
fn values_are_plain_numbers() {
    assert_eq!(value(1.0), "1");
    assert_eq!(value(0.1), "0.1");
    assert_eq!(value(1e-7), "0.0000001");
    assert_eq!(value(f64::NAN), "NaN");
    assert_eq!(value(f64::INFINITY), "+Inf");
    assert_eq!(value(-f64::INFINITY), "-Inf");
    assert_eq!(value(-0.0), "0", "a sum of no f64 is -0.0; the exposition shows 0");
}

#[test]
fn background_jobs_have_no_cap_sample_and_hidden_jobs_no_process_count() {
    let mut show = show();
    show.jobs[0].background = true;
    show.jobs[0].cap = Some("0".into());
    show.jobs[0].pids = None;
    let t = render(&status(), &show, &Readings::default(), Format::Prometheus);
    assert!(!t.contains("allot_job_cap_cpus") && !t.contains("allot_job_processes"), "{t}");
    assert!(t.contains("allot_job_background{job_id=\"1\",user=\"alice\",currency=\"alice\"} 1\n"), "{t}");
}

#[test]
fn the_grafana_dashboard_uses_only_metrics_that_exist() {
    let dash = include_str!("../../../docs/grafana-allot.json");
    let v: serde_json::Value = serde_json::from_str(dash).expect("docs/grafana-allot.json is JSON");
    assert!(v["panels"].as_array().is_some_and(|p| p.len() >= 6), "a dashboard with panels");
    let names = names();
    let mut used = 0;
    let bytes = dash.as_bytes();
    let mut i = 0;
    while let Some(p) = dash[i..].find("allot_") {
        let start = i + p;
        let end = start + dash[start..].find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(dash.len() - start);
        let name = &dash[start..end];
        // A word that merely starts with allot_ inside another identifier is not a metric.
        let inside = start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_');
        if !inside && !name.ends_with('_') {
            assert!(names.iter().any(|n| n == name), "the dashboard uses {name}, which allot metrics does not write");
            used += 1;
        }
        i = end;
    }
    assert!(used >= 10, "the dashboard should chart allot's metrics, found {used} uses");
}

#[test]
fn a_currencys_memory_is_written_where_it_is_shared() {
    let mut show = show();
    show.currencies[0].memory = Some(crate::memory_view::CurrencyMemory {
        usage: 100 << 20,
        protection: 384 << 20,
        available: 512 << 20,
        limit: None,
        cap: None,
        oom_score_adj: Some(0),
        oom_kills: 2,
        pressure: Default::default(),
    });
    let t = render(&status(), &show, &Readings::default(), Format::Prometheus);
    let l = "{currency=\"alice\",kind=\"user\"}";
    for want in [
        format!("allot_currency_memory_bytes{l} 104857600"),
        format!("allot_currency_memory_protection_bytes{l} 402653184"),
        format!("allot_currency_oom_kills_total{l} 2"),
        "# TYPE allot_currency_oom_kills_total counter".into(),
    ] {
        assert!(t.lines().any(|x| x == want), "missing {want:?} in\n{t}");
    }
    assert!(!t.contains("allot_currency_memory_limit_bytes{"), "no limit, no sample:\n{t}");
}
