//! `allot-scx probe --every MS --for SECS`: an interactive task's wakeup latency, for the
//! boost's measurements (docs/scx.md). It sleeps MS, wakes, and takes how much later than
//! asked it ran again (the time from its timer's expiry to its running: the wait for a
//! CPU, which the boost shortens), again and again for SECS; then prints one line:
//!   `probe: N wakeups every MS ms over SECS s: latency p50 A ms p90 B ms p99 C ms max D ms`.

use anyhow::{bail, Context, Result};
use std::time::{Duration, Instant};

const USAGE: &str = "usage: allot-scx probe --every MS --for SECS";

/// The latencies' percentile `q` (0..=1), nearest rank, of sorted `v` (empty: 0).
pub fn percentile(v: &[Duration], q: f64) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

fn parse(args: &[String]) -> Result<(Duration, Duration)> {
    let (mut every, mut secs) = (None, None);
    let mut it = args.iter();
    while let Some(opt) = it.next() {
        let val = it.next().with_context(|| format!("{opt} needs a value; {USAGE}"))?;
        let n: f64 =
            val.parse().ok().filter(|n: &f64| n.is_finite() && *n > 0.0).with_context(|| format!("{opt} wants a number above 0, got {val:?}"))?;
        match opt.as_str() {
            "--every" if n <= 10_000.0 => every = Some(Duration::from_secs_f64(n / 1000.0)),
            "--for" if n <= 86_400.0 => secs = Some(Duration::from_secs_f64(n)),
            "--every" | "--for" => bail!("{opt} {val}: at most 10000 ms (--every) or 86400 s (--for)"),
            _ => bail!("unknown option {opt:?}; {USAGE}"),
        }
    }
    match (every, secs) {
        (Some(e), Some(s)) => Ok((e, s)),
        _ => bail!("give --every and --for; {USAGE}"),
    }
}

/// Runs the probe.
pub fn main(args: &[String]) -> Result<()> {
    let (every, run_for) = parse(args)?;
    let start = Instant::now();
    let mut lat = vec![];
    while start.elapsed() < run_for {
        let t = Instant::now();
        std::thread::sleep(every);
        lat.push(t.elapsed().saturating_sub(every));
    }
    lat.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "probe: {} wakeups every {} ms over {:.1} s: latency p50 {:.3} ms p90 {:.3} ms p99 {:.3} ms max {:.3} ms",
        lat.len(),
        ms(every),
        start.elapsed().as_secs_f64(),
        ms(percentile(&lat, 0.5)),
        ms(percentile(&lat, 0.9)),
        ms(percentile(&lat, 0.99)),
        ms(lat.last().copied().unwrap_or_default())
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let v: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&v, 0.5), Duration::from_millis(50));
        assert_eq!(percentile(&v, 0.99), Duration::from_millis(99));
        assert_eq!(percentile(&v, 1.0), Duration::from_millis(100));
        assert_eq!(percentile(&v[..1], 0.99), Duration::from_millis(1));
        assert_eq!(percentile(&[], 0.99), Duration::ZERO);
    }

    #[test]
    fn bad_options_are_refused_naming_the_value() {
        let a = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
        assert_eq!(parse(&a("--every 10 --for 20")).unwrap(), (Duration::from_millis(10), Duration::from_secs(20)));
        assert!(parse(&a("--every 0 --for 20")).unwrap_err().to_string().contains("got \"0\""));
        assert!(parse(&a("--every x --for 20")).unwrap_err().to_string().contains("got \"x\""));
        assert!(parse(&a("--every 10")).unwrap_err().to_string().contains("--for"));
        assert!(parse(&a("--every 20000 --for 1")).unwrap_err().to_string().contains("at most"));
        assert!(parse(&a("--often 1 --for 1")).unwrap_err().to_string().contains("--often"));
    }
}
