//! `allot explain PID` for a process in a login session: what reached it (a rule's
//! attributes, the boost slice) and its usage judged against its user's sessions'
//! entitlement, as the plan made them (sessions/mod.rs); this file only renders them.

use super::super::core::Daemon;
use super::super::explain::boost_words;
use super::super::registry::CurrencyId;
use super::super::trust::{Peer, Place};
use crate::proto::{ExplainView, Reason, Refusal, Response};
use allot_model::plan::{Boost, BoostLimits};
use allot_model::scope::SESSION_WEIGHT;

impl Daemon {
    /// The explanation of `target` if it is a pid in a login session (None: it is not,
    /// and `explain` goes on as for jobs). Only its user, root, or anyone under
    /// `privacy.show_other_users` may ask.
    pub fn explain_session(&self, peer: &Peer, target: &str) -> Option<Result<Response, Refusal>> {
        let pid: i32 = target.trim().parse().ok().filter(|&p| p > 0)?;
        let Ok(Place::Session { uid, scope, .. }) = self.place_of(pid) else { return None };
        Some(self.session_view(peer, pid, uid, &scope))
    }

    fn session_view(&self, peer: &Peer, pid: i32, uid: u32, scope: &str) -> Result<Response, Refusal> {
        let p = self.open_for_request(pid)?;
        let info = self.host().info(&p).ok_or_else(|| Refusal::not_found(format!("no process {pid} (it has exited)")))?;
        if !(peer.is_root() || self.cfg().privacy.show_other_users || info.creds.uid[0] == peer.uid) {
            return Err(Refusal::not_permitted(format!(
                "process {pid} is in a login session of uid {uid}, not yours; only its user or root may ask about it"
            )));
        }
        let s = &self.sessions();
        let planned = s.planned.get(&uid);
        let ent = planned.map_or(0.0, |j| j.entitlement);
        let params = self.cfg().policy.params(self.features().custom_slices);
        let l = BoostLimits::new(&params, ent);
        // The process's busiest thread speaks for it (its leader when none ran).
        let task = self
            .host()
            .tids(pid)
            .into_iter()
            .filter_map(|t| s.tasks.get(&t).filter(|x| self.host().task_start(pid, t) == Some(x.start)).map(|x| (t, x)))
            .max_by(|a, b| a.1.usage.map_or(0.0, |u| u.window).total_cmp(&b.1.usage.map_or(0.0, |u| u.window)));
        let (window, last) = task.and_then(|t| t.1.usage).map_or((0.0, 0.0), |u| (u.window, u.last));
        let currency = self.currency_name(&CurrencyId::User(uid));
        let mut reasons = vec![Reason {
            state: "session".into(),
            on: true,
            since_s: None,
            because: format!(
                "in {scope}, a login session of uid {uid}, which systemd owns: allot never moves it; its user's sessions together are a claimant of {SESSION_WEIGHT} tickets in currency {currency} beside the user's jobs, entitled to {ent:.3} CPU now (its user's share, not CPUs ÷ runnable tasks)"
            ),
        }];
        let win = self.cfg().policy.boost_window_ms;
        let (on, because) = match (task, s.slice_ns) {
            (None, _) => (false, format!("not followed yet (allot reads session threads each tick, at most {} of them)", super::MAX_TASKS)),
            (Some((tid, t)), slice) => {
                let b = t.boost.unwrap_or(Boost::New);
                let words = boost_words(b, window, last, &l, win, "thread");
                match (t.boosted_from.is_some(), slice) {
                    (true, Some(ns)) => (true, format!("thread {tid}: {words}; a {} µs EEVDF slice by sched_setattr (its session scope's weight is systemd's)", ns / 1000)),
                    (false, None) if b.on() => (false, format!("thread {tid}: {words}; but no mechanism reaches it: the kernel has no custom slices (Linux 6.12+), and its session scope's weight is systemd's")),
                    _ => (false, format!("thread {tid}: {words}")),
                }
            }
        };
        reasons.push(Reason { state: "boost".into(), on, since_s: None, because });
        if let Some((rule, a)) = s.rule_of(pid, p.start) {
            let what = match a.nice {
                _ if a.idle => "SCHED_IDLE on its threads: it runs only on CPU nothing else wants".to_string(),
                Some(n) => format!("nice {n} on its threads: its tickets' weight against its session's other processes"),
                None => "nothing".into(),
            };
            reasons.push(Reason {
                state: if a.idle { "background" } else { "rule" }.into(),
                on: true,
                since_s: None,
                because: format!("rule {rule}: {what}"),
            });
        }
        Ok(Response::Explain(ExplainView {
            job: format!("{scope} (pid {pid})"),
            currency,
            entitlement: ent,
            window,
            last,
            threshold: l.window,
            weight: SESSION_WEIGHT,
            quota: None,
            reasons,
        }))
    }
}
