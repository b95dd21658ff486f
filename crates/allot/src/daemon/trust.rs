//! Who is asking, and what they may do (docs/trust.md). Every operation that acts on a
//! process goes through [`Daemon::target`]: one owner check for run, set, focus and move.
//! Currency rights go through [`Daemon::may_use`] and [`Daemon::may_fund`].

use super::core::Daemon;
use super::host::{Proc, ProcInfo};
use super::registry::{CurrencyId, JobId};
use crate::proto::Refusal;

/// The caller, as the kernel reports it: never taken from the request.
#[derive(Debug)]
pub struct Peer {
    /// uid (SO_PEERCRED).
    pub uid: u32,
    /// Primary gid.
    pub gid: u32,
    /// Supplementary groups at connect time (SO_PEERGROUPS).
    pub groups: Vec<u32>,
    /// The pid that connected (for messages only; never acted on by number).
    pub pid: i32,
    /// The calling process itself, proven (SO_PEERPIDFD, or a pidfd it sent with SCM_RIGHTS
    /// beside SCM_CREDENTIALS naming the same process). Only `run` acts on it.
    pub caller: Option<Proc>,
}

impl Peer {
    /// Root.
    pub fn is_root(&self) -> bool {
        self.uid == 0
    }
}

/// Where a process is, as far as allot is concerned.
#[derive(Debug, Clone, PartialEq)]
pub enum Place {
    /// In one of allot's jobs.
    Job(JobId),
    /// Outside allot, where allot may place from (the root cgroup, or an admin-listed source).
    Source(String),
    /// Inside allot's tree but in no job (a stray, e.g. written there by hand).
    Stray(String),
    /// In a login session's scope on a systemd host (logind's): its user's to move with a
    /// request (systemd moves it), never placed automatically.
    Session {
        /// The session's user.
        uid: u32,
        /// Its scope, e.g. `session-3.scope`.
        scope: String,
        /// Its cgroup path.
        path: String,
    },
    /// In a cgroup another manager owns (a service, a container, a session, a batch job).
    Foreign(String),
}

/// A process a request may act on, held by pidfd.
#[derive(Debug)]
pub struct Target {
    /// The process.
    pub proc: Proc,
    /// Its identity, read while it was alive.
    pub info: ProcInfo,
    /// Where it is.
    pub place: Place,
}

/// A user's name for messages (or the uid).
pub fn user_label(uid: u32) -> String {
    remembered(&NAMES, uid, || allot_linux::process::procfs::user_name(uid)).unwrap_or_else(|| uid.to_string())
}

/// The uid NSS gives a user name (remembered like [`user_label`]).
pub fn uid_of(name: &str) -> Option<u32> {
    remembered(&UIDS, name.to_string(), || allot_linux::process::procfs::user_uid(name))
}

/// How long an NSS answer is kept: `show` names the user of every job and `may_use`
/// checks config lists by name, in the loop, and a lookup reads files or waits on a
/// directory server (LDAP, SSSD). A user added or renamed shows within a minute.
const REMEMBER: std::time::Duration = std::time::Duration::from_secs(60);

type Remembered<K, V> = std::sync::Mutex<Option<std::collections::HashMap<K, (Option<V>, std::time::Instant)>>>;
static NAMES: Remembered<u32, String> = std::sync::Mutex::new(None);
static UIDS: Remembered<String, u32> = std::sync::Mutex::new(None);

fn remembered<K: std::hash::Hash + Eq, V: Clone>(m: &Remembered<K, V>, key: K, look: impl FnOnce() -> Option<V>) -> Option<V> {
    let now = std::time::Instant::now();
    let mut g = m.lock().unwrap_or_else(|e| e.into_inner());
    let map = g.get_or_insert_with(Default::default);
    if let Some((v, at)) = map.get(&key) {
        if now.duration_since(*at) < REMEMBER {
            return v.clone();
        }
    }
    let v = look();
    // Bounded: past 4096 names (a storm of lookups of made-up names) all are forgotten.
    if map.len() >= 4096 {
        map.clear();
    }
    map.insert(key, (v.clone(), now));
    v
}

