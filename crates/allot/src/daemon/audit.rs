//! The audit trail: every change anyone asks of the daemon — run, set, fund, move, focus,
//! a config reload — and every refusal of such a request, with who asked (uid, pid),
//! what, and the settings before and after. Each record goes to the journal (under
//! systemd one entry with fields to filter on, else one log line: journal.rs) and, as one
//! JSON line, to a file in the state directory.
//!
//! Bounded so that no user can push anyone else's records out:
//! - root's records (uid 0: its requests and config reloads) go to a file of their own,
//!   `audit-root.log`, and are never dropped: only root can fill it;
//! - every other user's go to `audit.log`, at most [`RECORDS_PER_MINUTE`] records or
//!   [`BYTES_PER_MINUTE`] a minute per user (uids that are no login user's share one
//!   budget, as they share one request budget); past that, requests are counted and the
//!   minute ends with one summary record ("uid N: K more changes not recorded
//!   individually"). The journal gets exactly the records the file gets;
//! - each file is rotated once, to `.1`, past [`MAX_BYTES`].
//!
//! Client strings (currency names, caps) are spelled quoted and escaped when they are not
//! plain words, and cut at [`MAX_ARG`] characters, so no record can be made to read as
//! another or grow with what a client sends; `set`'s pids are deduplicated and at most
//! [`PIDS_SHOWN`] listed.
//!
//! The before/after come from the desired state itself (registry.rs), compared around
//! the request, so nothing a request changes can escape the record.

mod journal;
mod text;

pub use journal::{RECORD_ID, SUMMARY_ID};
pub use text::{arg, changes_something, describe, diff};

use crate::proto::AuditRecord;
use std::collections::{BTreeSet, HashMap};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// A file is rotated past this size.
pub const MAX_BYTES: u64 = 8 * 1024 * 1024;
/// Records of one non-root user written individually per minute; the rest are counted.
pub const RECORDS_PER_MINUTE: u32 = 30;
/// Bytes of one non-root user's records written per minute (a record that starts within
/// the budget is written whole).
pub const BYTES_PER_MINUTE: u64 = 64 * 1024;
/// The most records one `allot log` returns.
pub const MAX_LOG_LIMIT: usize = 10_000;
/// Bytes read from the end of each trail (users', root's) by a `log` served in the event
/// loop: about 3,000 records of `set`, parsed in a few milliseconds.
pub const LOOP_READ_BYTES: u64 = 512 * 1024;
/// A client string in a record is cut at this many characters.
pub const MAX_ARG: usize = 64;
/// `set`'s pids listed in a record.
pub const PIDS_SHOWN: usize = 8;
/// The users' trail, in the state directory.
pub const USERS_FILE: &str = "audit.log";
/// Root's trail, beside the users' file.
pub const ROOT_FILE: &str = "audit-root.log";
/// Users named in one summary record.
const SUMMARY_NAMES: usize = 64;

/// One non-root budget's current minute.
#[derive(Debug, Default)]
struct Window {
    minute: u64,
    records: u32,
    bytes: u64,
    /// Requests not written individually: done, refused.
    done: u64,
    refused: u64,
    /// Who asked, whose jobs they touched, which jobs (bounded).
    uids: BTreeSet<u32>,
    owners: BTreeSet<u32>,
    jobs: BTreeSet<String>,
}

/// Where audit records go.
#[derive(Debug)]
pub struct Audit {
    /// The users' file (root's is beside it).
    path: Option<PathBuf>,
    /// Per budget (limits::bucket): the current minute.
    windows: HashMap<u32, Window>,
    /// Records not written individually (summarised).
    pub unrecorded: u64,
    /// Where records go instead of log lines: the journal, under systemd.
    journal: Option<allot_linux::ipc::journal::Journal>,
    /// The journal's last send failed (its failure is logged once, not per record).
    journal_failed: bool,
}

/// Root's trail beside the users' file `users`.
pub fn root_file(users: &Path) -> PathBuf {
    users.with_file_name(ROOT_FILE)
}

