//! `allot-scx`: loads allot's sched_ext scheduler: `run` by hand, for tests and
//! measurement; `serve` for the daemon (`[scheduler] kind = "scx"`, docs/scx.md).
//!
//!   allot-scx run --job CGROUP=TICKETS[:CURRENCY]... [--funding CURRENCY=N]...
//!                 [--cap CGROUP=CPUS]... [--currency-cap CURRENCY=CPUS]...
//!                 [--background CGROUP]...
//!                 [--outside-weight W] [--all] [--lottery] [--no-boost]
//!                 [--no-boost-for CGROUP]... [--boost-window-ms MS] [--for SECS]
//!   allot-scx serve [--all] [--lottery] [--boost-window-ms MS]
//!                                         (the daemon's: a job table on stdin, src/serve.rs)
//!   allot-scx probe --every MS --for SECS   (wakeup latency, src/probe.rs)
//!   allot-scx work --start UNIX_SECS --for SECS --marks S,... BEHAVIOUR
//!                                         (a simulator scenario's task, src/work.rs)
//!   allot-scx hackbench --groups G --loops L  (hackbench's message passing, src/hackbench.rs)
//!
//! Loads the scheduler, describes each job (its cgroup's share, flattened from tickets and
//! funding, all jobs together weighing W against each task outside them, 100 by default:
//! one nice-0 task), puts every thread of the jobs' cgroups in the sched_ext class
//! (`--all`: every task of the machine is the scheduler's, not only those; `--lottery`: each
//! turn a draw by shares, the lottery mode of docs/scx.md, not stride scheduling), and runs until
//! SIGINT or SIGTERM, `--for` seconds, or the kernel ejects it. `--cap` gives a job a
//! hard cap in CPUs (held by the sinbin), `--currency-cap` a currency's jobs one together
//! (bpf/cap.h), `--background` makes a job a background one
//! (it runs only when no other job's task is runnable on the CPU). A foreground job's
//! wakeups are boosted while it used less than half its entitlement over the boost window
//! (allot_model::wake; `--boost-window-ms`, 50..60000, 500 by default, the daemon's
//! `[policy] boost_window_ms`); `--no-boost` turns that off, `--no-boost-for` for one job (a
//! probe beside a boosted one, to measure the boost in one run). Then it puts those threads
//! back in the fair class, detaches, and prints why the scheduler left.

use allot_scx::serve::{CurrencyKeys, Terms};
use allot_scx::{cgroup_id, flatten, set_policy, threads, JobSpec, Scheduler};
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

struct Args {
    jobs: Vec<JobSpec>,
    funding: BTreeMap<String, u64>,
    caps: BTreeMap<String, f64>,
    currency_caps: BTreeMap<String, f64>,
    background: Vec<String>,
    run_for: Option<Duration>,
    outside_weight: u64,
    all: bool,
    lottery: bool,
    boost: bool,
    no_boost_for: Vec<String>,
    window: u64,
}

const USAGE: &str = "usage: allot-scx serve [--all] [--lottery] [--boost-window-ms MS] | allot-scx run --job CGROUP=TICKETS[:CURRENCY]... [--funding CURRENCY=N]... [--cap CGROUP=CPUS]... [--currency-cap CURRENCY=CPUS]... [--background CGROUP]... [--outside-weight W] [--all] [--lottery] [--no-boost] [--no-boost-for CGROUP]... [--boost-window-ms MS] [--for SECS] | allot-scx probe --every MS --for SECS | allot-scx work --start UNIX_SECS --for SECS --marks S,... BEHAVIOUR | allot-scx hackbench --groups G --loops L";

