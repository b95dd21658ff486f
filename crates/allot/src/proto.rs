//! The socket protocol: one JSON request line from the client, one JSON reply line from
//! the daemon. The daemon learns who is asking from the socket (SO_PEERCRED), never
//! from the request.

use serde::{Deserialize, Serialize};

/// Largest request the daemon reads.
pub const MAX_REQUEST: usize = 64 * 1024;

/// A request.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase", deny_unknown_fields)]
pub enum Request {
    /// Daemon and kernel facts.
    Status,
    /// Jobs and currencies.
    Show {
        /// Only this user's jobs.
        #[serde(default)]
        user: Option<String>,
    },
    /// Put the calling process in a new job (it then execs the command).
    Run {
        /// Tickets (1..10000).
        #[serde(default)]
        tickets: Option<i64>,
        /// Named currency or user; default the caller's own.
        #[serde(default)]
        currency: Option<String>,
        /// Cap, e.g. "0.5!".
        #[serde(default)]
        cap: Option<String>,
        /// Background (soft cap 0).
        #[serde(default)]
        background: bool,
        /// The command, for display.
        #[serde(default)]
        command: Vec<String>,
    },
    /// Change the jobs of running processes.
    Set {
        /// Processes.
        pids: Vec<i64>,
        /// New tickets.
        #[serde(default)]
        tickets: Option<i64>,
        /// New cap ("none" clears).
        #[serde(default)]
        cap: Option<String>,
        /// Some(true): background; Some(false): foreground.
        #[serde(default)]
        background: Option<bool>,
    },
    /// Show or set a currency's funding.
    Fund {
        /// Currency or user; None lists all.
        #[serde(default)]
        currency: Option<String>,
        /// New funding (1..10000); None shows.
        #[serde(default)]
        funding: Option<i64>,
    },
    /// Mark the job of a process as the one its user is waiting on (seed 002's focus):
    /// boosted regardless of its usage history, still bounded by its entitlement.
    Focus {
        /// The process.
        pid: i64,
        /// On (true) or off.
        #[serde(default = "yes")]
        on: bool,
    },
    /// Move a process into another currency (lott_chuser).
    Move {
        /// The process.
        pid: i64,
        /// Named currency or user.
        currency: String,
    },
}

fn yes() -> bool {
    true
}

/// A reply: `{"ok":true,"data":...}` or `{"ok":false,"error":"..."}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Reply {
    /// Success.
    pub ok: bool,
    /// The error, when not ok: one sentence naming the value and what is allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The result, when ok.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<serde_json::Value>,
}

impl Reply {
    /// A success.
    pub fn ok(data: impl Serialize) -> Self {
        Self { ok: true, error: None, data: Some(serde_json::to_value(data).unwrap_or(serde_json::Value::Null)) }
    }
    /// A refusal.
    pub fn err(e: impl std::fmt::Display) -> Self {
        Self { ok: false, error: Some(e.to_string()), data: None }
    }
}

/// One job as `show` reports it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct JobView {
    /// Job id ("3", or "alice/default" for a user's automatic job).
    pub id: String,
    /// Owner's uid.
    pub uid: u32,
    /// Owner's name (or the uid).
    pub user: String,
    /// Currency name.
    pub currency: String,
    /// Tickets.
    pub tickets: u32,
    /// The currency's funding.
    pub funding: u32,
    /// CPUs it would get now among active claimants (0 when idle).
    pub entitlement: f64,
    /// Smoothed CPU use, CPUs.
    pub usage: f64,
    /// Cap, e.g. "0.25!" (None: uncapped).
    pub cap: Option<String>,
    /// Background (runs on idle CPU only).
    pub background: bool,
    /// A soft cap is being held now (others want the CPU).
    pub held: bool,
    /// Boosted now (using less than its entitlement, or focused).
    pub boost: bool,
    /// Focused by its user.
    pub focus: bool,
    /// Its processes' nice (the lowest).
    pub nice: i32,
    /// Usage over the boost window, CPUs.
    pub recent: f64,
    /// Threads in it.
    pub threads: usize,
    /// The weight written to the kernel now (tickets, adjusted by nice emulation/boost).
    pub weight: u32,
    /// The cpu.max quota in force now, CPUs (hard cap, held soft cap, or boost bound).
    pub quota: Option<f64>,
    /// Processes in it.
    pub pids: Vec<i32>,
    /// Command of its first process.
    pub command: String,
    /// Its cgroup, relative to allot's root.
    pub cgroup: String,
}

/// One currency as `show` and `fund` report it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CurrencyView {
    /// Name (user name for user currencies).
    pub name: String,
    /// "user" or "named".
    pub kind: String,
    /// Base tickets.
    pub funding: u32,
    /// Jobs in it.
    pub jobs: usize,
    /// Jobs using CPU now.
    pub active: usize,
    /// Summed usage rate, CPUs.
    pub usage: f64,
}

/// `show`'s reply.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ShowView {
    /// CPUs of the machine.
    pub ncpu: usize,
    /// Jobs.
    pub jobs: Vec<JobView>,
    /// Currencies.
    pub currencies: Vec<CurrencyView>,
}
