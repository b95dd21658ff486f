//! The config's `[memory]` section: memory by share (docs/memory.md).
//!
//! ```toml
//! [memory]
//! enable = true      # each currency protected up to its funded share of the memory
//! reserve = "10%"    # kept for the system: a size ("2G") or a percent of MemTotal
//! oom = true         # oom_score_adj by share: the OOM victim is over its share
//! ```
//! Read by hand from TOML's value, so a wrong entry is refused naming the value and what
//! is allowed.

use allot_model::memory::Reserve;
use serde::{Deserialize, Deserializer};

/// `[memory]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemoryConfig {
    /// Memory by share on: protections, memory caps, the v1 guard limits.
    pub enable: bool,
    /// Memory kept back for the system; the rest is available to users.
    pub reserve: Reserve,
    /// Processes' `oom_score_adj` kept in step with their currency's share.
    pub oom: bool,
}

impl Default for MemoryConfig {
    /// On, 10% kept for the system, OOM by share: protection changes nothing until memory
    /// runs short, and no cap is set unless asked for.
    fn default() -> Self {
        Self { enable: true, reserve: Reserve::default(), oom: true }
    }
}

const KEYS: &str = "enable (true or false), reserve (a size such as \"2G\" or a percent such as \"10%\") and oom (true or false)";

impl MemoryConfig {
    fn from_value(v: toml::Value) -> Result<Self, String> {
        let toml::Value::Table(t) = v else { return Err(format!("[memory] is a table of {KEYS}, got {v}")) };
        let mut m = MemoryConfig::default();
        for (k, v) in &t {
            match (k.as_str(), v) {
                ("enable", toml::Value::Boolean(b)) => m.enable = *b,
                ("oom", toml::Value::Boolean(b)) => m.oom = *b,
                ("reserve", toml::Value::String(s)) => m.reserve = s.parse().map_err(|e: allot_model::ModelError| format!("memory.reserve: {e}"))?,
                ("enable" | "oom", other) => return Err(format!("memory.{k} must be true or false, got {other}")),
                ("reserve", other) => return Err(format!("memory.reserve must be a string such as \"2G\" or \"10%\", got {other}")),
                // serde's own words for an unknown field, as every other table says it.
                (k, _) => return Err(format!("unknown field `{k}`, expected one of `enable`, `reserve`, `oom` ([memory] has {KEYS})")),
            }
        }
        Ok(m)
    }
}

impl<'de> Deserialize<'de> for MemoryConfig {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        MemoryConfig::from_value(toml::Value::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}
