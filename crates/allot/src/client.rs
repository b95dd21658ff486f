//! The CLI's side of the socket: one request line out, one reply line back, typed.

use crate::proto::{encode_request, Reply, Request, Response, PROTOCOL};
use anyhow::{bail, Context};
use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// Why the daemon could not be reached at all (as opposed to a refusal).
#[derive(Debug)]
pub struct Unreachable(pub String);

impl std::fmt::Display for Unreachable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unreachable {}

/// How long the CLI waits for the daemon's reply unless `ALLOT_TIMEOUT` says otherwise:
/// longer than the daemon's own limit for taking a request (server.rs WAIT), so a busy
/// daemon's "nothing was done" arrives before the client gives up.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// The reply deadline: `ALLOT_TIMEOUT` (e.g. `5s`, `500ms`; a bare number is seconds) or
/// [`TIMEOUT`].
pub fn timeout() -> anyhow::Result<Duration> {
    match std::env::var("ALLOT_TIMEOUT") {
        Ok(v) => {
            let d = allot_model::duration::parse("ALLOT_TIMEOUT", &v, Some(allot_model::duration::Unit::S))?;
            if d.is_zero() {
                bail!("ALLOT_TIMEOUT must be longer than 0, got {v:?}; give a duration like 30s or 500ms");
            }
            Ok(d)
        }
        Err(_) => Ok(TIMEOUT),
    }
}

/// Sends one request and returns the reply, or the daemon's refusal as an error: a
/// [`Refusal`](crate::proto::Refusal) (its kind and sentence; `downcast_ref::<Refusal>()` reads the kind), or an
/// [`Unreachable`] when no daemon answered at the socket. `run`
/// also sends this process's pidfd with its credentials, so a daemon on a kernel without
/// SO_PEERPIDFD can prove which process asks. Waits at most [`timeout`] for the reply.
pub fn call(socket: &Path, req: &Request) -> anyhow::Result<Response> {
    let limit = timeout()?;
    let mut s = UnixStream::connect(socket).map_err(|e| {
        // /run/systemd/system exists when systemd is the init (sd_booted(3)).
        let start = if Path::new("/run/systemd/system").is_dir() { "sudo systemctl start allot" } else { "sudo allot daemon" };
        Unreachable(format!("cannot reach the allot daemon at {} ({e}); is it running? start it with: {start}", socket.display()))
    })?;
    s.set_read_timeout(Some(limit)).context("set the reply deadline")?;
    s.set_write_timeout(Some(limit)).context("set the request deadline")?;
    let line = encode_request(req);
    if matches!(req, Request::Run { .. }) {
        let me = allot_linux::process::pidfd::PidFd::open(std::process::id() as i32).context("open this process's pidfd")?;
        let n = allot_linux::ipc::peer::send_with_creds(s.as_fd(), &line, Some(me.as_fd())).context("send the request to the allot daemon")?;
        if n < line.len() {
            s.write_all(&line[n..]).context("send the request to the allot daemon")?;
        }
    } else {
        s.write_all(&line).context("send the request to the allot daemon")?;
    }
    let mut buf = String::new();
    if let Err(e) = BufReader::new(&s).read_line(&mut buf) {
        if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) {
            bail!(
                "the allot daemon at {} did not answer within {} (ALLOT_TIMEOUT); the request may still be carried out: check with allot show",
                socket.display(),
                allot_model::duration::format(limit)
            );
        }
        return Err(e).context("read the reply from the allot daemon");
    }
    if buf.is_empty() {
        bail!("the allot daemon closed the connection without a reply");
    }
    let rep: Reply =
        serde_json::from_str(&buf).context("the allot daemon's reply is not one this allot understands (is the daemon a different version?)")?;
    if rep.v.is_none() && !rep.ok {
        bail!(
            "the allot daemon at {} is older than this client (protocol 1, this client speaks {PROTOCOL}): restart the daemon so it runs this version (e.g. systemctl restart allot)",
            socket.display()
        );
    }
    if let Some(r) = rep.refusal() {
        return Err(r.into());
    }
    rep.data.ok_or_else(|| anyhow::anyhow!("the allot daemon sent an empty reply"))
}
