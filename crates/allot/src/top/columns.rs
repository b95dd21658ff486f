//! The columns of `allot top`: what each one is called, how it aligns, and what a job's
//! cell shows. Every cell from a process or a user goes through `for_terminal` and is
//! cut to its column's widest.

use super::sort::SortKey;
use crate::currency_fields::{currency_shown_in, CurrencyField};
use crate::proto::{CurrencyView, JobView};
use crate::readings::JobKernel;
use allot_report::{fit, for_terminal, width};

pub use crate::fields::secs;
use crate::fields::{shown_in, Field, Form};
use crate::memory_fields::{memory_shown_in, MemoryField};

/// A column of the job or currency table: a job's field or a currency's (its header,
/// alignment and cell from [`crate::fields`] and [`crate::currency_fields`]), or the usage bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Col {
    F(Field),
    C(CurrencyField),
    /// A currency's memory field (its memory and I/O pressure), where memory is shared.
    M(MemoryField),
    Bar,
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

/// The currency table's columns: the currency fields `top` shows, the bar after USAGE,
/// then the memory fields `top` shows (memory and I/O pressure; the frame keeps them
/// only where a currency has that pressure).
pub fn currency_cols() -> Vec<Col> {
    let mut v = vec![];
    for f in currency_shown_in(|i| i.top) {
        v.push(Col::C(f));
        if f == CurrencyField::Usage {
            v.push(Col::Bar);
        }
    }
    v.extend(memory_shown_in(|i| i.top).map(Col::M));
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

/// The currency table's columns dropped first.
pub const CURRENCY_DROP: [Col; 7] = [
    Col::M(MemoryField::IoSome),
    Col::M(MemoryField::MemSome),
    Col::C(CurrencyField::Kind),
    Col::C(CurrencyField::Jobs),
    Col::C(CurrencyField::Active),
    Col::C(CurrencyField::Cap),
    Col::Bar,
];

/// COMMAND keeps at least this many columns before another column is dropped (enough
/// for "make -j8"; at 80 columns that keeps WAIT beside a 13-character job id).
pub const COMMAND_MIN: usize = 8;

impl Col {
    pub fn header(self) -> &'static str {
        match self {
            Col::F(f) => f.spec().header,
            Col::C(f) => f.spec().header,
            Col::M(f) => f.spec().header,
            Col::Bar => "USE/ENT",
        }
    }
    pub fn right(self) -> bool {
        match self {
            Col::F(f) => f.right(Form::Short),
            Col::C(f) => f.right(),
            Col::M(f) => f.right(),
            Col::Bar => false,
        }
    }
    pub fn max(self) -> usize {
        match self {
            Col::F(Field::Job) => 16,
            Col::F(Field::User | Field::Currency | Field::Cap) | Col::C(CurrencyField::Name | CurrencyField::Cap) => 12,
            Col::C(CurrencyField::Kind) => 8,
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
        Col::C(_) | Col::M(_) | Col::Bar => String::new(),
    };
    fit(&for_terminal(&s), c.max()).into_owned()
}

/// A currency's cell in a column (the bar is drawn by the frame); `jobs`: the frame's.
pub fn currency_cell(col: Col, c: &CurrencyView, jobs: &[JobView]) -> String {
    let s = match col {
        Col::C(f) => f.text(c, jobs),
        Col::M(f) => c.memory.as_ref().map_or_else(|| "-".into(), |m| f.text(c, m)),
        Col::F(_) | Col::Bar => String::new(),
    };
    fit(&for_terminal(&s), col.max()).into_owned()
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
