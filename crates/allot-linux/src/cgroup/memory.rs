//! The memory controller for allot's tree, cgroup v1 or v2: thin writers and readers, no
//! policy (that is `allot_model::memory`).
//!
//! v1 keeps memory in a hierarchy of its own (`/sys/fs/cgroup/memory`); the v1 cpu
//! backend mirrors allot's directories and moves into it ([`super::V1`]), so
//! `<memory mount>/<root>/<currency>/<job>` holds the same processes as the cpu tree.
//! v2 has one hierarchy: the memory controller is enabled for allot's directories here.
//!
//! What each file does (docs/memory.md quotes the kernel's documentation):
//! - v2 `memory.low`: best-effort protection; memory within a cgroup's effective low is
//!   reclaimed only when no unprotected reclaimable memory is left, under global reclaim
//!   and under an ancestor's limit alike.
//! - v1 `memory.soft_limit_in_bytes`: groups above it are reclaimed first, but only under
//!   *global* reclaim (kswapd, direct reclaim of the machine), never under a parent's limit.
//! - v2 `memory.high` (throttle and reclaim above), `memory.max` and v1
//!   `memory.limit_in_bytes` (never more: reclaim, then OOM inside the group).
//! - v2 `memory.oom.group`: an OOM kill in the group kills all of it.

use super::{mkdir, CpuController, Version};
use crate::{read, read_u64, write, Error, Result};
use std::path::{Path, PathBuf};

/// v1 reads an unlimited limit back as PAGE_COUNTER_MAX pages; anything this large is none.
const UNLIMITED_FROM: u64 = 1 << 60;

/// allot's tree in the memory controller.
#[derive(Debug, Clone)]
pub struct Memory {
    version: Version,
    mount: PathBuf,
    root: PathBuf,
    /// Where `MemAvailable` is read: /proc/meminfo, or a test's fixture.
    meminfo: PathBuf,
}

impl Memory {
    /// The memory controller beside `cg`'s tree: v1's memory hierarchy at the same root
    /// name, or v2's own tree when the unified hierarchy offers `memory`. None where there
    /// is none, and on a systemd host, where memory is shared on the users' slices through
    /// systemd instead ([`super::systemd::SliceMemory`]).
    pub fn for_tree(cg: &dyn CpuController) -> Option<Memory> {
        let (version, root, mount) = super::beside(cg, "memory", "memory")?;
        Some(Memory { version, root, mount, meminfo: PROC_MEMINFO.into() })
    }

    /// A controller at an explicit root (tests with a fixture directory).
    pub fn at(version: Version, mount: PathBuf, root: PathBuf) -> Memory {
        Memory { version, mount, root, meminfo: PROC_MEMINFO.into() }
    }

    /// The same controller, reading `MemAvailable` from `path` (tests with a fixture).
    pub fn with_meminfo(self, path: PathBuf) -> Memory {
        Memory { meminfo: path, ..self }
    }

    /// What the kernel reckons can still be had without swapping ([`mem_available`]).
    pub fn mem_available(&self) -> Result<u64> {
        mem_available_in(&self.meminfo)
    }

    /// Which version.
    pub fn version(&self) -> Version {
        self.version
    }

