//! `why`'s text: the verdict, what allot says, the evidence, the machine and what would
//! help. Everything that may carry a process's, user's or currency's own words goes
//! through `for_terminal`.

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
    s += &format!("verdict: {}\n  {}\n", d.verdict.words().to_uppercase(), for_terminal(&d.reason));
    if d.verdict != d.kernel_verdict {
        s += &format!("  (the kernel's accounting alone: {}: {})\n", d.kernel_verdict.words(), for_terminal(&d.kernel_reason));
    }
    s += &allot_lines(d);
    s += &format!("\nevidence (the kernel's own accounting, /proc/{}/task/*/schedstat and sched):\n", d.pid);
    s += &format!("  CPU time             {:>9.3} s   ({:.2} CPUs)\n", d.cpu_s, d.cpu_rate);
    s += &format!("  runnable, waiting    {:>9.3} s   ({:.0} ms per second)\n", d.wait_s, d.wait_ms_per_s);
    s += &format!(
        "  runtime ratio        {:>9}     cpu / (cpu + wait), as Ross and Abel 2000; 1.00 = never waits\n",
        d.runtime_ratio.map(|r| format!("{r:.2}")).unwrap_or("-".into())
    );
    s += &format!("  waits per second     {:>9.1}     mean wait {:.2} ms\n", d.waits_per_s, d.mean_wait_ms);
    s += &format!("  involuntary /s       {:>9.1}     (voluntary {:.1}/s)\n", d.involuntary_per_s, d.voluntary_per_s);
    match (d.worst_wait_ms, &d.worst_wait_source) {
        (Some(w), Some(src)) => s += &format!("  worst wait           {:>9.2} ms  {}\n", w, src),
        _ => s += "  worst wait                   -     this kernel keeps none (no CONFIG_SCHEDSTATS wait_max)\n",
    }
    s += &format!("  longest wait seen    {:>9.2} ms  (estimate from sampling every 5 ms)\n", d.longest_wait_estimate_ms);
    if let Some(th) = d.throttled_s.filter(|t| *t > 0.0) {
        s += &format!("  throttled            {th:>9.3} s   its cgroup's CPU quota stopped it (cpu.stat)\n");
    }
    s += &stall_lines(d);
    let m = &d.machine;
    s += &format!("\nmachine: {}\n", machine_words(d));
    if !m.top.is_empty() {
        let t: Vec<String> = m.top.iter().map(|c| format!("{} ({}) {:.2} CPUs", c.pid, for_terminal(&c.comm), c.cpus)).collect();
        s += &format!("busiest other processes: {}\n", t.join(", "));
    }
    s += "\nwhat would help (what you may run):\n";
    if d.help.is_empty() {
        s += "  (nothing you may change)\n";
    }
    for h in &d.help {
        s += &format!("  {}\n", for_terminal(h));
    }
    if !d.ask.is_empty() {
        s += "who else could help:\n";
        for a in &d.ask {
            s += &format!("  {}\n", for_terminal(a));
        }
    }
    s
}

