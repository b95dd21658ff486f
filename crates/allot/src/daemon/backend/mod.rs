//! The backend: how allot's tree is held on this host, one value chosen at start and held
//! by the daemon, so no other file asks which host it is on. `raw.rs`: allot's own tree of
//! cgroups (cgroup v1, or v2 without systemd), weighed against outside load by allot.
//! `systemd.rs`: scopes and slices systemd delegates (docs/systemd.md), where a user's
//! currency is their `user-UID.slice`, which exists from their first login and weighs
//! their login sessions too. A scheduler of allot's own (docs/scx.md) would be a third impl.
//!
//! The trait is generic over the daemon it serves (`D`), so this file and the daemon's
//! core do not import each other: the impls, which do, are chosen at start (adopt.rs).

use super::applied::Write;
use super::registry::{Class, CurrencyId, JobId};
use allot_linux::cgroup::CpuController;
use allot_model::plan::JobPlan;

pub mod raw;
pub mod systemd;

/// How allot's tree is held, for the daemon `D`.
pub trait Backend<D> {
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
    fn plan_writes(&self, d: &D, with_jobs: &[CurrencyId], logged_in: &[u32], ids: &[JobId], jobs: &[JobPlan]) -> Vec<Write>;
    /// Currencies without jobs whose cap is written anyway (systemd: logged-in users when
    /// the config caps currencies, slices capped before).
    fn caps_without_jobs(&self, d: &D, logged_in: &[u32]) -> Vec<CurrencyId>;
    /// How a currency's hard cap is enforced, in words (`allot explain`).
    fn cap_mechanism(&self) -> &'static str;
    /// Whether login sessions are units of their own beside allot's jobs, read and weighed
    /// each tick (sessions/).
    fn has_sessions(&self) -> bool;
    /// Whether a process in another unit can be reached through the service manager
    /// (placement/reach.rs).
    fn reaches_units(&self) -> bool;
    /// `allot daemon --release`: lets go of everything allot made, for good.
    fn release(&self, d: &mut D);
    /// What is left after [`Self::release`], in words.
    fn released(&self) -> &'static str;
}
