//! The library of the `allot` package: the wire protocol between the CLI and the daemon
//! and the client that speaks it. Both binaries (`allot`, the product, and `allot-lab`,
//! the simulator, benchmarks and load generators) and the integration tests import it (with
//! `memory_view`, the memory part of a currency in a reply, and `io_view`, the block devices), so
//! a reply is read as the types the daemon wrote, not by string keys.

pub mod client;
pub mod io_view;
pub mod memory_view;
pub mod proto;
pub mod scheduler_view;

#[cfg(test)]
mod proto_props;
