//! A currency's memory as `show` reports it (memory by share, docs/memory.md), and its
//! table.

use allot_model::memory::human_size;
use allot_report::{Align, Table};
use serde::{Deserialize, Serialize};

/// One currency's memory against its share.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CurrencyMemory {
    /// Bytes it uses now (its cgroup's charge: anonymous memory and page cache).
    pub usage: u64,
    /// Its funded share of the memory available to users, bytes: protected up to this.
    pub protection: u64,
    /// The memory available to users, bytes (MemTotal less the reserve, at most allot's
    /// root's limit).
    pub available: u64,
    /// The hard limit written now, bytes: its hard memory cap, and on cgroup v1 the guard
    /// that keeps it out of what others hold within their share. None: unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// Its memory cap as configured ("16G!", "16G").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cap: Option<String>,
    /// The `oom_score_adj` its processes get (None: OOM by share is off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oom_score_adj: Option<i16>,
    /// OOM kills in it: since its cgroup was made (v2), since the daemon started (v1).
    pub oom_kills: u64,
}

/// `show`'s memory table: one row per currency with memory, None when there is none.
pub fn table(rows: &[(String, &CurrencyMemory)]) -> Option<String> {
    if rows.is_empty() {
        return None;
    }
    let t = Table::new(["CURRENCY", "MEMORY", "SHARE", "PROTECTED", "LIMIT", "MEMCAP", "OOM_ADJ", "OOM_KILLS"])
        .aligns(&[Align::Left, Align::Right, Align::Right, Align::Right, Align::Right, Align::Right, Align::Right, Align::Right])
        .with_rows(rows.iter().map(|(name, m)| {
            let share = if m.available == 0 { 0.0 } else { m.protection as f64 / m.available as f64 * 100.0 };
            [
                allot_report::for_terminal(name).into_owned(),
                human_size(m.usage),
                format!("{share:.0}%"),
                human_size(m.protection),
                m.limit.map_or("-".into(), human_size),
                m.cap.clone().unwrap_or_else(|| "-".into()),
                m.oom_score_adj.map_or("-".into(), |a| a.to_string()),
                m.oom_kills.to_string(),
            ]
        }))
        .render();
    let avail = rows.first().map_or(0, |r| r.1.available);
    Some(format!(
        "{t}\nMEMORY is each currency's charge now; PROTECTED its funded SHARE of the {} available to users, kept from reclaim while others press; LIMIT the hard limit in force.\n",
        human_size(avail)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_shows_use_against_share() {
        let m = CurrencyMemory {
            usage: 100 << 20,
            protection: 384 << 20,
            available: 512 << 20,
            limit: Some(412 << 20),
            cap: None,
            oom_score_adj: Some(-999),
            oom_kills: 0,
        };
        let t = table(&[("alice".into(), &m)]).unwrap();
        assert!(
            t.contains("alice") && t.contains("100M") && t.contains("75%") && t.contains("384M") && t.contains("412M") && t.contains("-999"),
            "{t}"
        );
        assert!(t.contains("of the 512M available"), "{t}");
        assert_eq!(table(&[]), None);
    }
}