fn in_list(list: &[String], uid: u32) -> bool {
    list.iter().any(|u| uid_of(u) == Some(uid) || u.parse::<u32>().ok() == Some(uid))
}

impl Daemon {
    /// Where a process is.
    pub fn place_of(&self, pid: i32) -> Result<Place, Refusal> {
        match self.tree().cg().rel_of(pid) {
            // A leaf whose name starts with '.' is the backend's own (a systemd scope's
            // holder): never a job's, never touched.
            Ok(Some(rel)) if rel.rsplit('/').next().is_some_and(|l| l.starts_with('.')) => {
                Ok(Place::Foreign(self.tree().cg().path_of(pid).unwrap_or(rel)))
            }
            Ok(Some(rel)) => Ok(match self.desired().by_rel(&rel) {
                Some(j) => Place::Job(j.id),
                None => Place::Stray(rel),
            }),
            Ok(None) => {
                let path = self.tree().cg().path_of(pid).map_err(|_| Refusal::not_found(format!("no process {pid} (it has exited)")))?;
                if self.placement().is_source(&path) {
                    return Ok(Place::Source(path));
                }
                if let Some(Ok(Some(s))) = self.tree().cg().delegation().map(|d| d.session_of(pid)) {
                    // Only the session's own scope: a process of a session-started service
                    // or container lives elsewhere and stays foreign.
                    if path.ends_with(&format!("/{}", s.scope)) {
                        return Ok(Place::Session { uid: s.uid, scope: s.scope, path });
                    }
                }
                Ok(Place::Foreign(path))
            }
            Err(_) => Err(Refusal::not_found(format!("no process {pid} (it has exited)"))),
        }
    }

    /// The one check for every operation that acts on a process named by pid: it exists,
    /// is a user process (not pid 1, not the daemon, not a kernel thread, not a zombie), is
    /// wholly the caller's (real, effective and saved uid; root may act on any), sits in a
    /// job the caller owns or outside allot where allot may place from (root may `force`
    /// a process out of another manager's cgroup), and is still alive after all of that
    /// was read.
    pub fn target(&self, peer: &Peer, pid: crate::proto::Pid, force: bool) -> Result<Target, Refusal> {
        let pid = pid.get();
        if pid == 1 {
            return Err(Refusal::not_permitted("pid 1 (init) is never moved: it must stay where the system put it"));
        }
        if pid == self.host().me() {
            return Err(Refusal::not_permitted(format!("pid {pid} is the allot daemon itself")));
        }
        let proc = self.open_for_request(pid)?;
        let info = self.host().info(&proc).ok_or_else(|| Refusal::not_found(format!("no process {pid} (it has exited)")))?;
        if info.kernel_thread {
            return Err(Refusal::not_permitted(format!("pid {pid} ({}) is a kernel thread; allot manages user processes only", info.comm)));
        }
        if info.zombie {
            return Err(Refusal::not_found(format!("process {pid} has exited (a zombie waiting for its parent); there is nothing to change")));
        }
        if !peer.is_root() && !info.creds.all(peer.uid) {
            let [r, e, s, _] = info.creds.uid;
            if [r, e, s].contains(&peer.uid) {
                return Err(Refusal::not_permitted(format!(
                    "process {pid} is not wholly yours: it runs with real, effective and saved uid {r}, {e}, {s} (a setuid program, or one changing user); allot changes only processes whose uids are all yours (uid {})",
                    peer.uid
                )));
            }
            return Err(Refusal::not_permitted(format!(
                "process {pid} belongs to {} (uid {r}); you (uid {}) may only change your own processes",
                user_label(r),
                peer.uid
            )));
        }
        let place = self.place_of(pid)?;
        match &place {
            Place::Job(id) if !peer.is_root() => {
                let j = &self.desired().jobs[id];
                if j.owner != peer.uid {
                    return Err(Refusal::not_permitted(format!(
                        "process {pid} is in {} of {} (uid {}); only its owner or root may change it",
                        self.job_label(j),
                        user_label(j.owner),
                        j.owner
                    )));
                }
                if !self.may_use(peer, &j.currency) {
                    return Err(Refusal::not_permitted(format!(
                        "process {pid} is in currency {:?}, which you (uid {}) may not use; ask root to move it or to list you in the currency",
                        self.currency_name(&j.currency),
                        peer.uid
                    )));
                }
            }
            Place::Session { uid, scope, .. } if !peer.is_root() && *uid != peer.uid => {
                return Err(Refusal::not_permitted(format!(
                    "process {pid} is in {scope}, a login session of uid {uid}; only that user or root may move it"
                )));
            }
            Place::Foreign(path) if !(peer.is_root() && force) => {
                return Err(Refusal::not_permitted(format!(
                    "process {pid} is in cgroup {path}, which another manager owns (a service, container, session or batch job); allot never takes a process out of it{}",
                    if peer.is_root() { " unless you add --force" } else { "" }
                )));
            }
            _ => {}
        }
        if !self.host().alive(&proc) {
            return Err(Refusal::not_found(format!("no process {pid} (it has exited)")));
        }
        Ok(Target { proc, info, place })
    }

