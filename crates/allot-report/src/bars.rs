//! Horizontal grouped bar charts as SVG: one group per row label, one bar per series in
//! every group, on a linear or log value axis, with optional error bars (a spread).

use std::fmt::Write;

use crate::scale::{fmt_num, Axis};
use crate::svg::{self, color, esc, Area};
use crate::terminal::width;

/// One group of bars: a row label and one value per series.
#[derive(Debug, Clone, PartialEq)]
pub struct BarGroup {
    /// Row label.
    pub label: String,
    /// One value per series (non-finite or, on a log axis, non-positive: no bar).
    pub values: Vec<f64>,
    /// Optional spread per value: (low, high), drawn as an error bar.
    pub spread: Vec<Option<(f64, f64)>>,
}

impl BarGroup {
    /// A group without spreads.
    pub fn new(label: impl Into<String>, values: Vec<f64>) -> BarGroup {
        BarGroup { label: label.into(), values, spread: vec![] }
    }

    /// Adds a spread (low, high) per value; `None` where there is none.
    pub fn spread(mut self, spread: Vec<Option<(f64, f64)>>) -> BarGroup {
        self.spread = spread;
        self
    }
}

/// A horizontal grouped bar chart.
///
/// ```
/// use allot_report::{Axis, BarChart, BarGroup};
/// let svg = BarChart::new("lateness", Axis::log("µs (log scale)"), &["p50", "p99"])
///     .group(BarGroup::new("alone", vec![12.0, 80.0]))
///     .group(BarGroup::new("vs hogs", vec![15.0, 9000.0]).spread(vec![None, Some((7000.0, 12000.0))]))
///     .to_svg();
/// assert!(svg.contains(">10000<"));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct BarChart {
    /// Title above the chart.
    pub title: String,
    /// The value axis (horizontal).
    pub axis: Axis,
    /// Series names, in the order of each group's values (the legend).
    pub series: Vec<String>,
    /// Groups, top to bottom.
    pub groups: Vec<BarGroup>,
    /// Reference lines across every group: (value, label), e.g. a bar a result must reach.
    pub marks: Vec<(f64, String)>,
    /// Writes each bar's value at its end.
    pub values_shown: bool,
}

impl BarChart {
    /// A chart with no groups yet.
    pub fn new(title: impl Into<String>, axis: Axis, series: &[&str]) -> BarChart {
        BarChart {
            title: title.into(),
            axis,
            series: series.iter().map(|s| s.to_string()).collect(),
            groups: vec![],
            marks: vec![],
            values_shown: false,
        }
    }

    /// Adds a dashed reference line at `value`, labelled above the bars.
    pub fn mark(mut self, value: f64, label: impl Into<String>) -> BarChart {
        self.marks.push((value, label.into()));
        self
    }

    /// Writes each bar's value (as [`fmt_num`] prints it) just past its end.
    pub fn show_values(mut self) -> BarChart {
        self.values_shown = true;
        self
    }

    /// Adds a group.
    pub fn group(mut self, g: BarGroup) -> BarChart {
        self.groups.push(g);
        self
    }

