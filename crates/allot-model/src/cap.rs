//! Caps: an upper bound on a job's usage rate, in CPUs.
//!
//! EBS 2004 ("CPU usage rate caps"): caps are rational numbers such as "1 / 2",
//! a "!" suffix makes them hard; a hard cap is always enforced, a soft cap only while
//! others want the CPU; soft 0 makes a true background task; hard 0 is not permitted.
//! EBS caps a task to a fraction of one CPU; an allot job is a process tree, so its cap
//! may exceed 1 (up to the machine's CPUs, checked where the machine is known).

use crate::ModelError;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The largest cap the parser accepts; the daemon also bounds it by the CPU count.
pub const MAX_CPUS: f64 = 4096.0;

/// The smallest soft cap above 0: caps are written (state file, `show`) to three decimals,
/// and a smaller one would be written as "0", which reads back as background.
pub const MIN_SOFT_CPUS: f64 = 0.001;

/// A cap on usage rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Cap {
    /// CPUs, e.g. 0.5. Zero only when soft (background).
    pub cpus: f64,
    /// Hard: enforced even when CPUs are idle (cpu.max). Soft: only under contention.
    pub hard: bool,
}

impl Cap {
    /// Soft cap 0: the job runs on idle CPU only.
    pub const BACKGROUND: Cap = Cap { cpus: 0.0, hard: false };

    /// True for soft 0, the background class.
    pub fn is_background(&self) -> bool {
        !self.hard && self.cpus == 0.0
    }

    /// Refuses a cap above the machine's `ncpu` CPUs (background always fits); `got` is
    /// the cap as the user wrote it. The CLI and the daemon both check with this, so the
    /// message is the same wherever the cap is refused.
    pub fn within(&self, got: &str, ncpu: usize) -> Result<(), ModelError> {
        if !self.is_background() && self.cpus > ncpu as f64 {
            return Err(ModelError::CapAboveMachine { got: got.to_string(), ncpu });
        }
        Ok(())
    }

    /// `cpu.max` quota for this hard cap over `period_us` (kernel minimum 1 ms).
    pub fn quota_us(&self, period_us: u64) -> u64 {
        ((self.cpus * period_us as f64).round() as u64).max(1000)
    }
}

impl Cap {
    /// Parses the cap grammar and the rules every cap obeys, without an upper bound or
    /// the kernel's floor: a number of CPUs as a decimal (`0.5`), a fraction (`1/2`,
    /// EBS's form) or a percent of one CPU (`50%`, as systemd's `CPUQuota=` and
    /// cpulimit write it), then `!` for hard; finite, at least 0, and hard 0 refused
    /// (EBS 2004: it would never run). [`FromStr`] adds allot's bounds (at most
    /// [`MAX_CPUS`], hard at least 0.01 CPU); the simulator adds EBS's (at most 1 CPU per
    /// task).
    pub fn parse_form(s: &str) -> Result<Cap, ModelError> {
        let bad = |why: &str| ModelError::BadCap { got: s.to_string(), why: why.to_string() };
        let t = s.trim();
        let (body, hard) = match t.strip_suffix('!') {
            Some(b) => (b.trim(), true),
            None => (t, false),
        };
        let (body, percent) = match body.strip_suffix('%') {
            Some(b) => (b.trim(), true),
            None => (body, false),
        };
        if body.is_empty() {
            return Err(bad("no number"));
        }
        let cpus = if let Some((n, d)) = body.split_once('/') {
            if percent {
                return Err(bad("a percent is a plain number (50%), not a fraction"));
            }
            let n: f64 = n.trim().parse().map_err(|_| bad("numerator is not a number"))?;
            let d: f64 = d.trim().parse().map_err(|_| bad("denominator is not a number"))?;
            if d == 0.0 {
                return Err(bad("denominator is 0"));
            }
            n / d
        } else {
            let v: f64 = body.parse().map_err(|_| bad("not a number"))?;
            if percent {
                v / 100.0
            } else {
                v
            }
        };
        if !cpus.is_finite() {
            return Err(bad("not a finite number"));
        }
        if cpus < 0.0 {
            return Err(bad("a cap must be >= 0"));
        }
        if hard && cpus == 0.0 {
            return Err(bad("a hard cap of 0 would never let the job run; soft 0 (background) runs on idle CPU only"));
        }
        Ok(Cap { cpus, hard })
    }
}

