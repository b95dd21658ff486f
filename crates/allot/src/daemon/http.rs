//! The optional metrics endpoint: `GET /metrics` over HTTP, off unless `[metrics] listen`
//! is set. Only loopback peers may scrape, or with `[metrics] allow` only the peers it
//! lists (required for any other address; the rest get 403: [`crate::config_metrics`]). Each reader gets a thread of its own and a deadline for its whole request;
//! readers still sending are bounded by evicting the oldest, so a trickling reader holds
//! no one else up; the
//! numbers come from the loop (a snapshot of `status` and `show` as a user who owns no job
//! sees them: no other user's processes, unless `privacy.show_other_users`) and are
//! rendered by the same code as `allot metrics` (crate::metrics).

use super::Event;
use crate::config_metrics::{self as allow, Net};
use crate::metrics::{render, Format};
use crate::proto::{ShowView, StatusView};
use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// A snapshot request to the loop.
pub type Snapshot = Sender<(StatusView, ShowView)>;

/// Readers still sending their request head. One more evicts the oldest of them, so
/// trickling readers can never fill the endpoint: a reader that sends its request at
/// once (a Prometheus scrape) always gets in.
const MAX_WAITING: usize = 64;

/// Requests being answered at once; more get 503 at once.
const MAX_SERVING: usize = 8;

/// A reader has this long to send its whole request head, however it is split.
const DEADLINE: Duration = Duration::from_secs(2);

/// A snapshot of the loop is reused for this long: a burst of scrapes costs the loop one.
const FRESH: Duration = Duration::from_millis(200);

/// The serving endpoint; dropping it stops serving and frees the address (a reload that
/// changes `metrics.listen`).
pub struct Endpoint {
    /// The address it serves, as the config gave it.
    pub listen: String,
    stop: Arc<AtomicBool>,
    fd: std::os::fd::OwnedFd,
    allow: Arc<RwLock<Vec<Net>>>,
    /// It listens on a loopback address.
    loopback: bool,
    /// The address bound (the port chosen, for port 0).
    pub bound: std::net::SocketAddr,
}

impl Endpoint {
    /// Takes a reloaded `[metrics] allow` (the address unchanged); Err, and the list in
    /// force kept, if it would leave a non-loopback address open to anyone.
    pub fn set_allow(&self, nets: Vec<Net>) -> anyhow::Result<()> {
        if nets.is_empty() && !self.loopback {
            anyhow::bail!("{}", allow::needs_allow(&self.listen));
        }
        *self.allow.write().unwrap_or_else(|e| e.into_inner()) = nets;
        Ok(())
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accepting thread (accept fails on a listener shut down), which ends.
        // SAFETY: shutdown on a descriptor this endpoint owns (a dup of the listener's).
        unsafe { libc::shutdown(self.fd.as_raw_fd(), libc::SHUT_RDWR) };
    }
}

/// What the reader threads share.
#[derive(Default)]
struct Shared {
    /// Readers still sending their head, oldest first (a clone of each stream, to evict).
    waiting: Mutex<VecDeque<(u64, TcpStream)>>,
    serving: AtomicUsize,
    last: Mutex<Option<(Instant, StatusView, ShowView)>>,
    sampler: Mutex<Option<crate::readings::Sampler>>,
    allow: Arc<RwLock<Vec<Net>>>,
}

/// Binds and serves until the endpoint is dropped (errors are logged; the daemon runs on
/// without metrics).
/// Only peers `nets` allows ([`allow::allowed`]) are answered.
pub fn start(listen: &str, nets: Vec<Net>, tx: Sender<Event>) -> anyhow::Result<Endpoint> {
    let l = TcpListener::bind(listen).map_err(|e| anyhow::anyhow!("metrics.listen {listen:?}: cannot listen: {e}"))?;
    let bound = l.local_addr()?;
    let local = bound.ip().is_loopback();
    if !local && nets.is_empty() {
        // A host name the config check could not judge.
        anyhow::bail!("{}", allow::needs_allow(listen));
    }
    log::info!(
        "metrics at http://{listen}/metrics, for {}",
        if nets.is_empty() { "loopback peers only".to_string() } else { format!("{} allowed networks", nets.len()) }
    );
    let stop = Arc::new(AtomicBool::new(false));
    let fd = l.as_fd().try_clone_to_owned()?;
    let stop2 = stop.clone();
    let allow = Arc::new(RwLock::new(nets));
    let shared = Arc::new(Shared { allow: allow.clone(), ..Shared::default() });
    std::thread::Builder::new().name("allot-metrics".into()).spawn(move || {
        for (n, conn) in (0u64..).zip(l.incoming()) {
            if stop2.load(Ordering::SeqCst) {
                return;
            }
            let Ok(conn) = conn else { continue };
            let Ok(mine) = conn.try_clone() else { continue };
            {
                let mut w = shared.waiting.lock().unwrap_or_else(|e| e.into_inner());
                if w.len() >= MAX_WAITING {
                    if let Some((_, oldest)) = w.pop_front() {
                        let _ = oldest.shutdown(std::net::Shutdown::Both);
                    }
                }
                w.push_back((n, mine));
            }
            let (tx, shared) = (tx.clone(), shared.clone());
            let spawned = std::thread::Builder::new().name("allot-metrics-conn".into()).stack_size(256 * 1024).spawn(move || {
                let _ = serve(conn, n, &tx, &shared);
                shared.waiting.lock().unwrap_or_else(|e| e.into_inner()).retain(|(k, _)| *k != n);
            });
            if spawned.is_err() {
                log::error!("cannot start a thread for a metrics reader");
            }
        }
    })?;
    Ok(Endpoint { listen: listen.to_string(), stop, fd, allow, loopback: local, bound })
}

