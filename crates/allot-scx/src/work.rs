//! `allot-scx work --start UNIX_SECS --for SECS --marks S,S,... BEHAVIOUR`: one task of
//! a simulator scenario run for real (`allot-lab sim live`, tests/vm/scx/sim.sh). It
//! sleeps until the wall clock reaches UNIX_SECS (so every task of a scenario starts at
//! once, after the scheduler has taken them), then does BEHAVIOUR for SECS:
//!
//! - `cpu`: computes without end;
//! - `periodic:WORK_US:SLEEP_US:JITTER:rel|abs`: computes WORK_US of CPU time, then
//!   sleeps SLEEP_US (`abs`: until the next multiple of SLEEP_US since the start), each
//!   drawn within ±JITTER (a fraction) of its value, again and again;
//! - `phases/SECS=B/SECS=B/...`: each B for SECS of wall-clock time, the last to the end.
//!
//! At each mark (seconds after the start) it reads its own `/proc/self/schedstat`, and at
//! the end prints one line per mark: `mark SECS RUN_NS DELAY_NS TIMESLICES`. A reading
//! comes at most a moment late: a task that is not running cannot read, but neither
//! does its time on a CPU grow.

use anyhow::{bail, Context, Result};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const USAGE: &str =
    "usage: allot-scx work --start UNIX_SECS --for SECS --marks S,S,... cpu|periodic:WORK_US:SLEEP_US:JITTER:rel|abs|phases/SECS=B/...";

/// What a task does.
#[derive(Debug, Clone, PartialEq)]
pub enum Behaviour {
    /// Computes without end.
    Cpu,
    /// Computes `work`, sleeps `sleep` (or to the next multiple of it, `absolute`).
    Periodic {
        /// CPU time per cycle.
        work: Duration,
        /// Sleep, or period.
        sleep: Duration,
        /// ± this fraction on each.
        jitter: f64,
        /// Sleep to the next period boundary.
        absolute: bool,
    },
    /// Phases by wall-clock time; the last lasts to the end.
    Phases(Vec<(Duration, Behaviour)>),
}

/// Parses a BEHAVIOUR argument; the error names the part and what is allowed.
pub fn parse_behaviour(s: &str) -> Result<Behaviour> {
    if s == "cpu" {
        return Ok(Behaviour::Cpu);
    }
    if let Some(rest) = s.strip_prefix("periodic:") {
        let f: Vec<&str> = rest.split(':').collect();
        let us = |v: &str| -> Result<Duration> {
            let n: u64 = v.parse().ok().filter(|n| (1..=60_000_000).contains(n)).with_context(|| format!("{s:?}: {v:?} must be 1..60000000 µs"))?;
            Ok(Duration::from_micros(n))
        };
        if f.len() != 4 {
            bail!("{s:?}: wanted periodic:WORK_US:SLEEP_US:JITTER:rel|abs");
        }
        let jitter: f64 =
            f[2].parse().ok().filter(|j: &f64| (0.0..1.0).contains(j)).with_context(|| format!("{s:?}: jitter must be 0 up to 1, got {:?}", f[2]))?;
        let absolute = match f[3] {
            "abs" => true,
            "rel" => false,
            o => bail!("{s:?}: the last part must be rel or abs, got {o:?}"),
        };
        return Ok(Behaviour::Periodic { work: us(f[0])?, sleep: us(f[1])?, jitter, absolute });
    }
    if let Some(rest) = s.strip_prefix("phases/") {
        let mut v = vec![];
        for p in rest.split('/') {
            let (secs, b) = p.split_once('=').with_context(|| format!("{s:?}: a phase is SECS=BEHAVIOUR, got {p:?}"))?;
            let secs: f64 = secs
                .parse()
                .ok()
                .filter(|x: &f64| x.is_finite() && *x > 0.0)
                .with_context(|| format!("{s:?}: a phase's SECS must be above 0, got {secs:?}"))?;
            let b = parse_behaviour(b)?;
            if matches!(b, Behaviour::Phases(_)) {
                bail!("{s:?}: a phase may not itself have phases");
            }
            v.push((Duration::from_secs_f64(secs), b));
        }
        return Ok(Behaviour::Phases(v));
    }
    bail!("behaviour {s:?}: wanted cpu, periodic:WORK_US:SLEEP_US:JITTER:rel|abs or phases/SECS=B/...")
}

/// The marks still to read, and those read.
struct Marks {
    start: Instant,
    due: Vec<Duration>,
    read: Vec<(Duration, String)>,
}

impl Marks {
    /// Reads every mark that is due.
    fn tick(&mut self) {
        let now = self.start.elapsed();
        while self.due.first().is_some_and(|m| *m <= now) {
            let m = self.due.remove(0);
            let s = std::fs::read_to_string("/proc/self/schedstat").unwrap_or_default();
            self.read.push((m, s.trim().to_string()));
        }
    }
    fn next(&self) -> Option<Duration> {
        self.due.first().copied()
    }
}

fn thread_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// A small xorshift for the jitter (the live run is not meant to repeat draw for draw).
struct Jitter(u64);

impl Jitter {
    fn scale(&mut self, d: Duration, j: f64) -> Duration {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        let u = (self.0 >> 11) as f64 / (1u64 << 53) as f64; // [0, 1)
        d.mul_f64(1.0 + j * (2.0 * u - 1.0))
    }
}

/// Computes `work` of CPU time (or until `until`), reading marks as they come due.
fn compute(work: Option<Duration>, until: Duration, marks: &mut Marks) {
    let begin = thread_cpu();
    loop {
        for _ in 0..2000 {
            std::hint::black_box(0u64.wrapping_add(1));
        }
        marks.tick();
        if marks.start.elapsed() >= until || work.is_some_and(|w| thread_cpu() - begin >= w) {
            return;
        }
    }
}

