//! `[sessions] background = "job"`: a login-session process a `background` rule matches is
//! moved out of its session's scope, through systemd (AttachProcessesToUnit, as `allot
//! run` from a session and reach.rs move), into a background job of its user's, one per
//! user, rule and session, tied to that session by a tether (logout.rs): when logind stops
//! the session (logout under `KillUserProcesses=yes`, `loginctl terminate-session`,
//! `terminate-user`) the job is ended with it. In allot's background slice
//! (`CPUWeight=idle`) it runs only on CPU no other user wants; SCHED_IDLE in its session
//! ([`super::rules`], the default) yields only to its own session.
//!
//! The decision is [`allot_model::session::to_job`]. Hostile cases: the caller
//! (placement/consider.rs) has already found the process wholly its session owner's and
//! in that session; the job is tied before anything is moved (no tie, no move: the rule
//! reaches it per task instead); the move checks by pidfd that the process is still the
//! one read (tree.rs, `move_verified`), and one that exited meanwhile leaves an empty job
//! that is reaped with its tether.

use super::super::core::Daemon;
use super::super::host::{Proc, ProcInfo};
use super::super::registry::JobId;
use super::super::registry::JobSpec;
use super::super::tree::MoveError;
use super::RuleOutcome;
use allot_model::session::to_job;

impl Daemon {
    /// Moves a session process into its background job when the config and the rule say
    /// so; None when it stays in its session (the rule reaches it per task, if at all).
    pub(super) fn session_to_job(&mut self, p: &Proc, info: &ProcInfo, scope: &str) -> Option<RuleOutcome> {
        let mode = self.cfg().sessions.background;
        if mode == allot_model::session::BackgroundIn::Task || self.cfg().compiled_rules.is_empty() {
            return None;
        }
        let uid = info.creds.uid[0];
        let (rule, currency, _) = self.match_rule(p.pid, info)?;
        if to_job(mode, Some(rule.background), self.tree().cg().systemd()) != Some(true) {
            return None;
        }
        let Ok((currency, _)) = currency else { return None };
        let key = (uid, rule.name.clone(), scope.to_string());
        let id = match self.sessions().moved.get(&key).filter(|id| self.desired().jobs.contains_key(id)) {
            Some(&id) => id,
            None => {
                let mut spec = JobSpec::new(self.registry_mut().take_id(), currency, uid);
                spec.tickets = rule.tickets.unwrap_or_default();
                spec.cap = rule.cap;
                spec.background = true;
                spec.rule = Some(rule.name.clone());
                if let Err(e) = self.make_job_dir(&spec) {
                    log::warn!(
                        "rule {} (line {}): could not make a background job for uid {uid}'s session {scope} ({e}); SCHED_IDLE in the session instead",
                        rule.name,
                        rule.line
                    );
                    return None;
                }
                // Tied first: a process is never moved where logout would not end it.
                let tied = match self.tree().cg().delegation() {
                    Some(d) => d.tether(&spec.leaf(), scope),
                    None => {
                        Err(allot_linux::Error::Io { op: "tether", path: scope.into(), source: std::io::Error::from_raw_os_error(libc::ENOTSUP) })
                    }
                };
                if let Err(e) = tied {
                    log::warn!(
                        "rule {} (line {}): a job for {scope} could not be tied to it ({e}); SCHED_IDLE in the session instead",
                        rule.name,
                        rule.line
                    );
                    let _ = self.tree_mut().remove(&spec.rel());
                    return None;
                }
                let id = spec.id;
                self.registry_mut().put_job(spec);
                let _ = self.save();
                let jobs: std::collections::HashSet<JobId> = self.desired().jobs.keys().copied().collect();
                self.sessions_mut().moved.retain(|_, j| jobs.contains(j));
                self.sessions_mut().moved.insert(key, id);
                id
            }
        };
        // What a rule set per task (before a reload to "job") is given back first.
        self.restore_ruled(p.pid);
        let rel = self.desired().jobs[&id].rel();
        match self.move_verified(p, &rel) {
            Ok(()) => {
                self.counters_mut().placed += 1;
                self.read_again(&id);
                log::info!(
                    "rule {} (line {}) matches process {} ({}) of uid {uid} in {scope}: moved into background {} (idle CPU only), which ends with {scope}",
                    rule.name,
                    rule.line,
                    p.pid,
                    info.comm,
                    self.job_label(&self.desired().jobs[&id])
                );
                Some(RuleOutcome::Done)
            }
            Err(MoveError::Gone) => Some(RuleOutcome::Gone),
            Err(MoveError::Kernel(e)) => {
                log::warn!("process {} could not be moved into {rel} ({e}); SCHED_IDLE in its session instead", p.pid);
                None
            }
        }
    }

    /// The job a session's background rule moved processes into, if any.
    #[cfg(test)]
    pub fn session_job(&self, uid: u32, rule: &str, scope: &str) -> Option<JobId> {
        self.sessions().moved.get(&(uid, rule.to_string(), scope.to_string())).copied().filter(|id| self.desired().jobs.contains_key(id))
    }
}
