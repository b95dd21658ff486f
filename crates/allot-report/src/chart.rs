//! Line and scatter charts as SVG: one or more panels, each with its own axes, series
//! drawn as lines, dashed lines or dots, and a measurement's spread as a band (a shaded
//! range along the line) or error bars.

use std::fmt::Write;

use crate::scale::{Axis, Ticks};
use crate::svg::{self, color, esc, Area};

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// A solid line (with a dot on each point when there are 12 or fewer).
    Line,
    /// A dashed line: ideal or reference values.
    Dashed,
    /// Dots only: one per sample, e.g. every dispatch latency.
    Dots,
}

/// One series of a panel.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend label (empty: not in the legend).
    pub label: String,
    /// Points (x, y); non-finite ones are skipped (a line breaks there).
    pub points: Vec<(f64, f64)>,
    /// Line, dashed or dots.
    pub style: Style,
    /// Palette index (default: the series' position), to give a reference line the
    /// colour of the series it belongs to.
    pub color: Option<usize>,
    /// Spread drawn as a shaded band: (x, low, high) along the series.
    pub band: Vec<(f64, f64, f64)>,
    /// Spread drawn as error bars: (x, low, high) at each point.
    pub error_bars: Vec<(f64, f64, f64)>,
}

impl Series {
    /// A solid line.
    pub fn line(label: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series { label: label.into(), points, style: Style::Line, color: None, band: vec![], error_bars: vec![] }
    }

    /// Dots, one per point.
    pub fn dots(label: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series { style: Style::Dots, ..Series::line(label, points) }
    }

    /// Drawn dashed (a reference or ideal line).
    pub fn dashed(mut self) -> Series {
        self.style = Style::Dashed;
        self
    }

    /// Sets the palette index.
    pub fn color(mut self, i: usize) -> Series {
        self.color = Some(i);
        self
    }

    /// Adds a shaded band from `low` to `high` at each x: a spread over time (e.g. the
    /// range over repeated runs, or mean ± sd).
    pub fn band(mut self, band: Vec<(f64, f64, f64)>) -> Series {
        self.band = band;
        self
    }

    /// Adds error bars from `low` to `high` at each x.
    pub fn error_bars(mut self, bars: Vec<(f64, f64, f64)>) -> Series {
        self.error_bars = bars;
        self
    }
}

/// One panel: a title, two axes and its series.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    /// Title above the panel.
    pub title: String,
    /// Horizontal axis.
    pub x: Axis,
    /// Vertical axis.
    pub y: Axis,
    /// What is drawn.
    pub series: Vec<Series>,
}

impl Panel {
    /// A panel with these axes and no series yet.
    pub fn new(title: impl Into<String>, x: Axis, y: Axis) -> Panel {
        Panel { title: title.into(), x, y, series: vec![] }
    }

    /// Adds a series.
    pub fn series(mut self, s: Series) -> Panel {
        self.series.push(s);
        self
    }
}

/// A chart: panels in rows, an optional title above them.
///
/// ```
/// use allot_report::{Axis, Chart, Panel, Series};
/// let p = Panel::new("probe", Axis::linear("time (s)"), Axis::log("lateness (ms)"))
///     .series(Series::line("p99", vec![(0.0, 0.05), (1.0, 10.0)]).band(vec![(0.0, 0.03, 0.08), (1.0, 6.0, 14.0)]));
/// let svg = Chart::new("wakeup lateness").panel(p).to_svg();
/// assert!(svg.starts_with("<svg") && svg.contains(">0.01<") && svg.contains(">10<"));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// Title over the whole chart (empty: none).
    pub title: String,
    /// Panels, left to right then top to bottom.
    pub panels: Vec<Panel>,
    /// Panels per row.
    pub per_row: usize,
    /// Size of one panel, legend included.
    pub panel_size: (f64, f64),
}

const TITLE_H: f64 = 34.0;
const LEGEND_W: f64 = 150.0;

impl Chart {
    /// An empty chart with this title, one panel per row, 460 × 320 panels.
    pub fn new(title: impl Into<String>) -> Chart {
        Chart { title: title.into(), panels: vec![], per_row: 1, panel_size: (460.0, 320.0) }
    }

    /// Adds a panel.
    pub fn panel(mut self, p: Panel) -> Chart {
        self.panels.push(p);
        self
    }

    /// Sets the panels per row.
    pub fn per_row(mut self, n: usize) -> Chart {
        self.per_row = n.max(1);
        self
    }

    /// Sets one panel's size (legend included).
    pub fn panel_size(mut self, w: f64, h: f64) -> Chart {
        self.panel_size = (w, h);
        self
    }

