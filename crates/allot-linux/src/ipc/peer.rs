//! Who is asking on a Unix socket: the kernel's word on the process at the other end.
//!
//! # The hole this closes
//! `SO_PEERCRED` reports the pid that called `connect()`, as a number. A client can
//! connect, exit, and let that pid be reused by a victim before the daemon acts on it.
//! The daemon must hold the *process*, not the number:
//!
//! - **Linux 6.5+**: [`peer_pidfd`] (`SO_PEERPIDFD`) gives a pidfd of the very process
//!   that called `connect()`. Check [`PidFd::alive`] right before acting.
//! - **Older kernels** (Debian 12's 6.1): the client sends, in one `sendmsg`, its own
//!   pidfd (SCM_RIGHTS) and SCM_CREDENTIALS ([`send_with_creds`]); the daemon reads it
//!   with [`recv_with_creds`] (or [`recv_message`]) and [`verify_sender`] checks that
//!   exactly one fd came, that it is a process pidfd, that its pid (fdinfo `Pid:`)
//!   equals the SCM_CREDENTIALS pid, and that the process is alive. The kernel refuses
//!   (EPERM) SCM_CREDENTIALS naming a pid other than the sender's own tgid unless the
//!   sender has CAP_SYS_ADMIN over its pid namespace, and anyone may `pidfd_open` any
//!   pid, so neither half proves anything alone; together they do: the pidfd pins a live
//!   process whose pid the sender could only claim by being it.
//!
//! # What the kernel does (read in net/unix/af_unix.c, include/net/scm.h, net/core/scm.c,
//! net/core/sock.c; behaviour checked by tests/peer.rs on 6.18)
//! - **Explicit SCM_CREDENTIALS** (`scm_check_creds`): pid must be the sender's tgid
//!   (`task_tgid_vnr`; a thread's tid is refused since 2.6.x, checked by a test), uid
//!   any of its real/effective/saved uids, gid likewise, unless it holds CAP_SYS_ADMIN
//!   (pid) / CAP_SETUID / CAP_SETGID (ids) *in its own namespaces*. (2.6-era kernels
//!   also let a thread name its tid; today only `task_tgid_vnr(current)` passes.) So a user inside a
//!   user namespace with subordinate uids (newuidmap, /etc/subuid) can claim those
//!   subordinate uids, and a user owning a pid namespace can name any pid in it — which
//!   holds only their own processes. Never treat subordinate uids as users
//!   ([`crate::process::users::HumanUids`]).
//! - **Implicit credentials** (`unix_maybe_add_creds`, `maybe_add_creds` before 6.16):
//!   when the sender passed none, the kernel attaches the sender's tgid, *real* uid and
//!   real gid to each skb if the sending socket or the receiving one has SO_PASSCRED (or
//!   SO_PASSPIDFD), or if the receiving socket is not yet accepted (`!other->sk_socket`;
//!   dropped in 6.16-rc1 by "af_unix: Inherit sk_flags at connect()", restored before
//!   the release after it broke userspace).
//!   `SO_PEERCRED` reports the *effective* ids at connect; [`send_with_creds`] sends
//!   the effective ids so the two agree for an ordinary client.
//! - **Where creds land on a stream**: every skb carries the creds of its writer; the
//!   receiver's `recvmsg` reports them only if *its* socket has SO_PASSCRED at read time,
//!   and then never glues bytes of two different writers into one read. Data queued
//!   while neither side had SO_PASSCRED carries no creds: the kernel then reports pid 0
//!   and the overflow uid 65534, which [`recv_with_creds`] returns as `creds: None`.
//! - **SO_PASSCRED and accept()**: up to 6.15 the accepted socket copies SO_PASSCRED
//!   (and PASSPIDFD, PASSSEC) from the listener in `unix_accept`
//!   (`unix_sock_inherit_flags`); from 6.16 ("af_unix: Inherit sk_flags at connect()")
//!   it is copied at `connect()` time. Either way: set it on the listener right after
//!   bind, *and* on each accepted socket before the first read (std's `UnixListener::bind`
//!   listens at once, so a connection can slip in before the listener has it).
//! - **Where fds land on a stream**: only on the first skb of a `sendmsg`; a read stops
//!   after the skb that carried fds, so one `recvmsg` yields at most one message's fds:
//!   at most [`SCM_MAX_FD`] (253). Fds may come with a read that began with earlier bytes
//!   of the same writer, so a reader must accept them on any chunk ([`recv_message`]).
//! - **Fds the receiver did not ask for can block it.** Fds that do not fit the control
//!   buffer are dropped by the kernel (MSG_CTRUNC) with `fput` in the *receiver's*
//!   thread, and fds installed then closed are flushed and released there too. A TCP
//!   socket with SO_LINGER and unsent data blocks that release for the linger time
//!   (measured here: 4 s for linger 4, in `recvmsg` itself when there was no room, in
//!   `close` otherwise); a FUSE file's flush waits for its (hostile) server. Hence:
//!   [`recv_with_creds`] always has room for 253 fds, and every unwanted fd is closed on
//!   a separate thread ([`discard_fds`]). The same release happens when a read passes
//!   an out-of-band byte (MSG_OOB, CONFIG_AF_UNIX_OOB, 5.15+) that carried fds — unless
//!   SO_OOBINLINE ([`set_oobinline`], set by [`recv_message`]) — and when a socket is
//!   closed with messages still queued ([`close_client`] shuts down, drains, then
//!   closes). All three are pinned by tests/peer.rs. 6.16 added SO_PASSRIGHTS: [`set_passrights`]
//!   `false` makes the kernel refuse to queue fds at all (the sender gets EPERM); use it
//!   wherever SO_PEERPIDFD makes the pidfd fallback unnecessary.
//! - **SO_PEERPIDFD** (6.5+, `sk_getsockopt`): a pidfd (O_CLOEXEC) for `sk_peer_pid`,
//!   the tgid that called `connect()` (for `socketpair`, the creator). On 6.5–6.15 it
//!   fails with ESRCH/EINVAL once that process is reaped; from 6.16 ("net, pidfs: enable
//!   handing out pidfds for reaped sk->sk_peer_pid") it returns a pidfd that reports the
//!   process dead (fdinfo `Pid: -1`). [`peer_pidfd`] turns both into an `is_gone()` error.
//!   Older kernels answer ENOPROTOOPT: `Ok(None)`.
//! - **SO_PEERGROUPS** (4.13+): the peer's supplementary groups at connect.
//!
//! # Using it in the daemon
//! ```text
//! after bind:      set_passcred(listener, true)
//! each connection: set_passcred(conn, true)
//!                  peer = peer_cred(conn)            // uid/gid to authorise (euid at connect)
//!                  groups = peer_groups(conn)        // not NSS group members: what it holds
//!                  msg = recv_message(conn, MAX_REQUEST, b'\n', 1, 5 s)
//!                  process = match peer_pidfd(conn)? {
//!                      Some(p) => p,                               // 6.5+: the connector
//!                      None => {                                   // older: the sender proves it
//!                          let s = verify_sender(&mut msg.received)?;
//!                          require s.cred.pid == peer.pid && s.cred.uid == peer.uid
//!                          s.pidfd
//!                      }
//!                  }
//!                  ... then process.alive() right before each action on it
//!                  close_client(conn)                // not drop: see close_client
//! ```
//! The client always sends `send_with_creds(conn, request, Some(own pidfd))`. Requiring the
//! sender to be the connector refuses socket-passing games (the allot CLI never passes its
//! socket on). If the daemon turns SO_PASSRIGHTS off, a client's send with a pidfd fails
//! with EPERM and must be resent without it. Each read may hold up to 253 received fds
//! for a moment: raise RLIMIT_NOFILE well above `clients x 260`, since fds the kernel
//! cannot install are dropped — and released — in the reading thread.

