//! The verdict and the suggestions on constructed diagnoses: what allot holds a process
//! by, and that each suggestion is one the one asking may run (docs/trust.md).

use super::allot::tests::job;
use super::*;
use allot_model::Cap;

const OWNER: u32 = 2901;
const OTHER: u32 = 2902;

/// A CPU-bound thread that got 0.3 CPU of a 3 s window and waited the rest, on a 2-CPU
/// machine with 1.7 CPUs idle, asked about by its owner.
pub fn diagnosis(cmdline: &str, comm: &str, cgroup: &str) -> Diagnosis {
    let mut d = Diagnosis {
        pid: 42,
        cmdline: cmdline.into(),
        threads: 1,
        policy: "SCHED_OTHER nice 0".into(),
        cgroup: Some(cgroup.into()),
        uids: Some([OWNER; 4]),
        nice: Some(0),
        nice_floor: Some(20),
        asker: OWNER,
        window_s: 3.0,
        cpu_s: 0.9,
        wait_s: 2.1,
        cpu_rate: 0.3,
        wait_ms_per_s: 700.0,
        runtime_ratio: Some(0.3),
        busiest_runnable: 1.0,
        busy_threads: 1,
        throttled_s: None,
        waits_per_s: 10.0,
        mean_wait_ms: 70.0,
        involuntary_per_s: 10.0,
        voluntary_per_s: 0.0,
        worst_wait_ms: None,
        worst_wait_source: None,
        longest_wait_estimate_ms: 70.0,
        equal_share: 1.0,
        machine: MachineContext {
            ncpu: 2,
            runnable_avg: 0.3,
            idle_cpus: Some(1.7),
            psi_some_pct: None,
            psi_some_avg10: None,
            top: vec![Competitor { pid: 7, comm: comm.into(), cpus: 0.1, uids: Some([OTHER; 4]), cgroup: Some("/".into()), job: None }],
        },
        stall: Stall::default(),
        kernel_verdict: Verdict::Sleeping,
        kernel_reason: String::new(),
        allot: Managed::NotAsked,
        verdict: Verdict::Sleeping,
        reason: String::new(),
        help: vec![],
        ask: vec![],
    };
    advise(&mut d);
    d
}

/// `d` in `j`, asked about by `asker`.
fn with(mut d: Diagnosis, j: JobFacts, asker: u32) -> Diagnosis {
    d.allot = Managed::Job(Box::new(j));
    d.asker = asker;
    advise(&mut d);
    d
}

fn capped_job() -> JobFacts {
    JobFacts { cap: Some("0.3!".parse().unwrap()), quota: Some(0.3), usage: 0.29, recent: 0.3, currency_usage: 0.29, ..job() }
}

fn sets(d: &Diagnosis) -> Vec<&String> {
    d.help.iter().filter(|h| h.starts_with("allot set")).collect()
}

#[test]
fn a_hard_cap_holds_the_job_and_only_its_owner_is_told_to_lift_it() {
    // What `why` said before it knew allot: starved, with more tickets as the cure.
    let alone = diagnosis("hog", "c", "/");
    assert_eq!(alone.verdict, Verdict::Starved, "{}", alone.reason);
    assert!(alone.reason.contains("while 1.7 CPUs sat idle: not competition but a limit"), "{}", alone.reason);

    let mut d = diagnosis("hog", "c", "/allot/2901/3");
    d.throttled_s = Some(2.0);
    let owner = with(d.clone(), capped_job(), OWNER);
    assert_eq!(owner.verdict, Verdict::Capped, "{}", owner.reason);
    assert_eq!(owner.kernel_verdict, Verdict::Throttled);
    assert!(owner.reason.contains("hard cap") && owner.reason.contains("cap 0.3!") && owner.reason.contains("used 0.30 CPUs"), "{}", owner.reason);
    assert!(owner.reason.contains("stopped it 67% of the window"), "{}", owner.reason);
    assert_eq!(owner.help, ["allot set 42 --cap none    # lift job 3's cap 0.3!", "allot set 42 --cap 0.6!    # or a higher cap"]);
    assert!(owner.ask.is_empty() && !owner.help.iter().any(|h| h.contains("-t ")), "{:?}", owner.help);

    let other = with(d.clone(), capped_job(), OTHER);
    assert_eq!(other.verdict, Verdict::Capped);
    assert!(other.help.is_empty(), "{:?}", other.help);
    assert_eq!(other.ask, ["job 3's cap is its owner's to change: only uid 2901 or root may"]);

    let root = with(d.clone(), capped_job(), 0);
    assert_eq!(sets(&root).len(), 2);

    // Without cpu.stat counters, its use at the cap and its waiting say the same.
    let mut no_stat = d.clone();
    no_stat.throttled_s = None;
    assert_eq!(with(no_stat, capped_job(), OWNER).verdict, Verdict::Capped);
}

