//! `allot explain`: why a job is boosted, held, capped, niced or background right now,
//! since when, and the numbers that decided it. The reasons and thresholds are the plan's own
//! (allot_model::plan returns them with each decision): this file only renders them, so the
//! explanation cannot drift from what was applied.

use super::core::Daemon;
use super::registry::JobId;
use super::tree::PERIOD_US;
use super::trust::Peer;
use crate::proto::{ExplainView, Reason, Refusal, Response};
use allot_model::plan::{Boost, ACTIVE_CPUS};
use allot_model::policy::{nice_bound, Hold, NiceBound, RELEASE_IDLE_CPUS, WAITING_FRACTION};

impl Daemon {
    /// `explain TARGET`: a pid (the caller must be allowed to see it) or a job id.
    pub fn explain(&self, peer: &Peer, target: &str) -> Result<Response, Refusal> {
        if let Some(r) = self.explain_session(peer, target) {
            return r;
        }
        let id = self.find_job(peer, target)?;
        let j = &self.desired().jobs[&id];
        let t = self.obs().jobs.get(&id);
        let p = self.planned().jobs.get(&id).ok_or_else(|| Refusal::busy(format!("job {target} has not been planned yet; ask again in a moment")))?;
        let pol = &self.cfg().policy;
        let (window, last) = t.and_then(|t| t.usage).map_or((0.0, 0.0), |u| (u.window, u.last));
        let l = p.boost_limits;
        let (ent, threshold) = (l.entitlement, l.window);
        let since = self.planned().since.get(&id).copied().unwrap_or_default();
        let ago = |i: usize| since[i].map(|t| t.elapsed().as_secs_f64());
        let win = pol.boost_window_ms;
        let mut reasons = vec![];
        let boost = boost_words(p.boost, window, last, &l, win, "job");
        let mechanism = if p.boosted {
            format!(
                "; weight {} (its tickets' weight × {}){}",
                p.weight,
                pol.boost_weight,
                p.slice_ns.map(|ns| format!(" and a {} µs EEVDF slice for its threads", ns / 1000)).unwrap_or_default()
            )
        } else {
            String::new()
        };
        reasons.push(Reason { state: "boost".into(), on: p.boosted, since_s: ago(0), because: boost + &mechanism });
        if let Some(c) = j.cap.filter(|c| !c.hard) {
            let idle = t.map_or(0.0, |t| t.idle_cpus);
            let because = format!("soft cap {c}: {}", hold_words(p.hold, c.cpus, window, idle));
            reasons.push(Reason { state: "held".into(), on: p.held, since_s: ago(1), because });
        }
        if let Some(c) = j.cap.filter(|c| c.hard) {
            reasons.push(Reason {
                state: "cap".into(),
                on: true,
                since_s: None,
                because: format!("hard cap {c}: cpu.max {} µs per {} ms, always", (c.cpus * PERIOD_US as f64).round(), PERIOD_US / 1000),
            });
        }
        reasons.extend(self.mem_reason(j));
        reasons.extend(self.oom_group_reason(j));
        if let Some(c) = self.currency_cap(&j.currency) {
            let how = self.backend().cap_mechanism();
            reasons.push(Reason {
                state: "currency cap".into(),
                on: true,
                since_s: None,
                because: format!(
                    "its currency {} (funding {}) has a hard cap of {c}: all its jobs together use at most {} CPU ({how}), whatever their tickets",
                    self.currency_name(&j.currency),
                    self.funding_of(&j.currency),
                    c.cpus
                ),
            });
        }
        let nice = t.map_or(0, |t| t.nice);
        if p.niced || nice != 0 {
            let bound = match nice_bound(nice) {
                Some(NiceBound::AtMost(t)) => format!("at most {t:.1}"),
                Some(NiceBound::AtLeast(t)) => format!("at least {t:.1}"),
                None => "its share of".into(),
            };
            let because = if p.niced {
                format!(
                    "its processes' lowest nice is {nice}: under nice emulation it holds {bound} base tickets of its currency's funding {}, so its weight is {}",
                    self.funding_of(&j.currency),
                    p.weight
                )
            } else {
                format!("nice {nice}, but it is not competing now (or nice emulation is off), so its weight is its tickets")
            };
            reasons.push(Reason { state: "nice".into(), on: p.niced, since_s: ago(2), because });
        }
        if j.background {
            reasons.push(Reason {
                state: "background".into(),
                on: true,
                since_s: None,
                because: "it is in allot's background tree (cpu.idle = 1): it runs only on CPU nothing else wants".into(),
            });
        }
        Ok(Response::Explain(ExplainView {
            job: self.show_id(j),
            currency: self.currency_name(&j.currency),
            entitlement: ent,
            window,
            last,
            threshold,
            weight: p.weight,
            quota: p.quota,
            reasons,
        }))
    }

