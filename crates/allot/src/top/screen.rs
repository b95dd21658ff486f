//! One frame of `allot top`, pure: the daemon's replies, the kernel readings and the
//! viewer's choices in, lines of text out. The terminal side (`tty`) only adds the
//! styles; a plain frame (stdout not a terminal) is the same text without them.
//!
//! Every string that came from a process or a user (job ids, user and currency names,
//! command lines, the filter typed, an error) goes through `for_terminal` and is cut to
//! its column by `fit`, so nothing can move the cursor or break the columns. When the
//! terminal is narrow, whole columns are dropped in a fixed order (PSI, FUNDING, CURRENCY,
//! THROTTLED, PIDS, CAP, WAIT, bar, STATE, USER) before COMMAND shrinks.

use super::columns::{bar, cell, cols, currency_cell, currency_cols, pad, secs, Col, COMMAND_MIN, CURRENCY_DROP, DROP};
use super::sort::SortKey;
use crate::currency_fields::entitlement as currency_entitlement;
use crate::fields::Field;
use crate::proto::{JobView, ShowView, StatusView};
use crate::readings::Readings;
use allot_report::{fit, for_terminal, width};
use std::cmp::Ordering;

/// Everything a frame shows.
#[derive(Debug)]
pub struct Frame<'a> {
    /// The daemon's status.
    pub status: &'a StatusView,
    /// Its jobs and currencies.
    pub show: &'a ShowView,
    /// The kernel's readings of the jobs.
    pub kernel: &'a Readings,
    /// Sort key and direction.
    pub sort: SortKey,
    /// Smallest first.
    pub ascending: bool,
    /// Only this user's jobs (asked of the daemon).
    pub filter: Option<&'a str>,
    /// The filter being typed, when the prompt is open.
    pub prompt: Option<&'a str>,
    /// An error or notice to show (e.g. the daemon is unreachable).
    pub message: Option<&'a str>,
    /// Job rows scrolled past.
    pub scroll: usize,
    /// Wall-clock time of the data, e.g. "14:02:11".
    pub clock: &'a str,
}

/// How a line is drawn on a terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Plain text.
    Normal,
    /// The title line (bold).
    Title,
    /// A table header (reverse video).
    Header,
    /// A message that needs attention (bold).
    Alert,
}

/// One line of a frame; `mark` is a byte range drawn highlighted (the sort key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// Style.
    pub style: Style,
    /// The text, already safe for a terminal and no wider than the frame.
    pub text: String,
    /// Highlighted byte range of `text`.
    pub mark: Option<(usize, usize)>,
}

impl Line {
    fn new(style: Style, text: impl Into<String>) -> Line {
        Line { style, text: text.into(), mark: None }
    }
}

/// A bar's full scale: the largest usage or entitlement among `values`, rounded up to
/// 0.25, 0.5, 1, 2, 4… CPUs (at most the machine's CPUs), so bars compare across rows.
fn scale_of(values: impl Iterator<Item = f64>, ncpu: usize) -> f64 {
    let top = values.fold(0.0, f64::max);
    let mut s = 0.25;
    while s < top && s < ncpu as f64 {
        s *= 2.0;
    }
    s.min((ncpu as f64).max(0.25))
}

fn job_order(a: &str, b: &str) -> Ordering {
    match (a.parse::<u64>(), b.parse::<u64>()) {
        (Ok(x), Ok(y)) => x.cmp(&y),
        (Ok(_), Err(_)) => Ordering::Less,
        (Err(_), Ok(_)) => Ordering::Greater,
        _ => a.cmp(b),
    }
}

