//! A currency's hard cap: all of a currency's jobs together never use more than N CPUs
//! (`allot fund alice --cap 4!`, `[funding] alice = { cap = "4!" }`, `[groups.NAME]
//! currency_cap`), as login-node recipes cap a user (systemd's `CPUQuota=` on the user's
//! slice). Unlike a job's cap it is hard only and bounds the currency, not one job.
//!
//! Where it is written: on allot's own tree (cgroup v1 and v2 without systemd) the
//! currency's directory gets `cpu.max` (`cpu.cfs_quota_us`), in the foreground tree and,
//! separately, in the background one (they have no common parent: see docs/concepts.md);
//! on a systemd host the user's slice gets `CPUQuota=` through systemd (SetUnitProperties,
//! runtime), which also bounds their logins, and the currency's background directory gets
//! `cpu.max`. A slice is systemd's: allot takes a cap off it only where allot put one
//! (since this start, or `--cap none`), never an admin's own `CPUQuota=`.

use super::applied::{Setting, Write};
use super::core::Daemon;
use super::registry::{Class, CurrencyId};
use allot_model::Cap;

/// Whether a user's slice gets a `CPUQuota=` write: when the currency has a cap, or to
/// take one off that allot put there (`ours`: written since this start; `asked`: `allot
/// fund --cap` recorded a cap or none for it). An uncapped slice allot never capped is
/// left alone, so an admin's own `CPUQuota=` on it stands.
fn write_slice(capped: bool, ours: bool, asked: bool) -> bool {
    capped || ours || asked
}

impl Daemon {
    /// A currency's hard cap: set with `allot fund --cap` (unless funding_authority is
    /// "config"), else the config's (`[funding]`, then the user's groups' currency_cap).
    pub fn currency_cap(&self, c: &CurrencyId) -> Option<Cap> {
        if self.cfg().funding_authority == crate::config::FundingAuthority::Local {
            if let Some(cap) = self.desired().caps.get(c) {
                return *cap;
            }
        }
        match c {
            CurrencyId::Named(n) => self.cfg().funding.get(n).and_then(|e| e.cap),
            CurrencyId::User(uid) => self.user_defaults(*uid).2,
        }
    }

    /// A currency's cap (or its absence) for its directory in `class`: one allot made or
    /// adopted, or on a systemd host its user's slice as [`write_slice`] decides.
    pub(super) fn cap_write(&self, class: Class, c: &CurrencyId) -> Option<Write> {
        let cap = self.currency_cap(c);
        let w = Write::currency(class, c, Setting::Max(cap.map(|x| x.cpus)));
        if self.backend().currency_is_slice(class) {
            let ours = self.tree().applied().get(&w.node).is_some_and(|a| matches!(a.max, Some(Some(_))));
            if !write_slice(cap.is_some(), ours, self.desired().caps.contains_key(c)) {
                return None;
            }
        } else if !self.tree().applied().knows(&w.node) {
            // Not a directory allot made or adopted (a currency without jobs has none).
            return None;
        }
        Some(w)
    }

