//! The cpu controller on a systemd host (cgroup v2, systemd as PID 1): allot creates no
//! cgroup outside its own delegated scopes, writes no cgroup systemd made, and takes no
//! process out of another manager's cgroup by itself (docs/systemd.md).
//!
//! - A currency is a slice: a user's own `user-UID.slice`, a named currency's slice
//!   beside it. Its funding is the slice's `CPUWeight`, set over D-Bus (runtime), at
//!   most once a second per slice ([`names::Limiter`]; [`CpuController::upkeep`] sends
//!   what was held back).
//! - A currency's hard cap is the slice's `CPUQuota=`, also set over D-Bus (runtime).
//! - A currency's jobs live in one scope allot starts in that slice (`Delegate=cpu`),
//!   kept alive by a holder in `.holder/`; inside it allot makes the job leaves and
//!   writes their `cpu.weight` and `cpu.max` itself.
//! - The background class is a top-level slice with `CPUWeight=idle` holding one such
//!   scope, with a directory per currency and job leaves in those.
//! - On a hybrid or v1 host the same units live in the v1 cpu hierarchy (legacy.rs).
//! - A process outside allot's scopes is moved through systemd (AttachProcessesToUnit);
//!   between allot's own directories by writing cgroup.procs.
//! - Scopes are found through systemd (ListUnitsByPatterns, `ControlGroup`), so a
//!   restarted daemon finds every scope, job and holder where it left them.

#[cfg(test)]
mod fake;
mod job_memory;
mod legacy;
mod manager;
pub mod memory;
pub mod names;
mod scopes;
#[cfg(test)]
mod tests;
mod tethers;

pub use legacy::{legacy_mounts, LegacyMounts};
pub use manager::Manager;
pub use memory::{SliceMemory, SliceProp};

use super::{enable_cpu, mkdir, rmdir, CpuController, Delegation, Max, Version, V1};
use crate::ipc::systemd_bus::holder::Holder;
use crate::ipc::systemd_bus::{CpuQuota, CpuWeight, Session, Systemd};
use crate::{read, read_u64, write, Error, Result};
use names::{Key, Limiter, Names, Offer, Place};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How often one slice's CPUWeight may be written.
pub const WEIGHT_INTERVAL: Duration = Duration::from_secs(1);
/// The rate limiter's key of a currency scope's own weight: the currency's rel and this
/// (a name no currency or job directory can have).
const SCOPE_WEIGHT: &str = "/#scope";
/// How often [`CpuController::upkeep`] looks for scopes whose holder died.
const HOLDER_CHECK: Duration = Duration::from_secs(10);

/// allot's scopes on a systemd host, behind the [`CpuController`] trait.
#[derive(Debug)]
pub struct SystemdTree {
    names: Names,
    mount: PathBuf,
    holder: Holder,
    version: u32,
    /// The v1 cpu hierarchy's files inside allot's scopes (hybrid and v1 hosts).
    v1: Option<V1>,
    /// Where systemd's units are seen (the users' slices, login sessions): the mount on
    /// cgroup v2.
    track: PathBuf,
    /// That hierarchy's line in /proc/PID/cgroup (None: the cgroup2 one, `0::`).
    track_line: Option<&'static str>,
    state: Mutex<State>,
    /// `cpu.stat` files, kept open: the daemon reads the busy ones every tick.
    counters: crate::reread::Rereader,
}

#[derive(Debug)]
struct State {
    sd: Box<dyn Manager>,
    /// Scope → its cgroup as /proc/PID/cgroup names it.
    scopes: BTreeMap<Key, String>,
    /// Slice unit → its cgroup.
    slices: BTreeMap<String, String>,
    limiter: Limiter,
    /// The slices' memory properties (memory.rs), by `<unit>#<property>`.
    mem_limiter: Limiter,
    holders_checked: Option<Instant>,
    /// Jobs with a tether to their login session (tethers.rs), and when they were listed.
    tethers: std::collections::BTreeSet<String>,
    tethers_checked: Option<Instant>,
}

