//! The kernel features the daemon finds at start, and what runs degraded without each.

/// Kernel features found at start.
#[derive(Debug, Clone, Default)]
pub struct Features {
    /// cgroup cpu.idle (background).
    pub cpu_idle: bool,
    /// EEVDF per-task slices through sched_setattr (Linux 6.12+).
    pub custom_slices: bool,
    /// /proc/pressure/cpu.
    pub psi: bool,
    /// kernel.task_delayacct = 1.
    pub delay_accounting: bool,
    /// A systemd host booted v1 or hybrid, without CAP_KILL: v1 has no `cgroup.kill`, so a
    /// job from a login session cannot be ended at logout (another user's processes
    /// cannot be signalled).
    pub no_logout_kill: bool,
}

impl Features {
    /// Reads the kernel's features.
    pub fn detect(cg: &dyn allot_linux::cgroup::CpuController) -> Self {
        Self {
            cpu_idle: cg.has_idle(),
            custom_slices: allot_linux::process::sched::custom_slices_supported(),
            psi: std::path::Path::new("/proc/pressure/cpu").exists(),
            delay_accounting: std::fs::read_to_string("/proc/sys/kernel/task_delayacct").map(|s| s.trim() == "1").unwrap_or(false),
            no_logout_kill: cg.delegation().and_then(|d| d.units_mount()).is_some() && !cap_kill(),
        }
    }
    /// What is degraded, in sentences.
    pub fn degraded(&self) -> Vec<String> {
        let mut v = vec![];
        if !self.cpu_idle {
            v.push("no cpu.idle: background jobs get the smallest weight instead of idle-only CPU (weight 1; on a systemd host booted v1 or hybrid, cpu.shares 2)".into());
        }
        if !self.custom_slices {
            v.push("no custom slices (Linux < 6.12): the latency boost is by weight only".into());
        }
        if !self.psi {
            v.push("no PSI: `allot why` cannot report CPU pressure".into());
        }
        if !self.delay_accounting {
            v.push("delay accounting off: `allot why` has no worst-wait maxima (sysctl kernel.task_delayacct=1)".into());
        }
        if self.no_logout_kill {
            v.push("cgroup v1 without CAP_KILL: a job started from a login session is not ended with the session (no cgroup.kill; a drop-in can grant CAP_KILL: docs/systemd.md, hybrid and v1 hosts)".into());
        }
        v
    }
}

/// CAP_KILL's bit (linux/capability.h).
const CAP_KILL: u32 = 5;

/// Whether this process may signal any process: CAP_KILL in its effective set
/// (/proc/self/status `CapEff`, bit 5).
fn cap_kill() -> bool {
    let Ok(s) = std::fs::read_to_string("/proc/self/status") else { return false };
    s.lines().find_map(|l| l.strip_prefix("CapEff:")).and_then(|v| u64::from_str_radix(v.trim(), 16).ok()).is_some_and(|e| e >> CAP_KILL & 1 == 1)
}

/// What the daemon found about the kernel and the machine at start.
#[derive(Debug, Clone, Default)]
pub struct Kernel {
    features: Features,
    ncpu: usize,
    rt_note: String,
}

impl Kernel {
    /// The features found, on a machine of `ncpu` CPUs.
    pub fn new(features: Features, ncpu: usize) -> Self {
        Self { features, ncpu, rt_note: String::new() }
    }
    /// Kernel features.
    pub fn features(&self) -> &Features {
        &self.features
    }
    /// CPUs.
    pub fn ncpu(&self) -> usize {
        self.ncpu
    }
    /// Real-time group scheduling, in words (`allot status`).
    pub fn rt_note(&self) -> &str {
        &self.rt_note
    }
    /// Keeps what the real-time setup found.
    pub fn set_rt_note(&mut self, s: String) {
        self.rt_note = s;
    }
    /// Tests: the features, to pretend others.
    #[cfg(test)]
    pub fn features_mut(&mut self) -> &mut Features {
        &mut self.features
    }
    /// Tests: a machine of `n` CPUs.
    #[cfg(test)]
    pub fn set_ncpu(&mut self, n: usize) {
        self.ncpu = n;
    }
}