/// The jobs in the frame's order.
fn sorted<'a>(f: &Frame<'a>) -> Vec<&'a JobView> {
    let mut v: Vec<&JobView> = f.show.jobs.iter().collect();
    let k = |j: &JobView| f.kernel.jobs.get(&j.id).copied().unwrap_or_default();
    let num = |j: &JobView| -> f64 {
        match f.sort {
            SortKey::Usage => j.usage,
            SortKey::Entitled => j.entitlement,
            SortKey::Tickets => j.tickets as f64,
            SortKey::Pids => j.pids.as_ref().map_or(-1.0, |p| p.len() as f64),
            SortKey::Wait => k(j).wait.map_or(-1.0, |w| w.ratio),
            SortKey::Job => 0.0,
        }
    };
    v.sort_by(|a, b| {
        let o = match f.sort {
            SortKey::Job => job_order(&a.id, &b.id),
            _ => num(a).partial_cmp(&num(b)).unwrap_or(Ordering::Equal),
        };
        // Ties read in job order whichever way the key runs.
        if f.ascending { o } else { o.reverse() }.then_with(|| job_order(&a.id, &b.id))
    });
    v
}

/// Renders a table: the header (with the sort column marked) and rows, columns chosen to
/// fit `avail` (None: all). Returns the header line and the row lines.
fn table(cols: &[Col], drop: &[Col], rows: &[Vec<String>], avail: Option<usize>, sort: Option<SortKey>, bar_w: usize) -> (Line, Vec<String>) {
    let w: Vec<usize> = cols
        .iter()
        .enumerate()
        .map(|(i, c)| if *c == Col::Bar { bar_w } else { rows.iter().map(|r| width(&r[i])).chain([width(c.header())]).max().unwrap_or(0) })
        .collect();
    let mut keep: Vec<bool> = vec![true; cols.len()];
    if let Some(avail) = avail {
        let need = |keep: &[bool]| -> usize {
            let n = keep.iter().filter(|k| **k).count();
            cols.iter()
                .zip(&w)
                .zip(keep)
                .filter(|(_, k)| **k)
                .map(|((c, w), _)| if *c == Col::F(Field::Command) { COMMAND_MIN } else { *w })
                .sum::<usize>()
                + 2 * n.saturating_sub(1)
        };
        for &d in drop {
            if need(&keep) <= avail {
                break;
            }
            if let Some(i) = cols.iter().position(|c| *c == d) {
                keep[i] = false;
            }
        }
    }
    let mut header = String::new();
    let mut mark = None;
    let mut lines = vec![String::new(); rows.len()];
    let mut first = true;
    for (i, c) in cols.iter().enumerate() {
        if !keep[i] {
            continue;
        }
        let sep = if first { "" } else { "  " };
        first = false;
        let last = *c == Col::F(Field::Command);
        let start = header.len() + sep.len();
        header.push_str(sep);
        header.push_str(&if last { c.header().to_string() } else { pad(c.header(), w[i], c.right()) });
        if c.sort().is_some() && c.sort() == sort {
            mark = Some((start, header.len()));
        }
        for (l, r) in lines.iter_mut().zip(rows) {
            l.push_str(sep);
            l.push_str(&if last { r[i].clone() } else { pad(&r[i], w[i], c.right()) });
        }
    }
    let cut = |s: String| match avail {
        Some(a) => fit(s.trim_end(), a).into_owned(),
        None => s.trim_end().to_string(),
    };
    let header = cut(header);
    let mark = mark.filter(|(_, e)| *e <= header.len());
    (Line { style: Style::Header, text: header, mark }, lines.into_iter().map(cut).collect())
}

/// The title: the most useful facts first, as a narrow terminal cuts the end.
fn title(f: &Frame, ncpu: usize) -> String {
    let active = f.show.jobs.iter().filter(|j| j.active).count();
    let mut t = format!("allot top {}  {} jobs, {active} active", f.clock, f.show.jobs.len());
    if let Some(u) = f.filter {
        t.push_str(&format!(" (user {})", for_terminal(u)));
    }
    let up = f.status.uptime_s;
    let up = if up < 60 { format!("{up}s") } else { secs(up as f64) };
    t.push_str(&format!("  {ncpu} CPUs, {:.2} outside allot  up {up}  cgroup {}", f.show.outside, for_terminal(&f.status.cgroup_version)));
    t
}

