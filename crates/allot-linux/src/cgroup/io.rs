//! The I/O controller for allot's tree, cgroup v1 (`blkio`) or v2 (`io`): weights written
//! where the kernel has a file for them, and per-cgroup pressure (PSI) read. No policy:
//! the weights come from `allot_model::io`.
//!
//! Which file holds a weight, and who honours it (docs/memory.md, "I/O by share"):
//! - v2 `io.weight`: the io.cost controller, on devices it is enabled for (`io.cost.qos`);
//! - v2 `io.bfq.weight`, v1 `blkio.bfq.weight`: the BFQ scheduler, on devices that use it
//!   (the file exists while BFQ is loaded, whatever the devices use);
//! - v1 `blkio.weight`: the CFQ scheduler, gone since Linux 5.0 with the legacy block layer.
//!
//! A file that is not there is not written: [`Io::set_weight`] says which were.
//!
//! v1 keeps blkio in a hierarchy of its own: the v1 cpu backend mirrors allot's
//! directories and moves into it ([`super::V1`]), as it does for memory.

use super::{mkdir, CpuController, Version};
use crate::process::procfs::{parse_psi, Psi};
use crate::{read, write, Error, Result};
use std::path::{Path, PathBuf};

/// allot's tree in the I/O controller.
#[derive(Debug, Clone)]
pub struct Io {
    version: Version,
    mount: PathBuf,
    root: PathBuf,
}

/// A weight file of the I/O controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WeightFile {
    /// v2 `io.weight` (io.cost), 1..10000.
    IoCost,
    /// v2 `io.bfq.weight`, v1 `blkio.bfq.weight` (BFQ), 1..1000.
    Bfq,
    /// v1 `blkio.weight` (CFQ), 10..1000.
    Cfq,
}

impl WeightFile {
    /// Every weight file, in the order they are tried.
    pub const ALL: [WeightFile; 3] = [WeightFile::IoCost, WeightFile::Bfq, WeightFile::Cfq];

    /// Its name under `version`; None where that version has no such file.
    pub fn name(self, version: Version) -> Option<&'static str> {
        match (self, version) {
            (WeightFile::IoCost, Version::V2) => Some("io.weight"),
            (WeightFile::Bfq, Version::V2) => Some("io.bfq.weight"),
            (WeightFile::Bfq, Version::V1) => Some("blkio.bfq.weight"),
            (WeightFile::Cfq, Version::V1) => Some("blkio.weight"),
            _ => None,
        }
    }

    /// The weight for funding or tickets `units`, in the file's range (`allot_model::io`).
    pub fn weight(self, units: u32) -> u32 {
        match self {
            WeightFile::IoCost => allot_model::io::io_weight(units),
            WeightFile::Bfq => allot_model::io::bfq_weight(units),
            WeightFile::Cfq => allot_model::io::cfq_weight(units),
        }
    }
}

impl Io {
    /// The I/O controller beside `cg`'s tree: v1's blkio hierarchy at the same root name, or
    /// v2's own tree when the unified hierarchy offers `io`. None where there is none, and
    /// on a systemd host, where a currency's I/O weight is its slice's `IOWeight=`.
    pub fn for_tree(cg: &dyn CpuController) -> Option<Io> {
        let (version, root, mount) = super::beside(cg, "blkio", "io")?;
        Some(Io { version, root, mount })
    }

    /// A controller at an explicit root (tests with a fixture directory).
    pub fn at(version: Version, mount: PathBuf, root: PathBuf) -> Io {
        Io { version, mount, root }
    }

    /// Which version.
    pub fn version(&self) -> Version {
        self.version
    }

    /// The root's absolute path in the I/O hierarchy.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// True if `rel` is a directory of the I/O hierarchy.
    pub fn has(&self, rel: &str) -> bool {
        self.root.join(rel).is_dir()
    }

