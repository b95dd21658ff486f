//! `allot daemon`: the root process that owns allot's cgroup tree.
//!
//! One event loop owns all state (system76-scheduler's and scx's shape): requests from
//! the socket's connection threads, signals, cgroup changes reported by inotify and
//! (when available) the kernel's process events all arrive as [`Event`]s on one channel;
//! between them the loop runs its tick (`gather → plan → apply`, core/tick.rs) and its scans
//! (placement.rs). Requests are answered in order; no client can hold the loop.

mod adopt;
pub mod applied;
#[cfg(test)]
mod apply_tests;
pub mod audit;
pub mod backend;
pub mod claims;
pub mod core;
mod currency_cap;
pub mod explain;
#[cfg(test)]
mod fake;
#[cfg(test)]
mod fake_slices;
mod features;
mod funding;
pub mod host;
pub mod http;
mod io;
mod io_state;
pub mod limits;
pub mod logger;
mod logout;
pub mod memory;
pub mod observe;
mod oom_audit;
#[cfg(test)]
mod pace_tests;
pub mod placement;
pub mod queue;
pub mod reconcile;
pub mod registry;
pub mod requests;
pub mod scx;
mod scx_backend;
#[cfg(test)]
mod scx_tests;
pub mod server;
mod serving;
pub mod sessions;
pub mod state;
#[cfg(test)]
mod tests;
pub mod tree;
pub mod trust;
pub mod views;
pub mod watch;

use crate::config::Config;
use crate::proto::Reply;
use anyhow::{bail, Context};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    /// Let go of allot's tree for good and exit (`--release`, package removal).
    pub release: bool,
}

/// Everything the loop reacts to.
pub enum Event {
    /// A request, with the caller and where to send the reply (queue.rs).
    Request(queue::Pending),
    /// SIGTERM or SIGINT (stop), SIGHUP (reload the config).
    Signal(i32),
    /// Writes to allot's cgroup files (reconcile.rs).
    Cgroup(Vec<allot_linux::cgroup::inotify::Event>),
    /// The kernel's process events (placement.rs), and when they were read from the kernel.
    Procs(Vec<allot_linux::procevents::ProcEvent>, Instant),
    /// The metrics endpoint wants a snapshot (http.rs).
    Snapshot(http::Snapshot),
}

/// The process events the daemon wants: uid changes always; execs only while the config
/// has rules (a process that execs may now match one). A build host execs a thousand
/// times a second, and each batch of events wakes the loop: without rules the kernel's
/// filter keeps them all out (`allot-lab bench overhead`).
fn event_kinds(cfg: &Config) -> allot_linux::procevents::Kinds {
    use allot_linux::procevents::Kinds;
    if cfg.compiled_rules.is_empty() {
        Kinds::UID
    } else {
        Kinds::UID | Kinds::EXEC
    }
}

/// Subscribes to the kernel's process events (uid changes: logins, su, sudo, cron; execs
/// while there are rules) and starts the thread that forwards them in batches. The
/// batching pause bounds the cost of an event storm to about 200 wakeups a second; the
/// filter in the kernel (a socket BPF program) keeps forks and exits, the bulk of a fork
/// storm, out of user space entirely. Returns the handle that changes the kinds (on a
/// reload), or why there are no events.
fn process_events(tx: Sender<Event>, kinds: allot_linux::procevents::Kinds) -> Result<allot_linux::procevents::Refilter, String> {
    use allot_linux::procevents::Listener;
    let mut l = Listener::open(kinds).map_err(|e| e.to_string())?;
    let refilter = l.refilter().map_err(|e| e.to_string())?;
    let spawned = std::thread::Builder::new().name("allot-procevents".into()).spawn(move || loop {
        let mut evs = vec![];
        match l.recv(&mut evs) {
            Ok(_) => {
                if tx.send(Event::Procs(evs, Instant::now())).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => {
                log::error!("process events stopped ({e}); new processes are found by scanning /proc");
                let _ = tx.send(Event::Procs(vec![allot_linux::procevents::ProcEvent::Lost], Instant::now()));
                return;
            }
        }
    });
    spawned.map(|_| refilter).map_err(|e| e.to_string())
}

/// Blocks the signals the loop handles in this thread (and so in every thread started
/// after), and starts a thread that turns them into events.
fn signals(tx: Sender<Event>) -> anyhow::Result<()> {
    // SAFETY: sigset manipulation on a local set; pthread_sigmask on this thread.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::sigaddset(&mut set, s);
        }
        if libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
            bail!("pthread_sigmask failed");
        }
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        std::thread::Builder::new().name("allot-signals".into()).spawn(move || loop {
            let mut sig: libc::c_int = 0;
            if libc::sigwait(&set, &mut sig) == 0 && tx.send(Event::Signal(sig)).is_err() {
                return;
            }
        })?;
    }
    Ok(())
}

