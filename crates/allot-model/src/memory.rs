//! Memory by share: a currency's funding is also its share of the memory available to
//! users, and its jobs' tickets divide that share the way they divide its CPU.
//!
//! *Available to users* is the machine's memory (MemTotal) less a reserve for the system
//! (a size, or a percent of MemTotal), and never more than a limit set on allot's own
//! cgroup root (an administrator's bound on all users together). A currency's
//! **protection** is its funding's share of that among the currencies holding memory:
//! reclaim takes from currencies above their protection first, and a currency alone may
//! use all of it (protection is a floor under pressure, not a limit). A **memory cap**
//! bounds a job or currency: hard (`4G!`: never more; the kernel reclaims, then the OOM
//! killer acts inside it) or soft (`4G`: above it the kernel throttles and reclaims).
//!
//! The OOM killer's choice follows the same shares: a process of a currency above its
//! protection gets an `oom_score_adj` high enough that it is chosen before any process of
//! a currency within its protection, which keeps its own ([`oom_score_adj`]).

use crate::ModelError;
pub use room::{least, room, ROOM_MARGIN};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

mod room;

const SIZE_ALLOWED: &str = "a size is bytes or a number with K, M, G or T (powers of 1024), e.g. 512M, 1.5G";
const CAP_ALLOWED: &str =
    "a memory cap is a size with ! for hard (4G!: never more) or without for soft (4G: throttled and reclaimed above it), or none";
const RESERVE_ALLOWED: &str = "a reserve is a size (2G) or a percent of the machine's memory below 100 (10%)";

/// The largest size accepted (16 EiB would overflow; 1 PiB is past any machine).
pub const MAX_BYTES: u64 = 1 << 50;

/// How far above its protection a currency may read and still count as within it: the
/// kernel charges memory in per-CPU batches and allot writes limits in whole MiB, so a
/// currency held at its share by a limit reads a little above it.
pub const SLACK: u64 = 4 << 20;

/// What the guard leaves free under the available memory: a currency must meet its own
/// limit before allot's root meets its own (or the machine runs short), or the kernel
/// reclaims from every currency alike, the protected ones too. Kernel memory charged to
/// the groups and other charges between two ticks fit in it.
pub const GUARD_MARGIN: u64 = 16 << 20;

/// The `oom_score_adj` of a process whose currency is within its protection: the
/// kernel's default, 0. allot only ever raises a process's value (lowering one takes
/// CAP_SYS_RESOURCE, which a hardened daemon need not hold), and gives back what it raised.
pub const WITHIN_SHARE_ADJ: i16 = 0;

/// Parses a size: bytes, or a number with K, M, G or T (binary: K = 1024), optionally
/// followed by `B` or `iB` (`4G`, `4GiB`, `1.5G`, `512m`).
pub fn parse_size(s: &str) -> Result<u64, ModelError> {
    parse_size_as(s, "memory size", SIZE_ALLOWED)
}

fn parse_size_as(s: &str, what: &'static str, allowed: &'static str) -> Result<u64, ModelError> {
    let bad = |why: &str| ModelError::BadMemory { what, got: s.to_string(), why: why.into(), allowed };
    let t = s.trim();
    let t = t.strip_suffix("iB").or_else(|| t.strip_suffix("ib")).or_else(|| t.strip_suffix('B')).or_else(|| t.strip_suffix('b')).unwrap_or(t);
    let (num, mult) = match t.chars().last() {
        Some(c) if c.is_ascii_alphabetic() => {
            let m: u64 = match c.to_ascii_uppercase() {
                'K' => 1 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                'T' => 1 << 40,
                _ => return Err(bad(&format!("unknown unit {c:?}"))),
            };
            (&t[..t.len() - 1], m)
        }
        _ => (t, 1),
    };
    if num.is_empty() {
        return Err(bad("no number"));
    }
    let v: f64 = num.parse().map_err(|_| bad("not a number"))?;
    if !v.is_finite() || v < 0.0 {
        return Err(bad("must be a finite number, at least 0"));
    }
    let bytes = v * mult as f64;
    if bytes > MAX_BYTES as f64 {
        return Err(bad("more than 1 PiB"));
    }
    Ok(bytes.round() as u64)
}

