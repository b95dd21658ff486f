//! /proc readers: process identity, ownership, scheduling statistics.

use crate::{read, Error, Result};
use std::path::PathBuf;

/// Clock ticks per second for /proc/PID/stat times.
pub fn clk_tck() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let v = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if v > 0 { v as u64 } else { 100 }
}

/// The fields of /proc/PID/stat allot uses (proc(5)).
#[derive(Debug, Clone, PartialEq)]
pub struct Stat {
    /// Process id.
    pub pid: i32,
    /// Command name (comm), without the parentheses.
    pub comm: String,
    /// State letter (R, S, D, ...).
    pub state: char,
    /// Parent pid.
    pub ppid: i32,
    /// Kernel flags (PF_*).
    pub flags: u64,
    /// User time, clock ticks.
    pub utime: u64,
    /// System time, clock ticks.
    pub stime: u64,
    /// Nice value.
    pub nice: i32,
    /// Threads.
    pub num_threads: u64,
    /// Start time since boot, clock ticks: with the pid, the identity of a process.
    pub starttime: u64,
    /// Scheduling policy (SCHED_*).
    pub policy: u32,
}

/// PF_KTHREAD from include/linux/sched.h.
pub const PF_KTHREAD: u64 = 0x0020_0000;

impl Stat {
    /// True for kernel threads, which allot never touches.
    pub fn is_kernel_thread(&self) -> bool {
        self.flags & PF_KTHREAD != 0 || self.pid == 2 || self.ppid == 2
    }
}

/// Parses the text of /proc/PID/stat (or /proc/PID/task/TID/stat).
pub fn parse_stat(path: &std::path::Path, s: &str) -> Result<Stat> {
    let bad = || Error::Parse { path: path.into(), what: "stat", text: s.chars().take(80).collect() };
    let open = s.find('(').ok_or_else(bad)?;
    let close = s.rfind(')').ok_or_else(bad)?;
    let pid = s[..open].trim().parse().map_err(|_| bad())?;
    let comm = s[open + 1..close].to_string();
    // Fields after comm, numbered from 3 (state) as in proc(5).
    let f: Vec<&str> = s[close + 1..].split_whitespace().collect();
    let num = |i: usize| -> Result<i64> { f.get(i - 3).and_then(|x| x.parse().ok()).ok_or_else(bad) };
    Ok(Stat {
        pid,
        comm,
        state: f.first().and_then(|x| x.chars().next()).ok_or_else(bad)?,
        ppid: num(4)? as i32,
        flags: num(9)? as u64,
        utime: num(14)? as u64,
        stime: num(15)? as u64,
        nice: num(19)? as i32,
        num_threads: num(20)? as u64,
        starttime: num(22)? as u64,
        policy: num(41)? as u32,
    })
}

/// Reads /proc/PID/stat.
pub fn stat(pid: i32) -> Result<Stat> {
    let path = PathBuf::from(format!("/proc/{pid}/stat"));
    parse_stat(&path, &read(&path)?)
}

/// Real and effective uid and gid of a process, from /proc/PID/status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ids {
    /// Real uid.
    pub ruid: u32,
    /// Effective uid.
    pub euid: u32,
    /// Real gid.
    pub rgid: u32,
}

/// Reads the Uid:/Gid: lines of /proc/PID/status.
pub fn ids(pid: i32) -> Result<Ids> {
    let path = PathBuf::from(format!("/proc/{pid}/status"));
    let s = read(&path)?;
    let bad = || Error::Parse { path: path.clone(), what: "Uid:/Gid: lines", text: String::new() };
    let field = |key: &str| -> Option<Vec<u32>> {
        s.lines()
            .find_map(|l| l.strip_prefix(key))
            .map(|rest| rest.split_whitespace().filter_map(|x| x.parse().ok()).collect())
    };
    let uid = field("Uid:").filter(|v| v.len() >= 2).ok_or_else(bad)?;
    let gid = field("Gid:").filter(|v| !v.is_empty()).ok_or_else(bad)?;
    Ok(Ids { ruid: uid[0], euid: uid[1], rgid: gid[0] })
}

/// The command line of a process, space-joined; the comm in brackets if empty.
pub fn cmdline(pid: i32) -> Result<String> {
    let path = PathBuf::from(format!("/proc/{pid}/cmdline"));
    let raw = std::fs::read(&path).map_err(|source| Error::Io { op: "read", path: path.clone(), source })?;
    let s: Vec<String> = raw
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    if s.is_empty() {
        Ok(format!("[{}]", stat(pid)?.comm))
    } else {
        Ok(s.join(" "))
    }
}

/// All thread-group ids in /proc, in readdir order.
pub fn pids() -> Result<Vec<i32>> {
    let rd = std::fs::read_dir("/proc").map_err(|source| Error::Io { op: "readdir", path: "/proc".into(), source })?;
    Ok(rd.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect())
}

/// Thread ids of a process.
pub fn tids(pid: i32) -> Result<Vec<i32>> {
    let path = PathBuf::from(format!("/proc/{pid}/task"));
    let rd = std::fs::read_dir(&path).map_err(|source| Error::Io { op: "readdir", path: path.clone(), source })?;
    Ok(rd.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect())
}

