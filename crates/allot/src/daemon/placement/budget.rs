//! The exec budget: how many of one user's execs the daemon matches against the rules
//! each second. With rules loaded the kernel reports every exec, and matching one costs
//! reads of /proc (identity, groups, executable, the command line's first 4 KiB) and the
//! rules' patterns: a user exec'ing in a loop must not keep the event loop busy for
//! everyone. Each user gets a token bucket; an exec past it waits in a short queue of
//! that user's (one entry per process, so a process that execs again and again waits
//! once) and is matched when the budget allows, at the next batch of process events or
//! the next scan; past the queue's bound the oldest waiting exec is dropped and counted
//! (its process stays in the job it is in: rules are defaults, not a confinement).

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

/// Execs matched per user per second, on average. One match reads a few /proc files of
/// at most 4 KiB each and runs the rules' patterns over them; past this, an exec costs
/// the loop one stat(2). Measured (`an_exec_storm_with_a_huge_command_line_keeps_the_daemon_cheap`):
/// about 600 execs a second of one user, one of them with a 5 MiB command line, cost the
/// daemon 0.07 CPUs in all (0.006 at rest).
pub const RATE: f64 = 100.0;
/// Execs matched at once (a build starting).
pub const BURST: f64 = 200.0;
/// Execs one user may have waiting; past it the oldest is dropped.
pub const QUEUE: usize = 64;
/// Users tracked at once (idle buckets are forgotten first).
const USERS: usize = 4096;

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
    /// Waiting execs: (pid, its /proc inode when it exec'd).
    waiting: VecDeque<(i32, u64)>,
}

/// Per-user exec budgets and what waits on them.
#[derive(Debug, Default)]
pub struct ExecBudget {
    users: HashMap<u32, Bucket>,
    /// Execs that waited for their user's budget (since start).
    pub deferred: u64,
    /// Execs dropped because their user's queue was full (since start).
    pub dropped: u64,
}

impl ExecBudget {
    fn bucket(&mut self, uid: u32, now: Instant) -> &mut Bucket {
        if self.users.len() >= USERS && !self.users.contains_key(&uid) {
            self.users.retain(|_, b| !b.waiting.is_empty() || now.duration_since(b.at).as_secs_f64() * RATE < BURST);
        }
        let b = self.users.entry(uid).or_insert(Bucket { tokens: BURST, at: now, waiting: VecDeque::new() });
        b.tokens = (b.tokens + now.duration_since(b.at).as_secs_f64() * RATE).min(BURST);
        b.at = now;
        b
    }

    /// An exec of `uid`'s process `pid` (inode `ino`): true when it may be matched now;
    /// else it waits (or, past the queue's bound, the oldest waiting one is dropped).
    pub fn admit(&mut self, uid: u32, pid: i32, ino: u64, now: Instant) -> bool {
        let b = self.bucket(uid, now);
        if b.waiting.is_empty() && b.tokens >= 1.0 {
            b.tokens -= 1.0;
            return true;
        }
        if b.waiting.iter().any(|&(p, _)| p == pid) {
            return false;
        }
        let full = b.waiting.len() >= QUEUE;
        if full {
            b.waiting.pop_front();
        }
        b.waiting.push_back((pid, ino));
        self.deferred += 1;
        if full {
            self.dropped += 1;
        }
        false
    }

    /// Waiting execs whose users' budgets allow them now, oldest first per user.
    pub fn due(&mut self, now: Instant) -> Vec<(i32, u64)> {
        let mut out = vec![];
        let uids: Vec<u32> = self.users.iter().filter(|(_, b)| !b.waiting.is_empty()).map(|(&u, _)| u).collect();
        for uid in uids {
            let b = self.bucket(uid, now);
            while b.tokens >= 1.0 {
                let Some(e) = b.waiting.pop_front() else { break };
                b.tokens -= 1.0;
                out.push(e);
            }
        }
        out
    }

    /// Execs waiting now.
    pub fn waiting(&self) -> usize {
        self.users.values().map(|b| b.waiting.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_storm_waits_in_a_bounded_queue_and_others_are_admitted() {
        let t0 = Instant::now();
        let mut b = ExecBudget::default();
        let admitted = (0..1000).filter(|&i| b.admit(3000, 10_000 + i, 1, t0)).count();
        assert_eq!(admitted, BURST as usize, "the burst, then nothing more at once");
        assert_eq!(b.waiting(), QUEUE, "the queue holds its bound");
        assert_eq!(b.dropped, 1000 - BURST as u64 - QUEUE as u64);
        assert!(b.admit(3001, 7, 1, t0), "another user's exec is matched at once");
        // A process that execs again and again waits once.
        let mut c = ExecBudget::default();
        for _ in 0..(BURST as usize) {
            assert!(c.admit(3000, 1, 1, t0));
        }
        for _ in 0..1000 {
            assert!(!c.admit(3000, 2, 1, t0));
        }
        assert_eq!((c.waiting(), c.dropped), (1, 0));
        // A second later the budget has refilled: the waiting ones are due, oldest first.
        let due = b.due(t0 + Duration::from_secs(1));
        assert_eq!(due.len(), QUEUE);
        assert_eq!(due[0].0, 10_000 + (1000 - QUEUE as i32));
        assert_eq!(b.waiting(), 0);
        assert!(b.due(t0 + Duration::from_secs(2)).is_empty());
    }
}
