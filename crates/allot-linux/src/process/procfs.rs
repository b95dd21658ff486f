//! /proc readers: process identity, ownership, scheduling statistics.

use crate::{read, Error, Result};
use std::path::PathBuf;

mod dir;
mod task;
pub use dir::ProcDir;
pub use task::*;

/// Clock ticks per second for /proc/PID/stat times.
pub fn clk_tck() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let v = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if v > 0 {
        v as u64
    } else {
        100
    }
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
    /// This task has exited (a zombie, or dead). For a thread-group leader that is not the
    /// group's end: its other threads may run on (a leader that called pthread_exit).
    pub fn exited(&self) -> bool {
        self.state == 'Z' || self.state == 'X'
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
        s.lines().find_map(|l| l.strip_prefix(key)).map(|rest| rest.split_whitespace().filter_map(|x| x.parse().ok()).collect())
    };
    let uid = field("Uid:").filter(|v| v.len() >= 2).ok_or_else(bad)?;
    let gid = field("Gid:").filter(|v| !v.is_empty()).ok_or_else(bad)?;
    Ok(Ids { ruid: uid[0], euid: uid[1], rgid: gid[0] })
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
///
/// A thread group's cgroup is its live threads': a leader that has exited is never moved
/// again (the kernel skips exiting tasks when the group is written to `cgroup.procs`), so
/// its own entry goes stale while the threads that run are moved.
pub fn cgroup_of(pid: i32, controller: Option<&str>) -> Result<String> {
    let path = match speaker(pid) {
        Ok(Some(t)) if t != pid => PathBuf::from(format!("/proc/{pid}/task/{t}/cgroup")),
        _ => PathBuf::from(format!("/proc/{pid}/cgroup")),
    };
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

/// The user name of a uid, from any NSS source (thin wrapper over [`crate::process::users`]).
pub fn user_name(uid: u32) -> Option<String> {
    crate::process::users::user_by_uid(uid).map(|u| u.name)
}

/// The uid of a user name, from any NSS source (thin wrapper over [`crate::process::users`]).
pub fn user_uid(name: &str) -> Option<u32> {
    crate::process::users::user_by_name(name).map(|u| u.uid)
}

/// (name, uid, gid) of every user NSS enumerates (getpwent_r). Directory sources often
/// refuse to enumerate (SSSD's `enumerate = false` is the default): look users up by
/// name or uid with [`crate::process::users`] instead.
pub fn passwd() -> Vec<(String, u32, u32)> {
    // setpwent/getpwent_r/endpwent share one cursor per process: one walker at a time.
    static WALK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _g = WALK.lock().unwrap_or_else(|e| e.into_inner());
    let mut out = Vec::new();
    let mut buf = vec![0u8; 16384];
    // SAFETY: the cursor calls are serialised by WALK; each getpwent_r writes into pw and buf.
    unsafe {
        libc::setpwent();
        loop {
            let mut pw: libc::passwd = std::mem::zeroed();
            let mut res: *mut libc::passwd = std::ptr::null_mut();
            let rc = libc::getpwent_r(&mut pw, buf.as_mut_ptr().cast(), buf.len(), &mut res);
            if rc == libc::ERANGE && buf.len() < (4 << 20) {
                buf.resize(buf.len() * 2, 0);
                continue;
            }
            if rc != 0 || res.is_null() {
                break;
            }
            out.push((std::ffi::CStr::from_ptr(pw.pw_name).to_string_lossy().into_owned(), pw.pw_uid, pw.pw_gid));
        }
        libc::endpwent();
    }
    out
}

/// A group's gid and supplementary members, from any NSS source (thin wrapper over
/// [`crate::process::users`]; for "is this user in the group" prefer [`crate::process::users::groups_of`]
/// or the connected client's [`crate::ipc::peer::peer_groups`]).
pub fn group_members(group: &str) -> Option<(u32, Vec<String>)> {
    crate::process::users::group_by_name(group).map(|g| (g.gid, g.members))
}

/// The fields of /proc/PID/sched (or task/TID/sched) that describe how a task has been
/// scheduled. `wait_max_ms` and `wait_sum_ms` exist only with CONFIG_SCHEDSTATS.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaskSched {
    /// Context switches (voluntary + involuntary).
    pub nr_switches: u64,
    /// Switches because the task blocked or slept.
    pub nr_voluntary_switches: u64,
    /// Switches because the task was preempted while it still wanted to run.
    pub nr_involuntary_switches: u64,
    /// Longest single run-queue wait, ms (CONFIG_SCHEDSTATS only).
    pub wait_max_ms: Option<f64>,
    /// Total run-queue wait, ms (CONFIG_SCHEDSTATS only).
    pub wait_sum_ms: Option<f64>,
    /// EEVDF slice, ns (6.6+).
    pub slice_ns: Option<u64>,
    /// Scheduling policy (SCHED_*).
    pub policy: Option<u32>,
    /// Kernel priority (120 = nice 0; < 100 = real-time).
    pub prio: Option<i32>,
}