pub use crate::closer::{discard_fds, discards_pending};
pub use crate::process::pidfd::{pidfd_pid, PidFd};
use crate::{Error, Result};
use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// Most fds one `sendmsg` can carry (SCM_MAX_FD in include/net/scm.h), hence the most one
/// `recvmsg` can deliver.
pub const SCM_MAX_FD: usize = 253;
/// SO_PASSRIGHTS (6.16+), asm-generic value; not in the libc crate yet.
const SO_PASSRIGHTS: libc::c_int = 83;
/// SCM_PIDFD (6.5+, with SO_PASSPIDFD), asm-generic value; not in the libc crate yet.
const SCM_PIDFD: libc::c_int = 4;
/// Control buffer for one read: creds (32) + 253 fds (1032) + SCM_PIDFD (24) + room for an
/// SCM_SECURITY label should someone turn SO_PASSSEC on. In u64s for cmsghdr alignment.
const CONTROL_WORDS: usize = 512;

/// A process's identity as the kernel reports it on a Unix socket (`struct ucred`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cred {
    /// Thread-group id (the process id), in the receiver's pid namespace.
    pub pid: i32,
    /// User id.
    pub uid: u32,
    /// Group id.
    pub gid: u32,
}

impl Cred {
    /// This process: pid, *effective* uid and gid (what SO_PEERCRED reports at connect).
    pub fn current() -> Self {
        // SAFETY: getpid/geteuid/getegid have no preconditions.
        unsafe { Self { pid: libc::getpid(), uid: libc::geteuid(), gid: libc::getegid() } }
    }
}

