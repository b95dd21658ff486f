//! The cpu controller, cgroup v1 or v2, behind one trait.
//!
//! allot owns one subtree (its *root*, a directory directly under the controller's
//! mount) and addresses everything inside it by a relative path such as `user-1000/j3`.
//! Weights are given in allot's units, 1..10000 (tickets and funding), and mapped here:
//! v2 `cpu.weight` takes them as they are, v1 `cpu.shares` scales 100 ↦ 1024.
//!
//! v1 has one wrinkle: the `cpu` and `cpuacct` controllers may be mounted apart (the CI
//! runner's are). Usage is only accounted by cpuacct, so the v1 backend
//! mirrors every directory and every move into the cpuacct hierarchy too, and into the
//! memory hierarchy where one is mounted (memory by share, [`memory`]).

pub mod block;
#[cfg(test)]
pub(crate) mod fixture;
pub mod inotify;
pub mod io;
pub(crate) mod max;
pub mod memory;
pub(crate) mod mount;
pub mod sessions;
pub mod stat;
pub mod systemd;
mod v1;
mod v2;

pub use max::Max;
pub use mount::is_cgroup2_mount;
pub use systemd::SystemdTree;
pub use v1::V1;
pub use v2::V2;

use crate::{read, read_u64, write, Error, Result};
use std::path::{Path, PathBuf};

/// cgroup version in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Version {
    /// Legacy hierarchies: `cpu.shares`, `cpu.cfs_quota_us`, `cpuacct.usage`.
    V1,
    /// Unified hierarchy: `cpu.weight`, `cpu.max`, `cpu.stat`.
    V2,
}

