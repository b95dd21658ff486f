//! The fake kernel's users' slices on a systemd host, for the memory step's tests: what
//! each slice holds, who is logged in, and every memory property sent, as systemd would
//! take them (held back and "unset" are allot-linux's, tested there against a fake systemd).

use super::fake::FakeCg;
use allot_linux::cgroup::systemd::{SliceMemory, SliceProp};
use std::collections::BTreeMap;

/// The slices.
#[derive(Debug, Default)]
pub struct SliceMem {
    /// Bytes charged per currency path (`user-3000`).
    pub usage: BTreeMap<String, u64>,
    /// Processes per currency path (its sessions' and allot's scope's).
    pub procs: BTreeMap<String, Vec<i32>>,
    /// Logged-in users (their slices exist).
    pub logged_in: Vec<u32>,
    /// `user.slice`'s memory.max.
    pub users_max: Option<u64>,
    /// Sent, in order: `unit Property=bytes` (`none`: unset).
    pub sent: Vec<String>,
    /// Properties now, by `(currency path or user.slice, property)`.
    pub props: BTreeMap<(String, &'static str), u64>,
    /// memory_recursiveprot.
    pub recursive: bool,
    /// Memory and I/O pressure per currency path.
    pub pressure: BTreeMap<String, allot_linux::cgroup::io::CgroupPressure>,
}

impl SliceMem {
    fn send(&mut self, unit: &str, p: SliceProp, v: Option<u64>) {
        let key = (unit.to_string(), p.name());
        if self.props.get(&key).copied() == v {
            return;
        }
        self.sent.push(format!("{unit} {}={}", p.name(), v.map_or("none".into(), |b| b.to_string())));
        match v {
            Some(b) => _ = self.props.insert(key, b),
            None => _ = self.props.remove(&key),
        }
    }
}

impl SliceMemory for FakeCg {
    fn slice_usage(&self, rel: &str) -> allot_linux::Result<u64> {
        Ok(self.w.lock().unwrap().slice_mem.usage.get(rel).copied().unwrap_or(0))
    }
    fn users_max(&self) -> allot_linux::Result<Option<u64>> {
        Ok(self.w.lock().unwrap().slice_mem.users_max)
    }
    fn set_slice_memory(&self, rel: &str, p: SliceProp, bytes: Option<u64>) -> allot_linux::Result<()> {
        self.w.lock().unwrap().slice_mem.send(rel, p, bytes);
        Ok(())
    }
    fn set_users_low(&self, bytes: Option<u64>) -> allot_linux::Result<()> {
        self.w.lock().unwrap().slice_mem.send("user.slice", SliceProp::Low, bytes);
        Ok(())
    }
    fn slice_procs(&self, rel: &str) -> allot_linux::Result<Vec<i32>> {
        Ok(self.w.lock().unwrap().slice_mem.procs.get(rel).cloned().unwrap_or_default())
    }
    fn slice_oom_kills(&self, _rel: &str) -> allot_linux::Result<u64> {
        Ok(0)
    }
    fn slice_pressure(&self, rel: &str) -> allot_linux::cgroup::io::CgroupPressure {
        self.w.lock().unwrap().slice_mem.pressure.get(rel).copied().unwrap_or_default()
    }
    fn recursive_protection(&self) -> bool {
        self.w.lock().unwrap().slice_mem.recursive
    }
    fn reset_memory(&self, rel: Option<&str>) -> allot_linux::Result<()> {
        let unit = rel.unwrap_or("user.slice").to_string();
        let mut w = self.w.lock().unwrap();
        for p in SliceProp::ALL {
            w.slice_mem.send(&unit, p, None);
        }
        Ok(())
    }
}