/// The frame as lines. `size` is (columns, rows) of a terminal, or None for a plain frame
/// (all rows and columns, commands cut at 60 columns, the legend always). Returns the
/// lines and the largest useful scroll offset.
pub fn render(f: &Frame, size: Option<(usize, usize)>) -> (Vec<Line>, usize) {
    let avail = size.map(|(w, _)| w.max(20));
    let fit_w = |s: &str| match avail {
        Some(a) => fit(s, a).into_owned(),
        None => s.to_string(),
    };
    // The bar gives up cells before WAIT gives up its column: at 80 columns a 13-character
    // job id, a 5-letter user, the bar and WAIT fit beside 8 of COMMAND.
    let bar_w = match avail {
        Some(a) if a < 100 => 8,
        Some(a) if a < 120 => 10,
        _ => 12,
    };
    let scale = scale_of(f.show.jobs.iter().map(|j| j.usage.max(j.entitlement)), f.show.ncpu);
    let cscale = scale_of(f.show.currencies.iter().map(|c| c.usage.max(currency_entitlement(&f.show.jobs, &c.name))), f.show.ncpu);
    let mut out = vec![Line::new(Style::Title, fit_w(&title(f, f.show.ncpu)))];

    // Currencies: funding, hard cap, jobs, and the summed entitlement of their active jobs.
    // A pressure column only where some currency has that pressure (none on cgroup v1).
    let mut ccols = currency_cols();
    ccols.retain(|c| !matches!(c, Col::M(m) if !f.show.currencies.iter().any(|x| x.memory.as_ref().is_some_and(|mem| m.number(mem).is_some()))));
    let crow: Vec<Vec<String>> = f
        .show
        .currencies
        .iter()
        .map(|c| {
            let bar_of = || bar(c.usage, currency_entitlement(&f.show.jobs, &c.name), cscale, bar_w);
            ccols.iter().map(|col| if *col == Col::Bar { bar_of() } else { currency_cell(*col, c, &f.show.jobs) }).collect()
        })
        .collect();
    let (ch, mut clines) = table(&ccols, &CURRENCY_DROP, &crow, avail, None, bar_w);
    let height = size.map(|(_, h)| h.max(6));
    if let Some(h) = height {
        let room = ((h.saturating_sub(6)) / 4).max(1);
        if clines.len() > room {
            let more = clines.len() - room + 1;
            clines.truncate(room - 1);
            clines.push(format!("… {more} more currencies"));
        }
    }
    out.push(ch);
    out.extend(clines.into_iter().map(|t| Line::new(Style::Normal, t)));
    out.push(match f.message {
        Some(m) => Line::new(Style::Alert, fit_w(&for_terminal(m))),
        None => Line::new(Style::Normal, ""),
    });

    // Jobs.
    let jobs = sorted(f);
    let mut cols: Vec<Col> = cols();
    if !f.kernel.jobs.values().any(|k| k.pressure.is_some()) {
        cols.retain(|c| *c != Col::F(Field::Psi));
    }
    let rows: Vec<Vec<String>> = jobs
        .iter()
        .map(|j| {
            let k = f.kernel.jobs.get(&j.id).copied().unwrap_or_default();
            cols.iter().map(|c| if *c == Col::Bar { bar(j.usage, j.entitlement, scale, bar_w) } else { cell(*c, j, &k) }).collect()
        })
        .collect();
    let (mut header, lines) = table(&cols, &DROP, &rows, avail, Some(f.sort), bar_w);
    if size.is_none() {
        header.mark = None;
    }
    out.push(header);
    let legend = legend(f, scale, cscale);
    let (shown, max_scroll) = match height {
        Some(h) => {
            let room = h.saturating_sub(out.len() + 1);
            let max_scroll = lines.len().saturating_sub(room);
            let from = f.scroll.min(max_scroll);
            (lines.into_iter().skip(from).take(room).collect::<Vec<_>>(), max_scroll)
        }
        None => (lines, 0),
    };
    let nrows = shown.len();
    out.extend(shown.into_iter().map(|t| Line::new(Style::Normal, t)));
    if f.show.jobs.is_empty() {
        out.push(Line::new(Style::Normal, fit_w(if f.filter.is_some() { "(no jobs of this user)" } else { "(no jobs)" })));
    }
    match height {
        Some(h) => {
            // The legend where there is room, then the footer on the last line.
            let room = h.saturating_sub(out.len() + 1);
            if room > legend.len() && nrows + f.scroll.min(max_scroll) >= f.show.jobs.len() {
                out.push(Line::new(Style::Normal, ""));
                out.extend(legend.iter().map(|l| Line::new(Style::Normal, fit_w(l))));
            }
            while out.len() + 1 < h {
                out.push(Line::new(Style::Normal, ""));
            }
            out.push(footer(f, avail.unwrap_or(80), max_scroll));
        }
        None => {
            out.push(Line::new(Style::Normal, ""));
            let dir = if f.ascending { "smallest first" } else { "largest first" };
            out.push(Line::new(Style::Normal, format!("Sorted by {} ({dir}).", f.sort.name())));
            out.extend(legend.into_iter().map(|l| Line::new(Style::Normal, l)));
        }
    }
    // A terminal shorter than the frame's fixed lines gets what fits (a line more would
    // scroll the screen on every draw).
    if let Some((_, h)) = size {
        out.truncate(h.max(1));
    }
    (out, max_scroll)
}