/// A file's one rotated predecessor.
fn rotated(p: &Path) -> PathBuf {
    let mut s = p.as_os_str().to_owned();
    s.push(".1");
    PathBuf::from(s)
}

/// The summary of a minute's records not written individually.
fn summary(key: u32, w: &Window) -> AuditRecord {
    let first = w.uids.iter().next().copied().unwrap_or(key);
    let who = if key == super::limits::SHARED {
        let list: Vec<String> = w.uids.iter().take(8).map(|u| u.to_string()).collect();
        format!("uids that are no login user's ({}{})", list.join(", "), if w.uids.len() > 8 { ", …" } else { "" })
    } else {
        format!("uid {key}")
    };
    let day = w.minute % (24 * 60);
    let mut owners: BTreeSet<u32> = w.owners.clone();
    owners.extend(w.uids.iter().take(SUMMARY_NAMES));
    AuditRecord {
        time: ((w.minute + 1) * 60) as f64,
        uid: first,
        pid: 0,
        request: format!(
            "{who}: {} more changes not recorded individually ({} done, {} refused) in the minute from {:02}:{:02} UTC; a user's records are kept one by one up to {RECORDS_PER_MINUTE} or {} KiB a minute",
            w.done + w.refused,
            w.done,
            w.refused,
            day / 60,
            day % 60,
            BYTES_PER_MINUTE / 1024
        ),
        refused: None,
        changes: vec![],
        jobs: w.jobs.iter().cloned().collect(),
        owners: owners.into_iter().collect(),
    }
}

impl Audit {
    /// Users' records go to `path`, root's beside it (None: the log only).
    pub fn new(path: Option<PathBuf>) -> Self {
        Self { path, windows: Default::default(), unrecorded: 0, journal: None, journal_failed: false }
    }

    /// Records one request's outcome, charged to the asking uid.
    pub fn record(&mut self, r: AuditRecord) {
        self.record_as(r.uid, r)
    }

    /// Records one request's outcome, charged to budget `key` (`limits::bucket` of the
    /// asking uid: 0 for root, whose records are never dropped).
    pub fn record_as(&mut self, key: u32, r: AuditRecord) {
        let minute = (r.time.max(0.0) / 60.0) as u64;
        self.flush(minute);
        let line = serde_json::to_string(&r).unwrap_or_default() + "\n";
        if key != 0 {
            let w = self.windows.entry(key).or_insert_with(|| Window { minute, ..Default::default() });
            if w.records >= RECORDS_PER_MINUTE || w.bytes >= BYTES_PER_MINUTE {
                match r.refused {
                    Some(_) => w.refused += 1,
                    None => w.done += 1,
                }
                if w.uids.len() < SUMMARY_NAMES {
                    w.uids.insert(r.uid);
                }
                for o in r.owners.iter().take(SUMMARY_NAMES.saturating_sub(w.owners.len())) {
                    w.owners.insert(*o);
                }
                for j in r.jobs.iter().take(SUMMARY_NAMES.saturating_sub(w.jobs.len())) {
                    w.jobs.insert(j.clone());
                }
                self.unrecorded += 1;
                return;
            }
            w.records += 1;
            w.bytes += line.len() as u64;
        }
        self.write(key == 0, &r, &line, false);
    }

    /// Ends every budget's minute before `minute` (Unix time / 60): a minute with records
    /// not written individually gets its summary now. Called with every request, so a
    /// summary is written by the first request after its minute.
    pub fn flush(&mut self, minute: u64) {
        let mut ended: Vec<AuditRecord> = vec![];
        self.windows.retain(|key, w| {
            if w.minute >= minute {
                return true;
            }
            if w.done + w.refused > 0 {
                ended.push(summary(*key, w));
            }
            false
        });
        ended.sort_by(|a, b| a.time.total_cmp(&b.time));
        for r in ended {
            let line = serde_json::to_string(&r).unwrap_or_default() + "\n";
            self.write(false, &r, &line, true);
        }
    }

    /// [`Self::flush`] at the present time.
    pub fn flush_now(&mut self) {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        self.flush(now / 60);
    }

