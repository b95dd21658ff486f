//! Scopes and slices systemd delegates (docs/systemd.md).

use super::Backend;
use crate::daemon::applied::{Node, Write};
use crate::daemon::core::Daemon;
use crate::daemon::registry::{Class, CurrencyId, JobId, BACKGROUND};
use allot_linux::cgroup::CpuController;
use allot_model::plan::JobPlan;

/// Scopes and slices systemd delegates.
pub struct Systemd;

impl Backend<Daemon> for Systemd {
    fn manager(&self) -> &'static str {
        "systemd"
    }
    /// The slices' weights are systemd's: nothing is written.
    fn background_without_idle(&self, _: &dyn CpuController) -> allot_linux::Result<()> {
        Ok(())
    }
    /// "" is no directory of allot's (the mount): its scopes are watched as they are made.
    fn roots(&self) -> &'static [&'static str] {
        &[BACKGROUND]
    }
    fn outside_weight(&self, _: &crate::config::Config) -> Option<u32> {
        None
    }
    fn currency_is_slice(&self, class: Class) -> bool {
        class == Class::Foreground
    }
    fn logged_in(&self, cg: &dyn CpuController) -> Vec<u32> {
        cg.delegation().map_or(Ok(vec![]), |d| d.user_slices()).unwrap_or_else(|e| {
            log::debug!("could not list the users' slices: {e}");
            vec![]
        })
    }
    fn plan_writes(&self, d: &Daemon, with_jobs: &[CurrencyId], logged_in: &[u32], ids: &[JobId], jobs: &[JobPlan]) -> Vec<Write> {
        let mut w = d.slice_funding(with_jobs, logged_in);
        w.extend(d.scope_weights(ids, jobs));
        w
    }
    fn caps_without_jobs(&self, d: &Daemon, logged_in: &[u32]) -> Vec<CurrencyId> {
        let cfg = d.cfg();
        let config_caps = cfg.funding.values().any(|e| e.cap.is_some()) || cfg.groups.values().any(|g| g.currency_cap.is_some());
        let mut cs = vec![];
        if config_caps {
            cs.extend(logged_in.iter().copied().filter(|u| d.placement().is_human(*u)).map(CurrencyId::User));
        }
        // Slices capped since start whose currency has no job now: a cap taken away
        // (config reload) is taken off too.
        cs.extend(d.tree().applied().capped().filter_map(|n| match n {
            Node::Currency(Class::Foreground, c) => Some(c.clone()),
            _ => None,
        }));
        cs
    }
    fn cap_mechanism(&self) -> &'static str {
        "its slice's CPUQuota="
    }
    fn has_sessions(&self) -> bool {
        true
    }
    fn reaches_units(&self) -> bool {
        true
    }
    /// No process is moved: empty jobs and scopes are removed (and the slices they
    /// started), and a scope whose job still runs loses its holder, so systemd stops it
    /// with its last process.
    fn release(&self, d: &mut Daemon) {
        d.release_scopes();
    }
    fn released(&self) -> &'static str {
        "nothing of allot's is left but the scopes of jobs still running, which end with them"
    }
}
