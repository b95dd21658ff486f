//! A small, blocking D-Bus client: enough to call systemd and logind on the system bus.
//!
//! One Unix socket, SASL `EXTERNAL` authentication (the kernel vouches for our uid),
//! `Hello`, then method calls answered in order. Signals arrive only for the match rules
//! a caller adds (a broadcast signal reaches no connection without one), and are queued
//! while a call waits for its reply, so a signal that overtakes a reply is not lost.
//! There is no thread and no async runtime: every call blocks until its reply or its
//! deadline. Why this and not the zbus crate: docs/systemd.md.

pub mod message;
pub mod wire;

use crate::{Error, Result};
pub use message::Message;
use std::collections::VecDeque;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};
pub use wire::Value;

/// The system bus socket when `DBUS_SYSTEM_BUS_ADDRESS` does not name one (D-Bus
/// specification, "Well-known Message Bus Instances").
pub const SYSTEM_BUS: &str = "/run/dbus/system_bus_socket";

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
    signals: VecDeque<Message>,
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
        let mut bus = Bus { sock, serial: 0, signals: VecDeque::new(), address: path.into(), name: String::new() };
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
                Ok(n) => got += n,
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

    /// Reads one message (a broken or timed-out read leaves the stream unusable: drop the Bus).
    fn read_message(&mut self, deadline: Instant) -> Result<Message> {
        let addr = self.address.clone();
        let what = || format!("read from the D-Bus socket {addr}");
        let mut head = [0u8; 16];
        self.read_exact(&mut head, deadline).map_err(io(what(), HINT))?;
        let bad = |e: String| Error::SysHint { call: what(), source: std::io::Error::new(std::io::ErrorKind::InvalidData, e), hint: HINT.into() };
        let n = Message::length(&head).map_err(bad)?;
        let mut buf = vec![0u8; n];
        buf[..16].copy_from_slice(&head);
        // The rest follows the head at once; a slow peer gets a few seconds more.
        self.read_exact(&mut buf[16..], deadline.max(Instant::now() + Duration::from_secs(5))).map_err(io(what(), HINT))?;
        Message::decode(&buf).map_err(bad)
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
        let serial = self.send(&Message::call(dest, path, iface, member, body))?;
        let deadline = Instant::now() + timeout;
        loop {
            let m = self.read_message(deadline)?;
            match m.kind {
                message::METHOD_RETURN if m.reply_serial == Some(serial) => return Ok(Ok(m.body)),
                message::ERROR if m.reply_serial == Some(serial) => {
                    let message = m.body.first().and_then(|v| v.as_str()).unwrap_or_default().to_string();
                    return Ok(Err(Reject { name: m.error_name.unwrap_or_default(), message }));
                }
                message::SIGNAL => {
                    // Keep a bounded number: a match rule nobody waits on must not grow memory.
                    if self.signals.len() >= 256 {
                        self.signals.pop_front();
                    }
                    self.signals.push_back(m);
                }
                _ => {}
            }
        }
    }

    /// Waits for a signal for which `want` holds (queued ones first); other signals read
    /// meanwhile are kept. None at the deadline.
    pub fn wait_signal(&mut self, deadline: Instant, want: impl Fn(&Message) -> bool) -> Result<Option<Message>> {
        if let Some(i) = self.signals.iter().position(&want) {
            return Ok(self.signals.remove(i));
        }
        loop {
            let m = match self.read_message(deadline) {
                Ok(m) => m,
                Err(e) if e.io_kind() == Some(std::io::ErrorKind::TimedOut) => return Ok(None),
                Err(e) => return Err(e),
            };
            if m.kind != message::SIGNAL {
                continue;
            }
            if want(&m) {
                return Ok(Some(m));
            }
            if self.signals.len() >= 256 {
                self.signals.pop_front();
            }
            self.signals.push_back(m);
        }
    }

    /// Forgets queued signals (after a wait, so nothing stale is matched later).
    pub fn clear_signals(&mut self) {
        self.signals.clear();
    }
}
