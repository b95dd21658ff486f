//! One `[funding]` entry of the config: a funding (`alice = 300`), or a table that may
//! also give the currency a hard cap and a memory cap (`alice = { funding = 300, cap = "4!",
//! mem = "16G!" }`). Read by
//! hand from TOML's value, so a wrong entry is refused with the forms allowed, at its line.

use allot_model::{Cap, Funding};
use serde::{Deserialize, Deserializer, Serialize};

/// Who decides funding.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FundingAuthority {
    /// `allot fund` persists and wins over the config.
    #[default]
    Local,
    /// Only the config sets funding; `allot fund` is refused.
    Config,
}

/// A `[funding]` entry.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct FundingEntry {
    /// The currency's funding (None: the table form without one, default_funding or a
    /// group's).
    pub funding: Option<u32>,
    /// The currency's hard cap, CPUs (`cap = "4!"`).
    pub cap: Option<Cap>,
    /// The currency's memory cap (`mem = "16G!"` hard, `mem = "16G"` soft).
    pub mem: Option<allot_model::memory::MemCap>,
}

const FORMS: &str = "a funding (alice = 300) or a table (alice = { funding = 300, cap = \"4!\", mem = \"16G!\" })";

impl FundingEntry {
    fn from_value(v: toml::Value) -> Result<Self, String> {
        let funding = |v: &toml::Value| match v {
            toml::Value::Integer(i) => Funding::new(*i).map(|f| f.get()).map_err(|e| e.to_string()),
            other => Err(format!("funding must be a whole number 1..10000, got {other}")),
        };
        match v {
            toml::Value::Table(t) => {
                let mut e = FundingEntry::default();
                for (k, v) in &t {
                    match (k.as_str(), v) {
                        ("funding", v) => e.funding = Some(funding(v)?),
                        ("cap", toml::Value::String(s)) => e.cap = Some(Cap::parse_currency(s).map_err(|e| e.to_string())?),
                        ("cap", other) => return Err(format!("cap must be a string such as \"4!\", got {other}")),
                        ("mem", toml::Value::String(s)) => e.mem = Some(s.parse().map_err(|e: allot_model::ModelError| e.to_string())?),
                        ("mem", other) => return Err(format!("mem must be a string such as \"16G!\" (hard) or \"16G\" (soft), got {other}")),
                        (k, _) => return Err(format!("unknown key {k:?} in a [funding] entry: it is {FORMS}")),
                    }
                }
                Ok(e)
            }
            toml::Value::Integer(i) => Ok(FundingEntry { funding: Some(funding(&toml::Value::Integer(i))?), cap: None, mem: None }),
            other => Err(format!("a [funding] entry is {FORMS}, got {other}")),
        }
    }
}

impl<'de> Deserialize<'de> for FundingEntry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        FundingEntry::from_value(toml::Value::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}
