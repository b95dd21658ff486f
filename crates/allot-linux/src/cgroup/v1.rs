//! cgroup v1: `cpu.shares`, `cpu.cfs_quota_us`, `cpuacct.usage`; cpu and cpuacct may be
//! mounted apart, so every directory and move is mirrored into cpuacct, and into the
//! memory and blkio hierarchies when they are mounted (allot's memory files are written by
//! [`super::memory::Memory`], its I/O weights by [`super::io::Io`]).

use super::{mkdir, rmdir, strip_root, CpuController, Max, Version};
use crate::{read, read_u64, write, Result};
use std::path::{Path, PathBuf};

/// cgroup v1 backend.
#[derive(Debug)]
pub struct V1 {
    name: String,
    cpu: PathBuf,
    /// cpuacct root when mounted apart from cpu.
    acct: Option<PathBuf>,
    /// memory root, when the memory controller is mounted apart from cpu.
    mem: Option<PathBuf>,
    /// blkio root, when the blkio controller is mounted apart from cpu.
    blkio: Option<PathBuf>,
    /// `cpuacct.usage` files, kept open: the daemon reads the busy ones every tick.
    counters: crate::reread::Rereader,
}

impl V1 {
    /// A backend rooted at `cpu_mount/name`, mirroring into `acct_mount/name` when apart.
    pub fn new(cpu_mount: PathBuf, acct_mount: Option<PathBuf>, name: &str) -> Self {
        let acct = acct_mount.filter(|a| a != &cpu_mount).map(|a| a.join(name));
        Self { name: name.into(), cpu: cpu_mount.join(name), acct, mem: None, blkio: None, counters: Default::default() }
    }
    /// Also mirrors into the memory hierarchy at `mem_mount/name` (when apart from cpu).
    pub fn with_memory(mut self, mem_mount: Option<PathBuf>) -> Self {
        let cpu_mount = self.cpu.parent().map(Path::to_path_buf);
        self.mem = mem_mount.filter(|m| Some(m) != cpu_mount.as_ref() && Some(m.join(&self.name)) != self.acct).map(|m| m.join(&self.name));
        self
    }
    /// Also mirrors into the blkio hierarchy at `blkio_mount/name` (when apart from the others).
    pub fn with_blkio(mut self, blkio_mount: Option<PathBuf>) -> Self {
        let cpu_mount = self.cpu.parent().map(Path::to_path_buf);
        self.blkio = blkio_mount
            .filter(|m| Some(m) != cpu_mount.as_ref())
            .map(|m| m.join(&self.name))
            .filter(|b| Some(b) != self.acct.as_ref() && Some(b) != self.mem.as_ref());
        self
    }
    /// The roots every directory and move is mirrored into.
    fn mirrors(&self) -> impl Iterator<Item = &PathBuf> {
        self.acct.iter().chain(self.mem.iter()).chain(self.blkio.iter())
    }
    fn acct_dir(&self, rel: &str) -> PathBuf {
        self.acct.as_ref().unwrap_or(&self.cpu).join(rel)
    }
}