/// The background slice's weight under systemd `version`.
fn idle_weight(version: u32) -> CpuWeight {
    if version >= crate::ipc::systemd_bus::IDLE_VERSION {
        CpuWeight::Idle
    } else {
        CpuWeight::Weight(1)
    }
}

fn unsupported(what: &str, rel: &str) -> Error {
    Error::Sys {
        call: format!("{what} {rel:?}"),
        source: std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "not on a systemd host: there allot sets caps and idle only on its own directories, and funding on currencies",
        ),
    }
}

fn bad_rel(rel: &str, why: String) -> Error {
    Error::Sys { call: format!("address {rel:?}"), source: std::io::Error::new(std::io::ErrorKind::InvalidInput, why) }
}

impl SystemdTree {
    /// Connects to systemd and finds this root's scopes. `root` is allot's root name
    /// (`--cgroup-root`); scopes are `<root>:<currency>.scope`.
    pub fn new(root: &str, holder: Holder) -> Result<Self> {
        super::check_name(root)?;
        Self::with_manager(root, PathBuf::from("/sys/fs/cgroup"), holder, Box::new(Systemd::connect()?))
    }

    /// The tree over `manager` (systemd, or a test's fake) with the cgroup2 hierarchy
    /// mounted at `mount`; finds this root's scopes.
    pub fn with_manager(root: &str, mount: PathBuf, holder: Holder, mut sd: Box<dyn Manager>) -> Result<Self> {
        super::check_name(root)?;
        let version = sd.version_major()?;
        if version < crate::ipc::systemd_bus::MIN_VERSION {
            return Err(Error::NoCpuController(format!(
                "systemd {version} is older than {}, the oldest allot works with (AttachProcessesToUnit came in 238); upgrade systemd",
                crate::ipc::systemd_bus::MIN_VERSION
            )));
        }
        let state = State {
            sd,
            scopes: BTreeMap::new(),
            slices: BTreeMap::new(),
            limiter: Limiter::new(WEIGHT_INTERVAL),
            mem_limiter: Limiter::new(WEIGHT_INTERVAL),
            holders_checked: None,
            tethers: Default::default(),
            tethers_checked: None,
        };
        let t = Self {
            names: Names::new(root),
            track: mount.clone(),
            mount,
            holder,
            version,
            v1: None,
            track_line: None,
            state: Mutex::new(state),
            counters: Default::default(),
        };
        t.refresh(&mut t.lock())?;
        Ok(t)
    }

    /// systemd's major version.
    pub fn systemd_version(&self) -> u32 {
        self.version
    }

    /// The unit names this tree uses.
    pub fn names(&self) -> &Names {
        &self.names
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Re-reads which scopes exist (ListUnitsByPatterns) and their cgroups. A failed scope
    /// of ours is reset so its name can be used again.
    fn refresh(&self, st: &mut State) -> Result<()> {
        let units = st.sd.list_units(&[], &[&self.names.pattern()])?;
        let mut scopes = BTreeMap::new();
        for u in units {
            let Some(key) = self.names.key_of(&u.name) else { continue };
            match u.active.as_str() {
                "active" | "activating" | "reloading" => {
                    let cg = st.sd.unit_cgroup(&u.name)?;
                    if !cg.is_empty() {
                        scopes.insert(key, cg);
                    }
                }
                "failed" => {
                    let _ = st.sd.reset_failed(&u.name);
                }
                _ => {}
            }
        }
        st.scopes = scopes;
        Ok(())
    }

    fn abs(&self, cg: &str) -> PathBuf {
        self.mount.join(cg.trim_start_matches('/'))
    }

    /// The directory of a scope, looked up through systemd when not known yet.
    fn scope_dir(&self, st: &mut State, key: &Key) -> Option<PathBuf> {
        if let Some(cg) = st.scopes.get(key) {
            return Some(self.abs(cg));
        }
        let unit = self.names.scope(key);
        let cg = st.sd.unit_cgroup(&unit).ok().filter(|c| !c.is_empty())?;
        st.scopes.insert(key.clone(), cg.clone());
        Some(self.abs(&cg))
    }

    /// The directory of a slice (its cgroup, from systemd).
    fn slice_dir(&self, st: &mut State, slice: &str) -> Result<PathBuf> {
        if let Some(cg) = st.slices.get(slice) {
            return Ok(self.abs(cg));
        }
        let cg = st.sd.unit_cgroup(slice)?;
        if cg.is_empty() {
            return Err(Error::Sys {
                call: format!("find the cgroup of {slice}"),
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "the slice is not active (it has no cgroup now)"),
            });
        }
        st.slices.insert(slice.to_string(), cg.clone());
        Ok(self.abs(&cg))
    }

