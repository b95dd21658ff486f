//! Per-user request budgets: a token bucket per uid, so no user can keep the daemon busy
//! for the others. Root is never limited. Memory is bounded: idle buckets are dropped.
//!
//! A request costs one token, or its time in the loop at [`COST_UNIT`] a token, whichever
//! is more: the budget bounds the loop time a user can take, not only their request count
//! (a `show` of 250 jobs costs more than a `status`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A request over budget waits at most this long for a token in its connection's thread
/// before it is refused: a burst is slowed, not refused, and a client that hammers the
/// daemon waits instead of spinning (with its connections held, it cannot open more).
pub const MAX_WAIT: Duration = Duration::from_secs(1);

/// The budgets, shared by the connection threads (which take a token before a request
/// reaches the loop: a request over budget never costs the loop anything) and the loop
/// (which charges what a request cost, and changes the rates on a reload).
#[derive(Debug, Clone)]
pub struct Shared {
    limits: Arc<Mutex<Limits>>,
    refused: Arc<AtomicU64>,
}

impl Shared {
    /// `rate` requests per second on average, `burst` at once.
    pub fn new(rate: f64, burst: f64) -> Self {
        Self { limits: Arc::new(Mutex::new(Limits::new(rate, burst))), refused: Arc::default() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Limits> {
        self.limits.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes a token from `key`'s budget, waiting up to [`MAX_WAIT`] for one; Err names
    /// the limit.
    pub fn admit(&self, key: u32) -> Result<(), String> {
        let t0 = Instant::now();
        loop {
            let wait = {
                let mut l = self.lock();
                match l.take(key, Instant::now()) {
                    Ok(()) => return Ok(()),
                    Err(e) if t0.elapsed() + l.until_token(key) > MAX_WAIT => {
                        self.refused.fetch_add(1, Ordering::Relaxed);
                        return Err(e);
                    }
                    Err(_) => l.until_token(key),
                }
            };
            std::thread::sleep(wait.max(Duration::from_millis(1)));
        }
    }

    /// See [`Limits::charge`].
    pub fn charge(&self, key: u32, spent: Duration) {
        self.lock().charge(key, spent);
    }

    /// New rates (a reload); the buckets start full.
    pub fn set(&self, rate: f64, burst: f64) {
        *self.lock() = Limits::new(rate, burst);
    }

    /// Requests refused over budget so far.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

/// Loop time worth one token. A request is served in turn with everyone else's (queue.rs),
/// so this bounds the share of the loop one user takes while others wait, not anyone's
/// latency: at the default 50 requests a second, at most about half of it. A `run` (a
/// directory made, a process moved: 5–15 ms here, mostly the kernel's cgroup write) costs
/// one or two tokens.
pub const COST_UNIT: Duration = Duration::from_millis(10);

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

    /// How long until `uid` has a token again (zero if it has one).
    pub fn until_token(&self, uid: u32) -> Duration {
        let Some((tokens, _)) = self.buckets.get(&uid) else { return Duration::ZERO };
        Duration::from_secs_f64(((1.0 - tokens) / self.rate).max(0.0))
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
    fn a_request_over_budget_waits_for_a_token_then_is_refused() {
        let l = Shared::new(2.0, 2.0);
        let t0 = Instant::now();
        for _ in 0..4 {
            l.admit(1000).unwrap();
        }
        let waited = t0.elapsed();
        assert!(waited >= Duration::from_millis(900), "two beyond the burst waited for tokens at 2/s: {waited:?}");
        l.charge(1000, COST_UNIT * 40);
        let t = Instant::now();
        let e = l.admit(1000).unwrap_err();
        assert!(t.elapsed() < MAX_WAIT / 2, "a debt longer than MAX_WAIT (one burst: 1.5 s to a token) is refused at once: {:?}", t.elapsed());
        assert!(e.contains("too many requests from uid 1000"), "{e}");
        assert_eq!(l.refused(), 1);
        l.admit(0).unwrap();
        l.admit(1001).unwrap();
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
