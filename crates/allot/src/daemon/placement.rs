//! Automatic placement: a user's process that is in no job lands in the user's default job.
//!
//! Safe in every mode (docs/trust.md): allot places only processes that sit where no other
//! manager put them — the root cgroup, or a source cgroup the admin lists
//! (`placement.from`) — never one in a service's, a container's, a session's or a batch
//! job's cgroup, nor one in another allot's tree. Only human users' processes are placed:
//! uids in /etc/login.defs' UID_MIN..UID_MAX (or the config's), never a subordinate uid
//! of /etc/subuid (rootless containers), systemd's dynamic users or nobody.
//!
//! A process whose user changed (su, sudo, a setuid helper) is placed again: into its new
//! user's default job, or out of allot (back to the first source) when its new user is not
//! a human user. Until then no one but root may change it (trust.rs: uids must all match
//! both the caller and the job's owner).

use super::core::Daemon;
use super::registry::{CurrencyId, JobId, JobSpec};
use super::trust::Place;
use crate::config::Config;
use allot_linux::users::HumanUids;
use std::collections::HashMap;
use std::time::Instant;

/// What the last look at a pid found.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Seen {
    /// Never placed: a kernel thread, or in another manager's cgroup.
    Never,
    /// Looked at with this owner (the /proc/PID inode number tells a reused pid apart).
    Owner(u32),
}

/// Placement's memory.
#[derive(Debug)]
pub struct Placement {
    seen: HashMap<i32, (u64, Seen)>,
    sources: Vec<String>,
    humans: Humans,
    /// New processes are reported by the kernel's process events (else only by scans).
    pub events: bool,
    /// The last full scan.
    pub last_scan: Option<Instant>,
    events_lost_logged: bool,
}

/// Which uids are human users: allot-linux's [`HumanUids`] (login.defs, subuid, systemd's
/// dynamic users, nobody), the config's range if it sets one, and its `only` list.
#[derive(Debug, Clone)]
pub struct Humans {
    uids: HumanUids,
    only: Option<Vec<u32>>,
}

impl Humans {
    /// From the config, /etc/login.defs and /etc/subuid.
    pub fn load(cfg: &Config) -> Self {
        let defs = HumanUids::load();
        let (min, max) = defs.range();
        let uids = match (cfg.users.min_uid, cfg.users.max_uid) {
            (None, None) => defs,
            (a, b) => defs.with_range(a.unwrap_or(min), b.unwrap_or(max)),
        };
        let only = cfg.users.only.as_ref().map(|l| l.iter().filter_map(|u| allot_linux::procfs::user_uid(u).or_else(|| u.parse().ok())).collect());
        Self { uids, only }
    }
    /// Why `uid` is no login user's at all (a subordinate uid, a dynamic user), if so.
    pub fn excluded_why(&self, uid: u32) -> Option<&str> {
        self.uids.excluded_why(uid)
    }
    /// Is `uid` a human user allot places?
    pub fn contains(&self, uid: u32) -> bool {
        self.uids.contains(uid) && self.only.as_ref().is_none_or(|o| o.contains(&uid))
    }
}

impl Placement {
    /// Placement for a config.
    pub fn new(cfg: &Config) -> Self {
        let sources = cfg.placement.from.iter().map(|s| normalize(s)).collect();
        Self { seen: HashMap::new(), sources, humans: Humans::load(cfg), events: false, last_scan: None, events_lost_logged: false }
    }
    /// May a request take a process out of this cgroup (as /proc/PID/cgroup names it)?
    /// The root cgroup (no manager) and the configured sources.
    pub fn is_source(&self, path: &str) -> bool {
        let p = normalize(path);
        p == "/" || self.sources.contains(&p)
    }
    /// Does automatic placement take processes from this cgroup (`placement.from`)?
    pub fn is_auto(&self, path: &str) -> bool {
        let p = normalize(path);
        self.sources.contains(&p)
    }
    /// Where a process leaves allot to when its new user is not a human user.
    pub fn home(&self) -> String {
        self.sources.first().cloned().unwrap_or_else(|| "/".into())
    }
    /// Why `uid` is no login user's at all (a subordinate uid, a dynamic user), if so.
    pub fn excluded_why(&self, uid: u32) -> Option<&str> {
        self.humans.excluded_why(uid)
    }
    /// A copy of who counts as a login user, for the connection limits.
    pub fn humans(&self) -> Humans {
        self.humans.clone()
    }
    /// How new processes are found, for `status`.
    pub fn tracking(&self) -> String {
        if self.events {
            "events (the kernel's proc connector) with a safety scan".into()
        } else {
            "scan of /proc".into()
        }
    }
    /// What is placed, for `status`.
    pub fn describe(&self, cfg: &Config) -> String {
        if !cfg.users.auto_place {
            return "off".into();
        }
        let only = match &self.humans.only {
            Some(o) => format!(", only uids {o:?}"),
            None => String::new(),
        };
        format!("{}{only}, from cgroups {}", self.humans.uids.describe(), self.sources.join(", "))
    }
}

