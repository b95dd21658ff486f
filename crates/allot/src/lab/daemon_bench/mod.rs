//! `allot-lab bench daemon`: what the daemon costs as the machine grows, how fast it places a
//! new login, and what a fork storm does to it.
//!
//! - The scale curve: for each row (PROCESSESxUSERS), a fresh private daemon, that many
//!   `sleep` processes started as logins of account-less uids (`--test-uids`); then the
//!   daemon at rest over a window (its CPU from its process CPU clock, its RSS), then the
//!   placement latency of new logins, timed from outside the daemon (logins.rs).
//! - The fork storm (storm.rs): one user forks as fast as it can while others log in.
//!
//! `--check` applies the full thresholds ([`FULL`]) to every row (they are set for 10,000
//! processes of 100 users; a smaller row must not cost more) and to the storm. `--quick` (CI) runs
//! small rows and short windows, with thresholds that assert the direction with margins.

mod logins;
mod meter;
mod scale;
mod storm;

pub use logins::dies_with_us;
pub use meter::cpu_ns as daemon_cpu_ns;

use allot_measure::args::{duration, positive_duration};
use allot_model::duration::Unit;
use allot_report::{Rule, Table};
use anyhow::bail;
use clap::Args;
use std::time::{Duration, Instant};

/// `allot-lab bench daemon`.
#[derive(Debug, Args)]
pub struct DaemonBenchArgs {
    /// Rows of the scale curve, PROCESSESxUSERS, comma-separated; 0xN measures a daemon
    /// with no user processes [default: 0x1,100x1,1000x10,10000x100,10000x1; --quick:
    /// 100x1,1000x10].
    #[arg(long, value_delimiter = ',')]
    pub rows: Vec<String>,
    /// Each row's window at rest: 30s, 5min; a bare number is seconds [default: 5 min, so
    /// each window holds one of the daemon's safety scans (every 5 min); --quick: 10 s].
    #[arg(long)]
    pub window: Option<String>,
    /// Logins whose placement is timed in each row [default: 200; --quick: 40].
    #[arg(long)]
    pub logins: Option<usize>,
    /// How long the fork storm lasts; 0 skips it [default: 10 s; --quick: 3 s].
    #[arg(long)]
    pub storm: Option<String>,
    /// Also write the JSON report to this file.
    #[arg(long)]
    pub output: Option<std::path::PathBuf>,
    /// Exit non-zero if a threshold is missed.
    #[arg(long)]
    pub check: bool,
    /// Small rows, short windows and storm, thresholds with margins (CI; under a minute).
    #[arg(long)]
    pub quick: bool,
    /// The uids the rows' and the storm's users are (as many as the largest needs).
    #[command(flatten)]
    pub uids: allot_measure::test_uids::TestUids,
}

/// The thresholds `--check` applies.
#[derive(Debug, Clone, Copy, serde::Serialize)]
struct Limits {
    cpu_percent: f64,
    rss_mb: f64,
    p50_ms: f64,
    p99_ms: f64,
    storm_forks_per_s: f64,
    storm_cpu_percent: f64,
    storm_rss_ratio: f64,
}

/// The full run's thresholds: the daemon at rest with 10,000 processes of 100 users, a
/// login placed, a fork storm survived (docs/measure.md).
const FULL: Limits =
    Limits { cpu_percent: 0.1, rss_mb: 30.0, p50_ms: 10.0, p99_ms: 50.0, storm_forks_per_s: 5000.0, storm_cpu_percent: 20.0, storm_rss_ratio: 1.10 };
/// CI on a shared 2-CPU machine: twenty times the CPU (a short window may hold the
/// safety scan (every 5 min), which reads every process on the machine: one 5 s window
/// measured 0.70% with 100 processes where 60 s windows measure 0.3%), five times the
/// latency, a slower storm allowed; still far from what a broken daemon shows (placement
/// by a 1 s scan took up to 1 s).
const QUICK: Limits =
    Limits { cpu_percent: 2.0, rss_mb: 30.0, p50_ms: 50.0, p99_ms: 250.0, storm_forks_per_s: 1000.0, storm_cpu_percent: 50.0, storm_rss_ratio: 1.25 };

