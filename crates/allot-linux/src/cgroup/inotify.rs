//! inotify(7) on cgroup directories: the kernel reports every write(2) to a cgroup file
//! (`fsnotify_modify` runs for cgroupfs as for any file system), so the daemon learns of a
//! value changed from outside without re-reading every file. A write made through another
//! mount of the same hierarchy with its own superblock (a container's cgroup namespace) is
//! not seen: the daemon writes such a value again only when its plan next changes it.

use crate::{Error, Result};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;

/// A file in a watched directory was written (IN_MODIFY).
pub const MODIFY: u32 = libc::IN_MODIFY;
/// A subdirectory or file appeared in a watched directory (IN_CREATE).
pub const CREATE: u32 = libc::IN_CREATE;
/// Something was removed from a watched directory (IN_DELETE).
pub const DELETE: u32 = libc::IN_DELETE;
/// The watched directory itself was removed (IN_DELETE_SELF).
pub const DELETE_SELF: u32 = libc::IN_DELETE_SELF;
/// The watch is gone (IN_IGNORED: removed, or its directory was).
pub const IGNORED: u32 = libc::IN_IGNORED;
/// The kernel's event queue overflowed: events were lost (IN_Q_OVERFLOW).
pub const OVERFLOW: u32 = libc::IN_Q_OVERFLOW;
/// The event is about a directory (IN_ISDIR).
pub const ISDIR: u32 = libc::IN_ISDIR;

/// One event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The watch it belongs to (-1 for an overflow).
    pub wd: i32,
    /// IN_* bits.
    pub mask: u32,
    /// The file's name inside the watched directory, if any.
    pub name: String,
}

/// An inotify instance.
#[derive(Debug)]
pub struct Inotify {
    fd: OwnedFd,
}

impl Inotify {
    /// inotify_init1(IN_CLOEXEC).
    pub fn new() -> Result<Self> {
        // SAFETY: plain syscall.
        let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC) };
        if fd < 0 {
            return Err(Error::Sys { call: "inotify_init1".into(), source: std::io::Error::last_os_error() });
        }
        // SAFETY: the kernel just gave us this descriptor.
        Ok(Self { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    /// Watches `dir` for `mask`; returns the watch descriptor.
    pub fn add(&self, dir: &Path, mask: u32) -> Result<i32> {
        let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).map_err(|_| Error::Sys {
            call: format!("inotify_add_watch({})", dir.display()),
            source: std::io::Error::from_raw_os_error(libc::EINVAL),
        })?;
        // SAFETY: valid fd and NUL-terminated path.
        let wd = unsafe { libc::inotify_add_watch(self.fd.as_raw_fd(), c.as_ptr(), mask) };
        if wd < 0 {
            return Err(Error::Sys { call: format!("inotify_add_watch({})", dir.display()), source: std::io::Error::last_os_error() });
        }
        Ok(wd)
    }

    /// Stops watching (a watch whose directory is gone is already removed: that is fine).
    pub fn remove(&self, wd: i32) {
        // SAFETY: plain syscall; EINVAL for a stale wd is harmless.
        unsafe { libc::inotify_rm_watch(self.fd.as_raw_fd(), wd) };
    }

    /// Blocks until events arrive and appends them.
    pub fn read(&self, out: &mut Vec<Event>) -> Result<()> {
        let mut buf = [0u8; 16 * 1024];
        let n = loop {
            // SAFETY: valid fd and buffer.
            let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n >= 0 {
                break n as usize;
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(Error::Sys { call: "read(inotify)".into(), source: e });
            }
        };
        parse(&buf[..n], out);
        Ok(())
    }

    /// The descriptor, for poll.
    pub fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Parses a buffer of `struct inotify_event`s; a truncated tail is ignored.
pub fn parse(mut b: &[u8], out: &mut Vec<Event>) {
    const HDR: usize = 16;
    while b.len() >= HDR {
        let wd = i32::from_ne_bytes([b[0], b[1], b[2], b[3]]);
        let mask = u32::from_ne_bytes([b[4], b[5], b[6], b[7]]);
        let len = u32::from_ne_bytes([b[12], b[13], b[14], b[15]]) as usize;
        let Some(raw) = b.get(HDR..HDR + len) else { return };
        let name = raw.split(|&c| c == 0).next().map(|n| String::from_utf8_lossy(n).into_owned()).unwrap_or_default();
        out.push(Event { wd, mask, name });
        b = &b[HDR + len..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sees_a_write_in_a_watched_directory() {
        let dir = std::env::temp_dir().join(format!("allot-inotify-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let i = Inotify::new().unwrap();
        let wd = i.add(&dir, MODIFY | CREATE).unwrap();
        std::fs::write(dir.join("f"), "1").unwrap();
        let mut ev = vec![];
        i.read(&mut ev).unwrap();
        assert!(ev.iter().any(|e| e.wd == wd && e.name == "f"), "{ev:?}");
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(i.add(Path::new("/nonexistent/allot"), MODIFY).unwrap_err().to_string().contains("inotify_add_watch(/nonexistent/allot)"));
    }

    #[test]
    fn parse_survives_truncation() {
        let mut b = vec![];
        b.extend(1i32.to_ne_bytes());
        b.extend(MODIFY.to_ne_bytes());
        b.extend(0u32.to_ne_bytes());
        b.extend(8u32.to_ne_bytes());
        b.extend(b"cpu.max\0");
        b.extend(2i32.to_ne_bytes());
        b.extend([0u8; 5]);
        let mut out = vec![];
        parse(&b, &mut out);
        assert_eq!(out, vec![Event { wd: 1, mask: MODIFY, name: "cpu.max".into() }]);
    }
}
