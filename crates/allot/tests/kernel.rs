//! Kernel tests: a real daemon on this machine's real cgroup tree. They need root and a
//! cgroup cpu controller, and FAIL (never skip) without them. Each test starts a
//! private daemon with its own uniquely named cgroup root, which is removed at the end
//! even when the test fails (the harness's Drop), and kills only the processes it
//! started, by pid.

mod common;

use allot::proto::{ErrorKind, Reply};
use common::*;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::process::Command;
use std::time::{Duration, Instant};

/// Seed acceptance 1–4: ratio, insulation, hard cap, background, through `allot-lab selftest`.
/// Started under `nice` as a cautious admin might: the checks still run at nice 0.
#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn selftest_ratio_insulation_cap_background() {
    require_root();
    let _s = serial();
    let out = Command::new("nice").args(["-n", "5"]).arg(lab()).args(["selftest"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    eprintln!("{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "selftest failed:\n{text}");
    assert!(text.contains("4 passed, 0 failed"), "{text}");
    assert!(text.contains("the checks run at nice 0"), "{text}");
}

const CONFIG: &str = "scan_ms = 200\n[users]\nonly = [\"2901\", \"2902\"]\n[currencies.ci]\nfunding = 200\nusers = [\"2901\"]\n";

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn permissions_and_bad_input_change_nothing() {
    require_root();
    let _s = serial();
    let (a, b) = (A, B);
    let mut d = PrivateDaemon::start(exe(), CONFIG).unwrap();
    let mut kids = Kids::default();
    let a_sleep = spawn_as(&d, &mut kids, a, &["sleep", "300"]);
    // A's process is placed automatically in A's currency.
    wait_for("auto-placement", || job_with_pid(&show(&d), a_sleep));
    let s = a_sleep.to_string();

    // A may give her own process a job of its own, and run in ci, where she is listed.
    ok(&d.cli(&["set", &s, "-t", "50"], Some(a)).unwrap());
    let in_ci = d.run_job(&["--currency", "ci"], &["sleep", "300"], Some(a)).unwrap();
    d.wait_exec(in_ci).unwrap();
    assert_eq!(wait_for("job in ci", || job_with_pid(&show(&d), in_ci)).currency, "ci");
    let before = show(&d);
    assert_eq!(job_with_pid(&before, a_sleep).unwrap().tickets, 50);

    // B may not touch A's process, fund, move, or use a currency he is not listed in.
    refused(&d.cli(&["set", &s, "-t", "5000"], Some(b)).unwrap(), &["belongs to 2901", "your own processes"]);
    refused(&d.cli(&["set", &s, "--background"], Some(b)).unwrap(), &["belongs to"]);
    let o = d.cli(&["fund", "2902", "300"], Some(b)).unwrap();
    refused(&o, &["root's"]);
    assert_eq!(o.status.code(), Some(1), "a refusal that is not for now exits 1");
    refused(&d.cli(&["fund", "ci", "300"], Some(b)).unwrap(), &["root's"]);
    refused(&d.cli(&["move", &s, "2902"], Some(b)).unwrap(), &["root's"]);
    refused(&d.cli(&["run", "--currency", "ci", "--", "true"], Some(b)).unwrap(), &["may not run jobs in currency \"ci\""]);
    refused(&d.cli(&["run", "--currency", "2901", "--", "true"], Some(b)).unwrap(), &["may not run jobs"]);
    // A may not fund even her own currency, nor move her process into another.
    refused(&d.cli(&["fund", "2901", "10000"], Some(a)).unwrap(), &["root's"]);
    refused(&d.cli(&["move", &s, "ci"], Some(a)).unwrap(), &["root's"]);

    // Bad values: one clear error naming the value and what is allowed.
    for t in ["0", "-1", "10001", "abc"] {
        refused(&d.cli(&["run", "-t", t, "--", "true"], Some(a)).unwrap(), &["tickets must be a whole number 1..10000", t]);
        refused(&d.cli(&["set", &s, "-t", t], Some(a)).unwrap(), &["tickets must be a whole number 1..10000", t]);
    }
    for (c, why) in [("0!", "hard cap of 0"), ("2/0", "denominator is 0"), ("-1", ">= 0"), ("x", "not a number")] {
        refused(&d.cli(&["run", "--cap", c, "--", "true"], Some(a)).unwrap(), &[&format!("cap {c:?} is invalid"), why]);
        refused(&d.cli(&["set", &s, "--cap", c], Some(a)).unwrap(), &[&format!("cap {c:?} is invalid"), why]);
    }
    refused(&d.cli(&["run", "--cap", "64!", "--", "true"], Some(a)).unwrap(), &["more than this machine's"]);
    refused(&d.cli(&["fund", "2901", "0"], None).unwrap(), &["funding must be a whole number 1..10000", "0"]);
    refused(&d.cli(&["fund", "nosuchthing", "5"], None).unwrap(), &["unknown currency or user \"nosuchthing\""]);
    refused(&d.cli(&["run", "--currency", "nosuchthing", "--", "true"], Some(a)).unwrap(), &["unknown currency"]);
    refused(&d.cli(&["set", "999999", "-t", "5"], None).unwrap(), &["no process 999999"]);
    refused(&d.cli(&["set", "2", "-t", "5"], None).unwrap(), &["kernel thread"]);
    refused(&d.cli(&["set", "x1", "-t", "5"], None).unwrap(), &["PID must be a process id", "x1"]);
    refused(&d.cli(&["set", &s], Some(a)).unwrap(), &["needs something to change"]);
    let mut gone = Command::new("true").spawn().unwrap();
    let gone_pid = gone.id().to_string();
    gone.wait().unwrap();
    refused(&d.cli(&["set", &gone_pid, "-t", "5"], None).unwrap(), &["no process"]);

    // Malformed and hostile socket traffic.
    let raw = |bytes: &[u8], shutdown: bool| -> String {
        let mut c = UnixStream::connect(&d.socket).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let _ = c.write_all(bytes);
        if shutdown {
            let _ = c.shutdown(std::net::Shutdown::Write);
        }
        let mut s = String::new();
        let _ = c.read_to_string(&mut s);
        s
    };
    // The daemon checks values itself, whatever the client did.
    assert!(raw(b"{\"v\":3,\"op\":\"run\",\"tickets\":0}\n", false).contains("tickets must be a whole number 1..10000, got \\\"0\\\""));
    assert!(raw(b"{\"v\":3,\"op\":\"run\",\"cap\":\"0!\"}\n", false).contains("hard cap of 0"));
    assert!(raw(b"{\"v\":3,\"op\":\"fund\",\"currency\":\"2901\",\"funding\":10001}\n", false).contains("funding must be a whole number 1..10000"));
    assert!(raw(b"{\"v\":3,\"op\":\"set\",\"pids\":[-4],\"tickets\":5}\n", false).contains("pid -4 is not a process id"));
    assert!(raw(b"garbage\n", false).contains("malformed request"));
    assert!(raw(b"{\"v\":3,\"op\":\"status\",\"x\":1}\n", false).contains("unknown field"), "unknown fields are refused everywhere");
    assert!(raw(b"{\"op\":\"status\"}\n", false).contains("protocol 1"), "an old client is told so in one sentence");
    assert!(raw(b"{\"v\":3,\"op\":\"explode\"}\n", false).contains("malformed request"));
    assert!(raw(b"{\"v\":3,\"op\":\"set\",\"pids\":[1],\"tickets\":\"abc\"}\n", false).contains("malformed request"));
    assert!(raw(&vec![b'x'; 70_000], false).contains("larger than 65536 bytes"));
    assert_eq!(raw(b"{\"v\":3,\"op\":\"fund\",\"curr", true), "", "a client that disconnects mid-request gets nothing and changes nothing");
    // Each refusal carries its kind, for a program to decide by.
    for (line, kind) in [
        (&b"{\"v\":3,\"op\":\"run\",\"tickets\":0}\n"[..], ErrorKind::Invalid),
        (b"{\"v\":3,\"op\":\"set\",\"pids\":[-4],\"tickets\":5}\n", ErrorKind::Invalid),
        (b"garbage\n", ErrorKind::Malformed),
        (b"{\"op\":\"status\"}\n", ErrorKind::Version),
        (&vec![b'x'; 70_000], ErrorKind::TooLong),
        (b"{\"v\":3,\"op\":\"set\",\"pids\":[1],\"cap\":null}\n", ErrorKind::NotPermitted),
        (b"{\"v\":3,\"op\":\"set\",\"pids\":[999999],\"tickets\":5}\n", ErrorKind::NotFound),
    ] {
        let r = raw(line, false);
        let reply: Reply = serde_json::from_str(&r).unwrap_or_else(|e| panic!("{e}: {r}"));
        assert_eq!((reply.ok, reply.kind), (false, Some(kind)), "{r}");
    }
    {
        // A client that connects and says nothing does not block others.
        let _idle = UnixStream::connect(&d.socket).unwrap();
        ok(&d.cli(&["status"], None).unwrap());
    }

    // Nothing changed: same jobs, same tickets, same funding; the daemon still serves.
    let after = show(&d);
    assert_eq!(job_with_pid(&after, a_sleep).unwrap().tickets, 50);
    // B's own CLI processes are placed in B's default job like any of B's processes; the
    // refused requests themselves made nothing.
    let funding = |v: &ShowView| v.currencies.iter().map(|c| format!("{} {}", c.name, c.funding)).filter(|c| !c.contains("2902")).collect::<Vec<_>>();
    assert_eq!(funding(&before), funding(&after));
    let ids = |v: &ShowView| v.jobs.iter().map(|j| j.id.to_string()).filter(|id| !id.contains("/default")).collect::<Vec<_>>();
    assert_eq!(ids(&before), ids(&after));
    assert!(!after.jobs.iter().any(|j| j.uid == 2902 && j.id != "2902/default"), "refused requests made no job");
    ok(&d.cli(&["status"], None).unwrap());
    // The features the kernel has are reported as found (cpu.idle is on both v1 here and v2).
    let st = status(&d);
    let cg = d.controller().unwrap();
    assert!(cg.has_idle(), "CI's kernels (6.18 here, Debian's cloud kernel in the VM) have cpu.idle");
    assert_eq!(st.features.get("cpu_idle"), Some(&true), "{st:?}");
    assert!(cg.idle("background").unwrap(), "the background group is idle-class");
    d.stop().unwrap();
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn crash_restart_adopts_the_tree_and_keeps_funding() {
    require_root();
    let _s = serial();
    let mut d = PrivateDaemon::start_persistent(exe(), "tick_ms = 200\n[users]\nauto_place = false\n").unwrap();
    ok(&d.cli(&["fund", "root", "250"], None).unwrap());
    let j1 = d.run_job(&["-t", "300"], &["sleep", "300"], None).unwrap();
    let j2 = d.run_job(&["-t", "50", "--cap", "0.5!"], &["sleep", "300"], None).unwrap();
    let j3 = d.run_job(&["--background"], &["sleep", "300"], None).unwrap();
    for p in [j1, j2, j3] {
        d.wait_exec(p).unwrap();
    }
    let before = wait_for("three jobs", || {
        let v = show(&d);
        [j1, j2, j3].iter().all(|&p| job_with_pid(&v, p).is_some()).then_some(v)
    });
    let key = |v: &ShowView| {
        let mut k: Vec<String> =
            v.jobs.iter().map(|j| format!("{} {} {:?} {} {:?} {} {}", j.id, j.tickets, j.cap, j.background, j.pids, j.cgroup, j.funding)).collect();
        k.sort();
        k
    };

    // kill -9: the kernel keeps enforcing (the groups and their settings stay).
    d.crash();
    let cg = d.controller().unwrap();
    let j2rel = job_with_pid(&before, j2).unwrap().cgroup.clone();
    assert!(cg.max(&j2rel).unwrap().is_some(), "hard cap still in force while the daemon is down");

    d.launch(false).unwrap();
    let after = show(&d);
    assert_eq!(key(&before), key(&after), "same jobs, tickets, caps, funding; no duplicates");
    assert_eq!(after.jobs.len(), 3);
    let fund: FundingView = reply(&d, &["fund", "root"], None);
    assert_eq!(fund.funding, 250);

    // A new job after adoption gets a fresh id.
    let j4 = d.run_job(&[], &["sleep", "300"], None).unwrap();
    d.wait_exec(j4).unwrap();
    let v = show(&d);
    let id4: u64 = job_with_pid(&v, j4).unwrap().id.as_str().parse().unwrap();
    let max_before = before.jobs.iter().map(|j| j.id.as_str().parse::<u64>().unwrap()).max().unwrap();
    assert!(id4 > max_before);

    // A clean stop leaves everything in force and whole; a restart finds it again.
    let st = d.terminate().unwrap();
    assert!(st.success());
    d.launch(false).unwrap();
    let again = show(&d);
    assert_eq!(again.jobs.len(), 4);
    let fund: FundingView = reply(&d, &["fund", "root"], None);
    assert_eq!(fund.funding, 250);

    // When a job's last process exits, its cgroup goes within a few seconds.
    let rel1 = job_with_pid(&again, j1).unwrap().cgroup.clone();
    unsafe { libc::kill(j1 as i32, libc::SIGKILL) };
    let t0 = Instant::now();
    wait_for("job cgroup removal", || (!cg.exists(&rel1)).then_some(()));
    eprintln!("empty job removed after {:.1} s", t0.elapsed().as_secs_f64());
    d.stop().unwrap();
    assert!(!cg.exists(""), "the test's cgroup root is gone");
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn set_and_move_act_on_the_right_process() {
    require_root();
    let _s = serial();
    let a = A;
    let mut d = PrivateDaemon::start(exe(), CONFIG).unwrap();
    let mut kids = Kids::default();
    let p = spawn_as(&d, &mut kids, a, &["sleep", "300"]);
    let s = p.to_string();
    wait_for("auto-placement", || job_with_pid(&show(&d), p));
    // set: a job of its own with a hard cap, then background, then foreground, then no cap.
    ok(&d.cli(&["set", &s, "-t", "70", "--cap", "1/4!"], Some(a)).unwrap());
    let j = job_with_pid(&show(&d), p).unwrap();
    assert_eq!((j.tickets, j.cap.as_deref()), (70, Some("0.25!")));
    let cg = d.controller().unwrap();
    let m = cg.max(j.cgroup.as_str()).unwrap().unwrap();
    assert_eq!((m.quota_us, m.period_us), (25_000, 100_000));
    ok(&d.cli(&["set", &s, "--background"], Some(a)).unwrap());
    let j = job_with_pid(&show(&d), p).unwrap();
    assert!(j.background && j.cgroup.starts_with("background/"));
    assert_eq!(j.tickets, 70, "settings survive the move to the background");
    ok(&d.cli(&["set", &s, "--foreground", "--cap", "none"], Some(a)).unwrap());
    let j = job_with_pid(&show(&d), p).unwrap();
    assert!(!j.background);
    assert!(j.cap.is_none());
    // The 0.25 CPU cap is gone; a sleeping job may carry the boost's quota instead, which
    // is its entitlement (here more than 0.25).
    let m = cg.max(j.cgroup.as_str()).unwrap();
    assert!(m.is_none_or(|m| m.quota_us > 25_000), "{m:?}");
    // move (root): into the named currency ci. The job it leaves, now empty and idle,
    // is reaped.
    let left = job_with_pid(&show(&d), p).unwrap().cgroup.clone();
    ok(&d.cli(&["move", &s, "ci"], None).unwrap());
    wait_for("the emptied job to be reaped", || (!cg.exists(&left)).then_some(()));
    let j = job_with_pid(&show(&d), p).unwrap();
    assert_eq!(j.currency, "ci");
    assert_eq!(j.funding, 200);
    assert_eq!(j.user, "2901");
    d.stop().unwrap();
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn focus_and_soft_caps_are_checked_and_kept() {
    require_root();
    let _s = serial();
    let (a, b) = (A, B);
    let mut d = PrivateDaemon::start_persistent(exe(), CONFIG).unwrap();
    let mut kids = Kids::default();
    let p = spawn_as(&d, &mut kids, a, &["sleep", "300"]);
    let s = p.to_string();
    wait_for("auto-placement", || job_with_pid(&show(&d), p));
    // Only the owner (or root) may focus; bad pids are refused.
    refused(&d.cli(&["focus", &s], Some(b)).unwrap(), &["belongs to 2901"]);
    refused(&d.cli(&["focus", "999999"], Some(a)).unwrap(), &["no process 999999"]);
    ok(&d.cli(&["focus", &s], Some(a)).unwrap());
    let j = job_with_pid(&show(&d), p).unwrap();
    assert!(j.focus);
    assert_ne!(j.id.as_str(), "2901/default", "focus gives the process a job of its own");
    let st = wait_for("boost applied", || {
        let j = job_with_pid(&show(&d), p)?;
        j.boost.then_some(j)
    });
    assert!(st.boost);
    ok(&d.cli(&["focus", "--off", &s], Some(a)).unwrap());
    assert!(!job_with_pid(&show(&d), p).unwrap().focus);

    // Soft caps are accepted (EBS forms), shown as set, and stay soft across a crash even
    // while the daemon has the quota written.
    ok(&d.cli(&["set", &s, "--cap", "1/2"], Some(a)).unwrap());
    assert_eq!(job_with_pid(&show(&d), p).unwrap().cap.as_deref(), Some("0.5"));
    let q = d.run_job(&["--cap", "0.3"], &["sleep", "300"], None).unwrap();
    d.wait_exec(q).unwrap();
    assert_eq!(wait_for("soft-capped job", || job_with_pid(&show(&d), q)).cap.as_deref(), Some("0.3"));
    let jq = job_with_pid(&show(&d), q).unwrap();
    let cg = d.controller().unwrap();
    let rel = jq.cgroup.clone();
    // Simulate a crash at the moment the soft cap is held: quota written, daemon killed.
    // A sleeping default job carries a boost quota at that moment too.
    let other = spawn_as(&d, &mut kids, b, &["sleep", "300"]);
    let jd = wait_for("B's default job", || job_with_pid(&show(&d), other));
    assert_eq!(jd.id, "2902/default");
    let drel = jd.cgroup.clone();
    d.crash();
    cg.set_max(&drel, Some(allot_linux::cgroup::Max { quota_us: 50_000, period_us: 100_000 })).unwrap();
    cg.set_max(&rel, Some(allot_linux::cgroup::Max { quota_us: 30_000, period_us: 100_000 })).unwrap();
    d.launch(false).unwrap();
    let jq = job_with_pid(&show(&d), q).unwrap();
    assert_eq!(jq.cap.as_deref(), Some("0.3"), "the base setting (soft 0.3) comes back, not a hard cap read from the quota");
    assert!(job_with_pid(&show(&d), other).unwrap().cap.is_none(), "a default job's boost quota is not read back as a cap");
    // Clean stop takes dynamic adjustments back: an idle soft-capped job has no quota after it.
    d.terminate().unwrap();
    assert!(cg.max(&rel).unwrap().is_none(), "clean stop lifts a held soft cap and boost quotas");
    d.launch(false).unwrap();
    d.stop().unwrap();
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn run_without_a_daemon_runs_the_command_unless_strict() {
    require_root();
    let gone = std::env::temp_dir().join(format!("allot-no-daemon-{}.sock", std::process::id()));
    let o = Command::new(exe()).args(["--socket", gone.to_str().unwrap(), "run", "--", "sh", "-c", "echo ran"]).output().unwrap();
    assert!(o.status.success());
    assert_eq!(String::from_utf8_lossy(&o.stdout), "ran\n", "the command runs, unmanaged");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "one warning: {err}");
    assert!(err.contains("warning") && err.contains("unmanaged"), "{err}");
    let o = Command::new(exe()).args(["--socket", gone.to_str().unwrap(), "run", "--strict", "--", "sh", "-c", "echo ran"]).output().unwrap();
    assert!(!o.status.success() && o.stdout.is_empty(), "--strict: the command does not run");
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn a_multi_pid_set_changes_all_or_nothing() {
    require_root();
    let _s = serial();
    let d = PrivateDaemon::start(exe(), CONFIG).unwrap();
    let mut kids = Kids::default();
    let (p1, p2) = (spawn_as(&d, &mut kids, A, &["sleep", "300"]), spawn_as(&d, &mut kids, A, &["sleep", "301"]));
    let theirs = spawn_as(&d, &mut kids, B, &["sleep", "302"]);
    wait_for("placement", || {
        let v = show(&d);
        [p1, p2, theirs].iter().all(|&p| job_with_pid(&v, p).is_some()).then_some(())
    });
    let cg = [cgroup_of(p1), cgroup_of(p2)];
    refused(&d.cli(&["set", &p1.to_string(), &p2.to_string(), &theirs.to_string(), "-t", "7"], Some(A)).unwrap(), &["belongs to 2902"]);
    assert_eq!([cgroup_of(p1), cgroup_of(p2)], cg, "nothing moved");
    let mut gone = Command::new("true").spawn().unwrap();
    let g = gone.id();
    gone.wait().unwrap();
    refused(&d.cli(&["set", &p1.to_string(), &g.to_string(), "-t", "7"], Some(A)).unwrap(), &["no process"]);
    assert_eq!(cgroup_of(p1), cg[0]);
    ok(&d.cli(&["set", &p1.to_string(), &p2.to_string(), "-t", "7"], Some(A)).unwrap());
    let v = show(&d);
    assert!([p1, p2].iter().all(|&p| job_with_pid(&v, p).unwrap().tickets == 7));
}

/// The daemon keeps its counters open (allot-linux's `Rereader`): a job directory removed
/// and made again under the same name must read as the new, empty one, never the old.
#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn a_kept_open_counter_reads_a_remade_cgroup_afresh() {
    struct Remove(Box<dyn allot_linux::cgroup::CpuController>);
    impl Drop for Remove {
        fn drop(&mut self) {
            for rel in ["x", ""] {
                for _ in 0..50 {
                    if self.0.remove(rel).is_ok() || !self.0.exists(rel) {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
    }
    let cg = Remove(allot_linux::cgroup::detect(&format!("allot-test-reread-{}", std::process::id())).unwrap());
    cg.0.create("").unwrap();
    cg.0.create("x").unwrap();
    let mut kids = allot_measure::harness::Kids::default();
    let pid = kids.add(Command::new("sh").args(["-c", "while :; do :; done"]).spawn().unwrap()) as i32;
    cg.0.move_pid("x", pid).unwrap();
    let t0 = Instant::now();
    while cg.0.usage_ns("x").unwrap() < 20_000_000 {
        assert!(t0.elapsed() < Duration::from_secs(10), "a spinning process used under 20 ms in 10 s");
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(kids);
    let t0 = Instant::now();
    while cg.0.remove("x").is_err() {
        assert!(t0.elapsed() < Duration::from_secs(5), "x still busy 5 s after its process was killed");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(cg.0.usage_ns("x").is_err(), "a removed directory's counter reads as gone");
    cg.0.create("x").unwrap();
    assert!(cg.0.usage_ns("x").unwrap() < 1_000_000, "the re-made directory reads afresh");
}
