//! The typed values a request carries: pids, a set of pids, and a change of cap. Each is
//! checked once, where the request line is decoded (proto_wire.rs) or where the CLI reads
//! its flag; the daemon then takes them as they are (it still checks what only it knows:
//! the machine's CPUs, who owns a process).

use allot_model::Cap;
use serde::{Serialize, Serializer};

/// A process id: 1..=i32::MAX, as `ps` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pid(i32);

impl Pid {
    /// Checks that `v` can be a process id.
    pub fn new(v: i64) -> Result<Pid, String> {
        match i32::try_from(v) {
            Ok(p) if p > 0 => Ok(Pid(p)),
            _ => Err(format!("pid {v} is not a process id (a positive number, as `ps` shows)")),
        }
    }
    /// The number.
    pub fn get(self) -> i32 {
        self.0
    }
}

impl std::fmt::Display for Pid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl Serialize for Pid {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_i32(self.0)
    }
}

/// Most pids one `set` takes.
pub const MAX_PIDS: usize = 1024;

/// The processes of one `set`: 1 to [`MAX_PIDS`] pids, in the order given (repeats kept:
/// the audit trail says how many were given).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Pids(Vec<Pid>);

impl Pids {
    /// Checks the count and every pid.
    pub fn new(v: impl IntoIterator<Item = i64>) -> Result<Pids, String> {
        let v: Vec<i64> = v.into_iter().collect();
        if v.is_empty() {
            return Err("set needs at least one PID".into());
        }
        if v.len() > MAX_PIDS {
            return Err(format!("set takes at most {MAX_PIDS} PIDs, got {}", v.len()));
        }
        v.into_iter().map(Pid::new).collect::<Result<_, _>>().map(Pids)
    }
    /// The pids, as given.
    pub fn as_slice(&self) -> &[Pid] {
        &self.0
    }
}

/// What a request does to a cap: leave it (the field absent), clear it (`null` on the wire),
/// or set it (a cap string).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum CapChange {
    /// Leave the cap as it is.
    #[default]
    Keep,
    /// Remove the cap.
    Clear,
    /// Set this cap (for a job, soft 0 means background).
    Set(Cap),
}

impl CapChange {
    /// True for [`CapChange::Keep`] (the field is then left out of the line).
    pub fn is_keep(&self) -> bool {
        matches!(self, CapChange::Keep)
    }
}

impl Serialize for CapChange {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            CapChange::Keep | CapChange::Clear => s.serialize_none(),
            CapChange::Set(c) => s.serialize_str(&wire_cap(c)),
        }
    }
}

/// A cap as the line carries it: its CPUs in full (Rust's shortest form that reads back as
/// the same number, never an exponent), then `!` when hard. [`Cap`]'s `Display` rounds to
/// three decimals, for people; the wire keeps the value exact, so a request reads back as
/// itself.
pub fn wire_cap(c: &Cap) -> String {
    format!("{}{}", c.cpus, if c.hard { "!" } else { "" })
}

/// Serializes an optional cap as [`wire_cap`] or `null`.
pub fn opt_cap<S: Serializer>(c: &Option<Cap>, s: S) -> Result<S::Ok, S::Error> {
    match c {
        Some(c) => s.serialize_str(&wire_cap(c)),
        None => s.serialize_none(),
    }
}

/// A job's cap from a client: the cap grammar and allot's bounds ([`Cap`]'s `FromStr`).
pub fn job_cap(s: &str) -> Result<Cap, String> {
    not_none(s)?;
    s.parse::<Cap>().map_err(|e| e.to_string())
}

/// A currency's cap from a client: hard only ([`Cap::parse_currency`]).
pub fn currency_cap(s: &str) -> Result<Cap, String> {
    not_none(s)?;
    Cap::parse_currency(s).map_err(|e| e.to_string())
}

/// Protocol 2 cleared a cap with the string "none"; protocol 3 sends `null`.
fn not_none(s: &str) -> Result<(), String> {
    if s.trim().eq_ignore_ascii_case("none") {
        return Err(format!("cap {s:?} is not a cap: to remove a cap send \"cap\": null (the CLI's --cap none does)"));
    }
    Ok(())
}
