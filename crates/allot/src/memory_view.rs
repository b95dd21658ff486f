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
}
