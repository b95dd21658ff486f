//! The life of allot's scopes on a systemd host: started with a holder (healed when the
//! holder dies), stopped when empty together with a slice they started, and let go when
//! allot is removed.

use super::names::{self, Key, HOLDER};
use super::{State, SystemdTree};
use crate::cgroup::enable_cpu;
use crate::cgroup::{mkdir, CpuController};
use crate::ipc::systemd_bus::holder::{self, Holder};
use crate::ipc::systemd_bus::{prop, CpuQuota, CpuWeight};
use crate::{read, write, Error, Result};
use std::path::{Path, PathBuf};
use std::time::Duration;

impl SystemdTree {
    /// Starts the scope of `key` (with its holder) unless it runs; heals a holderless one.
    pub(super) fn ensure_scope(&self, st: &mut State, key: &Key) -> Result<PathBuf> {
        if let Some(dir) = self.scope_dir(st, key).filter(|d| d.is_dir()) {
            self.ensure_holder(st, key, &dir)?;
            return Ok(dir);
        }
        st.scopes.remove(key);
        let unit = self.names.scope(key);
        let slice = self.names.slice(key);
        if *key == Key::Background {
            // Transient, so it goes when allot's tree is taken down; idle from the start.
            let desc = format!("allot ({}): background jobs, run only on CPU nobody else wants", self.names.root());
            match st.sd.start_slice(&slice, vec![prop("Description", crate::ipc::dbus::Value::str(desc)), self.idle_weight().prop()]) {
                Err(Error::Bus { name, .. }) if name == "org.freedesktop.systemd1.UnitExists" => {}
                r => r?,
            }
        }
        let pid = holder::spawn(&self.holder)?;
        let desc = format!("allot ({}): jobs of {} {}", self.names.root(), if *key == Key::Background { "the" } else { "currency" }, key.rel());
        let extra = vec![prop("Description", crate::ipc::dbus::Value::str(desc)), prop("TasksMax", crate::ipc::dbus::Value::U64(u64::MAX))];
        let ctrls = super::job_memory::delegated(self.is_legacy());
        let mut r = st.sd.start_scope(&unit, &slice, &[pid as u32], Some(ctrls), extra.clone());
        if let Err(Error::Bus { name, .. }) = &r {
            if name == "org.freedesktop.systemd1.UnitExists" {
                if st.sd.active_state(&unit).is_ok_and(|a| a == "active") {
                    // Running already (a start whose reply was lost, then retried): adopt it.
                    r = Ok(());
                } else {
                    // Loaded but not running (failed, or stopping): clear it and start afresh.
                    let _ = st.sd.reset_failed(&unit);
                    r = st.sd.start_scope(&unit, &slice, &[pid as u32], Some(ctrls), extra);
                }
            }
        }
        let cg = r.and_then(|()| st.sd.unit_cgroup(&unit));
        let cg = match cg {
            Ok(cg) => cg,
            Err(e) => {
                // SAFETY: ending the holder this call started (it never got a scope).
                unsafe { libc::kill(pid, libc::SIGKILL) };
                return Err(e);
            }
        };
        let dir = self.abs(&cg);
        st.scopes.insert(key.clone(), cg.clone());
        mkdir(&dir.join(HOLDER))?;
        if self.path_of(pid).is_ok_and(|c| c == cg) {
            // The holder leaves the scope's top, which may then enable cpu for its
            // children (cgroup v2: no processes in a cgroup that distributes a controller).
            write(dir.join(HOLDER).join("cgroup.procs"), &pid.to_string())?;
            self.check_holder_alive(&unit, pid)?;
        } else {
            // SAFETY: ending the spare holder this call started; the scope has its own.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        if !self.is_legacy() {
            enable_cpu(&dir)?;
            super::job_memory::enable_memory_if_delegated(&dir)?;
        }
        self.ensure_holder(st, key, &dir)?;
        Ok(dir)
    }

    pub(super) fn check_holder_alive(&self, unit: &str, pid: i32) -> Result<()> {
        std::thread::sleep(Duration::from_millis(20));
        // SAFETY: kill(pid, 0) only checks.
        if unsafe { libc::kill(pid, 0) } == 0 {
            return Ok(());
        }
        let hint = match self.holder {
            Holder::SelfExec => "; does the program's main() call allot_linux::ipc::systemd_bus::holder::hold_if_asked() first?",
            Holder::Command(_) => "",
        };
        Err(Error::Sys { call: format!("keep {unit} alive"), source: std::io::Error::other(format!("its holder (pid {pid}) exited at once{hint}")) })
    }

    /// A scope whose holder died (killed by hand) gets a new one through systemd.
    pub(super) fn ensure_holder(&self, st: &mut State, key: &Key, dir: &Path) -> Result<()> {
        let procs = dir.join(HOLDER).join("cgroup.procs");
        if procs.exists() && !read(&procs)?.trim().is_empty() {
            return Ok(());
        }
        let unit = self.names.scope(key);
        mkdir(&dir.join(HOLDER))?;
        let pid = holder::spawn(&self.holder)?;
        if let Err(e) = self.attach_into(st, &unit, dir, HOLDER, pid) {
            // SAFETY: ending the holder this call started.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            return Err(e);
        }
        self.check_holder_alive(&unit, pid)
    }