/// Memory and I/O: what the kernel gives per task and per cgroup, and who holds the
/// memory or moves the data where it stalls.
fn stall_lines(d: &Diagnosis) -> String {
    use allot_model::stall::bytes;
    let st = &d.stall;
    let f = &st.facts;
    let pct = |x: Option<f64>| x.map(|v| format!("{:.0}%", v * 100.0)).unwrap_or("n/a".into());
    let mut s = format!("\nmemory and I/O (/proc/{}/stat, io and task/*/wchan; its memory cgroup's memory.stat):\n", d.pid);
    let waits: Vec<String> = st.waits.iter().map(|(w, n)| format!("{w} ({n})")).collect();
    s += &format!(
        "  blocked (state D)    {:>8.0}%     of samples{}\n",
        f.blocked_share * 100.0,
        if waits.is_empty() { String::new() } else { format!(", waiting in {}", waits.join(", ")) }
    );
    if f.reclaim_share > 0.0 {
        s += &format!("  in memory reclaim    {:>8.0}%     of samples\n", f.reclaim_share * 100.0);
    }
    s += &format!("  major faults         {:>9.1}     per second\n", f.major_faults_per_s);
    match (&st.io_unreadable, f.read_per_s, f.disk_read_per_s, f.disk_write_per_s) {
        (Some(e), ..) => s += &format!("  I/O                          -     not readable here ({e})\n"),
        (None, Some(r), Some(dr), Some(dw)) => {
            s += &format!(
                "  read                 {:>9}/s   {} of it from disk{}\n",
                bytes(r),
                bytes(dr),
                if r > 0.0 { format!(" ({:.0}% missed the page cache)", (dr / r).min(1.0) * 100.0) } else { String::new() }
            );
            s += &format!("  written to disk      {:>9}/s\n", bytes(dw));
        }
        _ => {}
    }
    if let Some(dl) = f.io_delay_share {
        s += &format!("  block I/O delay      {:>8.0}%     of the window (delay accounting)\n", dl * 100.0);
    }
    if let Some(cg) = &st.memory_cgroup {
        let refaults = f.refaults_per_s.map(|r| format!("{r:.0} pages refaulted per second")).unwrap_or("no refault counter".into());
        s += &format!(
            "  memory cgroup        {cg}: {refaults}, memory pressure {}, I/O pressure {}\n",
            pct(f.cgroup_memory_pressure),
            pct(f.cgroup_io_pressure)
        );
    }
    match &st.domain {
        Some((rel, u, l)) => {
            s += &format!("  reclaimed first in   {rel}: {} of its limit {} ({})\n", bytes(*u as f64), bytes(*l as f64), pct(f.domain_full))
        }
        None => s += &format!("  reclaimed first in   the machine (no memory cgroup limit above it): {} in use\n", pct(f.domain_full)),
    }
    s += &format!("  machine pressure     memory {}, I/O {} of the window (PSI some)\n", pct(st.system_memory_pressure), pct(st.system_io_pressure));
    let top = |us: &[ProcUse], per_s: &str| -> String {
        us.iter()
            .take(3)
            .map(|u| {
                let charge = u.charge.as_ref().map(|c| format!("; its cgroup charged {}", bytes(c.1 as f64))).unwrap_or_default();
                format!("{} {}{per_s} ({}{charge})", u.pid, bytes(u.bytes), u.who)
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !st.memory_users.is_empty() {
        s += &format!("  most memory there    {}\n", top(&st.memory_users, ""));
    }
    if !st.io_users.is_empty() {
        s += &format!("  most disk I/O        {}\n", top(&st.io_users, "/s"));
    }
    for c in &st.shares {
        s += &format!("  currency {} uses {} of its memory share {}\n", c.currency, bytes(c.usage as f64), bytes(c.protection as f64));
    }
    s.lines().map(|l| for_terminal(l) + "\n").collect()
}

/// What allot says: the job and its numbers with `allot explain`'s reasons, or that allot
/// is not managing the process, and why.
fn allot_lines(d: &Diagnosis) -> String {
    let j = match &d.allot {
        Managed::NotAsked => return String::new(),
        Managed::NoDaemon { why } => return format!("\nallot: not managing this process: its daemon did not answer ({})\n", for_terminal(why)),
        Managed::NoJob => {
            return format!(
                "\nallot: not managing this process: it is in no allot job (cgroup {})\n",
                for_terminal(d.cgroup.as_deref().unwrap_or("?"))
            )
        }
        Managed::Job(j) => j,
    };
    let mut limits = vec![];
    if j.background {
        limits.push("background".to_string());
    }
    if let Some(c) = j.cap {
        limits.push(format!("cap {c}{}", if j.held { " (held now)" } else { "" }));
    }
    if let Some(q) = j.quota {
        limits.push(format!("quota {q:.2} CPUs now"));
    }
    if j.nice != 0 {
        limits.push(format!("nice {}{}", j.nice, if j.niced { " (emulated now)" } else { "" }));
    }
    let mut lines = vec![String::new()];
    lines.push(format!(
        "allot: job {} of {}, currency {} (funding {}), {} tickets: entitled to {:.2} CPUs, using {:.2} (recently {:.2}){}",
        j.job,
        j.owner_name,
        j.currency,
        j.funding,
        j.tickets,
        j.entitlement,
        j.usage,
        j.recent,
        if limits.is_empty() { String::new() } else { format!("; {}", limits.join(", ")) }
    ));
    if !j.rivals.is_empty() {
        let r: Vec<String> = j.rivals.iter().map(|r| format!("{} (funding {}, using {:.2})", r.currency, r.funding, r.usage)).collect();
        lines.push(format!(
            "  its currency's jobs are entitled to {:.2} CPUs and use {:.2}; other active currencies: {}",
            j.currency_entitlement,
            j.currency_usage,
            r.join(", ")
        ));
    }
    for r in j.explain.iter().filter(|r| r.on) {
        lines.push(format!("  allot explain: {}: {}", r.state, r.because));
    }
    // Names (users, currencies) and the daemon's words are escaped line by line.
    lines.iter().map(|l| for_terminal(l) + "\n").collect()
}

#[cfg(test)]
mod tests {
    use super::super::tests::diagnosis;
    use super::*;

    #[test]
    fn a_process_cannot_write_to_the_terminal_through_why() {
        let mut d = diagnosis("evil \x1b]0;pwned\x07 \x1b[2J", "\u{202e}gnp.exe", "/allot/\x1b[H");
        let mut j = super::super::allot::tests::job();
        (j.owner_name, j.currency, j.job) = ("\x1b[31muser".into(), "cur\x07".into(), "9\x1b[K".into());
        j.explain = vec![ReasonFact { state: "cap".into(), on: true, because: "hard cap\x1b[2J".into() }];
        d.allot = Managed::Job(Box::new(j));
        advise(&mut d);
        let s = render(&d);
        assert!(!s.contains('\x1b') && !s.contains('\x07') && !s.contains('\u{202e}'), "{s}");
        assert!(s.contains("evil \\e]0;pwned\\a \\e[2J") && s.contains("\\u{202e}gnp.exe") && s.contains("/allot/\\e[H"), "{s}");
        assert!(s.contains("\\e[31muser") && s.contains("hard cap\\e[2J"), "{s}");
        d.allot = Managed::NoDaemon { why: "no\x1b[2J".into() };
        assert!(!render(&d).contains('\x1b'));
    }

    #[test]
    fn long_command_lines_are_cut_with_an_ellipsis() {
        let s = render(&diagnosis(&"x".repeat(100), "c", "/"));
        assert!(s.contains(&format!("({}…)", "x".repeat(59))), "{s}");
    }
}
