//! `allot why`'s questions to the daemon, answered as allot_measure::why's plain facts
//! (allot-measure does not depend on this crate; this is where the two meet).
//!
//! Which job a process is in: the daemon's own `explain PID`, which it answers for the
//! caller's processes (and root's, or anyone's where `privacy.show_other_users` is set);
//! for another user's process, its cgroup in allot's tree (world-readable
//! /proc/PID/cgroup) matched against `show`'s jobs, then `explain JOB`, which anyone may
//! ask. The job's settings and numbers come from `show`, the daemon's reasons from
//! `explain`: what `allot show` and `allot explain` print, nothing more.

use crate::client;
use crate::proto::{ExplainView, JobView, Request, Response, ShowView, StatusView};
use allot_linux::cgroup::CpuController;
use allot_measure::why::{CurrencyShare, DaemonAnswers, JobFacts, JobRef, Managed, ReasonFact, Rival};
use std::path::Path;

/// The daemon at a socket, asked once for its status and jobs.
pub struct DaemonView<'a> {
    socket: &'a Path,
    seen: Option<Result<Seen, String>>,
}

struct Seen {
    show: ShowView,
    /// allot's tree as this process sees it (None: another mount namespace).
    tree: Option<Box<dyn CpuController>>,
}

impl<'a> DaemonView<'a> {
    /// Asks nothing yet: the first question does.
    pub fn new(socket: &'a Path) -> Self {
        Self { socket, seen: None }
    }

    fn call(&self, req: Request) -> Result<Response, String> {
        client::call(self.socket, &req).map_err(|e| format!("{e:#}"))
    }

    fn seen(&mut self) -> Result<&Seen, String> {
        if self.seen.is_none() {
            self.seen = Some(self.load());
        }
        match self.seen.as_ref() {
            Some(Ok(s)) => Ok(s),
            Some(Err(e)) => Err(e.clone()),
            None => Err("not asked".into()),
        }
    }

    fn load(&self) -> Result<Seen, String> {
        let status = match self.call(Request::Status {})? {
            Response::Status(s) => *s,
            other => return Err(format!("the daemon answered status with {other:?}")),
        };
        let show = match self.call(Request::Show { user: None })? {
            Response::Show(s) => s,
            other => return Err(format!("the daemon answered show with {other:?}")),
        };
        Ok(Seen { show, tree: tree_of(&status) })
    }

    /// The job `pid` is in, by its cgroup in allot's tree (None: in no job, or the tree
    /// is not visible from here).
    fn by_cgroup(&mut self, pid: i32) -> Option<JobView> {
        let seen = self.seen().ok()?;
        let rel = seen.tree.as_ref()?.rel_of(pid).ok()??;
        seen.show.jobs.iter().find(|j| j.cgroup == rel).cloned()
    }

    fn explain(&self, target: String) -> Option<ExplainView> {
        match self.call(Request::Explain { target }) {
            Ok(Response::Explain(e)) => Some(e),
            _ => None,
        }
    }
}

impl DaemonAnswers for DaemonView<'_> {
    fn job_of(&mut self, pid: i32) -> Managed {
        if let Err(why) = self.seen() {
            return Managed::NoDaemon { why };
        }
        let (job, explain) = match self.explain(pid.to_string()) {
            // A login-session process (systemd hosts): judged against its user's sessions'
            // entitlement, which `explain` reports.
            Some(e) if e.reasons.iter().any(|r| r.state == "session") => {
                use std::os::unix::fs::MetadataExt;
                let uid = std::fs::metadata(format!("/proc/{pid}")).map_or(u32::MAX, |m| m.uid());
                return match self.seen() {
                    Ok(s) => Managed::Job(Box::new(session_facts(&s.show, &e, uid))),
                    Err(why) => Managed::NoDaemon { why },
                };
            }
            Some(e) => match self.seen().ok().and_then(|s| s.show.jobs.iter().find(|j| j.id == e.job).cloned()) {
                Some(j) => (j, Some(e)),
                // A job made after `show` was read: read it again.
                None => {
                    self.seen = None;
                    match self.seen().ok().and_then(|s| s.show.jobs.iter().find(|j| j.id == e.job).cloned()) {
                        Some(j) => (j, Some(e)),
                        None => return Managed::NoJob,
                    }
                }
            },
            None => match self.by_cgroup(pid) {
                Some(j) => {
                    let e = self.explain(j.id.clone());
                    (j, e)
                }
                None => return Managed::NoJob,
            },
        };
        // This process is in a job too when the daemon places its asker's processes: it
        // is not a rival, nor a sibling to take tickets from.
        let me = self.by_cgroup(std::process::id() as i32).map(|j| j.id);
        match self.seen() {
            Ok(s) => Managed::Job(Box::new(facts(&s.show, &job, explain.as_ref(), me.as_deref()))),
            Err(why) => Managed::NoDaemon { why },
        }
    }

    fn job_ref(&mut self, pid: i32) -> Option<JobRef> {
        self.by_cgroup(pid).map(|j| JobRef { id: j.id, owner: j.uid, currency: j.currency })
    }

    fn memory_shares(&mut self) -> Vec<CurrencyShare> {
        self.seen().map(|s| memory_shares(&s.show)).unwrap_or_default()
    }
}

