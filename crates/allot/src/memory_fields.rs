//! A currency's memory fields in the one schema ([`crate::fields`]), where memory is shared
//! (memory by share, docs/memory.md): `allot show`'s memory table and the memory families of
//! `allot metrics` (`allot_currency_memory_bytes`, `allot_currency_oom_kills_total`, ...)
//! read them, so a currency's memory is named, measured and formatted the same in each.
//! Only currencies whose reply carries memory ([`CurrencyMemory`]) have a row or a sample.
//! Memory and I/O pressure (PSI) per currency are fields here too: a sample only where
//! the kernel has them (cgroup v2 and systemd's slices, not cgroup v1).

use crate::fields::{format_unit, In, Spec, Unit};
use crate::memory_view::CurrencyMemory;
use crate::proto::CurrencyView;
use allot_model::memory::human_size;
use allot_report::{for_terminal, Align, Table};

/// A memory field of a currency, in the order the outputs list them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryField {
    Name,
    Usage,
    Share,
    Protection,
    Limit,
    Cap,
    OomAdj,
    OomKills,
    /// `memory.pressure`'s some avg10, full avg10, some total, full total.
    MemSome,
    MemFull,
    MemWaiting,
    MemStalled,
    /// `io.pressure`'s, the same four.
    IoSome,
    IoFull,
    IoWaiting,
    IoStalled,
}

/// Every memory field, in order.
pub const MEMORY_FIELDS: [MemoryField; 16] = {
    use MemoryField::*;
    [Name, Usage, Share, Protection, Limit, Cap, OomAdj, OomKills, MemSome, MemFull, MemWaiting, MemStalled, IoSome, IoFull, IoWaiting, IoStalled]
};

const METRIC: In = In { show: false, top: false, metric: true };
const ALL: In = In { show: true, top: true, metric: true };

const SHOW: In = In { show: true, top: false, metric: false };
const SHOW_METRIC: In = In { show: true, top: false, metric: true };

impl MemoryField {
    pub fn spec(self) -> Spec {
        use MemoryField::*;
        let s = |id, header, unit, counter, help, shown| Spec { id, header, unit, counter, help, shown };
        match self {
            Name => s("currency", "CURRENCY", Unit::Text, false, "The currency's name (a label of every memory metric).", SHOW),
            Usage => s("memory", "MEMORY", Unit::Bytes, false, "The currency's memory charge now, bytes.", SHOW_METRIC),
            Share => s("memory_share", "SHARE", Unit::Ratio, false, "The currency's funded share of the memory available to users.", SHOW),
            Protection => s(
                "memory_protection",
                "PROTECTED",
                Unit::Bytes,
                false,
                "The currency's funded share of the memory available to users, bytes.",
                SHOW_METRIC,
            ),
            Limit => {
                s("memory_limit", "LIMIT", Unit::Bytes, false, "The hard memory limit in force for the currency, bytes (absent: none).", SHOW_METRIC)
            }
            Cap => s("memory_cap", "MEMCAP", Unit::Text, false, "The currency's memory cap as configured (\"16G!\", \"16G\").", SHOW),
            OomAdj => s("oom_score_adj", "OOM_ADJ", Unit::Number, false, "The oom_score_adj its processes get (absent: OOM by share is off).", SHOW),
            OomKills => {
                s("oom_kills", "OOM_KILLS", Unit::Number, true, "OOM kills in the currency (cgroup v1: since the daemon started).", SHOW_METRIC)
            }
            MemSome => s(
                "pressure_memory_avg10",
                "MEM_PSI",
                Unit::Percent,
                false,
                "Share of the last 10 s in which some of the currency's tasks stalled on memory (memory.pressure some avg10; cgroup v2 only).",
                ALL,
            ),
            MemFull => s(
                "pressure_memory_full_avg10",
                "MEM_FULL",
                Unit::Percent,
                false,
                "Share of the last 10 s in which all of the currency's non-idle tasks stalled on memory at once (memory.pressure full avg10).",
                SHOW_METRIC,
            ),
            MemWaiting => s(
                "pressure_memory_waiting",
                "MEM_WAITING",
                Unit::Seconds,
                true,
                "Time in which some of the currency's tasks stalled on memory (memory.pressure some total).",
                METRIC,
            ),
            MemStalled => s(
                "pressure_memory_stalled",
                "MEM_STALLED",
                Unit::Seconds,
                true,
                "Time in which all of the currency's non-idle tasks stalled on memory at once (memory.pressure full total).",
                METRIC,
            ),
            IoSome => s(
                "pressure_io_avg10",
                "IO_PSI",
                Unit::Percent,
                false,
                "Share of the last 10 s in which some of the currency's tasks stalled on block I/O (io.pressure some avg10; cgroup v2 only).",
                ALL,
            ),
            IoFull => s(
                "pressure_io_full_avg10",
                "IO_FULL",
                Unit::Percent,
                false,
                "Share of the last 10 s in which all of the currency's non-idle tasks stalled on block I/O at once (io.pressure full avg10).",
                SHOW_METRIC,
            ),
            IoWaiting => s(
                "pressure_io_waiting",
                "IO_WAITING",
                Unit::Seconds,
                true,
                "Time in which some of the currency's tasks stalled on block I/O (io.pressure some total).",
                METRIC,
            ),
            IoStalled => s(
                "pressure_io_stalled",
                "IO_STALLED",
                Unit::Seconds,
                true,
                "Time in which all of the currency's non-idle tasks stalled on block I/O at once (io.pressure full total).",
                METRIC,
            ),
        }
    }