/// Writes a size the way [`parse_size`] reads it, in the largest unit that divides it.
pub fn format_size(bytes: u64) -> String {
    for (u, m) in [("T", 1u64 << 40), ("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)] {
        if bytes >= m && bytes % m == 0 {
            return format!("{}{u}", bytes / m);
        }
    }
    bytes.to_string()
}

/// Writes a size for people: one decimal in the largest unit that fits (`1.5G`, `300M`).
pub fn human_size(bytes: u64) -> String {
    for (u, m) in [("T", 1u64 << 40), ("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)] {
        if bytes >= m {
            let v = bytes as f64 / m as f64;
            return if v >= 100.0 || (v - v.round()).abs() < 0.05 { format!("{v:.0}{u}") } else { format!("{v:.1}{u}") };
        }
    }
    format!("{bytes}")
}

/// A cap on a job's or currency's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemCap {
    /// Bytes.
    pub bytes: u64,
    /// Hard: never more (v2 `memory.max`, v1 `memory.limit_in_bytes`). Soft: above it the
    /// kernel throttles the job's allocations and reclaims its memory (v2 `memory.high`).
    pub hard: bool,
}

impl MemCap {
    /// Parses `4G!`, `4G` or `none` (None).
    pub fn parse_opt(s: &str) -> Result<Option<MemCap>, ModelError> {
        if s.trim().eq_ignore_ascii_case("none") {
            return Ok(None);
        }
        s.parse().map(Some)
    }
}

impl FromStr for MemCap {
    type Err = ModelError;
    fn from_str(s: &str) -> Result<Self, ModelError> {
        let t = s.trim();
        let (body, hard) = match t.strip_suffix('!') {
            Some(b) => (b, true),
            None => (t, false),
        };
        let bytes = parse_size_as(body, "memory cap", CAP_ALLOWED).map_err(|e| match e {
            ModelError::BadMemory { why, .. } => ModelError::BadMemory { what: "memory cap", got: s.to_string(), why, allowed: CAP_ALLOWED },
            e => e,
        })?;
        if bytes < 1 << 20 {
            return Err(ModelError::BadMemory { what: "memory cap", got: s.to_string(), why: "less than 1M".into(), allowed: CAP_ALLOWED });
        }
        Ok(MemCap { bytes, hard })
    }
}

impl fmt::Display for MemCap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", format_size(self.bytes), if self.hard { "!" } else { "" })
    }
}

/// The memory kept back for the system: a size, or a percent of the machine's memory.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Reserve {
    /// Bytes.
    Bytes(u64),
    /// Percent of MemTotal, 0 ≤ p < 100.
    Percent(f64),
}

impl Default for Reserve {
    /// 10% of the machine: the kernel, its caches and the system's services.
    fn default() -> Self {
        Reserve::Percent(10.0)
    }
}

impl FromStr for Reserve {
    type Err = ModelError;
    fn from_str(s: &str) -> Result<Self, ModelError> {
        let bad = |why: &str| ModelError::BadMemory { what: "memory reserve", got: s.to_string(), why: why.into(), allowed: RESERVE_ALLOWED };
        match s.trim().strip_suffix('%') {
            Some(p) => {
                let v: f64 = p.trim().parse().map_err(|_| bad("not a number"))?;
                if !(0.0..100.0).contains(&v) {
                    return Err(bad("a percent must be at least 0 and below 100"));
                }
                Ok(Reserve::Percent(v))
            }
            None => parse_size_as(s, "memory reserve", RESERVE_ALLOWED).map(Reserve::Bytes),
        }
    }
}

impl fmt::Display for Reserve {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reserve::Bytes(b) => write!(f, "{}", format_size(*b)),
            Reserve::Percent(p) => write!(f, "{p}%"),
        }
    }
}

/// The memory available to users: `total` (MemTotal) less the reserve, and at most
/// `root_limit`, a limit set on allot's own cgroup root.
pub fn available(total: u64, reserve: Reserve, root_limit: Option<u64>) -> u64 {
    let kept = match reserve {
        Reserve::Bytes(b) => b,
        Reserve::Percent(p) => (total as f64 * p / 100.0) as u64,
    };
    let a = total.saturating_sub(kept);
    root_limit.map_or(a, |l| a.min(l))
}

/// One job holding memory.
#[derive(Debug, Clone, PartialEq)]
pub struct JobMem {
    /// Its tickets.
    pub tickets: u32,
    /// Its cap, if any.
    pub cap: Option<MemCap>,
}

