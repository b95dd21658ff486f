//! The socket protocol, shared by the daemon and the CLI: one JSON request line from the
//! client, one JSON reply line from the daemon. The daemon learns who is asking from the
//! socket (SO_PEERCRED, a pidfd), never from the request.
//!
//! Every line carries the protocol version `v`, so a CLI and a daemon of different
//! versions (after an upgrade) say so in one sentence instead of failing on a field.
//! docs/protocol.md describes it for other clients (proto_doc_tests.rs holds it to this).

use allot_model::{Cap, Funding, Tickets};
use serde::{Deserialize, Serialize};

#[path = "proto_error.rs"]
mod error;
#[path = "proto_explain.rs"]
mod explain;
#[path = "proto_fields.rs"]
mod fields;
#[path = "proto_mem.rs"]
mod mem;
#[path = "proto_wire.rs"]
mod wire;
pub use error::{ErrorKind, Refusal};
pub use explain::{AuditChange, AuditRecord, ExplainView, LogView, Reason, RuleCheck, RulesView};
pub use fields::{wire_cap, CapChange, Pid, Pids, MAX_PIDS};
pub use mem::{job_mem, MemChange};

/// This build's protocol version. Version 1 (allot 0.1's first daemon) had no `v`;
/// version 2 sent tickets, caps and pids unchecked and cleared a cap with "none"; version
/// 3 clears it with `null` and refuses a bad value where the line is decoded.
pub const PROTOCOL: u32 = 3;

/// Largest request the daemon reads.
pub const MAX_REQUEST: usize = 64 * 1024;

/// A request, its values typed: what the decoder hands the daemon has been checked
/// ([`decode_request`]: unknown fields refused, then every value). The daemon still checks
/// what only it knows (the machine's CPUs, who owns a process): it trusts no client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase", try_from = "wire::Raw")]
pub enum Request {
    /// Daemon and kernel facts.
    Status {},
    /// Jobs and currencies.
    Show {
        /// Only this user's jobs.
        user: Option<String>,
    },
    /// Put the calling process in a new job (it then execs the command). The process is
    /// the one that connected (SO_PEERPIDFD) or sent its pidfd with the request.
    Run {
        /// Tickets (default 100).
        tickets: Option<Tickets>,
        /// Named currency or user; default the caller's own.
        currency: Option<String>,
        /// Cap, e.g. "0.5!" (soft 0: background); None: uncapped.
        #[serde(serialize_with = "fields::opt_cap")]
        cap: Option<Cap>,
        /// Background (soft cap 0).
        background: bool,
        /// Root only: take the process out of a cgroup another manager owns.
        force: bool,
        /// Memory cap, e.g. "4G!" (hard) or "4G" (soft); None: none (left off the line).
        #[serde(serialize_with = "mem::opt_mem", skip_serializing_if = "Option::is_none")]
        mem: Option<allot_model::memory::MemCap>,
        /// An OOM kill in the job kills all of it (cgroup v2 `memory.oom.group`); false
        /// is left off the line.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        oom_group: bool,
    },
    /// Change the jobs of running processes: all of them or none.
    Set {
        /// Processes (1..1024).
        pids: Pids,
        /// New tickets.
        tickets: Option<Tickets>,
        /// The cap: kept (absent), cleared (null) or set (soft 0: background).
        #[serde(skip_serializing_if = "CapChange::is_keep")]
        cap: CapChange,
        /// Some(true): background; Some(false): foreground.
        background: Option<bool>,
        /// Root only: take processes out of cgroups other managers own.
        force: bool,
        /// The memory cap: kept (absent), cleared (null) or set.
        #[serde(skip_serializing_if = "MemChange::is_keep")]
        mem: MemChange,
        /// Some(true): an OOM kill in the job kills all of it; Some(false): one process,
        /// the kernel's default; None (absent): kept.
        #[serde(skip_serializing_if = "Option::is_none")]
        oom_group: Option<bool>,
    },
    /// Show or set a currency's funding.
    Fund {
        /// Currency or user; None lists all.
        currency: Option<String>,
        /// New funding; None shows.
        funding: Option<Funding>,
        /// The currency's hard cap ("4!"): kept (absent), cleared (null) or set.
        #[serde(skip_serializing_if = "CapChange::is_keep")]
        cap: CapChange,
    },
    /// Mark the job of a process as the one its user is waiting on (focus: boosted).
    Focus {
        /// The process.
        pid: Pid,
        /// On (true) or off.
        on: bool,
    },
    /// Why a job is boosted, held, capped, niced or background now, since when, and the
    /// numbers that decided it.
    Explain {
        /// A pid, or a job as `show` names it ("7", "alice/default").
        target: String,
    },
    /// Which config rule matches a process and what it would do.
    RulesTest {
        /// The process.
        pid: Pid,
    },
    /// The audit trail: changes made and refused (root sees all; a user, their own).
    Log {
        /// Only records by or about this user.
        user: Option<String>,
        /// Only records about this job ("7", "alice/default").
        job: Option<String>,
        /// At most this many, the latest (default 50).
        limit: Option<usize>,
    },
    /// Move a process into another currency (root's).
    Move {
        /// The process.
        pid: Pid,
        /// Named currency or user.
        currency: String,
        /// Root only: take the process out of a cgroup another manager owns.
        force: bool,
    },
}