    /// Its metric family's name: `allot_currency_` + id + unit suffix, `_total` on counters.
    pub fn metric_name(self) -> String {
        self.spec().metric_name("allot_currency_")
    }

    /// Its number for a currency's memory (None: none, e.g. no limit). Text fields have none.
    pub fn number(self, m: &CurrencyMemory) -> Option<f64> {
        use MemoryField::*;
        match self {
            Name | Cap => None,
            Usage => Some(m.usage as f64),
            // Nothing available to users: a share of nothing, shown as none of it.
            Share => Some(if m.available == 0 { 0.0 } else { m.protection as f64 / m.available as f64 }),
            Protection => Some(m.protection as f64),
            Limit => m.limit.map(|l| l as f64),
            OomAdj => m.oom_score_adj.map(f64::from),
            OomKills => Some(m.oom_kills as f64),
            MemSome => m.pressure.memory.map(|p| p.some_avg10),
            MemFull => m.pressure.memory.and_then(|p| p.full_avg10),
            MemWaiting => m.pressure.memory.map(|p| p.some_s),
            MemStalled => m.pressure.memory.and_then(|p| p.full_s),
            IoSome => m.pressure.io.map(|p| p.some_avg10),
            IoFull => m.pressure.io.and_then(|p| p.full_avg10),
            IoWaiting => m.pressure.io.map(|p| p.some_s),
            IoStalled => m.pressure.io.and_then(|p| p.full_s),
        }
    }

    /// Its cell in `show`'s memory table, safe for the terminal.
    pub fn text(self, c: &CurrencyView, m: &CurrencyMemory) -> String {
        let cell = match self {
            MemoryField::Name => c.name.clone(),
            // The cap as configured ("16G!").
            MemoryField::Cap => m.cap.clone().unwrap_or_else(|| "-".into()),
            f => f.number(m).map_or_else(|| "-".into(), |x| format_unit(f.spec().unit, x)),
        };
        for_terminal(&cell).into_owned()
    }

    /// Its column is aligned right (numbers and the cap), else left (the name).
    pub fn right(self) -> bool {
        self != MemoryField::Name
    }
}

/// The memory fields an output shows, in order.
pub fn memory_shown_in(pick: fn(In) -> bool) -> impl Iterator<Item = MemoryField> {
    MEMORY_FIELDS.into_iter().filter(move |f| pick(f.spec().shown))
}

/// `show`'s memory table: one row per currency whose memory is shared, None when none is.
pub fn table(currencies: &[CurrencyView]) -> Option<String> {
    let rows: Vec<(&CurrencyView, &CurrencyMemory)> = currencies.iter().filter_map(|c| Some((c, c.memory.as_ref()?))).collect();
    let avail = rows.first()?.1.available;
    let fields: Vec<MemoryField> = memory_shown_in(|i| i.show).collect();
    let aligns: Vec<Align> = fields.iter().map(|f| if f.right() { Align::Right } else { Align::Left }).collect();
    let t = Table::new(fields.iter().map(|f| f.spec().header))
        .aligns(&aligns)
        .with_rows(rows.iter().map(|(c, m)| fields.iter().map(|f| f.text(c, m)).collect::<Vec<_>>()))
        .render();
    Some(format!(
        "{t}\nMEMORY is each currency's charge now; PROTECTED its funded SHARE of the {} available to users, kept from reclaim while others press; LIMIT the hard limit in force; MEM_PSI and IO_PSI the share of the last 10 s in which some of its tasks stalled on memory or I/O (FULL: all at once; - where the kernel has no pressure per cgroup, as on cgroup v1).\n",
        human_size(avail)
    ))
}

#[cfg(test)]
#[path = "memory_fields_tests.rs"]
mod tests;
