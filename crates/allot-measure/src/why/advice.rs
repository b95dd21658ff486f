//! Who may do what, and the suggestions. `help` holds only commands the one asking may
//! run; `ask` says what only someone else may do, and who. The rules are docs/trust.md's,
//! as far as the CLI can see them:
//!
//! - `allot set PID`: root; or a user every one of whose uids (real, effective, saved,
//!   filesystem) the process has, and who owns its job if it is in one. A process in no
//!   job is taken only from a cgroup allot places from: the root cgroup by default (an
//!   admin may list more, which the CLI cannot see, so it suggests none elsewhere).
//! - `allot fund CURRENCY N`: root; for a named currency also the owners its config lists
//!   (the daemon does not tell the CLI who they are, so they are named, not guessed).
//! - `renice`: lowering a nice is root's, or the owner's down to 20 − RLIMIT_NICE.

use super::*;
use allot_model::Cap;

/// Gives the verdict, its reason and the suggestions for `d` as it stands: the kernel's
/// verdict first, then what allot holds the process by (if its daemon says), then what
/// `d.asker` may do about it.
pub fn advise(d: &mut Diagnosis) {
    decide(&mut d.stall);
    let (kv, kr) = kernel_verdict(d);
    d.kernel_verdict = kv;
    d.kernel_reason = kr.clone();
    let (verdict, reason) = held_by(d).unwrap_or((kv, kr));
    d.verdict = verdict;
    d.reason = reason;
    let (help, ask) = suggestions(d);
    d.help = help;
    d.ask = ask;
}

/// May `asker` run `allot set` on a process with these uids, in a job of `owner` (None: in
/// no job, in `cgroup`)?
pub fn may_set(asker: u32, uids: Option<[u32; 4]>, owner: Option<u32>, cgroup: Option<&str>) -> bool {
    let wholly = asker == 0 || uids.is_some_and(|u| u.iter().all(|&x| x == asker));
    let job_ok = asker == 0 || owner.is_none_or(|o| o == asker);
    let placeable = owner.is_some() || cgroup == Some("/");
    wholly && job_ok && placeable
}

/// May `asker` fund a currency: Some(true) root; Some(false) a user's currency (root's
/// alone); None a named currency (its config's owners may, and the CLI cannot see them).
pub fn may_fund(asker: u32, named: bool) -> Option<bool> {
    match (asker == 0, named) {
        (true, _) => Some(true),
        (false, false) => Some(false),
        (false, true) => None,
    }
}

/// A cap twice as large, up to the machine's CPUs (None: it is at the machine already).
fn higher(c: Cap, ncpu: usize) -> Option<Cap> {
    let cpus = (c.cpus * 2.0).min(ncpu as f64);
    (cpus > c.cpus + 0.005).then_some(Cap { cpus, hard: c.hard })
}

fn owner_words(j: &JobFacts) -> String {
    if j.owner_name == j.owner.to_string() {
        format!("uid {}", j.owner)
    } else {
        format!("{} (uid {})", j.owner_name, j.owner)
    }
}

fn suggestions(d: &Diagnosis) -> (Vec<String>, Vec<String>) {
    let pid = d.pid;
    let job = d.allot.job();
    let mine = may_set(d.asker, d.uids, job.map(|j| j.owner), d.cgroup.as_deref());
    let (mut help, mut ask) = (vec![], vec![]);
    match (d.verdict, job) {
        (Verdict::Capped, Some(j)) => {
            let c = j.cap.unwrap_or(Cap::BACKGROUND);
            if mine {
                help.push(format!("allot set {pid} --cap none    # lift job {}'s cap {c}", j.job));
                if let Some(h) = higher(c, j.ncpu) {
                    help.push(format!("allot set {pid} --cap {h}    # or a higher cap"));
                }
            } else {
                ask.push(format!("job {}'s cap is its owner's to change: only {} or root may", j.job, owner_words(j)));
            }
        }
        (Verdict::Background, Some(j)) => {
            if mine {
                help.push(format!("allot set {pid} --foreground    # compete for CPU with its tickets again"));
            } else {
                ask.push(format!(
                    "job {} is in the background by its owner's choice: only {} or root may bring it to the foreground",
                    j.job,
                    owner_words(j)
                ));
            }
        }
        (Verdict::Niced, Some(j)) => renice(d, j, &mut help, &mut ask),
        (Verdict::Funding, Some(j)) => {
            if mine && j.siblings_active > 0 {
                help.push(format!(
                    "allot set {pid} -t {}    # more of {}'s share for this job, from its {} other active jobs",
                    (j.tickets * 2).min(10_000),
                    j.currency,
                    j.siblings_active
                ));
            }
            let n = (j.funding * 2).min(10_000);
            match may_fund(d.asker, j.named_currency) {
                Some(true) => {
                    help.push(format!("allot fund {} {n}    # raise currency {}'s funding: a larger share of the machine", j.currency, j.currency))
                }
                Some(false) => ask.push(format!("only root may raise currency {}'s funding: sudo allot fund {} {n}", j.currency, j.currency)),
                None => ask.push(format!(
                    "root, or an owner the config lists for currency {}, may raise its funding: allot fund {} {n} (root: sudo allot fund {} {n})",
                    j.currency, j.currency, j.currency
                )),
            }
        }
        (Verdict::Starved, _) => {
            if mine && job.is_none_or(|j| j.siblings_active > 0) {
                help.push(format!("allot set {pid} -t 1000        # a larger claim inside its currency (tickets)"));
            }
            let hogs: Vec<String> = d
                .machine
                .top
                .iter()
                .filter(|c| may_set(d.asker, c.uids, c.job.as_ref().map(|j| j.owner), c.cgroup.as_deref()))
                .map(|c| c.pid.to_string())
                .collect();
            if !hogs.is_empty() {
                help.push(format!("allot set {} --background   # let the CPU-bound competitors run on idle CPU only", hogs.join(" ")));
            }
            help.push("allot run --background -- CMD   # start your batch work in the background from now on".into());
        }
        (Verdict::CpuBoundFairShare, _) => {
            if mine && job.is_none_or(|j| j.siblings_active > 0) {
                help.push(format!("allot set {pid} -t 300          # to give it more than an equal share (tickets)"));
            }
            if mine {
                help.push(format!("allot set {pid} --background    # or, if it is batch work, to let others go first"));
            }
        }
        (Verdict::Throttled, _) => help.push(format!(
            "(its cgroup {} has a CPU quota (cpu.max) that allot did not set: whoever manages that cgroup does, e.g. systemd's CPUQuota=)",
            allot_report::for_terminal(d.cgroup.as_deref().unwrap_or("?"))
        )),
        (Verdict::MemoryStall | Verdict::IoStall, _) => stalled(d, &mut help, &mut ask),
        _ => help.push("(no scheduling change will help: look at what it blocks on — I/O, locks, timers)".into()),
    }
    if let Managed::NoDaemon { .. } = d.allot {
        if help.iter().any(|h| h.starts_with("allot ")) {
            help.insert(0, "(allot's daemon is not running: the allot commands below need it)".into());
            if d.asker == 0 {
                help.push("allot daemon    # start allot's daemon (or its service)".into());
            } else {
                ask.push("root may start allot's daemon: sudo allot daemon".into());
            }
        }
    }
    (help, ask)
}

