//! Requests waiting for the loop, served fairly: one queue per caller, taken in turn,
//! root's first. A user with sixteen connections looping `show` then holds the loop for
//! at most one of their requests at a time, never for all sixteen ahead of someone else's
//! (docs/trust.md, "Cost").
//!
//! A request is either carried out and answered, or never carried out: its connection
//! thread gives up waiting only by claiming it first ([`Claim::abandon`]), and the loop
//! carries out only what it claims ([`Claim::take`]).

use super::trust::Peer;
use crate::proto::{Reply, Request};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;

const WAITING: u8 = 0;
const TAKEN: u8 = 1;
const ABANDONED: u8 = 2;

/// Who decides a request's fate: the loop (takes it) or its connection thread (gives up).
#[derive(Debug, Default)]
pub struct Claim(AtomicU8);

impl Claim {
    /// The loop: true if the request is still wanted; from then on it will be answered.
    pub fn take(&self) -> bool {
        self.0.compare_exchange(WAITING, TAKEN, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }
    /// The connection thread: true if the loop had not taken it, which now never will.
    pub fn abandon(&self) -> bool {
        self.0.compare_exchange(WAITING, ABANDONED, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }
}

/// A request from a connection thread.
pub struct Pending {
    /// Who is asking.
    pub peer: Peer,
    /// What.
    pub req: Request,
    /// The reply goes here.
    pub reply: Sender<Reply>,
    /// Whether it is still wanted.
    pub claim: Arc<Claim>,
}

/// Requests by caller, served in turn.
#[derive(Default)]
pub struct Queue {
    by_key: HashMap<u32, VecDeque<Pending>>,
    turn: VecDeque<u32>,
}

impl Queue {
    /// Queues a request under `key` (the caller's budget: limits::bucket).
    pub fn push(&mut self, key: u32, p: Pending) {
        let q = self.by_key.entry(key).or_default();
        if q.is_empty() && key != 0 {
            self.turn.push_back(key);
        }
        q.push_back(p);
    }

    /// The next request: root's while it has any, then one of each other caller's in turn.
    pub fn pop(&mut self) -> Option<Pending> {
        if let Some(p) = self.take_from(0) {
            return Some(p);
        }
        let key = self.turn.pop_front()?;
        let p = self.take_from(key);
        if self.by_key.contains_key(&key) {
            self.turn.push_back(key);
        }
        p
    }

    fn take_from(&mut self, key: u32) -> Option<Pending> {
        let q = self.by_key.get_mut(&key)?;
        let p = q.pop_front();
        if q.is_empty() {
            self.by_key.remove(&key);
        }
        p
    }

    /// Nothing waits.
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(uid: u32, tag: &str) -> Pending {
        let (reply, _) = std::sync::mpsc::channel();
        let peer = Peer { uid, gid: uid, groups: vec![], pid: 1, caller: None };
        Pending { peer, req: Request::Show { user: Some(tag.into()) }, reply, claim: Arc::default() }
    }

    fn tag(p: Pending) -> (u32, String) {
        match p.req {
            Request::Show { user } => (p.peer.uid, user.unwrap_or_default()),
            _ => unreachable!(),
        }
    }

    #[test]
    fn callers_take_turns_and_root_goes_first() {
        let mut q = Queue::default();
        for i in 0..16 {
            q.push(2902, pending(2902, &format!("flood{i}")));
        }
        q.push(2901, pending(2901, "run"));
        q.push(0, pending(0, "status"));
        let order: Vec<(u32, String)> = std::iter::from_fn(|| q.pop()).map(tag).take(4).collect();
        assert_eq!(order[0], (0, "status".into()), "root's request first, whatever is queued");
        assert_eq!(order[1], (2902, "flood0".into()));
        assert_eq!(order[2], (2901, "run".into()), "another user waits for one of the flood's requests, not sixteen");
        assert_eq!(order[3], (2902, "flood1".into()), "a caller's own requests stay in order");
        assert!(!q.is_empty());
        while q.pop().is_some() {}
        assert!(q.is_empty());
    }

    #[test]
    fn a_request_is_taken_or_abandoned_never_both() {
        let c = Claim::default();
        assert!(c.take());
        assert!(!c.abandon(), "taken: the connection thread waits for the answer");
        let c = Claim::default();
        assert!(c.abandon());
        assert!(!c.take(), "abandoned: the loop never carries it out");
    }
}
