//! Tethers: a job started from a login session ends when logind stops that session, as
//! the session's own processes do, though the job left the session's scope for allot's.
//!
//! logind ends a session by stopping its scope (`StopUnit`) only when its processes are
//! to be killed: at logout under `KillUserProcesses=yes` (or `KillOnlyUsers=`, and not
//! `KillExcludeUsers=`), and always at `loginctl terminate-session` and
//! `terminate-user`; otherwise it abandons the scope, which ends by itself when empty
//! (logind-session.c, `session_stop_scope`). `terminate-user` stops the user's sessions
//! and `user-runtime-dir@UID.service` (and with it `user@UID.service`), never the user's
//! slice (logind-user.c, `user_stop`), so nothing of systemd's reaches allot's scope in
//! that slice by itself.
//!
//! So each such job gets a tether: a small transient scope `<root>_logout_<job>.scope`
//! with one holder process and `PartOf=` the session's scope. `PartOf=` carries stop
//! jobs only, so the tether is stopped exactly when logind stops the session (not when
//! an abandoned session's scope empties and ends by itself), whatever logind's settings
//! say: the decision is logind's own. The daemon looks at its tethers once a second
//! ([`CpuController::cut_tethers`](super::super::CpuController::cut_tethers)) and ends the
//! jobs whose tether is gone. The binding lives in systemd (the unit's name names the
//! job), so a restarted daemon finds it again.

use super::{State, SystemdTree};
use crate::ipc::dbus::Value;
use crate::ipc::systemd_bus::{holder, prop};
use crate::{Error, Result};
use std::time::{Duration, Instant};

/// How often the tethers are listed (one D-Bus call).
pub const TETHER_CHECK: Duration = Duration::from_secs(1);

impl SystemdTree {
    /// The tether of job `job` (a job directory's leaf name, unique within the root).
    pub fn tether_unit(&self, job: &str) -> String {
        unit_of(self.names().root(), job)
    }

    /// Ties `job` to the login session whose scope is `session_scope`.
    pub(super) fn start_tether(&self, st: &mut State, job: &str, session_scope: &str) -> Result<()> {
        if job.is_empty() || job.starts_with('.') || job.contains('/') {
            return Err(Error::Sys {
                call: format!("tie job {job:?} to {session_scope}"),
                source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a job directory's name"),
            });
        }
        let slice = st.sd.unit_property(session_scope, "org.freedesktop.systemd1.Scope", "Slice")?;
        let slice = slice.as_str().unwrap_or_default().to_string();
        let unit = self.tether_unit(job);
        let pid = holder::spawn(&self.holder)?;
        let desc = format!("allot ({}): ends job {job} when logind stops {session_scope}", self.names().root());
        let extra = vec![
            prop("Description", Value::str(desc)),
            prop("PartOf", Value::strs(&[session_scope])),
            // Ordered after the session's scope: stopped before it, so the job's end is
            // started while the session's own processes are being ended.
            prop("After", Value::strs(&[session_scope])),
        ];
        if let Err(e) = st.sd.start_scope(&unit, &slice, &[pid as u32], None, extra) {
            // SAFETY: ending the holder this call started (it never got a scope).
            unsafe { libc::kill(pid, libc::SIGKILL) };
            return Err(e);
        }
        self.check_holder_alive(&unit, pid)?;
        st.tethers.insert(job.to_string());
        Ok(())
    }

    /// Jobs whose tether is gone since the last look (their session was stopped); at
    /// most once a [`TETHER_CHECK`] (an empty list in between).
    pub(super) fn cut(&self, st: &mut State) -> Result<Vec<String>> {
        let now = Instant::now();
        // Listed once at start (a previous daemon's), then only while there are some.
        if st.tethers_checked.is_some() && st.tethers.is_empty() {
            return Ok(vec![]);
        }
        if st.tethers_checked.is_some_and(|t| now.duration_since(t) < TETHER_CHECK) {
            return Ok(vec![]);
        }
        st.tethers_checked = Some(now);
        let pattern = format!("{}_logout_*.scope", self.names().root());
        let units = st.sd.list_units(&[], &[&pattern])?;
        let mut live = std::collections::BTreeSet::new();
        for u in &units {
            if let Some(job) = job_of(self.names().root(), &u.name) {
                if matches!(u.active.as_str(), "active" | "activating" | "reloading") {
                    live.insert(job.to_string());
                } else if u.active == "failed" {
                    let _ = st.sd.reset_failed(&u.name);
                }
            }
        }
        let cut: Vec<String> = st.tethers.difference(&live).cloned().collect();
        // Tethers found alive that this process did not start: a restarted daemon's.
        st.tethers = live;
        Ok(cut)
    }

    /// Lets go of `job`'s tether (the job ended, or allot is being removed): its holder
    /// is ended, so the tether ends without touching the session.
    pub(super) fn end_tether(&self, st: &mut State, job: &str) -> Result<()> {
        st.tethers.remove(job);
        let unit = self.tether_unit(job);
        match st.sd.stop_unit(&unit) {
            Err(Error::Bus { name, .. }) if name == "org.freedesktop.systemd1.NoSuchUnit" => Ok(()),
            r => r,
        }
    }
}

/// `<root>_logout_<job>.scope`.
fn unit_of(root: &str, job: &str) -> String {
    format!("{root}_logout_{job}.scope")
}

/// The job a tether's unit name names, if it is one of this root's.
fn job_of<'a>(root: &str, unit: &'a str) -> Option<&'a str> {
    unit.strip_suffix(".scope")?.strip_prefix(root)?.strip_prefix("_logout_").filter(|j| !j.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tether_names_read_back() {
        let unit = unit_of("allot-test-1", "j7-u1000");
        assert_eq!(unit, "allot-test-1_logout_j7-u1000.scope");
        assert_eq!(job_of("allot-test-1", &unit), Some("j7-u1000"));
        assert_eq!(job_of("allot", &unit), None, "another root's");
        assert_eq!(job_of("allot-test-1", "allot-test-1:user-1000.scope"), None, "a currency scope");
        assert_eq!(job_of("allot-test-1", "allot-test-1_logout_.scope"), None);
    }
}
