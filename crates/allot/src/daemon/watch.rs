//! The inotify watches on allot's own directories (reconcile.rs handles what they report).

use allot_linux::cgroup::inotify::{self, Inotify};
use allot_linux::cgroup::CpuController;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

/// The watches on allot's directories.
#[derive(Debug, Default)]
pub struct Watch {
    ino: Option<Arc<Inotify>>,
    by_wd: HashMap<i32, String>,
    by_rel: HashMap<String, i32>,
    logged: HashMap<String, Instant>,
}

const MASK: u32 = inotify::MODIFY | inotify::DELETE_SELF | inotify::CREATE | inotify::DELETE;

impl Watch {
    /// Watches through a fresh inotify instance (None: reconciliation off, e.g. in tests).
    pub fn new(enabled: bool) -> Self {
        let ino = if enabled {
            match Inotify::new() {
                Ok(i) => Some(Arc::new(i)),
                Err(e) => {
                    log::warn!("no inotify ({e}): values changed from outside are noticed only when the daemon next writes them");
                    None
                }
            }
        } else {
            None
        };
        Self { ino, ..Default::default() }
    }
    /// The instance, for the reader thread.
    pub fn reader(&self) -> Option<Arc<Inotify>> {
        self.ino.clone()
    }
    /// Watches one of allot's directories.
    pub fn watch(&mut self, cg: &dyn CpuController, rel: &str) {
        let Some(i) = &self.ino else { return };
        if self.by_rel.contains_key(rel) {
            return;
        }
        match i.add(&cg.dir(rel), MASK) {
            Ok(wd) => {
                self.by_wd.insert(wd, rel.to_string());
                self.by_rel.insert(rel.to_string(), wd);
            }
            Err(e) => log::debug!("cannot watch {rel}: {e}"),
        }
    }
    /// The directory a watch descriptor is on.
    pub fn rel_of(&self, wd: i32) -> Option<String> {
        self.by_wd.get(&wd).cloned()
    }
    /// When an outside change of this kind was last logged.
    pub fn logged_since(&self, key: &str) -> Option<Instant> {
        self.logged.get(key).copied()
    }
    /// Keeps when an outside change of this kind was logged.
    pub fn set_logged(&mut self, key: String, at: Instant) {
        self.logged.insert(key, at);
    }
    /// Stops watching a directory (before or after it is removed).
    pub fn unwatch(&mut self, rel: &str) {
        if let Some(wd) = self.by_rel.remove(rel) {
            self.by_wd.remove(&wd);
            if let Some(i) = &self.ino {
                i.remove(wd);
            }
        }
    }
}
