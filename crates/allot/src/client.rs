//! The CLI's side of the socket: one request line out, one reply line back, typed.

use crate::proto::{encode_request, Reply, Request, Response, PROTOCOL};
use anyhow::{bail, Context};
use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::path::Path;

/// Why the daemon could not be reached at all (as opposed to a refusal).
#[derive(Debug)]
pub struct Unreachable(pub String);

impl std::fmt::Display for Unreachable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unreachable {}

/// Sends one request and returns the reply, or the daemon's refusal as an error. `run`
/// also sends this process's pidfd with its credentials, so a daemon on a kernel without
/// SO_PEERPIDFD can prove which process asks.
pub fn call(socket: &Path, req: &Request) -> anyhow::Result<Response> {
    let mut s = UnixStream::connect(socket).map_err(|e| {
        Unreachable(format!("cannot reach the allot daemon at {} ({e}); is it running? start it with: sudo allot daemon", socket.display()))
    })?;
    let line = encode_request(req);
    if matches!(req, Request::Run { .. }) {
        let me = allot_linux::pidfd::PidFd::open(std::process::id() as i32).context("open this process's pidfd")?;
        let n = allot_linux::peer::send_with_creds(s.as_fd(), &line, Some(me.as_fd())).context("send the request to the allot daemon")?;
        if n < line.len() {
            s.write_all(&line[n..]).context("send the request to the allot daemon")?;
        }
    } else {
        s.write_all(&line).context("send the request to the allot daemon")?;
    }
    let mut buf = String::new();
    BufReader::new(&s).read_line(&mut buf).context("read the reply from the allot daemon")?;
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
    match (rep.ok, rep.data) {
        (true, Some(d)) => Ok(d),
        (true, None) => bail!("the allot daemon sent an empty reply"),
        (false, _) => bail!("{}", rep.error.unwrap_or_else(|| "refused".into())),
    }
}
