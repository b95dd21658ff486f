//! `allot-lab flood` (hidden): a hostile client, for tests. It holds idle connections open,
//! trickles one byte a second into others, and hammers the daemon with requests, all at
//! once, then prints what the daemon did to it as one JSON line. The daemon must keep
//! serving everyone else meanwhile (crates/allot/tests/attacks.rs).

use clap::Args;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `allot-lab flood`.
#[derive(Debug, Args)]
pub struct FloodArgs {
    /// The daemon's socket.
    #[arg(long)]
    pub target: PathBuf,
    /// Connections opened and left silent.
    #[arg(long, default_value_t = 64)]
    pub idle: usize,
    /// Connections that send one byte a second and never finish a request.
    #[arg(long, default_value_t = 8)]
    pub trickle: usize,
    /// Threads sending requests back to back.
    #[arg(long, default_value_t = 2)]
    pub hammer: usize,
    /// How long, e.g. 8s.
    #[arg(long, default_value = "8s")]
    pub duration: String,
}

#[derive(Default)]
struct Counts {
    idle_open: AtomicU64,
    refused_at_connect: AtomicU64,
    trickles_cut: AtomicU64,
    requests: AtomicU64,
    requests_refused: AtomicU64,
}

/// True when the daemon answered a fresh connection at once with a refusal line.
fn refused_now(mut s: &UnixStream) -> bool {
    let _ = s.set_read_timeout(Some(Duration::from_millis(20)));
    let mut b = [0u8; 512];
    matches!(s.read(&mut b), Ok(n) if n > 0 && String::from_utf8_lossy(&b[..n]).contains("\"ok\":false"))
}

/// Runs the flood; prints a JSON summary.
pub fn run(a: FloodArgs) -> anyhow::Result<i32> {
    let secs = allot_model::duration::parse("--duration", &a.duration, Some(allot_model::duration::Unit::S))?;
    let until = Instant::now() + secs;
    let c = Arc::new(Counts::default());
    let mut held = vec![];
    for _ in 0..a.idle {
        match UnixStream::connect(&a.target) {
            Ok(s) if !refused_now(&s) => {
                c.idle_open.fetch_add(1, Ordering::Relaxed);
                held.push(s);
            }
            _ => {
                c.refused_at_connect.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    let mut threads = vec![];
    for _ in 0..a.trickle {
        let (t, c) = (a.target.clone(), c.clone());
        threads.push(std::thread::spawn(move || {
            while Instant::now() < until {
                let Ok(mut s) = UnixStream::connect(&t) else { continue };
                // A request that never ends: one byte a second.
                while Instant::now() < until && s.write_all(b" ").is_ok() {
                    std::thread::sleep(Duration::from_secs(1));
                }
                c.trickles_cut.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for _ in 0..a.hammer {
        let (t, c) = (a.target.clone(), c.clone());
        threads.push(std::thread::spawn(move || {
            while Instant::now() < until {
                let Ok(mut s) = UnixStream::connect(&t) else { continue };
                let _ = s.set_read_timeout(Some(Duration::from_secs(6)));
                if s.write_all(b"{\"v\":3,\"op\":\"show\"}\n").is_err() {
                    continue;
                }
                let mut r = String::new();
                let _ = s.read_to_string(&mut r);
                c.requests.fetch_add(1, Ordering::Relaxed);
                if r.contains("\"ok\":false") {
                    c.requests_refused.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    for t in threads {
        let _ = t.join();
    }
    drop(held);
    let g = |x: &AtomicU64| x.load(Ordering::Relaxed);
    println!(
        "{}",
        serde_json::json!({
            "idle_open": g(&c.idle_open),
            "refused_at_connect": g(&c.refused_at_connect),
            "trickles_cut": g(&c.trickles_cut),
            "requests": g(&c.requests),
            "requests_refused": g(&c.requests_refused),
        })
    );
    Ok(0)
}
