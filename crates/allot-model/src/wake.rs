//! The latency policy at the scheduler's granularity (allot's sched_ext scheduler,
//! docs/scx.md): Petrou et al. 1999's windowed ticket boost (§3.3) and abbreviated quanta
//! (§3.2), decided at each wakeup of a task rather than once a tick. The BPF program
//! (crates/allot-scx/bpf/allot_stride.bpf.c) does this arithmetic, in the same integers.
//!
//! - A job's *window use* is the CPU its tasks ran over the last boost window (the
//!   daemon's `[policy] boost_window_ms`, [`window_ns`]; [`DEFAULT_WINDOW_NS`] when none is
//!   given), kept as two buckets of the window's length ([`Window`]): the current one, and
//!   the one before it weighed by the part of it the sliding window still covers.
//! - Its *entitlement over the window* is its flattened share of one CPU
//!   ([`entitlement_ns`]; the share from [`crate::flat::flatten`]).
//! - A task that wakes while its job's window use is below [`BELOW`] of that entitlement
//!   (the plan's [`DEFAULT_BOOST_BELOW`]: the same line as the per-tick boost) is boosted
//!   ([`at_wakeup`]): it preempts the task running on its CPU (the paper's abbreviated
//!   quanta: a wakeup cuts the running quantum short) and runs a short slice, at most
//!   [`BOOST_SLICE_NS`] and at most what is left of its entitlement over the window. So the
//!   boost buys latency, never CPU past the entitlement: a job that has used half of it is
//!   no longer boosted, and a boosted slice never runs past the whole of it (a focused
//!   job's line is the whole window instead, below).
//! - A configured line (`[policy] boost_below`) and focus move the line ([`line_ns`]): a
//!   focused job (Ross and Abel's foreground hint, `allot focus`) is boosted while it used
//!   less than the whole window, one CPU's worth: whatever it uses, as the plan's focus.

use crate::plan::{DEFAULT_BOOST_BELOW, DEFAULT_BOOST_WINDOW_MS, MAX_BOOST_WINDOW_MS, MIN_BOOST_WINDOW_MS};

/// The boost window when none is given, ns: the plan's default boost window.
pub const DEFAULT_WINDOW_NS: u64 = DEFAULT_BOOST_WINDOW_MS * 1_000_000;

/// The boost window of `ms` milliseconds in ns, within the limits of the daemon's
/// `[policy] boost_window_ms` ([`MIN_BOOST_WINDOW_MS`]..=[`MAX_BOOST_WINDOW_MS`]); else
/// why not, naming the value and what is allowed.
pub fn window_ns(ms: u64) -> Result<u64, String> {
    if (MIN_BOOST_WINDOW_MS..=MAX_BOOST_WINDOW_MS).contains(&ms) {
        Ok(ms * 1_000_000)
    } else {
        Err(format!("the boost window must be {MIN_BOOST_WINDOW_MS}..{MAX_BOOST_WINDOW_MS} ms (policy.boost_window_ms's limits), got {ms}"))
    }
}

/// The part of the bucket before that the sliding window still covers is taken in
/// 1/2^FRAC_BITS: its product with a bucket's use fits 64 bits for a use below 2^48 ns
/// (4690 CPUs busy over the longest window, 60 s).
pub const FRAC_BITS: u32 = 16;

/// A boosted task's slice, ns (an abbreviated quantum: a tenth of sched_ext's default
/// 20 ms slice).
pub const BOOST_SLICE_NS: u64 = 2_000_000;

/// Boosted while the window use is below this fraction (numerator, denominator) of the
/// entitlement over the window: [`DEFAULT_BOOST_BELOW`] as a fraction the BPF side can use.
pub const BELOW: (u64, u64) = (1, 2);

const _: () = assert!(DEFAULT_BOOST_BELOW * 2.0 == 1.0, "BELOW must be DEFAULT_BOOST_BELOW");

/// A job's entitlement over the window of `window` ns, ns of CPU: its share (base units,
/// from [`crate::flat::flatten`]) of one CPU, where all of allot's foreground jobs together
/// weigh `outside_weight` × [`crate::flat::SHARE_SCALE`]. Of one CPU, not of the machine:
/// on a machine of many CPUs a job may be entitled to more, so this boosts no more than
/// the job's entitlement allows (0 for a share of 0: never boosted).
pub fn entitlement_ns(share: u64, outside_weight: u32, window: u64) -> u64 {
    let whole = (outside_weight.max(1) as u128) * crate::flat::SHARE_SCALE as u128;
    (share as u128 * window as u128 / whole).min(window as u128) as u64
}

