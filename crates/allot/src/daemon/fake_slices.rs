//! The fake kernel's users' slices on a systemd host, for the memory step's tests: what
//! each slice holds, who is logged in, and every memory property sent, as systemd would
//! take them (held back and "unset" are allot-linux's, tested there against a fake systemd).
//! fake.rs's `FakeCg` answers the memory step's questions from here.

use allot_linux::cgroup::systemd::SliceProp;
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
    /// The machine's MemAvailable (None: not read).
    pub mem_available: Option<u64>,
    /// The limits above `user.slice` (a container's).
    pub above: allot_linux::cgroup::memory::Bound,
    /// Sent, in order: `unit Property=bytes` (`none`: unset).
    pub sent: Vec<String>,
    /// Properties now, by `(currency path or user.slice, property)`.
    pub props: BTreeMap<(String, &'static str), u64>,
    /// memory_recursiveprot.
    pub recursive: bool,
    /// Memory and I/O pressure per currency path.
    pub pressure: BTreeMap<String, allot_linux::cgroup::io::CgroupPressure>,
    /// Currency paths whose slice is not running (its cgroup is gone: reading it fails).
    pub stopped: std::collections::BTreeSet<String>,
    /// Jobs' own caps now, by job path: `(memory.high, memory.max)` (None: max).
    pub jobs: BTreeMap<String, (Option<u64>, Option<u64>)>,
    /// Job paths whose scope does not delegate memory (a write there is refused).
    pub undelegated: std::collections::BTreeSet<String>,
}

impl SliceMem {
    pub(super) fn send(&mut self, unit: &str, p: SliceProp, v: Option<u64>) {
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

    /// A job's caps written in its directory, as the kernel keeps them; each write is
    /// logged in `sent` as `job REL memory.high=..,memory.max=..` (or `job REL refused`).
    pub(super) fn job(&mut self, rel: &str, high: Option<u64>, max: Option<u64>) -> allot_linux::Result<()> {
        self.delegated(rel, "enable the memory controller for")?;
        let t = |v: Option<u64>| v.map_or("max".into(), |b| b.to_string());
        self.sent.push(format!("job {rel} memory.high={},memory.max={}", t(high), t(max)));
        self.jobs.insert(rel.to_string(), (high, max));
        Ok(())
    }

    /// A job's `memory.oom.group`, logged as `job REL memory.oom.group=0|1` (or refused).
    pub(super) fn oom_group(&mut self, rel: &str, whole: bool) -> allot_linux::Result<()> {
        self.delegated(rel, "write memory.oom.group of")?;
        self.sent.push(format!("job {rel} memory.oom.group={}", u8::from(whole)));
        Ok(())
    }

    /// A job in a scope that does not delegate memory takes no write: `job REL refused`.
    fn delegated(&mut self, rel: &str, call: &str) -> allot_linux::Result<()> {
        if !self.undelegated.contains(rel) {
            return Ok(());
        }
        self.sent.push(format!("job {rel} refused"));
        Err(allot_linux::Error::Sys {
            call: format!("{call} {rel}"),
            source: std::io::Error::other("the scope does not delegate the memory controller"),
        })
    }
}
