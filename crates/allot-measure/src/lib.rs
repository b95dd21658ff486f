//! allot's instruments: workloads, the latency probe, the starvation diagnosis and the
//! seeds' benchmarks. Each command is a clap `Args` struct plus a `run` function; the
//! `allot` binary wires them in.

pub mod workload;