fn normalize(p: &str) -> String {
    let t = p.trim().trim_end_matches('/');
    if t.is_empty() {
        "/".into()
    } else if t.starts_with('/') {
        t.into()
    } else {
        format!("/{t}")
    }
}

impl Daemon {
    /// Looks at every process once (at start, when events were lost, every `scan_ms`
    /// without events, and as a slow safety net with them). A pid seen before costs one
    /// stat(2) of /proc/PID (owner and inode: a changed user or a reused pid shows there).
    pub fn scan(&mut self) {
        // A job directory removed from outside (inotify reports it at once; this is the
        // safety net): its job is read at the next tick, which repairs it.
        for j in self.desired.jobs.values() {
            if !self.tree.cg.exists(&j.rel()) {
                if let Some(t) = self.obs.jobs.get_mut(&j.id) {
                    t.dirty = true;
                }
            }
        }
        if !self.cfg.users.auto_place {
            return;
        }
        self.placement.last_scan = Some(Instant::now());
        let pids = self.host.pids();
        let mut next = HashMap::with_capacity(pids.len());
        for pid in pids {
            let quick = self.host.quick(pid);
            let keep = match (self.placement.seen.get(&pid), quick) {
                (Some(&(ino, seen)), Some((uid, now_ino))) if ino == now_ino => match seen {
                    Seen::Never => Some(seen),
                    Seen::Owner(o) if o == uid => Some(seen),
                    _ => None,
                },
                (_, None) => continue,
                _ => None,
            };
            let seen = keep.unwrap_or_else(|| self.consider(pid, false));
            next.insert(pid, (quick.map_or(0, |q| q.1), seen));
        }
        self.placement.seen = next;
    }

    /// The kernel's process events: a process whose user changed is looked at now.
    /// Returns true when events were lost (the caller scans at once).
    pub fn on_process_events(&mut self, evs: Vec<allot_linux::procevents::ProcEvent>) -> bool {
        use allot_linux::procevents::ProcEvent;
        let mut lost = false;
        for e in evs {
            match e {
                ProcEvent::Uid { pid, .. } => self.on_process(pid, false),
                ProcEvent::Exec { pid } if !self.cfg.compiled_rules.is_empty() => self.on_process(pid, true),
                ProcEvent::Lost => {
                    lost = true;
                    if !self.placement.events_lost_logged {
                        log::warn!("the kernel dropped process events (its queue overflowed); scanning /proc to catch up");
                        self.placement.events_lost_logged = true;
                    }
                }
                _ => {}
            }
        }
        lost
    }

    /// A process event (its user changed, or it exec'd): look at it now.
    pub fn on_process(&mut self, pid: i32, exec: bool) {
        if !self.cfg.users.auto_place {
            return;
        }
        let seen = self.consider(pid, exec);
        if let Some((uid, ino)) = self.host.quick(pid) {
            let _ = uid;
            self.placement.seen.insert(pid, (ino, seen));
        }
    }