/// A job's line over the window of `window` ns, ns (0: the default, [`BELOW`] of its
/// entitlement): a focused job's is the whole window (boosted while it used less than one
/// CPU over it);
/// a configured `boost_below` other than the default puts it at that fraction of the
/// entitlement `ent_ns` (at least 1 ns, so it never reads as the default).
pub fn line_ns(ent_ns: u64, below: f64, focus: bool, window: u64) -> u64 {
    if focus {
        window
    } else if below == DEFAULT_BOOST_BELOW || ent_ns == 0 {
        0
    } else {
        ((ent_ns as f64 * below.clamp(0.0, 1.0)).round() as u64).clamp(1, window.max(1))
    }
}

/// A job's CPU use over the sliding window, in two buckets of the window's length (the
/// `window` ns each method is given: the same one every time, from [`window_ns`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Window {
    /// The bucket `cur` counts: now / window when last charged.
    pub bucket: u64,
    /// CPU used in the bucket before, ns.
    pub prev: u64,
    /// CPU used in this bucket, ns.
    pub cur: u64,
}

impl Window {
    /// (prev, cur) as of `now`: a bucket that ended moves to prev, older ones are gone.
    fn at(&self, now: u64, window: u64) -> (u64, u64) {
        let b = now / window.max(1);
        if b == self.bucket {
            (self.prev, self.cur)
        } else if b == self.bucket + 1 {
            (self.cur, 0)
        } else {
            (0, 0)
        }
    }

    /// Charges `ns` of CPU at `now`.
    pub fn charge(&mut self, now: u64, ns: u64, window: u64) {
        let (prev, cur) = self.at(now, window);
        *self = Window { bucket: now / window.max(1), prev, cur: cur.saturating_add(ns) };
    }

    /// The use over the window that ends at `now`: this bucket, and the part of the one
    /// before that the window still covers (taken as spread evenly over it). That part is
    /// taken in 1/2^[`FRAC_BITS`] of a bucket, whatever the window's length, and rounded
    /// up, so that the use is never undercounted by it. (In units of 1024 ns, as when the
    /// window was fixed at 500 ms, the product would overflow for a job busy on more than
    /// 5 CPUs over a 60 s window.)
    pub fn used(&self, now: u64, window: u64) -> u64 {
        let window = window.max(1);
        let (prev, cur) = self.at(now, window);
        let left = window - now % window;
        // u128 here; the BPF side's u64 gives the same for any window up to 2^47 ns
        let frac = ((left as u128) << FRAC_BITS).div_ceil(window as u128) as u64;
        cur.saturating_add(prev.saturating_mul(frac).div_ceil(1 << FRAC_BITS))
    }
}

