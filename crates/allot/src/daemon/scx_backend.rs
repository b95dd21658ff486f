//! The daemon's side of the sched_ext backend (docs/scx.md): when to start and stop the
//! loader (scx.rs), the job table it is sent after each plan, and what is said when it
//! leaves: a log line with the kernel's reason, an audit record, and `allot status`'s
//! scheduler line. The cgroup backend is never stopped, so a fall back changes nothing in
//! the tree: every job, ticket, cap and setting is still written there.

use super::core::Daemon;
use super::registry::Class;
use super::scx::{utc, Change, State, TableJob};
use crate::config_scheduler::Kind;
use std::time::{Duration, SystemTime};

/// The loader: `allot-scx` beside the running `allot` (both are installed together).
pub fn loader_path() -> std::path::PathBuf {
    std::env::current_exe().map(|p| p.with_file_name("allot-scx")).unwrap_or_else(|_| "allot-scx".into())
}

impl Daemon {
    /// Starts or stops the loader as the config in force asks (at start and after a
    /// reload). A reload that still asks for scx after the scheduler fell loads it again.
    pub fn sync_scx(&mut self) {
        let want = self.cfg().scheduler.kind == Kind::Scx && crate::config_scheduler::support().available;
        let running = matches!(self.scx().state(), State::Loading | State::Loaded { .. });
        // a reload that changed [scheduler] draw or tasks, or [policy] boost_window_ms,
        // loads it again in the new mode
        let args = self.loader_args();
        if want && (!running || self.scx().args() != args) {
            self.start_scx(&loader_path());
        } else if !want && !matches!(self.scx().state(), State::Off) {
            self.stop_scx();
        }
    }

    /// The loader's arguments: `serve` with the scheduler's mode, and the boost window
    /// (`[policy] boost_window_ms`: the BPF side boosts per wakeup over it, as the plan
    /// does per tick; the table's boost= and line= are ns of CPU over it).
    pub fn loader_args(&self) -> Vec<String> {
        let mut a: Vec<String> = self.cfg().scheduler.serve_args().into_iter().map(String::from).collect();
        a.extend(["--boost-window-ms".to_string(), self.cfg().policy.boost_window_ms.to_string()]);
        a
    }

    /// Whether the loader runs with the boost window in force (or was started without one).
    pub fn loader_window_current(&self) -> bool {
        let a = self.scx().args();
        let given = a.iter().position(|x| x == "--boost-window-ms").and_then(|i| a.get(i + 1));
        given.is_none_or(|w| *w == self.cfg().policy.boost_window_ms.to_string())
    }

    /// Starts the loader at `path` (`allot-scx serve`) and sends it the table.
    pub fn start_scx(&mut self, path: &std::path::Path) {
        let args = self.loader_args();
        log::info!("scheduler: starting allot's sched_ext scheduler ({} {})", path.display(), args.join(" "));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.scx_mut().start(path, &args);
        if let State::Fallen { reason, .. } = self.scx().state().clone() {
            self.fell(reason); // could not even start it
            return;
        }
        self.feed_scx();
        self.poll_scx();
    }

