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

/// On a systemd host, the currencies without jobs whose slice must carry a weight, and the
/// weight: a user's `user-UID.slice` exists from their first login and weighs all their
/// processes, so it carries their funding whether or not they have a job. Every currency
/// in `funded` (funded with `allot fund`, at the value `funding_of` gives: the funding
/// authority's), and every human user whose slice exists (`logged_in`, their currency
/// `user(uid)`) and whose funding is not [`SYSTEMD_DEFAULT_WEIGHT`], or whose slice was
/// `written` before (so a funding that went back to the default is written back too).
/// Currencies with jobs are the plan's. Sorted, one entry per currency.
pub fn slices_to_fund<C: Ord + Clone>(
    with_jobs: &[C],
    funded: &[C],
    logged_in: &[u32],
    user: impl Fn(u32) -> C,
    human: impl Fn(u32) -> bool,
    funding_of: impl Fn(&C) -> u32,
    written: impl Fn(&C) -> bool,
) -> Vec<(C, u32)> {
    let mut out: Vec<(C, u32)> = funded.iter().filter(|c| !with_jobs.contains(c)).map(|c| (c.clone(), funding_of(c))).collect();
    for &uid in logged_in {
        let c = user(uid);
        if !human(uid) || with_jobs.contains(&c) || funded.contains(&c) {
            continue;
        }
        let f = funding_of(&c);
        if f != SYSTEMD_DEFAULT_WEIGHT || written(&c) {
            out.push((c, f));
        }
    }
    out.sort();
    out.dedup_by(|a, b| a.0 == b.0);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slice_carries_its_users_funding_unless_it_is_systemds_default_or_has_jobs() {
        let user = |uid: u32| format!("user-{uid}");
        let funding = |c: &String| if c == "user-1001" { 300 } else { SYSTEMD_DEFAULT_WEIGHT };
        let got = slices_to_fund(&[user(1002)], &["ci".to_string()], &[1001, 1002, 1003, 999], user, |u| u >= 1000, funding, |c| c == "user-1003");
        // ci: funded; 1001: 300; 1002: has jobs (the plan's); 1003: at the default but
        // written before; 999: not a human user.
        assert_eq!(got, [("ci".to_string(), 100), ("user-1001".to_string(), 300), ("user-1003".to_string(), 100)]);
    }

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
