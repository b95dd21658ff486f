//! A record in the journal. Under systemd (stderr is the journal stream) each record is
//! one journal entry sent with the native protocol (allot_linux::ipc::journal), with fields
//! that `journalctl` filters on and log shippers read; elsewhere, or when the journal
//! does not take it, it is the text line the daemon's log has always had. Never both.
//!
//! The fields: MESSAGE (that same line), MESSAGE_ID ([`RECORD_ID`], or [`SUMMARY_ID`] for
//! a minute's summary), PRIORITY (6 info; 5 notice for a refusal, so `journalctl -p
//! notice` shows refusals without routine changes), SYSLOG_IDENTIFIER=allot, and
//! ALLOT_UID, ALLOT_PID, ALLOT_REQUEST, ALLOT_REFUSED (refusals only), ALLOT_JOBS and
//! ALLOT_OWNERS (space-separated, absent when empty), as the audit file's JSON has them.
//! Every value is one line with control characters escaped, as the MESSAGE is.

use super::Audit;
use crate::proto::AuditRecord;
use allot_linux::ipc::journal::Journal;
use allot_report::for_terminal;

/// MESSAGE_ID of every audit record (a change or a refusal); fixed, generated once for
/// allot.
pub const RECORD_ID: &str = "c81de62656cb47ff982946831ed4cdbe";
/// MESSAGE_ID of a minute's summary of a user's records not written individually.
pub const SUMMARY_ID: &str = "e2b64d146745455db3349ec7366344f2";
/// SYSLOG_IDENTIFIER of the entries (what the daemon's other lines carry).
pub const IDENTIFIER: &str = "allot";

/// The record's line as written (before the log's escaping): `audit: uid U (pid P) REQUEST:
/// CHANGES`, `… REQUEST refused: WHY`, or `audit: SUMMARY`.
pub fn text(r: &AuditRecord, summary: bool) -> String {
    let what = if r.changes.is_empty() {
        "no change".to_string()
    } else {
        r.changes.iter().map(|c| format!("{}: {} → {}", c.what, c.before, c.after)).collect::<Vec<_>>().join("; ")
    };
    match &r.refused {
        Some(why) => format!("audit: uid {} (pid {}) {} refused: {why}", r.uid, r.pid, r.request),
        None if summary => format!("audit: {}", r.request),
        None => format!("audit: uid {} (pid {}) {}: {what}", r.uid, r.pid, r.request),
    }
}

/// The record's journal fields, in order, with `text` as its MESSAGE.
pub fn fields(r: &AuditRecord, summary: bool, text: &str) -> Vec<(&'static str, String)> {
    let one = |s: &str| for_terminal(s).into_owned();
    let mut f = vec![
        ("MESSAGE", one(text)),
        ("MESSAGE_ID", if summary { SUMMARY_ID } else { RECORD_ID }.to_string()),
        ("PRIORITY", if r.refused.is_some() { "5" } else { "6" }.to_string()),
        ("SYSLOG_IDENTIFIER", IDENTIFIER.to_string()),
        ("ALLOT_UID", r.uid.to_string()),
        ("ALLOT_PID", r.pid.to_string()),
        ("ALLOT_REQUEST", one(&r.request)),
    ];
    if let Some(why) = &r.refused {
        f.push(("ALLOT_REFUSED", one(why)));
    }
    if !r.jobs.is_empty() {
        f.push(("ALLOT_JOBS", r.jobs.iter().map(|j| one(j)).collect::<Vec<_>>().join(" ")));
    }
    if !r.owners.is_empty() {
        f.push(("ALLOT_OWNERS", r.owners.iter().map(|o| o.to_string()).collect::<Vec<_>>().join(" ")));
    }
    f
}

impl Audit {
    /// Sends every record to the journal through `j` from now on (the daemon does when
    /// its stderr is the journal stream).
    pub fn set_journal(&mut self, j: Journal) {
        self.journal = Some(j);
    }

