//! Looking at one process: is it placed, where, by which rule; and the processes that go
//! with it (descendants forked after its user changed, before the daemon heard of it).

use super::super::core::Daemon;
use super::super::host::{Facts, ProcInfo};
use super::super::registry::{CurrencyId, JobId, JobSpec};
use super::super::trust::{Peer, Place};
use super::state::Seen;
use crate::config_rules::{self as rules, Rule};
use std::collections::VecDeque;

/// Descendants looked at after one process changed place: a process forks at most this
/// many before the daemon hears of its uid change, in any case worth waiting for.
pub const TAKE_ALONG: usize = 4096;

/// Users × rules whose refused currency is logged (each once); past it, none more.
const REFUSALS_LOGGED: usize = 1024;

impl Daemon {
    /// Places one process if it should be, and the descendants that go with it; returns
    /// what was found. `exec`: it just exec'd, so a rule may now match it even in its
    /// user's default job.
    pub(super) fn consider(&mut self, pid: i32, exec: bool) -> Seen {
        let (seen, left) = self.consider_one(pid, exec);
        if let Some(from) = left {
            self.take_along(pid, &from);
        }
        seen
    }

    /// `pid` left `from` for who it is now (its user changed, or it was placed from a
    /// source). Its descendants still in `from` were forked after that and before the
    /// daemon heard of it, with no event of their own to tell: each is looked at now (it
    /// moves only if it, too, is no longer where it belongs). Breadth first, bounded.
    fn take_along(&mut self, pid: i32, from: &Place) {
        let mut todo = VecDeque::from([pid]);
        let mut left = TAKE_ALONG;
        while let Some(p) = todo.pop_front() {
            for c in self.host().children(p) {
                if left == 0 {
                    log::warn!("process {pid}: more than {TAKE_ALONG} descendants to place along with it; the rest wait for the next scan");
                    return;
                }
                left -= 1;
                if self.place_of(c).ok().as_ref() != Some(from) {
                    continue;
                }
                let q = self.host().quick(c);
                let (seen, moved) = self.consider_one(c, false);
                if let Some((owner, ino)) = q {
                    self.placement_mut().seen.insert(c, (ino, owner, seen));
                }
                if moved.is_some() {
                    todo.push_back(c);
                }
            }
        }
    }

