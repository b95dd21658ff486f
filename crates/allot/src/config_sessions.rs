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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn task_is_the_default_job_is_read_and_a_typo_is_refused_at_its_line() {
        assert_eq!(Config::parse("t.toml".as_ref(), "").unwrap().sessions.background, BackgroundIn::Task);
        assert_eq!(Config::parse("t.toml".as_ref(), "[sessions]\nbackground = \"job\"\n").unwrap().sessions.background, BackgroundIn::Job);
        let e = Config::parse("t.toml".as_ref(), "[sessions]\nbackground = \"move\"\n").unwrap_err().to_string();
        assert!(e.contains("t.toml:2") && e.contains("move") && e.contains("task") && e.contains("job"), "{e}");
    }
}
