//! A refusal on the wire: its kind, for a program to decide by, beside its sentence, for a
//! person to read. The kinds are what the daemon refuses today; a client that meets a
//! kind it does not know (a newer daemon's) reads it as [`ErrorKind::Other`].

use serde::{Deserialize, Serialize};

/// What kind of refusal a reply carries (`"kind"` beside `"error"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// Not a request of this protocol: not JSON, an unknown op or field, a wrong JSON type.
    Malformed,
    /// Another protocol version (the sentence says which side to upgrade or restart).
    Version,
    /// A value out of bounds, or values that contradict each other (tickets 0, a cap above
    /// the machine's CPUs, `--background` with a cap, nothing to change).
    Invalid,
    /// What the request names does not exist: a process, a job, a currency or user.
    NotFound,
    /// The caller may not do this: another user's process, root's operation, a process in
    /// a cgroup another manager owns, a caller the daemon cannot prove.
    NotPermitted,
    /// A limit of the caller's: connections, requests per second, jobs. Wait or free some.
    Limit,
    /// The daemon did not take the request in time, or is stopping: nothing was done; try
    /// again.
    Busy,
    /// The request line is longer than the daemon reads.
    TooLong,
    /// The daemon could not carry it out: the kernel refused a move, the state file could
    /// not be saved. Nothing was changed.
    Internal,
    /// A kind this build does not know (from a newer daemon).
    #[serde(other)]
    Other,
}

impl ErrorKind {
    /// The kind as the wire spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Malformed => "malformed",
            ErrorKind::Version => "version",
            ErrorKind::Invalid => "invalid",
            ErrorKind::NotFound => "not_found",
            ErrorKind::NotPermitted => "not_permitted",
            ErrorKind::Limit => "limit",
            ErrorKind::Busy => "busy",
            ErrorKind::TooLong => "too_long",
            ErrorKind::Internal => "internal",
            ErrorKind::Other => "other",
        }
    }
}

/// A refused request: its kind and one sentence naming the value and what is allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// What kind.
    pub kind: ErrorKind,
    /// For a person.
    pub message: String,
}

impl Refusal {
    /// A refusal of `kind`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into() }
    }
    /// [`ErrorKind::Invalid`].
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Invalid, message)
    }
    /// [`ErrorKind::NotFound`].
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, message)
    }
    /// [`ErrorKind::NotPermitted`].
    pub fn not_permitted(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotPermitted, message)
    }
    /// [`ErrorKind::Limit`].
    pub fn limit(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Limit, message)
    }
    /// [`ErrorKind::Busy`].
    pub fn busy(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Busy, message)
    }
    /// [`ErrorKind::Internal`].
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, message)
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Refusal {}

/// Code that still speaks in sentences takes a refusal's sentence.
impl From<Refusal> for String {
    fn from(r: Refusal) -> String {
        r.message
    }
}

impl From<super::LineError> for Refusal {
    fn from(e: super::LineError) -> Refusal {
        let kind = match &e {
            super::LineError::Malformed(_) => ErrorKind::Malformed,
            super::LineError::Invalid(_) => ErrorKind::Invalid,
            super::LineError::Version(_) => ErrorKind::Version,
        };
        Refusal::new(kind, e.to_string())
    }
}
