//! A fake systemd for [`SystemdTree`](super::SystemdTree)'s tests: units kept in memory,
//! their cgroups made as directories of a fixture (with a cgroup's files), properties
//! written to those files as systemd would, and every call logged for the test to read.
//! It refuses what systemd refuses where the tree relies on it (a unit that exists, a
//! unit not loaded, a move into a unit without `Delegate=`).

use super::Manager;
use crate::cgroup::fixture::{V1_CPU_FILES, V2_FILES};
use crate::ipc::dbus::Value;
use crate::ipc::systemd_bus::{Session, UnitInfo, UnitOf};
use crate::{Error, Result};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

/// A unit the fake knows.
#[derive(Debug, Clone, Default)]
pub struct Unit {
    /// `active`, `failed`, ...
    pub active: String,
    /// Its cgroup as /proc/PID/cgroup names it.
    pub cgroup: String,
    /// Properties as `Name` → text, as set at start or by SetUnitProperties.
    pub props: BTreeMap<String, String>,
    /// Started with `DelegateControllers`.
    pub delegate: bool,
}

#[derive(Debug, Default)]
struct Inner {
    version: u32,
    units: BTreeMap<String, Unit>,
    calls: Vec<String>,
    sessions: BTreeMap<u32, Session>,
    pids: BTreeMap<u32, UnitOf>,
    /// Processes given to units (the tree's holders): ended when the fake goes.
    given: Vec<u32>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        for &pid in &self.given {
            // Only this test's holders: a pidfd on a process still named as one.
            let Ok(fd) = crate::process::pidfd::PidFd::open(pid as i32) else { continue };
            if std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == HOLDER_COMM) {
                let _ = fd.signal(libc::SIGKILL);
            }
        }
    }
}

/// The holder the tests give the tree (ended by the fake, and after 30 s by itself).
pub fn holder() -> crate::ipc::systemd_bus::holder::Holder {
    crate::ipc::systemd_bus::holder::Holder::Command(vec!["/bin/sleep".into(), "30".into()])
}
const HOLDER_COMM: &str = "sleep";

/// The fake; clones share one systemd.
#[derive(Debug, Clone)]
pub struct FakeSystemd {
    mount: PathBuf,
    /// The mount is a v1 cpu,cpuacct hierarchy (a hybrid or v1 host).
    legacy: bool,
    inner: Arc<Mutex<Inner>>,
}

fn bus(method: &'static str, unit: &str, name: &str, message: &str) -> Error {
    Error::Bus { method, unit: unit.into(), name: name.into(), message: message.into(), hint: String::new() }
}

fn no_such_unit(method: &'static str, unit: &str) -> Error {
    bus(method, unit, "org.freedesktop.systemd1.NoSuchUnit", &format!("Unit {unit} not loaded."))
}

/// A slice's cgroup, as systemd nests slices by their dashes: `user-1000.slice` is
/// `/user.slice/user-1000.slice`.
pub fn slice_cgroup(name: &str) -> String {
    let stem = name.strip_suffix(".slice").unwrap_or(name);
    let parts: Vec<&str> = stem.split('-').collect();
    (1..=parts.len()).map(|i| format!("/{}.slice", parts[..i].join("-"))).collect()
}

/// `(name, variant)` structs as `Name` → the value's text.
fn props_of(props: &[Value]) -> Vec<(String, String)> {
    props
        .iter()
        .filter_map(|p| match p {
            Value::Struct(f) if f.len() == 2 => Some((f[0].as_str()?.to_string(), f[1].to_string())),
            _ => None,
        })
        .collect()
}