    /// Every currency's cap: the currencies with jobs, those capped or uncapped with
    /// `allot fund`, and on a systemd host the slices of logged-in users when the config
    /// caps currencies. Each goes out only when it differs from the last (tree.rs), so
    /// this is cheap every plan.
    pub(super) fn currency_caps(&self, with_jobs: &[CurrencyId], logged_in: &[u32]) -> Vec<Write> {
        let mut cs: Vec<CurrencyId> = with_jobs.to_vec();
        cs.extend(self.desired().caps.keys().cloned());
        cs.extend(self.backend().caps_without_jobs(self, logged_in));
        cs.sort();
        cs.dedup();
        cs.iter().flat_map(|c| [self.cap_write(Class::Foreground, c), self.cap_write(Class::Background, c)]).flatten().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{path_of, peer, start, world};
    use super::super::trust::Peer;
    use crate::proto::{Request, Response};
    use allot_linux::cgroup::Max;

    fn max_of(w: &super::super::fake::Shared, path: &str) -> Option<Max> {
        w.lock().unwrap().dirs[path].max
    }

    #[test]
    fn a_slice_allot_never_capped_keeps_the_admins_quota() {
        assert!(super::write_slice(true, false, false), "a cap is written");
        assert!(super::write_slice(false, true, false), "a cap allot wrote since start is taken off");
        assert!(super::write_slice(false, false, true), "--cap none takes one off after a restart too");
        assert!(!super::write_slice(false, false, false), "an uncapped slice allot never capped is not touched");
    }

    fn fund(cap: &str) -> Request {
        let cap = match cap {
            "none" => crate::proto::CapChange::Clear,
            c => crate::proto::CapChange::Set(allot_model::Cap::parse_currency(c).unwrap()),
        };
        Request::Fund { currency: Some("3000".into()), funding: None, cap }
    }

    #[test]
    fn a_currency_cap_is_written_to_the_currency_directory_and_taken_off() {
        let w = world();
        w.lock().unwrap().spawn(100, 3000, "/", "sh");
        let mut d = start(&w, None);
        d.scan();
        assert_eq!(path_of(&w, 100), "/fake/user-3000/default");
        assert_eq!(max_of(&w, "/fake/user-3000"), None);
        let root = Peer { uid: 0, gid: 0, groups: vec![], pid: 1, caller: None };
        match d.handle(fund("0.5!"), &root).unwrap() {
            Response::Funding(f) => assert_eq!((f.funding, f.cap.as_deref()), (100, Some("0.5!"))),
            r => panic!("{r:?}"),
        }
        assert_eq!(max_of(&w, "/fake/user-3000"), Some(Max { quota_us: 50_000, period_us: 100_000 }));
        assert_eq!(max_of(&w, "/fake/user-3000/default"), None, "the job keeps its own (no) cap");
        // Refusals change nothing: a soft cap, a user capping their own currency, too many CPUs.
        let line = format!(r#"{{"v":{},"op":"fund","currency":"3000","cap":"1"}}"#, crate::proto::PROTOCOL);
        let e = crate::proto::decode_request(line.as_bytes()).unwrap_err().to_string();
        assert!(e.contains("currency cap \"1\" is not a hard cap"), "{e}");
        let e = d.handle(fund("1!"), &peer(&w, 3000, 100)).unwrap_err();
        assert!(e.message.contains("setting the cap of") && e.message.contains("root's"), "{e}");
        assert_eq!(e.kind, crate::proto::ErrorKind::NotPermitted);
        let e = d.handle(fund("4000!"), &root).unwrap_err();
        assert!(e.message.contains("more"), "{e}");
        assert_eq!(e.kind, crate::proto::ErrorKind::Invalid);
        assert_eq!(max_of(&w, "/fake/user-3000"), Some(Max { quota_us: 50_000, period_us: 100_000 }));
        // A new job of the currency sits under the same cap.
        let show = |d: &mut super::super::core::Daemon| match d.handle(Request::Show { user: None }, &root).unwrap() {
            Response::Show(s) => s.currencies.iter().find(|c| c.name == "3000").and_then(|c| c.cap.clone()),
            r => panic!("{r:?}"),
        };
        assert_eq!(show(&mut d).as_deref(), Some("0.5!"));
        // explain names it beside the currency's funding.
        let job = d.desired().jobs.values().next().map(|j| d.show_id(j)).unwrap();
        match d.handle(Request::Explain { target: job }, &root).unwrap() {
            Response::Explain(x) => {
                let r = x.reasons.iter().find(|r| r.state == "currency cap").expect("a currency cap reason");
                assert!(r.on && r.because.contains("funding 100") && r.because.contains("hard cap of 0.5!"), "{}", r.because);
            }
            r => panic!("{r:?}"),
        }
        d.handle(fund("none"), &root).unwrap();
        assert_eq!(max_of(&w, "/fake/user-3000"), None);
        assert_eq!(d.desired().caps[&super::CurrencyId::User(3000)], None, "kept as none: it wins over the config");
        assert_eq!(show(&mut d), None);
    }

    #[test]
    fn the_config_caps_a_currency_in_both_forms_and_fund_wins() {
        let w = world();
        w.lock().unwrap().spawn(100, 3000, "/", "sh");
        let mut d = start(&w, None);
        d.set_cfg(
            crate::config::Config::parse("t.toml".as_ref(), "[users]\nmin_uid = 3000\n[funding]\n3000 = { funding = 200, cap = \"1/4!\" }\n")
                .unwrap(),
        );
        d.scan();
        d.replan();
        assert_eq!(max_of(&w, "/fake/user-3000"), Some(Max { quota_us: 25_000, period_us: 100_000 }));
        assert_eq!(d.funding_of(&super::CurrencyId::User(3000)), 200);
        let root = Peer { uid: 0, gid: 0, groups: vec![], pid: 1, caller: None };
        d.handle(fund("none"), &root).unwrap();
        assert_eq!(max_of(&w, "/fake/user-3000"), None);
        // With the config the authority, `allot fund --cap` is refused and the config's holds.
        d.cfg_mut().funding_authority = crate::config::FundingAuthority::Config;
        let e = d.handle(fund("1!"), &root).unwrap_err();
        assert!(e.message.contains("currency caps on this machine are set by its config"), "{e}");
        d.replan();
        assert_eq!(max_of(&w, "/fake/user-3000"), Some(Max { quota_us: 25_000, period_us: 100_000 }));
    }
}