/// Runs the daemon until SIGTERM or SIGINT; SIGHUP reloads the config.
pub fn run(opts: Options) -> anyhow::Result<i32> {
    logger::init();
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("allot daemon must run as root (it writes cgroups and moves processes); try: sudo allot daemon");
    }
    let (tx, rx) = channel::<Event>();
    signals(tx.clone())?;
    // Every connection and every watch holds a descriptor: take all the kernel allows.
    // SAFETY: getrlimit/setrlimit on a local struct.
    unsafe {
        let mut r: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 && r.rlim_cur < r.rlim_max {
            r.rlim_cur = r.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
    }
    // A socket the service manager holds (allot.socket) is served as it is: clients that
    // connect while the daemon restarts wait for it instead of running unmanaged. Taken
    // (and checked) before anything is made, so a wrong one leaves nothing behind.
    let passed = allot_linux::ipc::activation::listener(&opts.socket)?;
    let cfg = Config::load(&opts.config, opts.config_required)?;
    // On a systemd host allot works inside scopes systemd delegates to it (docs/systemd.md).
    let cg = allot_linux::cgroup::detect_host(&opts.cgroup_root, allot_linux::ipc::systemd_bus::holder::Holder::SelfExec)?;
    let state_path = if opts.ephemeral {
        None
    } else {
        std::fs::create_dir_all(&opts.state_dir).with_context(|| format!("create state directory {}", opts.state_dir.display()))?;
        Some(opts.state_dir.join(state::FILE))
    };
    let mut d = core::Daemon::start(cg, Box::<host::Linux>::default(), cfg, state_path, true)?;
    d.serving_mut().set_defer_reads(true);
    if std::fs::create_dir_all(&opts.state_dir).is_ok() {
        d.serving_mut().set_audit(audit::Audit::new(Some(opts.state_dir.join(audit::USERS_FILE))));
    }
    // Under systemd the audit records are journal entries with fields to filter on.
    if allot_linux::ipc::journal::stderr_is_journal() {
        match allot_linux::ipc::journal::Journal::new(allot_linux::ipc::journal::SOCKET) {
            Ok(j) => d.serving_mut().audit_mut().set_journal(j),
            Err(e) => log::warn!("audit records stay text lines on stderr: {e}"),
        }
    }
    if opts.release {
        if UnixStream::connect(&opts.socket).is_ok() {
            bail!("an allot daemon is serving {}; stop it first (systemctl stop allot)", opts.socket.display());
        }
        d.release();
        d.release_scx();
        log::info!("released: {}", d.backend().released());
        return Ok(0);
    }
    if let Some(ino) = d.watch().reader() {
        let tx = tx.clone();
        std::thread::Builder::new().name("allot-inotify".into()).spawn(move || loop {
            let mut evs = vec![];
            if ino.read(&mut evs).is_err() || tx.send(Event::Cgroup(evs)).is_err() {
                return;
            }
        })?;
    }
    let (listener, passed) = match passed {
        Some(l) => {
            log::info!("serving {} (passed by the service manager)", opts.socket.display());
            (l, true)
        }
        None => (bind(&opts.socket)?, false),
    };
    let _ = allot_linux::ipc::peer::set_passcred(std::os::fd::AsFd::as_fd(&listener), true);
    let refused = Arc::new(AtomicU64::new(0));
    let admission = Arc::new(std::sync::Mutex::new(admission_of(&d)));
    {
        let (tx, refused, admission) = (tx.clone(), refused.clone(), admission.clone());
        std::thread::Builder::new().name("allot-accept".into()).spawn(move || server::serve(listener, tx, admission, refused))?;
    }
    // One placer per source (claims.rs), before the first scan.
    let mut claims = claims::Claims::default();
    if d.cfg().users.auto_place {
        claims.apply(d.placement_mut());
    }
    // Events first, then the scan, so no process starts unseen between them.
    let refilter = match process_events(tx.clone(), event_kinds(d.cfg())) {
        Ok(r) => {
            d.placement_mut().set_events(true);
            Some(r)
        }
        Err(e) => {
            log::warn!("no process events ({e}); new processes are found by scanning /proc every {} ms", d.cfg().scan_ms);
            None
        }
    };
    let mut metrics = endpoint(&d, None, &tx);
    log::info!("adopted {} job(s); serving {}", d.desired().jobs.len(), opts.socket.display());
    d.scan();
    let _ = allot_linux::ipc::notify::ready(&format!("{} jobs adopted", d.desired().jobs.len()));
    let watchdog = allot_linux::ipc::notify::watchdog_interval().map(|w| w / 2);
    let mut next_ping = Instant::now();
    let mut next_status = Instant::now();
    let mut next_tick = Instant::now();
    let mut next_scan = Instant::now() + d.scan_interval();
    // allot's sched_ext scheduler, when the config asks for it: heard every 100 ms while
    // its loader runs, so an ejection is noticed well within a second.
    d.sync_scx();
    let mut next_scx = Instant::now();
    let mut queue = queue::Queue::default();
    loop {
        let now = Instant::now();
        if now >= next_tick {
            d.pace_tick(now);
            d.due_execs();
            d.due_later();
            next_tick = now + d.tick_interval();
        }
        if now >= next_scan {
            d.scan();
            next_scan = now + d.scan_interval();
        }
        if now >= next_scx {
            d.poll_scx();
            next_scx = now + Duration::from_millis(100);
        }
        // The loop's own heartbeat: systemd restarts a daemon whose loop stops turning.
        if let Some(w) = watchdog.filter(|_| now >= next_ping) {
            let _ = allot_linux::ipc::notify::watchdog();
            next_ping = now + w;
        }
        if now >= next_status {
            let _ = allot_linux::ipc::notify::status(&format!(
                "{} jobs, {} placed, {} requests",
                d.desired().jobs.len(),
                d.counters().placed,
                d.counters().requests
            ));
            next_status = now + Duration::from_secs(10);
        }
        // Everything that has arrived is taken in at once: process events, signals and
        // cgroup changes are handled now, requests wait in their caller's queue and the
        // loop serves one of them per turn, so events never wait behind requests and no
        // caller's requests wait behind another's (queue.rs).
        let next = if d.scx().pid().is_some() { next_tick.min(next_scan).min(next_scx) } else { next_tick.min(next_scan) };
        let wait = if queue.is_empty() { next.saturating_duration_since(Instant::now()) } else { Duration::ZERO };
        let first = match rx.recv_timeout(wait) {
            Ok(e) => Some(e),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => break,
        };
        let mut stop = false;
        for ev in first.into_iter().chain(std::iter::from_fn(|| rx.try_recv().ok())) {
            match ev {
                Event::Request(p) => {
                    let key = limits::bucket(p.peer.uid, d.placement().excluded_why(p.peer.uid).is_some());
                    queue.push(key, p);
                }
                Event::Signal(libc::SIGHUP) => {
                    reload(&mut d, &opts, refilter.as_ref());
                    d.sync_scx();
                    if d.cfg().users.auto_place {
                        claims.apply(d.placement_mut());
                    }
                    *admission.lock().unwrap_or_else(|e| e.into_inner()) = admission_of(&d);
                    metrics = endpoint(&d, metrics.take(), &tx);
                }
                Event::Signal(_) => stop = true,
                Event::Cgroup(evs) => d.on_cgroup_events(evs),
                Event::Snapshot(reply) => {
                    // Whoever reaches the endpoint sees what a user who owns no job sees.
                    let nobody = trust::Peer { uid: u32::MAX, gid: u32::MAX, groups: vec![], pid: 0, caller: None };
                    if let Ok(show) = d.show(&nobody, None) {
                        let _ = reply.send((d.status(), show));
                    }
                }
                Event::Procs(evs, read) => {
                    d.placement_mut().heard(read);
                    if d.on_process_events(evs) {
                        next_scan = Instant::now();
                    }
                }
            }
        }
        if stop {
            break;
        }
        if let Some(p) = queue.pop().filter(|p| p.claim.take()) {
            let t0 = Instant::now();
            let key = limits::bucket(p.peer.uid, d.placement().excluded_why(p.peer.uid).is_some());
            let r = d.handle(p.req, &p.peer);
            d.serving().limits().charge(key, t0.elapsed());
            let r = match r {
                Ok(v) => Reply::ok(v),
                Err(e) => Reply::err(e),
            };
            // Refused at connect (connection limits) and over the request budget.
            d.counters_mut().limited = refused.load(std::sync::atomic::Ordering::Relaxed) + d.serving().limits().refused();
            let _ = p.reply.send(r);
            // A request may have made a job (new: measured at the next fast tick).
            next_tick = next_tick.min(Instant::now() + d.tick_interval());
        }
    }
    let _ = allot_linux::ipc::notify::stopping();
    d.stop_scx();
    d.shutdown(opts.ephemeral);
    // A passed socket is the manager's: it stays, holding clients for the next start.
    if !passed {
        let _ = std::fs::remove_file(&opts.socket);
    }
    log::info!("stopped");
    Ok(0)
}