    /// A job named by a job id as `show` prints it, or by a pid the caller may see.
    fn find_job(&self, peer: &Peer, target: &str) -> Result<JobId, Refusal> {
        if let Some(j) = self.desired().jobs.values().find(|j| self.show_id(j) == target) {
            return Ok(j.id);
        }
        let pid: i32 = target
            .trim()
            .parse()
            .map_err(|_| Refusal::not_found(format!("{target:?} is neither a job (as `allot show` names it: 7, alice/default) nor a pid")))?;
        let p = self.open_for_request(pid)?;
        let info = self.host().info(&p).ok_or_else(|| Refusal::not_found(format!("no process {pid} (it has exited)")))?;
        let visible = peer.is_root() || self.cfg().privacy.show_other_users || info.creds.uid[0] == peer.uid;
        if !visible {
            return Err(Refusal::not_permitted(format!("process {pid} is not yours; explain it by its job id (allot show lists them)")));
        }
        match self.place_of(pid)? {
            super::trust::Place::Job(id) => Ok(id),
            _ => Err(Refusal::not_found(format!("process {pid} is not in an allot job"))),
        }
    }
}

/// The boost rule's branch in words, every number from the plan's [`BoostLimits`] or the
/// model's constants (`what`: "job", or "thread" for a session task).
pub fn boost_words(b: Boost, window: f64, last: f64, l: &allot_model::plan::BoostLimits, win: u64, what: &str) -> String {
    let (ent, threshold, wf, lf) = (l.entitlement, l.window, l.window_fraction, l.last_fraction);
    match b {
            Boost::Background => format!("background {what}s are never boosted: they take only idle CPU"),
            Boost::Off => "the boost is off (policy.boost = false)".to_string(),
            Boost::Focused => "focused by its user (allot focus): boosted whatever it uses".to_string(),
            Boost::New => "new: not measured yet, so it counts as having used none of its entitlement: the largest boost".to_string(),
            Boost::Asleep => format!(
                "asleep: it used {window:.3} CPU over the last {win} ms and {last:.3} in the last tick, neither above {ACTIVE_CPUS} CPU; a {what} that used nothing gets the largest boost"
            ),
            Boost::Interactive => format!(
                "interactive: it used {window:.3} CPU over the last {win} ms, below {wf:.2} × its entitlement {ent:.3} = {threshold:.3}, and {last:.3} in the last tick (below {lf} × {ent:.3})"
            ),
            Boost::CpuBound => format!(
                "CPU-bound: it used {last:.3} CPU in the last tick, at least {lf} × its entitlement {ent:.3}: the boost would buy it CPU, not latency"
            ),
            Boost::Busy => format!("busy: it used {window:.3} CPU over the last {win} ms, not below {wf:.2} × its entitlement {ent:.3} = {threshold:.3}"),
    }
}

/// The soft-cap rule's branch in words ([`Hold`], from the plan), every threshold the
/// model's: `usage` over the window, `idle` CPU on the job's CPUs in the last tick.
pub fn hold_words(hold: Option<Hold>, cap: f64, usage: f64, idle: f64) -> String {
    let until = format!("written as cpu.max until more than {RELEASE_IDLE_CPUS} CPU sits idle on its CPUs (now {idle:.2})");
    match hold {
        Some(Hold::Imposed) => format!(
            "held from this tick: it used {usage:.3} CPU, above {cap:.3}, while other jobs waited for CPU (more than {WAITING_FRACTION} of a tick); {until}"
        ),
        Some(Hold::Kept) => format!("held since it ran above {cap:.3} CPU while other jobs waited for CPU; kept: {until}"),
        Some(Hold::Released) => format!("released: more than {RELEASE_IDLE_CPUS} CPU sat idle on its CPUs ({idle:.2}): nobody else wants them"),
        Some(Hold::UnderCap) => format!("not held: it used {usage:.3} CPU, not above {cap:.3}"),
        Some(Hold::Alone) => format!(
            "not held: it used {usage:.3} CPU, above {cap:.3}, but no other job waited for CPU (more than {WAITING_FRACTION} of a tick)"
        ),
        None => "not held: the plan holds no soft cap of a background job (it takes only idle CPU)".to_string(),
    }
}

#[cfg(test)]
#[path = "explain_tests.rs"]
mod tests;
