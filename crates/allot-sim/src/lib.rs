//! allot-sim: a deterministic discrete-event simulator of the source papers' schedulers
//! (lottery, stride, hybrid lottery, EBS, 4.4BSD, Linux 2.2, CFS, EEVDF) and the
//! papers' experiments as named scenarios. Same scenario and seed, same bytes out.
#![deny(missing_docs)]

pub mod bench;
pub mod cli;
pub mod engine;
pub mod fenwick;
pub mod live;
pub mod metrics;
pub mod report;
pub mod rng;
pub mod scenario;
pub mod scenario_file;
pub mod sched;
pub mod svg;
pub mod time;
pub mod workload;

pub use engine::{RunResult, Sim};
pub use sched::SchedSpec;
pub use workload::{Behaviour, TaskSpec, Workload};
