//! The server side of the daemon's state: what it counts, who may ask how often, the audit
//! trail, how the last reload ended, and how `show` shares its work with the connection
//! thread. Reached only through these methods.

use super::audit::Audit;
use super::limits::Shared;
use crate::proto::{Counters, ReloadOutcome};
use std::time::Instant;

/// Counters, request budgets, the audit trail and the last reload.
pub struct Serving {
    counters: Counters,
    limits: Shared,
    audit: Audit,
    defer_reads: bool,
    started: Instant,
    last_reload: Option<ReloadOutcome>,
}

impl Serving {
    /// Request budgets of `rate` per second with `burst`; no audit file; reads not deferred.
    pub fn new(rate: f64, burst: f64) -> Self {
        Self {
            counters: Counters::default(),
            limits: Shared::new(rate, burst),
            audit: Audit::new(None),
            defer_reads: false,
            started: Instant::now(),
            last_reload: None,
        }
    }
    /// Counters since start.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }
    /// Counters since start, to count.
    pub fn counters_mut(&mut self) -> &mut Counters {
        &mut self.counters
    }
    /// Per-uid request budgets (shared with the connection threads).
    pub fn limits(&self) -> &Shared {
        &self.limits
    }
    /// The audit trail.
    pub fn audit(&self) -> &Audit {
        &self.audit
    }
    /// The audit trail, to record in.
    pub fn audit_mut(&mut self) -> &mut Audit {
        &mut self.audit
    }
    /// Replaces the audit trail (the daemon's own, with its users' file, at start).
    pub fn set_audit(&mut self, a: Audit) {
        self.audit = a;
    }
    /// Whether `show` leaves pids and command lines to the connection thread (views.rs).
    pub fn defer_reads(&self) -> bool {
        self.defer_reads
    }
    /// Leaves `show`'s pids and command lines to the connection thread from now on.
    pub fn set_defer_reads(&mut self, on: bool) {
        self.defer_reads = on;
    }
    /// When the daemon started.
    pub fn started(&self) -> Instant {
        self.started
    }
    /// How the last reload ended.
    pub fn last_reload(&self) -> Option<&ReloadOutcome> {
        self.last_reload.as_ref()
    }
    /// Keeps how a reload ended.
    pub fn set_last_reload(&mut self, r: ReloadOutcome) {
        self.last_reload = Some(r);
    }
}
