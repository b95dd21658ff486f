//! A systemd host whose /sys/fs/cgroup is not cgroup2 (hybrid or legacy: RHEL 8, Ubuntu
//! 20.04): the same units and the same delegation rules as on cgroup v2, in the v1 cpu
//! hierarchy (docs/systemd.md, "hybrid and v1 hosts").
//!
//! - systemd realizes a unit with `Delegate=` in every controller hierarchy it delegates,
//!   at the same path as its `ControlGroup`: allot's scopes and their slices exist in the
//!   `cpu,cpuacct` hierarchy, and allot's job directories are made there, inside them.
//! - Inside a scope allot writes the v1 files itself, as its raw v1 backend does
//!   ([`V1`]): `cpu.shares` for a job's tickets, `cpu.cfs_quota_us`/`cpu.cfs_period_us`
//!   for its cap, `cpuacct.usage` read for its usage, `tasks` for its threads.
//! - A slice's funding stays `CPUWeight=` and its cap `CPUQuota=`, over D-Bus: systemd
//!   writes them to the slice's `cpu.shares` (weight × 1024 / 100) and cfs quota
//!   (src/core/cgroup.c, `cgroup_cpu_weight_to_shares`). `CPUWeight=idle` has no v1 file:
//!   systemd writes the smallest `cpu.shares`, 2, so the background slice weighs 2 against
//!   1024 (about 0.2% of a contended CPU), not SCHED_IDLE.
//! - A process comes into a scope through AttachProcessesToUnit at the scope's top (the
//!   job directories exist only in the cpu hierarchy, not in the hierarchy systemd tracks
//!   units in), then into its job by a write to `cgroup.procs` inside the delegation.
//! - Which users are logged in is read from systemd's own hierarchy (the unified one
//!   under /sys/fs/cgroup/unified, or name=systemd), where every unit has a cgroup.

use super::{State, SystemdTree};
use crate::cgroup::{parse_mountinfo, CpuController, Max, V1};
use crate::ipc::systemd_bus::holder::Holder;
use crate::ipc::systemd_bus::Systemd;
use crate::{read, read_u64, write, Error, Result};
use std::path::{Path, PathBuf};

/// Where allot works on a hybrid or v1 systemd host, from /proc/self/mountinfo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LegacyMounts {
    /// The v1 hierarchy with the cpu controller (and cpuacct beside it).
    pub cpu: PathBuf,
    /// The hierarchy systemd tracks its units in: the cgroup2 mount (hybrid), else the
    /// `name=systemd` one (legacy).
    pub track: PathBuf,
    /// Its line in /proc/PID/cgroup: None for the cgroup2 one (`0::`), else `name=systemd`.
    pub track_line: Option<&'static str>,
}

fn refuse(why: &str) -> Error {
    Error::NoCpuController(format!(
        "systemd runs this host and /sys/fs/cgroup is not a cgroup2 mount (cgroup v1 or hybrid), and {why}: allot works here only inside systemd's delegated units in the v1 cpu hierarchy, never at the root of a hierarchy systemd manages (docs/systemd.md, hybrid and v1 hosts)"
    ))
}

/// The cpu hierarchy and systemd's own hierarchy on a systemd host without cgroup2 at
/// /sys/fs/cgroup; one error naming what is missing when allot cannot work there.
pub fn legacy_mounts(mountinfo: &str) -> Result<LegacyMounts> {
    let mounts = parse_mountinfo(mountinfo);
    let has = |opts: &str, c: &str| opts.split(',').any(|o| o == c);
    let Some(cpu) = mounts.iter().find(|m| m.fstype == "cgroup" && has(&m.options, "cpu")) else {
        return Err(refuse("no cgroup v1 hierarchy has the cpu controller (none in /proc/self/mountinfo; is it disabled with cgroup_no_v1=cpu?)"));
    };
    if !has(&cpu.options, "cpuacct") {
        return Err(refuse(&format!(
            "the cpu controller at {} is mounted without cpuacct (options {}): systemd mounts them together, and allot reads a job's usage from cpuacct.usage beside its cpu.shares",
            cpu.point, cpu.options
        )));
    }
    let track = mounts
        .iter()
        .find(|m| m.fstype == "cgroup2")
        .or_else(|| mounts.iter().find(|m| m.fstype == "cgroup" && has(&m.options, "name=systemd")))
        .ok_or_else(|| refuse("neither a cgroup2 mount nor a name=systemd hierarchy is mounted, so systemd's units cannot be seen"))?;
    let track_line = (track.fstype != "cgroup2").then_some("name=systemd");
    Ok(LegacyMounts { cpu: PathBuf::from(&cpu.point), track: PathBuf::from(&track.point), track_line })
}