/// Sleeps to `t` after the start (or `until`), waking for marks on the way.
fn sleep_to(t: Duration, until: Duration, marks: &mut Marks) {
    let t = t.min(until);
    loop {
        marks.tick();
        let now = marks.start.elapsed();
        if now >= t {
            return;
        }
        let wake = marks.next().map_or(t, |m| m.min(t));
        std::thread::sleep(wake.saturating_sub(now));
    }
}

fn run(b: &Behaviour, until: Duration, marks: &mut Marks, rng: &mut Jitter) {
    match b {
        Behaviour::Cpu => compute(None, until, marks),
        Behaviour::Periodic { work, sleep, jitter, absolute } => {
            let phase_start = marks.start.elapsed();
            while marks.start.elapsed() < until {
                compute(Some(rng.scale(*work, *jitter)), until, marks);
                let now = marks.start.elapsed();
                let to = if *absolute {
                    let k = (now - phase_start).as_nanos() / sleep.as_nanos() + 1;
                    phase_start + Duration::from_nanos((k * sleep.as_nanos()) as u64)
                } else {
                    now + rng.scale(*sleep, *jitter)
                };
                sleep_to(to, until, marks);
            }
        }
        Behaviour::Phases(v) => {
            let mut end = marks.start.elapsed();
            for (i, (len, p)) in v.iter().enumerate() {
                end = if i + 1 == v.len() { until } else { (end + *len).min(until) };
                run(p, end, marks, rng);
            }
        }
    }
}

/// Runs `allot-scx work`.
pub fn main(args: &[String]) -> Result<()> {
    let (mut start, mut secs, mut marks, mut beh) = (None, None, vec![], None);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--start" | "--for" | "--marks" => {
                let v = it.next().with_context(|| format!("{a} needs a value; {USAGE}"))?;
                let num = |x: &str| -> Result<f64> {
                    x.parse().ok().filter(|n: &f64| n.is_finite() && *n >= 0.0).with_context(|| format!("{a}: {x:?} is not a number of seconds ≥ 0"))
                };
                match a.as_str() {
                    "--start" => start = Some(num(v)?),
                    "--for" => secs = Some(Duration::from_secs_f64(num(v)?)),
                    _ => marks = v.split(',').map(|m| num(m).map(Duration::from_secs_f64)).collect::<Result<_>>()?,
                }
            }
            b if beh.is_none() && !b.starts_with("--") => beh = Some(parse_behaviour(b)?),
            o => bail!("unexpected {o:?}; {USAGE}"),
        }
    }
    let (Some(start), Some(until), Some(beh)) = (start, secs, beh) else { bail!("give --start, --for and a behaviour; {USAGE}") };
    if let Some(m) = marks.iter().find(|m| **m > until) {
        bail!("--marks: {} s is past --for {} s", m.as_secs_f64(), until.as_secs_f64());
    }
    marks.sort();
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs_f64();
    if start > now {
        std::thread::sleep(Duration::from_secs_f64(start - now));
    }
    let mut m = Marks { start: Instant::now(), due: marks, read: vec![] };
    let mut rng = Jitter(0x9e37_79b9_7f4a_7c15 ^ std::process::id() as u64);
    run(&beh, until, &mut m, &mut rng);
    m.tick();
    // Marks at the very end (SECS itself) are read now.
    while let Some(d) = m.next() {
        m.due.remove(0);
        let s = std::fs::read_to_string("/proc/self/schedstat").unwrap_or_default();
        m.read.push((d, s.trim().to_string()));
    }
    for (d, s) in &m.read {
        println!("mark {} {s}", d.as_secs_f64());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behaviours_parse_as_allot_sim_live_writes_them() {
        assert_eq!(parse_behaviour("cpu").unwrap(), Behaviour::Cpu);
        let b = parse_behaviour("phases/15=cpu/20=periodic:5000:100000:0.1:rel/15=cpu").unwrap();
        let Behaviour::Phases(v) = b else { panic!("{b:?}") };
        assert_eq!(v.len(), 3);
        assert_eq!(
            v[1],
            (
                Duration::from_secs(20),
                Behaviour::Periodic { work: Duration::from_millis(5), sleep: Duration::from_millis(100), jitter: 0.1, absolute: false }
            )
        );
        assert!(matches!(parse_behaviour("periodic:20:50000:0:abs").unwrap(), Behaviour::Periodic { absolute: true, .. }));
    }

    #[test]
    fn bad_behaviours_name_what_is_allowed() {
        let e = parse_behaviour("periodic:0:100:0:rel").unwrap_err().to_string();
        assert!(e.contains("1..60000000"), "{e}");
        let e = parse_behaviour("periodic:5:100:0:later").unwrap_err().to_string();
        assert!(e.contains("rel or abs"), "{e}");
        let e = parse_behaviour("spin").unwrap_err().to_string();
        assert!(e.contains("wanted cpu"), "{e}");
    }

    #[test]
    fn a_short_run_reads_its_marks_in_order() {
        let mut m = Marks { start: Instant::now(), due: vec![Duration::ZERO, Duration::from_millis(30)], read: vec![] };
        let b = Behaviour::Periodic { work: Duration::from_millis(2), sleep: Duration::from_millis(5), jitter: 0.0, absolute: true };
        run(&b, Duration::from_millis(60), &mut m, &mut Jitter(1));
        assert_eq!(m.read.iter().map(|r| r.0).collect::<Vec<_>>(), [Duration::ZERO, Duration::from_millis(30)]);
        assert!(m.start.elapsed() >= Duration::from_millis(60));
    }
}
