//! A small, blocking D-Bus client: enough to call systemd and logind on the system bus.
//!
//! One Unix socket, SASL `EXTERNAL` authentication (the kernel vouches for our uid),
//! `Hello`, then method calls answered in order. There is no thread and no async
//! runtime: every call blocks until its reply or its deadline.
//!
//! The system bus is shared with every local user, and its stock policy lets any of them
//! send us unicast signals of up to 32 MiB. So every message is judged by its header
//! first, and its body is read only if it is wanted: the reply we wait for (its body at
//! most [`MAX_REPLY`] bytes), or a signal that fits a [`Match`] we added and comes from
//! the connection that owns the name it names (see `signals`; at most [`MAX_SIGNAL`]
//! bytes). Every other body is read in [`SKIP_CHUNK`] pieces and thrown away, so an
//! unwanted message costs the time to read it and no memory. Messages that arrived
//! between calls are drained before the next call is sent. Why this and not the zbus
//! crate: docs/systemd.md.

pub mod message;
#[cfg(test)]
mod props;
pub mod signals;
pub mod wire;

use crate::{Error, Result};
pub use message::Message;
pub use signals::Match;
use signals::{Signals, DRIVER, DRIVER_PATH};
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};
pub use wire::Value;

/// The system bus socket when `DBUS_SYSTEM_BUS_ADDRESS` does not name one (D-Bus
/// specification, "Well-known Message Bus Instances").
pub const SYSTEM_BUS: &str = "/run/dbus/system_bus_socket";

/// The largest reply body decoded (4 MiB): systemd's largest answers to allot (a list of
/// allot's units) are kilobytes; a bigger reply fails its call and is read and dropped
/// without decoding, the connection stays usable.
pub const MAX_REPLY: usize = 4 << 20;
/// The largest body of a wanted signal decoded (JobRemoved, NameOwnerChanged: bytes).
pub const MAX_SIGNAL: usize = 64 << 10;
/// The largest header fields array read (bus names are at most 255 bytes; systemd's
/// paths are short): a message with more is skipped whole, unread.
pub const MAX_HEADER: usize = 64 << 10;
/// Unwanted bytes are read and dropped this many at a time.
pub const SKIP_CHUNK: usize = 64 << 10;
/// A drain before a call stops after this much (more than dbus-daemon queues for one
/// connection, 127 MiB by default): a sender that never stops cannot hold a call back
/// forever; what follows is skipped while the reply is awaited.
pub const MAX_DRAIN: u64 = 256 << 20;

/// An error reply: the error's name and message, as the peer sent them.
#[derive(Debug, Clone, PartialEq)]
pub struct Reject {
    /// e.g. `org.freedesktop.systemd1.NoSuchUnit`.
    pub name: String,
    /// The peer's message (may be empty).
    pub message: String,
}

/// A connection to a bus.
#[derive(Debug)]
pub struct Bus {
    sock: UnixStream,
    serial: u32,
    signals: Signals,
    /// Bytes read so far (bounds a drain).
    read_total: u64,
    /// The socket's path, for messages.
    pub address: String,
    /// Our unique name on the bus (`:1.42`).
    pub name: String,
}

fn io(call: String, hint: &str) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::SysHint { call, source, hint: hint.to_string() }
}

const HINT: &str = "is the D-Bus system bus running? (systemctl status dbus.socket dbus.service)";

/// The socket of the system bus: `DBUS_SYSTEM_BUS_ADDRESS`'s `unix:path=` if set, else
/// the well-known path.
pub fn system_bus_path() -> String {
    std::env::var("DBUS_SYSTEM_BUS_ADDRESS")
        .ok()
        .and_then(|a| a.split(';').find_map(|x| x.strip_prefix("unix:")?.split(',').find_map(|kv| kv.strip_prefix("path=").map(String::from))))
        .unwrap_or_else(|| SYSTEM_BUS.to_string())
}

