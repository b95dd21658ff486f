//! One process's own text, as its owner made it: read bounded in bytes, lossily where it
//! is not UTF-8, and, for a thread group whose leader has exited while its other threads
//! run, through one of those threads.

use super::{parse_stat, stat, tids};
use crate::{read, Error, Result};
use std::path::PathBuf;

/// The most bytes of a command line read (/proc/PID/cmdline): the rest is the process's
/// owner's to make as long as they like (MiBs), and every read of it costs the reader.
pub const CMDLINE_MAX: usize = 4096;

/// The most bytes of an executable's path read (/proc/PID/exe): the kernel's PATH_MAX.
pub const EXE_MAX: usize = 4096;

/// A live thread of a thread group whose leader has exited while other threads run (the
/// leader shows `Z`); None when none lives (the group is over).
pub fn live_thread(pid: i32) -> Option<i32> {
    tids(pid).ok()?.into_iter().filter(|&t| t != pid).find(|&t| {
        let path = PathBuf::from(format!("/proc/{pid}/task/{t}/stat"));
        read(&path).ok().and_then(|s| parse_stat(&path, &s).ok()).is_some_and(|st| !st.exited())
    })
}

/// The thread that speaks for a thread group: `pid` itself, or, when its leader has
/// exited while other threads run, one of those (their cgroup, credentials, command line
/// are the group's; the exited leader's are stale). None when the group has exited.
pub fn speaker(pid: i32) -> Result<Option<i32>> {
    let st = stat(pid)?;
    if !st.exited() {
        return Ok(Some(pid));
    }
    Ok(if st.num_threads > 1 { live_thread(pid) } else { None })
}

/// The first `max` bytes of a file (one user's file can be any length; the reader pays
/// only for what it needs).
pub fn read_prefix(path: &std::path::Path, max: usize) -> Result<Vec<u8>> {
    use std::io::Read;
    let f = std::fs::File::open(path).map_err(|source| Error::Io { op: "read", path: path.into(), source })?;
    let mut out = Vec::with_capacity(max.min(4096));
    let mut take = f.take(max as u64);
    loop {
        match take.read_to_end(&mut out) {
            Ok(_) => return Ok(out),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(source) => return Err(Error::Io { op: "read", path: path.into(), source }),
        }
    }
}

/// The /proc directory of one thread of a process: `/proc/PID` for the leader, else
/// `/proc/PID/task/TID`, which names that thread only while it is one of PID's (a bare
/// `/proc/TID` could be another process's once the thread exits and its id is reused).
pub fn task_dir(pid: i32, tid: i32) -> PathBuf {
    if tid == pid {
        PathBuf::from(format!("/proc/{pid}"))
    } else {
        PathBuf::from(format!("/proc/{pid}/task/{tid}"))
    }
}

/// A process's executable (/proc/PID/exe), read with a buffer of [`EXE_MAX`] bytes; a
/// path that is not UTF-8 is read lossily.
pub fn exe(pid: i32) -> Result<String> {
    exe_at(&task_dir(pid, pid))
}

/// [`exe`] of the thread whose /proc directory is `dir` (see [`task_dir`]).
pub fn exe_at(dir: &std::path::Path) -> Result<String> {
    let path = dir.join("exe").display().to_string();
    let c = std::ffi::CString::new(path.clone()).map_err(|_| Error::Parse { path: path.clone().into(), what: "a path", text: String::new() })?;
    let mut buf = vec![0u8; EXE_MAX];
    // SAFETY: a NUL-terminated path and a buffer of buf.len() bytes.
    let n = unsafe { libc::readlink(c.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        return Err(Error::Io { op: "readlink", path: path.into(), source: std::io::Error::last_os_error() });
    }
    buf.truncate(n as usize);
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// The command line of a process, space-joined, at most its first [`CMDLINE_MAX`] bytes
/// (lossily where not UTF-8); the comm in brackets if empty.
pub fn cmdline(pid: i32) -> Result<String> {
    cmdline_at(&task_dir(pid, pid))
}

/// [`cmdline`] of the thread whose /proc directory is `dir` (see [`task_dir`]).
pub fn cmdline_at(dir: &std::path::Path) -> Result<String> {
    let raw = read_prefix(&dir.join("cmdline"), CMDLINE_MAX)?;
    let s: Vec<String> = raw.split(|&b| b == 0).filter(|a| !a.is_empty()).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    if s.is_empty() {
        let path = dir.join("stat");
        Ok(format!("[{}]", parse_stat(&path, &read(&path)?)?.comm))
    } else {
        Ok(s.join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::procfs::cgroup_of;

    #[test]
    fn a_long_command_line_is_read_only_to_its_bound() {
        // A task directory of our own: a 1 MiB command line of 1000-byte arguments, and a
        // name that is not UTF-8.
        let dir = std::env::temp_dir().join(format!("allot-cmdline-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut line = b"sleep\0".to_vec();
        for _ in 0..1000 {
            line.extend_from_slice(&[b'y'; 1000]);
            line.push(0);
        }
        std::fs::write(dir.join("cmdline"), &line).unwrap();
        let got = cmdline_at(&dir).unwrap();
        assert!(got.starts_with("sleep yyy"), "{}", &got[..20]);
        assert!(got.len() <= CMDLINE_MAX && got.len() > CMDLINE_MAX - 10, "{} bytes", got.len());
        std::fs::write(dir.join("cmdline"), b"").unwrap();
        std::fs::write(dir.join("stat"), b"7 (\xff\xfe) S 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 99 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0")
            .unwrap();
        assert_eq!(cmdline_at(&dir).unwrap(), "[\u{fffd}\u{fffd}]", "an empty command line: the comm, lossily");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_group_whose_leader_exited_speaks_through_a_live_thread() {
        // A thread group whose leader exits (SYS_exit: that thread only) while a second
        // thread sleeps on; made by a forked child with raw syscalls only.
        extern "C" fn sleeper(_: *mut libc::c_void) -> libc::c_int {
            loop {
                // SAFETY: no shared state.
                unsafe { libc::pause() };
            }
        }
        let stack = vec![0u8; 64 << 10];
        let top = (stack.as_ptr() as usize + stack.len() - 64) & !15;
        // SAFETY: fork; the child only makes raw calls on memory allocated before it.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            unsafe {
                let flags = libc::CLONE_VM | libc::CLONE_FS | libc::CLONE_FILES | libc::CLONE_SIGHAND | libc::CLONE_THREAD | libc::CLONE_SYSVSEM;
                libc::clone(sleeper, top as *mut libc::c_void, flags, std::ptr::null_mut());
                libc::syscall(libc::SYS_exit, 0);
            }
        }
        let t0 = std::time::Instant::now();
        while !stat(pid).is_ok_and(|s| s.exited()) && t0.elapsed().as_secs() < 5 {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let st = stat(pid).unwrap();
        let tid = speaker(pid).unwrap();
        let cg = cgroup_of(pid, None).or_else(|_| cgroup_of(pid, Some("cpu")));
        // SAFETY: our own child, not yet reaped.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        let mut status = 0;
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(st.exited() && st.num_threads == 2, "{st:?}");
        assert!(tid.is_some_and(|t| t != pid), "{tid:?}");
        assert!(cg.is_ok(), "{cg:?}");
    }
}
