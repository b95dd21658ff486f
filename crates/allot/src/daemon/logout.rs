//! Logout: a job started with `allot run` from a login session ends when logind stops
//! that session (logout under `KillUserProcesses=yes`, `loginctl terminate-session` and
//! `terminate-user`), as the session's own processes do, though the job left the
//! session's scope for allot's. The tie is systemd's (a `PartOf=` tether,
//! allot-linux's cgroup/systemd/tethers.rs); the daemon ends the job as systemd ends a
//! scope's processes: SIGTERM and SIGHUP (logind's session scopes have `SendSIGHUP=yes`)
//! and SIGCONT, then SIGKILL (`cgroup.kill`) to what is left after [`GRACE`]. Sending
//! signals to other users' processes takes CAP_KILL, which the shipped unit does not
//! grant: there the job is killed with `cgroup.kill` at once, a write to allot's own
//! directory. cgroup v1 has no `cgroup.kill`: there, without CAP_KILL, the job is not
//! ended, the daemon says so, and `allot status` lists it as degraded.

use super::core::Daemon;
use super::registry::JobSpec;
use std::time::{Duration, Instant};

/// How long a job's processes have between SIGTERM and SIGKILL.
pub const GRACE: Duration = Duration::from_secs(5);

impl Daemon {
    /// Ties a job just made from a login session to that session.
    pub fn tie_to_session(&mut self, job: &JobSpec, scope: &str) {
        let Some(d) = self.tree().cg().delegation() else { return };
        if let Err(e) = d.tether(&job.leaf(), scope) {
            log::warn!("{} is not tied to {scope}: ending the session will not end it ({e})", self.job_label(job));
        }
    }

    /// Once a tick: jobs whose session was stopped are ended; tethers whose job is gone
    /// are let go; SIGKILL for what outlived its grace.
    pub fn logouts(&mut self, now: Instant) {
        let cut = match self.tree().cg().delegation().map(|d| d.cut_tethers()) {
            None => return,
            Some(Ok(c)) => c,
            Some(Err(e)) => {
                log::warn!("could not list the jobs tied to login sessions: {e}");
                return;
            }
        };
        for leaf in cut {
            let Some(j) = self.desired().jobs.values().find(|j| j.leaf() == leaf).cloned() else { continue };
            let rel = j.rel();
            let (found, sent) = self.signal_job(&rel, &[libc::SIGTERM, libc::SIGHUP, libc::SIGCONT]);
            if found > 0 && sent == 0 {
                // No signal could be sent (the shipped unit has no CAP_KILL): cgroup.kill,
                // which takes only the write to allot's own directory (cgroup v2).
                match self.kill_job(&rel) {
                    Ok(()) => {
                        log::info!("{} ended with its login session: its {found} process(es) killed (SIGTERM could not be sent)", self.job_label(&j))
                    }
                    Err(e) => log::warn!("{} was not ended with its login session: {e}", self.job_label(&j)),
                }
            } else {
                log::info!("{} ended with its login session: {sent} process(es) sent SIGTERM", self.job_label(&j));
                self.kill_at(rel, now + GRACE);
                // Read again at the next observations, as after a kill (kill_job).
                self.read_again(&j.id);
            }
        }
        for rel in self.kills_due(now) {
            self.read_again_rel(&rel);
            if self.tree().cg().procs(&rel).is_ok_and(|p| !p.is_empty()) {
                match self.kill_job(&rel) {
                    Ok(()) => log::info!("{rel}: what outlived {GRACE:?} after its session ended is killed"),
                    Err(e) => log::warn!("{rel}: what outlived {GRACE:?} after its session ended could not be killed: {e}"),
                }
            }
        }
        let leaves: std::collections::HashSet<String> = self.desired().jobs.values().map(|j| j.leaf()).collect();
        let Some(d) = self.tree().cg().delegation() else { return };
        for t in d.tethered() {
            if !leaves.contains(&t) {
                if let Err(e) = d.untether(&t) {
                    log::warn!("could not let go of the tie of {t} to its session: {e}");
                }
            }
        }
    }

    /// Lets go of every tie to a login session (allot being removed: its jobs run on
    /// as plain processes, and no holder of allot's is left).
    pub fn untie_all(&mut self) {
        // The first listing finds the ties a previous daemon made.
        let Some(d) = self.tree().cg().delegation() else { return };
        let _ = d.cut_tethers();
        for t in d.tethered() {
            if let Err(e) = d.untether(&t) {
                log::warn!("could not let go of the tie of {t} to its session: {e}");
            }
        }
    }

    /// SIGKILL to everything in a job's directory: `cgroup.kill`, else each process
    /// through its pidfd. The job's lists are read again at the next observation: a process
    /// that exits does not move the job's usage on cgroup v1 (`cpuacct.usage`), which would
    /// then not tell the observer to look, and the job would never be reaped.
    fn kill_job(&mut self, rel: &str) -> Result<(), String> {
        let r = self.tree().cg().kill_all(rel).map_err(|e| e.to_string());
        if let Err(e) = &r {
            log::debug!("{rel}: {e}; SIGKILL each process");
            self.signal_job(rel, &[libc::SIGKILL]);
        }
        self.read_again_rel(rel);
        match r {
            Err(e) if self.tree().cg().procs(rel).is_ok_and(|p| !p.is_empty()) => Err(e),
            _ => Ok(()),
        }
    }

    /// The job at `rel` is read again at the next observation.
    fn read_again_rel(&mut self, rel: &str) {
        if let Some(id) = self.desired().jobs.values().find(|j| j.rel() == rel).map(|j| j.id) {
            self.read_again(&id);
        }
    }

    /// Sends signals to every process in a job's directory, each through a pidfd opened
    /// before its place is read again (so a recycled pid elsewhere is never signalled);
    /// returns how many were found and how many took the signals.
    fn signal_job(&self, rel: &str, sigs: &[i32]) -> (usize, usize) {
        let (mut found, mut sent) = (0, 0);
        for pid in self.tree().cg().procs(rel).unwrap_or_default() {
            let Ok(p) = self.host().open(pid) else { continue };
            if self.tree().cg().rel_of(pid).ok().flatten().as_deref() != Some(rel) || !self.host().alive(&p) {
                continue;
            }
            found += 1;
            let mut ok = true;
            for &s in sigs {
                ok &= self.host().signal(&p, s);
            }
            sent += ok as usize;
        }
        (found, sent)
    }
}

#[cfg(test)]
mod tests;
