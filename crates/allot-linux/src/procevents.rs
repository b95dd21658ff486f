//! Process events from the kernel's proc connector (netlink `NETLINK_CONNECTOR`,
//! `CN_IDX_PROC`, `linux/cn_proc.h`): forks, execs, uid changes and exits of processes
//! as they happen, instead of finding them by scanning /proc.
//!
//! # Use
//!
//! ```no_run
//! use allot_linux::procevents::{Kinds, Listener, ProcEvent};
//! # fn rescan() {}
//! # fn handle(_: ProcEvent) {}
//! let mut events = Listener::open(Kinds::UID | Kinds::EXEC)?;
//! rescan(); // after open: every change from here on is reported
//! let mut batch = Vec::new();
//! loop {
//!     batch.clear();
//!     events.recv(&mut batch)?; // blocks; at most 256 datagrams' worth
//!     let mut lost = false;
//!     for &e in &batch {
//!         match e {
//!             ProcEvent::Lost => lost = true, // the kernel dropped events
//!             e => handle(e),
//!         }
//!     }
//!     if lost {
//!         rescan();
//!     }
//!     // A lone event is seen at once; a storm is read in batches (see "Cost").
//!     std::thread::sleep(std::time::Duration::from_millis(20));
//! }
//! # Ok::<(), allot_linux::Error>(())
//! ```
//!
//! # What is reported, and what is not
//!
//! - Only processes (thread-group leaders). A new thread, a thread's exit and a
//!   thread's own uid change are dropped, in the kernel when the socket filter is on
//!   (the default), else here.
//! - A Uid event is sent whenever a task's real, effective, saved or filesystem uid
//!   changes (commit_creds in kernel/cred.c): the set*uid calls, and also the execve of
//!   a set-user-ID binary, whose Uid event (ruid unchanged, euid the file's owner)
//!   comes *before* its Exec event. A login (sshd, cron, su) is a Uid event, then an
//!   Exec. A change of only the saved or filesystem uid gives a Uid event whose ruid
//!   and euid did not change.
//! - The kernel numbers pids in the initial pid namespace, and answers subscriptions
//!   only from processes in the initial pid and user namespaces.
//! - A process's events arrive in the order they happened (each is queued on the
//!   socket by the process itself, synchronously); events of unrelated processes on
//!   other CPUs may interleave in any order.
//! - Events are lost when the receive buffer fills. The kernel says so once
//!   (`ENOBUFS`), reported as [`ProcEvent::Lost`]; the listener keeps going, and the
//!   caller must rescan /proc, since anything may have happened meanwhile. Lost says
//!   nothing about *which* events are missing, and usually comes first in its batch,
//!   before events queued before the loss: handle the batch, then rescan.
//!
//! # Cost
//!
//! Measured with `examples/procevents_storm` (2 CPUs shared with other users, Linux
//! 6.18, 8 MiB buffer; ranges over three runs). Reading costs about 1 µs per event when
//! events are read in batches, 11–18 µs when the reader wakes for each one: the wakeup
//! is the cost, not the parsing. Hence the 20 ms pause above.
//!
//! | storm (5,000/s asked; 2,100–5,000/s achieved) | listener | its CPU, % of one |
//! |---|---|---|
//! | fork + exit (Fork and Exit: up to 10,000 events/s) | all kinds, woken per batch | 10–13.5 |
//! | | all kinds, 20 ms pause after each batch | 0.8–1.2 |
//! | | all kinds, drained every 250 ms | 0.5–1.3 |
//! | | UID and EXEC only (the filter drops the storm) | 0.04–0.4 |
//! | thread start + exit | all kinds, socket filter off | 7.5–13.4 |
//! | | all kinds, socket filter on | 0.02–0.4 |
//! | none: other users' processes (0–800 events/s) | any | 0.02–1.6, by their rate |
//!
//! No event was lost in these runs. The processes that fork pay for filtering and
//! queueing (the filter runs in their context); it was not measurable above the noise
//! of the fork itself (120–230 µs per fork, exit and wait on that machine).
//!
//! # Kernel versions
//!
//! Before Linux 6.6 subscribing needs CAP_NET_ADMIN (binding to the multicast group is
//! refused with EPERM); since 6.6 anyone may listen. The kernel keeps one global count
//! of subscribers before 6.6, so a listener must unsubscribe exactly once: this one
//! does, on drop, and only if its subscription was acknowledged. Several listeners may
//! run at once, in one process or many.

mod filter;
mod listener;
mod wire;
#[cfg(test)]
mod wire_props;

pub use listener::{Listener, Refilter};

/// For the fuzz target alone (fuzz/, built with `--cfg fuzzing`): parses one datagram as
/// the listener does and returns how many netlink messages it held.
#[cfg(fuzzing)]
pub fn fuzz_datagram(datagram: &[u8]) -> usize {
    let mut n = 0;
    wire::parse_datagram(datagram, |m| {
        std::hint::black_box(m);
        n += 1;
    });
    n
}