/// The cpu controller operations allot needs. `rel` is relative to allot's root; `""`
/// is the root itself.
pub trait CpuController: Send + Sync + std::fmt::Debug {
    /// Which version this is.
    fn version(&self) -> Version;
    /// The root's absolute path in the cpu hierarchy.
    fn root(&self) -> &Path;
    /// Creates a directory (and its parents) under the root, ready to take processes or
    /// children. Existing directories are fine.
    fn create(&self, rel: &str) -> Result<()>;
    /// Removes an empty directory.
    fn remove(&self, rel: &str) -> Result<()>;
    /// The absolute directory of `rel`.
    fn dir(&self, rel: &str) -> PathBuf {
        self.root().join(rel)
    }
    /// True if the directory exists.
    fn exists(&self, rel: &str) -> bool {
        self.dir(rel).is_dir()
    }
    /// Child directory names.
    fn children(&self, rel: &str) -> Result<Vec<String>> {
        let dir = self.root().join(rel);
        let rd = std::fs::read_dir(&dir).map_err(|source| Error::Io { op: "readdir", path: dir.clone(), source })?;
        let mut v: Vec<String> = rd
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().map(|t| t.is_dir()).unwrap_or(false))
            .filter_map(|e| e.file_name().into_string().ok())
            .collect();
        v.sort();
        Ok(v)
    }
    /// Sets the weight in allot units (1..10000).
    fn set_weight(&self, rel: &str, units: u32) -> Result<()>;
    /// Reads the weight in allot units.
    fn weight(&self, rel: &str) -> Result<u32>;
    /// Sets or clears a hard limit.
    fn set_max(&self, rel: &str, max: Option<Max>) -> Result<()>;
    /// Reads the hard limit, if any.
    fn max(&self, rel: &str) -> Result<Option<Max>>;
    /// True if this kernel has `cpu.idle`.
    fn has_idle(&self) -> bool {
        self.root().join("cpu.idle").exists()
    }
    /// Sets `cpu.idle` (SCHED_IDLE for the whole group against its siblings).
    fn set_idle(&self, rel: &str, idle: bool) -> Result<()> {
        write(self.root().join(rel).join("cpu.idle"), if idle { "1" } else { "0" })
    }
    /// Reads `cpu.idle` (false where the kernel lacks it).
    fn idle(&self, rel: &str) -> Result<bool> {
        let p = self.root().join(rel).join("cpu.idle");
        if !p.exists() {
            return Ok(false);
        }
        Ok(read_u64(p)? == 1)
    }
    /// Thread-group ids directly in this directory.
    fn procs(&self, rel: &str) -> Result<Vec<i32>> {
        let p = self.root().join(rel).join("cgroup.procs");
        Ok(read(&p)?.lines().filter_map(|l| l.trim().parse().ok()).collect())
    }
    /// Thread ids directly in this directory (v1 `tasks`, v2 `cgroup.threads`).
    fn threads(&self, rel: &str) -> Result<Vec<i32>> {
        let name = if self.version() == Version::V1 { "tasks" } else { "cgroup.threads" };
        let p = self.root().join(rel).join(name);
        Ok(read(&p)?.lines().filter_map(|l| l.trim().parse().ok()).collect())
    }
    /// Moves a whole process (all its threads) into the directory.
    fn move_pid(&self, rel: &str, pid: i32) -> Result<()>;
    /// The `cgroup.procs` files a process must be written to to join `rel` (v1: the cpu
    /// hierarchy's and, when mounted apart, cpuacct's).
    fn procs_files(&self, rel: &str) -> Vec<PathBuf> {
        vec![self.dir(rel).join("cgroup.procs")]
    }
    /// Moves a process out of allot's tree, to the top of the hierarchy (used when an
    /// ephemeral tree is torn down, so nothing is left running in a removed group).
    fn release_pid(&self, pid: i32) -> Result<()>;
    /// Total CPU time used by everything in the directory, ns.
    fn usage_ns(&self, rel: &str) -> Result<u64>;
    /// The directory of `pid` relative to allot's root, or None if outside it.
    fn rel_of(&self, pid: i32) -> Result<Option<String>>;
    /// The cgroup of `pid` in the hierarchy allot writes, as /proc/PID/cgroup names it
    /// (`/` is the hierarchy's root; `/allot/user-1000/default` is inside allot's tree).
    fn path_of(&self, pid: i32) -> Result<String>;
    /// The hierarchy's mount point (the root cgroup's directory).
    fn mount(&self) -> &Path;
    /// Moves a process to a cgroup named as [`Self::path_of`] names it (to undo a move).
    fn move_to_path(&self, path: &str, pid: i32) -> Result<()>;
    /// `cpu.rt_runtime_us` of a directory: None where the kernel has no real-time group
    /// scheduling (CONFIG_RT_GROUP_SCHED; never on v2); -1 means unlimited.
    fn rt_runtime(&self, rel: &str) -> Result<Option<i64>> {
        let p = self.root().join(rel).join("cpu.rt_runtime_us");
        if !p.exists() {
            return Ok(None);
        }
        let s = read(&p)?;
        s.trim().parse().map(Some).map_err(|_| Error::Parse { path: p, what: "cpu.rt_runtime_us", text: s })
    }
    /// Sets `cpu.rt_runtime_us` (µs of real-time CPU per `cpu.rt_period_us`, -1 unlimited).
    fn set_rt_runtime(&self, rel: &str, us: i64) -> Result<()> {
        write(self.root().join(rel).join("cpu.rt_runtime_us"), &us.to_string())
    }
    /// True when allot works inside systemd's delegation ([`SystemdTree`]): currencies
    /// are slices, `""` is no directory of allot's, and processes outside allot's scopes
    /// are moved through systemd. False for allot's own tree.
    fn systemd(&self) -> bool {
        false
    }
    /// What only a backend inside systemd's delegation does (sessions, units, tethers,
    /// scope weights, users' slices): [`SystemdTree`] gives them; None for allot's own
    /// tree, where none of them has anything to do.
    fn delegation(&self) -> Option<&dyn Delegation> {
        None
    }
    /// Memory by share on the users' slices, through systemd (systemd only; None for
    /// allot's own tree, whose memory is [`memory::Memory`]'s).
    fn slice_memory(&self) -> Option<&dyn systemd::SliceMemory> {
        None
    }
    /// Kills every process in a directory of allot's at once (`cgroup.kill`, Linux 5.14:
    /// the kernel sends SIGKILL; writing the file is all the permission it takes).
    fn kill_all(&self, rel: &str) -> Result<()> {
        write(self.dir(rel).join("cgroup.kill"), "1")
    }
    /// Periodic upkeep; call once a tick. Sends what a rate limit held back and repairs
    /// what the backend keeps alive (systemd: currency weights, holders). Returns the
    /// directories whose deferred write failed: forget what was applied to them, so the
    /// next plan writes them again. Nothing to do for allot's own tree.
    fn upkeep(&self) -> Vec<(String, Error)> {
        Vec::new()
    }
    /// Lets a directory that still holds processes go, for good (allot being removed):
    /// on systemd its scope's holder is ended, so the scope ends with its last process.
    /// Nothing to do for allot's own tree (its processes are moved out instead).
    fn release(&self, _rel: &str) -> Result<()> {
        Ok(())
    }
}

