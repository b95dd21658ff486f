//! The memory step's OOM decisions to the audit trail (oom_audit.rs bounds them): each
//! `oom_score_adj` allot raised or gave back, and each OOM kill seen in a currency.

use crate::daemon::core::Daemon;
use crate::daemon::oom_audit::{OomEvent, OomWhat};
use crate::daemon::registry::CurrencyId;

/// Unix time now, seconds.
fn unix_now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

impl Daemon {
    /// Records one decision of OOM by share (None: nothing changed), bounded.
    pub(super) fn audit_oom(&mut self, c: &CurrencyId, usage: u64, share: u64, what: Option<OomWhat>) {
        let Some(what) = what else { return };
        let owner = match c {
            CurrencyId::User(uid) => Some(*uid),
            CurrencyId::Named(_) => None,
        };
        let e = OomEvent { currency: self.currency_name(c), owner, usage, share, what };
        for r in self.oom_audit_mut().event(unix_now(), e) {
            self.serving_mut().audit_mut().record_as(0, r);
        }
    }

    /// Looks, at most once a second, at each shared currency's OOM kills and records each
    /// increase since the last look (a currency's first look sets where counting begins).
    pub fn audit_oom_kills(&mut self) {
        if self.oom_audit_mut().looked.is_some_and(|t| t.elapsed() < std::time::Duration::from_secs(1)) {
            return;
        }
        self.oom_audit_mut().looked = Some(std::time::Instant::now());
        let ids: Vec<CurrencyId> = self.memory().view.keys().cloned().collect();
        let mut seen = std::collections::BTreeMap::new();
        for c in ids {
            let Some(v) = self.memory_kills(&c) else { continue };
            let name = self.currency_name(&c);
            let before = self.oom_audit_mut().kills.get(&name).copied();
            seen.insert(name, v.oom_kills);
            if let Some(new) = before.and_then(|b| v.oom_kills.checked_sub(b)).filter(|n| *n > 0) {
                self.audit_oom(&c, v.usage, v.protection, Some(OomWhat::Killed { new }));
            }
        }
        self.oom_audit_mut().kills = seen;
    }
}