/// /proc/PID/schedstat (or task/TID/schedstat): the kernel's own accounting of a task.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SchedStat {
    /// Time spent on the CPU, ns.
    pub run_ns: u64,
    /// Time spent runnable but waiting on a run queue, ns.
    pub wait_ns: u64,
    /// Timeslices run on this CPU.
    pub timeslices: u64,
}

/// Parses schedstat text.
pub fn parse_schedstat(path: &std::path::Path, s: &str) -> Result<SchedStat> {
    let v: Vec<u64> = s.split_whitespace().filter_map(|x| x.parse().ok()).collect();
    if v.len() < 3 {
        return Err(Error::Parse { path: path.into(), what: "schedstat (3 numbers)", text: s.into() });
    }
    Ok(SchedStat { run_ns: v[0], wait_ns: v[1], timeslices: v[2] })
}

/// Reads a schedstat file given its path.
pub fn schedstat_at(path: impl Into<PathBuf>) -> Result<SchedStat> {
    let path = path.into();
    let s = read(&path)?;
    parse_schedstat(&path, &s)
}

/// Reads /proc/PID/schedstat (the thread-group leader's own).
pub fn schedstat(pid: i32) -> Result<SchedStat> {
    schedstat_at(format!("/proc/{pid}/schedstat"))
}

/// The cgroup path of a process in a hierarchy: for v2 the `0::` line; for v1 the line
/// whose controller list contains `controller`.
pub fn cgroup_of(pid: i32, controller: Option<&str>) -> Result<String> {
    let path = PathBuf::from(format!("/proc/{pid}/cgroup"));
    let s = read(&path)?;
    parse_cgroup(&s, controller).ok_or_else(|| Error::Parse { path, what: "a cgroup line", text: s.chars().take(200).collect() })
}

/// Finds a process's cgroup path in the text of /proc/PID/cgroup.
pub fn parse_cgroup(s: &str, controller: Option<&str>) -> Option<String> {
    s.lines().find_map(|l| {
        let mut it = l.splitn(3, ':');
        let (_id, ctrls, path) = (it.next()?, it.next()?, it.next()?);
        let hit = match controller {
            None => ctrls.is_empty(),
            Some(c) => ctrls.split(',').any(|x| x == c),
        };
        hit.then(|| path.to_string())
    })
}

/// The user name of a uid from /etc/passwd, if any.
pub fn user_name(uid: u32) -> Option<String> {
    passwd().into_iter().find(|(_, u, _)| *u == uid).map(|(n, _, _)| n)
}

/// The uid of a user name from /etc/passwd, if any.
pub fn user_uid(name: &str) -> Option<u32> {
    passwd().into_iter().find(|(n, _, _)| n == name).map(|(_, u, _)| u)
}

/// (name, uid, gid) rows of /etc/passwd.
pub fn passwd() -> Vec<(String, u32, u32)> {
    std::fs::read_to_string("/etc/passwd")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            Some((f.first()?.to_string(), f.get(2)?.parse().ok()?, f.get(3)?.parse().ok()?))
        })
        .collect()
}

/// Members of a group from /etc/group (supplementary members only).
pub fn group_members(group: &str) -> Option<(u32, Vec<String>)> {
    std::fs::read_to_string("/etc/group").ok()?.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.first()? == &group).then(|| {
            let gid = f.get(2).and_then(|g| g.parse().ok()).unwrap_or(u32::MAX);
            let m = f.get(3).map(|m| m.split(',').filter(|x| !x.is_empty()).map(String::from).collect()).unwrap_or_default();
            (gid, m)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_survives_odd_comms() {
        let line = "123 (a) b (c)) S 1 123 123 0 -1 4194560 100 0 0 0 7 3 0 0 20 5 2 0 4242 1000 10 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 3 0 0 0";
        let s = parse_stat(std::path::Path::new("x"), line).unwrap();
        assert_eq!((s.pid, s.comm.as_str(), s.state, s.ppid), (123, "a) b (c)", 'S', 1));
        assert_eq!((s.utime, s.stime, s.nice, s.num_threads, s.starttime, s.policy), (7, 3, 5, 2, 4242, 3));
    }

    #[test]
    fn reads_this_process() {
        let me = std::process::id() as i32;
        let s = stat(me).unwrap();
        assert_eq!(s.pid, me);
        assert!(!s.is_kernel_thread());
        let ids = ids(me).unwrap();
        assert_eq!(ids.euid, unsafe { libc::geteuid() });
        assert!(schedstat(me).unwrap().run_ns > 0);
        assert!(pids().unwrap().contains(&me));
        assert!(tids(me).unwrap().contains(&me));
        assert!(cmdline(me).unwrap().len() > 0);
    }

    #[test]
    fn cgroup_lines() {
        let t = "12:cpu:/allot/u\n11:cpuacct:/x\n0::/init.scope\n";
        assert_eq!(parse_cgroup(t, Some("cpu")).as_deref(), Some("/allot/u"));
        assert_eq!(parse_cgroup(t, Some("cpuacct")).as_deref(), Some("/x"));
        assert_eq!(parse_cgroup(t, None).as_deref(), Some("/init.scope"));
        assert_eq!(parse_cgroup("3:cpu,cpuacct:/a\n", Some("cpuacct")).as_deref(), Some("/a"));
    }
}
