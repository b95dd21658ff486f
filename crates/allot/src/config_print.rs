//! A loaded config printed back as TOML (`allot config check --print`): every setting, the
//! defaults filled in, as text the loader (`Config::parse`) reads to an equal config. The property tests
//! (config_print_tests.rs) hold it to that over generated configs, which is how the
//! parser's round trip is checked: what is written is what is read.
//!
//! Most tables print as serde writes them. Two are read by hand and so are written by hand
//! here: a `[funding]` entry (a plain funding, or a table with `funding`, `cap`, `mem`) and
//! `[memory]`. A cap is written with every digit its value has (`0.3333333333333333!`,
//! not the three decimals people read), so it reads back as the same number.

use crate::config::Config;
use crate::config_funding::FundingEntry;
use crate::config_memory::MemoryConfig;
use serde::ser::{Serialize, SerializeMap, Serializer};

/// The config as TOML text that [`Config::parse`] reads back to an equal config.
pub fn print(cfg: &Config) -> Result<String, toml::ser::Error> {
    toml::to_string(cfg)
}

impl Serialize for FundingEntry {
    /// `alice = 300` when the entry is only a funding, else a table of what it has.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let FundingEntry { funding, cap, mem } = self;
        if let (Some(f), None, None) = (funding, cap, mem) {
            return s.serialize_u32(*f);
        }
        let mut m = s.serialize_map(None)?;
        if let Some(f) = funding {
            m.serialize_entry("funding", f)?;
        }
        if let Some(c) = cap {
            // A currency's cap is hard; f64's Display is the shortest text of the value.
            m.serialize_entry("cap", &format!("{}{}", c.cpus, if c.hard { "!" } else { "" }))?;
        }
        if let Some(mc) = mem {
            // Whole bytes in the largest unit that divides them (exact).
            m.serialize_entry("mem", &mc.to_string())?;
        }
        m.end()
    }
}

impl Serialize for MemoryConfig {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let MemoryConfig { enable, reserve, oom } = self;
        let mut m = s.serialize_map(Some(3))?;
        m.serialize_entry("enable", enable)?;
        // Bytes exact in the largest unit that divides them, or a percent as f64 writes it.
        m.serialize_entry("reserve", &reserve.to_string())?;
        m.serialize_entry("oom", oom)?;
        m.end()
    }
}

impl PartialEq for Config {
    /// Every setting as written; the compiled rules are made from `rules`, so they are not
    /// compared again (a `Rule` holds compiled patterns, which have no equality). Naming
    /// every field makes a new one a compile error here until it is compared.
    fn eq(&self, o: &Self) -> bool {
        let Config {
            default_funding,
            tick_ms,
            scan_ms,
            half_life_ms,
            users,
            policy,
            currencies,
            placement,
            limits,
            privacy,
            funding_authority,
            funding,
            groups,
            rules,
            metrics,
            outside,
            memory,
            io,
            scheduler,
            sessions,
            compiled_rules: _,
        } = self;
        *default_funding == o.default_funding
            && *tick_ms == o.tick_ms
            && *scan_ms == o.scan_ms
            && *half_life_ms == o.half_life_ms
            && *users == o.users
            && *policy == o.policy
            && *currencies == o.currencies
            && *placement == o.placement
            && *limits == o.limits
            && *privacy == o.privacy
            && *funding_authority == o.funding_authority
            && *funding == o.funding
            && *groups == o.groups
            && *rules == o.rules
            && *metrics == o.metrics
            && *outside == o.outside
            && *memory == o.memory
            && *io == o.io
            && *scheduler == o.scheduler
            && *sessions == o.sessions
    }
}

#[cfg(test)]
#[path = "config_print_tests.rs"]
mod tests;
