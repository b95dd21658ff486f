//! What allot knows and did of login sessions: their scopes and threads as read, the
//! processes a rule reached, the plan's part for them. A leaf the core holds without
//! importing sessions/mod.rs (whose impl Daemon imports the core).

use allot_model::plan::{JobPlan, Usage};
use allot_model::session::{SessionIn, TaskAttrs};
use allot_model::usage::BoostWindow;
use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

/// A thread's scheduling policy and nice.
pub(super) type Attrs = (u32, i32);

/// What a rule did to one process.
#[derive(Debug, Clone)]
pub struct Ruled {
    /// The process's start time: with its pid, its identity.
    pub(super) start: u64,
    /// The rule, for the log and `explain`.
    pub rule: String,
    pub(super) attrs: TaskAttrs,
    /// Per thread: (tid, its start time, its policy and nice before, what was set).
    pub(super) tasks: Vec<(i32, u64, Attrs, Attrs)>,
}

/// One scope, as read.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ScopeSample {
    /// Its user.
    pub uid: u32,
    /// Its unit (`session-3.scope`).
    pub name: String,
    /// CPU time used, ns.
    pub usage_ns: u64,
    /// Its threads; None when its usage did not move since the last read (none of them
    /// ran, so none is read: an idle session costs one `cpu.stat` read a tick).
    pub threads: Option<Vec<i32>>,
    /// Threads already read this tick (a v1 scope's, for its sum): not read again.
    pub read: HashMap<i32, crate::daemon::host::ThreadSample>,
    /// Threads listed past its part of the tick's budget, not read this tick: those known
    /// keep their last reading, so a later tick's read counts the time between too.
    pub skipped: Vec<i32>,
}

#[derive(Debug)]
pub(super) struct Scope {
    pub(super) uid: u32,
    pub(super) last: Option<(u64, Instant)>,
    pub(super) window: BoostWindow,
    pub(super) usage: Option<Usage>,
    pub(super) runnable: u32,
    pub(super) waiting: bool,
    /// The CPUs its threads that ran may use (empty: all).
    pub(super) cpus: Vec<usize>,
}

/// One session thread.
#[derive(Debug, Clone)]
pub struct Task {
    /// Its user.
    pub uid: u32,
    /// Its scope's unit.
    pub scope: String,
    /// Its start time: with the tid, its identity.
    pub start: u64,
    pub(super) last: Option<(u64, u64, Instant)>,
    pub(super) window: BoostWindow,
    /// Its usage over the boost window and the last tick.
    pub usage: Option<Usage>,
    /// Boosted: its slice before (None: not boosted now).
    pub boosted_from: Option<u64>,
    /// The boost rule's branch at the last plan (None: not planned yet).
    pub boost: Option<allot_model::plan::Boost>,
    /// Its nice when it last ran or waited for CPU.
    pub(super) nice: i32,
    pub(super) seen: bool,
    /// Ticks in a row it was listed and not read (past its scope's part of the budget): its
    /// id is checked against its start time when it is read again, before its time counts.
    pub(super) skipped: u32,
}

impl Task {
    /// A task first seen (or its id reused): nothing measured, nothing done to it yet.
    pub(super) fn new(uid: u32, scope: &str, start: u64) -> Self {
        Task {
            uid,
            scope: scope.into(),
            start,
            last: None,
            window: BoostWindow::default(),
            usage: None,
            boosted_from: None,
            boost: None,
            nice: 0,
            seen: false,
            skipped: 0,
        }
    }
}

/// What allot knows and did of login sessions.
#[derive(Debug, Default)]
pub struct Sessions {
    pub(super) scopes: BTreeMap<String, Scope>,
    /// Per thread id.
    pub tasks: HashMap<i32, Task>,
    /// Processes a rule reached (rules.rs), per pid.
    pub(super) ruled: HashMap<i32, Ruled>,
    /// Background jobs made for sessions' processes (moved.rs): per (uid, rule, scope).
    pub(super) moved: HashMap<(u32, String, String), super::super::registry::JobId>,
    /// CPU time all session scopes used since the daemon began to count, ns: never
    /// decreases (a closed session's time stays in it), so load outside allot is the
    /// machine's busy time less allot's and this.
    pub used_ns: u64,
    /// The last plan of each user's sessions, and the slice a boosted task gets.
    pub planned: BTreeMap<u32, JobPlan>,
    /// The slice boosted session tasks have now (None: no boost by slice).
    pub slice_ns: Option<u64>,
    /// Per uid: the weight the plan gives the user's currency when it is not the funding
    /// (nice emulation: the user's running session threads are all niced).
    pub(super) weights: BTreeMap<u32, u32>,
    /// Threads past [`super::MAX_TASKS`] were left out (logged once).
    pub(super) capped_logged: bool,
    /// Per scope with more threads than its part of the budget: where the next tick's
    /// reads of its thread list begin (they go round it, [`super::MAX_KEPT`]).
    pub(super) cursors: HashMap<String, usize>,
    /// Turns the reads' division each tick ([`allot_model::session::fair_division_turn`]).
    pub(super) turn: usize,
    /// The session scopes as last listed, and when ([`super::SCOPE_LIST_GAP`]).
    pub(super) listed: Option<(Vec<allot_linux::cgroup::sessions::SessionScope>, Instant)>,
    /// Their `cpu.stat` files, kept open and read again with pread.
    pub(super) files: allot_linux::reread::Rereader,
}

impl Sessions {
    /// Some session used CPU over the boost window: the plan may change.
    pub fn busy(&self) -> bool {
        self.scopes.values().any(|s| s.usage.is_some_and(|u| u.active()))
    }

    /// One claimant per user with an active session, its currency not yet known.
    pub fn claims(&self) -> Vec<(u32, SessionIn)> {
        let mut by_uid: BTreeMap<u32, (SessionIn, bool)> = BTreeMap::new();
        // The lowest nice of each user's threads that used CPU over the boost window (a
        // tick in which a niced thread got no CPU does not make its session nice 0).
        let mut nice: BTreeMap<u32, i32> = BTreeMap::new();
        for t in self.tasks.values().filter(|t| t.usage.is_some_and(|u| u.active())) {
            let n = nice.entry(t.uid).or_insert(t.nice);
            *n = (*n).min(t.nice);
        }
        for s in self.scopes.values() {
            let Some(u) = s.usage else { continue };
            let (e, all) = by_uid.entry(s.uid).or_insert_with(|| (SessionIn { usage: Some(Usage::default()), ..Default::default() }, false));
            let t = e.usage.get_or_insert_with(Usage::default);
            t.window += u.window;
            t.last += u.last;
            e.runnable += s.runnable;
            e.waiting |= s.waiting;
            if s.runnable > 0 {
                *all |= s.cpus.is_empty();
                e.cpus.extend(&s.cpus);
            }
        }
        by_uid
            .into_iter()
            .filter(|(_, (e, _))| e.usage.is_some_and(|u| u.active()))
            .map(|(uid, (mut e, all))| {
                e.cpus.sort_unstable();
                e.cpus.dedup();
                if all {
                    e.cpus.clear();
                }
                e.nice = nice.get(&uid).copied().unwrap_or(0);
                (uid, e)
            })
            .collect()
    }
}
