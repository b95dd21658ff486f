//! Holders: a scope ends when its last process does, so each of allot's scopes keeps one
//! small process that blocks forever (Slurm's `slurmstepd infinity` is the model). It
//! must outlive the daemon (a restart or an upgrade never touches a scope), so it is
//! started by a double fork: its parent exits at once and it is re-parented to init,
//! never a zombie of the daemon; it leaves the daemon's session, signal mask, ignored
//! signals, descriptors and environment behind.
//!
//! By default the holder is the calling program itself, re-executed through
//! /proc/self/exe with [`HOLDER_ARG`]: the program's `main` must call [`hold_if_asked`]
//! first. `ps` shows it as `allot-holder`.

use crate::{Error, Result};
use std::ffi::CString;

/// The hidden argument that makes the program a holder.
pub const HOLDER_ARG: &str = "__allot-holder";

/// What a holder runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Holder {
    /// This program again (/proc/self/exe) with [`HOLDER_ARG`]; `main` calls [`hold_if_asked`].
    SelfExec,
    /// Another program and its arguments, e.g. `["/bin/sleep", "infinity"]`.
    Command(Vec<String>),
}

/// Call first thing in `main`: when this process was started as a holder, it blocks
/// here until a signal ends it (SIGTERM from `systemctl stop` on its scope); otherwise
/// this returns at once.
pub fn hold_if_asked() {
    if std::env::args_os().nth(1).is_some_and(|a| a == HOLDER_ARG) {
        // SAFETY: prctl(PR_SET_NAME) with a NUL-terminated name of 16 bytes or less;
        // pause() has no preconditions.
        unsafe {
            libc::prctl(libc::PR_SET_NAME, c"allot-holder".as_ptr() as libc::c_ulong, 0, 0, 0);
            loop {
                libc::pause();
            }
        }
    }
}

fn cstr(s: &str) -> Result<CString> {
    CString::new(s)
        .map_err(|_| Error::Sys { call: format!("start a holder: argument {s:?}"), source: std::io::Error::from(std::io::ErrorKind::InvalidInput) })
}

/// Starts a holder; returns its pid once it runs the holder program (an exec failure is
/// reported here, with its errno). It is in the caller's cgroup until it is moved.
pub fn spawn(h: &Holder) -> Result<i32> {
    let (prog, args): (String, Vec<String>) = match h {
        Holder::SelfExec => ("/proc/self/exe".into(), vec!["allot-holder".into(), HOLDER_ARG.into()]),
        Holder::Command(c) if !c.is_empty() => (c[0].clone(), c.clone()),
        Holder::Command(_) => {
            return Err(Error::Sys {
                call: "start a holder: an empty command".into(),
                source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
            })
        }
    };
    // Everything the children use is made before the fork: they may only make
    // async-signal-safe calls (the daemon has threads).
    let prog_c = cstr(&prog)?;
    let args_c: Vec<CString> = args.iter().map(|a| cstr(a)).collect::<Result<_>>()?;
    let mut argv: Vec<*const libc::c_char> = args_c.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let envp: [*const libc::c_char; 1] = [std::ptr::null()];
    let sys = |call: &str| Error::Sys { call: format!("start a holder: {call}"), source: std::io::Error::last_os_error() };
    // SAFETY: open(2) of a constant path.
    let null = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    if null < 0 {
        return Err(sys("open /dev/null"));
    }
    let mut p = [0i32; 2];
    // SAFETY: pipe2 fills two descriptors.
    if unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        let e = sys("pipe2");
        // SAFETY: closing our own descriptor.
        unsafe { libc::close(null) };
        return Err(e);
    }
    let (rd, wr) = (p[0], p[1]);
    // SAFETY: fork; the child runs `middle`, which makes only async-signal-safe calls on
    // data prepared above and never returns.
    let mid = unsafe { libc::fork() };
    if mid == 0 {
        // SAFETY: see above.
        unsafe { middle(wr, null, &prog_c, &argv, &envp) };
    }
    // SAFETY: closing our copies; the children hold theirs.
    unsafe {
        libc::close(wr);
        libc::close(null);
    }
    if mid < 0 {
        let e = sys("fork");
        // SAFETY: our own descriptor.
        unsafe { libc::close(rd) };
        return Err(e);
    }
    // The middle child sends the holder's pid (or -errno when its fork failed); the holder
    // sends -errno only if its exec failed (on success the close-on-exec pipe closes and
    // the read sees its end). The two write in either order: a holder whose exec fails at
    // once can write before the middle child does, so the sign tells them apart.
    let mut buf = [0u8; 8];
    let mut got = 0;
    while got < 8 {
        // SAFETY: reading into our buffer.
        let n = unsafe { libc::read(rd, buf[got..].as_mut_ptr().cast(), 8 - got) };
        if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        if n <= 0 {
            break;
        }
        got += n as usize;
    }
    // SAFETY: reaping the middle child, which exits at once; closing our descriptor.
    unsafe {
        let mut st = 0;
        libc::waitpid(mid, &mut st, 0);
        libc::close(rd);
    }
    let word = |i: usize| i32::from_ne_bytes(buf[i * 4..i * 4 + 4].try_into().expect("4 bytes"));
    let (pid, exec_errno) = match got {
        8 => (word(0).max(word(1)), Some(-word(0).min(word(1)))),
        4 => (word(0), None),
        _ => (0, None),
    };
    if pid <= 0 {
        return Err(Error::Sys { call: "start a holder: fork (second)".into(), source: std::io::Error::from_raw_os_error(-pid.min(0)) });
    }
    if let Some(errno) = exec_errno {
        return Err(Error::Sys { call: format!("start a holder: execve({prog})"), source: std::io::Error::from_raw_os_error(errno) });
    }
    Ok(pid)
}

