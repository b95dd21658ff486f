//! Funding on a systemd host, where a user's currency is their `user-UID.slice`: the slice
//! exists from the user's first login whether or not allot has a job in it, and it weighs
//! all of the user's processes (logins, cron, services of their user manager). So a slice
//! carries the user's funding from the first tick after it appears, not from the user's
//! first `allot run`; and always the value the configured funding authority gives
//! ([`Daemon::funding_of`]): with `funding_authority = "config"` an earlier `allot fund`
//! is overwritten by the config's value, never kept.
//!
//! Currencies with jobs are weighed by the plan (core.rs); this covers the rest.

use super::applied::{Node, Setting, Write};
use super::core::Daemon;
use super::registry::{Class, CurrencyId};

/// The job-less currencies whose slice must carry a weight, and the weight
/// ([`allot_model::scope::slices_to_fund`], a user's currency being `CurrencyId::User`).
pub fn to_fund(
    with_jobs: &[CurrencyId],
    funded: &[CurrencyId],
    logged_in: &[u32],
    human: impl Fn(u32) -> bool,
    funding_of: impl Fn(&CurrencyId) -> u32,
    written: impl Fn(&CurrencyId) -> bool,
) -> Vec<(CurrencyId, u32)> {
    allot_model::scope::slices_to_fund(with_jobs, funded, logged_in, CurrencyId::User, human, funding_of, written)
}

impl Daemon {
    /// The uids whose `user-UID.slice` exists now: on a systemd host, every user with a
    /// login (or lingering); elsewhere none, since a currency's directory exists only while
    /// it has jobs. Listed once per plan.
    pub(super) fn logged_in(&self) -> Vec<u32> {
        self.backend().logged_in(self.tree().cg())
    }

    /// The funding of every job-less currency whose slice should carry one ([`to_fund`]).
    /// A systemd host only: elsewhere a currency's directory exists only while it has jobs.
    pub(super) fn slice_funding(&self, with_jobs: &[CurrencyId], logged_in: &[u32]) -> Vec<Write> {
        let funded: Vec<CurrencyId> = self.desired().funding.keys().cloned().collect();
        let list = to_fund(
            with_jobs,
            &funded,
            logged_in,
            |uid| self.placement().is_human(uid),
            // A niced session's user: the plan's weight (sessions/mod.rs).
            |c| self.session_weight(c).unwrap_or_else(|| self.funding_of(c)),
            |c| self.tree().applied().get(&Node::Currency(Class::Foreground, c.clone())).is_some_and(|a| a.weight.is_some()),
        );
        list.into_iter().map(|(c, f)| Write::currency(Class::Foreground, &c, Setting::Weight(f))).collect()
    }
}

impl Daemon {
    /// At a clean stop on a systemd host: the slices allot funded or capped whose currency
    /// has no job of allot's (a logged-in user's funding, a currency cap) go back to
    /// systemd's defaults, so a stopped or removed allot leaves no `CPUWeight=` or
    /// `CPUQuota=` on slices it holds nothing in. (A slice with jobs keeps its funding at
    /// rest while they run, and loses it when allot's scope there goes.)
    pub(super) fn take_back_slices(&mut self) {
        if !self.backend().currency_is_slice(Class::Foreground) {
            return;
        }
        let with_jobs: std::collections::BTreeSet<&CurrencyId> = self.desired().jobs.values().map(|j| &j.currency).collect();
        let bare: Vec<CurrencyId> = self
            .tree()
            .applied()
            .written_currencies()
            .filter_map(|n| match n {
                Node::Currency(Class::Foreground, c) if !with_jobs.contains(c) => Some(c.clone()),
                _ => None,
            })
            .collect();
        for c in bare {
            let rel = super::registry::currency_rel(Class::Foreground, &c);
            let Some(dlg) = self.tree().cg().delegation() else { return };
            if let Err(e) = dlg.take_back_slice(&rel) {
                log::warn!("could not take allot's funding and cap off {rel}'s slice: {e}");
            }
            self.tree_mut().applied_mut().removed(&Node::Currency(Class::Foreground, c));
        }
    }
}

