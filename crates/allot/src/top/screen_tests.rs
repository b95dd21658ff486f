use super::*;
use crate::fields::short_command;
use crate::metrics::tests::{job, show, status};
use crate::readings::{JobKernel, Wait};
use allot_linux::cgroup::stat::Throttling;

fn data() -> (StatusView, ShowView, Readings) {
    let mut sh = show();
    let mut b = job("2", Some(vec![20]));
    b.tickets = 100;
    b.usage = 0.9;
    b.entitlement = 0.25;
    b.boost = false;
    b.command = Some("/usr/local/bin/allot workload cpu --duration 60s".into());
    let mut c = job("17", None);
    c.tickets = 200;
    c.usage = 0.1;
    c.user = "bob".into();
    c.currency = "bob".into();
    c.active = false;
    sh.jobs.push(b);
    sh.jobs.push(c);
    let mut r = Readings::default();
    r.jobs.insert("1".into(), JobKernel { wait: Some(Wait { ratio: 0.4, threads: 0.4 }), ..Default::default() });
    r.jobs.insert(
        "2".into(),
        JobKernel {
            wait: Some(Wait { ratio: 0.1, threads: 0.1 }),
            throttling: Some(Throttling { periods: 5, throttled_periods: 2, throttled_ns: 2_500_000_000 }),
            pressure: None,
        },
    );
    r.window_s = Some(1.0);
    (status(), sh, r)
}

fn frame<'a>(st: &'a StatusView, sh: &'a ShowView, r: &'a Readings, sort: SortKey, ascending: bool) -> Frame<'a> {
    Frame { status: st, show: sh, kernel: r, sort, ascending, filter: None, prompt: None, message: None, scroll: 0, clock: "12:00:00" }
}

/// The job ids in the order the frame lists them.
fn order(lines: &[Line]) -> Vec<String> {
    let h = lines.iter().position(|l| l.text.starts_with("JOB")).expect("a job header");
    lines[h + 1..].iter().map_while(|l| l.text.split_whitespace().next().filter(|w| ["1", "2", "17"].contains(w)).map(String::from)).collect()
}

#[test]
fn an_80_by_24_terminal_gets_24_lines_of_at_most_80_columns() {
    let (st, sh, r) = data();
    let (lines, max_scroll) = render(&frame(&st, &sh, &r, SortKey::Usage, false), Some((80, 24)));
    assert_eq!(lines.len(), 24);
    assert_eq!(max_scroll, 0);
    for l in &lines {
        assert!(width(&l.text) <= 80, "{:?} is {} wide", l.text, width(&l.text));
        assert!(!l.text.contains('\x1b'));
    }
    let header = lines.iter().find(|l| l.text.starts_with("JOB")).unwrap();
    for col in ["USER", "TICKETS", "ENTITLED", "USAGE", "USE/ENT", "STATE", "WAIT", "COMMAND"] {
        assert!(header.text.contains(col), "{col} missing from {:?}", header.text);
    }
    // The sort column is marked.
    let (a, b) = header.mark.unwrap();
    assert_eq!(header.text[a..b].trim(), "USAGE");
    let footer = &lines[23];
    for k in ["u usage", "e entitled", "t tickets", "p pids", "w wait", "j job", "/ user", "q quit"] {
        assert!(footer.text.contains(k), "{k} missing from the footer {:?}", footer.text);
    }
    assert_eq!(&footer.text[footer.mark.unwrap().0..footer.mark.unwrap().1], "u usage");
    assert_eq!(lines[0].style, Style::Title);
    // The title's least useful end is cut at 80 columns.
    assert_eq!(lines[0].text, "allot top 12:00:00  3 jobs, 2 active  2 CPUs, 0.25 outside allot  up 1h00m  cgr…");
}

