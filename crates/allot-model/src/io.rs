//! I/O by share: a currency's funding is also its I/O weight, and its jobs' tickets divide
//! it the way they divide its CPU (docs/memory.md, "I/O by share"). Only the weight's
//! spelling differs per kernel interface; the ratio between two currencies is the ratio
//! of their funding wherever the interface's range allows it.
//!
//! - cgroup v2 `io.weight` (io.cost): 1..10000, default 100;
//!   allot's units are the same range, so the weight is the funding (as `cpu.weight` is).
//! - BFQ's `io.bfq.weight` (v2) and `blkio.bfq.weight` (v1): 1..1000, default 100; the
//!   funding itself, clamped to 1000 (so ratios hold up to funding 1000).
//! - CFQ's `blkio.weight` (v1, kernels before 5.0): 10..1000, default 500; funding × 5,
//!   so the default funding 100 weighs what an unmanaged group weighs (as `cpu.shares`
//!   maps 100 to 1024), clamped to 10..1000 (ratios hold for funding 2..200).
//! - systemd's `IOWeight=` on a slice is also turned into the BFQ weight by systemd, not
//!   proportionally: 1..100 stay as they are, 100..10000 are squeezed into 100..1000
//!   (`BFQ_WEIGHT()` in systemd's cgroup-util.h: IOWeight=300 becomes BFQ weight 118).
//!   So the slices' weights are the funding scaled to the largest funding among them
//!   being 100 ([`slice_weights`]): within 1..100 both io.cost and BFQ keep the ratio.

use crate::units::{MAX, MIN};

/// The units a background job's I/O weighs, whatever its tickets: the smallest, so its I/O,
/// like its CPU, is what nobody else wants. Written on allot's background sibling (beside
/// allot's root at the top of the hierarchy, where `cpu.idle` is), it weighs all background
/// jobs together against everything else, as 1 (`io.weight`, BFQ) or CFQ's 10.
pub const BACKGROUND_UNITS: u32 = MIN;

/// The units a job's I/O weighs: its tickets, or [`BACKGROUND_UNITS`] in the background.
pub fn job_units(tickets: u32, background: bool) -> u32 {
    if background {
        BACKGROUND_UNITS
    } else {
        tickets
    }
}

/// The weight for cgroup v2 `io.weight` (1..10000).
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

/// The `IOWeight=` of each slice for fundings `f`: the largest becomes 100 (systemd's and
/// the kernel's default) and the others keep their ratio to it, rounded, at least 1, so
/// systemd's BFQ conversion (the identity up to 100) keeps the ratios too. A funding
/// more than 100 times smaller than the largest gets 1.
pub fn slice_weights(f: &[u32]) -> Vec<u32> {
    let top = f.iter().copied().max().unwrap_or(1).max(1) as u64;
    f.iter().map(|x| ((*x as u64 * 100 + top / 2) / top).clamp(1, 100) as u32).collect()
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

    #[test]
    fn background_weighs_the_least_each_interface_takes() {
        assert_eq!(job_units(300, false), 300);
        assert_eq!(job_units(300, true), BACKGROUND_UNITS);
        let b = BACKGROUND_UNITS;
        assert_eq!((io_weight(b), bfq_weight(b), cfq_weight(b)), (1, 1, 10), "each range's least");
    }

    #[test]
    fn slice_weights_keep_the_ratio_within_systemds_bfq_identity_range() {
        assert_eq!(slice_weights(&[300, 100]), [100, 33]);
        assert_eq!(slice_weights(&[100, 100, 50]), [100, 100, 50]);
        assert_eq!(slice_weights(&[10_000, 1]), [100, 1], "past 100:1 the smaller gets 1");
        assert_eq!(slice_weights(&[7]), [100], "alone: the default");
        assert!(slice_weights(&[]).is_empty());
    }
}