/// One currency holding memory (with at least one job that holds processes).
#[derive(Debug, Clone, PartialEq)]
pub struct CurrencyMem {
    /// Its funding.
    pub funding: u32,
    /// Bytes it uses now (its cgroup's charge).
    pub usage: u64,
    /// Its cap, if any.
    pub cap: Option<MemCap>,
    /// Its jobs.
    pub jobs: Vec<JobMem>,
}

/// What one job gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobPlan {
    /// Its share of its currency's protection, by tickets.
    pub protection: u64,
    /// Soft cap (v2 `memory.high`), if any.
    pub high: Option<u64>,
    /// Hard cap (v2 `memory.max`, v1 `memory.limit_in_bytes`), if any.
    pub max: Option<u64>,
}

/// What one currency gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CurrencyPlan {
    /// Its funded share of the available memory.
    pub protection: u64,
    /// Soft cap, if any.
    pub high: Option<u64>,
    /// Hard cap, if any.
    pub max: Option<u64>,
    /// Where the kernel has no protection for a parent's limit (cgroup v1): a hard limit
    /// that keeps this currency out of what the others hold within their protection, the
    /// available memory less `min(usage, protection)` of every other currency and
    /// [`GUARD_MARGIN`], and under its own hard cap. A currency alone gets all of it.
    pub guard: u64,
    /// Bytes above its protection (0 when within it).
    pub over: u64,
    /// `oom_score_adj` for its processes ([`oom_score_adj`]).
    pub oom_score_adj: i16,
    /// Per job, in the order given.
    pub jobs: Vec<JobPlan>,
}

/// Divides `available` bytes among the currencies by funding, and each currency's share
/// among its jobs by tickets. Pure: the same inputs give the same plan.
pub fn plan(available: u64, currencies: &[CurrencyMem]) -> Vec<CurrencyPlan> {
    let funding: u64 = currencies.iter().map(|c| c.funding.max(1) as u64).sum();
    let protection: Vec<u64> = currencies.iter().map(|c| if funding == 0 { 0 } else { share(available, c.funding.max(1) as u64, funding) }).collect();
    let held: u64 = currencies.iter().zip(&protection).map(|(c, p)| c.usage.min(*p)).sum();
    // The largest protection of a currency within it: no process of such a currency holds
    // more, so an over-share process ranked at least this far up is chosen first.
    let floor = currencies.iter().zip(&protection).filter(|(c, p)| c.usage <= **p + SLACK).map(|(_, p)| *p + SLACK).max().unwrap_or(0);
    currencies
        .iter()
        .zip(&protection)
        .map(|(c, &p)| {
            let others = held - c.usage.min(p);
            let (high, max) = split_cap(c.cap);
            let guard = if others == 0 { available } else { available.saturating_sub(others + GUARD_MARGIN) }.min(max.unwrap_or(u64::MAX));
            let tickets: u64 = c.jobs.iter().map(|j| j.tickets.max(1) as u64).sum();
            let jobs = c
                .jobs
                .iter()
                .map(|j| {
                    let (high, max) = split_cap(j.cap);
                    JobPlan { protection: share(p, j.tickets.max(1) as u64, tickets), high, max }
                })
                .collect();
            let over = if c.usage > p + SLACK { c.usage - p } else { 0 };
            CurrencyPlan { protection: p, high, max, guard, over, oom_score_adj: oom_score_adj(c.usage, p, available, floor), jobs }
        })
        .collect()
}

/// The soft limit (v2 `memory.high`, systemd's `MemoryHigh=`) a currency's slice is given:
/// its guard, rounded down to a multiple of [`GUARD_MARGIN`] (so it changes seldom) and
/// never below its protection, and at most its own soft cap; none where its hard cap is at
/// or below that (the hard cap rules). Above it a currency is throttled and reclaims its
/// own pages in its own time, before the machine runs short and the kernel's reclaim
/// threads take CPU from every user (measured in the systemd VM: docs/memory.md). A
/// currency alone may use all of the available memory.
pub fn soft_limit(p: &CurrencyPlan) -> Option<u64> {
    let g = (p.guard / GUARD_MARGIN * GUARD_MARGIN).max(p.protection);
    let h = p.high.map_or(g, |h| h.min(g));
    p.max.is_none_or(|m| h < m).then_some(h)
}

/// What a job's own directory is given, on one kernel: the protection file (v2
/// `memory.low`, v1 `memory.soft_limit_in_bytes`), `memory.high` (v2 only) and the hard
/// limit (v2 `memory.max`, v1 `memory.limit_in_bytes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobLimits {
    /// The protection file's value.
    pub protection: u64,
    /// `memory.high` (None: unlimited; always None on v1, which has no such file).
    pub high: Option<u64>,
    /// The hard limit (None: unlimited).
    pub max: Option<u64>,
}