fn sys(call: impl Into<String>, source: io::Error) -> Error {
    Error::Sys { call: call.into(), source }
}

fn getsockopt_buf(fd: BorrowedFd, opt: libc::c_int, buf: &mut [u8]) -> io::Result<usize> {
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: valid fd; buf is writable for len bytes.
    let r = unsafe { libc::getsockopt(fd.as_raw_fd(), libc::SOL_SOCKET, opt, buf.as_mut_ptr().cast(), &mut len) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(len as usize)
}

fn getsockopt_int(fd: BorrowedFd, opt: libc::c_int) -> io::Result<libc::c_int> {
    let mut b = [0u8; 4];
    getsockopt_buf(fd, opt, &mut b)?;
    Ok(libc::c_int::from_ne_bytes(b))
}

fn setsockopt_int(fd: BorrowedFd, opt: libc::c_int, v: libc::c_int) -> io::Result<()> {
    // SAFETY: valid fd, pointer to an int of the stated size.
    let r = unsafe { libc::setsockopt(fd.as_raw_fd(), libc::SOL_SOCKET, opt, (&v as *const libc::c_int).cast(), 4) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// SO_PEERCRED: pid, effective uid and gid of the process that called `connect()` (for a
/// `socketpair`, the creator), as of that call. The pid is only a number: see the module
/// docs before acting on it. Fails on a socket with no peer.
pub fn peer_cred(fd: BorrowedFd) -> Result<Cred> {
    let call = || format!("getsockopt(fd {}, SO_PEERCRED)", fd.as_raw_fd());
    let mut c: libc::ucred = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: valid fd and an out-buffer of the right size.
    let r = unsafe { libc::getsockopt(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_PEERCRED, (&mut c as *mut libc::ucred).cast(), &mut len) };
    if r != 0 {
        return Err(sys(call(), io::Error::last_os_error()));
    }
    if c.pid <= 0 {
        // No peer: the kernel fills pid 0 and the overflow ids.
        return Err(sys(
            call(),
            io::Error::new(io::ErrorKind::NotConnected, "the socket has no peer (not connected); call it on an accepted socket"),
        ));
    }
    Ok(Cred { pid: c.pid, uid: c.uid, gid: c.gid })
}

/// SO_PEERGROUPS (4.13+): the peer's supplementary groups at `connect()` (the primary gid
/// is in [`peer_cred`] and may be absent here).
pub fn peer_groups(fd: BorrowedFd) -> Result<Vec<u32>> {
    let mut buf = vec![0u8; 64 * 4];
    loop {
        let mut len = buf.len() as libc::socklen_t;
        // SAFETY: valid fd, writable buffer of len bytes.
        let r = unsafe { libc::getsockopt(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_PEERGROUPS, buf.as_mut_ptr().cast(), &mut len) };
        if r == 0 {
            return Ok(buf[..len as usize].chunks_exact(4).map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]])).collect());
        }
        let e = io::Error::last_os_error();
        // ERANGE: the kernel wrote the size it needs into len (NGROUPS_MAX is 65536).
        if e.raw_os_error() == Some(libc::ERANGE) && (len as usize) > buf.len() && (len as usize) <= 65536 * 4 {
            buf.resize(len as usize, 0);
            continue;
        }
        return Err(sys(format!("getsockopt(fd {}, SO_PEERGROUPS)", fd.as_raw_fd()), e));
    }
}

