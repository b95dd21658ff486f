//! What the kernel gives about a task's waits on memory and I/O, per task and per cgroup,
//! for `allot why`: a thread's state and wait channel, a process's major faults, block
//! I/O delay and I/O counters, its memory cgroup's use, limit, refaults and pressure, and
//! system-wide PSI. Readers only, each bounded: a process's files are read at most
//! [`MAX_READ`] bytes, a cgroup's members at most [`MAX_MEMBERS`] pids.

use super::procfs::{parse_psi, read_prefix, Psi};
use crate::{Error, Result};
use std::path::{Path, PathBuf};

/// The most bytes read of any one file here (the largest, memory.stat, is about 1.5 KiB).
pub const MAX_READ: usize = 64 * 1024;
/// The most member pids read of a cgroup's subtree.
pub const MAX_MEMBERS: usize = 100_000;

fn text(path: &Path) -> Result<String> {
    let bytes = read_prefix(path, MAX_READ)?;
    let mut s = String::from_utf8_lossy(&bytes).into_owned();
    // Cut at the limit: a line cut in two would read as another number (a pid "12" of
    // "12345"), so the last, incomplete line is dropped.
    if bytes.len() == MAX_READ && !s.ends_with('\n') {
        s.truncate(s.rfind('\n').map_or(0, |i| i + 1));
    }
    Ok(s)
}

/// A thread's state letter and wait channel (the kernel function it sleeps in), from
/// /proc/PID/task/TID/stat and wchan. The wait channel is None while it runs, and where the
/// kernel hides it (another user's task without ptrace access reads "0").
pub fn state_and_wchan(pid: i32, tid: i32) -> Result<(char, Option<String>)> {
    let dir = PathBuf::from(format!("/proc/{pid}/task/{tid}"));
    let st = super::procfs::parse_stat(&dir.join("stat"), &text(&dir.join("stat"))?)?;
    let w = text(&dir.join("wchan")).unwrap_or_default();
    let w = w.trim();
    Ok((st.state, (!w.is_empty() && w != "0").then(|| w.chars().take(64).collect())))
}

/// A process's fault and delay counters from /proc/PID/stat (proc(5)).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Faults {
    /// Major faults (field 12), all its threads.
    pub majflt: u64,
    /// Aggregated block I/O delays, clock ticks (field 42); zero unless delay accounting
    /// is on (kernel.task_delayacct).
    pub blkio_ticks: u64,
    /// Start time since boot, clock ticks (field 22): a recycled pid has another.
    pub starttime: u64,
}

/// Parses the fields of /proc/PID/stat that [`Faults`] holds.
pub fn parse_faults(s: &str) -> Option<Faults> {
    let f: Vec<&str> = s[s.rfind(')')? + 1..].split_whitespace().collect();
    let num = |i: usize| -> Option<u64> { f.get(i - 3)?.parse().ok() };
    Some(Faults { majflt: num(12)?, blkio_ticks: num(42).unwrap_or(0), starttime: num(22)? })
}

/// Reads [`Faults`] of `pid`.
pub fn faults(pid: i32) -> Result<Faults> {
    let p = PathBuf::from(format!("/proc/{pid}/stat"));
    let s = text(&p)?;
    parse_faults(&s).ok_or_else(|| Error::Parse { path: p, what: "stat", text: s.chars().take(80).collect() })
}

/// A process's I/O counters (/proc/PID/io), bytes since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TaskIo {
    /// Read through read(2) and the like, from the page cache or not.
    pub rchar: u64,
    /// Read from the storage layer: what the page cache did not hold.
    pub read_bytes: u64,
    /// Sent to the storage layer.
    pub write_bytes: u64,
    /// Written, then truncated before it reached the storage layer.
    pub cancelled_write_bytes: u64,
}

/// Parses /proc/PID/io.
pub fn parse_io(s: &str) -> Option<TaskIo> {
    let get = |k: &str| s.lines().find_map(|l| l.strip_prefix(k)?.strip_prefix(':')?.trim().parse::<u64>().ok());
    Some(TaskIo {
        rchar: get("rchar")?,
        read_bytes: get("read_bytes")?,
        write_bytes: get("write_bytes")?,
        cancelled_write_bytes: get("cancelled_write_bytes").unwrap_or(0),
    })
}

/// Reads /proc/PID/io. Another user's process refuses it (permission denied) unless the
/// reader may ptrace it: an error, which callers report as "not readable".
pub fn io(pid: i32) -> Result<TaskIo> {
    let p = PathBuf::from(format!("/proc/{pid}/io"));
    let s = text(&p)?;
    parse_io(&s).ok_or_else(|| Error::Parse { path: p, what: "io", text: s.chars().take(80).collect() })
}

/// System-wide PSI of `resource` ("memory", "io", "cpu"); None without PSI.
pub fn psi(resource: &str) -> Option<Psi> {
    parse_psi(&text(&Path::new("/proc/pressure").join(resource)).ok()?)
}