/// The middle child: forks the holder, sends its pid, exits.
///
/// # Safety
/// Called only in a freshly forked child; makes only async-signal-safe calls.
unsafe fn middle(wr: i32, null: i32, prog: &CString, argv: &[*const libc::c_char], envp: &[*const libc::c_char; 1]) -> ! {
    let pid = libc::fork();
    if pid == 0 {
        holder(wr, null, prog, argv, envp);
    }
    let v = if pid > 0 { pid } else { -*libc::__errno_location() };
    libc::write(wr, (&v as *const i32).cast(), 4);
    libc::_exit(0)
}

/// The holder, before its exec.
///
/// # Safety
/// Called only in a freshly forked child; makes only async-signal-safe calls.
unsafe fn holder(wr: i32, null: i32, prog: &CString, argv: &[*const libc::c_char], envp: &[*const libc::c_char; 1]) -> ! {
    libc::setsid();
    let mut set: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut set);
    libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
    // Ignored signals stay ignored across exec (the daemon ignores SIGPIPE).
    let mut dfl: libc::sigaction = std::mem::zeroed();
    dfl.sa_sigaction = libc::SIG_DFL;
    for s in 1..32 {
        if s != libc::SIGKILL && s != libc::SIGSTOP {
            libc::sigaction(s, &dfl, std::ptr::null_mut());
        }
    }
    // Both descriptors we still need go above 2 first: with stdin, stdout or stderr
    // closed in the daemon, either could have been 0..2 and been overwritten (or kept
    // close-on-exec) by the dup2s below.
    let (first_wr, wr, null) = (wr, libc::fcntl(wr, libc::F_DUPFD_CLOEXEC, 3), libc::fcntl(null, libc::F_DUPFD_CLOEXEC, 3));
    if wr < 0 || null < 0 {
        let v = -*libc::__errno_location();
        libc::write(first_wr, (&v as *const i32).cast(), 4);
        libc::_exit(126);
    }
    for fd in 0..3 {
        libc::dup2(null, fd);
    }
    close_above_2(wr);
    libc::execve(prog.as_ptr(), argv.as_ptr(), envp.as_ptr());
    let v = -*libc::__errno_location();
    libc::write(wr, (&v as *const i32).cast(), 4);
    libc::_exit(127)
}

/// Every descriptor above 2 goes: those another thread opened without O_CLOEXEC while we
/// forked included. `keep` (the close-on-exec error pipe) stays open until the exec, so
/// a failed exec can still be reported; the exec closes it.
///
/// # Safety
/// Called only in a freshly forked child; makes only async-signal-safe calls.
unsafe fn close_above_2(keep: i32) {
    // close_range(3, ~0, CLOSE_RANGE_CLOEXEC) (Linux 5.11): all of them close at the
    // exec, in one call, whatever their number.
    if libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, libc::CLOSE_RANGE_CLOEXEC) == 0 {
        return;
    }
    close_loop(keep);
}

