//! allot's kernel boundary: thin, typed readers and writers for the files and calls
//! allot uses. No policy lives here; every error names the path or call that failed.
//!
//! Four domains, a module each:
//!
//! | module | domain |
//! |---|---|
//! | [`cgroup`] | the cgroup backends (v1, v2, and systemd's delegation) behind one trait, [`cgroup::CpuController`]; the memory controller, a cgroup's statistics, login sessions' cgroups, inotify on allot's files, block devices and whether they honour I/O weights |
//! | [`process`] | processes and scheduling: /proc, pidfds, sched_setattr(2), sched_ext detection, credentials and machine-wide CPU time, users and groups |
//! | [`ipc`] | other programs: the D-Bus client, systemd and logind over it, peer credentials, sd_notify, socket activation, the journal |
//! | [`procevents`] | the kernel's process events (the proc connector over netlink) |
//!
//! Beside them: [`reread`] (kernel files kept open and read again with pread(2)), closing
//! descriptors off the caller's thread (`closer.rs`), and here [`read`], [`write()`],
//! [`read_u64`], [`ncpu`] and the one [`Error`].
#![deny(missing_docs)]

pub mod cgroup;
mod closer;
pub mod ipc;
pub mod process;
pub mod procevents;
pub mod reread;

use std::path::{Path, PathBuf};

/// Everything that can go wrong at the kernel boundary.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read or written.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done ("read", "write", "mkdir", ...).
        op: &'static str,
        /// The path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A file's content did not parse.
    #[error("{path}: cannot parse {what}: {text:?}")]
    Parse {
        /// The path.
        path: PathBuf,
        /// What was expected.
        what: &'static str,
        /// The offending text (shortened).
        text: String,
    },
    /// A system call failed.
    #[error("{call}: {source}")]
    Sys {
        /// The call and its argument, e.g. "pidfd_open(123)".
        call: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A socket peer's claimed identity did not hold up (see the `peer` module); the
    /// message says what the peer sent and what was expected. Refuse the request.
    #[error("client identity refused: {0}")]
    Identity(String),
    /// A client's message was refused before it ended ([`ipc::peer::recv_message`]): the
    /// [`ipc::peer::Refusal`] says which way, so a server answers by kind, not by wording.
    #[error("client message refused: {0}")]
    Message(ipc::peer::Refusal),
    /// A system call failed in a way the caller can act on: `hint` says what to do.
    #[error("{call}: {source}; {hint}")]
    SysHint {
        /// The call, e.g. "bind(NETLINK_CONNECTOR, group CN_IDX_PROC)".
        call: String,
        /// The cause.
        #[source]
        source: std::io::Error,
        /// What it means and what to do, e.g. "before Linux 6.6 ... run as root".
        hint: String,
    },
    /// A value given to a writer is not one the receiving side takes: `what` names the
    /// value, `allowed` says what is.
    #[error("{what} {value:?} is not allowed: it must be {allowed}")]
    Invalid {
        /// What the value is, e.g. "journal field name".
        what: &'static str,
        /// The value (shortened).
        value: String,
        /// What is allowed.
        allowed: &'static str,
    },
    /// No usable cgroup cpu controller.
    #[error("no usable cgroup cpu controller: {0}")]
    NoCpuController(String),
    /// A D-Bus method call was refused: `name` and `message` are the peer's (systemd's or
    /// logind's) words; `hint` says what to do.
    #[error("D-Bus call {method}({unit}) failed: {name}: {message}; {hint}")]
    Bus {
        /// The method, e.g. "StartTransientUnit".
        method: &'static str,
        /// The unit (or other argument) it was about.
        unit: String,
        /// The error's name, e.g. "org.freedesktop.systemd1.NoSuchUnit".
        name: String,
        /// The error's message.
        message: String,
        /// What it means and what to do.
        hint: String,
    },
}

impl Error {
    /// The io::ErrorKind underneath, if any (e.g. NotFound when a process exited).
    pub fn io_kind(&self) -> Option<std::io::ErrorKind> {
        match self {
            Error::Io { source, .. } | Error::Sys { source, .. } | Error::SysHint { source, .. } => Some(source.kind()),
            _ => None,
        }
    }
    /// True when the failure means "the process or file is gone".
    pub fn is_gone(&self) -> bool {
        match self {
            Error::Io { source, .. } | Error::Sys { source, .. } => {
                source.kind() == std::io::ErrorKind::NotFound || source.raw_os_error() == Some(libc::ESRCH)
            }
            // systemd names errno errors "System.Error.<ERRNO>"; the bus daemon has its own.
            Error::Bus { name, .. } => {
                name == "System.Error.ESRCH"
                    || name == "org.freedesktop.DBus.Error.UnixProcessIdUnknown"
                    || name == "org.freedesktop.systemd1.NoSuchProcess"
            }
            _ => false,
        }
    }
}

/// Result with this crate's error.
pub type Result<T> = std::result::Result<T, Error>;

/// Reads a whole file to a string, naming the path on failure.
///
/// Kernel files report no size, so std's `read_to_string` (a statx for a size hint, then
/// a 32-byte probe read) costs two system calls more than this: open, read into a page,
/// read again for the end, close. The daemon reads a few hundred small files a second
/// while jobs run (`allot-lab bench overhead`), so the difference shows.
pub fn read(path: impl AsRef<Path>) -> Result<String> {
    let path = path.as_ref();
    let io = |source| Error::Io { op: "read", path: path.into(), source };
    let f = std::fs::File::open(path).map_err(io)?;
    reread::read_from(&f, false).map_err(io)
}

/// Writes a string to a kernel file in one write(2), naming the path on failure.
pub fn write(path: impl AsRef<Path>, value: &str) -> Result<()> {
    use std::io::Write;
    let path = path.as_ref();
    let io = |source| Error::Io { op: "write", path: path.into(), source };
    let mut f = std::fs::OpenOptions::new().write(true).open(path).map_err(io)?;
    f.write_all(value.as_bytes()).map_err(io)
}

/// Parses a trimmed number from a kernel file.
pub fn read_u64(path: impl AsRef<Path>) -> Result<u64> {
    let path = path.as_ref();
    let s = read(path)?;
    s.trim().parse().map_err(|_| Error::Parse { path: path.into(), what: "an integer", text: s.chars().take(80).collect() })
}

/// CPUs online on the machine (not this process's affinity or cgroup quota, which
/// `std::thread::available_parallelism` would count).
pub fn ncpu() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n > 0 {
        n as usize
    } else {
        1
    }
}
