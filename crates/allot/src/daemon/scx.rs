//! The sched_ext backend's runner (`[scheduler] kind = "scx"`, docs/scx.md). The daemon
//! keeps its cgroup backend as it is (jobs stay cgroups, their weights and caps stay
//! written: the fallback needs nothing undone) and additionally runs allot's BPF
//! scheduler through its loader, `allot-scx serve`, a separate program under the GPL that
//! allot never links: the daemon writes it the job table (each job's cgroup and share,
//! flattened from the plan by `allot_model::flat`) on a pipe and reads its status lines.
//! When the loader leaves (the kernel ejected the scheduler, or it failed to load) the
//! runner says why, from the loader's last words, and the daemon runs on the cgroup
//! backend alone. Closing the pipe unloads it: the loader puts the jobs' threads back in
//! the fair class and detaches, so a daemon that dies takes the scheduler with it.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant, SystemTime};

/// Where the runner stands.
#[derive(Debug, Clone, PartialEq)]
pub enum State {
    /// Not asked for (`kind = "cgroup"`), or stopped.
    Off,
    /// Started; the loader has not said it loaded yet.
    Loading,
    /// The scheduler is attached ("partial" or "all": which tasks are its).
    Loaded {
        /// The loader's mode.
        mode: String,
        /// When.
        since: SystemTime,
    },
    /// It left without being asked: ejected by the kernel, or it never loaded.
    Fallen {
        /// When the daemon noticed.
        at: SystemTime,
        /// Why, in the kernel's or the loader's words.
        reason: String,
    },
}

/// What a poll found.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// The scheduler is attached.
    Loaded,
    /// It left; why.
    Fell(String),
}

/// A line from the loader, or the end of one of its two streams.
enum Line {
    Out(String),
    Err(String),
    Closed,
}

/// The loader's process and the pipes to it.
struct Loader {
    child: Child,
    /// Tables for the writer thread (which owns the loader's stdin, so a loader that stops
    /// reading never blocks the daemon); dropping it closes the pipe.
    tables: Option<Sender<String>>,
    lines: Receiver<Line>,
}

/// One job of the table the loader is sent: its cgroup directory, its share (base units,
/// flattened), its usage-rate cap in CPUs (held by the BPF side's sinbin), its entitlement
/// over the boost window (the BPF side boosts its wakeups while it used less than half of
/// it, allot_model::wake) and whether it is a background job.
#[derive(Debug, Clone, PartialEq)]
pub struct TableJob {
    /// The job's cgroup directory.
    pub dir: String,
    /// Its share in base units.
    pub share: u64,
    /// Its cap in CPUs, always held (the plan's cpu.max: a hard cap, or a held soft cap).
    pub cap: Option<f64>,
    /// Its currency's hard cap: the currency's directory name and CPUs, held for all the
    /// jobs naming it together (the loader's `currency-cap`).
    pub currency_cap: Option<(String, f64)>,
    /// It runs only when nothing else of allot's is runnable on the CPU.
    pub background: bool,
    /// Its entitlement over the boost window, ns (`allot_model::wake::entitlement_ns`; 0:
    /// its wakeups are not boosted).
    pub boost_ns: u64,
    /// Boosted while its use is below this, ns (`allot_model::wake::line_ns`: 0 the
    /// default line, half its entitlement; focus and `[policy] boost_below` move it).
    pub line_ns: u64,
}

impl TableJob {
    /// A job with a share only.
    pub fn new(dir: impl Into<String>, share: u64) -> Self {
        Self { dir: dir.into(), share, cap: None, currency_cap: None, background: false, boost_ns: 0, line_ns: 0 }
    }

    /// Its line: `job SHARE [cap=CPUS] [currency-cap=CURRENCY:CPUS] [boost=NS [line=NS]] [background]
    /// DIR` (crates/allot-scx/src/serve.rs).
    pub fn line(&self) -> String {
        let cap = self.cap.map_or(String::new(), |c| format!(" cap={c}"))
            + &self.currency_cap.as_ref().map_or(String::new(), |(n, c)| format!(" currency-cap={n}:{c}"));
        let boost = match (self.boost_ns, self.line_ns) {
            (0, _) => String::new(),
            (b, 0) => format!(" boost={b}"),
            (b, l) => format!(" boost={b} line={l}"),
        };
        let bg = if self.background { " background" } else { "" };
        format!("job {}{cap}{boost}{bg} {}\n", self.share, self.dir)
    }
}