fn parse_row(s: &str) -> anyhow::Result<(usize, usize)> {
    let bad = || anyhow::anyhow!("--rows takes PROCESSESxUSERS like 1000x10 (processes 0..20000, users 1..100), got {s:?}");
    let (p, u) = s.trim().split_once(['x', 'X']).ok_or_else(bad)?;
    let (p, u): (usize, usize) = (p.trim().parse().map_err(|_| bad())?, u.trim().parse().map_err(|_| bad())?);
    if p > 20_000 || !(1..=100).contains(&u) {
        return Err(bad());
    }
    Ok((p, u))
}

#[derive(Debug, serde::Serialize)]
struct Report {
    bench: &'static str,
    machine: serde_json::Value,
    quick: bool,
    window_s: f64,
    limits: Limits,
    rows: Vec<scale::Row>,
    storm: Option<storm::Storm>,
    /// What missed a threshold, in words (empty: all met).
    missed: Vec<String>,
    /// What missed while other processes on the machine forked at [`BUSY_FORKS`] a second
    /// or more: it says nothing about the daemon either way.
    inconclusive: Vec<String>,
}

/// Forks a second elsewhere on the machine from which a missed at-rest CPU limit says
/// nothing: the daemon is woken by every process event on the machine, and at rest this
/// benchmark forks nothing (a quiet machine here: under 5 a second).
const BUSY_FORKS: f64 = 50.0;

/// Runs the benchmark.
pub fn run(args: DaemonBenchArgs, json: bool) -> anyhow::Result<i32> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("allot-lab bench daemon must run as root (it starts a private daemon and runs processes as other uids)");
    }
    let rows: Vec<String> = match (&args.rows[..], args.quick) {
        ([], false) => ["0x1", "100x1", "1000x10", "10000x100", "10000x1"].map(String::from).to_vec(),
        ([], true) => ["100x1", "1000x10"].map(String::from).to_vec(),
        (r, _) => r.to_vec(),
    };
    let rows = rows.iter().map(|r| parse_row(r)).collect::<anyhow::Result<Vec<_>>>()?;
    let window =
        positive_duration("--window", args.window.as_deref().unwrap_or(if args.quick { "10" } else { "300" }), Unit::S, Duration::from_secs(3600))?;
    let storm_len = duration("--storm", args.storm.as_deref().unwrap_or(if args.quick { "3" } else { "10" }), Unit::S)?;
    if storm_len > Duration::from_secs(600) {
        bail!("--storm must be at most 10min, got {:?}", args.storm.unwrap_or_default());
    }
    let logins = args.logins.unwrap_or(if args.quick { 40 } else { 200 });
    if logins > 100_000 {
        bail!("--logins must be 0..100000, got {logins}");
    }
    let limits = if args.quick { QUICK } else { FULL };
    let exe = std::env::current_exe()?;
    // After the processes are placed: at least this long, then until the daemon is quiet,
    // at most this long.
    let settle = if args.quick { [Duration::from_secs(1), Duration::from_secs(20)] } else { [Duration::from_secs(3), Duration::from_secs(120)] };
    let storm_users = if args.quick { 2 } else { 10 };
    let most = rows.iter().map(|r| r.1).chain((!storm_len.is_zero()).then_some(storm_users)).max().unwrap_or(0);
    let uids = args.uids.pick(most)?;
    let started = Instant::now();

    let mut out = vec![];
    for &(p, u) in &rows {
        if !json {
            eprintln!("bench daemon: {p} processes of {u} users ({:.0} s so far)", started.elapsed().as_secs_f64());
        }
        out.push(scale::row(&exe, p, &uids[..u], window, logins, settle)?);
    }
    let storm = if storm_len.is_zero() {
        None
    } else {
        if !json {
            eprintln!("bench daemon: fork storm ({:.0} s so far)", started.elapsed().as_secs_f64());
        }
        let plan = storm::Plan {
            uids: uids[..storm_users].to_vec(),
            processes: if args.quick { 100 } else { 1000 },
            length: storm_len,
            rest: Duration::from_secs(if args.quick { 2 } else { 10 }),
            keep_every: 200,
            settle: Duration::from_secs(2),
            wait_misplaced: Duration::from_secs(if args.quick { 5 } else { 70 }),
        };
        Some(storm::run(&exe, plan)?)
    };
    let (missed, inconclusive) = judge(&out, storm.as_ref(), &limits, args.quick);
    let report = Report {
        bench: "daemon",
        machine: allot_measure::bench::common::machine(),
        quick: args.quick,
        window_s: window.as_secs_f64(),
        limits,
        rows: out,
        storm,
        missed,
        inconclusive,
    };
    let pretty = serde_json::to_string_pretty(&report)?;
    if let Some(p) = &args.output {
        allot_measure::report::write_file(p, &(pretty.clone() + "\n"))?;
    }
    if json {
        println!("{pretty}");
    } else {
        print!("{}", render(&report));
    }
    // 3: nothing missed but under outside load, which proves nothing either way.
    Ok(match (args.check, report.missed.is_empty(), report.inconclusive.is_empty()) {
        (true, false, _) => 1,
        (true, true, false) => 3,
        _ => 0,
    })
}