impl Cap {
    /// A currency's cap: the job grammar ([`FromStr`]) but hard only. A currency's cap
    /// bounds all of its jobs together (and, on a systemd host, everything in the user's
    /// slice) at every moment, as systemd's `CPUQuota=` does; a soft one would need the
    /// plan to hold a whole currency, which it does not, so `4` is refused rather than
    /// read as `4!` (a plain number means soft everywhere else).
    pub fn parse_currency(s: &str) -> Result<Cap, ModelError> {
        let cap: Cap = s.parse()?;
        if !cap.hard {
            return Err(ModelError::SoftCurrencyCap { got: s.to_string() });
        }
        Ok(cap)
    }
}

impl FromStr for Cap {
    type Err = ModelError;
    /// [`Cap::parse_form`] and allot's bounds: at most [`MAX_CPUS`] (the daemon also
    /// bounds it by the CPU count), a hard cap at least 0.01 CPU, the kernel's 1 ms
    /// `cpu.max` quota per 100 ms period, and a soft cap 0 (background) or at least
    /// [`MIN_SOFT_CPUS`], so every cap reads back as itself.
    fn from_str(s: &str) -> Result<Self, ModelError> {
        let bad = |why: &str| ModelError::BadCap { got: s.to_string(), why: why.to_string() };
        let cap = Cap::parse_form(s)?;
        if cap.cpus > MAX_CPUS {
            return Err(bad("more CPUs than any machine has"));
        }
        if cap.hard && cap.cpus < 0.01 {
            return Err(bad("a hard cap must be at least 0.01 CPU (1%; the kernel's 1 ms quota per 100 ms period)"));
        }
        if !cap.hard && cap.cpus > 0.0 && cap.cpus < MIN_SOFT_CPUS {
            return Err(bad("a soft cap is 0 (background) or 0.001 CPU (0.1%) up to the machine's CPUs; caps are kept to three decimals"));
        }
        Ok(cap)
    }
}