#[test]
fn a_process_not_wholly_the_askers_or_in_anothers_job_gets_no_allot_set() {
    let mut d = diagnosis("hog", "c", "/allot/2901/3");
    d.throttled_s = Some(2.0);
    // setuid: real uid is the asker's, the others are not.
    let mut setuid = d.clone();
    setuid.uids = Some([OWNER, 0, 0, 0]);
    assert!(with(setuid, capped_job(), OWNER).help.is_empty());
    // Its uids are the asker's, but the job is someone else's (root moved it there).
    assert!(with(d.clone(), JobFacts { owner: OTHER, ..capped_job() }, OWNER).help.is_empty());
    // Unknown uids (it exited): nothing for a user, everything for root.
    let mut gone = d.clone();
    gone.uids = None;
    assert!(with(gone.clone(), capped_job(), OWNER).help.is_empty());
    assert!(!with(gone, capped_job(), 0).help.is_empty());
}

#[test]
fn a_cap_that_does_not_bind_is_not_the_verdict() {
    // Cap 1.5! and the job uses 0.3: something else holds it.
    let d = diagnosis("hog", "c", "/allot/2901/3");
    let loose = JobFacts { cap: Some("1.5!".parse().unwrap()), ..capped_job() };
    assert_ne!(with(d.clone(), loose, OWNER).verdict, Verdict::Capped);
    // At its cap a while ago (the smoothed usage lags), crowded out now: not the cap.
    let mut crowded = d.clone();
    (crowded.cpu_rate, crowded.cpu_s, crowded.throttled_s) = (0.15, 0.45, Some(0.06));
    let was = JobFacts { usage: 0.29, recent: 0.16, ..capped_job() };
    assert_ne!(with(crowded, was, OWNER).verdict, Verdict::Capped);
    // A soft cap that is not held now does not hold it either; held, it does.
    let soft = JobFacts { cap: Some("0.3".parse().unwrap()), quota: None, ..capped_job() };
    assert_ne!(with(d.clone(), soft.clone(), OWNER).verdict, Verdict::Capped);
    let held = with(d.clone(), JobFacts { held: true, quota: Some(0.3), ..soft }, OWNER);
    assert_eq!(held.verdict, Verdict::Capped);
    assert!(held.reason.contains("soft cap") && held.help[1].contains("--cap 0.6 "), "{} {:?}", held.reason, held.help);
    // A sleeping process in a capped job: the cap is not what delays it.
    let mut asleep = d;
    (asleep.cpu_s, asleep.wait_s, asleep.cpu_rate, asleep.wait_ms_per_s, asleep.busiest_runnable) = (0.01, 0.0, 0.003, 0.0, 0.003);
    assert_eq!(with(asleep, capped_job(), OWNER).verdict, Verdict::Sleeping);
}

#[test]
fn background_is_by_design_and_only_its_owner_may_bring_it_forward() {
    let d = diagnosis("batch", "c", "/allot-background/2901/4");
    let bg = JobFacts { background: true, cap: Some(Cap::BACKGROUND), ..job() };
    let owner = with(d.clone(), bg.clone(), OWNER);
    assert_eq!(owner.verdict, Verdict::Background);
    assert!(owner.reason.contains("runs only on CPU nothing else wants, by design"), "{}", owner.reason);
    assert_eq!(owner.help, ["allot set 42 --foreground    # compete for CPU with its tickets again"]);
    let other = with(d, bg, OTHER);
    assert!(other.help.is_empty() && other.ask[0].contains("only uid 2901 or root"), "{:?}", other.ask);
}

