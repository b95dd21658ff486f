//! Placement's memory: what was seen of each pid, the sources, who is a human user, the
//! exec budgets and reach's memory. A leaf the core holds without importing placement.rs
//! (whose impl Daemon imports the core).

use crate::config::Config;
use allot_linux::process::users::HumanUids;
use std::collections::{HashMap, HashSet};
use std::time::Instant;

/// What the last look at a pid found. Kept with the /proc/PID inode and owner it had then
/// (a new inode: a reused pid, or the process looked up afresh; a new owner: its user
/// changed); looked at again when either changes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Seen {
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
    pub(super) seen: HashMap<i32, (u64, u32, Seen)>,
    pub(super) sources: Vec<String>,
    pub(super) humans: Humans,
    /// New processes are reported by the kernel's process events (else only by scans).
    pub(super) events: bool,
    /// The last full scan.
    pub(super) last_scan: Option<Instant>,
    pub(super) events_lost_logged: bool,
    /// Per-user budgets for matching execs against the rules.
    pub(super) execs: super::budget::ExecBudget,
    /// (uid, rule) whose refused currency was logged.
    pub(super) refusals_logged: HashSet<(u32, String)>,
    /// Sources another allot daemon places from (it holds their claim): not placed from here.
    pub(super) forgone: Vec<String>,
    /// Processes that became a human user in another unit or session (reach.rs).
    pub(super) reach: super::reach::state::Reach,
}

/// Which uids are human users: allot-linux's [`HumanUids`] (login.defs, subuid, systemd's
/// dynamic users, nobody), the config's range if it sets one, and its `only` list.
#[derive(Debug, Clone)]
pub struct Humans {
    pub(super) uids: HumanUids,
    pub(super) only: Option<Vec<u32>>,
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
    /// The batch of process events handled next was read from the kernel at `read`.
    pub fn heard(&mut self, read: Instant) {
        self.reach.heard = Some((read, Instant::now()));
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
            execs: super::budget::ExecBudget::default(),
            refusals_logged: HashSet::new(),
            forgone: vec![],
            reach: super::reach::state::Reach::default(),
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
                super::budget::RATE,
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

pub(super) fn normalize(p: &str) -> String {
    let t = p.trim().trim_end_matches('/');
    if t.is_empty() {
        "/".into()
    } else if t.starts_with('/') {
        t.into()
    } else {
        format!("/{t}")
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
