//! The simulator without the `allot` binary (which runs the same CLI as `allot-lab sim`):
//! `cargo run -p allot-sim --release --example sim -- run fig3-ratio`.
use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    sim: allot_sim::cli::SimArgs,
}

fn main() {
    let cli = Cli::parse();
    match allot_sim::cli::run(cli.sim) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("allot-lab sim: {e:#}");
            std::process::exit(2);
        }
    }
}
