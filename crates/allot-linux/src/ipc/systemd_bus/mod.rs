//! systemd and logind over D-Bus: the calls allot makes on a systemd host (cgroup v2 with
//! systemd as PID 1), where systemd owns the cgroup tree and allot asks it for scopes,
//! slices, unit properties and process moves (docs/systemd.md).
//!
//! Every error names the method, the unit, systemd's error name and message, and what to
//! do. The connection is made on first use and made again once if the bus broke.
//! Cgroup paths always come from systemd (a unit's `ControlGroup`): the mapping between
//! unit names and cgroup paths is not systemd's API (https://systemd.io/CGROUP_DELEGATION/).

pub mod holder;
mod units;
#[cfg(test)]
mod wire_props;

pub use units::UnitOf;

use crate::ipc::dbus::{Bus, Match, Reject, Value};
use crate::{Error, Result};
use std::time::{Duration, Instant};

const SYSTEMD: &str = "org.freedesktop.systemd1";
const MANAGER_PATH: &str = "/org/freedesktop/systemd1";
const MANAGER: &str = "org.freedesktop.systemd1.Manager";
const PROPERTIES: &str = "org.freedesktop.DBus.Properties";

/// The oldest systemd allot's systemd mode supports: RHEL 8's. AttachProcessesToUnit came
/// in 238; before 252 (no `CPUWeight=idle`) the background slice weighs 1
/// ([`IDLE_VERSION`]). docs/systemd.md has the table per version.
pub const MIN_VERSION: u32 = 239;

/// The first systemd with `CPUWeight=idle` (the unit's cgroup gets cpu.idle = 1).
pub const IDLE_VERSION: u32 = 252;

/// True on a systemd host: the unified cgroup hierarchy at /sys/fs/cgroup (statfs, as
/// CGROUP_DELEGATION.md says to tell) and systemd running as init (/run/systemd/system,
/// as sd_booted(3) tells).
pub fn is_systemd_host() -> bool {
    crate::cgroup::mount::is_cgroup2_mount(std::path::Path::new("/sys/fs/cgroup")) && is_systemd_init()
}

/// True when systemd runs as init (/run/systemd/system, as sd_booted(3) tells), whatever
/// its cgroup layout.
pub fn is_systemd_init() -> bool {
    std::path::Path::new("/run/systemd/system").is_dir()
}

/// A unit property for StartTransientUnit and SetUnitProperties: `(name, value)`.
pub fn prop(name: &str, v: Value) -> Value {
    Value::Struct(vec![Value::str(name), Value::Variant(Box::new(v))])
}

/// `CPUWeight=` as systemd takes it over D-Bus (a `t`: 0 is "idle", u64::MAX unsets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuWeight {
    /// `CPUWeight=N`, 1..10000.
    Weight(u32),
    /// `CPUWeight=idle`: the unit's cgroup gets cpu.idle = 1 (systemd 252+).
    Idle,
    /// `CPUWeight=` (empty): back to the default.
    Unset,
}

impl CpuWeight {
    /// The property.
    pub fn prop(self) -> Value {
        let t = match self {
            CpuWeight::Weight(w) => w.clamp(1, 10000) as u64,
            CpuWeight::Idle => 0,
            CpuWeight::Unset => u64::MAX,
        };
        prop("CPUWeight", Value::U64(t))
    }
}

/// `CPUQuota=` as systemd takes it over D-Bus: `CPUQuotaPerSecUSec`, a `t` of µs of CPU
/// time per second (systemd's dbus-cgroup.c refuses 0; u64::MAX unsets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuQuota {
    /// µs of CPU per second: 500000 is half a CPU (`CPUQuota=50%`).
    PerSecUsec(u64),
    /// `CPUQuota=` (empty): no quota.
    Unset,
}

impl From<Option<crate::cgroup::max::Max>> for CpuQuota {
    /// A cgroup quota per period as systemd's per second (at least 1 µs: 0 is refused).
    fn from(m: Option<crate::cgroup::max::Max>) -> Self {
        match m {
            Some(m) => CpuQuota::PerSecUsec((m.quota_us.saturating_mul(1_000_000) / m.period_us.max(1)).max(1)),
            None => CpuQuota::Unset,
        }
    }
}