    /// Sends one record to the journal, when there is one; returns the line to log
    /// instead when there is none or it did not take the record (the first failure of a
    /// run of them is logged).
    pub(super) fn journal_or_line(&mut self, r: &AuditRecord, summary: bool) -> Option<String> {
        let line = text(r, summary);
        let Some(j) = &self.journal else { return Some(line) };
        let f = fields(r, summary, &line);
        let refs: Vec<(&str, &[u8])> = f.iter().map(|(k, v)| (*k, v.as_bytes())).collect();
        match j.send(&refs) {
            Ok(_) => {
                self.journal_failed = false;
                None
            }
            Err(e) => {
                if !self.journal_failed {
                    log::warn!("the journal did not take an audit record ({e}); audit records are text lines on stderr until it does");
                    self.journal_failed = true;
                }
                Some(line)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::RECORDS_PER_MINUTE;
    use super::*;
    use crate::daemon::limits;
    use crate::proto::AuditChange;
    use allot_linux::ipc::journal::decode;
    use std::collections::BTreeMap;
    use std::os::unix::net::UnixDatagram;
    use std::path::PathBuf;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("allot-audit-journal-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn rec(uid: u32, time: f64, refused: Option<&str>) -> AuditRecord {
        AuditRecord {
            time,
            uid,
            pid: 4242,
            request: "fund alice 200".into(),
            refused: refused.map(Into::into),
            changes: vec![AuditChange { what: "currency alice".into(), before: "-".into(), after: "funding 200".into() }],
            jobs: vec!["7".into(), "alice/default".into()],
            owners: vec![1000, 1001],
        }
    }

    /// The next entry on `rx`, as a map (every field in these entries is named once).
    fn entry(rx: &UnixDatagram) -> BTreeMap<String, String> {
        let mut buf = vec![0u8; 65536];
        let n = rx.recv(&mut buf).expect("an entry");
        let f = decode(&buf[..n]).unwrap();
        let m: BTreeMap<String, String> = f.iter().map(|(k, v)| (k.clone(), String::from_utf8(v.clone()).unwrap())).collect();
        assert_eq!(m.len(), f.len(), "no field twice: {f:?}");
        m
    }

    #[test]
    fn each_record_is_one_journal_entry_with_its_fields() {
        let d = dir("fields");
        let rx = UnixDatagram::bind(d.join("socket")).unwrap();
        rx.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
        let mut a = Audit::new(Some(d.join("audit.log")));
        a.set_journal(Journal::new(d.join("socket")).unwrap());
        let m = 29_000_000u64;
        let t = (m * 60) as f64;

        a.record(rec(0, t, None));
        let e = entry(&rx);
        let want = "audit: uid 0 (pid 4242) fund alice 200: currency alice: - → funding 200";
        assert_eq!(e["MESSAGE"], want);
        assert_eq!(e["MESSAGE"], text(&rec(0, t, None), false), "the same line as without the journal");
        assert_eq!((e["MESSAGE_ID"].as_str(), e["PRIORITY"].as_str(), e["SYSLOG_IDENTIFIER"].as_str()), (RECORD_ID, "6", "allot"));
        assert_eq!((e["ALLOT_UID"].as_str(), e["ALLOT_PID"].as_str(), e["ALLOT_REQUEST"].as_str()), ("0", "4242", "fund alice 200"));
        assert_eq!((e["ALLOT_JOBS"].as_str(), e["ALLOT_OWNERS"].as_str()), ("7 alice/default", "1000 1001"));
        assert!(!e.contains_key("ALLOT_REFUSED"));

        // A refusal, with a reason that carries a client's newline and escape: one line.
        a.record(rec(1000, t, Some("no currency \"x\nfake\u{1b}[2K\"")));
        let e = entry(&rx);
        assert_eq!((e["PRIORITY"].as_str(), e["ALLOT_UID"].as_str()), ("5", "1000"));
        assert_eq!(e["ALLOT_REFUSED"], "no currency \"x\\nfake\\e[2K\"");
        assert!(e["MESSAGE"].ends_with("fund alice 200 refused: no currency \"x\\nfake\\e[2K\""), "{}", e["MESSAGE"]);

        // Past the budget: the rest are counted, and the next minute brings the summary.
        for _ in 1..RECORDS_PER_MINUTE {
            a.record(rec(1000, t, None));
            entry(&rx);
        }
        a.record(rec(1000, t, None));
        a.record_as(limits::SHARED, AuditRecord { jobs: vec![], owners: vec![], ..rec(200_000, t + 61.0, None) });
        let s = entry(&rx);
        assert_eq!((s["MESSAGE_ID"].as_str(), s["ALLOT_UID"].as_str(), s["PRIORITY"].as_str()), (SUMMARY_ID, "1000", "6"));
        assert!(s["MESSAGE"].starts_with("audit: uid 1000: 1 more changes not recorded individually"), "{}", s["MESSAGE"]);
        assert_eq!(s["ALLOT_REQUEST"], s["MESSAGE"]["audit: ".len()..]);
        let e = entry(&rx);
        assert_eq!((e["MESSAGE_ID"].as_str(), e["ALLOT_UID"].as_str()), (RECORD_ID, "200000"));
        assert!(!e.contains_key("ALLOT_JOBS") && !e.contains_key("ALLOT_OWNERS"), "empty lists are left out");

        // Exactly one entry per record: nothing more is queued.
        rx.set_nonblocking(true).unwrap();
        assert!(rx.recv(&mut [0u8; 16]).is_err());
        assert_eq!(std::fs::read_to_string(d.join("audit.log")).unwrap().lines().count(), RECORDS_PER_MINUTE as usize + 2, "the file as before");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn the_docs_and_the_systemd_vm_test_name_these_ids() {
        let read = |p: &str| std::fs::read_to_string(format!("{}/../../{p}", env!("CARGO_MANIFEST_DIR"))).unwrap();
        let operate = read("docs/operate.md");
        assert!(operate.contains(&format!("journalctl MESSAGE_ID={RECORD_ID} ALLOT_UID=1000")));
        assert!(operate.contains(&format!("journalctl MESSAGE_ID={SUMMARY_ID}")));
        let vm = read("tests/vm/systemd/allot.sh");
        assert!(vm.contains(&format!("journalctl -o json MESSAGE_ID={RECORD_ID} ALLOT_UID=0")));
        let ids: Vec<&str> = [RECORD_ID, SUMMARY_ID].into();
        assert!(
            ids.iter().all(|id| id.len() == 32 && id.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())),
            "128 bits, as journalctl spells them"
        );
        assert_ne!(RECORD_ID, SUMMARY_ID);
    }

    #[test]
    fn without_a_journal_or_when_it_fails_the_record_is_the_text_line() {
        let d = dir("fallback");
        let r = rec(1000, 0.0, None);
        let line = "audit: uid 1000 (pid 4242) fund alice 200: currency alice: - → funding 200";
        let mut a = Audit::new(None);
        assert_eq!(a.journal_or_line(&r, false).as_deref(), Some(line), "no journal");
        // A journal socket nobody listens on: the send fails, the line is the record.
        a.set_journal(Journal::new(d.join("absent")).unwrap());
        assert_eq!(a.journal_or_line(&r, false).as_deref(), Some(line));
        assert!(a.journal_failed);
        // Once it listens, records go there again.
        let rx = UnixDatagram::bind(d.join("absent")).unwrap();
        assert_eq!(a.journal_or_line(&r, false), None);
        assert!(!a.journal_failed);
        assert_eq!(entry(&rx)["MESSAGE"], line);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
