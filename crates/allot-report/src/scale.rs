//! Axes: the range a chart shows, where its ticks go and how their numbers read.

/// How values map onto an axis.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scale {
    /// Linear. `from_zero`: the axis starts at 0 (or below, for negative data).
    Linear {
        /// Include 0 in the range.
        from_zero: bool,
    },
    /// Base-10 logarithmic, whole decades: for latencies, where 0.05 ms and 10 ms must
    /// both be readable. Values at or below the axis minimum (0 included) are drawn on
    /// the minimum and its tick reads `≤min`.
    Log,
}

/// One axis of a chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    /// What the axis measures, with its unit: `"dispatch latency (ms)"`.
    pub label: String,
    /// Linear or log.
    pub scale: Scale,
    /// Lowest value shown (default: from the data; a log axis needs a positive one).
    pub min: Option<f64>,
    /// Highest value shown (default: from the data).
    pub max: Option<f64>,
}

impl Axis {
    /// A linear axis from 0 (the usual axis for amounts: CPU seconds, shares, work).
    pub fn linear(label: impl Into<String>) -> Axis {
        Axis { label: label.into(), scale: Scale::Linear { from_zero: true }, min: None, max: None }
    }

    /// A linear axis fitted to the data (not forced to include 0).
    pub fn fitted(label: impl Into<String>) -> Axis {
        Axis { label: label.into(), scale: Scale::Linear { from_zero: false }, min: None, max: None }
    }

    /// A log axis (whole decades around the data).
    pub fn log(label: impl Into<String>) -> Axis {
        Axis { label: label.into(), scale: Scale::Log, min: None, max: None }
    }

    /// Sets the lowest value shown (on a log axis: the floor smaller values are drawn at).
    pub fn min(mut self, v: f64) -> Axis {
        self.min = Some(v);
        self
    }

    /// Sets the highest value shown.
    pub fn max(mut self, v: f64) -> Axis {
        self.max = Some(v);
        self
    }

    /// Fits the axis to `values` (non-finite ones ignored): the range and the ticks.
    pub fn fit(&self, values: impl IntoIterator<Item = f64>) -> Ticks {
        let vals: Vec<f64> = values.into_iter().filter(|v| v.is_finite()).collect();
        match self.scale {
            Scale::Linear { from_zero } => {
                let mut lo = self.min.unwrap_or_else(|| vals.iter().copied().fold(f64::INFINITY, f64::min));
                let mut hi = self.max.unwrap_or_else(|| vals.iter().copied().fold(f64::NEG_INFINITY, f64::max));
                if !lo.is_finite() || !hi.is_finite() {
                    (lo, hi) = (0.0, 1.0);
                }
                if from_zero && self.min.is_none() {
                    lo = lo.min(0.0);
                    if self.max.is_none() {
                        hi = hi.max(0.0);
                    }
                }
                if hi <= lo {
                    hi = if lo == 0.0 { 1.0 } else { lo + lo.abs() * 0.1 };
                }
                let mut step = nice_step((hi - lo) / 5.0);
                // Counts (loopers, tasks, rounds) get whole-number ticks.
                if !vals.is_empty() && vals.iter().chain(&self.min).chain(&self.max).all(|v| v.fract() == 0.0) {
                    step = step.max(1.0);
                }
                // Round the ends out to whole steps unless they were given.
                let lo = if self.min.is_some() { lo } else { (lo / step + 1e-9).floor() * step };
                // Round the top out to a whole step, unless the data pass a tick by a
                // sliver (a 20.2 s trace keeps its axis at 20.2, not 25).
                let below = (hi / step + 1e-9).floor() * step;
                let hi = if self.max.is_some() || hi - below < 0.03 * (hi - lo) { hi } else { (hi / step - 1e-9).ceil() * step };
                let first = (lo / step - 1e-9).ceil() as i64;
                let last = (hi / step + 1e-9).floor() as i64;
                let decimals = decimals_for(step);
                let ticks = (first..=last).map(|i| (i as f64 * step, fmt_fixed(i as f64 * step, decimals))).collect();
                Ticks { lo, hi, log: false, ticks, minor: vec![], clamped: false }
            }
            Scale::Log => {
                let pos: Vec<f64> = vals.iter().copied().filter(|v| *v > 0.0).collect();
                let dmin = pos.iter().copied().fold(f64::INFINITY, f64::min);
                let dmax = pos.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let lo = self.min.filter(|m| *m > 0.0).unwrap_or(if dmin.is_finite() { dmin } else { 1.0 });
                let hi = self.max.filter(|m| *m > lo).unwrap_or(if dmax.is_finite() { dmax.max(lo) } else { lo * 10.0 });
                let (mut e0, mut e1) = (lo.log10().floor(), hi.log10().ceil());
                if self.min.is_some() {
                    e0 = lo.log10();
                }
                if self.max.is_some() {
                    e1 = hi.log10();
                }
                if e1 <= e0 {
                    e1 = e0 + 1.0;
                }
                let clamped = vals.iter().any(|v| *v < 10f64.powf(e0) * (1.0 - 1e-9));
                let mut ticks = vec![];
                let mut minor = vec![];
                for e in (e0 - 1e-9).ceil() as i64..=(e1 + 1e-9).floor() as i64 {
                    let v = 10f64.powi(e as i32);
                    ticks.push((v, fmt_decade(e)));
                    for m in 2..10 {
                        let mv = v * m as f64;
                        if mv.log10() < e1 - 1e-9 {
                            minor.push(mv);
                        }
                    }
                }
                if clamped {
                    let floor = 10f64.powf(e0);
                    match ticks.first_mut() {
                        Some(t) if (t.0 / floor - 1.0).abs() < 1e-9 => t.1 = format!("≤{}", t.1),
                        _ => ticks.insert(0, (floor, format!("≤{}", fmt_num(floor)))),
                    }
                }
                Ticks { lo: 10f64.powf(e0), hi: 10f64.powf(e1), log: true, ticks, minor, clamped }
            }
        }
    }
}

