//! Kernel tests of the process events listener on this machine's kernel. They need root
//! (and a kernel with CONFIG_PROC_EVENTS) and FAIL, never skip, without them.
//!
//! This file has its own `main` (`harness = false` in Cargo.toml): the tests fork, and
//! fork is only safe in a process with one thread, which libtest's runner is not. They
//! run one after another, so each sees only its own children's events among the
//! machine's. Every child is started here and waited for by pid; none outlives its test.
//!
//! Like the other root tests, they are ignored by a plain `cargo test` (each reported as
//! ignored) and run when asked: `cargo test -p allot-linux --test procevents --
//! --include-ignored [NAME]` (as root), which `scripts/test` does.

use allot_linux::procevents::{Kinds, Listener, Options, ProcEvent};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::{Duration, Instant};

/// Why a plain `cargo test` does not run these tests (libtest's `#[ignore = ...]` reason).
const IGNORED: &str = "root: kernel tier, run by scripts/test";

/// A uid with no passwd entry, used by children that change uid.
const UID: u32 = 61000;
const UID2: u32 = 61001;

fn me() -> i32 {
    // SAFETY: getpid has no preconditions.
    unsafe { libc::getpid() }
}

/// Forks; the child runs `f` and exits with its return value (never returns here).
/// Safe because this test process has a single thread (see the file comment).
fn fork(f: impl FnOnce() -> i32) -> i32 {
    // SAFETY: single-threaded process; the child only runs `f` then _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
    if pid == 0 {
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(101);
        // SAFETY: ends the child without running the parent's destructors.
        unsafe { libc::_exit(code) };
    }
    pid
}

/// Waits for a child by pid; returns its exit code (128 + signal if killed).
fn wait(pid: i32) -> i32 {
    let mut status = 0;
    loop {
        // SAFETY: a valid pointer to an int.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            break;
        }
        assert!(r < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR), "waitpid({pid}) failed");
    }
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    }
}

/// Reads events until `done` says so (or 10 s pass: a failure), returning all of them.
fn collect(l: &mut Listener, done: impl Fn(&[ProcEvent]) -> bool) -> Vec<ProcEvent> {
    let start = Instant::now();
    let mut all = Vec::new();
    while !done(&all) {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "events did not arrive in 10 s; got {} (last 20: {:?})",
            all.len(),
            &all[all.len().saturating_sub(20)..]
        );
        l.recv_timeout(&mut all, Duration::from_millis(200)).unwrap();
    }
    all
}

/// The events about `pid`: its own, and Forks whose parent it is.
fn about(all: &[ProcEvent], pid: i32) -> Vec<ProcEvent> {
    all.iter().copied().filter(|e| e.pid() == Some(pid) || matches!(e, ProcEvent::Fork { parent, .. } if *parent == pid)).collect()
}

fn exited(pid: i32) -> impl Fn(&[ProcEvent]) -> bool {
    move |all| all.contains(&ProcEvent::Exit { pid })
}

