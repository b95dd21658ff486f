//! The backend: how allot's tree is held on this host, one value chosen at start and held
//! by the daemon, so no other file asks which host it is on. [`Raw`]: allot's own tree of
//! cgroups (cgroup v1, or v2 without systemd), weighed against outside load by allot.
//! [`Systemd`]: scopes and slices systemd delegates (docs/systemd.md), where a user's
//! currency is their `user-UID.slice`, which exists from their first login and weighs
//! their login sessions too. A third (part 14's sched_ext scheduler) is another impl.

use super::applied::{Node, Write};
use super::core::Daemon;
use super::registry::{Class, CurrencyId, JobId, BACKGROUND};
use allot_linux::cgroup::CpuController;
use allot_model::plan::JobPlan;
use std::rc::Rc;

/// How allot's tree is held.
pub trait Backend {
    /// Who manages the tree, for `allot status`.
    fn manager(&self) -> &'static str;
    /// At start, on a kernel without cpu.idle: what stands in for it on the background root.
    fn background_without_idle(&self, cg: &dyn CpuController) -> allot_linux::Result<()>;
    /// allot's directories watched for outside changes from the start.
    fn roots(&self) -> &'static [&'static str];
    /// The weight of allot's root against load outside it (None: that split is not allot's).
    fn outside_weight(&self, cfg: &crate::config::Config) -> Option<u32>;
    /// Whether a currency's directory in `class` is a slice that outlives its jobs and
    /// weighs its user's logins too (its cap and funding are then kept and written
    /// without jobs).
    fn currency_is_slice(&self, class: Class) -> bool;
    /// The users whose currency's directory exists now without jobs. Listed once per plan.
    fn logged_in(&self, cg: &dyn CpuController) -> Vec<u32>;
    /// Writes the backend adds to a plan (systemd: job-less slices' funding, the scopes'
    /// weights against their users' sessions).
    fn plan_writes(&self, d: &Daemon, with_jobs: &[CurrencyId], logged_in: &[u32], ids: &[JobId], jobs: &[JobPlan]) -> Vec<Write>;
    /// Currencies without jobs whose cap is written anyway (systemd: logged-in users when
    /// the config caps currencies, slices capped before).
    fn caps_without_jobs(&self, d: &Daemon, logged_in: &[u32]) -> Vec<CurrencyId>;
    /// How a currency's hard cap is enforced, in words (`allot explain`).
    fn cap_mechanism(&self) -> &'static str;
    /// Whether login sessions are units of their own beside allot's jobs, read and weighed
    /// each tick (sessions/).
    fn has_sessions(&self) -> bool;
    /// Whether a process in another unit can be reached through the service manager
    /// (placement/reach.rs).
    fn reaches_units(&self) -> bool;
    /// `allot daemon --release`: lets go of everything allot made, for good.
    fn release(&self, d: &mut Daemon);
    /// What is left after [`Self::release`], in words.
    fn released(&self) -> &'static str;
}

/// The backend for a controller, chosen once at start.
pub fn for_controller(cg: &dyn CpuController) -> Rc<dyn Backend> {
    if cg.systemd() {
        Rc::new(Systemd)
    } else {
        Rc::new(Raw)
    }
}

/// allot's own tree of cgroups.
pub struct Raw;

impl Backend for Raw {
    fn manager(&self) -> &'static str {
        "allot"
    }
    fn background_without_idle(&self, cg: &dyn CpuController) -> allot_linux::Result<()> {
        cg.set_weight(BACKGROUND, 1)
    }
    fn roots(&self) -> &'static [&'static str] {
        &["", BACKGROUND]
    }
    fn outside_weight(&self, cfg: &crate::config::Config) -> Option<u32> {
        Some(cfg.outside.weight)
    }
    fn currency_is_slice(&self, _: Class) -> bool {
        false
    }
    fn logged_in(&self, _: &dyn CpuController) -> Vec<u32> {
        vec![]
    }
    fn plan_writes(&self, _: &Daemon, _: &[CurrencyId], _: &[u32], _: &[JobId], _: &[JobPlan]) -> Vec<Write> {
        vec![]
    }
    fn caps_without_jobs(&self, _: &Daemon, _: &[u32]) -> Vec<CurrencyId> {
        vec![]
    }
    fn cap_mechanism(&self) -> &'static str {
        "cpu.max on the currency's directory"
    }
    fn has_sessions(&self) -> bool {
        false
    }
    fn reaches_units(&self) -> bool {
        false
    }
    /// allot's tree is taken down, every process moved back to where placement finds them.
    fn release(&self, d: &mut Daemon) {
        d.shutdown(true);
    }
    fn released(&self) -> &'static str {
        "allot's tree is gone, its processes run on where placement found them"
    }
}

/// Scopes and slices systemd delegates.
pub struct Systemd;

impl Backend for Systemd {
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
        cg.user_slices().unwrap_or_else(|e| {
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
