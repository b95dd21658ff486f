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
pub mod state;

pub use state::Humans;

use super::core::Daemon;
use super::trust::place::Place;
use state::Seen;
use std::collections::HashMap;
use std::time::Instant;

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
        self.placement_mut().reach.heard = None;
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
        // Not placeable now: looked at again at the next tick (reach.rs), not minutes later.
        if seen == Seen::Retry {
            self.placement_mut().reach.put_later(pid, ino, 1);
        }
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