    /// The root's absolute path in the memory hierarchy.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn file(&self, rel: &str, v1: &str, v2: &str) -> PathBuf {
        self.root.join(rel).join(if self.version == Version::V1 { v1 } else { v2 })
    }

    /// v2: delegates the memory controller down to `rel` (its ancestors' subtree_control),
    /// so `rel`'s memory files exist. v1: makes sure the directory exists.
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
        let mut p = self.mount.clone();
        enable_memory(&p)?;
        for part in self.root.strip_prefix(&self.mount).unwrap_or(Path::new("")).iter().chain(Path::new(rel).iter()) {
            p.push(part);
            if p == self.root.join(rel) {
                break;
            }
            enable_memory(&p)?;
        }
        Ok(())
    }

    /// True if `rel` has memory files (it exists and the controller reaches it).
    pub fn has(&self, rel: &str) -> bool {
        self.file(rel, "memory.usage_in_bytes", "memory.current").exists()
    }

    /// Bytes charged to `rel` and its descendants.
    pub fn usage(&self, rel: &str) -> Result<u64> {
        read_u64(self.file(rel, "memory.usage_in_bytes", "memory.current"))
    }

    /// The hard limit of `rel` (None: unlimited).
    pub fn max(&self, rel: &str) -> Result<Option<u64>> {
        read_limit(&self.file(rel, "memory.limit_in_bytes", "memory.max"))
    }

    /// The limits above allot's root ([`bound_above`]): in a container, its own.
    pub fn bound_above(&self) -> Bound {
        bound_above(&self.root, &self.mount, self.version)
    }

    /// Sets or clears the hard limit (v2 `memory.max`, v1 `memory.limit_in_bytes`). The
    /// kernel reclaims down to a new limit below the usage before the write returns, and
    /// refuses it (v1: EBUSY) when it cannot.
    pub fn set_max(&self, rel: &str, bytes: Option<u64>) -> Result<()> {
        let v = match (bytes, self.version) {
            (Some(b), _) => b.to_string(),
            (None, Version::V1) => "-1".into(),
            (None, Version::V2) => "max".into(),
        };
        write(self.file(rel, "memory.limit_in_bytes", "memory.max"), &v)
    }

    /// Sets the protection: v2 `memory.low`; v1 `memory.soft_limit_in_bytes` (reclaimed
    /// first above it, under global reclaim only).
    pub fn set_protection(&self, rel: &str, bytes: u64) -> Result<()> {
        write(self.file(rel, "memory.soft_limit_in_bytes", "memory.low"), &bytes.to_string())
    }

    /// Takes the protection back to the kernel's default: v2 `memory.low` 0, v1 an unlimited
    /// soft limit (`-1`: a group is not reclaimed first).
    pub fn clear_protection(&self, rel: &str) -> Result<()> {
        write(self.file(rel, "memory.soft_limit_in_bytes", "memory.low"), if self.version == Version::V1 { "-1" } else { "0" })
    }

    /// The protection as written (v2 `memory.low`, v1 `memory.soft_limit_in_bytes`; an
    /// unset v1 soft limit reads as none).
    pub fn protection(&self, rel: &str) -> Result<Option<u64>> {
        let v = read_u64(self.file(rel, "memory.soft_limit_in_bytes", "memory.low"))?;
        Ok((v < UNLIMITED_FROM).then_some(v))
    }

    /// Sets or clears v2 `memory.high` (throttled and reclaimed above it). v1 has no such
    /// file: an error naming it.
    pub fn set_high(&self, rel: &str, bytes: Option<u64>) -> Result<()> {
        if self.version == Version::V1 {
            return Err(Error::NoCpuController("cgroup v1 has no memory.high: a soft memory cap lowers the soft limit there".into()));
        }
        write(self.root.join(rel).join("memory.high"), &bytes.map_or("max".into(), |b| b.to_string()))
    }

    /// Sets v2 `memory.oom.group` (an OOM kill takes the whole group). Nothing on v1.
    pub fn set_oom_group(&self, rel: &str, whole: bool) -> Result<()> {
        if self.version == Version::V1 {
            return Ok(());
        }
        write(self.root.join(rel).join("memory.oom.group"), if whole { "1" } else { "0" })
    }

    /// How many times the OOM killer killed a process in `rel` or below: v2
    /// `memory.events` oom_kill (hierarchical); v1 `memory.oom_control` oom_kill, which
    /// counts only in the group the killed process was in, summed over `rel`'s descendants.
    /// 0 where the kernel does not say.
    pub fn oom_kills(&self, rel: &str) -> Result<u64> {
        let s = read(self.file(rel, "memory.oom_control", "memory.events"))?;
        let own = s.lines().find_map(|l| l.strip_prefix("oom_kill ")).and_then(|v| v.trim().parse().ok()).unwrap_or(0);
        if self.version == Version::V2 {
            return Ok(own);
        }
        let mut sum = own;
        for e in std::fs::read_dir(self.root.join(rel)).into_iter().flatten().flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                let child = format!("{rel}/{}", e.file_name().to_string_lossy());
                sum += self.oom_kills(child.trim_start_matches('/')).unwrap_or(0);
            }
        }
        Ok(sum)
    }
}

