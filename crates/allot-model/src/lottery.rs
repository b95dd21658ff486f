//! The lottery mode of allot's sched_ext scheduler (docs/scx.md, "The lottery mode"): the
//! draw of crates/allot-scx/bpf/lottery.h, in the same integers.
//!
//! Lottery scheduling (Waldspurger and Weihl 1994) gives each quantum to a client drawn
//! with probability tickets / all runnable tickets; stride scheduling is its
//! deterministic form. The scheduler keeps stride scheduling's queue ordered by pass and
//! makes each turn a lottery by one change: a task's pass advances by its stride times
//! a draw X of the exponential distribution (mean 1), not by its stride.
//!
//! Why that is a lottery: a client whose pass advances by `stride × X` per turn is a
//! Poisson process in pass with rate `1 / stride`, that is its tickets. The lowest pass
//! is the first arrival of a race of independent Poisson processes, and each one's wait
//! to its next arrival is memoryless, so the next turn goes to client i with probability
//! `tickets_i / Σ tickets`, whatever happened before: one draw of the lottery per turn.
//!
//! Compensation tickets (Petrou et al. 1999 §2.2): a client that used a fraction `f` of
//! its quantum holds `tickets / f` until it is next chosen. Here its pass advances by the
//! time it really ran (`f` of its quantum's stride) times X: an arrival rate of
//! `tickets / f` until its next turn, which is what compensation is; a client that ran
//! past its quantum (`f` > 1) holds the paper's negative compensation the same way.
//!
//! X is `-ln U` for U uniform in (0, 1], from 32 random bits, in fixed point
//! ([`ONE`] is 1.0): log2 by the position of the top bit and 10 squarings, then × ln 2.

/// 1.0 in the draw's fixed point.
pub const ONE: u64 = 1 << FRAC_BITS;

/// Fractional bits of the draw and of its log2.
pub const FRAC_BITS: u32 = 10;

/// ln 2 × 2^16.
pub const LN2_Q16: u64 = 45_426;

/// The exponential draw of mean 1 ([`ONE`]) from 32 random bits: `-ln((r + 1) / 2^32)`,
/// 0 ..= 22.18 (the largest: r = 0).
pub fn exp_draw(r: u32) -> u64 {
    let v = r as u64 + 1;
    // floor(log2 v), 0 ..= 32, and v as a fraction in [1, 2) with 30 bits after the point
    let k = 63 - v.leading_zeros() as u64;
    let mut y = if k >= 30 { v >> (k - 30) } else { v << (30 - k) };
    let mut frac = 0;
    for _ in 0..FRAC_BITS {
        y = (y * y) >> 30;
        frac <<= 1;
        if y >= 2 << 30 {
            y >>= 1;
            frac |= 1;
        }
    }
    let log2 = (k << FRAC_BITS) | frac;
    (((32 << FRAC_BITS) - log2) * LN2_Q16) >> 16
}

/// The CPU time a turn of `used_ns` is charged as in the lottery mode (the pass then
/// advances by its stride at the task's share, as in stride scheduling).
pub fn charge(used_ns: u64, r: u32) -> u64 {
    used_ns.saturating_mul(exp_draw(r)) / ONE
}

#[cfg(test)]
#[path = "lottery_tests.rs"]
mod tests;
