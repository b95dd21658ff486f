//! A hard CPU limit as the kernel's cpu.max (v2) or cfs quota and period (v1) hold it, and
//! systemd's CPUQuota= translates it (`ipc::systemd_bus::CpuQuota`). A leaf: it imports nothing
//! of the crate, so the D-Bus side can name it without importing the cgroup backends.

/// A hard limit: `quota_us` of CPU time every `period_us`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Max {
    /// CPU time allowed per period, µs.
    pub quota_us: u64,
    /// The period, µs.
    pub period_us: u64,
}
