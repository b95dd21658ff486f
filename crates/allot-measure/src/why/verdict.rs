//! The kernel's verdict and the machine's context in words, from the numbers sampled:
//! pure, so each threshold is tested on constructed diagnoses.

use super::*;

/// The verdict from the kernel's accounting alone, with its reason in one sentence.
pub fn kernel_verdict(d: &Diagnosis) -> (Verdict, String) {
    let t = d.window_s.max(1e-9);
    let demand = (d.cpu_s + d.wait_s) / t;
    let wants = d.busiest_runnable >= CPU_BOUND_RUNNABLE || d.wait_ms_per_s >= STARVED_WAIT_MS_PER_S;
    let throttled = d.throttled_s.map_or(0.0, |s| (s / t).min(1.0));
    let spare = d.machine.idle_cpus.filter(|i| *i >= SPARE_CPUS);
    // A stall on memory or I/O comes first: a task that waits in the kernel is not
    // runnable, so the CPU's accounting alone would call it sleeping (or, between its
    // waits, CPU-bound).
    match d.stall.kind {
        Some(allot_model::stall::StallKind::Memory) => return (Verdict::MemoryStall, d.stall.reason.clone()),
        Some(allot_model::stall::StallKind::Io) => return (Verdict::IoStall, d.stall.reason.clone()),
        None => {}
    }
    if demand < SLEEPING_DEMAND {
        return (
            Verdict::Sleeping,
            format!(
                "it was runnable only {:.1}% of the time: it sleeps or blocks, and waited {:.1} ms per second for a CPU",
                demand * 100.0,
                d.wait_ms_per_s
            ),
        );
    }
    if wants && throttled >= THROTTLED_SHARE {
        return (
            Verdict::Throttled,
            format!(
                "its cgroup's CPU quota stopped it {:.0}% of the window (cpu.stat throttled time): it got {:.2} CPUs and waited {:.0} ms per second{}",
                throttled * 100.0,
                d.cpu_rate,
                d.wait_ms_per_s,
                spare.map(|i| format!(", while {i:.1} CPUs sat idle")).unwrap_or_default()
            ),
        );
    }
    if d.busiest_runnable >= CPU_BOUND_RUNNABLE {
        let per_thread = d.cpu_rate / d.busy_threads.max(1) as f64;
        return if per_thread < BELOW_SHARE * d.equal_share {
            let why = match spare {
                Some(i) => {
                    format!("while {i:.1} CPUs sat idle: not competition but a limit holds it down (a CPU quota, its CPU affinity or SCHED_IDLE)")
                }
                None => "its weight, policy or cgroup holds it down".into(),
            };
            (
                Verdict::Starved,
                format!("it is CPU-bound but gets {per_thread:.2} CPUs per busy thread, under half of an equal share ({:.2}), {why}", d.equal_share),
            )
        } else {
            (
                Verdict::CpuBoundFairShare,
                format!(
                    "it wants the CPU all the time and gets {per_thread:.2} CPUs per busy thread, against an equal share of {:.2} ({} CPUs, {:.1} runnable tasks)",
                    d.equal_share, d.machine.ncpu, d.machine.runnable_avg
                ),
            )
        };
    }
    if d.wait_ms_per_s >= STARVED_WAIT_MS_PER_S && d.runtime_ratio.unwrap_or(1.0) < STARVED_RATIO {
        return (
            Verdict::Starved,
            format!(
                "each time it wakes it waits for a CPU longer than it runs (runtime ratio {:.2}, {:.0} ms waiting per second, {:.2} ms per wait){}",
                d.runtime_ratio.unwrap_or(0.0),
                d.wait_ms_per_s,
                d.mean_wait_ms,
                spare
                    .map(|i| format!(", though {i:.1} CPUs sat idle on average: its CPU affinity or a quota may keep it off them"))
                    .unwrap_or_default()
            ),
        );
    }
    if d.cpu_rate >= 0.5 {
        return (
            Verdict::CpuBoundFairShare,
            format!("it uses {:.2} CPUs and rarely waits (runtime ratio {:.2})", d.cpu_rate, d.runtime_ratio.unwrap_or(1.0)),
        );
    }
    (
        Verdict::Sleeping,
        format!(
            "it is runnable {:.0}% of the time and waits only {:.1} ms per second for a CPU: what delays it is not the scheduler",
            demand * 100.0,
            d.wait_ms_per_s
        ),
    )
}

/// The machine during the window, in words that agree with the verdict: CPU that sat
/// idle while the process waited is said to be kept from it by what the verdict names,
/// and a busy machine is not called idle.
pub fn machine_words(d: &Diagnosis) -> String {
    let m = &d.machine;
    let mut s = format!("{} CPUs, {:.1} runnable tasks on average (equal share {:.2} CPUs each)", m.ncpu, m.runnable_avg, d.equal_share);
    if let Some(i) = m.idle_cpus {
        s += &format!(", {i:.1} CPUs idle");
    }
    s += &format!(", PSI cpu some {}", m.psi_some_pct.map(|p| format!("{p:.0}% of the window")).unwrap_or("n/a".into()));
    let spare = m.idle_cpus.is_some_and(|i| i >= SPARE_CPUS);
    let waited = d.wait_ms_per_s >= STARVED_WAIT_MS_PER_S;
    let clause = match d.verdict {
        Verdict::Capped | Verdict::Throttled if spare => Some("the quota, not competition, keeps it off the idle CPU"),
        Verdict::Starved if spare && waited => Some("it waited while CPU sat idle: something limits it, not competition"),
        Verdict::Background if !spare => Some("no CPU sat idle for background work to take"),
        Verdict::Funding | Verdict::Niced if !spare => Some("busy: every CPU was claimed"),
        Verdict::Starved | Verdict::CpuBoundFairShare if !spare && m.runnable_avg > m.ncpu as f64 => Some("busy: more runnable tasks than CPUs"),
        _ => None,
    };
    if let Some(c) = clause {
        s += &format!(" — {c}");
    }
    s
}
