//! The scheduler as `allot status` reports it: a part of the protocol's status reply,
//! and its line (config_scheduler.rs decides what goes in it).
use serde::{Deserialize, Serialize};

/// The scheduler as `allot status` shows it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SchedulerView {
    /// The backend in use: "cgroup".
    pub kind: String,
    /// Whether this kernel can run a sched_ext scheduler.
    pub sched_ext: bool,
    /// What was found: why sched_ext is unavailable, or that it is there.
    pub sched_ext_why: String,
}

/// `allot status`'s line.
pub fn line(v: &SchedulerView) -> String {
    if v.kind.is_empty() {
        return "scheduler         (not reported by this daemon)".into();
    }
    let scx = if v.sched_ext {
        format!("sched_ext available but not used: {}", v.sched_ext_why)
    } else {
        format!("sched_ext unavailable: {}", v.sched_ext_why)
    };
    format!("scheduler         {} ({scx})", v.kind)
}
