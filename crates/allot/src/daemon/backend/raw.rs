//! allot's own tree of cgroups (cgroup v1, or v2 without systemd).

use super::Backend;
use crate::daemon::applied::Write;
use crate::daemon::core::Daemon;
use crate::daemon::registry::{Class, CurrencyId, JobId, BACKGROUND};
use allot_linux::cgroup::CpuController;
use allot_model::plan::JobPlan;

/// allot's own tree of cgroups.
pub struct Raw;

impl Backend<Daemon> for Raw {
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
