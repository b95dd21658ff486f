//! Where allot's sched_ext scheduler queues a task: the pass rule of
//! crates/allot-scx/bpf/allot_stride.bpf.c, in the same integers (docs/scx.md, "A job's
//! pass").
//!
//! Stride scheduling (Waldspurger and Weihl 1995): every task has a pass, advanced by
//! what it ran times its stride (the inverse of its share), and the CPU goes to the
//! lowest pass. A task's share is its job's share split among the job's runnable tasks.
//! Two floors and a ceiling keep a task's pass near its job's:
//!
//! - a task that rejoins after sleeping is queued no more than [`LAG`] behind the global
//!   pass (the pass of the task last started): sleeping banks little credit (the paper's
//!   "remain", bounded);
//! - no task is queued ahead of its **job's pass**: what all of the job's tasks ran, at
//!   the job's whole share. A task's own pass charges it only for its own turns, so a job
//!   whose tasks come and go (sleepers that rejoin near the global pass, short-lived
//!   children) ran on its own pass's credit uncharged: in the VM a job of a hog and four
//!   tasks waking every 50 ms took 0.5604 of a CPU against another job's hog at equal
//!   shares, and 0.5001 with the job's pass;
//! - no task is queued more than one quantum's stride (at its share) **after its job's
//!   pass**: the job's tasks then take turns within a round of their job. A task that got
//!   ahead of its siblings (one of a thousand threads that ran early, while the others
//!   were still leaving their start line) otherwise waited until every sibling had caught
//!   up: past the kernel's 30 s watchdog, which ejected the scheduler (the VM, 2026-11-27:
//!   a thread with 28.5 ms of CPU where the median had 12 ms, unrun for 30.1 s).
//!
//!   The same ceiling holds a fork storm's job to its share: its children, six or seven
//!   waiting after each of the parent's turns, split the job's share with the parent,
//!   whose own pass then ran far ahead of its job's (the storm's job got 0.12-0.15 of a
//!   CPU in the VM against a hog's job at equal shares; 0.1352 in the one-CPU simulation
//!   of the tests without the ceiling, about half with it).

/// Pass advanced by one ns of CPU at a share of one base unit (STRIDE_UNIT).
pub const STRIDE_UNIT: u64 = 1024;

/// The most pass a sleeper or an idle job may be behind the global pass (the BPF side's
/// SCX_SLICE_DFL, a number of pass units there).
pub const LAG: u64 = 20_000_000;

/// `a` is before `b`, passes compared as the BPF side does (wrapping).
pub fn before(a: u64, b: u64) -> bool {
    (a.wrapping_sub(b) as i64) < 0
}

/// The pass `used_ns` of CPU costs at `share` base units.
pub fn stride(used_ns: u64, share: u64) -> u64 {
    used_ns.saturating_mul(STRIDE_UNIT) / share.max(1)
}

/// The pass a task is queued at: its own, no more than [`LAG`] behind the global pass,
/// not before its job's pass (`None`: a job that has not run yet), and no more than
/// `ahead` after it: the stride of the task's quantum at its share
/// (`stride(quantum, share)`).
pub fn queue_at(own: u64, global: u64, job: Option<u64>, ahead: u64) -> u64 {
    let mut at = own;
    if before(at, global.wrapping_sub(LAG)) {
        at = global.wrapping_sub(LAG);
    }
    match job {
        Some(j) if before(at, j) => j,
        Some(j) if before(j.wrapping_add(ahead), at) => j.wrapping_add(ahead),
        _ => at,
    }
}

/// The job's pass after one of its tasks ran `used_ns`: an idle job's pass first rolled
/// up to [`LAG`] behind the global pass, then advanced at the job's whole `share`.
pub fn charge_job(job: Option<u64>, global: u64, used_ns: u64, share: u64) -> u64 {
    let floor = global.wrapping_sub(LAG);
    let j = match job {
        Some(j) if !before(j, floor) => j,
        _ => floor,
    };
    j.wrapping_add(stride(used_ns, share))
}

#[cfg(test)]
#[path = "pass_tests.rs"]
mod tests;