/// Parses the text of /proc/PID/sched: `key : value` lines; unknown keys are ignored.
pub fn parse_task_sched(s: &str) -> TaskSched {
    let mut t = TaskSched::default();
    for line in s.lines() {
        let Some((k, v)) = line.split_once(':') else { continue };
        let (k, v) = (k.trim(), v.trim());
        let f = || v.parse::<f64>().ok();
        let u = || v.parse::<u64>().ok();
        match k {
            "nr_switches" => t.nr_switches = u().unwrap_or(0),
            "nr_voluntary_switches" => t.nr_voluntary_switches = u().unwrap_or(0),
            "nr_involuntary_switches" => t.nr_involuntary_switches = u().unwrap_or(0),
            "se.statistics.wait_max" | "stats.wait_max" | "wait_max" => t.wait_max_ms = f(),
            "se.statistics.wait_sum" | "stats.wait_sum" | "wait_sum" => t.wait_sum_ms = f(),
            "se.slice" => t.slice_ns = u(),
            "policy" => t.policy = v.parse().ok(),
            "prio" => t.prio = v.parse().ok(),
            _ => {}
        }
    }
    t
}

/// Reads /proc/PID/task/TID/sched.
pub fn task_sched(pid: i32, tid: i32) -> Result<TaskSched> {
    Ok(parse_task_sched(&read(format!("/proc/{pid}/task/{tid}/sched"))?))
}

/// Reads /proc/PID/task/TID/schedstat.
pub fn task_schedstat(pid: i32, tid: i32) -> Result<SchedStat> {
    schedstat_at(format!("/proc/{pid}/task/{tid}/schedstat"))
}

/// /proc/loadavg: load averages and the number of runnable tasks right now.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LoadAvg {
    /// 1-minute load average.
    pub avg1: f64,
    /// Runnable (running or waiting for a CPU) tasks, machine-wide, now.
    pub runnable: u32,
    /// All tasks.
    pub total: u32,
}

/// Reads /proc/loadavg.
pub fn loadavg() -> Result<LoadAvg> {
    let path = PathBuf::from("/proc/loadavg");
    let s = read(&path)?;
    let bad = || Error::Parse { path: path.clone(), what: "loadavg", text: s.clone() };
    let f: Vec<&str> = s.split_whitespace().collect();
    let (r, t) = f.get(3).and_then(|x| x.split_once('/')).ok_or_else(bad)?;
    Ok(LoadAvg {
        avg1: f.first().and_then(|x| x.parse().ok()).ok_or_else(bad)?,
        runnable: r.parse().map_err(|_| bad())?,
        total: t.parse().map_err(|_| bad())?,
    })
}

/// One line of a PSI file (/proc/pressure/cpu): `some` or `full`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PsiLine {
    /// Share of the last 10 s in which some (or all) tasks were stalled, percent.
    pub avg10: f64,
    /// Share of the last 60 s, percent.
    pub avg60: f64,
    /// Total stall time since boot, µs.
    pub total_us: u64,
}

/// /proc/pressure/cpu.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Psi {
    /// Time in which at least one runnable task waited for a CPU.
    pub some: PsiLine,
    /// Time in which all non-idle tasks waited (cgroup level; zero at the system level).
    pub full: Option<PsiLine>,
}

/// Parses the text of a PSI file.
pub fn parse_psi(s: &str) -> Option<Psi> {
    let line = |name: &str| -> Option<PsiLine> {
        let l = s.lines().find(|l| l.starts_with(name))?;
        let mut p = PsiLine::default();
        for kv in l.split_whitespace().skip(1) {
            let (k, v) = kv.split_once('=')?;
            match k {
                "avg10" => p.avg10 = v.parse().ok()?,
                "avg60" => p.avg60 = v.parse().ok()?,
                "total" => p.total_us = v.parse().ok()?,
                _ => {}
            }
        }
        Some(p)
    };
    Some(Psi { some: line("some")?, full: line("full") })
}