impl CpuQuota {
    /// The property.
    pub fn prop(self) -> Value {
        let t = match self {
            CpuQuota::PerSecUsec(us) => us,
            CpuQuota::Unset => u64::MAX,
        };
        prop("CPUQuotaPerSecUSec", Value::U64(t))
    }
}

/// A unit as ListUnitsByPatterns lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct UnitInfo {
    /// e.g. `allot:user-1000.scope`.
    pub name: String,
    /// Its description.
    pub description: String,
    /// `loaded`, `not-found`, ...
    pub load: String,
    /// `active`, `inactive`, `failed`, ...
    pub active: String,
    /// `running`, `abandoned`, `dead`, ...
    pub sub: String,
}

/// A logind session (GetSessionByPID).
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    /// Its id, e.g. `3` or `c1`.
    pub id: String,
    /// Its user.
    pub uid: u32,
    /// Its scope unit, e.g. `session-3.scope`.
    pub scope: String,
}

/// Escapes a string for use in a unit name, as `systemd-escape` does: `/` becomes `-`,
/// and every byte but ASCII letters, digits, `:`, `_` and `.` (not leading) becomes `\xNN`.
pub fn escape(s: &str) -> String {
    let mut out = String::new();
    for (i, b) in s.bytes().enumerate() {
        match b {
            b'/' => out.push('-'),
            b'.' if i > 0 => out.push('.'),
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b':' | b'_' => out.push(b as char),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out
}

/// What to do about a systemd error, by its name.
fn hint(name: &str, unit: &str) -> String {
    match name {
        "org.freedesktop.systemd1.UnitExists" => {
            format!("a unit named {unit} is loaded already: see `systemctl status {unit}`; if it failed, `systemctl reset-failed {unit}`")
        }
        "org.freedesktop.systemd1.NoSuchUnit" | "org.freedesktop.systemd1.LoadFailed" => {
            format!("systemd has no unit {unit} loaded (`systemctl list-units --all {unit}`)")
        }
        "org.freedesktop.DBus.Error.AccessDenied" | "org.freedesktop.DBus.Error.InteractiveAuthorizationRequired" => {
            "allot's daemon must run as root to ask systemd for scopes and properties".into()
        }
        "org.freedesktop.DBus.Error.UnknownMethod" | "org.freedesktop.DBus.Error.InvalidArgs" | "org.freedesktop.DBus.Error.PropertyReadOnly" => {
            format!("this systemd does not support what allot asked (allot needs systemd {MIN_VERSION} or newer: `systemctl --version`)")
        }
        "org.freedesktop.DBus.Error.ServiceUnknown" | "org.freedesktop.DBus.Error.NameHasNoOwner" => {
            "the service is not on the system bus (is this a systemd host? `systemctl is-system-running`)".into()
        }
        "System.Error.ESRCH" | "org.freedesktop.systemd1.NoSuchProcess" => "the process exited".into(),
        _ if unit.is_empty() => "see `journalctl -b _PID=1` for systemd's own account".into(),
        _ => format!("see `systemctl status {unit}` and `journalctl -b -u {unit}`"),
    }
}

/// StartTransientUnit's arguments: the name, mode `fail`, the properties, no auxiliary units.
pub(crate) fn transient_body(name: &str, props: Vec<Value>) -> Vec<Value> {
    vec![Value::str(name), Value::str("fail"), Value::Array("(sv)".into(), props), Value::Array("(sa(sv))".into(), vec![])]
}

/// A scope's properties for [`Systemd::start_scope`].
pub(crate) fn scope_props(slice: &str, pids: &[u32], delegate: Option<&[&str]>, extra: Vec<Value>) -> Vec<Value> {
    let mut props = vec![prop("Slice", Value::str(slice)), prop("PIDs", Value::u32s(pids))];
    if let Some(ctrls) = delegate {
        props.push(prop("DelegateControllers", Value::strs(ctrls)));
    }
    props.extend(extra);
    props
}

/// SetUnitProperties' arguments.
pub(crate) fn set_properties_body(unit: &str, runtime: bool, props: Vec<Value>) -> Vec<Value> {
    vec![Value::str(unit), Value::Bool(runtime), Value::Array("(sv)".into(), props)]
}

/// The units of a ListUnitsByPatterns reply (`a(ssssssouso)`: the first five fields).
pub(crate) fn units_of(items: &[Value]) -> Vec<UnitInfo> {
    items
        .iter()
        .filter_map(|u| {
            let f = u.items()?;
            let s = |i: usize| f.get(i).and_then(|x| x.as_str()).unwrap_or_default().to_string();
            Some(UnitInfo { name: s(0), description: s(1), load: s(2), active: s(3), sub: s(4) })
        })
        .collect()
}

/// A client of systemd (and logind) on the system bus.
#[derive(Debug)]
pub struct Systemd {
    bus: Option<Bus>,
    /// How long one call may take (a daemon-reload can hold systemd for seconds).
    pub timeout: Duration,
}

impl Systemd {
    /// Connects to the system bus.
    pub fn connect() -> Result<Self> {
        let timeout = Duration::from_secs(25);
        Ok(Self { bus: Some(Bus::system(timeout)?), timeout })
    }

    /// Runs `f` on the bus; a broken connection is made again and `f` repeated once. A
    /// rejection becomes an error naming `method` and `unit`.
    fn with_bus<T>(
        &mut self,
        method: &'static str,
        unit: &str,
        mut f: impl FnMut(&mut Bus, Duration) -> Result<std::result::Result<T, Reject>>,
    ) -> Result<T> {
        let mut last = None;
        for _ in 0..2 {
            if self.bus.is_none() {
                self.bus = Some(Bus::system(self.timeout)?);
            }
            let bus = self.bus.as_mut().expect("connected above");
            match f(bus, self.timeout) {
                Ok(Ok(v)) => return Ok(v),
                Ok(Err(Reject { name, message })) => {
                    let hint = hint(&name, unit);
                    return Err(Error::Bus { method, unit: unit.into(), name, message, hint });
                }
                Err(e) => {
                    self.bus = None;
                    last = Some(e);
                }
            }
        }
        Err(last.expect("two failed attempts"))
    }

    /// Calls a method; a broken connection is made again and the call repeated once.
    fn call(&mut self, dest: &str, path: &str, iface: &str, method: &'static str, unit: &str, body: Vec<Value>) -> Result<Vec<Value>> {
        self.with_bus(method, unit, |bus, timeout| bus.call(dest, path, iface, method, body.clone(), timeout))
    }

    fn manager(&mut self, method: &'static str, unit: &str, body: Vec<Value>) -> Result<Vec<Value>> {
        self.call(SYSTEMD, MANAGER_PATH, MANAGER, method, unit, body)
    }

    fn bad_reply(method: &'static str, unit: &str, got: &[Value]) -> Error {
        let got: Vec<String> = got.iter().map(|v| v.to_string()).collect();
        Error::Bus {
            method,
            unit: unit.into(),
            name: "unexpected reply".into(),
            message: format!("[{}]", got.join(", ")),
            hint: format!("this systemd answers differently than allot expects (allot needs systemd {MIN_VERSION} or newer)"),
        }
    }

    /// systemd's version string, e.g. `252.38-1~deb12u1`.
    pub fn version(&mut self) -> Result<String> {
        let v = self.call(SYSTEMD, MANAGER_PATH, PROPERTIES, "Get", "Version", vec![Value::str(MANAGER), Value::str("Version")])?;
        v.first().and_then(|x| x.as_str()).map(String::from).ok_or_else(|| Self::bad_reply("Get", "Version", &v))
    }

    /// The major version (252 for `252.38-1~deb12u1`).
    pub fn version_major(&mut self) -> Result<u32> {
        let v = self.version()?;
        Ok(v.chars().take_while(|c| c.is_ascii_digit()).collect::<String>().parse().unwrap_or(0))
    }

    /// Starts a transient unit and waits until its start job finished; an error unless
    /// the job's result is `done`.
    pub fn start_transient(&mut self, name: &str, props: Vec<Value>) -> Result<()> {
        self.run_job("StartTransientUnit", name, transient_body(name, props))
    }

    /// Starts a scope holding `pids` in `slice`. `delegate`: Some(controllers) turns on
    /// `Delegate=` for those controllers only (an empty list: delegation without
    /// controllers). Only `DelegateControllers` is sent: it implies `Delegate=yes`, while
    /// `Delegate=true` would first delegate every controller, and the list is added to
    /// that (systemd 252), enabling io, cpuset and memory up to the root.
    /// `extra` adds more properties (e.g. `Description`). Waits for the start job.
    pub fn start_scope(&mut self, name: &str, slice: &str, pids: &[u32], delegate: Option<&[&str]>, extra: Vec<Value>) -> Result<()> {
        self.start_transient(name, scope_props(slice, pids, delegate, extra))
    }

    /// Starts a transient slice with these properties. Waits for the start job.
    pub fn start_slice(&mut self, name: &str, props: Vec<Value>) -> Result<()> {
        self.start_transient(name, props)
    }

    /// Stops a unit (its processes are killed as its KillMode says) and waits.
    pub fn stop_unit(&mut self, name: &str) -> Result<()> {
        self.run_job("StopUnit", name, vec![Value::str(name), Value::str("replace")])
    }

    /// Sends a call that returns a job, and waits for the job's JobRemoved signal.
    fn run_job(&mut self, method: &'static str, unit: &str, body: Vec<Value>) -> Result<()> {
        // JobRemoved is broadcast; without a match rule the bus would not pass it on. The
        // Bus takes it only from the connection that owns systemd's name (anyone may
        // send us a unicast "JobRemoved").
        let jobs = Match::new(SYSTEMD, MANAGER_PATH, MANAGER, "JobRemoved").arg(2, unit);
        self.with_bus("AddMatch", unit, |bus, timeout| bus.add_match(&jobs, timeout))?;
        let r = self.run_job_matched(method, unit, body);
        if let Some(b) = self.bus.as_mut() {
            let _ = b.remove_match(&jobs, self.timeout);
            b.clear_signals();
        }
        r
    }

    fn run_job_matched(&mut self, method: &'static str, unit: &str, body: Vec<Value>) -> Result<()> {
        let v = self.manager(method, unit, body)?;
        let job = v.first().and_then(|x| x.as_str()).map(String::from).ok_or_else(|| Self::bad_reply(method, unit, &v))?;
        let deadline = Instant::now() + self.timeout;
        let bus = self.bus.as_mut().expect("the call above connected");
        let done = bus.wait_signal(deadline, |m| matches!(m.body.get(1), Some(Value::Path(p)) if *p == job))?;
        let Some(m) = done else {
            return Err(Error::Bus {
                method,
                unit: unit.into(),
                name: "timeout".into(),
                message: format!("job {job} did not finish within {:?}", self.timeout),
                hint: format!("systemd is busy or stuck: `systemctl list-jobs`, `systemctl status {unit}`"),
            });
        };
        match m.body.get(3).and_then(|x| x.as_str()) {
            Some("done") => Ok(()),
            other => Err(Error::Bus {
                method,
                unit: unit.into(),
                name: "job failed".into(),
                message: format!("job {job} ended with result {:?}", other.unwrap_or("?")),
                hint: hint("", unit),
            }),
        }
    }

    /// Sets unit properties; `runtime`: until reboot only (a drop-in under
    /// /run/systemd/system.control), else persistently (under /etc).
    pub fn set_properties(&mut self, unit: &str, runtime: bool, props: Vec<Value>) -> Result<()> {
        self.manager("SetUnitProperties", unit, set_properties_body(unit, runtime, props)).map(|_| ())
    }

    /// Moves processes into `subcgroup` (absolute within the unit's cgroup, `/` or empty
    /// for its top) of a unit with `Delegate=` on (AttachProcessesToUnit).
    pub fn attach(&mut self, unit: &str, subcgroup: &str, pids: &[u32]) -> Result<()> {
        match self.manager("AttachProcessesToUnit", unit, vec![Value::str(unit), Value::str(subcgroup), Value::u32s(pids)]) {
            Ok(_) => Ok(()),
            // systemd 252: "Process migration not available on non-delegated units."
            Err(Error::Bus { method, unit, name, message, .. }) if message.contains("non-delegated") => Err(Error::Bus {
                hint: format!("systemd moves processes only into units with Delegate= on; {unit} is not one (a session scope or a plain service cannot take a process back)"),
                method,
                unit,
                name,
                message,
            }),
            Err(e) => Err(e),
        }
    }

    /// Clears a unit's failed state (ResetFailedUnit).
    pub fn reset_failed(&mut self, unit: &str) -> Result<()> {
        self.manager("ResetFailedUnit", unit, vec![Value::str(unit)]).map(|_| ())
    }

    /// A loaded unit's object path (GetUnit; `NoSuchUnit` when not loaded).
    pub fn unit_path(&mut self, unit: &str) -> Result<String> {
        let v = self.manager("GetUnit", unit, vec![Value::str(unit)])?;
        v.first().and_then(|x| x.as_str()).map(String::from).ok_or_else(|| Self::bad_reply("GetUnit", unit, &v))
    }

    /// A property of a loaded unit, on `iface` (e.g. `org.freedesktop.systemd1.Unit`).
    pub fn unit_property(&mut self, unit: &str, iface: &str, name: &str) -> Result<Value> {
        let path = self.unit_path(unit)?;
        let v = self.call(SYSTEMD, &path, PROPERTIES, "Get", unit, vec![Value::str(iface), Value::str(name)])?;
        v.into_iter().next().ok_or_else(|| Self::bad_reply("Get", unit, &[]))
    }

    /// A unit's cgroup as /proc/PID/cgroup names it (`/user.slice/...`), from its
    /// `ControlGroup` property; empty when the unit has none now.
    pub fn unit_cgroup(&mut self, unit: &str) -> Result<String> {
        let kind = match unit.rsplit('.').next() {
            Some("scope") => "Scope",
            Some("slice") => "Slice",
            Some("service") => "Service",
            Some("socket") => "Socket",
            Some("mount") => "Mount",
            Some("swap") => "Swap",
            _ => return Err(Self::bad_reply("Get", unit, &[Value::str("a unit type without a cgroup")])),
        };
        let v = self.unit_property(unit, &format!("org.freedesktop.systemd1.{kind}"), "ControlGroup")?;
        v.as_str().map(String::from).ok_or_else(|| Self::bad_reply("Get", unit, &[v]))
    }

    /// A unit's `ActiveState` (`active`, `inactive`, `failed`, ...).
    pub fn active_state(&mut self, unit: &str) -> Result<String> {
        let v = self.unit_property(unit, "org.freedesktop.systemd1.Unit", "ActiveState")?;
        v.as_str().map(String::from).ok_or_else(|| Self::bad_reply("Get", unit, &[v]))
    }

    /// The name of the unit a process belongs to (GetUnitByPID).
    pub fn unit_by_pid(&mut self, pid: u32) -> Result<String> {
        let what = pid.to_string();
        let v = self.manager("GetUnitByPID", &what, vec![Value::U32(pid)])?;
        let path = v.first().and_then(|x| x.as_str()).map(String::from).ok_or_else(|| Self::bad_reply("GetUnitByPID", &what, &v))?;
        let id = self.call(SYSTEMD, &path, PROPERTIES, "Get", &what, vec![Value::str("org.freedesktop.systemd1.Unit"), Value::str("Id")])?;
        id.first().and_then(|x| x.as_str()).map(String::from).ok_or_else(|| Self::bad_reply("Get", &what, &id))
    }

    /// The name of the unit that owns a cgroup (GetUnitByControlGroup; `path` as
    /// /proc/PID/cgroup names it).
    pub fn unit_by_cgroup(&mut self, path: &str) -> Result<String> {
        let v = self.manager("GetUnitByControlGroup", path, vec![Value::str(path)])?;
        let o = v.first().and_then(|x| x.as_str()).map(String::from).ok_or_else(|| Self::bad_reply("GetUnitByControlGroup", path, &v))?;
        let id = self.call(SYSTEMD, &o, PROPERTIES, "Get", path, vec![Value::str("org.freedesktop.systemd1.Unit"), Value::str("Id")])?;
        id.first().and_then(|x| x.as_str()).map(String::from).ok_or_else(|| Self::bad_reply("Get", path, &id))
    }

    /// Units whose name matches one of `patterns` (shell globs) and, if `states` is not
    /// empty, whose active, sub or load state is one of them (ListUnitsByPatterns).
    pub fn list_units(&mut self, states: &[&str], patterns: &[&str]) -> Result<Vec<UnitInfo>> {
        let what = patterns.join(" ");
        let v = self.manager("ListUnitsByPatterns", &what, vec![Value::strs(states), Value::strs(patterns)])?;
        let items = v.first().and_then(|x| x.items()).ok_or_else(|| Self::bad_reply("ListUnitsByPatterns", &what, &v))?;
        Ok(units_of(items))
    }

    /// The logind session a process is in (GetSessionByPID), or None when it is in none
    /// (a service, user@UID.service, a container, allot's own scopes).
    pub fn session_of(&mut self, pid: u32) -> Result<Option<Session>> {
        const LOGIN: &str = "org.freedesktop.login1";
        let what = pid.to_string();
        let v = match self.call(LOGIN, "/org/freedesktop/login1", "org.freedesktop.login1.Manager", "GetSessionByPID", &what, vec![Value::U32(pid)]) {
            Ok(v) => v,
            Err(Error::Bus { name, .. }) if name == "org.freedesktop.login1.NoSessionForPID" => return Ok(None),
            Err(e) => return Err(e),
        };
        let path = v.first().and_then(|x| x.as_str()).map(String::from).ok_or_else(|| Self::bad_reply("GetSessionByPID", &what, &v))?;
        let mut get = |name: &str| -> Result<Value> {
            let r = self.call(LOGIN, &path, PROPERTIES, "Get", &what, vec![Value::str("org.freedesktop.login1.Session"), Value::str(name)])?;
            r.into_iter().next().ok_or_else(|| Self::bad_reply("Get", &what, &[]))
        };
        let id = get("Id")?.as_str().unwrap_or_default().to_string();
        let uid = get("User")?.items().and_then(|f| f.first()).and_then(|u| u.as_u64()).unwrap_or(u64::MAX);
        let scope = get("Scope")?.as_str().unwrap_or_default().to_string();
        let uid = u32::try_from(uid).map_err(|_| Self::bad_reply("Get", &what, &[Value::str("session User")]))?;
        Ok(Some(Session { id, uid, scope }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_matches_systemd_escape() {
        // Values from `systemd-escape` (systemd 252).
        assert_eq!(escape("allot"), "allot");
        assert_eq!(escape("allot-test-1-0"), "allot\\x2dtest\\x2d1\\x2d0");
        assert_eq!(escape("my_ci"), "my_ci");
        assert_eq!(escape(".x"), "\\x2ex");
        assert_eq!(escape("a.b"), "a.b");
        assert_eq!(escape("a/b"), "a-b");
        assert_eq!(escape("a b"), "a\\x20b");
    }

    #[test]
    fn weights_encode_as_systemd_reads_them() {
        let t = |w: CpuWeight| match w.prop() {
            Value::Struct(f) => f[1].as_u64().unwrap(),
            _ => unreachable!(),
        };
        assert_eq!(t(CpuWeight::Weight(300)), 300);
        assert_eq!(t(CpuWeight::Weight(0)), 1, "clamped: 0 would mean idle");
        assert_eq!(t(CpuWeight::Weight(20000)), 10000);
        assert_eq!(t(CpuWeight::Idle), 0);
        assert_eq!(t(CpuWeight::Unset), u64::MAX);
    }

    #[test]
    fn quotas_encode_per_second_as_systemd_reads_them() {
        let t = |m: Option<crate::cgroup::max::Max>| match CpuQuota::from(m).prop() {
            Value::Struct(f) => {
                assert_eq!(f[0].as_str(), Some("CPUQuotaPerSecUSec"));
                f[1].as_u64().unwrap()
            }
            _ => unreachable!(),
        };
        let max = |q, p| Some(crate::cgroup::max::Max { quota_us: q, period_us: p });
        // 0.5 CPU: `systemctl show -p CPUQuotaPerSecUSec` says 500ms.
        assert_eq!(t(max(50_000, 100_000)), 500_000);
        assert_eq!(t(max(400_000, 100_000)), 4_000_000);
        assert_eq!(t(max(1_000, 100_000)), 10_000);
        assert_eq!(t(max(0, 100_000)), 1, "0 is refused by systemd");
        assert_eq!(t(None), u64::MAX);
    }

    #[test]
    fn hints_say_what_to_do() {
        assert!(hint("org.freedesktop.systemd1.UnitExists", "a.scope").contains("reset-failed a.scope"));
        assert!(hint("org.freedesktop.DBus.Error.AccessDenied", "x").contains("root"));
        assert!(hint("Whatever", "a.scope").contains("journalctl -b -u a.scope"));
    }
}
