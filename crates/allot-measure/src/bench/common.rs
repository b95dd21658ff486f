//! What the benchmarks share: starting workloads under a policy (plain processes) or as
//! allot jobs (through a private daemon), killing exactly what they started, and the
//! options every benchmark takes.

use crate::harness::PrivateDaemon;
use crate::policy::Policy;
use anyhow::{bail, Context};
use clap::Args;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Options every benchmark takes.
#[derive(Debug, Clone, Args)]
pub struct Common {
    /// Print JSON instead of the tables.
    #[arg(long)]
    pub json: bool,
    /// Write an SVG chart to this file.
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// Also write the JSON to this file.
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Check the expected shape of the result; exit 1 if it does not hold.
    #[arg(long)]
    pub check: bool,
    /// Skip the variants that need allot itself (a private allot daemon; root).
    #[arg(long)]
    pub no_allot: bool,
    /// Measure nothing: re-draw the chart (--svg FILE) from a JSON report this
    /// benchmark wrote with --output.
    #[arg(long, value_name = "JSON", requires = "svg")]
    pub replot: Option<PathBuf>,
    /// The allot binary to run workloads and jobs with (default: this program).
    #[arg(long, hide = true)]
    pub exe: Option<PathBuf>,
}

impl Common {
    /// The binary that has the `workload` and `probe` subcommands (and `daemon`, `run`).
    pub fn exe(&self) -> anyhow::Result<PathBuf> {
        match &self.exe {
            Some(p) => Ok(p.clone()),
            None => std::env::current_exe().context("find this program (for its workload subcommand)"),
        }
    }

    /// Writes the JSON and the SVG where asked; prints the JSON or the text.
    pub fn emit(&self, json: &serde_json::Value, text: &str, svg: Option<String>) -> anyhow::Result<()> {
        let pretty = serde_json::to_string_pretty(json)?;
        if let Some(p) = &self.output {
            crate::report::write_file(p, &(pretty.clone() + "\n"))?;
        }
        if let (Some(p), Some(svg)) = (&self.svg, svg) {
            crate::report::write_file(p, &svg)?;
        }
        if self.json {
            println!("{pretty}");
        } else {
            print!("{text}");
        }
        Ok(())
    }
}

pub use crate::harness::Kids;

/// `--replot`: reads the benchmark `bench`'s JSON report at `json` and writes the chart
/// `svg` draws from it to `--svg`.
pub fn replot(c: &Common, json: &Path, bench: &str, svg: fn(&serde_json::Value) -> String) -> anyhow::Result<i32> {
    replot_to(json, c.svg.as_deref(), bench, svg)
}

/// `--replot` for a benchmark whose options are not [`Common`]: reads the benchmark
/// `bench`'s JSON report at `json` and writes the chart `svg` draws from it to `out`.
pub fn replot_to(json: &Path, out: Option<&Path>, bench: &str, svg: fn(&serde_json::Value) -> String) -> anyhow::Result<i32> {
    let text = std::fs::read_to_string(json).with_context(|| format!("read {}", json.display()))?;
    let v: serde_json::Value = serde_json::from_str(&text).with_context(|| format!("{} is not JSON", json.display()))?;
    if v["bench"] != bench {
        bail!("{} is a report of bench {}, not of bench {bench}", json.display(), v["bench"]);
    }
    let out = out.context("--replot needs --svg FILE to write the chart to")?;
    crate::report::write_file(out, &svg(&v))?;
    Ok(0)
}

/// Appends a benchmark's checks (what, passed) to its report; returns how many failed.
pub fn render_checks(text: &mut String, checks: &[(String, bool)]) -> usize {
    text.push_str("\nchecks:\n");
    for (what, ok) in checks {
        text.push_str(&format!("  {} {what}\n", if *ok { "PASS" } else { "FAIL" }));
    }
    checks.iter().filter(|(_, ok)| !ok).count()
}

