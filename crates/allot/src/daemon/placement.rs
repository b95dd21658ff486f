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
//! both the caller and the job's owner). Its descendants still where it was go with it
//! (placement/consider.rs): they were forked before the daemon heard of the change.
//!
//! Nothing a user controls hides a process: /proc text is read lossily (a name that is not
//! UTF-8 is still a process), a thread group whose leader exited is placed through its live
//! threads, and a process that cannot be read now is looked at again at the next scan.
//! Only kernel threads, other managers' processes and exited ones are remembered as never
//! placed, and only until their /proc inode or owner changes. Execs are matched against the
//! rules within a per-user budget (placement/budget.rs).

mod budget;
mod consider;
mod reach;

use super::core::Daemon;
use super::trust::Place;
use crate::config::Config;
use allot_linux::process::users::HumanUids;
use std::collections::{HashMap, HashSet};
use std::time::Instant;

/// What the last look at a pid found. Kept with the /proc/PID inode and owner it had then
/// (a new inode: a reused pid, or the process looked up afresh; a new owner: its user
/// changed); looked at again when either changes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Seen {
    /// Never placed: a kernel thread, or in a cgroup another manager owns.
    Never,
    /// Exited, and no thread of it lives.
    Dead,
    /// Looked at: placed, or where it belongs.
    Done,
    /// Could not be read or moved: looked at again at the next scan. Never kept as
    /// `Never`: what a user controls (a name, an exited leader) must not hide a process.
    Retry,
}

/// Placement's memory.
#[derive(Debug)]
pub struct Placement {
    /// Per pid: (inode, owner, what was found).
    seen: HashMap<i32, (u64, u32, Seen)>,
    sources: Vec<String>,
    humans: Humans,
    /// New processes are reported by the kernel's process events (else only by scans).
    events: bool,
    /// The last full scan.
    last_scan: Option<Instant>,
    events_lost_logged: bool,
    /// Per-user budgets for matching execs against the rules.
    execs: budget::ExecBudget,
    /// (uid, rule) whose refused currency was logged.
    refusals_logged: HashSet<(u32, String)>,
    /// Sources another allot daemon places from (it holds their claim): not placed from here.
    forgone: Vec<String>,
    /// Processes that became a human user in another unit or session (reach.rs).
    reach: reach::Reach,
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
        let only =
            cfg.users.only.as_ref().map(|l| l.iter().filter_map(|u| allot_linux::process::procfs::user_uid(u).or_else(|| u.parse().ok())).collect());
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
    /// Whether new processes are reported by the kernel's process events.
    pub fn events(&self) -> bool {
        self.events
    }
    /// New processes are reported by the kernel's process events from now on (or not).
    pub fn set_events(&mut self, on: bool) {
        self.events = on;
    }
    /// Placement for a config.
    pub fn new(cfg: &Config) -> Self {
        let sources = cfg.placement.from.iter().map(|s| normalize(s)).collect();
        Self {
            seen: HashMap::new(),
            sources,
            humans: Humans::load(cfg),
            events: false,
            last_scan: None,
            events_lost_logged: false,
            execs: budget::ExecBudget::default(),
            refusals_logged: HashSet::new(),
            forgone: vec![],
            reach: reach::Reach::default(),
        }
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
        self.sources.contains(&p) && !self.forgone.contains(&p)
    }
    /// The cgroups placement takes processes from (`placement.from`).
    pub fn sources(&self) -> &[String] {
        &self.sources
    }
    /// Another daemon places from `source`: leave its processes to it (claims.rs).
    pub fn forgo(&mut self, source: &str) {
        self.forgone.push(normalize(source));
    }
    /// Where a process leaves allot to when its new user is not a human user.
    pub fn home(&self) -> String {
        self.sources.first().cloned().unwrap_or_else(|| "/".into())
    }
    /// Why `uid` is no login user's at all (a subordinate uid, a dynamic user), if so.
    pub fn excluded_why(&self, uid: u32) -> Option<&str> {
        self.humans.excluded_why(uid)
    }
    /// Is `uid` a human user allot places?
    pub fn is_human(&self, uid: u32) -> bool {
        self.humans.contains(uid)
    }
    /// A copy of who counts as a login user, for the connection limits.
    pub fn humans(&self) -> Humans {
        self.humans.clone()
    }
    /// How new processes are found, for `status`.
    pub fn tracking(&self) -> String {
        let mut s = if self.events { "events (the kernel's proc connector) with a safety scan".to_string() } else { "scan of /proc".to_string() };
        let e = &self.execs;
        if e.deferred > 0 {
            s.push_str(&format!(
                "; execs past a user's budget ({}/s): {} waited, {} dropped, {} waiting",
                budget::RATE,
                e.deferred,
                e.dropped,
                e.waiting()
            ));
        }
        s
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
        let forgone = if self.forgone.is_empty() {
            String::new()
        } else {
            format!("; not from {}: another allot daemon places from there", self.forgone.join(", "))
        };
        format!("{}{only}, from cgroups {}{forgone}", self.humans.uids.describe(), self.sources.join(", "))
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
        let gone: Vec<_> = self.desired().jobs.values().filter(|j| !self.tree().cg().exists(&j.rel())).map(|j| j.id).collect();
        for id in gone {
            self.read_again(&id);
        }
        if !self.cfg().users.auto_place {
            return;
        }
        self.placement_mut().last_scan = Some(Instant::now());
        let pids = self.host().pids();
        let mut next = HashMap::with_capacity(pids.len());
        for pid in pids {
            let Some((owner, ino)) = self.host().quick(pid) else { continue };
            let keep = match self.placement().seen.get(&pid) {
                Some(&(i, o, seen)) if i == ino && o == owner && seen != Seen::Retry => Some(seen),
                _ => None,
            };
            let seen = keep.unwrap_or_else(|| self.consider(pid, false));
            next.insert(pid, (ino, owner, seen));
        }
        self.placement_mut().seen = next;
        self.due_execs();
    }