/// Who the socket admits, as the config in force says.
fn admission_of(d: &core::Daemon) -> server::Admission {
    let limits = server::ConnLimits { per_user: d.cfg().limits.connections_per_user, total: d.cfg().limits.connections };
    server::Admission { limits, humans: d.placement().humans(), budgets: d.serving().limits().clone() }
}

/// The metrics endpoint the config in force asks for: `old` kept if its address is the
/// same, else dropped (freeing the address) and the new one started.
fn endpoint(d: &core::Daemon, old: Option<http::Endpoint>, tx: &Sender<Event>) -> Option<http::Endpoint> {
    let want = d.cfg().metrics.listen.clone();
    // The config loader checked the list.
    let nets = crate::config_metrics::parse(&d.cfg().metrics.allow).unwrap_or_default();
    if let Some(o) = old {
        if Some(&o.listen) == want.as_ref() {
            if let Err(e) = o.set_allow(nets) {
                log::error!("{e:#}; the endpoint keeps the allow list it had");
            }
            return Some(o);
        }
        log::info!("metrics are no longer served at {} ({})", o.listen, o.bound);
    }
    let listen = want?;
    http::start(&listen, nets, tx.clone()).map_err(|e| log::error!("{e:#}; the daemon runs on without its metrics endpoint")).ok()
}

