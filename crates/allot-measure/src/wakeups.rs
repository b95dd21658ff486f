//! What a late wakeup waited behind, read from the kernel's scheduler trace events
//! (tracefs: `sched_waking`, `sched_switch`). For each wakeup of a task, the time from
//! `sched_waking` to the `sched_switch` that puts it on a CPU, and which task was running
//! on the target CPU when it woke. A wakeup that waits about a scheduler tick behind the
//! task that was already running is one the kernel declined to preempt for (EEVDF's
//! run-to-parity protection, or a woken entity that was not yet eligible), which is what
//! the latency boost must overcome; a wait behind other tasks is load.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The tracefs events this module reads.
const EVENTS: [&str; 2] = ["sched/sched_switch", "sched/sched_waking"];

/// Records the scheduler events machine-wide while it lives (root only). One at a time:
/// tracefs's top buffer is global.
pub struct Tracer {
    root: PathBuf,
    /// The buffer size it found, given back when it ends.
    buffer_kib: String,
}

fn write(p: &Path, v: &str) -> anyhow::Result<()> {
    std::fs::write(p, v).map_err(|e| anyhow::anyhow!("cannot write {:?} to {}: {e}", v, p.display()))
}

impl Tracer {
    /// Starts recording into a fresh buffer of `kib_per_cpu` KiB per CPU.
    pub fn start(kib_per_cpu: u32) -> anyhow::Result<Tracer> {
        let root = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.join("events/sched/sched_switch").is_dir())
            .ok_or_else(|| anyhow::anyhow!("tracefs with the sched events is not mounted (mount -t tracefs none /sys/kernel/tracing)"))?;
        let buffer_kib = kib_of(&std::fs::read_to_string(root.join("buffer_size_kb"))?);
        write(&root.join("tracing_on"), "0")?;
        write(&root.join("trace"), "")?;
        write(&root.join("buffer_size_kb"), &kib_per_cpu.to_string())?;
        for e in EVENTS {
            write(&root.join("events").join(e).join("enable"), "1")?;
        }
        write(&root.join("tracing_on"), "1")?;
        Ok(Tracer { root, buffer_kib })
    }

    /// Stops recording and returns the trace text.
    pub fn finish(self) -> anyhow::Result<String> {
        write(&self.root.join("tracing_on"), "0")?;
        let text = std::fs::read_to_string(self.root.join("trace"))?;
        Ok(text)
    }
}

impl Drop for Tracer {
    fn drop(&mut self) {
        let _ = write(&self.root.join("tracing_on"), "0");
        for e in EVENTS {
            let _ = write(&self.root.join("events").join(e).join("enable"), "0");
        }
        let _ = write(&self.root.join("trace"), "");
        let _ = write(&self.root.join("buffer_size_kb"), &self.buffer_kib);
    }
}

/// The per-CPU buffer size tracefs reports: "1408", or "7 (expanded: 1408)" before the
/// buffer was first used (then the size it will have).
fn kib_of(s: &str) -> String {
    let s = s.trim();
    s.split_once("expanded: ").map_or(s, |(_, e)| e.trim_end_matches(')')).split_whitespace().next().unwrap_or("1408").to_string()
}

/// One event line: (timestamp s, cpu, event name, the rest).
fn parse_line(l: &str) -> Option<(f64, usize, &str, &str)> {
    // "  comm-pid  [001] d..2. 12345.678901: sched_switch: prev_comm=..."
    let (head, rest) = l.split_once(": ")?;
    let (name, fields) = rest.split_once(": ")?;
    let ts: f64 = head.rsplit(' ').next()?.parse().ok()?;
    let cpu: usize = head.split_once('[')?.1.split_once(']')?.0.parse().ok()?;
    Some((ts, cpu, name, fields))
}

/// The value of `key=` in a trace event's fields (comm values may hold spaces: a value ends
/// where the next known key begins).
fn field<'a>(fields: &'a str, key: &str, next: Option<&str>) -> Option<&'a str> {
    let start = fields.find(&format!("{key}="))? + key.len() + 1;
    let tail = &fields[start..];
    let end = match next {
        Some(n) => tail.find(&format!(" {n}=")).unwrap_or(tail.len()),
        None => tail.find(' ').unwrap_or(tail.len()),
    };
    Some(&tail[..end])
}

