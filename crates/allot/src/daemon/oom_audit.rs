//! OOM decisions for the audit trail (docs/memory.md, "OOM by share"): every
//! `oom_score_adj` allot raises because a currency is over its share, or gives back when
//! it is within it again, and every OOM kill seen in a currency (its `oom_kill` count
//! growing), as a record naming the currency, its memory use against its share, the pid
//! and the score. A leaf: the daemon's steps hand it decisions (memory_audit.rs).
//!
//! Bounded so that a flood of processes cannot flood the trail: per currency at most
//! [`PER_CURRENCY`] records a minute, and at most [`PER_MINUTE`] in all, with OOM kills
//! counted apart from score changes (a flood of score changes never hides a kill); the
//! rest are counted, and the minute ends with one summary record naming at most
//! [`NAMED`] currencies and their counts. The records go to root's trail (the daemon decided, not
//! a user), with the currency's owner among `owners` so `allot log` shows a user their own.

use crate::proto::{AuditChange, AuditRecord};
use allot_model::memory::human_size;
use std::collections::BTreeMap;

/// Records of one currency written individually per minute.
pub const PER_CURRENCY: u32 = 10;
/// Records of all currencies written individually per minute.
pub const PER_MINUTE: u32 = 100;
/// Currencies named in a minute's summary.
pub const NAMED: usize = 16;

/// One decision allot took, or an OOM kill it saw.
#[derive(Debug, Clone, PartialEq)]
pub struct OomEvent {
    /// The currency, as `show` names it.
    pub currency: String,
    /// Its owner's uid (a user's currency), shown their own records by `allot log`.
    pub owner: Option<u32>,
    /// Its memory use now, bytes.
    pub usage: u64,
    /// Its funded share of the memory available to users (its protection), bytes.
    pub share: u64,
    /// What happened.
    pub what: OomWhat,
}

/// What happened to an `oom_score_adj`, or in a currency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OomWhat {
    /// A process's score raised (the currency is over its share).
    Raised { pid: i32, from: i16, to: i16 },
    /// A process's own score given back (the currency is within its share again).
    GivenBack { pid: i32, from: i16, to: i16 },
    /// The OOM killer killed `new` processes in the currency since the last look.
    Killed { new: u64 },
}

/// One minute's count of what was not written individually.
#[derive(Debug, Default)]
struct Minute {
    minute: u64,
    /// Records written, score changes and kills apart.
    total: [u32; 2],
    /// Per (currency, a kill): records written and not written.
    per: BTreeMap<(String, bool), (u32, u64)>,
}

/// The limiter.
#[derive(Debug, Default)]
pub struct OomAudit {
    now: Minute,
    /// Per currency: the OOM kills counted when it was last looked at.
    pub kills: BTreeMap<String, u64>,
    /// When the currencies' OOM kills were last read.
    pub looked: Option<std::time::Instant>,
}

impl OomAudit {
    /// The records to write for `e` at Unix time `time`: a summary of the previous minute
    /// if one ended with records not written individually, then `e`'s own unless past
    /// the budget (then counted).
    pub fn event(&mut self, time: f64, e: OomEvent) -> Vec<AuditRecord> {
        let minute = (time.max(0.0) / 60.0) as u64;
        let mut out: Vec<AuditRecord> = self.flush(minute).into_iter().collect();
        let kill = matches!(e.what, OomWhat::Killed { .. });
        let (n, dropped) = self.now.per.entry((e.currency.clone(), kill)).or_default();
        if *n >= PER_CURRENCY || self.now.total[kill as usize] >= PER_MINUTE {
            *dropped += 1;
            return out;
        }
        *n += 1;
        self.now.total[kill as usize] += 1;
        out.push(record(time, &e));
        out
    }

    /// The summary of a minute before `minute` (Unix time / 60) with records not written
    /// individually, once; the window moves to `minute`.
    pub fn flush(&mut self, minute: u64) -> Option<AuditRecord> {
        if self.now.minute >= minute {
            return None;
        }
        let old = std::mem::replace(&mut self.now, Minute { minute, ..Default::default() });
        let dropped: Vec<(&(String, bool), u64)> = old.per.iter().filter(|(_, (_, d))| *d > 0).map(|(c, (_, d))| (c, *d)).collect();
        if dropped.is_empty() {
            return None;
        }
        let all: u64 = dropped.iter().map(|(_, d)| d).sum();
        let mut named: Vec<String> = dropped
            .iter()
            .take(NAMED)
            .map(|((c, kill), d)| format!("{} {d}{}", crate::daemon::audit::arg(c), if *kill { " kills" } else { "" }))
            .collect();
        if dropped.len() > NAMED {
            named.push(format!("and {} more", dropped.len() - NAMED));
        }
        let day = old.minute % (24 * 60);
        Some(AuditRecord {
            time: ((old.minute + 1) * 60) as f64,
            uid: 0,
            pid: 0,
            request: format!(
                "oom: {all} more OOM decisions not recorded individually in the minute from {:02}:{:02} UTC ({}); each currency's are kept one by one up to {PER_CURRENCY} a minute and {PER_MINUTE} in all, OOM kills apart from score changes",
                day / 60,
                day % 60,
                named.join(", ")
            ),
            refused: None,
            changes: vec![],
            jobs: vec![],
            owners: vec![],
        })
    }
}