/// Each currency's memory against its share, as `show` reports it (none where the daemon
/// does not share memory).
pub fn memory_shares(show: &ShowView) -> Vec<CurrencyShare> {
    show.currencies
        .iter()
        .filter_map(|c| c.memory.as_ref().map(|m| CurrencyShare { currency: c.name.clone(), usage: m.usage, protection: m.protection }))
        .collect()
}

/// allot's tree where the daemon says it is, if this process sees it there.
fn tree_of(status: &StatusView) -> Option<Box<dyn CpuController>> {
    let root = Path::new(&status.cgroup_root);
    let name = root.file_name()?.to_str()?;
    allot_linux::cgroup::detect(name).ok().filter(|t| t.root() == root)
}

/// A job's facts from `show` (its currency's active jobs and the other active currencies
/// too) and `explain`. `me`: the job `why` itself runs in, which is neither a sibling nor
/// makes its currency a rival.
pub fn facts(show: &ShowView, j: &JobView, e: Option<&ExplainView>, me: Option<&str>) -> JobFacts {
    let active = |x: &&JobView| x.active && Some(x.id.as_str()) != me;
    let active_in_currency: Vec<&JobView> = show.jobs.iter().filter(|x| x.currency == j.currency && x.active).collect();
    let currency = show.currencies.iter().find(|c| c.name == j.currency);
    let mut currency_entitlement = allot_model::usage::cpus_used(active_in_currency.iter().map(|x| x.entitlement).sum());
    if !j.active {
        currency_entitlement += j.entitlement;
    }
    JobFacts {
        job: j.id.clone(),
        owner: j.uid,
        owner_name: j.user.clone(),
        currency: j.currency.clone(),
        named_currency: currency.is_some_and(|c| c.kind == "named"),
        tickets: j.tickets,
        funding: j.funding,
        entitlement: j.entitlement,
        usage: j.usage,
        recent: e.map_or(j.recent, |e| e.window.max(e.last)).max(j.recent),
        cap: if j.background { None } else { j.cap.as_deref().and_then(|c| c.parse().ok()) },
        background: j.background,
        held: j.held,
        nice: j.nice,
        niced: j.niced,
        quota: j.quota,
        currency_entitlement,
        currency_usage: currency.map_or(j.usage, |c| c.usage),
        siblings_active: active_in_currency.iter().filter(|x| x.id != j.id && active(x)).count(),
        rivals: show
            .currencies
            .iter()
            .filter(|c| c.name != j.currency && show.jobs.iter().filter(active).any(|x| x.currency == c.name))
            .map(|c| Rival { currency: c.name.clone(), funding: c.funding, usage: c.usage })
            .collect(),
        ncpu: show.ncpu,
        outside: show.outside,
        explain: e
            .map(|e| e.reasons.iter().map(|r| ReasonFact { state: r.state.clone(), on: r.on, because: r.because.clone() }).collect())
            .unwrap_or_default(),
    }
}

