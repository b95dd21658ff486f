//! Argument values the instruments share: durations with units.
//!
//! Every duration a user types takes a unit: `--interval 5ms`, `--work 500us` (or
//! `0.5ms`, `250µs`), `--duration 2s`, `--slice 0.1ms`. A bare number keeps the meaning
//! the argument had before it took units, so old command lines still work: `--interval`
//! ms, `--work` and `--slice` µs, `--duration`, `--cell` and `--phases` seconds,
//! `--burst-ms` and `--sleep-ms` ms. The grammar is allot-model's
//! ([`allot_model::duration`]).

use allot_model::duration::{self, Unit};
use std::time::Duration;

/// Parses the duration argument `flag` given as `s`; a bare number is `bare`.
pub fn duration(flag: &str, s: &str, bare: Unit) -> anyhow::Result<Duration> {
    duration::parse(flag, s, Some(bare)).map_err(anyhow::Error::from)
}

/// Parses a duration that must be more than 0 and at most `max`.
pub fn positive_duration(flag: &str, s: &str, bare: Unit, max: Duration) -> anyhow::Result<Duration> {
    let d = duration(flag, s, bare)?;
    if d.is_zero() {
        anyhow::bail!("{flag} must be more than 0, got {s:?}");
    }
    if d > max {
        anyhow::bail!("{flag} must be at most {}, got {s:?}", duration::format(max));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_everywhere_and_bare_numbers_keep_their_unit() {
        assert_eq!(duration("--work", "0.5ms", Unit::Us).unwrap(), Duration::from_micros(500));
        assert_eq!(duration("--work", "500", Unit::Us).unwrap(), Duration::from_micros(500));
        assert_eq!(duration("--interval", "5", Unit::Ms).unwrap(), Duration::from_millis(5));
        assert_eq!(duration("--interval", "250µs", Unit::Ms).unwrap(), Duration::from_micros(250));
        assert_eq!(duration("--duration", "2", Unit::S).unwrap(), Duration::from_secs(2));
    }

    #[test]
    fn ranges_name_the_flag_and_the_value() {
        let max = Duration::from_secs(60);
        let e = |s: &str| positive_duration("--interval", s, Unit::Ms, max).unwrap_err().to_string();
        assert_eq!(e("0"), "--interval must be more than 0, got \"0\"");
        assert_eq!(e("0.0001ns"), "--interval must be more than 0, got \"0.0001ns\"");
        assert_eq!(e("61s"), "--interval must be at most 60s, got \"61s\"");
        assert_eq!(
            e("5 parsecs"),
            "--interval must be a duration like 5ms, 500us or 0.2s (a bare number is milliseconds), got \"5 parsecs\": unknown unit \"parsecs\"; units are ns, us (or µs), ms, s, min"
        );
        assert!(e("-3").contains("cannot be negative"));
        assert!(e("1e999s").contains("exponents"));
        assert!(e("99999999999999999999s").contains("too long"));
        assert!(e("").contains("empty"));
    }
}
