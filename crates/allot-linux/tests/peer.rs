//! Kernel tests for `allot_linux::ipc::peer`: who is asking on the daemon's socket, with
//! clients that lie. Needs root (clients run as uid 61001); fails, never skips.
//! Clients are this test binary re-run in a role (see `common::client`).

mod common;

use allot_linux::ipc::peer::*;
use allot_linux::Error;
use common::*;
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn connect() -> UnixStream {
    let s = UnixStream::connect(sock_env()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

fn own_pidfd() -> PidFd {
    PidFd::open(std::process::id() as i32).unwrap()
}

fn identity_err(r: allot_linux::Result<Sender>) -> String {
    match r {
        Err(Error::Identity(m)) => m,
        other => panic!("expected an identity refusal, got {other:?}"),
    }
}

fn read_message(s: &UnixStream) -> Message {
    recv_message(s.as_fd(), 65536, b'\n', 1, Duration::from_secs(10)).unwrap()
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn peer_cred_groups_and_inherited_passcred_of_a_non_root_client() {
    if role().is_some() {
        let mut s = connect();
        s.write_all(b"x").unwrap(); // a plain write: no creds sent by the client
        let _ = s.read(&mut [0u8; 1]); // hold the connection until the test is done
        return;
    }
    require_root();
    let dir = TempDir::new("peer-cred");
    let (l, path) = listener(&dir, true);
    let mut child = client(
        "peer_cred_groups_and_inherited_passcred_of_a_non_root_client",
        "hold",
        Some(OTHER_UID),
        &[61003, 61002],
        &[("SOCK", path.display().to_string())],
    )
    .spawn()
    .unwrap();
    let conn = accept(&l);
    let want = Cred { pid: child.id() as i32, uid: OTHER_UID, gid: OTHER_UID };
    assert_eq!(peer_cred(conn.as_fd()).unwrap(), want);
    let mut groups = peer_groups(conn.as_fd()).unwrap();
    groups.sort();
    assert_eq!(groups, vec![61002, 61003]);
    // SO_PASSCRED on the listener reaches the accepted socket (at accept() up to 6.15,
    // at connect() from 6.16), so even a plain write arrives with the writer's creds.
    assert!(passcred(conn.as_fd()).unwrap());
    let r = recv_with_creds(conn.as_fd(), &mut [0u8; 8], 0).unwrap();
    assert_eq!((r.len, r.creds), (1, Some(want)));
    match (kernel() >= (6, 5), peer_pidfd(conn.as_fd()).unwrap()) {
        (true, Some(p)) => assert!(p.pid() == want.pid && p.alive()),
        (false, None) => {}
        (new, got) => panic!("kernel {:?}: SO_PEERPIDFD expected {}, got {got:?}", kernel(), if new { "a pidfd" } else { "ENOPROTOOPT" }),
    }
    drop(conn);
    assert!(child.wait().unwrap().success());
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn a_non_root_client_cannot_forge_another_process() {
    if role().is_some() {
        let victim: i32 = std::env::var("VICTIM").unwrap().parse().unwrap();
        let vfd = PidFd::open(victim).unwrap(); // pidfd_open needs no permission
        let me = own_pidfd();
        let mine = Cred::current();
        let a = connect();
        let eperm = |r: allot_linux::Result<usize>, what: &str| {
            let e = r.expect_err(what);
            assert_eq!(e.io_kind(), Some(std::io::ErrorKind::PermissionDenied), "{what}: {e}");
            println!("{what}: EPERM");
        };
        eperm(send_msg(a.as_fd(), b"a\n", Some(&Cred { pid: victim, ..mine }), &[vfd.as_fd()]), "claim the victim's pid");
        eperm(send_msg(a.as_fd(), b"b\n", Some(&Cred { uid: 0, ..mine }), &[me.as_fd()]), "claim uid 0");
        std::thread::scope(|t| {
            t.spawn(|| {
                // SAFETY: gettid has no preconditions.
                let tid = unsafe { libc::gettid() };
                assert_ne!(tid, mine.pid);
                eperm(send_msg(a.as_fd(), b"d\n", Some(&Cred { pid: tid, ..mine }), &[me.as_fd()]), "claim the thread id");
            });
        });
        // Accepted by the kernel (own creds, someone else's pidfd): the daemon must refuse.
        send_msg(a.as_fd(), b"c\n", Some(&mine), &[vfd.as_fd()]).unwrap();
        // From a second thread: the kernel reports the tgid, explicit creds or implicit.
        let (b, c) = (connect(), connect());
        std::thread::scope(|t| {
            t.spawn(|| send_with_creds(b.as_fd(), b"t\n", Some(me.as_fd())).unwrap());
            t.spawn(|| (&c).write_all(b"u\n").unwrap());
        });
        let mut d = connect();
        send_with_creds(d.as_fd(), b"e\n", Some(me.as_fd())).unwrap();
        let _ = d.read(&mut [0u8; 1]); // stay alive until the daemon side has checked
        return;
    }
    require_root();
    let dir = TempDir::new("peer-forge");
    let (l, path) = listener(&dir, true);
    let mut victim = Command::new("sleep").arg("60").spawn().unwrap();
    let env = [("SOCK", path.display().to_string()), ("VICTIM", victim.id().to_string())];
    let child = client("a_non_root_client_cannot_forge_another_process", "forger", Some(OTHER_UID), &[], &env).spawn().unwrap();
    let me = child.id() as i32;
    let theirs = Cred { pid: me, uid: OTHER_UID, gid: OTHER_UID };

    let a = accept(&l);
    let mut m = read_message(&a);
    assert_eq!((m.data.as_slice(), m.received.creds), (&b"c\n"[..], Some(theirs)), "the refused sends must not arrive");
    let e = identity_err(verify_sender(&mut m.received));
    assert!(e.contains(&format!("for pid {}", victim.id())) && e.contains(&format!("sender is pid {me}")), "{e}");

    let b = accept(&l);
    let mut m = read_message(&b);
    let s = verify_sender(&mut m.received).unwrap();
    assert_eq!((s.cred, s.pidfd.pid()), (theirs, me), "a thread's explicit creds name the process");
    let c = accept(&l);
    assert_eq!(read_message(&c).received.creds, Some(theirs), "a thread's plain write carries the tgid");

    let mut d = accept(&l);
    let mut m = read_message(&d);
    let s = verify_sender(&mut m.received).unwrap();
    assert_eq!((m.data.as_slice(), s.cred, s.pidfd.pid()), (&b"e\n"[..], theirs, me));
    assert_eq!(peer_cred(d.as_fd()).unwrap(), theirs);
    d.write_all(b"k").unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "forger failed: {stdout}");
    for line in ["claim the victim's pid: EPERM", "claim uid 0: EPERM", "claim the thread id: EPERM"] {
        assert!(stdout.contains(line), "{line:?} missing from {stdout}");
    }
    assert!(!s.pidfd.alive(), "the pidfd follows the client's exit");
    victim.kill().unwrap();
    victim.wait().unwrap();
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn a_sender_that_exits_before_the_check_is_refused() {
    if role().is_some() {
        let s = connect();
        send_with_creds(s.as_fd(), b"x\n", Some(own_pidfd().as_fd())).unwrap();
        return; // exits with the message still queued
    }
    require_root();
    let dir = TempDir::new("peer-exit");
    let (l, path) = listener(&dir, true);
    for reap in [false, true] {
        let mut child =
            client("a_sender_that_exits_before_the_check_is_refused", "send-exit", Some(OTHER_UID), &[], &[("SOCK", path.display().to_string())])
                .stdout(Stdio::null())
                .spawn()
                .unwrap();
        let pid = child.id();
        let conn = accept(&l);
        wait_zombie(pid);
        if reap {
            child.wait().unwrap(); // now its pid may be reused by anyone
        }
        let mut m = read_message(&conn);
        assert_eq!(m.received.creds.map(|c| c.pid), Some(pid as i32));
        let e = identity_err(verify_sender(&mut m.received));
        assert!(e.contains(&format!("sender (pid {pid}) has exited")), "reaped {reap}: {e}");
        child.wait().unwrap();
    }
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn hostile_descriptors_are_refused_and_closed() {
    require_root();
    let (a, b) = UnixStream::pair().unwrap();
    set_passcred(b.as_fd(), true).unwrap();
    b.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let me = Cred::current();
    let send = |fds: &[BorrowedFd]| send_msg(a.as_fd(), b"req\n", Some(&me), fds).unwrap();
    let check = |max_fds: usize| {
        let mut r = recv_with_creds(b.as_fd(), &mut [0u8; 64], max_fds).unwrap();
        assert_eq!(r.len, 4);
        identity_err(verify_sender(&mut r))
    };
    // No descriptor at all.
    send(&[]);
    assert!(check(1).contains("got 0"));
    // Not a pidfd: a pipe (and it must be closed, not kept), a socket, /proc/PID, an eventfd.
    let (rd, wr) = pipe();
    send(&[wr.as_fd()]);
    drop(wr);
    assert!(check(1).contains("not a pidfd but pipe:["));
    assert!(write_ends_closed(&rd, Duration::from_secs(5)), "a refused fd was leaked");
    let (s1, _s2) = UnixStream::pair().unwrap();
    send(&[s1.as_fd()]);
    assert!(check(1).contains("not a pidfd but socket:["));
    let dir = std::fs::File::open(format!("/proc/{}", std::process::id())).unwrap();
    send(&[dir.as_fd()]);
    assert!(check(1).contains(&format!("not a pidfd but /proc/{}", std::process::id())));
    // SAFETY: plain syscall.
    let ev = unsafe { OwnedFd::from_raw_fd(libc::eventfd(0, libc::EFD_CLOEXEC)) };
    send(&[ev.as_fd()]);
    assert!(check(1).contains("anon_inode:[eventfd]"));
    // A pidfd of another process, with the sender's own (true) creds.
    let mut other = Command::new("sleep").arg("60").spawn().unwrap();
    let ofd = PidFd::open(other.id() as i32).unwrap();
    send(&[ofd.as_fd()]);
    assert!(check(1).contains(&format!("is for pid {}", other.id())));
    other.kill().unwrap();
    other.wait().unwrap();
    // A thread pidfd (PIDFD_THREAD = O_EXCL, 6.9+) of our own main thread.
    // SAFETY: plain syscall.
    let t = unsafe { libc::syscall(libc::SYS_pidfd_open, me.pid, libc::O_EXCL) };
    if t >= 0 {
        // SAFETY: the kernel just gave us this descriptor.
        let t = unsafe { OwnedFd::from_raw_fd(t as i32) };
        send(&[t.as_fd()]);
        assert!(check(1).contains("thread pidfd"));
    } else {
        assert!(kernel() < (6, 9), "pidfd_open(PIDFD_THREAD) failed on {:?}: {}", kernel(), std::io::Error::last_os_error());
    }
    // Two pidfds, and then the most one message can carry: only max_fds are kept, the
    // message is marked, everything is closed.
    let mine = own_pidfd();
    send(&[mine.as_fd(), mine.as_fd()]);
    assert!(check(1).contains("more descriptors"));
    let (rd, wr) = pipe();
    let many: Vec<BorrowedFd> = std::iter::repeat_n(wr.as_fd(), SCM_MAX_FD).collect();
    send(&many);
    let r = recv_with_creds(b.as_fd(), &mut [0u8; 64], 1).unwrap();
    assert_eq!((r.fds.len(), r.truncated), (1, true));
    drop(r);
    drop(many);
    drop(wr);
    assert!(write_ends_closed(&rd, Duration::from_secs(5)), "fds beyond max_fds were leaked");
    let (_rd, wr) = pipe();
    let too_many: Vec<BorrowedFd> = std::iter::repeat_n(wr.as_fd(), SCM_MAX_FD + 1).collect();
    assert!(send_msg(a.as_fd(), b"x", None, &too_many).is_err());
    // Credentials missing: the receiver never asked for them.
    let (c, d) = UnixStream::pair().unwrap();
    send_with_creds(c.as_fd(), b"q\n", Some(mine.as_fd())).unwrap();
    let mut r = recv_with_creds(d.as_fd(), &mut [0u8; 8], 1).unwrap();
    assert_eq!(r.creds, None);
    assert!(identity_err(verify_sender(&mut r)).contains("SO_PASSCRED"));
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn a_message_split_over_writes_and_writers() {
    require_root();
    let (a, b) = UnixStream::pair().unwrap();
    set_passcred(b.as_fd(), true).unwrap();
    b.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    (&a).write_all(b"{\"op\":").unwrap();
    (&a).write_all(b"\"status\"").unwrap();
    send_with_creds(a.as_fd(), b"}\n", Some(own_pidfd().as_fd())).unwrap();
    let mut m = read_message(&b);
    assert_eq!(m.data, b"{\"op\":\"status\"}\n");
    assert_eq!(verify_sender(&mut m.received).unwrap().pidfd.pid(), std::process::id() as i32);
    // Another process writes into the middle of the message: refused.
    (&a).write_all(b"{").unwrap();
    let st = Command::new("printf").arg("y").stdout(Stdio::from(OwnedFd::from(a.try_clone().unwrap()))).status().unwrap();
    assert!(st.success());
    send_with_creds(a.as_fd(), b"}\n", Some(own_pidfd().as_fd())).unwrap();
    match recv_message(b.as_fd(), 65536, b'\n', 1, Duration::from_secs(10)) {
        Err(Error::Message(Refusal::TwoWriters { .. })) => {}
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn a_silent_or_oob_client_does_not_block_the_reader() {
    require_root();
    let (a, b) = UnixStream::pair().unwrap();
    set_passcred(b.as_fd(), true).unwrap();
    b.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let t0 = Instant::now();
    let e = recv_with_creds(b.as_fd(), &mut [0u8; 8], 1).unwrap_err();
    assert_eq!(e.io_kind(), Some(std::io::ErrorKind::WouldBlock), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(2));
    // An out-of-band byte (CONFIG_AF_UNIX_OOB) is not part of the stream.
    // SAFETY: plain syscall on a valid socket.
    let oob = unsafe { libc::send(a.as_raw_fd(), b"!".as_ptr().cast(), 1, libc::MSG_OOB) };
    assert!(oob == 1 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EOPNOTSUPP));
    let short = Duration::from_millis(300);
    let e = recv_message(b.as_fd(), 64, b'\n', 1, short).unwrap_err();
    assert_eq!(e.io_kind(), Some(std::io::ErrorKind::TimedOut), "{e}");
    (&a).write_all(b"hi\n").unwrap();
    assert!(recv_message(b.as_fd(), 64, b'\n', 1, short).unwrap().data.ends_with(b"hi\n"));
    // A byte every 20 ms, never a newline: each read succeeds, the message never ends.
    let t0 = Instant::now();
    std::thread::scope(|t| {
        let a = &a;
        t.spawn(move || {
            while t0.elapsed() < Duration::from_secs(1) {
                let _ = (&*a).write_all(b"z");
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        let e = recv_message(b.as_fd(), 1 << 20, b'\n', 1, short).unwrap_err();
        assert_eq!(e.io_kind(), Some(std::io::ErrorKind::TimedOut), "{e}");
        assert!(t0.elapsed() < Duration::from_millis(900), "a trickling client held the reader {:?}", t0.elapsed());
    });
    let _ = recv_with_creds(b.as_fd(), &mut [0u8; 4096], 0); // what the trickle left
                                                             // The client hangs up mid-message.
    (&a).write_all(b"half").unwrap();
    drop(a);
    assert!(matches!(recv_message(b.as_fd(), 64, b'\n', 1, short), Err(Error::Message(Refusal::Closed { after: 4 }))));
}

/// A TCP connection whose peer never reads, its send queue full, SO_LINGER 3 s: the last
/// close of it blocks 3 s (as long as an attacker likes, in general). Keep the listener.
fn lingering_tcp() -> (std::net::TcpListener, std::net::TcpStream) {
    let srv = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let small: libc::c_int = 4096; // inherited by the connection it accepts: a tiny window
                                   // SAFETY: valid socket and option buffer.
    assert_eq!(unsafe { libc::setsockopt(srv.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, (&small as *const libc::c_int).cast(), 4) }, 0);
    let tcp = std::net::TcpStream::connect(srv.local_addr().unwrap()).unwrap();
    tcp.set_nonblocking(true).unwrap();
    while (&tcp).write(&[0u8; 65536]).is_ok() {}
    let linger = libc::linger { l_onoff: 1, l_linger: 3 };
    // SAFETY: valid socket and option buffer.
    assert_eq!(unsafe { libc::setsockopt(tcp.as_raw_fd(), libc::SOL_SOCKET, libc::SO_LINGER, (&linger as *const libc::linger).cast(), 8) }, 0);
    tcp.set_nonblocking(false).unwrap();
    (srv, tcp)
}

/// Runs `test` again in a process of its own and checks it passed; false when this is that
/// process. The linger tests need it: a child another test forks at the wrong moment
/// holds a copy of every descriptor until its exec, and its close-on-exec may be the last.
fn in_own_process(test: &str) -> bool {
    if role().is_some() {
        return false;
    }
    require_root();
    let out = client(test, "solo", None, &[], &[]).output().unwrap();
    assert!(out.status.success(), "{test}:\n{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    true
}

/// Waits for the closer thread to finish: it took the last close of each lingering socket
/// and waited out the linger, proof that the hazard was real (the reader, timed
/// separately, did not pay for it).
fn linger_bit_the_closer(since: Instant) {
    while discards_pending() > 0 && since.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(discards_pending(), 0, "the closer thread never finished");
    assert!(since.elapsed() >= Duration::from_secs(2), "no close lingered ({:?}): this test tests nothing", since.elapsed());
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn a_lingering_tcp_socket_does_not_block_the_reader() {
    if in_own_process("a_lingering_tcp_socket_does_not_block_the_reader") {
        return;
    }
    let ((_s1, tcp), (_s2, tcp2)) = (lingering_tcp(), lingering_tcp());
    let (a, b) = UnixStream::pair().unwrap();
    set_passcred(b.as_fd(), true).unwrap();
    // One lingering socket last behind a full load of fds, another alone.
    let (_rd, wr) = pipe();
    let mut many: Vec<BorrowedFd> = std::iter::repeat_n(wr.as_fd(), SCM_MAX_FD - 1).collect();
    many.push(tcp.as_fd());
    send_msg(a.as_fd(), b"x\n", Some(&Cred::current()), &many).unwrap();
    send_msg(a.as_fd(), b"y\n", Some(&Cred::current()), &[tcp2.as_fd()]).unwrap();
    drop(many);
    drop((tcp, tcp2)); // as an attacker would: the copies in flight are the last ones
    let t0 = Instant::now();
    for max_fds in [0, 1] {
        let mut r = recv_with_creds(b.as_fd(), &mut [0u8; 2], max_fds).unwrap();
        let _ = verify_sender(&mut r);
        drop(r);
    }
    assert!(t0.elapsed() < Duration::from_millis(1500), "the reader waited {:?}", t0.elapsed());
    linger_bit_the_closer(t0);
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn fds_on_an_oob_byte_or_left_in_the_socket_do_not_block_the_daemon() {
    if in_own_process("fds_on_an_oob_byte_or_left_in_the_socket_do_not_block_the_daemon") {
        return;
    }
    let ((_s1, tcp), (_s2, tcp2)) = (lingering_tcp(), lingering_tcp());
    // On an out-of-band byte (when the kernel has CONFIG_AF_UNIX_OOB).
    let (a, b) = UnixStream::pair().unwrap();
    set_passcred(b.as_fd(), true).unwrap();
    let fd = tcp.as_raw_fd();
    let mut cbuf = [0u64; 4];
    let mut iov = libc::iovec { iov_base: b"!".as_ptr() as *mut libc::c_void, iov_len: 1 };
    // SAFETY: a msghdr with one iovec and one SCM_RIGHTS cmsg in a buffer large enough.
    let oob = unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(4) as _;
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_RIGHTS;
        (*c).cmsg_len = libc::CMSG_LEN(4) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>(), fd);
        libc::sendmsg(a.as_raw_fd(), &msg, libc::MSG_OOB)
    };
    assert!(oob == 1 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EOPNOTSUPP));
    (&a).write_all(b"{}\n").unwrap();
    drop(tcp);
    let t0 = Instant::now();
    let m = recv_message(b.as_fd(), 64, b'\n', 1, Duration::from_secs(5)).unwrap();
    assert!(m.data.ends_with(b"{}\n"));
    drop(m);
    assert!(t0.elapsed() < Duration::from_millis(1500), "the reader waited {:?}", t0.elapsed());
    // Left unread in the connection when the daemon hangs up.
    let (c, d) = UnixStream::pair().unwrap();
    send_msg(c.as_fd(), b"req\n", None, &[]).unwrap();
    send_msg(c.as_fd(), b"more", None, &[tcp2.as_fd()]).unwrap();
    drop(tcp2);
    let _ = recv_with_creds(d.as_fd(), &mut [0u8; 4], 0).unwrap(); // reads only "req\n"
    let t1 = Instant::now();
    close_client(OwnedFd::from(d));
    assert!(t1.elapsed() < Duration::from_millis(1500), "closing the connection waited {:?}", t1.elapsed());
    assert!(send_msg(c.as_fd(), b"late", None, &[]).is_err(), "a closed connection takes nothing more");
    linger_bit_the_closer(t0);
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn so_peerpidfd_names_the_connector_even_after_it_forks_and_exits() {
    if role().is_some() {
        let s = connect();
        // The grandchild keeps the connection open (and exits at the daemon's first byte);
        // orphaned on purpose when this connector exits, then reaped by init.
        #[allow(clippy::zombie_processes)]
        let g = Command::new("head").args(["-c", "1"]).stdin(Stdio::from(OwnedFd::from(s))).stdout(Stdio::null()).spawn().unwrap();
        println!("grandchild {}", g.id());
        return; // the connector exits
    }
    require_root();
    let dir = TempDir::new("peer-pidfd");
    let (l, path) = listener(&dir, true);
    let child =
        client("so_peerpidfd_names_the_connector_even_after_it_forks_and_exits", "fork-exit", None, &[], &[("SOCK", path.display().to_string())])
            .spawn()
            .unwrap();
    let pid = child.id() as i32;
    let conn = accept(&l);
    wait_zombie(pid as u32);
    if kernel() >= (6, 5) {
        let p = peer_pidfd(conn.as_fd()).unwrap().expect("SO_PEERPIDFD on 6.5+");
        assert!(p.pid() == pid && !p.alive(), "a zombie connector: its pid, not alive");
    }
    let out = child.wait_with_output().unwrap(); // exited and reaped: its pid is free for reuse
    assert!(out.status.success());
    assert_eq!(peer_cred(conn.as_fd()).unwrap().pid, pid, "SO_PEERCRED still names the dead connector");
    if kernel() < (6, 5) {
        assert!(peer_pidfd(conn.as_fd()).unwrap().is_none());
    } else {
        let e = peer_pidfd(conn.as_fd()).unwrap_err();
        assert!(e.is_gone(), "{e}");
        if kernel() >= (6, 16) {
            // The kernel hands out a pidfd of the reaped connector; it reports it dead.
            let mut raw: libc::c_int = -1;
            let mut len = 4 as libc::socklen_t;
            // SAFETY: valid socket and out-buffer.
            let r =
                unsafe { libc::getsockopt(conn.as_raw_fd(), libc::SOL_SOCKET, libc::SO_PEERPIDFD, (&mut raw as *mut libc::c_int).cast(), &mut len) };
            assert_eq!(r, 0, "{}", std::io::Error::last_os_error());
            // SAFETY: the kernel installed this descriptor.
            let fd = unsafe { OwnedFd::from_raw_fd(raw) };
            assert_eq!(pidfd_pid(fd.as_fd()), None);
            let mut p = libc::pollfd { fd: raw, events: libc::POLLIN, revents: 0 };
            // SAFETY: one valid pollfd.
            assert_eq!(unsafe { libc::poll(&mut p, 1, 0) }, 1, "a dead process's pidfd polls readable");
        }
    }
    (&conn).write_all(b"k").unwrap(); // lets the grandchild go
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn creds_before_accept_and_the_passcred_window() {
    require_root();
    let dir = TempDir::new("peer-window");
    let (l, path) = listener(&dir, false);
    // Written before accept(): the kernel attaches creds to data for an embryo socket.
    let early = UnixStream::connect(&path).unwrap();
    (&early).write_all(b"a").unwrap();
    let conn = accept(&l);
    assert!(!passcred(conn.as_fd()).unwrap());
    set_passcred(conn.as_fd(), true).unwrap();
    assert_eq!(recv_with_creds(conn.as_fd(), &mut [0u8; 8], 0).unwrap().creds, Some(Cred::current()));
    // Written after accept() while neither end asked: no creds, even once asked.
    let late = UnixStream::connect(&path).unwrap();
    let conn = accept(&l);
    (&late).write_all(b"b").unwrap();
    set_passcred(conn.as_fd(), true).unwrap();
    assert_eq!(recv_with_creds(conn.as_fd(), &mut [0u8; 8], 0).unwrap().creds, None);
    (&late).write_all(b"c").unwrap();
    assert_eq!(recv_with_creds(conn.as_fd(), &mut [0u8; 8], 0).unwrap().creds, Some(Cred::current()));
    // Unconnected: no peer to report.
    // SAFETY: plain syscall.
    let lone = unsafe { OwnedFd::from_raw_fd(libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0)) };
    assert!(peer_cred(lone.as_fd()).is_err());
    assert!(!matches!(peer_pidfd(lone.as_fd()), Ok(Some(_))));
    // SO_PASSPIDFD (6.5+): the kernel adds its own pidfd of the writer (SCM_PIDFD).
    let (x, y) = UnixStream::pair().unwrap();
    let on: libc::c_int = 1;
    // SAFETY: valid socket and option buffer.
    let r = unsafe { libc::setsockopt(y.as_raw_fd(), libc::SOL_SOCKET, libc::SO_PASSPIDFD, (&on as *const libc::c_int).cast(), 4) };
    assert_eq!(r == 0, kernel() >= (6, 5));
    (&x).write_all(b"p").unwrap();
    let mut got = recv_with_creds(y.as_fd(), &mut [0u8; 8], 0).unwrap();
    if r == 0 {
        let p = PidFd::from_fd(got.scm_pidfd.take().expect("SCM_PIDFD")).unwrap();
        assert_eq!(p.pid(), std::process::id() as i32);
    }
    // SO_PASSRIGHTS: present from 6.16; off means fds are refused at the sender.
    let (x, y) = UnixStream::pair().unwrap();
    let has = set_passrights(y.as_fd(), false).unwrap();
    assert_eq!(has, kernel() >= (6, 16));
    if has {
        let e = send_with_creds(x.as_fd(), b"z", Some(own_pidfd().as_fd())).unwrap_err();
        assert_eq!(e.io_kind(), Some(std::io::ErrorKind::PermissionDenied), "{e}");
    }
}
