//! `allot-lab bench overhead`: what running inside an allot job costs a real workload.
//!
//! The workload (a parallel build by default, or hackbench: see `overhead_workload`) runs
//! as the same account-less user, alternately outside
//! allot — in a cgroup of its own that no allot daemon places from — and inside a job via
//! `allot run` under a private daemon. Each round runs both sides (and, as a control, the
//! same in a cgroup as deep as a job, root/currency/job, that no daemon touches), in an
//! order that changes from round to round, so a drift in the machine's load falls on every
//! side. Each round gives a ratio (inside time / outside time, over 1 = slower inside; each
//! time is the workload's own clock, so `allot run`'s start is not counted); the
//! report is their median with its spread. The control splits the ratio in two: the
//! kernel's cost of the deeper hierarchy (nested / outside) and what the daemon's work
//! costs the job (inside / nested). This machine is shared: only ratios within one run
//! are compared.

use crate::daemon_bench::dies_with_us;
use crate::overhead_workload::{Build, Kind, Workload};
use allot_measure::harness::{PrivateDaemon, Shelter};
use anyhow::{bail, Context};
use clap::Args;
use std::process::{Command, Stdio};
use std::time::Instant;

/// `allot-lab bench overhead`.
#[derive(Debug, Args)]
pub struct OverheadBenchArgs {
    /// Interleaved pairs: rounds of one run outside allot and one inside (plus the control)
    /// [default: 30; --quick: 9]. One pair's ratio ranges over ±5–15% here (the host's
    /// load moves this VM's speed), so a median of 10 is known to about ±4%, of 30 to about
    /// ±2% (the report's 95% confidence interval says how well, run by run).
    #[arg(long)]
    pub pairs: Option<usize>,
    /// What runs: a parallel build (make -j NCPU of generated C files with gcc, about 4 s
    /// a run here) or hackbench (rt-tests; 400 processes passing messages, the scheduler's
    /// stress test).
    #[arg(long, value_enum, default_value_t = Kind::Build)]
    pub workload: Kind,
    /// The build's C files [default: 24; --quick: 8].
    #[arg(long)]
    pub files: Option<usize>,
    /// hackbench's arguments (implies --workload hackbench) [default: "-g 10 -l 500",
    /// about 3 s a run here; --quick: "-g 5 -l 200"].
    #[arg(long, allow_hyphen_values = true)]
    pub hackbench: Option<String>,
    /// Skip the control (a cgroup as deep as a job that no daemon touches) [--quick, and
    /// systemd hosts, skip it].
    #[arg(long)]
    pub no_control: bool,
    /// TOML put at the head of the private daemon's config, to find where a slowdown
    /// comes from: "[policy]\nboost = false", "tick_ms = 1000".
    #[arg(long, hide = true)]
    pub daemon_config: Option<String>,
    /// Also write the JSON report to this file.
    #[arg(long)]
    pub output: Option<std::path::PathBuf>,
    /// Exit non-zero if the median slowdown is over 1% (--quick: 10% for the build, 50%
    /// for hackbench: the direction only) and larger than the run's noise: the median's 95%
    /// confidence interval lies wholly above 1.
    #[arg(long)]
    pub check: bool,
    /// Fewer, shorter runs (CI).
    #[arg(long)]
    pub quick: bool,
    /// The uid the workload runs as (the range's first free one).
    #[command(flatten)]
    pub uids: allot_measure::test_uids::TestUids,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
enum Side {
    /// A cgroup of its own at the top of the hierarchy.
    Outside,
    /// The control: a cgroup two levels deeper (as deep as a job), no daemon.
    Nested,
    /// A job, via `allot run`.
    Inside,
}

/// The control's cgroup, `<mount>/allot-nested-PID/currency/job`: as deep as a job, made
/// here and removed on drop, and no daemon places from it or into it. (Kept here rather
/// than in the harness's `Shelter`, which is being reworked for systemd hosts; there the
/// control is skipped, since nothing may be made at the root of systemd's tree.)
struct Nested {
    cg: Box<dyn allot_linux::cgroup::CpuController>,
}

const LEAF: &str = "currency/job";

impl Nested {
    fn new() -> anyhow::Result<Self> {
        let cg = allot_linux::cgroup::detect(&format!("allot-nested-{}", std::process::id()))?;
        let me = Self { cg };
        for rel in ["", "currency", LEAF] {
            // On failure, drop removes what was made.
            me.cg.create(rel).map_err(|e| anyhow::anyhow!("create the control cgroup {rel:?}: {e}"))?;
        }
        Ok(me)
    }

