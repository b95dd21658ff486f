//! The quantum each task of allot's sched_ext scheduler runs (docs/scx.md, "Many
//! tasks"). The BPF program (crates/allot-scx/bpf/quantum.h) does this arithmetic, in
//! the same integers.
//!
//! Stride scheduling (Waldspurger and Weihl 1995) gives each task CPU in proportion to
//! its share, and a task with a fixed quantum waits, between two of its turns, for as
//! long as the others run while its pass catches up: about `quantum × active / share`,
//! where `active` is the share of every job that has a runnable task. With sched_ext's
//! default 20 ms quantum a job of 2000 CPU-bound threads against one hog leaves each of
//! its threads 80 s between turns, and the kernel's watchdog ejects a scheduler that
//! leaves a runnable task unrun for its timeout (at most 30 s).
//!
//! So each task's quantum is its share of [`TARGET_NS`], held to [`MIN_SLICE_NS`] ..
//! [`MAX_SLICE_NS`]: a task then waits about `TARGET_NS` between turns whatever its share.
//! The target is a second: a task of 2% of the active shares or more keeps the default
//! quantum. A 100 ms target moved shares that the default held: a hog's job against a
//! job of a hog and four tasks that wake every 50 ms got 0.43–0.45 of the CPU, against
//! 0.46–0.50 with the default quantum (docs/scx.md, "Many tasks").
//!
//! sched_ext ends a slice at a tick (a slice of 100 µs runs to the next one: 4 ms at the
//! 250 Hz of Debian's kernels), so below a tick a task waits `tick × active / share`
//! ([`longest_wait_ns`]): 1000 threads against one hog on one CPU, about 8 s at 250 Hz
//! (measured: each ran within 20 s); 2000, about 16 s (computed). The pass is charged for
//! the CPU time a task really ran; even so a job of 1000 threads did not hold its share.

/// The time in which every runnable task should get a turn, ns.
pub const TARGET_NS: u64 = 1_000_000_000;

/// The shortest quantum, ns (switching costs more than it buys below it).
pub const MIN_SLICE_NS: u64 = 100_000;

/// The longest quantum, ns: sched_ext's default slice (SCX_SLICE_DFL).
pub const MAX_SLICE_NS: u64 = 20_000_000;

/// The quantum of a task whose share (base units) is `share`, when the jobs with a
/// runnable task have `active` in all (a task's share is counted in `active` even if
/// `active` was read before it became runnable).
pub fn slice_ns(share: u64, active: u64) -> u64 {
    let active = active.max(share).max(1);
    let s = (TARGET_NS as u128 * share as u128 / active as u128) as u64;
    s.clamp(MIN_SLICE_NS, MAX_SLICE_NS)
}

/// About how long a CPU-bound task of `share` waits between turns on one CPU, ns: the
/// time the others run while its pass catches up after a quantum, which lasts at least
/// to the kernel's next tick (`tick_ns`: 1e9 / CONFIG_HZ).
pub fn longest_wait_ns(share: u64, active: u64, tick_ns: u64) -> u64 {
    let active = active.max(share).max(1);
    let q = slice_ns(share, active).max(tick_ns) as u128;
    (q * (active - share.min(active)) as u128 / share.max(1) as u128).min(u64::MAX as u128) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    const MS: u64 = 1_000_000;
    /// A tick at 250 Hz (Debian's kernels) and at 1000 Hz.
    const HZ250: u64 = 4 * MS;
    const HZ1000: u64 = MS;

    #[test]
    fn a_few_tasks_run_sched_ext_s_default_quantum() {
        // two hogs alike, and tickets 3:2:1: each the default 20 ms
        assert_eq!(slice_ns(50_000, 100_000), MAX_SLICE_NS);
        assert_eq!((slice_ns(50_000, 100_000), slice_ns(33_333, 100_000), slice_ns(16_667, 100_000)), (20 * MS, 20 * MS, 20 * MS));
        // down to 2% of the active shares; 1% gets half of it
        assert_eq!((slice_ns(2_000, 100_000), slice_ns(1_000, 100_000)), (20 * MS, 10 * MS));
        // alone (or read before it was counted): the longest
        assert_eq!((slice_ns(100_000, 100_000), slice_ns(100_000, 0)), (MAX_SLICE_NS, MAX_SLICE_NS));
    }

    #[test]
    fn thousands_of_threads_wait_well_under_the_watchdog() {
        // a job of 2000 threads against a one-hog job, equal tickets: each thread's share
        // is 1/4000 of the active whole
        let (thread, whole) = (50_000 / 2000, 100_000);
        assert_eq!(slice_ns(thread, whole), 250_000);
        // a slice ends at a tick: about 16 s at 250 Hz, 4 s at 1000 Hz, under the
        // kernel's longest watchdog timeout (30 s)
        assert_eq!(longest_wait_ns(thread, whole, HZ250) / MS, 15_996);
        assert_eq!(longest_wait_ns(thread, whole, HZ1000) / MS, 3_999);
        // with sched_ext's fixed 20 ms it would be 80 s, past any watchdog
        assert_eq!(MAX_SLICE_NS * (whole - thread) / thread / MS, 79_980);
        // the hog keeps the long quantum
        assert_eq!(slice_ns(50_000, whole), MAX_SLICE_NS);
    }

    #[test]
    fn above_the_shortest_quantum_every_task_waits_the_target() {
        // between the quanta's bounds: the target less the task's own turn
        for share in [100, 500, 1_000, 2_000] {
            assert_eq!(longest_wait_ns(share, 100_000, HZ1000), TARGET_NS - TARGET_NS * share / 100_000, "{share}");
        }
        // a quantum under the tick lasts the tick
        assert_eq!(longest_wait_ns(50, 100_000, HZ250), 4 * 1999 * MS);
        // held to the longest quantum: sooner
        assert_eq!(longest_wait_ns(30_000, 100_000, HZ250), 46_666_666);
        // tickets 1 against 10000: the shortest quantum, run to the tick
        assert_eq!(slice_ns(10, 100_010), MIN_SLICE_NS);
        assert_eq!(longest_wait_ns(10, 100_010, HZ250), 40_000_000_000);
    }

    #[test]
    fn no_input_overflows_or_divides_by_zero() {
        assert_eq!(slice_ns(0, 0), MIN_SLICE_NS);
        assert_eq!(slice_ns(u64::MAX, u64::MAX), MAX_SLICE_NS);
        assert_eq!(slice_ns(1, u64::MAX), MIN_SLICE_NS);
        assert!(longest_wait_ns(1, u64::MAX, HZ250) > 0);
        assert_eq!(longest_wait_ns(0, 0, 0), MIN_SLICE_NS, "a share of 0 is taken as 1");
    }
}
