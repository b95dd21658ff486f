//! The *desired* state: what users and the admin asked for, and nothing else. Every job
//! (a user's default job and the jobs nice emulation splits off included), its tickets,
//! cap, background and focus, and every funding and currency cap set with `allot fund`. Persisted whole
//! and atomically after every change (state.rs); after a crash or restart this is the
//! only source of intent — the kernel tree holds adjusted values and is never read back
//! as a setting.

use allot_model::memory::MemCap;
use allot_model::{Cap, Tickets};
use std::collections::BTreeMap;
use std::fmt;

/// Where background jobs live, addressed under allot's root (see `allot_linux::cgroup::Tree`).
pub use allot_linux::cgroup::BACKGROUND;

/// A currency: a user's own, or a named one from the config.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CurrencyId {
    /// A user's currency (`user-UID`).
    User(u32),
    /// A named currency (`ci`).
    Named(String),
}

impl CurrencyId {
    /// Its directory name under allot's root.
    pub fn dir(&self) -> String {
        match self {
            CurrencyId::User(uid) => format!("user-{uid}"),
            CurrencyId::Named(n) => n.clone(),
        }
    }
    /// Reads a directory name back (any name that is not `user-UID` is a named currency).
    pub fn from_dir(d: &str) -> Self {
        match d.strip_prefix("user-").and_then(|u| u.parse().ok()) {
            Some(uid) => CurrencyId::User(uid),
            None => CurrencyId::Named(d.to_string()),
        }
    }
}

/// A job's identity: a user's default job (one per user), or a numbered job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum JobId {
    /// The automatic job of a user's processes that are in no other job.
    Default(u32),
    /// A job made by `run`, `set`, `focus`, `move` or nice emulation (ids are never reused).
    Numbered(u64),
}

/// Foreground or background: which of allot's two trees a job lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Class {
    /// Under allot's root.
    Foreground,
    /// Under `<root>-background`, which has cpu.idle = 1.
    Background,
}

/// One job as its user asked for it.
#[derive(Debug, Clone, PartialEq)]
pub struct JobSpec {
    /// Identity.
    pub id: JobId,
    /// The currency it draws on.
    pub currency: CurrencyId,
    /// The uid it belongs to.
    pub owner: u32,
    /// Tickets as set.
    pub tickets: Tickets,
    /// Cap as set (never soft 0: that is `background`).
    pub cap: Option<Cap>,
    /// Memory cap as set (`--mem 4G!` hard, `--mem 4G` soft; docs/memory.md).
    pub mem: Option<MemCap>,
    /// An OOM kill in it kills all of it (`--oom-group`; cgroup v2 `memory.oom.group`).
    pub oom_group: bool,
    /// Runs on idle CPU only.
    pub background: bool,
    /// Focused by its user.
    pub focus: bool,
    /// Made by this config rule (its processes share it).
    pub rule: Option<String>,
}

impl JobSpec {
    /// A job with default settings.
    pub fn new(id: JobId, currency: CurrencyId, owner: u32) -> Self {
        Self { id, currency, owner, tickets: Tickets::default(), cap: None, mem: None, oom_group: false, background: false, focus: false, rule: None }
    }
    /// Its class.
    pub fn class(&self) -> Class {
        if self.background {
            Class::Background
        } else {
            Class::Foreground
        }
    }
    /// Its directory name inside its currency.
    pub fn leaf(&self) -> String {
        match self.id {
            JobId::Default(_) => "default".into(),
            JobId::Numbered(n) => format!("j{n}-u{}", self.owner),
        }
    }
    /// Its cgroup relative to allot's root (`user-1000/j7-u1000`, `background/ci/j9-u1001`).
    pub fn rel(&self) -> String {
        rel_in(self.class(), &self.currency, &self.leaf())
    }
}

/// A currency's directory in a class.
pub fn currency_rel(class: Class, c: &CurrencyId) -> String {
    match class {
        Class::Foreground => c.dir(),
        Class::Background => format!("{BACKGROUND}/{}", c.dir()),
    }
}

/// A job directory in a class.
pub fn rel_in(class: Class, c: &CurrencyId, leaf: &str) -> String {
    format!("{}/{leaf}", currency_rel(class, c))
}

/// Reads a job directory back into (id, owner): `default` in `user-UID`, or `jN-uUID`.
pub fn parse_leaf(currency: &CurrencyId, leaf: &str) -> Option<(JobId, u32)> {
    if leaf == "default" {
        return match currency {
            CurrencyId::User(uid) => Some((JobId::Default(*uid), *uid)),
            CurrencyId::Named(_) => None,
        };
    }
    let (id, uid) = leaf.strip_prefix('j')?.split_once("-u")?;
    Some((JobId::Numbered(id.parse().ok()?), uid.parse().ok()?))
}