impl SystemdTree {
    /// Connects to systemd on a hybrid or v1 host and finds this root's scopes in the v1
    /// cpu hierarchy. `root` as in [`SystemdTree::new`].
    pub fn legacy(root: &str, holder: Holder) -> Result<Self> {
        super::super::check_name(root)?;
        let m = legacy_mounts(&read("/proc/self/mountinfo")?)?;
        Self::with_manager(root, m.cpu.clone(), holder, Box::new(Systemd::connect()?)).map(|t| t.on_legacy(&m))
    }

    /// This tree in the v1 cpu hierarchy at its mount, systemd's units seen in `m.track`.
    pub fn on_legacy(mut self, m: &LegacyMounts) -> Self {
        self.v1 = Some(V1::new(self.mount.clone(), None, ""));
        self.track = m.track.clone();
        self.track_line = m.track_line;
        self
    }

    /// True on a hybrid or v1 host.
    pub fn is_legacy(&self) -> bool {
        self.v1.is_some()
    }

    /// A process's cgroup in the hierarchy allot's job directories are in: the cpu one on
    /// a hybrid or v1 host (in systemd's own a job's process is at its scope's top).
    pub(super) fn job_path_of(&self, pid: i32) -> Result<String> {
        crate::process::procfs::cgroup_of(pid, if self.is_legacy() { Some("cpu") } else { self.track_line })
    }

    /// A directory's path below the cpu mount, as [`V1`] rooted there takes it.
    fn below(&self, dir: &Path) -> String {
        dir.strip_prefix(&self.mount).unwrap_or(dir).to_string_lossy().into_owned()
    }

    /// The usage of a directory of allot's, ns: `cpu.stat`'s `usage_usec`, or v1's
    /// `cpuacct.usage`.
    pub(super) fn stat_usage(&self, dir: &Path) -> Result<u64> {
        if let Some(v1) = &self.v1 {
            return v1.usage_ns(&self.below(dir));
        }
        let p = dir.join("cpu.stat");
        crate::cgroup::stat::parse_usage(&p, &self.counters.read(&p)?)
    }

    /// Writes a job directory's weight (allot units): `cpu.weight`, or v1's `cpu.shares`.
    pub(super) fn write_weight(&self, dir: &Path, units: u32) -> Result<()> {
        match &self.v1 {
            Some(v1) => v1.set_weight(&self.below(dir), units),
            None => write(dir.join("cpu.weight"), &units.to_string()),
        }
    }

    /// Reads a weight in allot units, from a job's directory or what systemd wrote for a
    /// slice's `CPUWeight=`.
    pub(super) fn read_weight(&self, dir: &Path) -> Result<u32> {
        match &self.v1 {
            Some(v1) => v1.weight(&self.below(dir)),
            None => Ok(read_u64(dir.join("cpu.weight"))?.clamp(1, 10000) as u32),
        }
    }

    /// Writes a job directory's cap: `cpu.max`, or v1's cfs quota and period.
    pub(super) fn write_max(&self, dir: &Path, max: Option<Max>) -> Result<()> {
        if let Some(v1) = &self.v1 {
            return v1.set_max(&self.below(dir), max);
        }
        let v = max.map_or("max".to_string(), |m| format!("{} {}", m.quota_us, m.period_us));
        write(dir.join("cpu.max"), &v)
    }

