//! Reconciliation: a value changed from outside (another tool, an admin, a service
//! manager) is noticed and re-asserted, and a removed job directory is re-created.
//!
//! The kernel reports every write(2) to a cgroup file through inotify (allot-linux's
//! inotify.rs), so allot watches its own directories and reads a file only when it was
//! written: nothing is re-read at rest, whatever the number of jobs. Its own writes are
//! reported too; they read back as what was written and are ignored. Each outside change
//! is logged once (per directory and file, at most once a minute) and counted.

use super::core::Daemon;
use allot_linux::cgroup::inotify;
use std::time::{Duration, Instant};

impl Daemon {
    fn note_outside(&mut self, key: String, msg: String) {
        self.counters_mut().reconciled += 1;
        let now = Instant::now();
        if self.watch().logged_since(&key).is_none_or(|t| now.duration_since(t) > Duration::from_secs(60)) {
            log::warn!("{msg}");
            self.watch_mut().set_logged(key, now);
        }
    }

    /// Handles what inotify reported; re-applies the plan where a value was changed.
    pub fn on_cgroup_events(&mut self, evs: Vec<inotify::Event>) {
        let mut replan = false;
        for e in evs {
            if e.mask & inotify::OVERFLOW != 0 {
                // Events were lost: write everything once more.
                self.forget_applied(None);
                replan = true;
                continue;
            }
            let Some(rel) = self.watch().rel_of(e.wd) else { continue };
            if e.mask & (inotify::DELETE_SELF | inotify::IGNORED) != 0 {
                self.unwatch_rel(&rel);
                if let Some(j) = self.desired().by_rel(&rel) {
                    let id = j.id;
                    self.read_again(&id);
                }
                continue;
            }
            if e.mask & inotify::DELETE != 0 && e.mask & inotify::ISDIR != 0 {
                // rmdir reports to the parent's watch (the directory's own may say nothing).
                let child = if rel.is_empty() { e.name.clone() } else { format!("{rel}/{}", e.name) };
                self.unwatch_rel(&child);
                if let Some(j) = self.desired().by_rel(&child) {
                    let id = j.id;
                    self.read_again(&id);
                }
                continue;
            }
            if e.mask & inotify::CREATE != 0 && e.mask & inotify::ISDIR != 0 && !e.name.starts_with('.') {
                let child = if rel.is_empty() { e.name.clone() } else { format!("{rel}/{}", e.name) };
                if self.desired().by_rel(&child).is_none() && !self.is_currency_dir(&child) {
                    self.note_outside(
                        format!("create {child}"),
                        format!("cgroup {child} appeared in allot's tree, made by someone else; allot leaves it alone"),
                    );
                }
                continue;
            }
            if e.mask & inotify::MODIFY == 0 {
                continue;
            }
            replan |= self.check_file(&rel, &e.name);
        }
        if replan {
            self.replan();
        }
    }

    fn is_currency_dir(&self, rel: &str) -> bool {
        let name = rel.strip_prefix(&format!("{}/", super::registry::BACKGROUND)).unwrap_or(rel);
        !name.contains('/') && self.desired().jobs.values().any(|j| j.currency.dir() == name)
    }

    /// Compares a written file with what allot last wrote; true if it must be re-asserted.
    fn check_file(&mut self, rel: &str, file: &str) -> bool {
        let Some(node) = super::applied::Node::of_rel(rel) else { return false };
        let Some(applied) = self.tree().applied().get(&node).cloned() else { return false };
        match file {
            "cpu.weight" | "cpu.shares" => {
                let (Some(w), Ok(now)) = (applied.weight, self.tree().cg().weight(rel)) else { return false };
                if now == w {
                    return false;
                }
                self.note_outside(
                    format!("{rel} weight"),
                    format!("{}: weight changed from outside to {now} (allot wrote {w}); re-asserting", self.tree().cg().dir(rel).display()),
                );
                self.tree_mut().applied_mut().forget_weight(&node);
                true
            }
            "cpu.max" | "cpu.cfs_quota_us" | "cpu.cfs_period_us" => {
                let (Some(q), Ok(now)) = (applied.max, self.tree().cg().max(rel)) else { return false };
                let want = q.map(|q| allot_linux::cgroup::Max { quota_us: q, period_us: super::tree::PERIOD_US });
                if now == want {
                    return false;
                }
                let show = |m: Option<allot_linux::cgroup::Max>| m.map_or("max".to_string(), |m| format!("{} {}", m.quota_us, m.period_us));
                self.note_outside(
                    format!("{rel} max"),
                    format!(
                        "{}: cpu.max changed from outside to {} (allot wrote {}); re-asserting",
                        self.tree().cg().dir(rel).display(),
                        show(now),
                        show(want)
                    ),
                );
                self.tree_mut().applied_mut().forget_max(&node);
                true
            }
            "cpu.idle" if rel == super::registry::BACKGROUND => {
                if self.tree().cg().idle(rel).unwrap_or(true) {
                    return false;
                }
                self.note_outside(
                    format!("{rel} idle"),
                    format!("{}: cpu.idle changed from outside to 0; re-asserting 1", self.tree().cg().dir(rel).display()),
                );
                if let Err(e) = self.tree().cg().set_idle(rel, true) {
                    log::error!("could not set cpu.idle of {rel} to 1: {e}");
                }
                false
            }
            "cgroup.procs" | "tasks" => {
                if let Some(j) = self.desired().by_rel(rel) {
                    let id = j.id;
                    self.read_again(&id);
                }
                false
            }
            _ => false,
        }
    }
}
