//! Every request the daemon serves. Each checks the caller (trust.rs) and every value
//! into a typed [`Change`] before anything is changed; one [`Daemon::commit`]
//! (requests/change.rs) applies it, all of it or none: kernel moves first, with an undo
//! log; then the desired state, saved; then the plan, applied at once.

mod change;
#[cfg(test)]
mod change_tests;

use change::{Change, CurrencyChange, JobChange, Step};

use super::core::Daemon;
use super::registry::{CurrencyId, JobId, JobSpec};
use super::trust::{Peer, Place, Target};
use crate::proto::{CapChange, Changed, FundingView, JobMade, MemChange, Pid, Pids, Refusal, Request, Response};
use allot_model::memory::MemCap;
use allot_model::{Cap, Funding, Tickets};

type R<T> = Result<T, Refusal>;

impl Daemon {
    /// Serves one request from `peer`. Every refusal changes nothing.
    pub fn handle(&mut self, req: Request, peer: &Peer) -> R<Response> {
        self.counters_mut().requests += 1;
        // Every request ends the audit budgets' past minutes (their summaries written).
        self.serving_mut().audit_mut().flush_now();
        // The request budget was taken in the connection's thread (server.rs).
        let excluded = self.placement().excluded_why(peer.uid).map(String::from);
        let key = super::limits::bucket(peer.uid, excluded.is_some());
        if !super::audit::changes_something(&req) {
            return self.dispatch(req, peer);
        }
        let before = self.desired().clone();
        let request = super::audit::describe(&req);
        // A uid that is no login user's (a subordinate uid: a rootless container's process)
        // changes nothing: each would otherwise be a currency and a job budget of its own.
        let r = match excluded.filter(|_| peer.uid != 0) {
            Some(why) => Err(Refusal::not_permitted(format!(
                "uid {} is not a login user's ({why}): allot makes changes only for login users and root",
                peer.uid
            ))),
            None => self.dispatch(req, peer),
        };
        let (changes, touched) = super::audit::diff(&before, self.desired(), |c| self.currency_name(c));
        let mut owners: Vec<u32> = touched.iter().map(|j| j.owner).collect();
        // A user's own currency's funding and cap are their business too.
        let funded = self.desired().funding.keys().filter(|c| before.funding.get(*c) != self.desired().funding.get(*c));
        let capped = self.desired().caps.keys().filter(|c| before.caps.get(*c) != self.desired().caps.get(*c));
        owners.extend(funded.chain(capped).filter_map(|c| match c {
            CurrencyId::User(u) => Some(*u),
            CurrencyId::Named(_) => None,
        }));
        owners.sort();
        owners.dedup();
        let rec = crate::proto::AuditRecord {
            time: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64()),
            uid: peer.uid,
            pid: peer.pid,
            request,
            refused: r.as_ref().err().map(|e| e.message.clone()),
            changes,
            jobs: touched.iter().map(|j| self.show_id(j)).collect(),
            owners,
        };
        self.serving_mut().audit_mut().record_as(key, rec);
        r
    }

    fn dispatch(&mut self, req: Request, peer: &Peer) -> R<Response> {
        match req {
            Request::Status {} => Ok(Response::Status(Box::new(self.status()))),
            Request::Show { user } => self.show(peer, user.as_deref()).map(Response::Show).map_err(Refusal::not_found),
            Request::Run { tickets, currency, cap, background, force, mem, oom_group } => {
                self.run(peer, tickets, currency, cap, background, force, (mem, oom_group))
            }
            Request::Set { pids, tickets, cap, background, force, mem, oom_group } => {
                self.set(peer, pids, tickets, cap, background, force, (mem, oom_group))
            }
            Request::Fund { currency, funding, cap } => self.fund(peer, currency, funding, cap),
            Request::Focus { pid, on } => self.focus(peer, pid, on),
            Request::Move { pid, currency, force } => self.move_pid(peer, pid, &currency, force),
            Request::Log { user, job, limit } => self.log(peer, user.as_deref(), job.as_deref(), limit).map_err(Refusal::not_found),
            Request::Explain { target } => self.explain(peer, &target),
            Request::RulesTest { pid } => self.rules_test(peer, pid),
        }
    }

    /// A job's cap, decoded: within this machine's CPUs (background always fits).
    fn check_cap(&self, c: Cap) -> R<Cap> {
        c.within(&c.to_string(), self.ncpu()).map_err(|e| Refusal::invalid(e.to_string()))?;
        Ok(c)
    }

    pub(super) fn check_job_limit(&self, uid: u32) -> R<()> {
        let n = self.desired().jobs.values().filter(|j| j.owner == uid && matches!(j.id, JobId::Numbered(_))).count();
        if uid != 0 && n >= self.cfg().limits.jobs_per_user {
            return Err(Refusal::limit(format!(
                "uid {uid} has {n} jobs, the limit (limits.jobs_per_user = {}); let some finish or ask the admin to raise it",
                self.cfg().limits.jobs_per_user
            )));
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn run(
        &mut self,
        peer: &Peer,
        tickets: Option<Tickets>,
        currency: Option<String>,
        cap: Option<Cap>,
        background: bool,
        force: bool,
        (mem, oom_group): (Option<MemCap>, bool),
    ) -> R<Response> {
        if mem.is_some() {
            self.check_job_mem()?;
        }
        if oom_group {
            self.check_oom_group()?;
        }
        let tickets = tickets.unwrap_or_default();
        let cap_bg = cap.is_some_and(|c| c.is_background());
        let cap = cap.filter(|c| !c.is_background()).map(|c| self.check_cap(c)).transpose()?;
        if background && cap.is_some() {
            return Err(Refusal::invalid("--background and a cap contradict each other: background is soft cap 0 (idle CPU only); give one of them"));
        }
        let cur = match currency.as_deref() {
            Some(c) => self.resolve_currency(c)?,
            None => CurrencyId::User(peer.uid),
        };
        if !self.may_use(peer, &cur) {
            return Err(Refusal::not_permitted(format!(
                "you (uid {}) may not run jobs in currency {:?}; ask root to list you in its `users` in the config",
                peer.uid,
                self.currency_name(&cur)
            )));
        }
        self.check_job_limit(peer.uid)?;
        let caller = peer.caller.as_ref().ok_or_else(|| {
            Refusal::not_permitted(format!("cannot prove which process is asking (pid {} at connect): this kernel has no SO_PEERPIDFD and the client sent no pidfd; use the allot CLI of this version", peer.pid))
        })?;
        let info = self
            .host()
            .info(caller)
            .filter(|_| self.host().alive(caller))
            .ok_or(Refusal::not_found("the calling process exited; nothing was changed"))?;
        if !info.creds.all(peer.uid) {
            return Err(Refusal::not_permitted(format!(
                "the calling process runs with uids {:?}, not all yours (uid {}); allot run must be called by a process that is wholly yours",
                &info.creds.uid[..3],
                peer.uid
            )));
        }
        let place = self.place_of(caller.pid)?;
        if let Place::Session { uid, scope, .. } = &place {
            if *uid != peer.uid && !peer.is_root() {
                return Err(Refusal::not_permitted(format!("you are in {scope}, a login session of uid {uid}, not yours")));
            }
        }
        if let Place::Foreign(path) = &place {
            if !(peer.is_root() && force) {
                return Err(Refusal::not_permitted(format!(
                    "you are in cgroup {path}, which another manager owns (a service, container, session or batch job); allot never takes a process out of it{}",
                    if peer.is_root() { " unless you add --force" } else { "" }
                )));
            }
        }
        let mut spec = JobSpec::new(self.registry_mut().take_id(), cur.clone(), peer.uid);
        spec.tickets = tickets;
        spec.cap = cap;
        spec.mem = mem;
        spec.oom_group = oom_group;
        spec.background = background || cap_bg;
        // From the caller's own login session: the job ends when logind stops it (logout.rs).
        let tie = match &place {
            Place::Session { uid, scope, .. } if *uid == peer.uid => Some((spec.clone(), scope.clone())),
            _ => None,
        };
        let made = JobMade { job: self.show_id(&spec), currency: self.currency_name(&cur), tickets: tickets.get(), cgroup: spec.rel() };
        let step = Step::Caller { back: self.back_of_place(&place) };
        self.commit(Change { jobs: vec![JobChange { spec, step }], currency: None }, Some(caller))?;
        if let Some((job, scope)) = tie {
            self.tie_to_session(&job, &scope);
        }
        Ok(Response::Job(made))
    }

    /// The job a target process should be changed through: its own numbered job, or a new
    /// one (in the currency of the default job it is in, or its owner's).
    fn own_job_plan(&mut self, t: &Target) -> (JobSpec, bool) {
        if let Place::Job(id @ JobId::Numbered(_)) = t.place {
            return (self.desired().jobs[&id].clone(), false);
        }
        let owner = t.info.creds.uid[0];
        let (cur, base) = match t.place {
            Place::Job(id) => {
                let d = &self.desired().jobs[&id];
                (d.currency.clone(), Some(d.clone()))
            }
            _ => (CurrencyId::User(owner), None),
        };
        let mut spec = JobSpec::new(self.registry_mut().take_id(), cur, owner);
        if let Some(b) = base {
            spec.tickets = b.tickets;
            spec.background = b.background;
        }
        (spec, true)
    }

    #[allow(clippy::too_many_arguments)]
    fn set(
        &mut self,
        peer: &Peer,
        pids: Pids,
        tickets: Option<Tickets>,
        cap: CapChange,
        background: Option<bool>,
        force: bool,
        (mem, oom_group): (MemChange, Option<bool>),
    ) -> R<Response> {
        let mut bg = background;
        // cap: None = unchanged; Some(None) = clear; Some(Some(c)) = set.
        let cap: Option<Option<Cap>> = match cap {
            CapChange::Keep => None,
            CapChange::Clear => Some(None),
            CapChange::Set(c) if c.is_background() => {
                if bg == Some(false) {
                    return Err(Refusal::invalid("cap 0 means background; it contradicts --foreground"));
                }
                bg = Some(true);
                None
            }
            CapChange::Set(c) => Some(Some(self.check_cap(c)?)),
        };
        if bg == Some(true) && matches!(cap, Some(Some(_))) {
            return Err(Refusal::invalid("--background and a cap contradict each other: background is soft cap 0 (idle CPU only); give one of them"));
        }
        if tickets.is_none() && cap.is_none() && bg.is_none() && mem.is_keep() && oom_group.is_none() {
            return Err(Refusal::invalid(
                "set needs something to change: -t TICKETS, --cap CAP|none, --mem SIZE|none, --oom-group on|off, --background or --foreground",
            ));
        }
        if matches!(mem, MemChange::Set(_)) {
            self.check_job_mem()?;
        }
        if oom_group == Some(true) {
            self.check_oom_group()?;
        }
        // Check every process before changing anything.
        let mut seen = std::collections::HashSet::new();
        let mut targets = vec![];
        for &pid in pids.as_slice() {
            if seen.insert(pid) {
                targets.push(self.target(peer, pid, force)?);
            }
        }
        let new_jobs = targets.iter().filter(|t| !matches!(t.place, Place::Job(JobId::Numbered(_)))).count();
        if new_jobs > 0 {
            self.check_job_limit(peer.uid)?;
        }
        let mut change = Change::default();
        let mut warnings = vec![];
        for t in targets {
            let (mut spec, new) = self.own_job_plan(&t);
            // Two processes of one job change it once.
            if change.jobs.iter().any(|j| j.spec.id == spec.id) {
                continue;
            }
            if let Place::Session { scope, .. } = &t.place {
                warnings.push(session_left(t.proc.pid, scope, &self.show_id(&spec)));
            }
            let before = spec.clone();
            if let Some(t2) = tickets {
                spec.tickets = t2;
            }
            if let Some(c) = cap {
                spec.cap = c;
            }
            match mem {
                MemChange::Keep => {}
                MemChange::Clear => spec.mem = None,
                MemChange::Set(m) => spec.mem = Some(m),
            }
            if let Some(b) = bg {
                spec.background = b;
            }
            if let Some(o) = oom_group {
                spec.oom_group = o;
            }
            let step = if new {
                Step::NewJob(t)
            } else if spec.background != before.background {
                Step::Relocate { from: before }
            } else {
                Step::Settings
            };
            change.jobs.push(JobChange { spec, step });
        }
        let jobs = change.jobs.iter().map(|j| self.show_id(&j.spec)).collect();
        self.commit(change, None)?;
        Ok(Response::Changed(Changed { jobs, focus: None, warnings }))
    }

    fn focus(&mut self, peer: &Peer, pid: Pid, on: bool) -> R<Response> {
        let t = self.target(peer, pid, false)?;
        let (mut spec, new) = self.own_job_plan(&t);
        if new {
            self.check_job_limit(peer.uid)?;
        }
        spec.focus = on;
        let jobs = vec![self.show_id(&spec)];
        let step = if new { Step::NewJob(t) } else { Step::Settings };
        self.commit(Change { jobs: vec![JobChange { spec, step }], currency: None }, None)?;
        Ok(Response::Changed(Changed { jobs, focus: Some(on), warnings: vec![] }))
    }

    fn move_pid(&mut self, peer: &Peer, pid: Pid, currency: &str, force: bool) -> R<Response> {
        let cur = self.resolve_currency(currency)?;
        if !self.may_fund(peer, &cur) {
            return Err(Refusal::not_permitted(format!(
                "moving a process into currency {:?} is root's (or a config-listed owner's); you are uid {}",
                self.currency_name(&cur),
                peer.uid
            )));
        }
        let t = self.target(peer, pid, force)?;
        let owner = t.info.creds.uid[0];
        self.check_job_limit(owner)?;
        let spec = JobSpec::new(self.registry_mut().take_id(), cur.clone(), owner);
        let made = JobMade { job: self.show_id(&spec), currency: self.currency_name(&cur), tickets: spec.tickets.get(), cgroup: spec.rel() };
        self.commit(Change { jobs: vec![JobChange { spec, step: Step::NewJob(t) }], currency: None }, None)?;
        Ok(Response::Job(made))
    }

    fn fund(&mut self, peer: &Peer, currency: Option<String>, funding: Option<Funding>, cap: CapChange) -> R<Response> {
        let Some(name) = currency else {
            if funding.is_some() || !cap.is_keep() {
                return Err(Refusal::invalid("give the currency or user to fund: allot fund NAME BASE [--cap N!]"));
            }
            return Ok(Response::Currencies(crate::proto::CurrenciesView { currencies: self.currency_views() }));
        };
        let cur = self.resolve_currency(&name)?;
        let view =
            |d: &Self| FundingView { currency: d.currency_name(&cur), funding: d.funding_of(&cur), cap: d.currency_cap(&cur).map(|c| c.to_string()) };
        if funding.is_none() && cap.is_keep() {
            return Ok(Response::Funding(view(self)));
        }
        let c = match cap {
            CapChange::Keep => None,
            CapChange::Clear => Some(None),
            CapChange::Set(c) => Some(Some(self.check_cap(c)?)),
        };
        let what = if !cap.is_keep() { "funding and currency caps on this machine are" } else { "funding on this machine is" };
        if self.cfg().funding_authority == crate::config::FundingAuthority::Config {
            return Err(Refusal::not_permitted(format!(
                "{what} set by its config (funding_authority = \"config\": a centrally managed fleet); change it there"
            )));
        }
        if !self.may_fund(peer, &cur) {
            let what = if !cap.is_keep() { "the cap" } else { "funding" };
            return Err(Refusal::not_permitted(format!(
                "setting {what} of {:?} is root's (or a config-listed owner's); you are uid {}",
                self.currency_name(&cur),
                peer.uid
            )));
        }
        self.commit(Change { jobs: vec![], currency: Some(CurrencyChange { id: cur.clone(), funding, cap: c }) }, None)?;
        Ok(Response::Funding(view(self)))
    }
}

/// What `set` tells the user when it takes a process out of its login session: the move
/// is for good (a scope takes no process back), and the session no longer covers it.
fn session_left(pid: i32, scope: &str, job: &str) -> String {
    format!(
        "process {pid} left its login session ({scope}) for job {job}, for good: ending the session (logging out, loginctl terminate-session) no longer ends it; end it yourself when it is done"
    )
}
