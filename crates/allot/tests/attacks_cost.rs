//! The cost of a user's requests, as a hostile user would raise it: one user's jobs carry
//! huge command lines and sixteen connections loop `show` over them, while root asks for
//! `status`, another user runs jobs and a third logs in. No one waits for the flood
//! (docs/trust.md, "Cost").

mod common;

use common::*;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The attacker's jobs and the size of each one's command line (a single argument may be
/// at most 128 KiB; 40 of them need a stack limit above 20 MiB).
const JOBS: usize = 250;
const ARGS: usize = 40;
const ARG_LEN: usize = 128 * 1024 - 1;

/// Raises the child's stack limit so its command line may be 5 MiB.
fn big_stack(c: &mut std::process::Command) {
    // SAFETY: setrlimit is async-signal-safe; the struct is built in the child.
    unsafe {
        c.pre_exec(|| {
            let r = libc::rlimit { rlim_cur: 256 << 20, rlim_max: libc::RLIM_INFINITY };
            if libc::setrlimit(libc::RLIMIT_STACK, &r) != 0 {
                let r = libc::rlimit { rlim_cur: 256 << 20, rlim_max: 256 << 20 };
                libc::setrlimit(libc::RLIMIT_STACK, &r);
            }
            Ok(())
        });
    }
}

fn p99(v: &mut [Duration]) -> Duration {
    v.sort();
    v.get((v.len() * 99).div_ceil(100).saturating_sub(1)).copied().unwrap_or_default()
}

/// Root's `status`, raw: connect to reply.
fn timed_status(socket: &std::path::Path) -> Duration {
    let t0 = Instant::now();
    let mut s = UnixStream::connect(socket).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    s.write_all(b"{\"v\":3,\"op\":\"status\"}\n").unwrap();
    let mut r = String::new();
    s.read_to_string(&mut r).unwrap();
    assert!(r.contains("\"ok\":true"), "{r}");
    t0.elapsed()
}

/// True once `pid` is in the daemon's tree (its cgroup path names the daemon's root).
fn placed(pid: u32, root: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup")).is_ok_and(|s| s.contains(root))
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg").unwrap_or_default().split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn huge_command_lines_and_looping_shows_slow_no_one_else() {
    require_root();
    let _s = serial();
    let cfg = "[users]\nonly = [\"2901\", \"2902\", \"2903\"]\n";
    let d = PrivateDaemon::start(exe(), cfg).unwrap();
    let mut kids = Kids::default();
    let e = exe().display().to_string();
    let lab = lab().display().to_string();
    let sock = d.socket.display().to_string();
    let big = "a".repeat(ARG_LEN);
    // The same rounds as under the flood, before B makes anything: the bound's baseline.
    let before_jobs = rounds(&d, &mut kids, Duration::from_secs(5));
    // B's 250 jobs, each a shell whose command line is 5 MiB, paced under B's request budget.
    for i in 0..JOBS {
        // The shell waits in a builtin on a pipe this test holds, and forks nothing: killing
        // it by pid leaves nothing behind, and it ends by itself if this test dies.
        let mut argv: Vec<&str> = vec![&e, "--socket", &sock, "run", "--strict", "--", "sh", "-c", "read x; :", "x"];
        argv.extend(std::iter::repeat_n(big.as_str(), ARGS));
        let mut c = d.user_command(B, &argv);
        c.stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::null());
        big_stack(&mut c);
        kids.add(c.spawn().unwrap());
        std::thread::sleep(Duration::from_millis(if i % 50 == 49 { 1000 } else { 40 }));
    }
    let t0 = Instant::now();
    let jobs = loop {
        let v = show(&d);
        let n = v.jobs.iter().filter(|j| j.uid == B && j.command.as_deref().is_some_and(|c| c.starts_with("sh -c"))).count();
        if n >= JOBS - 5 {
            break n;
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "B made {n} of {JOBS} jobs in 60 s");
        std::thread::sleep(Duration::from_millis(200));
    };
    eprintln!("B's {jobs} jobs made; one `show` of them took {:?}", {
        let t = Instant::now();
        show(&d);
        t.elapsed()
    });
    let cmd = show(&d).jobs.iter().find(|j| j.uid == B).unwrap().command.as_deref().unwrap().to_string();
    assert!(cmd.chars().count() <= 512, "show cuts a command line: {} chars", cmd.chars().count());
    // The flood: sixteen connections looping `show`, for 30 s.
    let before = requests_seen(&d).unwrap();
    let flood = kids.add(
        d.user_command(B, &[&lab, "flood", "--target", &sock, "--idle", "0", "--trickle", "0", "--hammer", "16", "--duration", "30s"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    wait_for_requests(&d, before, 50);
    let flooded = rounds(&d, &mut kids, Duration::from_secs(26));
    let out = kids.output(flood);
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap_or_default();
    assert!(v["requests"].as_u64().unwrap_or(0) > 100, "the flood ran: {v}");
    // The same rounds once more with the flood over and B's jobs still there: with the quiet
    // rounds before B's jobs, what this machine's own load makes of them in this run.
    let after = rounds(&d, &mut kids, Duration::from_secs(5));
    let quiet = before_jobs.worse(&after);
    eprintln!(
        "B: {jobs} jobs with {} MiB command lines, flood {v}; p99 of root's status / A's run / C's login placed: {} during the flood, {} before B's jobs, {} after the flood; load average {}",
        (ARGS * (ARG_LEN + 1)) >> 20,
        flooded.p99s(),
        before_jobs.p99s(),
        after.p99s(),
        load()
    );
    // No one waits for the flood: each p99 under it within its fixed bound, or within 3x the
    // same p99 measured in this run without the flood (the machine's load is in both). A
    // daemon held up by the flood makes them hundreds of ms; what the flood's sixteen
    // connections cost the two CPUs of this machine is tens: a fresh-clone CI run on
    // 2026-11-27 saw a login placed at p99 50.19 ms under the flood, 16.62 ms after it
    // (load average 1.79), against a fixed bound of 50 ms then. 100 ms, as for the others.
    for (what, fixed, under, alone) in [
        ("root's status", 100, flooded.status, quiet.status),
        // `allot run` here is a whole process (exec, connect, request, exec `true`).
        ("user A's allot run", 100, flooded.run, quiet.run),
        // a process spawned as user C, polled every 0.5 ms until it is in C's job
        ("a login placed", 100, flooded.login, quiet.login),
    ] {
        let bound = Duration::from_millis(fixed).max(alone * 3);
        assert!(
            under < bound,
            "{what}: p99 {under:?} during the flood, bound {bound:?} (3x {alone:?} without it, at least {fixed} ms; load average {})",
            load()
        );
    }
}

/// The p99s of one series of rounds.
#[derive(Clone, Copy)]
struct P99s {
    status: Duration,
    run: Duration,
    login: Duration,
    n: usize,
}

impl P99s {
    fn worse(&self, o: &P99s) -> P99s {
        P99s { status: self.status.max(o.status), run: self.run.max(o.run), login: self.login.max(o.login), n: self.n + o.n }
    }

    fn p99s(&self) -> String {
        format!("{:?} / {:?} / {:?} ({} rounds)", self.status, self.run, self.login, self.n)
    }
}

/// Rounds for `span`: root asks for `status`, user A runs a job, user C logs in.
fn rounds(d: &PrivateDaemon, kids: &mut Kids, span: Duration) -> P99s {
    let (mut statuses, mut runs, mut logins) = (vec![], vec![], vec![]);
    let t0 = Instant::now();
    while t0.elapsed() < span {
        statuses.push(timed_status(&d.socket));
        let t = Instant::now();
        let o = d.cli(&["run", "--strict", "--", "true"], Some(A)).unwrap();
        runs.push(t.elapsed());
        assert!(o.status.success(), "user A's allot run failed: {}", String::from_utf8_lossy(&o.stderr));
        // A login of user C: the time from its uid change (it starts in the shelter and
        // drops to C before exec) until it is in C's job.
        let t = Instant::now();
        let login = kids.add(d.user_command(C, &["sleep", "60"]).stdin(Stdio::null()).spawn().unwrap());
        while !placed(login, &d.root_name) && t.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_micros(500));
        }
        logins.push(t.elapsed());
        kids.kill(login);
        std::thread::sleep(Duration::from_millis(50));
    }
    P99s { status: p99(&mut statuses), run: p99(&mut runs), login: p99(&mut logins), n: statuses.len() }
}

/// A GET of the metrics endpoint: (time to the whole reply, the reply).
fn get(port: u16) -> (Duration, String) {
    let t0 = Instant::now();
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut r = String::new();
    let _ = s.read_to_string(&mut r);
    (t0.elapsed(), r)
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn trickling_metrics_readers_hold_no_one_up_and_see_no_other_users_processes() {
    require_root();
    let _s = serial();
    let port = 20000 + (std::process::id() % 20000) as u16;
    let cfg = format!("[users]\nonly = [\"2901\"]\n[metrics]\nlisten = \"127.0.0.1:{port}\"\n");
    let mut d = PrivateDaemon::start(exe(), &cfg).unwrap();
    let j = d.run_job(&["-t", "321"], &["sleep", "300"], Some(A)).unwrap();
    d.wait_exec(j).unwrap();
    // 200 readers that send one byte every half second and never finish, for 6 s.
    let until = Instant::now() + Duration::from_secs(6);
    let connected = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let tricklers: Vec<_> = (0..200)
        .map(|_| {
            let connected = connected.clone();
            std::thread::spawn(move || {
                let mut first = true;
                while Instant::now() < until {
                    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else { continue };
                    if std::mem::take(&mut first) {
                        connected.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    while Instant::now() < until && s.write_all(b"G").is_ok() {
                        std::thread::sleep(Duration::from_millis(500));
                    }
                }
            })
        })
        .collect();
    // Every reader has connected once: the endpoint is under the whole trickle.
    poll_until("200 readers connected", Duration::from_secs(5), || {
        let n = connected.load(std::sync::atomic::Ordering::Relaxed);
        check(n >= 200, || format!("{n} connected"))
    });
    let mut times = vec![];
    while Instant::now() + Duration::from_millis(300) < until {
        let (t, r) = get(port);
        assert!(r.starts_with("HTTP/1.1 200"), "a scrape during the trickle: {r:?}");
        times.push(t);
        std::thread::sleep(Duration::from_millis(100));
    }
    for t in tricklers {
        t.join().unwrap();
    }
    let worst = times.iter().max().copied().unwrap_or_default();
    eprintln!("{} scrapes while 200 readers trickled: worst {worst:?} (load average {})", times.len(), load());
    assert!(worst < Duration::from_millis(500), "a scrape took {worst:?} (load average {})", load());
    // Whoever reaches the endpoint sees what a user who owns no job sees: no process counts.
    let (_, r) = get(port);
    assert!(r.lines().any(|l| l.starts_with("allot_job_tickets{") && l.ends_with(" 321")), "{r}");
    assert!(!r.lines().any(|l| l.starts_with("allot_job_processes{")), "the endpoint shows no user's processes: {r}");
    // SIGHUP moves the endpoint to the new address, and frees the old one.
    let port2 = port + 1;
    std::fs::write(
        d.dir.join("allot.toml"),
        cfg.replace(&port.to_string(), &port2.to_string()) + &format!("[placement]\nfrom = [\"{}\"]\n", d.shelter.path()),
    )
    .unwrap();
    // SAFETY: the daemon this test started.
    unsafe { libc::kill(d.daemon_pid().unwrap() as i32, libc::SIGHUP) };
    wait_for("the endpoint at its new address", || std::net::TcpStream::connect(("127.0.0.1", port2)).ok());
    assert!(get(port2).1.starts_with("HTTP/1.1 200"));
    wait_for("the old address freed", || std::net::TcpStream::connect(("127.0.0.1", port)).is_err().then_some(()));
    d.stop().unwrap();
}
