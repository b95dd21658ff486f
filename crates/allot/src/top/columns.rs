//! The columns of `allot top`: what each one is called, how it aligns, and what a job's
//! cell shows. Every cell from a process or a user goes through `for_terminal` and is
//! cut to its column's widest.

use super::screen::SortKey;
use crate::proto::JobView;
use crate::readings::JobKernel;
use allot_report::{fit, for_terminal, width};

pub use crate::fields::{cpus, secs};
use crate::fields::{shown_in, Field, Form};

/// A column of the job or currency table: a job's field (its header, alignment and cell
/// from [`crate::fields`]), the usage bar, or one of the currency table's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Col {
    F(Field),
    Bar,
    // The currency table's own.
    Kind,
    Jobs,
    Active,
}

/// The job table's columns, left to right: the fields `top` shows, the bar after USAGE
/// (PSI only where a job has pressure).
pub fn cols() -> Vec<Col> {
    let mut v = vec![];
    for f in shown_in(|i| i.top) {
        v.push(Col::F(f));
        if f == Field::Usage {
            v.push(Col::Bar);
        }
    }
    v
}

/// Job columns dropped first when the terminal is narrow.
pub const DROP: [Col; 10] = [
    Col::F(Field::Psi),
    Col::F(Field::Funding),
    Col::F(Field::Currency),
    Col::F(Field::Throttled),
    Col::F(Field::Processes),
    Col::F(Field::Cap),
    Col::F(Field::Wait),
    Col::Bar,
    Col::F(Field::State),
    Col::F(Field::User),
];

/// The currency table's columns, and those it drops first.
pub const CURRENCY_COLS: [Col; 9] = [
    Col::F(Field::Currency),
    Col::Kind,
    Col::F(Field::Funding),
    Col::F(Field::Cap),
    Col::Jobs,
    Col::Active,
    Col::F(Field::Entitled),
    Col::F(Field::Usage),
    Col::Bar,
];
pub const CURRENCY_DROP: [Col; 5] = [Col::Kind, Col::Jobs, Col::Active, Col::F(Field::Cap), Col::Bar];

/// COMMAND keeps at least this many columns before another column is dropped (enough
/// for "make -j8"; at 80 columns that keeps WAIT beside a 13-character job id).
pub const COMMAND_MIN: usize = 8;

impl Col {
    pub fn header(self) -> &'static str {
        match self {
            Col::F(f) => f.spec().header,
            Col::Bar => "USE/ENT",
            Col::Kind => "KIND",
            Col::Jobs => "JOBS",
            Col::Active => "ACTIVE",
        }
    }
    pub fn right(self) -> bool {
        match self {
            Col::F(f) => f.right(Form::Short),
            Col::Bar | Col::Kind => false,
            Col::Jobs | Col::Active => true,
        }
    }
    pub fn max(self) -> usize {
        match self {
            Col::F(Field::Job) => 16,
            Col::F(Field::User | Field::Currency | Field::Cap) => 12,
            Col::F(Field::State) => 16,
            _ => 60,
        }
    }
    pub fn sort(self) -> Option<SortKey> {
        Some(match self {
            Col::F(Field::Usage) => SortKey::Usage,
            Col::F(Field::Entitled) => SortKey::Entitled,
            Col::F(Field::Tickets) => SortKey::Tickets,
            Col::F(Field::Processes) => SortKey::Pids,
            Col::F(Field::Wait) => SortKey::Wait,
            Col::F(Field::Job) => SortKey::Job,
            _ => return None,
        })
    }
}

/// A bar of `w` columns on a scale of `scale` CPUs: `#` usage within the entitlement,
/// `+` usage beyond it, `-` entitlement unused, `.` the rest. ASCII, so it reads the same
/// over any ssh and in any locale.
pub fn bar(usage: f64, entitled: f64, scale: f64, w: usize) -> String {
    let cells = |x: f64| ((x / scale * w as f64).round().max(0.0) as usize).min(w);
    let (u, e) = (cells(usage), cells(entitled));
    (0..w)
        .map(|i| match (i < u, i < e) {
            (true, true) => '#',
            (true, false) => '+',
            (false, true) => '-',
            (false, false) => '.',
        })
        .collect()
}

/// A job's cell in a column (the bar is drawn by the frame, which knows the scale).
pub fn cell(c: Col, j: &JobView, k: &JobKernel) -> String {
    let s = match c {
        Col::F(f) => f.text(j, k, Form::Short),
        Col::Bar | Col::Kind | Col::Jobs | Col::Active => String::new(),
    };
    fit(&for_terminal(&s), c.max()).into_owned()
}

/// Pads or cuts `s` to exactly `w` columns.
pub fn pad(s: &str, w: usize, right: bool) -> String {
    let s = fit(s, w);
    let gap = " ".repeat(w - width(&s));
    if right {
        gap + &s
    } else {
        s.into_owned() + &gap
    }
}