#[test]
fn narrow_terminals_drop_whole_columns_in_order() {
    let (st, sh, r) = data();
    let header = |w: usize| {
        let (lines, _) = render(&frame(&st, &sh, &r, SortKey::Usage, false), Some((w, 24)));
        for l in &lines {
            assert!(width(&l.text) <= w, "{:?} wider than {w}", l.text);
        }
        lines.into_iter().find(|l| l.text.starts_with("JOB")).unwrap().text
    };
    let wide = header(200);
    for col in ["CURRENCY", "FUNDING", "THROTTLED", "PIDS", "WAIT"] {
        assert!(wide.contains(col), "{col} in {wide:?}");
    }
    assert!(!wide.contains("PSI"), "no job has pressure (cgroup v1): no PSI column");
    let narrow = header(60);
    for col in ["JOB", "TICKETS", "ENTITLED", "USAGE", "COMMAND"] {
        assert!(narrow.contains(col), "{col} kept in {narrow:?}");
    }
    for col in ["FUNDING", "CURRENCY", "THROTTLED"] {
        assert!(!narrow.contains(col), "{col} dropped from {narrow:?}");
    }
    // Even a tiny terminal gets lines no wider than itself.
    header(20);
    // At 80 columns a 13-character job id and a 5-letter user still leave room for WAIT.
    let (st, mut sh, r) = data();
    sh.jobs[0].id = "alice/default".into();
    let (lines, _) = render(&frame(&st, &sh, &r, SortKey::Usage, false), Some((80, 24)));
    let h = lines.iter().find(|l| l.text.starts_with("JOB")).unwrap();
    assert!(h.text.contains("WAIT") && h.text.contains("USE/ENT"), "{:?}", h.text);
    // And a terminal of 4 rows gets 4 lines.
    assert_eq!(render(&frame(&st, &sh, &r, SortKey::Usage, false), Some((80, 4))).0.len(), 4);
}

#[test]
fn sort_keys_order_the_jobs() {
    let (st, sh, r) = data();
    let ids = |k, asc| order(&render(&frame(&st, &sh, &r, k, asc), Some((120, 30))).0);
    assert_eq!(ids(SortKey::Usage, false), ["2", "1", "17"]);
    assert_eq!(ids(SortKey::Usage, true), ["17", "1", "2"]);
    assert_eq!(ids(SortKey::Tickets, false), ["1", "17", "2"]);
    assert_eq!(ids(SortKey::Entitled, false), ["1", "17", "2"]);
    assert_eq!(ids(SortKey::Pids, false), ["1", "2", "17"], "hidden processes sort last");
    assert_eq!(ids(SortKey::Wait, false), ["1", "2", "17"], "no wait sorts last");
    assert_eq!(ids(SortKey::Job, true), ["1", "2", "17"], "job ids compare as numbers");
}

#[test]
fn a_plain_frame_has_every_column_every_row_and_the_legend_but_no_escapes() {
    let (st, mut sh, r) = data();
    sh.jobs[0].command = Some("evil\x1b]0;pwned\x07\x1b[2J".into());
    sh.jobs[0].user = "\u{202e}resu".into();
    let (lines, _) = render(&frame(&st, &sh, &r, SortKey::Tickets, false), None);
    let text: String = lines.iter().map(|l| l.text.clone() + "\n").collect();
    assert!(!text.contains('\x1b') && !text.contains('\x07') && !text.contains('\u{202e}'), "{text}");
    assert!(text.contains("evil\\e]0;pwned\\a\\e[2J"), "{text}");
    assert!(text.contains("\\u{202e}resu"), "{text}");
    assert!(text.contains("Sorted by tickets (largest first)."), "{text}");
    assert!(text.contains("ENTITLED, USAGE: CPUs (of 2)"), "{text}");
    assert!(text.contains("Note: ") || r.notes.is_empty());
    assert!(lines.iter().all(|l| l.mark.is_none()), "no highlight in a plain frame");
    // Job 2: entitlement 0.25, usage 0.9 on a 1-CPU scale, 12 columns: mostly beyond its entitlement.
    let row = lines.iter().find(|l| l.text.starts_with("2 ")).unwrap();
    assert!(row.text.contains("###++++++++."), "{}", row.text);
    assert!(row.text.contains("2.5s"), "throttled time: {}", row.text);
    assert!(row.text.contains("10%"), "wait: {}", row.text);
    assert!(row.text.ends_with("  allot workload cpu --duration 60s"), "the program without its directory: {}", row.text);
    assert!(!text.contains("-0.00"), "no negative zero for a currency without active jobs:\n{text}");
    let cur = lines.iter().find(|l| l.text.starts_with("CURRENCY")).unwrap();
    assert!(cur.text.contains("FUNDING  CAP"), "the currency table has a CAP column: {:?}", cur.text);
    let idle = lines.iter().find(|l| l.text.starts_with("17 ")).unwrap();
    assert!(idle.text.contains("(0.75)") && idle.text.contains("(hidden)"), "{}", idle.text);
    assert_eq!(order(&lines), ["1", "17", "2"]);
}