/// Starts `exe ARGS` as a plain process under `policy`, pinned to `cpu` if given. The
/// policy and affinity are set between fork and exec, so every thread inherits them.
pub fn spawn(
    exe: &Path,
    args: &[String],
    policy: Policy,
    cpu: Option<usize>,
    user: Option<(u32, &crate::harness::Shelter)>,
) -> anyhow::Result<Child> {
    // A user's process starts in a shelter, so no allot daemon running on the machine
    // places it: "without allot" must mean without allot.
    let mut c = match user {
        Some((uid, shelter)) => shelter.command(exe, Some(uid)),
        None => Command::new(exe),
    };
    c.args(args).stdin(Stdio::null()).stdout(Stdio::null());
    let mut attr = policy.attr(0);
    attr.size = std::mem::size_of::<allot_linux::process::sched::SchedAttr>() as u32;
    // SAFETY: only raw syscalls (async-signal-safe) between fork and exec.
    unsafe {
        c.pre_exec(move || {
            if let Some(cpu) = cpu {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(cpu, &mut set);
                if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const _, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    c.spawn().with_context(|| format!("start {} {} under {policy}", exe.display(), args.join(" ")))
}

/// A private allot daemon for the benchmark variants that need allot, or why there is
/// none.
pub struct Allot {
    /// The daemon, when it started.
    pub daemon: Option<PrivateDaemon>,
    /// Why the allot variants are skipped, when they are.
    pub skipped: Option<String>,
}

/// The private daemon's config: no automatic placement (the benchmark places its own
/// processes with `allot run`), a quick tick.
pub const DAEMON_CONFIG: &str = "tick_ms = 250\nscan_ms = 200\n[users]\nauto_place = false\n";

impl Allot {
    /// Starts a private daemon unless told not to; a failure becomes a skip note.
    pub fn start(c: &Common, exe: &Path) -> Allot {
        if c.no_allot {
            return Allot { daemon: None, skipped: Some("--no-allot given".into()) };
        }
        // SAFETY: no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Allot { daemon: None, skipped: Some("the allot variants need root (a private daemon writes cgroups)".into()) };
        }
        match PrivateDaemon::start(exe, DAEMON_CONFIG) {
            Ok(d) => Allot { daemon: Some(d), skipped: None },
            Err(e) => Allot { daemon: None, skipped: Some(format!("could not start a private allot daemon with {}: {e:#}", exe.display())) },
        }
    }

    /// Starts `allot run RUN_ARGS -- exe ARGS` and waits until the command runs (so its
    /// pid is the job's process). Pins it first if asked.
    pub fn job(&mut self, run_args: &[&str], exe: &Path, args: &[String], uid: Option<u32>, cpu: Option<usize>) -> anyhow::Result<u32> {
        let d = self.daemon.as_mut().context("no allot daemon")?;
        let e = exe.display().to_string();
        let mut cmd: Vec<&str> = vec![e.as_str()];
        cmd.extend(args.iter().map(|s| s.as_str()));
        let pid = d.run_job(run_args, &cmd, uid)?;
        // `allot run` execs the command once the daemon has placed it: until then its
        // command line still holds `--socket`.
        let t0 = Instant::now();
        loop {
            let cl = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let st = allot_linux::process::procfs::stat(pid as i32).map(|s| s.state).unwrap_or('X');
            if st == 'Z' || st == 'X' {
                bail!(
                    "allot run {run_args:?} -- {} exited before its command started: {}",
                    args.join(" "),
                    d.log().lines().rev().take(5).collect::<Vec<_>>().join(" | ")
                );
            }
            if !cl.is_empty() && !String::from_utf8_lossy(&cl).contains("--socket") {
                break;
            }
            if t0.elapsed() > Duration::from_secs(10) {
                bail!("allot run {run_args:?} did not start its command within 10 s");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        if let Some(cpu) = cpu {
            // Threads started before this point would keep their affinity: the workloads
            // start theirs after parsing arguments, microseconds later, so pin every task.
            for t in allot_linux::process::procfs::tids(pid as i32).unwrap_or_default() {
                allot_linux::process::sched::set_affinity(t, &[cpu])?;
            }
        }
        Ok(pid)
    }

    /// Kills every job process this benchmark started through allot.
    pub fn kill_jobs(&mut self) {
        if let Some(d) = self.daemon.as_mut() {
            d.kill_jobs();
        }
    }
}

/// Waits for a process we did not necessarily spawn ourselves to exit (or become a
/// zombie), up to `limit`.
pub fn wait_gone(pid: u32, limit: Duration) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        match allot_linux::process::procfs::stat(pid as i32) {
            Ok(s) if s.state != 'Z' && s.state != 'X' => std::thread::sleep(Duration::from_millis(20)),
            _ => return true,
        }
    }
    false
}

/// Reads a JSON report a workload or probe wrote with `--output`, waiting up to `limit`
/// for it to appear.
pub fn read_report(path: &Path, limit: Duration) -> anyhow::Result<serde_json::Value> {
    let t0 = Instant::now();
    loop {
        if let Ok(s) = std::fs::read_to_string(path) {
            if let Ok(v) = serde_json::from_str(&s) {
                return Ok(v);
            }
        }
        if t0.elapsed() > limit {
            bail!("no report at {} after {:.0} s", path.display(), limit.as_secs_f64());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A private scratch directory for reports, removed on drop.
pub struct Scratch(pub PathBuf);

impl Scratch {
    /// Creates /tmp/allot-bench-PID-NAME.
    pub fn new(name: &str) -> anyhow::Result<Scratch> {
        let p = std::env::temp_dir().join(format!("allot-bench-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&p).with_context(|| format!("mkdir {}", p.display()))?;
        // Jobs may run as other users (bench shares): let them write their reports.
        let _ = std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o1777));
        Ok(Scratch(p))
    }
    /// A file inside.
    pub fn file(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Total CPU time of a process's threads, s, from their schedstat (0 if it is gone).
pub fn cpu_s(pid: u32) -> f64 {
    let pid = pid as i32;
    allot_linux::process::procfs::tids(pid)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|t| allot_linux::process::procfs::task_schedstat(pid, t).ok())
        .map(|s| s.run_ns as f64 / 1e9)
        .sum()
}

/// A one-paragraph description of this machine for reports.
pub fn machine() -> serde_json::Value {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("model name").map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())))
        .unwrap_or_default();
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer.
    unsafe { libc::uname(&mut u) };
    let rel = unsafe { std::ffi::CStr::from_ptr(u.release.as_ptr()) }.to_string_lossy().into_owned();
    serde_json::json!({
        "cpus": allot_linux::ncpu(),
        "model": model,
        "kernel": rel,
        "llc_bytes": allot_linux::process::procfs::llc_bytes(),
        "load_at_start": allot_linux::process::procfs::loadavg().ok().map(|l| l.avg1),
    })
}
