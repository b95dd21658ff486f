//! The socket: who is asking, and connection handling no user can exhaust.
//!
//! One thread accepts; each connection gets a small thread that reads one request line
//! within a deadline for the whole request (not per read), proves the caller's identity,
//! hands the request to the event loop and writes the reply back. The loop owns all
//! state and answers requests in order; a slow client only ever holds its own thread.
//!
//! Limits (docs/trust.md): at most `limits.connections_per_user` connections open per
//! uid and `limits.connections` in all for users other than root; root is always served.
//! A refused connection gets one line saying which limit, written without blocking.

use super::host::{Host, Linux};
use super::trust::Peer;
use super::Event;
use crate::proto::{decode_request, ErrorKind, Refusal, Reply, Request, MAX_REQUEST};
use allot_linux::ipc::peer;
use std::collections::HashMap;
use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A client has this long to send its whole request, and to take its whole reply.
pub const DEADLINE: Duration = Duration::from_secs(5);

/// How long a request may wait for the loop to take it before it is given up, undone.
pub const WAIT: Duration = Duration::from_secs(10);

/// Connection limits.
#[derive(Debug, Clone, Copy)]
pub struct ConnLimits {
    /// Open connections per uid (root excepted).
    pub per_user: usize,
    /// Open connections of all users but root.
    pub total: usize,
}

#[derive(Default)]
struct Open {
    per_uid: HashMap<u32, usize>,
    total: usize,
}

/// Releases a connection's slot when its thread ends.
struct Slot {
    open: Arc<Mutex<Open>>,
    uid: u32,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut o = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if self.uid != 0 {
            o.total = o.total.saturating_sub(1);
            if let Some(n) = o.per_uid.get_mut(&self.uid) {
                *n -= 1;
                if *n == 0 {
                    o.per_uid.remove(&self.uid);
                }
            }
        }
    }
}

/// What admission follows: the connection limits and who is a login user. The loop
/// replaces it when a reload changes the config.
#[derive(Debug, Clone)]
pub struct Admission {
    /// Connection limits.
    pub limits: ConnLimits,
    /// Uids that are no login user's (`humans` says which) share one connection budget.
    pub humans: super::placement::Humans,
    /// Request budgets, taken here before a request reaches the loop.
    pub budgets: super::limits::Shared,
}

/// Accepts connections forever, sending requests to the loop.
pub fn serve(listener: UnixListener, tx: Sender<Event>, admission: Arc<Mutex<Admission>>, refused: Arc<std::sync::atomic::AtomicU64>) {
    let open = Arc::new(Mutex::new(Open::default()));
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        let Ok(cred) = peer::peer_cred(conn.as_fd()) else { continue };
        let Admission { limits, humans, budgets } = admission.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let key = super::limits::bucket(cred.uid, humans.excluded_why(cred.uid).is_some());
        let admitted = {
            let mut o = open.lock().unwrap_or_else(|e| e.into_inner());
            let mine = o.per_uid.get(&key).copied().unwrap_or(0);
            if cred.uid == 0 {
                Ok(())
            } else if mine >= limits.per_user {
                let who = if key == super::limits::SHARED {
                    "uids that are no login user's (subordinate uids, dynamic users) already have".to_string()
                } else {
                    format!("uid {} already has", cred.uid)
                };
                Err(format!(
                    "{who} {mine} connections open to the daemon, the limit per user (limits.connections_per_user); close some and try again"
                ))
            } else if o.total >= limits.total {
                Err(format!("the daemon has {} connections open from users, its limit (limits.connections); try again in a moment", o.total))
            } else {
                o.total += 1;
                *o.per_uid.entry(key).or_insert(0) += 1;
                Ok(())
            }
        };
        if let Err(why) = admitted {
            refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let _ = conn.set_nonblocking(true);
            let _ = (&conn).write(&Reply::err(Refusal::limit(why)).encode());
            continue;
        }
        let slot = Slot { open: open.clone(), uid: if cred.uid == 0 { 0 } else { key } };
        let tx = tx.clone();
        let spawned = std::thread::Builder::new().name("allot-conn".into()).stack_size(256 * 1024).spawn(move || {
            let _slot = slot;
            connection(conn, cred, tx, &budgets, key);
        });
        if spawned.is_err() {
            log::error!("cannot start a thread for a connection from uid {}", cred.uid);
        }
    }
}

