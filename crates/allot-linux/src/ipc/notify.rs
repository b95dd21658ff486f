//! sd_notify(3) without libsystemd: one datagram to `$NOTIFY_SOCKET` per state change
//! (`READY=1`, `STATUS=...`, `WATCHDOG=1`, `RELOADING=1`, `STOPPING=1`). Outside systemd
//! (no `$NOTIFY_SOCKET`) every call does nothing and says so.

use crate::{Error, Result};
use std::os::unix::net::UnixDatagram;
use std::time::Duration;

/// Sends `state` (newline-separated `KEY=VALUE` assignments) to the service manager.
/// Returns false when there is no manager to tell (`$NOTIFY_SOCKET` unset).
pub fn notify(state: &str) -> Result<bool> {
    let Some(addr) = std::env::var_os("NOTIFY_SOCKET") else { return Ok(false) };
    let addr = addr.to_string_lossy().into_owned();
    let err = |source| Error::SysHint {
        call: format!("sd_notify({:?}) to {addr}", state.lines().next().unwrap_or("")),
        source,
        hint: "systemd's notification socket did not take the message; is NOTIFY_SOCKET stale (a process started outside the unit)?".into(),
    };
    let sock = UnixDatagram::unbound().map_err(err)?;
    if let Some(name) = addr.strip_prefix('@') {
        // An abstract socket (systemd uses a path, but the protocol allows both).
        use std::os::linux::net::SocketAddrExt;
        let a = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).map_err(err)?;
        sock.send_to_addr(state.as_bytes(), &a).map_err(err)?;
    } else {
        sock.send_to(state.as_bytes(), &addr).map_err(err)?;
    }
    Ok(true)
}

/// `READY=1` (and a status line): start-up finished (Type=notify).
pub fn ready(status: &str) -> Result<bool> {
    notify(&format!("READY=1\nSTATUS={}", one_line(status)))
}

/// `STATUS=...`: a line `systemctl status` shows.
pub fn status(status: &str) -> Result<bool> {
    notify(&format!("STATUS={}", one_line(status)))
}

/// `WATCHDOG=1`: alive (send at least every [`watchdog_interval`]).
pub fn watchdog() -> Result<bool> {
    notify("WATCHDOG=1")
}

/// `RELOADING=1`: reloading the configuration (send `READY=1` when done).
pub fn reloading() -> Result<bool> {
    notify("RELOADING=1")
}

/// `STOPPING=1`: shutting down.
pub fn stopping() -> Result<bool> {
    notify("STOPPING=1")
}

/// How often systemd expects `WATCHDOG=1` (`WatchdogSec=`), halved as sd_watchdog_enabled(3)
/// advises; None when no watchdog is set for this process.
pub fn watchdog_interval() -> Option<Duration> {
    let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.parse().ok()?;
    if let Some(pid) = std::env::var("WATCHDOG_PID").ok().and_then(|p| p.parse::<u32>().ok()) {
        if pid != std::process::id() {
            return None;
        }
    }
    (usec > 0).then(|| Duration::from_micros(usec / 2))
}

/// A status value is one line: newlines would start new assignments.
fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_reach_the_socket() {
        let dir = std::env::temp_dir().join(format!("allot-notify-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("notify");
        let _ = std::fs::remove_file(&path);
        let rx = UnixDatagram::bind(&path).unwrap();
        // The environment is process-wide: this is the only test that sets it.
        std::env::set_var("NOTIFY_SOCKET", &path);
        assert!(ready("adopted 3 jobs\nfine").unwrap());
        let mut buf = [0u8; 256];
        let n = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1\nSTATUS=adopted 3 jobs fine");
        assert!(watchdog().unwrap());
        let n = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"WATCHDOG=1");
        std::env::set_var("NOTIFY_SOCKET", dir.join("absent"));
        let e = status("x").unwrap_err().to_string();
        assert!(e.contains("sd_notify(\"STATUS=x\")") && e.contains("absent"), "{e}");
        std::env::remove_var("NOTIFY_SOCKET");
        assert!(!status("x").unwrap());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
