//! `why`'s text: the verdict, the evidence, the machine and what would help.

use super::*;
use allot_report::{fit, for_terminal};

/// The diagnosis as text. The process's command line, the competitors' names and the
/// cgroup path are the processes' own words: they go through `for_terminal`, so a name
/// like "\x1b]0;pwned\x07" prints as `\e]0;pwned\a` and cannot reach the terminal.
pub fn render(d: &Diagnosis) -> String {
    let cmd = fit(&for_terminal(&d.cmdline), 60).into_owned();
    let mut s = format!(
        "allot why {} ({}): {} thread{}, {}, cgroup {}, sampled {:.1} s\n\n",
        d.pid,
        cmd,
        d.threads,
        if d.threads == 1 { "" } else { "s" },
        d.policy,
        for_terminal(d.cgroup.as_deref().unwrap_or("?")),
        d.window_s
    );
    s += &format!(
        "verdict: {}\n  {}\n\nevidence (the kernel's own accounting, /proc/{}/task/*/schedstat and sched):\n",
        d.verdict.words().to_uppercase(),
        d.reason,
        d.pid
    );
    s += &format!("  CPU time             {:>9.3} s   ({:.2} CPUs)\n", d.cpu_s, d.cpu_rate);
    s += &format!("  runnable, waiting    {:>9.3} s   ({:.0} ms per second)\n", d.wait_s, d.wait_ms_per_s);
    s += &format!(
        "  runtime ratio        {:>9}     cpu / (cpu + wait), seed 002 §5.2.3; 1.00 = never waits\n",
        d.runtime_ratio.map(|r| format!("{r:.2}")).unwrap_or("-".into())
    );
    s += &format!("  waits per second     {:>9.1}     mean wait {:.2} ms\n", d.waits_per_s, d.mean_wait_ms);
    s += &format!("  involuntary /s       {:>9.1}     (voluntary {:.1}/s)\n", d.involuntary_per_s, d.voluntary_per_s);
    match (d.worst_wait_ms, &d.worst_wait_source) {
        (Some(w), Some(src)) => s += &format!("  worst wait           {:>9.2} ms  {}\n", w, src),
        _ => s += "  worst wait                   -     this kernel keeps none (no CONFIG_SCHEDSTATS wait_max)\n",
    }
    s += &format!("  longest wait seen    {:>9.2} ms  (estimate from sampling every 5 ms)\n", d.longest_wait_estimate_ms);
    let m = &d.machine;
    s += &format!(
        "\nmachine: {} CPUs, {:.1} runnable tasks on average (equal share {:.2} CPUs each), PSI cpu some {}\n",
        m.ncpu,
        m.runnable_avg,
        d.equal_share,
        m.psi_some_pct.map(|p| format!("{p:.0}% of the window")).unwrap_or("n/a".into())
    );
    if !m.top.is_empty() {
        let t: Vec<String> = m.top.iter().map(|c| format!("{} ({}) {:.2} CPUs", c.pid, for_terminal(&c.comm), c.cpus)).collect();
        s += &format!("busiest other processes: {}\n", t.join(", "));
    }
    s += "\nwhat would help:\n";
    for h in &d.help {
        s += &format!("  {h}\n");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn diagnosis(cmdline: &str, comm: &str, cgroup: &str) -> Diagnosis {
        Diagnosis {
            pid: 42,
            cmdline: cmdline.into(),
            threads: 1,
            policy: "SCHED_OTHER nice 0".into(),
            cgroup: Some(cgroup.into()),
            window_s: 3.0,
            cpu_s: 1.0,
            wait_s: 0.5,
            cpu_rate: 0.33,
            wait_ms_per_s: 166.0,
            runtime_ratio: Some(0.67),
            busiest_runnable: 1.0,
            waits_per_s: 10.0,
            mean_wait_ms: 16.6,
            involuntary_per_s: 10.0,
            voluntary_per_s: 0.0,
            worst_wait_ms: None,
            worst_wait_source: None,
            longest_wait_estimate_ms: 20.0,
            equal_share: 0.5,
            machine: MachineContext {
                ncpu: 2,
                runnable_avg: 4.0,
                psi_some_pct: None,
                psi_some_avg10: None,
                top: vec![Competitor { pid: 7, comm: comm.into(), cpus: 1.0 }],
            },
            verdict: Verdict::Starved,
            reason: "r".into(),
            help: vec![],
        }
    }

    #[test]
    fn a_process_cannot_write_to_the_terminal_through_why() {
        let s = render(&diagnosis("evil \x1b]0;pwned\x07 \x1b[2J", "\u{202e}gnp.exe", "/allot/\x1b[H"));
        assert!(!s.contains('\x1b') && !s.contains('\x07') && !s.contains('\u{202e}'), "{s}");
        assert!(s.contains("evil \\e]0;pwned\\a \\e[2J") && s.contains("\\u{202e}gnp.exe") && s.contains("/allot/\\e[H"), "{s}");
    }

    #[test]
    fn long_command_lines_are_cut_with_an_ellipsis() {
        let s = render(&diagnosis(&"x".repeat(100), "c", "/"));
        assert!(s.contains(&format!("({}…)", "x".repeat(59))), "{s}");
    }
}
