//! The tick's pace (allot_model::pace decides it from the last plan): a full tick every
//! `tick_ms` while a decision could go stale within one (a new job, a boosted job that
//! runs, a soft cap), every boost window while only CPU-bound or busy work runs, and every
//! 500 ms at rest. Between slow ticks, the jobs boosted while asleep have their usage
//! counters read every `tick_ms` (one read each) and a full tick comes at once when one
//! became active (a few wake-ups that stay below it would not change its boost), so a
//! boost's weight still buys at most one `tick_ms` of CPU.

use super::Daemon;
use allot_model::pace;
use std::time::{Duration, Instant};

/// Jobs whose counters are read between slow ticks; past this many the ticks stay fast
/// (each full tick reads only the currencies that ran, so it is then the cheaper watch).
pub const WATCH_MAX: usize = 64;

/// When the last full tick ran.
#[derive(Debug, Default)]
pub(in crate::daemon) struct Pace {
    last_full: Option<Instant>,
}

impl Daemon {
    /// Why the last plan needs a tick every `tick_ms` (None: the boost window will do).
    pub fn pace_fast(&self) -> Option<pace::Fast> {
        let (_, ins, ids) = self.planned.inputs.as_ref()?;
        let jobs: Vec<_> = ins.iter().zip(ids).filter_map(|(j, id)| Some((j, self.planned.jobs.get(id)?))).collect();
        pace::fast(&jobs)
    }

    /// The jobs read between slow ticks ([`pace::watch_between`]), as (id, cgroup); None:
    /// more than [`WATCH_MAX`].
    fn watched(&self) -> Option<Vec<(super::JobId, String)>> {
        let w: Vec<_> = self
            .planned
            .jobs
            .iter()
            .filter(|(_, p)| pace::watch_between(p))
            .filter_map(|(id, _)| Some((*id, self.registry.desired().jobs.get(id)?.rel())))
            .collect();
        (w.len() <= WATCH_MAX).then_some(w)
    }

    /// The time from one full tick to the next, for the last plan.
    fn full_interval(&self) -> Duration {
        let fast = self.pace_fast().is_some() || self.watched().is_none();
        Duration::from_millis(pace::interval_ms(self.cfg.tick_ms, self.cfg.policy.boost_window_ms, self.obs.busy, fast, pace::REST_MS))
    }

    /// Called by the loop at every [`Self::tick_interval`]: a full tick when one is due, or
    /// when a job boosted while asleep became active since the last (its usage counter moved
    /// by more than the model's active threshold over the time since). Returns whether it
    /// ticked.
    pub fn pace_tick(&mut self, now: Instant) -> bool {
        let due = self.pace.last_full.is_none_or(|t| now.saturating_duration_since(t) + Duration::from_millis(1) >= self.full_interval());
        let woke = !due && self.watched().unwrap_or_default().iter().any(|(id, rel)| self.obs.active_since_observed(self.tree.cg(), id, rel, now));
        if !(due || woke) {
            return false;
        }
        self.tick_at(now);
        self.pace.last_full = Some(now);
        true
    }

    /// How long the loop waits before calling [`Self::pace_tick`] again: `tick_ms` while a
    /// tick is due that often or jobs boosted while asleep are watched between slow ticks,
    /// else the time to the next full tick.
    pub fn tick_interval(&self) -> Duration {
        let full = self.full_interval();
        let tick = Duration::from_millis(self.cfg.tick_ms);
        if self.obs.busy && full > tick && self.watched().is_some_and(|w| !w.is_empty()) {
            return tick;
        }
        match self.pace.last_full {
            Some(t) => (t + full).saturating_duration_since(Instant::now()).max(Duration::from_millis(1)),
            None => Duration::ZERO,
        }
    }
}
