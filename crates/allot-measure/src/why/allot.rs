//! What allot's daemon knows about a process, as `why` needs it, and what allot holds the
//! process by. The `allot` binary fills [`Managed`] from the daemon's `show` and `explain`
//! replies (this crate does not speak the protocol); [`held_by`] is pure.

use super::{Diagnosis, Verdict, STARVED_WAIT_MS_PER_S};
use allot_model::nice::base_ticket_threshold;
use allot_model::Cap;

/// What allot's daemon says about a process.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Managed {
    /// The daemon was not asked (allot-measure on its own).
    NotAsked,
    /// The daemon could not be reached or did not answer.
    NoDaemon {
        /// Why, in one sentence.
        why: String,
    },
    /// The daemon runs, but the process is in none of its jobs.
    NoJob,
    /// The process is in an allot job.
    Job(Box<JobFacts>),
}

impl Managed {
    /// The job, if the process is in one.
    pub fn job(&self) -> Option<&JobFacts> {
        match self {
            Managed::Job(j) => Some(j),
            _ => None,
        }
    }
}

/// A job named by id, with its owner: enough to know who may change it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct JobRef {
    /// As `allot show` names it ("3", "alice/default").
    pub id: String,
    /// Its owner's uid.
    pub owner: u32,
    /// Its currency.
    pub currency: String,
}

/// Another currency with active jobs: what the process's currency shares the machine with.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Rival {
    /// Its name.
    pub currency: String,
    /// Its funding.
    pub funding: u32,
    /// Its jobs' usage rate, CPUs.
    pub usage: f64,
}

/// One of `allot explain`'s reasons.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ReasonFact {
    /// "boost", "held", "cap", "nice", "background", "focus".
    pub state: String,
    /// Whether it holds now.
    pub on: bool,
    /// The daemon's words, with its numbers.
    pub because: String,
}

/// A process's allot job as the daemon reports it (`show` and `explain`), at the end of
/// the window. CPUs throughout.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct JobFacts {
    /// The job, as `allot show` names it.
    pub job: String,
    /// Its owner's uid.
    pub owner: u32,
    /// Its owner's name (or the uid).
    pub owner_name: String,
    /// Its currency.
    pub currency: String,
    /// A named currency (from the config), not a user's own.
    pub named_currency: bool,
    /// Its tickets.
    pub tickets: u32,
    /// Its currency's funding.
    pub funding: u32,
    /// What it is entitled to now among the active claimants.
    pub entitlement: f64,
    /// Its smoothed usage rate.
    pub usage: f64,
    /// Its usage over the daemon's short window (boost window, and the last tick if
    /// larger): it follows a change within a second, where `usage` takes several.
    pub recent: f64,
    /// Its cap as set (None: uncapped; background is `background`, not a cap here).
    pub cap: Option<Cap>,
    /// In the background class.
    pub background: bool,
    /// A soft cap is held now.
    pub held: bool,
    /// Its processes' lowest nice.
    pub nice: i32,
    /// Nice emulation lowers (or raises) its weight now.
    pub niced: bool,
    /// The quota in force now (a hard cap or a held soft cap).
    pub quota: Option<f64>,
    /// Its currency's active jobs' entitlements, summed: the currency's share of the machine.
    pub currency_entitlement: f64,
    /// Its currency's jobs' usage rate, summed.
    pub currency_usage: f64,
    /// Other active jobs in its currency (its tickets weigh against theirs).
    pub siblings_active: usize,
    /// The other currencies with active jobs.
    pub rivals: Vec<Rival>,
    /// CPUs the daemon counts.
    pub ncpu: usize,
    /// CPUs used by processes outside allot's tree.
    pub outside: f64,
    /// `allot explain`'s reasons (empty if the daemon had not planned the job yet).
    pub explain: Vec<ReasonFact>,
}

/// What the `allot` binary answers about processes, from the daemon.
pub trait DaemonAnswers {
    /// The job `pid` is in, as the daemon reports it now.
    fn job_of(&mut self, pid: i32) -> Managed;
    /// Only the job's id and owner (for the competitors): an answer may skip `explain`.
    fn job_ref(&mut self, pid: i32) -> Option<JobRef> {
        self.job_of(pid).job().map(|j| JobRef { id: j.job.clone(), owner: j.owner, currency: j.currency.clone() })
    }
    /// The currencies' memory against their share, where the daemon shares memory.
    fn memory_shares(&mut self) -> Vec<super::CurrencyShare> {
        vec![]
    }
}

impl<F: FnMut(i32) -> Managed> DaemonAnswers for F {
    fn job_of(&mut self, pid: i32) -> Managed {
        self(pid)
    }
}

