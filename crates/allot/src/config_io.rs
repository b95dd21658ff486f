//! The config's `[io]` table: I/O by share (docs/memory.md, "I/O by share"). `by_share =
//! true` (the default) writes each currency's funding and its jobs' tickets as I/O weights
//! where the kernel has a file for them, and the smallest weight for the background;
//! `false` leaves I/O to the kernel: nothing is written, and a weight allot wrote is given
//! back (the kernel's default, or systemd's for a slice).

use serde::{Deserialize, Serialize};

/// `[io]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct IoConfig {
    /// Funding as I/O weight (true), or I/O left to the kernel (false).
    pub by_share: bool,
}

impl Default for IoConfig {
    /// On: a weight changes nothing on a device that ignores weights.
    fn default() -> Self {
        Self { by_share: true }
    }
}
