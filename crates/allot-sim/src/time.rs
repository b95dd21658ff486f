//! Simulated time: nanoseconds in a u64, and the duration syntax of scenario files
//! (allot-model's: "5ms", "100us", "1.5s", "250ns", or a bare number of nanoseconds).

/// Nanoseconds.
pub type Ns = u64;
/// One microsecond.
pub const US: Ns = 1_000;
/// One millisecond.
pub const MS: Ns = 1_000_000;
/// One second.
pub const SEC: Ns = 1_000_000_000;
/// "Forever" for CPU-bound bursts; far beyond any simulated horizon, and safe to add to.
pub const FOREVER: Ns = u64::MAX / 4;

/// Parses "5ms", "1.5s", "100us", "250µs", "20ns", "2min" (allot-model's duration
/// grammar, so scenario files and allot's arguments read durations alike); a bare number
/// is nanoseconds. Returns a message naming what is allowed.
pub fn parse_duration(s: &str) -> Result<Ns, String> {
    allot_model::duration::parse("", s, Some(allot_model::duration::Unit::Ns)).map(|d| d.as_nanos() as Ns).map_err(|e| e.to_string())
}

/// Formats nanoseconds compactly for humans.
pub fn fmt_ns(ns: Ns) -> String {
    if ns >= SEC && ns % (SEC / 1000) == 0 {
        format!("{}s", ns as f64 / 1e9)
    } else if ns >= MS {
        format!("{}ms", ns as f64 / 1e6)
    } else if ns >= US {
        format!("{}us", ns as f64 / 1e3)
    } else {
        format!("{ns}ns")
    }
}

/// Nanoseconds to milliseconds as f64.
pub fn ms(ns: f64) -> f64 {
    ns / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn parses() {
        assert_eq!(parse_duration("5ms").unwrap(), 5 * MS);
        assert_eq!(parse_duration("1.5s").unwrap(), 1_500 * MS);
        assert_eq!(parse_duration("100us").unwrap(), 100 * US);
        assert_eq!(parse_duration("42").unwrap(), 42);
        assert!(parse_duration("5 parsecs").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("ms").is_err());
        assert_eq!(parse_duration("250µs").unwrap(), 250 * US);
        assert_eq!(parse_duration("2min").unwrap(), 120 * SEC);
        assert!(parse_duration("-1ms").unwrap_err().contains("negative"));
    }
}
