//! What `allot top`'s job list is sorted by: the keys, their names for `--sort` and the
//! footer, and the letter that selects each. The columns (which name the key a column
//! sorts by) and the frame (which sorts the jobs by it) both read it; it reads neither.

/// What the job list is sorted by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    /// Usage rate.
    Usage,
    /// Entitlement.
    Entitled,
    /// Tickets.
    Tickets,
    /// Number of processes.
    Pids,
    /// Run-queue wait.
    Wait,
    /// Job id.
    Job,
}

impl SortKey {
    /// Every key, in the footer's order.
    pub const ALL: [SortKey; 6] = [SortKey::Usage, SortKey::Entitled, SortKey::Tickets, SortKey::Pids, SortKey::Wait, SortKey::Job];

    /// The key that selects it.
    pub fn key(self) -> char {
        match self {
            SortKey::Usage => 'u',
            SortKey::Entitled => 'e',
            SortKey::Tickets => 't',
            SortKey::Pids => 'p',
            SortKey::Wait => 'w',
            SortKey::Job => 'j',
        }
    }

    /// Its name (for `--sort` and the footer).
    pub fn name(self) -> &'static str {
        match self {
            SortKey::Usage => "usage",
            SortKey::Entitled => "entitled",
            SortKey::Tickets => "tickets",
            SortKey::Pids => "pids",
            SortKey::Wait => "wait",
            SortKey::Job => "job",
        }
    }

    /// Parses a name for `--sort`.
    pub fn parse(s: &str) -> anyhow::Result<SortKey> {
        SortKey::ALL.into_iter().find(|k| k.name() == s || s.len() == 1 && s.starts_with(k.key())).ok_or_else(|| {
            let names: Vec<&str> = SortKey::ALL.iter().map(|k| k.name()).collect();
            anyhow::anyhow!("--sort must be one of {}, got {s:?}", names.join(", "))
        })
    }

    /// Job ids read best first-to-last; everything else biggest first.
    pub fn ascending_first(self) -> bool {
        self == SortKey::Job
    }
}
