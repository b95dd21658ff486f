//! How the rest of the daemon reaches its components: the constructor, one accessor per
//! component, and the few steps that need two components at once (a process moved by the
//! tree and proven by the host, a directory watched on the tree's controller).

use super::{Daemon, Kernel, Planned};
use crate::config::Config;
use crate::daemon::backend::Backend;
use crate::daemon::host::{Host, Proc};
use crate::daemon::memory::state::MemoryState;
use crate::daemon::observe::Observer;
use crate::daemon::placement::state::Placement;
use crate::daemon::registry::Desired;
use crate::daemon::serving::Serving;
use crate::daemon::sessions::state::Sessions;
use crate::daemon::state::Registry;
use crate::daemon::tree::{AppliedTree, MoveError};
use crate::daemon::watch::Watch;
use crate::proto::Counters;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Instant;

impl Daemon {
    /// The daemon over its parts, before anything is adopted or written (adopt.rs `start`).
    pub(in crate::daemon) fn assemble(
        cfg: Config,
        host: Box<dyn Host>,
        backend: Rc<dyn Backend<Daemon>>,
        tree: AppliedTree,
        registry: Registry,
        kernel: Kernel,
        watch: Watch,
    ) -> Self {
        let memory = MemoryState::new(tree.cg(), cfg.memory.enable);
        let io = crate::daemon::io_state::IoState::new(tree.cg());
        Self {
            placement: Placement::new(&cfg),
            sessions: Sessions::default(),
            serving: Serving::new(cfg.limits.requests_per_second, cfg.limits.request_burst),
            obs: Observer::default(),
            planned: Planned::default(),
            logout_kills: HashMap::new(),
            cfg,
            host,
            registry,
            kernel,
            watch,
            memory,
            io,
            oom_audit: Default::default(),
            tree,
            applier: Default::default(),
            pace: Default::default(),
            backend,
            scx: Default::default(),
        }
    }
    /// allot's sched_ext scheduler's runner (scx_backend.rs).
    pub fn scx(&self) -> &crate::daemon::scx::Scx {
        &self.scx
    }
    /// The runner, to start, feed, poll or stop.
    pub fn scx_mut(&mut self) -> &mut crate::daemon::scx::Scx {
        &mut self.scx
    }
    /// How allot's tree is held on this host.
    pub fn backend(&self) -> &dyn Backend<Daemon> {
        self.backend.as_ref()
    }
    /// The backend, to call with the daemon itself (`release`).
    pub fn backend_rc(&self) -> Rc<dyn Backend<Daemon>> {
        self.backend.clone()
    }
    /// The config in force.
    pub fn cfg(&self) -> &Config {
        &self.cfg
    }
    /// Puts a config in force (a reload, after its checks; tests).
    pub(in crate::daemon) fn set_cfg(&mut self, cfg: Config) {
        self.cfg = cfg;
        self.registry.clear_defaults();
    }
    /// Tests: the config in force, to change in place.
    #[cfg(test)]
    pub fn cfg_mut(&mut self) -> &mut Config {
        self.registry.clear_defaults();
        &mut self.cfg
    }
    /// Processes and threads.
    pub fn host(&self) -> &dyn Host {
        self.host.as_ref()
    }
    /// allot's cgroups and what was written to them.
    pub fn tree(&self) -> &AppliedTree {
        &self.tree
    }
    /// allot's cgroups, to write.
    pub fn tree_mut(&mut self) -> &mut AppliedTree {
        &mut self.tree
    }
    /// What users asked for.
    pub fn desired(&self) -> &Desired {
        self.registry.desired()
    }
    /// The registry of what users asked for, to change (then [`Self::save`]).
    pub fn registry_mut(&mut self) -> &mut Registry {
        &mut self.registry
    }
    /// Persists the desired state; a failure is logged (intent stays in memory) and returned.
    pub fn save(&mut self) -> Result<(), String> {
        self.registry.save()
    }
    /// What was measured.
    pub fn obs(&self) -> &Observer {
        &self.obs
    }
    /// Reads a job again at the next observation (something arrived or left).
    pub fn read_again(&mut self, id: &crate::daemon::registry::JobId) {
        self.obs.read_again(id);
    }
    /// Tracks a job just made or changed, with its threads and processes now.
    pub fn track(&mut self, id: crate::daemon::registry::JobId, threads: Vec<i32>, procs: Vec<i32>) {
        self.obs.track(id, self.cfg.half_life_ms, threads, procs);
    }
    /// Stops tracking a job (a request that could not be saved).
    pub fn untrack(&mut self, id: &crate::daemon::registry::JobId) {
        self.obs.untrack(id);
    }
    /// The last plan.
    pub fn planned(&self) -> &Planned {
        &self.planned
    }
    /// Kernel features.
    pub fn features(&self) -> &super::Features {
        self.kernel.features()
    }
    /// CPUs.
    pub fn ncpu(&self) -> usize {
        self.kernel.ncpu()
    }
    /// Tests: the kernel features, to pretend others.
    #[cfg(test)]
    pub fn features_mut(&mut self) -> &mut super::Features {
        self.kernel.features_mut()
    }
    /// Tests: a machine of `n` CPUs.
    #[cfg(test)]
    pub fn set_ncpu(&mut self, n: usize) {
        self.kernel.set_ncpu(n);
    }
    /// Sets up real-time budgets where the kernel has RT group scheduling (tree.rs), and
    /// keeps what it found for `allot status`.
    pub(in crate::daemon) fn setup_rt(&mut self) {
        let note = self.tree.rt_setup();
        self.kernel.set_rt_note(note);
        let failures = self.tree.rt_assign();
        self.report(failures);
    }
    /// Real-time group scheduling, in words.
    pub fn rt_note(&self) -> &str {
        self.kernel.rt_note()
    }
    /// Placement's memory.
    pub fn placement(&self) -> &Placement {
        &self.placement
    }
    /// Placement's memory, to change.
    pub fn placement_mut(&mut self) -> &mut Placement {
        &mut self.placement
    }
    /// Login sessions.
    pub fn sessions(&self) -> &Sessions {
        &self.sessions
    }
    /// Login sessions, to change.
    pub fn sessions_mut(&mut self) -> &mut Sessions {
        &mut self.sessions
    }
    /// Login sessions to change, beside the host that reads their threads.
    pub fn sessions_with_host(&mut self) -> (&mut Sessions, &dyn Host) {
        (&mut self.sessions, self.host.as_ref())
    }
    /// Counters, request budgets, the audit trail, the last reload.
    pub fn serving(&self) -> &Serving {
        &self.serving
    }
    /// The same, to count and record.
    pub fn serving_mut(&mut self) -> &mut Serving {
        &mut self.serving
    }
    /// Counters since start.
    pub fn counters(&self) -> &Counters {
        self.serving.counters()
    }
    /// Counters since start, to count.
    pub fn counters_mut(&mut self) -> &mut Counters {
        self.serving.counters_mut()
    }
    /// Outside changes watched.
    pub fn watch(&self) -> &Watch {
        &self.watch
    }
    /// Watches a directory of allot's tree for outside changes.
    pub fn watch_rel(&mut self, rel: &str) {
        self.watch.watch(self.tree.cg(), rel);
    }
    /// Stops watching a directory.
    pub fn unwatch_rel(&mut self, rel: &str) {
        self.watch.unwatch(rel);
    }
    /// Outside changes watched, to change.
    pub fn watch_mut(&mut self) -> &mut Watch {
        &mut self.watch
    }
    /// What is left of a job whose login session ended gets SIGKILL at `at` (logout.rs).
    pub fn kill_at(&mut self, rel: String, at: Instant) {
        self.logout_kills.insert(rel, at);
    }
    /// The jobs whose SIGKILL is due at `now`, no longer waited for.
    pub fn kills_due(&mut self, now: Instant) -> Vec<String> {
        let due: Vec<String> = self.logout_kills.iter().filter(|(_, &t)| t <= now).map(|(r, _)| r.clone()).collect();
        for r in &due {
            self.logout_kills.remove(r);
        }
        due
    }
    /// Memory by share.
    pub fn memory(&self) -> &MemoryState {
        &self.memory
    }
    /// Memory by share, to change.
    pub fn memory_mut(&mut self) -> &mut MemoryState {
        &mut self.memory
    }
    /// I/O by share's state (io.rs).
    pub fn io(&self) -> &crate::daemon::io_state::IoState {
        &self.io
    }
    /// I/O by share's state, to change.
    pub fn io_mut(&mut self) -> &mut crate::daemon::io_state::IoState {
        &mut self.io
    }
    /// The OOM decisions' audit limiter (oom_audit.rs).
    pub fn oom_audit_mut(&mut self) -> &mut crate::daemon::oom_audit::OomAudit {
        &mut self.oom_audit
    }
    /// Moves a held process into `rel`, proving it is the process held (tree.rs).
    pub fn move_verified(&mut self, p: &Proc, rel: &str) -> Result<(), MoveError> {
        self.tree.move_verified(self.host.as_ref(), p, rel)
    }
}