    /// Reads a cap, from a job's directory or what systemd wrote for a slice's `CPUQuota=`.
    pub(super) fn read_max(&self, dir: &Path) -> Result<Option<Max>> {
        if let Some(v1) = &self.v1 {
            return v1.max(&self.below(dir));
        }
        crate::cgroup::v2::read_cpu_max(&dir.join("cpu.max"))
    }

    /// A directory's threads: `cgroup.threads`, or v1's `tasks`.
    pub(super) fn read_threads(&self, dir: &Path) -> Result<Vec<i32>> {
        let f = if self.v1.is_some() { "tasks" } else { "cgroup.threads" };
        Ok(read(dir.join(f))?.lines().filter_map(|l| l.trim().parse().ok()).collect())
    }

    /// Moves `pid`, outside allot's scopes, into `sub` of the scope `unit` at `dir`
    /// through systemd: on v2 straight into `sub`; on v1 systemd takes it to the scope's
    /// top (the only cgroup of the scope in the hierarchy systemd tracks units in), and
    /// allot moves it on inside its delegation.
    pub(super) fn attach_into(&self, st: &mut State, unit: &str, dir: &Path, sub: &str, pid: i32) -> Result<()> {
        if self.v1.is_none() {
            return st.sd.attach(unit, &format!("/{}", sub.trim_start_matches('/')), &[pid as u32]);
        }
        st.sd.attach(unit, "", &[pid as u32])?;
        let sub = sub.trim_start_matches('/');
        if sub.is_empty() {
            return Ok(());
        }
        write(dir.join(sub).join("cgroup.procs"), &pid.to_string())
    }

    /// Kills every process in a job's directory: `cgroup.kill`, or on v1 (which has none)
    /// SIGKILL to each process listed, through a pidfd opened before the directory is
    /// listed again (a pid reused meanwhile is never signalled), until none is left (a fork
    /// between the listing and the kill is listed next time). Another user's process
    /// takes CAP_KILL, which the shipped unit does not grant: refused at the first such
    /// process, with the error saying so (docs/systemd.md, hybrid and v1 hosts).
    pub(super) fn kill_in(&self, rel: &str) -> Result<()> {
        if self.v1.is_none() {
            return write(self.dir(rel).join("cgroup.kill"), "1");
        }
        for _ in 0..KILL_ROUNDS {
            let pids = self.procs(rel)?;
            if pids.is_empty() {
                return Ok(());
            }
            // Each pid opened, then the directory listed again: a pid still listed there
            // whose pidfd's process lives is that process (a live process's pid names no
            // other).
            let fds: Vec<(i32, crate::process::pidfd::PidFd)> =
                pids.into_iter().filter_map(|p| Some((p, crate::process::pidfd::PidFd::open(p).ok()?))).collect();
            let still = self.procs(rel)?;
            let live: Vec<_> = fds.into_iter().filter(|(pid, fd)| still.contains(pid) && fd.alive()).collect();
            if live.is_empty() {
                return Ok(());
            }
            for (pid, fd) in live {
                if let Err(e) = fd.signal(libc::SIGKILL) {
                    return Err(Error::Sys {
                        call: format!("kill process {pid} of {rel}"),
                        source: std::io::Error::other(format!(
                            "{e}: cgroup v1 has no cgroup.kill, and signalling another user's process takes CAP_KILL, which allot.service does not grant (docs/systemd.md, hybrid and v1 hosts)"
                        )),
                    });
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        Err(Error::Sys {
            call: format!("kill the processes of {rel}"),
            source: std::io::Error::other(format!("some were still there after {KILL_ROUNDS} rounds")),
        })
    }
}

/// How many listings [`SystemdTree::kill_in`] takes on v1 before it gives up.
const KILL_ROUNDS: u32 = 50;

#[cfg(test)]
#[path = "legacy_tests.rs"]
mod tests;
