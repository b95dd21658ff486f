//! A currency's jobs against its user's other processes, where the two cannot share one
//! directory. In allot's own tree a user's processes outside any job are the `default`
//! job, a claimant of 100 tickets beside the user's jobs (docs/concepts.md). On a systemd
//! host the login sessions stay in their session scopes and the jobs share one scope
//! beside them, each scope at systemd's default weight: two jobs of 300 and 100 tickets
//! beside one busy session got 0.39 / 0.13 of a CPU against the session's 0.51, where the
//! concepts promise 0.60 / 0.20 / 0.20. Weighing the jobs' scope as the sum of its active
//! jobs' weights (a session weighs 100, as a default job would) restores the promise.

/// A unit's `CPUWeight=` when nobody set one: systemd's default, what a session scope
/// and a slice allot has not funded weigh.
pub const SYSTEMD_DEFAULT_WEIGHT: u32 = 100;

/// A session scope's weight, systemd's default (`CPUWeight=` unset).
pub const SESSION_WEIGHT: u32 = SYSTEMD_DEFAULT_WEIGHT;

/// The weight of the scope that holds a currency's jobs: the sum of the weights of its
/// active jobs (those with an entitlement now), within the kernel's 1..10000. None when no
/// job is active: the scope then competes for nothing and keeps what it has.
pub fn scope_weight(active_job_weights: impl IntoIterator<Item = u32>) -> Option<u32> {
    let mut any = false;
    let mut sum: u64 = 0;
    for w in active_job_weights {
        any = true;
        sum += u64::from(w);
    }
    any.then(|| sum.clamp(1, 10_000) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_weigh_together_as_their_tickets_against_a_session() {
        // 300 + 100 tickets against one session of 100: 0.6 / 0.2 / 0.2 of a CPU.
        let w = scope_weight([300, 100]).unwrap();
        let total = f64::from(w + SESSION_WEIGHT);
        assert_eq!(w, 400);
        assert!((f64::from(w) / total - 0.8).abs() < 1e-9);
    }

    #[test]
    fn no_active_job_leaves_the_scope_and_sums_stay_in_range() {
        assert_eq!(scope_weight([]), None);
        assert_eq!(scope_weight([10_000, 10_000]), Some(10_000));
        assert_eq!(scope_weight([0]), Some(1));
    }
}
