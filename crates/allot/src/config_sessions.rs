//! The config's `[sessions]` table: how the policy reaches processes of login sessions on
//! a systemd host (docs/systemd.md, "Login sessions"). `background = "task"` (the default)
//! makes a process a `background` rule matches SCHED_IDLE in its session's scope, where it
//! yields only to its own session; `"job"` moves it into a background job of allot's,
//! tied to its session (logout still ends it), where it yields to every other user.

use serde::{Deserialize, Serialize};

pub use allot_model::session::BackgroundIn;

/// `[sessions]`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Sessions {
    /// A `background` rule's session process: "task" (SCHED_IDLE in place) or "job".
    pub background: BackgroundIn,
}
