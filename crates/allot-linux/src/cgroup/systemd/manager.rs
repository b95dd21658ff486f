//! What [`SystemdTree`](super::SystemdTree) asks of systemd and logind, as one trait:
//! [`Systemd`] answers it over the system bus; the tree's tests answer it with a fake
//! systemd over a temporary directory (`fake.rs`), so the tree runs without root or a bus.

use crate::ipc::dbus::Value;
use crate::ipc::systemd_bus::{Session, Systemd, UnitInfo, UnitOf};
use crate::Result;

/// systemd's and logind's calls the tree makes; each as [`Systemd`]'s method of the
/// same name documents it.
pub trait Manager: Send + std::fmt::Debug {
    /// systemd's major version.
    fn version_major(&mut self) -> Result<u32>;
    /// ListUnitsByPatterns.
    fn list_units(&mut self, states: &[&str], patterns: &[&str]) -> Result<Vec<UnitInfo>>;
    /// A unit's `ControlGroup` (empty when it has none now).
    fn unit_cgroup(&mut self, unit: &str) -> Result<String>;
    /// A unit's `ActiveState`.
    fn active_state(&mut self, unit: &str) -> Result<String>;
    /// A property of a loaded unit.
    fn unit_property(&mut self, unit: &str, iface: &str, name: &str) -> Result<Value>;
    /// ResetFailedUnit.
    fn reset_failed(&mut self, unit: &str) -> Result<()>;
    /// SetUnitProperties.
    fn set_properties(&mut self, unit: &str, runtime: bool, props: Vec<Value>) -> Result<()>;
    /// StartTransientUnit of a slice, waiting for its job.
    fn start_slice(&mut self, name: &str, props: Vec<Value>) -> Result<()>;
    /// StartTransientUnit of a scope holding `pids` in `slice`, waiting for its job.
    fn start_scope(&mut self, name: &str, slice: &str, pids: &[u32], delegate: Option<&[&str]>, extra: Vec<Value>) -> Result<()>;
    /// StopUnit, waiting for its job.
    fn stop_unit(&mut self, name: &str) -> Result<()>;
    /// AttachProcessesToUnit.
    fn attach(&mut self, unit: &str, subcgroup: &str, pids: &[u32]) -> Result<()>;
    /// GetUnitByControlGroup.
    fn unit_by_cgroup(&mut self, path: &str) -> Result<String>;
    /// The unit a process is in and what decides whether it may be moved.
    fn unit_of(&mut self, pid: u32) -> Result<UnitOf>;
    /// logind's session of a process.
    fn session_of(&mut self, pid: u32) -> Result<Option<Session>>;
}

impl Manager for Systemd {
    fn version_major(&mut self) -> Result<u32> {
        Systemd::version_major(self)
    }
    fn list_units(&mut self, states: &[&str], patterns: &[&str]) -> Result<Vec<UnitInfo>> {
        Systemd::list_units(self, states, patterns)
    }
    fn unit_cgroup(&mut self, unit: &str) -> Result<String> {
        Systemd::unit_cgroup(self, unit)
    }
    fn active_state(&mut self, unit: &str) -> Result<String> {
        Systemd::active_state(self, unit)
    }
    fn unit_property(&mut self, unit: &str, iface: &str, name: &str) -> Result<Value> {
        Systemd::unit_property(self, unit, iface, name)
    }
    fn reset_failed(&mut self, unit: &str) -> Result<()> {
        Systemd::reset_failed(self, unit)
    }
    fn set_properties(&mut self, unit: &str, runtime: bool, props: Vec<Value>) -> Result<()> {
        Systemd::set_properties(self, unit, runtime, props)
    }
    fn start_slice(&mut self, name: &str, props: Vec<Value>) -> Result<()> {
        Systemd::start_slice(self, name, props)
    }
    fn start_scope(&mut self, name: &str, slice: &str, pids: &[u32], delegate: Option<&[&str]>, extra: Vec<Value>) -> Result<()> {
        Systemd::start_scope(self, name, slice, pids, delegate, extra)
    }
    fn stop_unit(&mut self, name: &str) -> Result<()> {
        Systemd::stop_unit(self, name)
    }
    fn attach(&mut self, unit: &str, subcgroup: &str, pids: &[u32]) -> Result<()> {
        Systemd::attach(self, unit, subcgroup, pids)
    }
    fn unit_by_cgroup(&mut self, path: &str) -> Result<String> {
        Systemd::unit_by_cgroup(self, path)
    }
    fn unit_of(&mut self, pid: u32) -> Result<UnitOf> {
        Systemd::unit_of(self, pid)
    }
    fn session_of(&mut self, pid: u32) -> Result<Option<Session>> {
        Systemd::session_of(self, pid)
    }
}
