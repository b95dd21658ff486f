//! The dynamic policy's decisions, pure: soft-cap hold, waiting, nice emulation (the boost
//! rule is [`crate::plan::boost_rule`]). The
//! daemon measures, calls these, and applies what changed (Petrou et al. 1999 §3's technique: a
//! dynamic ticket adjustment while a condition holds, undone when it ends).

use crate::nice::base_ticket_threshold;

/// A held soft cap is released when more than this many CPUs sit idle on the CPUs its job may
/// run on (a tenth of a CPU going to waste: nobody else wants them).
pub const RELEASE_IDLE_CPUS: f64 = 0.1;

/// A job whose threads waited for CPU more than this fraction of a tick wants CPU it is not
/// getting (the "others waiting" of [`soft_cap_hold`]).
pub const WAITING_FRACTION: f64 = 0.05;

/// Its threads waited `waited_ns` (summed) during a tick of `dt_s` seconds: more than
/// [`WAITING_FRACTION`] of the tick is waiting.
pub fn waiting(waited_ns: f64, dt_s: f64) -> bool {
    dt_s > 0.0 && waited_ns > WAITING_FRACTION * dt_s * 1e9
}

/// Why a soft cap is or is not held: the branch of [`soft_cap_hold`] that decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// Held from now: it ran above its cap while other jobs waited for CPU.
    Imposed,
    /// Still held: no more than [`RELEASE_IDLE_CPUS`] sat idle on its CPUs.
    Kept,
    /// Released: more than [`RELEASE_IDLE_CPUS`] sat idle on its CPUs.
    Released,
    /// Not held: it ran at or under its cap.
    UnderCap,
    /// Not held: above its cap, but no other job waited for CPU.
    Alone,
}

impl Hold {
    /// The cap is held (written as cpu.max).
    pub fn held(self) -> bool {
        matches!(self, Hold::Imposed | Hold::Kept)
    }
}

/// EBS soft caps (EBS 2004): a soft cap is held only while others want the CPU. Held:
/// the job is limited to its cap; released when the CPUs it may run on sit idle (more than
/// [`RELEASE_IDLE_CPUS`]: nobody else wants them). Not held: it is imposed when the job runs
/// above its cap while other jobs wait for CPU.
pub fn soft_cap_hold(held: bool, usage: f64, cap: f64, others_waiting: bool, idle_cpus: f64) -> Hold {
    if held {
        if idle_cpus <= RELEASE_IDLE_CPUS {
            Hold::Kept
        } else {
            Hold::Released
        }
    } else if usage > cap {
        if others_waiting {
            Hold::Imposed
        } else {
            Hold::Alone
        }
    } else {
        Hold::UnderCap
    }
}

/// How nice emulation bounds a niced job's base tickets (Petrou et al. 1999 §3.4).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum NiceBound {
    /// Niced down (n > 0): it holds at most this many base tickets.
    AtMost(f64),
    /// Niced up (n < 0): it holds at least this many.
    AtLeast(f64),
}

/// The bound nice `n` puts on a job's base tickets; None at nice 0 (its base stands).
pub fn nice_bound(n: i32) -> Option<NiceBound> {
    match n {
        n if n > 0 => Some(NiceBound::AtMost(base_ticket_threshold(n))),
        n if n < 0 => Some(NiceBound::AtLeast(base_ticket_threshold(n))),
        _ => None,
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
            let eff = match nice_bound(j.nice) {
                Some(NiceBound::AtMost(t)) => base.min(t),
                Some(NiceBound::AtLeast(t)) => base.max(t),
                None => base,
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
    fn soft_cap_holds_only_under_contention() {
        let held = |h: bool, u: f64, c: f64, o: bool, i: f64| soft_cap_hold(h, u, c, o, i).held();
        assert_eq!(soft_cap_hold(false, 0.9, 0.5, true, 0.0), Hold::Imposed);
        assert_eq!(soft_cap_hold(false, 0.9, 0.5, false, 0.0), Hold::Alone, "alone: free");
        assert_eq!(soft_cap_hold(false, 0.4, 0.5, true, 0.0), Hold::UnderCap, "under its cap");
        assert!(held(true, 0.5, 0.5, false, 0.0), "held while the CPU is busy");
        assert!(!held(true, 0.5, 0.5, false, 0.5), "released when CPU goes idle");
        // The release threshold is the constant's: at it, kept; just above, released.
        assert_eq!(soft_cap_hold(true, 0.5, 0.5, false, RELEASE_IDLE_CPUS), Hold::Kept);
        assert_eq!(soft_cap_hold(true, 0.5, 0.5, false, RELEASE_IDLE_CPUS + 1e-9), Hold::Released);
    }

    #[test]
    fn waiting_is_more_than_the_fraction_of_a_tick() {
        // A 100 ms tick: waiting above WAITING_FRACTION × 100 ms, not at it.
        let at = WAITING_FRACTION * 0.1 * 1e9;
        assert!(!waiting(at, 0.1) && waiting(at + 1.0, 0.1));
        assert!(!waiting(1e9, 0.0), "no tick, no waiting");
    }

    #[test]
    fn nice_19_alone_is_held_to_its_threshold() {
        // A's only process at nice 19 against B's hog: 11.2 tickets against 100.
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
    fn the_bound_follows_the_sign_of_nice() {
        assert_eq!(nice_bound(19), Some(NiceBound::AtMost(base_ticket_threshold(19))));
        assert_eq!(nice_bound(-5), Some(NiceBound::AtLeast(base_ticket_threshold(-5))));
        assert_eq!(nice_bound(0), None);
    }

    #[test]
    fn negative_nice_raises_to_its_threshold() {
        let (w, _) = nice_emulation(100.0, &[NiceClaim { tickets: 100.0, nice: -20, active: true }]);
        assert!((w - 1000.0).abs() < 1e-9);
    }
}