    /// `program` started in the leaf, as `uid`: it joins as root, then drops to the uid.
    fn command(&self, program: &str, uid: u32) -> Command {
        let files: Vec<std::ffi::CString> = self
            .cg
            .procs_files(LEAF)
            .iter()
            .map(|p| std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).expect("cgroup paths have no NUL"))
            .collect();
        let mut c = Command::new(program);
        // SAFETY: only async-signal-safe calls (open, write, close, setgroups, setgid,
        // setuid) on data prepared before the fork.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut c, move || {
                for f in &files {
                    let fd = libc::open(f.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                    if fd < 0 || libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                        return Err(std::io::Error::last_os_error());
                    }
                    libc::close(fd);
                }
                if libc::setgroups(0, std::ptr::null()) != 0 || libc::setgid(uid) != 0 || libc::setuid(uid) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        c
    }
}

impl Drop for Nested {
    fn drop(&mut self) {
        for rel in [LEAF, "currency", ""] {
            for _ in 0..50 {
                if self.cg.remove(rel).is_ok() || !self.cg.exists(rel) {
                    break;
                }
                // Processes killed a moment ago may still be exiting.
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
    }
}

/// The orders rounds take: with the control, all six permutations in turn; without, out–in
/// then in–out.
fn order(round: usize, control: bool) -> Vec<Side> {
    use Side::*;
    if control {
        let all = [
            [Outside, Nested, Inside],
            [Inside, Nested, Outside],
            [Nested, Outside, Inside],
            [Inside, Outside, Nested],
            [Outside, Inside, Nested],
            [Nested, Inside, Outside],
        ];
        all[round % 6].to_vec()
    } else if round % 2 == 0 {
        vec![Outside, Inside]
    } else {
        vec![Inside, Outside]
    }
}

#[derive(Debug, serde::Serialize)]
struct Round {
    order: Vec<Side>,
    outside_s: f64,
    inside_s: f64,
    nested_s: Option<f64>,
    /// inside / outside.
    ratio: f64,
    /// The daemon's CPU during each run, % of one CPU.
    daemon_outside_percent: f64,
    daemon_inside_percent: f64,
}

#[derive(Debug, serde::Serialize)]
struct Summary {
    pairs: usize,
    median: f64,
    min: f64,
    max: f64,
    q1: f64,
    q3: f64,
    /// A 95% confidence interval for the median (at least 95% coverage, from order
    /// statistics: no assumption about the ratios' distribution); None under 6 rounds.
    ci95: Option<(f64, f64)>,
}

/// Quartiles by linear interpolation between closest ranks (the spread of a few pairs).
fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let x = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (x.floor() as usize, x.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (x - lo as f64)
}

/// The ranks (0-based, into the sorted sample) of the distribution-free confidence
/// interval for a median: the widest k with P(Binomial(n, 1/2) < k) ≤ 2.5% gives
/// [x_(k), x_(n-1-k)], which holds the median with probability ≥ 95%.
fn median_ci_ranks(n: usize) -> Option<(usize, usize)> {
    // P(B ≤ j) for B ~ Binomial(n, 1/2), summed term by term.
    let mut term = 0.5f64.powi(n as i32);
    let mut below = 0.0;
    let mut k = None;
    for j in 0..n {
        below += term;
        if below > 0.025 {
            break;
        }
        k = Some(j);
        term *= (n - j) as f64 / (j + 1) as f64;
    }
    k.map(|k| (k, n - 1 - k))
}

fn summarize(ratios: &[f64]) -> Summary {
    let mut s = ratios.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    Summary {
        pairs: s.len(),
        median: quantile(&s, 0.5),
        min: s.first().copied().unwrap_or(f64::NAN),
        max: s.last().copied().unwrap_or(f64::NAN),
        q1: quantile(&s, 0.25),
        q3: quantile(&s, 0.75),
        ci95: median_ci_ranks(s.len()).map(|(lo, hi)| (s[lo], s[hi])),
    }
}

struct Bench<'a> {
    d: &'a PrivateDaemon,
    outside: &'a Shelter,
    nested: Option<&'a Nested>,
    w: &'a Workload,
    daemon_pid: u32,
    /// The uid the workload runs as: no account is made (test_uids.rs chose one no one has).
    uid: u32,
}

impl Bench<'_> {
    /// One run; (the workload's time, the daemon's CPU meanwhile in % of one CPU).
    fn run(&self, side: Side) -> anyhow::Result<(f64, f64)> {
        let argv = self.w.argv();
        let c: Command = match (side, self.nested) {
            (Side::Outside, _) => {
                let mut c = self.outside.command(&argv[0], Some(self.uid));
                c.args(&argv[1..]);
                c
            }
            (Side::Nested, Some(n)) => {
                let mut c = n.command(&argv[0], self.uid);
                c.args(&argv[1..]);
                c
            }
            (Side::Nested, None) => bail!("no control cgroup"),
            (Side::Inside, _) => {
                let mut c = self.d.allot_as(Some(self.uid));
                c.args(["run", "--strict", "--"]).args(&argv);
                c
            }
        };
        let c0 = crate::daemon_bench::daemon_cpu_ns(self.daemon_pid)?;
        let t0 = Instant::now();
        let out = dies_with_us(c).stdin(Stdio::null()).output().with_context(|| format!("run {} ({side:?})", self.w.describe()))?;
        let cpu = (crate::daemon_bench::daemon_cpu_ns(self.daemon_pid)? - c0) as f64 / 1e9 / t0.elapsed().as_secs_f64() * 100.0;
        Ok((self.w.time(&out).with_context(|| format!("{side:?}"))?, cpu))
    }