/// One event's record.
fn record(time: f64, e: &OomEvent) -> AuditRecord {
    let name = crate::daemon::audit::arg(&e.currency);
    let against = format!("uses {} against its share of {}", human_size(e.usage), human_size(e.share));
    let change = |pid: i32, from: i16, to: i16| AuditChange {
        what: format!("pid {pid}"),
        before: format!("oom_score_adj {from}"),
        after: format!("oom_score_adj {to}"),
    };
    let (request, changes) = match e.what {
        OomWhat::Raised { pid, from, to } => (
            format!("oom: currency {name} {against}: oom_score_adj of pid {pid} {from} -> {to}, so the OOM killer takes it before any process within its share"),
            vec![change(pid, from, to)],
        ),
        OomWhat::GivenBack { pid, from, to } => {
            (format!("oom: currency {name} {against}, within it again: oom_score_adj of pid {pid} given back {from} -> {to}"), vec![change(pid, from, to)])
        }
        OomWhat::Killed { new } => (format!("oom: the OOM killer killed {new} process{} in currency {name}, which {against}", if new == 1 { "" } else { "es" }), vec![]),
    };
    // pid: the daemon's own (it decided; the process is named in the record).
    AuditRecord { time, uid: 0, pid: std::process::id() as i32, request, refused: None, changes, jobs: vec![], owners: e.owner.into_iter().collect() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raised(c: &str, pid: i32) -> OomEvent {
        OomEvent { currency: c.into(), owner: Some(1000), usage: 459 << 20, share: 384 << 20, what: OomWhat::Raised { pid, from: 0, to: 413 } }
    }

    /// Hostile: a currency with thousands of processes raised in one minute writes at
    /// most its budget, the others keep theirs, and the minute ends with one summary.
    #[test]
    fn thousands_of_processes_are_bounded_and_summarised_once() {
        let mut a = OomAudit::default();
        let t = 29_000_000.0 * 60.0;
        let mut out = vec![];
        for pid in 0..5000 {
            out.extend(a.event(t + pid as f64 * 0.001, raised("alice", pid)));
        }
        assert_eq!(out.len(), PER_CURRENCY as usize, "one currency's flood");
        assert_eq!(
            out[0].request,
            "oom: currency alice uses 459M against its share of 384M: oom_score_adj of pid 0 0 -> 413, so the OOM killer takes it before any process within its share"
        );
        assert_eq!((out[0].uid, out[0].owners.clone()), (0, vec![1000]));
        assert_eq!((out[0].changes[0].before.as_str(), out[0].changes[0].after.as_str()), ("oom_score_adj 0", "oom_score_adj 413"));
        out.extend(a.event(t + 10.0, raised("bob", 7)));
        assert_eq!(out.len(), PER_CURRENCY as usize + 1, "another currency still has its budget");
        // Thousands of currencies: the total is bounded too.
        for i in 0..3000 {
            out.extend(a.event(t + 20.0, raised(&format!("c{i}"), i)));
        }
        assert_eq!(out.len(), PER_MINUTE as usize);
        // The next minute: one summary first, naming a bounded number of currencies.
        let next = a.event(t + 60.0, raised("alice", 9));
        assert_eq!(next.len(), 2);
        let s = &next[0].request;
        assert!(s.starts_with(&format!("oom: {} more OOM decisions not recorded individually in the minute from", 5000 - 10 + 3000 - 89)), "{s}");
        assert!(s.contains("alice 4990") && s.contains("and 2896 more"), "{s}");
        assert!(s.len() < 1000, "bounded: {} bytes", s.len());
        assert_eq!(next[0].time, t + 60.0);
        assert!(next[1].request.contains("pid 9"));
        assert_eq!(a.flush(29_000_001), None, "the summary is written once");
        // A flood of score changes never hides a kill: kills have a budget of their own.
        for pid in 0..500 {
            a.event(t + 61.0, raised("alice", pid));
        }
        let kill = OomEvent { what: OomWhat::Killed { new: 1 }, ..raised("alice", 0) };
        assert_eq!(a.event(t + 62.0, kill.clone()).len(), 1, "the kill is written");
        for _ in 0..50 {
            a.event(t + 62.0, kill.clone());
        }
        let s = a.flush(29_000_003).unwrap().request;
        assert!(s.contains("alice 491, alice 41 kills"), "{s}");
    }

    #[test]
    fn give_backs_and_kills_name_the_currency_and_its_share() {
        let mut a = OomAudit::default();
        let e = OomEvent {
            currency: "x y".into(),
            owner: None,
            usage: 300 << 20,
            share: 384 << 20,
            what: OomWhat::GivenBack { pid: 5, from: 413, to: 0 },
        };
        let r = a.event(100.0, e.clone());
        assert_eq!(
            r[0].request,
            "oom: currency \"x y\" uses 300M against its share of 384M, within it again: oom_score_adj of pid 5 given back 413 -> 0"
        );
        assert!(r[0].owners.is_empty());
        let r = a.event(100.0, OomEvent { what: OomWhat::Killed { new: 2 }, ..e });
        assert_eq!(r[0].request, "oom: the OOM killer killed 2 processes in currency \"x y\", which uses 300M against its share of 384M");
    }
}
