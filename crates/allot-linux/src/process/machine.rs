//! Process credentials and machine-wide CPU time, as the daemon's observer reads them.

use crate::{read, Error, Result};
use std::path::PathBuf;

/// The four uids and gids of a process (real, effective, saved, filesystem), from the
/// `Uid:` and `Gid:` lines of /proc/PID/status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Creds {
    /// Real, effective, saved set, filesystem uid.
    pub uid: [u32; 4],
    /// Real, effective, saved set, filesystem gid.
    pub gid: [u32; 4],
}

impl Creds {
    /// True when every uid is `uid`: the process is wholly that user's (not setuid, not in
    /// the middle of changing user). ptrace(2) asks the same of a tracee.
    pub fn all(&self, uid: u32) -> bool {
        self.uid.iter().all(|&u| u == uid)
    }
}

/// Parses the text of /proc/PID/status.
pub fn parse_creds(path: &std::path::Path, s: &str) -> Result<Creds> {
    let bad = || Error::Parse { path: path.into(), what: "Uid:/Gid: lines with four ids", text: String::new() };
    let four = |key: &str| -> Option<[u32; 4]> {
        let v: Vec<u32> = s.lines().find_map(|l| l.strip_prefix(key))?.split_whitespace().filter_map(|x| x.parse().ok()).collect();
        Some([*v.first()?, *v.get(1)?, *v.get(2)?, *v.get(3)?])
    };
    Ok(Creds { uid: four("Uid:").ok_or_else(bad)?, gid: four("Gid:").ok_or_else(bad)? })
}

/// Reads a process's credentials.
pub fn creds(pid: i32) -> Result<Creds> {
    creds_at(&PathBuf::from(format!("/proc/{pid}")))
}

/// The credentials of the thread whose /proc directory is `dir` (`procfs::task_dir`).
pub fn creds_at(dir: &std::path::Path) -> Result<Creds> {
    let path = dir.join("status");
    let s = read(&path)?;
    parse_creds(&path, &s)
}

/// Every group a process runs with: its real and effective gid and its supplementary
/// groups (the `Gid:` and `Groups:` lines of /proc/PID/status), as `id` would show them.
pub fn groups(pid: i32) -> Result<Vec<u32>> {
    groups_at(&PathBuf::from(format!("/proc/{pid}")))
}

/// [`groups`] of the thread whose /proc directory is `dir` (`procfs::task_dir`).
pub fn groups_at(dir: &std::path::Path) -> Result<Vec<u32>> {
    let path = dir.join("status");
    let s = read(&path)?;
    let c = parse_creds(&path, &s)?;
    let mut g: Vec<u32> = vec![c.gid[0], c.gid[1]];
    g.extend(s.lines().find_map(|l| l.strip_prefix("Groups:")).unwrap_or("").split_whitespace().filter_map(|x| x.parse::<u32>().ok()));
    g.sort_unstable();
    g.dedup();
    Ok(g)
}

/// CPU time since boot from /proc/stat, in clock ticks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuTimes {
    /// Idle + iowait per CPU, indexed by CPU number.
    pub idle: Vec<u64>,
    /// All CPUs' busy time (user, nice, system, irq, softirq, steal).
    pub busy: u64,
}

/// Parses /proc/stat.
pub fn parse_cpu_times(s: &str) -> CpuTimes {
    let mut t = CpuTimes::default();
    for l in s.lines() {
        let Some(rest) = l.strip_prefix("cpu") else { continue };
        // "cpu  ..." is the aggregate line, "cpuN ..." one CPU's.
        let (cpu, fields) = match rest.split_once(char::is_whitespace) {
            Some(("", f)) => (None, f),
            Some((n, f)) => match n.parse::<usize>() {
                Ok(n) => (Some(n), f),
                Err(_) => continue,
            },
            None => continue,
        };
        let v: Vec<u64> = fields.split_whitespace().filter_map(|x| x.parse().ok()).collect();
        if v.len() < 8 {
            continue;
        }
        match cpu {
            Some(n) => {
                if t.idle.len() <= n {
                    t.idle.resize(n + 1, 0);
                }
                t.idle[n] = v[3] + v[4];
            }
            // The aggregate line: user nice system idle iowait irq softirq steal.
            None => t.busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7],
        }
    }
    t
}

/// Reads /proc/stat.
pub fn cpu_times() -> Result<CpuTimes> {
    Ok(parse_cpu_times(&read("/proc/stat")?))
}

/// [`cpu_times`] through a kept-open /proc/stat (a reader that reads it every tick).
pub fn cpu_times_from(r: &crate::reread::Rereader) -> Result<CpuTimes> {
    Ok(parse_cpu_times(&r.read(std::path::Path::new("/proc/stat"))?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creds_of_this_process_and_odd_text() {
        let me = creds(std::process::id() as i32).unwrap();
        // SAFETY: getuid has no preconditions.
        assert!(me.all(unsafe { libc::getuid() }));
        let p = std::path::Path::new("/x");
        let c = parse_creds(p, "Name:\tsu\nUid:\t1000\t0\t0\t0\nGid:\t1000\t1000\t1000\t1000\n").unwrap();
        assert_eq!(c.uid, [1000, 0, 0, 0]);
        assert!(!c.all(1000) && !c.all(0));
        assert!(parse_creds(p, "Uid:\t1\t2\n").is_err());
    }

    #[test]
    fn cpu_times_parse() {
        let t = parse_cpu_times("cpu  10 1 5 100 2 3 4 0 0 0\ncpu0 5 0 2 50 1 1 2 0 0 0\ncpu1 5 1 3 50 1 2 2 0 0 0\nintr 5\n");
        assert_eq!(t.idle, vec![51, 51]);
        assert_eq!(t.busy, 10 + 1 + 5 + 3 + 4);
        assert!(!cpu_times().unwrap().idle.is_empty());
        let r = crate::reread::Rereader::new(1);
        let (a, b) = (cpu_times_from(&r).unwrap(), cpu_times_from(&r).unwrap());
        assert_eq!(a.idle.len(), b.idle.len());
        assert!(b.busy >= a.busy && b.idle.iter().zip(&a.idle).all(|(b, a)| b >= a));
    }
}
