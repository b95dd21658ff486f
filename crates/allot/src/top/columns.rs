//! The columns of `allot top`: what each one is called, how it aligns, and what a job's
//! cell shows. Every cell from a process or a user goes through `for_terminal` and is
//! cut to its column's widest.

use super::screen::SortKey;
use crate::proto::JobView;
use crate::readings::JobKernel;
use allot_report::{fit, for_terminal, width};

/// A column of the job or currency table; its header is [`Col::header`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Col {
    Job,
    User,
    Currency,
    Tickets,
    Funding,
    Entitled,
    Usage,
    Bar,
    Cap,
    State,
    Wait,
    Psi,
    Throttled,
    Pids,
    Command,
    // The currency table's own.
    Kind,
    Jobs,
    Active,
}

/// The job table's columns, left to right (PSI only where a job has pressure).
pub const COLS: [Col; 15] = [
    Col::Job,
    Col::User,
    Col::Currency,
    Col::Tickets,
    Col::Funding,
    Col::Entitled,
    Col::Usage,
    Col::Bar,
    Col::Cap,
    Col::State,
    Col::Wait,
    Col::Psi,
    Col::Throttled,
    Col::Pids,
    Col::Command,
];

/// Job columns dropped first when the terminal is narrow.
pub const DROP: [Col; 10] = [Col::Psi, Col::Funding, Col::Currency, Col::Throttled, Col::Pids, Col::Cap, Col::Wait, Col::Bar, Col::State, Col::User];

/// The currency table's columns, and those it drops first.
pub const CURRENCY_COLS: [Col; 9] = [Col::Currency, Col::Kind, Col::Funding, Col::Cap, Col::Jobs, Col::Active, Col::Entitled, Col::Usage, Col::Bar];
pub const CURRENCY_DROP: [Col; 5] = [Col::Kind, Col::Jobs, Col::Active, Col::Cap, Col::Bar];

/// COMMAND keeps at least this many columns before another column is dropped (enough
/// for "make -j8"; at 80 columns that keeps WAIT beside a 13-character job id).
pub const COMMAND_MIN: usize = 8;

impl Col {
    pub fn header(self) -> &'static str {
        match self {
            Col::Job => "JOB",
            Col::User => "USER",
            Col::Currency => "CURRENCY",
            Col::Tickets => "TICKETS",
            Col::Funding => "FUNDING",
            Col::Entitled => "ENTITLED",
            Col::Usage => "USAGE",
            Col::Bar => "USE/ENT",
            Col::Cap => "CAP",
            Col::State => "STATE",
            Col::Wait => "WAIT",
            Col::Psi => "PSI",
            Col::Throttled => "THROTTLED",
            Col::Pids => "PIDS",
            Col::Command => "COMMAND",
            Col::Kind => "KIND",
            Col::Jobs => "JOBS",
            Col::Active => "ACTIVE",
        }
    }
    pub fn right(self) -> bool {
        matches!(
            self,
            Col::Tickets | Col::Funding | Col::Entitled | Col::Usage | Col::Wait | Col::Psi | Col::Throttled | Col::Pids | Col::Jobs | Col::Active
        )
    }
    pub fn max(self) -> usize {
        match self {
            Col::Job => 16,
            Col::User | Col::Currency | Col::Cap => 12,
            Col::State => 16,
            _ => 60,
        }
    }
    pub fn sort(self) -> Option<SortKey> {
        Some(match self {
            Col::Usage => SortKey::Usage,
            Col::Entitled => SortKey::Entitled,
            Col::Tickets => SortKey::Tickets,
            Col::Pids => SortKey::Pids,
            Col::Wait => SortKey::Wait,
            Col::Job => SortKey::Job,
            _ => return None,
        })
    }
}

/// CPUs with two decimals, never "-0.00".
pub fn cpus(x: f64) -> String {
    format!("{:.2}", allot_model::usage::cpus_used(x))
}

/// Seconds as a person reads them: 0, 0.42s, 12.3s, 4m05s, 3h12m, 2d04h.
pub fn secs(s: f64) -> String {
    let s = s.max(0.0);
    if s == 0.0 {
        "0".into()
    } else if s < 1.0 {
        format!("{s:.2}s")
    } else if s < 60.0 {
        format!("{s:.1}s")
    } else if s < 3600.0 {
        format!("{}m{:02}s", (s / 60.0) as u64, s as u64 % 60)
    } else if s < 86400.0 {
        format!("{}h{:02}m", (s / 3600.0) as u64, (s as u64 % 3600) / 60)
    } else {
        format!("{}d{:02}h", (s / 86400.0) as u64, (s as u64 % 86400) / 3600)
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
        Col::Job => j.id.clone(),
        Col::User => j.user.clone(),
        Col::Currency => j.currency.clone(),
        Col::Tickets => j.tickets.to_string(),
        Col::Funding => j.funding.to_string(),
        Col::Entitled if j.active => cpus(j.entitlement),
        Col::Entitled => format!("({})", cpus(j.entitlement)),
        Col::Usage => cpus(j.usage),
        Col::Bar => String::new(),
        Col::Cap => j.cap.clone().unwrap_or_else(|| "-".into()),
        Col::State => crate::output::state(j),
        Col::Wait => k.wait.map_or("-".into(), |w| format!("{:.0}%", w.ratio * 100.0)),
        Col::Psi => k.pressure.map_or("-".into(), |p| format!("{:.0}%", p.some_avg10)),
        Col::Throttled => k.throttling.map_or("-".into(), |t| secs(t.throttled_ns as f64 / 1e9)),
        Col::Pids => j.pids.as_ref().map_or("-".into(), |p| p.len().to_string()),
        Col::Command => j.command.as_deref().map_or_else(|| "(hidden)".into(), short_command),
        Col::Kind | Col::Jobs | Col::Active => String::new(),
    };
    fit(&for_terminal(&s), c.max()).into_owned()
}

/// A command line with its program's directory left out (`/usr/bin/python3 x.py` is
/// `python3 x.py`), as columns are scarce; `allot show` prints it whole.
pub fn short_command(c: &str) -> String {
    let (prog, rest) = c.split_once(' ').unwrap_or((c, ""));
    let base = prog.rsplit('/').next().filter(|b| !b.is_empty()).unwrap_or(prog);
    if rest.is_empty() {
        base.to_string()
    } else {
        format!("{base} {rest}")
    }
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
