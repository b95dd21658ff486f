//! The config's `[scheduler]` table: which CPU scheduler backend runs the plan, and what
//! `allot status` says about it. `kind = "cgroup"` (the default) is the cgroup CPU
//! controller, raw or through systemd; `kind = "scx"` asks for allot's sched_ext
//! scheduler (crates/allot-scx, docs/scx.md), which the daemon runs beside the cgroup
//! backend (daemon/scx_backend.rs); it is refused where the kernel has no sched_ext, with
//! the kernel's reason.

pub use allot::scheduler_view::line;
use allot_linux::process::sched_ext::ScxSupport;
use serde::{Deserialize, Serialize};

/// `[scheduler]`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Scheduler {
    /// The backend: "cgroup" or "scx".
    pub kind: Kind,
    /// How allot's sched_ext scheduler picks the next task: "stride" or "lottery".
    pub draw: Draw,
    /// Which tasks it schedules: "jobs" (allot's, a partial switch) or "all".
    pub tasks: Tasks,
}

/// Which tasks allot's sched_ext scheduler schedules (docs/scx.md, "Coexistence").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Tasks {
    /// allot's jobs' threads only (a partial switch); every other task stays in the fair
    /// class, which the kernel runs first.
    #[default]
    Jobs,
    /// Every task of the machine: a task in no job weighs its nice weight, and allot's
    /// jobs together `[outside] weight`.
    All,
}

/// How allot's sched_ext scheduler picks the next task (docs/scx.md, "The lottery mode").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Draw {
    /// Stride scheduling: deterministic, each job's share held turn by turn.
    #[default]
    Stride,
    /// Lottery scheduling: each turn a draw by shares, with compensation tickets.
    Lottery,
}

impl Scheduler {
    /// The loader's arguments: `serve`, with `--all` and `--lottery` as asked.
    pub fn serve_args(&self) -> Vec<&'static str> {
        let mut a = vec!["serve"];
        if self.tasks == Tasks::All {
            a.push("--all");
        }
        if self.draw == Draw::Lottery {
            a.push("--lottery");
        }
        a
    }
}

/// A scheduler backend.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// The cgroup CPU controller (cpu.weight, cpu.max), raw or through systemd.
    #[default]
    Cgroup,
    /// allot's sched_ext scheduler (a BPF program; Linux 6.12+ with sched_ext).
    Scx,
}

/// Refuses a backend this kernel cannot run. Err: the setting's dotted path and why,
/// with what is allowed.
pub fn check(s: &Scheduler, scx: &ScxSupport) -> Result<(), (String, String)> {
    match s.kind {
        Kind::Scx if !scx.available => {
            Err(("scheduler.kind".into(), format!("scheduler.kind = \"scx\" needs sched_ext, and {}; use kind = \"cgroup\" (docs/scx.md)", scx.why)))
        }
        Kind::Cgroup | Kind::Scx => Ok(()),
    }
}

