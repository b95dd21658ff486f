//! `allot daemon`: the root process that owns allot's cgroup tree.
//!
//! The loop is a visible pipeline: every `tick_ms` it observes each job's usage and
//! reaps empty jobs; every `scan_ms` it places new user processes; requests arrive on
//! their own threads and are served under the same lock, so a request is applied
//! whole or not at all, and a clean stop waits for the one in flight.

pub mod core;
pub mod state;

use crate::config::Config;
use crate::proto::{Reply, Request, MAX_REQUEST};
use anyhow::{bail, Context};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

static STOP: AtomicBool = AtomicBool::new(false);
/// Connections served at once; more are told to retry.
const MAX_CLIENTS: usize = 64;
/// A client has this long to send its request.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

extern "C" fn on_stop(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// Where the daemon keeps things.
#[derive(Debug, Clone)]
pub struct Options {
    /// Config file.
    pub config: PathBuf,
    /// The config was named explicitly (a missing file is then an error).
    pub config_required: bool,
    /// Socket path.
    pub socket: PathBuf,
    /// State directory.
    pub state_dir: PathBuf,
    /// cgroup root name.
    pub cgroup_root: String,
    /// Tests and benchmarks: keep no state, take the tree down on stop.
    pub ephemeral: bool,
}

/// The credentials of the process at the other end of a Unix socket.
pub fn peer_cred(s: &UnixStream) -> std::io::Result<core::Peer> {
    let mut c = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: valid fd and out-buffer of the right size.
    let r = unsafe { libc::getsockopt(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_PEERCRED, &mut c as *mut _ as *mut libc::c_void, &mut len) };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(core::Peer { pid: c.pid, uid: c.uid, gid: c.gid })
}

fn log(msg: impl std::fmt::Display) {
    eprintln!("allot daemon: {msg}");
}

/// Runs the daemon until SIGTERM or SIGINT.
pub fn run(opts: Options) -> anyhow::Result<i32> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("allot daemon must run as root (it writes cgroups and moves processes); try: sudo allot daemon");
    }
    let cfg = Config::load(&opts.config, opts.config_required)?;
    let cg = allot_linux::cgroup::detect(&opts.cgroup_root)?;
    let state_path = if opts.ephemeral {
        None
    } else {
        std::fs::create_dir_all(&opts.state_dir).with_context(|| format!("create state directory {}", opts.state_dir.display()))?;
        Some(opts.state_dir.join("state.json"))
    };
    let (tick, scan) = (Duration::from_millis(cfg.tick_ms), Duration::from_millis(cfg.scan_ms));
    let core = core::Core::start(cg, cfg, state_path)?;
    log(format_args!("adopted {} job(s); serving {}", core.job_count(), opts.socket.display()));
    let core = Arc::new(Mutex::new(core));

    let listener = bind(&opts.socket)?;
    // SAFETY: installing handlers that only store to an atomic; ignoring SIGPIPE.
    unsafe {
        libc::signal(libc::SIGTERM, on_stop as extern "C" fn(libc::c_int) as usize);
        libc::signal(libc::SIGINT, on_stop as extern "C" fn(libc::c_int) as usize);
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    let clients = Arc::new(AtomicUsize::new(0));
    {
        let core = core.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                if clients.fetch_add(1, Ordering::SeqCst) >= MAX_CLIENTS {
                    clients.fetch_sub(1, Ordering::SeqCst);
                    let _ = reply(&conn, &Reply::err("the daemon is busy (too many clients); try again"));
                    continue;
                }
                let (core, clients) = (core.clone(), clients.clone());
                std::thread::spawn(move || {
                    serve(conn, &core);
                    clients.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
    }

    let (mut next_tick, mut next_scan) = (Instant::now(), Instant::now());
    while !STOP.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now >= next_scan {
            core.lock().unwrap_or_else(|e| e.into_inner()).scan();
            next_scan = now + scan;
        }
        if now >= next_tick {
            core.lock().unwrap_or_else(|e| e.into_inner()).tick();
            next_tick = now + tick;
        }
        let wake = next_tick.min(next_scan).saturating_duration_since(Instant::now());
        std::thread::sleep(wake.min(Duration::from_millis(200)));
    }
    let mut c = core.lock().unwrap_or_else(|e| e.into_inner());
    c.shutdown(opts.ephemeral);
    let _ = std::fs::remove_file(&opts.socket);
    log("stopped");
    Ok(0)
}

fn bind(path: &std::path::Path) -> anyhow::Result<UnixListener> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("create socket directory {}", dir.display()))?;
    }
    if path.exists() {
        if UnixStream::connect(path).is_ok() {
            bail!("another allot daemon is already serving {}; stop it first", path.display());
        }
        std::fs::remove_file(path).with_context(|| format!("remove stale socket {}", path.display()))?;
    }
    let l = UnixListener::bind(path).with_context(|| format!("bind {}", path.display()))?;
    // Anyone may connect; every request is checked against the caller's uid.
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o666))?;
    Ok(l)
}

fn reply(mut s: &UnixStream, r: &Reply) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(r).unwrap_or_default();
    line.push(b'\n');
    s.write_all(&line)
}

/// Serves one connection: one request line, one reply line.
fn serve(conn: UnixStream, core: &Mutex<core::Core>) {
    let Ok(peer) = peer_cred(&conn) else { return };
    let _ = conn.set_read_timeout(Some(READ_TIMEOUT));
    let _ = conn.set_write_timeout(Some(READ_TIMEOUT));
    let mut line = Vec::new();
    let mut r = BufReader::new((&conn).take(MAX_REQUEST as u64 + 1));
    match r.read_until(b'\n', &mut line) {
        Ok(0) => return,
        Ok(_) => {}
        Err(_) => return, // timed out or disconnected mid-request: nothing was done
    }
    if line.len() > MAX_REQUEST {
        let _ = reply(&conn, &Reply::err(format!("request larger than {MAX_REQUEST} bytes refused")));
        return;
    }
    if line.last() != Some(&b'\n') {
        return; // disconnected mid-request
    }
    let req: Request = match serde_json::from_slice(&line) {
        Ok(r) => r,
        Err(e) => {
            let _ = reply(&conn, &Reply::err(format!("malformed request: {e}; send one JSON object per line, e.g. {{\"op\":\"status\"}}")));
            return;
        }
    };
    let out = core.lock().unwrap_or_else(|e| e.into_inner()).handle(req, &peer);
    let _ = reply(&conn, &out);
}