fn reply(conn: &UnixStream, deadline: Instant, r: &Reply) {
    let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(10));
    let _ = conn.set_write_timeout(Some(left));
    let _ = (&*conn).write_all(&r.encode());
}

/// The calling process, proven: SO_PEERPIDFD (the process that connected), or the pidfd
/// it sent with SCM_RIGHTS beside SCM_CREDENTIALS naming the same process (allot-linux's peer.rs).
fn caller(conn: &UnixStream, cred: &peer::Cred, received: &mut peer::Received) -> Result<Option<super::host::Proc>, String> {
    // Tests exercise the fallback (kernels before 6.5) on kernels that have SO_PEERPIDFD.
    let peerpidfd = if std::env::var_os("ALLOT_TEST_NO_PEERPIDFD").is_some() { Ok(None) } else { peer::peer_pidfd(conn.as_fd()) };
    let fd = match peerpidfd {
        Ok(Some(fd)) => {
            peer::discard_fds(std::mem::take(&mut received.fds));
            fd
        }
        Ok(None) if received.fds.is_empty() => return Ok(None),
        Ok(None) => {
            let s = peer::verify_sender(received).map_err(|e| e.to_string())?;
            if s.cred.uid != cred.uid || s.cred.pid != cred.pid {
                return Err(format!(
                    "the process that sent the request (pid {}, uid {}) is not the one that connected (pid {}, uid {})",
                    s.cred.pid, s.cred.uid, cred.pid, cred.uid
                ));
            }
            s.pidfd
        }
        Err(e) if e.is_gone() => return Err(format!("the process that connected (pid {}) has exited", cred.pid)),
        Err(e) => return Err(e.to_string()),
    };
    Linux::default().hold(fd).map(Some).map_err(|_| format!("the process that connected (pid {}) has exited", cred.pid))
}

/// Pids in a request are read in the daemon's pid namespace; a caller in another one
/// (a container) means other processes by the same numbers, so a request that acts on
/// processes by pid is refused there rather than carried out on whichever process has
/// that number here.
fn same_pid_namespace(req: &Request, caller: i32) -> Result<(), String> {
    if !matches!(req, Request::Set { .. } | Request::Focus { .. } | Request::Move { .. }) {
        return Ok(());
    }
    let ns = |who: &str| std::fs::read_link(format!("/proc/{who}/ns/pid")).ok();
    match (ns(&caller.to_string()), ns("self")) {
        (Some(theirs), Some(mine)) if theirs != mine => Err(format!(
            "your process (pid {caller} here) runs in another pid namespace ({}), so the pids you give name other processes here; run allot from the host's pid namespace",
            theirs.display()
        )),
        _ => Ok(()),
    }
}

/// A user named in `show --user` or `log --user` is looked up here, in the connection's
/// thread: an NSS lookup may wait seconds on a directory server (LDAP, SSSD), and the loop
/// serves everyone. The loop gets the uid.
fn resolve_user(req: Request) -> Result<Request, String> {
    let uid_of = |u: Option<String>| -> Result<Option<String>, String> {
        match u {
            Some(u) if u.parse::<u32>().is_err() => allot_linux::process::procfs::user_uid(&u)
                .map(|uid| Some(uid.to_string()))
                .ok_or_else(|| format!("unknown user {u:?}: give a user name or uid")),
            other => Ok(other),
        }
    };
    Ok(match req {
        Request::Show { user } => Request::Show { user: uid_of(user)? },
        Request::Log { user, job, limit } => Request::Log { user: uid_of(user)?, job, limit },
        other => other,
    })
}

fn connection(conn: UnixStream, cred: peer::Cred, tx: Sender<Event>, budgets: &super::limits::Shared, key: u32) {
    handle(&conn, cred, tx, budgets, key);
    // Never wait on what a client left queued (fds it sent are closed off this thread).
    peer::close_client(std::os::fd::OwnedFd::from(conn));
}