    fn place(rel: &str) -> Result<Place> {
        names::parse(rel).map_err(|why| bad_rel(rel, why))
    }

    /// Sends a slice's CPUWeight now, noting the result in the limiter.
    fn send_weight(&self, st: &mut State, rel: &str, slice: &str, w: CpuWeight, units: u32) -> Result<()> {
        match st.sd.set_properties(slice, true, vec![w.prop()]) {
            Ok(()) => {
                st.limiter.sent(rel, units, Instant::now());
                Ok(())
            }
            Err(e) => {
                st.limiter.failed(rel);
                Err(e)
            }
        }
    }

    /// What the background slice gets: `CPUWeight=idle` from systemd 252, the smallest
    /// weight (1) before it.
    pub(super) fn idle_weight(&self) -> CpuWeight {
        idle_weight(self.version)
    }

    /// The session a process is in, as logind reports it.
    pub fn session(&self, pid: i32) -> Result<Option<Session>> {
        self.lock().sd.session_of(pid as u32)
    }
}

impl Delegation for SystemdTree {
    fn session_of(&self, pid: i32) -> Result<Option<Session>> {
        self.session(pid)
    }
    fn unit_of(&self, pid: i32) -> Result<Option<crate::ipc::systemd_bus::UnitOf>> {
        self.lock().sd.unit_of(pid as u32).map(Some)
    }
    fn tether(&self, job: &str, session_scope: &str) -> Result<()> {
        self.start_tether(&mut self.lock(), job, session_scope)
    }
    fn cut_tethers(&self) -> Result<Vec<String>> {
        self.cut(&mut self.lock())
    }
    fn untether(&self, job: &str) -> Result<()> {
        self.end_tether(&mut self.lock(), job)
    }
    fn tethered(&self) -> Vec<String> {
        self.lock().tethers.iter().cloned().collect()
    }
    fn take_back_slice(&self, rel: &str) -> Result<()> {
        self.take_back_currency_slice(rel)
    }
    fn user_slices(&self) -> Result<Vec<u32>> {
        // Read, never written: user.slice and its children are systemd's.
        let dir = self.track.join("user.slice");
        let rd = std::fs::read_dir(&dir).map_err(|source| Error::Io { op: "readdir", path: dir.clone(), source })?;
        let mut uids: Vec<u32> =
            rd.flatten().filter_map(|e| e.file_name().to_str().and_then(|n| n.strip_prefix("user-")?.strip_suffix(".slice")?.parse().ok())).collect();
        uids.sort_unstable();
        Ok(uids)
    }
    fn units_mount(&self) -> Option<&Path> {
        self.is_legacy().then_some(self.track.as_path())
    }
    fn set_scope_weight(&self, rel: &str, units: u32) -> Result<()> {
        let units = units.clamp(1, 10000);
        let key = match Self::place(rel)? {
            Place::Scope(key @ Key::Currency(_)) => key,
            _ => return Err(unsupported("set the scope weight of", rel)),
        };
        let mut st = self.lock();
        if !st.scopes.contains_key(&key) {
            // No scope yet (its first job is being made): the next plan weighs it.
            return Ok(());
        }
        let lim = format!("{rel}{SCOPE_WEIGHT}");
        match st.limiter.offer(&lim, units, Instant::now()) {
            Offer::Same | Offer::Held => Ok(()),
            Offer::Send => self.send_weight(&mut st, &lim, &self.names.scope(&key), CpuWeight::Weight(units), units),
        }
    }
}

