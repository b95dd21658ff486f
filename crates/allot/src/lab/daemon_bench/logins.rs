//! Placement latency, measured from outside the daemon: start a process as a login would
//! (forked by a root process that sits in the shelter, then setgroups/setgid/setuid, then
//! exec: sshd's and su's order; allot-measure's launcher), and time it from its setuid
//! (when it becomes the user's, which the kernel reports to the daemon) to the daemon's
//! write of its pid into its job's `cgroup.procs`.
//!
//! The time from the fork to the setuid is reported apart (`start_*`): it is the
//! machine's, before anything tells the daemon there is a login. On the development
//! machine a fork waits up to 160 ms whenever 10,000 processes exist, allot or not
//! (docs/results/scale.md says how that was found).
//!
//! The write is seen with inotify (the kernel reports every write(2) to a cgroup file, as
//! the daemon's own reconciliation relies on), timestamped by a thread that does nothing
//! else; the benchmark then confirms from /proc/PID/cgroup that the process is in the job.
//! Resolution: the watcher thread's wakeup (tens of µs on an idle CPU, more when the
//! machine is busy, always late, never early). Should the event not come, /proc/PID/cgroup
//! is polled every millisecond and the latency is the poll that saw the move (counted as
//! `by_poll`). Start times from /proc/PID/stat would only resolve 10 ms (USER_HZ).
//! Logins are timed one at a time with 10–40 ms between them, so the daemon meets each
//! one alone, as it meets logins on a real machine.

use super::meter::Places;
use allot_linux::cgroup::inotify::{Inotify, MODIFY};
use allot_measure::harness::PrivateDaemon;
use allot_measure::launcher::Launcher;
use anyhow::Context;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use allot_measure::launcher::dies_with_us;

/// Writes to `cgroup.procs` in watched job directories: (watch, when seen).
struct Watch {
    ino: Arc<Inotify>,
    rx: Receiver<(i32, Instant)>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watch {
    fn new() -> anyhow::Result<Self> {
        let ino = Arc::new(Inotify::new()?);
        let (tx, rx) = channel();
        let stop = Arc::new(AtomicBool::new(false));
        let (i, s) = (ino.clone(), stop.clone());
        let thread = std::thread::Builder::new().name("bench-inotify".into()).spawn(move || {
            let mut evs = vec![];
            while !s.load(Ordering::Relaxed) {
                let mut pfd = libc::pollfd { fd: i.as_raw_fd(), events: libc::POLLIN, revents: 0 };
                // SAFETY: one valid pollfd.
                if unsafe { libc::poll(&mut pfd, 1, 100) } <= 0 {
                    continue;
                }
                evs.clear();
                if i.read(&mut evs).is_err() {
                    return;
                }
                let now = Instant::now();
                for e in &evs {
                    if e.mask & MODIFY != 0 && e.name == "cgroup.procs" && tx.send((e.wd, now)).is_err() {
                        return;
                    }
                }
            }
        })?;
        Ok(Self { ino, rx, stop, thread: Some(thread) })
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// How a latency was seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum By {
    /// The inotify event of the daemon's write.
    Event,
    /// A poll of /proc/PID/cgroup (the event did not come first).
    Poll,
}

/// Placement latencies of a set of logins, ms.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Latencies {
    /// Logins timed.
    pub n: usize,
    /// Median, ms.
    pub p50_ms: f64,
    /// 90th percentile, ms.
    pub p90_ms: f64,
    /// 99th percentile (nearest rank), ms.
    pub p99_ms: f64,
    /// Worst, ms.
    pub max_ms: f64,
    /// Logins not in their job when the timeout ended (not in the percentiles, which then
    /// do not hold: a check fails).
    pub missed: usize,
    /// Seen by polling rather than by the event.
    pub by_poll: usize,
    /// Every latency in the order the logins started, ms.
    pub all_ms: Vec<f64>,
    /// From the fork to the setuid (the machine's, not the daemon's): median, ms.
    pub start_p50_ms: f64,
    /// From the fork to the setuid: 99th percentile, ms.
    pub start_p99_ms: f64,
    /// From the fork to the setuid: worst, ms.
    pub start_max_ms: f64,
    /// From the fork to the setuid of every login, ms.
    pub all_start_ms: Vec<f64>,
}

impl Latencies {
    fn of(v: Vec<f64>, starts: Vec<f64>, missed: usize, by_poll: usize) -> Self {
        let p = allot_measure::report::percentiles(&v);
        let s = allot_measure::report::percentiles(&starts);
        Self {
            n: v.len(),
            p50_ms: p.p50,
            p90_ms: p.p90,
            p99_ms: p.p99,
            max_ms: p.max,
            missed,
            by_poll,
            all_ms: v,
            start_p50_ms: s.p50,
            start_p99_ms: s.p99,
            start_max_ms: s.max,
            all_start_ms: starts,
        }
    }
}

/// A launcher in the daemon's shelter (its logins' source cgroup) that dies with us.
pub fn launcher(d: &PrivateDaemon, exe: &std::path::Path) -> anyhow::Result<Launcher> {
    let mut c = dies_with_us(d.shelter.command(exe, None));
    c.arg("launcher");
    Launcher::start(c)
}

/// Starts logins and times their placement.
pub struct LoginTimer<'a> {
    places: &'a Places,
    watch: Watch,
    /// uid → (its default job, relative to allot's root; the watch on its directory).
    jobs: HashMap<u32, (String, i32)>,
    /// Starts the logins (they are killed when it is dropped).
    launcher: Launcher,
    /// The logins started: (pid, uid).
    pub started: Vec<(u32, u32)>,
    seed: u64,
}

