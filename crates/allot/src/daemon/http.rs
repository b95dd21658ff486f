//! The optional metrics endpoint: `GET /metrics` over HTTP, off unless `[metrics] listen`
//! is set (loopback by default in the docs; any other address is the admin's choice and
//! is logged). One thread serves one request at a time, each within a deadline; the
//! numbers come from the loop (a snapshot of `status` and `show` as root sees them) and
//! are rendered by the same code as `allot metrics` (crate::metrics).

use super::Event;
use crate::metrics::{render, Format};
use crate::proto::{ShowView, StatusView};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc::{channel, Sender};
use std::time::Duration;

/// A snapshot request to the loop.
pub type Snapshot = Sender<(StatusView, ShowView)>;

/// Binds and serves forever (errors are logged; the daemon runs on without metrics).
pub fn start(listen: &str, tx: Sender<Event>) -> anyhow::Result<()> {
    let l = TcpListener::bind(listen).map_err(|e| anyhow::anyhow!("metrics.listen {listen:?}: cannot listen: {e}"))?;
    let local = l.local_addr().map(|a| a.ip().is_loopback()).unwrap_or(false);
    if !local {
        log::warn!("metrics are served on {listen}, which is not a loopback address: anyone who can reach it sees every job's numbers");
    }
    log::info!("metrics at http://{listen}/metrics");
    std::thread::Builder::new().name("allot-metrics".into()).spawn(move || {
        let mut sampler = None;
        for conn in l.incoming().flatten() {
            if serve(conn, &tx, &mut sampler).is_err() {
                continue;
            }
        }
    })?;
    Ok(())
}

fn serve(mut c: TcpStream, tx: &Sender<Event>, sampler: &mut Option<crate::readings::Sampler>) -> std::io::Result<()> {
    c.set_read_timeout(Some(Duration::from_secs(2)))?;
    c.set_write_timeout(Some(Duration::from_secs(5)))?;
    let mut buf = [0u8; 2048];
    let mut n = 0;
    while n < buf.len() {
        let k = c.read(&mut buf[n..])?;
        if k == 0 {
            break;
        }
        n += k;
        if buf[..n].windows(4).any(|w| w == b"\r\n\r\n") || buf[..n].windows(2).any(|w| w == b"\n\n") {
            break;
        }
    }
    let head = String::from_utf8_lossy(&buf[..n]);
    let line = head.lines().next().unwrap_or("");
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    if method != "GET" || !(path == "/metrics" || path.starts_with("/metrics?")) {
        return c.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nallot serves GET /metrics only\n");
    }
    let openmetrics = head.lines().any(|l| l.to_ascii_lowercase().starts_with("accept:") && l.contains("application/openmetrics-text"));
    let (rtx, rrx) = channel();
    if tx.send(Event::Snapshot(rtx)).is_err() {
        return Ok(());
    }
    let Ok((status, show)) = rrx.recv_timeout(Duration::from_secs(5)) else {
        return c.write_all(b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\n\r\n");
    };
    let s = sampler.get_or_insert_with(|| crate::readings::Sampler::new(&status));
    let readings = s.sample(&show);
    let format = if openmetrics { Format::OpenMetrics } else { Format::Prometheus };
    let body = render(&status, &show, &readings, format);
    let head = format!("HTTP/1.1 200 OK\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", format.content_type(), body.len());
    c.write_all(head.as_bytes())?;
    c.write_all(body.as_bytes())
}
