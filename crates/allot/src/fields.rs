//! One schema for a job's fields, read by `allot show`, `allot top` and `allot metrics`
//! alike: each field's id, column header, unit, help and where it appears, and how its
//! value is read from the daemon's `JobView` and the CLI's kernel readings. A metric's
//! name is made from the id and the unit (`usage` in CPUs is `allot_job_usage_cpus`), a
//! cell's text from the value and the unit (CPUs with two decimals, a ratio in percent,
//! seconds as a person reads them), so a field added here appears in every output its
//! [`Spec`] names, spelled and measured the same in each.

use crate::proto::JobView;
use crate::readings::JobKernel;

/// A field of a job, in the order the outputs list them (tables left to right, metric
/// families top to bottom).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Job,
    User,
    Currency,
    Tickets,
    Funding,
    Weight,
    Entitled,
    Active,
    Usage,
    Window,
    Cap,
    MemCap,
    Quota,
    State,
    Background,
    Boosted,
    Held,
    Focused,
    Niced,
    Nice,
    Runnable,
    Wait,
    WaitingThreads,
    Psi,
    PressureWaiting,
    PressureStalled,
    Throttled,
    CpuPeriods,
    ThrottledPeriods,
    Processes,
    Command,
}

/// Every field, in order.
pub const FIELDS: [Field; 31] = {
    use Field::*;
    [
        Job,
        User,
        Currency,
        Tickets,
        Funding,
        Weight,
        Entitled,
        Active,
        Usage,
        Window,
        Cap,
        MemCap,
        Quota,
        State,
        Background,
        Boosted,
        Held,
        Focused,
        Niced,
        Nice,
        Runnable,
        Wait,
        WaitingThreads,
        Psi,
        PressureWaiting,
        PressureStalled,
        Throttled,
        CpuPeriods,
        ThrottledPeriods,
        Processes,
        Command,
    ]
};

/// What a field's number counts. It names the metric's suffix and the cell's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Words (a name, a state, a command line): a column, never a metric's value.
    Text,
    /// A plain number: tickets, a weight, a nice value, threads, processes, periods.
    Number,
    /// CPUs (`_cpus`), two decimals.
    Cpus,
    /// Seconds (`_seconds`), as `0.42s`, `4m05s`.
    Seconds,
    /// A share 0..1 (`_ratio`), shown in percent.
    Ratio,
    /// Percent 0..100, as the kernel reports it (PSI's averages).
    Percent,
    /// 0 or 1.
    Flag,
    /// Bytes (`_bytes`), as `384M`, `1.5G`.
    Bytes,
}

impl Unit {
    /// The metric name's unit suffix (Prometheus's convention: the unit last).
    pub fn suffix(self) -> &'static str {
        match self {
            Unit::Cpus => "_cpus",
            Unit::Seconds => "_seconds",
            Unit::Ratio => "_ratio",
            Unit::Percent => "_percent",
            Unit::Bytes => "_bytes",
            Unit::Text | Unit::Number | Unit::Flag => "",
        }
    }
}

/// Which outputs show a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct In {
    /// A column of `allot show` (what the daemon's reply holds).
    pub show: bool,
    /// A column of `allot top`'s job table.
    pub top: bool,
    /// A metric family of `allot metrics`, `allot_job_` + id + unit (+ `_total`).
    pub metric: bool,
}

/// A field's description: the one place its names, unit and help are written.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// Its id: lower case words joined by `_`, the metric's stem.
    pub id: &'static str,
    /// Its column header, where it is a column.
    pub header: &'static str,
    pub unit: Unit,
    /// A count that only grows (a metric counter, `_total`); else a gauge.
    pub counter: bool,
    /// What it is, in a sentence (the metric's HELP).
    pub help: &'static str,
    pub shown: In,
}

impl Spec {
    /// Its metric family's name: `prefix` (`allot_job_`, `allot_currency_`) + id + unit
    /// suffix, `_total` on counters.
    pub fn metric_name(&self, prefix: &str) -> String {
        format!("{prefix}{}{}{}", self.id, self.unit.suffix(), if self.counter { "_total" } else { "" })
    }
}

