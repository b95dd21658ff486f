//! Drives allot-linux's systemd controller ([`SystemdTree`]) from the command line, for
//! the VM test tests/vm/systemd/controller.sh: each run is a new process with a new
//! controller, as a restarted daemon would be, so every step also proves adoption.
//!
//! ```text
//! systemd_tree ROOT create REL...        create directories (scopes start as needed)
//! systemd_tree ROOT remove REL...        remove them (a currency: its scope stops)
//! systemd_tree ROOT weight REL W...      set weights, 50 ms apart, then upkeep until sent
//! systemd_tree ROOT max REL QUOTA|max    set a hard cap (µs per 100 ms)
//! systemd_tree ROOT move REL PID         move a process into REL
//! systemd_tree ROOT where PID            rel_of, path_of and session_of of a process
//! systemd_tree ROOT idle                 has_idle, set_idle(background), idle(background)
//! systemd_tree ROOT show                 what the controller finds (children, usage)
//! systemd_tree ROOT daemon               a stand-in daemon for allot.service (notify, upkeep)
//! ```
//! Prints one line per fact; exits 1 with the error on stderr when a call fails.

use allot_linux::cgroup::{CpuController, Delegation, Max, SystemdTree};
use allot_linux::ipc::systemd_bus::holder::{hold_if_asked, Holder};
use std::time::{Duration, Instant};

fn main() {
    // A holder is this program again: it must block before doing anything else.
    hold_if_asked();
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 {
        eprintln!("usage: systemd_tree ROOT COMMAND [ARGS...] (see the source's header)");
        std::process::exit(2);
    }
    if let Err(e) = run(&args[0], &args[1], &args[2..]) {
        eprintln!("systemd_tree: {e}");
        std::process::exit(1);
    }
}

type R = Result<(), Box<dyn std::error::Error>>;

fn run(root: &str, cmd: &str, a: &[String]) -> R {
    let t0 = Instant::now();
    let t = SystemdTree::new(root, Holder::SelfExec)?;
    println!("connected: systemd {} in {} ms", t.systemd_version(), t0.elapsed().as_millis());
    let pid = |s: &String| -> Result<i32, Box<dyn std::error::Error>> { Ok(s.parse()?) };
    match cmd {
        "create" => {
            for rel in a {
                let t1 = Instant::now();
                t.create(rel)?;
                println!("created {rel} at {} in {} ms", t.dir(rel).display(), t1.elapsed().as_millis());
            }
        }
        "remove" => {
            for rel in a {
                t.remove(rel)?;
                println!("removed {rel}");
            }
        }
        "weight" => {
            let rel = &a[0];
            for w in &a[1..] {
                t.set_weight(rel, w.parse()?)?;
                std::thread::sleep(Duration::from_millis(50));
            }
            // Held-back values are due within a second: keep the upkeep going past that.
            let end = Instant::now() + Duration::from_millis(1300);
            while Instant::now() < end {
                if let Some((r, e)) = t.upkeep().into_iter().next() {
                    return Err(format!("upkeep of {r}: {e}").into());
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            println!("weight {rel} {}", t.weight(rel)?);
        }
        "max" => {
            let rel = &a[0];
            let m = if a[1] == "max" { None } else { Some(Max { quota_us: a[1].parse()?, period_us: 100_000 }) };
            t.set_max(rel, m)?;
            println!("max {rel} {:?}", t.max(rel)?);
        }
        "move" => {
            let t1 = Instant::now();
            t.move_pid(&a[0], pid(&a[1])?)?;
            println!("moved {} into {} in {} ms", a[1], a[0], t1.elapsed().as_millis());
        }
        "where" => {
            let p = pid(&a[0])?;
            println!("rel_of {p} {}", t.rel_of(p)?.unwrap_or_else(|| "-".into()));
            println!("path_of {p} {}", t.path_of(p)?);
            match t.session_of(p)? {
                Some(s) => println!("session_of {p} {} uid {} {}", s.id, s.uid, s.scope),
                None => println!("session_of {p} -"),
            }
        }
        "idle" => {
            println!("has_idle {}", t.has_idle());
            t.set_idle("background", true)?;
            println!("idle background {}", t.idle("background")?);
        }
        "show" => show(&t)?,
        "daemon" => daemon(&t)?,
        other => return Err(format!("unknown command {other:?}").into()),
    }
    Ok(())
}

fn show(t: &SystemdTree) -> R {
    println!("systemd {}", t.systemd());
    let curs = t.children("")?;
    println!("currencies {}", curs.join(" "));
    for c in &curs {
        println!("jobs {c} {}", t.children(c)?.join(" "));
    }
    if t.exists("background") {
        for c in t.children("background")? {
            println!("background {c} {}", t.children(&format!("background/{c}"))?.join(" "));
        }
    }
    println!("usage_ns {}", t.usage_ns("")?);
    Ok(())
}

/// Stands in for `allot daemon` under packaging/systemd/allot.service: makes a currency
/// scope and a job, tells systemd it is ready, keeps the upkeep going and the watchdog
/// fed; SIGHUP reloads (RELOADING=1, READY=1), SIGTERM stops (STOPPING=1), leaving the
/// scopes where they are.
fn daemon(t: &SystemdTree) -> R {
    use allot_linux::ipc::notify;
    // SAFETY: signal-mask manipulation of this single-threaded process, on a local set.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::sigaddset(&mut set, s);
        }
        libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    };
    let uid = std::env::var("ALLOT_TEST_UID").unwrap_or_else(|_| "2001".into());
    let cur = format!("user-{uid}");
    t.create(&format!("{cur}/j1-u{uid}"))?;
    let scopes = t.children("")?;
    notify::ready(&format!("managing {} scope(s): {}", scopes.len(), scopes.join(", ")))?;
    let wd = notify::watchdog_interval();
    println!("ready; watchdog every {wd:?}");
    loop {
        let ts = libc::timespec { tv_sec: 0, tv_nsec: 250_000_000 };
        // SAFETY: waiting for one of the blocked signals, with a timeout.
        let sig = unsafe { libc::sigtimedwait(&set, std::ptr::null_mut(), &ts) };
        match sig {
            libc::SIGHUP => {
                notify::reloading()?;
                notify::ready("reloaded")?;
            }
            libc::SIGTERM | libc::SIGINT => {
                notify::stopping()?;
                println!("stopping; the scopes stay");
                return Ok(());
            }
            _ => {}
        }
        for (r, e) in t.upkeep() {
            eprintln!("upkeep {r}: {e}");
        }
        if wd.is_some() {
            notify::watchdog()?;
        }
    }
}