impl CpuController for V1 {
    fn version(&self) -> Version {
        Version::V1
    }
    fn root(&self) -> &Path {
        &self.cpu
    }
    fn create(&self, rel: &str) -> Result<()> {
        for base in std::iter::once(&self.cpu).chain(self.mirrors()) {
            let mut p = base.clone();
            mkdir(&p)?;
            for part in rel.split('/').filter(|x| !x.is_empty()) {
                p.push(part);
                mkdir(&p)?;
            }
        }
        Ok(())
    }
    fn remove(&self, rel: &str) -> Result<()> {
        rmdir(&self.cpu.join(rel))?;
        let mut first = Ok(());
        for a in self.mirrors() {
            let dir = a.join(rel);
            if rmdir(&dir).is_ok() {
                continue;
            }
            // Every move writes the cpu hierarchy first, then the mirrors: a child forked
            // between the two stays where its parent was in each hierarchy, so it can be
            // left in a mirror of a directory the cpu hierarchy no longer has. Send what is
            // left to the mirror's root, as a release does, and try once more; every mirror
            // is tried whatever the others did.
            let top = a.parent().unwrap_or(Path::new("/"));
            for pid in read(dir.join("cgroup.procs")).unwrap_or_default().split_whitespace() {
                let _ = write(top.join("cgroup.procs"), pid);
            }
            if let Err(e) = rmdir(&dir) {
                if first.is_ok() {
                    first = Err(e);
                }
            }
        }
        first
    }
    fn set_weight(&self, rel: &str, units: u32) -> Result<()> {
        write(self.cpu.join(rel).join("cpu.shares"), &allot_model::units::v1_shares(units).to_string())
    }
    fn weight(&self, rel: &str) -> Result<u32> {
        Ok(allot_model::units::from_v1_shares(read_u64(self.cpu.join(rel).join("cpu.shares"))?))
    }
    fn set_max(&self, rel: &str, max: Option<Max>) -> Result<()> {
        let dir = self.cpu.join(rel);
        match max {
            Some(m) => {
                // Quota must fit the period: set the period first when shrinking it.
                write(dir.join("cpu.cfs_quota_us"), "-1")?;
                write(dir.join("cpu.cfs_period_us"), &m.period_us.to_string())?;
                write(dir.join("cpu.cfs_quota_us"), &m.quota_us.to_string())
            }
            None => write(dir.join("cpu.cfs_quota_us"), "-1"),
        }
    }
    fn max(&self, rel: &str) -> Result<Option<Max>> {
        let dir = self.cpu.join(rel);
        let p = dir.join("cpu.cfs_quota_us");
        let s = read(&p)?;
        let q: i64 = s.trim().parse().map_err(|_| crate::Error::Parse { path: p, what: "cpu.cfs_quota_us", text: s.chars().take(80).collect() })?;
        if q < 0 {
            return Ok(None);
        }
        Ok(Some(Max { quota_us: q as u64, period_us: read_u64(dir.join("cpu.cfs_period_us"))? }))
    }
    fn procs_files(&self, rel: &str) -> Vec<PathBuf> {
        let mut v = vec![self.cpu.join(rel).join("cgroup.procs")];
        for a in self.mirrors() {
            v.push(a.join(rel).join("cgroup.procs"));
        }
        v
    }
    fn move_pid(&self, rel: &str, pid: i32) -> Result<()> {
        write(self.cpu.join(rel).join("cgroup.procs"), &pid.to_string())?;
        for a in self.mirrors() {
            write(a.join(rel).join("cgroup.procs"), &pid.to_string())?;
        }
        Ok(())
    }
    fn release_pid(&self, pid: i32) -> Result<()> {
        write(self.cpu.parent().unwrap_or(Path::new("/")).join("cgroup.procs"), &pid.to_string())?;
        for a in self.mirrors() {
            write(a.parent().unwrap_or(Path::new("/")).join("cgroup.procs"), &pid.to_string())?;
        }
        Ok(())
    }
    fn usage_ns(&self, rel: &str) -> Result<u64> {
        let p = self.acct_dir(rel).join("cpuacct.usage");
        let s = self.counters.read(&p)?;
        s.trim().parse().map_err(|_| crate::Error::Parse { path: p, what: "an integer", text: s.chars().take(80).collect() })
    }
    fn rel_of(&self, pid: i32) -> Result<Option<String>> {
        Ok(strip_root(&self.path_of(pid)?, &self.name))
    }
    fn path_of(&self, pid: i32) -> Result<String> {
        crate::process::procfs::cgroup_of(pid, Some("cpu"))
    }
    fn mount(&self) -> &Path {
        self.cpu.parent().unwrap_or(Path::new("/"))
    }
    fn move_to_path(&self, path: &str, pid: i32) -> Result<()> {
        let rel = path.trim_start_matches('/');
        write(self.mount().join(rel).join("cgroup.procs"), &pid.to_string())?;
        for a in self.mirrors() {
            // The mirror: the same path where that hierarchy has it, else its root.
            let top = a.parent().unwrap_or(Path::new("/"));
            let dir = if top.join(rel).is_dir() { top.join(rel) } else { top.to_path_buf() };
            write(dir.join("cgroup.procs"), &pid.to_string())?;
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "v1_tests.rs"]
mod tests;
