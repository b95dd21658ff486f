//! Attacks on the daemon, as a hostile user would try them (docs/trust.md).
//!
//! - pid reuse: a client connects, its connecting process exits while another process of
//!   the attacker keeps the connection, the pid is handed to a victim (forced here through
//!   /proc/sys/kernel/ns_last_pid), and the attacker asks `run` to move "itself";
//! - a flood: one user holds idle and trickling connections and hammers requests while
//!   another user's `allot run` and root's `allot status` must stay fast.

mod common;

use common::*;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// How the attacker's surviving process sends the request.
#[derive(Debug, Clone, Copy)]
enum Send {
    /// A plain write: no credentials, no pidfd.
    Plain,
    /// With its own credentials and pidfd (it is alive, but it is not the connector).
    Own,
    /// With its own credentials and a pidfd of the victim (pidfd_open works on any pid).
    Victim,
}

/// Forks the attacker (as uid A): P connects, forks G and exits; G waits for `go`, then
/// sends `run --cap 0.01!` the way `how` says and writes the daemon's reply to `out`.
/// Returns (P's pid, G's pid, go's write end, out's read end). Only raw syscalls run in
/// the children (the test process has threads).
fn attacker(socket: &std::path::Path, how: Send) -> (i32, i32, i32, i32) {
    let line = b"{\"v\":3,\"op\":\"run\",\"cap\":\"0.01!\"}\n";
    // SAFETY: plain data prepared before the fork; the children use it read-only.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (i, b) in socket.as_os_str().as_encoded_bytes().iter().enumerate() {
        addr.sun_path[i] = *b as libc::c_char;
    }
    let (mut go, mut out) = ([0i32; 2], [0i32; 2]);
    // SAFETY: pipes into local arrays.
    unsafe {
        assert_eq!(libc::pipe(go.as_mut_ptr()), 0);
        assert_eq!(libc::pipe(out.as_mut_ptr()), 0);
    }
    // SAFETY: fork; the child only makes async-signal-safe calls and _exits.
    let p = unsafe { libc::fork() };
    assert!(p >= 0);
    if p == 0 {
        unsafe {
            if libc::setgroups(0, std::ptr::null()) != 0 || libc::setgid(A) != 0 || libc::setuid(A) != 0 {
                libc::_exit(10);
            }
            let s = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
            if libc::connect(s, &addr as *const _ as *const libc::sockaddr, std::mem::size_of::<libc::sockaddr_un>() as u32) != 0 {
                libc::_exit(11);
            }
            let g = libc::fork();
            if g != 0 {
                // P: report G's pid through `out`, then exit; the connection lives on in G.
                libc::write(out[1], &g as *const i32 as *const libc::c_void, 4);
                libc::_exit(0);
            }
            let mut v = [0u8; 4];
            libc::close(go[1]);
            if libc::read(go[0], v.as_mut_ptr().cast(), 4) != 4 {
                libc::_exit(12);
            }
            let victim = i32::from_ne_bytes(v);
            let me = libc::getpid();
            let fd = match how {
                Send::Plain => -1,
                Send::Own => libc::syscall(libc::SYS_pidfd_open, me, 0) as i32,
                Send::Victim => libc::syscall(libc::SYS_pidfd_open, victim, 0) as i32,
            };
            if fd < 0 {
                libc::write(s, line.as_ptr().cast(), line.len());
            } else {
                let mut iov = libc::iovec { iov_base: line.as_ptr() as *mut libc::c_void, iov_len: line.len() };
                let mut control = [0u64; 16];
                let mut msg: libc::msghdr = std::mem::zeroed();
                msg.msg_iov = &mut iov;
                msg.msg_iovlen = 1;
                msg.msg_control = control.as_mut_ptr().cast();
                msg.msg_controllen = (libc::CMSG_SPACE(std::mem::size_of::<libc::ucred>() as u32) + libc::CMSG_SPACE(4)) as _;
                let c = libc::CMSG_FIRSTHDR(&msg);
                (*c).cmsg_level = libc::SOL_SOCKET;
                (*c).cmsg_type = libc::SCM_CREDENTIALS;
                (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<libc::ucred>() as u32) as _;
                let cred = libc::ucred { pid: me, uid: A, gid: A };
                std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<libc::ucred>(), cred);
                let c2 = libc::CMSG_NXTHDR(&msg, c);
                (*c2).cmsg_level = libc::SOL_SOCKET;
                (*c2).cmsg_type = libc::SCM_RIGHTS;
                (*c2).cmsg_len = libc::CMSG_LEN(4) as _;
                std::ptr::write_unaligned(libc::CMSG_DATA(c2).cast::<i32>(), fd);
                libc::sendmsg(s, &msg, 0);
            }
            let mut buf = [0u8; 1024];
            let n = libc::read(s, buf.as_mut_ptr().cast(), buf.len());
            if n > 0 {
                libc::write(out[1], buf.as_ptr().cast(), n as usize);
            }
            libc::_exit(0);
        }
    }
    // SAFETY: closing our copies of the children's ends.
    unsafe {
        libc::close(go[0]);
        libc::close(out[1]);
    }
    let mut g = [0u8; 4];
    // SAFETY: reading 4 bytes into a local buffer.
    assert_eq!(unsafe { libc::read(out[0], g.as_mut_ptr().cast(), 4) }, 4, "the attacker did not start");
    (p, i32::from_ne_bytes(g), go[1], out[0])
}