const SHOW_TOP: In = In { show: true, top: true, metric: false };
const ALL: In = In { show: true, top: true, metric: true };
const TOP_METRIC: In = In { show: false, top: true, metric: true };
const TOP: In = In { show: false, top: true, metric: false };
const METRIC: In = In { show: false, top: false, metric: true };
const SHOW_METRIC: In = In { show: true, top: false, metric: true };

/// How a table shows the fields whose cell differs by room: `show` prints a job's pids and
/// whole command line, `top` counts its processes and leaves out the program's directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    Full,
    Short,
}

impl Field {
    pub fn spec(self) -> Spec {
        use Field::*;
        let s = |id, header, unit, counter, help, shown| Spec { id, header, unit, counter, help, shown };
        match self {
            Job => s("job_id", "JOB", Unit::Text, false, "The job's id (a label of every job metric).", SHOW_TOP),
            User => s("user", "USER", Unit::Text, false, "The job's owner (a label of every job metric).", SHOW_TOP),
            Currency => s("currency", "CURRENCY", Unit::Text, false, "The job's currency (a label of every job metric).", SHOW_TOP),
            Tickets => s("tickets", "TICKETS", Unit::Number, false, "The job's tickets: its claim inside its currency (1..10000).", ALL),
            Funding => {
                s("funding", "FUNDING", Unit::Number, false, "The funding of the job's currency (a currency metric, allot_currency_funding).", SHOW_TOP)
            }
            Weight => s("weight", "WEIGHT", Unit::Number, false, "The weight written to the kernel for the job now (boost and soft caps move it).", METRIC),
            Entitled => s(
                "entitlement",
                "ENTITLED",
                Unit::Cpus,
                false,
                "CPUs the job gets now among the active claimants; for an idle job, what it would get if it woke.",
                ALL,
            ),
            Active => s("active", "ACTIVE", Unit::Flag, false, "1 if the job competes for CPU now.", METRIC),
            Usage => s("usage", "USAGE", Unit::Cpus, false, "The job's usage rate: smoothed CPU use, CPUs.", ALL),
            Window => s("window_usage", "WINDOW", Unit::Cpus, false, "The job's CPU use over the boost window, CPUs.", METRIC),
            Cap => s("cap", "CAP", Unit::Cpus, false, "The job's cap in CPUs (kind hard: always; soft: while others want the CPU).", ALL),
            MemCap => s(
                "memory_cap",
                "MEMCAP",
                Unit::Bytes,
                false,
                "The job's own memory cap (kind hard: never more, memory.max; soft: throttled and reclaimed above it, memory.high).",
                SHOW_METRIC,
            ),
            Quota => s("quota", "QUOTA", Unit::Cpus, false, "The cpu.max quota in force now, CPUs (a hard cap, or a soft cap held).", METRIC),
            State => s("state", "STATE", Unit::Text, false, "The job's state applied now, in a few words.", SHOW_TOP),
            Background => {
                s("background", "BG", Unit::Flag, false, "1 if the job is in the background class (runs on idle CPU only).", METRIC)
            }
            Boosted => s("boosted", "BOOST", Unit::Flag, false, "1 if the job's boost is applied now.", METRIC),
            Held => s("held", "HELD", Unit::Flag, false, "1 if the job's soft cap is held now.", METRIC),
            Focused => s("focused", "FOCUS", Unit::Flag, false, "1 if the job is focused by its user.", METRIC),
            Niced => s("niced", "NICED", Unit::Flag, false, "1 if nice emulation has changed the job's weight now.", METRIC),
            Nice => s("nice", "NICE", Unit::Number, false, "The lowest nice value among the job's processes.", METRIC),
            Runnable => s("runnable_threads", "RUNNABLE", Unit::Number, false, "The job's threads that ran or waited lately.", METRIC),
            Wait => s(
                "run_queue_wait",
                "WAIT",
                Unit::Ratio,
                false,
                "Share of the job's runnable time spent waiting for a CPU over the sampling window (its visible threads' schedstat).",
                TOP_METRIC,
            ),
            WaitingThreads => s(
                "run_queue_waiting_threads",
                "WAITING",
                Unit::Number,
                false,
                "The job's threads waiting for a CPU, on average over the sampling window (its visible threads' schedstat).",
                METRIC,
            ),
            Psi => s(
                "pressure_cpu_avg10",
                "PSI",
                Unit::Percent,
                false,
                "Share of the last 10 s in which some of the job's threads waited for a CPU (cgroup v2 cpu.pressure some avg10, the kernel's own average).",
                TOP,
            ),
            PressureWaiting => s(
                "pressure_cpu_waiting",
                "PSI SOME",
                Unit::Seconds,
                true,
                "Time in which some of the job's threads waited for a CPU (cgroup v2 cpu.pressure some).",
                METRIC,
            ),
            PressureStalled => s(
                "pressure_cpu_stalled",
                "PSI FULL",
                Unit::Seconds,
                true,
                "Time in which all of the job's non-idle threads waited for a CPU (cgroup v2 cpu.pressure full).",
                METRIC,
            ),
            Throttled => s(
                "throttled",
                "THROTTLED",
                Unit::Seconds,
                true,
                "Time the job's threads were stopped by its quota (cpu.stat throttled_usec, v1 throttled_time).",
                TOP_METRIC,
            ),
            CpuPeriods => s(
                "cpu_periods",
                "PERIODS",
                Unit::Number,
                true,
                "Bandwidth periods elapsed while the job had a quota (cpu.stat nr_periods).",
                METRIC,
            ),
            ThrottledPeriods => s(
                "throttled_periods",
                "THR PERIODS",
                Unit::Number,
                true,
                "Periods in which the job used its whole quota (cpu.stat nr_throttled).",
                METRIC,
            ),
            Processes => s(
                "processes",
                "PIDS",
                Unit::Number,
                false,
                "Processes in the job (jobs whose processes are hidden from the caller have none).",
                ALL,
            ),
            Command => s("command", "COMMAND", Unit::Text, false, "The command line of the job's first process.", SHOW_TOP),
        }
    }

