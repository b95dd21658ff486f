//! Usage rate: a job's CPU use in CPUs, smoothed.
//!
//! EBS 2004 ("The usage rates for each task are estimated using Kalman filter
//! techniques … similar to … a running average over twice the filter response half
//! life"; default half life 5000 ms, range 1000..100000 ms). With a fixed gain this is an
//! exponentially weighted average whose weight on old samples halves every half-life;
//! the gain is computed from the actual sample interval, so an irregular sampling
//! loop still has the configured half-life.

use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Default response half-life (EBS 2004).
pub const DEFAULT_HALF_LIFE_MS: u64 = 5000;

/// A measured amount of CPU (a usage rate, or a sum of them) as reported: never below
/// zero. CPU use cannot be negative, yet arithmetic on counters can give a tiny negative,
/// and a sum of no `f64` is -0.0 (Rust's `Sum` starts there), which prints as "-0.00";
/// `f64::max(-0.0, 0.0)` may return -0.0, so this compares instead. NaN becomes 0 too.
pub fn cpus_used(x: f64) -> f64 {
    if x > 0.0 {
        x
    } else {
        0.0
    }
}

/// Load outside allot's tree is smoothed over this long, s: it is read from /proc/stat's
/// clock ticks, which are coarse (10 ms), and a plan that followed every sample would
/// flap.
pub const OUTSIDE_SMOOTHING_S: f64 = 2.0;

/// The smoothed outside load after a sample of `sample` CPUs over `dt_s` seconds: an
/// average whose gain is the share of [`OUTSIDE_SMOOTHING_S`] the sample covers (a sample
/// as long or longer replaces it). Never negative.
pub fn smooth_outside(prev: f64, sample: f64, dt_s: f64) -> f64 {
    let a = (dt_s / OUTSIDE_SMOOTHING_S.max(dt_s)).clamp(0.0, 1.0);
    let a = if a.is_finite() { a } else { 1.0 };
    prev + a * (sample.max(0.0) - prev)
}

/// A usage-rate estimate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct UsageRate {
    /// Current estimate in CPUs.
    pub cpus: f64,
    half_life_s: f64,
    primed: bool,
}

impl UsageRate {
    /// A new estimator; the first sample is taken as the estimate.
    pub fn new(half_life_ms: u64) -> Self {
        Self { cpus: 0.0, half_life_s: half_life_ms.max(1) as f64 / 1000.0, primed: false }
    }

    /// Starts from a known rate (EBS's fork heuristic: a child starts at its
    /// parent's usage rate rather than zero).
    pub fn starting_at(half_life_ms: u64, cpus: f64) -> Self {
        Self { cpus, primed: true, ..Self::new(half_life_ms) }
    }

    /// Feeds `cpu_s` seconds of CPU used over `dt_s` seconds of wall time.
    pub fn observe(&mut self, cpu_s: f64, dt_s: f64) -> f64 {
        if dt_s <= 0.0 {
            return self.cpus;
        }
        let sample = cpus_used(cpu_s / dt_s);
        if !self.primed {
            self.cpus = sample;
            self.primed = true;
        } else {
            let gain = 1.0 - 0.5f64.powf(dt_s / self.half_life_s);
            self.cpus += gain * (sample - self.cpus);
        }
        self.cpus
    }
}

/// A job's usage over the boost window and over the last tick, the [`crate::plan::Usage`] the
/// boost rule compares with the entitlement (Petrou et al. 1999 §3.3 used 10 × 1 s windows;
/// allot's is [`crate::plan::DEFAULT_BOOST_WINDOW_MS`] by default). It keeps the latest ticks
/// whose length, the oldest left out, is still short of the window: so it always spans at
/// least the window once there is that much history, and never fewer than one tick.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BoostWindow {
    /// (CPU seconds used, seconds) per tick, oldest first.
    ticks: VecDeque<(f64, f64)>,
}

