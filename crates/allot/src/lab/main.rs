//! `allot-lab`: the lab beside the product. The simulator of the source papers'
//! schedulers, the benchmarks, `selftest`, and the load generators they and the tests
//! start (`workload`, `flood`, `launcher`). None of it is installed by the packages: the
//! installed `allot` is the CLI and the daemon only.
//!
//! Any other command is the product's: `allot-lab run ...` runs `allot run ...` from the
//! same directory (or `$ALLOT_BIN`), by exec, keeping the pid. So the benchmarks and tests
//! start their private daemons and jobs through one program, and every job's command can
//! be one of the lab's load generators.

mod daemon_bench;
mod latency_spread;
mod memory_bench;
mod memory_bench_sd;
mod memory_chart;
mod overhead_bench;
mod overhead_workload;
mod policy_bench;
mod probe_arms;
mod selftest;

use allot::{client, proto};
use clap::{Parser, Subcommand};
use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;

/// The lab of allot: the source papers' schedulers simulated, benchmarks, selftest, and
/// load generators. Any other command is passed to `allot` (the product): the one in this
/// program's directory, or $ALLOT_BIN.
#[derive(Debug, Parser)]
#[command(name = "allot-lab", version, propagate_version = true, max_term_width = 100)]
struct Cli {
    /// Print JSON instead of a table (for scripts).
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Benchmarks on this machine: the source papers' experiments, the daemon's cost, the
    /// dynamic policy.
    Bench {
        #[command(subcommand)]
        which: BenchCmd,
    },
    /// Simulate the source papers' schedulers exactly (lottery, stride, hybrid, EBS, 4.4BSD,
    /// Linux 2.2, CFS, EEVDF) and reproduce their published results.
    Sim(allot_sim::cli::SimArgs),
    /// Check enforcement on this kernel with a private daemon (root).
    Selftest(selftest::SelftestArgs),
    /// Built-in load generators (for tests and benchmarks).
    Workload(allot_measure::workload::WorkloadArgs),
    /// A hostile client that floods the daemon (for tests).
    Flood(allot_measure::flood::FloodArgs),
    /// Starts logins for the benchmarks, one fork each, from where it sits.
    #[command(hide = true)]
    Launcher,
}

#[derive(Debug, Subcommand)]
enum BenchCmd {
    #[command(flatten)]
    Seeds(allot_measure::bench::Which),
    /// The daemon at scale: its cost at rest with 100..10,000 processes of 1..100 users,
    /// placement latency of new logins, a fork storm.
    Daemon(daemon_bench::DaemonBenchArgs),
    /// The dynamic policy: latency boost, agility, soft cap, nice, fork, gaming.
    Policy(policy_bench::PolicyBenchArgs),
    /// A real workload's throughput inside an allot job against the same outside allot.
    Overhead(overhead_bench::OverheadBenchArgs),
    /// Memory by share: a user's working set against another's growing hog, the kernel
    /// alone, a static per-user limit and allot (on a systemd host also systemd-oomd and
    /// earlyoom).
    Memory(memory_bench::MemoryBenchArgs),
}

/// The lab's own commands; every other word is the product's.
const LAB: &[&str] = &["bench", "sim", "selftest", "workload", "flood", "launcher", "help"];

/// The first word of `args` that is not a global option (`--socket S`, `--json`).
fn command_word(args: &[OsString]) -> Option<&OsString> {
    let mut i = 0;
    while i < args.len() {
        let a = args[i].to_string_lossy();
        match a.as_ref() {
            "--socket" => i += 2,
            "--json" => i += 1,
            a if a.starts_with("--socket=") => i += 1,
            _ => return Some(&args[i]),
        }
    }
    None
}

/// The product binary: `$ALLOT_BIN`, else `allot` in this program's directory.
fn product() -> anyhow::Result<PathBuf> {
    if let Some(p) = std::env::var_os("ALLOT_BIN") {
        return Ok(p.into());
    }
    let me = std::env::current_exe()?;
    let p = me.with_file_name("allot");
    anyhow::ensure!(
        p.is_file(),
        "allot-lab passes product commands to the allot binary, and {} does not exist; build it (cargo build -p allot) or name it in ALLOT_BIN",
        p.display()
    );
    Ok(p)
}

fn main() {
    // SAFETY: restoring the default disposition of one signal (output piped into `head`).
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let word = command_word(&args).map(|w| w.to_string_lossy().into_owned());
    if let Some(w) = word.filter(|w| !w.starts_with('-') && !LAB.contains(&w.as_str())) {
        let err = match product() {
            Ok(p) => anyhow::Error::from(std::process::Command::new(&p).args(&args).exec()).context(format!("run {} {w}", p.display())),
            Err(e) => e,
        };
        eprintln!("allot-lab: {}", allot_report::for_terminal(&format!("{err:#}")));
        std::process::exit(1);
    }
    let cli = Cli::parse();
    let code = match real_main(cli) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("allot-lab: {}", allot_report::for_terminal(&format!("{e:#}")));
            1
        }
    };
    std::process::exit(code);
}

fn real_main(cli: Cli) -> anyhow::Result<i32> {
    let json = cli.json;
    match cli.command {
        Command::Bench { which: BenchCmd::Seeds(w) } => allot_measure::bench::run(allot_measure::bench::BenchArgs { which: w }),
        Command::Bench { which: BenchCmd::Daemon(a) } => daemon_bench::run(a, json),
        Command::Bench { which: BenchCmd::Policy(a) } => policy_bench::run(a, json),
        Command::Bench { which: BenchCmd::Overhead(a) } => overhead_bench::run(a, json),
        // A systemd host with cgroup v2 has the five-arm bench (memory_bench_sd.rs), after the
        // same root check; cgroup v1 the raw tree's.
        Command::Bench { which: BenchCmd::Memory(a) } if a.files.replot.is_some() => a.files.replot(),
        Command::Bench { which: BenchCmd::Memory(a) } if memory_bench_sd::is_systemd_v2() => {
            memory_bench::require_root()?;
            memory_bench_sd::run(&a, json)
        }
        Command::Bench { which: BenchCmd::Memory(a) } => memory_bench::run(a, json),
        Command::Workload(a) => allot_measure::workload::run(a),
        Command::Flood(a) => allot_measure::flood::run(a),
        Command::Launcher => allot_measure::launcher::serve(),
        Command::Sim(a) => allot_sim::cli::run(a),
        Command::Selftest(a) => selftest::run(a, json),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_command_word_skips_global_options() {
        let w = |v: &[&str]| command_word(&os(v)).map(|w| w.to_string_lossy().into_owned());
        assert_eq!(w(&["--socket", "/s", "--json", "run", "--", "x"]).as_deref(), Some("run"));
        assert_eq!(w(&["--socket=/s", "workload", "cpu"]).as_deref(), Some("workload"));
        assert_eq!(w(&["--json"]), None);
        assert_eq!(w(&["--help"]).as_deref(), Some("--help"));
    }

    #[test]
    fn the_lab_is_every_command_it_parses() {
        use clap::CommandFactory;
        let mut names: Vec<String> = Cli::command().get_subcommands().map(|c| c.get_name().to_string()).collect();
        names.push("help".into());
        names.sort();
        let mut lab: Vec<String> = LAB.iter().map(|s| s.to_string()).collect();
        lab.sort();
        assert_eq!(names, lab, "a lab command missing from LAB would be passed to the product");
    }
}
