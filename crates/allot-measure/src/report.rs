//! What the instruments share: percentiles, runqlat-style log2 histograms, the
//! benchmarks' table style, a progress bar that only draws on a terminal, and writing
//! result files. Tables and charts themselves are allot-report's.

use allot_report::{Rule, Table};
use std::fmt::Write as _;
use std::io::{IsTerminal, Write};
use std::time::Instant;

/// Summary of a set of latencies, in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Percentiles {
    /// Samples.
    pub n: usize,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Worst.
    pub max: f64,
    /// Mean.
    pub mean: f64,
}

/// Nearest-rank percentiles of `v` (µs); all zero for an empty set.
pub fn percentiles(v: &[f64]) -> Percentiles {
    if v.is_empty() {
        return Percentiles::default();
    }
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let at = |q: f64| s[((q * s.len() as f64).ceil() as usize).clamp(1, s.len()) - 1];
    Percentiles {
        n: s.len(),
        p50: at(0.50),
        p90: at(0.90),
        p99: at(0.99),
        p999: at(0.999),
        max: s[s.len() - 1],
        mean: s.iter().sum::<f64>() / s.len() as f64,
    }
}

/// A power-of-two histogram bucket: values in `lo..=hi` µs (as runqlat prints them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Bucket {
    /// Lowest value, µs.
    pub lo: u64,
    /// Highest value, µs.
    pub hi: u64,
    /// Samples.
    pub count: u64,
}

/// Log2 buckets of `v` (µs), from 0 up to the highest non-empty bucket.
pub fn log2_histogram(v: &[f64]) -> Vec<Bucket> {
    let mut counts = [0u64; 64];
    for &x in v {
        let u = x.max(0.0) as u64;
        // runqlat's bucketing: 0 and 1 → slot 0, 2..3 → 1, 4..7 → 2, ...
        let slot = if u < 2 { 0 } else { 63 - u.leading_zeros() as usize };
        counts[slot] += 1;
    }
    let top = counts.iter().rposition(|&c| c > 0).unwrap_or(0);
    (0..=top)
        .map(|i| {
            let (lo, hi) = if i == 0 { (0, 1) } else { (1u64 << i, (1u64 << (i + 1)) - 1) };
            Bucket { lo, hi, count: counts[i] }
        })
        .collect()
}

/// The histogram as runqlat draws it: `usecs : count distribution` with a 40-star bar.
pub fn render_histogram(b: &[Bucket]) -> String {
    let max = b.iter().map(|x| x.count).max().unwrap_or(0).max(1);
    let mut s = String::from("     usecs               : count     distribution\n");
    for x in b {
        let stars = ((x.count as f64 / max as f64) * 40.0).round() as usize;
        let stars = if x.count > 0 { stars.max(1) } else { 0 };
        let _ = writeln!(s, "{:>10} -> {:<10} : {:<9} |{:<40}|", x.lo, x.hi, x.count, "*".repeat(stars));
    }
    s
}

/// A plain-text table in the benchmarks' style: the first column left-aligned, the
/// others right-aligned, one rule across (allot-report's [`Table`]).
pub fn table(header: &[String], rows: &[Vec<String>]) -> String {
    Table::new(header.iter().cloned()).rule(Rule::Full).with_rows(rows.iter().cloned()).render()
}

/// A progress bar on stderr when it is a terminal; silent otherwise.
pub struct Progress {
    total: usize,
    done: usize,
    start: Instant,
    tty: bool,
    label: String,
}

impl Progress {
    /// A bar for `total` steps.
    pub fn new(total: usize, label: &str) -> Progress {
        Progress { total, done: 0, start: Instant::now(), tty: std::io::stderr().is_terminal(), label: label.into() }
    }
    /// Shows what is running now.
    pub fn set(&mut self, what: &str) {
        if !self.tty {
            return;
        }
        let frac = if self.total == 0 { 1.0 } else { self.done as f64 / self.total as f64 };
        let n = (frac * 30.0) as usize;
        let el = self.start.elapsed().as_secs_f64();
        let eta = if self.done > 0 { el / self.done as f64 * (self.total - self.done) as f64 } else { f64::NAN };
        let eta = if eta.is_finite() { format!("{:.0}s left", eta) } else { "…".into() };
        let mut line = format!("{} [{}{}] {}/{} {} {}", self.label, "#".repeat(n), " ".repeat(30 - n), self.done, self.total, eta, what);
        line.truncate(120);
        eprint!("\r\x1b[2K{line}");
        let _ = std::io::stderr().flush();
    }
    /// One step done.
    pub fn step(&mut self) {
        self.done += 1;
        self.set("");
    }
    /// Clears the bar.
    pub fn finish(&self) {
        if self.tty {
            eprint!("\r\x1b[2K");
        }
    }
}

/// Writes a file atomically enough for results (temp + rename), naming it on failure.
pub fn write_file(path: &std::path::Path, text: &str) -> anyhow::Result<()> {
    use anyhow::Context;
    let tmp = path.with_extension("tmp~");
    std::fs::write(&tmp, text).with_context(|| format!("write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("rename {} to {}", tmp.display(), path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_nearest_rank() {
        let v: Vec<f64> = (1..=1000).map(|x| x as f64).collect();
        let p = percentiles(&v);
        assert_eq!((p.p50, p.p90, p.p99, p.p999, p.max), (500.0, 900.0, 990.0, 999.0, 1000.0));
        assert_eq!(percentiles(&[]).n, 0);
    }

    #[test]
    fn histogram_buckets_like_runqlat() {
        let b = log2_histogram(&[0.0, 1.0, 2.0, 3.0, 4.0, 7.9, 8.0, 1000.0]);
        assert_eq!((b[0].lo, b[0].hi, b[0].count), (0, 1, 2));
        assert_eq!((b[1].lo, b[1].hi, b[1].count), (2, 3, 2));
        assert_eq!((b[2].lo, b[2].hi, b[2].count), (4, 7, 2));
        assert_eq!(b.last().unwrap().lo, 512);
        assert!(render_histogram(&b).contains("usecs"));
    }

    #[test]
    fn table_keeps_the_benchmarks_style() {
        let t = table(&["variant".into(), "p99".into()], &[vec!["alone".into(), "12 µs".into()], vec!["vs hogs".into(), "9.1 ms".into()]]);
        assert_eq!(t, "variant     p99\n---------------\nalone     12 µs\nvs hogs  9.1 ms\n");
    }
}
