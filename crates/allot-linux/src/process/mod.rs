//! Processes and their scheduling: /proc (identity, ownership, scheduling statistics, a
//! process's own text read bounded), a task's waits on memory and I/O (`stall`), pidfds, sched_setattr(2), whether this kernel can run
//! a sched_ext scheduler, credentials and machine-wide CPU time, and users and groups
//! through glibc's NSS.

pub mod machine;
pub mod pidfd;
pub mod procfs;
pub mod sched;
pub mod sched_ext;
pub mod stall;
pub mod users;
