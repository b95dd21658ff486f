//! The state file: what must survive restarts and crashes that the cgroup tree cannot
//! hold: funding, and each job's base tickets and cap (the tree holds the *adjusted*
//! values while the dynamic policy runs, e.g. a held soft cap looks like a hard one). Written atomically: temp file, fsync, rename, fsync of the directory,
//! so a crash leaves either the old file or the new one, never a torn one.

use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

/// The persisted state.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct State {
    /// Funding by currency directory name (`user-1000`, `ci`).
    pub funding: BTreeMap<String, u32>,
    /// Base settings by job cgroup name relative to its currency (`user-1000/j7-u1000`).
    #[serde(default)]
    pub jobs: BTreeMap<String, JobState>,
    /// The next job id (ids are never reused).
    #[serde(default)]
    pub next_id: u64,
}

/// A job's base settings.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct JobState {
    /// Tickets as the user set them.
    pub tickets: u32,
    /// Cap as the user set it, e.g. "0.5" or "0.25!".
    #[serde(default)]
    pub cap: Option<String>,
}

/// Loads the state; a missing file is the empty state.
pub fn load(path: &Path) -> anyhow::Result<State> {
    match std::fs::read_to_string(path) {
        Ok(t) => serde_json::from_str(&t).with_context(|| format!("state file {} is corrupt; move it aside to start afresh", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(State::default()),
        Err(e) => Err(e).with_context(|| format!("cannot read state file {}", path.display())),
    }
}

/// Saves the state atomically.
pub fn save(path: &Path, state: &State) -> anyhow::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(".{}.tmp", path.file_name().and_then(|n| n.to_str()).unwrap_or("state")));
    let mut f = std::fs::File::create(&tmp).with_context(|| format!("create {}", tmp.display()))?;
    f.write_all(serde_json::to_string_pretty(state)?.as_bytes()).with_context(|| format!("write {}", tmp.display()))?;
    f.sync_all().with_context(|| format!("fsync {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("rename {} to {}", tmp.display(), path.display()))?;
    std::fs::File::open(dir).and_then(|d| d.sync_all()).with_context(|| format!("fsync {}", dir.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_replaces() {
        let dir = std::env::temp_dir().join(format!("allot-state-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("state.json");
        assert_eq!(load(&p).unwrap(), State::default());
        let mut s = State::default();
        s.funding.insert("user-1000".into(), 300);
        save(&p, &s).unwrap();
        s.funding.insert("ci".into(), 5);
        save(&p, &s).unwrap();
        assert_eq!(load(&p).unwrap(), s);
        assert!(!dir.join(".state.json.tmp").exists());
        std::fs::write(&p, "{not json").unwrap();
        assert!(load(&p).unwrap_err().to_string().contains("corrupt"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