    /// The chart as a standalone SVG document.
    pub fn to_svg(&self) -> String {
        let (pw, ph) = self.panel_size;
        let per_row = self.per_row.max(1);
        let n = self.panels.len().max(1);
        let rows = n.div_ceil(per_row);
        let top = if self.title.is_empty() { 0.0 } else { TITLE_H };
        let (w, h) = (pw * per_row.min(n) as f64, top + ph * rows as f64);
        let mut out = String::new();
        svg::open(&mut out, w, h);
        if !self.title.is_empty() {
            let _ = writeln!(out, r#"<text x="{}" y="22" font-size="15" text-anchor="middle">{}</text>"#, w / 2.0, esc(&self.title));
        }
        for (i, p) in self.panels.iter().enumerate() {
            let (ox, oy) = (pw * (i % per_row) as f64, top + ph * (i / per_row) as f64);
            panel(&mut out, p, ox, oy, pw, ph);
        }
        svg::close(&mut out);
        out
    }
}

fn finite(p: &(f64, f64)) -> bool {
    p.0.is_finite() && p.1.is_finite()
}

fn panel(out: &mut String, p: &Panel, ox: f64, oy: f64, pw: f64, ph: f64) {
    let legend = p.series.iter().any(|s| !s.label.is_empty());
    let a = Area { l: ox + 58.0, r: ox + pw - if legend { LEGEND_W } else { 20.0 }, t: oy + 28.0, b: oy + ph - 42.0 };
    let xs = p.series.iter().flat_map(|s| s.points.iter().map(|q| q.0).chain(s.band.iter().chain(&s.error_bars).map(|q| q.0)));
    let ys = p.series.iter().flat_map(|s| s.points.iter().map(|q| q.1).chain(s.band.iter().chain(&s.error_bars).flat_map(|q| [q.1, q.2])));
    let (tx, ty): (Ticks, Ticks) = (p.x.fit(xs), p.y.fit(ys));
    let _ = writeln!(out, r#"<text x="{:.1}" y="{}" font-size="12" text-anchor="middle">{}</text>"#, (a.l + a.r) / 2.0, oy + 16.0, esc(&p.title));
    svg::y_axis(out, a, &ty, &p.y.label, ox + 14.0);
    svg::x_axis(out, a, &tx, &p.x.label);
    for (j, s) in p.series.iter().enumerate() {
        let c = color(s.color.unwrap_or(j));
        let band: Vec<&(f64, f64, f64)> = s.band.iter().filter(|q| q.0.is_finite() && q.1.is_finite() && q.2.is_finite()).collect();
        if band.len() >= 2 {
            let upper = band.iter().map(|q| format!("{:.1},{:.1}", a.x(&tx, q.0), a.y(&ty, q.2)));
            let lower = band.iter().rev().map(|q| format!("{:.1},{:.1}", a.x(&tx, q.0), a.y(&ty, q.1)));
            let pts: Vec<String> = upper.chain(lower).collect();
            let _ = writeln!(out, r#"<polygon points="{}" fill="{c}" fill-opacity="0.18" stroke="none"/>"#, pts.join(" "));
        }
    }
    for (j, s) in p.series.iter().enumerate() {
        let c = color(s.color.unwrap_or(j));
        match s.style {
            Style::Dots => {
                for q in s.points.iter().filter(|q| finite(q)) {
                    let _ = writeln!(out, r#"<circle cx="{:.1}" cy="{:.1}" r="1.4" fill="{c}"/>"#, a.x(&tx, q.0), a.y(&ty, q.1));
                }
            }
            Style::Line | Style::Dashed => {
                let mut d = String::new();
                let mut pen_up = true;
                for q in &s.points {
                    if !finite(q) {
                        pen_up = true;
                        continue;
                    }
                    let _ = write!(
                        d,
                        "{}{:.1},{:.1}",
                        if pen_up {
                            if d.is_empty() {
                                "M"
                            } else {
                                " M"
                            }
                        } else {
                            " L"
                        },
                        a.x(&tx, q.0),
                        a.y(&ty, q.1)
                    );
                    pen_up = false;
                }
                let dash = if s.style == Style::Dashed { r#" stroke-dasharray="5,4""# } else { "" };
                if !d.is_empty() {
                    let _ = writeln!(out, r#"<path d="{d}" fill="none" stroke="{c}" stroke-width="1.6"{dash}/>"#);
                }
                if s.style == Style::Line && s.points.len() <= 12 {
                    for q in s.points.iter().filter(|q| finite(q)) {
                        let _ = writeln!(out, r#"<circle cx="{:.1}" cy="{:.1}" r="2.5" fill="{c}"/>"#, a.x(&tx, q.0), a.y(&ty, q.1));
                    }
                }
            }
        }
        for q in s.error_bars.iter().filter(|q| q.0.is_finite() && q.1.is_finite() && q.2.is_finite()) {
            let (x, y1, y2) = (a.x(&tx, q.0), a.y(&ty, q.1), a.y(&ty, q.2));
            let _ = writeln!(
                out,
                r#"<path d="M{x:.1},{y1:.1} L{x:.1},{y2:.1} M{:.1},{y1:.1} L{:.1},{y1:.1} M{:.1},{y2:.1} L{:.1},{y2:.1}" stroke="{c}" stroke-width="1.2" fill="none"/>"#,
                x - 3.0,
                x + 3.0,
                x - 3.0,
                x + 3.0
            );
        }
    }
    svg::frame(out, a);
    let mut k = 0;
    for (j, s) in p.series.iter().enumerate() {
        if s.label.is_empty() {
            continue;
        }
        let c = color(s.color.unwrap_or(j));
        let ly = a.t + 8.0 + 15.0 * k as f64;
        k += 1;
        let (x0, x1) = (a.r + 8.0, a.r + 26.0);
        match s.style {
            Style::Dots => {
                let _ = write!(out, r#"<circle cx="{:.1}" cy="{ly:.1}" r="2.5" fill="{c}"/>"#, (x0 + x1) / 2.0);
            }
            Style::Line | Style::Dashed => {
                let dash = if s.style == Style::Dashed { r#" stroke-dasharray="5,4""# } else { "" };
                if !s.band.is_empty() || !s.error_bars.is_empty() {
                    let _ = write!(out, r#"<rect x="{x0}" y="{:.1}" width="18" height="8" fill="{c}" fill-opacity="0.18"/>"#, ly - 4.0);
                }
                let _ = write!(out, r#"<line x1="{x0}" x2="{x1}" y1="{ly:.1}" y2="{ly:.1}" stroke="{c}" stroke-width="2"{dash}/>"#);
            }
        }
        let _ = writeln!(out, r#"<text x="{}" y="{:.1}">{}</text>"#, x1 + 4.0, ly + 4.0, esc(&s.label));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_panels() -> Chart {
        let p = Panel::new("t", Axis::linear("x"), Axis::linear("y"))
            .series(Series::line("a<b", vec![(0.0, 1.0), (1.0, 2.0), (f64::NAN, 1.0), (2.0, 3.0)]))
            .series(Series::line("ideal", vec![(0.0, 0.0), (2.0, 3.0)]).dashed().color(0));
        Chart::new("T").panel(p.clone()).panel(Panel { y: Axis::log("y"), ..p }).per_row(2)
    }

    #[test]
    fn well_formed_and_escaped() {
        let s = two_panels().to_svg();
        assert!(s.starts_with("<svg") && s.ends_with("</svg>\n"), "{s}");
        assert!(s.contains("a&lt;b") && !s.contains("a<b"));
        assert_eq!(s.matches("<svg").count(), 1);
        // A NaN breaks the line: two subpaths.
        assert!(s.contains(" M"), "{s}");
        assert!(s.contains(r#"stroke-dasharray="5,4""#));
    }

    #[test]
    fn bands_and_error_bars_are_drawn_inside_the_axis() {
        let p = Panel::new("spread", Axis::linear("s"), Axis::linear("ms"))
            .series(Series::line("mean", vec![(0.0, 5.0), (1.0, 6.0)]).band(vec![(0.0, 4.0, 9.0), (1.0, 5.0, 7.0)]))
            .series(Series::dots("runs", vec![(0.5, 5.5)]).error_bars(vec![(0.5, 2.0, 8.0)]));
        let s = Chart::new("").panel(p).to_svg();
        assert!(s.contains("<polygon") && s.contains("fill-opacity"));
        assert_eq!(s.matches(r#"stroke-width="1.2""#).count(), 1);
        // The axis covers the band's top (9), not only the points (≤ 6).
        assert!(s.contains(">10<"), "{s}");
    }

    #[test]
    fn log_latency_axis_shows_both_ends() {
        let p = Panel::new("lat", Axis::linear("s"), Axis::log("ms").min(0.01))
            .series(Series::dots("bimodal", vec![(0.0, 0.0), (1.0, 0.05), (2.0, 10.0), (3.0, 400.0)]));
        let s = Chart::new("").panel(p).to_svg();
        for t in [">≤0.01<", ">0.1<", ">10<", ">1000<"] {
            assert!(s.contains(t), "{t} in {s}");
        }
    }

    #[test]
    fn empty_chart_is_still_a_document() {
        let s = Chart::new("nothing").to_svg();
        assert!(s.starts_with("<svg") && s.ends_with("</svg>\n"));
        let s = Chart::new("").panel(Panel::new("", Axis::linear(""), Axis::log(""))).to_svg();
        assert!(s.contains("<rect"));
    }
}
