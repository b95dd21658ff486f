//! pidfd: a handle on a process that cannot be confused with a later process that reuses
//! its pid. allot opens one before it acts on a pid it was told about, checks identity
//! through it, and checks it is still alive right before acting (DESIGN.md, Trust).

use crate::{Error, Result};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// An open pidfd with the pid it was opened for.
#[derive(Debug)]
pub struct PidFd {
    fd: OwnedFd,
    pid: i32,
}

impl PidFd {
    /// pidfd_open(2).
    pub fn open(pid: i32) -> Result<Self> {
        if pid <= 0 {
            return Err(Error::Sys { call: format!("pidfd_open({pid})"), source: std::io::Error::from_raw_os_error(libc::ESRCH) });
        }
        // SAFETY: plain syscall with integer arguments.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if fd < 0 {
            return Err(Error::Sys { call: format!("pidfd_open({pid})"), source: std::io::Error::last_os_error() });
        }
        // SAFETY: the kernel just gave us this descriptor.
        Ok(Self { fd: unsafe { OwnedFd::from_raw_fd(fd as i32) }, pid })
    }

    /// The pid.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// True while the process has not exited: a pidfd polls readable once it has. While
    /// this is true the pid cannot have been reused.
    pub fn alive(&self) -> bool {
        let mut p = libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd, zero timeout.
        let n = unsafe { libc::poll(&mut p, 1, 0) };
        n == 0
    }

    /// Sends a signal through the pidfd (pidfd_send_signal), never to a reused pid.
    pub fn signal(&self, sig: i32) -> Result<()> {
        // SAFETY: valid fd, null siginfo.
        let r = unsafe { libc::syscall(libc::SYS_pidfd_send_signal, self.fd.as_raw_fd(), sig, std::ptr::null::<u8>(), 0) };
        if r < 0 {
            return Err(Error::Sys { call: format!("pidfd_send_signal({}, {sig})", self.pid), source: std::io::Error::last_os_error() });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sees_a_child_exit() {
        let mut child = std::process::Command::new("sleep").arg("10").spawn().unwrap();
        let p = PidFd::open(child.id() as i32).unwrap();
        assert!(p.alive());
        p.signal(libc::SIGKILL).unwrap();
        child.wait().unwrap();
        assert!(!p.alive());
        assert!(PidFd::open(-1).is_err());
    }
}