/// Why a request line could not be read, before any request handling.
#[derive(Debug, Clone, PartialEq)]
pub enum LineError {
    /// Not JSON, or not a request this daemon knows.
    Malformed(String),
    /// A request of the right shape with a value out of bounds (tickets 0, a pid of -1, a
    /// cap of "2/0"): the sentence names the value and what is allowed.
    Invalid(String),
    /// The client speaks another protocol version.
    Version(u32),
}

impl std::fmt::Display for LineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LineError::Malformed(e) => {
                write!(f, "malformed request: {e}; send one JSON object per line, e.g. {{\"v\":{PROTOCOL},\"op\":\"status\"}}")
            }
            LineError::Invalid(e) => f.write_str(e),
            LineError::Version(v) if *v < PROTOCOL => write!(
                f,
                "this allot client speaks protocol {v}, the daemon speaks {PROTOCOL}: use the allot binary installed with the daemon (an upgrade replaced one but not the other)"
            ),
            LineError::Version(v) => write!(
                f,
                "this allot client speaks protocol {v}, newer than the daemon's {PROTOCOL}: restart the daemon so it runs the upgraded binary (e.g. systemctl restart allot)"
            ),
        }
    }
}

/// Encodes a request as a line.
pub fn encode_request(req: &Request) -> Vec<u8> {
    let mut v = serde_json::to_value(req).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        o.insert("v".into(), PROTOCOL.into());
    }
    let mut line = serde_json::to_vec(&v).unwrap_or_default();
    line.push(b'\n');
    line
}

/// Decodes a request line: the version first, then the request's shape with unknown fields
/// refused, then its values (proto_wire.rs).
pub fn decode_request(line: &[u8]) -> Result<Request, LineError> {
    let mut v: serde_json::Value = serde_json::from_slice(line).map_err(|e| LineError::Malformed(e.to_string()))?;
    let Some(o) = v.as_object_mut() else {
        return Err(LineError::Malformed("not a JSON object".into()));
    };
    match o.remove("v") {
        None => return Err(LineError::Version(1)),
        Some(serde_json::Value::Number(n)) if n.as_u64() == Some(PROTOCOL as u64) => {}
        Some(serde_json::Value::Number(n)) => return Err(LineError::Version(n.as_u64().unwrap_or(0).min(u32::MAX as u64) as u32)),
        Some(other) => return Err(LineError::Malformed(format!("\"v\" must be a protocol number, got {other}"))),
    }
    let raw: wire::Raw = serde_json::from_value(v).map_err(|e| LineError::Malformed(e.to_string()))?;
    Request::try_from(raw).map_err(LineError::Invalid)
}

/// A reply line: `{"v":3,"ok":true,"data":{...}}` or
/// `{"v":3,"ok":false,"error":"...","kind":"not_found"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    /// The daemon's protocol (absent from protocol 1 daemons).
    #[serde(default)]
    pub v: Option<u32>,
    /// Success.
    pub ok: bool,
    /// The error, when not ok: one sentence naming the value and what is allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The error's kind, when not ok (absent from protocol 2 daemons).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<ErrorKind>,
    /// The result, when ok.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Response>,
}

