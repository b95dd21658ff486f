//! Placement a hostile user cannot dodge, and rules that cannot grant a currency.
//!
//! - processes whose name is not UTF-8 (an executable so named, or `prctl(PR_SET_NAME)`)
//!   and thread groups whose leader exited while their other threads run (the leader shows
//!   `Z`): placed whether they start while the daemon is down or in a login burst, and
//!   root may `set` them;
//! - a rule whose currency the process's user may not use: the user's own currency;
//! - children forked after a process changed user but before the daemon heard of it:
//!   placed with it, in the new user's currency;
//! - a process re-exec'ing itself with a 5 MiB command line while rules are loaded: the
//!   daemon stays cheap and answers others.
//!
//! The odd processes are made by the test itself in the forked child (raw syscalls only,
//! between fork and the exec that never comes): see [`odd`].

mod common;

use common::*;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("allot-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::set_permissions(&d, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    d
}

/// The cpu-hierarchy cgroup of every live thread of `pid`, read straight from the kernel
/// (/proc/PID/task/TID/cgroup); a zombie leader's own entry is stale and skipped.
fn live_cgroups(pid: u32) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return vec![] };
    let mut out = vec![];
    for e in rd.flatten() {
        let t = e.path();
        let stat = std::fs::read(t.join("stat")).unwrap_or_default();
        let state = stat.iter().rposition(|&b| b == b')').and_then(|i| stat.get(i + 2)).copied();
        if matches!(state, None | Some(b'Z') | Some(b'X')) {
            continue;
        }
        let text = String::from_utf8_lossy(&std::fs::read(t.join("cgroup")).unwrap_or_default()).into_owned();
        let cpu = text.lines().find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, ctrls, path) = (f.next()?, f.next()?, f.next()?);
            ctrls.split(',').any(|c| c == "cpu").then(|| path.to_string())
        });
        let v2 = text.lines().find_map(|l| l.strip_prefix("0::").map(String::from));
        if let Some(p) = cpu.or(v2) {
            out.push(p);
        }
    }
    out
}

/// The job `show` lists `pid` in, once every live thread of it sits in that job's cgroup.
fn placed(d: &PrivateDaemon, pid: u32) -> Option<JobView> {
    let j = job_with_pid(&show(d), pid)?;
    let want = format!("/{}", j.cgroup);
    let cgs = live_cgroups(pid);
    (!cgs.is_empty() && cgs.iter().all(|c| c.contains(&d.root_name) && c.ends_with(&want))).then_some(j)
}

/// Processes a hostile user makes without any program of their own.
mod odd {
    use super::*;

    pub const NAME: &[u8] = b"\xff\xfe\0";