    /// One round in the given order.
    fn round(&self, order: Vec<Side>) -> anyhow::Result<Round> {
        let (mut out, mut inn, mut nested) = ((0.0, 0.0), (0.0, 0.0), None);
        for &side in &order {
            let r = self.run(side)?;
            match side {
                Side::Outside => out = r,
                Side::Inside => inn = r,
                Side::Nested => nested = Some(r.0),
            }
        }
        Ok(Round {
            order,
            outside_s: out.0,
            inside_s: inn.0,
            nested_s: nested,
            ratio: inn.0 / out.0,
            daemon_outside_percent: out.1,
            daemon_inside_percent: inn.1,
        })
    }
}

/// Runs the benchmark.
pub fn run(args: OverheadBenchArgs, json: bool) -> anyhow::Result<i32> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("allot-lab bench overhead must run as root (it starts a private daemon and runs the workload as another uid)");
    }
    let uid = args.uids.pick(1)?[0];
    let pairs = args.pairs.unwrap_or(if args.quick { 9 } else { 30 });
    if !(1..=1000).contains(&pairs) {
        bail!("--pairs must be 1..1000, got {pairs}");
    }
    let kind = if args.hackbench.is_some() { Kind::Hackbench } else { args.workload };
    let w = match kind {
        Kind::Hackbench => Workload::Hackbench(
            args.hackbench
                .as_deref()
                .unwrap_or(if args.quick { "-g 5 -l 200" } else { "-g 10 -l 500" })
                .split_whitespace()
                .map(String::from)
                .collect(),
        ),
        Kind::Build => {
            let files = args.files.unwrap_or(if args.quick { 8 } else { 24 });
            if !(1..=10_000).contains(&files) {
                bail!("--files must be 1..10000, got {files}");
            }
            Workload::Build(Build::new(files, allot_linux::ncpu(), uid)?)
        }
    };
    w.check_installed()?;
    // --quick (CI, a shared machine, runs of a second or two): only that allot does not
    // slow the workload grossly. Single hackbench pairs here ranged 0.64–1.60, so its
    // limit is wide; a build's single run varies by about 1%.
    let limit = match (args.quick, kind) {
        (false, _) => 1.01,
        (true, Kind::Build) => 1.1,
        (true, Kind::Hackbench) => 1.5,
    };
    let control = !(args.no_control || args.quick || allot_linux::ipc::systemd_bus::is_systemd_host());
    let exe = std::env::current_exe()?;
    let load0 = allot_linux::process::procfs::loadavg().map(|l| l.avg1).unwrap_or(f64::NAN);
    let head = args.daemon_config.as_deref().map(|c| c.replace("\\n", "\n") + "\n").unwrap_or_default();
    let d = PrivateDaemon::start(&exe, &format!("{head}{}", allot_measure::test_uids::users_config(&[uid])))?;
    // Cgroups of their own, beside allot's: the private daemon places only from its own
    // shelter, and a system daemon never takes a process from a cgroup another manager made.
    let outside = Shelter::new()?;
    let nested = if control { Some(Nested::new()?) } else { None };
    let b = Bench {
        d: &d,
        outside: &outside,
        nested: nested.as_ref(),
        w: &w,
        daemon_pid: d.daemon_pid().context("the private daemon is not running")?,
        uid,
    };
    // Warm-up (page cache, the binary, the job's cgroup made once): not counted.
    b.round(order(0, control))?;
    let mut rows = vec![];
    for i in 0..pairs {
        let r = b.round(order(i, control))?;
        if !json {
            let n = r.nested_s.map_or(String::new(), |n| format!(", nested {n:.3} s"));
            eprintln!("bench overhead: {}/{pairs}: outside {:.3} s{n}, inside {:.3} s, ratio {:.3}", i + 1, r.outside_s, r.inside_s, r.ratio);
        }
        rows.push(r);
    }
    drop(d);
    drop(outside);
    drop(nested);
    let ratio = summarize(&rows.iter().map(|r| r.ratio).collect::<Vec<_>>());
    let verdict = Verdict::of(&ratio, limit);
    let passed = verdict != Verdict::Missed;
    let split = control.then(|| {
        (
            summarize(&rows.iter().filter_map(|r| Some(r.nested_s? / r.outside_s)).collect::<Vec<_>>()),
            summarize(&rows.iter().filter_map(|r| Some(r.inside_s / r.nested_s?)).collect::<Vec<_>>()),
        )
    });
    let load = [load0, allot_linux::process::procfs::loadavg().map(|l| l.avg1).unwrap_or(f64::NAN)];
    let report = serde_json::json!({
        "bench": "overhead",
        "machine": allot_measure::bench::common::machine(),
        "load_average_start_end": load,
        "workload": w.describe(),
        "daemon_config": args.daemon_config,
        "uid": uid,
        "rounds": rows,
        "ratio": ratio,
        "nested_over_outside": split.as_ref().map(|s| &s.0),
        "inside_over_nested": split.as_ref().map(|s| &s.1),
        "limit": limit,
        "verdict": verdict,
        "passed": passed,
    });
    let pretty = serde_json::to_string_pretty(&report)?;
    if let Some(p) = &args.output {
        allot_measure::report::write_file(p, &(pretty.clone() + "\n"))?;
    }
    if json {
        println!("{pretty}");
    } else {
        print!("{}", render(&w.describe(), uid, &rows, &ratio, split.as_ref(), limit, verdict));
        println!("{}", noise(&rows, load[0]));
    }
    Ok(if args.check && !passed { 1 } else { 0 })
}