/// The operations only a backend inside systemd's delegation has: logind's sessions,
/// systemd's units, tethers to login sessions, scope weights and users' slices, all
/// through systemd's API. [`CpuController::delegation`] gives them where they exist.
pub trait Delegation: Send + Sync + std::fmt::Debug {
    /// The login session a process is in, as logind reports it (None when the process is
    /// in no session).
    fn session_of(&self, pid: i32) -> Result<Option<crate::ipc::systemd_bus::Session>>;
    /// The systemd unit a process outside allot is in (GetUnitByPID and its properties).
    fn unit_of(&self, pid: i32) -> Result<Option<crate::ipc::systemd_bus::UnitOf>>;
    /// Ties job `job` (its directory's leaf name) to the login session whose scope is
    /// `session_scope`, so that [`Self::cut_tethers`] reports it when logind stops that
    /// session (a `PartOf=` tether, systemd/tethers.rs).
    fn tether(&self, job: &str, session_scope: &str) -> Result<()>;
    /// The jobs whose session was stopped since the last call (looked at once a second).
    fn cut_tethers(&self) -> Result<Vec<String>>;
    /// Lets go of a job's tether (the job ended, or allot is being removed).
    fn untether(&self, job: &str) -> Result<()>;
    /// The jobs with a tether now.
    fn tethered(&self) -> Vec<String>;
    /// Weighs the scope that holds currency `rel`'s jobs against the user's other units
    /// (sessions, their user manager) in their slice. (In allot's own tree a currency's
    /// directory is allot's and its weight is its funding: nothing to do there.)
    fn set_scope_weight(&self, rel: &str, units: u32) -> Result<()>;
    /// The uids whose `user-UID.slice` exists now (logged in, or lingering): a user's
    /// currency is that slice.
    fn user_slices(&self) -> Result<Vec<u32>>;
    /// Takes back what allot set on currency `rel`'s slice (its `CPUWeight=` and
    /// `CPUQuota=`, back to systemd's defaults) while the slice runs now; a stopped slice
    /// is left alone (a property set on it would start it again).
    fn take_back_slice(&self, rel: &str) -> Result<()>;
    /// Where systemd's units are read (login sessions, users' slices) when not the cpu
    /// controller's mount: on a hybrid host the unified hierarchy, on v1 `name=systemd`.
    fn units_mount(&self) -> Option<&Path> {
        None
    }
}

/// The controller for this host: [`SystemdTree`] on a systemd host (systemd as init),
/// where allot must not keep a tree of its own: in the unified hierarchy on cgroup v2,
/// in the v1 cpu hierarchy on a hybrid or v1 host ([`SystemdTree::legacy`]); else
/// [`detect`]'s. A systemd host whose systemd cannot be reached is an error, never a
/// fallback to a tree at the root.
pub fn detect_host(name: &str, holder: crate::ipc::systemd_bus::holder::Holder) -> Result<Box<dyn CpuController>> {
    if crate::ipc::systemd_bus::is_systemd_host() {
        return Ok(Box::new(SystemdTree::new(name, holder)?));
    }
    if crate::ipc::systemd_bus::is_systemd_init() {
        return Ok(Box::new(SystemdTree::legacy(name, holder)?));
    }
    detect(name)
}