fn parse(mut it: impl Iterator<Item = String>) -> Result<Args> {
    if it.next().as_deref() != Some("run") {
        bail!("{USAGE}");
    }
    let mut a = Args {
        jobs: vec![],
        funding: BTreeMap::new(),
        caps: BTreeMap::new(),
        currency_caps: BTreeMap::new(),
        background: vec![],
        run_for: None,
        outside_weight: 100,
        all: false,
        lottery: false,
        boost: true,
        no_boost_for: vec![],
        window: allot_model::wake::DEFAULT_WINDOW_NS,
    };
    while let Some(opt) = it.next() {
        if opt == "--all" {
            a.all = true;
            continue;
        }
        if opt == "--lottery" {
            a.lottery = true;
            continue;
        }
        if opt == "--no-boost" {
            a.boost = false;
            continue;
        }
        let val = it.next().with_context(|| format!("{opt} needs a value; {USAGE}"))?;
        match opt.as_str() {
            "--job" => {
                let (path, rest) = val.rsplit_once('=').with_context(|| format!("--job wants CGROUP=TICKETS[:CURRENCY], got {val:?}"))?;
                let (t, cur) = rest.split_once(':').unwrap_or((rest, "default"));
                let tickets: u64 = t
                    .parse()
                    .ok()
                    .filter(|t| (1..=10_000).contains(t))
                    .with_context(|| format!("--job {val:?}: tickets must be 1..10000, got {t:?}"))?;
                a.jobs.push(JobSpec { cgroup: path.into(), tickets, currency: cur.into() });
            }
            "--funding" => {
                let (c, n) = val.split_once('=').with_context(|| format!("--funding wants CURRENCY=N, got {val:?}"))?;
                let n: u64 =
                    n.parse().ok().filter(|n| (1..=10_000).contains(n)).with_context(|| format!("--funding {val:?}: funding must be 1..10000"))?;
                a.funding.insert(c.into(), n);
            }
            "--cap" | "--currency-cap" => {
                let what = if opt == "--cap" { "CGROUP" } else { "CURRENCY" };
                let (c, n) = val.rsplit_once('=').with_context(|| format!("{opt} wants {what}=CPUS, got {val:?}"))?;
                let n = allot_scx::parse_cap_cpus(n).with_context(|| format!("{opt} {val:?}: CPUS must be above 0 and at most 4096"))?;
                if opt == "--cap" { &mut a.caps } else { &mut a.currency_caps }.insert(c.into(), n);
            }
            "--background" => a.background.push(val),
            "--no-boost-for" => a.no_boost_for.push(val),
            "--boost-window-ms" => a.window = allot_scx::serve::parse_window_ms(&val).map_err(anyhow::Error::msg)?,
            "--outside-weight" => {
                a.outside_weight = val
                    .parse()
                    .ok()
                    .filter(|w| (1..=10_000).contains(w))
                    .with_context(|| format!("--outside-weight must be 1..10000, got {val:?}"))?
            }
            "--for" => a.run_for = Some(Duration::from_secs_f64(val.parse().with_context(|| format!("--for wants seconds, got {val:?}"))?)),
            _ => bail!("unknown option {opt:?}; {USAGE}"),
        }
    }
    if a.jobs.is_empty() {
        bail!("give at least one --job; {USAGE}");
    }
    for c in a.caps.keys().chain(&a.background).chain(&a.no_boost_for) {
        if !a.jobs.iter().any(|j| j.cgroup.as_os_str() == c.as_str()) {
            bail!("--cap, --background and --no-boost-for name a --job's cgroup; {c:?} is none of them");
        }
    }
    for c in a.currency_caps.keys() {
        if !a.jobs.iter().any(|j| j.currency == *c) {
            bail!("--currency-cap names a --job's currency; {c:?} is none of theirs");
        }
    }
    Ok(a)
}

