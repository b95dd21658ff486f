//! Real-time runtime under RT group scheduling (cgroup v1 with CONFIG_RT_GROUP_SCHED): a
//! new cgroup gets `cpu.rt_runtime_us = 0`, so no real-time task could run in a job unless
//! runtime is handed down. The division is policy and lives here; the daemon reads the
//! root's runtime and what other cgroups hold, and writes what this module decides.
//!
//! allot takes half of the root's runtime that no other cgroup holds (and at most half of
//! the root's) for its two trees, 3/4 to the foreground and 1/4 to the background, and
//! gives every job an equal quantum, the tree's budget / 2^k with 2^k ≥ jobs (at least 16):
//! adding a job then changes only its own and its currency's runtime, except when the
//! count crosses a power of two. A currency holds the sum of its jobs' quanta, so the
//! kernel's rule (children sum to no more than their parent) holds at every level.

/// Runtime in µs per period; [`UNLIMITED`] where the kernel does not limit real-time tasks.
pub type Runtime = i64;

/// `kernel.sched_rt_runtime_us = -1`: real-time tasks are not limited, and neither are
/// allot's cgroups.
pub const UNLIMITED: Runtime = -1;

/// Jobs share a tree's budget in at least this many equal slots.
pub const MIN_SLOTS: usize = 16;

/// The budgets of allot's foreground and background trees, from the root's runtime and
/// the runtime the root's other children (other managers' cgroups) already hold.
pub fn budgets(root: Runtime, taken_by_others: Runtime) -> [Runtime; 2] {
    if root < 0 {
        return [UNLIMITED, UNLIMITED];
    }
    let share = allot_share(root, taken_by_others);
    [share * 3 / 4, share / 4]
}

/// What allot may take of the root's runtime: half of what others leave, at most half of
/// the root's, never negative.
pub fn allot_share(root: Runtime, taken_by_others: Runtime) -> Runtime {
    ((root - taken_by_others.max(0)) / 2).min(root / 2).max(0)
}

/// Each job's runtime in a tree of `budget` holding `jobs` jobs.
pub fn per_job(budget: Runtime, jobs: usize) -> Runtime {
    if budget < 0 {
        return UNLIMITED;
    }
    budget / jobs.max(MIN_SLOTS).next_power_of_two() as Runtime
}

/// A currency's runtime: the sum of its `jobs` jobs' quanta.
pub fn per_currency(budget: Runtime, jobs_in_tree: usize, jobs_in_currency: usize) -> Runtime {
    let q = per_job(budget, jobs_in_tree);
    if q < 0 {
        UNLIMITED
    } else {
        q * jobs_in_currency as Runtime
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn an_unlimited_root_leaves_every_level_unlimited() {
        assert_eq!(budgets(-1, 0), [UNLIMITED, UNLIMITED]);
        assert_eq!(per_job(UNLIMITED, 3), UNLIMITED);
        assert_eq!(per_currency(UNLIMITED, 3, 2), UNLIMITED);
    }

    #[test]
    fn allot_takes_half_of_what_others_leave() {
        // Debian's default: 950000 of 1000000 µs.
        assert_eq!(budgets(950_000, 0), [356_250, 118_750]);
        assert_eq!(allot_share(950_000, 900_000), 25_000);
        assert_eq!(allot_share(950_000, 2_000_000), 0, "others over-committed: nothing, not negative");
    }

    #[test]
    fn a_job_added_below_sixteen_changes_no_other_jobs_quantum() {
        let b = 356_250;
        let q: Vec<Runtime> = (1..=16).map(|n| per_job(b, n)).collect();
        assert!(q.iter().all(|&x| x == q[0]));
        assert_eq!(per_job(b, 17), b / 32);
    }

    proptest! {
        #[test]
        fn children_never_sum_past_their_parent(root in -1i64..2_000_000, taken in 0i64..2_000_000, split in proptest::collection::vec(0usize..40, 1..12)) {
            let [fg, bg] = budgets(root, taken);
            if root >= 0 {
                prop_assert!(fg + bg <= root / 2 && fg >= 0 && bg >= 0);
            }
            let jobs: usize = split.iter().sum();
            for b in [fg, bg] {
                let sum: Runtime = split.iter().map(|&n| per_currency(b, jobs, n)).sum();
                if b >= 0 {
                    prop_assert!(sum <= b, "currencies {sum} over the tree's {b}");
                } else {
                    prop_assert!(split.iter().all(|&n| per_currency(b, jobs, n) == UNLIMITED));
                }
            }
        }
    }
}
