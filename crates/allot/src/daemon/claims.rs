//! One placer per source: two daemons placing from the same cgroup (a second `allot
//! daemon` with another root, a test daemon beside the system's) would race for every new
//! process there, each moving it into its own tree. Each source is claimed with an
//! exclusive flock(2) on a file named after it in /run/allot; a daemon that cannot take
//! a source's claim does not place from it, and says so in `status` and the log. The
//! kernel drops a claim when its holder dies, so a crash never leaves a source unplaced.

use super::placement::state::Placement;
use std::collections::HashMap;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::PathBuf;

/// Where the claims live.
const DIR: &str = "/run/allot";

/// The claims this daemon holds, by source.
#[derive(Debug, Default)]
pub struct Claims {
    held: HashMap<String, File>,
}

/// The claim file of a source: its path with `%` and `/` escaped, so two sources never
/// share one.
fn file_of(source: &str) -> PathBuf {
    let name: String = source
        .chars()
        .map(|c| match c {
            '%' => "%25".to_string(),
            '/' => "%2F".to_string(),
            c => c.to_string(),
        })
        .collect();
    PathBuf::from(DIR).join(format!("placement-{name}.lock"))
}

impl Claims {
    /// Claims every source `p` places from (keeping those already held, letting go of
    /// those no longer configured); a source another daemon holds is forgone in `p`.
    pub fn apply(&mut self, p: &mut Placement) {
        let want: Vec<String> = p.sources().to_vec();
        self.held.retain(|s, _| want.contains(s));
        let _ = std::fs::create_dir_all(DIR);
        for s in want {
            if self.held.contains_key(&s) {
                continue;
            }
            match take(&file_of(&s)) {
                Ok(Some(f)) => {
                    self.held.insert(s, f);
                }
                Ok(None) => {
                    log::error!("another allot daemon places processes from cgroup {s}; this one leaves them to it (placement.from)");
                    p.forgo(&s);
                }
                // No claim can be made (no /run): place as before, said once.
                Err(e) => log::warn!("cannot claim placement from cgroup {s} ({e}); two daemons placing from it would race"),
            }
        }
    }
}

/// An exclusive, non-blocking flock on `path`: Some when taken, None when held elsewhere.
fn take(path: &PathBuf) -> std::io::Result<Option<File>> {
    let f = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(path)?;
    // SAFETY: flock on a descriptor this function owns.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(Some(f));
    }
    let e = std::io::Error::last_os_error();
    if e.kind() == std::io::ErrorKind::WouldBlock {
        Ok(None)
    } else {
        Err(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_never_share_a_claim_file() {
        assert_ne!(file_of("/a/b"), file_of("/a%2Fb"));
        assert_eq!(file_of("/"), PathBuf::from("/run/allot/placement-%2F.lock"));
    }
}
