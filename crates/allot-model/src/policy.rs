//! The dynamic policy's decisions, pure: boost, soft-cap hold, nice emulation. The
//! daemon measures, calls these, and applies what changed (Petrou et al. 1999 §3's technique: a
//! dynamic ticket adjustment while a condition holds, undone when it ends).

use crate::nice::base_ticket_threshold;

/// Boost settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BoostRule {
    /// Boost while usage over the window is below this fraction of the entitlement.
    pub below: f64,
}

impl Default for BoostRule {
    fn default() -> Self {
        Self { below: 0.5 }
    }
}

/// Petrou et al. 1999 §3.3 (windowed ticket boost): a process that used a fraction f < 1 of the
/// CPU it deserved over the window is deemed interactive and boosted; one asleep is
/// given the maximum boost. allot's window is short (500 ms by default, not 10 × 1 s) so a
/// job is boosted within about a second of turning interactive and loses it as fast
/// when it turns CPU-bound (the paper needed about 7 s, Table 1); the threshold sits at
/// half the entitlement so a CPU-bound job, which gets about its entitlement, is not
/// boosted by noise. A focused job (Ross and Abel's foreground hint) is boosted regardless.
pub fn boosted(rule: BoostRule, focus: bool, active: bool, window_usage: f64, entitlement: f64) -> bool {
    focus || !active || window_usage < rule.below * entitlement
}

/// EBS soft caps (EBS 2004): a soft cap is held only while others want the CPU. Held:
/// the job is limited to its cap; released when the CPUs it may run on sit idle (nobody
/// else wants them). Not held: it is imposed when the job runs above its cap while other
/// jobs wait for CPU.
pub fn soft_cap_held(held: bool, usage: f64, cap: f64, others_waiting: bool, idle_cpus: f64) -> bool {
    if held {
        // Release when more than a tenth of a CPU goes to waste.
        idle_cpus <= 0.1
    } else {
        usage > cap && others_waiting
    }
}

/// One job as nice emulation sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NiceClaim {
    /// Tickets.
    pub tickets: f64,
    /// The job's nice (its processes').
    pub nice: i32,
    /// Competing now.
    pub active: bool,
}

/// Petrou et al. 1999 §3.4 (nice emulation). A job's base tickets are its currency's funding times
/// its share of the currency's active tickets. A job niced to n > 0 holds *at most*
/// `threshold(n)` base tickets, one niced to n < 0 *at least* `threshold(n)` (raising is
/// root's; the kernel enforces that). Returns the currency's effective weight (the sum of
/// its active jobs' base tickets; its funding when none is active or none is niced) and
/// each job's effective weight inside the currency (its tickets, scaled by how much of its
/// base it keeps), so the kernel's two-level split gives each job exactly its
/// thresholded base tickets' share of the machine.
pub fn nice_emulation(funding: f64, jobs: &[NiceClaim]) -> (f64, Vec<f64>) {
    let active_tickets: f64 = jobs.iter().filter(|j| j.active).map(|j| j.tickets).sum();
    let any = jobs.iter().any(|j| j.active && j.nice != 0);
    if active_tickets <= 0.0 || !any {
        return (funding, jobs.iter().map(|j| j.tickets).collect());
    }
    let mut currency = 0.0;
    let weights = jobs
        .iter()
        .map(|j| {
            let base = funding * j.tickets / active_tickets;
            let eff = match j.nice {
                n if n > 0 => base.min(base_ticket_threshold(n)),
                n if n < 0 => base.max(base_ticket_threshold(n)),
                _ => base,
            };
            if j.active {
                currency += eff;
            }
            j.tickets * eff / base
        })
        .collect();
    (currency, weights)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boost_follows_the_window() {
        let r = BoostRule::default();
        assert!(boosted(r, false, true, 0.05, 0.5), "interactive: 5 ms / 100 ms against 0.5 entitled");
        assert!(!boosted(r, false, true, 0.5, 0.5), "CPU-bound at its entitlement");
        assert!(boosted(r, false, false, 0.0, 0.0), "asleep: maximum boost, as Petrou et al. 1999 §3.3");
        assert!(boosted(r, true, true, 1.0, 0.5), "focus wins");
    }

    #[test]
    fn soft_cap_holds_only_under_contention() {
        assert!(soft_cap_held(false, 0.9, 0.5, true, 0.0));
        assert!(!soft_cap_held(false, 0.9, 0.5, false, 0.0), "alone: free");
        assert!(!soft_cap_held(false, 0.4, 0.5, true, 0.0), "under its cap");
        assert!(soft_cap_held(true, 0.5, 0.5, false, 0.0), "held while the CPU is busy");
        assert!(!soft_cap_held(true, 0.5, 0.5, false, 0.5), "released when CPU goes idle");
    }

    #[test]
    fn nice_19_alone_is_held_to_its_threshold() {
        // Issue acceptance: A's only process at nice 19 vs B's hog: 11.2 vs 100.
        let (w, j) = nice_emulation(100.0, &[NiceClaim { tickets: 100.0, nice: 19, active: true }]);
        assert!((w - 11.22).abs() < 0.01, "{w}");
        assert!((j[0] - 11.22).abs() < 0.01);
        let share = w / (w + 100.0);
        assert!(share < 0.12, "{share}");
        let (w, _) = nice_emulation(100.0, &[NiceClaim { tickets: 100.0, nice: 0, active: true }]);
        assert_eq!(w, 100.0);
    }

    #[test]
    fn nice_lowers_only_the_niced_job() {
        let jobs = [NiceClaim { tickets: 100.0, nice: 0, active: true }, NiceClaim { tickets: 100.0, nice: 10, active: true }];
        let (w, j) = nice_emulation(100.0, &jobs);
        // Base 50 each; the niced one keeps min(50, 10^(10/20+1)=31.6).
        assert!((w - 81.62).abs() < 0.01, "{w}");
        assert!((j[0] - 100.0).abs() < 1e-9 && (j[1] - 63.25).abs() < 0.01, "{j:?}");
        // Inside the currency the ratio of weights is the ratio of base tickets.
        assert!(((j[1] / j[0]) - 31.62 / 50.0).abs() < 0.001);
        // Inactive niced jobs change nothing.
        let (w, _) = nice_emulation(100.0, &[jobs[0], NiceClaim { active: false, ..jobs[1] }]);
        assert_eq!(w, 100.0);
    }

    #[test]
    fn negative_nice_raises_to_its_threshold() {
        let (w, _) = nice_emulation(100.0, &[NiceClaim { tickets: 100.0, nice: -20, active: true }]);
        assert!((w - 1000.0).abs() < 1e-9);
    }
}