/// Starts a victim process of user B whose pid is exactly `pid` (ns_last_pid, retried);
/// None when another process took that pid first (the caller attacks again).
fn victim_with_pid(d: &PrivateDaemon, kids: &mut Kids, pid: i32) -> Option<u32> {
    for _ in 0..200 {
        std::fs::write("/proc/sys/kernel/ns_last_pid", (pid - 1).to_string()).unwrap();
        let v = spawn_as(d, kids, B, &["sleep", "300"]);
        if v as i32 == pid {
            return Some(v);
        }
        kids.kill_all();
        // SAFETY: kill(pid, 0) only checks.
        if unsafe { libc::kill(pid, 0) } == 0 {
            return None;
        }
    }
    None
}

fn reuse(no_peerpidfd: bool, how: Send) {
    let mut d = PrivateDaemon::start(exe(), "scan_ms = 200\n[users]\nonly = [\"2901\", \"2902\"]\n").unwrap();
    if no_peerpidfd {
        // The fallback for kernels before 6.5: the client's pidfd, checked against SCM_CREDENTIALS.
        d.env.push(("ALLOT_TEST_NO_PEERPIDFD".into(), "1".into()));
        d.terminate().unwrap();
        d.launch(true).unwrap();
    }
    let mut kids = Kids::default();
    let (g, go, out, victim) = (0..5)
        .find_map(|_| {
            let (p, g, go, out) = attacker(&d.socket, how);
            // Reap P: its pid is free now, and the connection lives on in G.
            // SAFETY: P is our child.
            unsafe { libc::waitpid(p, std::ptr::null_mut(), 0) };
            match victim_with_pid(&d, &mut kids, p) {
                Some(v) => Some((g, go, out, v)),
                // SAFETY: our own descriptors and our own child G.
                None => unsafe {
                    libc::close(go);
                    libc::close(out);
                    libc::kill(g, libc::SIGKILL);
                    libc::waitpid(g, std::ptr::null_mut(), 0);
                    None
                },
            }
        })
        .expect("could not start a victim at the exited connector's pid in 5 attacks (the machine forks too much)");
    let placed = wait_for("the victim's placement", || job_with_pid(&show(&d), victim));
    let before = cgroup_of(victim);
    // SAFETY: writes the victim's pid to G, then reads G's copy of the daemon's reply.
    let reply = unsafe {
        libc::write(go, (victim as i32).to_ne_bytes().as_ptr().cast(), 4);
        let mut buf = vec![0u8; 1024];
        let n = libc::read(out, buf.as_mut_ptr().cast(), buf.len());
        libc::close(go);
        libc::close(out);
        libc::kill(g, libc::SIGKILL);
        libc::waitpid(g, std::ptr::null_mut(), 0);
        String::from_utf8_lossy(&buf[..n.max(0) as usize]).into_owned()
    };
    assert!(reply.contains("\"ok\":false"), "{how:?} (fallback {no_peerpidfd}): the request must be refused, got {reply:?}");
    assert!(reply.contains("cannot prove which process is asking"), "{reply}");
    assert_eq!(cgroup_of(victim), before, "the victim was not moved");
    let after = job_with_pid(&show(&d), victim).unwrap();
    assert_eq!((after.id.clone(), after.cap.clone()), (placed.id.clone(), placed.cap.clone()), "the victim's job is untouched");
    eprintln!("{how:?}, fallback {no_peerpidfd}: victim {victim} (pid of the exited connector) untouched; reply {}", reply.trim());
    d.stop().unwrap();
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn run_refuses_a_recycled_connector_pid() {
    require_root();
    let _s = serial();
    for how in [Send::Plain, Send::Own, Send::Victim] {
        reuse(false, how);
        reuse(true, how);
    }
}

/// A raw request as this process (root): the time from connect to the reply.
fn timed_status(socket: &std::path::Path) -> Duration {
    let t0 = Instant::now();
    let mut s = UnixStream::connect(socket).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"{\"v\":3,\"op\":\"status\"}\n").unwrap();
    let mut r = String::new();
    s.read_to_string(&mut r).unwrap();
    assert!(r.contains("\"ok\":true"), "{r}");
    t0.elapsed()
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn one_user_cannot_lock_out_the_others() {
    require_root();
    let _s = serial();
    let d = PrivateDaemon::start(exe(), "scan_ms = 200\n[users]\nonly = [\"2901\", \"2902\"]\n").unwrap();
    let mut kids = Kids::default();
    let lab = lab().display().to_string();
    let sock = d.socket.display().to_string();
    // The same requests without the flood, in this run: on a busy machine a whole `allot run`
    // (exec, connect, request, exec `true`) takes longer whatever the daemon does, so the bound
    // is the fixed 100 ms or three times the worst of these, whichever is larger.
    let (mut calm_runs, mut calm_statuses) = (vec![], vec![]);
    for _ in 0..10 {
        let t = Instant::now();
        let o = d.cli(&["run", "--strict", "--", "true"], Some(A)).unwrap();
        calm_runs.push(t.elapsed());
        assert!(o.status.success(), "user A's allot run failed before the flood: {}", String::from_utf8_lossy(&o.stderr));
        calm_statuses.push(timed_status(&d.socket));
        std::thread::sleep(Duration::from_millis(100));
    }
    let before = requests_seen(&d).unwrap();
    let flood = kids.add(
        d.user_command(B, &[&lab, "flood", "--target", &sock, "--idle", "200", "--trickle", "8", "--hammer", "2", "--duration", "9s"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // In full swing: the daemon has seen the flood's requests, not merely its start.
    wait_for_requests(&d, before, 20);
    let (mut runs, mut statuses) = (vec![], vec![]);
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(7) {
        let t = Instant::now();
        let o = d.cli(&["run", "--strict", "--", "true"], Some(A)).unwrap();
        runs.push(t.elapsed());
        assert!(o.status.success(), "user A's allot run failed during the flood: {}", String::from_utf8_lossy(&o.stderr));
        statuses.push(timed_status(&d.socket));
        std::thread::sleep(Duration::from_millis(200));
    }
    let worst = |v: &[Duration]| v.iter().max().copied().unwrap_or_default();
    let bound = |calm: &[Duration]| Duration::from_millis(100).max(3 * worst(calm));
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let said = format!(
        "during the flood: {} runs of user A, worst {:?}; {} statuses of root, worst {:?}; without it: runs worst {:?}, \
         statuses worst {:?}; bounds {:?} and {:?}; load average {}",
        runs.len(),
        worst(&runs),
        statuses.len(),
        worst(&statuses),
        worst(&calm_runs),
        worst(&calm_statuses),
        bound(&calm_runs),
        bound(&calm_statuses),
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    );
    eprintln!("{said}");
    assert!(worst(&statuses) < bound(&calm_statuses), "root's status took too long: {said}");
    assert!(worst(&runs) < bound(&calm_runs), "user A's allot run took too long: {said}");
    let out = kids.0.iter_mut().find(|k| k.id() == flood).unwrap().wait_with_output_ref();
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap_or_default();
    eprintln!("the flood: {v}");
    assert!(v["refused_at_connect"].as_u64().unwrap_or(0) > 0, "the per-user connection limit refused the excess: {v}");
    assert!(v["trickles_cut"].as_u64().unwrap_or(0) > 0, "trickling requests were cut at the deadline: {v}");
}

/// Waits for a child whose stdout is piped and returns that output.
trait WaitOutput {
    fn wait_with_output_ref(&mut self) -> String;
}

impl WaitOutput for std::process::Child {
    fn wait_with_output_ref(&mut self) -> String {
        let mut s = String::new();
        if let Some(o) = self.stdout.as_mut() {
            let _ = o.read_to_string(&mut s);
        }
        let _ = self.wait();
        s
    }
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn a_user_making_jobs_in_a_loop_hits_the_job_limit_and_others_are_still_served() {
    require_root();
    let _s = serial();
    let d = PrivateDaemon::start(exe(), "[users]\nauto_place = false\n[limits]\njobs_per_user = 20\n").unwrap();
    let mut kids = Kids::default();
    let e = exe().display().to_string();
    let sock = d.socket.display().to_string();
    // B runs jobs in a loop (each `allot run` makes one); they stay alive.
    let script = format!("i=0; while [ $i -lt 40 ]; do {e} --socket {sock} run --strict -- sleep 300 & i=$((i+1)); sleep 0.05; done; wait");
    let looper = spawn_as(&d, &mut kids, B, &["sh", "-c", &script]);
    let mut worst = Duration::ZERO;
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(4) {
        let t = Instant::now();
        let o = d.cli(&["show"], Some(A)).unwrap();
        worst = worst.max(t.elapsed());
        assert!(o.status.success(), "A's show during B's loop: {}", String::from_utf8_lossy(&o.stderr));
        worst = worst.max(timed_status(&d.socket));
        std::thread::sleep(Duration::from_millis(100));
    }
    let v = show(&d);
    let b_jobs = v.jobs.iter().filter(|j| j.uid == B).count();
    assert_eq!(b_jobs, 20, "B stops at the limit");
    let o = d.cli(&["run", "--strict", "--", "true"], Some(B)).unwrap();
    refused(&o, &["uid 2902 has 20 jobs, the limit (limits.jobs_per_user = 20)"]);
    assert_eq!(o.status.code(), Some(75), "a refusal over a limit exits EX_TEMPFAIL: try again later");
    eprintln!("B made {b_jobs} jobs; the worst answer to A or root meanwhile took {worst:?}");
    assert!(worst < Duration::from_millis(100), "{worst:?}");
    let _ = looper;
    // B's sleeping jobs are killed with the daemon's process group? No: by pid, as kids.
    for j in v.jobs.iter().filter(|j| j.uid == B) {
        for p in j.pids.iter().flatten() {
            // SAFETY: processes this test's looper started (B's sleeps in B's jobs).
            unsafe { libc::kill(*p, libc::SIGKILL) };
        }
    }
}