// When allot holds a process. Each is a judgement. The job's use is what it uses now: the
// larger of the daemon's recent usage (its last second or so) and this window's measured
// use of the process; the smoothed usage rate lags a change by seconds (a job that was at
// its cap a while ago and is now crowded out would still look capped).
/// The job used at least this share of its cap: it is at the cap (the kernel's quota
/// period and the sampling leave it a little under).
pub const AT_CAP: f64 = 0.85;
/// Its cgroup was throttled at least this share of the window: the quota bites.
pub const THROTTLED_SHARE: f64 = 0.1;
/// The job used at least this share of its entitlement: it gets what allot gives it.
pub const AT_ENTITLEMENT: f64 = 0.8;
/// Its currency's jobs used at least this share of the currency's entitlement: the
/// currency's share is used up.
pub const SATURATED: f64 = 0.8;

/// What allot holds the process by, with the reason in words: the job's own cap (hard, or
/// soft and held), the background class, nice emulation, or its currency's funding — in
/// that order, the first that holds. None: allot is not what holds it (it sleeps, does
/// not wait, or gets less than allot gives it because of something else).
pub fn held_by(d: &Diagnosis) -> Option<(Verdict, String)> {
    let j = d.allot.job()?;
    // Not waiting for the CPU: allot's CPU settings are not what holds it.
    if matches!(d.kernel_verdict, Verdict::Sleeping | Verdict::MemoryStall | Verdict::IoStall) {
        return None;
    }
    let wants = d.wait_ms_per_s >= STARVED_WAIT_MS_PER_S;
    let throttled = d.throttled_s.map_or(0.0, |t| (t / d.window_s.max(1e-9)).min(1.0));
    let used = j.recent.max(d.cpu_rate);
    let got = format!("it got {:.2} CPUs and waited {:.0} ms per second", d.cpu_rate, d.wait_ms_per_s);
    if j.background && wants {
        return Some((
            Verdict::Background,
            format!("job {} is in the background class: it runs only on CPU nothing else wants, by design; {got}", j.job),
        ));
    }
    let cap = j.cap.filter(|c| c.hard || j.held).filter(|c| c.cpus > 0.0);
    if let Some(c) = cap {
        if throttled >= THROTTLED_SHARE || (wants && used >= AT_CAP * c.cpus) {
            let kind = if c.hard {
                "its own hard cap, which holds always, even with CPU idle (cpu.max)"
            } else {
                "its own soft cap, held while other jobs want the CPU (written as cpu.max until CPU sits idle)"
            };
            let stopped = if throttled > 0.0 { format!(", the quota stopped it {:.0}% of the window", throttled * 100.0) } else { String::new() };
            return Some((
                Verdict::Capped,
                format!(
                    "job {} is held by {kind}: cap {c}; the job used {used:.2} CPUs{stopped}, and it waited {:.0} ms per second",
                    j.job, d.wait_ms_per_s
                ),
            ));
        }
    }
    let at_entitlement = wants && j.entitlement > 0.0 && used >= AT_ENTITLEMENT * j.entitlement;
    if j.niced && j.nice > 0 && at_entitlement {
        return Some((
            Verdict::Niced,
            format!(
                "its nice {} lowers job {}'s claim under nice emulation: it holds at most {:.1} of currency {}'s {} base tickets, so it is entitled to {:.2} CPUs and used {used:.2}; {got}",
                j.nice,
                j.job,
                base_ticket_threshold(j.nice),
                j.currency,
                j.funding,
                j.entitlement
            ),
        ));
    }
    let currency_used = j.currency_usage.max(j.currency_usage - j.usage + used);
    if at_entitlement && !j.rivals.is_empty() && currency_used >= SATURATED * j.currency_entitlement {
        let total: u32 = j.funding + j.rivals.iter().map(|r| r.funding).sum::<u32>();
        let others: Vec<String> = j.rivals.iter().map(|r| format!("{} {}", r.currency, r.funding)).collect();
        let outside =
            if j.outside >= 0.5 { format!(" (processes outside allot's jobs take {:.2} of the {} CPUs)", j.outside, j.ncpu) } else { String::new() };
        return Some((
            Verdict::Funding,
            format!(
                "currency {}'s funding is what limits it: {} holds {} of the {total} base tickets of the active currencies (others: {}), so its jobs are entitled to {:.2} CPUs{outside} and use {currency_used:.2}, and job {} uses {used:.2} against its entitlement of {:.2}; {got}",
                j.currency,
                j.currency,
                j.funding,
                others.join(", "),
                j.currency_entitlement,
                j.job,
                j.entitlement
            ),
        ));
    }
    None
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A job of uid 2901 in its own currency, alone, uncapped, entitled to 1 CPU.
    pub fn job() -> JobFacts {
        JobFacts {
            job: "3".into(),
            owner: 2901,
            owner_name: "2901".into(),
            currency: "2901".into(),
            named_currency: false,
            tickets: 100,
            funding: 100,
            entitlement: 1.0,
            usage: 1.0,
            recent: 1.0,
            cap: None,
            background: false,
            held: false,
            nice: 0,
            niced: false,
            quota: None,
            currency_entitlement: 1.0,
            currency_usage: 1.0,
            siblings_active: 0,
            rivals: vec![],
            ncpu: 2,
            outside: 0.0,
            explain: vec![],
        }
    }
}