/// Finds the cpu controller and returns allot's [`Tree`] named `name`: the root
/// `<mount>/name` and its background sibling `<mount>/name-background`. v2 is used when
/// the unified hierarchy has the cpu controller, else v1.
pub fn detect(name: &str) -> Result<Box<dyn CpuController>> {
    check_name(name)?;
    let fg = detect_one(name)?;
    let bg = detect_one(&format!("{name}-background"))?;
    Ok(Box::new(Tree::new(fg, bg)))
}

/// The directory of a process's own cgroup in the cpu hierarchy (where its `cpu.stat`
/// is), whoever made it: `allot why` reads any process's throttling from there. Only the
/// controller's mount is looked up; no allot tree is needed.
pub fn cpu_dir_of(pid: i32) -> Result<PathBuf> {
    // Any valid root name serves: only the mount and the process's path are used.
    let c = detect_one("allot")?;
    Ok(c.mount().join(c.path_of(pid)?.trim_start_matches('/')))
}

/// The subtree path that [`Tree`] sends to the background sibling.
pub const BACKGROUND: &str = "background";

/// allot's cgroups: its root for the foreground, and beside it, at the top of the
/// hierarchy, a sibling for the background marked `cpu.idle`. The sibling must be at the
/// top: `cpu.idle` ranks a group only against its siblings, so inside allot's root it
/// would yield to allot's jobs but not to processes outside allot. Relative paths under
/// `background/` address the sibling; all others the root.
#[derive(Debug)]
pub struct Tree {
    fg: Box<dyn CpuController>,
    bg: Box<dyn CpuController>,
}

impl Tree {
    /// `fg` for allot's root, `bg` for its background sibling.
    pub(crate) fn new(fg: Box<dyn CpuController>, bg: Box<dyn CpuController>) -> Self {
        Self { fg, bg }
    }
    fn route<'a>(&self, rel: &'a str) -> (&dyn CpuController, &'a str) {
        if rel == BACKGROUND {
            (self.bg.as_ref(), "")
        } else if let Some(r) = rel.strip_prefix("background/") {
            (self.bg.as_ref(), r)
        } else {
            (self.fg.as_ref(), rel)
        }
    }
}

impl CpuController for Tree {
    fn version(&self) -> Version {
        self.fg.version()
    }
    fn root(&self) -> &Path {
        self.fg.root()
    }
    fn create(&self, rel: &str) -> Result<()> {
        let (c, r) = self.route(rel);
        c.create(r)
    }
    fn remove(&self, rel: &str) -> Result<()> {
        let (c, r) = self.route(rel);
        c.remove(r)
    }
    fn exists(&self, rel: &str) -> bool {
        let (c, r) = self.route(rel);
        c.exists(r)
    }
    fn dir(&self, rel: &str) -> PathBuf {
        let (c, r) = self.route(rel);
        c.dir(r)
    }
    fn children(&self, rel: &str) -> Result<Vec<String>> {
        let (c, r) = self.route(rel);
        c.children(r)
    }
    fn set_weight(&self, rel: &str, units: u32) -> Result<()> {
        let (c, r) = self.route(rel);
        c.set_weight(r, units)
    }
    fn weight(&self, rel: &str) -> Result<u32> {
        let (c, r) = self.route(rel);
        c.weight(r)
    }
    fn set_max(&self, rel: &str, max: Option<Max>) -> Result<()> {
        let (c, r) = self.route(rel);
        c.set_max(r, max)
    }
    fn max(&self, rel: &str) -> Result<Option<Max>> {
        let (c, r) = self.route(rel);
        c.max(r)
    }
    fn has_idle(&self) -> bool {
        self.fg.has_idle()
    }
    fn set_idle(&self, rel: &str, idle: bool) -> Result<()> {
        let (c, r) = self.route(rel);
        c.set_idle(r, idle)
    }
    fn idle(&self, rel: &str) -> Result<bool> {
        let (c, r) = self.route(rel);
        c.idle(r)
    }
    fn procs(&self, rel: &str) -> Result<Vec<i32>> {
        let (c, r) = self.route(rel);
        c.procs(r)
    }
    fn threads(&self, rel: &str) -> Result<Vec<i32>> {
        let (c, r) = self.route(rel);
        c.threads(r)
    }
    fn move_pid(&self, rel: &str, pid: i32) -> Result<()> {
        let (c, r) = self.route(rel);
        c.move_pid(r, pid)
    }
    fn procs_files(&self, rel: &str) -> Vec<PathBuf> {
        let (c, r) = self.route(rel);
        c.procs_files(r)
    }
    fn release_pid(&self, pid: i32) -> Result<()> {
        self.fg.release_pid(pid)
    }
    fn usage_ns(&self, rel: &str) -> Result<u64> {
        let (c, r) = self.route(rel);
        c.usage_ns(r)
    }
    fn path_of(&self, pid: i32) -> Result<String> {
        self.fg.path_of(pid)
    }
    fn mount(&self) -> &Path {
        self.fg.mount()
    }
    fn move_to_path(&self, path: &str, pid: i32) -> Result<()> {
        self.fg.move_to_path(path, pid)
    }
    fn rt_runtime(&self, rel: &str) -> Result<Option<i64>> {
        let (c, r) = self.route(rel);
        c.rt_runtime(r)
    }
    fn set_rt_runtime(&self, rel: &str, us: i64) -> Result<()> {
        let (c, r) = self.route(rel);
        c.set_rt_runtime(r, us)
    }
    fn rel_of(&self, pid: i32) -> Result<Option<String>> {
        if let Some(r) = self.fg.rel_of(pid)? {
            return Ok(Some(r));
        }
        Ok(self.bg.rel_of(pid)?.map(|r| if r.is_empty() { BACKGROUND.to_string() } else { format!("{BACKGROUND}/{r}") }))
    }
}

