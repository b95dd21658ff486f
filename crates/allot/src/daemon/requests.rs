//! Every request the daemon serves. Each checks the caller (trust.rs) and every value
//! before it changes anything; a request that changes several processes changes all of
//! them or none (kernel moves first, with an undo log; then the desired state; then the
//! plan is applied at once).

use super::core::Daemon;
use super::registry::{CurrencyId, JobId, JobSpec};
use super::trust::{Peer, Place, Target};
use crate::proto::{CapChange, Changed, FundingView, JobMade, Pid, Pids, Refusal, Request, Response};
use allot_model::{Cap, Funding, Tickets};

type R<T> = Result<T, Refusal>;

/// A kernel change made by a request, and how to take it back.
enum Undo {
    /// A process moved: put it back where it was (a job directory, or a cgroup path).
    Moved { proc: super::host::Proc, back: Back },
    /// A directory made: remove it.
    Made(String),
}

enum Back {
    Rel(String),
    Path(String),
}

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
            Request::Run { tickets, currency, cap, background, force } => self.run(peer, tickets, currency, cap, background, force),
            Request::Set { pids, tickets, cap, background, force } => self.set(peer, pids, tickets, cap, background, force),
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

    /// Where a target goes back to if a request is rolled back.
    fn back_of(&self, t: &Target) -> Back {
        self.back_of_place(&t.place)
    }

    fn back_of_place(&self, place: &Place) -> Back {
        match place {
            Place::Job(id) => Back::Rel(self.desired().jobs[id].rel()),
            Place::Stray(rel) => Back::Rel(rel.clone()),
            Place::Source(p) | Place::Foreign(p) | Place::Session { path: p, .. } => Back::Path(p.clone()),
        }
    }

    fn rollback(&mut self, undo: Vec<Undo>) {
        for u in undo.into_iter().rev() {
            match u {
                Undo::Moved { proc, back } => self.move_back(&proc, &back),
                Undo::Made(rel) => {
                    let _ = self.tree_mut().remove(&rel);
                    self.unwatch_rel(&rel);
                }
            }
        }
    }

    fn move_back(&mut self, proc: &super::host::Proc, back: &Back) {
        match back {
            Back::Rel(rel) => {
                let _ = self.move_verified(proc, rel);
            }
            Back::Path(path) => {
                if self.host().alive(proc) {
                    let _ = self.tree().cg().move_to_path(path, proc.pid);
                }
            }
        }
    }

    /// Makes a job and moves a held process into it, recording both in `undo`.
    fn new_job_with(&mut self, spec: &JobSpec, t: Target, undo: &mut Vec<Undo>) -> R<()> {
        self.make_job_dir(spec).map_err(Refusal::internal)?;
        undo.push(Undo::Made(spec.rel()));
        let back = self.back_of(&t);
        self.move_for_request(&t.proc, &spec.rel())?;
        // The job it left is read again at the next tick: emptied, it is reaped.
        if let Place::Job(id) = &t.place {
            self.read_again(id);
        }
        undo.push(Undo::Moved { proc: t.proc, back });
        Ok(())
    }

    /// Commits new and changed jobs to the desired state, persists it, applies the plan.
    /// What cannot be saved is not done: the desired state is restored, the kernel moves in
    /// `undo` taken back, and the request refused (an acknowledged change must survive a
    /// crash).
    fn commit(&mut self, specs: Vec<JobSpec>, undo: &mut Vec<Undo>) -> R<()> {
        let before = self.desired().clone();
        let ids: Vec<JobId> = specs.iter().map(|s| s.id).collect();
        for s in specs {
            // Its threads and processes now: the plan applied below reaches them (the boost
            // slice), and a directory removed before the next tick can still be repaired.
            let threads = self.tree().cg().threads(&s.rel()).unwrap_or_default();
            let procs = self.tree().cg().procs(&s.rel()).unwrap_or_default();
            self.track(s.id, threads, procs);
            self.registry_mut().put_job(s);
        }
        if let Err(e) = self.save() {
            self.registry_mut().restore(before);
            let dropped: Vec<JobId> = ids.iter().filter(|id| !self.desired().jobs.contains_key(id)).copied().collect();
            for id in &dropped {
                self.untrack(id);
            }
            self.rollback(std::mem::take(undo));
            return Err(Self::unsaved(&e));
        }
        self.replan();
        Ok(())
    }

    /// A refusal for a change the state file could not keep.
    fn unsaved(e: &str) -> Refusal {
        Refusal::internal(format!("nothing was changed: the state file could not be saved ({e}); allot makes no change it cannot keep across a restart (is the state directory full or read-only?)"))
    }

    fn run(
        &mut self,
        peer: &Peer,
        tickets: Option<Tickets>,
        currency: Option<String>,
        cap: Option<Cap>,
        background: bool,
        force: bool,
    ) -> R<Response> {
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
        spec.background = background || cap_bg;
        // From the caller's own login session: the job ends when logind stops it (logout.rs).
        let tie = match &place {
            Place::Session { uid, scope, .. } if *uid == peer.uid => Some((spec.clone(), scope.clone())),
            _ => None,
        };
        let rel = spec.rel();
        let back = self.back_of_place(&place);
        self.make_job_dir(&spec).map_err(Refusal::internal)?;
        let mut undo = vec![Undo::Made(rel.clone())];
        if let Err(e) = self.move_for_request(caller, &rel) {
            self.rollback(undo);
            return Err(e);
        }
        let made = JobMade { job: self.show_id(&spec), currency: self.currency_name(&cur), tickets: tickets.get(), cgroup: rel };
        if let Err(e) = self.commit(vec![spec], &mut vec![]) {
            // The caller is held by the peer, not the undo log: moved back here.
            self.move_back(caller, &back);
            self.rollback(std::mem::take(&mut undo));
            return Err(e);
        }
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
    fn set(&mut self, peer: &Peer, pids: Pids, tickets: Option<Tickets>, cap: CapChange, background: Option<bool>, force: bool) -> R<Response> {
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
        if tickets.is_none() && cap.is_none() && bg.is_none() {
            return Err(Refusal::invalid("set needs something to change: -t TICKETS, --cap CAP|none, --background or --foreground"));
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
        let mut undo = vec![];
        let mut specs: Vec<JobSpec> = vec![];
        let mut warnings = vec![];
        let r = (|| {
            for t in targets {
                let (mut spec, new) = self.own_job_plan(&t);
                if let Place::Session { scope, .. } = &t.place {
                    warnings.push(session_left(t.proc.pid, scope, &self.show_id(&spec)));
                }
                if let Some(s) = specs.iter().position(|s| s.id == spec.id) {
                    spec = specs.remove(s);
                }
                if let Some(t2) = tickets {
                    spec.tickets = t2;
                }
                if let Some(c) = cap {
                    spec.cap = c;
                }
                if let Some(b) = bg {
                    if !new && b != spec.background {
                        self.relocate(&spec, b, &mut undo)?;
                    }
                    spec.background = b;
                }
                if new {
                    self.new_job_with(&spec, t, &mut undo)?;
                }
                specs.push(spec);
            }
            Ok::<(), Refusal>(())
        })();
        if let Err(e) = r {
            self.rollback(undo);
            return Err(e);
        }
        let jobs = specs.iter().map(|s| self.show_id(s)).collect();
        // Relocated jobs leave their old directories empty (removed once committed).
        let mut left: Vec<String> = undo
            .iter()
            .filter_map(|u| match u {
                Undo::Moved { back: Back::Rel(old), .. } if self.desired().by_rel(old).is_some_and(|j| specs.iter().any(|s| s.id == j.id)) => {
                    Some(old.clone())
                }
                _ => None,
            })
            .collect();
        left.dedup();
        self.commit(specs, &mut undo)?;
        for old in left {
            if self.tree().cg().procs(&old).is_ok_and(|p| p.is_empty()) {
                let _ = self.tree_mut().remove(&old);
                self.unwatch_rel(&old);
            }
        }
        Ok(Response::Changed(Changed { jobs, focus: None, warnings }))
    }

    /// Moves a job's processes to its directory in the other class (repeated while it forks).
    fn relocate(&mut self, spec: &JobSpec, background: bool, undo: &mut Vec<Undo>) -> R<()> {
        let old = spec.rel();
        let mut to = spec.clone();
        to.background = background;
        self.make_job_dir(&to).map_err(Refusal::internal)?;
        undo.push(Undo::Made(to.rel()));
        for _ in 0..100 {
            let procs = self.tree().cg().procs(&old).unwrap_or_default();
            if procs.is_empty() {
                return Ok(());
            }
            for pid in procs {
                let Ok(p) = self.host().open(pid) else { continue };
                if self.tree().cg().rel_of(pid).ok().flatten().as_deref() != Some(old.as_str()) {
                    continue;
                }
                match self.move_verified(&p, &to.rel()) {
                    Ok(()) => undo.push(Undo::Moved { proc: p, back: Back::Rel(old.clone()) }),
                    Err(super::tree::MoveError::Gone) => {}
                    Err(super::tree::MoveError::Kernel(k)) => {
                        return Err(Refusal::internal(format!("could not move process {pid} of {}: {k}", spec.id)))
                    }
                }
            }
        }
        Err(Refusal::busy(format!("{} keeps forking faster than it can be moved; nothing was changed", spec.id)))
    }

    fn focus(&mut self, peer: &Peer, pid: Pid, on: bool) -> R<Response> {
        let t = self.target(peer, pid, false)?;
        let (mut spec, new) = self.own_job_plan(&t);
        let mut undo = vec![];
        if new {
            self.check_job_limit(peer.uid)?;
            if let Err(e) = self.new_job_with(&spec, t, &mut undo) {
                self.rollback(undo);
                return Err(e);
            }
        }
        spec.focus = on;
        let jobs = vec![self.show_id(&spec)];
        self.commit(vec![spec], &mut undo)?;
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
        let mut undo = vec![];
        if let Err(e) = self.new_job_with(&spec, t, &mut undo) {
            self.rollback(undo);
            return Err(e);
        }
        let made = JobMade { job: self.show_id(&spec), currency: self.currency_name(&cur), tickets: spec.tickets.get(), cgroup: spec.rel() };
        self.commit(vec![spec], &mut undo)?;
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
        let (funding_before, caps_before) = (self.desired().funding.clone(), self.desired().caps.clone());
        if let Some(f) = funding {
            self.registry_mut().set_funding(cur.clone(), f.get());
        }
        if let Some(c) = c {
            self.registry_mut().set_cap(cur.clone(), c);
        }
        if let Err(e) = self.save() {
            self.registry_mut().restore_funding(funding_before, caps_before);
            return Err(Self::unsaved(&e));
        }
        self.replan();
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