    /// One record (or a minute's summary): its journal entry or log line, then its line in
    /// root's or the users' file. When the file cannot be written (a full disk) the
    /// journal's is the record.
    fn write(&mut self, root: bool, r: &AuditRecord, line: &str, summary: bool) {
        if let Some(text) = self.journal_or_line(r, summary) {
            log::info!("{text}");
        }
        let Some(users) = &self.path else { return };
        let p = if root { root_file(users) } else { users.clone() };
        if std::fs::metadata(&p).is_ok_and(|m| m.len() > MAX_BYTES) {
            let _ = std::fs::rename(&p, rotated(&p));
        }
        // Root's only: it holds every user's requests (`allot log` shows a user their own).
        let w = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&p)
            .and_then(|f| f.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600)).map(|()| f))
            .and_then(|mut f| f.write_all(line.as_bytes()));
        if let Err(e) = w {
            log::error!("could not append to the audit file {}: {e}; the journal's audit record is the record", p.display());
        }
    }

    /// The last `limit` (at most [`MAX_LOG_LIMIT`]) records matching `keep`, oldest
    /// first, from at most [`LOOP_READ_BYTES`] of each trail's end: cheap enough for the
    /// event loop.
    pub fn read(&self, limit: usize, keep: impl Fn(&AuditRecord) -> bool) -> Vec<AuditRecord> {
        let Some(p) = &self.path else { return vec![] };
        read_trail(p, limit, LOOP_READ_BYTES, keep)
    }
}

/// The last `limit` (at most [`MAX_LOG_LIMIT`]) records matching `keep`, oldest first,
/// from both trails beside `users` (users' and root's, each with its rotated file),
/// reading at most `max_bytes` from the end of each trail. A free function over a path,
/// so a connection's thread can serve `allot log` without the daemon's state.
pub fn read_trail(users: &Path, limit: usize, max_bytes: u64, keep: impl Fn(&AuditRecord) -> bool) -> Vec<AuditRecord> {
    let limit = limit.clamp(1, MAX_LOG_LIMIT);
    let mut out = vec![];
    for newest in [users.to_path_buf(), root_file(users)] {
        let older = rotated(&newest);
        out.extend(tail(&[newest, older], limit, max_bytes, &keep));
    }
    out.sort_by(|a, b| a.time.total_cmp(&b.time));
    let skip = out.len().saturating_sub(limit);
    out.split_off(skip)
}