impl<'a> LoginTimer<'a> {
    /// Watches the default job of each `(uid, a pid already placed there)`.
    pub fn new(d: &PrivateDaemon, exe: &std::path::Path, places: &'a Places, users: &[(u32, u32)]) -> anyhow::Result<Self> {
        let watch = Watch::new()?;
        let mut jobs = HashMap::new();
        for &(uid, pid) in users {
            let rel = places.job_of(pid).with_context(|| format!("process {pid} of uid {uid} is not in a job: cannot find the job to watch"))?;
            let wd = watch.ino.add(&places.dir(&rel), MODIFY)?;
            jobs.insert(uid, (rel, wd));
        }
        Ok(Self { places, watch, jobs, launcher: launcher(d, exe)?, started: vec![], seed: 0x9e37_79b9_7f4a_7c15 })
    }

    /// Times `n` logins (or as many as start before `until`), round-robin over the
    /// watched users, each allowed `timeout`.
    pub fn time(&mut self, n: usize, until: Option<Instant>, timeout: Duration) -> anyhow::Result<Latencies> {
        let mut uids: Vec<u32> = self.jobs.keys().copied().collect();
        uids.sort_unstable();
        let (mut v, mut starts, mut missed, mut by_poll) = (vec![], vec![], 0, 0);
        for i in 0..n {
            if until.is_some_and(|u| Instant::now() >= u) {
                break;
            }
            let (placed, start_ms) = self.one(uids[i % uids.len()], timeout)?;
            starts.push(start_ms);
            match placed {
                Some((ms, by)) => {
                    v.push(ms);
                    by_poll += usize::from(by == By::Poll);
                }
                None => missed += 1,
            }
        }
        Ok(Latencies::of(v, starts, missed, by_poll))
    }

    /// One login as `uid`: its latency in ms (None if it was not placed in time), and the
    /// time from its fork to its setuid, ms.
    fn one(&mut self, uid: u32, timeout: Duration) -> anyhow::Result<(Option<(f64, By)>, f64)> {
        let (rel, wd) = self.jobs.get(&uid).cloned().context("uid not watched")?;
        // A gap of 10–40 ms (xorshift), so logins do not fall in step with the daemon's tick;
        // it also lets a late event of the previous login arrive before it is drained.
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        std::thread::sleep(Duration::from_millis(10 + self.seed % 31));
        while self.watch.rx.try_recv().is_ok() {}
        let l = self.launcher.launch(uid, &["sleep", "600"]).context("start a login process")?;
        let (pid, t0) = (l.pid, l.setuid);
        let start_ms = l.setuid.saturating_duration_since(l.fork).as_secs_f64() * 1e3;
        self.started.push((pid, uid));
        let mut event: Option<Instant> = None;
        loop {
            while let Ok((w, t)) = self.watch.rx.try_recv() {
                if w == wd && event.is_none() {
                    event = Some(t);
                }
            }
            let now = Instant::now();
            if self.places.job_of(pid).as_deref() == Some(rel.as_str()) {
                let (at, by) = match event {
                    Some(e) if e <= now => (e, By::Event),
                    _ => (now, By::Poll),
                };
                return Ok((Some((at.saturating_duration_since(t0).as_secs_f64() * 1e3, by)), start_ms));
            }
            if now.saturating_duration_since(t0) > timeout {
                return Ok((None, start_ms));
            }
            match self.watch.rx.recv_timeout(Duration::from_millis(1)) {
                Ok((w, t)) if w == wd && event.is_none() => event = Some(t),
                Ok(_) | Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => anyhow::bail!("the inotify watcher stopped"),
            }
        }
    }
}
