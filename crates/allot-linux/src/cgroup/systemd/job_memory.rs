//! A job's own memory cap on a systemd host (`allot run --mem 4G!`, docs/memory.md). A
//! job is no unit of systemd's (one scope holds a currency's jobs, docs/systemd.md), so
//! there is no property to send for it: allot's scopes delegate the memory controller
//! beside cpu (`DelegateControllers=cpu memory`, on cgroup v2), and a job's directory,
//! which allot made inside its delegation, takes `memory.max` and `memory.high` as any
//! cgroup below a delegated unit does (CGROUP_DELEGATION.md: the subtree below the
//! unit's cgroup is the delegatee's to write). The scope's own cgroup and the slices
//! above it are never written; the controller is enabled in the scope's
//! `cgroup.subtree_control` (and a background currency's directory's) only when a job
//! first carries a cap, as `+cpu` is.

use super::names::Place;
use super::SystemdTree;
use crate::{read, read_u64, write, Error, Result};
use std::path::Path;

/// The controllers allot's scopes delegate: memory too where a job may carry a memory
/// cap (cgroup v2); on a hybrid or v1 host the cpu hierarchy only.
pub(super) fn delegated(legacy: bool) -> &'static [&'static str] {
    if legacy {
        &["cpu"]
    } else {
        &["cpu", "memory"]
    }
}

/// A value for `memory.max` / `memory.high` (None: no limit).
fn limit_text(v: Option<u64>) -> String {
    v.map_or("max".into(), |b| b.to_string())
}

impl SystemdTree {
    /// Sets a job's own memory caps (`rel`: a job's path, `user-1000/j7-u1000`,
    /// `background/ci/j9-u1001`): `high` its `memory.high`, `max` its `memory.max`, None
    /// no limit. Refused, saying why, where the job's scope does not delegate memory (one
    /// started by an allot from before, kept until its jobs end).
    pub(super) fn job_memory(&self, rel: &str, high: Option<u64>, max: Option<u64>) -> Result<()> {
        let dir = self.job_memory_dir(rel, "set the memory cap of")?;
        // The soft cap first: a hard cap lowered under the soft one is never refused.
        write(dir.join("memory.high"), &limit_text(high))?;
        write(dir.join("memory.max"), &limit_text(max))
    }

    /// Sets a job's `memory.oom.group` (`whole`: an OOM kill in the job kills all of it),
    /// where [`Self::job_memory`] would write; refused where it would be.
    pub(super) fn job_oom_group(&self, rel: &str, whole: bool) -> Result<()> {
        let dir = self.job_memory_dir(rel, "set the OOM group of")?;
        write(dir.join("memory.oom.group"), if whole { "1" } else { "0" })
    }

    /// A job's directory with the memory controller enabled down to it, inside its scope's
    /// delegation; `what` names the write for a refusal.
    fn job_memory_dir(&self, rel: &str, what: &str) -> Result<std::path::PathBuf> {
        let (key, sub) = match Self::place(rel)? {
            Place::Inside(k, s) => (k, s),
            _ => return Err(super::bad_rel(rel, "a job's memory cap is set on a job's path (currency/job, background/currency/job)".into())),
        };
        if self.is_legacy() {
            return Err(Error::Sys {
                call: format!("{what} {rel:?}"),
                source: std::io::Error::new(
                    std::io::ErrorKind::Unsupported,
                    "this host's cpu controller is on cgroup v1, where allot's scopes delegate only cpu",
                ),
            });
        }
        let unit = self.names.scope(&key);
        let scope = self.scope_dir(&mut self.lock(), &key).filter(|d| d.is_dir()).ok_or_else(|| Error::Sys {
            call: format!("{what} {rel:?}"),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, format!("{unit} is not running")),
        })?;
        let mut dir = scope;
        for part in sub.split('/') {
            enable_memory(&dir, &unit)?;
            dir.push(part);
        }
        Ok(dir)
    }

    /// Bytes charged to a job (its directory's `memory.current`).
    pub(super) fn job_memory_usage(&self, rel: &str) -> Result<u64> {
        read_u64(crate::cgroup::CpuController::dir(self, rel).join("memory.current"))
    }
}

/// `+memory` in a directory of allot's delegation (a scope's top when it starts, a
/// background currency's directory when it is made) where the scope delegates memory, so
/// each job's memory is charged to its own directory from its start (what a process
/// touched while the controller was off in its parent stays charged to the parent);
/// nothing where it does not (a hybrid host, a systemd that gave no memory).
pub(super) fn enable_memory_if_delegated(dir: &Path) -> Result<()> {
    if read(dir.join("cgroup.controllers")).is_ok_and(|c| c.split_whitespace().any(|c| c == "memory")) {
        return enable_memory(dir, "");
    }
    Ok(())
}

/// `+memory` in a directory of allot's delegation (the scope's top, a background
/// currency's directory), unless it is there; refused where the directory has no memory
/// controller to give (the scope does not delegate it).
fn enable_memory(dir: &Path, unit: &str) -> Result<()> {
    let ctl = dir.join("cgroup.subtree_control");
    if read(&ctl)?.split_whitespace().any(|c| c == "memory") {
        return Ok(());
    }
    if !read(dir.join("cgroup.controllers"))?.split_whitespace().any(|c| c == "memory") {
        return Err(Error::Sys {
            call: format!("enable the memory controller below {unit}"),
            source: std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                format!("{unit} does not delegate the memory controller (started by an allot from before this one delegated it, or systemd did not give it); it does when it starts again, after its jobs end"),
            ),
        });
    }
    write(ctl, "+memory")
}

#[cfg(test)]
#[path = "job_memory_tests.rs"]
mod tests;