    /// Its metric family's name: `allot_job_` + id + unit suffix, `_total` on counters.
    pub fn metric_name(self) -> String {
        self.spec().metric_name("allot_job_")
    }

    /// Its number for a job (None: none to report, e.g. no cap, or a reading this caller
    /// cannot make). Text fields have none.
    pub fn number(self, j: &JobView, k: &JobKernel) -> Option<f64> {
        use Field::*;
        let flag = |b: bool| Some(if b { 1.0 } else { 0.0 });
        match self {
            Job | User | Currency | State | Command => None,
            Tickets => Some(j.tickets as f64),
            Funding => Some(j.funding as f64),
            Weight => Some(j.weight as f64),
            Entitled => Some(j.entitlement),
            Active => flag(j.active),
            Usage => Some(j.usage),
            Window => Some(j.recent),
            // A background job's cap is "0", its class, not a quota.
            Cap => j.cap.as_deref().filter(|_| !j.background).and_then(|c| c.parse::<allot_model::Cap>().ok()).map(|c| c.cpus),
            MemCap => mem_cap(j).map(|m| m.bytes as f64),
            Quota => j.quota,
            Background => flag(j.background),
            Boosted => flag(j.boost),
            Held => flag(j.held),
            Focused => flag(j.focus),
            Niced => flag(j.niced),
            Nice => Some(j.nice as f64),
            Runnable => Some(j.runnable as f64),
            Wait => k.wait.map(|w| w.ratio),
            WaitingThreads => k.wait.map(|w| w.threads),
            Psi => k.pressure.map(|p| p.some_avg10),
            PressureWaiting => k.pressure.map(|p| p.some_s),
            PressureStalled => k.pressure.and_then(|p| p.full_s),
            Throttled => k.throttling.map(|t| t.throttled_ns as f64 / 1e9),
            CpuPeriods => k.throttling.map(|t| t.periods as f64),
            ThrottledPeriods => k.throttling.map(|t| t.throttled_periods as f64),
            Processes => j.pids.as_ref().map(|p| p.len() as f64),
        }
    }