/// The decision at a wakeup: the boosted slice in ns (the task preempts and runs this
/// long at most), or None: it waits its turn by pass with the default slice. `ent_ns` is
/// [`entitlement_ns`] (0: the job is never boosted: a background job, or the boost off),
/// `line` its [`line_ns`] (0: [`BELOW`] of `ent_ns`, rounded up), `used_ns` its
/// [`Window::used`]. Boosted while the use is below the line; the slice never takes the
/// use past the larger of the line and the entitlement.
pub fn at_wakeup(ent_ns: u64, line: u64, used_ns: u64) -> Option<u64> {
    let line = if line == 0 { (ent_ns.saturating_mul(BELOW.0)).div_ceil(BELOW.1) } else { line };
    if ent_ns == 0 || used_ns >= line {
        return None;
    }
    Some(BOOST_SLICE_NS.min(line.max(ent_ns) - used_ns))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const W: u64 = DEFAULT_WINDOW_NS;

    #[test]
    fn entitlement_is_the_share_of_one_cpu_over_the_window() {
        // tickets 3:2:1 flatten to 50 000, 33 333, 16 666 of 100 000: half a CPU is 250 ms
        assert_eq!(entitlement_ns(50_000, 100, W), 250 * MS);
        assert_eq!(entitlement_ns(16_666, 100, W), 83_330_000);
        assert_eq!(entitlement_ns(0, 100, W), 0);
        // never more than the window, whatever the share ([outside] weight 1, share 10^9)
        assert_eq!(entitlement_ns(1_000_000_000, 1, W), W);
    }

    #[test]
    fn the_window_slides_over_two_buckets() {
        let mut w = Window::default();
        let t0 = 10 * W;
        w.charge(t0 + 100 * MS, 40 * MS, W);
        assert_eq!(w.used(t0 + 100 * MS, W), 40 * MS);
        // a quarter into the next bucket: three quarters of the last one still counts
        let near = |got: u64, want: u64| got.abs_diff(want) * 10_000 <= want; // the 1024 ns units
        assert!(near(w.used(t0 + W + W / 4, W), 30 * MS));
        w.charge(t0 + W + W / 4, 5 * MS, W);
        assert_eq!(w, Window { bucket: 11, prev: 40 * MS, cur: 5 * MS });
        assert!(near(w.used(t0 + W + W / 4, W), 35 * MS));
        // two buckets on, nothing of it is left
        assert_eq!(w.used(t0 + 3 * W, W), 0);
        w.charge(t0 + 3 * W, MS, W);
        assert_eq!(w, Window { bucket: 13, prev: 0, cur: MS });
        // no overflow at the largest uses
        let big = Window { bucket: 0, prev: u64::MAX / 2, cur: u64::MAX / 2 };
        assert!(big.used(W / 2, W) >= u64::MAX / 2);
    }

    #[test]
    fn a_job_below_half_its_entitlement_is_boosted_with_a_short_slice() {
        let ent = 250 * MS;
        assert_eq!(at_wakeup(ent, 0, 0), Some(BOOST_SLICE_NS));
        assert_eq!(at_wakeup(ent, 0, 124 * MS), Some(BOOST_SLICE_NS));
        // at half its entitlement: not boosted (a CPU-bound job gets about all of it)
        assert_eq!(at_wakeup(ent, 0, 125 * MS), None);
        assert_eq!(at_wakeup(ent, 0, 300 * MS), None);
        // the slice never runs past the entitlement over the window
        assert_eq!(at_wakeup(3 * MS, 0, MS), Some(BOOST_SLICE_NS));
        assert_eq!(at_wakeup(3 * MS, 0, MS + MS / 2 - 1), Some(MS + MS / 2 + 1));
        // no entitlement (background, or the boost off): never
        assert_eq!(at_wakeup(0, 0, 0), None);
    }

    #[test]
    fn a_configured_line_and_focus_move_where_the_boost_stops() {
        let ent = 250 * MS;
        // boost_below 0.25: boosted below a quarter, not at it
        let l = line_ns(ent, 0.25, false, W);
        assert_eq!(l, 62_500_000);
        assert_eq!(at_wakeup(ent, l, 62 * MS), Some(BOOST_SLICE_NS));
        assert_eq!(at_wakeup(ent, l, l), None);
        // the default is the default line, whatever the entitlement
        assert_eq!(line_ns(ent, DEFAULT_BOOST_BELOW, false, W), 0);
        assert_eq!(line_ns(0, 0.25, false, W), 0, "no entitlement: nothing to move");
        assert_eq!(line_ns(3, 0.1, false, W), 1, "never 0, which would read as the default");
        // focused: boosted past its entitlement, up to one CPU over the window
        let f = line_ns(ent, 0.25, true, W);
        assert_eq!(f, W);
        assert_eq!(at_wakeup(ent, f, 400 * MS), Some(BOOST_SLICE_NS));
        assert_eq!(at_wakeup(ent, f, W - MS), Some(MS), "never past the window");
        assert_eq!(at_wakeup(ent, f, W), None);
        assert_eq!(at_wakeup(0, f, 0), None, "no entitlement (the boost off): never, focused or not");
    }

    /// A job whose task wakes every `period` wanting `want` of CPU, and gets CPU only when
    /// the rule boosts it (the worst case for the bound: no share of its own on top). Returns
    /// (wakeups boosted, wakeups, the most CPU it ran in any window of `window`).
    fn run(ent: u64, period: u64, want: u64, secs: u64, window: u64) -> (u64, u64, u64) {
        let mut w = Window::default();
        let mut ran: Vec<(u64, u64)> = vec![];
        let (mut boosted, mut wakes) = (0, 0);
        let mut t = 7 * window + 3 * MS; // not aligned to a bucket
        let end = t + secs * 1_000_000_000;
        while t < end {
            wakes += 1;
            if let Some(slice) = at_wakeup(ent, 0, w.used(t, window)) {
                boosted += 1;
                let r = want.min(slice);
                w.charge(t + r, r, window);
                ran.push((t, r));
            }
            t += period;
        }
        let most = ran.iter().map(|&(s, _)| ran.iter().filter(|&&(u, _)| u >= s && u < s + window).map(|&(_, r)| r).sum::<u64>()).max().unwrap_or(0);
        (boosted, wakes, most)
    }

    #[test]
    fn an_interactive_job_is_boosted_at_every_wakeup() {
        // a probe that wakes every 10 ms for 0.1 ms, entitled to 1/7 of a CPU: 1% of it
        let (boosted, wakes, most) = run(entitlement_ns(14_285, 100, W), 10 * MS, MS / 10, 5, W);
        assert_eq!(boosted, wakes);
        assert!(most <= 6 * MS, "{most}");
    }

    #[test]
    fn the_boost_never_gives_a_job_its_whole_entitlement_over_a_window() {
        // a job that wakes every ms and would run 5 ms each time, boosted only: whatever
        // its entitlement, no window of W gives it more than it, within 1% (the
        // previous bucket is estimated as spread evenly, so a burst at its end is
        // undercounted: 3.003 ms in one window for an entitlement of 3 ms; from 20 ms
        // up it gets 0.50-0.60 of it, the line being half)
        // (and so over a window of 100 ms, and of 5 s, the entitlements scaled with it; not
        // under 3 ms, which the unscaled 2 ms slice overran by 1.02% at 0.6 ms per 100 ms)
        for window in [100 * MS, W, 5000 * MS] {
            for ent in [3 * MS, 20 * MS, 83 * MS, 250 * MS, W].map(|e| e * window / W).into_iter().filter(|e| *e >= 3 * MS) {
                let (boosted, wakes, most) = run(ent, MS, 5 * MS, 10, window);
                assert!(boosted > 0 && boosted < wakes, "window {window} ent {ent}: boosted {boosted} of {wakes}");
                assert!(most <= ent + ent / 100, "window {window} ent {ent}: {most} ns in one window");
                // and it does get about the half it may be boosted for
                assert!(most * 4 >= ent, "window {window} ent {ent}: only {most}");
            }
        }
    }

    #[test]
    fn a_shorter_window_forgives_a_burst_sooner() {
        // a job entitled to a third of a CPU ran a burst of 100 ms at 20.0-20.1 s and
        // wakes at 20.35 s: over a 500 ms window the burst is still in its use, over its
        // line (83 ms); over a 100 ms window it is two buckets gone
        for (window, boosted) in [(W, false), (100 * MS, true)] {
            let ent = entitlement_ns(33_333, 100, window);
            let mut w = Window::default();
            w.charge(20_100 * MS, 100 * MS, window);
            assert_eq!(at_wakeup(ent, 0, w.used(20_350 * MS, window)).is_some(), boosted, "window {window}");
        }
        // the entitlement and a focused job's line are the window's
        assert_eq!(entitlement_ns(50_000, 100, 100 * MS), 50 * MS);
        assert_eq!(line_ns(50 * MS, 0.25, true, 100 * MS), 100 * MS);
    }

    #[test]
    fn the_window_is_bounded_as_the_config_bounds_it() {
        assert_eq!(window_ns(500), Ok(W));
        assert_eq!(window_ns(MIN_BOOST_WINDOW_MS), Ok(MIN_BOOST_WINDOW_MS * MS));
        assert_eq!(window_ns(MAX_BOOST_WINDOW_MS), Ok(60_000 * MS));
        for bad in [0, MIN_BOOST_WINDOW_MS - 1, MAX_BOOST_WINDOW_MS + 1, u64::MAX] {
            let e = window_ns(bad).unwrap_err();
            assert!(e.contains(&format!("got {bad}")) && e.contains("50..60000 ms"), "{e}");
        }
        // the longest window, 4096 CPUs busy over the bucket before: no overflow, and the
        // part still covered within 2^-16 of the bucket's use, never under
        let window = MAX_BOOST_WINDOW_MS * MS;
        let w = Window { bucket: 1, prev: 0, cur: 4096 * window };
        let got = w.used(2 * window + window / 3, window);
        let want = 4096 * window / 3 * 2;
        assert!(got >= want && got - want <= (4096 * window) >> FRAC_BITS, "{got} {want}");
    }
}