impl Reply {
    /// A success.
    pub fn ok(data: Response) -> Self {
        Self { v: Some(PROTOCOL), ok: true, error: None, kind: None, data: Some(data) }
    }
    /// A refusal.
    pub fn err(r: Refusal) -> Self {
        Self { v: Some(PROTOCOL), ok: false, error: Some(r.message), kind: Some(r.kind), data: None }
    }
    /// The refusal this reply carries, if it is one (a sentence without a kind reads as
    /// [`ErrorKind::Other`]).
    pub fn refusal(&self) -> Option<Refusal> {
        (!self.ok).then(|| Refusal::new(self.kind.unwrap_or(ErrorKind::Other), self.error.clone().unwrap_or_else(|| "refused".into())))
    }
    /// The reply as a line.
    pub fn encode(&self) -> Vec<u8> {
        let mut line = serde_json::to_vec(self)
            .or_else(|e| serde_json::to_vec(&Reply::err(Refusal::internal(format!("the daemon could not encode its reply: {e}")))))
            .unwrap_or_else(|_| {
                format!(r#"{{"v":{PROTOCOL},"ok":false,"error":"the daemon could not encode its reply","kind":"internal"}}"#).into_bytes()
            });
        line.push(b'\n');
        line
    }
}

/// A successful result, one kind per request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Response {
    /// `status`.
    Status(Box<StatusView>),
    /// `show`.
    Show(ShowView),
    /// `run`, `move`: the job made.
    Job(JobMade),
    /// `set`, `focus`: the jobs changed.
    Changed(Changed),
    /// `fund NAME [BASE]`.
    Funding(FundingView),
    /// `fund` without a name: every currency.
    Currencies(CurrenciesView),
    /// `log`.
    Log(LogView),
    /// `explain`.
    Explain(ExplainView),
    /// `rules test`.
    Rules(RulesView),
}

/// A job made by `run` or `move`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobMade {
    /// Its id as `show` prints it.
    pub job: String,
    /// Its currency.
    pub currency: String,
    /// Its tickets.
    pub tickets: u32,
    /// Its cgroup, relative to allot's root.
    pub cgroup: String,
}

/// Jobs changed by `set` or `focus`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Changed {
    /// Their ids as `show` prints them.
    pub jobs: Vec<String>,
    /// For focus: on or off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub focus: Option<bool>,
    /// What the user should know about the change, e.g. a process that left its login
    /// session (absent when there is nothing to say).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// One currency's funding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FundingView {
    /// The currency.
    pub currency: String,
    /// Its funding.
    pub funding: u32,
    /// Its hard cap, CPUs ("4!"; absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cap: Option<String>,
}

/// Every currency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CurrenciesView {
    /// The currencies.
    pub currencies: Vec<CurrencyView>,
}

/// One job as `show` reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// CPUs it gets now among the active claimants; for an idle job, what it would get if
    /// it woke (see `active`).
    pub entitlement: f64,
    /// It competes for CPU now.
    pub active: bool,
    /// Smoothed CPU use, CPUs.
    pub usage: f64,
    /// Cap as set, e.g. "0.25!" ("0" for background; None: uncapped).
    pub cap: Option<String>,
    /// Memory cap as set, e.g. "4G!" (None: none, and left off the line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem: Option<String>,
    /// An OOM kill in it kills all of it (`allot run --oom-group`; false: left off the line).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub oom_group: bool,
    /// Background (runs on idle CPU only).
    pub background: bool,
    /// A soft cap is held now (written as cpu.max).
    pub held: bool,
    /// The boost is applied now (weight and slice).
    pub boost: bool,
    /// Focused by its user.
    pub focus: bool,
    /// Nice emulation has changed its weight (its processes' lowest nice).
    pub nice: i32,
    /// Nice emulation is applied now.
    pub niced: bool,
    /// Usage over the boost window, CPUs.
    pub recent: f64,
    /// Threads that ran or waited lately.
    pub runnable: u32,
    /// The weight written to the kernel now.
    pub weight: u32,
    /// The cpu.max quota in force now, CPUs (a hard cap or a held soft cap).
    pub quota: Option<f64>,
    /// Processes in it (None: hidden from this caller).
    pub pids: Option<Vec<i32>>,
    /// Its first process's command line now, as the kernel has it (None: hidden).
    pub command: Option<String>,
    /// Its cgroup, relative to allot's root.
    pub cgroup: String,
    /// Its cgroup's directory as the daemon sees it (on a systemd host, in systemd's scope): `top` and metrics read throttling and pressure there.
    #[serde(default)]
    pub dir: String,
}