/// SO_PEERPIDFD (6.5+): a pidfd of the process that called `connect()`. `Ok(None)` when
/// the kernel lacks the option (ENOPROTOOPT: fall back to [`verify_sender`]). An error
/// with `is_gone()` when that process has been reaped (6.5–6.15 refuse, 6.16+ hand out a
/// dead pidfd; both end here). A zombie connector yields `Some` with `alive() == false`.
pub fn peer_pidfd(fd: BorrowedFd) -> Result<Option<PidFd>> {
    let call = format!("getsockopt(fd {}, SO_PEERPIDFD)", fd.as_raw_fd());
    match getsockopt_int(fd, libc::SO_PEERPIDFD) {
        Ok(raw) if raw >= 0 => {
            // SAFETY: the kernel installed this descriptor for us.
            let owned = unsafe { OwnedFd::from_raw_fd(raw) };
            PidFd::from_fd(owned).map(Some).map_err(|e| match e {
                Error::Sys { source, .. } => sys(call, source),
                e => e,
            })
        }
        Ok(raw) => Err(sys(call, io::Error::other(format!("kernel returned fd {raw}")))),
        Err(e) if e.raw_os_error() == Some(libc::ENOPROTOOPT) => Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Err(sys(call, io::Error::from_raw_os_error(libc::ESRCH))),
        Err(e) => Err(sys(call, e)),
    }
}

/// SO_PASSCRED: ask the kernel to report the writer's credentials with every read. Set it
/// on the listener and on each accepted socket before the first read (module docs).
pub fn set_passcred(fd: BorrowedFd, on: bool) -> Result<()> {
    setsockopt_int(fd, libc::SO_PASSCRED, on as libc::c_int).map_err(|e| sys(format!("setsockopt(fd {}, SO_PASSCRED, {on})", fd.as_raw_fd()), e))
}

/// Whether SO_PASSCRED is on (e.g. inherited from the listener).
pub fn passcred(fd: BorrowedFd) -> Result<bool> {
    getsockopt_int(fd, libc::SO_PASSCRED).map(|v| v != 0).map_err(|e| sys(format!("getsockopt(fd {}, SO_PASSCRED)", fd.as_raw_fd()), e))
}

/// SO_PASSRIGHTS (6.16+): `false` makes the kernel refuse fds sent to this socket (the
/// sender's `sendmsg` fails with EPERM), so a hostile peer cannot hand the daemon a
/// descriptor whose close blocks. `Ok(false)` when the kernel lacks the option; `Ok(true)`
/// when it was set.
pub fn set_passrights(fd: BorrowedFd, on: bool) -> Result<bool> {
    match setsockopt_int(fd, SO_PASSRIGHTS, on as libc::c_int) {
        Ok(()) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::ENOPROTOOPT) => Ok(false),
        Err(e) => Err(sys(format!("setsockopt(fd {}, SO_PASSRIGHTS, {on})", fd.as_raw_fd()), e)),
    }
}

/// SO_OOBINLINE: deliver an out-of-band byte (MSG_OOB, CONFIG_AF_UNIX_OOB) in the stream.
/// Without it the kernel drops that byte's skb when a read passes it, and fds a hostile
/// client attached to it are released in the reading thread (which can block, module
/// docs); inline, they arrive like any others and are discarded off-thread.
pub fn set_oobinline(fd: BorrowedFd, on: bool) -> Result<()> {
    setsockopt_int(fd, libc::SO_OOBINLINE, on as libc::c_int).map_err(|e| sys(format!("setsockopt(fd {}, SO_OOBINLINE, {on})", fd.as_raw_fd()), e))
}

