//! Scheduling policies as the probe and the benchmarks name them (`normal`, `nice:N`,
//! `batch`, `idle`, `fifo:P`, `rr:P`, and Judin's combination `batch:N`), parsed with
//! one clear error and applied with sched_setattr(2).

use allot_linux::process::sched::{self, SchedAttr, SCHED_BATCH, SCHED_FIFO, SCHED_IDLE, SCHED_OTHER, SCHED_RR};
use std::fmt;
use std::str::FromStr;

/// What is allowed, quoted in every parse error.
pub const ALLOWED: &str = "use normal, nice:N (-20..19), batch, batch:N (nice N), idle, fifo:P (1..99), rr:P (1..99)";

/// A scheduling policy for one task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "class", content = "value", rename_all = "lowercase")]
pub enum Policy {
    /// SCHED_OTHER at a nice value (`normal` = nice 0).
    Nice(i32),
    /// SCHED_BATCH at a nice value (Judin 2016: `chrt --batch 0`, `nice -n 19 chrt --batch 0`).
    Batch(i32),
    /// SCHED_IDLE (Judin 2016: `chrt --idle 0`).
    Idle,
    /// SCHED_FIFO at a real-time priority (the starved-task tutorial step 5: `chrt --fifo 50`).
    Fifo(u32),
    /// SCHED_RR at a real-time priority.
    Rr(u32),
}

impl Default for Policy {
    fn default() -> Self {
        Policy::Nice(0)
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Policy::Nice(0) => write!(f, "normal"),
            Policy::Nice(n) => write!(f, "nice:{n}"),
            Policy::Batch(0) => write!(f, "batch"),
            Policy::Batch(n) => write!(f, "batch:{n}"),
            Policy::Idle => write!(f, "idle"),
            Policy::Fifo(p) => write!(f, "fifo:{p}"),
            Policy::Rr(p) => write!(f, "rr:{p}"),
        }
    }
}

impl FromStr for Policy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim().to_ascii_lowercase();
        let (name, arg) = match t.split_once(':') {
            Some((n, a)) => (n, Some(a)),
            None => (t.as_str(), None),
        };
        let nice = |a: Option<&str>, default: Option<i32>| -> Result<i32, String> {
            match a {
                None => default.ok_or_else(|| format!("policy {s:?} needs a nice value: {ALLOWED}")),
                Some(a) => match a.parse::<i32>() {
                    Ok(n) if (-20..=19).contains(&n) => Ok(n),
                    _ => Err(format!("nice value in {s:?} must be -20..19, got {a:?}")),
                },
            }
        };
        let prio = |a: Option<&str>| -> Result<u32, String> {
            match a {
                None => Ok(50),
                Some(a) => match a.parse::<u32>() {
                    Ok(p) if (1..=99).contains(&p) => Ok(p),
                    _ => Err(format!("real-time priority in {s:?} must be 1..99, got {a:?}")),
                },
            }
        };
        match name {
            "normal" | "other" | "default" if arg.is_none() => Ok(Policy::Nice(0)),
            "nice" => Ok(Policy::Nice(nice(arg, None)?)),
            "batch" => Ok(Policy::Batch(nice(arg, Some(0))?)),
            "idle" if arg.is_none() => Ok(Policy::Idle),
            "fifo" => Ok(Policy::Fifo(prio(arg)?)),
            "rr" => Ok(Policy::Rr(prio(arg)?)),
            _ => Err(format!("unknown policy {s:?}: {ALLOWED}")),
        }
    }
}

impl Policy {
    /// The sched_attr that selects this policy (slice 0 = the kernel's default).
    pub fn attr(&self, slice_ns: u64) -> SchedAttr {
        let (p, nice, prio) = match *self {
            Policy::Nice(n) => (SCHED_OTHER, n, 0),
            Policy::Batch(n) => (SCHED_BATCH, n, 0),
            Policy::Idle => (SCHED_IDLE, 0, 0),
            Policy::Fifo(p) => (SCHED_FIFO, 0, p),
            Policy::Rr(p) => (SCHED_RR, 0, p),
        };
        SchedAttr { sched_policy: p, sched_nice: nice, sched_priority: prio, sched_runtime: slice_ns, ..Default::default() }
    }

    /// True for the real-time classes.
    pub fn is_realtime(&self) -> bool {
        matches!(self, Policy::Fifo(_) | Policy::Rr(_))
    }

    /// Applies the policy (and an EEVDF custom slice, 0 = default) to one task (0 = the
    /// calling thread). A refusal says what was refused and why.
    pub fn apply(&self, tid: i32, slice_ns: u64) -> anyhow::Result<()> {
        if slice_ns != 0 && !matches!(self, Policy::Nice(_) | Policy::Batch(_)) {
            anyhow::bail!("a custom slice applies to normal, nice:N and batch tasks only, not {self}");
        }
        match sched::set(tid, &self.attr(slice_ns)) {
            Ok(()) => Ok(()),
            Err(e) if e.io_kind() == Some(std::io::ErrorKind::PermissionDenied) => {
                // SAFETY: geteuid has no preconditions.
                let uid = unsafe { libc::geteuid() };
                let need = if self.is_realtime() {
                    "real-time policies need root, CAP_SYS_NICE or a large enough RLIMIT_RTPRIO"
                } else {
                    "raising priority (nice below the current value) needs root, CAP_SYS_NICE or RLIMIT_NICE"
                };
                anyhow::bail!("policy {self} is not allowed for uid {uid}: {need} ({e})")
            }
            Err(e) => Err(anyhow::Error::new(e).context(format!("cannot set policy {self}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_form() {
        assert_eq!("normal".parse::<Policy>().unwrap(), Policy::Nice(0));
        assert_eq!("nice:-20".parse::<Policy>().unwrap(), Policy::Nice(-20));
        assert_eq!("batch".parse::<Policy>().unwrap(), Policy::Batch(0));
        assert_eq!("batch:19".parse::<Policy>().unwrap(), Policy::Batch(19));
        assert_eq!("idle".parse::<Policy>().unwrap(), Policy::Idle);
        assert_eq!("FIFO:50".parse::<Policy>().unwrap(), Policy::Fifo(50));
        assert_eq!("rr:1".parse::<Policy>().unwrap(), Policy::Rr(1));
        for p in ["normal", "nice:5", "batch", "batch:19", "idle", "fifo:50", "rr:1"] {
            assert_eq!(p.parse::<Policy>().unwrap().to_string(), p);
        }
    }

    #[test]
    fn one_clear_error() {
        let e = "fast".parse::<Policy>().unwrap_err();
        assert_eq!(e, format!("unknown policy \"fast\": {ALLOWED}"));
        assert!("nice:20".parse::<Policy>().unwrap_err().contains("-20..19"));
        assert!("nice".parse::<Policy>().unwrap_err().contains("needs a nice value"));
        assert!("fifo:0".parse::<Policy>().unwrap_err().contains("1..99"));
        assert!("rr:100".parse::<Policy>().unwrap_err().contains("1..99"));
        assert!("idle:3".parse::<Policy>().unwrap_err().contains("unknown policy"));
    }
}