    /// Looks at one process; returns what was found and, when it was moved for who it is
    /// (not by a rule at exec), where it was.
    fn consider_one(&mut self, pid: i32, exec: bool) -> (Seen, Option<Place>) {
        if pid == self.host().me() || pid == 1 {
            return (Seen::Never, None);
        }
        // pidfd first, then identity, then where it is, then alive before the move. A
        // process that cannot be read now is looked at again at the next scan: nothing a
        // user controls (a name, a command line, an exited leader) may make it "never".
        let Ok(p) = self.host().open(pid) else { return (Seen::Retry, None) };
        let Some(info) = self.host().info(&p) else { return (Seen::Retry, None) };
        if info.kernel_thread {
            return (Seen::Never, None);
        }
        if info.zombie {
            // No thread of it lives (a leader whose threads run is not a zombie here): it
            // never runs again, and its pid is reused only with a new /proc inode.
            return (Seen::Dead, None);
        }
        let uid = info.creds.uid[0];
        let whole = info.creds.all(uid);
        let human = whole && self.placement().humans.contains(uid);
        let Ok(place) = self.place_of(pid) else { return (Seen::Retry, None) };
        let own_job = matches!(&place, Place::Job(id) if whole && self.desired().jobs.get(id).is_some_and(|j| j.owner == uid));
        match (&place, human) {
            // A human user's own login session (systemd hosts): it stays where logind put
            // it, and a matching rule reaches it per task (sessions/rules.rs).
            (Place::Session { uid: owner, scope, .. }, true) if *owner == uid => {
                let scope = scope.clone();
                return match self.session_rule(&p, &info, &scope) {
                    super::super::sessions::RuleOutcome::Done => (Seen::Done, None),
                    super::super::sessions::RuleOutcome::Gone => (Seen::Retry, None),
                };
            }
            // Another manager's, or a session's process that is not a human user's.
            (Place::Foreign(_) | Place::Session { .. }, false) => return (Seen::Never, None),
            // A process that became another human user in a service or in someone else's
            // session: a cron job, su, sudo -u (reach.rs) joins that user's currency.
            (Place::Foreign(_) | Place::Session { .. }, true) => match self.reach(&p, uid, &place) {
                super::reach::Verdict::Move => {}
                super::reach::Verdict::Stay => return (Seen::Never, None),
                super::reach::Verdict::Later => return (Seen::Retry, None),
            },
            (Place::Source(path), _) if !self.placement().is_auto(path) => return (Seen::Never, None),
            (Place::Job(id), _) if own_job => {
                // In its own job. Rules apply at exec, and only to the user's default job:
                // a job the user made stays as they made it.
                if !(exec && human && *id == JobId::Default(uid) && !self.cfg().compiled_rules.is_empty()) {
                    return (Seen::Done, None);
                }
            }
            (Place::Source(_), false) => return (Seen::Done, None),
            (Place::Job(_) | Place::Stray(_), false) if whole => {
                // Its user changed to one allot does not place (root, a system user): out.
                let home = self.placement().home();
                if self.host().alive(&p) && self.tree().cg().move_to_path(&home, pid).is_ok() {
                    log::info!("process {pid} changed user to uid {uid}, which allot does not place; moved it out of allot to {home}");
                    self.mark_left(&place);
                    return (Seen::Done, Some(place));
                }
                return (Seen::Retry, None);
            }
            (_, false) => return (Seen::Done, None),
            (_, true) => {}
        }
        let dest = match self.rule_job(pid, &info) {
            Some(Ok(id)) => id,
            Some(Err(e)) => {
                log::error!("{e}");
                JobId::Default(uid)
            }
            None => JobId::Default(uid),
        };
        if place == Place::Job(dest) {
            return (Seen::Done, None);
        }
        let t_job = std::time::Instant::now();
        if !self.desired().jobs.contains_key(&dest) {
            let mut spec = JobSpec::new(dest, CurrencyId::User(uid), uid);
            spec.cap = self.user_defaults(uid).1;
            if let Err(e) = self.make_job_dir(&spec) {
                log::error!("could not make {dest}: {e}");
                return (Seen::Retry, None);
            }
            self.registry_mut().put_job(spec);
            let _ = self.save();
        }
        let rel = self.desired().jobs[&dest].rel();
        let t_move = std::time::Instant::now();
        match self.move_verified(&p, &rel) {
            Ok(()) => {
                self.counters_mut().placed += 1;
                if !own_job && !matches!(place, Place::Source(_)) {
                    let now = std::time::Instant::now();
                    let waited = self.placement().reach.waited(now);
                    let (job_ms, move_ms) = ((t_move - t_job).as_millis(), (now - t_move).as_millis());
                    log::info!(
                        "process {pid} changed user to uid {uid}: placed again, in its new user's currency{waited}; {job_ms} ms making its job, {move_ms} ms moving it"
                    );
                }
                self.mark_left(&place);
                self.read_again(&dest);
                (Seen::Done, (!own_job).then_some(place))
            }
            Err(_) => (Seen::Retry, None),
        }
    }

    /// The first rule that matches a process, and the currency its job would be in: the
    /// rule's, when the process's user may use it, else the user's own (a rule is the
    /// admin's default for what a process looks like, and how it looks is the user's to
    /// choose: it never grants a currency). The bool: the rule's currency was refused.
    #[allow(clippy::type_complexity)]
    pub(in crate::daemon) fn match_rule(&self, pid: i32, info: &ProcInfo) -> Option<(Rule, Result<(CurrencyId, bool), String>, Facts)> {
        let uid = info.creds.uid[0];
        let facts = self.host().facts(pid, info.tid);
        let f = rules::Facts { uid, groups: &facts.groups, exe: &facts.exe, comm: &info.comm, cmdline: &facts.cmdline };
        let rule = self.cfg().compiled_rules.iter().find(|r| r.test(&f).is_ok())?.clone();
        let currency = match rule.currency.as_deref().map(|c| self.resolve_currency(c)) {
            None => Ok((CurrencyId::User(uid), false)),
            Some(Err(e)) => Err(e.message),
            Some(Ok(c)) => {
                let peer = Peer { uid, gid: info.creds.gid[0], groups: facts.groups.clone(), pid, caller: None };
                Ok(if self.may_use(&peer, &c) { (c, false) } else { (CurrencyId::User(uid), true) })
            }
        };
        Some((rule, currency, facts))
    }

