//! Socket activation (sd_listen_fds(3) without libsystemd): the listening socket a service
//! manager made and passed as fd 3, with `LISTEN_PID` naming this process and `LISTEN_FDS`
//! the count. The manager holds the socket while the daemon restarts, so a client that
//! connects then waits in the listen backlog for the new daemon instead of finding no one.
//!
//! The passed socket is taken only when it is what the daemon would have bound itself: a
//! listening `AF_UNIX` stream socket at the expected path. Anything else is an error that
//! names what was passed and what was expected, never a silent second listener.

use crate::{Error, Result};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixListener;
use std::path::Path;

/// The first passed descriptor (SD_LISTEN_FDS_START).
pub const FIRST_FD: RawFd = 3;

/// The listening socket passed by the service manager for this process, if one was:
/// `Ok(None)` when `LISTEN_PID`/`LISTEN_FDS` are unset or name another process (a child
/// that inherited them). The descriptor is made close-on-exec, so nothing the daemon
/// starts inherits it.
pub fn listener(expected: &Path) -> Result<Option<UnixListener>> {
    let pid = std::env::var("LISTEN_PID").ok();
    let fds = std::env::var("LISTEN_FDS").ok();
    // SAFETY: getpid has no preconditions.
    let me = unsafe { libc::getpid() };
    listener_from(pid.as_deref(), fds.as_deref(), me, FIRST_FD, expected)
}

/// [`listener`] with its inputs given: the two variables, this process's pid and the first
/// descriptor (tests pass one of their own).
pub fn listener_from(pid: Option<&str>, fds: Option<&str>, me: i32, first: RawFd, expected: &Path) -> Result<Option<UnixListener>> {
    let (Some(pid), Some(fds)) = (pid, fds) else { return Ok(None) };
    if pid.trim().parse::<i32>().ok() != Some(me) {
        return Ok(None);
    }
    let bad = |what: String| Error::SysHint {
        call: format!("socket activation (LISTEN_FDS={fds:?})"),
        source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
        hint: format!(
            "{what}; the daemon serves one stream socket at {}: set ListenStream={} in allot.socket, or start the daemon without it",
            expected.display(),
            expected.display()
        ),
    };
    match fds.trim().parse::<u32>() {
        Ok(1) => {}
        Ok(0) => return Ok(None),
        _ => return Err(bad(format!("{fds:?} sockets were passed, and exactly one is wanted"))),
    }
    let fd = first;
    let opt = |name: libc::c_int| -> std::io::Result<libc::c_int> {
        let mut v: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: getsockopt into a local int of the size given.
        let r = unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, name, (&mut v as *mut libc::c_int).cast(), &mut len) };
        if r == 0 {
            Ok(v)
        } else {
            Err(std::io::Error::last_os_error())
        }
    };
    let sys = |call: &str, source| Error::Sys { call: format!("{call}(fd {fd}) of the passed socket"), source };
    let domain = opt(libc::SO_DOMAIN).map_err(|e| sys("getsockopt SO_DOMAIN", e))?;
    let kind = opt(libc::SO_TYPE).map_err(|e| sys("getsockopt SO_TYPE", e))?;
    let listening = opt(libc::SO_ACCEPTCONN).map_err(|e| sys("getsockopt SO_ACCEPTCONN", e))?;
    if domain != libc::AF_UNIX || kind != libc::SOCK_STREAM || listening != 1 {
        return Err(bad(format!(
            "fd {fd} is not a listening unix stream socket (domain {domain}, type {kind}, listening {listening}): Accept=no and ListenStream= are wanted"
        )));
    }
    // SAFETY: fd is a socket this process owns (passed to it, checked above); from here
    // the listener owns it.
    let l = UnixListener::from(unsafe { OwnedFd::from_raw_fd(fd) });
    let at = l.local_addr().map_err(|e| sys("getsockname", e))?;
    if at.as_pathname() != Some(expected) {
        let at = at.as_pathname().map_or("an unnamed or abstract address".to_string(), |p| p.display().to_string());
        // The listener is dropped: its descriptor is closed, the manager keeps its own.
        return Err(bad(format!("the passed socket listens at {at}")));
    }
    // SAFETY: fcntl on a descriptor the listener owns.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } != 0 {
        return Err(sys("fcntl F_SETFD FD_CLOEXEC", std::io::Error::last_os_error()));
    }
    Ok(Some(l))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::{AsRawFd, IntoRawFd};

    fn dir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("allot-activation-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn no_variables_or_another_processes_are_not_activation() {
        let p = Path::new("/run/allot/allot.sock");
        assert!(listener_from(None, Some("1"), 10, 3, p).unwrap().is_none());
        assert!(listener_from(Some("10"), None, 10, 3, p).unwrap().is_none());
        assert!(listener_from(Some("11"), Some("1"), 10, 3, p).unwrap().is_none(), "a child that inherited the variables");
        assert!(listener_from(Some("10"), Some("0"), 10, 3, p).unwrap().is_none());
    }

    #[test]
    fn more_than_one_socket_or_garbage_is_refused_by_name() {
        let p = Path::new("/run/allot/allot.sock");
        for n in ["2", "-1", "x", "99999999999"] {
            let e = listener_from(Some("10"), Some(n), 10, 3, p).unwrap_err().to_string();
            assert!(e.contains(&format!("{n:?}")) && e.contains("exactly one"), "{e}");
        }
    }

    #[test]
    fn the_expected_listening_socket_is_taken_and_made_close_on_exec() {
        let d = dir("ok");
        let path = d.join("s.sock");
        let fd = UnixListener::bind(&path).unwrap().into_raw_fd();
        // SAFETY: clear close-on-exec, as a manager passes it.
        unsafe { libc::fcntl(fd, libc::F_SETFD, 0) };
        let l = listener_from(Some("10"), Some("1"), 10, fd, &path).unwrap().expect("taken");
        assert_eq!(l.as_raw_fd(), fd);
        // SAFETY: F_GETFD on our descriptor.
        assert_eq!(unsafe { libc::fcntl(fd, libc::F_GETFD) } & libc::FD_CLOEXEC, libc::FD_CLOEXEC);
        let _c = std::os::unix::net::UnixStream::connect(&path).unwrap();
        assert!(l.accept().is_ok());
        drop(l);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_socket_elsewhere_or_not_listening_is_refused_naming_both() {
        let d = dir("bad");
        let other = d.join("other.sock");
        let fd = UnixListener::bind(&other).unwrap().into_raw_fd();
        let e = listener_from(Some("10"), Some("1"), 10, fd, &d.join("s.sock")).unwrap_err().to_string();
        assert!(e.contains("other.sock") && e.contains("s.sock") && e.contains("ListenStream="), "{e}");
        // A connected (not listening) stream socket.
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let e = listener_from(Some("10"), Some("1"), 10, a.into_raw_fd(), &d.join("s.sock")).unwrap_err().to_string();
        assert!(e.contains("not a listening unix stream socket"), "{e}");
        // A datagram socket.
        let u = std::os::unix::net::UnixDatagram::unbound().unwrap();
        let e = listener_from(Some("10"), Some("1"), 10, u.as_raw_fd(), &d.join("s.sock")).unwrap_err().to_string();
        assert!(e.contains("not a listening unix stream socket"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
