//! cgroup v2: `cpu.weight`, `cpu.max`, `cpu.stat`, one unified hierarchy.

use super::{enable_cpu, mkdir, rmdir, strip_root, CpuController, Max, Version};
use crate::{read, read_u64, write, Error, Result};
use std::path::{Path, PathBuf};

/// cgroup v2 backend.
#[derive(Debug)]
pub struct V2 {
    name: String,
    mount: PathBuf,
    root: PathBuf,
    /// `cpu.stat` files, kept open: the daemon reads the busy ones every tick.
    counters: crate::reread::Rereader,
}

impl V2 {
    /// A backend rooted at `mount/name`.
    pub fn new(mount: PathBuf, name: &str) -> Self {
        Self { name: name.into(), root: mount.join(name), mount, counters: Default::default() }
    }
}

impl CpuController for V2 {
    fn version(&self) -> Version {
        Version::V2
    }
    fn root(&self) -> &Path {
        &self.root
    }
    fn create(&self, rel: &str) -> Result<()> {
        // Every ancestor of a directory that takes processes must delegate cpu to its
        // children; the leaf itself must not (no internal processes in v2).
        enable_cpu(&self.mount)?;
        mkdir(&self.root)?;
        let mut p = self.root.clone();
        for part in rel.split('/').filter(|x| !x.is_empty()) {
            enable_cpu(&p)?;
            p.push(part);
            mkdir(&p)?;
        }
        Ok(())
    }
    fn remove(&self, rel: &str) -> Result<()> {
        rmdir(&self.root.join(rel))
    }
    fn set_weight(&self, rel: &str, units: u32) -> Result<()> {
        write(self.root.join(rel).join("cpu.weight"), &units.clamp(1, 10000).to_string())
    }
    fn weight(&self, rel: &str) -> Result<u32> {
        Ok(read_u64(self.root.join(rel).join("cpu.weight"))?.clamp(1, 10000) as u32)
    }
    fn set_max(&self, rel: &str, max: Option<Max>) -> Result<()> {
        let v = match max {
            Some(m) => format!("{} {}", m.quota_us, m.period_us),
            None => "max".into(),
        };
        write(self.root.join(rel).join("cpu.max"), &v)
    }
    fn max(&self, rel: &str) -> Result<Option<Max>> {
        read_cpu_max(&self.root.join(rel).join("cpu.max"))
    }
    fn move_pid(&self, rel: &str, pid: i32) -> Result<()> {
        write(self.root.join(rel).join("cgroup.procs"), &pid.to_string())
    }
    fn release_pid(&self, pid: i32) -> Result<()> {
        write(self.mount.join("cgroup.procs"), &pid.to_string())
    }
    fn usage_ns(&self, rel: &str) -> Result<u64> {
        let p = self.root.join(rel).join("cpu.stat");
        super::stat::parse_usage(&p, &self.counters.read(&p)?)
    }
    fn rel_of(&self, pid: i32) -> Result<Option<String>> {
        Ok(strip_root(&self.path_of(pid)?, &self.name))
    }
    fn path_of(&self, pid: i32) -> Result<String> {
        crate::process::procfs::cgroup_of(pid, None)
    }
    fn mount(&self) -> &Path {
        &self.mount
    }
    fn move_to_path(&self, path: &str, pid: i32) -> Result<()> {
        write(self.mount.join(path.trim_start_matches('/')).join("cgroup.procs"), &pid.to_string())
    }
}

#[cfg(test)]
#[path = "v2_tests.rs"]
mod tests;

/// A v2 `cpu.max` file: `max PERIOD` is no limit (None), `QUOTA PERIOD` a limit; anything
/// else is a parse error naming the file.
pub(crate) fn read_cpu_max(p: &Path) -> Result<Option<Max>> {
    let s = read(p)?;
    let mut it = s.split_whitespace();
    let (q, per) = (it.next().unwrap_or("max"), it.next().unwrap_or("100000"));
    if q == "max" {
        return Ok(None);
    }
    let bad = || Error::Parse { path: p.to_path_buf(), what: "cpu.max", text: s.clone() };
    Ok(Some(Max { quota_us: q.parse().map_err(|_| bad())?, period_us: per.parse().map_err(|_| bad())? }))
}