impl CpuController for SystemdTree {
    fn version(&self) -> Version {
        if self.is_legacy() {
            Version::V1
        } else {
            Version::V2
        }
    }
    /// The cgroup mount: on systemd, allot has no root directory of its own.
    fn root(&self) -> &Path {
        &self.mount
    }
    fn mount(&self) -> &Path {
        &self.mount
    }
    fn systemd(&self) -> bool {
        true
    }
    fn delegation(&self) -> Option<&dyn Delegation> {
        Some(self)
    }
    /// None on v1: `MemoryLow=` and `MemoryHigh=` are cgroup v2's.
    fn slice_memory(&self) -> Option<&dyn SliceMemory> {
        (!self.is_legacy()).then_some(self as &dyn SliceMemory)
    }
    fn dir(&self, rel: &str) -> PathBuf {
        let mut st = self.lock();
        match Self::place(rel) {
            Ok(Place::Root) | Err(_) => self.mount.clone(),
            Ok(Place::Scope(k)) => self.scope_dir(&mut st, &k).unwrap_or_else(|| PathBuf::from("/nonexistent").join(self.names.scope(&k))),
            Ok(Place::Inside(k, sub)) => {
                self.scope_dir(&mut st, &k).unwrap_or_else(|| PathBuf::from("/nonexistent").join(self.names.scope(&k))).join(sub)
            }
        }
    }
    fn exists(&self, rel: &str) -> bool {
        match Self::place(rel) {
            Ok(Place::Root) => true,
            Ok(Place::Scope(k)) => self.lock().scopes.get(&k).is_some_and(|cg| self.abs(cg).is_dir()),
            Ok(Place::Inside(..)) => self.dir(rel).is_dir(),
            Err(_) => false,
        }
    }
    fn create(&self, rel: &str) -> Result<()> {
        let (key, sub) = match Self::place(rel)? {
            Place::Root => return Ok(()),
            Place::Scope(k) => (k, String::new()),
            Place::Inside(k, s) => (k, s),
        };
        let mut st = self.lock();
        let mut p = self.ensure_scope(&mut st, &key)?;
        let parts: Vec<&str> = sub.split('/').filter(|x| !x.is_empty()).collect();
        for (i, part) in parts.iter().enumerate() {
            if i > 0 && !self.is_legacy() {
                enable_cpu(&p)?;
                job_memory::enable_memory_if_delegated(&p)?;
            }
            p.push(part);
            mkdir(&p)?;
        }
        Ok(())
    }
    fn remove(&self, rel: &str) -> Result<()> {
        match Self::place(rel)? {
            Place::Root => Ok(()),
            Place::Inside(..) => rmdir(&self.dir(rel)),
            Place::Scope(key) => self.stop_scope(&key),
        }
    }
    fn release(&self, rel: &str) -> Result<()> {
        match Self::place(rel)? {
            Place::Scope(key) => self.release_scope(&key),
            _ => Ok(()),
        }
    }
    fn children(&self, rel: &str) -> Result<Vec<String>> {
        if Self::place(rel)? == Place::Root {
            let mut st = self.lock();
            self.refresh(&mut st)?;
            return Ok(st.scopes.keys().filter_map(|k| if let Key::Currency(c) = k { Some(c.clone()) } else { None }).collect());
        }
        let dir = self.dir(rel);
        let rd = std::fs::read_dir(&dir).map_err(|source| Error::Io { op: "readdir", path: dir.clone(), source })?;
        let mut v: Vec<String> = rd
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| !n.starts_with('.'))
            .collect();
        v.sort();
        Ok(v)
    }
    fn set_weight(&self, rel: &str, units: u32) -> Result<()> {
        let units = units.clamp(1, 10000);
        match Self::place(rel)? {
            Place::Root => Err(unsupported("set the weight of", rel)),
            Place::Inside(..) => self.write_weight(&self.dir(rel), units),
            Place::Scope(key) => {
                let mut st = self.lock();
                match st.limiter.offer(rel, units, Instant::now()) {
                    Offer::Same | Offer::Held => Ok(()),
                    Offer::Send => self.send_weight(&mut st, rel, &self.names.slice(&key), CpuWeight::Weight(units), units),
                }
            }
        }
    }
    fn weight(&self, rel: &str) -> Result<u32> {
        let dir = match Self::place(rel)? {
            Place::Root => return Err(unsupported("read the weight of", rel)),
            Place::Inside(..) => self.dir(rel),
            Place::Scope(key) => {
                let mut st = self.lock();
                if let Some(w) = st.limiter.pending(rel) {
                    return Ok(w);
                }
                self.slice_dir(&mut st, &self.names.slice(&key))?
            }
        };
        self.read_weight(&dir)
    }
    fn set_max(&self, rel: &str, max: Option<Max>) -> Result<()> {
        match Self::place(rel)? {
            Place::Inside(..) => {}
            // A currency's cap is its slice's CPUQuota=, set through systemd (the slice's
            // cgroup files are systemd's, never written here).
            Place::Scope(key @ Key::Currency(_)) => {
                return self.lock().sd.set_properties(&self.names.slice(&key), true, vec![CpuQuota::from(max).prop()]);
            }
            _ => return Err(unsupported("set cpu.max of", rel)),
        }
        self.write_max(&self.dir(rel), max)
    }
    fn max(&self, rel: &str) -> Result<Option<Max>> {
        let dir = match Self::place(rel)? {
            // What systemd wrote for the slice's CPUQuota= (see set_max).
            Place::Scope(key @ Key::Currency(_)) => {
                let mut st = self.lock();
                self.slice_dir(&mut st, &self.names.slice(&key))?
            }
            _ => self.dir(rel),
        };
        self.read_max(&dir)
    }
    fn has_idle(&self) -> bool {
        // On v1 systemd writes no cpu.idle for the background slice: CPUWeight=idle is
        // cpu.shares 2 there (legacy.rs).
        if self.version < crate::ipc::systemd_bus::IDLE_VERSION || self.is_legacy() {
            return false;
        }
        let mut st = self.lock();
        let bg = self.names.slice(&Key::Background);
        match self.slice_dir(&mut st, &bg) {
            Ok(d) => d.join("cpu.idle").exists(),
            // No background slice yet: does the kernel have cpu.idle at all?
            Err(_) => std::fs::read_dir(&self.mount).into_iter().flatten().flatten().any(|e| e.path().join("cpu.idle").exists()),
        }
    }
    fn set_idle(&self, rel: &str, idle: bool) -> Result<()> {
        match Self::place(rel)? {
            Place::Scope(Key::Background) => {
                let w = if idle { self.idle_weight() } else { CpuWeight::Unset };
                self.lock().sd.set_properties(&self.names.slice(&Key::Background), true, vec![w.prop()])
            }
            Place::Inside(..) if !self.is_legacy() => write(self.dir(rel).join("cpu.idle"), if idle { "1" } else { "0" }),
            _ => Err(unsupported("set cpu.idle of", rel)),
        }
    }
    fn idle(&self, rel: &str) -> Result<bool> {
        let p = match Self::place(rel)? {
            Place::Scope(Key::Background) => {
                let mut st = self.lock();
                self.slice_dir(&mut st, &self.names.slice(&Key::Background))?.join("cpu.idle")
            }
            _ => self.dir(rel).join("cpu.idle"),
        };
        if !p.exists() {
            return Ok(false);
        }
        Ok(read_u64(p)? == 1)
    }
    fn procs(&self, rel: &str) -> Result<Vec<i32>> {
        Ok(read(self.dir(rel).join("cgroup.procs"))?.lines().filter_map(|l| l.trim().parse().ok()).collect())
    }
    fn threads(&self, rel: &str) -> Result<Vec<i32>> {
        self.read_threads(&self.dir(rel))
    }
    fn move_pid(&self, rel: &str, pid: i32) -> Result<()> {
        let Place::Inside(key, sub) = Self::place(rel)? else {
            return Err(bad_rel(rel, "processes go into a job's directory, not a scope's top".into()));
        };
        if self.rel_of(pid)?.is_some() {
            // Within allot's own delegations: the kernel's interface, as systemd allows.
            return write(self.dir(rel).join("cgroup.procs"), &pid.to_string());
        }
        let unit = self.names.scope(&key);
        let mut st = self.lock();
        let dir = self.scope_dir(&mut st, &key).ok_or_else(|| bad_rel(rel, "its scope is not running".into()))?;
        self.attach_into(&mut st, &unit, &dir, &sub, pid)
    }
    fn release_pid(&self, pid: i32) -> Result<()> {
        Err(unsupported(&format!("move process {pid} to the root cgroup:"), "/"))
    }
    fn usage_ns(&self, rel: &str) -> Result<u64> {
        if Self::place(rel)? == Place::Root {
            let dirs: Vec<PathBuf> = self.lock().scopes.iter().filter(|(k, _)| **k != Key::Background).map(|(_, cg)| self.abs(cg)).collect();
            return Ok(dirs.iter().filter_map(|d| self.stat_usage(d).ok()).sum());
        }
        self.stat_usage(&self.dir(rel))
    }
    fn rel_of(&self, pid: i32) -> Result<Option<String>> {
        let path = self.job_path_of(pid)?;
        let st = self.lock();
        Ok(names::rel_of(&path, st.scopes.iter()))
    }
    fn path_of(&self, pid: i32) -> Result<String> {
        // As systemd names it (in its own hierarchy), as on cgroup v2.
        crate::process::procfs::cgroup_of(pid, self.track_line)
    }
    fn move_to_path(&self, path: &str, pid: i32) -> Result<()> {
        let inside = names::rel_of(path, self.lock().scopes.iter());
        match inside {
            Some(rel) => write(self.dir(&rel).join("cgroup.procs"), &pid.to_string()),
            None => {
                let mut st = self.lock();
                let unit = st.sd.unit_by_cgroup(path)?;
                let top = st.sd.unit_cgroup(&unit)?;
                let sub = path.strip_prefix(top.as_str()).unwrap_or("");
                st.sd.attach(&unit, sub, &[pid as u32])
            }
        }
    }
    fn kill_all(&self, rel: &str) -> Result<()> {
        self.kill_in(rel)
    }
    fn rt_runtime(&self, _rel: &str) -> Result<Option<i64>> {
        Ok(None)
    }
    fn set_rt_runtime(&self, rel: &str, _us: i64) -> Result<()> {
        Err(unsupported("set cpu.rt_runtime_us of", rel))
    }
    fn upkeep(&self) -> Vec<(String, Error)> {
        let mut errs = vec![];
        let mut st = self.lock();
        let now = Instant::now();
        for (rel, units) in st.limiter.due(now) {
            // A held scope weight (set_scope_weight) or a held slice weight (funding).
            let (cur, of_scope) = match rel.strip_suffix(SCOPE_WEIGHT) {
                Some(cur) => (cur, true),
                None => (rel.as_str(), false),
            };
            let key = match names::parse(cur) {
                Ok(Place::Scope(k)) => k,
                _ => continue,
            };
            let unit = if of_scope { self.names.scope(&key) } else { self.names.slice(&key) };
            if let Err(e) = self.send_weight(&mut st, &rel, &unit, CpuWeight::Weight(units), units) {
                errs.push((rel, e));
            }
        }
        self.memory_upkeep(&mut st, now, &mut errs);
        if st.holders_checked.is_none_or(|t| now.duration_since(t) >= HOLDER_CHECK) {
            st.holders_checked = Some(now);
            let scopes: Vec<(Key, PathBuf)> = st.scopes.iter().map(|(k, cg)| (k.clone(), self.abs(cg))).collect();
            for (key, dir) in scopes {
                if !dir.is_dir() {
                    // The scope ended (its holder was killed and its jobs finished).
                    st.scopes.remove(&key);
                    continue;
                }
                if let Err(e) = self.ensure_holder(&mut st, &key, &dir) {
                    errs.push((key.rel().to_string(), e));
                }
            }
        }
        errs
    }
}
