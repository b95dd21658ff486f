//! pidfd: a handle on a process that cannot be confused with a later process that reuses
//! its pid. allot opens one before it acts on a pid it was told about, checks identity
//! through it, and checks it is still alive right before acting (docs/trust.md).

use crate::{Error, Result};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

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

    /// Adopts a descriptor someone handed over (SCM_RIGHTS, SO_PEERPIDFD) after checking
    /// that it really is a process pidfd: `/proc/self/fd/N` must read `anon_inode:[pidfd]`
    /// (a name no file path can have: paths start with `/`), its fdinfo must carry a
    /// `Pid:` line, and it must not be a thread pidfd (PIDFD_THREAD, 6.9+, shows as
    /// O_EXCL in `flags:`), whose poll reports one thread's exit, not the process's.
    /// The pid is read from fdinfo, in the pid namespace of this process's /proc.
    ///
    /// Fails, naming the fd and what it is instead, when it is not a pidfd; fails with
    /// ESRCH (`is_gone()`) when the process has been reaped (fdinfo then says `Pid: -1`).
    /// A zombie (exited, not yet reaped) still has its pid: check [`PidFd::alive`].
    /// A refused descriptor is closed off this thread ([`crate::ipc::peer::discard_fds`]):
    /// closing what a hostile peer sent can block (see the `peer` module).
    pub fn from_fd(fd: OwnedFd) -> Result<Self> {
        let raw = fd.as_raw_fd();
        let call = format!("PidFd::from_fd(fd {raw})");
        let refuse = |fd: OwnedFd, why: String| {
            crate::closer::discard_fds(vec![fd]);
            Err(Error::Sys { call: call.clone(), source: std::io::Error::new(std::io::ErrorKind::InvalidInput, why) })
        };
        let link = std::fs::read_link(format!("/proc/self/fd/{raw}")).map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
        if link != "anon_inode:[pidfd]" {
            let what = if link.is_empty() { "unknown (is /proc mounted?)".to_string() } else { link };
            return refuse(fd, format!("not a pidfd but {what}; send a pidfd from pidfd_open(getpid(), 0)"));
        }
        let info = match fdinfo(fd.as_fd()) {
            Some(i) => i,
            None => return refuse(fd, "cannot read /proc/self/fdinfo for it; is /proc mounted?".into()),
        };
        if info.flags.is_some_and(|f| f & libc::O_EXCL as u32 != 0) {
            return refuse(fd, "a thread pidfd (PIDFD_THREAD); send a process pidfd from pidfd_open(getpid(), 0)".into());
        }
        match info.pid {
            Some(pid) if pid > 0 => Ok(Self { fd, pid }),
            Some(_) => {
                crate::closer::discard_fds(vec![fd]);
                Err(Error::Sys { call, source: std::io::Error::from_raw_os_error(libc::ESRCH) })
            }
            None => refuse(fd, "its fdinfo has no Pid: line".into()),
        }
    }

    /// The descriptor, borrowed (to send it, poll it, or pass it to pidfd calls).
    pub fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
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

impl AsFd for PidFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// The lines of /proc/self/fdinfo/FD that identify a pidfd.
struct FdInfo {
    /// `Pid:`; -1 once the process has been reaped.
    pid: Option<i32>,
    /// `flags:` (octal open flags).
    flags: Option<u32>,
}

fn fdinfo(fd: BorrowedFd) -> Option<FdInfo> {
    let s = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_raw_fd())).ok()?;
    Some(parse_fdinfo(&s))
}

fn parse_fdinfo(s: &str) -> FdInfo {
    let field = |key: &str| s.lines().find_map(|l| l.strip_prefix(key)).map(str::trim);
    FdInfo { pid: field("Pid:").and_then(|v| v.parse().ok()), flags: field("flags:").and_then(|v| u32::from_str_radix(v, 8).ok()) }
}

/// The pid a pidfd refers to, from the `Pid:` line of /proc/self/fdinfo/FD (Linux 5.3+).
/// None when the descriptor has no such line (not a pidfd) or the process has been
/// reaped (the kernel then writes -1). A zombie still reports its pid: a pid from here
/// is only safe to act on while [`PidFd::alive`] holds.
pub fn pidfd_pid(fd: BorrowedFd) -> Option<i32> {
    fdinfo(fd)?.pid.filter(|&p| p > 0)
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

    #[test]
    fn fdinfo_lines() {
        let i = parse_fdinfo("pos:\t0\nflags:\t02000002\nmnt_id:\t4\nino:\t15975\nPid:\t15974\nNSpid:\t15974\n");
        assert_eq!((i.pid, i.flags), (Some(15974), Some(0o2000002)));
        assert_eq!(parse_fdinfo("pos:\t0\nflags:\t02000002\nPid:\t-1\nNSpid:\t-1\n").pid, Some(-1));
        assert_eq!(parse_fdinfo("pos:\t0\nflags:\t02100000\nmnt_id:\t22\n").pid, None);
    }

    #[test]
    fn adopts_pidfds_and_refuses_the_rest() {
        let me = PidFd::open(std::process::id() as i32).unwrap();
        assert_eq!(pidfd_pid(me.as_fd()), Some(std::process::id() as i32));
        let again = PidFd::from_fd(me.fd.try_clone().unwrap()).unwrap();
        assert_eq!(again.pid(), me.pid());
        let dir: OwnedFd = std::fs::File::open("/proc/self").unwrap().into();
        assert_eq!(pidfd_pid(dir.as_fd()), None);
        let e = PidFd::from_fd(dir).unwrap_err().to_string();
        assert!(e.contains("not a pidfd"), "{e}");
    }
}
