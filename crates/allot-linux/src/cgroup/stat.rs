//! Read-only statistics of one cgroup directory in the cpu hierarchy: `cpu.stat`'s
//! bandwidth (throttling) counters and, on v2, `cpu.pressure`. Both are readable by
//! anyone (mode 0444), so the CLI reads them for `allot top` and `allot metrics`
//! without asking the daemon.
//!
//! The two versions name the throttled time differently: v2 `throttled_usec` (µs),
//! v1 `throttled_time` (ns); both are given here in ns.

use crate::process::procfs::{parse_psi, Psi};
use crate::{read, Error, Result};
use std::path::Path;

/// cgroup v2 `cpu.stat`'s `usage_usec`, in ns: the CPU time the cgroup's threads used.
pub fn parse_usage(path: &Path, s: &str) -> Result<u64> {
    s.lines().find_map(|l| l.strip_prefix("usage_usec ").and_then(|v| v.trim().parse::<u64>().ok())).map(|us| us * 1000).ok_or_else(|| Error::Parse {
        path: path.into(),
        what: "usage_usec in cpu.stat",
        text: s.chars().take(80).collect(),
    })
}

/// `cpu.stat`'s bandwidth counters, since the cgroup was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Throttling {
    /// Enforcement periods that have elapsed while a quota (`cpu.max`,
    /// `cpu.cfs_quota_us`) was set and the group was runnable.
    pub periods: u64,
    /// Periods in which the group used its whole quota and was stopped.
    pub throttled_periods: u64,
    /// Total time the group's threads were stopped by the quota, ns.
    pub throttled_ns: u64,
}

/// Parses `cpu.stat` text of either version. Keys the kernel adds later are ignored; a
/// file without `nr_periods` is refused (it is not a cpu controller's `cpu.stat`).
pub fn parse_throttling(path: &Path, s: &str) -> Result<Throttling> {
    let mut t = Throttling::default();
    let mut seen = false;
    for l in s.lines() {
        let mut f = l.split_whitespace();
        let (Some(k), Some(v)) = (f.next(), f.next().and_then(|v| v.parse::<u64>().ok())) else { continue };
        match k {
            "nr_periods" => {
                t.periods = v;
                seen = true;
            }
            "nr_throttled" => t.throttled_periods = v,
            "throttled_usec" => t.throttled_ns = v.saturating_mul(1000),
            "throttled_time" => t.throttled_ns = v,
            _ => {}
        }
    }
    if !seen {
        return Err(Error::Parse { path: path.into(), what: "cpu.stat with nr_periods", text: s.chars().take(80).collect() });
    }
    Ok(t)
}

/// Reads `DIR/cpu.stat`'s bandwidth counters.
pub fn throttling(dir: &Path) -> Result<Throttling> {
    let p = dir.join("cpu.stat");
    parse_throttling(&p, &read(&p)?)
}

/// Reads `DIR/cpu.pressure` (cgroup v2 with PSI): `Ok(None)` where the file does not
/// exist (cgroup v1, a kernel without PSI, or booted with `psi=0`).
pub fn pressure(dir: &Path) -> Result<Option<Psi>> {
    let p = dir.join("cpu.pressure");
    match std::fs::read_to_string(&p) {
        Ok(s) => parse_psi(&s).map(Some).ok_or_else(|| Error::Parse {
            path: p,
            what: "cpu.pressure (some/full lines)",
            text: s.chars().take(80).collect(),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        // Reading a pressure file of a kernel with PSI compiled in but disabled fails
        // with EOPNOTSUPP: no pressure, as when the file is missing.
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => Ok(None),
        Err(source) => Err(Error::Io { op: "read", path: p, source }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v2_counts_microseconds_v1_nanoseconds() {
        let v2 = "usage_usec 2000\nuser_usec 1500\nsystem_usec 500\nnr_periods 40\nnr_throttled 7\nthrottled_usec 1234\nnr_bursts 0\nburst_usec 0\n";
        assert_eq!(parse_throttling(Path::new("x"), v2).unwrap(), Throttling { periods: 40, throttled_periods: 7, throttled_ns: 1_234_000 });
        let v1 = "nr_periods 12\nnr_throttled 3\nthrottled_time 987654321\nnr_bursts 0\nburst_time 0\n";
        assert_eq!(parse_throttling(Path::new("x"), v1).unwrap(), Throttling { periods: 12, throttled_periods: 3, throttled_ns: 987_654_321 });
    }

    #[test]
    fn a_file_without_periods_is_named() {
        let e = parse_throttling(Path::new("/sys/fs/cgroup/x/cpu.stat"), "usage_usec 5\n").unwrap_err().to_string();
        assert!(e.contains("/sys/fs/cgroup/x/cpu.stat") && e.contains("nr_periods"), "{e}");
    }

    #[test]
    fn pressure_is_none_where_there_is_no_file() {
        let dir = std::env::temp_dir().join(format!("allot-stat-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(pressure(&dir).unwrap(), None);
        std::fs::write(
            dir.join("cpu.pressure"),
            "some avg10=1.50 avg60=0.20 avg300=0.00 total=4000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=10\n",
        )
        .unwrap();
        let p = pressure(&dir).unwrap().unwrap();
        assert_eq!((p.some.avg10, p.some.total_us, p.full.map(|f| f.total_us)), (1.5, 4000, Some(10)));
        std::fs::write(dir.join("cpu.pressure"), "nonsense\n").unwrap();
        assert!(pressure(&dir).unwrap_err().to_string().contains("cpu.pressure"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