/// Enables the memory controller for a cgroup v2 directory's children (once).
fn enable_memory(dir: &Path) -> Result<()> {
    let ctl = dir.join("cgroup.subtree_control");
    if read(&ctl)?.split_whitespace().any(|c| c == "memory") {
        return Ok(());
    }
    write(ctl, "+memory")
}

/// The machine's memory, bytes (`MemTotal` in /proc/meminfo).
pub fn mem_total() -> Result<u64> {
    parse_mem_total(&read("/proc/meminfo")?).ok_or_else(|| Error::Parse {
        path: "/proc/meminfo".into(),
        what: "a MemTotal line",
        text: String::new(),
    })
}

/// A hard limit file's value: v2 `memory.max`, v1 `memory.limit_in_bytes` (None: unlimited).
fn read_limit(p: &Path) -> Result<Option<u64>> {
    let s = read(p)?;
    let t = s.trim();
    if t == "max" {
        return Ok(None);
    }
    let v: u64 = t.parse().map_err(|_| Error::Parse { path: p.into(), what: "a byte count or max", text: t.chars().take(80).collect() })?;
    Ok((v < UNLIMITED_FROM).then_some(v))
}

/// The limits on the cgroups above one, as far up as its hierarchy's mount shows them.
/// In a container, the mount's top is the container's own cgroup, whose limit is the
/// container's memory, while /proc/meminfo (MemTotal, MemAvailable) is the host's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Bound {
    /// The least hard limit among them (None: none is limited).
    pub limit: Option<u64>,
    /// The least room left under any of them: its limit less its charge, the inactive page
    /// cache in it not counted as charged (the kernel reclaims that first, as MemAvailable
    /// counts the machine's cache as available).
    pub headroom: Option<u64>,
}

/// [`Bound`] of the cgroups above `dir` (not `dir` itself) up to and with `mount`, the
/// hierarchy's top as mounted here. A file that cannot be read (the host's root cgroup
/// has no v2 `memory.max`) limits nothing.
pub fn bound_above(dir: &Path, mount: &Path, version: Version) -> Bound {
    let (lim, cur, cache) = match version {
        Version::V1 => ("memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file"),
        Version::V2 => ("memory.max", "memory.current", "inactive_file"),
    };
    let mut b = Bound::default();
    let mut at = dir.parent().filter(|p| p.starts_with(mount));
    while let Some(p) = at {
        if let Ok(Some(l)) = read_limit(&p.join(lim)) {
            b.limit = Some(b.limit.map_or(l, |x| x.min(l)));
            if let Ok(u) = read_u64(p.join(cur)) {
                let inactive = read(p.join("memory.stat")).ok().and_then(|s| stat_value(&s, cache)).unwrap_or(0);
                let h = l.saturating_sub(u.saturating_sub(inactive));
                b.headroom = Some(b.headroom.map_or(h, |x| x.min(h)));
            }
        }
        at = p.parent().filter(|q| p != mount && q.starts_with(mount));
    }
    b
}

/// One `memory.stat` line's value (`key value`).
fn stat_value(stat: &str, key: &str) -> Option<u64> {
    stat.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.trim().parse().ok())
}

/// What the kernel reckons can still be had without swapping, bytes (`MemAvailable` in
/// /proc/meminfo: free memory above the watermarks and the caches it can reclaim).
pub fn mem_available() -> Result<u64> {
    mem_available_in(Path::new(PROC_MEMINFO))
}

