//! Start, reload and stop. At start the desired state comes only from the state file;
//! the tree is walked to find the jobs' directories (a job found in the tree but not in
//! the file is adopted with default settings: a lost file loses what it held, nothing
//! more), and every value is written once from the desired state, so no adjustment a dead
//! daemon left behind survives the restart.

use super::backend::raw::Raw;
use super::backend::systemd::Systemd;
use super::backend::Backend;
use super::core::{Daemon, Features};
use super::host::Host;
use super::placement::state::Placement;
use super::registry::{parse_leaf, Class, CurrencyId, JobSpec, BACKGROUND};
use super::tree::AppliedTree;
use super::watch::Watch;
use crate::config::Config;
use allot_linux::cgroup::CpuController;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Duration;

impl Daemon {
    /// Creates or adopts the tree. `watch`: reconcile outside changes through inotify.
    pub fn start(cg: Box<dyn CpuController>, host: Box<dyn Host>, cfg: Config, state_path: Option<PathBuf>, watch: bool) -> anyhow::Result<Self> {
        // The roots must exist before features are read from them.
        cg.create("").map_err(|e| anyhow::anyhow!("{e}"))?;
        cg.create(BACKGROUND).map_err(|e| anyhow::anyhow!("{e}"))?;
        let features = Features::detect(cg.as_ref());
        let backend = for_controller(cg.as_ref());
        if features.cpu_idle {
            cg.set_idle(BACKGROUND, true).map_err(|e| anyhow::anyhow!("{e}"))?;
        } else {
            backend.background_without_idle(cg.as_ref()).map_err(|e| anyhow::anyhow!("{e}"))?;
        }
        let (desired, legacy) = match &state_path {
            Some(p) => {
                let l = super::state::load(p)?;
                (l.desired, l.legacy)
            }
            None => Default::default(),
        };
        let kernel = super::features::Kernel::new(features, allot_linux::ncpu());
        let registry = super::state::Registry::new(desired, state_path);
        let mut d = Daemon::assemble(cfg, host, backend, AppliedTree::new(cg), registry, kernel, Watch::new(watch));
        d.setup_rt();
        d.weigh_tree();
        d.adopt(legacy);
        for rel in d.backend().roots() {
            d.watch_rel(rel);
        }
        d.undo_dynamic();
        let _ = d.save();
        Ok(d)
    }

    /// Reads the tree: every job directory is matched with the desired state.
    fn adopt(&mut self, legacy: bool) {
        let mut found = std::collections::HashSet::new();
        for class in [Class::Foreground, Class::Background] {
            let base = if class == Class::Background { BACKGROUND.to_string() } else { String::new() };
            for cdir in self.tree().cg().children(&base).unwrap_or_default() {
                if class == Class::Foreground && cdir == BACKGROUND {
                    continue;
                }
                let currency = CurrencyId::from_dir(&cdir);
                let crel = super::registry::currency_rel(class, &currency);
                self.watch_rel(&crel);
                self.tree_mut().adopted(&crel);
                for leaf in self.tree().cg().children(&crel).unwrap_or_default() {
                    let rel = format!("{crel}/{leaf}");
                    let Some((id, owner)) = parse_leaf(&currency, &leaf) else {
                        log::warn!("{rel} in allot's tree is not a job allot made; leaving it alone");
                        continue;
                    };
                    if let super::registry::JobId::Numbered(n) = id {
                        self.registry_mut().taken_id(n);
                    }
                    let bg = class == Class::Background;
                    match self.registry_mut().job_mut(&id) {
                        Some(j) if j.currency == currency && j.owner == owner => {
                            if legacy {
                                j.background = bg;
                            }
                            if j.background != bg {
                                // A move between classes was cut short: finish it.
                                let want = j.clone();
                                self.merge_into(&rel, &want);
                                continue;
                            }
                        }
                        Some(_) => {
                            log::warn!("{rel} does not match the state file's {id}; leaving it alone");
                            continue;
                        }
                        None => {
                            let mut j = JobSpec::new(id, currency.clone(), owner);
                            j.background = bg;
                            log::info!("adopted {rel} with default settings (it is not in the state file)");
                            self.registry_mut().put_job(j);
                        }
                    }
                    found.insert(id);
                    self.tree_mut().adopted(&rel);
                    self.watch_rel(&rel);
                }
            }
        }
        let missing: Vec<_> = self.desired().jobs.keys().filter(|id| !found.contains(id)).copied().collect();
        for id in missing {
            log::debug!("{id} has no directory any more (its processes ended while the daemon was down); forgetting it");
            self.registry_mut().drop_job(&id);
        }
        let failures = self.tree_mut().rt_assign();
        self.report(failures);
    }

    /// Moves the processes of a stray directory into a job's directory, then removes it.
    fn merge_into(&mut self, stray: &str, want: &JobSpec) {
        if self.make_job_dir(want).is_err() {
            return;
        }
        for pid in self.tree().cg().procs(stray).unwrap_or_default() {
            if let Ok(p) = self.host().open(pid) {
                let _ = self.move_verified(&p, &want.rel());
            }
        }
        let _ = self.tree_mut().remove(stray);
    }