/// SIGHUP: reload the config. Execs are heard while it is read (the new one may have
/// rules), then only if it has them.
fn reload(d: &mut core::Daemon, opts: &Options, refilter: Option<&allot_linux::procevents::Refilter>) {
    let _ = allot_linux::ipc::notify::reloading();
    if let Some(r) = refilter {
        let _ = r.set(allot_linux::procevents::Kinds::UID | allot_linux::procevents::Kinds::EXEC);
    }
    let outcome = d.reload(opts);
    if let Some(r) = refilter {
        if let Err(e) = r.set(event_kinds(d.cfg())) {
            log::error!(
                "process events: cannot change what is reported ({e}); execs are matched against the rules again after the next reload that succeeds"
            );
        }
    }
    // systemd shows the status line in `systemctl status allot`: a refused reload must not
    // read as a taken one.
    let line = match outcome {
        Ok(()) => format!("config {} reloaded", opts.config.display()),
        Err(e) => format!("reload REFUSED, the config in force is kept: {}", e.chars().take(200).collect::<String>()),
    };
    let _ = allot_linux::ipc::notify::ready(&line);
}

fn bind(path: &std::path::Path) -> anyhow::Result<UnixListener> {
    if let Some(dir) = path.parent().filter(|d| !d.exists()) {
        std::fs::create_dir_all(dir).with_context(|| format!("create socket directory {}", dir.display()))?;
        // Every user must reach the socket, whatever the umask (the unit's is 0077).
        std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .with_context(|| format!("chmod 0755 {}", dir.display()))?;
    }
    if path.exists() {
        if UnixStream::connect(path).is_ok() {
            bail!("another allot daemon is already serving {}; stop it first", path.display());
        }
        std::fs::remove_file(path).with_context(|| format!("remove stale socket {}", path.display()))?;
    }
    let l = UnixListener::bind(path).with_context(|| format!("bind {}", path.display()))?;
    // Anyone may connect; every request is checked against the caller.
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o666))?;
    Ok(l)
}
