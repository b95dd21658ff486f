//! Simulated time: nanoseconds in a u64, and the duration syntax of scenario files
//! ("5ms", "100us", "1.5s", "250ns", or a bare number of nanoseconds).

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

/// Parses "5ms", "1.5s", "100us", "20ns", "2m". Returns a message naming what is allowed.
pub fn parse_duration(s: &str) -> Result<Ns, String> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let unit = unit.trim();
    let mult: f64 = match unit {
        "" | "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" | "min" => 60e9,
        _ => return Err(format!("duration {s:?} has unknown unit {unit:?}; use ns, us, ms, s or min (e.g. \"5ms\")")),
    };
    let v: f64 = num.parse().map_err(|_| format!("duration {s:?} is not a number with a unit (e.g. \"5ms\", \"1.5s\")"))?;
    if !v.is_finite() || v < 0.0 {
        return Err(format!("duration {s:?} must be a non-negative number"));
    }
    Ok((v * mult).round() as Ns)
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
    }
}
