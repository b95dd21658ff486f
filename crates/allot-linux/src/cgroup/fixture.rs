//! A fake cgroup file system in a temporary directory, for the backends' tests without
//! root: directories made with the files the kernel would give them, and the files read
//! back to see what a backend wrote.
//!
//! The kernel makes a cgroup's files itself and a write replaces a value; here the
//! files are plain ones written in place ([`crate::write`] never creates or truncates),
//! so a test empties a file ([`Fixture::blank`]) before the write it looks at.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A cgroup v2 directory's files, as a new cgroup has them.
pub const V2_FILES: &[(&str, &str)] = &[
    ("cgroup.procs", ""),
    ("cgroup.threads", ""),
    ("cgroup.subtree_control", ""),
    ("cgroup.kill", ""),
    ("cpu.weight", "100\n"),
    ("cpu.max", "max 100000\n"),
    ("cpu.idle", "0\n"),
    ("cpu.stat", "usage_usec 0\nuser_usec 0\nsystem_usec 0\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\n"),
];

/// A cgroup v1 cpu hierarchy directory's files.
pub const V1_CPU_FILES: &[(&str, &str)] = &[
    ("cgroup.procs", ""),
    ("tasks", ""),
    ("cpu.shares", "1024\n"),
    ("cpu.cfs_quota_us", "-1\n"),
    ("cpu.cfs_period_us", "100000\n"),
    ("cpu.rt_runtime_us", "0\n"),
];

/// A cgroup v1 cpuacct (or memory) hierarchy directory's files.
pub const V1_ACCT_FILES: &[(&str, &str)] = &[("cgroup.procs", ""), ("tasks", ""), ("cpuacct.usage", "0\n")];

/// A temporary directory, removed when dropped.
#[derive(Debug)]
pub struct Fixture(PathBuf);

impl Fixture {
    /// A new empty directory named after `name`, this process and a counter.
    pub fn new(name: &str) -> Self {
        static N: AtomicUsize = AtomicUsize::new(0);
        let d = std::env::temp_dir().join(format!("allot-fixture-{name}-{}-{}", std::process::id(), N.fetch_add(1, Ordering::SeqCst)));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Self(d)
    }
    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }
    /// Makes `rel` (and its parents) with `files` in it, as the kernel would; returns it.
    pub fn cgroup(&self, rel: &str, files: &[(&str, &str)]) -> PathBuf {
        let d = self.0.join(rel);
        std::fs::create_dir_all(&d).unwrap();
        for (name, text) in files {
            std::fs::write(d.join(name), text).unwrap();
        }
        d
    }
    /// A file's text, relative to the fixture.
    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.0.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
    }
    /// Sets a file's text (what the kernel would report).
    pub fn put(&self, rel: &str, text: &str) {
        std::fs::write(self.0.join(rel), text).unwrap();
    }
    /// Empties files, so the next write to each is read back alone.
    pub fn blank(&self, rels: &[&str]) {
        for r in rels {
            self.put(r, "");
        }
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
