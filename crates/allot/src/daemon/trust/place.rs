//! Where a process is, as allot sees it: a leaf that placement and sessions name without
//! importing trust.rs (whose impl Daemon imports the core).

use super::super::registry::JobId;

/// Where a process is, as far as allot is concerned.
#[derive(Debug, Clone, PartialEq)]
pub enum Place {
    /// In one of allot's jobs.
    Job(JobId),
    /// Outside allot, where allot may place from (the root cgroup, or an admin-listed source).
    Source(String),
    /// Inside allot's tree but in no job (a stray, e.g. written there by hand).
    Stray(String),
    /// In a login session's scope on a systemd host (logind's): its user's to move with a
    /// request (systemd moves it), never placed automatically.
    Session {
        /// The session's user.
        uid: u32,
        /// Its scope, e.g. `session-3.scope`.
        scope: String,
        /// Its cgroup path.
        path: String,
    },
    /// In a cgroup another manager owns (a service, a container, a session, a batch job).
    Foreign(String),
}