/// "1 CPU", "0.5 CPUs", "2 CPUs".
fn n_cpus(x: f64) -> String {
    format!("{x} CPU{}", if x == 1.0 { "" } else { "s" })
}

/// What the columns mean, a line each, short enough for 80 columns where it can be.
fn legend(f: &Frame, scale: f64, cscale: f64) -> Vec<String> {
    let window = f.kernel.window_s.map_or("between refreshes".to_string(), |w| format!("last {}", secs(w)));
    let mut v = vec![
        format!("ENTITLED, USAGE: CPUs (of {}); (0.50): what an idle job would get if it woke", f.show.ncpu),
        format!("USE/ENT: # used within entitlement  + beyond it  - entitled, unused  (full: {}, currencies {cscale})", n_cpus(scale)),
        format!("WAIT: runnable time spent waiting for a CPU ({window}; a quota's stop counts)  THROTTLED: stopped by a quota"),
        "STATE: bg background  boost boosted  focus focused  held soft cap held  nice:N nice emulation".into(),
    ];
    if f.kernel.jobs.values().any(|k| k.pressure.is_some()) {
        v.push("PSI: share of the last 10 s in which some of the job's threads waited for a CPU (cpu.pressure)".into());
    }
    v.extend(f.kernel.notes.iter().map(|n| format!("Note: {}.", for_terminal(n))));
    v
}

fn footer(f: &Frame, avail: usize, max_scroll: usize) -> Line {
    if let Some(p) = f.prompt {
        let t = format!("user (Enter: show only this user, empty: everyone, Esc: cancel): {}_", for_terminal(p));
        return Line::new(Style::Normal, fit(&t, avail).into_owned());
    }
    let mut t = String::new();
    let mut mark = None;
    for k in SortKey::ALL {
        if !t.is_empty() {
            t.push_str("  ");
        }
        let start = t.len();
        t.push_str(&format!("{} {}", k.key(), k.name()));
        if k == f.sort {
            mark = Some((start, t.len()));
        }
    }
    t.push_str("  / user  q quit");
    if max_scroll > 0 {
        t.push_str(&format!("  ↑↓ {}/{}", f.scroll.min(max_scroll) + 1, max_scroll + 1));
    }
    let text = fit(&t, avail).into_owned();
    let mark = mark.filter(|(_, e)| *e <= text.len() && text.is_char_boundary(*e));
    Line { style: Style::Normal, text, mark }
}

#[cfg(test)]
#[path = "screen_tests.rs"]
mod tests;
