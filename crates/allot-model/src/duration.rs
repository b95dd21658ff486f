//! Durations as people type them: a number and a unit, `5ms`, `500us`, `250µs`, `0.2s`,
//! `2min`, with an optional space between (`5 ms`).
//!
//! The grammar is deliberately small: digits with at most one decimal point (`.5` and
//! `5.` are fine), then one unit. No sign, no exponent, no hex, no `inf`/`NaN`: a
//! duration typed as `1e999s` or `0x10ms` is a mistake, not a number to guess at. The
//! value is converted exactly (decimal arithmetic, rounded to the nearest nanosecond),
//! so `0.1ms` is 100000 ns, not 99999.99… ns.
//!
//! Some arguments took bare numbers before they took units (`--interval 5` meant 5 ms,
//! `--work 500` meant 500 µs); [`parse`] keeps that meaning when given the bare unit, so
//! old command lines and scripts keep working. Range checks (positive, at most a minute,
//! …) belong to the caller, which knows what the value is for.

use crate::ModelError;
use std::time::Duration;

/// A unit a duration may be written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Nanoseconds, `ns`.
    Ns,
    /// Microseconds, `us`, `µs` or `μs`.
    Us,
    /// Milliseconds, `ms`.
    Ms,
    /// Seconds, `s`.
    S,
    /// Minutes, `min` or `m`.
    Min,
}

impl Unit {
    /// Nanoseconds in one of this unit.
    pub fn nanos(self) -> u128 {
        match self {
            Unit::Ns => 1,
            Unit::Us => 1_000,
            Unit::Ms => 1_000_000,
            Unit::S => 1_000_000_000,
            Unit::Min => 60_000_000_000,
        }
    }

    /// The unit's usual symbol: `ns`, `µs`, `ms`, `s`, `min`.
    pub fn symbol(self) -> &'static str {
        match self {
            Unit::Ns => "ns",
            Unit::Us => "µs",
            Unit::Ms => "ms",
            Unit::S => "s",
            Unit::Min => "min",
        }
    }

    /// The unit's name in words: `milliseconds`.
    pub fn name(self) -> &'static str {
        match self {
            Unit::Ns => "nanoseconds",
            Unit::Us => "microseconds",
            Unit::Ms => "milliseconds",
            Unit::S => "seconds",
            Unit::Min => "minutes",
        }
    }

    /// The unit a suffix names, if any.
    pub fn from_suffix(s: &str) -> Option<Unit> {
        Some(match s {
            "ns" => Unit::Ns,
            // U+00B5 MICRO SIGN (what keyboards and `µ` in most fonts give) and U+03BC
            // GREEK SMALL LETTER MU (what some input methods give): both are "micro".
            "us" | "µs" | "μs" => Unit::Us,
            "ms" => Unit::Ms,
            "s" => Unit::S,
            "m" | "min" => Unit::Min,
            _ => return None,
        })
    }
}

/// The units [`parse`] accepts, for messages.
pub const UNITS: &str = "ns, us (or µs), ms, s, min";

/// Fraction digits kept: far below a nanosecond even in minutes, and small enough that
/// the exact arithmetic cannot overflow.
const MAX_FRACTION_DIGITS: usize = 20;

/// Parses a duration typed by a person. `what` names the value in the error (e.g.
/// `--interval`; empty when the caller adds its own context); `bare` is the unit a
/// number without a unit is read in, or None to require a unit.
///
/// ```
/// use allot_model::duration::{parse, Unit};
/// use std::time::Duration;
/// assert_eq!(parse("--work", "0.5ms", Some(Unit::Us)).unwrap(), Duration::from_micros(500));
/// assert_eq!(parse("--work", "500", Some(Unit::Us)).unwrap(), Duration::from_micros(500));
/// let e = parse("--interval", "5 parsecs", Some(Unit::Ms)).unwrap_err().to_string();
/// assert!(e.starts_with("--interval must be a duration like 5ms, 500us or 0.2s"), "{e}");
/// ```
pub fn parse(what: &str, s: &str, bare: Option<Unit>) -> Result<Duration, ModelError> {
    let bad = |why: String| ModelError::BadDuration { what: what.to_string(), got: s.to_string(), bare: bare.map(Unit::name), why };
    let t = s.trim();
    if t.is_empty() {
        return Err(bad("it is empty".into()));
    }
    if t.starts_with('-') {
        return Err(bad("a duration cannot be negative".into()));
    }
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    let suffix = suffix.trim_start();
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if int.is_empty() && frac.is_empty() || frac.contains('.') {
        return Err(if num.is_empty() {
            bad(format!("it does not start with a number; units are {UNITS}"))
        } else {
            bad(format!("{num:?} is not a number"))
        });
    }
    let unit = if suffix.is_empty() {
        match bare {
            Some(u) => u,
            None => return Err(bad(format!("it has no unit; units are {UNITS}"))),
        }
    } else {
        match Unit::from_suffix(suffix) {
            Some(u) => u,
            None if suffix.starts_with(['e', 'E']) && suffix[1..].starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '+') => {
                return Err(bad(format!("exponents are not accepted (write {num}000ms, not {num}e3ms); units are {UNITS}")))
            }
            None => return Err(bad(format!("unknown unit {suffix:?}; units are {UNITS}"))),
        }
    };
    let too_long = || bad("it is too long (at most 584 years)".into());
    let mut ns: u128 = 0;
    for d in int.bytes() {
        ns = ns.checked_mul(10).and_then(|v| v.checked_add(u128::from(d - b'0'))).ok_or_else(too_long)?;
        if ns > u128::from(u64::MAX) {
            return Err(too_long());
        }
    }
    ns = ns.checked_mul(unit.nanos()).ok_or_else(too_long)?;
    // The fraction, exactly: digits × unit / 10^digits, rounded half up.
    let frac = &frac[..frac.len().min(MAX_FRACTION_DIGITS)];
    if !frac.is_empty() {
        let digits: u128 = frac.bytes().fold(0, |v, d| v * 10 + u128::from(d - b'0'));
        let scale = 10u128.pow(frac.len() as u32);
        ns += (digits * unit.nanos() + scale / 2) / scale;
    }
    let ns = u64::try_from(ns).map_err(|_| too_long())?;
    Ok(Duration::from_nanos(ns))
}