    /// The chart as a standalone SVG document.
    pub fn to_svg(&self) -> String {
        let bar_h = 9.0;
        let nser = self.series.len().max(self.groups.iter().map(|g| g.values.len()).max().unwrap_or(0)).max(1);
        let group_h = bar_h * nser as f64 + 10.0;
        // Room for the longest row label at about 6.2 px a character (11 px sans-serif).
        let longest = self.groups.iter().map(|g| width(&g.label)).max().unwrap_or(0);
        let l = (12.0 + 6.2 * longest as f64).clamp(80.0, 320.0).round();
        let a = Area { l, r: l + 490.0, t: 50.0, b: 50.0 + group_h * self.groups.len().max(1) as f64 };
        let (w, h) = (a.r + 30.0, a.b + 70.0);
        let log = matches!(self.axis.scale, crate::scale::Scale::Log);
        let vals = self.groups.iter().flat_map(|g| g.values.iter().copied().chain(g.spread.iter().flatten().flat_map(|s| [s.0, s.1])));
        let vals = vals.chain(self.marks.iter().map(|m| m.0));
        let vals: Vec<f64> = vals.filter(|v| v.is_finite() && (!log || *v > 0.0)).collect();
        let tk = self.axis.fit(vals);
        let mut out = String::new();
        svg::open(&mut out, w, h);
        let _ = writeln!(out, r#"<text x="{}" y="22" font-size="15" text-anchor="middle">{}</text>"#, w / 2.0, esc(&self.title));
        svg::x_axis(&mut out, a, &tk, &self.axis.label);
        for (gi, g) in self.groups.iter().enumerate() {
            let gy = a.t + group_h * gi as f64;
            let _ = writeln!(out, r#"<text x="{}" y="{}" text-anchor="end">{}</text>"#, a.l - 6.0, gy + group_h / 2.0 + 3.5, esc(&g.label));
            for (si, v) in g.values.iter().enumerate() {
                let y = gy + 5.0 + bar_h * si as f64;
                if v.is_finite() && (!log || *v > 0.0) {
                    let x1 = a.x(&tk, *v);
                    let _ =
                        writeln!(out, r#"<rect x="{l}" y="{y}" width="{:.1}" height="{}" fill="{}"/>"#, (x1 - l).max(0.5), bar_h - 1.0, color(si));
                    if self.values_shown {
                        let _ =
                            writeln!(out, r#"<text x="{:.1}" y="{}" font-size="9">{}</text>"#, x1.max(l) + 3.0, y + bar_h - 2.0, esc(&fmt_num(*v)));
                    }
                }
                if let Some(Some((lo, hi))) = g.spread.get(si) {
                    if lo.is_finite() && hi.is_finite() {
                        let (x0, x1, cy) = (a.x(&tk, *lo), a.x(&tk, *hi), y + (bar_h - 1.0) / 2.0);
                        let _ = writeln!(
                            out,
                            r##"<path d="M{x0:.1},{cy:.1} L{x1:.1},{cy:.1} M{x0:.1},{:.1} L{x0:.1},{:.1} M{x1:.1},{:.1} L{x1:.1},{:.1}" stroke="#222" stroke-width="1" fill="none"/>"##,
                            cy - 3.0,
                            cy + 3.0,
                            cy - 3.0,
                            cy + 3.0
                        );
                    }
                }
            }
        }
        for (v, label) in &self.marks {
            if v.is_finite() && (!log || *v > 0.0) {
                let x = a.x(&tk, *v);
                let _ = writeln!(
                    out,
                    r##"<line x1="{x:.1}" x2="{x:.1}" y1="{}" y2="{}" stroke="#222" stroke-dasharray="5,3"/><text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"##,
                    a.t - 4.0,
                    a.b,
                    a.t - 8.0,
                    esc(label)
                );
            }
        }
        // Each legend entry as wide as its name (about 6.2 px a character), at least 110 px.
        let mut x = a.l;
        for (si, name) in self.series.iter().enumerate() {
            let _ = writeln!(
                out,
                r#"<rect x="{x}" y="{}" width="10" height="10" fill="{}"/><text x="{}" y="{}">{}</text>"#,
                a.b + 44.0,
                color(si),
                x + 14.0,
                a.b + 53.0,
                esc(name)
            );
            x += (30.0 + 6.2 * width(name) as f64).max(110.0);
        }
        let _ = writeln!(out, r##"<line x1="{l}" x2="{l}" y1="{}" y2="{}" stroke="#444"/>"##, a.t, a.b);
        svg::close(&mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_bars_with_whiskers() {
        let c = BarChart::new("t", Axis::log("µs"), &["p50", "p99", "max"])
            .group(BarGroup::new("alone <busy>", vec![0.06, 0.2, 30.0]))
            .group(BarGroup::new("vs hogs", vec![0.1, 5000.0, 47800.0]).spread(vec![None, Some((3000.0, 7000.0)), None]))
            .group(BarGroup::new("missing", vec![f64::NAN, 0.0, 1.0]));
        let s = c.to_svg();
        assert!(s.starts_with("<svg") && s.ends_with("</svg>\n"));
        assert!(s.contains("alone &lt;busy&gt;"));
        assert!(s.contains(">0.01<") && s.contains(">100000<"), "{s}");
        assert!(!s.contains(">0.10<"));
        assert_eq!(s.matches(r##"stroke="#222""##).count(), 1);
        // 3 + 3 + 1 bars (NaN and 0 on a log axis draw none) and 3 legend swatches.
        assert_eq!(s.matches("<rect x=").count(), 7 + 3);
    }

    #[test]
    fn linear_bars_start_at_zero() {
        let s = BarChart::new("t", Axis::linear("%"), &["a"]).group(BarGroup::new("x", vec![42.0])).to_svg();
        assert!(s.contains(">0<") && s.contains(">50<"), "{s}");
    }

    #[test]
    fn a_mark_is_drawn_and_values_are_written() {
        let s = BarChart::new("t", Axis::linear("%"), &["kept", "held"])
            .mark(90.0, "the bar: 90%")
            .show_values()
            .group(BarGroup::new("allot", vec![98.0, f64::NAN]))
            .to_svg();
        assert!(s.contains("the bar: 90%") && s.contains(r#"stroke-dasharray="5,3""#), "{s}");
        assert!(s.contains(">98<") && !s.contains(">NaN<"), "{s}");
        // The axis reaches the mark though every bar is below it.
        let s = BarChart::new("t", Axis::linear("%"), &["a"]).mark(90.0, "m").group(BarGroup::new("x", vec![40.0])).to_svg();
        assert!(s.contains(">80<"), "{s}");
    }
}
