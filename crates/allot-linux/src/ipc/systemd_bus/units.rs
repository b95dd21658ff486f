//! The unit a process outside allot sits in, with what decides whether allot may ask
//! systemd to move it: does the unit delegate its subtree to another manager, is the
//! process the unit's own main or control process, which user the unit runs as.

use super::{Systemd, PROPERTIES, SYSTEMD};
use crate::ipc::dbus::Value;
use crate::Result;

/// A unit as it bears on one of its processes (GetUnitByPID and the unit's properties).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct UnitOf {
    /// e.g. `cron.service`, `session-3.scope`, `user@1000.service`.
    pub name: String,
    /// Its cgroup, as /proc/PID/cgroup names it (`ControlGroup`).
    pub cgroup: String,
    /// `Delegate=` is on: the subtree is another manager's (a container, a user manager,
    /// a batch system's step).
    pub delegate: bool,
    /// The service's `MainPID` and `ControlPID` (0 when none, and for scopes).
    pub own_pids: [u32; 2],
    /// The service's `User=` (empty: root, or not a service).
    pub user: String,
}

impl UnitOf {
    /// The unit's type, from its name (`service`, `scope`, ...).
    pub fn kind(&self) -> &str {
        self.name.rsplit('.').next().unwrap_or_default()
    }
}

impl Systemd {
    /// The unit `pid` is in and the properties that decide whether it may be moved.
    pub fn unit_of(&mut self, pid: u32) -> Result<UnitOf> {
        let what = pid.to_string();
        let v = self.manager("GetUnitByPID", &what, vec![Value::U32(pid)])?;
        let path = v.first().and_then(|x| x.as_str()).map(String::from).ok_or_else(|| Self::bad_reply("GetUnitByPID", &what, &v))?;
        let mut get = |iface: &str, name: &str| -> Result<Value> {
            let r = self.call(SYSTEMD, &path, PROPERTIES, "Get", &what, vec![Value::str(iface), Value::str(name)])?;
            r.into_iter().next().ok_or_else(|| Self::bad_reply("Get", &what, &[]))
        };
        let name = get("org.freedesktop.systemd1.Unit", "Id")?.as_str().unwrap_or_default().to_string();
        let mut u = UnitOf { name, ..Default::default() };
        let iface = match u.kind() {
            "service" => "org.freedesktop.systemd1.Service",
            "scope" => "org.freedesktop.systemd1.Scope",
            // A slice or init.scope-less path: no process sits directly in a slice on
            // cgroup v2; anything else is not a unit allot moves from.
            _ => return Ok(u),
        };
        u.cgroup = get(iface, "ControlGroup")?.as_str().unwrap_or_default().to_string();
        u.delegate = is_true(&get(iface, "Delegate")?);
        if u.kind() == "service" {
            let n = |v: Value| v.as_u64().and_then(|x| u32::try_from(x).ok()).unwrap_or(0);
            u.own_pids = [n(get(iface, "MainPID")?), n(get(iface, "ControlPID")?)];
            u.user = get(iface, "User")?.as_str().unwrap_or_default().to_string();
        }
        Ok(u)
    }
}

/// A `b`, through variants.
fn is_true(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::Variant(v) => is_true(v),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn booleans_are_read_through_variants() {
        assert!(is_true(&Value::Variant(Box::new(Value::Bool(true)))));
        assert!(!is_true(&Value::Variant(Box::new(Value::Bool(false)))));
        assert!(!is_true(&Value::U32(1)), "only a boolean says yes");
    }

    #[test]
    fn kinds_come_from_names() {
        let u = |n: &str| UnitOf { name: n.into(), ..Default::default() };
        assert_eq!(u("cron.service").kind(), "service");
        assert_eq!(u("session-3.scope").kind(), "scope");
        assert_eq!(u("user-1000.slice").kind(), "slice");
    }
}
