//! What the SVG charts share: the document frame, colours, text escaping and the axis
//! drawing.

use std::fmt::Write;

use crate::scale::Ticks;
use crate::terminal::for_terminal;

/// Series colours, in order (matplotlib's "tab10": distinct, and readable in grey).
pub const PALETTE: [&str; 10] = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];

/// The colour of series `i`.
pub fn color(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

/// Text for SVG: control characters made visible (XML 1.0 forbids most of them), then
/// the XML specials escaped.
pub fn esc(s: &str) -> String {
    let s = for_terminal(s);
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

/// Opens an SVG document of `w` × `h` on a white background.
pub(crate) fn open(out: &mut String, w: f64, h: f64) {
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
}

/// Closes the document.
pub(crate) fn close(out: &mut String) {
    out.push_str("</svg>\n");
}

/// A plot area: left, right, top, bottom in document coordinates.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Area {
    pub l: f64,
    pub r: f64,
    pub t: f64,
    pub b: f64,
}

impl Area {
    pub fn x(&self, tk: &Ticks, v: f64) -> f64 {
        self.l + tk.frac(v) * (self.r - self.l)
    }
    pub fn y(&self, tk: &Ticks, v: f64) -> f64 {
        self.b - tk.frac(v) * (self.b - self.t)
    }
}

/// Vertical grid lines and labels of a horizontal axis, and its label.
pub(crate) fn x_axis(out: &mut String, a: Area, tk: &Ticks, label: &str) {
    for &m in &tk.minor {
        let x = a.x(tk, m);
        let _ = writeln!(out, r##"<line x1="{x:.1}" x2="{x:.1}" y1="{}" y2="{}" stroke="#f0f0f0"/>"##, a.t, a.b);
    }
    for (v, text) in &tk.ticks {
        let x = a.x(tk, *v);
        let _ = writeln!(
            out,
            r##"<line x1="{x:.1}" x2="{x:.1}" y1="{}" y2="{}" stroke="#ddd"/><text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"##,
            a.t,
            a.b,
            a.b + 14.0,
            esc(text)
        );
    }
    let _ = writeln!(out, r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#, (a.l + a.r) / 2.0, a.b + 30.0, esc(label));
}

/// Horizontal grid lines and labels of a vertical axis, and its label (rotated, at `lx`).
pub(crate) fn y_axis(out: &mut String, a: Area, tk: &Ticks, label: &str, lx: f64) {
    for &m in &tk.minor {
        let y = a.y(tk, m);
        let _ = writeln!(out, r##"<line x1="{}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="#f0f0f0"/>"##, a.l, a.r);
    }
    for (v, text) in &tk.ticks {
        let y = a.y(tk, *v);
        let _ = writeln!(
            out,
            r##"<line x1="{}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            a.l,
            a.r,
            a.l - 4.0,
            y + 4.0,
            esc(text)
        );
    }
    let my = (a.t + a.b) / 2.0;
    let _ = writeln!(out, r#"<text x="{lx}" y="{my:.1}" text-anchor="middle" transform="rotate(-90 {lx} {my:.1})">{}</text>"#, esc(label));
}

/// The frame around a plot area.
pub(crate) fn frame(out: &mut String, a: Area) {
    let _ = writeln!(out, r##"<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="#444"/>"##, a.l, a.t, a.r - a.l, a.b - a.t);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_xml_and_controls() {
        assert_eq!(esc("a<b & \"c\" > d"), "a&lt;b &amp; &quot;c&quot; &gt; d");
        assert_eq!(esc("\x1b]0;x\x07"), "\\e]0;x\\a");
        assert_eq!(esc("µs — ∞"), "µs — ∞");
    }
}