#[test]
fn nice_emulation_is_named_and_renice_offered_only_to_the_owner_within_its_limit() {
    let mut d = diagnosis("crunch", "c", "/allot/2901/3");
    d.nice = Some(10);
    let niced = JobFacts { nice: 10, niced: true, entitlement: 0.32, usage: 0.31, recent: 0.31, ..job() };
    let owner = with(d.clone(), niced.clone(), OWNER);
    assert_eq!(owner.verdict, Verdict::Niced, "{}", owner.reason);
    assert!(owner.reason.contains("nice 10") && owner.reason.contains("at most 31.6 of currency 2901's 100 base tickets"), "{}", owner.reason);
    // RLIMIT_NICE 0 (floor 20): the owner may not lower it; root may, and is named.
    assert!(owner.help.iter().all(|h| h.starts_with('(')), "{:?}", owner.help);
    assert_eq!(owner.ask, ["root may lower its nice now: sudo renice -n 0 -p 42"]);
    let mut roomy = d.clone();
    roomy.nice_floor = Some(5);
    assert_eq!(with(roomy, niced.clone(), OWNER).help[0], "renice -n 5 -p 42    # as low as your RLIMIT_NICE allows: a larger claim for job 3");
    assert!(with(d.clone(), niced.clone(), 0).help[0].starts_with("renice -n 0 -p 42"));
    let other = with(d, niced, OTHER);
    assert!(other.help.iter().chain(&other.ask).all(|h| !h.contains("renice -n")), "{:?} {:?}", other.help, other.ask);
}

fn funded_job() -> JobFacts {
    JobFacts {
        entitlement: 1.0,
        usage: 0.98,
        recent: 1.0,
        currency_entitlement: 1.0,
        currency_usage: 0.98,
        rivals: vec![Rival { currency: "bob".into(), funding: 100, usage: 1.0 }],
        ..job()
    }
}

/// Two busy threads that get half a CPU each, on a machine with no CPU to spare.
fn two_threads() -> Diagnosis {
    let mut d = diagnosis("make", "c", "/allot/2901/3");
    (d.threads, d.busy_threads, d.cpu_s, d.wait_s, d.cpu_rate, d.wait_ms_per_s, d.equal_share) = (2, 2, 3.0, 3.0, 1.0, 1000.0, 0.5);
    (d.machine.idle_cpus, d.machine.runnable_avg) = (Some(0.0), 4.0);
    d
}

#[test]
fn funding_limits_a_job_at_its_entitlement_in_a_saturated_currency_and_root_is_named() {
    let user = with(two_threads(), funded_job(), OWNER);
    assert_eq!(user.kernel_verdict, Verdict::CpuBoundFairShare);
    assert_eq!(user.verdict, Verdict::Funding, "{}", user.reason);
    assert!(
        user.reason.contains("currency 2901's funding is what limits it") && user.reason.contains("100 of the 200 base tickets"),
        "{}",
        user.reason
    );
    assert!(user.help.is_empty(), "alone in its currency, tickets cannot help: {:?}", user.help);
    assert_eq!(user.ask, ["only root may raise currency 2901's funding: sudo allot fund 2901 200"]);
    assert!(machine_words(&user).ends_with("— busy: every CPU was claimed"), "{}", machine_words(&user));
    let crowded = with(two_threads(), JobFacts { outside: 1.2, ..funded_job() }, OWNER);
    assert!(crowded.reason.contains("entitled to 1.00 CPUs (processes outside allot's jobs take 1.20 of the 2 CPUs)"), "{}", crowded.reason);

    let root = with(two_threads(), funded_job(), 0);
    assert_eq!(root.help, ["allot fund 2901 200    # raise currency 2901's funding: a larger share of the machine"]);
    // A named currency: its config's owners may fund it, and the CLI cannot tell who they are.
    let named = with(two_threads(), JobFacts { currency: "ci".into(), named_currency: true, ..funded_job() }, OWNER);
    assert!(
        named.ask[0].starts_with("root, or an owner the config lists for currency ci, may raise its funding: allot fund ci 200"),
        "{:?}",
        named.ask
    );
    // With other active jobs in its currency, its owner may move the currency's share to it.
    let siblings = with(two_threads(), JobFacts { siblings_active: 2, ..funded_job() }, OWNER);
    assert_eq!(siblings.help, ["allot set 42 -t 200    # more of 2901's share for this job, from its 2 other active jobs"]);
    assert!(with(two_threads(), JobFacts { siblings_active: 2, ..funded_job() }, OTHER).help.is_empty());
}