/// Closes a client connection without waiting on what the client left in it. Closing a
/// socket releases every message still queued, with its fds, in the closing thread, so
/// this first shuts it down (the client can queue nothing more), then drains it without
/// blocking (fds go to [`discard_fds`]), then closes it.
pub fn close_client(conn: OwnedFd) {
    let fd = conn.as_fd();
    // SAFETY: shutdown on a valid socket; errors (already shut, not connected) are harmless.
    unsafe { libc::shutdown(fd.as_raw_fd(), libc::SHUT_RDWR) };
    let _ = set_oobinline(fd, true);
    let mut buf = [0u8; 4096];
    while let Ok(r) = recv_flags(fd, &mut buf, SCM_MAX_FD, libc::MSG_DONTWAIT) {
        if r.len == 0 && r.fds.is_empty() {
            break;
        }
    }
    drop(conn);
}

/// Client side of the pidfd fallback: sends `data` with SCM_CREDENTIALS (this process's
/// pid, effective uid and gid) and, if given, `pidfd` (this process's own, from
/// `PidFd::open(getpid)`) in one `sendmsg`. Returns the bytes sent; a stream socket may
/// send fewer (signal, non-blocking), and the control data went with the first byte, so
/// write the rest with plain writes.
pub fn send_with_creds(fd: BorrowedFd, data: &[u8], pidfd: Option<BorrowedFd>) -> Result<usize> {
    let fds: Vec<BorrowedFd> = pidfd.into_iter().collect();
    send_msg(fd, data, Some(&Cred::current()), &fds)
}

/// One `sendmsg` with optional SCM_CREDENTIALS (any values: the kernel checks them and
/// answers EPERM to a claim the sender may not make) and up to [`SCM_MAX_FD`] fds.
/// `data` must not be empty: a stream socket drops control data sent with no bytes.
pub fn send_msg(fd: BorrowedFd, data: &[u8], creds: Option<&Cred>, fds: &[BorrowedFd]) -> Result<usize> {
    let call = format!("sendmsg(fd {}, {} bytes, creds {:?}, {} fds)", fd.as_raw_fd(), data.len(), creds.map(|c| (c.pid, c.uid, c.gid)), fds.len());
    let bad = |why: &str| Err(sys(call.clone(), io::Error::new(io::ErrorKind::InvalidInput, why.to_string())));
    if data.is_empty() {
        return bad("no data: control messages need at least one byte to travel with");
    }
    if fds.len() > SCM_MAX_FD {
        return bad("more than 253 fds (SCM_MAX_FD) in one message");
    }
    // SAFETY: CMSG_SPACE is pure arithmetic.
    let space = unsafe {
        creds.map_or(0, |_| libc::CMSG_SPACE(size_of::<libc::ucred>() as u32) as usize)
            + if fds.is_empty() { 0 } else { libc::CMSG_SPACE((fds.len() * 4) as u32) as usize }
    };
    let mut control = vec![0u64; space.div_ceil(8)];
    let mut iov = libc::iovec { iov_base: data.as_ptr() as *mut libc::c_void, iov_len: data.len() };
    // SAFETY: an all-zero msghdr is valid; the pointers set below outlive the call.
    let mut msg: libc::msghdr = unsafe { zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if space > 0 {
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        // SAFETY: the control buffer holds `space` bytes, enough for the headers written.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            if let Some(cr) = creds {
                (*c).cmsg_level = libc::SOL_SOCKET;
                (*c).cmsg_type = libc::SCM_CREDENTIALS;
                (*c).cmsg_len = libc::CMSG_LEN(size_of::<libc::ucred>() as u32) as _;
                let u = libc::ucred { pid: cr.pid, uid: cr.uid, gid: cr.gid };
                std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<libc::ucred>(), u);
                c = libc::CMSG_NXTHDR(&msg, c);
            }
            if !fds.is_empty() {
                (*c).cmsg_level = libc::SOL_SOCKET;
                (*c).cmsg_type = libc::SCM_RIGHTS;
                (*c).cmsg_len = libc::CMSG_LEN((fds.len() * 4) as u32) as _;
                let p = libc::CMSG_DATA(c).cast::<libc::c_int>();
                for (i, f) in fds.iter().enumerate() {
                    std::ptr::write_unaligned(p.add(i), f.as_raw_fd());
                }
            }
        }
    }
    loop {
        // SAFETY: msg points at live buffers; MSG_NOSIGNAL: a closed peer is an error, not SIGPIPE.
        let n = unsafe { libc::sendmsg(fd.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(sys(call, e));
        }
    }
}