    /// The job the first matching rule gives a process (made if needed): None when no rule
    /// matches; Err when the rule's job cannot be made.
    fn rule_job(&mut self, pid: i32, info: &ProcInfo) -> Option<Result<JobId, String>> {
        if self.cfg().compiled_rules.is_empty() {
            return None;
        }
        let uid = info.creds.uid[0];
        let (rule, currency, _) = self.match_rule(pid, info)?;
        let (currency, refused) = match currency {
            Ok(c) => c,
            Err(e) => return Some(Err(format!("rule {} (line {}): {e}", rule.name, rule.line))),
        };
        if refused {
            let key = (uid, rule.name.clone());
            if self.placement().refusals_logged.len() < REFUSALS_LOGGED && self.placement_mut().refusals_logged.insert(key) {
                log::warn!(
                    "rule {} (line {}) matches process {pid} of uid {uid}, who may not use currency {:?}: its job is in the user's own currency (logged once per user and rule)",
                    rule.name,
                    rule.line,
                    rule.currency.as_deref().unwrap_or_default()
                );
            }
            if rule.tickets.is_none() && rule.cap.is_none() && !rule.background {
                // The rule does nothing else: the user's default job.
                return Some(Ok(JobId::Default(uid)));
            }
        }
        if let Some(j) =
            self.desired().jobs.values().find(|j| j.owner == uid && j.rule.as_deref() == Some(rule.name.as_str()) && j.currency == currency)
        {
            return Some(Ok(j.id));
        }
        let mut spec = JobSpec::new(self.registry_mut().take_id(), currency, uid);
        spec.tickets = rule.tickets.unwrap_or_default();
        spec.cap = rule.cap;
        spec.background = rule.background;
        spec.rule = Some(rule.name.clone());
        if let Err(e) = self.make_job_dir(&spec) {
            return Some(Err(format!("rule {} (line {}): could not make its job for uid {uid}: {e}", rule.name, rule.line)));
        }
        log::info!("rule {} (line {}) made {} for uid {uid}: {}", rule.name, rule.line, spec.id, rule.action());
        let id = spec.id;
        self.registry_mut().put_job(spec);
        let _ = self.save();
        Some(Ok(id))
    }

    /// `allot rules test PID`: which rule matches a process, and what it would do.
    pub fn rules_test(&self, peer: &Peer, pid: crate::proto::Pid) -> Result<crate::proto::Response, crate::proto::Refusal> {
        use crate::proto::Refusal;
        let pid = pid.get();
        let p = self.open_for_request(pid)?;
        let info = self.host().info(&p).ok_or_else(|| Refusal::not_found(format!("no process {pid} (it has exited)")))?;
        let uid = info.creds.uid[0];
        if !(peer.is_root() || self.cfg().privacy.show_other_users || uid == peer.uid) {
            return Err(Refusal::not_permitted(format!("process {pid} is not yours")));
        }
        let facts = self.host().facts(pid, info.tid);
        let f = rules::Facts { uid, groups: &facts.groups, exe: &facts.exe, comm: &info.comm, cmdline: &facts.cmdline };
        let mut checked = vec![];
        for r in &self.cfg().compiled_rules {
            let t = r.test(&f);
            checked.push(crate::proto::RuleCheck {
                rule: r.name.clone(),
                line: r.line,
                matches: t.is_ok(),
                why: t.err().unwrap_or_else(|| "matches".into()),
            });
        }
        let matched = self.match_rule(pid, &info).map(|(r, c, _)| {
            let mut s = format!("{} (line {}): {}", r.name, r.line, r.action());
            if let Ok((c, true)) = c {
                s.push_str(&format!("; uid {uid} may not use that currency, so in its own ({})", self.currency_name(&c)));
            }
            s
        });
        Ok(crate::proto::Response::Rules(crate::proto::RulesView { pid, exe: facts.exe, comm: info.comm, matched, checked }))
    }
}