/// Reads a request head within [`DEADLINE`] for the whole of it.
fn read_head(c: &mut TcpStream) -> std::io::Result<String> {
    let until = Instant::now() + DEADLINE;
    let mut buf = [0u8; 2048];
    let mut n = 0;
    while n < buf.len() {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        c.set_read_timeout(Some(left))?;
        let k = c.read(&mut buf[n..])?;
        if k == 0 {
            break;
        }
        n += k;
        if buf[..n].windows(4).any(|w| w == b"\r\n\r\n") || buf[..n].windows(2).any(|w| w == b"\n\n") {
            break;
        }
    }
    Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
}

fn serve(mut c: TcpStream, n: u64, tx: &Sender<Event>, shared: &Shared) -> std::io::Result<()> {
    c.set_write_timeout(Some(Duration::from_secs(5)))?;
    let head = read_head(&mut c)?;
    // Its request is in: no longer evictable.
    shared.waiting.lock().unwrap_or_else(|e| e.into_inner()).retain(|(k, _)| *k != n);
    let peer = c.peer_addr()?.ip();
    if !allow::allowed(&shared.allow.read().unwrap_or_else(|e| e.into_inner()), peer) {
        return c.write_all(
            b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nthis address is not in the daemon's metrics.allow\n",
        );
    }
    let line = head.lines().next().unwrap_or("");
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    if method != "GET" || !(path == "/metrics" || path.starts_with("/metrics?")) {
        return c.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nallot serves GET /metrics only\n");
    }
    let openmetrics = head.lines().any(|l| l.to_ascii_lowercase().starts_with("accept:") && l.contains("application/openmetrics-text"));
    if shared.serving.fetch_add(1, Ordering::SeqCst) >= MAX_SERVING {
        shared.serving.fetch_sub(1, Ordering::SeqCst);
        return c.write_all(b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nConnection: close\r\n\r\n");
    }
    let r = answer(&mut c, openmetrics, tx, shared);
    shared.serving.fetch_sub(1, Ordering::SeqCst);
    r
}

fn answer(c: &mut TcpStream, openmetrics: bool, tx: &Sender<Event>, shared: &Shared) -> std::io::Result<()> {
    let snapshot = {
        let mut last = shared.last.lock().unwrap_or_else(|e| e.into_inner());
        match &*last {
            Some((at, status, show)) if at.elapsed() < FRESH => Some((status.clone(), show.clone())),
            _ => {
                let (rtx, rrx) = channel();
                if tx.send(Event::Snapshot(rtx)).is_err() {
                    return Ok(());
                }
                let got = rrx.recv_timeout(Duration::from_secs(5)).ok().map(|(st, mut sh)| {
                    super::views::fill(&mut sh);
                    (st, sh)
                });
                *last = got.clone().map(|(st, sh)| (Instant::now(), st, sh));
                got
            }
        }
    };
    let Some((status, show)) = snapshot else {
        return c.write_all(b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\n\r\n");
    };
    let readings = {
        let mut s = shared.sampler.lock().unwrap_or_else(|e| e.into_inner());
        s.get_or_insert_with(|| crate::readings::Sampler::new(&status)).sample(&show)
    };
    let format = if openmetrics { Format::OpenMetrics } else { Format::Prometheus };
    let body = render(&status, &show, &readings, format);
    let head = format!("HTTP/1.1 200 OK\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", format.content_type(), body.len());
    c.write_all(head.as_bytes())?;
    c.write_all(body.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(at: std::net::SocketAddr) -> String {
        let mut c = TcpStream::connect(at).unwrap();
        c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut out = String::new();
        c.read_to_string(&mut out).unwrap();
        out
    }

    /// A scrape from outside `allow` gets 403; a reloaded list takes effect at once; a
    /// non-loopback address with no list is refused.
    #[test]
    fn only_allowed_peers_are_answered() {
        let (tx, rx) = channel::<Event>();
        std::thread::spawn(move || {
            for ev in rx {
                if let Event::Snapshot(reply) = ev {
                    let _ = reply.send((crate::metrics::tests::status(), crate::metrics::tests::show()));
                }
            }
        });
        let nets = |l: &[&str]| allow::parse(&l.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        let ep = start("127.0.0.1:0", nets(&["10.0.0.0/8"]), tx.clone()).unwrap();
        let r = get(ep.bound);
        assert!(r.starts_with("HTTP/1.1 403 Forbidden") && !r.contains("allot_job"), "{r}");
        ep.set_allow(nets(&["127.0.0.0/8"])).unwrap();
        let r = get(ep.bound);
        assert!(r.starts_with("HTTP/1.1 200 OK") && r.contains("allot_job_tickets"), "{r}");
        ep.set_allow(vec![]).unwrap();
        assert!(get(ep.bound).starts_with("HTTP/1.1 200 OK"), "no list: loopback peers");
        let e = start("0.0.0.0:0", vec![], tx).err().expect("a network address without a list is refused").to_string();
        assert!(e.contains("is not a loopback address, so metrics.allow must name who may scrape it"), "{e}");
    }
}
