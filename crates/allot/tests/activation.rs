//! Socket activation as systemd does it (allot.socket): the daemon serves the listening
//! socket it is passed as fd 3 with `LISTEN_PID`/`LISTEN_FDS`, leaves it in place when it
//! stops, so a client that connects while no daemon runs waits in the socket's queue and
//! is answered by the next daemon; a passed socket that is not the one the daemon serves
//! is refused by name. Each daemon is ephemeral on a uniquely named cgroup root (its tree
//! is removed at SIGTERM) and is stopped by its pid.

mod common;

use common::*;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Setup {
    dir: PathBuf,
    root: String,
}

impl Setup {
    fn new(name: &str) -> Self {
        let root = format!("allot-test-act-{}-{name}", std::process::id());
        let dir = std::env::temp_dir().join(&root);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("allot.toml"), "[users]\nauto_place = false\n").unwrap();
        Setup { dir, root }
    }

    fn socket(&self) -> PathBuf {
        self.dir.join("allot.sock")
    }

    /// `allot daemon` with `listener` as fd 3 and the variables naming it, as systemd
    /// starts a socket-activated service (`LISTEN_PID` is the daemon's own pid: the shell
    /// sets it to `$$` and execs).
    fn daemon(&self, listener: &UnixListener, socket: &Path) -> Child {
        let fd = listener.as_raw_fd();
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.dir.join("daemon.log")).unwrap();
        let mut c = Command::new("sh");
        c.args(["-c", "LISTEN_PID=$$ LISTEN_FDS=1 exec \"$0\" \"$@\""])
            .arg(exe())
            .args(["daemon", "--ephemeral", "--cgroup-root", &self.root])
            .arg("--socket")
            .arg(socket)
            .arg("--state-dir")
            .arg(&self.dir)
            .arg("--config")
            .arg(self.dir.join("allot.toml"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        // SAFETY: dup2 and fcntl only, between fork and exec. dup2 clears close-on-exec on
        // fd 3; when the listener is fd 3 already, it is cleared by hand.
        unsafe {
            c.pre_exec(move || {
                let r = if fd == 3 { libc::fcntl(3, libc::F_SETFD, 0) } else { libc::dup2(fd, 3) };
                if r < 0 {
                    Err(std::io::Error::last_os_error())
                } else {
                    Ok(())
                }
            });
        }
        c.spawn().unwrap()
    }

    fn status(&self) -> Command {
        let mut c = Command::new(exe());
        c.arg("--socket").arg(self.socket()).arg("status");
        c
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("daemon.log")).unwrap_or_default()
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Stops a daemon by its pid (SIGTERM: an ephemeral daemon takes its tree down) and reaps it.
fn stop(mut d: Child) -> std::process::ExitStatus {
    // SAFETY: signalling our own child by pid.
    unsafe { libc::kill(d.id() as i32, libc::SIGTERM) };
    let end = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(st) = d.try_wait().unwrap() {
            return st;
        }
        if Instant::now() > end {
            let _ = d.kill();
            panic!("the daemon did not stop within 20 s of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn wait_answering(s: &Setup) {
    let end = Instant::now() + Duration::from_secs(20);
    while !s.status().stdout(Stdio::null()).stderr(Stdio::null()).status().unwrap().success() {
        assert!(Instant::now() < end, "the daemon did not answer on the passed socket within 20 s:\n{}", s.log());
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn a_passed_socket_is_served_and_holds_clients_while_no_daemon_runs() {
    require_root();
    let _s = serial();
    let s = Setup::new("held");
    let listener = UnixListener::bind(s.socket()).unwrap();
    let d = s.daemon(&listener, &s.socket());
    wait_answering(&s);
    assert!(s.log().contains("passed by the service manager"), "the daemon says it serves the passed socket:\n{}", s.log());
    assert!(stop(d).success(), "a clean stop:\n{}", s.log());
    assert!(s.socket().exists(), "the passed socket's file is the manager's: the daemon leaves it");

    // No daemon runs: a client connects (the manager's socket queues it) and waits.
    let t0 = Instant::now();
    let client = s.status().stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let d = s.daemon(&listener, &s.socket());
    let out = client.wait_with_output().unwrap();
    eprintln!("the client waited {:.1} s for the next daemon", t0.elapsed().as_secs_f64());
    assert!(out.status.success(), "a client that came while no daemon ran is answered by the next one: {}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("allot"), "a status reply");
    assert!(t0.elapsed() >= Duration::from_millis(1500), "it was answered only once a daemon ran");
    assert!(stop(d).success());
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn a_passed_socket_elsewhere_is_refused_naming_both() {
    require_root();
    let _s = serial();
    let s = Setup::new("elsewhere");
    let other = s.dir.join("other.sock");
    let listener = UnixListener::bind(&other).unwrap();
    let mut d = s.daemon(&listener, &s.socket());
    let end = Instant::now() + Duration::from_secs(20);
    let st = loop {
        if let Some(st) = d.try_wait().unwrap() {
            break st;
        }
        assert!(Instant::now() < end, "the daemon should refuse the socket and exit");
        std::thread::sleep(Duration::from_millis(50));
    };
    let log = s.log();
    assert!(!st.success(), "refused: {log}");
    assert!(log.contains("other.sock") && log.contains("allot.sock") && log.contains("ListenStream="), "names both: {log}");
    assert!(!s.socket().exists(), "and binds no socket of its own");
    // Its tree: an ephemeral daemon that fails at start leaves none (checked by name).
    let left: Vec<_> = ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/unified"]
        .iter()
        .map(|m| Path::new(m).join(&s.root))
        .filter(|p| p.exists())
        .collect();
    assert!(left.is_empty(), "no cgroup of the refused daemon's is left: {left:?}");
}
