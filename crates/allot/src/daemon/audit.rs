//! The audit trail: every change anyone asks of the daemon — run, set, fund, move, focus,
//! a config reload — and every refusal of such a request, with who asked (uid, pid),
//! what, and the settings before and after. Each record goes to the log (one line, so
//! journald keeps it) and, as one JSON line, to `audit.log` in the state directory, which
//! is bounded: past `MAX_BYTES` it is rotated once to `audit.log.1`.
//!
//! The before/after come from the desired state itself (registry.rs), compared around
//! the request, so nothing a request changes can escape the record.

use super::registry::{CurrencyId, Desired, JobSpec};
use crate::proto::{AuditChange, AuditRecord, Request};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

/// The file is rotated past this size.
pub const MAX_BYTES: u64 = 8 * 1024 * 1024;

/// Where audit records go.
#[derive(Debug)]
pub struct Audit {
    path: Option<PathBuf>,
    /// Per uid: refusals recorded in the current minute (a refused flood is counted, not
    /// written line by line).
    refusals: std::collections::HashMap<u32, (u64, u32)>,
    /// Refusals not written because of that bound.
    pub unrecorded: u64,
}

/// Refusals recorded per uid per minute; the rest are counted.
const REFUSALS_PER_MINUTE: u32 = 20;

fn settings(j: &JobSpec) -> String {
    format!(
        "tickets {}, cap {}, {}, focus {}{}",
        j.tickets.get(),
        j.cap.map_or("none".into(), |c| c.to_string()),
        if j.background { "background" } else { "foreground" },
        if j.focus { "on" } else { "off" },
        j.rule.as_ref().map(|r| format!(", rule {r}")).unwrap_or_default()
    )
}

/// What changed between two desired states, and the jobs it touched.
pub fn diff(a: &Desired, b: &Desired, name: impl Fn(&CurrencyId) -> String) -> (Vec<AuditChange>, Vec<JobSpec>) {
    let mut out = vec![];
    let mut touched = vec![];
    let label = |j: &JobSpec| match j.id {
        super::registry::JobId::Default(uid) => format!("job {uid}/default in {}", name(&j.currency)),
        super::registry::JobId::Numbered(n) => format!("job {n} of uid {} in {}", j.owner, name(&j.currency)),
    };
    let mut change = |what: String, before: String, after: String| out.push(AuditChange { what, before, after });
    for (id, j) in &b.jobs {
        match a.jobs.get(id) {
            None => change(label(j), "-".into(), settings(j)),
            Some(old) if old != j => change(label(j), settings(old), settings(j)),
            _ => continue,
        }
        touched.push(j.clone());
    }
    for (id, j) in &a.jobs {
        if !b.jobs.contains_key(id) {
            change(label(j), settings(j), "-".into());
            touched.push(j.clone());
        }
    }
    for (c, f) in &b.funding {
        if a.funding.get(c) != Some(f) {
            change(format!("currency {}", name(c)), a.funding.get(c).map_or("-".into(), |x| format!("funding {x}")), format!("funding {f}"));
        }
    }
    (out, touched)
}