impl FakeSystemd {
    /// systemd `version` over a cgroup2 hierarchy at `mount` (a fixture's directory).
    pub fn new(mount: PathBuf, version: u32) -> Self {
        let mut inner = Inner::default();
        inner.version = version;
        Self { mount, legacy: false, inner: Arc::new(Mutex::new(inner)) }
    }
    /// systemd `version` over a v1 cpu,cpuacct hierarchy at `mount`: what it writes for
    /// `CPUWeight=` and `CPUQuota=` is v1's (src/core/cgroup.c, `cgroup_apply_legacy_cpu_config`).
    pub fn legacy(mount: PathBuf, version: u32) -> Self {
        Self { legacy: true, ..Self::new(mount, version) }
    }
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
    /// Makes a cgroup as the kernel would (with its files), unless it exists.
    fn mkcg(&self, cg: &str) {
        let d = self.mount.join(cg.trim_start_matches('/'));
        if !d.is_dir() {
            std::fs::create_dir_all(&d).unwrap();
            let files = if self.legacy { V1_CPU_FILES } else { V2_FILES };
            for (name, text) in files.iter().chain(if self.legacy { &[("cpuacct.usage", "0\n")][..] } else { &[] }) {
                std::fs::write(d.join(name), text).unwrap();
            }
        }
    }
    /// A unit that is there already (a logged-in user's slice, a service), active.
    pub fn add(&self, name: &str, cgroup: &str, props: &[(&str, &str)]) {
        self.mkcg(cgroup);
        let props = props.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        self.lock().units.insert(name.into(), Unit { active: "active".into(), cgroup: cgroup.into(), props, delegate: false });
    }
    /// A unit's state now.
    pub fn unit(&self, name: &str) -> Option<Unit> {
        self.lock().units.get(name).cloned()
    }
    /// Sets a unit's active state (`failed`, as when its processes were killed).
    pub fn set_state(&self, name: &str, active: &str) {
        self.lock().units.get_mut(name).expect("a unit the fake knows").active = active.into();
    }
    /// Stops a unit as another client would (logind stopping a session's unit).
    pub fn stop_from_outside(&self, name: &str) {
        let u = self.lock().units.remove(name).expect("a unit the fake knows");
        let _ = std::fs::remove_dir_all(self.mount.join(u.cgroup.trim_start_matches('/')));
    }
    /// logind's session of a process.
    pub fn add_session(&self, pid: u32, s: Session) {
        self.lock().sessions.insert(pid, s);
    }
    /// The unit of a process.
    pub fn add_pid(&self, pid: u32, u: UnitOf) {
        self.lock().pids.insert(pid, u);
    }
    /// The calls so far, one line each (`Method unit args`).
    pub fn calls(&self) -> Vec<String> {
        self.lock().calls.clone()
    }
    fn log(&self, line: String) {
        self.lock().calls.push(line);
    }
    /// What systemd writes to a unit's cgroup files for these properties.
    fn apply(&self, cg: &str, props: &[(String, String)]) {
        let d = self.mount.join(cg.trim_start_matches('/'));
        for (k, v) in props {
            let n: Option<u64> = v.parse().ok();
            let v1 = match (k.as_str(), n) {
                // cgroup_cpu_weight_to_shares: idle is the smallest share, 2.
                ("CPUWeight", Some(0)) => Some(("cpu.shares", "2".to_string())),
                ("CPUWeight", Some(u64::MAX)) => Some(("cpu.shares", "1024".to_string())),
                ("CPUWeight", Some(w)) => Some(("cpu.shares", (w * 1024 / 100).clamp(2, 262144).to_string())),
                ("CPUQuotaPerSecUSec", Some(u64::MAX)) => Some(("cpu.cfs_quota_us", "-1".to_string())),
                ("CPUQuotaPerSecUSec", Some(us)) => Some(("cpu.cfs_quota_us", (us / 10).max(1000).to_string())),
                _ => None,
            };
            if let (true, Some((file, text))) = (self.legacy, &v1) {
                if d.is_dir() {
                    std::fs::write(d.join(file), text).unwrap();
                }
                continue;
            }
            let (file, text) = match (k.as_str(), n) {
                ("CPUWeight", Some(0)) => ("cpu.idle", "1".to_string()),
                ("CPUWeight", Some(u64::MAX)) => ("cpu.weight", "100".to_string()),
                ("CPUWeight", Some(w)) => ("cpu.weight", w.to_string()),
                ("CPUQuotaPerSecUSec", Some(u64::MAX)) => ("cpu.max", "max 100000".to_string()),
                ("CPUQuotaPerSecUSec", Some(us)) => ("cpu.max", format!("{} 100000", us / 10)),
                ("MemoryLow", Some(b)) => ("memory.low", b.to_string()),
                ("MemoryHigh" | "MemoryMax", Some(u64::MAX)) => (if k == "MemoryHigh" { "memory.high" } else { "memory.max" }, "max".to_string()),
                ("MemoryHigh", Some(b)) => ("memory.high", b.to_string()),
                ("MemoryMax", Some(b)) => ("memory.max", b.to_string()),
                ("IOWeight", Some(u64::MAX)) => ("io.weight", "default 100".to_string()),
                ("IOWeight", Some(w)) => ("io.weight", format!("default {w}")),
                _ => continue,
            };
            if d.is_dir() {
                std::fs::write(d.join(file), text).unwrap();
            }
        }
    }
    fn start(&self, method: &'static str, name: &str, cg: &str, props: Vec<(String, String)>, delegate: bool) -> Result<()> {
        if self.lock().units.contains_key(name) {
            return Err(bus(method, name, "org.freedesktop.systemd1.UnitExists", &format!("Unit {name} was already loaded or has a fragment file.")));
        }
        self.mkcg(cg);
        self.apply(cg, &props);
        let props: BTreeMap<String, String> = props.into_iter().collect();
        self.lock().units.insert(name.into(), Unit { active: "active".into(), cgroup: cg.into(), props, delegate });
        Ok(())
    }
    /// A slice systemd makes on the way to a unit in it (parents first).
    fn ensure_slice(&self, slice: &str) {
        let cg = slice_cgroup(slice);
        self.mkcg(&cg);
        self.lock().units.entry(slice.into()).or_insert_with(|| Unit { active: "active".into(), cgroup: cg, ..Default::default() });
    }
    fn loaded(&self, method: &'static str, unit: &str) -> Result<Unit> {
        self.unit(unit).ok_or_else(|| no_such_unit(method, unit))
    }
}