/// A login-session process's facts: its user's sessions are one claimant of their
/// currency (allot_model::session), so its entitlement is theirs, beside the user's jobs.
pub fn session_facts(show: &ShowView, e: &ExplainView, uid: u32) -> JobFacts {
    let in_currency: Vec<&JobView> = show.jobs.iter().filter(|x| x.currency == e.currency && x.active).collect();
    let currency = show.currencies.iter().find(|c| c.name == e.currency);
    JobFacts {
        job: e.job.clone(),
        owner: uid,
        owner_name: allot_linux::process::procfs::user_name(uid).unwrap_or_else(|| uid.to_string()),
        currency: e.currency.clone(),
        named_currency: false,
        tickets: e.weight,
        funding: currency.map_or(allot_model::scope::SYSTEMD_DEFAULT_WEIGHT, |c| c.funding),
        entitlement: e.entitlement,
        usage: e.window,
        recent: e.window.max(e.last),
        cap: None,
        background: e.reasons.iter().any(|r| r.state == "background" && r.on),
        held: false,
        nice: 0,
        niced: false,
        quota: None,
        currency_entitlement: allot_model::usage::cpus_used(e.entitlement + in_currency.iter().map(|x| x.entitlement).sum::<f64>()),
        currency_usage: currency.map_or(0.0, |c| c.usage) + e.window,
        siblings_active: in_currency.len(),
        rivals: show
            .currencies
            .iter()
            .filter(|c| c.name != e.currency && show.jobs.iter().any(|x| x.active && x.currency == c.name))
            .map(|c| Rival { currency: c.name.clone(), funding: c.funding, usage: c.usage })
            .collect(),
        ncpu: show.ncpu,
        outside: show.outside,
        explain: e.reasons.iter().map(|r| ReasonFact { state: r.state.clone(), on: r.on, because: r.because.clone() }).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::tests::{job, show};
    use crate::proto::{CurrencyView, Reason};

    #[test]
    fn facts_read_the_job_its_currency_and_the_rivals() {
        let mut s = show();
        let mut capped = job("2", None);
        (capped.cap, capped.quota, capped.entitlement, capped.usage, capped.recent) = (Some("0.3!".into()), Some(0.3), 0.25, 0.3, 0.2);
        let idle = JobView { active: false, ..job("3", None) };
        let bobs = JobView { uid: 1001, user: "bob".into(), currency: "bob".into(), ..job("6", None) };
        s.jobs.extend([capped.clone(), idle, bobs]);
        s.currencies[0].usage = 0.8;
        s.currencies.push(CurrencyView {
            name: "bob".into(),
            kind: "user".into(),
            funding: 200,
            cap: None,
            weight: 200,
            jobs: 1,
            active: 1,
            usage: 1.0,
            memory: None,
        });
        s.currencies.push(CurrencyView {
            name: "ci".into(),
            kind: "named".into(),
            funding: 300,
            cap: None,
            weight: 300,
            jobs: 0,
            active: 0,
            usage: 0.0,
            memory: None,
        });
        let e = ExplainView {
            job: "2".into(),
            currency: "alice".into(),
            entitlement: 0.25,
            window: 0.31,
            last: 0.29,
            threshold: 0.1,
            weight: 300,
            quota: Some(0.3),
            reasons: vec![Reason { state: "cap".into(), on: true, since_s: None, because: "hard cap 0.3!".into() }],
        };
        let f = facts(&s, &capped, Some(&e), None);
        assert_eq!((f.job.as_str(), f.owner, f.owner_name.as_str(), f.currency.as_str(), f.named_currency), ("2", 1000, "alice", "alice", false));
        assert_eq!(f.cap, Some("0.3!".parse().unwrap()));
        assert_eq!((f.quota, f.recent, f.usage), (Some(0.3), 0.31, 0.3));
        // Job 1 (0.75) and this one (0.25) are active in alice; job 3 is idle.
        assert_eq!((f.currency_entitlement, f.currency_usage, f.siblings_active), (1.0, 0.8, 1));
        assert_eq!(f.rivals, [Rival { currency: "bob".into(), funding: 200, usage: 1.0 }]);
        assert_eq!(f.explain, [ReasonFact { state: "cap".into(), on: true, because: "hard cap 0.3!".into() }]);
        // Background is its own flag, not a cap of 0.
        let bg = facts(&s, &JobView { background: true, cap: Some("0".into()), ..job("4", None) }, None, None);
        assert!(bg.background && bg.cap.is_none() && bg.explain.is_empty());
        let named = facts(&s, &JobView { currency: "ci".into(), ..job("5", None) }, None, None);
        assert!(named.named_currency && named.rivals.len() == 2);
        // why's own job is neither a sibling (job 1 in alice) nor a rival (job 6, bob's only).
        assert_eq!(facts(&s, &capped, None, Some("1")).siblings_active, 0);
        assert_eq!(facts(&s, &capped, None, Some("6")).rivals, []);
    }

    #[test]
    fn a_session_process_is_judged_against_its_users_sessions_share() {
        let s = show();
        let e = ExplainView {
            job: "session-4.scope (pid 300)".into(),
            currency: "alice".into(),
            entitlement: 0.5,
            window: 0.1,
            last: 0.12,
            threshold: 0.25,
            weight: 100,
            quota: None,
            reasons: vec![
                Reason { state: "session".into(), on: true, since_s: None, because: "in session-4.scope".into() },
                Reason { state: "background".into(), on: true, since_s: None, because: "rule bg".into() },
            ],
        };
        let f = session_facts(&s, &e, 1000);
        assert_eq!((f.job.as_str(), f.owner, f.entitlement, f.usage, f.recent), ("session-4.scope (pid 300)", 1000, 0.5, 0.1, 0.12));
        assert!(f.background && f.cap.is_none() && f.explain.len() == 2);
        // alice's active job 1 (0.75) and her sessions' 0.5: the currency's share.
        assert_eq!((f.currency_entitlement, f.siblings_active), (1.25, 1));
    }

    #[test]
    fn memory_shares_are_the_currencies_that_carry_memory() {
        let mut s = show();
        assert_eq!(memory_shares(&s), []);
        let mut c = s.currencies[0].clone();
        c.memory = Some(crate::memory_view::CurrencyMemory {
            usage: 300 << 20,
            protection: 128 << 20,
            available: 512 << 20,
            limit: None,
            cap: None,
            oom_score_adj: None,
            oom_kills: 0,
            pressure: Default::default(),
        });
        c.name = "bob".into();
        s.currencies.push(c);
        assert_eq!(memory_shares(&s), [CurrencyShare { currency: "bob".into(), usage: 300 << 20, protection: 128 << 20 }]);
    }

    #[test]
    fn no_daemon_is_said_with_the_reason() {
        let dir = std::env::temp_dir().join(format!("allot-why-unit-{}", std::process::id()));
        let sock = dir.join("none.sock");
        let mut d = DaemonView::new(&sock);
        match d.job_of(std::process::id() as i32) {
            Managed::NoDaemon { why } => assert!(why.contains("cannot reach the allot daemon") && why.contains("none.sock"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(d.job_ref(1), None);
    }
}
