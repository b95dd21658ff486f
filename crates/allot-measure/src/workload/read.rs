//! `allot-lab workload read --file F`: reads one file over and over, 1 MiB at a time, as an
//! interactive user's working set in the page cache (memory by share, docs/memory.md).
//! `work` counts MiB read; a working set kept in memory reads at memory speed, one
//! reclaimed from under it at the disk's.

use std::os::unix::fs::FileExt;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Reads `path` in a loop until `deadline` or a stop signal; returns the report.
pub fn run(path: &std::path::Path, deadline: Option<Instant>) -> anyhow::Result<serde_json::Value> {
    let f = std::fs::File::open(path).map_err(|e| anyhow::anyhow!("read: cannot open {}: {e}", path.display()))?;
    let len = f.metadata()?.len();
    if len < 1 << 20 {
        anyhow::bail!("read: {} has {len} bytes; give a file of at least 1 MiB", path.display());
    }
    let mut buf = vec![0u8; 1 << 20];
    let (mut mib, mut off, mut passes) = (0u64, 0u64, 0u64);
    let mut slowest_pass = Duration::ZERO;
    let mut pass_start = Instant::now();
    while !super::STOP.load(Ordering::Relaxed) && deadline.is_none_or(|d| Instant::now() < d) {
        let n = f.read_at(&mut buf, off)?;
        std::hint::black_box(&buf);
        off += n as u64;
        mib += 1;
        if n == 0 || off >= len {
            off = 0;
            passes += 1;
            slowest_pass = slowest_pass.max(pass_start.elapsed());
            pass_start = Instant::now();
        }
    }
    // What came from the disk rather than the page cache (the kernel's storage-layer count).
    let disk = std::fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("read_bytes:").and_then(|v| v.trim().parse::<u64>().ok())))
        .unwrap_or(0);
    Ok(
        serde_json::json!({"kind": "read", "work": mib, "file_mib": len >> 20, "passes": passes, "slowest_pass_s": slowest_pass.as_secs_f64(), "disk_mib": disk as f64 / (1 << 20) as f64}),
    )
}