/// What one [`recv_with_creds`] read brought. Dropping it closes its fds off this thread.
#[derive(Debug)]
pub struct Received {
    /// Bytes read into the buffer; 0 on a stream means end of file.
    pub len: usize,
    /// The writer's credentials, when the socket had SO_PASSCRED for this read and the
    /// kernel attached some (None for data queued before either side asked for them).
    pub creds: Option<Cred>,
    /// Fds sent with these bytes (SCM_RIGHTS), at most the `max_fds` asked for. Close
    /// unwanted ones with [`discard_fds`], never inline (module docs).
    pub fds: Vec<OwnedFd>,
    /// The sender sent more fds than `max_fds` (the rest were discarded) or the kernel
    /// truncated the control data (MSG_CTRUNC): refuse the message.
    pub truncated: bool,
    /// SCM_PIDFD: the kernel's own pidfd of the writer, only when SO_PASSPIDFD (6.5+) is
    /// on; allot does not set it.
    pub scm_pidfd: Option<OwnedFd>,
}

impl Drop for Received {
    fn drop(&mut self) {
        discard_fds(std::mem::take(&mut self.fds));
        if let Some(fd) = self.scm_pidfd.take() {
            discard_fds(vec![fd]);
        }
    }
}

/// One `recvmsg` (MSG_CMSG_CLOEXEC, EINTR retried) into `buf`, with room for the most fds
/// any message can carry so the kernel never drops (and releases) fds in this thread.
/// Keeps at most `max_fds` fds and discards the rest off-thread, marking `truncated`.
/// Blocks as the socket says: give it a read timeout (`set_read_timeout`) or make it
/// non-blocking, and a silent peer costs that timeout (an error with kind WouldBlock).
pub fn recv_with_creds(fd: BorrowedFd, buf: &mut [u8], max_fds: usize) -> Result<Received> {
    recv_flags(fd, buf, max_fds, 0)
}

fn recv_flags(fd: BorrowedFd, buf: &mut [u8], max_fds: usize, flags: libc::c_int) -> Result<Received> {
    let mut control = [0u64; CONTROL_WORDS];
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    // SAFETY: an all-zero msghdr is valid; the pointers set below outlive the call.
    let mut msg: libc::msghdr = unsafe { zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = size_of::<[u64; CONTROL_WORDS]>() as _;
    let n = loop {
        // SAFETY: msg points at live buffers of the stated sizes.
        let n = unsafe { libc::recvmsg(fd.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC | flags) };
        if n >= 0 {
            break n as usize;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(sys(format!("recvmsg(fd {}) waiting for the client's message", fd.as_raw_fd()), e));
        }
    };
    let mut r = Received { len: n, creds: None, fds: Vec::new(), truncated: msg.msg_flags & libc::MSG_CTRUNC != 0, scm_pidfd: None };
    // Take ownership of every descriptor first, so none can leak whatever else is wrong.
    // SAFETY: the kernel wrote msg_controllen bytes of well-formed cmsgs into `control`.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            let data = libc::CMSG_DATA(c);
            let payload = ((*c).cmsg_len as usize).saturating_sub(libc::CMSG_LEN(0) as usize);
            match ((*c).cmsg_level, (*c).cmsg_type) {
                (libc::SOL_SOCKET, libc::SCM_RIGHTS) => {
                    for i in 0..payload / 4 {
                        let raw = std::ptr::read_unaligned(data.cast::<libc::c_int>().add(i));
                        r.fds.push(OwnedFd::from_raw_fd(raw));
                    }
                }
                (libc::SOL_SOCKET, SCM_PIDFD) if payload >= 4 => {
                    r.scm_pidfd = Some(OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.cast::<libc::c_int>())));
                }
                (libc::SOL_SOCKET, libc::SCM_CREDENTIALS) if payload >= size_of::<libc::ucred>() => {
                    let u = std::ptr::read_unaligned(data.cast::<libc::ucred>());
                    // pid 0: no creds were attached to these bytes (module docs).
                    r.creds = (u.pid > 0).then_some(Cred { pid: u.pid, uid: u.uid, gid: u.gid });
                }
                _ => {}
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    if r.fds.len() > max_fds {
        discard_fds(r.fds.split_off(max_fds));
        r.truncated = true;
    }
    Ok(r)
}

