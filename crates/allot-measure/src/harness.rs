//! A private allot daemon for tests, self-tests and benchmarks: its own cgroup root
//! (unique name), socket, state directory and config, so it runs beside a real daemon
//! and leaves nothing behind. It kills only the processes it started, by pid.

use anyhow::{bail, Context};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

static SEQ: AtomicU32 = AtomicU32::new(0);

/// The uid of a test or benchmark user, created with useradd if missing (tests that
/// need several users make their own; they are kept for the next run).
pub fn ensure_user(name: &str) -> anyhow::Result<u32> {
    if let Some(u) = allot_linux::procfs::user_uid(name) {
        return Ok(u);
    }
    let st = Command::new("useradd")
        .args(["--no-create-home", "--shell", "/usr/sbin/nologin", "--comment", "allot test user", name])
        .status()
        .with_context(|| format!("useradd {name} (the test needs a user of its own)"))?;
    if !st.success() {
        bail!("useradd {name} failed ({st})");
    }
    allot_linux::procfs::user_uid(name).with_context(|| format!("user {name} missing after useradd"))
}

/// Processes a test or benchmark started itself; killed by pid (SIGKILL) and reaped on
/// drop, even when the test fails. Never anything it did not start.
#[derive(Debug, Default)]
pub struct Kids(pub Vec<Child>);

impl Kids {
    /// Keeps a child; returns its pid.
    pub fn add(&mut self, c: Child) -> u32 {
        let pid = c.id();
        self.0.push(c);
        pid
    }

    /// Kills and reaps them all now.
    pub fn kill_all(&mut self) {
        for c in &mut self.0 {
            // SAFETY: our own unreaped child, so the pid cannot have been reused.
            unsafe { libc::kill(c.id() as i32, libc::SIGKILL) };
        }
        for mut c in self.0.drain(..) {
            let _ = c.wait();
        }
    }
}

impl Drop for Kids {
    fn drop(&mut self) {
        self.kill_all();
    }
}

/// A running private daemon and the jobs started through it.
#[derive(Debug)]
pub struct PrivateDaemon {
    exe: PathBuf,
    daemon: Option<Child>,
    /// Its socket.
    pub socket: PathBuf,
    /// Its state directory (also holds the socket and config).
    pub dir: PathBuf,
    /// Its cgroup root name (unique).
    pub root_name: String,
    jobs: Kids,
    persistent: bool,
}

impl PrivateDaemon {
    /// Starts `exe daemon --ephemeral` with `config_toml` and waits until it answers.
    pub fn start(exe: &Path, config_toml: &str) -> anyhow::Result<Self> {
        Self::start_mode(exe, config_toml, false)
    }

    /// Like [`Self::start`], but the daemon keeps its state file (so a restart finds its
    /// funding) and only takes its tree down on a clean stop: for crash tests.
    pub fn start_persistent(exe: &Path, config_toml: &str) -> anyhow::Result<Self> {
        Self::start_mode(exe, config_toml, true)
    }

