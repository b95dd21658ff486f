//! Placeholder: being written (issue 3).
use clap::Args;

/// (being written)
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Arguments.
    pub rest: Vec<String>,
}

/// Not built yet.
pub fn run(_a: BenchArgs) -> anyhow::Result<i32> {
    anyhow::bail!("allot bench is not built yet")
}
