//! allot's instruments: workloads, the latency probe, the starvation diagnosis and the
//! source papers' benchmarks. Each command is a clap `Args` struct plus a `run` function; the
//! `allot` binary wires them in.

pub mod args;
pub mod bench;
pub mod flood;
pub mod harness;
pub mod launcher;
pub mod policy;
pub mod probe;
pub mod report;
pub mod test_uids;
pub mod wakeups;
pub mod why;
pub mod workload;