/// The mount point of a cgroup v1 hierarchy with controller `c`, if mounted.
/// Where `controller` (memory, blkio/io) stands beside `cg`'s tree: v1's hierarchy of
/// `v1_name` at the same root name, or v2's own tree when the unified hierarchy offers
/// `v2_name`. Returns (version, mount, allot's root there); None where there is none, and
/// on a systemd host (systemd's units carry those settings there).
pub(crate) fn beside(cg: &dyn CpuController, v1_name: &str, v2_name: &str) -> Option<(Version, PathBuf, PathBuf)> {
    if cg.systemd() {
        return None;
    }
    let name = cg.root().file_name()?.to_owned();
    match cg.version() {
        Version::V1 => {
            let mount = v1_mount(v1_name)?;
            Some((Version::V1, mount.join(name), mount))
        }
        Version::V2 => {
            let mount = cg.mount().to_path_buf();
            let ctrls = crate::read(mount.join("cgroup.controllers")).ok()?;
            ctrls.split_whitespace().any(|c| c == v2_name).then(|| (Version::V2, cg.root().into(), mount))
        }
    }
}

pub(crate) fn v1_mount(c: &str) -> Option<PathBuf> {
    let mounts = parse_mountinfo(&read("/proc/self/mountinfo").ok()?);
    mounts.iter().find(|m| m.fstype == "cgroup" && m.options.split(',').any(|o| o == c)).map(|m| PathBuf::from(&m.point))
}

/// The mount point of the unified (v2) hierarchy, if mounted.
pub(crate) fn v2_mount() -> Option<PathBuf> {
    let mounts = parse_mountinfo(&read("/proc/self/mountinfo").ok()?);
    mounts.iter().find(|m| m.fstype == "cgroup2").map(|m| PathBuf::from(&m.point))
}

