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

/// uids that the integration tests (crates/allot/tests, run in CI) run processes as. None
/// has an account: the kernel runs a process as any uid without a passwd entry, so nothing
/// is left in /etc/passwd. `allot-lab selftest` and the benchmarks, which run on users'
/// machines, choose theirs at run time instead, among uids no one has (`test_uids`).
pub const TEST_UIDS: [u32; 4] = [2901, 2902, 2903, 2904];

/// A cgroup of a test's or benchmark's own that processes are started in: a system allot
/// daemon never places a process out of a cgroup another manager made, so it leaves these
/// alone; a private daemon places from it only when its config lists it
/// (`placement.from`). Without systemd it is `<mount>/allot-shelter-PID-N`; on a systemd
/// host (where nothing may be made at the root) a delegated scope of the test's own,
/// `allot-shelter-PID-N.scope`, kept by a `sleep infinity` holder, with processes in its
/// `procs/` leaf. Removed on drop (its processes must have ended).
#[derive(Debug)]
pub struct Shelter {
    name: String,
    /// The cgroup processes join, as /proc/PID/cgroup names it.
    path: String,
    /// Its `cgroup.procs` files (v1: the cpu and the cpuacct hierarchy's).
    files: Vec<PathBuf>,
    kind: ShelterKind,
}

#[derive(Debug)]
enum ShelterKind {
    Own(Box<dyn allot_linux::cgroup::CpuController>),
    Scope { unit: String, dir: PathBuf },
}

impl Shelter {
    /// Creates a shelter (see the type).
    pub fn new() -> anyhow::Result<Self> {
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let name = format!("allot-shelter-{}-{n}", std::process::id());
        if allot_linux::ipc::systemd_bus::is_systemd_host() {
            let unit = format!("{name}.scope");
            let mut sd = allot_linux::ipc::systemd_bus::Systemd::connect()?;
            let holder = allot_linux::ipc::systemd_bus::holder::spawn(&allot_linux::ipc::systemd_bus::holder::Holder::Command(vec![
                "/bin/sleep".into(),
                "infinity".into(),
            ]))?;
            let props = vec![allot_linux::ipc::systemd_bus::prop("Description", allot_linux::ipc::dbus::Value::str("allot test shelter"))];
            sd.start_scope(&unit, "system.slice", &[holder as u32], Some(&["cpu"]), props)?;
            let cg = sd.unit_cgroup(&unit)?;
            let dir = Path::new("/sys/fs/cgroup").join(cg.trim_start_matches('/'));
            let leaf = dir.join("procs");
            std::fs::create_dir_all(&leaf).with_context(|| format!("mkdir {}", leaf.display()))?;
            return Ok(Self { path: format!("{cg}/procs"), files: vec![leaf.join("cgroup.procs")], kind: ShelterKind::Scope { unit, dir }, name });
        }
        let cg = allot_linux::cgroup::detect(&name)?;
        cg.create("").map_err(|e| anyhow::anyhow!("create the shelter cgroup: {e}"))?;
        Ok(Self { path: format!("/{name}"), files: cg.procs_files(""), kind: ShelterKind::Own(cg), name })
    }

    /// Its path as /proc/PID/cgroup names it.
    pub fn path(&self) -> String {
        self.path.clone()
    }

