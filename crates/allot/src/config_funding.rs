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

#[cfg(test)]
mod tests {
    use crate::config::Config;

    #[test]
    fn both_forms_load() {
        let c =
            Config::parse("t.toml".as_ref(), "[funding]\nbob = 200\nalice = { funding = 300, cap = \"4!\" }\ncarol = { cap = \"50%!\" }\n").unwrap();
        assert_eq!((c.funding["bob"].funding, c.funding["bob"].cap), (Some(200), None));
        assert_eq!(c.funding["alice"].funding, Some(300));
        assert_eq!(c.funding["alice"].cap.unwrap().to_string(), "4!");
        assert_eq!((c.funding["carol"].funding, c.funding["carol"].cap.unwrap().cpus), (None, 0.5));
        let c = Config::parse("t.toml".as_ref(), "[funding.alice]\nfunding = 300\ncap = \"1/2!\"\n").unwrap();
        assert_eq!(c.funding["alice"].cap.unwrap().cpus, 0.5);
        let c = Config::parse("t.toml".as_ref(), "[groups.students]\nfunding = 50\ncurrency_cap = \"2!\"\ndefault_cap = \"1\"\n").unwrap();
        assert_eq!(c.groups["students"].currency_cap.as_deref(), Some("2!"));
    }

    /// Every funding 1..10000 in both forms, and caps across their range in each form
    /// (decimal, fraction, percent), read back as they were written.
    #[test]
    fn every_accepted_entry_reads_back_as_written() {
        for f in (1..=10_000).step_by(37).chain([10_000]) {
            let c = Config::parse("t.toml".as_ref(), &format!("[funding]\na = {f}\nb = {{ funding = {f} }}\n")).unwrap();
            assert_eq!((c.funding["a"].funding, c.funding["b"].funding), (Some(f), Some(f)));
        }
        for hundredths in (1..=409_600u32).step_by(997) {
            let cpus = hundredths as f64 / 100.0;
            for text in [format!("{cpus}!"), format!("{hundredths}/100!"), format!("{hundredths}%!")] {
                let c = Config::parse("t.toml".as_ref(), &format!("[funding]\na = {{ cap = \"{text}\" }}\n")).unwrap();
                let cap = c.funding["a"].cap.unwrap();
                assert!(cap.hard && (cap.cpus - cpus).abs() < 1e-9, "{text}: {cap:?}");
                let again = allot_model::Cap::parse_currency(&cap.to_string()).unwrap();
                assert!((again.cpus - cap.cpus).abs() <= 0.0005, "{text} -> {cap} -> {again:?}");
            }
        }
        for bad in (10_001..10_010).chain([0, -1, i64::MAX]) {
            assert!(Config::parse("t.toml".as_ref(), &format!("[funding]\na = {{ funding = {bad} }}\n")).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_wrong_entry_is_named_at_its_line_with_the_forms() {
        for (text, line, want) in [
            ("[funding]\nbob = 1\nalice = { funding = 300, cap = \"4\" }\n", 3, "currency cap \"4\" is not a hard cap"),
            ("[funding]\nalice = { funding = 0 }\n", 2, "funding must be a whole number 1..10000, got \"0\""),
            ("[funding]\nalice = { fundng = 3 }\n", 2, "unknown key \"fundng\""),
            ("[funding]\nalice = \"300\"\n", 2, "alice = { funding = 300, cap = \"4!\", mem = \"16G!\" }"),
            ("[funding]\nalice = { cap = 4 }\n", 2, "cap must be a string such as \"4!\""),
            ("[funding]\nalice = -5\n", 2, "got \"-5\""),
            ("\n[groups.g]\ncurrency_cap = \"0.5\"\n", 3, "groups.g.currency_cap: currency cap \"0.5\" is not a hard cap"),
            ("[groups.g]\ncurrency_cap = \"0!\"\n", 2, "hard cap of 0"),
        ] {
            let e = Config::parse("t.toml".as_ref(), text).unwrap_err();
            assert!(e.message.contains(want), "{text}: {}", e.message);
            assert_eq!(e.line, Some(line), "{text}: {}", e.message);
        }
    }
}