fn handle(conn: &UnixStream, cred: peer::Cred, tx: Sender<Event>, budgets: &super::limits::Shared, key: u32) {
    let deadline = Instant::now() + DEADLINE;
    let _ = peer::set_passcred(conn.as_fd(), true);
    // One line within the deadline for the whole request, however it is split.
    let mut msg = match peer::recv_message(conn.as_fd(), MAX_REQUEST, b'\n', 1, DEADLINE) {
        Ok(m) => m,
        Err(allot_linux::Error::Message(peer::Refusal::TooLong { .. })) => {
            let too_long = Refusal::new(ErrorKind::TooLong, format!("request larger than {MAX_REQUEST} bytes refused"));
            return reply(conn, deadline, &Reply::err(too_long));
        }
        Err(allot_linux::Error::Message(why @ peer::Refusal::TwoWriters { .. })) => {
            return reply(conn, deadline, &Reply::err(Refusal::not_permitted(why.to_string())));
        }
        Err(_) => return, // silent, too slow or gone mid-request: nothing was done
    };
    let req = match decode_request(&msg.data) {
        Ok(r) => r,
        Err(e) => return reply(conn, deadline, &Reply::err(e.into())),
    };
    // The budget first: a request over it never reaches the loop (limits.rs).
    if let Err(e) = budgets.admit(if cred.uid == 0 { 0 } else { key }) {
        return reply(conn, deadline, &Reply::err(Refusal::limit(e)));
    }
    if let Err(e) = same_pid_namespace(&req, cred.pid) {
        return reply(conn, deadline, &Reply::err(Refusal::not_permitted(e)));
    }
    let req = match resolve_user(req) {
        Ok(r) => r,
        Err(e) => return reply(conn, deadline, &Reply::err(Refusal::not_found(e))),
    };
    let caller = if matches!(req, Request::Run { .. }) {
        match caller(conn, &cred, &mut msg.received) {
            Ok(c) => c,
            Err(e) => return reply(conn, deadline, &Reply::err(Refusal::not_permitted(format!("cannot prove which process is asking: {e}")))),
        }
    } else {
        None
    };
    drop(msg);
    let groups = peer::peer_groups(conn.as_fd()).unwrap_or_default();
    let peer = Peer { uid: cred.uid, gid: cred.gid, groups, pid: cred.pid, caller };
    let (rtx, rrx) = channel();
    let claim = Arc::new(super::queue::Claim::default());
    if tx.send(Event::Request(super::queue::Pending { peer, req, reply: rtx, claim: claim.clone() })).is_err() {
        return reply(conn, deadline, &Reply::err(Refusal::busy("the daemon is stopping; try again in a moment")));
    }
    // The loop takes requests in turn (queue.rs). One it has not taken within WAIT is
    // given up here, and then never carried out: the reply says nothing was done.
    let r = match rrx.recv_timeout(WAIT) {
        Ok(r) => r,
        Err(RecvTimeoutError::Timeout) if claim.abandon() => Reply::err(Refusal::busy(format!(
            "the daemon did not take this request within {} s (it is busy); nothing was done; try again",
            WAIT.as_secs()
        ))),
        // Taken just now: its answer comes.
        Err(RecvTimeoutError::Timeout) => match rrx.recv() {
            Ok(r) => r,
            Err(_) => return,
        },
        Err(RecvTimeoutError::Disconnected) => Reply::err(Refusal::busy("the daemon is stopping; try again in a moment")),
    };
    let mut r = r;
    if let Some(crate::proto::Response::Show(v)) = r.data.as_mut() {
        super::views::fill(v);
    }
    reply(conn, Instant::now() + DEADLINE, &r);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_names_are_looked_up_before_the_loop_sees_them() {
        let show = |u: &str| resolve_user(Request::Show { user: Some(u.into()) });
        assert_eq!(show("root").unwrap(), Request::Show { user: Some("0".into()) }, "a name becomes its uid here");
        assert_eq!(show("2901").unwrap(), Request::Show { user: Some("2901".into()) }, "a uid is passed on");
        let e = show("no-such-user\n").unwrap_err();
        assert!(e.starts_with("unknown user \"no-such-user\\n\""), "{e}");
        let log = resolve_user(Request::Log { user: Some("root".into()), job: Some("3".into()), limit: Some(5) }).unwrap();
        assert_eq!(log, Request::Log { user: Some("0".into()), job: Some("3".into()), limit: Some(5) });
    }
}