    /// A command that starts inside the shelter, as `uid` if given (uid and gid set to it,
    /// no supplementary groups): the child joins the shelter as root, then drops to the uid,
    /// so it is never outside it, not even for an instant.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>, uid: Option<u32>) -> Command {
        let files: Vec<std::ffi::CString> =
            self.files.iter().map(|p| std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).expect("cgroup paths have no NUL")).collect();
        let mut c = Command::new(program);
        // SAFETY: the closure only makes async-signal-safe calls (open, write, close,
        // setgroups, setgid, setuid) on data prepared before the fork.
        unsafe {
            c.pre_exec(move || {
                for f in &files {
                    let fd = libc::open(f.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                    if fd < 0 || libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                        return Err(std::io::Error::last_os_error());
                    }
                    libc::close(fd);
                }
                if let Some(u) = uid {
                    if libc::setgroups(0, std::ptr::null()) != 0 || libc::setgid(u) != 0 || libc::setuid(u) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        c
    }
}

impl Drop for Shelter {
    fn drop(&mut self) {
        match &self.kind {
            ShelterKind::Own(cg) => {
                for _ in 0..50 {
                    if cg.remove("").is_ok() || !cg.exists("") {
                        return;
                    }
                    // Processes killed a moment ago may still be exiting.
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            ShelterKind::Scope { unit, dir } => {
                let _ = std::fs::remove_dir(dir.join("procs"));
                if let Ok(mut sd) = allot_linux::ipc::systemd_bus::Systemd::connect() {
                    let _ = sd.stop_unit(unit);
                }
            }
        }
        let _ = &self.name;
    }
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

    /// Kills and reaps one of them now.
    pub fn kill(&mut self, pid: u32) {
        if let Some(i) = self.0.iter().position(|c| c.id() == pid) {
            let mut c = self.0.swap_remove(i);
            // SAFETY: our own unreaped child, so the pid cannot have been reused.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            let _ = c.wait();
        }
    }

    /// Waits for one of them to end and returns what it wrote to its piped stdout.
    pub fn output(&mut self, pid: u32) -> String {
        let Some(i) = self.0.iter().position(|c| c.id() == pid) else { return String::new() };
        let mut c = self.0.swap_remove(i);
        let mut s = String::new();
        if let Some(o) = c.stdout.as_mut() {
            let _ = std::io::Read::read_to_string(o, &mut s);
        }
        let _ = c.wait();
        s
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
    /// Where processes of its test users start (its config places from here).
    pub shelter: Shelter,
    /// Extra environment for the daemon process (set before a [`Self::launch`]).
    pub env: Vec<(String, String)>,
    /// Files bind-mounted for the daemon only, in a private mount namespace (source,
    /// target): a test's own /etc/nsswitch.conf or /etc/subuid, with nothing outside changed.
    pub binds: Vec<(PathBuf, PathBuf)>,
    /// A v1 memory cgroup (its `cgroup.procs`) the daemon starts in, with a cgroup
    /// namespace and the memory hierarchy mounted again in a private mount namespace: the
    /// daemon sees that cgroup as the hierarchy's top, as in a container.
    pub memory_container: Option<PathBuf>,
    stopped: bool,
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
        let shelter = Shelter::new()?;
        let config = dir.join("allot.toml");
        // Processes start in the shelter and the daemon places from there (a test that wants
        // another source says so in its own [placement]).
        let toml = if config_toml.contains("[placement]") {
            config_toml.to_string()
        } else {
            format!("{config_toml}\n[placement]\nfrom = [\"{}\"]\n", shelter.path())
        };
        std::fs::write(&config, toml).with_context(|| format!("write {}", config.display()))?;
        let socket = dir.join("allot.sock");
        let mut me = Self {
            exe: exe.into(),
            daemon: None,
            socket,
            dir,
            root_name,
            jobs: Kids::default(),
            persistent,
            shelter,
            env: vec![],
            binds: vec![],
            memory_container: None,
            stopped: false,
        };
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
            .stderr(log)
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        if !self.binds.is_empty() || self.memory_container.is_some() {
            let cstr = |p: &Path| std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).expect("no NUL in paths");
            let binds: Vec<(std::ffi::CString, std::ffi::CString)> = self.binds.iter().map(|(a, b)| (cstr(a), cstr(b))).collect();
            let procs = self.memory_container.as_ref().map(|d| cstr(&d.join("cgroup.procs")));
            // SAFETY: raw syscalls only between fork and exec, on data prepared before.
            unsafe {
                c.pre_exec(move || {
                    let err = || Err(std::io::Error::last_os_error());
                    if let Some(procs) = &procs {
                        // "0": the writer itself, then its cgroup is the namespace's top
                        let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                        if fd < 0 {
                            return err();
                        }
                        let wrote = libc::write(fd, c"0".as_ptr().cast(), 1);
                        let e = std::io::Error::last_os_error();
                        libc::close(fd);
                        if wrote != 1 {
                            return Err(e);
                        }
                        if libc::unshare(libc::CLONE_NEWCGROUP) != 0 {
                            return err();
                        }
                    }
                    if libc::unshare(libc::CLONE_NEWNS) != 0 {
                        return err();
                    }
                    if libc::mount(std::ptr::null(), c"/".as_ptr(), std::ptr::null(), libc::MS_REC | libc::MS_PRIVATE, std::ptr::null()) != 0 {
                        return err();
                    }
                    // The same hierarchy cannot be mounted on its own mount point again
                    // (EBUSY): the host's view is taken off first, in this namespace only.
                    let at = c"/sys/fs/cgroup/memory";
                    if procs.is_some()
                        && (libc::umount2(at.as_ptr(), libc::MNT_DETACH) != 0
                            || libc::mount(c"cgroup".as_ptr(), at.as_ptr(), c"cgroup".as_ptr(), 0, c"memory".as_ptr().cast()) != 0)
                    {
                        return err();
                    }
                    for (a, b) in &binds {
                        if libc::mount(a.as_ptr(), b.as_ptr(), std::ptr::null(), libc::MS_BIND, std::ptr::null()) != 0 {
                            return err();
                        }
                    }
                    Ok(())
                });
            }
        }
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

    /// A command `exe --socket S` to add arguments to (run as this process).
    pub fn allot(&self) -> Command {
        let mut c = Command::new(&self.exe);
        c.arg("--socket").arg(&self.socket);
        c
    }

    /// `exe --socket S` as `uid` (None: as this process's user), started in the shelter,
    /// where the private daemon may take it from (and no other allot daemon would).
    pub fn allot_as(&self, uid: Option<u32>) -> Command {
        let mut c = self.shelter.command(&self.exe, uid);
        c.arg("--socket").arg(&self.socket);
        c
    }

    /// A user's process as their shell would start it: in the shelter, where this daemon
    /// (and no other) places it automatically.
    pub fn user_command(&self, uid: u32, cmd: &[&str]) -> Command {
        let mut c = self.shelter.command(cmd[0], Some(uid));
        c.args(&cmd[1..]).stdin(Stdio::null()).stdout(Stdio::null());
        c
    }

    /// Runs `allot ARGS` as `uid` (None: as this process) and returns its output.
    pub fn cli(&self, args: &[&str], uid: Option<u32>) -> anyhow::Result<std::process::Output> {
        let mut c = self.allot_as(uid);
        c.args(args).stdin(Stdio::null());
        c.output().with_context(|| format!("run allot {args:?}"))
    }

    /// Starts `allot run RUN_ARGS -- CMD` as `uid`; the child becomes the job's first
    /// process once `allot run` has exec'd. The child is killed on drop.
    pub fn run_job(&mut self, run_args: &[&str], cmd: &[&str], uid: Option<u32>) -> anyhow::Result<u32> {
        let mut c = self.allot_as(uid);
        c.arg("run").args(run_args).arg("--").args(cmd).stdin(Stdio::null()).stdout(Stdio::piped());
        let child = c.spawn().with_context(|| format!("allot run {run_args:?} -- {cmd:?}"))?;
        Ok(self.jobs.add(child))
    }

    /// Waits until the `allot run` started as `pid` has exec'd its command (its argv no
    /// longer carries `--socket`), up to 10 s.
    pub fn wait_exec(&self, pid: u32) -> anyhow::Result<()> {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(10) {
            if let Ok(s) = allot_linux::process::procfs::stat(pid as i32) {
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
        if self.stopped {
            return Ok(());
        }
        self.stopped = true;
        self.kill_jobs();
        if self.persistent || self.daemon.is_none() {
            // A persistent daemon leaves its tree on SIGTERM, and a crashed one left it: an
            // ephemeral daemon started on the same root adopts the tree and removes it when
            // it stops.
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
        let left = sweep_tree(&self.root_name);
        if !left.is_empty() {
            eprintln!(
                "allot-test: the daemon left {} directories of its tree; removed: {}",
                left.len(),
                left.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(" ")
            );
        }
        Ok(())
    }

    /// A controller over the daemon's tree, for reading its jobs' counters (on a systemd
    /// host, its scopes; it never creates anything here).
    pub fn controller(&self) -> anyhow::Result<Box<dyn allot_linux::cgroup::CpuController>> {
        let holder = allot_linux::ipc::systemd_bus::holder::Holder::Command(vec!["/bin/sleep".into(), "infinity".into()]);
        Ok(allot_linux::cgroup::detect_host(&self.root_name, holder)?)
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

/// Removes what is left of a test daemon's tree `name` at the top of any cgroup hierarchy
/// (the daemon removes it when it stops; this is the test's own clean-up when it did not):
/// deepest first, any process still in a directory sent to the hierarchy's root (only the
/// test's own processes are placed there). Returns the directories it found.
fn sweep_tree(name: &str) -> Vec<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let mut tops: Vec<PathBuf> = mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() > 2 && (f[2] == "cgroup" || f[2] == "cgroup2")).then(|| PathBuf::from(f[1]))
        })
        .collect();
    tops.sort();
    tops.dedup();
    fn below(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                below(&e.path(), out);
            }
        }
        out.push(dir.to_path_buf());
    }
    let mut found = vec![];
    for top in tops {
        let root = top.join(name);
        if !root.is_dir() {
            continue;
        }
        let mut dirs = vec![];
        below(&root, &mut dirs);
        for d in dirs {
            for pid in std::fs::read_to_string(d.join("cgroup.procs")).unwrap_or_default().split_whitespace() {
                let _ = std::fs::write(top.join("cgroup.procs"), pid);
            }
            let _ = std::fs::remove_dir(&d);
            found.push(d);
        }
    }
    found
}

impl Drop for PrivateDaemon {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}