/// A sender whose identity held up: its credentials and a pidfd pinning the process.
#[derive(Debug)]
pub struct Sender {
    /// SCM_CREDENTIALS as the kernel checked them (pid = `pidfd.pid()`).
    pub cred: Cred,
    /// The sender's own process; check `alive()` again right before acting on it.
    pub pidfd: PidFd,
}

/// The pidfd fallback's check (module docs): `r` must hold SCM_CREDENTIALS and exactly one
/// fd, a process pidfd whose pid equals the credentials' pid, alive now. Takes the fds out
/// of `r`; anything refused is discarded off-thread. Creds and fds must come from the same
/// read, which is why this takes the [`Received`] and not its parts.
pub fn verify_sender(r: &mut Received) -> Result<Sender> {
    let fds = std::mem::take(&mut r.fds);
    let refuse = |fds: Vec<OwnedFd>, why: String| {
        discard_fds(fds);
        Err(Error::Identity(why))
    };
    if r.truncated {
        return refuse(fds, "the client sent more descriptors than its own pidfd; send exactly one".into());
    }
    let Some(cred) = r.creds else {
        return refuse(fds, "no SCM_CREDENTIALS came with the message: the client must send them with its pidfd (send_with_creds) and the socket needs SO_PASSCRED before the read".into());
    };
    if fds.len() != 1 {
        let n = fds.len();
        return refuse(fds, format!("expected exactly one descriptor (the sender's pidfd) with the credentials, got {n}"));
    }
    let fd = fds.into_iter().next().expect("one fd");
    let pidfd = PidFd::from_fd(fd).map_err(|e| match e.is_gone() {
        true => Error::Identity(format!("the sender (pid {}) has exited", cred.pid)),
        false => Error::Identity(format!("the descriptor sent is not the sender's pidfd: {e}")),
    })?;
    if pidfd.pid() != cred.pid {
        return Err(Error::Identity(format!("the pidfd sent is for pid {}, but the kernel says the sender is pid {}", pidfd.pid(), cred.pid)));
    }
    if !pidfd.alive() {
        return Err(Error::Identity(format!("the sender (pid {}) has exited", cred.pid)));
    }
    Ok(Sender { cred, pidfd })
}

/// Why [`recv_message`] refused a message before its end.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// More than `max` bytes came without the end byte.
    #[error("message longer than {max} bytes")]
    TooLong {
        /// The most the reader takes.
        max: usize,
    },
    /// Two processes wrote into one message (their credentials, as received).
    #[error("one message written by two processes ({first} then {then})")]
    TwoWriters {
        /// The first chunk's credentials.
        first: String,
        /// The differing chunk's.
        then: String,
    },
    /// The client hung up after `after` bytes, before the end byte.
    #[error("the client closed the connection after {after} bytes, before the end of its message")]
    Closed {
        /// Bytes that came.
        after: usize,
    },
}

