//! Memory by share on a systemd host: a currency's slice (`user-UID.slice`, a named
//! currency's `user-<root>_<name>.slice`) gets its protection and memory caps through
//! systemd's API (SetUnitProperties, runtime: `MemoryLow=`, `MemoryHigh=`, `MemoryMax=`),
//! never by writing a cgroup file systemd made; what a slice holds is read from its
//! `memory.current`, which anyone may read.
//!
//! `MemoryLow=` protects only under ancestors that carry a protection too
//! (systemd.resource-control(5): "it is generally required to set a corresponding
//! allocation on all ancestors"; the kernel's effective low is bounded by the parent's),
//! so `user.slice`, the parent of every currency's slice, gets the sum of the slices'
//! protections. Below a slice the protection reaches its sessions' and allot's scopes,
//! which set none of their own, only where the cgroup2 mount has `memory_recursiveprot`
//! (systemd mounts it so from 248 on kernels that have it, 5.7 and later).
//!
//! Values are sent in whole MiB, only when changed, and at most once a second per
//! property of a slice (the [`Limiter`](super::names::Limiter) that bounds CPUWeight writes); a held value goes
//! out from [`SystemdTree::memory_upkeep`].

use super::names::{Offer, Place};
use super::{State, SystemdTree};
use crate::ipc::dbus::Value;
use crate::ipc::systemd_bus::prop;
use crate::{read, read_u64, Error, Result};
use std::time::Instant;

/// The slice holding every user's slice.
pub const USERS_SLICE: &str = "user.slice";

/// The limiter's value for "unset" (`infinity`); a cap that large is none.
const UNSET: u32 = u32::MAX;

/// One memory property of a slice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SliceProp {
    /// `MemoryLow=`: best-effort protection (the plan's protection).
    Low,
    /// `MemoryHigh=`: throttled and reclaimed above it (a soft memory cap).
    High,
    /// `MemoryMax=`: never more (a hard memory cap).
    Max,
    /// `IOWeight=`: the slice's I/O weight, 1..10000 (I/O by share; not bytes: the weight).
    IoWeight,
}

impl SliceProp {
    /// Every property allot sends to a slice.
    pub const ALL: [SliceProp; 4] = [SliceProp::Low, SliceProp::High, SliceProp::Max, SliceProp::IoWeight];

    /// A value as the limiter keeps it ([`UNSET`]: none): memory in whole MiB
    /// ([`to_mib`]), an I/O weight as itself, in systemd's range 1..10000.
    pub fn units(self, v: Option<u64>) -> u32 {
        match (self, v) {
            (SliceProp::IoWeight, Some(w)) => w.clamp(1, 10_000) as u32,
            (_, v) => to_mib(v),
        }
    }

    /// The property's name as systemd takes it.
    pub fn name(self) -> &'static str {
        match self {
            SliceProp::Low => "MemoryLow",
            SliceProp::High => "MemoryHigh",
            SliceProp::Max => "MemoryMax",
            SliceProp::IoWeight => "IOWeight",
        }
    }

    /// The property over D-Bus, from a value in MiB ([`UNSET`]: none): a `t` of bytes,
    /// u64::MAX (`infinity`) unsets a cap, 0 a protection; an I/O weight is the weight,
    /// and u64::MAX unsets it (systemd's "no weight": the kernel's default).
    pub fn prop(self, mib: u32) -> Value {
        let t = match (self, mib) {
            (SliceProp::Low, UNSET) => 0,
            (_, UNSET) => u64::MAX,
            (SliceProp::IoWeight, w) => w as u64,
            (_, m) => (m as u64) << 20,
        };
        prop(self.name(), Value::U64(t))
    }
}

/// Bytes as the limiter's whole MiB (None: [`UNSET`]).
pub fn to_mib(bytes: Option<u64>) -> u32 {
    match bytes {
        None => UNSET,
        Some(b) => (b >> 20).min(UNSET as u64 - 1) as u32,
    }
}