/// A process's memory cgroup.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryCgroup {
    /// The hierarchy's mount point.
    pub mount: PathBuf,
    /// Its path in the hierarchy ("/" is the root).
    pub rel: String,
    /// The unified hierarchy (v2).
    pub v2: bool,
}

impl MemoryCgroup {
    /// Its directory.
    pub fn dir(&self) -> PathBuf {
        self.mount.join(self.rel.trim_start_matches('/'))
    }

    /// Its use and limit (None: unlimited), bytes; None where the files are not there
    /// (the root of v2 keeps no memory.max).
    pub fn usage_limit(&self, rel: &str) -> Option<(u64, Option<u64>)> {
        let d = self.mount.join(rel.trim_start_matches('/'));
        let (u, l) = if self.v2 { ("memory.current", "memory.max") } else { ("memory.usage_in_bytes", "memory.limit_in_bytes") };
        let usage = text(&d.join(u)).ok()?.trim().parse().ok()?;
        let limit = text(&d.join(l)).ok().and_then(|s| s.trim().parse::<u64>().ok()).filter(|l| *l < 1 << 60);
        Some((usage, limit))
    }

    /// The nearest cgroup from its own up whose limit is set: (path, use, limit). Reclaim
    /// for its memory happens there first. None: no limit up to the root.
    pub fn domain(&self) -> Option<(String, u64, u64)> {
        let mut rel = self.rel.clone();
        loop {
            if let Some((u, Some(l))) = self.usage_limit(&rel) {
                return Some((rel, u, l));
            }
            if rel == "/" || rel.is_empty() {
                return None;
            }
            rel = match rel.rfind('/') {
                Some(0) | None => "/".into(),
                Some(i) => rel[..i].into(),
            };
        }
    }

    /// Pages refaulted in it since it was made (memory.stat's workingset refaults, file
    /// and anonymous: v1's `total_` counters take its subtree); None where it keeps none.
    pub fn refaults(&self) -> Option<u64> {
        parse_refaults(&text(&self.dir().join("memory.stat")).ok()?, self.v2)
    }

    /// Its PSI of `resource` ("memory", "io": v2's memory.pressure, io.pressure); None
    /// where the kernel keeps none per cgroup (v1).
    pub fn pressure(&self, resource: &str) -> Option<Psi> {
        self.v2.then(|| parse_psi(&text(&self.dir().join(format!("{resource}.pressure"))).ok()?)).flatten()
    }

    /// The path of `pid`'s memory cgroup in this hierarchy (None: it is gone).
    pub fn rel_of(&self, pid: i32) -> Option<String> {
        let own = text(Path::new(&format!("/proc/{pid}/cgroup"))).ok()?;
        if self.v2 {
            own.lines().find_map(|l| l.strip_prefix("0::")).map(str::to_string)
        } else {
            super::procfs::parse_cgroup(&own, Some("memory"))
        }
    }