impl Daemon {
    /// Weighs each currency's job scope as its active jobs together
    /// ([`allot_model::scope::scope_weight`]): against a login session of the same user
    /// they then divide the user's share as a default job and the jobs would in allot's
    /// own tree. A systemd host only (elsewhere there is no session scope to weigh against).
    pub(super) fn scope_weights(&self, ids: &[super::registry::JobId], jobs: &[allot_model::plan::JobPlan]) -> Vec<Write> {
        let mut by_cur: std::collections::BTreeMap<CurrencyId, Vec<u32>> = Default::default();
        for (id, p) in ids.iter().zip(jobs) {
            let j = &self.desired().jobs[id];
            let active = by_cur.entry(j.currency.clone()).or_default();
            if !j.background && p.entitlement > 0.0 {
                active.push(p.weight);
            }
        }
        by_cur.into_iter().filter_map(|(c, active)| allot_model::scope::scope_weight(active).map(|w| Write::scope(&c, w))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A systemd host: user 3000 with an allot job (funding 200), user 3001 logged in
    /// without one (funding 300 in the config), each with a slice.
    #[test]
    fn a_clean_stop_takes_funding_off_slices_allot_holds_nothing_in() {
        let w = crate::daemon::tests::world();
        {
            let mut x = w.lock().unwrap();
            x.systemd = true;
            x.spawn(100, 3000, "/user.slice/user-3000.slice/session-4.scope", "sh");
            x.slice_mem.logged_in = vec![3000, 3001];
            x.dirs.insert("/fake/user-3001".into(), crate::daemon::fake::Dir { weight: 100, ..Default::default() });
        }
        let mut d = crate::daemon::tests::start(&w, None);
        let r = d.handle(
            crate::proto::Request::Run { tickets: None, currency: None, cap: None, background: false, force: false, mem: None, oom_group: false },
            &crate::daemon::tests::peer(&w, 3000, 100),
        );
        assert!(matches!(r, Ok(crate::proto::Response::Job(_))), "{r:?}");
        d.registry_mut().set_funding(CurrencyId::User(3000), 200);
        d.cfg_mut().funding.insert("3001".into(), crate::config_funding::FundingEntry { funding: Some(300), ..Default::default() });
        d.tick();
        let weight = |rel: &str| w.lock().unwrap().dirs.get(&format!("/fake/{rel}")).map(|d| d.weight);
        assert_eq!(weight("user-3001"), Some(300), "funded from the login, without a job");
        assert_eq!(weight("user-3000"), Some(200));
        d.shutdown(false);
        assert_eq!(weight("user-3001"), Some(100), "systemd's default again: allot holds nothing in that slice");
        assert_eq!(weight("user-3000"), Some(200), "the slice with allot's job keeps its funding while the job runs");
    }

    fn f(c: &CurrencyId) -> u32 {
        match c {
            CurrencyId::User(1001) => 300,
            CurrencyId::User(1002) => 100,
            CurrencyId::User(1003) => 100,
            CurrencyId::User(_) => 50,
            CurrencyId::Named(_) => 200,
        }
    }

    #[test]
    fn a_logged_in_users_slice_carries_their_funding_without_a_job() {
        let human = |u: u32| (1000..60000).contains(&u);
        let got = to_fund(&[], &[], &[1001, 1002, 999, 1004], human, f, |_| false);
        // 1001: 300 from the config; 1002 at systemd's default: nothing to write; 999: no
        // human user; 1004: the default funding 50 differs from systemd's 100.
        assert_eq!(got, vec![(CurrencyId::User(1001), 300), (CurrencyId::User(1004), 50)]);
    }

    #[test]
    fn currencies_with_jobs_are_the_plans_and_funded_ones_take_the_authoritys_value() {
        let human = |_| true;
        let funded = [CurrencyId::User(1001), CurrencyId::User(1003), CurrencyId::Named("ci".into())];
        // 1003 was funded 400 with `allot fund`, but funding_of (the authority: the config)
        // says 100: 100 is written over it, not 400 kept.
        let got = to_fund(&[CurrencyId::User(1001)], &funded, &[1001, 1003], human, f, |_| false);
        assert_eq!(got, vec![(CurrencyId::User(1003), 100), (CurrencyId::Named("ci".into()), 200)]);
    }

    #[test]
    fn a_slice_written_before_is_written_back_to_the_default() {
        let written = |c: &CurrencyId| *c == CurrencyId::User(1002);
        let got = to_fund(&[], &[], &[1002, 1003], |_| true, f, written);
        assert_eq!(got, vec![(CurrencyId::User(1002), 100)]);
    }
}