/// An at-rest window's CPU against the limit: None if met; else the miss, and whether the
/// machine's forks elsewhere make it inconclusive.
fn rest_miss(what: &str, w: &meter::Window, limit: f64) -> Option<(String, bool)> {
    (w.cpu_percent >= limit).then(|| {
        let busy = w.machine_forks_per_s >= BUSY_FORKS;
        (
            format!(
                "{what} {:.3}% of one CPU (limit < {limit}%); {:.0} forks/s elsewhere on the machine meanwhile",
                w.cpu_percent, w.machine_forks_per_s
            ),
            busy,
        )
    })
}

/// Every threshold missed, in words, and the misses that outside load makes inconclusive.
fn judge(rows: &[scale::Row], storm: Option<&storm::Storm>, l: &Limits, quick: bool) -> (Vec<String>, Vec<String>) {
    let mut m = vec![];
    let mut unsure = vec![];
    for r in rows {
        let name = format!("{}x{}", r.processes, r.users);
        if let Some((miss, busy)) = rest_miss(&format!("{name}: daemon CPU at rest"), &r.rest, l.cpu_percent) {
            if busy {
                unsure.push(miss)
            } else {
                m.push(miss)
            }
        }
        if r.rest.rss_mb >= l.rss_mb {
            m.push(format!("{name}: daemon RSS {:.1} MB (limit < {} MB)", r.rest.rss_mb, l.rss_mb));
        }
        if let Some(lat) = &r.latency {
            if lat.missed > 0 {
                m.push(format!("{name}: {} of {} logins were not placed within 2 s", lat.missed, lat.n + lat.missed));
            }
            if lat.p50_ms > l.p50_ms || lat.p99_ms > l.p99_ms {
                m.push(format!(
                    "{name}: placement latency p50 {:.1} ms, p99 {:.1} ms (limits {} and {} ms)",
                    lat.p50_ms, lat.p99_ms, l.p50_ms, l.p99_ms
                ));
            }
        }
    }
    if let Some(s) = storm {
        if s.forks_per_s < l.storm_forks_per_s {
            m.push(format!(
                "storm: only {:.0} forks/s (the scenario needs >= {:.0}/s; the machine was too busy?)",
                s.forks_per_s, l.storm_forks_per_s
            ));
        }
        if s.cpu_percent >= l.storm_cpu_percent {
            m.push(format!("storm: daemon CPU {:.2}% of one CPU during the storm (limit < {}%)", s.cpu_percent, l.storm_cpu_percent));
        }
        // Back at rest: the survivors and their holder sleep, so the daemon must cost what
        // it costs at rest (a leak of work shows here).
        if let Some((miss, busy)) = rest_miss("storm: daemon CPU at rest after the storm", &s.after, l.cpu_percent) {
            if busy {
                unsure.push(miss)
            } else {
                m.push(miss)
            }
        }
        if s.rss_ratio > l.storm_rss_ratio {
            m.push(format!(
                "storm: daemon RSS {:.1} MB after, {:.1} MB before (limit: within {:.0}%)",
                s.after.rss_mb,
                s.before.rss_mb,
                (l.storm_rss_ratio - 1.0) * 100.0
            ));
        }
        // --quick: a child forked before its parent was placed is a known gap (the daemon
        // hears of uid changes, not forks; the safety scan finds the child within a
        // minute), reported but not failed on, so CI does not turn on a race.
        let counted = if quick { s.misplaced - s.misplaced_born_before_placed } else { s.misplaced };
        if counted > 0 {
            let fixed = s
                .misplaced_fixed_after_s
                .map_or("still not at the end of the wait".to_string(), |t| format!("all in place {t:.1} s after the storm"));
            m.push(format!(
                "storm: {} of {} surviving processes not in their currency 2 s after the storm ({} forked before their parent was placed; {fixed}); e.g. {:?}",
                s.misplaced, s.survivors, s.misplaced_born_before_placed, s.misplaced_sample
            ));
        }
        if s.logins.missed > 0 || s.logins.n == 0 {
            m.push(format!("storm: {} logins during the storm not placed within 2 s ({} placed)", s.logins.missed, s.logins.n));
        }
    }
    (m, unsure)
}

