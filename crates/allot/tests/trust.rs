//! The permission matrix (docs/trust.md, "Who may do what"): every operation × caller ×
//! target, asserted cell by cell, with zero escapes: a refused cell changes nothing, an
//! allowed one takes effect. And /proc privacy: `allot show` tells an ordinary user no
//! more than `ps` under hidepid=2, and nothing it prints can drive a terminal.

mod common;

use common::*;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

const CONFIG: &str =
    "scan_ms = 200\n[users]\nonly = [\"2901\", \"2902\", \"2903\"]\n[currencies.ci]\nfunding = 200\nusers = [\"2901\"]\nowners = [\"2903\"]\n";

/// Who asks.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Caller {
    Owner,
    Other,
    CurrencyOwner,
    Root,
}

impl Caller {
    fn uid(self) -> Option<u32> {
        match self {
            Caller::Owner => Some(A),
            Caller::Other => Some(B),
            Caller::CurrencyOwner => Some(C),
            Caller::Root => None,
        }
    }
}

const CALLERS: [Caller; 4] = [Caller::Owner, Caller::Other, Caller::CurrencyOwner, Caller::Root];

/// Runs one cell; asserts allowed or refused, and that a refusal changed nothing.
fn cell(d: &PrivateDaemon, what: &str, caller: Caller, args: &[&str], want: bool, target: Option<u32>) {
    let before_cg = target.map(cgroup_of);
    let before = show(d);
    let o = d.cli(args, caller.uid()).unwrap();
    let got = o.status.success();
    assert_eq!(
        got,
        want,
        "{what} by {caller:?}: expected {}, got {}: {}{}",
        if want { "allowed" } else { "refused" },
        if got { "allowed" } else { "refused" },
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    if !got {
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{what} by {caller:?}: one clear error line, got {err:?}");
        if let (Some(t), Some(b)) = (target, before_cg) {
            assert_eq!(cgroup_of(t), b, "{what} by {caller:?} was refused but moved process {t}");
        }
        let after = show(d);
        let jobs = |v: &ShowView| {
            let mut k: Vec<String> = v
                .jobs
                .iter()
                .filter(|j| !j.id.ends_with("/default"))
                // An empty job (its process moved on by an earlier cell) may be reaped at
                // any moment; a refused request moving a process is caught above.
                .filter(|j| j.pids.as_ref().is_some_and(|p| !p.is_empty()))
                .map(|j| format!("{} {} {:?} {} {}", j.id, j.tickets, j.cap, j.background, j.focus))
                .collect();
            k.sort();
            k
        };
        assert_eq!(jobs(&before), jobs(&after), "{what} by {caller:?} was refused but changed a job");
        let fund = |v: &ShowView| v.currencies.iter().map(|c| format!("{} {}", c.name, c.funding)).collect::<Vec<_>>();
        assert_eq!(
            fund(&before).iter().filter(|c| c.contains("ci")).collect::<Vec<_>>(),
            fund(&after).iter().filter(|c| c.contains("ci")).collect::<Vec<_>>()
        );
    }
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn permission_matrix() {
    require_root();
    let _s = serial();
    let mut d = PrivateDaemon::start(exe(), CONFIG).unwrap();
    let mut kids = Kids::default();
    let own = spawn_as(&d, &mut kids, A, &["sleep", "300"]);
    let others = spawn_as(&d, &mut kids, B, &["sleep", "301"]);
    let c_own = spawn_as(&d, &mut kids, C, &["sleep", "302"]);
    let roots = kids.add(Command::new("sleep").arg("303").spawn().unwrap());
    // A zombie of A's: a child that exited, whose parent (sleep) never reaps it.
    let zparent = spawn_as(&d, &mut kids, A, &["sh", "-c", "sleep 0 & exec sleep 304"]);
    let zombie = wait_for("a zombie", || {
        let kids = std::fs::read_to_string(format!("/proc/{zparent}/task/{zparent}/children")).ok()?;
        kids.split_whitespace()
            .filter_map(|p| p.parse::<u32>().ok())
            .find(|&p| allot_linux::process::procfs::stat(p as i32).is_ok_and(|s| s.state == 'Z'))
    });
    // A setuid program run by A: real uid A, effective and saved root.
    let suid = kids.add(d.shelter.command("setpriv", None).args(["--ruid", &A.to_string(), "--", "sleep", "305"]).spawn().unwrap());
    // A process placed as A that then becomes B (as su or a setuid helper would): it keeps
    // CAP_SETUID through an ambient capability and changes user a moment later.
    let become_b = format!("sleep 0.5; exec setpriv --reuid={B} --regid={B} --clear-groups sleep 306");
    let changer = kids.add(
        d.shelter
            .command("setpriv", None)
            .args([
                &format!("--reuid={A}"),
                &format!("--regid={A}"),
                "--clear-groups",
                "--inh-caps=+setuid,+setgid",
                "--ambient-caps=+setuid,+setgid",
                "--",
                "sh",
                "-c",
                &become_b,
            ])
            .stdin(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut exited = Command::new("true").spawn().unwrap();
    let gone = exited.id();
    exited.wait().unwrap();
    wait_for("placement", || {
        let v = show(&d);
        [own, others, c_own].iter().all(|&p| job_with_pid(&v, p).is_some()).then_some(())
    });
    // The uid change is seen (process events) and the process placed again, in B's currency.
    let moved = wait_for("re-placement after the uid change", || {
        let j = job_with_pid(&show(&d), changer)?;
        (j.uid == B).then_some(j)
    });
    assert_eq!(moved.currency, B.to_string());

    // set/focus/move on each target: (target, label, who may) in the order A, B, C, root.
    let targets: [(u32, &str, [bool; 4]); 9] = [
        (own, "own process", [true, false, false, true]),
        (others, "another user's process", [false, true, false, true]),
        (roots, "root's process", [false, false, false, true]),
        (2, "a kernel thread", [false; 4]),
        (1, "pid 1", [false; 4]),
        (gone, "an exited pid", [false; 4]),
        (zombie, "a zombie", [false; 4]),
        (changer, "a process that changed uid (A then B)", [false, true, false, true]),
        (suid, "a setuid process (real A, effective root)", [false, false, false, true]),
    ];
    for (pid, label, may) in targets {
        let p = pid.to_string();
        let ops: [(&str, Vec<&str>); 6] = [
            ("set -t", vec!["set", &p, "-t", "7"]),
            ("set --cap", vec!["set", &p, "--cap", "0.5!"]),
            ("set --background", vec!["set", &p, "--background"]),
            ("set --foreground", vec!["set", &p, "--foreground"]),
            ("focus", vec!["focus", &p]),
            ("focus --off", vec!["focus", "--off", &p]),
        ];
        for (op, args) in ops {
            for (k, caller) in CALLERS.iter().enumerate() {
                cell(&d, &format!("{op} on {label}"), *caller, &args, may[k], Some(pid));
            }
        }
        // move into ci: root, or ci's owner for their own process only.
        for (k, caller) in CALLERS.iter().enumerate() {
            cell(&d, &format!("move into ci on {label}"), *caller, &["move", &p, "ci"], k == 3 && may[3], Some(pid));
        }
    }
    // ci's owner may move their own process into ci, no one else's.
    let cp = c_own.to_string();
    for (k, caller) in CALLERS.iter().enumerate() {
        cell(&d, "move into ci on the currency owner's own process", *caller, &["move", &cp, "ci"], k >= 2, Some(c_own));
    }
    // Operations on the caller itself or on currencies.
    let rows: [(&str, Vec<&str>, [bool; 4]); 7] = [
        ("run", vec!["run", "--", "true"], [true; 4]),
        ("run --currency ci", vec!["run", "--currency", "ci", "--", "true"], [true, false, true, true]),
        ("run --currency B's", vec!["run", "--currency", "2902", "--", "true"], [false, true, false, true]),
        ("fund (show)", vec!["fund"], [true; 4]),
        ("fund ci 300", vec!["fund", "ci", "300"], [false, false, true, true]),
        ("fund A's currency 300", vec!["fund", "2901", "300"], [false, false, false, true]),
        ("show", vec!["show"], [true; 4]),
    ];
    for (op, args, may) in rows {
        for (k, caller) in CALLERS.iter().enumerate() {
            cell(&d, op, *caller, &args, may[k], None);
        }
    }
    d.stop().unwrap();
}

/// Runs `sh -c SCRIPT` as `uid` in a private mount namespace whose /proc has hidepid=2.
fn as_user_with_hidepid(d: &PrivateDaemon, uid: u32, script: &str) -> String {
    let mut c = Command::new("sh");
    c.args(["-c", script]).env("ALLOT_SOCKET", &d.socket).stdin(Stdio::null());
    // SAFETY: raw syscalls only, between fork and exec.
    unsafe {
        c.pre_exec(move || {
            if libc::unshare(libc::CLONE_NEWNS) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            let root = c"/";
            if libc::mount(std::ptr::null(), root.as_ptr(), std::ptr::null(), libc::MS_REC | libc::MS_PRIVATE, std::ptr::null()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            let (proc_, opts) = (c"/proc", c"hidepid=2");
            if libc::mount(c"proc".as_ptr(), proc_.as_ptr(), c"proc".as_ptr(), 0, opts.as_ptr().cast()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::setgroups(0, std::ptr::null()) != 0 || libc::setgid(uid) != 0 || libc::setuid(uid) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let o = c.output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn show_respects_proc_privacy_and_escapes_what_processes_say() {
    require_root();
    let _s = serial();
    let d = PrivateDaemon::start(exe(), CONFIG).unwrap();
    let mut kids = Kids::default();
    let secret = "--password=hunter2";
    let forged = "\n1      root  root  10000  100  2.00  2.00  -  boost  1  init";
    let escape = "\x1b]0;pwned\x07\x1b[2J";
    // sh stays (the script does more than exec), so its argv is what the kernel shows.
    let theirs = spawn_as(&d, &mut kids, B, &["sh", "-c", "sleep 311; :", escape, "mysql", secret, forged]);
    let _mine = spawn_as(&d, &mut kids, A, &["sleep", "312"]);
    wait_for("placement", || job_with_pid(&show(&d), theirs));
    let exe = exe().display().to_string();
    let out = as_user_with_hidepid(&d, A, &format!("ps -eo pid=; echo ---; {exe} --json show; echo ---; {exe} show"));
    let parts: Vec<&str> = out.split("---\n").collect();
    let visible: Vec<u32> = parts[0].split_whitespace().filter_map(|p| p.parse().ok()).collect();
    assert!(!visible.contains(&theirs), "hidepid=2 is in force for the test user");
    let json: ShowView = serde_json::from_str(parts[1]).unwrap();
    for j in json.jobs {
        for &p in j.pids.iter().flatten() {
            let p = p as u32;
            assert!(visible.contains(&p), "allot show told user A about pid {p}, which ps does not show them");
        }
        if j.uid != A {
            assert!(j.command.is_none() && j.pids.is_none(), "another user's job shows its command or pids: {j:?}");
        }
    }
    for text in [parts[1], parts[2]] {
        assert!(!text.contains("hunter2") && !text.contains("mysql"), "another user's command line leaked: {text}");
    }
    // Root sees the command as the kernel has it, escaped for the terminal: no row can be
    // forged and no escape sequence reaches the terminal.
    let root = ok(&d.cli(&["show"], None).unwrap());
    assert!(root.contains("hunter2"), "root sees every command line");
    assert!(!root.contains('\x1b') && !root.contains('\x07'), "control characters escaped");
    assert!(root.contains("\\e]0;pwned\\a"), "{root}");
    assert!(root.lines().filter(|l| l.contains("init")).all(|l| l.contains("\\n")), "a newline in a command cannot start a row: {root}");
    // sh's own child (the sleep) would outlive a kill of sh and keep the shelter busy:
    // it is ended by pid first, then `kids` ends sh.
    let children = std::fs::read_to_string(format!("/proc/{theirs}/task/{theirs}/children")).unwrap_or_default();
    for c in children.split_whitespace().filter_map(|p| p.parse::<i32>().ok()) {
        // SAFETY: kill(2) of a process this test started (sh's child).
        unsafe { libc::kill(c, libc::SIGKILL) };
    }
}
