//! The schema against the three outputs that read it: every field appears where its spec
//! says and nowhere else, under one name, in one unit.

use super::*;
use crate::metrics::tests::{job, show, status};
use crate::metrics::{render, Format};
use crate::readings::{JobKernel, Pressure, Readings, Wait};
use crate::top::screen::{self, Frame};
use crate::top::sort::SortKey;
use allot_linux::cgroup::stat::Throttling;

/// A job with every field present: a hard cap and its quota, kernel readings of each kind.
fn full() -> (crate::proto::StatusView, crate::proto::ShowView, Readings) {
    let mut sh = show();
    sh.jobs[0].cap = Some("0.5!".into());
    sh.jobs[0].quota = Some(0.5);
    sh.jobs[0].mem = Some("64M!".into());
    sh.jobs.push(job("2", None));
    let mut r = Readings::default();
    r.jobs.insert(
        "1".into(),
        JobKernel {
            throttling: Some(Throttling { periods: 50, throttled_periods: 20, throttled_ns: 2_500_000_000 }),
            pressure: Some(Pressure { some_avg10: 12.0, some_s: 3.5, full_s: Some(1.25) }),
            wait: Some(Wait { ratio: 0.25, threads: 0.5 }),
        },
    );
    r.window_s = Some(1.0);
    (status(), sh, r)
}

fn top_header(st: &crate::proto::StatusView, sh: &crate::proto::ShowView, r: &Readings) -> String {
    let f = Frame {
        status: st,
        show: sh,
        kernel: r,
        sort: SortKey::Usage,
        ascending: false,
        filter: None,
        prompt: None,
        message: None,
        scroll: 0,
        clock: "12:00:00",
    };
    let (lines, _) = screen::render(&f, None);
    lines.into_iter().map(|l| l.text).find(|t| t.starts_with("JOB ")).expect("a job table header")
}

fn words(header: &str) -> Vec<String> {
    header.split("  ").map(str::trim).filter(|w| !w.is_empty()).map(String::from).collect()
}

#[test]
fn every_field_appears_exactly_where_its_spec_says() {
    let (st, sh, r) = full();
    let show_header = crate::output::show(&sh).lines().next().unwrap().to_string();
    let top = top_header(&st, &sh, &r);
    let metrics = render(&st, &sh, &r, Format::Prometheus);
    let families: Vec<&str> = metrics.lines().filter_map(|l| l.strip_prefix("# TYPE allot_job_")).map(|l| l.split(' ').next().unwrap()).collect();
    let want = |pick: fn(In) -> bool| shown_in(pick).map(|f| f.spec().header.to_string()).collect::<Vec<_>>();
    // The tables' columns are the schema's, in its order (top adds its usage bar).
    assert_eq!(words(&show_header), want(|i| i.show), "{show_header}");
    let mut top_want = want(|i| i.top);
    top_want.insert(top_want.iter().position(|h| h == "USAGE").unwrap() + 1, "USE/ENT".into());
    assert_eq!(words(&top), top_want, "{top}");
    // The job's metric families are the schema's metric fields, in its order.
    let names: Vec<String> = shown_in(|i| i.metric).map(|f| f.metric_name()).collect();
    assert_eq!(families.iter().map(|f| format!("allot_job_{f}")).collect::<Vec<_>>(), names, "{metrics}");
    // And each field reaches each output its spec names.
    for f in FIELDS {
        let s = f.spec();
        assert_eq!(words(&show_header).contains(&s.header.to_string()), s.shown.show, "{f:?} in show");
        assert_eq!(words(&top).contains(&s.header.to_string()), s.shown.top, "{f:?} in top");
        assert_eq!(names.contains(&f.metric_name()), s.shown.metric, "{f:?} in metrics");
    }
}

