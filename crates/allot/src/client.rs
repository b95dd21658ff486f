//! The CLI's side of the socket.

use crate::proto::{Reply, Request};
use anyhow::{bail, Context};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;

/// Sends one request and returns the reply's data, or the daemon's refusal as an error.
pub fn call(socket: &Path, req: &Request) -> anyhow::Result<serde_json::Value> {
    let mut s = UnixStream::connect(socket)
        .with_context(|| format!("cannot reach the allot daemon at {} (is it running? start it with: sudo allot daemon)", socket.display()))?;
    let mut line = serde_json::to_vec(req)?;
    line.push(b'\n');
    s.write_all(&line).context("send request to the allot daemon")?;
    let mut r = BufReader::new(&s);
    let mut buf = String::new();
    r.read_line(&mut buf).context("read reply from the allot daemon")?;
    if buf.is_empty() {
        bail!("the allot daemon closed the connection without a reply");
    }
    let rep: Reply = serde_json::from_str(&buf).context("the allot daemon's reply is not JSON")?;
    if rep.ok {
        Ok(rep.data.unwrap_or(serde_json::Value::Null))
    } else {
        bail!("{}", rep.error.unwrap_or_else(|| "refused".into()))
    }
}
