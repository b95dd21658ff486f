//! The sampling: the target's threads' schedstat every few ms, their switch counts, the
//! machine's runnable tasks, PSI and the busiest other processes, over the window.

use super::*;
use anyhow::Context;
use std::collections::HashMap;
use std::time::Instant;

#[derive(Clone, Copy, Default)]
struct Acc {
    first: allot_linux::process::procfs::SchedStat,
    last: allot_linux::process::procfs::SchedStat,
    cur_wait: u64,
    longest: u64,
    sched0: (u64, u64),
}

fn gone(pid: i32, after: f64) -> anyhow::Error {
    anyhow::anyhow!("process {pid} exited during sampling (after {after:.1} s): nothing left to diagnose")
}

fn alive(pid: i32) -> bool {
    allot_linux::process::procfs::stat(pid).map(|s| s.state != 'Z' && s.state != 'X').unwrap_or(false)
}

fn cpu_ticks_all() -> HashMap<i32, (u64, String)> {
    let mut m = HashMap::new();
    for p in allot_linux::process::procfs::pids().unwrap_or_default() {
        if let Ok(s) = allot_linux::process::procfs::stat(p) {
            m.insert(p, (s.utime + s.stime, s.comm));
        }
    }
    m
}

/// How often the threads' state and wait channel are sampled.
const STALL_EVERY: Duration = Duration::from_millis(20);

/// Samples `pid` for `window` and diagnoses it. A thread id that is not its process's
/// leader diagnoses that thread alone. Errors: the pid does not exist, or the process
/// (thread) exits before the window ends.
pub fn diagnose(pid: i32, window: Duration) -> anyhow::Result<Diagnosis> {
    diagnose_every(pid, window, Duration::from_millis(5))
}

