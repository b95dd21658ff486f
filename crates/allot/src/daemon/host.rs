//! The processes and threads the daemon reads and acts on, behind one trait so the core
//! can be tested without root against a fake /proc (tests.rs). The real implementation
//! is a thin layer over allot-linux.
//!
//! Identity discipline (docs/trust.md): a process is always opened first (a pidfd), its
//! identity read next, and its liveness checked after the read and again just before and
//! just after any write that names its pid. While a pidfd reports the process alive, its
//! pid cannot have been reused, so everything read between two alive checks is its own.

use allot_linux::process::machine::{CpuTimes, Creds};
use allot_linux::process::pidfd::PidFd;

/// A process held by the daemon.
#[derive(Debug)]
pub struct Proc {
    /// Its pid.
    pub pid: i32,
    /// Its start time (clock ticks since boot): with the pid, its identity.
    pub start: u64,
    /// The pidfd (None only in the fake).
    pub fd: Option<PidFd>,
}

/// What the daemon reads of a process.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcInfo {
    /// Its credentials.
    pub creds: Creds,
    /// A kernel thread (never touched).
    pub kernel_thread: bool,
    /// Exited, not yet reaped.
    pub zombie: bool,
    /// Its nice.
    pub nice: i32,
    /// Its parent.
    pub ppid: i32,
    /// Its comm.
    pub comm: String,
    /// The thread all of this was read from: the pid, or a live thread of a group whose
    /// leader has exited while others run (the leader shows `Z`; the group lives).
    pub tid: i32,
}

/// What rules match on, besides the uid and the comm.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Facts {
    /// Real, effective and supplementary groups.
    pub groups: Vec<u32>,
    /// /proc/PID/exe ("" when unreadable).
    pub exe: String,
    /// The command line's first 4 KiB ("" when unreadable).
    pub cmdline: String,
}

/// A thread's scheduling counters.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ThreadSample {
    /// Time on the CPU, ns.
    pub run_ns: u64,
    /// Time runnable but waiting, ns.
    pub wait_ns: u64,
}

/// Why a process could not be opened.
#[derive(Debug, Clone, PartialEq)]
pub enum OpenError {
    /// No such process (or it exited).
    Gone,
    /// Something else, with the kernel's words.
    Other(String),
}

/// Everything the daemon does to processes and threads outside the cgroup tree.
pub trait Host {
    /// Opens a process: pidfd first, then its start time.
    fn open(&self, pid: i32) -> Result<Proc, OpenError>;
    /// Holds a process given as a pidfd (the caller's own, from the socket).
    fn hold(&self, fd: PidFd) -> Result<Proc, OpenError>;
    /// True while the process has not exited.
    fn alive(&self, p: &Proc) -> bool;
    /// Reads its identity (check `alive` afterwards before trusting it).
    fn info(&self, p: &Proc) -> Option<ProcInfo>;
    /// Its command line now, as the kernel has it (at most its first 4 KiB).
    fn cmdline(&self, pid: i32) -> Option<String>;
    /// What rules match on, read from thread `tid` of process `pid` ([`ProcInfo::tid`]):
    /// its groups, its executable and its command line (each bounded in bytes).
    fn facts(&self, pid: i32, tid: i32) -> Facts;
    /// Its children (of every thread), from /proc/PID/task/TID/children.
    fn children(&self, pid: i32) -> Vec<i32>;
    /// Every process id (a /proc scan).
    fn pids(&self) -> Vec<i32>;
    /// One stat(2) of /proc/PID: its owner (the effective uid, or root while it is not
    /// dumpable) and inode (a new inode: a new process, or the old one looked up afresh).
    fn quick(&self, pid: i32) -> Option<(u32, u64)>;
    /// The start time of whatever process has `pid` now.
    fn start_of(&self, pid: i32) -> Option<u64>;
    /// A thread's scheduling counters.
    fn thread(&self, tid: i32) -> Option<ThreadSample>;
    /// The nice of a process (its thread-group leader).
    fn nice(&self, pid: i32) -> Option<i32>;
    /// The CPUs a thread may run on.
    fn affinity(&self, tid: i32) -> Vec<usize>;
    /// A fair thread's slice, ns (None: not a fair thread, or gone).
    fn slice(&self, tid: i32) -> Option<u64>;
    /// Sets a fair thread's slice.
    fn set_slice(&self, tid: i32, ns: u64) -> Result<(), String>;
    /// CPU time since boot.
    fn cpu_times(&self) -> Option<CpuTimes>;
    /// The thread ids of a process (/proc/PID/task).
    fn tids(&self, pid: i32) -> Vec<i32>;
    /// The start time of thread `tid` of process `pid` (None: no such thread of it now).
    fn task_start(&self, pid: i32, tid: i32) -> Option<u64>;
    /// A fair thread's policy and nice (None: real-time, deadline, or gone).
    fn policy(&self, tid: i32) -> Option<(u32, i32)>;
    /// Sets a fair thread's policy and nice, keeping its slice (a real-time one is left).
    fn set_policy(&self, tid: i32, policy: u32, nice: i32) -> Result<(), String>;
    /// The daemon's own pid.
    fn me(&self) -> i32;
    /// Sends a signal through the process's pidfd (never by number); false when it could
    /// not be sent (no pidfd, or the process is gone).
    fn signal(&self, p: &Proc, sig: i32) -> bool {
        p.fd.as_ref().is_some_and(|f| f.signal(sig).is_ok())
    }
}