/// Both ways of dropping unwanted events: the socket filter in the kernel, or here.
fn both_filters(kinds: Kinds) -> [(Options, &'static str); 2] {
    let on = Options::new(kinds);
    let mut off = on;
    off.socket_filter = false;
    [(on, "socket filter on"), (off, "socket filter off")]
}

fn no_lost(all: &[ProcEvent], what: &str) {
    assert!(!all.contains(&ProcEvent::Lost), "{what}: events were lost (is the machine overloaded?)");
}

fn exec_is_reported_between_fork_and_exit() {
    for (opts, how) in both_filters(Kinds::ALL) {
        let mut l = Listener::open_with(opts).unwrap();
        let pid = fork(|| {
            // SAFETY: NUL-terminated strings, a NULL-terminated argv.
            unsafe { libc::execl(c"/bin/true".as_ptr(), c"true".as_ptr(), std::ptr::null::<libc::c_char>()) };
            127
        });
        assert_eq!(wait(pid), 0);
        let all = collect(&mut l, exited(pid));
        no_lost(&all, how);
        assert_eq!(about(&all, pid), [ProcEvent::Fork { parent: me(), child: pid }, ProcEvent::Exec { pid }, ProcEvent::Exit { pid }], "{how}");
    }
}

fn setresuid_is_reported_with_real_and_effective_uid() {
    for (opts, how) in both_filters(Kinds::ALL) {
        let mut l = Listener::open_with(opts).unwrap();
        let pid = fork(|| {
            // The raw call: this thread only (the process has one).
            // SAFETY: plain syscall with integer arguments.
            let r = unsafe { libc::syscall(libc::SYS_setresuid, UID, UID2, UID2) };
            if r == 0 {
                0
            } else {
                1
            }
        });
        assert_eq!(wait(pid), 0, "setresuid({UID}, {UID2}, {UID2}) failed in the child");
        let all = collect(&mut l, exited(pid));
        no_lost(&all, how);
        assert_eq!(
            about(&all, pid),
            [ProcEvent::Fork { parent: me(), child: pid }, ProcEvent::Uid { pid, ruid: UID, euid: UID2 }, ProcEvent::Exit { pid }],
            "{how}"
        );
    }
}

/// A login-style start (sshd, cron, `allot run` as root): setuid, then exec.
fn uid_change_then_exec_arrive_in_that_order() {
    let mut l = Listener::open(Kinds::ALL).unwrap();
    let mut child = Command::new("/bin/true").uid(UID).gid(UID).spawn().unwrap();
    let pid = child.id() as i32;
    assert!(child.wait().unwrap().success());
    let all = collect(&mut l, exited(pid));
    no_lost(&all, "uid then exec");
    let mine: Vec<ProcEvent> = about(&all, pid);
    assert_eq!(
        mine,
        [
            ProcEvent::Fork { parent: me(), child: pid },
            ProcEvent::Uid { pid, ruid: UID, euid: UID },
            ProcEvent::Exec { pid },
            ProcEvent::Exit { pid }
        ]
    );
}

/// A set-user-ID binary (su, sudo; here a copy of this test program owned by UID, run
/// with `--print-euid`) changes the euid at exec: the kernel reports it as a Uid event
/// (ruid unchanged) before the Exec.
fn setuid_binary_reports_uid_before_exec() {
    // CARGO_TARGET_TMPDIR, or /tmp where it does not exist (in the test VM); either must
    // not be mounted nosuid.
    let base = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let dir = if base.is_dir() { base } else { std::env::temp_dir() }.join(format!("procevents-{}", me()));
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("print-euid");
    std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
    std::os::unix::fs::chown(&exe, Some(UID), Some(UID)).unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let mut l = Listener::open(Kinds::ALL).unwrap();
    let child = Command::new(&exe).arg("--print-euid").stdout(std::process::Stdio::piped()).spawn().unwrap();
    let pid = child.id() as i32;
    let out = child.wait_with_output().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let euid = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_eq!(euid, UID.to_string(), "the set-user-ID copy did not run as {UID} ({} mounted nosuid?)", dir.display());
    let all = collect(&mut l, exited(pid));
    no_lost(&all, "setuid binary");
    assert_eq!(
        about(&all, pid),
        [ProcEvent::Fork { parent: me(), child: pid }, ProcEvent::Uid { pid, ruid: 0, euid: UID }, ProcEvent::Exec { pid }, ProcEvent::Exit { pid }]
    );
}

/// A child with 8 threads that all start, change uid together (the libc wrapper runs
/// setresuid on every thread) and exit: one process, one Uid, no thread events.
fn threads_are_not_reported() {
    for (opts, how) in both_filters(Kinds::ALL) {
        let mut l = Listener::open_with(opts).unwrap();
        let pid = fork(|| {
            let barrier = std::sync::Arc::new(std::sync::Barrier::new(9));
            let threads: Vec<_> = (0..8)
                .map(|_| {
                    let b = barrier.clone();
                    std::thread::spawn(move || {
                        b.wait(); // all alive
                        b.wait(); // uid changed
                    })
                })
                .collect();
            barrier.wait();
            // SAFETY: the libc wrapper; every thread takes the new uid.
            let r = unsafe { libc::setresuid(UID, UID, UID) };
            barrier.wait();
            for t in threads {
                t.join().unwrap();
            }
            r
        });
        assert_eq!(wait(pid), 0, "{how}: the threaded child failed");
        let all = collect(&mut l, exited(pid));
        no_lost(&all, how);
        assert_eq!(
            about(&all, pid),
            [ProcEvent::Fork { parent: me(), child: pid }, ProcEvent::Uid { pid, ruid: UID, euid: UID }, ProcEvent::Exit { pid }],
            "{how}"
        );
        let s = l.stats();
        if opts.socket_filter {
            // (discarded may count other subscribers' replies, never 24 thread events)
            assert!(s.discarded < 8, "{how}: the kernel should have dropped the thread events, {s:?}");
        } else {
            // 8 thread forks, 8 setresuid on threads, 8 thread exits, read and dropped here
            assert!(s.discarded >= 24, "{how}: expected 24 thread events discarded here, {s:?}");
        }
    }
}

/// A thread that is not the leader execs: the kernel reports the old leader's exit,
/// then the exec under the process's pid (the exec'ing thread takes it over).
fn exec_from_a_thread_reports_exit_then_exec() {
    let mut l = Listener::open(Kinds::ALL).unwrap();
    let pid = fork(|| {
        let t = std::thread::spawn(|| {
            // SAFETY: NUL-terminated strings, a NULL-terminated argv.
            unsafe { libc::execl(c"/bin/true".as_ptr(), c"true".as_ptr(), std::ptr::null::<libc::c_char>()) };
        });
        let _ = t.join();
        127
    });
    assert_eq!(wait(pid), 0);
    let all = collect(&mut l, |all| all.iter().filter(|e| **e == ProcEvent::Exit { pid }).count() == 2);
    no_lost(&all, "exec from a thread");
    assert_eq!(
        about(&all, pid),
        [ProcEvent::Fork { parent: me(), child: pid }, ProcEvent::Exit { pid }, ProcEvent::Exec { pid }, ProcEvent::Exit { pid }]
    );
}

fn only_the_wanted_kinds_are_reported() {
    for (mut opts, how) in both_filters(Kinds::EXEC | Kinds::UID) {
        let mut l = Listener::open_with(opts).unwrap();
        let mut child = Command::new("/bin/true").uid(UID).gid(UID).spawn().unwrap();
        let pid = child.id() as i32;
        assert!(child.wait().unwrap().success());
        let all = collect(&mut l, |all| all.contains(&ProcEvent::Exec { pid }));
        no_lost(&all, how);
        assert_eq!(about(&all, pid), [ProcEvent::Uid { pid, ruid: UID, euid: UID }, ProcEvent::Exec { pid }], "{how}");
        assert!(all.iter().all(|e| matches!(e, ProcEvent::Exec { .. } | ProcEvent::Uid { .. })), "{how}: {all:?}");
        opts.kinds = Kinds::NONE;
        let mut none = Listener::open_with(opts).unwrap();
        let pid = fork(|| 0);
        wait(pid);
        let mut got = Vec::new();
        none.recv_timeout(&mut got, Duration::from_millis(300)).unwrap();
        assert!(got.iter().all(|e| *e == ProcEvent::Lost), "{how}: Kinds::NONE reported {got:?}");
    }
}

/// A listener's kinds changed from another handle while it stays open: execs are
/// reported only once asked for, and no longer once dropped.
fn refilter_changes_the_kinds_of_an_open_listener() {
    for (opts, how) in both_filters(Kinds::UID) {
        let mut l = Listener::open_with(opts).unwrap();
        let r = l.refilter().unwrap();
        let run = |l: &mut Listener| {
            let mut child = Command::new("/bin/true").uid(UID).gid(UID).spawn().unwrap();
            let pid = child.id() as i32;
            assert!(child.wait().unwrap().success());
            // The uid change comes first; the exec, if reported, right after it.
            let mut all = collect(l, |all| all.iter().any(|e| matches!(e, ProcEvent::Uid { pid: p, .. } if *p == pid)));
            l.recv_timeout(&mut all, Duration::from_millis(300)).unwrap();
            no_lost(&all, how);
            about(&all, pid)
        };
        let uid = |pid: i32| ProcEvent::Uid { pid, ruid: UID, euid: UID };
        let got = run(&mut l);
        assert_eq!(got.len(), 1, "{how}: UID only: {got:?}");
        r.set(Kinds::UID | Kinds::EXEC).unwrap();
        assert_eq!(l.kinds(), Kinds::UID | Kinds::EXEC);
        let got = run(&mut l);
        let pid = got[0].pid().unwrap();
        assert_eq!(got, [uid(pid), ProcEvent::Exec { pid }], "{how}: after refilter(UID | EXEC)");
        r.set(Kinds::UID).unwrap();
        let got = run(&mut l);
        assert_eq!(got.len(), 1, "{how}: back to UID only: {got:?}");
    }
}

/// Several listeners at once (a private daemon beside the real one): each sees every
/// event, and closing one does not silence the others.
fn listeners_coexist_and_closing_one_keeps_the_others() {
    let mut a = Listener::open(Kinds::FORK | Kinds::EXIT).unwrap();
    let mut b = Listener::open(Kinds::FORK | Kinds::EXIT).unwrap();
    let pid = fork(|| 0);
    wait(pid);
    for l in [&mut a, &mut b] {
        let all = collect(l, exited(pid));
        assert_eq!(about(&all, pid), [ProcEvent::Fork { parent: me(), child: pid }, ProcEvent::Exit { pid }]);
    }
    drop(b);
    let mut c = Listener::open(Kinds::FORK | Kinds::EXIT).unwrap();
    drop(c);
    c = Listener::open(Kinds::FORK | Kinds::EXIT).unwrap();
    let pid = fork(|| 0);
    wait(pid);
    for l in [&mut a, &mut c] {
        let all = collect(l, exited(pid));
        assert_eq!(about(&all, pid), [ProcEvent::Fork { parent: me(), child: pid }, ProcEvent::Exit { pid }]);
    }
}

/// A tiny receive buffer and 500 forks unread: the kernel drops events, the listener
/// says Lost once, then keeps delivering.
fn overflow_is_reported_as_lost_then_events_resume() {
    let mut opts = Options::new(Kinds::FORK | Kinds::EXIT);
    opts.recv_buffer = 1; // the kernel's minimum: a few events
    let mut l = Listener::open_with(opts).unwrap();
    assert!(l.recv_buffer() < 8192, "recv_buffer {}", l.recv_buffer());
    let pids: Vec<i32> = (0..500).map(|_| fork(|| 0)).collect();
    for &p in &pids {
        wait(p);
    }
    let mut first = Vec::new();
    l.recv(&mut first).unwrap();
    assert!(first.contains(&ProcEvent::Lost), "expected Lost first, got {first:?}");
    assert_eq!(first.iter().filter(|e| **e == ProcEvent::Lost).count(), 1, "one Lost per call: {first:?}");
    // Drain what is left, then a new child is reported as usual.
    let mut rest = Vec::new();
    while l.recv_timeout(&mut rest, Duration::from_millis(100)).unwrap() > 0 {}
    let pid = fork(|| 0);
    wait(pid);
    let all = collect(&mut l, exited(pid));
    assert!(about(&all, pid).contains(&ProcEvent::Fork { parent: me(), child: pid }), "{all:?}");
    let s = l.stats();
    assert!(s.overflows >= 1 && s.events < 1000, "{s:?}");
    eprintln!("    (buffer {} bytes; {} of 1000 events arrived, {} overflows)", l.recv_buffer(), s.events, s.overflows);
}

/// Since Linux 6.6 anyone may listen; before, it needs CAP_NET_ADMIN and the error says so.
fn unprivileged_open_follows_the_kernel_version() {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let mut nums = release.trim().split(|c: char| !c.is_ascii_digit()).map(|s| s.parse::<u32>().unwrap_or(0));
    let (major, minor) = (nums.next().unwrap_or(0), nums.next().unwrap_or(0));
    let open_allowed = (major, minor) >= (6, 6);
    let pid = fork(|| {
        // SAFETY: plain syscalls; all uids non-zero drops every capability.
        unsafe {
            if libc::setgroups(0, std::ptr::null()) != 0 || libc::setresgid(UID, UID, UID) != 0 || libc::setresuid(UID, UID, UID) != 0 {
                return 3;
            }
        }
        match Listener::open(Kinds::ALL) {
            Ok(_) => 0,
            Err(e) if e.to_string().contains("CAP_NET_ADMIN") && e.to_string().contains("run as root") => {
                eprintln!("    (refused, as before 6.6: {e})");
                1
            }
            Err(e) => {
                eprintln!("unexpected error: {e}");
                2
            }
        }
    });
    let code = wait(pid);
    assert_eq!(
        code,
        if open_allowed { 0 } else { 1 },
        "kernel {}: 0 opened, 1 refused naming CAP_NET_ADMIN, 2 other error, 3 could not drop root",
        release.trim()
    );
}

/// The kernel ignores subscriptions from outside the initial pid namespace, without a
/// reply: open gives up after 2 s with an error that says why.
fn open_from_another_pid_namespace_fails_clearly() {
    let pid = fork(|| {
        // SAFETY: plain syscall; the next fork's child is pid 1 of a new namespace.
        if unsafe { libc::unshare(libc::CLONE_NEWPID) } != 0 {
            return 3;
        }
        let inner = fork(|| match Listener::open(Kinds::ALL) {
            Ok(_) => 0,
            Err(e) if e.to_string().contains("no reply") && e.to_string().contains("initial pid and user namespaces") => {
                eprintln!("    (refused: {e})");
                1
            }
            Err(e) => {
                eprintln!("unexpected error: {e}");
                2
            }
        });
        wait(inner)
    });
    assert_eq!(wait(pid), 1, "0 opened, 1 refused saying why, 2 other error, 3 unshare failed");
}

fn main() {
    let tests: &[(&str, fn())] = &[
        ("exec_is_reported_between_fork_and_exit", exec_is_reported_between_fork_and_exit),
        ("setresuid_is_reported_with_real_and_effective_uid", setresuid_is_reported_with_real_and_effective_uid),
        ("uid_change_then_exec_arrive_in_that_order", uid_change_then_exec_arrive_in_that_order),
        ("setuid_binary_reports_uid_before_exec", setuid_binary_reports_uid_before_exec),
        ("threads_are_not_reported", threads_are_not_reported),
        ("exec_from_a_thread_reports_exit_then_exec", exec_from_a_thread_reports_exit_then_exec),
        ("only_the_wanted_kinds_are_reported", only_the_wanted_kinds_are_reported),
        ("refilter_changes_the_kinds_of_an_open_listener", refilter_changes_the_kinds_of_an_open_listener),
        ("listeners_coexist_and_closing_one_keeps_the_others", listeners_coexist_and_closing_one_keeps_the_others),
        ("overflow_is_reported_as_lost_then_events_resume", overflow_is_reported_as_lost_then_events_resume),
        ("unprivileged_open_follows_the_kernel_version", unprivileged_open_follows_the_kernel_version),
        ("open_from_another_pid_namespace_fails_clearly", open_from_another_pid_namespace_fails_clearly),
    ];
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--print-euid") {
        // SAFETY: geteuid has no preconditions.
        println!("{}", unsafe { libc::geteuid() });
        return;
    }
    // As libtest does for `#[ignore]`d tests: listed, reported as ignored, and run only
    // with --ignored or --include-ignored (all of this file's tests are ignored ones).
    let run_ignored = args.iter().any(|a| a == "--ignored" || a == "--include-ignored");
    if args.iter().any(|a| a == "--list") {
        for (name, _) in tests {
            println!("{name}: test");
        }
        return;
    }
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    if !run_ignored {
        let mut ignored = 0;
        for (name, _) in tests {
            if filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str())) {
                eprintln!("test {name} ... ignored, {IGNORED}");
                ignored += 1;
            }
        }
        eprintln!("\n0 passed, 0 failed, {ignored} ignored (run them as root with --include-ignored)");
        return;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("procevents kernel tests must run as root (CI runs them as root); they fail, never skip");
        std::process::exit(1);
    }
    let mut failed = Vec::new();
    let mut ran = 0;
    for (name, test) in tests {
        if !filters.is_empty() && !filters.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        ran += 1;
        let start = Instant::now();
        match std::panic::catch_unwind(test) {
            Ok(()) => eprintln!("test {name} ... ok ({:.2} s)", start.elapsed().as_secs_f64()),
            Err(_) => {
                eprintln!("test {name} ... FAILED");
                failed.push(*name);
            }
        }
    }
    eprintln!("\n{} passed, {} failed", ran - failed.len(), failed.len());
    if ran == 0 || !failed.is_empty() {
        if ran == 0 {
            eprintln!("no test matched {filters:?}");
        }
        std::process::exit(1);
    }
}