    /// May `peer` run jobs in currency `c`?
    pub fn may_use(&self, peer: &Peer, c: &CurrencyId) -> bool {
        if peer.is_root() {
            return true;
        }
        match c {
            CurrencyId::User(uid) => *uid == peer.uid,
            CurrencyId::Named(n) => self.cfg().currencies.get(n).is_some_and(|c| {
                in_list(&c.users, peer.uid)
                    || in_list(&c.owners, peer.uid)
                    || c.groups.iter().any(|g| {
                        allot_linux::process::procfs::group_members(g).is_some_and(|(gid, members)| {
                            gid == peer.gid
                                || peer.groups.contains(&gid)
                                || members.iter().any(|m| allot_linux::process::procfs::user_uid(m) == Some(peer.uid))
                        })
                    })
            }),
        }
    }

    /// May `peer` fund currency `c`, or move processes into it?
    pub fn may_fund(&self, peer: &Peer, c: &CurrencyId) -> bool {
        peer.is_root() || matches!(c, CurrencyId::Named(n) if self.cfg().currencies.get(n).is_some_and(|x| in_list(&x.owners, peer.uid)))
    }

    /// A currency's name for people: the user's name, or the named currency's.
    pub fn currency_name(&self, c: &CurrencyId) -> String {
        match c {
            CurrencyId::User(uid) => user_label(*uid),
            CurrencyId::Named(n) => n.clone(),
        }
    }

    /// A job's id as `show` prints it: `3`, or `alice/default`.
    pub fn job_label(&self, j: &super::registry::JobSpec) -> String {
        match j.id {
            JobId::Default(uid) => format!("job {}/default", user_label(uid)),
            JobId::Numbered(n) => format!("job {n}"),
        }
    }

    /// Resolves a currency argument: a named currency, a user name, or a uid.
    pub fn resolve_currency(&self, arg: &str) -> Result<CurrencyId, Refusal> {
        if self.cfg().currencies.contains_key(arg) {
            return Ok(CurrencyId::Named(arg.to_string()));
        }
        match allot_linux::process::procfs::user_uid(arg).or_else(|| arg.parse::<u32>().ok()) {
            Some(uid) => Ok(CurrencyId::User(uid)),
            None => {
                let named: Vec<&str> = self.cfg().currencies.keys().map(|s| s.as_str()).collect();
                Err(Refusal::not_found(format!(
                    "unknown currency or user {arg:?}: named currencies are [{}]; otherwise give a user name or uid (named currencies are defined in the config)",
                    named.join(", ")
                )))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nss_answers_are_remembered_and_bounded() {
        let m: Remembered<u32, String> = std::sync::Mutex::new(None);
        let mut looked = 0;
        for _ in 0..3 {
            let v = remembered(&m, 7, || {
                looked += 1;
                None
            });
            assert_eq!(v, None);
        }
        assert_eq!(looked, 1, "a miss is remembered too: a made-up name costs one lookup a minute");
        for k in 0..5000 {
            remembered(&m, k, || Some(k.to_string()));
        }
        assert!(m.lock().unwrap().as_ref().unwrap().len() <= 4096);
    }
}