/// A request as the CLI would spell it.
pub fn describe(r: &Request) -> String {
    let opt = |k: &str, v: &Option<String>| v.as_ref().map(|v| format!(" {k} {v}")).unwrap_or_default();
    let num = |k: &str, v: &Option<i64>| v.map(|v| format!(" {k} {v}")).unwrap_or_default();
    let force = |f: bool| if f { " --force" } else { "" };
    match r {
        Request::Run { tickets, currency, cap, background, force: f } => format!(
            "run{}{}{}{}{}",
            num("-t", tickets),
            opt("--currency", currency),
            opt("--cap", cap),
            if *background { " --background" } else { "" },
            force(*f)
        ),
        Request::Set { pids, tickets, cap, background, force: f } => format!(
            "set {}{}{}{}{}",
            pids.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(" "),
            num("-t", tickets),
            opt("--cap", cap),
            match background {
                Some(true) => " --background",
                Some(false) => " --foreground",
                None => "",
            },
            force(*f)
        ),
        Request::Fund { currency, funding } => {
            format!("fund{}{}", currency.as_ref().map(|c| format!(" {c}")).unwrap_or_default(), funding.map(|f| format!(" {f}")).unwrap_or_default())
        }
        Request::Focus { pid, on } => format!("focus{} {pid}", if *on { "" } else { " --off" }),
        Request::Move { pid, currency, force: f } => format!("move {pid} {currency}{}", force(*f)),
        Request::Status {} => "status".into(),
        Request::Show { user } => format!("show{}", opt("--user", user)),
        Request::Log { .. } => "log".into(),
        Request::Explain { target } => format!("explain {target}"),
        Request::RulesTest { pid } => format!("rules test {pid}"),
    }
}

/// Does a request ask for a change (and so belong in the audit trail)?
pub fn changes_something(r: &Request) -> bool {
    match r {
        Request::Status {} | Request::Show { .. } | Request::Log { .. } | Request::Explain { .. } | Request::RulesTest { .. } => false,
        Request::Fund { funding, .. } => funding.is_some(),
        _ => true,
    }
}

impl Audit {
    /// Records go to `path` (None: the log only).
    pub fn new(path: Option<PathBuf>) -> Self {
        Self { path, refusals: Default::default(), unrecorded: 0 }
    }

    /// Records one request's outcome.
    pub fn record(&mut self, r: AuditRecord) {
        if r.refused.is_some() && r.uid != 0 {
            let minute = (r.time / 60.0) as u64;
            let e = self.refusals.entry(r.uid).or_insert((minute, 0));
            if e.0 != minute {
                *e = (minute, 0);
            }
            e.1 += 1;
            if e.1 > REFUSALS_PER_MINUTE {
                self.unrecorded += 1;
                return;
            }
            if self.refusals.len() > 4096 {
                self.refusals.retain(|_, (m, _)| *m == minute);
            }
        }
        let what = if r.changes.is_empty() {
            "no change".to_string()
        } else {
            r.changes.iter().map(|c| format!("{}: {} → {}", c.what, c.before, c.after)).collect::<Vec<_>>().join("; ")
        };
        match &r.refused {
            Some(why) => log::info!("audit: uid {} (pid {}) {} refused: {why}", r.uid, r.pid, r.request),
            None => log::info!("audit: uid {} (pid {}) {}: {what}", r.uid, r.pid, r.request),
        }
        let Some(p) = &self.path else { return };
        if std::fs::metadata(p).is_ok_and(|m| m.len() > MAX_BYTES) {
            let _ = std::fs::rename(p, p.with_extension("log.1"));
        }
        let line = serde_json::to_string(&r).unwrap_or_default() + "\n";
        // Root's only: it holds every user's requests (`allot log` shows a user their own).
        let w = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(p)
            .and_then(|f| f.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600)).map(|()| f))
            .and_then(|mut f| f.write_all(line.as_bytes()));
        if let Err(e) = w {
            log::error!("could not append to the audit file {}: {e}", p.display());
        }
    }

    /// The last `limit` records matching `keep`, oldest first (the rotated file too).
    pub fn read(&self, limit: usize, keep: impl Fn(&AuditRecord) -> bool) -> Vec<AuditRecord> {
        let Some(p) = &self.path else { return vec![] };
        let mut out = vec![];
        for f in [p.with_extension("log.1"), p.clone()] {
            let Ok(text) = std::fs::read_to_string(&f) else { continue };
            out.extend(text.lines().filter_map(|l| serde_json::from_str::<AuditRecord>(l).ok()).filter(|r| keep(r)));
        }
        let skip = out.len().saturating_sub(limit);
        out.split_off(skip)
    }
}