    fn start_mode(exe: &Path, config_toml: &str, persistent: bool) -> anyhow::Result<Self> {
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let root_name = format!("allot-test-{}-{}", std::process::id(), n);
        let dir = std::env::temp_dir().join(&root_name);
        std::fs::create_dir_all(&dir).with_context(|| format!("mkdir {}", dir.display()))?;
        // Test users must reach the socket.
        let _ = std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755));
        let config = dir.join("allot.toml");
        std::fs::write(&config, config_toml).with_context(|| format!("write {}", config.display()))?;
        let socket = dir.join("allot.sock");
        let mut me = Self { exe: exe.into(), daemon: None, socket, dir, root_name, jobs: Kids::default(), persistent };
        me.launch(!persistent)?;
        Ok(me)
    }

    /// Starts the daemon process (again, after [`Self::crash`]) and waits until it
    /// answers. `ephemeral`: no state file, and the tree is removed on SIGTERM.
    pub fn launch(&mut self, ephemeral: bool) -> anyhow::Result<()> {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.dir.join("daemon.log"))?;
        let mut c = Command::new(&self.exe);
        c.arg("daemon");
        if ephemeral {
            c.arg("--ephemeral");
        }
        c.arg("--cgroup-root")
            .arg(&self.root_name)
            .arg("--socket")
            .arg(&self.socket)
            .arg("--state-dir")
            .arg(&self.dir)
            .arg("--config")
            .arg(self.dir.join("allot.toml"))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        self.daemon = Some(c.spawn().with_context(|| format!("start {} daemon", self.exe.display()))?);
        let me = self;
        let t0 = Instant::now();
        loop {
            let ok = me.allot().arg("status").stdout(Stdio::null()).stderr(Stdio::null()).status().map(|s| s.success()).unwrap_or(false);
            if ok {
                return Ok(());
            }
            if let Some(Ok(Some(st))) = me.daemon.as_mut().map(|d| d.try_wait()) {
                bail!("private daemon exited ({st}) at start: {}", me.log());
            }
            if t0.elapsed() > Duration::from_secs(20) {
                bail!("private daemon did not answer within 20 s: {}", me.log());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The daemon's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("daemon.log")).unwrap_or_default()
    }

    /// A command `exe --socket S` to add arguments to.
    pub fn allot(&self) -> Command {
        let mut c = Command::new(&self.exe);
        c.arg("--socket").arg(&self.socket);
        c
    }

    /// Runs `allot ARGS` as `uid` (None: as this process) and returns its output.
    pub fn cli(&self, args: &[&str], uid: Option<u32>) -> anyhow::Result<std::process::Output> {
        let mut c = self.allot();
        c.args(args).stdin(Stdio::null());
        if let Some(u) = uid {
            c.uid(u).gid(u);
        }
        c.output().with_context(|| format!("run allot {args:?}"))
    }

    /// Starts `allot run RUN_ARGS -- CMD` as `uid`; the child becomes the job's first
    /// process once `allot run` has exec'd. The child is killed on drop.
    pub fn run_job(&mut self, run_args: &[&str], cmd: &[&str], uid: Option<u32>) -> anyhow::Result<u32> {
        let mut c = self.allot();
        c.arg("run").args(run_args).arg("--").args(cmd).stdin(Stdio::null()).stdout(Stdio::piped());
        if let Some(u) = uid {
            c.uid(u).gid(u);
        }
        let child = c.spawn().with_context(|| format!("allot run {run_args:?} -- {cmd:?}"))?;
        Ok(self.jobs.add(child))
    }

    /// Waits until the `allot run` started as `pid` has exec'd its command (its argv no
    /// longer carries `--socket`), up to 10 s.
    pub fn wait_exec(&self, pid: u32) -> anyhow::Result<()> {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(10) {
            if let Ok(s) = allot_linux::procfs::stat(pid as i32) {
                if s.state == 'Z' {
                    bail!("job {pid} exited before its command started: {}", self.log());
                }
                match std::fs::read(format!("/proc/{pid}/cmdline")) {
                    Ok(c) if !c.is_empty() && !c.split(|&b| b == 0).any(|a| a == b"--socket") => return Ok(()),
                    _ => {}
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        bail!("job {pid} did not start its command within 10 s: {}", self.log())
    }

    /// Takes the job children started so far (for reading their output).
    pub fn take_jobs(&mut self) -> Vec<Child> {
        std::mem::take(&mut self.jobs.0)
    }

    /// Kills every job child started (by pid) and reaps it.
    pub fn kill_jobs(&mut self) {
        self.jobs.kill_all();
    }

    /// Stops the daemon with SIGTERM (it removes its cgroup tree, being ephemeral).
    pub fn stop(&mut self) -> anyhow::Result<()> {
        self.kill_jobs();
        if self.persistent {
            // A persistent daemon leaves its tree on SIGTERM; an ephemeral one started
            // on the same root adopts the tree and removes it when it stops.
            if self.daemon.is_some() {
                let _ = self.terminate();
            }
            self.persistent = false;
            if self.launch(true).is_err() {
                self.crash();
            }
        }
        if let Some(mut d) = self.daemon.take() {
            // SAFETY: our own unreaped child.
            unsafe { libc::kill(d.id() as i32, libc::SIGTERM) };
            let t0 = Instant::now();
            loop {
                if let Ok(Some(_)) = d.try_wait() {
                    break;
                }
                if t0.elapsed() > Duration::from_secs(10) {
                    let _ = d.kill();
                    let _ = d.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
        Ok(())
    }

    /// The daemon's pid, while it runs.
    pub fn daemon_pid(&self) -> Option<u32> {
        self.daemon.as_ref().map(|d| d.id())
    }

    /// Kills the daemon with SIGKILL (a crash: no clean-up runs) and reaps it. The
    /// jobs it made keep running in their cgroups.
    pub fn crash(&mut self) {
        if let Some(mut d) = self.daemon.take() {
            // SAFETY: our own unreaped child.
            unsafe { libc::kill(d.id() as i32, libc::SIGKILL) };
            let _ = d.wait();
        }
    }

    /// Stops the daemon with SIGTERM and waits. A persistent daemon leaves its tree (the
    /// kernel keeps enforcing it); an ephemeral one removes it.
    pub fn terminate(&mut self) -> anyhow::Result<std::process::ExitStatus> {
        let mut d = self.daemon.take().context("daemon not running")?;
        // SAFETY: our own unreaped child.
        unsafe { libc::kill(d.id() as i32, libc::SIGTERM) };
        Ok(d.wait()?)
    }
}

impl Drop for PrivateDaemon {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}