    /// v2: delegates the io controller down to `rel` (its ancestors' subtree_control), so
    /// `rel`'s io files exist. v1: makes sure the directory exists.
    pub fn ensure(&self, rel: &str) -> Result<()> {
        if self.version == Version::V1 {
            let mut p = self.root.clone();
            mkdir(&p)?;
            for part in rel.split('/').filter(|x| !x.is_empty()) {
                p.push(part);
                mkdir(&p)?;
            }
            return Ok(());
        }
        let target = self.root.join(rel);
        let mut p = self.mount.clone();
        enable_io(&p)?;
        for part in self.root.strip_prefix(&self.mount).unwrap_or(Path::new("")).iter().chain(Path::new(rel).iter()) {
            p.push(part);
            if p == target {
                break;
            }
            enable_io(&p)?;
        }
        Ok(())
    }

    /// The weight files `rel` has.
    pub fn weight_files(&self, rel: &str) -> Vec<WeightFile> {
        let dir = self.root.join(rel);
        WeightFile::ALL.into_iter().filter(|f| f.name(self.version).is_some_and(|n| dir.join(n).exists())).collect()
    }

    /// Writes `units` (funding or tickets) to every weight file `rel` has, each in its own
    /// range; returns the files written. A file that is not there is not written; the
    /// first failure is returned after every file was tried.
    pub fn set_weight(&self, rel: &str, units: u32) -> Result<Vec<WeightFile>> {
        let dir = self.root.join(rel);
        let mut done = vec![];
        let mut first = Ok(());
        for f in self.weight_files(rel) {
            let Some(name) = f.name(self.version) else { continue };
            // v2 files take "default N" (every device); v1's take the number alone.
            let v = if self.version == Version::V2 { format!("default {}", f.weight(units)) } else { f.weight(units).to_string() };
            match write(dir.join(name), &v) {
                Ok(()) => done.push(f),
                Err(e) if first.is_ok() => first = Err(e),
                Err(_) => {}
            }
        }
        first.map(|()| done)
    }

    /// The memory and I/O pressure of `rel` (cgroup v2 only: v1 has no PSI per cgroup).
    pub fn pressure(&self, rel: &str) -> CgroupPressure {
        if self.version == Version::V1 {
            return CgroupPressure::default();
        }
        cgroup_pressure(&self.root.join(rel))
    }
}

/// Enables the io controller for a cgroup v2 directory's children (once).
fn enable_io(dir: &Path) -> Result<()> {
    let ctl = dir.join("cgroup.subtree_control");
    if read(&ctl)?.split_whitespace().any(|c| c == "io") {
        return Ok(());
    }
    write(ctl, "+io")
}

/// A cgroup's memory and I/O pressure, where the kernel has them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CgroupPressure {
    /// `memory.pressure`.
    pub memory: Option<Psi>,
    /// `io.pressure`.
    pub io: Option<Psi>,
}

/// Reads `dir`'s `memory.pressure` and `io.pressure` (cgroup v2 with PSI). A file that is
/// missing, unreadable or does not parse as PSI gives none for that resource: a garbled
/// file is never shown as a number.
pub fn cgroup_pressure(dir: &Path) -> CgroupPressure {
    let one = |name: &str| pressure_file(&dir.join(name)).ok().flatten();
    CgroupPressure { memory: one("memory.pressure"), io: one("io.pressure") }
}

/// Reads one PSI file: `Ok(None)` where it does not exist (cgroup v1, a kernel without
/// PSI, `psi=0`); an error naming the file when its text is not PSI, or holds averages
/// outside 0..100 (NaN, inf and negatives included).
pub fn pressure_file(p: &Path) -> Result<Option<Psi>> {
    let s = match std::fs::read_to_string(p) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => return Ok(None),
        Err(source) => return Err(Error::Io { op: "read", path: p.into(), source }),
    };
    let bad = || Error::Parse { path: p.into(), what: "PSI (some/full lines, averages 0..100)", text: s.chars().take(80).collect() };
    let psi = parse_psi(&s).ok_or_else(bad)?;
    let ok = |l: &crate::process::procfs::PsiLine| [l.avg10, l.avg60].iter().all(|a| a.is_finite() && (0.0..=100.0).contains(a));
    if !ok(&psi.some) || psi.full.as_ref().is_some_and(|f| !ok(f)) {
        return Err(bad());
    }
    Ok(Some(psi))
}

#[cfg(test)]
#[path = "io_tests.rs"]
mod tests;
