//! Entitlement: the CPU a job would get now, among the active claimants.
//!
//! A job's entitlement is its share of its currency times its currency's share of the
//! machine (Petrou et al. 1999 §2.2: a currency's value is its funding, divided among the tickets
//! of its *active* holders). What the proportional split gives a claimant that cannot use
//! it (a hard cap, fewer threads than CPUs) flows back to the others, so the split is a
//! max–min water-fill at each of the two levels, exactly what the kernel's hierarchical
//! fair scheduler converges to for CPU-bound work. Background jobs share only what the
//! foreground leaves (EBS 2004: soft cap 0 runs "only when no other tasks are active").

/// One job's claim.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Claimant {
    /// Its tickets (or effective tickets, after any dynamic adjustment).
    pub tickets: f64,
    /// The most CPUs it can use: min(hard cap, its thread count); `f64::INFINITY` if unknown.
    pub ceiling: f64,
    /// Whether it competes now (runnable or recently running).
    pub active: bool,
    /// Soft cap 0: takes only idle CPU.
    pub background: bool,
}

/// One currency's claim: its funding, its hard cap and its jobs.
#[derive(Debug, Clone, PartialEq)]
pub struct CurrencyClaim {
    /// Base tickets.
    pub funding: f64,
    /// The currency's hard cap, CPUs (`f64::INFINITY`: none): its jobs of one class
    /// together never get more (cpu.max on the currency's directory in each class).
    pub cap: f64,
    /// Its jobs.
    pub jobs: Vec<Claimant>,
}

/// Splits `capacity` among `(weight, ceiling)` claimants, max–min fairly.
pub fn water_fill(capacity: f64, claims: &[(f64, f64)]) -> Vec<f64> {
    let mut out = vec![0.0; claims.len()];
    let mut open: Vec<usize> = (0..claims.len()).filter(|&i| claims[i].0 > 0.0).collect();
    let mut left = capacity.max(0.0);
    while !open.is_empty() && left > 1e-12 {
        let total: f64 = open.iter().map(|&i| claims[i].0).sum();
        let saturated: Vec<usize> = open.iter().copied().filter(|&i| claims[i].1 <= left * claims[i].0 / total).collect();
        if saturated.is_empty() {
            for &i in &open {
                out[i] = left * claims[i].0 / total;
            }
            break;
        }
        for &i in &saturated {
            out[i] = claims[i].1;
            left -= claims[i].1;
        }
        open.retain(|i| !saturated.contains(i));
    }
    out
}