/// The runner: the loader, what it was last sent and what it said.
pub struct Scx {
    loader: Option<Loader>,
    state: State,
    sent: Option<Vec<TableJob>>,
    ejections: u64,
    tables: u64,
    last_err: String,
    ejected: Option<String>,
    args: Vec<String>,
}

impl Default for Scx {
    fn default() -> Self {
        Self { loader: None, state: State::Off, sent: None, ejections: 0, tables: 0, last_err: String::new(), ejected: None, args: vec![] }
    }
}

fn reader(r: impl std::io::Read + Send + 'static, tx: Sender<Line>, err: bool) {
    let _ = std::thread::Builder::new().name("allot-scx-read".into()).spawn(move || {
        for l in BufReader::new(r).lines() {
            let Ok(l) = l else { break };
            if tx.send(if err { Line::Err(l) } else { Line::Out(l) }).is_err() {
                return;
            }
        }
        let _ = tx.send(Line::Closed);
    });
}

impl Scx {
    /// Starts `program` with `args` (the daemon: `allot-scx serve`). A program that cannot
    /// be started is a fall at once, with the reason.
    pub fn start(&mut self, program: &Path, args: &[&str]) {
        self.stop(Duration::from_secs(5));
        self.tables = 0;
        self.sent = None;
        self.last_err.clear();
        self.ejected = None;
        self.args = args.iter().map(|a| a.to_string()).collect();
        let spawned = Command::new(program).args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn();
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => {
                self.state = State::Fallen { at: SystemTime::now(), reason: format!("could not start {}: {e}", program.display()) };
                return;
            }
        };
        let (ltx, lines) = channel();
        reader(child.stdout.take().expect("piped"), ltx.clone(), false);
        reader(child.stderr.take().expect("piped"), ltx, true);
        let mut stdin = child.stdin.take().expect("piped");
        let (tx, rx) = channel::<String>();
        let _ = std::thread::Builder::new().name("allot-scx-write".into()).spawn(move || {
            for t in rx {
                if stdin.write_all(t.as_bytes()).and_then(|_| stdin.flush()).is_err() {
                    return;
                }
            }
        });
        self.loader = Some(Loader { child, tables: Some(tx), lines });
        self.state = State::Loading;
    }

    /// The arguments the loader was last started with.
    pub fn args(&self) -> &[String] {
        &self.args
    }

    /// Sends the job table if it differs from the last one sent. Returns whether it was sent.
    pub fn feed(&mut self, mut table: Vec<TableJob>) -> bool {
        table.sort_by(|a, b| a.dir.cmp(&b.dir));
        if self.sent.as_ref() == Some(&table) || !matches!(self.state, State::Loading | State::Loaded { .. }) {
            return false;
        }
        let Some(tx) = self.loader.as_ref().and_then(|l| l.tables.as_ref()) else { return false };
        let mut text = String::new();
        for j in &table {
            text.push_str(&j.line());
        }
        text.push_str("end\n");
        if tx.send(text).is_err() {
            return false;
        }
        self.sent = Some(table);
        true
    }

    /// Reads what the loader said and whether it is still there.
    pub fn poll(&mut self) -> Option<Change> {
        let mut change = None;
        while let Some(line) = self.loader.as_ref().and_then(|l| l.lines.try_recv().ok()) {
            change = self.heard(line).or(change);
        }
        // The loader says an ejection before it cleans up and exits: fall back at once.
        if let (Some(e), State::Loaded { .. }) = (&self.ejected, &self.state) {
            let reason = format!("ejected by the kernel: {e}");
            self.ejections += 1;
            self.state = State::Fallen { at: SystemTime::now(), reason: reason.clone() };
            change = Some(Change::Fell(reason));
        }
        let l = self.loader.as_mut()?;
        let exited = match l.child.try_wait() {
            Ok(Some(s)) => s,
            Ok(None) => return change,
            Err(e) => {
                self.last_err = format!("cannot watch the loader: {e}");
                let _ = l.child.kill();
                l.child.wait().ok()?
            }
        };
        let l = self.loader.take()?;
        if matches!(self.state, State::Fallen { .. }) {
            return change; // already said (the ejection line), now reaped
        }
        // Its last words: both streams to their end (bounded: a grandchild may hold them).
        let deadline = Instant::now() + Duration::from_millis(300);
        let mut open = 2;
        while open > 0 {
            match l.lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(Line::Closed) => open -= 1,
                Ok(line) => {
                    self.heard(line);
                }
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break,
            }
        }
        let reason = match (&self.ejected, self.state.clone()) {
            (Some(e), _) => format!("ejected by the kernel: {e}"),
            (None, State::Loading) if !self.last_err.is_empty() => format!("failed to load: {}", self.last_err),
            (None, State::Loading) => format!("the loader exited before loading ({exited})"),
            (None, _) if !self.last_err.is_empty() => format!("the loader exited ({exited}): {}", self.last_err),
            (None, _) => format!("the loader exited ({exited})"),
        };
        if matches!(self.state, State::Loaded { .. }) {
            self.ejections += 1;
        }
        self.state = State::Fallen { at: SystemTime::now(), reason: reason.clone() };
        Some(Change::Fell(reason))
    }

    fn heard(&mut self, line: Line) -> Option<Change> {
        match line {
            Line::Out(s) => {
                if let Some(mode) = s.strip_prefix("loaded allot_stride ") {
                    self.state = State::Loaded { mode: mode.trim().into(), since: SystemTime::now() };
                    return Some(Change::Loaded);
                } else if let Some(e) = s.strip_prefix("ejected ") {
                    self.ejected = Some(e.trim().into());
                } else if s.starts_with("table ") {
                    self.tables += 1;
                } else if s.starts_with("bad ") {
                    log::warn!("allot-scx: {s}");
                }
                None
            }
            Line::Err(s) if !s.trim().is_empty() => {
                log::warn!("allot-scx: {s}");
                self.last_err = s.trim().into();
                None
            }
            _ => None,
        }
    }

    /// Stops the loader: closes its pipe (it puts the jobs' threads back in the fair class
    /// and detaches), then SIGTERM, then SIGKILL, each after `patience`. The runner is off
    /// after it. Returns the loader's last line on stdout, if any.
    pub fn stop(&mut self, patience: Duration) -> Option<String> {
        self.state = State::Off;
        let mut l = self.loader.take()?;
        l.tables.take();
        let waited = |c: &mut Child| {
            let end = Instant::now() + patience;
            while Instant::now() < end {
                if let Ok(Some(_)) = c.try_wait() {
                    return true;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            false
        };
        if !waited(&mut l.child) {
            // SAFETY: a signal to our own child's pid, which try_wait has not reaped.
            unsafe { libc::kill(l.child.id() as i32, libc::SIGTERM) };
            if !waited(&mut l.child) {
                let _ = l.child.kill();
                let _ = l.child.wait();
            }
        }
        let mut last = None;
        while let Ok(line) = l.lines.recv_timeout(Duration::from_millis(100)) {
            if let Line::Out(s) = line {
                last = Some(s);
            }
        }
        last
    }

    /// Where it stands.
    pub fn state(&self) -> &State {
        &self.state
    }
    /// Times the scheduler left after it had loaded, without being asked.
    pub fn ejections(&self) -> u64 {
        self.ejections
    }
    /// Tables the loader confirmed.
    pub fn tables(&self) -> u64 {
        self.tables
    }
    /// The loader's pid while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.loader.as_ref().map(|l| l.child.id())
    }
}

impl Drop for Scx {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(2));
    }
}

/// A time as `HH:MM:SS UTC`.
pub fn utc(t: SystemTime) -> String {
    let s = t.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs()) % 86_400;
    format!("{:02}:{:02}:{:02} UTC", s / 3600, s / 60 % 60, s % 60)
}
