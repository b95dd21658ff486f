//! Who is asking, and what they may do (docs/trust.md). Every operation that acts on a
//! process goes through [`Daemon::target`]: one owner check for run, set, focus and move.
//! Currency rights go through [`Daemon::may_use`] and [`Daemon::may_fund`].

pub mod names;
pub mod place;

pub use names::{uid_of, user_label};
pub use place::Place;

use super::core::Daemon;
use super::host::{Proc, ProcInfo};
use super::registry::CurrencyId;
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

    /// A job in a sentence: "job " and its id as `show` prints it (`job 3`, `job alice/default`).
    pub fn job_label(&self, j: &super::registry::JobSpec) -> String {
        j.id.to_string()
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