/// What `--check` makes of the ratios.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
enum Verdict {
    /// The median is within the limit.
    Met,
    /// The median is over the limit and the slowdown is larger than the run's noise (the
    /// median's 95% confidence interval lies wholly above 1), or too few pairs to know.
    Missed,
    /// The median is over the limit but the interval reaches 1: as many pairs ran faster
    /// inside as chance allows, so this run cannot tell a slowdown from the machine's noise.
    WithinNoise,
}

impl Verdict {
    fn of(r: &Summary, limit: f64) -> Self {
        match r.ci95 {
            _ if r.median <= limit => Verdict::Met,
            Some((lo, _)) if lo <= 1.0 => Verdict::WithinNoise,
            _ => Verdict::Missed,
        }
    }
}

/// The machine's noise in this run, which the verdict's interval stands on: how far the
/// outside runs (which allot does not touch) spread, and the load average.
fn noise(rows: &[Round], load_before: f64) -> String {
    let out = summarize(&rows.iter().map(|r| r.outside_s).collect::<Vec<_>>());
    format!(
        "the machine's noise: the outside runs took {:.3}–{:.3} s ({:.0}% apart, of their median); load average {:.2} before the first run (the workload's own adds to it after)",
        out.min,
        out.max,
        (out.max - out.min) / out.median * 100.0,
        load_before
    )
}

fn spread(s: &Summary) -> String {
    let ci = s.ci95.map_or(String::new(), |(lo, hi)| format!(" (95% CI {lo:.3}–{hi:.3})"));
    format!("median {:.3}{ci}, IQR {:.3}–{:.3}, range {:.3}–{:.3}", s.median, s.q1, s.q3, s.min, s.max)
}

