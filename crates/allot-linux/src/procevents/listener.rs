//! The listener: the netlink socket, subscribing, reading and unsubscribing.

use super::wire::{self, Message};
use super::{filter, Kinds, Options, ProcEvent, Stats};
use crate::{Error, Result};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Datagrams read per recvmmsg, and the bytes kept for each (a proc event is 76).
const SLOTS: usize = 32;
const SLOT_BYTES: usize = 512;
/// recvmmsg calls per `recv`: at most SLOTS × ROUNDS datagrams, so one call appends a
/// bounded number of events however fast they come.
const ROUNDS: usize = 8;
/// How long `open` waits for the kernel to acknowledge the subscription.
const ACK_TIMEOUT: Duration = Duration::from_secs(2);

/// A subscription to the proc connector: owns the netlink socket; unsubscribes on drop.
///
/// `recv` takes `&mut self`: run it on one thread (a dedicated one, or the daemon's
/// poll loop via [`AsRawFd`] and `recv_timeout(.., Duration::ZERO)`).
pub struct Listener {
    fd: OwnedFd,
    /// The kinds reported, shared with [`Refilter`]s (a `Kinds`' bits).
    kinds: Arc<AtomicU8>,
    /// The kernel filters (Options::socket_filter): a refilter attaches a new program.
    socket_filter: bool,
    /// The kernel acknowledged PROC_CN_MCAST_LISTEN: drop must send IGNORE, once.
    subscribed: bool,
    /// A Lost seen while subscribing, reported by the first recv.
    lost_while_opening: bool,
    buf: Box<[u8]>,
    stats: Stats,
    recv_buffer: usize,
}

/// What one read of the socket produced.
enum Got {
    Message(Message),
    /// ENOBUFS: the kernel dropped datagrams for this socket.
    Overflow,
}

fn sys(call: impl Into<String>) -> Error {
    Error::Sys { call: call.into(), source: io::Error::last_os_error() }
}

fn kernel_release() -> String {
    crate::read("/proc/sys/kernel/osrelease").map(|s| s.trim().to_string()).unwrap_or_else(|_| "unknown".into())
}

fn setsockopt_int(fd: RawFd, level: i32, name: i32, value: i32) -> io::Result<()> {
    // SAFETY: a valid fd and a pointer to an int of the size passed.
    let r = unsafe { libc::setsockopt(fd, level, name, (&value as *const i32).cast(), std::mem::size_of::<i32>() as u32) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn nl_addr(groups: u32) -> libc::sockaddr_nl {
    // SAFETY: sockaddr_nl is plain data; zero is a valid value for every field.
    let mut a: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    a.nl_family = libc::AF_NETLINK as u16;
    a.nl_pid = 0; // bind: let the kernel pick a unique port, so listeners can coexist
    a.nl_groups = groups;
    a
}

/// An ack number no other subscriber uses: the kernel answers with it plus one.
fn nonce() -> u32 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() } as u32;
    (pid << 10) ^ t ^ N.fetch_add(1, Ordering::Relaxed).wrapping_mul(0x9E37_79B9)
}

impl Listener {
    /// Subscribes to `kinds` with the default [`Options`].
    pub fn open(kinds: Kinds) -> Result<Self> {
        Self::open_with(Options::new(kinds))
    }