/// Entitlements in CPUs, indexed like the input; inactive jobs get 0.
pub fn entitlements(ncpu: f64, currencies: &[CurrencyClaim]) -> Vec<Vec<f64>> {
    let mut out: Vec<Vec<f64>> = currencies.iter().map(|c| vec![0.0; c.jobs.len()]).collect();
    let mut left = ncpu;
    for background in [false, true] {
        let in_class = |j: &Claimant| j.active && j.background == background && j.tickets > 0.0;
        let level: Vec<(f64, f64)> = currencies
            .iter()
            .map(|c| {
                let ceiling: f64 = c.jobs.iter().filter(|j| in_class(j)).map(|j| j.ceiling).sum();
                let any = c.jobs.iter().any(in_class);
                (if any { c.funding } else { 0.0 }, ceiling.min(c.cap))
            })
            .collect();
        let per_currency = water_fill(left, &level);
        for (ci, c) in currencies.iter().enumerate() {
            let claims: Vec<(f64, f64)> = c.jobs.iter().map(|j| (if in_class(j) { j.tickets } else { 0.0 }, j.ceiling)).collect();
            for (ji, e) in water_fill(per_currency[ci], &claims).into_iter().enumerate() {
                if in_class(&c.jobs[ji]) {
                    out[ci][ji] = e;
                }
            }
        }
        left -= per_currency.iter().sum::<f64>();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(tickets: f64) -> Claimant {
        Claimant { tickets, ceiling: 1.0, active: true, background: false }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn tickets_divide_a_currency_321() {
        let e = entitlements(1.0, &[CurrencyClaim { funding: 100.0, cap: f64::INFINITY, jobs: vec![job(300.0), job(200.0), job(100.0)] }]);
        assert!(close(e[0][0], 0.5) && close(e[0][1], 1.0 / 3.0) && close(e[0][2], 1.0 / 6.0), "{e:?}");
    }

    #[test]
    fn currencies_insulate_one_against_five() {
        // Petrou et al. 1999 Table 5: one user's 1 process vs another's 5, equal funding.
        let a = CurrencyClaim { funding: 100.0, cap: f64::INFINITY, jobs: vec![job(100.0)] };
        let b = CurrencyClaim { funding: 100.0, cap: f64::INFINITY, jobs: vec![job(100.0); 5] };
        let e = entitlements(1.0, &[a.clone(), b.clone()]);
        assert!(close(e[0][0], 0.5));
        assert!(e[1].iter().all(|&x| close(x, 0.1)));
        let b300 = CurrencyClaim { funding: 300.0, ..b };
        let e = entitlements(1.0, &[a, b300]);
        assert!(close(e[0][0], 0.25) && close(e[1].iter().sum::<f64>(), 0.75));
    }

    #[test]
    fn what_a_claimant_cannot_use_flows_to_the_others() {
        // Two CPUs; currency A has one single-threaded job, B has two: A's job cannot
        // use its whole CPU-share beyond 1 CPU, and nothing is lost.
        let a = CurrencyClaim { funding: 300.0, cap: f64::INFINITY, jobs: vec![job(100.0)] };
        let b = CurrencyClaim { funding: 100.0, cap: f64::INFINITY, jobs: vec![job(100.0), job(100.0)] };
        let e = entitlements(2.0, &[a, b]);
        assert!(close(e[0][0], 1.0) && close(e[1][0], 0.5) && close(e[1][1], 0.5), "{e:?}");
        // A hard cap is a ceiling.
        let capped = CurrencyClaim { funding: 100.0, cap: f64::INFINITY, jobs: vec![Claimant { ceiling: 0.25, ..job(100.0) }] };
        let other = CurrencyClaim { funding: 100.0, cap: f64::INFINITY, jobs: vec![job(100.0)] };
        let e = entitlements(1.0, &[capped, other]);
        assert!(close(e[0][0], 0.25) && close(e[1][0], 0.75), "{e:?}");
    }

    #[test]
    fn background_takes_only_what_is_left_and_inactive_takes_nothing() {
        let fg = CurrencyClaim { funding: 100.0, cap: f64::INFINITY, jobs: vec![job(100.0), Claimant { active: false, ..job(100.0) }] };
        let bg = CurrencyClaim { funding: 10000.0, cap: f64::INFINITY, jobs: vec![Claimant { background: true, ceiling: 4.0, ..job(10000.0) }] };
        let e = entitlements(2.0, &[fg.clone(), bg.clone()]);
        assert!(close(e[0][0], 1.0) && close(e[0][1], 0.0) && close(e[1][0], 1.0), "{e:?}");
        let busy = CurrencyClaim { funding: 1.0, cap: f64::INFINITY, jobs: vec![Claimant { ceiling: 2.0, ..job(1.0) }] };
        let e = entitlements(2.0, &[busy, bg]);
        assert!(close(e[0][0], 2.0) && close(e[1][0], 0.0), "{e:?}");
    }

    #[test]
    fn water_fill_conserves_capacity() {
        let claims = [(1.0, 0.1), (2.0, 5.0), (3.0, 0.2), (0.0, 9.0), (4.0, 1.0)];
        let out = water_fill(2.0, &claims);
        assert!(close(out.iter().sum::<f64>(), 2.0), "{out:?}");
        assert!(out.iter().zip(claims).all(|(o, c)| *o <= c.1 + 1e-12));
        assert_eq!(out[3], 0.0);
    }

    #[test]
    fn a_currency_cap_bounds_its_jobs_together_and_the_rest_flows_to_others() {
        let capped = CurrencyClaim { funding: 300.0, cap: 0.5, jobs: vec![job(100.0), job(300.0)] };
        let other = CurrencyClaim { funding: 100.0, cap: f64::INFINITY, jobs: vec![job(100.0); 2] };
        let e = entitlements(2.0, &[capped, other]);
        assert!(close(e[0][0], 0.125) && close(e[0][1], 0.375), "{e:?}");
        assert!(close(e[1][0], 0.75) && close(e[1][1], 0.75), "{e:?}");
    }
}