/// Memory by share on the slices of a systemd host, as the daemon asks it
/// ([`crate::cgroup::CpuController::slice_memory`]). `rel` is a currency's path
/// (`user-1000`, `ci`).
pub trait SliceMemory: Send + Sync + std::fmt::Debug {
    /// Bytes charged to the currency's slice and everything in it (`memory.current`).
    fn slice_usage(&self, rel: &str) -> Result<u64>;
    /// The hard limit on all users together (`user.slice`'s `memory.max`); None: none.
    fn users_max(&self) -> Result<Option<u64>>;
    /// The limits above `user.slice`, as far up as the cgroup2 mount shows them: in a
    /// container running systemd, the container's own ([`crate::cgroup::memory::Bound`]).
    fn above_users(&self) -> crate::cgroup::memory::Bound {
        crate::cgroup::memory::Bound::default()
    }
    /// What the machine can still give without swapping (`MemAvailable` in /proc/meminfo):
    /// with the users' charges, what they may hold together before it runs short.
    fn mem_available(&self) -> Result<u64> {
        crate::cgroup::memory::mem_available()
    }
    /// Sets one property of the currency's slice (None: unset): memory in bytes, or its
    /// `IOWeight=` ([`SliceProp::units`]). Sent only when it differs from what was sent,
    /// at most once a second.
    fn set_slice_memory(&self, rel: &str, p: SliceProp, bytes: Option<u64>) -> Result<()>;
    /// `user.slice`'s `MemoryLow=`: the sum of the slices' protections (None: unset).
    fn set_users_low(&self, bytes: Option<u64>) -> Result<()>;
    /// Every process in the currency's slice: its login sessions, its user manager and
    /// allot's scope (the `cgroup.procs` of every cgroup below it).
    fn slice_procs(&self, rel: &str) -> Result<Vec<i32>>;
    /// OOM kills in the slice (`memory.events` oom_kill: hierarchical).
    fn slice_oom_kills(&self, rel: &str) -> Result<u64>;
    /// The slice's memory and I/O pressure (`memory.pressure`, `io.pressure`: PSI of
    /// everything in it); none where the kernel has none or a file does not parse.
    fn slice_pressure(&self, rel: &str) -> crate::cgroup::io::CgroupPressure;
    /// Whether a slice's protection reaches the scopes in it (`memory_recursiveprot`).
    fn recursive_protection(&self) -> bool;
    /// Takes back now, not held back (allot is stopping), every property allot sent to
    /// the currency's slice (`rel`), or to `user.slice` (None): a protection to 0, a cap
    /// to `infinity`, an I/O weight to none. What allot never sent is left as it is.
    fn reset_memory(&self, rel: Option<&str>) -> Result<()>;
    /// A job's own memory caps in its directory inside allot's scope (`rel`: a job's
    /// path): `high` its `memory.high`, `max` its `memory.max`, None no limit
    /// (job_memory.rs: a job is no unit; the scope delegates memory).
    fn set_job_memory(&self, rel: &str, high: Option<u64>, max: Option<u64>) -> Result<()>;
    /// A job's `memory.oom.group` in its directory inside allot's scope (`whole`: an OOM
    /// kill in the job kills all of it; false: the kernel's default, one process).
    fn set_job_oom_group(&self, rel: &str, whole: bool) -> Result<()>;
    /// Bytes charged to a job (its `memory.current`).
    fn job_usage(&self, rel: &str) -> Result<u64>;
}

/// Whether /proc/self/mountinfo's cgroup2 mount at `mount` has `memory_recursiveprot`
/// among its super options (the fields after ` - `: type, source, options).
pub fn has_recursiveprot(mountinfo: &str, mount: &str) -> bool {
    mountinfo.lines().any(|l| {
        let mut f = l.split(' ');
        let at = f.nth(4);
        let Some((_, sup)) = l.split_once(" - ") else { return false };
        let mut s = sup.split(' ');
        at == Some(mount) && s.next() == Some("cgroup2") && s.nth(1).is_some_and(|o| o.split(',').any(|o| o == "memory_recursiveprot"))
    })
}

impl SystemdTree {
    /// The slice of currency `rel` (a currency's path), or the background's slice
    /// (`background`: only its `IOWeight=` is sent there).
    fn currency_slice(&self, rel: &str) -> Result<String> {
        match Self::place(rel)? {
            Place::Scope(key) => Ok(self.names.slice(&key)),
            _ => Err(Error::Sys {
                call: format!("find the slice of {rel:?}"),
                source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "memory is shared by currency: a currency's path (user-1000, ci)"),
            }),
        }
    }

    fn slice_file(&self, rel: &str, file: &str) -> Result<std::path::PathBuf> {
        let slice = self.currency_slice(rel)?;
        Ok(self.slice_dir(&mut self.lock(), &slice)?.join(file))
    }

    /// Offers `mib` for `unit`'s property `p` under limiter key `key`, sending it now when due.
    /// "Unset" is sent only over a value allot sent: a slice's own value (an
    /// administrator's `user-.slice.d/` drop-in) is never overridden by nothing.
    fn offer_memory(&self, st: &mut State, key: &str, unit: &str, p: SliceProp, mib: u32) -> Result<()> {
        if mib == UNSET && st.mem_limiter.sent_value(key).is_none() && st.mem_limiter.pending(key).is_none() {
            return Ok(());
        }
        match st.mem_limiter.offer(key, mib, Instant::now()) {
            Offer::Same | Offer::Held => Ok(()),
            Offer::Send => self.send_memory(st, key, unit, p, mib),
        }
    }

    fn send_memory(&self, st: &mut State, key: &str, unit: &str, p: SliceProp, mib: u32) -> Result<()> {
        match st.sd.set_properties(unit, true, vec![p.prop(mib)]) {
            Ok(()) => {
                st.mem_limiter.sent(key, mib, Instant::now());
                Ok(())
            }
            Err(e) => {
                st.mem_limiter.failed(key);
                Err(e)
            }
        }
    }

    /// Sends the memory properties a rate limit held back (called from upkeep).
    pub(super) fn memory_upkeep(&self, st: &mut State, now: Instant, errs: &mut Vec<(String, Error)>) {
        for (key, mib) in st.mem_limiter.due(now) {
            let Some((unit, name)) = key.split_once('#') else { continue };
            let p = SliceProp::ALL.into_iter().find(|p| p.name() == name);
            let Some(p) = p else { continue };
            if let Err(e) = self.send_memory(st, &key, unit, p, mib) {
                errs.push((key.clone(), e));
            }
        }
    }
}