    /// Places one process if it should be; returns what was found. `exec`: it just exec'd,
    /// so a rule may now match it even in its user's default job.
    fn consider(&mut self, pid: i32, exec: bool) -> Seen {
        if pid == self.host.me() || pid == 1 {
            return Seen::Never;
        }
        // pidfd first, then identity, then where it is, then alive before the move.
        let Ok(p) = self.host.open(pid) else { return Seen::Never };
        let Some(info) = self.host.info(&p) else { return Seen::Never };
        if info.kernel_thread || info.zombie {
            return Seen::Never;
        }
        let uid = info.creds.uid[0];
        let whole = info.creds.all(uid);
        let human = whole && self.placement.humans.contains(uid);
        let Ok(place) = self.place_of(pid) else { return Seen::Never };
        match (&place, human) {
            // Another manager's, or a login session's (systemd hosts: logins stay where logind
            // put them; their user's slice is their currency already).
            (Place::Foreign(_) | Place::Session { .. }, _) => return Seen::Never,
            (Place::Source(path), _) if !self.placement.is_auto(path) => return Seen::Never,
            (Place::Job(id), _) if whole && self.desired.jobs.get(id).is_some_and(|j| j.owner == uid) => {
                // In its own job. Rules apply at exec, and only to the user's default job:
                // a job the user made stays as they made it.
                if !(exec && human && *id == JobId::Default(uid) && !self.cfg.compiled_rules.is_empty()) {
                    return Seen::Owner(uid);
                }
            }
            (Place::Source(_), false) => return Seen::Owner(info.creds.uid[1]),
            (Place::Job(_) | Place::Stray(_), false) if whole => {
                // Its user changed to one allot does not place (root, a system user): out.
                let home = self.placement.home();
                if self.host.alive(&p) && self.tree.cg.move_to_path(&home, pid).is_ok() {
                    log::info!("process {pid} changed user to uid {uid}, which allot does not place; moved it out of allot to {home}");
                    self.mark_left(&place);
                }
                return Seen::Owner(uid);
            }
            (_, false) => return Seen::Owner(info.creds.uid[1]),
            (_, true) => {}
        }
        let dest = match self.rule_job(pid, uid, &info.comm) {
            Some(Ok(id)) => id,
            Some(Err(e)) => {
                log::error!("{e}");
                JobId::Default(uid)
            }
            None => JobId::Default(uid),
        };
        if place == Place::Job(dest) {
            return Seen::Owner(uid);
        }
        if !self.desired.jobs.contains_key(&dest) {
            let mut spec = JobSpec::new(dest, CurrencyId::User(uid), uid);
            spec.cap = self.user_defaults(uid).1;
            if let Err(e) = self.make_job_dir(&spec) {
                log::error!("could not make the default job of uid {uid}: {e}");
                return Seen::Owner(u32::MAX);
            }
            self.desired.jobs.insert(dest, spec);
            let _ = self.save();
        }
        let rel = self.desired.jobs[&dest].rel();
        match self.tree.move_verified(self.host.as_ref(), &p, &rel) {
            Ok(()) => {
                self.counters.placed += 1;
                if matches!(place, Place::Job(JobId::Numbered(_)) | Place::Stray(_)) || matches!(place, Place::Job(JobId::Default(u)) if u != uid) {
                    log::info!("process {pid} changed user to uid {uid}: placed again, in its new user's currency");
                }
                self.mark_left(&place);
                if let Some(t) = self.obs.jobs.get_mut(&dest) {
                    t.dirty = true;
                }
                // Children it forked before it was placed are still where it was (they had
                // no uid change of their own to report): place them too.
                if let Place::Source(from) = &place {
                    for child in self.host.children(pid).into_iter().take(4096) {
                        if self.tree.cg.path_of(child).is_ok_and(|p| p == *from) {
                            let seen = self.consider(child, false);
                            if let Some((_, ino)) = self.host.quick(child) {
                                self.placement.seen.insert(child, (ino, seen));
                            }
                        }
                    }
                }
                Seen::Owner(uid)
            }
            Err(_) => Seen::Owner(u32::MAX),
        }
    }

