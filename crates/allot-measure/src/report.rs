//! Shared output: percentiles, runqlat-style log2 histograms, plain-text tables, a
//! hand-written SVG line chart, and a progress bar that only draws on a terminal.

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

/// A plain-text table: a header row and rows of cells, columns right-aligned after the
/// first (which is left-aligned).
pub fn table(header: &[String], rows: &[Vec<String>]) -> String {
    let cols = header.len();
    let mut w = vec![0; cols];
    for r in std::iter::once(header).chain(rows.iter().map(|r| r.as_slice())) {
        for (i, c) in r.iter().enumerate().take(cols) {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |r: &[String]| {
        let mut s = String::new();
        for (i, c) in r.iter().enumerate().take(cols) {
            if i == 0 {
                let _ = write!(s, "{:<width$}", c, width = w[0]);
            } else {
                let _ = write!(s, "  {:>width$}", c, width = w[i]);
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut s = line(header);
    s.push_str(&"-".repeat(w.iter().sum::<usize>() + 2 * (cols - 1)));
    s.push('\n');
    for r in rows {
        s.push_str(&line(r));
    }
    s
}

/// One line of a chart.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend label.
    pub label: String,
    /// Points (x, y).
    pub points: Vec<(f64, f64)>,
    /// Dashed (for ideal/reference lines).
    pub dashed: bool,
    /// Colour index (default: the series' position), to match a reference line to its
    /// series.
    pub color: Option<usize>,
}

/// One panel of a chart.
#[derive(Debug, Clone)]
pub struct Panel {
    /// Title above the panel.
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// Lines.
    pub series: Vec<Series>,
    /// Y axis from zero (otherwise from the data's minimum).
    pub y_from_zero: bool,
    /// Log10 y axis (for latencies spanning decades).
    pub y_log: bool,
}

const PALETTE: [&str; 10] = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// Nice round tick step for a range.
fn tick_step(range: f64) -> f64 {
    let raw = (range / 5.0).max(1e-9);
    let mag = 10f64.powf(raw.log10().floor());
    let n = raw / mag;
    mag * if n < 1.5 {
        1.0
    } else if n < 3.5 {
        2.0
    } else if n < 7.5 {
        5.0
    } else {
        10.0
    }
}

/// Renders panels side by side (up to `per_row` per row) as a standalone SVG document.
pub fn svg_chart(title: &str, panels: &[Panel], per_row: usize) -> String {
    let (pw, ph) = (460.0, 320.0);
    let per_row = per_row.max(1);
    let rows = panels.len().div_ceil(per_row).max(1);
    let (w, h) = (pw * per_row.min(panels.len().max(1)) as f64, 40.0 + ph * rows as f64);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(s, r#"<text x="{}" y="24" font-size="15" text-anchor="middle">{}</text>"#, w / 2.0, esc(title));
    for (i, p) in panels.iter().enumerate() {
        let (ox, oy) = (pw * (i % per_row) as f64, 40.0 + ph * (i / per_row) as f64);
        let (l, r, t, b) = (ox + 55.0, ox + pw - 150.0, oy + 25.0, oy + ph - 45.0);
        let pts: Vec<(f64, f64)> = p.series.iter().flat_map(|s| s.points.iter().copied()).filter(|(x, y)| x.is_finite() && y.is_finite()).collect();
        let tf = |y: f64| if p.y_log { y.max(1e-3).log10() } else { y };
        let (mut x0, mut x1) = pts.iter().fold((f64::MAX, f64::MIN), |(a, b), &(x, _)| (a.min(x), b.max(x)));
        let (mut y0, mut y1) = pts.iter().fold((f64::MAX, f64::MIN), |(a, b), &(_, y)| (a.min(tf(y)), b.max(tf(y))));
        if pts.is_empty() {
            (x0, x1, y0, y1) = (0.0, 1.0, 0.0, 1.0);
        }
        if p.y_from_zero && !p.y_log {
            y0 = y0.min(0.0);
        }
        if p.y_log {
            (y0, y1) = (y0.floor(), y1.ceil());
        }
        if x1 <= x0 {
            x1 = x0 + 1.0;
        }
        if y1 <= y0 {
            y1 = y0 + 1.0;
        }
        if !p.y_log {
            y1 += (y1 - y0) * 0.05;
        }
        let sx = |x: f64| l + (x - x0) / (x1 - x0) * (r - l);
        let sy = |y: f64| b - (tf(y) - y0) / (y1 - y0) * (b - t);
        let syt = |yt: f64| b - (yt - y0) / (y1 - y0) * (b - t);
        let _ = writeln!(s, r#"<text x="{}" y="{}" font-size="12" text-anchor="middle">{}</text>"#, (l + r) / 2.0, oy + 14.0, esc(&p.title));
        let _ = writeln!(s, r##"<rect x="{l}" y="{t}" width="{}" height="{}" fill="none" stroke="#444"/>"##, r - l, b - t);
        // Y ticks.
        if p.y_log {
            let mut e = y0;
            while e <= y1 + 1e-9 {
                let yy = syt(e);
                let _ = writeln!(
                    s,
                    r##"<line x1="{l}" x2="{r}" y1="{yy}" y2="{yy}" stroke="#ddd"/><text x="{}" y="{}" text-anchor="end">{}</text>"##,
                    l - 4.0,
                    yy + 4.0,
                    fmt_num(10f64.powf(e))
                );
                e += 1.0;
            }
        } else {
            let st = tick_step(y1 - y0);
            let mut v = (y0 / st).ceil() * st;
            while v <= y1 + 1e-9 {
                let yy = syt(v);
                let _ = writeln!(
                    s,
                    r##"<line x1="{l}" x2="{r}" y1="{yy}" y2="{yy}" stroke="#ddd"/><text x="{}" y="{}" text-anchor="end">{}</text>"##,
                    l - 4.0,
                    yy + 4.0,
                    fmt_num(v)
                );
                v += st;
            }
        }
        let mut st = tick_step(x1 - x0);
        if pts.iter().all(|(x, _)| x.fract() == 0.0) {
            st = st.max(1.0);
        }
        let mut v = (x0 / st).ceil() * st;
        while v <= x1 + 1e-9 {
            let xx = sx(v);
            let _ = writeln!(s, r#"<text x="{xx}" y="{}" text-anchor="middle">{}</text>"#, b + 14.0, fmt_num(v));
            v += st;
        }
        let _ = writeln!(s, r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#, (l + r) / 2.0, b + 30.0, esc(&p.x_label));
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle" transform="rotate(-90 {} {})">{}</text>"#,
            ox + 14.0,
            (t + b) / 2.0,
            ox + 14.0,
            (t + b) / 2.0,
            esc(&p.y_label)
        );
        for (j, se) in p.series.iter().enumerate() {
            let c = PALETTE[se.color.unwrap_or(j) % PALETTE.len()];
            let d: Vec<String> =
                se.points.iter().filter(|(x, y)| x.is_finite() && y.is_finite()).map(|&(x, y)| format!("{:.1},{:.1}", sx(x), sy(y))).collect();
            let dash = if se.dashed { r#" stroke-dasharray="5,4""# } else { "" };
            let _ = writeln!(s, r#"<polyline fill="none" stroke="{c}" stroke-width="1.8"{dash} points="{}"/>"#, d.join(" "));
            if se.points.len() <= 12 {
                for &(x, y) in &se.points {
                    if x.is_finite() && y.is_finite() {
                        let _ = writeln!(s, r#"<circle cx="{:.1}" cy="{:.1}" r="2.5" fill="{c}"/>"#, sx(x), sy(y));
                    }
                }
            }
            let ly = t + 6.0 + 15.0 * j as f64;
            let _ = writeln!(
                s,
                r#"<line x1="{}" x2="{}" y1="{ly}" y2="{ly}" stroke="{c}" stroke-width="2"{dash}/><text x="{}" y="{}">{}</text>"#,
                r + 8.0,
                r + 26.0,
                r + 30.0,
                ly + 4.0,
                esc(&se.label)
            );
        }
    }
    s.push_str("</svg>\n");
    s
}

/// A horizontal grouped bar chart: one group per row label, one bar per series (same
/// series order in every group), optionally on a log10 axis.
pub fn svg_bars(title: &str, x_label: &str, series: &[String], groups: &[(String, Vec<f64>)], log: bool) -> String {
    let bar_h = 9.0;
    let group_h = bar_h * series.len() as f64 + 10.0;
    let (l, r, t) = (230.0, 720.0, 50.0);
    let b = t + group_h * groups.len() as f64;
    let (w, h) = (r + 30.0, b + 70.0);
    let vals: Vec<f64> = groups.iter().flat_map(|g| g.1.iter().copied()).filter(|v| v.is_finite() && *v > 0.0).collect();
    let vmax = vals.iter().copied().fold(1e-9, f64::max);
    let vmin = vals.iter().copied().fold(f64::MAX, f64::min).min(vmax);
    let (a0, a1) = if log { (vmin.log10().floor(), vmax.log10().ceil().max(vmin.log10().floor() + 1.0)) } else { (0.0, vmax * 1.05) };
    let sx = |v: f64| {
        let x = if log { (v.max(10f64.powf(a0)).log10() - a0) / (a1 - a0) } else { v / a1 };
        l + x.clamp(0.0, 1.0) * (r - l)
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(s, r#"<text x="{}" y="22" font-size="15" text-anchor="middle">{}</text>"#, w / 2.0, esc(title));
    // Axis ticks.
    if log {
        let mut e = a0;
        while e <= a1 + 1e-9 {
            let x = sx(10f64.powf(e));
            let _ = writeln!(
                s,
                r##"<line x1="{x}" x2="{x}" y1="{t}" y2="{b}" stroke="#ddd"/><text x="{x}" y="{}" text-anchor="middle">{}</text>"##,
                b + 14.0,
                fmt_num(10f64.powf(e))
            );
            e += 1.0;
        }
    } else {
        let st = tick_step(a1);
        let mut v = 0.0;
        while v <= a1 + 1e-9 {
            let x = sx(v);
            let _ = writeln!(
                s,
                r##"<line x1="{x}" x2="{x}" y1="{t}" y2="{b}" stroke="#ddd"/><text x="{x}" y="{}" text-anchor="middle">{}</text>"##,
                b + 14.0,
                fmt_num(v)
            );
            v += st;
        }
    }
    let _ = writeln!(s, r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#, (l + r) / 2.0, b + 32.0, esc(x_label));
    for (gi, (label, vs)) in groups.iter().enumerate() {
        let gy = t + group_h * gi as f64;
        let _ = writeln!(s, r#"<text x="{}" y="{}" text-anchor="end">{}</text>"#, l - 6.0, gy + group_h / 2.0, esc(label));
        for (si, v) in vs.iter().enumerate() {
            let y = gy + 5.0 + bar_h * si as f64;
            let c = PALETTE[si % PALETTE.len()];
            let x1 = if v.is_finite() && *v > 0.0 { sx(*v) } else { l };
            let _ = writeln!(s, r#"<rect x="{l}" y="{y}" width="{:.1}" height="{}" fill="{c}"/>"#, (x1 - l).max(0.5), bar_h - 1.0);
        }
    }
    for (si, name) in series.iter().enumerate() {
        let x = l + 110.0 * si as f64;
        let c = PALETTE[si % PALETTE.len()];
        let _ = writeln!(
            s,
            r#"<rect x="{x}" y="{}" width="10" height="10" fill="{c}"/><text x="{}" y="{}">{}</text>"#,
            b + 44.0,
            x + 14.0,
            b + 53.0,
            esc(name)
        );
    }
    let _ = writeln!(s, r##"<line x1="{l}" x2="{l}" y1="{t}" y2="{b}" stroke="#444"/>"##);
    s.push_str("</svg>\n");
    s
}

fn fmt_num(v: f64) -> String {
    if v.abs() >= 100.0 || v == v.round() {
        format!("{:.0}", v)
    } else if v.abs() >= 1.0 {
        format!("{:.1}", v)
    } else {
        format!("{:.2}", v)
    }
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
    fn svg_is_well_formed_enough() {
        let p = Panel {
            title: "t".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            series: vec![Series { label: "a<b".into(), points: vec![(0.0, 1.0), (1.0, 2.0)], dashed: false, color: None }],
            y_from_zero: true,
            y_log: false,
        };
        let s = svg_chart("T", &[p.clone(), Panel { y_log: true, ..p }], 2);
        assert!(s.starts_with("<svg") && s.ends_with("</svg>\n") && s.contains("a&lt;b"));
    }
}