    /// The job table for the scheduler: each job's cgroup directory and its share, the
    /// plan's weights flattened (`allot_model::flat`), so the scheduler and the cgroup
    /// backend divide the machine from the same decisions (the boost aside); its cap, the
    /// plan's cpu.max (a hard cap, or a soft cap the plan holds now), and its currency's
    /// hard cap, which the BPF side holds with its sinbin; its entitlement over the boost window when `[policy] boost`
    /// is on and it is a foreground job (the BPF side boosts its wakeups by it,
    /// allot_model::wake); and whether it is a background job.
    pub fn scx_table(&self) -> Vec<TableJob> {
        let planned = self.planned();
        let mut cur: Vec<(Class, &super::registry::CurrencyId)> = vec![];
        let mut rows = vec![];
        let mut flat = vec![];
        for j in self.desired().jobs.values() {
            let class = j.class();
            let currency = match cur.iter().position(|c| *c == (class, &j.currency)) {
                Some(i) => i,
                None => {
                    cur.push((class, &j.currency));
                    cur.len() - 1
                }
            };
            let currency_weight = match class {
                Class::Foreground => planned.currencies.get(&j.currency).copied().unwrap_or_else(|| self.funding_of(&j.currency)),
                Class::Background => self.funding_of(&j.currency),
            };
            // Without the plan's boost: it is decided per tick, and sent through this pipe it
            // moved shares by up to 0.05 under the stride scheduler (docs/scx.md); the BPF
            // side boosts per wakeup instead (boost_ns below).
            let weight = planned.jobs.get(&j.id).map_or(j.tickets.get(), |p| p.base_weight);
            // idle as the plan counts it: no entitlement now (allot_model::flat)
            let active = planned.jobs.get(&j.id).is_none_or(|p| p.entitlement > 0.0);
            flat.push(allot_model::flat::FlatJob { currency, currency_weight, weight, background: j.background, active });
            let cap = planned.jobs.get(&j.id).map_or_else(|| j.cap.filter(|c| c.hard).map(|c| c.cpus), |p| p.quota);
            let dir = self.tree().cg().dir(&j.rel()).display().to_string();
            let currency_cap = self.currency_cap(&j.currency).map(|c| (j.currency.dir(), c.cpus));
            rows.push((TableJob { cap, currency_cap, background: j.background, ..TableJob::new(dir, 0) }, j.focus));
        }
        let outside = self.cfg().outside.weight;
        let shares = allot_model::flat::flatten(&flat, outside);
        let (boost, below) = (self.cfg().policy.boost, self.cfg().policy.boost_below);
        let window = self.cfg().policy.boost_window_ms * 1_000_000;
        rows.into_iter()
            .zip(shares)
            .map(|((r, focus), share)| {
                let boost_ns = if boost && !r.background { allot_model::wake::entitlement_ns(share, outside, window) } else { 0 };
                let line_ns = if boost_ns > 0 { allot_model::wake::line_ns(boost_ns, below, focus, window) } else { 0 };
                TableJob { share, boost_ns, line_ns, ..r }
            })
            .collect()
    }

    /// Sends the table if the scheduler runs and the table changed (after each plan).
    /// Not to a loader started with another boost window: a reload that changed the
    /// window plans before it starts the new loader, and the table's boost= and line= are
    /// ns over the new window, which the old loader would refuse or misread.
    pub fn feed_scx(&mut self) {
        if matches!(self.scx().state(), State::Loading | State::Loaded { .. }) && self.loader_window_current() {
            let t = self.scx_table();
            self.scx_mut().feed(t);
        }
    }

    /// Hears the loader (the event loop, every 100 ms while it runs): on a fall,
    /// logs the kernel's reason and records it; the cgroup backend goes on alone.
    pub fn poll_scx(&mut self) {
        let Some(change) = self.scx_mut().poll() else { return };
        match change {
            Change::Loaded => {
                log::info!("scheduler: allot's sched_ext scheduler (allot_stride) is loaded; the cgroup weights stay written as the fallback");
                self.record_scx("scheduler scx: allot_stride loaded".to_string());
            }
            Change::Fell(why) => self.fell(why),
        }
    }

    fn fell(&mut self, why: String) {
        log::error!(
            "scheduler: allot's sched_ext scheduler left: {why}; the cgroup backend holds every job (a reload with kind = \"scx\" loads it again)"
        );
        self.record_scx(format!("scheduler scx fell back to cgroup: {why}"));
    }