    /// Opens the socket (SOCK_CLOEXEC), sizes its receive buffer, attaches the socket
    /// filter, binds to the proc connector's group, subscribes (PROC_CN_MCAST_LISTEN)
    /// and waits up to 2 s for the kernel's acknowledgement. Events from before it
    /// returns are not reported: scan /proc after it returns, not before.
    pub fn open_with(opts: Options) -> Result<Self> {
        // SAFETY: plain syscall with integer arguments.
        let raw = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, libc::NETLINK_CONNECTOR) };
        if raw < 0 {
            let source = io::Error::last_os_error();
            let hint = if source.raw_os_error() == Some(libc::EPROTONOSUPPORT) {
                format!("kernel {} was built without CONFIG_CONNECTOR: process events are unavailable, scan /proc instead", kernel_release())
            } else {
                "see socket(2)".into()
            };
            return Err(Error::SysHint { call: "socket(AF_NETLINK, SOCK_DGRAM, NETLINK_CONNECTOR)".into(), source, hint });
        }
        // SAFETY: the kernel just gave us this descriptor.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };

        let want = i32::try_from(opts.recv_buffer / 2).unwrap_or(i32::MAX / 2).max(1);
        // The kernel doubles what it is given; ask for half so the result is `recv_buffer`.
        if setsockopt_int(raw, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, want).is_err() {
            // Not root: SO_RCVBUF, capped at net.core.rmem_max.
            setsockopt_int(raw, libc::SOL_SOCKET, libc::SO_RCVBUF, want)
                .map_err(|source| Error::Sys { call: format!("setsockopt(proc connector socket, SO_RCVBUF, {want})"), source })?;
        }
        let mut got: i32 = 0;
        let mut len = std::mem::size_of::<i32>() as u32;
        // SAFETY: a valid fd, an int and its size.
        if unsafe { libc::getsockopt(raw, libc::SOL_SOCKET, libc::SO_RCVBUF, (&mut got as *mut i32).cast(), &mut len) } < 0 {
            return Err(sys("getsockopt(proc connector socket, SO_RCVBUF)"));
        }

        if opts.socket_filter {
            attach_filter(raw, opts.kinds)?;
        }

        let addr = nl_addr(wire::CN_IDX_PROC);
        // SAFETY: a valid sockaddr_nl and its size.
        if unsafe { libc::bind(raw, (&addr as *const libc::sockaddr_nl).cast(), std::mem::size_of::<libc::sockaddr_nl>() as u32) } < 0 {
            let source = io::Error::last_os_error();
            let hint = if source.raw_os_error() == Some(libc::EPERM) {
                format!("before Linux 6.6 listening to process events needs CAP_NET_ADMIN (kernel {}): run as root", kernel_release())
            } else {
                "see netlink(7)".into()
            };
            return Err(Error::SysHint { call: "bind(NETLINK_CONNECTOR, group CN_IDX_PROC)".into(), source, hint });
        }
        // Connected to the kernel (port 0): other processes' unicasts to this socket are
        // refused, so only the kernel can put events in it.
        let kernel = nl_addr(0);
        // SAFETY: as for bind.
        if unsafe { libc::connect(raw, (&kernel as *const libc::sockaddr_nl).cast(), std::mem::size_of::<libc::sockaddr_nl>() as u32) } < 0 {
            return Err(sys("connect(NETLINK_CONNECTOR socket, kernel)"));
        }

        let mut l = Listener {
            fd,
            kinds: Arc::new(AtomicU8::new(opts.kinds.0)),
            socket_filter: opts.socket_filter,
            subscribed: false,
            lost_while_opening: false,
            buf: vec![0u8; SLOTS * SLOT_BYTES].into_boxed_slice(),
            stats: Stats::default(),
            recv_buffer: got.max(0) as usize,
        };
        l.subscribe()?;
        Ok(l)
    }

    /// Sends PROC_CN_MCAST_LISTEN and waits for its acknowledgement, reading one
    /// datagram at a time so that no event after it is consumed and forgotten.
    fn subscribe(&mut self) -> Result<()> {
        let ack = nonce();
        self.send(wire::PROC_CN_MCAST_LISTEN, ack).map_err(|source| Error::Sys { call: "send(PROC_CN_MCAST_LISTEN)".into(), source })?;
        let deadline = Instant::now() + ACK_TIMEOUT;
        let mut answer = None;
        let mut overflowed = false;
        while answer.is_none() {
            let mut got = |g: Got| match g {
                Got::Message(Message::Ack { ack: a, err }) if a == ack.wrapping_add(1) => answer = Some(err),
                Got::Overflow | Got::Message(Message::Overrun) => overflowed = true,
                Got::Message(_) => {}
            };
            let read = self.pump(1, 1, &mut got)?;
            if answer.is_some() {
                break;
            }
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            if read == 0 {
                self.wait(Some(deadline - now))?;
            }
        }
        match answer {
            Some(0) => self.subscribed = true,
            Some(err) => {
                let source = io::Error::from_raw_os_error(err as i32);
                let hint = if err as i32 == libc::EPERM {
                    format!("before Linux 6.6 listening to process events needs CAP_NET_ADMIN (kernel {}): run as root", kernel_release())
                } else {
                    "the proc connector refused the subscription".into()
                };
                return Err(Error::SysHint { call: "proc connector PROC_CN_MCAST_LISTEN".into(), source, hint });
            }
            // Our reply may be among the datagrams the kernel dropped. Events are flowing,
            // so take the subscription as made (an IGNORE for one that was not is
            // ignored too); the Lost makes the caller rescan.
            None if overflowed => {
                self.subscribed = true;
                self.lost_while_opening = true;
            }
            None => {
                return Err(Error::SysHint {
                    call: "proc connector PROC_CN_MCAST_LISTEN".into(),
                    source: io::Error::new(io::ErrorKind::TimedOut, format!("no reply in {} s", ACK_TIMEOUT.as_secs())),
                    hint: format!(
                        "kernel {} may lack CONFIG_PROC_EVENTS, or this process is not in the initial pid and user namespaces, whose requests the kernel ignores: scan /proc instead",
                        kernel_release()
                    ),
                });
            }
        }
        Ok(())
    }

    fn send(&self, op: u32, ack: u32) -> io::Result<()> {
        let m = wire::mcast_request(op, ack);
        loop {
            // SAFETY: a valid buffer and its length on a connected socket.
            let r = unsafe { libc::send(self.fd.as_raw_fd(), m.as_ptr().cast(), m.len(), 0) };
            if r >= 0 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINTR) {
                return Err(e);
            }
        }
    }

    /// Waits until the socket is readable (or has an error pending), the timeout passes,
    /// or a signal arrives; the caller reads and decides.
    fn wait(&self, timeout: Option<Duration>) -> Result<()> {
        let ms = match timeout {
            None => -1,
            // Round up: a 0.4 ms timeout must not become a busy loop of 0 ms polls.
            Some(t) => i32::try_from(t.as_micros().div_ceil(1000)).unwrap_or(i32::MAX),
        };
        let mut p = libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd.
        if unsafe { libc::poll(&mut p, 1, ms) } < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINTR) {
                return Err(Error::Sys { call: "poll(proc connector socket)".into(), source: e });
            }
        }
        Ok(())
    }

    /// Reads what is queued, without blocking: up to `rounds` recvmmsg calls of `vlen`
    /// datagrams, stopping early when the queue is empty. Returns datagrams read plus
    /// overflows seen.
    fn pump(&mut self, rounds: usize, vlen: usize, got: &mut dyn FnMut(Got)) -> Result<usize> {
        let vlen = vlen.clamp(1, SLOTS);
        let mut total = 0;
        for _ in 0..rounds {
            // SAFETY (all three): plain data, zero is valid; filled in below.
            let mut addrs: [libc::sockaddr_nl; SLOTS] = unsafe { std::mem::zeroed() };
            let mut iovs: [libc::iovec; SLOTS] = unsafe { std::mem::zeroed() };
            let mut hdrs: [libc::mmsghdr; SLOTS] = unsafe { std::mem::zeroed() };
            let base = self.buf.as_mut_ptr();
            for i in 0..vlen {
                // SAFETY: i * SLOT_BYTES + SLOT_BYTES <= buf.len().
                iovs[i] = libc::iovec { iov_base: unsafe { base.add(i * SLOT_BYTES) }.cast(), iov_len: SLOT_BYTES };
                hdrs[i].msg_hdr.msg_name = (&mut addrs[i] as *mut libc::sockaddr_nl).cast();
                hdrs[i].msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_nl>() as u32;
                hdrs[i].msg_hdr.msg_iov = &mut iovs[i];
                hdrs[i].msg_hdr.msg_iovlen = 1;
            }
            // SAFETY: vlen headers, each pointing at its own slot of `buf` and address.
            let n = unsafe { libc::recvmmsg(self.fd.as_raw_fd(), hdrs.as_mut_ptr(), vlen as u32, libc::MSG_DONTWAIT, std::ptr::null_mut()) };
            if n < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    Some(libc::EAGAIN) => break,
                    // Reported once per overflow; the queued datagrams are still there.
                    Some(libc::ENOBUFS) => {
                        got(Got::Overflow);
                        total += 1;
                        continue;
                    }
                    _ => return Err(Error::Sys { call: "recvmmsg(proc connector socket)".into(), source: e }),
                }
            }
            let n = n as usize;
            for i in 0..n {
                self.stats.datagrams += 1;
                let h = &hdrs[i];
                let from_kernel = h.msg_hdr.msg_namelen as usize >= std::mem::size_of::<libc::sockaddr_nl>() && addrs[i].nl_pid == 0;
                if !from_kernel {
                    got(Got::Message(Message::Other));
                    continue;
                }
                let len = (h.msg_len as usize).min(SLOT_BYTES);
                // A truncated datagram (MSG_TRUNC) parses as Malformed: its nlmsg_len
                // points past what was kept.
                wire::parse_datagram(&self.buf[i * SLOT_BYTES..i * SLOT_BYTES + len], |m| got(Got::Message(m)));
            }
            total += n;
            if n < vlen {
                break;
            }
        }
        Ok(total)
    }

    /// Reads what is queued, appending events to `out`; returns how many were appended.
    fn read_batch(&mut self, out: &mut Vec<ProcEvent>) -> Result<usize> {
        let start = out.len();
        if self.lost_while_opening {
            self.lost_while_opening = false;
            out.push(ProcEvent::Lost);
        }
        // Loaded per event: a Refilter may widen the kinds while this batch is read.
        let kinds = self.kinds.clone();
        let mut stats = self.stats;
        let mut got = |g: Got| match g {
            Got::Overflow | Got::Message(Message::Overrun) => {
                stats.overflows += 1;
                // One Lost per call is enough: the remedy is the same.
                if !out[start..].contains(&ProcEvent::Lost) {
                    out.push(ProcEvent::Lost);
                }
            }
            Got::Message(Message::Event(e)) if Kinds(kinds.load(Ordering::SeqCst)).contains(e.kind()) => {
                stats.events += 1;
                out.push(e);
            }
            Got::Message(Message::Malformed) => stats.malformed += 1,
            Got::Message(_) => stats.discarded += 1,
        };
        let r = self.pump(ROUNDS, SLOTS, &mut got);
        // pump counted datagrams into self.stats; the closure counted the rest.
        let datagrams = self.stats.datagrams;
        self.stats = Stats { datagrams, ..stats };
        r?;
        Ok(out.len() - start)
    }

    /// Blocks until at least one event (or Lost) is available, then appends what is
    /// queued to `out`, at most 256 datagrams' worth; returns how many were appended
    /// (at least one). Signals (EINTR) are retried.
    pub fn recv(&mut self, out: &mut Vec<ProcEvent>) -> Result<usize> {
        loop {
            let n = self.read_batch(out)?;
            if n > 0 {
                return Ok(n);
            }
            self.wait(None)?;
        }
    }

    /// As [`Listener::recv`], but gives up after `timeout` and returns 0. A zero timeout
    /// reads what is queued without blocking (for a caller's own poll loop).
    pub fn recv_timeout(&mut self, out: &mut Vec<ProcEvent>, timeout: Duration) -> Result<usize> {
        let deadline = Instant::now() + timeout;
        loop {
            let n = self.read_batch(out)?;
            if n > 0 {
                return Ok(n);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(0);
            }
            self.wait(Some(deadline - now))?;
        }
    }

    /// The kinds this listener reports.
    pub fn kinds(&self) -> Kinds {
        Kinds(self.kinds.load(Ordering::Relaxed))
    }

    /// A handle that changes the kinds this listener reports, from any thread, while
    /// another blocks in `recv` (it holds a duplicate of the socket).
    pub fn refilter(&self) -> Result<Refilter> {
        let fd = self.fd.try_clone().map_err(|source| Error::Sys { call: "fcntl(proc connector socket, F_DUPFD_CLOEXEC)".into(), source })?;
        Ok(Refilter { fd, kinds: self.kinds.clone(), socket_filter: self.socket_filter })
    }

    /// The receive buffer the kernel granted, bytes (SO_RCVBUF as read back): the
    /// request, at least the kernel's minimum (2304 on x86-64), and when not root at most
    /// twice net.core.rmem_max.
    pub fn recv_buffer(&self) -> usize {
        self.recv_buffer
    }

    /// Counters since open.
    pub fn stats(&self) -> Stats {
        self.stats
    }
}

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listener")
            .field("fd", &self.fd)
            .field("kinds", &self.kinds())
            .field("subscribed", &self.subscribed)
            .field("recv_buffer", &self.recv_buffer)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