/// Writes each job to the prepared scheduler's map and sets its threads to SCHED_EXT
/// (each switched thread's id into `switched`); a line per job to print once attached.
fn describe(a: &Args, shares: &[u64], s: &Scheduler, switched: &mut Vec<i32>) -> Result<Vec<String>> {
    let mut lines = Vec::new();
    let mut keys = CurrencyKeys::default();
    for (j, share) in a.jobs.iter().zip(shares) {
        let name = j.cgroup.display().to_string();
        let cap = a.caps.get(&name).copied();
        let bg = a.background.contains(&name);
        let boost = if a.boost && !bg && !a.no_boost_for.contains(&name) {
            allot_model::wake::entitlement_ns(*share, a.outside_weight.min(u32::MAX as u64) as u32, a.window)
        } else {
            0
        };
        let ccap = a.currency_caps.get(&j.currency).copied();
        let group = match ccap {
            Some(_) => keys.key(&j.currency).map_err(anyhow::Error::msg)?,
            None => 0,
        };
        let terms = Terms {
            share: *share,
            cap_ns: cap.map_or(0, allot_scx::cap_ns),
            group,
            group_cap_ns: ccap.map_or(0, allot_scx::cap_ns),
            background: bg,
            boost_ns: boost,
            line_ns: 0,
        };
        s.set_job(cgroup_id(&j.cgroup)?, &terms)?;
        let mut n = 0;
        for tid in threads(&j.cgroup)? {
            match set_policy(tid, true) {
                Ok(()) => {
                    n += 1;
                    switched.push(tid);
                }
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                Err(e) => bail!("putting thread {tid} of {} in sched_ext: {e}", j.cgroup.display()),
            }
        }
        let cap = cap.map_or(String::new(), |c| format!(" hard cap {c} CPUs"))
            + &ccap.map_or(String::new(), |c| format!(" (its currency's hard cap {c} CPUs)"));
        let bg = if bg { " background" } else { "" };
        let boost =
            if boost > 0 { format!(" boosted below {:.1} ms of CPU per {} ms", boost as f64 / 2e6, a.window / 1_000_000) } else { String::new() };
        lines.push(format!(
            "allot-scx: job {} tickets {} currency {} share {share}{cap}{bg}{boost}: {n} threads",
            j.cgroup.display(),
            j.tickets,
            j.currency
        ));
    }
    Ok(lines)
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("probe") {
        return allot_scx::probe::main(&args[1..]);
    }
    if args.first().map(String::as_str) == Some("work") {
        return allot_scx::work::main(&args[1..]);
    }
    if args.first().map(String::as_str) == Some("hackbench") {
        return allot_scx::hackbench::main(&args[1..]);
    }
    if args.first().map(String::as_str) == Some("serve") {
        let a = allot_scx::serve::parse_serve(&args[1..]).map_err(anyhow::Error::msg)?;
        return allot_scx::serve::serve(a.all, a.lottery, a.window);
    }
    let a = parse(args.into_iter())?;
    let shares = flatten(&a.jobs, &a.funding, a.outside_weight);
    // The jobs are described and their threads set to SCHED_EXT before the scheduler is
    // attached: attaching then moves them all in one pass of the kernel's. Set one by one
    // under a loaded scheduler, the first threads of a job of thousands waited in
    // sched_ext behind the rest still in the fair class, which runs first, until the
    // kernel's watchdog ejected the scheduler (tests/vm/scx/storm.sh).
    let mut s = Scheduler::prepare(a.all, a.window)?;
    s.set_lottery(a.lottery)?;
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
    let t0 = Instant::now();
    let mut switched = Vec::new();
    let described = describe(&a, &shares, &s, &mut switched);
    let t1 = Instant::now();
    if let Err(e) = described.and_then(|lines| s.attach().map(|()| lines)).map(|lines| {
        let state = std::fs::read_to_string("/sys/kernel/sched_ext/state").unwrap_or_default();
        let mode = format!(
            "{}, {}",
            if a.all { "every task" } else { "SCHED_EXT tasks only (partial switch)" },
            if a.lottery { "the lottery mode" } else { "stride scheduling" }
        );
        let mode = format!("{mode}, boost window {} ms", a.window / 1_000_000);
        println!(
            "allot-scx: loaded allot_stride for {mode} (sched_ext state: {}, switch_all {}); {} threads set to SCHED_EXT in {} ms before it was attached, attached in {} ms",
            state.trim(),
            std::fs::read_to_string("/sys/kernel/sched_ext/switch_all").unwrap_or_default().trim(),
            switched.len(),
            (t1 - t0).as_millis(),
            t1.elapsed().as_millis()
        );
        for l in lines {
            println!("{l}");
        }
    }) {
        // nothing attached: the threads go back to the fair class's policy
        for tid in &switched {
            let _ = set_policy(*tid, false);
        }
        return Err(e);
    }
    let start = Instant::now();
    let ejected = loop {
        let st = s.state()?;
        if st.exit_kind != 0 {
            break Some(st);
        }
        if STOP.load(Ordering::SeqCst) || a.run_for.is_some_and(|d| start.elapsed() >= d) {
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    for j in &a.jobs {
        let n = cgroup_id(&j.cgroup).ok().and_then(|id| s.job_runnable(id).ok().flatten());
        println!("allot-scx: job {} runnable tasks counted at the end: {n:?}", j.cgroup.display());
    }
    // Back to the fair class, then detach (a thread that ran SCHED_EXT keeps that policy
    // in the fair class after a detach; set it back so /proc shows SCHED_OTHER).
    let mut back = 0;
    for j in &a.jobs {
        for tid in threads(&j.cgroup).unwrap_or_default() {
            if set_policy(tid, false).is_ok() {
                back += 1;
            }
        }
    }
    let was_ejected = ejected.is_some();
    s.detach();
    std::thread::sleep(Duration::from_millis(200)); // the kernel's exit callback runs after the detach
    let st = match ejected {
        Some(st) => st,
        None => s.state()?,
    };
    println!(
        "allot-scx: unloaded after {:.1} s: {} ({}), reason {:?}, message {:?}; {back} threads back to SCHED_OTHER; {} queued by pass, {} to idle CPUs, {} charges of tasks in no job, {} put in the sinbin, {} let out, {} wakeups boosted, {} not (over the line)",
        start.elapsed().as_secs_f64(),
        st.exit_kind_name(),
        st.exit_kind,
        st.exit_reason,
        st.exit_msg,
        st.nr_enqueued,
        st.nr_direct,
        st.nr_unknown_job,
        st.nr_sinbinned,
        st.nr_released,
        st.nr_boosted,
        st.nr_not_boosted
    );
    if a.lottery {
        let (n, mean) = s.draws()?;
        println!("allot-scx: the lottery mode drew {n} times, mean draw {mean:.4} (1 expected)");
    }
    if was_ejected {
        std::process::exit(3);
    }
    Ok(())
}
