//! A request line in two steps: its shape as JSON ([`Raw`]: the op, the field names, each
//! field's JSON type; anything else is malformed), then every value checked into the typed
//! [`Request`] (tickets and funding 1..10000, pids, caps), with one sentence naming the
//! value and what is allowed. The daemon then trusts the types.

use super::fields::{currency_cap, job_cap, CapChange, Pid, Pids};
use super::mem::{job_mem, MemChange};
use super::Request;
use allot_model::{units, Cap, Funding, ModelError, Tickets};
use serde::{Deserialize, Deserializer};
use serde_json::Number;

/// A request as JSON shapes it, before its values are checked.
#[derive(Debug, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase", deny_unknown_fields)]
pub enum Raw {
    /// `status`.
    Status {},
    /// `show`.
    Show {
        #[serde(default)]
        user: Option<String>,
    },
    /// `run`.
    Run {
        #[serde(default)]
        tickets: Option<Number>,
        #[serde(default)]
        currency: Option<String>,
        #[serde(default)]
        cap: Option<String>,
        #[serde(default)]
        background: bool,
        #[serde(default)]
        force: bool,
        #[serde(default)]
        mem: Option<String>,
        #[serde(default)]
        oom_group: bool,
    },
    /// `set`.
    Set {
        pids: Vec<Number>,
        #[serde(default)]
        tickets: Option<Number>,
        #[serde(default, deserialize_with = "present")]
        cap: Option<Option<String>>,
        #[serde(default)]
        background: Option<bool>,
        #[serde(default)]
        force: bool,
        #[serde(default, deserialize_with = "present")]
        mem: Option<Option<String>>,
        #[serde(default)]
        oom_group: Option<bool>,
    },
    /// `fund`.
    Fund {
        #[serde(default)]
        currency: Option<String>,
        #[serde(default)]
        funding: Option<Number>,
        #[serde(default, deserialize_with = "present")]
        cap: Option<Option<String>>,
    },
    /// `focus`.
    Focus {
        pid: Number,
        #[serde(default = "yes")]
        on: bool,
    },
    /// `explain`.
    Explain { target: String },
    /// `rulestest`.
    RulesTest { pid: Number },
    /// `log`.
    Log {
        #[serde(default)]
        user: Option<String>,
        #[serde(default)]
        job: Option<String>,
        #[serde(default)]
        limit: Option<usize>,
    },
    /// `move`.
    Move {
        pid: Number,
        currency: String,
        #[serde(default)]
        force: bool,
    },
}

fn yes() -> bool {
    true
}

/// A field that may be absent (outer `None`), `null` (inner `None`) or a string.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

/// Tickets or funding: a whole number 1..10000; a fraction, a negative or a number past
/// any integer is refused naming the number as it came.
fn count<T: TryFrom<i64, Error = ModelError>>(what: &'static str, n: Option<Number>) -> Result<Option<T>, String> {
    n.map(|n| match n.as_i64() {
        Some(v) => T::try_from(v).map_err(|e| e.to_string()),
        None => Err(ModelError::OutOfRange { what, min: units::MIN, max: units::MAX, got: n.to_string() }.to_string()),
    })
    .transpose()
}

fn whole(n: &Number) -> Result<i64, String> {
    n.as_i64().ok_or_else(|| format!("pid {n} is not a process id (a positive number, as `ps` shows)"))
}

fn pid(n: &Number) -> Result<Pid, String> {
    Pid::new(whole(n)?)
}

fn change(c: Option<Option<String>>, parse: fn(&str) -> Result<Cap, String>) -> Result<CapChange, String> {
    Ok(match c {
        None => CapChange::Keep,
        Some(None) => CapChange::Clear,
        Some(Some(s)) => CapChange::Set(parse(&s)?),
    })
}

impl TryFrom<Raw> for Request {
    type Error = String;
    fn try_from(r: Raw) -> Result<Request, String> {
        Ok(match r {
            Raw::Status {} => Request::Status {},
            Raw::Show { user } => Request::Show { user },
            Raw::Run { tickets, currency, cap, background, force, mem, oom_group } => Request::Run {
                tickets: count::<Tickets>("tickets", tickets)?,
                currency,
                cap: cap.as_deref().map(job_cap).transpose()?,
                background,
                force,
                mem: mem.as_deref().map(job_mem).transpose()?,
                oom_group,
            },
            Raw::Set { pids, tickets, cap, background, force, mem, oom_group } => Request::Set {
                pids: Pids::new(pids.iter().map(whole).collect::<Result<Vec<_>, _>>()?)?,
                tickets: count::<Tickets>("tickets", tickets)?,
                cap: change(cap, job_cap)?,
                background,
                force,
                mem: match mem {
                    None => MemChange::Keep,
                    Some(None) => MemChange::Clear,
                    Some(Some(s)) => MemChange::Set(job_mem(&s)?),
                },
                oom_group,
            },
            Raw::Fund { currency, funding, cap } => {
                Request::Fund { currency, funding: count::<Funding>("funding", funding)?, cap: change(cap, currency_cap)? }
            }
            Raw::Focus { pid: p, on } => Request::Focus { pid: pid(&p)?, on },
            Raw::Explain { target } => Request::Explain { target },
            Raw::RulesTest { pid: p } => Request::RulesTest { pid: pid(&p)? },
            Raw::Log { user, job, limit } => Request::Log { user, job, limit },
            Raw::Move { pid: p, currency, force } => Request::Move { pid: pid(&p)?, currency, force },
        })
    }
}