/// What the kernel offers, read once per process (the kernel does not change under it).
pub fn support() -> &'static ScxSupport {
    static ONCE: std::sync::OnceLock<ScxSupport> = std::sync::OnceLock::new();
    ONCE.get_or_init(allot_linux::process::sched_ext::detect)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use allot::scheduler_view::SchedulerView;

    fn no() -> ScxSupport {
        ScxSupport {
            available: false,
            why: "kernel 6.18.44 was built without sched_ext (CONFIG_SCHED_CLASS_EXT is not set in /proc/config.gz)".into(),
        }
    }

    #[test]
    fn cgroup_is_the_default_and_scx_is_read() {
        assert_eq!(Config::parse("t.toml".as_ref(), "").unwrap().scheduler.kind, Kind::Cgroup);
        assert_eq!(Config::parse("t.toml".as_ref(), "[scheduler]\nkind = \"cgroup\"\n").unwrap().scheduler.kind, Kind::Cgroup);
        let e = Config::parse("t.toml".as_ref(), "[scheduler]\nkind = \"eevdf\"\n").unwrap_err().to_string();
        assert!(e.contains("t.toml:2") && e.contains("eevdf") && e.contains("cgroup") && e.contains("scx"), "{e}");
    }

    #[test]
    fn stride_is_the_default_draw_and_lottery_is_read() {
        assert_eq!(Config::parse("t.toml".as_ref(), "").unwrap().scheduler.draw, Draw::Stride);
        assert_eq!(Config::parse("t.toml".as_ref(), "[scheduler]\ndraw = \"lottery\"\n").unwrap().scheduler.draw, Draw::Lottery);
        assert_eq!(Scheduler { draw: Draw::Lottery, ..Scheduler::default() }.serve_args(), ["serve", "--lottery"]);
        assert_eq!(Scheduler::default().serve_args(), ["serve"]);
        let e = Config::parse("t.toml".as_ref(), "[scheduler]\ndraw = \"random\"\n").unwrap_err().to_string();
        assert!(e.contains("t.toml:2") && e.contains("random") && e.contains("stride") && e.contains("lottery"), "{e}");
    }

    #[test]
    fn jobs_are_the_default_tasks_and_all_is_read() {
        assert_eq!(Config::parse("t.toml".as_ref(), "").unwrap().scheduler.tasks, Tasks::Jobs);
        let c = Config::parse("t.toml".as_ref(), "[scheduler]\ntasks = \"all\"\ndraw = \"lottery\"\n").unwrap();
        assert_eq!(c.scheduler.tasks, Tasks::All);
        assert_eq!(c.scheduler.serve_args(), ["serve", "--all", "--lottery"]);
        assert_eq!(Scheduler { tasks: Tasks::All, ..Scheduler::default() }.serve_args(), ["serve", "--all"]);
        let e = Config::parse("t.toml".as_ref(), "[scheduler]\ntasks = \"some\"\n").unwrap_err().to_string();
        assert!(e.contains("t.toml:2") && e.contains("some") && e.contains("jobs") && e.contains("all"), "{e}");
    }

    #[test]
    fn scx_is_refused_with_the_kernels_reason() {
        let scx = Scheduler { kind: Kind::Scx, ..Scheduler::default() };
        let (key, msg) = check(&scx, &no()).unwrap_err();
        assert_eq!(key, "scheduler.kind");
        assert!(msg.contains("needs sched_ext") && msg.contains("CONFIG_SCHED_CLASS_EXT is not set") && msg.contains("kind = \"cgroup\""), "{msg}");
        // with sched_ext, taken: the daemon runs it (daemon/scx_backend.rs)
        let yes = ScxSupport { available: true, why: "kernel 7.2.13 has sched_ext (no BPF scheduler loaded)".into() };
        assert!(check(&scx, &yes).is_ok());
        assert!(check(&Scheduler::default(), &no()).is_ok());
        // through the loader, at its line, on whatever kernel runs the test
        match Config::parse("t.toml".as_ref(), "tick_ms = 100\n[scheduler]\nkind = \"scx\"\n") {
            Ok(c) => assert!(support().available && c.scheduler.kind == Kind::Scx),
            Err(e) => assert!(!support().available && e.to_string().starts_with("t.toml:3: scheduler.kind = \"scx\" needs sched_ext"), "{e}"),
        }
    }

    #[test]
    fn status_says_why() {
        let v = SchedulerView { kind: "cgroup".into(), sched_ext: false, sched_ext_why: no().why, ..Default::default() };
        assert_eq!(
            line(&v),
            "scheduler         cgroup (sched_ext unavailable: kernel 6.18.44 was built without sched_ext (CONFIG_SCHED_CLASS_EXT is not set in /proc/config.gz))"
        );
        let json = serde_json::to_value(&v).unwrap();
        assert_eq!((json["kind"].as_str(), json["sched_ext"].as_bool(), json["scx_loaded"].as_bool()), (Some("cgroup"), Some(false), Some(false)));
        assert!(line(&SchedulerView::default()).contains("not reported"));
        // a daemon from before the scx fields still reads
        let old: SchedulerView = serde_json::from_str(r#"{"kind":"cgroup","sched_ext":true,"sched_ext_why":"x"}"#).unwrap();
        assert!(line(&old).contains("sched_ext available but not used: x"));
        // the BPF scheduler's own words, when the config asks for it
        let fell = SchedulerView { scx: "scx fell back at 19:56:10 UTC: ejected by the kernel: 67 sysrq-S: disabled by sysrq-S".into(), ..old };
        assert_eq!(line(&fell), "scheduler         cgroup (scx fell back at 19:56:10 UTC: ejected by the kernel: 67 sysrq-S: disabled by sysrq-S)");
    }
}