    /// The job the first matching rule gives a process (made if needed): None when no rule
    /// matches; Err when the rule's job cannot be made.
    fn rule_job(&mut self, pid: i32, uid: u32, comm: &str) -> Option<Result<JobId, String>> {
        if self.cfg.compiled_rules.is_empty() {
            return None;
        }
        let groups = self.host.groups(pid);
        let (exe, cmdline) = (self.host.exe(pid).unwrap_or_default(), self.host.cmdline(pid).unwrap_or_default());
        let facts = super::rules::Facts { uid, groups: &groups, exe: &exe, comm, cmdline: &cmdline };
        let rule = self.cfg.compiled_rules.iter().find(|r| r.test(&facts).is_ok())?.clone();
        if let Some(j) = self.desired.jobs.values().find(|j| j.owner == uid && j.rule.as_deref() == Some(rule.name.as_str())) {
            return Some(Ok(j.id));
        }
        let currency = match &rule.currency {
            Some(c) => match self.resolve_currency(c) {
                Ok(c) => c,
                Err(e) => return Some(Err(format!("rule {} (line {}): {e}", rule.name, rule.line))),
            },
            None => CurrencyId::User(uid),
        };
        let mut spec = JobSpec::new(self.desired.take_id(), currency, uid);
        spec.tickets = rule.tickets.unwrap_or_default();
        spec.cap = rule.cap;
        spec.background = rule.background;
        spec.rule = Some(rule.name.clone());
        if let Err(e) = self.make_job_dir(&spec) {
            return Some(Err(format!("rule {} (line {}): could not make its job for uid {uid}: {e}", rule.name, rule.line)));
        }
        log::info!("rule {} (line {}) made {} for uid {uid}: {}", rule.name, rule.line, spec.id, rule.action());
        let id = spec.id;
        self.desired.jobs.insert(id, spec);
        let _ = self.save();
        Some(Ok(id))
    }

    /// `allot rules test PID`: which rule matches a process, and what it would do.
    pub fn rules_test(&self, peer: &super::trust::Peer, pid: i64) -> Result<crate::proto::Response, String> {
        let pid = i32::try_from(pid).ok().filter(|&p| p > 0).ok_or_else(|| format!("pid {pid} is not a process id"))?;
        let p = self.open_for_request(pid)?;
        let info = self.host.info(&p).ok_or_else(|| format!("no process {pid} (it has exited)"))?;
        let uid = info.creds.uid[0];
        if !(peer.is_root() || self.cfg.privacy.show_other_users || uid == peer.uid) {
            return Err(format!("process {pid} is not yours"));
        }
        let groups = self.host.groups(pid);
        let (exe, cmdline) = (self.host.exe(pid).unwrap_or_default(), self.host.cmdline(pid).unwrap_or_default());
        let facts = super::rules::Facts { uid, groups: &groups, exe: &exe, comm: &info.comm, cmdline: &cmdline };
        let mut checked = vec![];
        let mut matched = None;
        for r in &self.cfg.compiled_rules {
            let t = r.test(&facts);
            if t.is_ok() && matched.is_none() {
                matched = Some(format!("{} (line {}): {}", r.name, r.line, r.action()));
            }
            checked.push(crate::proto::RuleCheck {
                rule: r.name.clone(),
                line: r.line,
                matches: t.is_ok(),
                why: t.err().unwrap_or_else(|| "matches".into()),
            });
        }
        Ok(crate::proto::Response::Rules(crate::proto::RulesView { pid, exe, comm: info.comm, matched, checked }))
    }

    fn mark_left(&mut self, place: &Place) {
        if let Place::Job(id) = place {
            if let Some(t) = self.obs.jobs.get_mut(id) {
                t.dirty = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn humans_exclude_subordinate_and_dynamic_uids() {
        let h = Humans { uids: HumanUids::from_files("UID_MIN 1000\nUID_MAX 60000\n", "alice:100000:65536\n"), only: None };
        assert!(h.contains(1000) && h.contains(59999));
        assert!(!h.contains(999) && !h.contains(0) && !h.contains(100001) && !h.contains(61200) && !h.contains(65534));
        let h = Humans { uids: HumanUids::from_files("", "alice:100000:65536\n").with_range(0, u32::MAX), only: None };
        assert!(!h.contains(120000), "a subordinate uid is never a user, whatever the range");
        let h = Humans { only: Some(vec![1001]), ..h };
        assert!(h.contains(1001) && !h.contains(1002));
    }

    #[test]
    fn sources_are_normalized() {
        assert_eq!(normalize(""), "/");
        assert_eq!(normalize("/"), "/");
        assert_eq!(normalize("a/b/"), "/a/b");
    }
}