#[test]
fn funding_is_not_the_verdict_without_rivals_or_below_the_entitlement() {
    assert_ne!(with(two_threads(), JobFacts { rivals: vec![], ..funded_job() }, OWNER).verdict, Verdict::Funding);
    let mut slow = two_threads();
    slow.cpu_rate = 0.4;
    let below = JobFacts { usage: 0.4, recent: 0.4, currency_usage: 0.4, ..funded_job() };
    assert_ne!(with(slow, below, OWNER).verdict, Verdict::Funding);
    // A job that does not wait is not limited by anything.
    let mut content = two_threads();
    content.wait_ms_per_s = 5.0;
    content.wait_s = 0.015;
    assert_ne!(with(content, funded_job(), OWNER).verdict, Verdict::Funding);
}

#[test]
fn without_a_daemon_or_a_job_it_works_as_before_and_says_allot_is_not_managing_it() {
    let mut d = diagnosis("hog", "c", "/");
    d.allot = Managed::NoDaemon { why: "cannot reach the allot daemon".into() };
    advise(&mut d);
    assert_eq!(d.verdict, d.kernel_verdict);
    assert_eq!(d.help[0], "(allot's daemon is not running: the allot commands below need it)");
    assert!(d.help.iter().any(|h| h.starts_with("allot set 42 -t 1000")), "{:?}", d.help);
    assert_eq!(d.ask, ["root may start allot's daemon: sudo allot daemon"]);
    assert!(render(&d).contains("allot: not managing this process: its daemon did not answer (cannot reach the allot daemon)"));

    // In no job: taken from the root cgroup, never from another manager's.
    let mut root_cg = diagnosis("hog", "c", "/");
    root_cg.allot = Managed::NoJob;
    advise(&mut root_cg);
    assert!(sets(&root_cg).iter().any(|h| h.starts_with("allot set 42 -t")));
    assert!(render(&root_cg).contains("allot: not managing this process: it is in no allot job (cgroup /)"));
    let mut service = diagnosis("hog", "c", "/system.slice/x.service");
    service.allot = Managed::NoJob;
    advise(&mut service);
    assert!(sets(&service).is_empty(), "{:?}", service.help);
}

#[test]
fn competitors_are_suggested_for_the_background_only_where_the_asker_may_move_them() {
    let mut d = diagnosis("probe", "c", "/allot/2901/3");
    (d.machine.idle_cpus, d.machine.runnable_avg, d.equal_share) = (Some(0.0), 8.0, 0.25);
    (d.cpu_s, d.wait_s, d.cpu_rate, d.wait_ms_per_s, d.busiest_runnable, d.runtime_ratio) = (0.03, 0.6, 0.01, 200.0, 0.2, Some(0.05));
    let c = |pid, uid, owner: Option<u32>| Competitor {
        pid,
        comm: "hog".into(),
        cpus: 0.5,
        uids: Some([uid; 4]),
        cgroup: Some(if owner.is_some() { "/allot/x".into() } else { "/".into() }),
        job: owner.map(|o| JobRef { id: "5".into(), owner: o, currency: o.to_string() }),
    };
    d.machine.top = vec![c(7, OWNER, Some(OWNER)), c(8, OTHER, Some(OTHER)), c(9, OWNER, Some(OTHER)), c(10, OWNER, None)];
    let mine = with(d.clone(), JobFacts { siblings_active: 1, ..job() }, OWNER);
    assert_eq!(mine.verdict, Verdict::Starved, "{}", mine.reason);
    assert_eq!(
        sets(&mine),
        [
            "allot set 42 -t 1000        # a larger claim inside its currency (tickets)",
            "allot set 7 10 --background   # let the CPU-bound competitors run on idle CPU only"
        ]
    );
    let root = with(d.clone(), job(), 0);
    assert!(root.help.iter().any(|h| h.starts_with("allot set 7 8 9 10 --background")), "{:?}", root.help);
    // Alone in its currency, more tickets would not help it.
    assert!(with(d, job(), OWNER).help.iter().all(|h| !h.contains("-t 1000")));
}

