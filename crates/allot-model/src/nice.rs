//! The three nice maps allot has to speak.

use crate::ModelError;

/// Checks a nice value.
pub fn check(nice: i64) -> Result<i32, ModelError> {
    if (-20..=19).contains(&nice) {
        Ok(nice as i32)
    } else {
        Err(ModelError::BadNice(nice))
    }
}

/// The kernel's load weight of a nice level (kernel/sched/core.c `sched_prio_to_weight`):
/// each step is about 1.25×, nice 0 is 1024.
pub const KERNEL_WEIGHT: [u32; 40] = [
    88761, 71755, 56483, 46273, 36291, 29154, 23254, 18705, 14949, 11916, 9548, 7620, 6100, 4904, 3906, 3121, 2501, 1991, 1586, 1277, 1024, 820, 655,
    526, 423, 335, 272, 215, 172, 137, 110, 87, 70, 56, 45, 36, 29, 23, 18, 15,
];

/// Kernel load weight of `nice` (-20..19).
pub fn kernel_weight(nice: i32) -> u32 {
    KERNEL_WEIGHT[(nice.clamp(-20, 19) + 20) as usize]
}

/// EBS shares of a nice value (EBS 2004, "CPU shares"): nice >= 0 ↦ 20 − nice,
/// nice < 0 ↦ 20 + nice², so the range is 1..420 with 20 the default. A nice outside
/// -20..19 is clamped into it, as [`kernel_weight`] does (and the kernel's set_user_nice).
pub fn ebs_shares(nice: i32) -> u32 {
    let nice = nice.clamp(-20, 19);
    if nice >= 0 {
        (20 - nice) as u32
    } else {
        (20 + nice * nice) as u32
    }
}

/// Petrou et al. 1999 §3.4: a nice value equals 10^((20 − nice)/20) tickets (1..100 in the paper).
pub fn paper_tickets(nice: i32) -> f64 {
    10f64.powf((20 - nice) as f64 / 20.0)
}

/// Petrou et al. 1999 §3.4 and §4.1's base-ticket threshold in the paper's own units (base tickets
/// 100..10000, default 1000): a nice'd process's currency has at most (nice > 0) or at
/// least (nice < 0) 10^((20 − nice)/20 + 2) base tickets. The simulator's hybrid lottery
/// uses this; allot uses [`base_ticket_threshold`].
pub fn paper_base_ticket_threshold(nice: i32) -> f64 {
    10f64.powf((20 - nice) as f64 / 20.0 + 2.0)
}

/// Petrou et al. 1999 §3.4's base-ticket threshold, scaled to allot's units. The paper maps nice to
/// 10^((20 − nice)/20 + 2) base tickets against a default funding of 1000; allot's
/// default funding is 100, so one order of magnitude less: 10^((20 − nice)/20 + 1).
/// nice 0 ↦ 100 (a default currency), nice 19 ↦ 11.2, nice −20 ↦ 1000.
pub fn base_ticket_threshold(nice: i32) -> f64 {
    10f64.powf((20 - nice) as f64 / 20.0 + 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_match_their_sources() {
        assert_eq!(kernel_weight(0), 1024);
        assert_eq!(kernel_weight(19), 15);
        assert_eq!(kernel_weight(-20), 88761);
        assert_eq!((kernel_weight(-5), kernel_weight(5), kernel_weight(10)), (3121, 335, 110));
        // The kernel's table steps by about 1.25× per nice level (the "10% effect").
        for w in KERNEL_WEIGHT.windows(2) {
            let r = w[0] as f64 / w[1] as f64;
            assert!((1.18..1.32).contains(&r), "{w:?}");
        }
        assert_eq!(ebs_shares(0), 20);
        assert_eq!(ebs_shares(19), 1);
        assert_eq!(ebs_shares(-20), 420);
        assert_eq!(ebs_shares(-1), 21);
        assert_eq!(ebs_shares(25), 1);
        assert_eq!(ebs_shares(-25), 420);
        assert!((paper_base_ticket_threshold(0) - 1000.0).abs() < 1e-9);
        assert!((paper_base_ticket_threshold(19) - 112.2).abs() < 0.1);
        assert!((paper_base_ticket_threshold(-20) - 10000.0).abs() < 1e-9);
        assert!((paper_tickets(0) - 10.0).abs() < 1e-9);
        assert!((base_ticket_threshold(0) - 100.0).abs() < 1e-9);
        assert!((base_ticket_threshold(19) - 11.22).abs() < 0.01);
        assert!((base_ticket_threshold(-20) - 1000.0).abs() < 1e-9);
        assert!(check(20).is_err() && check(-21).is_err() && check(5).is_ok());
    }
}