/// One backend rooted at `name` under the cpu controller's mount.
fn detect_one(name: &str) -> Result<Box<dyn CpuController>> {
    let info = read("/proc/self/mountinfo")?;
    let mounts = parse_mountinfo(&info);
    if let Some(m) = mounts.iter().find(|m| m.fstype == "cgroup2") {
        let ctrls = read(Path::new(&m.point).join("cgroup.controllers")).unwrap_or_default();
        if ctrls.split_whitespace().any(|c| c == "cpu") {
            return Ok(Box::new(V2::new(PathBuf::from(&m.point), name)));
        }
    }
    let v1 = |c: &str| mounts.iter().find(|m| m.fstype == "cgroup" && m.options.split(',').any(|o| o == c));
    if let Some(cpu) = v1("cpu") {
        let acct = v1("cpuacct").map(|m| PathBuf::from(&m.point));
        let mem = v1("memory").map(|m| PathBuf::from(&m.point));
        let blkio = v1("blkio").map(|m| PathBuf::from(&m.point));
        return Ok(Box::new(V1::new(PathBuf::from(&cpu.point), acct, name).with_memory(mem).with_blkio(blkio)));
    }
    Err(Error::NoCpuController(
        "neither a cgroup2 mount with the cpu controller enabled nor a cgroup v1 mount with the cpu controller was found in /proc/self/mountinfo; mount one (e.g. `mount -t cgroup2 none /sys/fs/cgroup`)".into(),
    ))
}

fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.ends_with("-background")
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
        && !name.starts_with('.');
    if ok {
        Ok(())
    } else {
        Err(Error::NoCpuController(format!(
            "cgroup root name {name:?} is invalid: use 1..64 of [A-Za-z0-9._-], not starting with '.' nor ending in -background (allot's background sibling)"
        )))
    }
}

struct Mount {
    point: String,
    fstype: String,
    options: String,
}

fn parse_mountinfo(s: &str) -> Vec<Mount> {
    s.lines()
        .filter_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let point = left.split_whitespace().nth(4)?.replace("\\040", " ");
            let mut r = right.split_whitespace();
            let fstype = r.next()?.to_string();
            let _src = r.next();
            let options = r.next().unwrap_or("").to_string();
            Some(Mount { point, fstype, options })
        })
        .collect()
}

/// Enables the cpu controller for a cgroup v2 directory's children (once).
fn enable_cpu(dir: &Path) -> Result<()> {
    let ctl = dir.join("cgroup.subtree_control");
    if read(&ctl)?.split_whitespace().any(|c| c == "cpu") {
        return Ok(());
    }
    write(ctl, "+cpu")
}

fn mkdir(p: &Path) -> Result<()> {
    match std::fs::create_dir(p) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(source) => Err(Error::Io { op: "mkdir", path: p.into(), source }),
    }
}

fn rmdir(p: &Path) -> Result<()> {
    match std::fs::remove_dir(p) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(Error::Io { op: "rmdir", path: p.into(), source }),
    }
}

fn strip_root(cg: &str, name: &str) -> Option<String> {
    let rest = cg.strip_prefix('/')?.strip_prefix(name)?;
    if rest.is_empty() {
        Some(String::new())
    } else {
        rest.strip_prefix('/').map(String::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_finds_controllers() {
        let t = "35 25 0:30 / /sys/fs/cgroup/cpu rw,relatime shared:9 - cgroup cgroup rw,cpu\n\
                 36 25 0:31 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";
        let m = parse_mountinfo(t);
        assert_eq!(m.len(), 2);
        assert_eq!((m[0].point.as_str(), m[0].fstype.as_str(), m[0].options.as_str()), ("/sys/fs/cgroup/cpu", "cgroup", "rw,cpu"));
        assert_eq!(m[1].fstype, "cgroup2");
    }

    #[test]
    fn root_prefix() {
        assert_eq!(strip_root("/allot/user-1/j2", "allot").as_deref(), Some("user-1/j2"));
        assert_eq!(strip_root("/allot", "allot").as_deref(), Some(""));
        assert_eq!(strip_root("/allot2/x", "allot"), None);
        assert_eq!(strip_root("/", "allot"), None);
    }

    #[test]
    fn this_process_has_a_cpu_cgroup_directory() {
        let d = cpu_dir_of(std::process::id() as i32).unwrap();
        assert!(d.is_dir(), "{}", d.display());
        assert!(cpu_dir_of(-1).is_err());
    }

    #[test]
    fn names_are_checked() {
        assert!(check_name("allot").is_ok() && check_name("allot-test-1.x").is_ok());
        for bad in ["", ".x", "a/b", "..", &"x".repeat(65), "allot-background"] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }
}