    /// The pids in `rel`'s subtree, at most [`MAX_MEMBERS`].
    pub fn members(&self, rel: &str) -> Vec<i32> {
        let mut out = vec![];
        let mut stack = vec![self.mount.join(rel.trim_start_matches('/'))];
        while let Some(d) = stack.pop() {
            if let Ok(s) = text(&d.join("cgroup.procs")) {
                out.extend(s.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
            }
            if out.len() >= MAX_MEMBERS {
                out.truncate(MAX_MEMBERS);
                break;
            }
            if let Ok(rd) = std::fs::read_dir(&d) {
                stack.extend(rd.flatten().filter(|e| e.file_type().is_ok_and(|t| t.is_dir())).map(|e| e.path()));
            }
        }
        out
    }
}

/// Parses memory.stat's refault counters (see [`MemoryCgroup::refaults`]).
pub fn parse_refaults(s: &str, v2: bool) -> Option<u64> {
    let prefix = if v2 { "" } else { "total_" };
    let mut found = None;
    for l in s.lines() {
        let mut f = l.split_whitespace();
        let (Some(k), Some(v)) = (f.next(), f.next().and_then(|v| v.parse::<u64>().ok())) else { continue };
        let Some(k) = k.strip_prefix(prefix) else { continue };
        // Kernels before 5.9 name one counter: workingset_refault.
        if matches!(k, "workingset_refault_file" | "workingset_refault_anon" | "workingset_refault") {
            found = Some(found.unwrap_or(0) + v);
        }
    }
    found
}

/// `pid`'s memory cgroup: its v1 memory hierarchy's, else the unified one's where memory
/// is offered there.
pub fn memory_cgroup_of(pid: i32) -> Result<Option<MemoryCgroup>> {
    let own = text(Path::new(&format!("/proc/{pid}/cgroup")))?;
    if let (Some(mount), Some(rel)) = (crate::cgroup::v1_mount("memory"), super::procfs::parse_cgroup(&own, Some("memory"))) {
        return Ok(Some(MemoryCgroup { mount, rel, v2: false }));
    }
    let Some(mount) = crate::cgroup::v2_mount() else { return Ok(None) };
    let Some(rel) = own.lines().find_map(|l| l.strip_prefix("0::")).map(str::to_string) else { return Ok(None) };
    let offered = text(&mount.join("cgroup.controllers")).unwrap_or_default();
    Ok(offered.split_whitespace().any(|c| c == "memory").then_some(MemoryCgroup { mount, rel, v2: true }))
}

/// A process's resident memory, bytes (/proc/PID/statm's resident pages).
pub fn resident(pid: i32) -> Result<u64> {
    let p = PathBuf::from(format!("/proc/{pid}/statm"));
    let s = text(&p)?;
    let pages: u64 =
        s.split_whitespace().nth(1).and_then(|x| x.parse().ok()).ok_or_else(|| Error::Parse { path: p, what: "statm", text: s.clone() })?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64;
    Ok(pages * page)
}

/// The machine's memory in use against its total, 0..1 (1 − MemAvailable / MemTotal).
pub fn machine_full() -> Option<f64> {
    let s = text(Path::new("/proc/meminfo")).ok()?;
    let kb = |k: &str| s.lines().find_map(|l| l.strip_prefix(k)?.trim().trim_end_matches("kB").trim().parse::<f64>().ok());
    let (total, avail) = (kb("MemTotal:")?, kb("MemAvailable:")?);
    (total > 0.0).then(|| (1.0 - avail / total).clamp(0.0, 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_and_io_parse_as_the_kernel_writes_them() {
        let stat = "123 (a) b) D 1 123 123 0 -1 4194560 100 0 77 0 7 3 0 0 20 5 2 0 4242 1000 10 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 3 55 0 0";
        assert_eq!(parse_faults(stat), Some(Faults { majflt: 77, blkio_ticks: 55, starttime: 4242 }));
        assert_eq!(parse_faults("123 (x"), None);
        let text = "rchar: 600\nwchar: 10\nsyscr: 3\nsyscw: 1\nread_bytes: 450\nwrite_bytes: 8\ncancelled_write_bytes: 2\n";
        assert_eq!(parse_io(text), Some(TaskIo { rchar: 600, read_bytes: 450, write_bytes: 8, cancelled_write_bytes: 2 }));
        assert_eq!(parse_io("rchar: 1\n"), None);
        let me = std::process::id() as i32;
        assert!(faults(me).unwrap().starttime > 0);
        assert!(io(me).is_ok());
        assert!(faults(-1).unwrap_err().is_gone());
    }

    #[test]
    fn a_huge_file_is_read_to_its_last_whole_line_within_the_limit() {
        let dir = std::env::temp_dir().join(format!("allot-stall-huge-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("a")).unwrap();
        // 12,000 lines of 7 bytes: 84,000 bytes, past the 64 KiB read.
        let procs: String = (0..12_000).map(|i| format!("{:06}\n", 100_000 + i)).collect();
        std::fs::write(dir.join("cgroup.procs"), &procs).unwrap();
        std::fs::write(dir.join("a/cgroup.procs"), "7\n").unwrap();
        let mc = MemoryCgroup { mount: dir.clone(), rel: "/".into(), v2: true };
        let m = mc.members("/");
        let _ = std::fs::remove_dir_all(&dir);
        // 65,536 / 7 = 9362 whole lines; the 9363rd is cut and dropped, not read as "10";
        // and the child's one pid.
        assert_eq!(m.len(), 9363, "{}", m.len());
        assert!(m.contains(&7) && m.iter().all(|p| *p >= 100_000 || *p == 7), "a cut line read as a pid");
    }

    #[test]
    fn refaults_read_the_subtree_on_v1_and_both_kinds() {
        let v1 = "cache 1\nworkingset_refault_file 5\ntotal_workingset_refault_anon 2\ntotal_workingset_refault_file 40\n";
        assert_eq!(parse_refaults(v1, false), Some(42));
        let v2 = "anon 1\nworkingset_refault_anon 3\nworkingset_refault_file 4\nworkingset_activate_file 9\n";
        assert_eq!(parse_refaults(v2, true), Some(7));
        assert_eq!(parse_refaults("workingset_refault 11\n", true), Some(11));
        assert_eq!(parse_refaults("cache 1\n", false), None);
    }

    #[test]
    fn this_process_has_a_state_a_memory_cgroup_and_resident_memory() {
        let me = std::process::id() as i32;
        let (st, _) = state_and_wchan(me, me).unwrap();
        assert!(matches!(st, 'R' | 'S' | 'D'), "{st}");
        assert!(resident(me).unwrap() > 0);
        assert!(machine_full().is_some_and(|f| (0.0..=1.0).contains(&f)));
        if let Some(mc) = memory_cgroup_of(me).unwrap() {
            assert!(mc.dir().is_dir(), "{mc:?}");
            assert!(mc.members(&mc.rel).contains(&me), "{mc:?}");
            assert_eq!(mc.rel_of(me).as_deref(), Some(mc.rel.as_str()));
            assert_eq!(mc.rel_of(-1), None);
        }
    }
}