#[test]
fn the_machine_context_agrees_with_the_verdict() {
    let alone = diagnosis("hog", "c", "/");
    let w = machine_words(&alone);
    assert!(w.starts_with("2 CPUs, 0.3 runnable tasks on average (equal share 1.00 CPUs each), 1.7 CPUs idle"), "{w}");
    assert!(w.ends_with("it waited while CPU sat idle: something limits it, not competition"), "{w}");
    let mut d = alone.clone();
    d.throttled_s = Some(2.0);
    let capped = with(d, capped_job(), OWNER);
    assert!(machine_words(&capped).ends_with("the quota, not competition, keeps it off the idle CPU"));
    // A busy machine is called busy next to a starved verdict.
    let mut busy = alone;
    (busy.machine.idle_cpus, busy.machine.runnable_avg, busy.equal_share) = (Some(0.0), 9.0, 0.22);
    (busy.cpu_rate, busy.cpu_s) = (0.05, 0.15);
    advise(&mut busy);
    assert_eq!(busy.verdict, Verdict::Starved);
    assert!(machine_words(&busy).ends_with("busy: more runnable tasks than CPUs"), "{}", machine_words(&busy));
    assert!(!busy.reason.contains("idle"), "{}", busy.reason);
}

#[test]
fn the_machine_is_counted_in_online_cpus() {
    // SAFETY: sysconf has no preconditions.
    let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) } as usize;
    let d = diagnose(std::process::id() as i32, std::time::Duration::from_millis(50)).unwrap();
    assert_eq!(d.machine.ncpu, online);
    assert!(d.machine.idle_cpus.is_some_and(|i| (0.0..=online as f64).contains(&i)), "{:?}", d.machine.idle_cpus);
}

#[test]
fn duration_takes_units() {
    let e = |d: &str| run(WhyArgs { pid: 1, duration: d.into(), json: false }, &mut |_| Managed::NotAsked).unwrap_err().to_string();
    assert_eq!(e("0"), "--duration must be more than 0, got \"0\"");
    assert_eq!(e("2h"), "--duration must be a duration like 5ms, 500us or 0.2s (a bare number is seconds), got \"2h\": unknown unit \"h\"; units are ns, us (or µs), ms, s, min");
    assert_eq!(e("61min"), "--duration must be at most 3600s, got \"61min\"");
}

/// What `allot why --json` prints reads back as the `Diagnosis` it printed (the product's
/// tests read it so): a process in a job with a hard cap, one in no job, one without a
/// daemon, and a memory stall with its culprit.
#[test]
fn the_json_why_prints_reads_back_as_the_diagnosis() {
    let back = |d: &Diagnosis| {
        let printed = serde_json::to_string_pretty(d).unwrap();
        let read: Diagnosis = serde_json::from_str(&printed).unwrap_or_else(|e| panic!("{e}: {printed}"));
        assert_eq!(serde_json::to_string_pretty(&read).unwrap(), printed);
        read
    };
    let base = diagnosis("hog", "other", "/allot/user-2901/j1-u2901");
    let read = back(&with(base.clone(), capped_job(), OWNER));
    assert_eq!(read.allot.job().and_then(|j| j.cap), Some(Cap { cpus: 0.3, hard: true }));
    let mut stalled = base.clone();
    stalled.allot = Managed::NoDaemon { why: "cannot reach the allot daemon".into() };
    stalled.stall.culprit = Some(allot_model::stall::Holder { name: "currency bob".into(), bytes: 1e8, share: Some(5e7), own: false, pids: vec![7] });
    stalled.stall.domain = Some(("/allot".into(), 1 << 28, 1 << 27));
    stalled.verdict = Verdict::MemoryStall;
    assert_eq!(back(&stalled).verdict, Verdict::MemoryStall);
    let mut loose = base;
    loose.allot = Managed::NoJob;
    assert_eq!(back(&loose).allot, Managed::NoJob);
}