/// The fallback for older kernels: close(2) on every number up to the descriptor limit
/// (a descriptor cannot be numbered at or above it, unless the limit was lowered after
/// it was opened), at most 2^20 (the kernel's default `nr_open`).
///
/// # Safety
/// Called only in a freshly forked child; makes only async-signal-safe calls.
unsafe fn close_loop(keep: i32) {
    let mut lim: libc::rlimit = std::mem::zeroed();
    let max = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 { lim.rlim_cur.min(1 << 20) as i32 } else { 1 << 20 };
    for fd in 3..max.max(keep + 1) {
        if fd != keep {
            libc::close(fd);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gone(pid: i32) -> bool {
        // SAFETY: kill(pid, 0) only checks.
        unsafe { libc::kill(pid, 0) != 0 }
    }

    #[test]
    fn a_holder_runs_detached_and_an_exec_failure_is_reported() {
        let pid = spawn(&Holder::Command(vec!["/bin/sleep".into(), "60".into()])).expect("spawn sleep");
        assert!(!gone(pid));
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        let f: Vec<&str> = after.split_whitespace().collect();
        // ppid is not us (re-parented), and it leads its own session.
        assert_ne!(f[1].parse::<u32>().unwrap(), std::process::id());
        assert_eq!(f[3].parse::<i32>().unwrap(), pid, "session id");
        // Only stdin, stdout and stderr (/dev/null). The dynamic loader opens and closes
        // files of its own while `sleep` starts: a leaked descriptor would stay.
        let fds = settled_fds(pid, std::time::Instant::now() + std::time::Duration::from_secs(5));
        assert!(fds.len() == 3 && fds.iter().all(|f| f.contains("/dev/null")), "only stdin, stdout and stderr (/dev/null): {fds:?}");
        // SAFETY: ending the process this test started.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let e = spawn(&Holder::Command(vec!["/nonexistent/holder".into()])).unwrap_err();
        assert!(e.to_string().contains("execve(/nonexistent/holder)"), "{e}");
        assert_eq!(e.io_kind(), Some(std::io::ErrorKind::NotFound));
    }

    /// The holder's descriptors once its program runs (the dynamic loader's own come and
    /// go while it starts: wait until only 3 are left, or `end`).
    fn settled_fds(pid: i32, end: std::time::Instant) -> Vec<String> {
        let fds = || -> Vec<String> {
            let mut v: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
                .map(|d| {
                    d.filter_map(|e| e.ok())
                        .map(|e| format!("{} -> {:?}", e.file_name().to_string_lossy(), std::fs::read_link(e.path()).ok()))
                        .collect()
                })
                .unwrap_or_default();
            v.sort();
            v
        };
        // Settled: the same three on two looks 50 ms apart (right after the exec the
        // dynamic loader opens and closes libc; a leaked descriptor stays).
        loop {
            let a = fds();
            std::thread::sleep(std::time::Duration::from_millis(50));
            let b = fds();
            if (a.len() == 3 && a == b) || std::time::Instant::now() >= end {
                return b;
            }
        }
    }

    #[test]
    fn a_holder_inherits_no_descriptor_another_thread_opens_meanwhile() {
        // Another thread keeps opening descriptors without O_CLOEXEC (as a library or a
        // careless caller might) while holders start: none may reach a holder.
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s = stop.clone();
        let opener = std::thread::spawn(move || {
            let mut open = std::collections::VecDeque::new();
            while !s.load(std::sync::atomic::Ordering::SeqCst) {
                // SAFETY: open(2) of a constant path; the descriptor is ours to close.
                let fd = unsafe { libc::open(c"/dev/zero".as_ptr(), libc::O_RDONLY) };
                assert!(fd >= 0);
                open.push_back(fd);
                if open.len() > 16 {
                    // SAFETY: a descriptor this thread opened.
                    unsafe { libc::close(open.pop_front().unwrap()) };
                }
            }
            for fd in open {
                // SAFETY: as above.
                unsafe { libc::close(fd) };
            }
        });
        let pids: Vec<i32> = (0..40).map(|_| spawn(&Holder::Command(vec!["/bin/sleep".into(), "60".into()])).expect("spawn sleep")).collect();
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        opener.join().unwrap();
        let mut bad = vec![];
        let end = std::time::Instant::now() + std::time::Duration::from_secs(5);
        for &pid in &pids {
            let fds = settled_fds(pid, end);
            if fds.len() != 3 || fds.iter().any(|f| !f.contains("/dev/null")) {
                bad.push(format!("holder {pid}: {fds:?}"));
            }
            // SAFETY: ending the process this test started.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        assert!(bad.is_empty(), "holders kept descriptors besides stdin, stdout and stderr (/dev/null):\n{}", bad.join("\n"));
    }

    #[test]
    fn the_fallback_closes_every_descriptor_but_the_error_pipe() {
        // In a forked child (only async-signal-safe calls there): descriptors without
        // O_CLOEXEC, one of them far up, then the loop; only `keep` may be left above 2.
        // SAFETY: fork; the child makes only async-signal-safe calls and _exits.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: see above.
            unsafe {
                let keep = libc::fcntl(libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC), libc::F_DUPFD_CLOEXEC, 3);
                for _ in 0..20 {
                    libc::open(c"/dev/zero".as_ptr(), libc::O_RDONLY);
                }
                libc::dup2(keep, 900);
                close_loop(keep);
                let open = |fd: i32| libc::fcntl(fd, libc::F_GETFD) >= 0;
                let others = (3..1024).filter(|&fd| fd != keep && open(fd)).count();
                libc::_exit(if open(keep) && others == 0 { 0 } else { 1 });
            }
        }
        let mut st = 0;
        // SAFETY: reaping the child this test forked.
        assert_eq!(unsafe { libc::waitpid(pid, &mut st, 0) }, pid);
        assert!(libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0, "a descriptor above 2 besides the error pipe survived the loop (status {st:#x})");
    }
}
