//! Starts processes as a login would, for the benchmarks that time placement: a root
//! process that sits in a cgroup once (a test's shelter, where sshd or a login manager
//! would sit) and forks each login from there, so the login's start costs what sshd's
//! does: a fork, setgroups, setgid, setuid and an exec, and no cgroup write.
//!
//! A benchmark that moves each child into the shelter itself (writing `cgroup.procs`
//! before the setuid) adds the kernel's cost of that write to every login, and the
//! write warms the kernel for the daemon's: a `cgroup.procs` write takes the cgroup
//! threadgroup lock for writing, which first waits for an RCU grace period (7.8 ms p50,
//! 15.8 ms p99 here, measured one write every 20 ms) unless another write came moments
//! before. Measured from before such a child's fork, a login appeared to wait 15–25 ms
//! for the daemon when the daemon's own work took 1 ms.
//!
//! The protocol is lines on stdin and stdout. `UID ARG...` starts ARGs as UID (uid and
//! gid set to it, no supplementary groups) and answers `PID FORK UID`: the child's pid,
//! and CLOCK_MONOTONIC in ns just before its fork and just after its setuid (the child
//! writes that to a pipe before its exec). `KILL` kills every child started so far
//! (SIGKILL, by pid: they are the launcher's own unreaped children, so no pid can have
//! been reused) and reaps them, then answers `OK`. End of input does the same and
//! exits. Every child dies with the launcher (PR_SET_PDEATHSIG) and the launcher with
//! its parent, if the benchmark sets that up (it does).

use crate::harness::Kids;
use anyhow::{bail, Context};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// CLOCK_MONOTONIC now, ns (what `Instant` reads on Linux, as a number other processes
/// can compare).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A process that dies with its parent's thread that started it, whatever happens to
/// the parent (SIGKILL included): PR_SET_PDEATHSIG, set after any setuid of an earlier
/// `pre_exec` (which clears it) and kept across exec.
pub fn dies_with_us(mut c: Command) -> Command {
    // SAFETY: prctl is async-signal-safe.
    unsafe {
        c.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0);
            Ok(())
        });
    }
    c
}

/// The `Instant` that was CLOCK_MONOTONIC `ns`.
pub fn instant_of(ns: u64) -> Instant {
    let (now, now_ns) = (Instant::now(), monotonic_ns());
    if ns <= now_ns {
        now.checked_sub(Duration::from_nanos(now_ns - ns)).unwrap_or(now)
    } else {
        now + Duration::from_nanos(ns - now_ns)
    }
}

/// The launcher's side: serves requests on stdin until it ends (`allot-lab launcher`, hidden).
pub fn serve() -> anyhow::Result<i32> {
    let mut kids = Kids::default();
    // Each child writes the moment of its setuid here (8 bytes: one write, atomic).
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills the two descriptors it is given.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        bail!("launcher: pipe2: {}", std::io::Error::last_os_error());
    }
    let (rfd, wfd) = (fds[0], fds[1]);
    let mut out = std::io::stdout().lock();
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        let mut words = line.split_whitespace();
        match words.next() {
            Some("KILL") => {
                kids.kill_all();
                writeln!(out, "OK")?;
            }
            Some(uid) => {
                let uid: u32 = uid.parse().with_context(|| format!("launcher: {uid:?} is not a uid"))?;
                let args: Vec<&str> = words.collect();
                let Some((program, rest)) = args.split_first() else { bail!("launcher: no command after uid {uid}") };
                let mut c = Command::new(program);
                c.args(rest).stdin(Stdio::null()).stdout(Stdio::null());
                // SAFETY: only async-signal-safe calls (setgroups, setgid, setuid, clock_gettime, write).
                unsafe {
                    c.pre_exec(move || {
                        if libc::setgroups(0, std::ptr::null()) != 0 || libc::setgid(uid) != 0 || libc::setuid(uid) != 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                        let at = monotonic_ns().to_ne_bytes();
                        libc::write(wfd, at.as_ptr().cast(), at.len());
                        Ok(())
                    });
                }
                let mut c = dies_with_us(c);
                let t0 = monotonic_ns();
                let spawned = c.spawn();
                // The child wrote before its exec, and spawn returns after the exec.
                let mut at = [0u8; 8];
                // SAFETY: reads into a local buffer of its length.
                let n = unsafe { libc::read(rfd, at.as_mut_ptr().cast(), at.len()) };
                let child = spawned.with_context(|| format!("launcher: start {args:?} as uid {uid}"))?;
                if n != 8 {
                    bail!("launcher: {args:?} as uid {uid} did not report its setuid");
                }
                writeln!(out, "{} {t0} {}", child.id(), u64::from_ne_bytes(at))?;
                kids.add(child);
            }
            None => {}
        }
        out.flush()?;
    }
    kids.kill_all();
    Ok(0)
}

/// A process the launcher started.
#[derive(Debug, Clone, Copy)]
pub struct Launched {
    /// Its pid.
    pub pid: u32,
    /// Just before its fork.
    pub fork: Instant,
    /// Just after its setuid: from here on it is the user's (a login's start as allot
    /// can see it: the kernel reports the uid change).
    pub setuid: Instant,
}

/// The benchmark's side: a running launcher.
pub struct Launcher {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Launcher {
    /// Starts `allot-lab launcher` with `command`, which must run `exe launcher` where the
    /// logins should start (a shelter's command, as root) and should die with the caller.
    pub fn start(mut command: Command) -> anyhow::Result<Self> {
        let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().context("start the launcher")?;
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().context("the launcher's stdout")?);
        Ok(Self { child, stdin, stdout })
    }

    fn ask(&mut self, line: &str) -> anyhow::Result<String> {
        let stdin = self.stdin.as_mut().context("the launcher was stopped")?;
        writeln!(stdin, "{line}").and_then(|()| stdin.flush()).context("write to the launcher")?;
        let mut reply = String::new();
        if self.stdout.read_line(&mut reply)? == 0 {
            bail!("the launcher exited (asked: {line})");
        }
        Ok(reply.trim().to_string())
    }

    /// Starts `args` as `uid`.
    pub fn launch(&mut self, uid: u32, args: &[&str]) -> anyhow::Result<Launched> {
        if args.iter().any(|a| a.is_empty() || a.contains(char::is_whitespace)) {
            bail!("launcher arguments must be single words: {args:?}");
        }
        let reply = self.ask(&format!("{uid} {}", args.join(" ")))?;
        let bad = || format!("the launcher answered {reply:?}, not PID FORK UID");
        let w: Vec<&str> = reply.split(' ').collect();
        let [pid, fork, setuid] = w[..] else { bail!(bad()) };
        Ok(Launched {
            pid: pid.parse().with_context(bad)?,
            fork: instant_of(fork.parse().with_context(bad)?),
            setuid: instant_of(setuid.parse().with_context(bad)?),
        })
    }

    /// Kills every process it started (and reaps them).
    pub fn kill_all(&mut self) -> anyhow::Result<()> {
        match self.ask("KILL")?.as_str() {
            "OK" => Ok(()),
            r => bail!("launcher: {r}"),
        }
    }
}

impl Drop for Launcher {
    fn drop(&mut self) {
        // End of input: it kills its children, reaps them and exits.
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}
