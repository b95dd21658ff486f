//! `allot-lab bench`: the source papers' experiments on this machine.
//!
//! - `policies` — Judin 2016 (tables 1–4): how much work the foreground keeps against
//!   background CPU and memory loopers under each policy, and under allot.
//! - `latency` — the starved-task tutorial: the probe alone, against hogs (the starvation factor), with
//!   nice −20, with SCHED_FIFO, and under allot.
//! - `shares` — Petrou et al. 1999 §5.1 (Fig 3, Fig 4, Tables 4–5): 3:2:1 tickets vs the nice
//!   values the paper found by trial and error; insulation of 1 vs 5 processes.
//!
//! Every experiment compares ratios within one run (the machine may be shared and
//! noisy), prints a table, and writes JSON (`--json`) and an SVG (`--svg FILE`).

pub mod common;
pub mod latency;
pub mod policies;
pub mod shares;

use clap::{Args, Subcommand};

/// `allot-lab bench`: the source papers' experiments, measured on this machine.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// The experiment.
    #[command(subcommand)]
    pub which: Which,
}

/// The experiments.
#[derive(Debug, Subcommand)]
pub enum Which {
    /// How much work a foreground job keeps against background CPU or memory loopers under
    /// each policy (default, batch, nice 10, nice 19, nice 19 + batch, idle, allot
    /// background, allot tickets 100:1), as in Judin's "Being a good CPU neighbor" (2016).
    // Boxed: the experiments' arguments are a few hundred bytes, and an enum is as large
    // as its largest variant (the binary's own bench enum holds this one).
    Policies(Box<policies::PoliciesArgs>),
    /// How late a periodic probe wakes: alone, against hogs, with nice -20, SCHED_FIFO and
    /// allot; starvation factors (as in the tutorial "Catch the scheduler starving a task").
    Latency(Box<latency::LatencyArgs>),
    /// Tickets 3:2:1 against nice 0/5/10, and one user's process against another's five
    /// (Petrou et al.'s lottery scheduling paper, 1999, §5.1).
    Shares(Box<shares::SharesArgs>),
}

/// `allot-lab bench ...`.
pub fn run(a: BenchArgs) -> anyhow::Result<i32> {
    match a.which {
        Which::Policies(p) => policies::run(*p),
        Which::Latency(l) => latency::run(*l),
        Which::Shares(s) => shares::run(*s),
    }
}