const PROC_MEMINFO: &str = "/proc/meminfo";

fn mem_available_in(path: &Path) -> Result<u64> {
    parse_meminfo(&read(path)?, "MemAvailable:").ok_or_else(|| Error::Parse { path: path.into(), what: "a MemAvailable line", text: String::new() })
}

fn parse_mem_total(s: &str) -> Option<u64> {
    parse_meminfo(s, "MemTotal:")
}

/// One /proc/meminfo line's value (`key` with its colon), bytes.
fn parse_meminfo(s: &str, key: &str) -> Option<u64> {
    let l = s.lines().find_map(|l| l.strip_prefix(key))?;
    let kb: u64 = l.trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kb * 1024)
}

// A process's `oom_score_adj` is read and written through its held /proc directory
// (`procfs::ProcDir`), never by pid alone: see there.

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory removed when dropped.
    struct Fixture(PathBuf);
    impl Drop for Fixture {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn touch(dir: &Path, names: &[&str]) {
        for n in names {
            std::fs::write(dir.join(n), "").unwrap();
        }
    }

    fn fixture(version: Version) -> (Fixture, Memory) {
        let d = std::env::temp_dir().join(format!("allot-memory-{}-{version:?}", std::process::id()));
        let root = d.join("allot");
        std::fs::create_dir_all(root.join("user-1000")).unwrap();
        for f in ["cgroup.subtree_control", "allot/cgroup.subtree_control"] {
            std::fs::write(d.join(f), "cpu\n").unwrap();
        }
        let m = Memory::at(version, d.clone(), root);
        (Fixture(d), m)
    }

    #[test]
    fn v1_files_and_unlimited() {
        let (_d, m) = fixture(Version::V1);
        let dir = m.root().join("user-1000");
        std::fs::write(dir.join("memory.limit_in_bytes"), "9223372036854771712\n").unwrap();
        std::fs::write(dir.join("memory.usage_in_bytes"), "4096\n").unwrap();
        assert_eq!(m.max("user-1000").unwrap(), None);
        assert_eq!(m.usage("user-1000").unwrap(), 4096);
        // Kernel files are written in place, never created or truncated: empty them first.
        touch(&dir, &["memory.limit_in_bytes", "memory.soft_limit_in_bytes"]);
        m.set_max("user-1000", Some(1 << 30)).unwrap();
        assert_eq!(m.max("user-1000").unwrap(), Some(1 << 30));
        touch(&dir, &["memory.limit_in_bytes"]);
        m.set_max("user-1000", None).unwrap();
        assert_eq!(std::fs::read_to_string(dir.join("memory.limit_in_bytes")).unwrap(), "-1");
        m.set_protection("user-1000", 5 << 20).unwrap();
        assert_eq!(std::fs::read_to_string(dir.join("memory.soft_limit_in_bytes")).unwrap(), "5242880");
        assert!(m.set_high("user-1000", Some(1)).unwrap_err().to_string().contains("memory.high"));
    }

    #[test]
    fn v2_files_and_delegation() {
        let (_d, m) = fixture(Version::V2);
        m.ensure("user-1000").unwrap();
        for f in ["cgroup.subtree_control", "allot/cgroup.subtree_control"] {
            let p = m.mount.join(f);
            assert_eq!(std::fs::read_to_string(&p).unwrap(), "+memory", "{}", p.display());
        }
        let dir = m.root().join("user-1000");
        std::fs::write(dir.join("memory.max"), "max\n").unwrap();
        assert_eq!(m.max("user-1000").unwrap(), None);
        touch(&dir, &["memory.low", "memory.high", "memory.oom.group"]);
        m.set_protection("user-1000", 1 << 20).unwrap();
        m.set_high("user-1000", None).unwrap();
        m.set_oom_group("user-1000", true).unwrap();
        assert_eq!(std::fs::read_to_string(dir.join("memory.low")).unwrap(), "1048576");
        assert_eq!(std::fs::read_to_string(dir.join("memory.high")).unwrap(), "max");
        assert_eq!(std::fs::read_to_string(dir.join("memory.oom.group")).unwrap(), "1");
        std::fs::write(dir.join("memory.events"), "low 0\nhigh 2\nmax 1\noom 1\noom_kill 3\n").unwrap();
        assert_eq!(m.oom_kills("user-1000").unwrap(), 3);
    }

    /// A container: the mount's top is the container's cgroup, limited to 1 GiB and
    /// holding 700 MiB, with a level between it and allot's root limited to 2 GiB and
    /// holding 100 MiB; the root's own limit is not counted (it is `max` of its own).
    #[test]
    fn the_limits_above_the_root_are_the_containers() {
        const M: u64 = 1 << 20;
        for version in [Version::V1, Version::V2] {
            let d = std::env::temp_dir().join(format!("allot-memory-above-{}-{version:?}", std::process::id()));
            let _f = Fixture(d.clone());
            let root = d.join("mid/allot");
            std::fs::create_dir_all(&root).unwrap();
            let (lim, cur) =
                if version == Version::V1 { ("memory.limit_in_bytes", "memory.usage_in_bytes") } else { ("memory.max", "memory.current") };
            let m = Memory::at(version, d.clone(), root.clone());
            assert_eq!(m.bound_above(), Bound::default(), "no file: nothing limited (the host's root cgroup)");
            std::fs::write(d.join(lim), format!("{}\n", 1024 * M)).unwrap();
            std::fs::write(d.join(cur), format!("{}\n", 700 * M)).unwrap();
            std::fs::write(d.join("mid").join(lim), format!("{}\n", 2048 * M)).unwrap();
            std::fs::write(d.join("mid").join(cur), format!("{}\n", 100 * M)).unwrap();
            std::fs::write(root.join(lim), format!("{}\n", 64 * M)).unwrap();
            assert_eq!(m.bound_above(), Bound { limit: Some(1024 * M), headroom: Some(324 * M) }, "{version:?}");
            // Its inactive page cache is room (the kernel reclaims it first).
            let stat = if version == Version::V1 { "inactive_file 1\ntotal_inactive_file 104857600\n" } else { "anon 5\ninactive_file 104857600\n" };
            std::fs::write(d.join("memory.stat"), stat).unwrap();
            assert_eq!(m.bound_above().headroom, Some(424 * M), "{version:?}");
            // Unlimited above (v1's huge number, v2's max): none; above the mount: never read.
            let unlimited = if version == Version::V1 { "9223372036854771712\n" } else { "max\n" };
            std::fs::write(d.join(lim), unlimited).unwrap();
            assert_eq!(m.bound_above(), Bound { limit: Some(2048 * M), headroom: Some(1948 * M) });
            let inner = Memory::at(version, d.join("mid"), root.clone());
            std::fs::write(d.join(lim), format!("{}\n", M)).unwrap();
            assert_eq!(inner.bound_above().limit, Some(2048 * M), "the mount is the top");
        }
    }

    #[test]
    fn meminfo_total() {
        assert_eq!(parse_mem_total("MemTotal:       24576000 kB\nMemFree: 1 kB\n"), Some(24576000 * 1024));
        assert_eq!(parse_mem_total("MemFree: 1 kB\n"), None);
        assert!(mem_total().unwrap() > 0);
        let info = "MemTotal: 989184 kB\nMemFree: 20480 kB\nMemAvailable:     81920 kB\n";
        assert_eq!(parse_meminfo(info, "MemAvailable:"), Some(80 << 20));
        assert_eq!(parse_meminfo("MemTotal: 1 kB\n", "MemAvailable:"), None);
        assert!(mem_available().unwrap() <= mem_total().unwrap());
    }
}
