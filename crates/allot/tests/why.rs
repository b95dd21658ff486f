//! `allot why` knows allot: a process held by its own job's hard cap is said to be held by
//! the cap, with the numbers, and only the job's owner (and root) is told to lift it;
//! another user is suggested no `allot set` at all. A process in no job, and a daemon that
//! is not running, get the kernel's verdict and the words "not managing". Root; fails,
//! never skips.

mod common;

use allot_measure::why::{Diagnosis, Managed, Verdict};
use common::*;

const CONFIG: &str = "scan_ms = 200\n[users]\nonly = [\"2901\", \"2902\"]\n";

/// `allot why --json`, read as the instruments' `Diagnosis`.
fn why(d: &PrivateDaemon, pid: u32, uid: Option<u32>) -> Diagnosis {
    let o = d.cli(&["why", "--json", "-d", "2", &pid.to_string()], uid).unwrap();
    serde_json::from_str(&ok(&o)).unwrap()
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn why_names_the_cap_and_suggests_lifting_it_only_to_its_owner() {
    require_root();
    let _s = serial();
    let mut d = PrivateDaemon::start(exe(), CONFIG).unwrap();
    let lab = lab().display().to_string();
    let hog = d.run_job(&["--cap", "0.3!"], &[&lab, "workload", "cpu", "--duration", "120"], Some(A)).unwrap();
    d.wait_exec(hog).unwrap();
    let job = wait_for("the capped job", || job_with_pid(&show(&d), hog));
    assert_eq!(job.cap.as_deref(), Some("0.3!"), "{job:?}");
    // Its usage reaches the cap (the daemon smooths it); the machine is shared, so a busy
    // moment may keep the hog under its cap for a while: ask until why says capped, up to 30 s.
    let owner = poll_until("why to say capped", std::time::Duration::from_secs(30), || {
        let v = why(&d, hog, Some(A));
        if v.verdict == Verdict::Capped {
            Ok(v)
        } else {
            Err(format!("{:?}: {}", v.verdict, v.reason))
        }
    });
    let id = job.id.as_str();
    assert_eq!(owner.verdict, Verdict::Capped, "the owner's why: {owner:#?}");
    let facts = owner.allot.job().expect("the process is in a job");
    assert_eq!(facts.job, id);
    assert_eq!(facts.cap, Some(allot_model::Cap { cpus: 0.3, hard: true }));
    let reason = owner.reason.as_str();
    assert!(reason.contains("hard cap") && reason.contains("cap 0.3!") && reason.contains("the job used 0."), "{reason}");
    let help = &owner.help;
    assert!(help.iter().any(|h| h.starts_with(&format!("allot set {hog} --cap none"))), "{help:?}");
    assert!(help.iter().all(|h| !h.contains(" -t ")), "more tickets cannot lift a cap: {help:?}");
    assert_eq!(owner.asker, A);
    assert_eq!(owner.machine.ncpu, allot_linux::ncpu());

    // Another user: the same verdict, no `allot set`, and who may change it.
    let other = why(&d, hog, Some(B));
    assert_eq!(other.verdict, Verdict::Capped, "another user's why: {other:#?}");
    assert_eq!(other.allot.job().map(|j| j.job.as_str()), Some(id));
    let help = &other.help;
    assert!(help.iter().all(|h| !h.contains("allot set")), "{help:?}");
    let ask = &other.ask;
    assert!(ask.iter().any(|a| a.contains(&format!("only uid {A} or root may"))), "{ask:?}");

    // Root may lift it.
    let root = why(&d, hog, None);
    assert!(root.help.iter().any(|h| h.starts_with(&format!("allot set {hog} --cap none"))), "{root:#?}");

    // The text says the same, with the job's numbers and allot explain's reason; asked
    // again, as above, while a busy moment keeps the hog under its cap (one run at a load
    // average of 9 said "held down by its nice": 0.21 CPUs against its cap of 0.3).
    let text = poll_until("the text to say capped", std::time::Duration::from_secs(30), || {
        let t = ok(&d.cli(&["why", "-d", "1", &hog.to_string()], Some(B)).unwrap());
        if t.contains("verdict: HELD BY ITS JOB'S CAP") {
            Ok(t)
        } else {
            Err(t)
        }
    });
    assert!(text.contains(&format!("allot: job {id} of 2901")) && text.contains("cap 0.3!"), "{text}");
    assert!(text.contains("allot explain: cap: hard cap 0.3!"), "{text}");
    assert!(!text.contains("  allot set"), "{text}");
    eprintln!("{text}");
    d.stop().unwrap();
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn why_says_allot_is_not_managing_a_process_in_no_job_or_without_a_daemon() {
    require_root();
    let _s = serial();
    let mut d = PrivateDaemon::start(exe(), CONFIG).unwrap();
    let mut kids = Kids::default();
    // Root's process in the test's own cgroup: no daemon places it.
    let loose = kids.add(std::process::Command::new("sleep").arg("300").spawn().unwrap());
    let v = why(&d, loose, None);
    assert_eq!(v.allot, Managed::NoJob, "{v:#?}");
    assert_eq!(v.verdict, Verdict::Sleeping);
    let text = ok(&d.cli(&["why", "-d", "0.3", &loose.to_string()], None).unwrap());
    assert!(text.contains("allot: not managing this process: it is in no allot job"), "{text}");
    // No daemon at the socket: the kernel's verdict, and why allot is not managing it.
    let gone = d.dir.join("gone.sock");
    let o = std::process::Command::new(exe()).arg("--socket").arg(&gone).args(["why", "--json", "-d", "0.3", &loose.to_string()]).output().unwrap();
    let v: Diagnosis = serde_json::from_str(&ok(&o)).unwrap();
    let Managed::NoDaemon { why } = &v.allot else { panic!("no daemon: {v:#?}") };
    assert!(why.contains("cannot reach the allot daemon"), "{v:#?}");
    assert_eq!(v.verdict, v.kernel_verdict);
    kids.kill_all();
    d.stop().unwrap();
}
