//! Per-user request budgets: a token bucket per uid, so no user can keep the daemon busy
//! for the others. Root is never limited. Memory is bounded: idle buckets are dropped.
//!
//! A request costs one token, or its time in the loop at [`COST_UNIT`] a token, whichever
//! is more: the budget bounds the loop time a user can take, not only their request count
//! (a `show` of 250 jobs costs more than a `status`).

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Loop time worth one token. At the default 50 requests a second, a user can hold the
/// loop for at most about 100 ms of every second.
pub const COST_UNIT: Duration = Duration::from_millis(2);

/// The one budget every uid that is no login user's shares (subordinate uids of
/// /etc/subuid, systemd's dynamic users): a user holding 65536 subordinate uids gets one
/// budget for all of them, not 65536.
pub const SHARED: u32 = u32::MAX;

/// The budget a uid draws on: its own, or [`SHARED`] when `excluded` says it is no login
/// user's.
pub fn bucket(uid: u32, excluded: bool) -> u32 {
    if excluded && uid != 0 {
        SHARED
    } else {
        uid
    }
}

/// Request budgets.
#[derive(Debug)]
pub struct Limits {
    rate: f64,
    burst: f64,
    buckets: HashMap<u32, (f64, Instant)>,
}

impl Limits {
    /// `rate` requests per second on average, `burst` at once.
    pub fn new(rate: f64, burst: f64) -> Self {
        Self { rate, burst, buckets: HashMap::new() }
    }

    /// Takes one request from `uid`'s budget; Err names the limit.
    pub fn take(&mut self, uid: u32, now: Instant) -> Result<(), String> {
        if uid == 0 {
            return Ok(());
        }
        if self.buckets.len() > 4096 {
            self.buckets.retain(|_, (_, t)| now.duration_since(*t).as_secs_f64() * self.rate < self.burst);
        }
        let (tokens, at) = self.buckets.entry(uid).or_insert((self.burst, now));
        *tokens = (*tokens + now.duration_since(*at).as_secs_f64() * self.rate).min(self.burst);
        *at = now;
        if *tokens < 1.0 {
            let who = if uid == SHARED {
                "uids that are no login user's (subordinate uids, dynamic users), together".to_string()
            } else {
                format!("uid {uid}")
            };
            return Err(format!(
                "too many requests from {who}: the limit is {} per second with bursts of {} (limits.requests_per_second and limits.request_burst in the daemon's config); try again in a moment",
                self.rate, self.burst
            ));
        }
        *tokens -= 1.0;
        Ok(())
    }

    /// Charges what a request taken by [`Limits::take`] cost beyond its one token: `spent`
    /// in the loop, at [`COST_UNIT`] a token. The debt is bounded by one burst, so a single
    /// slow request locks its caller out for at most `burst / rate` seconds.
    pub fn charge(&mut self, uid: u32, spent: Duration) {
        if uid == 0 {
            return;
        }
        let extra = spent.as_secs_f64() / COST_UNIT.as_secs_f64() - 1.0;
        if let Some((tokens, _)) = self.buckets.get_mut(&uid).filter(|_| extra > 0.0) {
            *tokens = (*tokens - extra).max(-self.burst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn uids_that_are_no_login_users_share_one_budget() {
        assert_eq!(bucket(1000, false), 1000);
        assert_eq!(bucket(100_001, true), SHARED);
        assert_eq!(bucket(0, true), 0, "root is root");
        let mut l = Limits::new(10.0, 2.0);
        let t0 = Instant::now();
        l.take(bucket(100_001, true), t0).unwrap();
        l.take(bucket(100_002, true), t0).unwrap();
        let e = l.take(bucket(100_003, true), t0).unwrap_err();
        assert!(e.contains("no login user's") && e.contains("together"), "{e}");
        assert!(l.take(1000, t0).is_ok(), "a login user is not affected");
    }

    #[test]
    fn a_costly_request_costs_its_loop_time() {
        let mut l = Limits::new(10.0, 5.0);
        let t0 = Instant::now();
        l.take(1000, t0).unwrap();
        l.charge(1000, COST_UNIT * 3);
        // 5 - 1 - 2 = 2 tokens left: two more requests, not four.
        l.take(1000, t0).unwrap();
        l.take(1000, t0).unwrap();
        assert!(l.take(1000, t0).is_err());
        l.take(1001, t0).unwrap();
        l.charge(1001, Duration::from_secs(100));
        assert!(l.take(1001, t0 + Duration::from_millis(500)).is_err(), "in debt");
        l.take(1001, t0 + Duration::from_millis(700)).expect("the debt is at most one burst (5 tokens: 0.5 s at 10/s)");
        l.charge(0, Duration::from_secs(100));
        l.take(0, t0).unwrap();
    }

    #[test]
    fn a_burst_then_the_rate_and_root_never() {
        let mut l = Limits::new(10.0, 5.0);
        let t0 = Instant::now();
        for _ in 0..5 {
            l.take(1000, t0).unwrap();
        }
        assert!(l.take(1000, t0).unwrap_err().contains("too many requests from uid 1000"));
        assert!(l.take(1001, t0).is_ok(), "another user is not affected");
        l.take(1000, t0 + Duration::from_millis(110)).unwrap();
        for _ in 0..1000 {
            l.take(0, t0).unwrap();
        }
    }
}
