//! Talking with other programs: a small blocking D-Bus client and systemd and logind
//! over it (with the holder process that keeps a scope alive), who is asking on a unix
//! socket (peer credentials, pidfds), sd_notify, socket activation, and the journal's
//! native protocol.

pub mod activation;
pub mod dbus;
pub mod journal;
pub mod notify;
pub mod peer;
pub mod systemd_bus;
