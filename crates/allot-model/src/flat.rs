//! The plan flattened for a scheduler that sees jobs, not a hierarchy (allot's sched_ext
//! scheduler, docs/scx.md): each job's share of the machine in base units, from the same
//! weights the cgroup backend writes. All of allot's foreground jobs together weigh
//! `[outside] weight` (100: one nice-0 task), split among currencies by their weight and
//! within a currency by its jobs' weights (currencies as in Waldspurger and Weihl 1994,
//! "Lottery Scheduling": a ticket is worth its currency's funding over the tickets issued
//! in it). Background jobs together weigh as the kernel weighs an idle cgroup (3 against
//! a nice-0 task's 1024), split the same way.
//!
//! Idle jobs are counted as the plan counts them: a currency's weight is split among its
//! active jobs only (a job the plan gives no entitlement does not dilute its currency's
//! others, as a cgroup with nothing runnable weighs nothing in the kernel), and a
//! currency with no active job does not count against the others; an idle job's own
//! share is what it would get were it to wake (its weight added to its currency's
//! active ones; in a currency with none active, all its jobs counted and the currency
//! added to the active ones), so it runs at once at a fair share until the next plan
//! counts it. While no job of a class is active, every job counts.

/// Base units per unit of weight: a weight of 100 (one nice-0 task) is 100 000 base
/// units, so a split among up to 1000 jobs keeps three digits.
pub const SHARE_SCALE: u64 = 1000;

/// The kernel's weight of an idle cgroup (cpu.idle = 1) against a nice-0 task's 1024.
const IDLE: (u64, u64) = (3, 1024);

/// One job as the flattening sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FlatJob {
    /// Its currency (an index: jobs with the same index and class share a currency).
    pub currency: usize,
    /// Its currency's weight in its class (foreground: the plan's; background: funding).
    pub currency_weight: u32,
    /// Its weight in its currency (the plan's, or its tickets).
    pub weight: u32,
    /// It is a background job.
    pub background: bool,
    /// It competes for CPU now (the plan gives it an entitlement).
    pub active: bool,
}

/// Each job's share in base units (at least 1), in the order given.
pub fn flatten(jobs: &[FlatJob], outside_weight: u32) -> Vec<u64> {
    use std::collections::BTreeMap;
    // per (class, currency): its weight, its active jobs' weights and all its jobs'
    let mut issued: BTreeMap<(bool, usize), (u128, u128, u128)> = BTreeMap::new();
    for j in jobs {
        let e = issued.entry((j.background, j.currency)).or_insert((j.currency_weight.max(1) as u128, 0, 0));
        let w = j.weight.max(1) as u128;
        e.2 += w;
        if j.active {
            e.1 += w;
        }
    }
    // a class's currencies with an active job (all of them while none is active)
    let total = |bg: bool| {
        let of = |active_only: bool| issued.iter().filter(|(k, v)| k.0 == bg && (!active_only || v.1 > 0)).map(|(_, v)| v.0).sum::<u128>();
        let t = of(true);
        if t > 0 {
            t
        } else {
            of(false).max(1)
        }
    };
    let (fg_total, bg_total) = (total(false), total(true));
    let fg_whole = outside_weight as u128 * SHARE_SCALE as u128;
    let bg_whole = (fg_whole * IDLE.0 as u128 / IDLE.1 as u128).max(1);
    let class_active = |bg: bool| issued.iter().any(|(k, v)| k.0 == bg && v.1 > 0);
    jobs.iter()
        .map(|j| {
            let (cw, active_in, all_in) = issued[&(j.background, j.currency)];
            let (whole, mut total) = if j.background { (bg_whole, bg_total) } else { (fg_whole, fg_total) };
            let w = j.weight.max(1) as u128;
            let issued_in = if j.active {
                active_in
            } else if active_in > 0 {
                // an idle job beside active ones: as if it joined them
                active_in + w
            } else {
                // a currency with no active job: all its jobs, the currency joining
                // the active ones (unless none of the class is active: then all count)
                if class_active(j.background) {
                    total += cw;
                }
                all_in
            };
            let s = whole * cw * w / (total * issued_in.max(1));
            (s as u64).max(1)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(currency: usize, currency_weight: u32, weight: u32) -> FlatJob {
        FlatJob { currency, currency_weight, weight, background: false, active: true }
    }

    #[test]
    fn idle_jobs_do_not_dilute_their_currency() {
        let idle = |j: FlatJob| FlatJob { active: false, ..j };
        // alice's second job sleeps: her active job gets her whole half against bob's
        let s = flatten(&[job(0, 100, 1), idle(job(0, 100, 1)), job(1, 100, 1)], 100);
        assert_eq!(s[0], s[2]);
        assert_eq!(s[0], 50_000);
        // the idle job's share is what it would get on waking: half of alice's half
        assert_eq!(s[1], 25_000);
        // a currency all idle does not count against the active one; its job would get
        // half on waking (its currency joining bob's)
        let s = flatten(&[idle(job(0, 100, 3)), job(1, 100, 1)], 100);
        assert_eq!(s, vec![50_000, 100_000]);
        // every job idle: as if all were active
        assert_eq!(flatten(&[idle(job(0, 100, 3)), idle(job(0, 100, 1))], 100), vec![75_000, 25_000]);
    }

    #[test]
    fn a_currency_is_split_by_its_jobs_weights() {
        assert_eq!(flatten(&[job(0, 100, 3), job(0, 100, 2), job(0, 100, 1)], 100), vec![50_000, 33_333, 16_666]);
        // two currencies weighing 300 and 100: 3/4 and 1/4 whatever the weights inside
        assert_eq!(flatten(&[job(0, 300, 1), job(0, 300, 1), job(1, 100, 500)], 100), vec![37_500, 37_500, 25_000]);
        // [outside] weight 300: three nice-0 tasks' worth in all
        assert_eq!(flatten(&[job(0, 300, 1), job(0, 300, 1), job(1, 100, 500)], 300), vec![112_500, 112_500, 75_000]);
    }

    #[test]
    fn background_weighs_as_an_idle_cgroup() {
        let bg = FlatJob { background: true, ..job(0, 100, 5) };
        // a currency's background job is a group of its own, beside the foreground ones
        let s = flatten(&[job(0, 100, 1), bg], 100);
        assert_eq!(s, vec![100_000, 292]);
        // never 0, however small
        assert_eq!(flatten(&[FlatJob { background: true, ..job(0, 1, 1) }, FlatJob { background: true, ..job(1, 10_000, 10_000) }], 1)[0], 1);
    }
}