    /// Closes every descriptor from 3 up but `keep`, so `spawn` (waiting for the exec
    /// that never comes on a close-on-exec pipe) returns.
    unsafe fn close_from_3(keep: i32) {
        if keep >= 3 {
            libc::syscall(libc::SYS_close_range, 3u32, (keep - 1) as u32, 0u32);
            libc::syscall(libc::SYS_close_range, (keep + 1) as u32, u32::MAX, 0u32);
        } else {
            libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32);
        }
    }

    /// `uid`'s process named "\xff\xfe" by prctl(PR_SET_NAME), sleeping.
    pub fn renamed(d: &PrivateDaemon, kids: &mut Kids, uid: u32) -> u32 {
        let mut c = d.shelter.command("/bin/true", Some(uid));
        c.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
        // SAFETY: raw syscalls only, in the forked child; it never returns.
        unsafe {
            c.pre_exec(|| {
                libc::prctl(libc::PR_SET_NAME, NAME.as_ptr());
                close_from_3(-1);
                loop {
                    libc::pause();
                }
            });
        }
        kids.add(c.spawn().unwrap())
    }

    /// `uid`'s thread group whose leader has exited (`Z`) while a second thread, named
    /// "\xff\xfe", lives on (sleeping).
    pub fn zombie_leader(d: &PrivateDaemon, kids: &mut Kids, uid: u32) -> u32 {
        extern "C" fn thread(_: *mut libc::c_void) -> libc::c_int {
            // SAFETY: raw syscalls on no shared state.
            unsafe {
                libc::prctl(libc::PR_SET_NAME, NAME.as_ptr());
                close_from_3(-1);
                loop {
                    libc::pause();
                }
            }
        }
        let stack = Box::leak(vec![0u8; 256 << 10].into_boxed_slice());
        let top = stack.as_mut_ptr() as usize + stack.len() - 64;
        let mut c = d.shelter.command("/bin/true", Some(uid));
        c.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
        // SAFETY: in the forked child: a thread on memory allocated before the fork, then
        // the leader alone exits (SYS_exit, not exit_group).
        unsafe {
            c.pre_exec(move || {
                let flags = libc::CLONE_VM | libc::CLONE_FS | libc::CLONE_FILES | libc::CLONE_SIGHAND | libc::CLONE_THREAD | libc::CLONE_SYSVSEM;
                if libc::clone(thread, (top & !15) as *mut libc::c_void, flags, std::ptr::null_mut()) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                libc::syscall(libc::SYS_exit, 0);
                unreachable!()
            });
        }
        let pid = kids.add(c.spawn().unwrap());
        wait_for("the leader to exit while its thread runs", || {
            let s = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
            let i = s.iter().rposition(|&b| b == b')')?;
            (s.get(i + 2) == Some(&b'Z') && live_cgroups(pid).len() == 1).then_some(())
        });
        pid
    }

    /// `uid`'s process of an executable named "\xff\xfe" (a link to sleep).
    pub fn odd_exe(d: &PrivateDaemon, kids: &mut Kids, uid: u32, dir: &Path) -> u32 {
        let link = dir.join(std::ffi::OsStr::from_bytes(&NAME[..2]));
        if !link.exists() {
            std::os::unix::fs::symlink(sleep_path(), &link).unwrap();
        }
        let mut c = d.shelter.command(&link, Some(uid));
        c.arg("300").stdin(Stdio::null()).stdout(Stdio::null());
        kids.add(c.spawn().unwrap())
    }

    pub fn sleep_path() -> PathBuf {
        ["/bin/sleep", "/usr/bin/sleep"].iter().map(PathBuf::from).find(|p| p.exists()).unwrap()
    }

    /// A process of root's that becomes wholly `from`'s keeping CAP_SETUID (so the daemon
    /// places it as `from`'s), waits for a byte on `go`, then becomes wholly `to`'s and at
    /// once forks `n` children, each of which forks a grandchild; all sleep.
    pub fn switcher(d: &PrivateDaemon, kids: &mut Kids, from: u32, to: u32, n: usize) -> (u32, i32) {
        let mut p = [0i32; 2];
        // SAFETY: a pipe into a local array.
        assert_eq!(unsafe { libc::pipe(p.as_mut_ptr()) }, 0);
        let (r, w) = (p[0], p[1]);
        let mut c = d.shelter.command("/bin/true", None);
        c.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
        // SAFETY: raw syscalls only, in the forked child; it never returns.
        unsafe {
            c.pre_exec(move || {
                #[repr(C)]
                struct Hdr {
                    version: u32,
                    pid: i32,
                }
                #[repr(C)]
                #[derive(Clone, Copy)]
                struct Data {
                    effective: u32,
                    permitted: u32,
                    inheritable: u32,
                }
                let fail = || std::io::Error::last_os_error();
                if libc::prctl(libc::PR_SET_KEEPCAPS, 1) != 0 || libc::setgroups(0, std::ptr::null()) != 0 {
                    return Err(fail());
                }
                if libc::setresgid(from, from, from) != 0 || libc::setresuid(from, from, from) != 0 {
                    return Err(fail());
                }
                // Raise CAP_SETUID and CAP_SETGID again (kept in the permitted set).
                let mut h = Hdr { version: 0x2008_0522, pid: 0 };
                let mut data = [Data { effective: 0, permitted: 0, inheritable: 0 }; 2];
                if libc::syscall(libc::SYS_capget, &mut h, data.as_mut_ptr()) != 0 {
                    return Err(fail());
                }
                data[0].effective = data[0].permitted & ((1 << 6) | (1 << 7));
                if libc::syscall(libc::SYS_capset, &mut h, data.as_ptr()) != 0 {
                    return Err(fail());
                }
                close_from_3(r);
                let mut b = 0u8;
                if libc::read(r, (&mut b as *mut u8).cast(), 1) != 1 {
                    libc::_exit(3);
                }
                if libc::setresgid(to, to, to) != 0 || libc::setresuid(to, to, to) != 0 {
                    libc::_exit(4);
                }
                for _ in 0..n {
                    if libc::fork() == 0 {
                        if libc::fork() == 0 {
                            loop {
                                libc::pause();
                            }
                        }
                        loop {
                            libc::pause();
                        }
                    }
                }
                loop {
                    libc::pause();
                }
            });
        }
        let pid = kids.add(c.spawn().unwrap());
        // SAFETY: our copy of the read end.
        unsafe { libc::close(r) };
        (pid, w)
    }
}

