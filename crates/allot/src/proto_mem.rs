//! A job's memory cap on the wire (docs/memory.md): `"mem": "64M!"` (hard) or `"4G"`
//! (soft) in `run`, and in `set` kept (absent), cleared (`null`) or set, as `cap` is. The
//! value is checked where the line is decoded ([`job_mem`]) and where the CLI reads its
//! flag; the field is left out of a line that carries none, so a protocol 3 daemon from
//! before memory caps still reads every other request.

use allot_model::memory::MemCap;
use serde::{Serialize, Serializer};

/// What a request does to a job's memory cap: leave it (the field absent), clear it
/// (`null` on the wire), or set it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MemChange {
    /// Leave it as it is.
    #[default]
    Keep,
    /// Remove it.
    Clear,
    /// Set this cap.
    Set(MemCap),
}

impl MemChange {
    /// True for [`MemChange::Keep`] (the field is then left out of the line).
    pub fn is_keep(&self) -> bool {
        matches!(self, MemChange::Keep)
    }
}

impl Serialize for MemChange {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            MemChange::Keep | MemChange::Clear => s.serialize_none(),
            MemChange::Set(m) => s.serialize_str(&m.to_string()),
        }
    }
}

/// Serializes an optional memory cap as its text ([`MemCap`]'s `Display` reads back
/// exactly) or `null`.
pub fn opt_mem<S: Serializer>(m: &Option<MemCap>, s: S) -> Result<S::Ok, S::Error> {
    match m {
        Some(m) => s.serialize_str(&m.to_string()),
        None => s.serialize_none(),
    }
}

/// A job's memory cap from a client: a size, `!` for hard, at least 1M. "none" is not a
/// cap on the wire (`null` clears one; the CLI's `--mem none` sends that).
pub fn job_mem(s: &str) -> Result<MemCap, String> {
    if s.trim().eq_ignore_ascii_case("none") {
        return Err(format!("memory cap {s:?} is not a cap: to remove one send \"mem\": null (the CLI's --mem none does)"));
    }
    s.parse::<MemCap>().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_memory_cap_is_checked_and_none_is_not_one() {
        assert_eq!(job_mem("64M!").unwrap(), MemCap { bytes: 64 << 20, hard: true });
        assert_eq!(job_mem("4G").unwrap(), MemCap { bytes: 4 << 30, hard: false });
        let e = job_mem("none").unwrap_err();
        assert!(e.contains("\"none\"") && e.contains("null"), "{e}");
        for bad in ["0", "512K!", "4Q", "-1G", "lots"] {
            let e = job_mem(bad).unwrap_err();
            assert!(e.contains(&format!("{bad:?}")) && e.contains("4G!"), "{bad}: {e}");
        }
    }
}