#[test]
fn long_lists_scroll_and_say_where_they_are() {
    let (st, mut sh, r) = data();
    for n in 100..160 {
        sh.jobs.push(job(&n.to_string(), Some(vec![n])));
    }
    let f = Frame { scroll: 5, ..frame(&st, &sh, &r, SortKey::Job, true) };
    let (lines, max_scroll) = render(&f, Some((80, 24)));
    assert_eq!(lines.len(), 24);
    assert!(max_scroll > 40, "{max_scroll}");
    let h = lines.iter().position(|l| l.text.starts_with("JOB")).unwrap();
    assert!(lines[h + 1].text.starts_with("102 "), "5 rows (1, 2, 17, 100, 101) scrolled past: {:?}", lines[h + 1].text);
    assert!(lines[23].text.contains(&format!("6/{}", max_scroll + 1)), "{}", lines[23].text);
}

#[test]
fn the_prompt_and_messages_are_escaped() {
    let (st, sh, r) = data();
    let f = Frame { prompt: Some("a\x1b[2Jb"), message: Some("cannot reach\x07 the daemon"), ..frame(&st, &sh, &r, SortKey::Usage, false) };
    let (lines, _) = render(&f, Some((100, 24)));
    assert!(lines[23].text.contains("a\\e[2Jb_"), "{}", lines[23].text);
    assert!(lines.iter().any(|l| l.style == Style::Alert && l.text == "cannot reach\\a the daemon"));
}

#[test]
fn bars_and_durations() {
    assert_eq!(bar(0.25, 0.5, 1.0, 8), "##--....");
    assert_eq!(bar(0.75, 0.5, 1.0, 8), "####++..");
    assert_eq!(bar(3.0, 0.0, 1.0, 4), "++++");
    assert_eq!(bar(0.0, 0.0, 1.0, 4), "....");
    assert_eq!(secs(0.0), "0");
    assert_eq!(secs(0.421), "0.42s");
    assert_eq!(secs(12.34), "12.3s");
    assert_eq!(secs(245.0), "4m05s");
    assert_eq!(secs(3.0 * 3600.0 + 720.0), "3h12m");
    assert_eq!(secs(2.0 * 86400.0 + 4.0 * 3600.0), "2d04h");
    assert!(SortKey::parse("sideways")
        .unwrap_err()
        .to_string()
        .contains("--sort must be one of usage, entitled, tickets, pids, wait, job, got \"sideways\""));
    assert_eq!(SortKey::parse("t").unwrap(), SortKey::Tickets);
    assert_eq!(short_command("/usr/bin/python3 /srv/x.py --y"), "python3 /srv/x.py --y");
    assert_eq!(short_command("make -j8"), "make -j8");
    assert_eq!(short_command("/bin/sleep"), "sleep");
    assert_eq!(short_command("/"), "/");
    assert_eq!(short_command(""), "");
}

#[test]
fn cpus_never_print_as_negative_zero() {
    let none: f64 = std::iter::empty::<f64>().sum();
    assert_eq!(crate::fields::cpus(none), "0.00");
    assert_eq!(crate::fields::cpus(-1e-9), "0.00");
    assert_eq!(crate::fields::cpus(1.234), "1.23");
}

#[test]
fn a_currencys_memory_and_io_pressure_is_a_column_only_where_the_kernel_has_it() {
    use crate::memory_view::{CurrencyMemory, CurrencyPressure, Stall};
    let (st, mut sh, r) = data();
    let header =
        |sh: &ShowView| render(&frame(&st, sh, &r, SortKey::Usage, false), None).0.into_iter().find(|l| l.text.starts_with("CURRENCY")).unwrap().text;
    assert!(!header(&sh).contains("PSI"), "no pressure anywhere (cgroup v1): no column");
    let io = Stall { some_avg10: 37.0, some_s: 1.0, full_avg10: None, full_s: None };
    sh.currencies[0].memory = Some(CurrencyMemory {
        usage: 1 << 20,
        protection: 2 << 20,
        available: 4 << 20,
        limit: None,
        cap: None,
        oom_score_adj: None,
        oom_kills: 0,
        pressure: CurrencyPressure { memory: None, io: Some(io) },
    });
    let h = header(&sh);
    assert!(h.contains("IO_PSI") && !h.contains("MEM_PSI"), "only the pressure some currency has: {h}");
    let lines = render(&frame(&st, &sh, &r, SortKey::Usage, false), None).0;
    let row = lines.iter().find(|l| l.text.starts_with(&sh.currencies[0].name)).unwrap();
    assert!(row.text.trim_end().ends_with("37%"), "{}", row.text);
}