/// The real host.
#[derive(Debug, Default)]
pub struct Linux {
    /// /proc/stat, kept open: read every tick while jobs run.
    proc_stat: allot_linux::reread::Rereader,
}

impl Host for Linux {
    fn open(&self, pid: i32) -> Result<Proc, OpenError> {
        let fd = PidFd::open(pid).map_err(|e| if e.is_gone() { OpenError::Gone } else { OpenError::Other(e.to_string()) })?;
        let st = allot_linux::process::procfs::stat(pid).map_err(|_| OpenError::Gone)?;
        let p = Proc { pid, start: st.starttime, fd: Some(fd) };
        // Alive after the read: the start time read was this process's.
        if !self.alive(&p) {
            return Err(OpenError::Gone);
        }
        Ok(p)
    }
    fn hold(&self, fd: PidFd) -> Result<Proc, OpenError> {
        let pid = fd.pid();
        let st = allot_linux::process::procfs::stat(pid).map_err(|_| OpenError::Gone)?;
        let p = Proc { pid, start: st.starttime, fd: Some(fd) };
        if !self.alive(&p) {
            return Err(OpenError::Gone);
        }
        Ok(p)
    }
    fn alive(&self, p: &Proc) -> bool {
        p.fd.as_ref().is_some_and(|f| f.alive())
    }
    fn info(&self, p: &Proc) -> Option<ProcInfo> {
        use allot_linux::process::procfs;
        let st = procfs::stat(p.pid).ok()?;
        if st.starttime != p.start {
            return None;
        }
        // A leader that exited while other threads run: the group lives on, and a live
        // thread's credentials and name are the group's (the leader's are as it left them).
        let live = if st.exited() && st.num_threads > 1 { procfs::live_thread(p.pid) } else { None };
        let tid = live.unwrap_or(p.pid);
        let dir = procfs::task_dir(p.pid, tid);
        let tst = if live.is_some() { procfs::parse_stat(&dir.join("stat"), &allot_linux::read(dir.join("stat")).ok()?).ok()? } else { st.clone() };
        let creds = allot_linux::process::machine::creds_at(&dir).ok()?;
        Some(ProcInfo { creds, kernel_thread: st.is_kernel_thread(), zombie: tst.exited(), nice: st.nice, ppid: st.ppid, comm: tst.comm, tid })
    }
    fn cmdline(&self, pid: i32) -> Option<String> {
        allot_linux::process::procfs::cmdline(pid).ok()
    }
    fn facts(&self, pid: i32, tid: i32) -> Facts {
        let dir = allot_linux::process::procfs::task_dir(pid, tid);
        Facts {
            groups: allot_linux::process::machine::groups_at(&dir).unwrap_or_default(),
            exe: allot_linux::process::procfs::exe_at(&dir).unwrap_or_default(),
            cmdline: allot_linux::process::procfs::cmdline_at(&dir).unwrap_or_default(),
        }
    }
    fn children(&self, pid: i32) -> Vec<i32> {
        let Ok(tids) = allot_linux::process::procfs::tids(pid) else { return vec![] };
        tids.iter()
            .filter_map(|t| std::fs::read_to_string(format!("/proc/{pid}/task/{t}/children")).ok())
            .flat_map(|s| s.split_whitespace().filter_map(|x| x.parse().ok()).collect::<Vec<i32>>())
            .collect()
    }
    fn pids(&self) -> Vec<i32> {
        allot_linux::process::procfs::pids().unwrap_or_default()
    }
    fn quick(&self, pid: i32) -> Option<(u32, u64)> {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(format!("/proc/{pid}")).ok().map(|m| (m.uid(), m.ino()))
    }
    fn start_of(&self, pid: i32) -> Option<u64> {
        allot_linux::process::procfs::stat(pid).ok().map(|s| s.starttime)
    }
    fn thread(&self, tid: i32) -> Option<ThreadSample> {
        let s = allot_linux::process::procfs::schedstat_at(format!("/proc/{tid}/schedstat")).ok()?;
        Some(ThreadSample { run_ns: s.run_ns, wait_ns: s.wait_ns })
    }
    fn nice(&self, pid: i32) -> Option<i32> {
        allot_linux::process::sched::nice(pid).ok()
    }
    fn affinity(&self, tid: i32) -> Vec<usize> {
        allot_linux::process::sched::get_affinity(tid).unwrap_or_default()
    }
    fn slice(&self, tid: i32) -> Option<u64> {
        let a = allot_linux::process::sched::get(tid).ok()?;
        (a.sched_policy == allot_linux::process::sched::SCHED_OTHER || a.sched_policy == allot_linux::process::sched::SCHED_BATCH)
            .then_some(a.sched_runtime)
    }
    fn set_slice(&self, tid: i32, ns: u64) -> Result<(), String> {
        allot_linux::process::sched::set_slice(tid, ns).map_err(|e| e.to_string())
    }
    fn cpu_times(&self) -> Option<CpuTimes> {
        allot_linux::process::machine::cpu_times_from(&self.proc_stat).ok()
    }
    fn tids(&self, pid: i32) -> Vec<i32> {
        allot_linux::process::procfs::tids(pid).unwrap_or_default()
    }
    fn task_start(&self, pid: i32, tid: i32) -> Option<u64> {
        let p = allot_linux::process::procfs::task_dir(pid, tid).join("stat");
        allot_linux::process::procfs::parse_stat(&p, &allot_linux::read(&p).ok()?).ok().map(|s| s.starttime)
    }
    fn policy(&self, tid: i32) -> Option<(u32, i32)> {
        use allot_linux::process::sched::{SCHED_BATCH, SCHED_IDLE, SCHED_OTHER};
        let a = allot_linux::process::sched::get(tid).ok()?;
        matches!(a.sched_policy, SCHED_OTHER | SCHED_BATCH | SCHED_IDLE).then_some((a.sched_policy, a.sched_nice))
    }
    fn set_policy(&self, tid: i32, policy: u32, nice: i32) -> Result<(), String> {
        match allot_linux::process::sched::set_fair_policy(tid, policy, nice) {
            Ok(true) => Ok(()),
            Ok(false) => Err(format!("thread {tid} is real-time: left as it is")),
            Err(e) => Err(e.to_string()),
        }
    }
    fn me(&self) -> i32 {
        std::process::id() as i32
    }
}
