//! The scheduler as `allot status` reports it: a part of the protocol's status reply,
//! and its line (the daemon's scx_backend.rs decides what goes in it).
use serde::{Deserialize, Serialize};

/// The scheduler as `allot status` shows it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SchedulerView {
    /// The backend running the plan now: "cgroup" or "scx".
    pub kind: String,
    /// Whether this kernel can run a sched_ext scheduler.
    pub sched_ext: bool,
    /// What was found: why sched_ext is unavailable, or that it is there.
    pub sched_ext_why: String,
    /// allot's BPF scheduler, when the config asks for it: loading, loaded since when, or
    /// when and why it fell back to the cgroup backend. Empty: not asked for.
    #[serde(default)]
    pub scx: String,
    /// allot's BPF scheduler is loaded now.
    #[serde(default)]
    pub scx_loaded: bool,
    /// Times it left after loading without being asked (ejected by the kernel).
    #[serde(default)]
    pub scx_ejections: u64,
}

/// `allot status`'s line.
pub fn line(v: &SchedulerView) -> String {
    if v.kind.is_empty() {
        return "scheduler         (not reported by this daemon)".into();
    }
    if !v.scx.is_empty() {
        return format!("scheduler         {} ({})", v.kind, v.scx);
    }
    let scx = if v.sched_ext {
        format!("sched_ext available but not used: {}", v.sched_ext_why)
    } else {
        format!("sched_ext unavailable: {}", v.sched_ext_why)
    };
    format!("scheduler         {} ({scx})", v.kind)
}