impl fmt::Display for Cap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = format!("{:.3}", self.cpus);
        let n = n.trim_end_matches('0').trim_end_matches('.');
        let n = if n.is_empty() { "0" } else { n };
        write!(f, "{}{}", n, if self.hard { "!" } else { "" })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cap_above_the_machine_names_the_value_the_cpus_and_the_forms() {
        let c: Cap = "3".parse().unwrap();
        let e = c.within("3", 2).unwrap_err().to_string();
        for want in ["cap \"3\"", "this machine's 2 CPUs", "give at most 2 CPUs", "(0.5)", "(1/2)", "(50%)", "2!", "0 for the background", "none"] {
            assert!(e.contains(want), "{want:?} missing from {e}");
        }
        assert!("2!".parse::<Cap>().unwrap().within("2!", 2).is_ok());
        assert!(Cap::BACKGROUND.within("0", 1).is_ok());
        assert!("1.5".parse::<Cap>().unwrap().within("1.5", 1).unwrap_err().to_string().contains("this machine's 1 CPU:"));
    }

    #[test]
    fn parses_the_seed_forms() {
        assert_eq!("1/2".parse::<Cap>().unwrap(), Cap { cpus: 0.5, hard: false });
        assert_eq!("1 / 2".parse::<Cap>().unwrap(), Cap { cpus: 0.5, hard: false });
        assert_eq!("0.25!".parse::<Cap>().unwrap(), Cap { cpus: 0.25, hard: true });
        assert_eq!("1/4 !".parse::<Cap>().unwrap(), Cap { cpus: 0.25, hard: true });
        assert!("0".parse::<Cap>().unwrap().is_background());
        assert_eq!("1.5".parse::<Cap>().unwrap().cpus, 1.5);
    }

    #[test]
    fn parses_percent_of_one_cpu() {
        assert_eq!("50%!".parse::<Cap>().unwrap(), "0.5!".parse::<Cap>().unwrap());
        assert_eq!("50%".parse::<Cap>().unwrap(), Cap { cpus: 0.5, hard: false });
        assert_eq!("150%!".parse::<Cap>().unwrap(), Cap { cpus: 1.5, hard: true });
        assert_eq!(" 25 % ! ".parse::<Cap>().unwrap(), Cap { cpus: 0.25, hard: true });
        assert_eq!("1%!".parse::<Cap>().unwrap(), Cap { cpus: 0.01, hard: true });
        assert!("0%".parse::<Cap>().unwrap().is_background());
        assert_eq!("12.5%".parse::<Cap>().unwrap().to_string(), "0.125");
    }

    #[test]
    fn parse_form_has_no_allot_bounds() {
        assert_eq!(Cap::parse_form("0.001!").unwrap(), Cap { cpus: 0.001, hard: true });
        assert_eq!(Cap::parse_form("99999").unwrap().cpus, 99999.0);
        assert!(Cap::parse_form("0!").is_err());
        assert!(Cap::parse_form("-1").is_err());
    }

    #[test]
    fn refuses_with_the_value_named() {
        for (bad, why) in [
            ("0!", "hard cap of 0"),
            ("2/0", "denominator is 0"),
            ("-1", ">= 0"),
            ("x", "not a number"),
            ("", "no number"),
            ("!", "no number"),
            ("nan", "finite"),
            ("inf", "finite"),
            ("1/x", "denominator"),
            ("99999", "more CPUs"),
            ("0.001!", "at least 0.01"),
            ("%", "no number"),
            ("%!", "no number"),
            ("!%", "not a number"),
            ("NaN%", "finite"),
            ("nan%!", "finite"),
            ("inf%", "finite"),
            ("1e999%", "finite"),
            ("-5%", ">= 0"),
            ("0%!", "hard cap of 0"),
            ("0.5%!", "at least 0.01 CPU (1%"),
            ("1/2%", "not a fraction"),
            ("50%%", "not a number"),
            ("50!%", "not a number"),
            ("50 percent", "not a number"),
            ("0x10%", "not a number"),
            ("999999%", "more CPUs"),
            ("409700%", "more CPUs"),
            ("0.0004", "0 (background) or 0.001 CPU"),
            ("0.0009", "three decimals"),
            ("1/10000", "0.001 CPU (0.1%)"),
            ("0.05%", "0 (background) or 0.001"),
        ] {
            let e = bad.parse::<Cap>().unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
            assert!(e.contains(&format!("{bad:?}")), "{bad}: {e}");
            assert!(e.contains("percent of one CPU (50%)"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_currency_cap_is_hard_only() {
        assert_eq!(Cap::parse_currency("4!").unwrap(), Cap { cpus: 4.0, hard: true });
        assert_eq!(Cap::parse_currency("50%!").unwrap(), Cap { cpus: 0.5, hard: true });
        assert_eq!(Cap::parse_currency("1/2!").unwrap(), Cap { cpus: 0.5, hard: true });
        for soft in ["4", "0", "1/2", "50%"] {
            let e = Cap::parse_currency(soft).unwrap_err().to_string();
            assert!(e.contains(&format!("currency cap {soft:?} is not a hard cap")), "{e}");
            assert!(e.contains("4!, 1/2!, 50%!"), "{e}");
        }
        // The job grammar's own refusals come through as they are.
        assert!(Cap::parse_currency("0!").unwrap_err().to_string().contains("hard cap of 0"));
        assert!(Cap::parse_currency("x!").unwrap_err().to_string().contains("not a number"));
    }

    #[test]
    fn display_round_trips() {
        for s in ["0.5", "0.25!", "0", "2", "1.333!"] {
            let c: Cap = s.parse().unwrap();
            assert_eq!(c.to_string(), s);
        }
        assert_eq!("1/3".parse::<Cap>().unwrap().to_string(), "0.333");
    }

    #[test]
    fn every_cap_accepted_reads_back_as_a_cap_of_the_same_kind() {
        for s in ["0.001", "0.0015", "0.1%", "0.01!", "1/1000", "0.0049999", "4096", "0"] {
            let c: Cap = s.parse().unwrap();
            let back: Cap = c.to_string().parse().unwrap();
            assert_eq!((back.hard, back.is_background()), (c.hard, c.is_background()), "{s} -> {c} -> {back:?}");
            assert!((back.cpus - c.cpus).abs() <= 0.0005, "{s} -> {c} -> {back:?}");
        }
    }

    #[test]
    fn quota_has_the_kernel_floor() {
        assert_eq!(Cap { cpus: 0.25, hard: true }.quota_us(100_000), 25_000);
        assert_eq!(Cap { cpus: 0.01, hard: true }.quota_us(100_000), 1_000);
        assert_eq!(Cap { cpus: 1.5, hard: true }.quota_us(100_000), 150_000);
    }
}