/// One wakeup of the watched task.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Wakeup {
    /// From `sched_waking` to being switched in, µs.
    pub wait_us: f64,
    /// The command running on the target CPU when it woke (`swapper/N`: idle).
    pub running: String,
}

/// Every wakeup of `pid` in a trace, in order.
pub fn wakeups_of(trace: &str, pid: u32) -> Vec<Wakeup> {
    let mut current: HashMap<usize, String> = HashMap::new();
    let mut pending: Option<(f64, String)> = None;
    let mut out = vec![];
    let pid_s = pid.to_string();
    for l in trace.lines() {
        let Some((ts, cpu, name, f)) = parse_line(l) else { continue };
        match name {
            "sched_switch" => {
                let next_pid = field(f, "next_pid", None);
                if next_pid == Some(pid_s.as_str()) {
                    if let Some((t0, running)) = pending.take() {
                        out.push(Wakeup { wait_us: (ts - t0) * 1e6, running });
                    }
                }
                if let Some(c) = field(f, "next_comm", Some("next_pid")) {
                    current.insert(cpu, c.to_string());
                }
            }
            "sched_waking" if field(f, "pid", None) == Some(pid_s.as_str()) => {
                let target = field(f, "target_cpu", None).and_then(|c| c.parse::<usize>().ok()).unwrap_or(cpu);
                pending = Some((ts, current.get(&target).cloned().unwrap_or_else(|| "?".into())));
            }
            _ => {}
        }
    }
    out
}

/// Wakeups later than `late_us`, by what was running when they woke, most first:
/// (command with trailing digits and `/N` cut, how many, median wait µs).
pub fn late_by_running(w: &[Wakeup], late_us: f64) -> Vec<(String, usize, f64)> {
    let mut by: HashMap<String, Vec<f64>> = HashMap::new();
    for x in w.iter().filter(|x| x.wait_us > late_us) {
        let key = if x.running.starts_with("swapper") {
            "idle CPU".to_string()
        } else {
            x.running.trim_end_matches(|c: char| c.is_ascii_digit() || c == '/').to_string()
        };
        by.entry(key).or_default().push(x.wait_us);
    }
    let mut v: Vec<_> = by
        .into_iter()
        .map(|(k, mut ws)| {
            ws.sort_by(f64::total_cmp);
            let n = ws.len();
            (k, n, ws[n / 2])
        })
        .collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRACE: &str = "\
# tracer: nop
           <idle>-0       [001] d..2. 100.000000: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=allot-lab next_pid=50 next_prio=120
            hog-50        [000] d..2. 100.001000: sched_waking: comm=probe pid=7 prio=120 target_cpu=001
            hog-50        [001] d..2. 100.004800: sched_switch: prev_comm=allot-lab prev_pid=50 prev_prio=120 prev_state=R ==> next_comm=probe next_pid=7 next_prio=120
           probe-7        [001] d..2. 100.005300: sched_switch: prev_comm=probe prev_pid=7 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
           <idle>-0       [001] d..2. 100.010000: sched_waking: comm=probe pid=7 prio=120 target_cpu=001
           <idle>-0       [001] d..2. 100.010020: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=probe next_pid=7 next_prio=120
";

    #[test]
    fn each_wakeup_has_its_wait_and_what_ran() {
        let w = wakeups_of(TRACE, 7);
        assert_eq!(w.len(), 2);
        assert!((w[0].wait_us - 3800.0).abs() < 0.5, "{w:?}");
        assert_eq!(w[0].running, "allot-lab");
        assert!((w[1].wait_us - 20.0).abs() < 0.5, "{w:?}");
        assert_eq!(w[1].running, "swapper/1");
        let late = late_by_running(&w, 300.0);
        assert_eq!(late, vec![("allot-lab".to_string(), 1, w[0].wait_us)]);
    }

    #[test]
    fn the_buffer_size_given_back_is_the_one_found() {
        assert_eq!(kib_of("1408\n"), "1408");
        assert_eq!(kib_of("7 (expanded: 1408)\n"), "1408");
    }

    #[test]
    fn lines_that_are_not_events_are_skipped() {
        assert!(wakeups_of("# tracer: nop\ngarbage: x\n", 7).is_empty());
    }
}