/// Reads /proc/pressure/cpu; None when the kernel has no PSI (or it is disabled).
pub fn psi_cpu() -> Option<Psi> {
    parse_psi(&std::fs::read_to_string("/proc/pressure/cpu").ok()?)
}

/// The size of the largest (last-level) CPU cache in bytes, from sysfs; None if unknown.
pub fn llc_bytes() -> Option<u64> {
    let mut best: Option<(u32, u64)> = None;
    for i in 0..8 {
        let dir = format!("/sys/devices/system/cpu/cpu0/cache/index{i}");
        let Ok(level) = std::fs::read_to_string(format!("{dir}/level")) else { continue };
        let Ok(size) = std::fs::read_to_string(format!("{dir}/size")) else { continue };
        let level: u32 = level.trim().parse().ok()?;
        let size = size.trim();
        let bytes = if let Some(k) = size.strip_suffix('K') {
            k.parse::<u64>().ok()? * 1024
        } else if let Some(m) = size.strip_suffix('M') {
            m.parse::<u64>().ok()? * 1024 * 1024
        } else {
            size.parse().ok()?
        };
        if best.is_none_or(|(l, _)| level > l) {
            best = Some((level, bytes));
        }
    }
    best.map(|(_, b)| b)
}

/// Idle time per CPU (idle + iowait), in clock ticks, from /proc/stat's `cpuN` lines,
/// indexed by CPU number.
pub fn cpu_idle_ticks() -> Result<Vec<u64>> {
    let s = read("/proc/stat")?;
    let mut out = vec![];
    for l in s.lines() {
        let Some(rest) = l.strip_prefix("cpu") else { continue };
        let mut f = rest.split_whitespace();
        let Some(Ok(n)) = f.next().map(|c| c.parse::<usize>()) else { continue };
        let v: Vec<u64> = f.filter_map(|x| x.parse().ok()).collect();
        if v.len() >= 5 {
            if out.len() <= n {
                out.resize(n + 1, 0);
            }
            out[n] = v[3] + v[4];
        }
    }
    Ok(out)
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
        assert!(!cmdline(me).unwrap().is_empty());
        assert_eq!(speaker(me).unwrap(), Some(me));
        assert_eq!(exe(me).unwrap(), std::env::current_exe().unwrap().display().to_string());
    }

    #[test]
    fn user_wrappers_go_through_nss() {
        assert_eq!(user_name(0).as_deref(), Some("root"));
        assert_eq!(user_uid("root"), Some(0));
        assert_eq!(group_members("root").map(|(g, _)| g), Some(0));
        assert!(passwd().iter().any(|(n, u, g)| n == "root" && *u == 0 && *g == 0));
        assert_eq!(user_uid("no-such-user-allot"), None);
    }

    #[test]
    fn cgroup_lines() {
        let t = "12:cpu:/allot/u\n11:cpuacct:/x\n0::/init.scope\n";
        assert_eq!(parse_cgroup(t, Some("cpu")).as_deref(), Some("/allot/u"));
        assert_eq!(parse_cgroup(t, Some("cpuacct")).as_deref(), Some("/x"));
        assert_eq!(parse_cgroup(t, None).as_deref(), Some("/init.scope"));
        assert_eq!(parse_cgroup("3:cpu,cpuacct:/a\n", Some("cpuacct")).as_deref(), Some("/a"));
    }

    #[test]
    fn sched_psi_loadavg_parse() {
        let t = parse_task_sched("x (1, #threads: 1)\n---\nse.slice   :  1400000\nnr_switches  :  10\nnr_voluntary_switches : 7\nnr_involuntary_switches : 3\nse.statistics.wait_max : 48.213000\npolicy : 0\nprio : 120\n");
        assert_eq!((t.nr_switches, t.nr_voluntary_switches, t.nr_involuntary_switches), (10, 7, 3));
        assert_eq!((t.wait_max_ms, t.slice_ns, t.policy, t.prio), (Some(48.213), Some(1_400_000), Some(0), Some(120)));
        let p = parse_psi("some avg10=2.79 avg60=2.45 avg300=1.20 total=6506983\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n").unwrap();
        assert_eq!((p.some.avg10, p.some.total_us), (2.79, 6506983));
        let l = loadavg().unwrap();
        assert!(l.runnable >= 1 && l.total >= l.runnable);
    }
}