impl BoostWindow {
    /// Adds a tick in which `used_s` CPU seconds were used over `dt` seconds, drops ticks
    /// older than `window_s` needs, and returns the usage over the window and the last tick.
    pub fn push(&mut self, used_s: f64, dt: f64, window_s: f64) -> crate::plan::Usage {
        self.ticks.push_back((used_s, dt));
        while self.ticks.len() > 1 && self.ticks.iter().skip(1).map(|w| w.1).sum::<f64>() >= window_s {
            self.ticks.pop_front();
        }
        let (u, w) = self.ticks.iter().fold((0.0, 0.0), |a, x| (a.0 + x.0, a.1 + x.1));
        crate::plan::Usage { window: if w > 0.0 { u / w } else { 0.0 }, last: if dt > 0.0 { used_s / dt } else { 0.0 } }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn outside_load_is_smoothed_over_two_seconds() {
        let one_tick = super::smooth_outside(0.0, 1.0, 0.5);
        assert!((one_tick - 0.25).abs() < 1e-12, "{one_tick}");
        assert_eq!(super::smooth_outside(0.3, 1.0, 5.0), 1.0, "a sample longer than the window replaces it");
        assert_eq!(super::smooth_outside(0.0, -0.2, 1.0), 0.0, "never negative");
        assert_eq!(super::smooth_outside(0.5, 0.5, 0.0), 0.5);
    }

    use super::*;

    #[test]
    fn a_step_is_half_way_after_one_half_life() {
        let mut u = UsageRate::starting_at(5000, 0.0);
        // 1 CPU from now on, sampled every 100 ms for 5 s.
        for _ in 0..50 {
            u.observe(0.1, 0.1);
        }
        assert!((u.cpus - 0.5).abs() < 1e-9, "{}", u.cpus);
        for _ in 0..50 {
            u.observe(0.1, 0.1);
        }
        assert!((u.cpus - 0.75).abs() < 1e-9, "{}", u.cpus);
    }

    #[test]
    fn the_sampling_interval_does_not_change_the_half_life() {
        let mut a = UsageRate::starting_at(2000, 1.0);
        let mut b = UsageRate::starting_at(2000, 1.0);
        a.observe(0.0, 2.0);
        for _ in 0..20 {
            b.observe(0.0, 0.1);
        }
        assert!((a.cpus - b.cpus).abs() < 1e-9 && (a.cpus - 0.5).abs() < 1e-9);
    }

    #[test]
    fn cpus_used_is_never_negative_zero() {
        let none: f64 = std::iter::empty::<f64>().sum();
        assert!(none.is_sign_negative(), "the premise: a sum of nothing is -0.0");
        for x in [none, -0.0, -1e-12, f64::NAN] {
            let c = cpus_used(x);
            assert!(c == 0.0 && c.is_sign_positive(), "{x} gave {c}");
            assert_eq!(format!("{c:.2}"), "0.00");
        }
        assert_eq!(cpus_used(0.25), 0.25);
    }

    #[test]
    fn the_boost_window_spans_the_window_and_the_last_tick_is_its_own() {
        let mut w = BoostWindow::default();
        // 100 ms ticks, a 500 ms window: five ticks of a whole CPU, then one idle tick.
        for _ in 0..5 {
            w.push(0.1, 0.1, 0.5);
        }
        let u = w.push(0.0, 0.1, 0.5);
        assert!((u.window - 0.8).abs() < 1e-9 && u.last == 0.0, "{u:?}: 4 busy ticks of the 5 kept");
        // One long tick longer than the window: it alone is the window.
        let u = w.push(0.3, 1.0, 0.5);
        assert!((u.window - 0.3).abs() < 1e-9 && (u.last - 0.3).abs() < 1e-9, "{u:?}");
        assert_eq!(BoostWindow::default().push(0.0, 0.0, 0.5), crate::plan::Usage { window: 0.0, last: 0.0 }, "no time, no usage");
    }

    #[test]
    fn first_sample_primes() {
        let mut u = UsageRate::new(5000);
        assert_eq!(u.observe(0.3, 1.0), 0.3);
        assert_eq!(u.observe(1.0, 0.0), 0.3);
    }
}