/// Attaches the socket filter for `kinds` to the socket (replacing any before it).
fn attach_filter(raw: RawFd, kinds: Kinds) -> Result<()> {
    let mut prog = filter::program(kinds);
    let fprog = libc::sock_fprog { len: prog.len() as u16, filter: prog.as_mut_ptr() };
    // SAFETY: fprog points at `prog`, alive for the call; the kernel copies it.
    let r = unsafe {
        libc::setsockopt(
            raw,
            libc::SOL_SOCKET,
            libc::SO_ATTACH_FILTER,
            (&fprog as *const libc::sock_fprog).cast(),
            std::mem::size_of::<libc::sock_fprog>() as u32,
        )
    };
    if r < 0 {
        return Err(sys(format!("setsockopt(proc connector socket, SO_ATTACH_FILTER, {} instructions)", prog.len())));
    }
    Ok(())
}

/// Changes what a [`Listener`] reports (see [`Listener::refilter`]). The daemon
/// subscribes to exec events only while its config has rules: a build host's thousand
/// execs a second then never reach user space.
#[derive(Debug)]
pub struct Refilter {
    fd: OwnedFd,
    kinds: Arc<AtomicU8>,
    socket_filter: bool,
}

impl Refilter {
    /// From now on the listener reports `kinds`. While the kernel's filter changes, user
    /// space accepts both the old kinds and the new, so no event the new filter lets
    /// through is dropped.
    pub fn set(&self, kinds: Kinds) -> Result<()> {
        let old = self.kinds.fetch_or(kinds.0, Ordering::SeqCst);
        if self.socket_filter {
            if let Err(e) = attach_filter(self.fd.as_raw_fd(), kinds) {
                self.kinds.store(old, Ordering::SeqCst);
                return Err(e);
            }
        }
        self.kinds.store(kinds.0, Ordering::SeqCst);
        Ok(())
    }
}

impl AsRawFd for Listener {
    /// The socket, for a caller's poll loop: readable (POLLIN, or POLLERR after an
    /// overflow) when datagrams are queued; then call `recv_timeout(.., Duration::ZERO)`,
    /// which may still return 0 if all of them were discarded.
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for Listener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl Drop for Listener {
    /// Unsubscribes (PROC_CN_MCAST_IGNORE) once, if the subscription was acknowledged:
    /// before 6.6 the kernel's subscriber count is global, and an extra IGNORE would
    /// silence every other listener on the machine.
    fn drop(&mut self) {
        if self.subscribed {
            let _ = self.send(wire::PROC_CN_MCAST_IGNORE, nonce());
        }
    }
}
