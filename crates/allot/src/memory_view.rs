//! A currency's memory as `show` reports it (memory by share, docs/memory.md). Its fields'
//! names, units and formats are the product's schema (memory_fields.rs).

use serde::{Deserialize, Serialize};

/// One currency's memory against its share.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CurrencyMemory {
    /// Bytes it uses now (its cgroup's charge: anonymous memory and page cache).
    pub usage: u64,
    /// Its funded share of the memory available to users, bytes: protected up to this.
    pub protection: u64,
    /// The memory available to users, bytes (MemTotal less the reserve, at most allot's
    /// root's limit).
    pub available: u64,
    /// The hard limit written now, bytes: its hard memory cap, and on cgroup v1 the guard
    /// that keeps it out of what others hold within their share. None: unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// Its memory cap as configured ("16G!", "16G").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cap: Option<String>,
    /// The `oom_score_adj` its processes get (None: OOM by share is off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oom_score_adj: Option<i16>,
    /// OOM kills in it: since its cgroup was made (v2), since the daemon started (v1).
    pub oom_kills: u64,
    /// Its memory and I/O pressure (PSI of its cgroup: cgroup v2 and systemd's slices;
    /// cgroup v1 has none per cgroup).
    #[serde(default, skip_serializing_if = "CurrencyPressure::is_empty")]
    pub pressure: CurrencyPressure,
}

/// A currency's pressure stall information, per resource, where the kernel has it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CurrencyPressure {
    /// `memory.pressure`: its tasks stalled on memory (reclaim, swap-in, refaults).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Stall>,
    /// `io.pressure`: its tasks stalled on block I/O.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io: Option<Stall>,
}

impl CurrencyPressure {
    /// Neither resource has a reading.
    pub fn is_empty(&self) -> bool {
        self.memory.is_none() && self.io.is_none()
    }
}

/// One PSI file's readings: the `some` line (at least one task stalled) and the `full`
/// line (every non-idle task stalled at once).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Stall {
    /// Share of the last 10 s in which some of its tasks stalled, percent (the kernel's average).
    pub some_avg10: f64,
    /// Total time in which some of its tasks stalled, seconds.
    pub some_s: f64,
    /// Share of the last 10 s in which all of its non-idle tasks stalled, percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_avg10: Option<f64>,
    /// Total time in which all of its non-idle tasks stalled, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_s: Option<f64>,
}