impl Bus {
    /// Connects to the system bus and says `Hello`.
    pub fn system(timeout: Duration) -> Result<Self> {
        Self::connect(&system_bus_path(), timeout)
    }

    /// Connects to the bus at `path`, authenticates and says `Hello`.
    pub fn connect(path: &str, timeout: Duration) -> Result<Self> {
        let sock = UnixStream::connect(path).map_err(io(format!("connect to the D-Bus socket {path}"), HINT))?;
        let mut bus = Bus { sock, serial: 0, signals: Signals::default(), read_total: 0, address: path.into(), name: String::new() };
        bus.auth(timeout)?;
        let r = bus.call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "Hello", vec![], timeout)?;
        bus.name = match r {
            Ok(v) => v.first().and_then(|v| v.as_str()).unwrap_or_default().to_string(),
            Err(e) => return Err(Error::Bus { method: "Hello", unit: String::new(), name: e.name, message: e.message, hint: HINT.into() }),
        };
        Ok(bus)
    }

    fn auth(&mut self, timeout: Duration) -> Result<()> {
        // SAFETY: geteuid has no preconditions.
        let uid = unsafe { libc::geteuid() }.to_string();
        let hex: String = uid.bytes().map(|b| format!("{b:02x}")).collect();
        let what = format!("authenticate to the D-Bus socket {}", self.address);
        self.sock.set_write_timeout(Some(timeout)).map_err(io(what.clone(), HINT))?;
        self.sock.write_all(format!("\0AUTH EXTERNAL {hex}\r\n").as_bytes()).map_err(io(what.clone(), HINT))?;
        let line = self.line(Instant::now() + timeout).map_err(io(what.clone(), HINT))?;
        if !line.starts_with("OK ") {
            return Err(Error::SysHint {
                call: what,
                source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
                hint: format!("the bus answered {line:?} to AUTH EXTERNAL for uid {uid}"),
            });
        }
        self.sock.write_all(b"BEGIN\r\n").map_err(io(what, HINT))
    }

    fn line(&mut self, deadline: Instant) -> std::io::Result<String> {
        let mut out = vec![];
        let mut b = [0u8];
        while !out.ends_with(b"\r\n") {
            if out.len() > 512 {
                return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "authentication line longer than 512 bytes"));
            }
            self.read_exact(&mut b, deadline)?;
            out.push(b[0]);
        }
        Ok(String::from_utf8_lossy(&out[..out.len() - 2]).into_owned())
    }

    fn read_exact(&mut self, buf: &mut [u8], deadline: Instant) -> std::io::Result<()> {
        let mut got = 0;
        while got < buf.len() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let kind = if got == 0 { std::io::ErrorKind::TimedOut } else { std::io::ErrorKind::InvalidData };
                return Err(std::io::Error::new(kind, "no answer before the deadline"));
            }
            self.sock.set_read_timeout(Some(left))?;
            match self.sock.read(&mut buf[got..]) {
                Ok(0) => return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the bus closed the connection")),
                Ok(n) => {
                    got += n;
                    self.read_total += n as u64;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                    // Nothing consumed: the stream is intact. Part of a message: it is not.
                    let (kind, what) = if got == 0 {
                        (std::io::ErrorKind::TimedOut, "no answer before the deadline")
                    } else {
                        (std::io::ErrorKind::InvalidData, "a message stopped arriving midway")
                    };
                    return Err(std::io::Error::new(kind, what));
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn bad(&self, e: String) -> Error {
        Error::SysHint {
            call: format!("read from the D-Bus socket {}", self.address),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
            hint: HINT.into(),
        }
    }

    /// Reads and drops `n` bytes, [`SKIP_CHUNK`] at a time.
    fn skip(&mut self, mut n: usize, deadline: Instant) -> Result<()> {
        let mut chunk = [0u8; SKIP_CHUNK];
        while n > 0 {
            let k = n.min(SKIP_CHUNK);
            self.read_exact(&mut chunk[..k], deadline).map_err(io(format!("read from the D-Bus socket {}", self.address), HINT))?;
            n -= k;
        }
        Ok(())
    }

    /// Reads one message and keeps only what is wanted: returns the reply to `reply_to`
    /// (serial, destination called) when this is it; takes a wanted signal (see
    /// `signals`); skips everything else, its body unread. A broken or timed-out read
    /// leaves the stream unusable: drop the Bus.
    fn pump(&mut self, deadline: Instant, reply_to: Option<(u32, &str)>) -> Result<Option<Message>> {
        let what = format!("read from the D-Bus socket {}", self.address);
        let mut head = [0u8; 16];
        self.read_exact(&mut head, deadline).map_err(io(what.clone(), HINT))?;
        let fixed = Message::fixed(&head).map_err(|e| self.bad(e))?;
        // The rest follows the head at once; a slow peer gets a few seconds more.
        let rest = deadline.max(Instant::now() + Duration::from_secs(5));
        if fixed.fields_len > MAX_HEADER {
            self.skip(fixed.total() - 16, rest)?;
            return Ok(None);
        }
        let mut buf = vec![0u8; fixed.header_len()];
        buf[..16].copy_from_slice(&head);
        self.read_exact(&mut buf[16..], rest).map_err(io(what.clone(), HINT))?;
        let (mut m, sig) = Message::decode_header(&buf).map_err(|e| self.bad(e))?;
        let reply = match reply_to {
            Some((serial, dest)) if matches!(m.kind, message::METHOD_RETURN | message::ERROR) && m.reply_serial == Some(serial) => {
                // The bus itself answers for a called peer that is gone or refused us.
                let from_bus = m.kind == message::ERROR && m.sender.as_deref() == Some(DRIVER);
                from_bus || self.signals.speaks_for(dest, m.sender.as_deref()) != Some(false)
            }
            _ => false,
        };
        let limit = if reply {
            MAX_REPLY
        } else if self.signals.wanted(&m) {
            MAX_SIGNAL
        } else {
            0
        };
        if fixed.body_len > limit {
            self.skip(fixed.body_len, rest)?;
            if reply {
                let e = format!("a reply of {} bytes is larger than the {MAX_REPLY} allowed", fixed.body_len);
                return Err(Error::Sys { call: what, source: std::io::Error::new(std::io::ErrorKind::InvalidData, e) });
            }
            return Ok(None);
        }
        let mut body = vec![0u8; fixed.body_len];
        self.read_exact(&mut body, rest).map_err(io(what, HINT))?;
        let decoded = m.decode_body(&sig, &body, fixed.big);
        if reply {
            decoded.map_err(|e| self.bad(e))?;
            return Ok(Some(m));
        }
        // A wanted signal that does not decode is dropped: the stream is still framed.
        if limit > 0 && decoded.is_ok() {
            self.signals.take(m);
        }
        Ok(None)
    }

    /// True when a message (or part of one) is waiting to be read.
    fn readable(&self) -> bool {
        let mut p = libc::pollfd { fd: self.sock.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd; a zero timeout only looks.
        unsafe { libc::poll(&mut p, 1, 0) > 0 && p.revents != 0 }
    }

    /// Reads what arrived since the last call (taking wanted signals, skipping the
    /// rest), at most [`MAX_DRAIN`] bytes.
    fn drain(&mut self) -> Result<()> {
        let start = self.read_total;
        while self.read_total - start < MAX_DRAIN && self.readable() {
            self.pump(Instant::now() + Duration::from_secs(1), None)?;
        }
        Ok(())
    }

    /// Sends a message; returns its serial.
    pub fn send(&mut self, m: &Message) -> Result<u32> {
        self.serial = self.serial.wrapping_add(1).max(1);
        let what = format!("write to the D-Bus socket {}", self.address);
        self.sock.write_all(&m.encode(self.serial)).map_err(io(what, HINT))?;
        Ok(self.serial)
    }

    /// Calls a method and waits for its reply: `Ok(Ok(body))`, `Ok(Err(rejection))` for an
    /// error reply, `Err` when the bus itself failed (then drop this Bus and connect again).
    pub fn call(
        &mut self,
        dest: &str,
        path: &str,
        iface: &str,
        member: &str,
        body: Vec<Value>,
        timeout: Duration,
    ) -> Result<std::result::Result<Vec<Value>, Reject>> {
        self.drain()?;
        let serial = self.send(&Message::call(dest, path, iface, member, body))?;
        let deadline = Instant::now() + timeout;
        loop {
            let Some(m) = self.pump(deadline, Some((serial, dest)))? else { continue };
            if m.kind == message::METHOD_RETURN {
                return Ok(Ok(m.body));
            }
            let message = m.body.first().and_then(|v| v.as_str()).unwrap_or_default().to_string();
            return Ok(Err(Reject { name: m.error_name.unwrap_or_default(), message }));
        }
    }

    fn driver(&mut self, member: &str, arg: &str, timeout: Duration) -> Result<std::result::Result<Vec<Value>, Reject>> {
        self.call(DRIVER, DRIVER_PATH, DRIVER, member, vec![Value::str(arg)], timeout)
    }

    /// Starts taking the signals `m` describes: follows who owns `m.sender` (once per
    /// name: NameOwnerChanged first, then GetNameOwner, so no change falls between), then
    /// asks the bus for them (AddMatch). `Ok(Err)` when the bus refused.
    pub fn add_match(&mut self, m: &Match, timeout: Duration) -> Result<std::result::Result<(), Reject>> {
        if self.signals.untracked(&m.sender) {
            if let Err(e) = self.driver("AddMatch", &Match::owner_changes(&m.sender).rule(), timeout)? {
                return Ok(Err(e));
            }
            self.signals.set_owner(&m.sender, "");
            match self.driver("GetNameOwner", &m.sender, timeout)? {
                Ok(v) => {
                    let owner = v.first().and_then(|x| x.as_str()).unwrap_or_default().to_string();
                    self.signals.set_owner(&m.sender, &owner);
                }
                Err(e) if e.name == "org.freedesktop.DBus.Error.NameHasNoOwner" => {}
                Err(e) => {
                    self.signals.forget_owner(&m.sender);
                    return Ok(Err(e));
                }
            }
        }
        match self.driver("AddMatch", &m.rule(), timeout)? {
            Ok(_) => {
                self.signals.add(m.clone());
                Ok(Ok(()))
            }
            Err(e) => Ok(Err(e)),
        }
    }

    /// Stops taking the signals `m` describes (RemoveMatch); the owner is still followed.
    pub fn remove_match(&mut self, m: &Match, timeout: Duration) -> Result<std::result::Result<(), Reject>> {
        self.signals.remove(m);
        Ok(self.driver("RemoveMatch", &m.rule(), timeout)?.map(|_| ()))
    }

    /// The unique name that owns `name`, as last heard, for a name a match follows.
    pub fn owner(&self, name: &str) -> Option<&str> {
        self.signals.owner(name)
    }

    /// Waits for a taken signal for which `want` holds (queued ones first); other taken
    /// signals read meanwhile are kept (at most `signals::MAX_QUEUED`). None at the
    /// deadline.
    pub fn wait_signal(&mut self, deadline: Instant, want: impl Fn(&Message) -> bool) -> Result<Option<Message>> {
        loop {
            if let Some(m) = self.signals.pop(&want) {
                return Ok(Some(m));
            }
            match self.pump(deadline, None) {
                Ok(_) => {}
                Err(e) if e.io_kind() == Some(std::io::ErrorKind::TimedOut) => return Ok(None),
                Err(e) => return Err(e),
            }
        }
    }

    /// Forgets queued signals (after a wait, so nothing stale is matched later).
    pub fn clear_signals(&mut self) {
        self.signals.clear();
    }
}
