//! A rule that matches a login-session process: what it gives per task
//! ([`allot_model::session::task_attrs`]: `background` is SCHED_IDLE, tickets a nice), set
//! on each of the process's threads by sched_setattr, and given back (the policy and nice
//! each thread had) when the rule no longer matches it (it exec'd something else), at
//! `--release` and at a clean stop. Threads it starts later inherit what was set, as
//! children of a background job stay in it; a thread or child whose attributes someone
//! changed since is left as they made it.

use super::super::core::Daemon;
use super::super::host::{Proc, ProcInfo};
use super::state::{Ruled, Sessions};
use allot_linux::process::sched::SCHED_IDLE;
use allot_model::session::{task_attrs, TaskAttrs};

/// How a rule's look at a session process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleOutcome {
    /// Done: what the rules say is in place (or nothing to do).
    Done,
    /// It exited meanwhile.
    Gone,
}

impl Sessions {
    /// Thread `tid` is SCHED_IDLE by a rule (never boosted: it takes only idle CPU).
    pub fn is_idle_by_rule(&self, tid: i32) -> bool {
        self.ruled.values().any(|r| r.attrs.idle && r.tasks.iter().any(|t| t.0 == tid))
    }
    /// The rule that reached process `pid` (started at `start`), and what it set.
    pub fn rule_of(&self, pid: i32, start: u64) -> Option<(String, TaskAttrs)> {
        self.ruled.get(&pid).filter(|r| r.start == start).map(|r| (r.rule.clone(), r.attrs))
    }
}

impl Daemon {
    /// Applies the first matching rule to a session process (a human user's, wholly
    /// theirs): the attributes it gives, on every thread; or gives back what an earlier
    /// match set when none matches now.
    pub fn session_rule(&mut self, p: &Proc, info: &ProcInfo, scope: &str) -> RuleOutcome {
        let pid = p.pid;
        if self.cfg().compiled_rules.is_empty() && !self.sessions().ruled.contains_key(&pid) {
            return RuleOutcome::Done;
        }
        if let Some(out) = self.session_to_job(p, info, scope) {
            return out;
        }
        // What was kept for an earlier process with this pid is not this one's: forgotten,
        // and nothing of it is written (the pid is another process now).
        if self.sessions().ruled.get(&pid).is_some_and(|r| r.start != p.start) {
            self.sessions_mut().ruled.remove(&pid);
        }
        let want =
            self.match_rule(pid, info).and_then(|(r, ..)| task_attrs(r.background, r.tickets.map(|t| t.get())).map(|a| (r.name.clone(), r.line, a)));
        let have = self.sessions().ruled.get(&pid).map(|r| r.attrs);
        if want.as_ref().map(|w| w.2) == have {
            return RuleOutcome::Done;
        }
        if have.is_some() {
            self.restore_ruled(pid);
        }
        let Some((rule, line, attrs)) = want else { return RuleOutcome::Done };
        let mut tasks = vec![];
        for tid in self.host().tids(pid) {
            let Some(ts) = self.host().task_start(pid, tid) else { continue };
            // Real-time threads (None) are left as they are.
            let Some((pol, nice)) = self.host().policy(tid) else { continue };
            let set = (if attrs.idle { SCHED_IDLE } else { pol }, attrs.nice.unwrap_or(nice));
            if self.host().set_policy(tid, set.0, set.1).is_err() {
                continue;
            }
            if self.host().task_start(pid, tid) != Some(ts) {
                log::warn!("thread {tid} of process {pid} exited while a rule set its policy; a task that took its id may carry it");
                continue;
            }
            tasks.push((tid, ts, (pol, nice), set));
        }
        if !self.host().alive(p) || tasks.is_empty() {
            return RuleOutcome::Gone;
        }
        let what = match attrs {
            TaskAttrs { idle: true, .. } => "SCHED_IDLE (background: it runs only on CPU nothing else wants)".to_string(),
            TaskAttrs { nice: Some(n), .. } => format!("nice {n} (its tickets' weight within its session)"),
            TaskAttrs { .. } => "nothing".to_string(),
        };
        log::info!(
            "rule {rule} (line {line}) matches process {pid} ({}) of uid {} in {scope}: {what}; it stays in its session",
            info.comm,
            info.creds.uid[0]
        );
        self.sessions_mut().ruled.insert(pid, Ruled { start: p.start, rule, attrs, tasks });
        RuleOutcome::Done
    }

    /// Gives process `pid`'s threads back what they had before a rule, if `pid` is still
    /// the process the rule reached and a thread still carries what the rule set.
    pub(super) fn restore_ruled(&mut self, pid: i32) {
        let Some(r) = self.sessions_mut().ruled.remove(&pid) else { return };
        let Ok(p) = self.host().open(pid) else { return };
        if p.start != r.start {
            return;
        }
        let leader = r.tasks.iter().find(|t| t.0 == pid).or(r.tasks.first()).map(|t| (t.2, t.3));
        for tid in self.host().tids(pid) {
            let Some(ts) = self.host().task_start(pid, tid) else { continue };
            // A thread seen then: its own; one born since inherited the leader's.
            let (before, set) = match r.tasks.iter().find(|t| t.0 == tid && t.1 == ts) {
                Some(t) => (t.2, t.3),
                None => match leader {
                    Some(l) => l,
                    None => continue,
                },
            };
            if self.host().policy(tid) != Some(set) {
                continue;
            }
            if self.host().task_start(pid, tid) == Some(ts) {
                let _ = self.host().set_policy(tid, before.0, before.1);
            }
        }
        if self.host().alive(&p) {
            log::info!("process {pid}: rule {} no longer applies; its threads have their own policy and nice back", r.rule);
        }
    }

    /// After a reload: each process a rule reached is matched against the rules in force
    /// now (a rule removed or changed gives its threads back what they had).
    pub fn recheck_session_rules(&mut self) {
        let pids: Vec<i32> = self.sessions().ruled.keys().copied().collect();
        for pid in pids {
            let Ok(p) = self.host().open(pid) else {
                self.sessions_mut().ruled.remove(&pid);
                continue;
            };
            match (self.host().info(&p), self.place_of(pid)) {
                (Some(info), Ok(super::super::trust::place::Place::Session { scope, .. })) => {
                    self.session_rule(&p, &info, &scope);
                }
                _ => self.restore_ruled(pid),
            }
        }
    }

    /// Gives back everything rules set on session processes.
    pub(super) fn undo_session_rules(&mut self) {
        let pids: Vec<i32> = self.sessions().ruled.keys().copied().collect();
        for pid in pids {
            self.restore_ruled(pid);
        }
    }
}
