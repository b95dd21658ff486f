//! Reach: on a systemd host, a process that became a human user outside a login session
//! of its own — a cron or at job (in `cron.service`, `atd.service`), `su - alice -c ...`
//! or `sudo -u alice` from someone else's session — joins that user's currency: it is
//! moved into the user's default job (in allot's scope in `user-UID.slice`) through
//! systemd's AttachProcessesToUnit, never by writing a cgroup file (docs/systemd.md).
//!
//! What stays where it is:
//! - a process in its own user's login session (logind's scope: the user's slice is its
//!   currency already) or anywhere else in its own user's slice (`user@UID.service`, so
//!   `systemd-run --user` units too);
//! - a process in a unit that delegates its subtree (`Delegate=`: containers, batch
//!   steps, user managers), or in a cgroup below a unit's own (another manager made it);
//! - a service's main or control process (moving it would take it from its service);
//! - a process of a service whose `User=` is that user (the admin made it run as them);
//! - anything not a service or a scope.
//!
//! Looking a unit up costs several D-Bus calls, so it is budgeted per user (a user whose
//! processes change uid in a loop must not keep the loop busy); a process past the budget
//! is looked at again at the next tick (as is one whose unit or move failed), up to
//! [`state::LATER_TRIES`] times, then at the next scan. A "stays" verdict is remembered for
//! the process (pid and start time) and its uid, so repeated uid changes of one process
//! cost nothing.

pub(super) mod state;

use super::super::core::Daemon;
use super::super::host::Proc;
use super::super::trust::place::Place;
use super::state::Seen;
pub use state::Verdict;
#[cfg(test)]
use state::{Reach, BURST, RATE};
use std::time::Instant;

impl Daemon {
    /// May `p`, now wholly of human user `uid` and at `place` (another manager's cgroup or
    /// a login session), be moved into its user's currency?
    pub(super) fn reach(&mut self, p: &Proc, uid: u32, place: &Place) -> Verdict {
        match place {
            // su/sudo -u into another human user, inside someone else's login session.
            Place::Session { uid: owner, .. } if *owner != uid => Verdict::Move,
            Place::Foreign(path) if self.backend().reaches_units() => self.reach_unit(p, uid, path),
            _ => Verdict::Stay,
        }
    }

    /// Processes an event named that could not be placed then (Seen::Retry: a lookup over
    /// budget, a unit or process unreadable, a move refused) are looked at again: called at
    /// every tick, so they do not wait for the next scan (minutes apart while the kernel's
    /// events come).
    pub fn due_later(&mut self) {
        if self.placement().reach.later.is_empty() {
            return;
        }
        let due: Vec<_> = self.placement_mut().reach.later.drain().collect();
        if !self.cfg().users.auto_place {
            return;
        }
        for ((pid, ino), tries) in due {
            let Some((owner, i)) = self.host().quick(pid) else { continue };
            if i != ino {
                continue;
            }
            let seen = self.consider(pid, false);
            self.placement_mut().seen.insert(pid, (ino, owner, seen));
            if seen == Seen::Retry {
                self.placement_mut().reach.put_later(pid, ino, tries + 1);
            }
        }
    }

    fn reach_unit(&mut self, p: &Proc, uid: u32, path: &str) -> Verdict {
        if path.starts_with(&format!("/user.slice/user-{uid}.slice/")) {
            return Verdict::Stay;
        }
        let key = (p.pid, p.start, uid);
        if self.placement().reach.kept.contains_key(&key) {
            return Verdict::Stay;
        }
        if !self.placement_mut().reach.admit(uid, Instant::now()) {
            return Verdict::Later;
        }
        self.placement_mut().reach.lookups += 1;
        let t0 = Instant::now();
        let u = match self.tree().cg().delegation().map_or(Ok(None), |d| d.unit_of(p.pid)) {
            Ok(Some(u)) => u,
            Ok(None) => return Verdict::Stay,
            Err(_) => return Verdict::Later,
        };
        let runs_as_user =
            !u.user.is_empty() && (u.user.parse::<u32>().ok() == Some(uid) || super::super::trust::names::uid_of(&u.user) == Some(uid));
        let stays = u.cgroup != path
            || u.delegate
            || !matches!(u.kind(), "service" | "scope")
            || u.name.starts_with("user@")
            || u.own_pids.contains(&(p.pid as u32))
            || runs_as_user;
        // Still the process the lookup was about (GetUnitByPID takes a number).
        if !self.host().alive(p) {
            return Verdict::Later;
        }
        if stays {
            self.placement_mut().reach.keep(key);
            return Verdict::Stay;
        }
        log::info!(
            "process {} became uid {uid} in {} (not a login session of its own): moving it into its user's currency through systemd (its unit looked up in {} ms)",
            p.pid,
            u.name,
            t0.elapsed().as_millis()
        );
        Verdict::Move
    }
}

#[cfg(test)]
mod tests;