/// A job's plan as one kernel spells it. v2 has `memory.high` for a soft cap; v1 has
/// none, so a soft cap lowers the job's soft limit instead (reclaimed first above it when
/// the machine is short, as a currency's soft cap is). A hard cap is the hard limit on
/// both. A job without a cap keeps only its protection.
pub fn job_limits(p: &JobPlan, v1: bool) -> JobLimits {
    if v1 {
        JobLimits { protection: p.high.map_or(p.protection, |h| h.min(p.protection)), high: None, max: p.max }
    } else {
        JobLimits { protection: p.protection, high: p.high, max: p.max }
    }
}

/// A cap as (soft, hard) bytes: a soft cap is the high mark, a hard one the limit.
pub fn split_cap(cap: Option<MemCap>) -> (Option<u64>, Option<u64>) {
    match cap {
        Some(c) if c.hard => (None, Some(c.bytes)),
        Some(c) => (Some(c.bytes), None),
        None => (None, None),
    }
}

/// `total × part / whole` without overflow, rounded down.
fn share(total: u64, part: u64, whole: u64) -> u64 {
    if whole == 0 {
        return 0;
    }
    ((total as u128 * part as u128) / whole as u128) as u64
}

/// The `oom_score_adj` for a currency using `usage` bytes against its `protection`, out of
/// `available`, where `floor` bytes is the most a currency within its share may hold
/// (its protection and [`SLACK`]). Within its protection (and [`SLACK`]): [`WITHIN_SHARE_ADJ`]. Above it: `floor` plus the excess,
/// each in thousandths of the available memory (rounded up), at most 1000. The kernel ranks
/// OOM victims by size plus adj/1000 of the memory it may use (at least the available
/// memory), so an over-share process outranks every process of a currency within its
/// share (none is larger than that currency's protection), and among over-share
/// currencies the one furthest above its share ranks first until the scale is full.
pub fn oom_score_adj(usage: u64, protection: u64, available: u64, floor: u64) -> i16 {
    if usage <= protection + SLACK {
        return WITHIN_SHARE_ADJ;
    }
    let a = available.max(1) as u128;
    let permille = |b: u64| (b as u128 * 1000).div_ceil(a);
    (permille(floor) + permille(usage - protection)).clamp(1, 1000) as i16
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const G: u64 = 1 << 30;
    const M: u64 = 1 << 20;

    #[test]
    fn sizes_parse_in_binary_units() {
        assert_eq!(parse_size("4G").unwrap(), 4 * G);
        assert_eq!(parse_size("4GiB").unwrap(), 4 * G);
        assert_eq!(parse_size("512m").unwrap(), 512 * M);
        assert_eq!(parse_size("1.5G").unwrap(), 3 * G / 2);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("2K").unwrap(), 2048);
        for bad in ["", "G", "4X", "-1G", "nanG", "inf", "2000T"] {
            let e = parse_size(bad).unwrap_err().to_string();
            assert!(e.contains(&format!("{bad:?}")) && e.contains("512M"), "{bad}: {e}");
        }
    }

    #[test]
    fn caps_are_hard_with_a_bang() {
        assert_eq!("4G!".parse::<MemCap>().unwrap(), MemCap { bytes: 4 * G, hard: true });
        assert_eq!("4G".parse::<MemCap>().unwrap(), MemCap { bytes: 4 * G, hard: false });
        assert_eq!(MemCap::parse_opt("none").unwrap(), None);
        assert_eq!(MemCap { bytes: 512 * M, hard: true }.to_string(), "512M!");
        let e = "1K!".parse::<MemCap>().unwrap_err().to_string();
        assert!(e.contains("\"1K!\"") && e.contains("less than 1M") && e.contains("4G!"), "{e}");
        let e = "4Q!".parse::<MemCap>().unwrap_err().to_string();
        assert!(e.starts_with("memory cap \"4Q!\" is invalid: unknown unit 'Q'"), "{e}");
    }

    #[test]
    fn reserve_is_a_size_or_a_percent() {
        assert_eq!("10%".parse::<Reserve>().unwrap(), Reserve::Percent(10.0));
        assert_eq!("2G".parse::<Reserve>().unwrap(), Reserve::Bytes(2 * G));
        for bad in ["100%", "-1%", "x%", "lots"] {
            let e = bad.parse::<Reserve>().unwrap_err().to_string();
            assert!(e.contains(&format!("{bad:?}")) && e.contains("10%"), "{bad}: {e}");
        }
        assert_eq!(available(20 * G, Reserve::Percent(10.0), None), 18 * G);
        assert_eq!(available(20 * G, Reserve::Bytes(2 * G), Some(512 * M)), 512 * M);
        assert_eq!(available(G, Reserve::Bytes(2 * G), None), 0);
    }

    fn cur(funding: u32, usage: u64, tickets: &[u32]) -> CurrencyMem {
        CurrencyMem { funding, usage, cap: None, jobs: tickets.iter().map(|&t| JobMem { tickets: t, cap: None }).collect() }
    }

    #[test]
    fn the_soft_limit_leaves_what_the_others_hold_within_their_share() {
        // 870 MiB shared equally; B holds its 163 MiB working set, A grows past its share.
        let p = plan(870 * M, &[cur(100, 700 * M, &[]), cur(100, 163 * M, &[])]);
        assert_eq!(soft_limit(&p[0]), Some(688 * M), "870 - 163 - 16 = 691, down to a multiple of 16 MiB");
        assert_eq!(soft_limit(&p[1]), Some(435 * M), "never below its protection (870 - 435 - 16 is less)");
        // Alone (B holds nothing), A may use all of it.
        let alone = plan(870 * M, &[cur(100, 700 * M, &[]), cur(100, 0, &[])]);
        assert_eq!(soft_limit(&alone[0]), Some(864 * M));
        let one = plan(870 * M, &[cur(100, 700 * M, &[])]);
        assert_eq!(soft_limit(&one[0]), Some(870 * M), "alone its protection is all of it");
        // Its own soft cap is lower: that; a hard cap at or below it: none (the cap rules).
        let soft = CurrencyMem { cap: Some(MemCap { bytes: 300 * M, hard: false }), ..cur(100, 700 * M, &[]) };
        assert_eq!(soft_limit(&plan(870 * M, &[soft, cur(100, 163 * M, &[])])[0]), Some(300 * M));
        let hard = CurrencyMem { cap: Some(MemCap { bytes: 300 * M, hard: true }), ..cur(100, 700 * M, &[]) };
        assert_eq!(soft_limit(&plan(870 * M, &[hard, cur(100, 163 * M, &[])])[0]), None);
    }

    #[test]
    fn funding_3_to_1_protects_3_to_1_and_tickets_divide_it() {
        let p = plan(512 * M, &[cur(300, 0, &[100, 300]), cur(100, 0, &[100])]);
        assert_eq!(p[0].protection, 384 * M);
        assert_eq!(p[1].protection, 128 * M);
        assert_eq!((p[0].jobs[0].protection, p[0].jobs[1].protection), (96 * M, 288 * M));
        assert_eq!(p[1].jobs[0].protection, 128 * M);
    }

    #[test]
    fn a_currency_alone_may_use_everything() {
        let p = plan(512 * M, &[cur(100, 500 * M, &[100])]);
        assert_eq!((p[0].protection, p[0].guard), (512 * M, 512 * M));
        assert_eq!(p[0].oom_score_adj, 0);
    }

    #[test]
    fn the_guard_keeps_a_hog_out_of_what_others_hold_within_share() {
        // B holds 100M of its 128M; A may use all but that. A over share gets a positive adj.
        let p = plan(512 * M, &[cur(300, 450 * M, &[100]), cur(100, 100 * M, &[100])]);
        assert_eq!(p[0].guard, 412 * M - GUARD_MARGIN);
        assert_eq!(p[1].guard, 512 * M - 384 * M - GUARD_MARGIN);
        assert_eq!(p[0].over, 66 * M);
        // B is within its 128M: A's processes rank above anything of B's (132M = 258‰, 66M = 129‰).
        assert_eq!((p[0].oom_score_adj, p[1].oom_score_adj), (387, 0));
        // Held at its share, a currency reads a little above it and is still within it.
        let p = plan(512 * M, &[cur(300, 384 * M + M, &[100]), cur(100, 128 * M + M, &[100])]);
        assert_eq!((p[0].oom_score_adj, p[0].over, p[1].oom_score_adj), (0, 0, 0));
        // A hard cap bounds the guard; a soft one is the high mark.
        let mut a = cur(300, 0, &[100]);
        a.cap = Some("200M!".parse().unwrap());
        let mut b = cur(100, 0, &[100]);
        b.cap = Some("50M".parse().unwrap());
        let p = plan(512 * M, &[a, b]);
        assert_eq!((p[0].guard, p[0].max, p[0].high), (200 * M, Some(200 * M), None));
        assert_eq!((p[1].max, p[1].high), (None, Some(50 * M)));
    }

    #[test]
    fn a_jobs_cap_is_its_own_and_spelled_per_kernel() {
        let mut c = cur(100, 0, &[100, 100]);
        c.jobs[0].cap = Some("64M!".parse().unwrap());
        c.jobs[1].cap = Some("32M".parse().unwrap());
        let p = plan(512 * M, &[c]);
        let (hard, soft) = (p[0].jobs[0], p[0].jobs[1]);
        assert_eq!((hard.max, hard.high, hard.protection), (Some(64 * M), None, 256 * M));
        assert_eq!((soft.max, soft.high), (None, Some(32 * M)));
        assert_eq!((p[0].max, p[0].high), (None, None), "a job's cap is not its currency's");
        assert_eq!(job_limits(&hard, false), JobLimits { protection: 256 * M, high: None, max: Some(64 * M) });
        assert_eq!(job_limits(&hard, true), JobLimits { protection: 256 * M, high: None, max: Some(64 * M) });
        assert_eq!(job_limits(&soft, false), JobLimits { protection: 256 * M, high: Some(32 * M), max: None });
        assert_eq!(job_limits(&soft, true), JobLimits { protection: 32 * M, high: None, max: None }, "v1: the soft limit");
    }

    #[test]
    fn the_furthest_above_share_ranks_first() {
        assert!(oom_score_adj(300 * M, 100 * M, G, 0) > oom_score_adj(200 * M, 100 * M, G, 0));
        assert_eq!(oom_score_adj(100 * M + SLACK + 1, 100 * M, G, 0), 4);
        assert_eq!(oom_score_adj(100 * M + SLACK + 1, 100 * M, G, 512 * M), 504);
        assert_eq!(oom_score_adj(2 * G, 0, G, 0), 1000);
        assert_eq!(oom_score_adj(100 * M + SLACK, 100 * M, G, G), WITHIN_SHARE_ADJ);
    }

    proptest! {
        #[test]
        fn protections_sum_to_at_most_available_and_follow_funding(
            avail in 0u64..(1 << 45),
            cs in prop::collection::vec((1u32..10000, 0u64..(1 << 45), prop::collection::vec(1u32..10000, 1..5)), 1..8),
        ) {
            let ins: Vec<CurrencyMem> = cs.iter().map(|(f, u, t)| cur(*f, *u, t)).collect();
            let out = plan(avail, &ins);
            let total: u64 = out.iter().map(|c| c.protection).sum();
            prop_assert!(total <= avail && avail - total < ins.len() as u64);
            for (c, o) in ins.iter().zip(&out) {
                let jobs: u64 = o.jobs.iter().map(|j| j.protection).sum();
                prop_assert!(jobs <= o.protection && o.protection - jobs < c.jobs.len() as u64);
                prop_assert!(o.guard <= avail && o.guard + GUARD_MARGIN >= o.protection.min(avail));
                prop_assert_eq!(o.oom_score_adj == 0, c.usage <= o.protection + SLACK);
            }
            // Every over-share currency outranks the largest process a within-share one can
            // hold (its protection), on the kernel's scale of adj/1000 of the available memory.
            let floor = ins.iter().zip(&out).filter(|(c, o)| c.usage <= o.protection + SLACK).map(|(_, o)| o.protection + SLACK).max().unwrap_or(0);
            for o in out.iter().filter(|o| o.oom_score_adj > 0 && o.oom_score_adj < 1000) {
                prop_assert!(o.oom_score_adj as u128 * avail as u128 >= floor as u128 * 1000);
            }
            for (i, a) in ins.iter().enumerate() {
                for (j, b) in ins.iter().enumerate() {
                    if a.funding > b.funding {
                        prop_assert!(out[i].protection >= out[j].protection);
                    }
                }
            }
        }

        #[test]
        fn caps_and_sizes_round_trip(bytes in (1u64 << 20)..MAX_BYTES, hard: bool) {
            let c = MemCap { bytes, hard };
            prop_assert_eq!(c.to_string().parse::<MemCap>().unwrap(), c);
            prop_assert_eq!(parse_size(&format_size(bytes)).unwrap(), bytes);
        }
    }
}
