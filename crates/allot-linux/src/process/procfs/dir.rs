//! A process's /proc directory held open: what is read or written through it belongs to the
//! process it was opened for, even once that process has exited and its pid belongs to
//! someone else (the kernel then answers every lookup under it with ENOENT or ESRCH, since
//! the directory names the process, not the number).

use super::{parse_stat, Stat};
use crate::{Error, Result};
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;

/// An open `/proc/PID` of one process, with the start time read through it.
#[derive(Debug)]
pub struct ProcDir {
    fd: OwnedFd,
    pid: i32,
    start: u64,
}

impl ProcDir {
    /// Opens `/proc/PID` and reads the process's start time through the open directory.
    pub fn open(pid: i32) -> Result<Self> {
        let path = PathBuf::from(format!("/proc/{pid}"));
        if pid <= 0 {
            return Err(Error::Io { op: "open", path, source: std::io::Error::from_raw_os_error(libc::ESRCH) });
        }
        let c = CString::new(path.as_os_str().as_encoded_bytes()).expect("no NUL in a /proc path");
        // SAFETY: a valid C string; the descriptor is owned below.
        let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(Error::Io { op: "open", path, source: std::io::Error::last_os_error() });
        }
        // SAFETY: the kernel just gave us this descriptor.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut d = Self { fd, pid, start: 0 };
        d.start = d.stat()?.starttime;
        Ok(d)
    }

    /// Opens `/proc/PID` only if it is still the process that started at `start`: `None`
    /// when the pid is gone or now names another process.
    pub fn open_if(pid: i32, start: u64) -> Option<Self> {
        Self::open(pid).ok().filter(|d| d.start == start)
    }

    /// The pid it was opened for.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// The process's start time (clock ticks since boot): with the pid, its identity.
    pub fn start(&self) -> u64 {
        self.start
    }

    /// /proc/PID/stat, read through the open directory.
    pub fn stat(&self) -> Result<Stat> {
        let path = self.path("stat");
        parse_stat(&path, &self.read("stat")?)
    }

    /// The process's `oom_score_adj` (-1000..1000).
    pub fn oom_score_adj(&self) -> Result<i16> {
        let s = self.read("oom_score_adj")?;
        s.trim().parse().map_err(|_| Error::Parse {
            path: self.path("oom_score_adj"),
            what: "an integer -1000..1000",
            text: s.chars().take(80).collect(),
        })
    }

    /// Sets the process's `oom_score_adj` (clamped to -1000..1000); fails with ENOENT or
    /// ESRCH, writing nothing, once the process has exited, whoever holds its pid now.
    pub fn set_oom_score_adj(&self, adj: i16) -> Result<()> {
        use std::io::Write;
        let mut f = self.file("oom_score_adj", libc::O_WRONLY)?;
        f.write_all(adj.clamp(-1000, 1000).to_string().as_bytes()).map_err(|source| Error::Io {
            op: "write",
            path: self.path("oom_score_adj"),
            source,
        })
    }

    fn path(&self, name: &str) -> PathBuf {
        PathBuf::from(format!("/proc/{}/{name}", self.pid))
    }

    fn file(&self, name: &str, flags: i32) -> Result<std::fs::File> {
        let c = CString::new(name).expect("no NUL in a /proc file name");
        // SAFETY: a valid directory descriptor and C string; the descriptor is owned below.
        let fd = unsafe { libc::openat(self.fd.as_raw_fd(), c.as_ptr(), flags | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(Error::Io { op: "open", path: self.path(name), source: std::io::Error::last_os_error() });
        }
        // SAFETY: the kernel just gave us this descriptor.
        Ok(unsafe { std::fs::File::from_raw_fd(fd) })
    }

    fn read(&self, name: &str) -> Result<String> {
        let f = self.file(name, libc::O_RDONLY)?;
        crate::reread::read_from(&f, false).map_err(|source| Error::Io { op: "read", path: self.path(name), source })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_reads_its_own_process_and_names_the_same_start_as_stat() {
        let me = std::process::id() as i32;
        let d = ProcDir::open(me).unwrap();
        assert_eq!(d.start(), super::super::stat(me).unwrap().starttime);
        assert!(ProcDir::open_if(me, d.start()).is_some());
        assert!(ProcDir::open_if(me, d.start() + 1).is_none(), "another start time is another process");
        let adj = d.oom_score_adj().unwrap();
        assert!((-1000..=1000).contains(&adj));
    }

    #[test]
    fn after_the_process_is_reaped_nothing_is_read_or_written_through_it() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let d = ProcDir::open(child.id() as i32).unwrap();
        assert!(d.oom_score_adj().is_ok());
        child.kill().unwrap();
        child.wait().unwrap();
        // Whoever holds the pid now (nobody, or a new process), the directory is the old one's.
        assert!(d.oom_score_adj().is_err());
        assert!(d.set_oom_score_adj(500).is_err());
        assert!(d.stat().is_err());
    }

    #[test]
    fn a_pid_that_is_not_a_process_is_refused() {
        assert!(ProcDir::open(0).is_err());
        assert!(ProcDir::open(-5).is_err());
    }
}