#[test]
fn names_and_units_agree_across_the_outputs() {
    let mut ids = vec![];
    let mut headers = vec![];
    for f in FIELDS {
        let s = f.spec();
        assert!(s.id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'), "{f:?}: id {}", s.id);
        assert!(!ids.contains(&s.id) && !headers.contains(&s.header), "{f:?}: id and header once each");
        ids.push(s.id);
        headers.push(s.header);
        // The unit is named once, by the suffix the schema adds, never in the id too.
        for u in ["cpus", "seconds", "ratio", "percent", "total"] {
            assert!(!s.id.ends_with(u), "{f:?}: the id {} names its unit; the suffix does", s.id);
        }
        let name = f.metric_name();
        assert!(name.ends_with(&format!("{}{}", s.unit.suffix(), if s.counter { "_total" } else { "" })), "{name}");
        assert!(!(s.shown.metric && s.unit == Unit::Text), "{f:?}: words are labels, not metric values");
        assert!(!(s.counter && s.shown.top && s.unit == Unit::Number), "{f:?}");
    }
    // A number shows in a table as its metric's value in the unit's format: what a cell
    // says and what a scrape says are the same reading.
    let (st, sh, r) = full();
    let metrics = render(&st, &sh, &r, Format::Prometheus);
    let j = &sh.jobs[0];
    let k = r.jobs[&j.id];
    let mut checked = 0;
    for f in FIELDS.into_iter().filter(|f| f.spec().shown.metric && (f.spec().shown.show || f.spec().shown.top)) {
        let prefix = format!("{}{{job_id=\"1\",", f.metric_name());
        let line = metrics.lines().find(|l| l.starts_with(&prefix)).unwrap_or_else(|| panic!("no {prefix} in\n{metrics}"));
        let v: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
        let cell = f.text(j, &k, Form::Short);
        if f == Field::MemCap {
            assert_eq!(format!("{}!", allot_model::memory::format_size(v as u64)), cell, "{f:?}: a hard memory cap as set");
            assert!(line.contains("kind=\"hard\"") && v == (64 << 20) as f64, "{line}");
        } else if f != Field::Cap {
            assert_eq!(format_unit(f.spec().unit, v), cell, "{f:?}: {line}");
        } else {
            assert_eq!(format!("{v}!"), cell, "{f:?}: a hard cap as set");
        }
        checked += 1;
    }
    assert!(checked >= 7, "{checked}");
    // Units format as a person reads them.
    assert_eq!(format_unit(Unit::Cpus, -1e-9), "0.00");
    assert_eq!(format_unit(Unit::Ratio, 0.254), "25%");
    assert_eq!(format_unit(Unit::Seconds, 245.0), "4m05s");
    assert_eq!(format_unit(Unit::Number, 300.0), "300");
}

#[test]
fn a_hidden_or_unread_value_is_a_dash_in_top_and_no_sample_in_metrics() {
    let (st, sh, r) = full();
    let hidden = &sh.jobs[1];
    let none = JobKernel::default();
    for f in [Field::Processes, Field::Wait, Field::Throttled, Field::Psi] {
        assert_eq!(f.text(hidden, &none, Form::Short), "-", "{f:?}");
        assert_eq!(f.number(hidden, &none), None, "{f:?}");
    }
    assert_eq!(Field::Processes.text(hidden, &none, Form::Full), "(hidden)");
    let metrics = render(&st, &sh, &r, Format::Prometheus);
    assert!(!metrics.contains("allot_job_processes{job_id=\"2\""), "{metrics}");
}

#[test]
fn every_currency_field_appears_exactly_where_its_spec_says() {
    use crate::currency_fields::{currency_shown_in, CURRENCY_FIELDS};
    let (st, sh, r) = full();
    let shown = crate::output::show(&sh);
    let show_header = shown.lines().find(|l| l.starts_with("CURRENCY ")).expect("show's currency table").to_string();
    let f = Frame {
        status: &st,
        show: &sh,
        kernel: &r,
        sort: SortKey::Usage,
        ascending: false,
        filter: None,
        prompt: None,
        message: None,
        scroll: 0,
        clock: "12:00:00",
    };
    let top = screen::render(&f, None).0.into_iter().map(|l| l.text).find(|t| t.starts_with("CURRENCY ")).expect("top's currency table");
    let metrics = render(&st, &sh, &r, Format::Prometheus);
    let families: Vec<String> = metrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE allot_currency_"))
        .map(|l| format!("allot_currency_{}", l.split(' ').next().unwrap()))
        .collect();
    let want = |pick: fn(In) -> bool| currency_shown_in(pick).map(|f| f.spec().header.to_string()).collect::<Vec<_>>();
    assert_eq!(words(&show_header), want(|i| i.show), "{show_header}");
    let mut top_want = want(|i| i.top);
    top_want.push("USE/ENT".into());
    assert_eq!(words(&top), top_want, "{top}");
    // The fixture shares no memory, so the currency families are the schema's alone.
    let names: Vec<String> = currency_shown_in(|i| i.metric).map(|f| f.metric_name()).collect();
    assert_eq!(families, names, "{metrics}");
    // A number reads the same in a cell and in a scrape.
    let c = &sh.currencies[0];
    for f in CURRENCY_FIELDS.into_iter().filter(|f| f.spec().shown.metric) {
        let prefix = format!("{}{{currency=\"alice\",", f.metric_name());
        let line = metrics.lines().find(|l| l.starts_with(&prefix)).unwrap_or_else(|| panic!("no {prefix} in\n{metrics}"));
        let v: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
        let cell = f.text(c, &sh.jobs);
        let want = if f == crate::currency_fields::CurrencyField::Cap { format!("{v}!") } else { format_unit(f.spec().unit, v) };
        assert_eq!(cell, want, "{f:?}: {line}");
    }
}