/// Nice emulation: the process's nice is what lowers its job's claim. Lowering a nice is
/// root's, or the owner's within the process's RLIMIT_NICE (setpriority(2)).
fn renice(d: &Diagnosis, j: &JobFacts, help: &mut Vec<String>, ask: &mut Vec<String>) {
    let pid = d.pid;
    let owner = d.uids.is_some_and(|u| u.iter().all(|&x| x == d.asker));
    if d.asker == 0 {
        help.push(format!("renice -n 0 -p {pid}    # nice 0: job {}'s full claim in its currency again", j.job));
    } else if owner {
        match d.nice_floor {
            Some(f) if f < j.nice => {
                let to = f.max(0);
                help.push(format!("renice -n {to} -p {pid}    # as low as your RLIMIT_NICE allows: a larger claim for job {}", j.job));
            }
            f => {
                help.push(format!(
                    "(you may not lower its nice below {}{}: restart it without nice to give job {} its full claim)",
                    j.nice,
                    f.map(|f| format!(" (RLIMIT_NICE allows nice {f} and up)")).unwrap_or_default(),
                    j.job
                ));
                ask.push(format!("root may lower its nice now: sudo renice -n 0 -p {pid}"));
            }
        }
    } else {
        ask.push(format!("its nice is its owner's to change: only {} or root may renice it", owner_words(j)));
    }
}

/// A stall on memory or I/O: no CPU setting helps. What would: the culprit's own use
/// shrinking (its owner's, or root's), or more memory for the stalled process's currency
/// (root's: its funding is its memory share too).
fn stalled(d: &Diagnosis, help: &mut Vec<String>, ask: &mut Vec<String>) {
    let memory = d.verdict == Verdict::MemoryStall;
    help.push(format!("(no CPU setting will help: it waits for {})", if memory { "memory" } else { "its disk" }));
    let Some(c) = &d.stall.culprit else { return };
    let pids: Vec<String> = c.pids.iter().take(3).map(|p| p.to_string()).collect();
    if c.own {
        help.push(format!(
            "(its own {} {}{}: fewer or smaller processes there would leave it {})",
            c.name,
            if c.share.is_some() { "uses more than its memory share" } else { "uses the most" },
            if pids.is_empty() { String::new() } else { format!(" (pid {})", pids.join(", ")) },
            if memory { "its cache" } else { "the disk" }
        ));
        return;
    }
    let what = if memory { "memory" } else { "I/O" };
    ask.push(format!(
        "{} causes it: its owner, or root, may stop or shrink its {what} use{}",
        c.name,
        if pids.is_empty() { String::new() } else { format!(" (pid {})", pids.join(", ")) }
    ));
    if let (true, Some(j)) = (memory && !d.stall.shares.is_empty(), d.allot.job()) {
        let n = (j.funding * 2).min(10_000);
        match may_fund(d.asker, j.named_currency) {
            Some(true) => help.push(format!("allot fund {} {n}    # a larger share of memory (and CPU) for currency {}", j.currency, j.currency)),
            _ => ask.push(format!("root may give currency {} a larger share of memory (and CPU): sudo allot fund {} {n}", j.currency, j.currency)),
        }
    }
}