/// Something that happened to a process. Pids are thread-group ids, as /proc shows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProcEvent {
    /// A new process (new threads are not reported). `parent` is the process that
    /// forked it (its real parent at fork time; with CLONE_PARENT, the forker's parent).
    Fork {
        /// The parent process.
        parent: i32,
        /// The new process.
        child: i32,
    },
    /// The process called execve (successfully). A set-user-ID binary's new euid was
    /// reported just before, as a [`ProcEvent::Uid`]. When a thread other than the
    /// leader execs, the kernel first reports the old leader's [`ProcEvent::Exit`], then
    /// this Exec, with the same pid: the process lives on.
    Exec {
        /// The process.
        pid: i32,
    },
    /// The process's uids changed (a set*uid call, or the execve of a set-user-ID
    /// binary, reported before its Exec). Reported for the thread-group leader: its
    /// credentials are what /proc/PID/status shows; the libc wrappers change every
    /// thread's, the raw system call only the caller's.
    Uid {
        /// The process.
        pid: i32,
        /// The real uid after the change.
        ruid: u32,
        /// The effective uid after the change.
        euid: u32,
    },
    /// The process's leader thread exited: normally the process has ended (its other
    /// threads are being killed). A leader that calls pthread_exit while other threads
    /// run is reported here too, though the process lives on.
    Exit {
        /// The process.
        pid: i32,
    },
    /// The kernel dropped events because the receive buffer was full: rescan.
    Lost,
}

impl ProcEvent {
    /// The process the event is about (the child of a Fork); None for Lost.
    pub fn pid(&self) -> Option<i32> {
        match *self {
            ProcEvent::Fork { child: pid, .. } | ProcEvent::Exec { pid } | ProcEvent::Uid { pid, .. } | ProcEvent::Exit { pid } => Some(pid),
            ProcEvent::Lost => None,
        }
    }

    /// The kind of the event ([`Kinds::NONE`] for Lost, which is always reported).
    pub fn kind(&self) -> Kinds {
        match self {
            ProcEvent::Fork { .. } => Kinds::FORK,
            ProcEvent::Exec { .. } => Kinds::EXEC,
            ProcEvent::Uid { .. } => Kinds::UID,
            ProcEvent::Exit { .. } => Kinds::EXIT,
            ProcEvent::Lost => Kinds::NONE,
        }
    }
}

/// A set of event kinds: `Kinds::UID | Kinds::EXEC`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Kinds(u8);

impl Kinds {
    /// No events (the listener then only reports Lost).
    pub const NONE: Kinds = Kinds(0);
    /// [`ProcEvent::Fork`].
    pub const FORK: Kinds = Kinds(1);
    /// [`ProcEvent::Exec`].
    pub const EXEC: Kinds = Kinds(2);
    /// [`ProcEvent::Uid`].
    pub const UID: Kinds = Kinds(4);
    /// [`ProcEvent::Exit`].
    pub const EXIT: Kinds = Kinds(8);
    /// Every kind.
    pub const ALL: Kinds = Kinds(15);

    /// True if every kind in `other` is in `self`.
    pub fn contains(self, other: Kinds) -> bool {
        self.0 & other.0 == other.0
    }
}

impl std::ops::BitOr for Kinds {
    type Output = Kinds;
    fn bitor(self, rhs: Kinds) -> Kinds {
        Kinds(self.0 | rhs.0)
    }
}

impl std::fmt::Debug for Kinds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = [(Kinds::FORK, "FORK"), (Kinds::EXEC, "EXEC"), (Kinds::UID, "UID"), (Kinds::EXIT, "EXIT")];
        let set: Vec<&str> = names.iter().filter(|(k, _)| self.contains(*k)).map(|&(_, n)| n).collect();
        if set.is_empty() {
            f.write_str("NONE")
        } else {
            f.write_str(&set.join(" | "))
        }
    }
}

/// How to open a [`Listener`]; [`Options::new`] gives the defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Options {
    /// The kinds to report.
    pub kinds: Kinds,
    /// The receive buffer, bytes, as the kernel counts it (SO_RCVBUFFORCE as root;
    /// otherwise SO_RCVBUF, which net.core.rmem_max caps). Each queued event is charged
    /// its whole socket buffer, about 830 bytes (measured on 6.18), so the default
    /// 8 MiB holds about 10,000 events: two seconds of a 2,500-forks/s storm (a Fork and
    /// an Exit each) with nothing read. Memory is used only while events wait.
    pub recv_buffer: usize,
    /// Attach the classic BPF socket filter (default true), so that unwanted kinds and
    /// thread events are dropped in the kernel instead of being read and discarded here.
    /// The reported events are the same either way; only the cost differs.
    pub socket_filter: bool,
}

impl Options {
    /// The defaults for these kinds: 8 MiB receive buffer, socket filter on.
    pub fn new(kinds: Kinds) -> Self {
        Options { kinds, recv_buffer: 8 << 20, socket_filter: true }
    }
}

/// Counters since the listener opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Stats {
    /// Datagrams read from the socket.
    pub datagrams: u64,
    /// Events reported (not counting Lost).
    pub events: u64,
    /// Times the kernel reported a full buffer (each gave one Lost).
    pub overflows: u64,
    /// Messages read but not reported: threads, unwanted kinds, subscription replies,
    /// other connectors, anything not sent by the kernel. Near zero with the socket filter.
    pub discarded: u64,
    /// Messages that did not parse (never expected from the kernel).
    pub malformed: u64,
}
