//! Tickets and funding: bounded counts of claim.
//!
//! Petrou et al. 1999 §4.1 bounds tickets to 1–100 and base tickets to 100–10,000 for 32-bit
//! fixed-point arithmetic; allot has no such limit and uses 1..10000 for both, with 100
//! as the default (docs/concepts.md). The kernel does the exchange: a currency's weight is its
//! funding and a job's weight is its tickets, so the fair scheduler divides a currency's
//! share among its *active* jobs in proportion to their tickets, as lottery currencies do
//! (Petrou et al. 1999 §2.2).

use crate::ModelError;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Smallest number of tickets or funding.
pub const MIN: u32 = 1;
/// Largest number of tickets or funding.
pub const MAX: u32 = 10_000;
/// Default tickets of a job and default funding of a currency.
pub const DEFAULT: u32 = 100;

/// cgroup v1 `cpu.shares` of a weight in allot units: 100 ↦ 1024, the kernel's default,
/// so an allot subtree at defaults weighs what an unmanaged cgroup weighs.
pub fn v1_shares(units: u32) -> u64 {
    (units as u64 * 1024 / 100).max(2)
}

/// Inverse of [`v1_shares`], rounding to the nearest unit.
pub fn from_v1_shares(shares: u64) -> u32 {
    ((shares * 100 + 512) / 1024).clamp(MIN as u64, MAX as u64) as u32
}

fn parse_bounded(what: &'static str, s: &str) -> Result<u32, ModelError> {
    let err = || ModelError::OutOfRange { what, min: MIN, max: MAX, got: s.to_string() };
    let v: i64 = s.trim().parse().map_err(|_| err())?;
    if (MIN as i64..=MAX as i64).contains(&v) {
        Ok(v as u32)
    } else {
        Err(err())
    }
}

macro_rules! bounded {
    ($name:ident, $what:literal, $doc:literal) => {
        #[doc = $doc]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(try_from = "i64", into = "u32")]
        pub struct $name(u32);

        impl $name {
            /// Checks the range 1..10000.
            pub fn new(v: i64) -> Result<Self, ModelError> {
                if (MIN as i64..=MAX as i64).contains(&v) {
                    Ok(Self(v as u32))
                } else {
                    Err(ModelError::OutOfRange { what: $what, min: MIN, max: MAX, got: v.to_string() })
                }
            }
            /// The count.
            pub fn get(self) -> u32 {
                self.0
            }
            /// The weight for cgroup v2 `cpu.weight` (1..10000): the count itself.
            pub fn cgroup_v2_weight(self) -> u32 {
                self.0
            }
            /// The weight for cgroup v1 `cpu.shares` ([`v1_shares`]).
            pub fn cgroup_v1_shares(self) -> u64 {
                v1_shares(self.0)
            }
            /// Inverse of [`Self::cgroup_v1_shares`], rounding to the nearest count.
            pub fn from_cgroup_v1_shares(shares: u64) -> Self {
                Self(from_v1_shares(shares))
            }
            /// Inverse of [`Self::cgroup_v2_weight`].
            pub fn from_cgroup_v2_weight(w: u64) -> Self {
                Self((w).clamp(MIN as u64, MAX as u64) as u32)
            }
        }
        impl Default for $name {
            fn default() -> Self {
                Self(DEFAULT)
            }
        }
        impl FromStr for $name {
            type Err = ModelError;
            fn from_str(s: &str) -> Result<Self, ModelError> {
                parse_bounded($what, s).map(Self)
            }
        }
        impl TryFrom<i64> for $name {
            type Error = ModelError;
            fn try_from(v: i64) -> Result<Self, ModelError> {
                Self::new(v)
            }
        }
        impl From<$name> for u32 {
            fn from(t: $name) -> u32 {
                t.0
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}

bounded!(Tickets, "tickets", "A job's claim inside its currency, 1..10000 (default 100).");
bounded!(Funding, "funding", "The base tickets a currency holds, 1..10000 (default 100).");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_is_enforced_with_the_value_named() {
        for bad in ["0", "-1", "10001", "abc", "", "1.5"] {
            let e = bad.parse::<Tickets>().unwrap_err().to_string();
            assert!(e.contains("tickets must be a whole number 1..10000"), "{e}");
            assert!(e.contains(&format!("{bad:?}")), "{e}");
        }
        assert_eq!("1".parse::<Tickets>().unwrap().get(), 1);
        assert_eq!(" 10000 ".parse::<Funding>().unwrap().get(), 10000);
        assert_eq!(Tickets::default().get(), 100);
    }

    #[test]
    fn v1_shares_round_trip_for_every_count() {
        for v in MIN..=MAX {
            let t = Tickets::new(v as i64).unwrap();
            assert_eq!(Tickets::from_cgroup_v1_shares(t.cgroup_v1_shares()), t, "{v}");
        }
        assert_eq!(Tickets::default().cgroup_v1_shares(), 1024);
    }

    #[test]
    fn serde_refuses_out_of_range() {
        assert!(serde_json::from_str::<Tickets>("0").is_err());
        assert_eq!(serde_json::from_str::<Tickets>("300").unwrap().get(), 300);
    }
}
