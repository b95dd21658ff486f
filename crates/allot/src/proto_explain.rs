//! The replies that explain: `rules test`'s checks, `explain`'s reasons and the audit
//! trail's records (`log`), on the wire as proto.rs's other replies are.

use serde::{Deserialize, Serialize};

/// One rule checked against a process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuleCheck {
    /// Its name.
    pub rule: String,
    /// Its line in the config.
    pub line: usize,
    /// It matches.
    pub matches: bool,
    /// Why (or why not).
    pub why: String,
}

/// `rules test`'s reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RulesView {
    /// The process.
    pub pid: i32,
    /// Its executable.
    pub exe: String,
    /// Its name.
    pub comm: String,
    /// The first matching rule and what it does (None: no rule matches).
    pub matched: Option<String>,
    /// Every rule, in order.
    pub checked: Vec<RuleCheck>,
}

/// One reason in `explain`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reason {
    /// "boost", "held", "cap", "memory cap", "currency cap", "nice", "background", "focus", or the same
    /// with "no " when the condition does not hold.
    pub state: String,
    /// Whether it holds now.
    pub on: bool,
    /// Seconds since it last changed (None: since the job was made or the daemon started).
    pub since_s: Option<f64>,
    /// Why, with the numbers.
    pub because: String,
}

/// `explain`'s reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExplainView {
    /// The job, as `show` names it.
    pub job: String,
    /// Its currency.
    pub currency: String,
    /// The plan's numbers: entitlement, window usage, last tick's usage, the boost
    /// threshold, weight written, quota written (CPUs).
    pub entitlement: f64,
    /// Usage over the boost window, CPUs.
    pub window: f64,
    /// Usage over the last tick, CPUs.
    pub last: f64,
    /// Boosted while window usage is below this (CPUs).
    pub threshold: f64,
    /// The weight written.
    pub weight: u32,
    /// The quota written, CPUs.
    pub quota: Option<f64>,
    /// Each condition.
    pub reasons: Vec<Reason>,
}

/// One change a request made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditChange {
    /// The job or currency, in words.
    pub what: String,
    /// Its settings before ("-": it did not exist).
    pub before: String,
    /// After ("-": it was removed).
    pub after: String,
}

/// One audit record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// Unix time, seconds.
    pub time: f64,
    /// Who asked (0: root, or the daemon itself for a reload).
    pub uid: u32,
    /// The asking process.
    pub pid: i32,
    /// The request, as the CLI would spell it.
    pub request: String,
    /// Why it was refused (None: done).
    #[serde(default)]
    pub refused: Option<String>,
    /// What it changed.
    #[serde(default)]
    pub changes: Vec<AuditChange>,
    /// Jobs it touched, as `show` names them.
    #[serde(default)]
    pub jobs: Vec<String>,
    /// Owners of the jobs it touched.
    #[serde(default)]
    pub owners: Vec<u32>,
}

/// `log`'s reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogView {
    /// Oldest first.
    pub records: Vec<AuditRecord>,
}