/// As [`diagnose`], sampling the threads' schedstat every `every`.
pub fn diagnose_every(pid: i32, window: Duration, every: Duration) -> anyhow::Result<Diagnosis> {
    if pid <= 0 {
        anyhow::bail!("PID must be a positive process id, got {pid}");
    }
    let st = match allot_linux::process::procfs::stat(pid) {
        Ok(s) if s.state != 'Z' && s.state != 'X' => s,
        Ok(_) => anyhow::bail!("process {pid} has already exited (zombie): nothing to diagnose"),
        Err(e) if e.is_gone() => anyhow::bail!("no process with PID {pid} (it may have exited)"),
        Err(e) => return Err(e).context(format!("read process {pid}")),
    };
    // A thread id that is not its process's leader: diagnose that one thread (an audio
    // or request thread inside a big server), reading it under its process.
    let tgid = allot_linux::read(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("Tgid:").and_then(|v| v.trim().parse::<i32>().ok())))
        .unwrap_or(pid);
    let only_tid = (tgid != pid).then_some(pid);
    let tid_of = pid;
    let pid = tgid;
    let cmdline = allot_linux::process::procfs::cmdline(pid).unwrap_or_else(|_| st.comm.clone());
    let cmdline = match only_tid {
        Some(t) => format!("thread {t} of {pid} {cmdline}"),
        None => cmdline,
    };
    let attr = allot_linux::process::sched::get(tid_of).ok();
    let policy = match attr {
        Some(a) if a.sched_policy == allot_linux::process::sched::SCHED_FIFO || a.sched_policy == allot_linux::process::sched::SCHED_RR => {
            format!("{} priority {}", allot_linux::process::sched::policy_name(a.sched_policy), a.sched_priority)
        }
        Some(a) => format!("{} nice {}", allot_linux::process::sched::policy_name(a.sched_policy), a.sched_nice),
        None => "?".into(),
    };
    let cgroup = allot_linux::process::procfs::cgroup_of(pid, Some("cpu")).or_else(|_| allot_linux::process::procfs::cgroup_of(pid, None)).ok();
    let me = std::process::id() as i32;
    let uids = allot_linux::process::machine::creds(pid).ok().map(|c| c.uid);
    let nice = attr
        .filter(|a| a.sched_policy != allot_linux::process::sched::SCHED_FIFO && a.sched_policy != allot_linux::process::sched::SCHED_RR)
        .map(|a| a.sched_nice);
    let nice_floor = allot_linux::read(format!("/proc/{pid}/limits")).ok().and_then(|s| parse_nice_floor(&s));
    // The quota's bite: the throttled time of its own cgroup (whoever made it) over the window.
    let cpu_dir = allot_linux::cgroup::cpu_dir_of(pid).ok();
    let throttled0 = cpu_dir.as_deref().and_then(|d| allot_linux::cgroup::stat::throttling(d).ok());
    let idle0 = allot_linux::process::machine::cpu_times().ok();

    let psi0 = allot_linux::process::procfs::psi_cpu();
    let mut stall = Sampler::start(pid);
    let ticks0 = cpu_ticks_all();
    let start = Instant::now();
    let mut acc: HashMap<i32, Acc> = HashMap::new();
    let mut runnable = Vec::new();
    let mut last_load = Instant::now() - Duration::from_secs(1);
    let mut last_stall = last_load;
    let mut first = true;
    loop {
        let tids = match allot_linux::process::procfs::tids(pid) {
            Ok(t) if only_tid.is_some_and(|o| !t.contains(&o)) => {
                if first {
                    anyhow::bail!("no thread with id {tid_of} (it may have exited)");
                }
                return Err(gone(tid_of, start.elapsed().as_secs_f64()));
            }
            Ok(_) if only_tid.is_some() => vec![tid_of],
            Ok(t) if !t.is_empty() && alive(pid) => t,
            _ if first => anyhow::bail!("no process with PID {pid} (it may have exited)"),
            _ => return Err(gone(pid, start.elapsed().as_secs_f64())),
        };
        // State and wait channel every 20 ms at most: two more reads per thread, and a
        // share of samples needs no finer grain.
        if last_stall.elapsed() >= STALL_EVERY {
            stall.sample(&tids);
            last_stall = Instant::now();
        }
        for tid in tids {
            let Ok(s) = allot_linux::process::procfs::task_schedstat(pid, tid) else { continue };
            match acc.get_mut(&tid) {
                None => {
                    let ts = allot_linux::process::procfs::task_sched(pid, tid).unwrap_or_default();
                    // A thread born during the window counts from zero.
                    let base = if first { s } else { Default::default() };
                    acc.insert(
                        tid,
                        Acc {
                            first: base,
                            last: s,
                            sched0: if first { (ts.nr_involuntary_switches, ts.nr_voluntary_switches) } else { (0, 0) },
                            ..Default::default()
                        },
                    );
                }
                Some(a) => {
                    // Longest continuous wait: windows in which the thread waited and
                    // never ran extend the current wait; a window in which it ran ends it
                    // (with that window's average wait per dispatch added).
                    let (dr, dw, dk) = (
                        s.run_ns.saturating_sub(a.last.run_ns),
                        s.wait_ns.saturating_sub(a.last.wait_ns),
                        s.timeslices.saturating_sub(a.last.timeslices),
                    );
                    if dr == 0 && dk == 0 {
                        a.cur_wait += dw;
                    } else {
                        a.longest = a.longest.max(a.cur_wait + dw / dk.max(1));
                        a.cur_wait = 0;
                    }
                    a.last = s;
                }
            }
        }
        first = false;
        if last_load.elapsed() >= Duration::from_millis(100) {
            if let Ok(l) = allot_linux::process::procfs::loadavg() {
                // The sampler itself is running while it reads.
                runnable.push((l.runnable as f64 - 1.0).max(0.0));
            }
            last_load = Instant::now();
        }
        if start.elapsed() >= window {
            break;
        }
        std::thread::sleep(every.min(window.saturating_sub(start.elapsed())).max(Duration::from_micros(100)));
    }
    let t = start.elapsed().as_secs_f64();
    let psi1 = allot_linux::process::procfs::psi_cpu();
    let stall = stall.finish(t)?;
    let ticks1 = cpu_ticks_all();
    let throttled1 = cpu_dir.as_deref().and_then(|d| allot_linux::cgroup::stat::throttling(d).ok());
    let idle1 = allot_linux::process::machine::cpu_times().ok();
    if !alive(pid) || only_tid.is_some_and(|o| !allot_linux::process::procfs::tids(pid).unwrap_or_default().contains(&o)) {
        return Err(gone(tid_of, t));
    }

    let (mut run, mut wait, mut slices, mut inv, mut vol) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut busiest: f64 = 0.0;
    let mut longest = 0u64;
    let mut worst: Option<(f64, &'static str)> = None;
    for (tid, a) in &acc {
        let dr = a.last.run_ns.saturating_sub(a.first.run_ns);
        let dw = a.last.wait_ns.saturating_sub(a.first.wait_ns);
        run += dr;
        wait += dw;
        slices += a.last.timeslices.saturating_sub(a.first.timeslices);
        busiest = busiest.max((dr + dw) as f64 / 1e9 / t);
        longest = longest.max(a.longest.max(a.cur_wait));
        if let Ok(ts) = allot_linux::process::procfs::task_sched(pid, *tid) {
            inv += ts.nr_involuntary_switches.saturating_sub(a.sched0.0);
            vol += ts.nr_voluntary_switches.saturating_sub(a.sched0.1);
            if let Some(m) = ts.wait_max_ms {
                worst = Some((worst.map_or(m, |w| w.0.max(m)), "wait_max in /proc/PID/task/TID/sched (since the thread started)"));
            }
        }
    }
    let (cpu_s, wait_s) = (run as f64 / 1e9, wait as f64 / 1e9);
    let ncpu = allot_linux::ncpu();
    let runnable_avg = if runnable.is_empty() { 0.0 } else { runnable.iter().sum::<f64>() / runnable.len() as f64 };
    let hz = allot_linux::process::procfs::clk_tck() as f64;
    let mut top: Vec<Competitor> = ticks1
        .iter()
        .filter(|(p, _)| **p != pid && **p != me && **p != tid_of)
        .filter_map(|(p, (t1, comm))| {
            let t0 = ticks0.get(p).map(|x| x.0).unwrap_or(0);
            let cpus = (t1.saturating_sub(t0)) as f64 / hz / t;
            (cpus >= 0.05).then(|| Competitor { pid: *p, comm: comm.clone(), cpus, uids: None, cgroup: None, job: None })
        })
        .collect();
    top.sort_by(|a, b| b.cpus.total_cmp(&a.cpus));
    top.truncate(3);
    for c in &mut top {
        c.uids = allot_linux::process::machine::creds(c.pid).ok().map(|c| c.uid);
        c.cgroup = allot_linux::process::procfs::cgroup_of(c.pid, Some("cpu")).or_else(|_| allot_linux::process::procfs::cgroup_of(c.pid, None)).ok();
    }
    let machine = MachineContext {
        ncpu,
        runnable_avg,
        idle_cpus: match (idle0, idle1) {
            (Some(a), Some(b)) => {
                let ticks: u64 = b.idle.iter().zip(a.idle.iter().chain(std::iter::repeat(&0))).map(|(b, a)| b.saturating_sub(*a)).sum();
                Some((ticks as f64 / hz / t).min(ncpu as f64))
            }
            _ => None,
        },
        psi_some_pct: match (psi0, psi1) {
            (Some(a), Some(b)) => Some(((b.some.total_us - a.some.total_us) as f64 / 1e6 / t * 100.0).min(100.0)),
            _ => None,
        },
        psi_some_avg10: psi1.map(|p| p.some.avg10),
        top,
    };
    let equal_share = (ncpu as f64 / runnable_avg.max(1.0)).min(1.0);
    let ratio = (run + wait > 0).then(|| run as f64 / (run + wait) as f64);
    let wait_ms_per_s = wait_s * 1e3 / t;
    let cpu_rate = cpu_s / t;
    // Threads that are CPU-bound (runnable ≥ 90%) share the machine with everything else.
    let busy_threads = acc
        .values()
        .filter(|a| {
            (a.last.run_ns.saturating_sub(a.first.run_ns) + a.last.wait_ns.saturating_sub(a.first.wait_ns)) as f64 / 1e9 / t >= CPU_BOUND_RUNNABLE
        })
        .count()
        .max(1);

    let mut d = Diagnosis {
        pid,
        cmdline,
        threads: acc.len(),
        policy,
        cgroup,
        uids,
        nice,
        nice_floor,
        // SAFETY: geteuid has no preconditions.
        asker: unsafe { libc::geteuid() },
        window_s: t,
        cpu_s,
        wait_s,
        cpu_rate,
        wait_ms_per_s,
        runtime_ratio: ratio,
        busiest_runnable: busiest,
        busy_threads,
        throttled_s: match (throttled0, throttled1) {
            (Some(a), Some(b)) => Some(b.throttled_ns.saturating_sub(a.throttled_ns) as f64 / 1e9),
            _ => None,
        },
        waits_per_s: slices as f64 / t,
        mean_wait_ms: if slices > 0 { wait as f64 / 1e6 / slices as f64 } else { 0.0 },
        involuntary_per_s: inv as f64 / t,
        voluntary_per_s: vol as f64 / t,
        worst_wait_ms: worst.map(|w| w.0),
        worst_wait_source: worst.map(|w| w.1.to_string()),
        longest_wait_estimate_ms: longest as f64 / 1e6,
        equal_share,
        machine,
        stall,
        kernel_verdict: Verdict::Sleeping,
        kernel_reason: String::new(),
        allot: Managed::NotAsked,
        verdict: Verdict::Sleeping,
        reason: String::new(),
        help: vec![],
        ask: vec![],
    };
    advise(&mut d);
    Ok(d)
}