/// A whole client message read by [`recv_message`].
#[derive(Debug)]
pub struct Message {
    /// The bytes, up to and including the first `end` byte (bytes after it were read
    /// from the socket too and are dropped: one message per connection).
    pub data: Vec<u8>,
    /// What the reads carried: the creds (the same writer for every chunk) and fds.
    pub received: Received,
}

/// Reads one message ending in `end` (at most `max` bytes) within `within` in all, however
/// the client split it: the creds of every chunk must be the same (one writer; with
/// SO_PASSCRED the kernel attaches them to every chunk) and fds may arrive on any chunk,
/// at most `max_fds` in all. The overall limit stops a client that trickles a byte at a
/// time (an error of kind TimedOut). Needs SO_PASSCRED on the socket; sets SO_OOBINLINE
/// (see [`set_oobinline`]). Reads never block beyond `within`, whatever the socket's mode.
pub fn recv_message(fd: BorrowedFd, max: usize, end: u8, max_fds: usize, within: std::time::Duration) -> Result<Message> {
    let refuse = |why: Refusal| Err(Error::Message(why));
    let deadline = std::time::Instant::now() + within;
    let mut data = Vec::new();
    let mut acc = Received { len: 0, creds: None, fds: Vec::new(), truncated: false, scm_pidfd: None };
    let mut buf = vec![0u8; 4096];
    let mut first = true;
    set_oobinline(fd, true)?;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let mut p = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd; EINTR simply loops and recomputes the time left.
        let ready = unsafe { libc::poll(&mut p, 1, left.as_millis().min(i32::MAX as u128) as i32) };
        if ready == 0 {
            let why = format!("no complete message within {within:?} ({} bytes came); the client must send its request at once", data.len());
            return Err(sys(format!("recvmsg(fd {})", fd.as_raw_fd()), io::Error::new(io::ErrorKind::TimedOut, why)));
        }
        if ready < 0 {
            continue;
        }
        let mut r = match recv_flags(fd, &mut buf, max_fds.saturating_sub(acc.fds.len()), libc::MSG_DONTWAIT) {
            Ok(r) => r,
            // Readable yet nothing to read (a consumed skb still queued): never spin hard.
            Err(e) if e.io_kind() == Some(io::ErrorKind::WouldBlock) => {
                std::thread::sleep(std::time::Duration::from_millis(5));
                continue;
            }
            Err(e) => return Err(e),
        };
        if r.len == 0 {
            return refuse(Refusal::Closed { after: data.len() });
        }
        if first {
            acc.creds = r.creds;
            first = false;
        } else if r.creds != acc.creds {
            return refuse(Refusal::TwoWriters { first: format!("{:?}", acc.creds), then: format!("{:?}", r.creds) });
        }
        acc.truncated |= r.truncated;
        acc.fds.append(&mut r.fds);
        data.extend_from_slice(&buf[..r.len]);
        if let Some(i) = data.iter().position(|&b| b == end) {
            data.truncate(i + 1);
            acc.len = data.len();
            return Ok(Message { data, received: acc });
        }
        if data.len() > max {
            return refuse(Refusal::TooLong { max });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

    #[test]
    fn roundtrip_on_a_socketpair() {
        let (a, b) = UnixStream::pair().unwrap();
        set_passcred(b.as_fd(), true).unwrap();
        assert!(passcred(b.as_fd()).unwrap());
        assert_eq!(peer_cred(a.as_fd()).unwrap(), Cred::current());
        let me = PidFd::open(std::process::id() as i32).unwrap();
        assert_eq!(send_with_creds(a.as_fd(), b"hi\n", Some(me.as_fd())).unwrap(), 3);
        let mut buf = [0u8; 16];
        let mut r = recv_with_creds(b.as_fd(), &mut buf, 1).unwrap();
        assert_eq!((r.len, r.creds, r.fds.len(), r.truncated), (3, Some(Cred::current()), 1, false));
        let s = verify_sender(&mut r).unwrap();
        assert_eq!(s.pidfd.pid(), std::process::id() as i32);
        assert!(send_msg(a.as_fd(), b"", None, &[]).is_err());
    }
}