impl JobId {
    /// The job's id as people read it everywhere (`show`, `explain`, the audit trail, logs,
    /// errors): `3`, or `alice/default` for a user's default job (the uid where NSS has no
    /// name). The directory's leaf (`default`, `j3-u1000`) is the kernel's name, not this.
    pub fn shown(&self) -> String {
        match self {
            JobId::Default(uid) => format!("{}/default", super::trust::names::user_label(*uid)),
            JobId::Numbered(n) => n.to_string(),
        }
    }
}

/// A job in a sentence: "job " and its [`JobId::shown`] id (`job 3`, `job alice/default`).
impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "job {}", self.shown())
    }
}

/// Everything users and the admin asked for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Desired {
    /// Funding set with `allot fund` (currencies not here have the config's).
    pub funding: BTreeMap<CurrencyId, u32>,
    /// Currency caps set with `allot fund NAME --cap` (None: `--cap none`, no cap whatever
    /// the config says; currencies not here have the config's). Hard caps only.
    pub caps: BTreeMap<CurrencyId, Option<Cap>>,
    /// Every job.
    pub jobs: BTreeMap<JobId, JobSpec>,
    /// The next numbered job's id.
    pub next_id: u64,
}

impl Desired {
    /// Takes a fresh job id.
    pub fn take_id(&mut self) -> JobId {
        self.next_id = self.next_id.max(1);
        let id = JobId::Numbered(self.next_id);
        self.next_id += 1;
        id
    }
    /// The job whose directory is `rel`.
    pub fn by_rel(&self, rel: &str) -> Option<&JobSpec> {
        let leaf = rel.rsplit('/').next()?;
        let parent = rel.strip_suffix(leaf)?.trim_end_matches('/');
        let cdir = parent.rsplit('/').next()?;
        let (id, _) = parse_leaf(&CurrencyId::from_dir(cdir), leaf)?;
        self.jobs.get(&id).filter(|j| j.rel() == rel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_round_trip() {
        let mut j = JobSpec::new(JobId::Numbered(7), CurrencyId::User(1000), 1000);
        assert_eq!(j.rel(), "user-1000/j7-u1000");
        j.background = true;
        assert_eq!(j.rel(), "background/user-1000/j7-u1000");
        let d = JobSpec::new(JobId::Default(1001), CurrencyId::User(1001), 1001);
        assert_eq!(d.rel(), "user-1001/default");
        assert_eq!(parse_leaf(&CurrencyId::User(5), "default"), Some((JobId::Default(5), 5)));
        assert_eq!(parse_leaf(&CurrencyId::Named("ci".into()), "default"), None);
        assert_eq!(parse_leaf(&CurrencyId::Named("ci".into()), "j12-u1002"), Some((JobId::Numbered(12), 1002)));
        assert_eq!(parse_leaf(&CurrencyId::User(5), "jx-u1"), None);
        assert_eq!(CurrencyId::from_dir("user-12"), CurrencyId::User(12));
        assert_eq!(CurrencyId::from_dir("ci"), CurrencyId::Named("ci".into()));
        let mut des = Desired::default();
        des.jobs.insert(j.id, j.clone());
        des.jobs.insert(d.id, d.clone());
        assert_eq!(des.by_rel("background/user-1000/j7-u1000"), Some(&j));
        assert_eq!(des.by_rel("user-1000/j7-u1000"), None, "wrong class");
        assert_eq!(des.by_rel("user-1001/default"), Some(&d));
        assert_eq!(des.take_id(), JobId::Numbered(1));
        assert_eq!(des.take_id(), JobId::Numbered(2));
    }

    #[test]
    fn a_job_is_named_in_logs_and_errors_as_show_names_it() {
        // uid 0's name is root wherever the tests run; a uid without a name is its number.
        assert_eq!(JobId::Default(0).shown(), "root/default");
        assert_eq!(JobId::Default(0).to_string(), "job root/default");
        assert_eq!(JobId::Numbered(3).shown(), "3");
        assert_eq!(JobId::Numbered(3).to_string(), "job 3");
        let nobody = super::super::trust::names::user_label(4_000_000_000);
        assert_eq!(JobId::Default(4_000_000_000).to_string(), format!("job {nobody}/default"));
    }
}