/// The lowest nice a process may be given without privilege, from /proc/PID/limits'
/// "Max nice priority" soft limit: 20 − limit (setpriority(2)); unlimited is −20.
pub fn parse_nice_floor(limits: &str) -> Option<i32> {
    let l = limits.lines().find(|l| l.starts_with("Max nice priority"))?;
    let soft = l.trim_start_matches("Max nice priority").split_whitespace().next()?;
    if soft == "unlimited" {
        return Some(-20);
    }
    let n: i64 = soft.parse().ok()?;
    Some((20 - n.clamp(0, 40)) as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_floor_is_20_minus_the_soft_limit() {
        let t = |soft: &str| {
            format!("Limit                     Soft Limit           Hard Limit           Units\nMax nice priority         {soft:<20} 0\nMax realtime priority     0                    0\n")
        };
        assert_eq!(parse_nice_floor(&t("0")), Some(20));
        assert_eq!(parse_nice_floor(&t("20")), Some(0));
        assert_eq!(parse_nice_floor(&t("40")), Some(-20));
        assert_eq!(parse_nice_floor(&t("unlimited")), Some(-20));
        assert_eq!(parse_nice_floor("Max cpu time unlimited\n"), None);
        let me = parse_nice_floor(&std::fs::read_to_string("/proc/self/limits").unwrap());
        assert!(me.is_some_and(|f| (-20..=20).contains(&f)), "{me:?}");
    }
}
