//! Login session scopes on a systemd host (`user.slice/user-UID.slice/session-N.scope`),
//! read only: systemd made them, so allot reads their `cpu.stat` and `cgroup.threads` and
//! writes nothing of theirs (docs/systemd.md).

use crate::{read, Result};
use std::path::{Path, PathBuf};

/// One session scope.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SessionScope {
    /// Its user.
    pub uid: u32,
    /// Its directory.
    pub dir: PathBuf,
}

impl SessionScope {
    /// Its unit name (`session-3.scope`).
    pub fn name(&self) -> String {
        self.dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
    }
    /// CPU time its threads used, ns (`cpu.stat` `usage_usec`).
    pub fn usage_ns(&self) -> Result<u64> {
        let p = self.dir.join("cpu.stat");
        super::stat::parse_usage(&p, &read(&p)?)
    }
    /// [`Self::usage_ns`] through files kept open (read again with pread each tick).
    pub fn usage_ns_with(&self, files: &crate::reread::Rereader) -> Result<u64> {
        let p = self.dir.join("cpu.stat");
        super::stat::parse_usage(&p, &files.read(&p)?)
    }
    /// Its first `n` thread ids at most (`cgroup.threads`, or `tasks` in a v1 hierarchy:
    /// systemd's `name=systemd` one on a v1 host), reading no more of the list than they
    /// take: a user's session may hold tens of thousands of threads, and the daemon reads
    /// a bounded number a tick whatever a user starts.
    pub fn threads_upto(&self, n: usize) -> Result<Vec<i32>> {
        use std::io::Read;
        let path = self.dir.join(if self.counted() { "cgroup.threads" } else { "tasks" });
        let io = |source| crate::Error::Io { op: "read", path: path.clone(), source };
        // A thread id is at most 7 digits (pid_max is at most 2^22) and its newline.
        let mut bytes = vec![];
        std::fs::File::open(&path).and_then(|f| f.take(n.saturating_mul(8) as u64).read_to_end(&mut bytes)).map_err(io)?;
        // Only whole lines: the bound may cut the last one.
        let text = String::from_utf8_lossy(&bytes);
        Ok(text.split_inclusive('\n').filter(|l| l.ends_with('\n')).filter_map(|l| l.trim().parse().ok()).take(n).collect())
    }
    /// Whether the kernel counts its CPU time (a cgroup2 directory has `cpu.stat` without
    /// the cpu controller); a v1 `name=systemd` directory has none: its usage is its
    /// threads' own.
    pub fn counted(&self) -> bool {
        !self.dir.join("tasks").exists()
    }
}

/// The session scopes under a cgroup v2 mount, sorted (none when there is no user.slice).
/// Only names systemd gives: `user-UID.slice` with a number, `session-*.scope`.
pub fn list(mount: &Path) -> Vec<SessionScope> {
    let mut out = vec![];
    let Ok(users) = std::fs::read_dir(mount.join("user.slice")) else { return out };
    for u in users.flatten() {
        let name = u.file_name();
        let Some(uid) = name.to_str().and_then(|n| n.strip_prefix("user-")?.strip_suffix(".slice")?.parse::<u32>().ok()) else { continue };
        let Ok(scopes) = std::fs::read_dir(u.path()) else { continue };
        for s in scopes.flatten() {
            let n = s.file_name();
            let is_session = n.to_str().is_some_and(|n| n.starts_with("session-") && n.ends_with(".scope"));
            if is_session && s.file_type().is_ok_and(|t| t.is_dir()) {
                out.push(SessionScope { uid, dir: s.path() });
            }
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_only_session_scopes_of_numbered_user_slices_and_reads_them() {
        let d = std::env::temp_dir().join(format!("allot-sessions-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        for p in [
            "user.slice/user-1001.slice/session-3.scope",
            "user.slice/user-1001.slice/user@1001.service",
            "user.slice/user-1001.slice/allot:user-1001.scope",
            "user.slice/user-1002.slice/session-c1.scope",
            "user.slice/user-x.slice/session-9.scope",
            "user.slice/session-7.scope",
        ] {
            std::fs::create_dir_all(d.join(p)).unwrap();
        }
        // A file named like a scope is not one.
        std::fs::write(d.join("user.slice/user-1002.slice/session-4.scope"), "").unwrap();
        let s3 = d.join("user.slice/user-1001.slice/session-3.scope");
        std::fs::write(s3.join("cpu.stat"), "usage_usec 1500\nuser_usec 1000\n").unwrap();
        std::fs::write(s3.join("cgroup.threads"), "10\n11\n").unwrap();
        let got = list(&d);
        assert_eq!(got.iter().map(|s| (s.uid, s.name())).collect::<Vec<_>>(), [(1001, "session-3.scope".into()), (1002, "session-c1.scope".into())]);
        assert_eq!((got[0].usage_ns().unwrap(), got[0].threads_upto(1024).unwrap()), (1_500_000, vec![10, 11]));
        assert!(got[0].counted(), "a cgroup2 directory counts its usage");
        // v1's name=systemd hierarchy: `tasks`, no usage.
        let v1 = SessionScope { uid: 1002, dir: d.join("user.slice/user-1002.slice/session-c1.scope") };
        std::fs::write(v1.dir.join("tasks"), "20\n21\n").unwrap();
        assert!(!v1.counted());
        assert_eq!(v1.threads_upto(1024).unwrap(), vec![20, 21]);
        // A session of many threads: only the first n are read and returned.
        let many: String = (4_000_000..4_050_000).map(|t| format!("{t}\n")).collect();
        std::fs::write(v1.dir.join("tasks"), many).unwrap();
        assert_eq!(v1.threads_upto(3).unwrap(), vec![4_000_000, 4_000_001, 4_000_002]);
        assert_eq!(v1.threads_upto(1024).unwrap().len(), 1024);
        assert!(v1.threads_upto(0).unwrap().is_empty());
        let kept = crate::reread::Rereader::default();
        assert_eq!(got[0].usage_ns_with(&kept).unwrap(), 1_500_000);
        std::fs::write(s3.join("cpu.stat"), "usage_usec 2500\n").unwrap();
        assert_eq!(got[0].usage_ns_with(&kept).unwrap(), 2_500_000, "read again, not remembered");
        let e = got[1].usage_ns().unwrap_err().to_string();
        assert!(e.contains("session-c1.scope/cpu.stat"), "the error names the file: {e}");
        assert!(list(&d.join("nowhere")).is_empty());
        std::fs::remove_dir_all(&d).unwrap();
    }
}