/// One currency as `show` and `fund` report it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CurrencyView {
    /// Name (user name for user currencies).
    pub name: String,
    /// "user" or "named".
    pub kind: String,
    /// Base tickets.
    pub funding: u32,
    /// Its hard cap, CPUs ("4!"; absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cap: Option<String>,
    /// The weight written to the kernel now (nice emulation may lower it).
    pub weight: u32,
    /// Jobs in it.
    pub jobs: usize,
    /// Jobs using CPU now.
    pub active: usize,
    /// Summed usage rate, CPUs.
    pub usage: f64,
    /// Its memory against its share (docs/memory.md); absent where memory is not shared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<crate::memory_view::CurrencyMemory>,
}

/// `show`'s reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShowView {
    /// CPUs of the machine.
    pub ncpu: usize,
    /// CPUs used lately by processes outside allot's tree.
    pub outside: f64,
    /// Jobs.
    pub jobs: Vec<JobView>,
    /// Currencies.
    pub currencies: Vec<CurrencyView>,
    /// Other users' pids and commands are hidden from this caller.
    pub hidden: bool,
    /// Jobs whose pids and command are still to be read, with the `cgroup.procs` file to
    /// read: the daemon's connection thread reads them, not its loop (never on the wire).
    #[serde(skip)]
    pub unread: Vec<(usize, std::path::PathBuf)>,
}

/// `status`'s reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusView {
    /// allot's version.
    pub version: String,
    /// The protocol.
    pub protocol: u32,
    /// The daemon's pid.
    pub pid: u32,
    /// Seconds since start.
    pub uptime_s: u64,
    /// "v1" or "v2".
    pub cgroup_version: String,
    /// allot's root in the cpu hierarchy (on a systemd host: the mount; jobs live in scopes).
    pub cgroup_root: String,
    /// Who owns the cgroup tree: "allot" (its own tree) or "systemd" (delegated scopes in
    /// users' slices).
    #[serde(default)]
    pub manager: String,
    /// CPUs.
    pub ncpu: usize,
    /// Jobs.
    pub jobs: usize,
    /// Kernel features found: cpu_idle, custom_slices, psi, delay_accounting.
    pub features: std::collections::BTreeMap<String, bool>,
    /// What is degraded and why.
    pub degraded: Vec<String>,
    /// How new processes are found: "events" (proc connector) or "scan".
    pub tracking: String,
    /// Which processes are placed automatically, in words.
    pub placement: String,
    /// Real-time group scheduling and what allot does about it.
    pub rt: String,
    /// CPUs used lately by processes outside allot's tree.
    pub outside: f64,
    /// The weight of allot's tree against them (`[outside] weight`); None on a systemd host, where that split is systemd's.
    #[serde(default)]
    pub outside_weight: Option<u32>,
    /// The CPU scheduler backend, and whether sched_ext could run here and why not (docs/scx.md).
    #[serde(default)]
    pub scheduler: crate::scheduler_view::SchedulerView,
    /// Block devices and whether each honours cgroup I/O weights.
    #[serde(default)]
    pub io: crate::io_view::IoView,
    /// Counters since start.
    pub counters: Counters,
    /// The last reload (SIGHUP, `systemctl reload allot`) since start: None when there was
    /// none. A refused reload keeps the config in force, which a restart would not.
    #[serde(default)]
    pub last_reload: Option<ReloadOutcome>,
}

/// How a reload of the config ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReloadOutcome {
    /// When, in seconds since the Unix epoch.
    pub time: f64,
    /// The file read.
    pub file: String,
    /// Why it was refused (FILE:LINE: why); None when it was taken.
    pub refused: Option<String>,
}

/// The daemon's counters since start.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Counters {
    /// Processes placed automatically.
    pub placed: u64,
    /// Values changed from outside and re-asserted.
    pub reconciled: u64,
    /// Kernel writes that failed.
    pub write_errors: u64,
    /// Requests served.
    pub requests: u64,
    /// Requests or connections refused by a limit.
    pub limited: u64,
}

#[cfg(test)]
#[path = "proto_tests.rs"]
mod tests;
