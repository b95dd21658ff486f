//! `allot-lab sim`: list the built-in scenarios, run one (or a scenario file), benchmark
//! the schedulers. The binary wires `SimArgs` as its `sim` subcommand.

use std::path::PathBuf;

use anyhow::Context;

use crate::bench;
use crate::live;
use crate::report;
use crate::scenario::{self, Scenario};
use crate::scenario_file;
use crate::sched::{SchedSpec, NAMES};
use crate::svg;

/// Simulate the source papers' schedulers and reproduce their published results.
#[derive(clap::Args, Debug)]
pub struct SimArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: SimCommand,
}

/// `allot-lab sim` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum SimCommand {
    /// List the built-in scenarios and the schedulers.
    List {
        /// Write JSON to stdout.
        #[arg(long)]
        json: bool,
    },
    /// Run a scenario: a built-in name (see `allot-lab sim list`) or a path to a .toml file.
    Run {
        /// Built-in scenario name or scenario file path.
        scenario: String,
        /// Run every workload of the scenario under this scheduler instead of the
        /// scenario's own (e.g. lottery, cfs, hybrid:boost=off). Reproduction rows are
        /// only printed for the scenario's own schedulers.
        #[arg(long, short)]
        scheduler: Option<String>,
        /// Random seed (same seed, same bytes out).
        #[arg(long)]
        seed: Option<u64>,
        /// Write JSON to stdout instead of tables.
        #[arg(long)]
        json: bool,
        /// Also write an SVG plot (progress over time, or latency) to FILE.
        #[arg(long, value_name = "FILE")]
        svg: Option<PathBuf>,
    },
    /// Measure scheduling decisions per second with 10, 100, 1000 and 10000 runnable
    /// tasks, for every scheduler.
    Bench {
        /// Assert the scaling claims (e.g. lottery's per-decision cost grows
        /// sub-linearly), comparing ratios within this run, never absolute times.
        /// Exit code 1 if one fails.
        #[arg(long)]
        check: bool,
        /// Write JSON to stdout instead of a table.
        #[arg(long)]
        json: bool,
        /// Runnable-task counts to measure (comma separated).
        #[arg(long, value_delimiter = ',', default_values_t = vec![10usize, 100, 1000, 10000])]
        sizes: Vec<usize>,
        /// Only these schedulers (comma separated; default all).
        #[arg(long, value_delimiter = ',')]
        schedulers: Vec<String>,
    },
    /// A scenario as a live run under allot's sched_ext scheduler: without --compare,
    /// print the plan (one job per task, its tickets, currency and workload) that
    /// tests/vm/scx/sim.sh runs; with --compare, set the live run's readings beside the
    /// simulator's run of the same workload and exit 1 where they disagree (shares
    /// within 0.02, or the same ordering of dispatch latencies). Scenarios:
    /// fig3-ratio, table5-insulation, table1-bimodal.
    Live {
        /// Built-in scenario name.
        scenario: String,
        /// The live run's schedstat readings (lines RUN TASK mark SECS RUN_NS DELAY_NS
        /// TIMESLICES).
        #[arg(long, value_name = "FILE")]
        compare: Option<PathBuf>,
    },
}

/// Loads a scenario by built-in name or file path.
pub fn load(name: &str) -> anyhow::Result<Scenario> {
    if let Some(s) = scenario::builtin(name) {
        return Ok(s);
    }
    let looks_like_path = name.ends_with(".toml") || name.contains('/') || std::path::Path::new(name).exists();
    if looks_like_path {
        return Ok(scenario_file::load(std::path::Path::new(name))?);
    }
    let names: Vec<String> = scenario::builtin_names().into_iter().map(|(n, _)| n).collect();
    anyhow::bail!("unknown scenario {name:?}: not a built-in ({}) nor a .toml file", names.join(", "))
}

/// Runs `allot-lab sim`; returns the process exit code.
pub fn run(args: SimArgs) -> anyhow::Result<i32> {
    match args.command {
        SimCommand::List { json } => {
            let scen = scenario::builtin_names();
            if json {
                let v = serde_json::json!({
                    "scenarios": scen.iter().map(|(n, t)| serde_json::json!({"name": n, "title": t})).collect::<Vec<_>>(),
                    "schedulers": NAMES.iter().map(|(n, h)| serde_json::json!({"name": n, "about": h})).collect::<Vec<_>>(),
                });
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                println!("built-in scenarios (allot-lab sim run NAME):");
                let w = scen.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
                for (n, t) in &scen {
                    println!("  {n:w$}  {t}");
                }
                println!("\nschedulers (--scheduler NAME):");
                for (n, h) in NAMES {
                    println!("  {n:8}  {h}");
                }
            }
            Ok(0)
        }
        SimCommand::Run { scenario, scheduler, seed, json, svg } => {
            let mut s = load(&scenario)?;
            if let Some(name) = scheduler {
                let spec = SchedSpec::parse(&name).map_err(anyhow::Error::msg).context("--scheduler")?;
                s = s.with_scheduler(&spec);
            }
            let seed = seed.unwrap_or(s.seed);
            let results = s.run(seed);
            let rep = report::build(&s, seed, &results);
            if let Some(path) = svg {
                std::fs::write(&path, svg::render(&s, &results)).with_context(|| format!("writing SVG to {}", path.display()))?;
            }
            if json {
                println!("{}", serde_json::to_string_pretty(&rep)?);
            } else {
                print!("{}", report::text(&rep));
            }
            let failed = rep.reproduction.iter().any(|r| r.pass == Some(false));
            Ok(if failed { 1 } else { 0 })
        }
        SimCommand::Live { scenario, compare } => {
            let plan = live::plan(&scenario).map_err(anyhow::Error::msg)?;
            let Some(path) = compare else {
                print!("{}", live::text(&plan));
                return Ok(0);
            };
            let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
            let readings = live::compare::parse(&text).map_err(anyhow::Error::msg).with_context(|| format!("in {}", path.display()))?;
            let out = live::compare::compare(&plan, &readings).map_err(anyhow::Error::msg)?;
            print!("{}", out.text);
            Ok(if out.pass { 0 } else { 1 })
        }
        SimCommand::Bench { check, json, sizes, schedulers } => {
            let specs = if schedulers.is_empty() {
                NAMES.iter().map(|(n, _)| SchedSpec::named(n)).collect()
            } else {
                schedulers
                    .iter()
                    .map(|s| SchedSpec::parse(s).map_err(anyhow::Error::msg))
                    .collect::<anyhow::Result<Vec<_>>>()
                    .context("--schedulers")?
            };
            let res = bench::run(&specs, &sizes);
            if json {
                println!("{}", serde_json::to_string_pretty(&res)?);
            } else {
                print!("{}", bench::text(&res));
            }
            if check {
                let failures = bench::check(&res);
                for f in &failures {
                    eprintln!("bench check failed: {f}");
                }
                if !failures.is_empty() {
                    return Ok(1);
                }
                if !json {
                    println!("bench checks passed");
                }
            }
            Ok(0)
        }
    }
}