    /// Stops the scope of `key` (it must hold nothing but its holder), takes its funding
    /// off its slice, and stops a slice it started.
    pub(super) fn stop_scope(&self, key: &Key) -> Result<()> {
        let mut st = self.lock();
        let Some(dir) = self.scope_dir(&mut st, key).filter(|d| d.is_dir()) else { return Ok(()) };
        let left: Vec<String> = std::fs::read_dir(&dir)
            .map_err(|source| Error::Io { op: "readdir", path: dir.clone(), source })?
            .flatten()
            .filter(|e| e.path().is_dir())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| n != HOLDER)
            .collect();
        if !left.is_empty() {
            return Err(Error::Io {
                op: "stop the scope of",
                path: dir,
                source: std::io::Error::new(std::io::ErrorKind::DirectoryNotEmpty, format!("it still holds {}; remove those first", left.join(", "))),
            });
        }
        let unit = self.names.scope(key);
        let slice = self.names.slice(key);
        if *key != Key::Background {
            // The currency is gone: so is its funding (the slice's weight), written while
            // the slice is still loaded.
            st.sd.set_properties(&slice, true, vec![CpuWeight::Unset.prop()])?;
        }
        // The holder is ended first and waited for: stopping a scope whose holder is still
        // exiting leaves its cgroup behind (systemd's rmdir meets EBUSY and is not retried),
        // and with it the slice's. An empty scope then ends by itself.
        end_holders(&dir, &self.holder_comm(), libc::SIGKILL)?;
        let _ = std::fs::remove_dir(dir.join(HOLDER));
        match st.sd.stop_unit(&unit) {
            Err(e) if !no_such_unit(&e) => return Err(e),
            _ => {}
        }
        st.scopes.remove(key);
        st.limiter.forget(key.rel());
        st.slices.remove(&slice);
        if *key == Key::Background {
            // The slice goes with the scope, and its runtime IOWeight= with it: a new one
            // is sent its own.
            for p in super::SliceProp::ALL {
                st.mem_limiter.forget(&format!("{slice}#{}", p.name()));
            }
            match st.sd.stop_unit(&slice) {
                Err(e) if !no_such_unit(&e) => return Err(e),
                _ => {}
            }
        }
        // A user's or named currency's slice that only this scope kept running is stopped
        // by systemd itself (measured: `Removed slice user-0.slice` at once).
        Ok(())
    }

    /// The name (comm) a holder runs under.
    fn holder_comm(&self) -> String {
        match &self.holder {
            Holder::SelfExec => "allot-holder".into(),
            Holder::Command(c) => c.first().map(|p| p.rsplit('/').next().unwrap_or(p).chars().take(15).collect()).unwrap_or_default(),
        }
    }

    /// Lets the scope of `key` go for good (allot being removed): its holder is ended, so
    /// systemd stops the scope with its last process.
    /// [`crate::cgroup::Delegation::take_back_slice`]: a currency's slice back to
    /// systemd's `CPUWeight=` and `CPUQuota=` defaults, if it runs now.
    pub(super) fn take_back_currency_slice(&self, rel: &str) -> Result<()> {
        let key = match Self::place(rel)? {
            names::Place::Scope(key @ Key::Currency(_)) => key,
            _ => return Err(super::bad_rel(rel, "not a currency's path".into())),
        };
        let slice = self.names.slice(&key);
        let mut st = self.lock();
        st.limiter.forget(key.rel());
        st.slices.remove(&slice);
        if st.sd.unit_cgroup(&slice)?.is_empty() {
            return Ok(());
        }
        st.sd.set_properties(&slice, true, vec![CpuWeight::Unset.prop(), CpuQuota::Unset.prop()])
    }

    pub(super) fn release_scope(&self, key: &Key) -> Result<()> {
        let mut st = self.lock();
        let Some(dir) = self.scope_dir(&mut st, key).filter(|d| d.is_dir()) else { return Ok(()) };
        end_holders(&dir, &self.holder_comm(), libc::SIGTERM)?;
        st.scopes.remove(key);
        st.limiter.forget(key.rel());
        Ok(())
    }
}

/// Ends the holders in a scope's holder cgroup (only processes named as holders are,
/// through a pidfd) and waits up to 2 s for them to be gone from it.
fn end_holders(scope: &Path, comm_of_holder: &str, sig: i32) -> Result<()> {
    let procs = scope.join(HOLDER).join("cgroup.procs");
    let pids = || read(&procs).unwrap_or_default().split_whitespace().filter_map(|p| p.parse::<i32>().ok()).collect::<Vec<_>>();
    for pid in pids() {
        // pidfd first, then identity: only allot's own holder is ended.
        let Ok(fd) = crate::process::pidfd::PidFd::open(pid) else { continue };
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if comm.trim() == comm_of_holder && fd.alive() {
            fd.signal(sig)?;
        }
    }
    let t0 = std::time::Instant::now();
    while !pids().is_empty() && t0.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

fn no_such_unit(e: &Error) -> bool {
    matches!(e, Error::Bus { name, .. } if name == "org.freedesktop.systemd1.NoSuchUnit")
}