/// Every process below `pid` (children of every thread, recursively), bounded.
fn descendants(pid: u32) -> Vec<u32> {
    let mut out = vec![];
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        let Ok(rd) = std::fs::read_dir(format!("/proc/{p}/task")) else { continue };
        for t in rd.flatten() {
            let kids = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
            for c in kids.split_whitespace().filter_map(|x| x.parse::<u32>().ok()) {
                if out.len() < 1000 {
                    out.push(c);
                    todo.push(c);
                }
            }
        }
    }
    out
}

/// Kills (SIGKILL) processes the test's own children forked, by pid, before their parent
/// goes: they are ours, reparented to init once their parent dies.
fn kill_pids(pids: &[u32]) {
    for &p in pids {
        // SAFETY: processes this test made (the descendants of its own children).
        unsafe { libc::kill(p as i32, libc::SIGKILL) };
    }
}

/// On drop (even when the test fails), kills every descendant of these children of ours,
/// before `Kids` kills the children themselves: declare it after the `Kids`.
struct KillBelow(Vec<u32>);

impl Drop for KillBelow {
    fn drop(&mut self) {
        for &p in &self.0 {
            kill_pids(&descendants(p));
        }
    }
}

fn assert_user(j: &JobView, uid: u32, what: &str) {
    assert_eq!((j.uid, j.currency.as_str()), (uid, uid.to_string().as_str()), "{what}: {j:?}");
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn odd_processes_started_while_the_daemon_is_down_are_placed_at_start_and_root_can_set_them() {
    require_root();
    let _s = serial();
    let dir = tmpdir("odd-down");
    let mut d = PrivateDaemon::start(exe(), "").unwrap();
    d.terminate().unwrap();
    let mut kids = Kids::default();
    let renamed = odd::renamed(&d, &mut kids, A);
    let zombie = odd::zombie_leader(&d, &mut kids, A);
    let named = odd::odd_exe(&d, &mut kids, A, &dir);
    let plain = spawn_as(&d, &mut kids, A, &["sleep", "300"]);
    d.launch(true).unwrap();
    for (pid, what) in
        [(plain, "an ordinary process"), (renamed, "a non-UTF-8 comm"), (zombie, "a zombie leader's live thread"), (named, "a non-UTF-8 exe")]
    {
        let j = wait_for(what, || placed(&d, pid));
        assert_user(&j, A, what);
    }
    // Root changes each of them; so may their user.
    for pid in [renamed, zombie, named] {
        ok(&d.cli(&["set", &pid.to_string(), "-t", "42"], None).unwrap());
        let j = wait_for("root's set", || placed(&d, pid).filter(|j| j.tickets == 42));
        assert_user(&j, A, "still A's after root's set");
        ok(&d.cli(&["set", &pid.to_string(), "-t", "43"], Some(A)).unwrap());
        ok(&d.cli(&["move", &pid.to_string(), &B.to_string()], None).unwrap());
        let j = wait_for("root's move", || placed(&d, pid).filter(|j| j.currency == B.to_string()));
        assert_eq!(j.currency, B.to_string(), "{j:?}");
    }
    drop(kids);
    d.stop().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn odd_processes_started_in_a_login_burst_are_all_placed() {
    require_root();
    let _s = serial();
    let dir = tmpdir("odd-burst");
    let mut d = PrivateDaemon::start(exe(), "").unwrap();
    let mut kids = Kids::default();
    let mut pids = vec![];
    for _ in 0..8 {
        pids.push(odd::renamed(&d, &mut kids, A));
        pids.push(odd::odd_exe(&d, &mut kids, B, &dir));
        pids.push(spawn_as(&d, &mut kids, C, &["sleep", "300"]));
    }
    for _ in 0..4 {
        pids.push(odd::zombie_leader(&d, &mut kids, A));
    }
    for &p in &pids {
        wait_for("every process of the burst placed", || placed(&d, p));
    }
    drop(kids);
    d.stop().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn a_rule_never_grants_a_currency_its_user_may_not_use() {
    require_root();
    let _s = serial();
    let dir = tmpdir("rule-cur");
    let cfg =
        format!("[currencies.advonly]\nusers = [\"{B}\"]\n[[rules]]\nname = \"builds\"\ncomm = \"cc1*\"\ncurrency = \"advonly\"\ntickets = 500\n");
    let mut d = PrivateDaemon::start(exe(), &cfg).unwrap();
    refused(&d.cli(&["run", "--currency", "advonly", "--", "true"], Some(A)).unwrap(), &["advonly"]);
    // The hostile user's copy of a shell, renamed to match the rule.
    std::os::unix::fs::symlink(odd::sleep_path(), dir.join("cc1sh")).unwrap();
    let cc1 = dir.join("cc1sh").display().to_string();
    let mut kids = Kids::default();
    let theirs = spawn_as(&d, &mut kids, A, &[&cc1, "300"]);
    let again = spawn_as(&d, &mut kids, A, &[&cc1, "301"]);
    // The currency's rightful user: the rule gives them its currency (the rule matches).
    let rightful = spawn_as(&d, &mut kids, B, &[&cc1, "302"]);
    let j = wait_for("B's cc1sh placed by the rule", || placed(&d, rightful).filter(|j| j.tickets == 500));
    assert_eq!((j.currency.as_str(), j.tickets), ("advonly", 500), "the rule applies to its user: {j:?}");
    for p in [theirs, again] {
        let j = wait_for("A's cc1sh placed by the rule", || placed(&d, p).filter(|j| j.tickets == 500));
        assert_user(&j, A, "a rule's currency A may not use");
    }
    // And at exec: A's process that execs into the renamed program.
    let sh = spawn_as(&d, &mut kids, A, &["sh", "-c", &format!("sleep 0.5; exec {cc1} 303")]);
    wait_for("A's shell placed", || placed(&d, sh));
    let j = wait_for("the exec'd cc1sh placed by the rule", || placed(&d, sh).filter(|j| j.tickets == 500));
    assert_user(&j, A, "after exec");
    let log = d.log();
    let n = log.matches("may not use currency").count();
    assert_eq!(n, 1, "the fallback is logged once per user and rule: {log}");
    drop(kids);
    d.stop().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn children_forked_after_a_user_change_go_with_their_parent() {
    require_root();
    let _s = serial();
    let d = PrivateDaemon::start(exe(), "").unwrap();
    let mut kids = Kids::default();
    let mut worst = Duration::ZERO;
    let mut below = KillBelow(vec![]);
    for round in 0..3 {
        let (p, go) = odd::switcher(&d, &mut kids, A, B, 6);
        below.0.push(p);
        assert_user(&wait_for("the switcher placed as A", || placed(&d, p)), A, "before the change");
        // SAFETY: our pipe's write end.
        assert_eq!(unsafe { libc::write(go, b"g".as_ptr().cast(), 1) }, 1);
        unsafe { libc::close(go) };
        let t0 = Instant::now();
        let all = wait_for("the children forked", || Some(descendants(p)).filter(|v| v.len() == 12));
        for &c in std::iter::once(&p).chain(&all) {
            let j = wait_for("the new user's process in the new user's currency", || placed(&d, c).filter(|j| j.uid == B));
            assert_user(&j, B, "after the change");
        }
        worst = worst.max(t0.elapsed());
        // The new user may change every one of them now.
        ok(&d.cli(&["set", &all[0].to_string(), "-t", "7"], Some(B)).unwrap());
        kill_pids(&all);
        eprintln!("round {round}: {} processes in B's currency after {:?}", all.len() + 1, t0.elapsed());
    }
    assert!(worst < Duration::from_secs(2), "children placed within {worst:?}, want about a second");
    drop(below);
    drop(kids);
    drop(d);
}

/// Starts `uid`'s shell that re-execs itself forever with `args` (same pid, always alive),
/// appending a byte to `count` at each exec (its rate, measured).
fn re_exec_loop(d: &PrivateDaemon, kids: &mut Kids, uid: u32, count: &Path, args: &[String]) -> u32 {
    std::fs::write(count, "").unwrap();
    std::os::unix::fs::chown(count, Some(uid), Some(uid)).unwrap();
    let script = "printf x >> \"$EXECS\"; exec /bin/sh -c \"$0\" \"$0\" \"$@\"";
    let mut c = d.shelter.command("/bin/sh", Some(uid));
    c.args(["-c", script, script]).args(args).env("EXECS", count).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
    // SAFETY: setrlimit in the forked child: room for a 5 MiB argv (a quarter of the stack).
    unsafe {
        c.pre_exec(|| {
            let r = libc::rlimit { rlim_cur: 64 << 20, rlim_max: 64 << 20 };
            if libc::setrlimit(libc::RLIMIT_STACK, &r) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    kids.add(c.spawn().unwrap())
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn an_exec_storm_with_a_huge_command_line_keeps_the_daemon_cheap() {
    require_root();
    let _s = serial();
    let cfg = "[[rules]]\nname = \"never\"\ncmdline = \"re:(x+x+)+y$\"\ntickets = 5\n";
    let d = PrivateDaemon::start(exe(), cfg).unwrap();
    let dir = tmpdir("storm");
    let dpid = d.daemon_pid().unwrap();
    let cpu = || {
        allot_linux::process::procfs::stat(dpid as i32).map(|s| (s.utime + s.stime) as f64 / allot_linux::process::procfs::clk_tck() as f64).unwrap()
    };
    let len = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    // B polls `status` every 200 ms for `secs`; returns the daemon's CPUs and B's slowest.
    let window = |secs: u64| {
        let (c0, t0) = (cpu(), Instant::now());
        let mut slowest = Duration::ZERO;
        while t0.elapsed() < Duration::from_secs(secs) {
            let t = Instant::now();
            ok(&d.cli(&["status"], Some(B)).unwrap());
            slowest = slowest.max(t.elapsed());
            std::thread::sleep(Duration::from_millis(200));
        }
        ((cpu() - c0) / t0.elapsed().as_secs_f64(), slowest, t0.elapsed().as_secs_f64())
    };
    let (idle, _, _) = window(3);
    let mut kids = Kids::default();
    // 40 arguments of 128 KiB (the kernel's limit for one): a 5 MiB command line; and
    // beside it a short one, re-exec'd as fast as the shell can.
    let big: Vec<String> = (0..40).map(|i| format!("{i}{}", "x".repeat(130_000))).collect();
    let (bigs, fasts) = (dir.join("big"), dir.join("fast"));
    let storm = re_exec_loop(&d, &mut kids, A, &bigs, &big);
    let fast = re_exec_loop(&d, &mut kids, A, &fasts, &["x".repeat(100)]);
    wait_for("the storms placed", || placed(&d, storm).and(placed(&d, fast)));
    let (e0, f0) = (len(&bigs), len(&fasts));
    let (used, slowest, secs) = window(4);
    let (rate, frate) = ((len(&bigs) - e0) as f64 / secs, (len(&fasts) - f0) as f64 / secs);
    let st = status(&d);
    let tracking = st.tracking;
    eprintln!(
        "execs/s: {rate:.0} with a 5 MiB command line, {frate:.0} short; daemon CPUs {used:.3} (idle: {idle:.3}); B's slowest status {slowest:?}; tracking: {tracking}"
    );
    assert!(rate >= 3.0 && frate > 50.0, "the storms ran ({rate:.0} and {frate:.0} execs/s)");
    assert!(used < 0.25, "the daemon used {used:.3} CPUs during one user's exec storm");
    assert!(slowest < Duration::from_millis(500), "another user's status took {slowest:?}");
    // Past its budget (a burst of 200, then 100 a second), A's execs wait their turn.
    if (rate + frate) * secs > 200.0 + 100.0 * (secs + 2.0) {
        assert!(tracking.contains("waited"), "status shows the execs that waited: {tracking}");
    }
    drop(kids);
    drop(d);
    let _ = std::fs::remove_dir_all(&dir);
}
