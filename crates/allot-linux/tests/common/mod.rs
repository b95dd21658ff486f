//! Helpers shared by allot-linux's kernel tests: temporary directories, the test binary
//! re-run as a client in another role (and as another uid), kernel version.
#![allow(dead_code)]

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A uid with no passwd entry, for unprivileged clients.
pub const OTHER_UID: u32 = 61001;
/// The environment variable that tells a re-run test binary which client to play.
pub const ROLE: &str = "ALLOT_TEST_ROLE";

/// Kernel tests need root: they fail (never skip) without it.
pub fn require_root() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "these kernel tests need root (clients run as uid {OTHER_UID}, namespaces are made): run them with sudo"
    );
}

/// A directory under /tmp, removed on drop; mode 0755 so other uids can reach sockets in it.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// Makes one named after `tag`.
    pub fn new(tag: &str) -> Self {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
        let p = PathBuf::from(format!("/tmp/allot-{tag}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&p).unwrap();
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        Self(p)
    }
    /// A path inside.
    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A listening socket anyone may connect to, with SO_PASSCRED set as the daemon should.
pub fn listener(dir: &TempDir, passcred: bool) -> (UnixListener, PathBuf) {
    let path = dir.join("sock");
    let l = UnixListener::bind(&path).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o666)).unwrap();
    allot_linux::ipc::peer::set_passcred(std::os::fd::AsFd::as_fd(&l), passcred).unwrap();
    (l, path)
}

/// accept() that gives up (panics) after 20 s instead of hanging the suite; the accepted
/// socket has a 10 s read timeout.
pub fn accept(l: &UnixListener) -> UnixStream {
    l.set_nonblocking(true).unwrap();
    let t0 = Instant::now();
    loop {
        match l.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                return s;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && t0.elapsed() < Duration::from_secs(20) => {
                std::thread::sleep(Duration::from_millis(5))
            }
            Err(e) => panic!("accept: {e}: the client never connected (see its stderr)"),
        }
    }
}

/// The role this run of the test binary plays, if it was started as a client.
pub fn role() -> Option<String> {
    std::env::var(ROLE).ok()
}

/// This test binary again, running only `test` (which sees `role`), as `uid` with
/// supplementary `groups` when given (set in the child before exec). `--include-ignored`:
/// the root tests are `#[ignore]`d for a plain `cargo test`, and the client is one of them.
pub fn client(test: &str, role: &str, uid: Option<u32>, groups: &[u32], env: &[(&str, String)]) -> Command {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args([test, "--exact", "--include-ignored", "--nocapture", "--test-threads=1"]).env(ROLE, role).stdout(Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    if let Some(uid) = uid {
        let groups: Vec<libc::gid_t> = if groups.is_empty() { vec![uid] } else { groups.to_vec() };
        // SAFETY: only async-signal-safe calls between fork and exec; `groups` was
        // allocated before the fork.
        unsafe {
            c.pre_exec(move || {
                if libc::setgroups(groups.len(), groups.as_ptr()) != 0 || libc::setresgid(uid, uid, uid) != 0 || libc::setresuid(uid, uid, uid) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    c
}

/// (major, minor) of the running kernel.
pub fn kernel() -> (u32, u32) {
    let r = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let mut it = r.trim().split(|c: char| !c.is_ascii_digit()).filter_map(|x| x.parse().ok());
    (it.next().unwrap(), it.next().unwrap())
}

/// True once every copy of a pipe's write end is closed (the read end polls HUP): how the
/// tests see that descriptors handed to the daemon side were closed, not leaked.
pub fn write_ends_closed(read_end: &OwnedFd, within: Duration) -> bool {
    let t0 = Instant::now();
    loop {
        let mut p = libc::pollfd { fd: read_end.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut p, 1, 20) };
        if p.revents & libc::POLLHUP != 0 {
            return true;
        }
        if t0.elapsed() > within {
            return false;
        }
    }
}

/// A pipe: (read end, write end).
pub fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: fds has room for two descriptors.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: the kernel just gave us these.
    unsafe { (std::os::fd::FromRawFd::from_raw_fd(fds[0]), std::os::fd::FromRawFd::from_raw_fd(fds[1])) }
}

/// Waits until `pid` is a zombie (exited, not reaped).
pub fn wait_zombie(pid: u32) {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(10) {
        if allot_linux::process::procfs::stat(pid as i32).map(|s| s.state == 'Z').unwrap_or(false) {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("pid {pid} did not exit");
}

/// The socket path a client role was given.
pub fn sock_env() -> PathBuf {
    Path::new(&std::env::var("SOCK").expect("SOCK")).to_path_buf()
}