/// The newest `limit` records matching `keep` in `files` (newest file first), from at most
/// `max_bytes` of their ends; oldest first. A line cut by the bound, torn or not a record
/// is skipped.
fn tail(files: &[PathBuf], limit: usize, max_bytes: u64, keep: &impl Fn(&AuditRecord) -> bool) -> Vec<AuditRecord> {
    let mut found = vec![];
    let mut budget = max_bytes;
    for f in files {
        if found.len() >= limit || budget == 0 {
            break;
        }
        let Ok(mut file) = std::fs::File::open(f) else { continue };
        let len = file.metadata().map_or(0, |m| m.len());
        let start = len.saturating_sub(budget);
        if file.seek(SeekFrom::Start(start)).is_err() {
            continue;
        }
        let mut buf = Vec::with_capacity((len - start) as usize);
        if file.take(len - start).read_to_end(&mut buf).is_err() {
            continue;
        }
        budget = budget.saturating_sub(buf.len() as u64);
        let mut text = &buf[..];
        if start > 0 {
            match text.iter().position(|&b| b == b'\n') {
                Some(i) => text = &text[i + 1..],
                None => continue,
            }
        }
        for line in text.split(|&b| b == b'\n').rev().filter(|l| !l.is_empty()) {
            if let Ok(r) = serde_json::from_slice::<AuditRecord>(line) {
                if keep(&r) {
                    found.push(r);
                    if found.len() >= limit {
                        break;
                    }
                }
            }
        }
    }
    found.reverse();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(uid: u32, minute: u64, i: usize) -> AuditRecord {
        AuditRecord {
            time: (minute * 60) as f64 + i as f64 * 0.001,
            uid,
            pid: i as i32,
            request: format!("set {i} -t 5"),
            refused: (i % 2 == 1).then(|| "no".into()),
            changes: vec![],
            jobs: vec![format!("{i}")],
            owners: vec![uid],
        }
    }

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("allot-audit-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d.join("audit.log")
    }

    fn lines(p: &Path) -> Vec<AuditRecord> {
        std::fs::read_to_string(p).unwrap_or_default().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }

    #[test]
    fn a_user_past_the_budget_is_summarised_once_a_minute_and_root_never() {
        let p = dir("budget");
        let mut a = Audit::new(Some(p.clone()));
        let m = 29_000_000;
        for i in 0..100 {
            a.record(rec(1000, m, i));
            a.record(rec(0, m, i));
        }
        a.record_as(super::super::limits::SHARED, rec(200_000, m, 0));
        assert_eq!(lines(&p).len(), RECORDS_PER_MINUTE as usize + 1, "the user's budget and the shared uid's first");
        assert_eq!(lines(&root_file(&p)).len(), 100, "root's records are all kept, in their own file");
        assert_eq!(a.unrecorded, 100 - RECORDS_PER_MINUTE as u64);
        // The next minute: the summary first, then the user's records again.
        a.flush(m);
        assert_eq!(lines(&p).len(), RECORDS_PER_MINUTE as usize + 1, "no summary before the minute ends");
        a.record(rec(1000, m + 1, 0));
        let all = lines(&p);
        let s = &all[all.len() - 2];
        assert_eq!(s.request.split(" (").next().unwrap(), "uid 1000: 70 more changes not recorded individually");
        assert!(s.request.contains("(35 done, 35 refused) in the minute from"), "{}", s.request);
        assert_eq!((s.uid, s.time, s.owners.clone()), (1000, ((m + 1) * 60) as f64, vec![1000]));
        assert_eq!(s.jobs.len(), 64, "a summary names a bounded number of jobs");
        assert_eq!(all.last().unwrap().request, "set 0 -t 5");
        // The byte budget: big records stop sooner.
        let mut big = rec(1001, m + 1, 0);
        big.request = "x".repeat(20_000);
        for _ in 0..10 {
            a.record(big.clone());
        }
        assert_eq!(lines(&p).iter().filter(|r| r.uid == 1001).count(), 4, "64 KiB: three whole records and the one that starts within");
        std::fs::remove_dir_all(p.parent().unwrap()).unwrap();
    }

    #[test]
    fn reading_is_bounded_in_records_and_bytes_and_merges_both_trails() {
        let p = dir("read");
        let mut a = Audit::new(Some(p.clone()));
        let m = 29_000_000;
        // Past a budget the records are summarised: write the users' file directly.
        let mut text = String::new();
        for i in 0..20_000 {
            text.push_str(&(serde_json::to_string(&rec(1000, m, i)).unwrap() + "\n"));
        }
        std::fs::write(rotated(&p), &text).unwrap();
        std::fs::write(&p, format!("{}{{torn", serde_json::to_string(&rec(1000, m + 5, 1)).unwrap() + "\n")).unwrap();
        a.record(rec(0, m + 2, 7));
        let all = a.read(usize::MAX, |_| true);
        assert!(all.len() < 20_000 && all.len() > 1000, "{} records from 512 KiB of each trail", all.len());
        assert_eq!(all.last().unwrap().time, ((m + 5) * 60) as f64 + 0.001, "newest last");
        assert!(all.iter().any(|r| r.uid == 0), "root's trail is merged in");
        assert!(all.windows(2).all(|w| w[0].time <= w[1].time), "oldest first");
        assert_eq!(read_trail(&p, 100_000, u64::MAX, |_| true).len(), MAX_LOG_LIMIT);
        let odd = read_trail(&p, 3, u64::MAX, |r| r.pid % 2 == 1);
        assert_eq!(odd.iter().map(|r| r.pid).collect::<Vec<_>>(), vec![19_999, 7, 1]);
        assert!(read_trail(&p, 10, 10, |_| true).is_empty(), "a bound smaller than a line reads nothing whole");
        std::fs::remove_dir_all(p.parent().unwrap()).unwrap();
    }
}
