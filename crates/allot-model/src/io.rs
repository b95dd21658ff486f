//! I/O by share: a currency's funding is also its I/O weight, and its jobs' tickets divide
//! it the way they divide its CPU (docs/memory.md, "I/O by share"). Only the weight's
//! spelling differs per kernel interface; the ratio between two currencies is the ratio
//! of their funding wherever the interface's range allows it.
//!
//! - cgroup v2 `io.weight` (io.cost) and systemd's `IOWeight=`: 1..10000, default 100;
//!   allot's units are the same range, so the weight is the funding (as `cpu.weight` is).
//! - BFQ's `io.bfq.weight` (v2) and `blkio.bfq.weight` (v1): 1..1000, default 100; the
//!   funding itself, clamped to 1000 (so ratios hold up to funding 1000).
//! - CFQ's `blkio.weight` (v1, kernels before 5.0): 10..1000, default 500; funding × 5,
//!   so the default funding 100 weighs what an unmanaged group weighs (as `cpu.shares`
//!   maps 100 to 1024), clamped to 10..1000 (ratios hold for funding 2..200).

use crate::units::{MAX, MIN};

/// The weight for cgroup v2 `io.weight` and systemd's `IOWeight=` (1..10000).
pub fn io_weight(units: u32) -> u32 {
    units.clamp(MIN, MAX)
}

/// The weight for BFQ's `io.bfq.weight` / `blkio.bfq.weight` (1..1000).
pub fn bfq_weight(units: u32) -> u32 {
    units.clamp(1, 1000)
}

/// The weight for CFQ's cgroup v1 `blkio.weight` (10..1000, the kernel's default 500).
pub fn cfq_weight(units: u32) -> u32 {
    units.saturating_mul(5).clamp(10, 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_weigh_as_an_unmanaged_group_and_ratios_hold_within_range() {
        assert_eq!((io_weight(100), bfq_weight(100), cfq_weight(100)), (100, 100, 500));
        assert_eq!((io_weight(300) / io_weight(100), bfq_weight(300) / bfq_weight(100), cfq_weight(200) / cfq_weight(100)), (3, 3, 2));
        assert_eq!((io_weight(0), io_weight(20_000)), (1, 10_000), "the kernel's range");
        assert_eq!((bfq_weight(0), bfq_weight(5000)), (1, 1000));
        assert_eq!((cfq_weight(1), cfq_weight(u32::MAX)), (10, 1000));
    }
}
