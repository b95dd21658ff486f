//! How the CLI prints replies: tables a person reads at a glance, or JSON. Every string
//! that came from a process or a user goes through `allot_report::for_terminal` (the
//! table does it per cell), so nothing can move the cursor or retitle the terminal.

use crate::currency_fields::{currency_shown_in, CurrencyField};
use crate::fields::{self, Field, Form};
use crate::proto::{Changed, CurrencyView, FundingView, JobMade, Response, ShowView, StatusView};
use allot_report::{for_terminal, Align, Table};
use std::fmt::Write;

/// Prints a reply as JSON (its data, without the kind tag) or as text.
pub fn print(json: bool, r: &Response) -> anyhow::Result<i32> {
    if json {
        let v = match r {
            Response::Status(x) => serde_json::to_value(x)?,
            Response::Show(x) => serde_json::to_value(x)?,
            Response::Job(x) => serde_json::to_value(x)?,
            Response::Changed(x) => serde_json::to_value(x)?,
            Response::Funding(x) => serde_json::to_value(x)?,
            Response::Currencies(x) => serde_json::to_value(x)?,
            Response::Log(x) => serde_json::to_value(x)?,
            Response::Explain(x) => serde_json::to_value(x)?,
            Response::Rules(x) => serde_json::to_value(x)?,
        };
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print!(
            "{}",
            match r {
                Response::Status(x) => status(x),
                Response::Show(x) => show(x),
                Response::Job(x) => job_made(x),
                Response::Changed(x) => changed(x),
                Response::Funding(x) => funding(x),
                Response::Currencies(x) => currencies(&x.currencies, &[]),
                Response::Log(x) => log(x),
                Response::Explain(x) => explain(x),
                Response::Rules(x) => rules(x),
            }
        );
    }
    Ok(0)
}

/// `allot show`. With no jobs, one line saying how to start one instead of empty tables.
pub fn show(d: &ShowView) -> String {
    if d.jobs.is_empty() {
        return "no jobs: start one with allot run -- COMMAND, or give a running process to allot with allot set PID\n".into();
    }
    // The fields `show` prints, from the one schema `top` and `metrics` read too.
    let fields: Vec<Field> = fields::shown_in(|i| i.show).collect();
    let aligns: Vec<Align> = fields.iter().map(|f| if f.right(Form::Full) { Align::Right } else { Align::Left }).collect();
    let mut t = Table::new(fields.iter().map(|f| f.spec().header)).aligns(&aligns).free_last(true);
    let none = Default::default();
    for j in &d.jobs {
        t.row(fields.iter().map(|f| f.text(j, &none, Form::Full)));
    }
    let mut out = t.render();
    out.push('\n');
    out.push_str(&currencies(&d.currencies, &d.jobs));
    if let Some(t) = crate::memory_fields::table(&d.currencies) {
        out.push('\n');
        out.push_str(&t);
    }
    let _ = writeln!(
        out,
        "\nENTITLED and USAGE in CPUs (the machine has {}; load outside allot takes {:.2}). ENTITLED counts active jobs, their runnable threads and CPUs; (in parentheses): what an idle job would get if it woke.",
        d.ncpu, d.outside
    );
    let _ = writeln!(out, "STATE (applied now): bg background, boost boosted, focus focused, held soft cap held, nice:N nice emulation.");
    if d.hidden {
        let _ =
            writeln!(out, "Other users' pids and commands are hidden (as /proc with hidepid); the admin may show them (privacy.show_other_users).");
    }
    out
}

/// The currency table: the fields `show` prints, from the schema `top` and `metrics` read
/// too (`jobs`: the reply's jobs, for the fields summed over them).
fn currencies(c: &[CurrencyView], jobs: &[crate::proto::JobView]) -> String {
    let fields: Vec<CurrencyField> = currency_shown_in(|i| i.show).collect();
    let aligns: Vec<Align> = fields.iter().map(|f| if f.right() { Align::Right } else { Align::Left }).collect();
    Table::new(fields.iter().map(|f| f.spec().header))
        .aligns(&aligns)
        .with_rows(c.iter().map(|c| fields.iter().map(|f| f.text(c, jobs)).collect::<Vec<_>>()))
        .render()
}

fn funding(f: &FundingView) -> String {
    let cap = f.cap.as_deref().map(|c| format!(", cap {} (all its jobs together)", for_terminal(c))).unwrap_or_default();
    format!("{}: funding {}{cap}\n", for_terminal(&f.currency), f.funding)
}

fn changed(c: &Changed) -> String {
    let jobs = for_terminal(&c.jobs.join(", ")).into_owned();
    let mut out = match c.focus {
        Some(on) => format!("job {jobs}: focus {}\n", if on { "on" } else { "off" }),
        None => format!("changed job{} {jobs}\n", if c.jobs.len() == 1 { "" } else { "s" }),
    };
    for w in &c.warnings {
        let _ = writeln!(out, "warning: {}", for_terminal(w));
    }
    out
}

fn job_made(j: &JobMade) -> String {
    format!("job {} in currency {} ({} tickets)\n", for_terminal(&j.job), for_terminal(&j.currency), j.tickets)
}

