//! The tick's pace: whether the last plan has a decision that can go stale within one fast
//! tick, or only ones a slower tick (the boost window) still takes in time.
//!
//! The daemon measures and plans every `tick_ms` (100 ms) while anything runs. That is
//! what two decisions need: the boost rule takes a boosted job's boost the tick after it
//! used [`BOOST_LAST_TICK_BELOW`](crate::plan::BOOST_LAST_TICK_BELOW) of its entitlement,
//! so the boost's weight never buys CPU for longer than one tick; and a soft cap holds a
//! job while others wait. When neither can change (every running job is CPU-bound or busy
//! at its share, none is held or soft-capped, none is new), a plan made every boost window
//! decides the same, at a fifth of the reads and wake-ups. A job boosted while asleep is
//! the one exception the plan cannot foresee: the daemon watches such jobs' usage counters
//! every `tick_ms` between slow ticks ([`watch_between`]) and plans at once when one moves.

use crate::plan::{Boost, JobIn, JobPlan};

/// The least time between two ticks while nothing runs, ms: at rest no usage is left in any
/// window, so the plan cannot change (requests and process events are handled as they
/// arrive, not at the tick).
pub const REST_MS: u64 = 500;

/// Why the next tick must come after `tick_ms` rather than after the boost window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fast {
    /// A job not measured yet (boosted as one that used nothing): its first usage decides.
    New,
    /// A boosted job that runs: the tick after it uses most of its entitlement takes the boost.
    BoostedRunning,
    /// A job held at its soft cap, or soft-capped and running: held only while others wait.
    SoftCap,
}

/// Whether the plan of `jobs` (each job's input and its plan) needs the next tick after
/// `tick_ms` (Some: why), or may wait the boost window (None).
pub fn fast(jobs: &[(&JobIn, &JobPlan)]) -> Option<Fast> {
    for (j, p) in jobs {
        if p.held || (j.cap.is_some_and(|c| !c.hard) && j.usage.is_none_or(|u| u.active())) {
            return Some(Fast::SoftCap);
        }
        match p.boost {
            Boost::New => return Some(Fast::New),
            Boost::Interactive => return Some(Fast::BoostedRunning),
            _ => {}
        }
    }
    None
}

/// Whether a job with this plan is watched between slow ticks: boosted, and its boost can
/// end by its running (one asleep; a focused job is boosted whatever it uses).
pub fn watch_between(p: &JobPlan) -> bool {
    p.boosted && matches!(p.boost, Boost::Asleep | Boost::New | Boost::Interactive)
}

/// How long between ticks: `tick_ms` when fast, else the boost window (never shorter than
/// `tick_ms`, and at least `rest_ms` when nothing runs).
pub fn interval_ms(tick_ms: u64, boost_window_ms: u64, busy: bool, fast: bool, rest_ms: u64) -> u64 {
    if !busy {
        tick_ms.max(rest_ms)
    } else if fast {
        tick_ms
    } else {
        tick_ms.max(boost_window_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{BoostLimits, Usage};
    use crate::Cap;

    fn job(cap: Option<Cap>, usage: Option<Usage>) -> JobIn {
        JobIn {
            currency: 0,
            tickets: 100,
            cap,
            background: false,
            focus: false,
            usage,
            runnable: 1,
            cpus: vec![],
            nice: 0,
            waiting: false,
            held: false,
            idle_cpus: 0.0,
        }
    }

    fn plan(boost: Boost, held: bool) -> JobPlan {
        JobPlan {
            entitlement: 1.0,
            boosted: boost.on(),
            boost,
            boost_limits: BoostLimits { entitlement: 1.0, window_fraction: 0.5, window: 0.5, last_fraction: 0.5, last: 0.5 },
            held,
            hold: None,
            niced: false,
            weight: 100,
            base_weight: 100,
            quota: None,
            slice_ns: None,
        }
    }

    const HOG: Option<Usage> = Some(Usage { window: 1.0, last: 1.0 });
    const IDLE: Option<Usage> = Some(Usage { window: 0.0, last: 0.0 });

    #[test]
    fn cpu_bound_and_asleep_jobs_may_wait_the_boost_window() {
        let (a, b) = (job(None, HOG), job(None, IDLE));
        let (pa, pb) = (plan(Boost::CpuBound, false), plan(Boost::Asleep, false));
        assert_eq!(fast(&[(&a, &pa), (&b, &pb)]), None);
        assert_eq!(fast(&[]), None, "nothing planned");
        let busy = plan(Boost::Busy, false);
        assert_eq!(fast(&[(&a, &busy)]), None, "busy at its share: the window's usage decides, at the window's pace");
        let hard = job(Some(Cap { cpus: 0.5, hard: true }), HOG);
        assert_eq!(fast(&[(&hard, &pa)]), None, "a hard cap is the kernel's, every instant");
        let focused = plan(Boost::Focused, false);
        assert_eq!(fast(&[(&a, &focused)]), None, "focused: boosted whatever it uses");
        assert!(!watch_between(&focused));
        assert!(watch_between(&pb), "asleep and boosted: watched between slow ticks");
        assert!(!watch_between(&pa));
    }

    #[test]
    fn new_boosted_running_and_soft_capped_jobs_need_the_fast_tick() {
        let a = job(None, HOG);
        let b = job(None, Some(Usage { window: 0.1, last: 0.1 }));
        assert_eq!(fast(&[(&a, &plan(Boost::CpuBound, false)), (&b, &plan(Boost::Interactive, false))]), Some(Fast::BoostedRunning));
        assert_eq!(fast(&[(&job(None, None), &plan(Boost::New, false))]), Some(Fast::New));
        let soft = job(Some(Cap { cpus: 0.5, hard: false }), HOG);
        assert_eq!(fast(&[(&soft, &plan(Boost::CpuBound, false))]), Some(Fast::SoftCap), "soft-capped and running");
        let soft_idle = job(Some(Cap { cpus: 0.5, hard: false }), IDLE);
        assert_eq!(fast(&[(&soft_idle, &plan(Boost::Asleep, false))]), None, "soft-capped but asleep: watched instead");
        assert_eq!(fast(&[(&a, &plan(Boost::CpuBound, true))]), Some(Fast::SoftCap), "held");
    }

    #[test]
    fn the_interval_is_the_tick_when_fast_the_window_when_steady_and_the_rest_when_idle() {
        assert_eq!(interval_ms(100, 500, true, true, 500), 100);
        assert_eq!(interval_ms(100, 500, true, false, 500), 500);
        assert_eq!(interval_ms(100, 500, false, true, 500), 500);
        assert_eq!(interval_ms(800, 500, true, false, 500), 800, "never faster than tick_ms");
        assert_eq!(interval_ms(100, 2000, true, false, 500), 2000);
    }
}
