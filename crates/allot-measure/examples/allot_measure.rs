//! A stand-alone driver for allot-measure's commands, with the same subcommand names as
//! the `allot` binary (probe, why, bench, workload), for developing the instruments
//! without the daemon: `cargo run --release -p allot-measure --example allot_measure -- probe`.
//! The allot variants of the benchmarks need the real `allot` binary (`--exe`).
use clap::{Parser, Subcommand};

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    Probe(allot_measure::probe::ProbeArgs),
    Why(allot_measure::why::WhyArgs),
    Bench(allot_measure::bench::BenchArgs),
    Workload(allot_measure::workload::WorkloadArgs),
}

fn main() {
    let r = match Cli::parse().cmd {
        Cmd::Probe(a) => allot_measure::probe::run(a),
        Cmd::Why(a) => allot_measure::why::run(a, &mut |_| allot_measure::why::Managed::NotAsked),
        Cmd::Bench(a) => allot_measure::bench::run(a),
        Cmd::Workload(a) => allot_measure::workload::run(a),
    };
    match r {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("allot: {e:#}");
            std::process::exit(1);
        }
    }
}