/// `allot status`.
pub fn status(d: &StatusView) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "allot daemon {} (protocol {}, pid {}, up {} s)", d.version, d.protocol, d.pid, d.uptime_s);
    if d.manager == "systemd" {
        let _ = writeln!(
            out,
            "cgroup            {}, systemd's: jobs in scopes systemd delegates to allot, currencies are users' slices",
            d.cgroup_version
        );
    } else {
        let _ = writeln!(out, "cgroup            {} at {}", d.cgroup_version, for_terminal(&d.cgroup_root));
    }
    let against = match d.outside_weight {
        Some(w) => format!("allot's tree weighs {w} against it, [outside] weight"),
        None => "user.slice against system.slice is systemd's".into(),
    };
    let _ = writeln!(out, "cpus              {} (load outside allot: {:.2}; {against})", d.ncpu, d.outside);
    let _ = writeln!(out, "{}", for_terminal(&crate::config_scheduler::line(&d.scheduler)));
    let _ = writeln!(out, "{}", for_terminal(&allot::io_view::line(&d.io)));
    let _ = writeln!(out, "jobs              {}", d.jobs);
    let _ = writeln!(out, "placement         {}", for_terminal(&d.placement));
    let _ = writeln!(out, "tracking          {}", d.tracking);
    let _ = writeln!(out, "real-time         {}", d.rt);
    for (k, v) in &d.features {
        let _ = writeln!(out, "{:<17} {}", k.replace('_', "-"), if *v { "yes" } else { "NO" });
    }
    for dgr in &d.degraded {
        let _ = writeln!(out, "degraded:         {dgr}");
    }
    match &d.last_reload {
        None => {}
        Some(r) => {
            let when = format!("{} UTC", utc(r.time));
            match &r.refused {
                None => _ = writeln!(out, "last reload       {when}: taken ({})", for_terminal(&r.file)),
                Some(e) => _ = writeln!(out, "last reload       {when}: REFUSED, the config in force is older than the file: {}", for_terminal(e)),
            }
        }
    }
    let c = &d.counters;
    let _ = writeln!(
        out,
        "since start       {} placed, {} requests, {} refused by limits, {} outside changes re-asserted, {} failed writes",
        c.placed, c.requests, c.limited, c.reconciled, c.write_errors
    );
    out
}

/// `allot explain`.
pub fn explain(e: &crate::proto::ExplainView) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "job {} in currency {}: entitled to {:.3} CPU; used {:.3} over the boost window and {:.3} in the last tick; weight {}{}",
        for_terminal(&e.job),
        for_terminal(&e.currency),
        e.entitlement,
        e.window,
        e.last,
        e.weight,
        e.quota.map(|q| format!(", cpu.max {q:.2} CPU")).unwrap_or_default()
    );
    for r in &e.reasons {
        let since = r.since_s.map(|s| format!(" (for {s:.1} s)")).unwrap_or_default();
        let _ = writeln!(out, "  {:<11} {}{since}: {}", r.state, if r.on { "yes" } else { "no" }, for_terminal(&r.because));
    }
    out
}

/// `allot rules test`.
pub fn rules(r: &crate::proto::RulesView) -> String {
    let mut out = format!("process {} ({}, {}): ", r.pid, for_terminal(&r.comm), for_terminal(&r.exe));
    match &r.matched {
        Some(m) => {
            let _ = writeln!(out, "rule {}", for_terminal(m));
        }
        None => out.push_str("no rule matches; it stays in its user's default job\n"),
    }
    for c in &r.checked {
        let _ = writeln!(out, "  line {:<4} {:<20} {}", c.line, for_terminal(&c.rule), for_terminal(&c.why));
    }
    out
}

/// A unix time as `YYYY-MM-DD HH:MM:SS` UTC.
fn utc(t: f64) -> String {
    let s = t.max(0.0) as i64;
    let (days, rem) = (s.div_euclid(86_400), s.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}", rem / 3600, rem / 60 % 60, rem % 60)
}

/// `allot log`.
pub fn log(l: &crate::proto::LogView) -> String {
    let mut t = Table::new(["TIME (UTC)", "UID", "PID", "REQUEST", "OUTCOME"])
        .aligns(&[Align::Left, Align::Right, Align::Right, Align::Left, Align::Left])
        .free_last(true);
    for r in &l.records {
        let outcome = match &r.refused {
            Some(why) => format!("refused: {why}"),
            None if r.changes.is_empty() => "no change".into(),
            None => r.changes.iter().map(|c| format!("{}: {} -> {}", c.what, c.before, c.after)).collect::<Vec<_>>().join("; "),
        };
        t.row([utc(r.time), r.uid.to_string(), r.pid.to_string(), r.request.clone(), outcome]);
    }
    if l.records.is_empty() {
        return "no audit records (changes and refusals are recorded as they happen)\n".into();
    }
    t.render()
}

#[cfg(test)]
mod tests {
    #[test]
    fn show_without_jobs_is_one_plain_line() {
        let mut d = crate::metrics::tests::show();
        d.jobs.clear();
        let out = super::show(&d);
        assert_eq!(out.lines().count(), 1, "{out}");
        assert!(out.starts_with("no jobs: start one with allot run -- COMMAND"), "{out}");
        // With jobs, the tables as before.
        assert!(super::show(&crate::metrics::tests::show()).starts_with("JOB "));
    }

    #[test]
    fn utc_dates() {
        assert_eq!(super::utc(0.0), "1970-01-01 00:00:00");
        assert_eq!(super::utc(1_795_310_000.0), "2026-11-22 01:13:20");
        assert_eq!(super::utc(951_782_400.0), "2000-02-29 00:00:00");
    }
}
