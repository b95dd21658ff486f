//! allot's vocabulary and its math, pure: no file, socket or clock is touched here.
//!
//! The words are allot's (docs/concepts.md): a **job** holds **tickets** inside a **currency**; a
//! currency is **funded** with base tickets; a job's **entitlement** is the CPU it would
//! get now among the active claimants; its **usage rate** is its smoothed CPU use; a
//! **cap** bounds the usage rate, soft or hard; soft cap 0 is **background**.
#![deny(missing_docs)]

pub mod cap;
pub mod duration;
pub mod entitlement;
pub mod flat;
pub mod io;
pub mod lottery;
pub mod memory;
pub mod nice;
pub mod pace;
pub mod pass;
pub mod plan;
pub mod policy;
pub mod quantum;
pub mod realtime;
pub mod scope;
pub mod session;
pub mod stall;
pub mod units;
pub mod usage;
pub mod wake;

pub use cap::Cap;
pub use entitlement::{entitlements, Claimant, CurrencyClaim};
pub use units::{Funding, Tickets};
pub use usage::UsageRate;

/// Every way a value in the vocabulary can be wrong. Messages name the value and what
/// is allowed, so they can be shown to a user as they are.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    /// A tickets or funding value out of range or not a number.
    #[error("{what} must be a whole number {min}..{max}, got {got:?}")]
    OutOfRange {
        /// "tickets" or "funding".
        what: &'static str,
        /// Smallest allowed.
        min: u32,
        /// Largest allowed.
        max: u32,
        /// What was given, as given.
        got: String,
    },
    /// A cap that does not parse or is not allowed.
    #[error(
        "cap {got:?} is invalid: {why}; a cap is CPUs as a decimal (0.5), a fraction (1/2) or a percent of one CPU (50%), with ! for hard (0.5!, 50%!)"
    )]
    BadCap {
        /// What was given.
        got: String,
        /// Why it is refused.
        why: String,
    },
    /// A cap above the machine's CPUs (the parser allows up to [`cap::MAX_CPUS`]).
    #[error(
        "cap {got:?} is more than this machine's {ncpu} CPU{}: give at most {ncpu} CPUs, as a decimal (0.5), a fraction (1/2) or a percent of one CPU (50%), with ! for hard ({ncpu}!, 1/2!); 0 for the background, none for no cap",
        if *ncpu == 1 { "" } else { "s" }
    )]
    CapAboveMachine {
        /// What was given.
        got: String,
        /// The machine's CPUs.
        ncpu: usize,
    },
    /// A currency's cap that is not hard ([`Cap::parse_currency`]).
    #[error(
        "currency cap {got:?} is not a hard cap: a currency's cap is hard only, CPUs with ! (4!, 1/2!, 50%!); soft caps and 0 (background) are for jobs"
    )]
    SoftCurrencyCap {
        /// What was given.
        got: String,
    },
    /// A memory size, reserve or memory cap that does not parse ([`memory`]).
    #[error("{what} {got:?} is invalid: {why}; {allowed}")]
    BadMemory {
        /// "memory cap", "memory reserve" or "memory size".
        what: &'static str,
        /// What was given.
        got: String,
        /// Why it is refused.
        why: String,
        /// What is allowed, in words.
        allowed: &'static str,
    },
    /// A nice value outside -20..19.
    #[error("nice must be -20..19, got {0}")]
    BadNice(i64),
    /// A duration that does not parse ([`duration::parse`]).
    #[error("{}must be a duration like 5ms, 500us or 0.2s{}, got {got:?}: {why}", name_prefix(what), bare_note(bare))]
    BadDuration {
        /// What the value is, e.g. "--interval" (empty: the caller names it).
        what: String,
        /// What was given, as given.
        got: String,
        /// The unit a bare number is read in, if bare numbers are accepted.
        bare: Option<&'static str>,
        /// Why it is refused.
        why: String,
    },
}

fn name_prefix(what: &str) -> String {
    if what.is_empty() {
        String::new()
    } else {
        format!("{what} ")
    }
}

fn bare_note(bare: &Option<&'static str>) -> String {
    bare.map(|u| format!(" (a bare number is {u})")).unwrap_or_default()
}