    /// Stops the loader (daemon stop, or a reload to kind = "cgroup"): every task of the
    /// jobs goes back to the fair class.
    pub fn stop_scx(&mut self) {
        match self.scx().state() {
            State::Off => return,
            State::Fallen { .. } => {
                // said when it fell; a loader still cleaning up is waited for, and the
                // runner is off (a reload to kind = "cgroup" no longer speaks of it)
                self.scx_mut().stop(Duration::from_secs(5));
                return;
            }
            State::Loading | State::Loaded { .. } => {}
        }
        let last = self.scx_mut().stop(Duration::from_secs(5));
        log::info!("scheduler: allot's sched_ext scheduler stopped ({})", last.as_deref().unwrap_or("the loader said nothing"));
        self.record_scx("scheduler scx: stopped, every task back in the fair class".into());
    }

    /// `--release`: this process never starts the loader, and a loader whose daemon is gone
    /// unloads at the end of its input; if the kernel still has allot's scheduler (a
    /// loader still unloading), waits for it, up to 5 s, and says so.
    pub fn release_scx(&self) {
        let ops = || std::fs::read_to_string("/sys/kernel/sched_ext/root/ops").unwrap_or_default().trim().to_string();
        if ops() != "allot_stride" {
            return;
        }
        let t0 = std::time::Instant::now();
        while ops() == "allot_stride" && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(100));
        }
        if ops() == "allot_stride" {
            log::warn!(
                "allot's sched_ext scheduler is still loaded 5 s after --release (an allot-scx loader outlived its daemon); stop that process"
            );
        } else {
            log::info!("allot's sched_ext scheduler left with its loader ({:.1} s)", t0.elapsed().as_secs_f64());
        }
    }

    fn record_scx(&mut self, request: String) {
        let time = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
        let r = crate::proto::AuditRecord { time, uid: 0, pid: 0, request, refused: None, changes: vec![], jobs: vec![], owners: vec![] };
        self.serving_mut().audit_mut().record(r);
    }

    /// `allot status`'s scheduler: the backend running the plan and the BPF scheduler's state.
    pub fn scheduler_view(&self) -> allot::scheduler_view::SchedulerView {
        let support = crate::config_scheduler::support();
        let (kind, scx, loaded) = match self.scx().state() {
            State::Off => ("cgroup", String::new(), false),
            State::Loading => ("cgroup", "loading allot_stride".to_string(), false),
            State::Loaded { mode, since } => {
                let (m, draw, window) = loaded_mode(mode);
                ("scx", format!("allot_stride loaded since {}, {m}, {draw}{window}, {} job tables taken", utc(*since), self.scx().tables()), true)
            }
            State::Fallen { at, reason } => ("cgroup", format!("scx fell back at {}: {reason}", utc(*at)), false),
        };
        allot::scheduler_view::SchedulerView {
            kind: kind.into(),
            sched_ext: support.available,
            sched_ext_why: support.why.clone(),
            scx,
            scx_loaded: loaded,
            scx_ejections: self.scx().ejections(),
        }
    }
}

/// What `allot status` says of the loader's mode ("partial" or "all", then "lottery" in
/// the lottery mode, then "window=MSms"): the tasks it schedules, how it picks, and the
/// boost window it loaded with, as the loader said it (empty if it did not).
fn loaded_mode(mode: &str) -> (&'static str, &'static str, String) {
    let m = if mode.split(' ').next() == Some("all") { "every task" } else { "allot's jobs only (partial switch)" };
    let window =
        mode.split(' ').find_map(|w| w.strip_prefix("window=")).map_or(String::new(), |w| format!(", boost window {}", w.replace("ms", " ms")));
    (m, if mode.split(' ').any(|w| w == "lottery") { "lottery" } else { "stride" }, window)
}

#[cfg(test)]
#[test]
fn status_names_the_tasks_the_draw_and_the_window() {
    assert_eq!(loaded_mode("partial"), ("allot's jobs only (partial switch)", "stride", String::new()));
    assert_eq!(loaded_mode("all lottery"), ("every task", "lottery", String::new()));
    assert_eq!(loaded_mode("partial lottery window=100ms"), ("allot's jobs only (partial switch)", "lottery", ", boost window 100 ms".into()));
    assert_eq!(loaded_mode("all window=500ms").2, ", boost window 500 ms");
}