fn render(what: &str, uid: u32, rows: &[Round], ratio: &Summary, split: Option<&(Summary, Summary)>, limit: f64, verdict: Verdict) -> String {
    use allot_report::{Align, Rule, Table};
    let mut t = Table::new(["ROUND", "ORDER", "OUTSIDE s", "NESTED s", "INSIDE s", "INSIDE/OUTSIDE", "DAEMON CPU % OUT/IN"])
        .align(1, Align::Left)
        .rule(Rule::Full);
    for (i, r) in rows.iter().enumerate() {
        let order: Vec<&str> = r
            .order
            .iter()
            .map(|s| match s {
                Side::Outside => "out",
                Side::Nested => "nested",
                Side::Inside => "in",
            })
            .collect();
        t.row([
            (i + 1).to_string(),
            order.join(", "),
            format!("{:.3}", r.outside_s),
            r.nested_s.map_or("-".into(), |n| format!("{n:.3}")),
            format!("{:.3}", r.inside_s),
            format!("{:.3}", r.ratio),
            format!("{:.2} / {:.2}", r.daemon_outside_percent, r.daemon_inside_percent),
        ]);
    }
    let mut out = format!(
        "{what} as uid {uid}: outside allot (a cgroup of its own), nested (as deep as a job, no daemon), inside a job (allot run)\n\n{}",
        t.render()
    );
    out += &format!(
        "\ninside/outside: {} over {} rounds; limit: median <= {limit:.2}: {}\n",
        spread(ratio),
        ratio.pairs,
        match verdict {
            Verdict::Met => "met",
            Verdict::Missed => "MISSED",
            Verdict::WithinNoise => "over, but within this run's noise (the 95% CI reaches 1.0): not a miss",
        }
    );
    if let Some((h, d)) = split {
        out += &format!("nested/outside (the kernel, a deeper hierarchy): {}\n", spread(h));
        out += &format!("inside/nested (the daemon's work on the job): {}\n", spread(d));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_of_ratios() {
        let s = summarize(&[1.0, 1.2, 0.9, 1.1]);
        assert!((s.median - 1.05).abs() < 1e-12 && s.min == 0.9 && s.max == 1.2);
        assert!((s.q1 - 0.975).abs() < 1e-12 && (s.q3 - 1.125).abs() < 1e-12);
        assert_eq!(summarize(&[0.99]).median, 0.99);
        assert_eq!(summarize(&[0.99]).ci95, None);
    }

    #[test]
    fn median_confidence_interval_from_order_statistics() {
        // n = 10: P(B ≤ 1) = 11/1024 ≤ 2.5% < P(B ≤ 2) = 56/1024, so the 2nd and 9th values.
        assert_eq!(median_ci_ranks(10), Some((1, 8)));
        // n = 6: P(B = 0) = 1/64: the extremes; n = 5: 1/32 > 2.5%, none.
        assert_eq!(median_ci_ranks(6), Some((0, 5)));
        assert_eq!(median_ci_ranks(5), None);
        // n = 40: the 14th and 27th (P(B ≤ 13) = 1.9%, P(B ≤ 14) = 4.0%).
        assert_eq!(median_ci_ranks(40), Some((13, 26)));
        // n = 30 (the default): the 10th and 21st (P(B ≤ 9) = 2.1%, P(B ≤ 10) = 4.9%).
        assert_eq!(median_ci_ranks(30), Some((9, 20)));
        let s = summarize(&(1..=10).map(f64::from).collect::<Vec<_>>());
        assert_eq!(s.ci95, Some((2.0, 9.0)));
    }

    #[test]
    fn a_slowdown_counts_only_above_the_runs_noise() {
        let v = |r: &[f64]| Verdict::of(&summarize(r), 1.1);
        // e789d69's CI run: median 1.217, one pair at 0.823.
        assert_eq!(v(&[0.823, 1.226, 1.250, 1.209, 1.242, 1.070]), Verdict::WithinNoise);
        // Every pair slower, the median over: a miss.
        assert_eq!(v(&[1.05, 1.226, 1.250, 1.209, 1.242, 1.070]), Verdict::Missed);
        // Nine pairs: the interval is the 2nd to 8th, so one faster pair does not excuse it.
        assert_eq!(v(&[0.9, 1.2, 1.3, 1.25, 1.4, 1.2, 1.15, 1.3, 1.22]), Verdict::Missed);
        assert_eq!(v(&[0.9, 0.95, 1.3, 1.25, 1.4, 1.2, 1.15, 1.3, 1.22]), Verdict::WithinNoise);
        assert_eq!(v(&[0.9, 0.95, 1.0, 1.05, 1.1, 1.2, 1.15, 1.3, 1.22]), Verdict::Met);
        // Too few pairs for an interval: the median decides.
        assert_eq!(v(&[0.5, 1.2, 1.3]), Verdict::Missed);
    }

    #[test]
    fn every_side_takes_every_place() {
        for side in [Side::Outside, Side::Nested, Side::Inside] {
            for place in 0..3 {
                assert_eq!((0..6).filter(|&r| order(r, true)[place] == side).count(), 2, "{side:?} at {place}");
            }
        }
        assert_eq!(order(1, false), [Side::Inside, Side::Outside]);
    }
}