/// Formats a duration in the largest unit that keeps it short and exact to the
/// microsecond: `5ms`, `500µs`, `1.5s`, `250ns`.
pub fn format(d: Duration) -> String {
    let ns = d.as_nanos();
    let (unit, scale) = if ns >= 1_000_000_000 {
        ("s", 1e9)
    } else if ns >= 1_000_000 {
        ("ms", 1e6)
    } else if ns >= 1_000 {
        ("µs", 1e3)
    } else {
        ("ns", 1.0)
    };
    let v = ns as f64 / scale;
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}{unit}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str, bare: Option<Unit>) -> u64 {
        parse("x", s, bare).unwrap_or_else(|e| panic!("{s:?}: {e}")).as_nanos() as u64
    }
    fn err(s: &str, bare: Option<Unit>) -> String {
        match parse("--interval", s, bare) {
            Ok(d) => panic!("{s:?} parsed as {d:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn units_and_forms() {
        assert_eq!(ok("5ms", None), 5_000_000);
        assert_eq!(ok("500us", None), 500_000);
        assert_eq!(ok("250µs", None), 250_000);
        assert_eq!(ok("250μs", None), 250_000);
        assert_eq!(ok("0.5ms", None), 500_000);
        assert_eq!(ok("2s", None), 2_000_000_000);
        assert_eq!(ok("1.5s", None), 1_500_000_000);
        assert_eq!(ok("2min", None), 120_000_000_000);
        assert_eq!(ok("2m", None), 120_000_000_000);
        assert_eq!(ok("20ns", None), 20);
        assert_eq!(ok(".5s", None), 500_000_000);
        assert_eq!(ok("5.s", None), 5_000_000_000);
        assert_eq!(ok(" 5 ms ", None), 5_000_000);
        assert_eq!(ok("0ms", None), 0);
    }

    #[test]
    fn exact_decimal_not_float() {
        assert_eq!(ok("0.1ms", None), 100_000);
        assert_eq!(ok("0.3s", None), 300_000_000);
        assert_eq!(ok("1.0000000005s", None), 1_000_000_001); // half a ns rounds up
        assert_eq!(ok("0.4ns", None), 0);
        assert_eq!(ok("0.000000000000000000000000001s", None), 0);
    }

    #[test]
    fn bare_numbers_keep_their_old_unit() {
        assert_eq!(ok("5", Some(Unit::Ms)), 5_000_000);
        assert_eq!(ok("500", Some(Unit::Us)), 500_000);
        assert_eq!(ok("0.5", Some(Unit::S)), 500_000_000);
        assert_eq!(ok("42", Some(Unit::Ns)), 42);
        // A unit always wins over the bare unit.
        assert_eq!(ok("500us", Some(Unit::Ms)), 500_000);
        assert!(err("5", None).contains("no unit"));
    }

    #[test]
    fn hostile_inputs_are_refused_with_the_value_named() {
        for (s, why) in [
            ("", "empty"),
            ("   ", "empty"),
            ("5 parsecs", "unknown unit \"parsecs\""),
            ("-1ms", "negative"),
            ("-0", "negative"),
            ("1e999s", "exponents are not accepted"),
            ("1e3ms", "exponents are not accepted"),
            ("1E-3s", "exponents are not accepted"),
            ("1es", "unknown unit \"es\""),
            ("0x10ms", "unknown unit \"x10ms\""),
            ("NaN ms", "does not start with a number"),
            ("inf s", "does not start with a number"),
            ("ms", "does not start with a number"),
            (".ms", "\".\" is not a number"),
            ("1.2.3ms", "not a number"),
            ("+5ms", "does not start with a number"),
            ("5ms5", "unknown unit"),
            ("1s500ms", "unknown unit"),
            ("5 m s", "unknown unit"),
            ("5\u{1b}[2Jms", "unknown unit"),
            ("18446744073709551616ns", "too long"),
            ("18446744074s", "too long"),
            ("99999999999999999999999999999999999999999999min", "too long"),
        ] {
            let e = err(s, Some(Unit::Ms));
            assert!(e.contains(why), "{s:?}: {e}");
            assert!(e.contains(&format!("got {s:?}")), "{s:?}: {e}");
            assert!(e.starts_with("--interval must be a duration like 5ms, 500us or 0.2s (a bare number is milliseconds)"), "{e}");
        }
        // The largest representable duration still parses.
        assert_eq!(ok("18446744073709551615ns", None), u64::MAX);
        assert_eq!(ok("18446744073s", None), 18_446_744_073_000_000_000);
    }

    #[test]
    fn message_reads_well_without_a_name() {
        let e = parse("", "5 parsecs", None).unwrap_err().to_string();
        assert!(e.starts_with("must be a duration like 5ms"), "{e}");
        assert!(!e.contains("bare"), "{e}");
    }

    #[test]
    fn formats_short_and_round_trips() {
        for (d, s) in [(5_000_000, "5ms"), (500_000, "500µs"), (1_500_000_000, "1.5s"), (250, "250ns"), (0, "0ns")] {
            assert_eq!(format(Duration::from_nanos(d)), s);
            assert_eq!(ok(s, None), d);
        }
    }
}