/// A fitted axis: its range, ticks and how to place a value on it.
#[derive(Debug, Clone, PartialEq)]
pub struct Ticks {
    /// Lowest value shown.
    pub lo: f64,
    /// Highest value shown.
    pub hi: f64,
    /// Log scale.
    pub log: bool,
    /// Labelled ticks: value and label.
    pub ticks: Vec<(f64, String)>,
    /// Unlabelled minor ticks (log axes: 2..9 × each decade).
    pub minor: Vec<f64>,
    /// Some values lie below a log axis's minimum and are drawn on it.
    pub clamped: bool,
}

impl Ticks {
    /// Where `v` falls, 0 at `lo` and 1 at `hi`; clamped to 0..1 (a log axis draws 0 and
    /// anything below its minimum on the minimum).
    pub fn frac(&self, v: f64) -> f64 {
        let f = if self.log {
            if v <= 0.0 {
                return 0.0;
            }
            (v.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        };
        if f.is_nan() {
            0.0
        } else {
            f.clamp(0.0, 1.0)
        }
    }
}

/// A round step near `raw`: 1, 2 or 5 × a power of ten.
pub fn nice_step(raw: f64) -> f64 {
    let raw = if raw.is_finite() && raw > 0.0 { raw } else { 1.0 };
    let mag = 10f64.powf(raw.log10().floor());
    let n = raw / mag;
    mag * if n < 1.5 {
        1.0
    } else if n < 3.5 {
        2.0
    } else if n < 7.5 {
        5.0
    } else {
        10.0
    }
}

fn decimals_for(step: f64) -> usize {
    let d = (-step.log10() - 1e-9).ceil();
    if d > 0.0 {
        d as usize
    } else {
        0
    }
}

fn fmt_fixed(v: f64, decimals: usize) -> String {
    let s = format!("{v:.decimals$}");
    if s.starts_with('-') && s[1..].chars().all(|c| c == '0' || c == '.') {
        s[1..].to_string()
    } else {
        s
    }
}

fn fmt_decade(e: i64) -> String {
    match e {
        e if e >= 6 || e <= -5 => format!("1e{e}"),
        e if e >= 0 => 10u64.pow(e as u32).to_string(),
        e => format!("{:.*}", (-e) as usize, 10f64.powi(e as i32)),
    }
}

/// A number for an axis or a label: no trailing zeros, at most 3 significant decimals
/// below 1 (`0.05`, `2.5`, `150`, `1e6`).
pub fn fmt_num(v: f64) -> String {
    if !v.is_finite() {
        return if v.is_nan() {
            "NaN".into()
        } else if v > 0.0 {
            "∞".into()
        } else {
            "-∞".into()
        };
    }
    let a = v.abs();
    if a != 0.0 && !(1e-4..1e6).contains(&a) {
        return format!("{v:e}");
    }
    let decimals = if a >= 100.0 {
        0
    } else if a >= 1.0 {
        2
    } else {
        4
    };
    let s = format!("{v:.decimals$}");
    let s = if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_string() } else { s };
    if s == "-0" {
        "0".into()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(t: &Ticks) -> Vec<&str> {
        t.ticks.iter().map(|x| x.1.as_str()).collect()
    }

    #[test]
    fn linear_ticks_are_round_and_cover_the_data() {
        let t = Axis::linear("s").fit([0.3, 47.0]);
        assert_eq!((t.lo, t.hi), (0.0, 50.0));
        assert_eq!(labels(&t), ["0", "10", "20", "30", "40", "50"]);
        let t = Axis::fitted("x").fit([0.12, 0.38]);
        assert_eq!(labels(&t), ["0.10", "0.15", "0.20", "0.25", "0.30", "0.35", "0.40"]);
        let t = Axis::linear("x").fit([-3.0, 4.0]);
        assert!(t.lo <= -3.0 && t.hi >= 4.0 && labels(&t).contains(&"0"), "{t:?}");
    }

    #[test]
    fn counts_get_whole_ticks() {
        let t = Axis::linear("loopers").fit([0.0, 1.0, 2.0]);
        assert_eq!(labels(&t), ["0", "1", "2"]);
        let t = Axis::linear("s").fit([0.0, 0.5, 2.0]);
        assert_eq!(labels(&t), ["0.0", "0.5", "1.0", "1.5", "2.0"]);
    }

    #[test]
    fn a_sliver_past_a_tick_does_not_add_a_step() {
        let t = Axis::linear("s").fit([0.0, 20.2]);
        assert_eq!((t.hi, labels(&t).last().copied()), (20.2, Some("20")));
        let t = Axis::linear("s").fit([0.0, 21.5]);
        assert_eq!(t.hi, 25.0);
    }

    #[test]
    fn given_bounds_are_kept() {
        let t = Axis::linear("%").max(100.0).fit([3.0, 20.0]);
        assert_eq!((t.lo, t.hi), (0.0, 100.0));
        assert_eq!(labels(&t), ["0", "20", "40", "60", "80", "100"]);
    }

    #[test]
    fn degenerate_data_still_gives_an_axis() {
        for vals in [vec![], vec![f64::NAN], vec![5.0, 5.0], vec![0.0]] {
            let t = Axis::linear("x").fit(vals.clone());
            assert!(t.hi > t.lo && !t.ticks.is_empty(), "{vals:?}: {t:?}");
            let t = Axis::log("x").fit(vals.clone());
            assert!(t.hi > t.lo && !t.ticks.is_empty(), "{vals:?}: {t:?}");
        }
    }

    #[test]
    fn log_axis_shows_50_us_and_10_ms_with_room() {
        // Petrou et al. 1999 Table 1: 0.05 ms with boost, tens of ms without.
        let t = Axis::log("ms").fit([0.05, 10.0, 27.0]);
        assert_eq!(labels(&t), ["0.01", "0.1", "1", "10", "100"]);
        let (a, b) = (t.frac(0.05), t.frac(10.0));
        assert!(a > 0.1 && b < 0.8 && b - a > 0.5, "{a} {b}");
        assert!(t.minor.iter().any(|m| (m - 0.05).abs() < 1e-12), "{:?}", t.minor);
    }

    #[test]
    fn log_axis_puts_zero_and_tiny_values_on_its_floor() {
        let t = Axis::log("ms").min(0.01).fit([0.0, 0.001, 0.05, 400.0]);
        assert!(t.clamped);
        assert_eq!(labels(&t), ["≤0.01", "0.1", "1", "10", "100", "1000"]);
        assert_eq!(t.frac(0.0), 0.0);
        assert_eq!(t.frac(0.001), 0.0);
        assert!(t.frac(0.05) > 0.0);
    }

    #[test]
    fn numbers_read_short() {
        assert_eq!(fmt_num(0.05), "0.05");
        assert_eq!(fmt_num(2.5), "2.5");
        assert_eq!(fmt_num(150.0), "150");
        assert_eq!(fmt_num(1e6), "1e6");
        assert_eq!(fmt_num(-0.0), "0");
        assert_eq!(fmt_decade(-2), "0.01");
        assert_eq!(fmt_decade(3), "1000");
        assert_eq!(nice_step(0.7), 0.5);
        assert_eq!(nice_step(23.0), 20.0);
    }
}