    /// The kernel's process events: a process whose user changed is looked at now.
    /// Returns true when events were lost (the caller scans at once).
    pub fn on_process_events(&mut self, evs: Vec<allot_linux::procevents::ProcEvent>) -> bool {
        use allot_linux::procevents::ProcEvent;
        let mut lost = false;
        self.due_execs();
        for e in evs {
            match e {
                ProcEvent::Uid { pid, .. } => self.on_process(pid, false),
                ProcEvent::Exec { pid } if !self.cfg().compiled_rules.is_empty() => self.on_exec(pid),
                ProcEvent::Lost => {
                    lost = true;
                    if !self.placement().events_lost_logged {
                        log::warn!("the kernel dropped process events (its queue overflowed); scanning /proc to catch up");
                        self.placement_mut().events_lost_logged = true;
                    }
                }
                _ => {}
            }
        }
        lost
    }

    /// A process event (its user changed, or it exec'd): look at it now.
    pub fn on_process(&mut self, pid: i32, exec: bool) {
        if !self.cfg().users.auto_place {
            return;
        }
        // Owner and inode before the look: a change after it shows at the next scan.
        let Some((owner, ino)) = self.host().quick(pid) else { return };
        let seen = self.consider(pid, exec);
        self.placement_mut().seen.insert(pid, (ino, owner, seen));
    }

    /// An exec: matched against the rules within its user's budget (budget.rs). Only a
    /// human user's process can match a rule; another's exec costs one stat(2).
    fn on_exec(&mut self, pid: i32) {
        if !self.cfg().users.auto_place {
            return;
        }
        let Some((owner, ino)) = self.host().quick(pid) else { return };
        if !self.placement().humans.contains(owner) {
            return;
        }
        if self.placement_mut().execs.admit(owner, pid, ino, Instant::now()) {
            self.on_process(pid, true);
        }
    }

    /// Execs that waited for their user's budget and may be matched now (the process still
    /// the one that exec'd: same /proc inode); at every tick and batch of process events.
    pub fn due_execs(&mut self) {
        for (pid, ino) in self.placement_mut().execs.due(Instant::now()) {
            if self.host().quick(pid).is_some_and(|(_, i)| i == ino) {
                self.on_process(pid, true);
            }
        }
    }

    fn mark_left(&mut self, place: &Place) {
        if let Place::Job(id) = place {
            self.read_again(id);
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
