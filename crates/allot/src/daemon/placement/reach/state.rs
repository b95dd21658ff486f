//! Reach's memory: per-user lookup budgets and remembered verdicts. A leaf that
//! placement's state holds without importing reach.rs (whose impl Daemon imports the core).

use std::collections::HashMap;
use std::time::Instant;

/// Unit lookups per user per second, on average.
pub const RATE: f64 = 20.0;
/// Unit lookups of one user at once (a cron minute starting many jobs).
pub const BURST: f64 = 50.0;
/// Verdicts remembered at once; past it, all are forgotten (and looked up again).
const KEPT: usize = 65536;
/// Users whose budgets are tracked at once; past it, full buckets are forgotten.
const USERS: usize = 4096;
/// Processes waiting to be looked at again at the next tick; past it, the rest wait for
/// the next scan.
pub const LATER_MAX: usize = 4096;
/// Looks at one waiting process before it is left to the next scan (a tick is 100 to
/// 500 ms apart: some seconds of retries).
pub const LATER_TRIES: u32 = 20;

/// What to do with a process that is someone else's or in another unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Into its user's currency.
    Move,
    /// Where it is.
    Stay,
    /// Not now (its user's lookup budget is spent, or the unit could not be read):
    /// looked at again at the next scan.
    Later,
}

/// Reach's memory: lookup budgets and remembered verdicts.
#[derive(Debug, Default)]
pub struct Reach {
    /// Per uid: (tokens, when last refilled).
    pub(super) budgets: HashMap<u32, (f64, Instant)>,
    /// (pid, start time, uid) whose unit said "stays".
    pub(super) kept: HashMap<(i32, u64, u32), ()>,
    /// Units looked up since start.
    pub lookups: u64,
    /// Looks put off for want of budget since start.
    pub deferred: u64,
    /// While a batch of process events is handled: when it was read from the kernel, and
    /// when the daemon's loop took it (for the log line of a move: what waited).
    pub(in crate::daemon::placement) heard: Option<(Instant, Instant)>,
    /// (pid, /proc inode) an event named but that could not be placed then (its user's
    /// budget spent, its unit or itself unreadable, the move refused), and how many looks
    /// it had: looked at again at each tick, not only at the next scan.
    pub(super) later: HashMap<(i32, u64), u32>,
}

impl Reach {
    pub(super) fn admit(&mut self, uid: u32, now: Instant) -> bool {
        if self.budgets.len() >= USERS && !self.budgets.contains_key(&uid) {
            self.budgets.retain(|_, (t, at)| *t + now.duration_since(*at).as_secs_f64() * RATE < BURST);
        }
        let (tokens, at) = self.budgets.entry(uid).or_insert((BURST, now));
        *tokens = (*tokens + now.duration_since(*at).as_secs_f64() * RATE).min(BURST);
        *at = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            self.deferred += 1;
            false
        }
    }

    /// How long ago the batch being handled was read from the kernel, and how long it
    /// waited for the loop, as the log line of a move says it; empty outside a batch.
    pub(in crate::daemon::placement) fn waited(&self, now: Instant) -> String {
        match self.heard {
            Some((read, taken)) => format!(
                " ({} ms after the kernel's report was read, {} ms of it waiting for the daemon's loop)",
                now.saturating_duration_since(read).as_millis(),
                taken.saturating_duration_since(read).as_millis()
            ),
            None => String::new(),
        }
    }

    /// `pid` (its /proc inode `ino`) is to be looked at again at the next tick, after
    /// `tries` looks; false when it is left to the next scan (tried enough, or too many wait).
    pub(in crate::daemon::placement) fn put_later(&mut self, pid: i32, ino: u64, tries: u32) -> bool {
        if tries >= LATER_TRIES || (self.later.len() >= LATER_MAX && !self.later.contains_key(&(pid, ino))) {
            self.later.remove(&(pid, ino));
            return false;
        }
        self.later.insert((pid, ino), tries);
        true
    }

    pub(super) fn keep(&mut self, key: (i32, u64, u32)) {
        if self.kept.len() >= KEPT {
            self.kept.clear();
        }
        self.kept.insert(key, ());
    }
}