fn ms(v: f64) -> String {
    if v < 10.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.1}")
    }
}

/// The report as a person reads it.
fn render(r: &Report) -> String {
    let mut t = Table::new([
        "PROCESSES",
        "USERS",
        "PLACED IN s",
        "QUIET AFTER s",
        "CPU %",
        "PEAK 1s %",
        "RSS MB",
        "FORKS/s",
        "LOGINS",
        "P50 ms",
        "P99 ms",
        "MAX ms",
        "START P99 ms",
    ])
    .rule(Rule::Full);
    for x in &r.rows {
        let lat = x.latency.as_ref();
        let cell = |f: &dyn Fn(&logins::Latencies) -> String| lat.map_or("-".to_string(), f);
        t.row([
            x.processes.to_string(),
            x.users.to_string(),
            if x.processes > 0 { format!("{:.2}", x.placed_after_s) } else { "-".into() },
            if x.quiet { format!("{:.0}", x.quiet_after_s) } else { format!(">{:.0}", x.quiet_after_s) },
            format!("{:.3}", x.rest.cpu_percent),
            format!("{:.2}", x.rest.peak_1s_percent),
            format!("{:.1}", x.rest.rss_mb),
            format!("{:.0}", x.rest.machine_forks_per_s),
            cell(&|l| if l.missed > 0 { format!("{}+{} missed", l.n, l.missed) } else { l.n.to_string() }),
            cell(&|l| ms(l.p50_ms)),
            cell(&|l| ms(l.p99_ms)),
            cell(&|l| ms(l.max_ms)),
            cell(&|l| ms(l.start_p99_ms)),
        ]);
    }
    let tracking = r.rows.first().map_or("", |x| x.tracking.as_str());
    let loads = r.rows.iter().flat_map(|x| x.load).filter(|l| l.is_finite());
    let (lo, hi) = loads.fold((f64::INFINITY, 0f64), |(a, b), l| (a.min(l), b.max(l)));
    let mut s = format!(
        "The daemon at rest ({:.0} s windows) and the placement latency of new logins (tracking: {tracking}; load average {lo:.1}–{hi:.1} on {} CPUs)\n\n{}",
        r.window_s,
        allot_linux::ncpu(),
        t.render()
    );
    s += "\nCPU %: the daemon's CPU over the window, % of one CPU (its process CPU clock, ns resolution); PEAK 1s %: its busiest second.\n";
    s += &format!("FORKS/s: processes forked elsewhere on the machine during the window (/proc/stat); the daemon hears each one, so above {BUSY_FORKS}/s a missed CPU limit is inconclusive.\n");
    s += "PLACED IN s: from the last of the sleeping processes starting until every one was in a job (they start as a burst of logins).\n";
    s += "QUIET AFTER s: from then until the daemon used under 5% of one CPU for 2 s in a row; the window began then.\n";
    s += "P50/P99/MAX: from a login's setuid (its start as the user's process: the kernel reports it) to the daemon's write of its pid into its job (inotify), one login at a time.\n";
    s += "START P99: from the login's fork (by a root process, as sshd forks) to its setuid: the machine's time, before the daemon can know of the login.\n";
    if let Some(st) = &r.storm {
        let mut t = Table::new(["FORK STORM", "RESULT"]).all_left().rule(Rule::Full);
        t.row(["forks (one user)", &format!("{} in {:.1} s: {:.0}/s", st.forks, st.storm_s, st.forks_per_s)]);
        t.row(["daemon CPU during the storm", &format!("{:.2}% of one CPU", st.cpu_percent)]);
        t.row([
            "daemon CPU at rest before / after",
            &format!(
                "{:.3}% / {:.3}% (the machine forked {:.0} / {:.0} a second elsewhere)",
                st.before.cpu_percent, st.after.cpu_percent, st.before.machine_forks_per_s, st.after.machine_forks_per_s
            ),
        ]);
        t.row([
            "daemon RSS before / after",
            &format!("{:.1} MB / {:.1} MB ({:+.1}%)", st.before.rss_mb, st.after.rss_mb, (st.rss_ratio - 1.0) * 100.0),
        ]);
        let fixed = match (st.misplaced, st.misplaced_fixed_after_s) {
            (0, _) => String::new(),
            (_, Some(t)) => format!(", all in place {t:.1} s after the storm"),
            (_, None) => ", still misplaced at the end of the wait".into(),
        };
        t.row(["survivors in their currency", &format!("{} of {} 2 s after the storm{fixed}", st.survivors - st.misplaced, st.survivors)]);
        t.row([
            "forked before the parent was placed".to_string(),
            format!("{} of the kept children ({} of them misplaced 2 s after the storm)", st.born_before_placed, st.misplaced_born_before_placed),
        ]);
        t.row([
            "logins during the storm",
            &format!("{} placed, p50 {} ms, p99 {} ms, max {} ms", st.logins.n, ms(st.logins.p50_ms), ms(st.logins.p99_ms), ms(st.logins.max_ms)),
        ]);
        s += &format!("\n{}", t.render());
    }
    let l = &r.limits;
    s += &format!(
        "\n{} thresholds: at rest < {}% of one CPU and < {} MB RSS; placement p50 <= {} ms, p99 <= {} ms; storm >= {:.0} forks/s, daemon < {}% of one CPU, RSS back within {:.0}%, every survivor in its currency.\n",
        if r.quick { "quick (CI)" } else { "full" },
        l.cpu_percent,
        l.rss_mb,
        l.p50_ms,
        l.p99_ms,
        l.storm_forks_per_s,
        l.storm_cpu_percent,
        (l.storm_rss_ratio - 1.0) * 100.0
    );
    if r.missed.is_empty() && r.inconclusive.is_empty() {
        s += "all met\n";
    }
    for m in &r.missed {
        s += &format!("MISSED {m}\n");
    }
    for m in &r.inconclusive {
        s += &format!("INCONCLUSIVE {m} (other processes forked at {BUSY_FORKS} a second or more: run it again when the machine is quieter)\n");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_parse_and_name_the_bad_value() {
        assert_eq!(parse_row("10000x100").unwrap(), (10000, 100));
        assert_eq!(parse_row(" 0X1 ").unwrap(), (0, 1));
        for bad in ["100", "100x0", "100x101", "30000x1", "ax1", ""] {
            assert!(parse_row(bad).unwrap_err().to_string().contains("PROCESSESxUSERS"), "{bad}");
        }
    }

    #[test]
    fn a_busy_rest_under_an_outside_fork_storm_is_inconclusive_not_missed() {
        let w = |cpu_percent, machine_forks_per_s| meter::Window { cpu_percent, machine_forks_per_s, ..Default::default() };
        assert!(rest_miss("rest", &w(0.5, 5000.0), 2.0).is_none(), "met is met, whatever the load");
        let (m, busy) = rest_miss("rest", &w(4.6, 3.0), 2.0).unwrap();
        assert!(!busy && m.contains("4.600%") && m.contains("; 3 forks/s elsewhere"), "a miss names the outside forks too: {m}");
        let (m, busy) = rest_miss("rest", &w(4.6, 2500.0), 2.0).unwrap();
        assert!(busy && m.contains("2500 forks/s elsewhere"), "{m}");
    }
}