impl SliceMemory for SystemdTree {
    fn slice_usage(&self, rel: &str) -> Result<u64> {
        read_u64(self.slice_file(rel, "memory.current")?)
    }
    fn users_max(&self) -> Result<Option<u64>> {
        let p = self.slice_dir(&mut self.lock(), USERS_SLICE)?.join("memory.max");
        let s = read(&p)?;
        match s.trim() {
            "max" => Ok(None),
            t => t.parse().map(Some).map_err(|_| Error::Parse { path: p, what: "a byte count or max", text: t.chars().take(80).collect() }),
        }
    }
    fn above_users(&self) -> crate::cgroup::memory::Bound {
        match self.slice_dir(&mut self.lock(), USERS_SLICE) {
            Ok(d) => crate::cgroup::memory::bound_above(&d, &self.mount, crate::cgroup::Version::V2),
            Err(_) => Default::default(),
        }
    }
    fn set_slice_memory(&self, rel: &str, p: SliceProp, bytes: Option<u64>) -> Result<()> {
        let unit = self.currency_slice(rel)?;
        self.offer_memory(&mut self.lock(), &format!("{unit}#{}", p.name()), &unit, p, p.units(bytes))
    }
    fn set_users_low(&self, bytes: Option<u64>) -> Result<()> {
        let key = format!("{USERS_SLICE}#{}", SliceProp::Low.name());
        self.offer_memory(&mut self.lock(), &key, USERS_SLICE, SliceProp::Low, to_mib(bytes))
    }
    fn slice_procs(&self, rel: &str) -> Result<Vec<i32>> {
        let top = self.slice_file(rel, "")?;
        let mut pids = vec![];
        let mut dirs = vec![top.clone()];
        while let Some(d) = dirs.pop() {
            // A cgroup below the slice may end while it is walked (a session closing): skipped.
            match read(d.join("cgroup.procs")) {
                Ok(s) => pids.extend(s.lines().filter_map(|l| l.trim().parse::<i32>().ok())),
                Err(e) if d == top => return Err(e),
                Err(_) => {}
            }
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    dirs.push(e.path());
                }
            }
        }
        Ok(pids)
    }
    fn slice_oom_kills(&self, rel: &str) -> Result<u64> {
        let s = read(self.slice_file(rel, "memory.events")?)?;
        Ok(s.lines().find_map(|l| l.strip_prefix("oom_kill ")).and_then(|v| v.trim().parse().ok()).unwrap_or(0))
    }
    fn slice_pressure(&self, rel: &str) -> crate::cgroup::io::CgroupPressure {
        self.slice_file(rel, "").map(|d| crate::cgroup::io::cgroup_pressure(&d)).unwrap_or_default()
    }
    fn reset_memory(&self, rel: Option<&str>) -> Result<()> {
        let unit = match rel {
            None => USERS_SLICE.to_string(),
            Some(r) => self.currency_slice(r)?,
        };
        let mut st = self.lock();
        let mut props = vec![];
        for p in SliceProp::ALL {
            let key = format!("{unit}#{}", p.name());
            if st.mem_limiter.sent_value(&key).is_some_and(|v| v != UNSET) || st.mem_limiter.pending(&key).is_some() {
                props.push(p.prop(UNSET));
            }
            st.mem_limiter.forget(&key);
        }
        if props.is_empty() {
            return Ok(());
        }
        st.sd.set_properties(&unit, true, props)
    }
    fn set_job_memory(&self, rel: &str, high: Option<u64>, max: Option<u64>) -> Result<()> {
        self.job_memory(rel, high, max)
    }
    fn set_job_oom_group(&self, rel: &str, whole: bool) -> Result<()> {
        self.job_oom_group(rel, whole)
    }
    fn job_usage(&self, rel: &str) -> Result<u64> {
        self.job_memory_usage(rel)
    }
    fn recursive_protection(&self) -> bool {
        let m = self.mount.to_string_lossy();
        read("/proc/self/mountinfo").is_ok_and(|s| has_recursiveprot(&s, &m))
    }
}

#[cfg(test)]
#[path = "memory_tests.rs"]
mod tests;