    /// How often to scan /proc: `scan_ms` without process events; with them a slow safety
    /// net, every 5 minutes (a lost event is reported, ENOBUFS, and scanned for at once;
    /// at 10,000 processes a scan costs about 40 ms, 0.067% of a CPU once a minute).
    pub fn scan_interval(&self) -> Duration {
        if self.placement().events() {
            Duration::from_millis(self.cfg().scan_ms.max(300_000))
        } else {
            Duration::from_millis(self.cfg().scan_ms)
        }
    }

    /// SIGHUP: reads the config again; a bad one is logged and the old one kept. Returns
    /// why it was refused; the outcome is kept for `status` and the metrics.
    pub fn reload(&mut self, opts: &super::Options) -> Result<(), String> {
        let loaded = Config::load(&opts.config, opts.config_required);
        let time = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
        let refused = loaded.as_ref().err().map(|e| format!("{e:#}"));
        self.serving_mut().set_last_reload(crate::proto::ReloadOutcome { time, file: opts.config.display().to_string(), refused: refused.clone() });
        self.serving_mut().audit_mut().record(crate::proto::AuditRecord {
            time,
            uid: 0,
            pid: 0,
            request: format!("reload {} (SIGHUP)", opts.config.display()),
            refused: loaded.as_ref().err().map(|e| format!("{e:#}; the config in force is kept")),
            changes: vec![],
            jobs: vec![],
            owners: vec![],
        });
        match loaded {
            Ok(cfg) => {
                let events = self.placement().events();
                *self.placement_mut() = Placement::new(&cfg);
                self.placement_mut().set_events(events);
                self.serving().limits().set(cfg.limits.requests_per_second, cfg.limits.request_burst);
                self.set_cfg(cfg);
                self.weigh_tree();
                log::info!("config {} reloaded", opts.config.display());
                self.recheck_session_rules();
                self.replan();
            }
            Err(e) => log::error!("reload refused: {e:#}; the config in force is kept (a restart would fail on this file)"),
        }
        refused.map_or(Ok(()), Err)
    }

    /// allot's tree against load outside it (`[outside] weight`), where the tree is
    /// allot's own; on a systemd host that split is systemd's.
    pub fn weigh_tree(&mut self) {
        if let Some(w) = self.backend().outside_weight(self.cfg()) {
            if let Err(f) = self.tree_mut().write(&super::applied::Write::root(w)) {
                self.report(vec![f]);
            }
        }
    }

    /// `allot daemon --release`, run when allot is removed: lets go of everything allot
    /// made, for good. Its own tree (cgroup v1, v2 without systemd) is taken down, every
    /// process moved back to where placement finds them. On a systemd host no process is
    /// moved: empty jobs and scopes are removed (and the slices they started), and a scope
    /// whose job still runs loses its holder, so systemd stops it with its last process.
    pub fn release(&mut self) {
        self.backend_rc().release(self);
    }

    /// [`Self::release`] on a systemd host (backend.rs).
    pub(super) fn release_scopes(&mut self) {
        self.release_slice_job_mem();
        self.undo_dynamic();
        self.untie_all();
        for rel in self.tree_rels() {
            self.unwatch_rel(&rel);
            let empty = self.tree().cg().procs(&rel).is_ok_and(|p| p.is_empty());
            if !(empty && self.tree_mut().remove(&rel).is_ok()) {
                if let Err(e) = self.tree().cg().release(&rel) {
                    log::warn!("could not let {rel} go: {e}");
                }
            }
        }
        self.registry_mut().drop_jobs();
        let _ = self.save();
    }

    /// Every directory of allot's tree, children before parents, the root last.
    fn tree_rels(&self) -> Vec<String> {
        let mut rels: Vec<String> = vec![];
        for class in [Class::Foreground, Class::Background] {
            let base = if class == Class::Background { BACKGROUND.to_string() } else { String::new() };
            for c in self.tree().cg().children(&base).unwrap_or_default() {
                if class == Class::Foreground && c == BACKGROUND {
                    continue;
                }
                let crel = if base.is_empty() { c.clone() } else { format!("{base}/{c}") };
                for j in self.tree().cg().children(&crel).unwrap_or_default() {
                    rels.push(format!("{crel}/{j}"));
                }
                rels.push(crel);
            }
        }
        rels.push(BACKGROUND.into());
        rels.push(String::new());
        rels
    }

    /// Clean stop: every dynamic adjustment is taken back. An ephemeral tree (tests,
    /// benchmarks) is taken down, its remaining processes moved out first.
    pub fn shutdown(&mut self, ephemeral: bool) {
        self.undo_dynamic();
        if !ephemeral {
            return;
        }
        let home = self.placement().home();
        for rel in self.tree_rels() {
            for _ in 0..20 {
                let procs = self.tree().cg().procs(&rel).unwrap_or_default();
                if procs.is_empty() {
                    break;
                }
                for p in procs {
                    let _ = self.tree().cg().move_to_path(&home, p);
                }
            }
            self.unwatch_rel(&rel);
            let _ = self.tree().cg().remove(&rel);
        }
        self.registry_mut().drop_jobs();
    }
}

/// The backend for a controller, chosen once at start.
fn for_controller(cg: &dyn CpuController) -> Rc<dyn Backend<Daemon>> {
    if cg.systemd() {
        Rc::new(Systemd)
    } else {
        Rc::new(Raw)
    }
}