fn glob(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((pre, post)) => name.len() >= pre.len() + post.len() && name.starts_with(pre) && name.ends_with(post),
    }
}

impl Manager for FakeSystemd {
    fn version_major(&mut self) -> Result<u32> {
        Ok(self.lock().version)
    }
    fn list_units(&mut self, states: &[&str], patterns: &[&str]) -> Result<Vec<UnitInfo>> {
        self.log(format!("ListUnitsByPatterns {}", patterns.join(" ")));
        let st = self.lock();
        Ok(st
            .units
            .iter()
            .filter(|(n, u)| patterns.iter().any(|p| glob(p, n)) && (states.is_empty() || states.contains(&u.active.as_str())))
            .map(|(n, u)| UnitInfo {
                name: n.clone(),
                description: String::new(),
                load: "loaded".into(),
                active: u.active.clone(),
                sub: String::new(),
            })
            .collect())
    }
    fn unit_cgroup(&mut self, unit: &str) -> Result<String> {
        Ok(self.loaded("Get", unit)?.cgroup)
    }
    fn active_state(&mut self, unit: &str) -> Result<String> {
        Ok(self.loaded("Get", unit)?.active)
    }
    fn unit_property(&mut self, unit: &str, _iface: &str, name: &str) -> Result<Value> {
        let u = self.loaded("Get", unit)?;
        u.props.get(name).map(|v| Value::str(v.trim_matches('"'))).ok_or_else(|| bus("Get", unit, "org.freedesktop.DBus.Error.UnknownProperty", name))
    }
    fn reset_failed(&mut self, unit: &str) -> Result<()> {
        self.log(format!("ResetFailedUnit {unit}"));
        let u = self.loaded("ResetFailedUnit", unit)?;
        if u.active == "failed" {
            self.lock().units.remove(unit);
        }
        Ok(())
    }
    fn set_properties(&mut self, unit: &str, _runtime: bool, props: Vec<Value>) -> Result<()> {
        let props = props_of(&props);
        let text: Vec<String> = props.iter().map(|(k, v)| format!("{k}={v}")).collect();
        self.log(format!("SetUnitProperties {unit} {}", text.join(" ")));
        let u = self.loaded("SetUnitProperties", unit)?;
        self.apply(&u.cgroup, &props);
        let mut st = self.lock();
        st.units.get_mut(unit).expect("loaded above").props.extend(props);
        Ok(())
    }
    fn start_slice(&mut self, name: &str, props: Vec<Value>) -> Result<()> {
        let props = props_of(&props);
        self.log(format!("StartTransientUnit {name} {}", props.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")));
        self.start("StartTransientUnit", name, &slice_cgroup(name), props, false)
    }
    fn start_scope(&mut self, name: &str, slice: &str, pids: &[u32], delegate: Option<&[&str]>, extra: Vec<Value>) -> Result<()> {
        let mut props = vec![("Slice".to_string(), format!("{slice:?}"))];
        if let Some(d) = delegate {
            props.push(("DelegateControllers".into(), format!("{d:?}")));
        }
        props.extend(props_of(&extra));
        self.log(format!("StartTransientUnit {name} {}", props.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")));
        self.ensure_slice(slice);
        let cg = format!("{}/{name}", slice_cgroup(slice));
        self.start("StartTransientUnit", name, &cg, props, delegate.is_some())?;
        if self.legacy {
            // The kernel gives the holder's directory its files when allot makes it; the
            // fixture cannot, so they are there from the start (v1's holder is written
            // into it by allot, not by systemd).
            self.mkcg(&format!("{cg}/{}", super::names::HOLDER));
        }
        let procs = self.mount.join(cg.trim_start_matches('/')).join("cgroup.procs");
        std::fs::write(procs, pids.iter().map(|p| format!("{p}\n")).collect::<String>()).unwrap();
        self.lock().given.extend(pids);
        Ok(())
    }
    fn stop_unit(&mut self, name: &str) -> Result<()> {
        self.log(format!("StopUnit {name}"));
        let u = self.loaded("StopUnit", name)?;
        let _ = std::fs::remove_dir_all(self.mount.join(u.cgroup.trim_start_matches('/')));
        self.lock().units.remove(name);
        Ok(())
    }
    fn attach(&mut self, unit: &str, subcgroup: &str, pids: &[u32]) -> Result<()> {
        self.log(format!("AttachProcessesToUnit {unit} {subcgroup} {pids:?}"));
        let u = self.loaded("AttachProcessesToUnit", unit)?;
        if !u.delegate {
            return Err(bus(
                "AttachProcessesToUnit",
                unit,
                "org.freedesktop.DBus.Error.InvalidArgs",
                "Process migration not available on non-delegated units.",
            ));
        }
        let dir = self.mount.join(u.cgroup.trim_start_matches('/')).join(subcgroup.trim_start_matches('/'));
        if !dir.is_dir() {
            return Err(bus("AttachProcessesToUnit", unit, "System.Error.ENOENT", "No such file or directory"));
        }
        std::fs::write(dir.join("cgroup.procs"), pids.iter().map(|p| format!("{p}\n")).collect::<String>()).unwrap();
        self.lock().given.extend(pids);
        Ok(())
    }
    fn unit_by_cgroup(&mut self, path: &str) -> Result<String> {
        let st = self.lock();
        let owner =
            st.units.iter().filter(|(_, u)| path == u.cgroup || path.starts_with(&format!("{}/", u.cgroup))).max_by_key(|(_, u)| u.cgroup.len());
        owner.map(|(n, _)| n.clone()).ok_or_else(|| bus("GetUnitByControlGroup", path, "org.freedesktop.systemd1.NoUnitForControlGroup", path))
    }
    fn unit_of(&mut self, pid: u32) -> Result<UnitOf> {
        self.lock().pids.get(&pid).cloned().ok_or_else(|| bus("GetUnitByPID", &pid.to_string(), "org.freedesktop.systemd1.NoUnitForPID", "no unit"))
    }
    fn session_of(&mut self, pid: u32) -> Result<Option<Session>> {
        Ok(self.lock().sessions.get(&pid).cloned())
    }
}

#[test]
fn slices_nest_by_their_dashes() {
    assert_eq!(slice_cgroup("user-1000.slice"), "/user.slice/user-1000.slice");
    assert_eq!(slice_cgroup("allot_background.slice"), "/allot_background.slice");
    assert_eq!(slice_cgroup("user-allot_ci.slice"), "/user.slice/user-allot_ci.slice");
    assert!(glob("allot:*.scope", "allot:user-1000.scope") && !glob("allot:*.scope", "allot2:x.scope"));
}
