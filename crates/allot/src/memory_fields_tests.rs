//! The memory schema against the two outputs that read it: `show`'s memory table and the
//! memory families of `metrics`, each field where its spec says, in one unit.

use super::*;
use crate::metrics::tests::{show, status};
use crate::metrics::{render, Format};
use crate::readings::Readings;

fn memory(limit: Option<u64>) -> CurrencyMemory {
    CurrencyMemory {
        usage: 100 << 20,
        protection: 384 << 20,
        available: 512 << 20,
        limit,
        cap: Some("2G!".into()),
        oom_score_adj: Some(-999),
        oom_kills: 3,
        pressure: crate::memory_view::CurrencyPressure { memory: Some(STALL), io: Some(STALL) },
    }
}

const STALL: crate::memory_view::Stall = crate::memory_view::Stall { some_avg10: 1.5, some_s: 2.0, full_avg10: Some(0.5), full_s: Some(1.0) };

fn words(line: &str) -> Vec<String> {
    line.split_whitespace().map(str::to_string).collect()
}

#[test]
fn the_table_shows_use_against_share() {
    let mut sh = show();
    sh.currencies[0].memory = Some(CurrencyMemory { cap: None, ..memory(Some(412 << 20)) });
    let t = table(&sh.currencies).unwrap();
    assert!(t.contains("alice") && t.contains("100M") && t.contains("75%") && t.contains("384M") && t.contains("412M") && t.contains("-999"), "{t}");
    assert!(t.contains("of the 512M available"), "{t}");
    sh.currencies[0].memory = None;
    assert_eq!(table(&sh.currencies), None, "no currency shares memory: no table");
}

#[test]
fn every_memory_field_appears_exactly_where_its_spec_says() {
    let mut sh = show();
    sh.currencies[0].memory = Some(memory(Some(412 << 20)));
    let mut other = sh.currencies[0].clone();
    other.name = "bob".into();
    other.memory = None;
    sh.currencies.push(other);
    let shown = crate::output::show(&sh);
    let header = shown.lines().find(|l| l.starts_with("CURRENCY ") && l.contains("MEMORY")).expect("show's memory table");
    let want: Vec<String> = memory_shown_in(|i| i.show).map(|f| f.spec().header.to_string()).collect();
    assert_eq!(words(header), want, "{shown}");
    // Only the currency whose memory is shared has a row and samples.
    assert!(shown.lines().any(|l| l.starts_with("alice ") && l.contains("100M")), "{shown}");
    assert!(!shown.lines().any(|l| l.starts_with("bob ") && l.contains("100M")), "{shown}");

    let metrics = render(&status(), &sh, &Readings::default(), Format::Prometheus);
    let families: Vec<String> = metrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter(|l| ["allot_currency_memory", "allot_currency_oom", "allot_currency_pressure"].iter().any(|p| l.starts_with(p)))
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect();
    let names: Vec<String> = memory_shown_in(|i| i.metric).map(|f| f.metric_name()).collect();
    assert_eq!(families, names, "{metrics}");
    assert!(metrics.contains("# TYPE allot_currency_oom_kills_total counter"), "{metrics}");
    assert!(!metrics.lines().any(|l| l.starts_with("allot_currency_memory_bytes{currency=\"bob\"")), "{metrics}");
    // A number reads the same in a cell and in a scrape.
    let c = &sh.currencies[0];
    for f in MEMORY_FIELDS.into_iter().filter(|f| f.spec().shown.metric) {
        let prefix = format!("{}{{currency=\"alice\",", f.metric_name());
        let line = metrics.lines().find(|l| l.starts_with(&prefix)).unwrap_or_else(|| panic!("no {prefix} in\n{metrics}"));
        let v: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
        assert_eq!(f.text(c, c.memory.as_ref().unwrap()), format_unit(f.spec().unit, v), "{f:?}: {line}");
    }
}

#[test]
fn absent_values_are_a_dash_in_the_table_and_no_sample() {
    let mut sh = show();
    sh.currencies[0].memory = Some(CurrencyMemory { limit: None, cap: None, oom_score_adj: None, available: 0, ..memory(None) });
    let m = sh.currencies[0].memory.clone().unwrap();
    let c = &sh.currencies[0];
    for f in [MemoryField::Limit, MemoryField::Cap, MemoryField::OomAdj] {
        assert_eq!(f.text(c, &m), "-", "{f:?}");
    }
    assert_eq!(MemoryField::Share.text(c, &m), "0%", "nothing available: a share of nothing");
    let metrics = render(&status(), &sh, &Readings::default(), Format::Prometheus);
    assert!(!metrics.contains("allot_currency_memory_limit_bytes{"), "no limit, no sample:\n{metrics}");
}

#[test]
fn pressure_is_shown_and_written_only_where_the_kernel_has_it() {
    use crate::memory_view::{CurrencyPressure, Stall};
    let mut sh = show();
    let io = Stall { some_avg10: 42.0, some_s: 12.5, full_avg10: Some(7.0), full_s: Some(3.25) };
    sh.currencies[0].memory = Some(CurrencyMemory { pressure: CurrencyPressure { memory: None, io: Some(io) }, ..memory(None) });
    let t = table(&sh.currencies).unwrap();
    let header = words(t.lines().next().unwrap());
    let row = words(t.lines().find(|l| l.starts_with("alice")).unwrap());
    let cell = |h: &str| row[header.iter().position(|x| x == h).unwrap_or_else(|| panic!("no {h} in {header:?}"))].clone();
    assert_eq!((cell("IO_PSI"), cell("IO_FULL"), cell("MEM_PSI"), cell("MEM_FULL")), ("42%".into(), "7%".into(), "-".into(), "-".into()), "{t}");
    let m = render(&status(), &sh, &Readings::default(), Format::Prometheus);
    let l = "{currency=\"alice\",kind=\"user\"}";
    for want in [
        format!("allot_currency_pressure_io_avg10_percent{l} 42"),
        format!("allot_currency_pressure_io_full_avg10_percent{l} 7"),
        format!("allot_currency_pressure_io_waiting_seconds_total{l} 12.5"),
        format!("allot_currency_pressure_io_stalled_seconds_total{l} 3.25"),
        "# TYPE allot_currency_pressure_io_waiting_seconds_total counter".into(),
    ] {
        assert!(m.lines().any(|x| x == want), "missing {want:?} in\n{m}");
    }
    assert!(!m.contains("allot_currency_pressure_memory"), "no memory.pressure, no sample (cgroup v1):\n{m}");
    // The reply without pressure says nothing of it.
    let json = serde_json::to_string(&CurrencyMemory { pressure: Default::default(), ..memory(None) }).unwrap();
    assert!(!json.contains("pressure"), "{json}");
}