    /// A label its metric adds to the job's three (the cap's kind).
    pub fn label(self, j: &JobView) -> Option<(&'static str, String)> {
        match self {
            Field::Cap => {
                let cap = j.cap.as_deref()?.parse::<allot_model::Cap>().ok()?;
                Some(("kind", if cap.hard { "hard" } else { "soft" }.into()))
            }
            Field::MemCap => Some(("kind", if mem_cap(j)?.hard { "hard" } else { "soft" }.into())),
            _ => None,
        }
    }

    /// Its cell in a table, before it is made safe for the terminal and fitted: a number
    /// in its unit's format, `-` where there is none.
    pub fn text(self, j: &JobView, k: &JobKernel, form: Form) -> String {
        use Field::*;
        match (self, form) {
            (Job, _) => j.id.clone(),
            (User, _) => j.user.clone(),
            (Currency, _) => j.currency.clone(),
            (State, _) => state(j),
            // The cap as set ("0.25!" hard, "0.25" soft; "0" for background).
            (Cap, _) => j.cap.clone().unwrap_or_else(|| "-".into()),
            // The memory cap as set ("4G!" hard, "4G" soft).
            (MemCap, _) => j.mem.clone().unwrap_or_else(|| "-".into()),
            // An idle job's entitlement is what it would get if it woke: in parentheses.
            (Entitled, _) if !j.active => format!("({})", cpus(j.entitlement)),
            (Processes, Form::Full) => match &j.pids {
                None => "(hidden)".to_string(),
                Some(p) if p.len() > 4 => format!("{},… ({})", p[..3].iter().map(|x| x.to_string()).collect::<Vec<_>>().join(","), p.len()),
                Some(p) => p.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(","),
            },
            (Command, Form::Full) => j.command.as_deref().map_or_else(|| "(hidden)".into(), |c| allot_report::fit(c, 60).into_owned()),
            (Command, Form::Short) => j.command.as_deref().map_or_else(|| "(hidden)".into(), short_command),
            _ => match self.number(j, k) {
                None => "-".into(),
                Some(x) => format_unit(self.spec().unit, x),
            },
        }
    }

    /// Its column is aligned right (numbers), else left (words, and `show`'s pid lists).
    pub fn right(self, form: Form) -> bool {
        match (self, form) {
            (Field::Processes, Form::Full) | (Field::Cap, _) | (Field::MemCap, _) => false,
            _ => !matches!(self.spec().unit, Unit::Text),
        }
    }
}

/// A number in a unit's format.
pub fn format_unit(unit: Unit, x: f64) -> String {
    match unit {
        Unit::Cpus => cpus(x),
        Unit::Seconds => secs(x),
        Unit::Ratio => format!("{:.0}%", x * 100.0),
        Unit::Percent => format!("{x:.0}%"),
        Unit::Bytes => allot_model::memory::human_size(x as u64),
        Unit::Text | Unit::Number | Unit::Flag => format!("{}", x + 0.0),
    }
}

/// A job's memory cap as the daemon sent it (None: none, or a value this build cannot read).
fn mem_cap(j: &JobView) -> Option<allot_model::memory::MemCap> {
    j.mem.as_deref()?.parse().ok()
}

/// The fields an output shows, in order.
pub fn shown_in(pick: fn(In) -> bool) -> impl Iterator<Item = Field> {
    FIELDS.into_iter().filter(move |f| pick(f.spec().shown))
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

/// A job's applied state in a few words (`show` and `top`).
pub fn state(j: &JobView) -> String {
    let mut v = vec![];
    if j.background {
        v.push("bg".to_string());
    }
    if j.focus {
        v.push("focus".into());
    } else if j.boost {
        v.push("boost".into());
    }
    if j.held {
        v.push("held".into());
    }
    if j.niced {
        v.push(format!("nice:{}", j.nice));
    }
    if v.is_empty() {
        "-".into()
    } else {
        v.join(",")
    }
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

#[cfg(test)]
#[path = "fields_tests.rs"]
mod tests;
