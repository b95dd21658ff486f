//! The state file: the desired state (registry.rs), whole. Written atomically — temp file,
//! fsync, rename, fsync of the directory — so a crash leaves the old file or the new one,
//! never a torn one. A missing file is the empty state; an unreadable or corrupt one stops
//! the daemon with a clear message (it never guesses intent from the kernel).
//!
//! Format 2 (this version) holds every job. Format 1 (allot 0.1) held funding and the
//! settings of numbered jobs only, keyed `currency/jN-uUID`; it is read and upgraded.

use super::registry::{parse_leaf, CurrencyId, Desired, JobId, JobSpec};
use allot_model::memory::MemCap;
use allot_model::{Cap, Tickets};
use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

/// The state file's name in the state directory.
pub const FILE: &str = "state.json";

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileV2 {
    version: u32,
    next_id: u64,
    funding: BTreeMap<String, u32>,
    /// Currency caps ("4!", or "none"); absent in files written before caps existed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    caps: BTreeMap<String, String>,
    jobs: Vec<JobRecord>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct JobRecord {
    /// "default" or the job number.
    job: JobKey,
    currency: String,
    owner: u32,
    tickets: u32,
    #[serde(default)]
    cap: Option<String>,
    #[serde(default)]
    background: bool,
    #[serde(default)]
    focus: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rule: Option<String>,
    /// Its memory cap ("64M!" hard, "4G" soft); absent when none (so a file without one
    /// is read by an allot from before memory caps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mem: Option<String>,
    /// Its OOM group (`--oom-group`); absent when off.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    oom_group: bool,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(untagged)]
enum JobKey {
    Number(u64),
    Default(String),
}

#[derive(Debug, Deserialize)]
struct FileV1 {
    funding: BTreeMap<String, u32>,
    #[serde(default)]
    jobs: BTreeMap<String, V1Job>,
    #[serde(default)]
    next_id: u64,
}

#[derive(Debug, Deserialize)]
struct V1Job {
    tickets: u32,
    #[serde(default)]
    cap: Option<String>,
}

fn to_file(d: &Desired) -> FileV2 {
    FileV2 {
        version: 2,
        next_id: d.next_id,
        funding: d.funding.iter().map(|(c, f)| (c.dir(), *f)).collect(),
        caps: d.caps.iter().map(|(c, cap)| (c.dir(), cap.map_or("none".into(), |x| x.to_string()))).collect(),
        jobs: d
            .jobs
            .values()
            .map(|j| JobRecord {
                job: match j.id {
                    JobId::Default(_) => JobKey::Default("default".into()),
                    JobId::Numbered(n) => JobKey::Number(n),
                },
                currency: j.currency.dir(),
                owner: j.owner,
                tickets: j.tickets.get(),
                cap: j.cap.map(|c| c.to_string()),
                background: j.background,
                focus: j.focus,
                rule: j.rule.clone(),
                mem: j.mem.map(|m| m.to_string()),
                oom_group: j.oom_group,
            })
            .collect(),
    }
}

fn from_v2(f: FileV2, path: &Path) -> anyhow::Result<Desired> {
    let bad = |what: String| anyhow::anyhow!("state file {} has {what}; fix or move it aside to start afresh", path.display());
    let mut d = Desired { next_id: f.next_id, ..Default::default() };
    for (c, v) in f.funding {
        allot_model::Funding::new(v as i64).map_err(|e| bad(format!("funding of {c}: {e}")))?;
        d.funding.insert(CurrencyId::from_dir(&c), v);
    }
    for (c, v) in f.caps {
        let cap = if v == "none" { None } else { Some(Cap::parse_currency(&v).map_err(|e| bad(format!("cap of {c}: {e}")))?) };
        d.caps.insert(CurrencyId::from_dir(&c), cap);
    }
    for r in f.jobs {
        let currency = CurrencyId::from_dir(&r.currency);
        let id = match r.job {
            JobKey::Number(n) => JobId::Numbered(n),
            JobKey::Default(s) if s == "default" => match currency {
                CurrencyId::User(uid) if uid == r.owner => JobId::Default(uid),
                _ => return Err(bad(format!("a default job in {} owned by {}", r.currency, r.owner))),
            },
            JobKey::Default(s) => return Err(bad(format!("job key {s:?}"))),
        };
        let tickets = Tickets::new(r.tickets as i64).map_err(|e| bad(format!("{id}: {e}")))?;
        let cap = r.cap.map(|c| c.parse::<Cap>()).transpose().map_err(|e| bad(format!("{id}: {e}")))?.filter(|c| !c.is_background());
        let mem = r.mem.map(|m| m.parse::<MemCap>()).transpose().map_err(|e| bad(format!("{id}: {e}")))?;
        if let JobId::Numbered(n) = id {
            d.next_id = d.next_id.max(n + 1);
        }
        d.jobs.insert(
            id,
            JobSpec {
                id,
                currency,
                owner: r.owner,
                tickets,
                cap,
                mem,
                oom_group: r.oom_group,
                background: r.background,
                focus: r.focus,
                rule: r.rule,
            },
        );
    }
    Ok(d)
}

fn from_v1(f: FileV1) -> Desired {
    let mut d = Desired { next_id: f.next_id, ..Default::default() };
    d.funding = f.funding.into_iter().map(|(c, v)| (CurrencyId::from_dir(&c), v)).collect();
    for (key, j) in f.jobs {
        let Some((cdir, leaf)) = key.split_once('/') else { continue };
        let currency = CurrencyId::from_dir(cdir);
        let Some((id, owner)) = parse_leaf(&currency, leaf) else { continue };
        let mut spec = JobSpec::new(id, currency, owner);
        spec.tickets = Tickets::new(j.tickets as i64).unwrap_or_default();
        spec.cap = j.cap.and_then(|c| c.parse::<Cap>().ok()).filter(|c| !c.is_background());
        // Format 1 did not record the class: adoption takes it from where the directory is.
        d.jobs.insert(id, spec);
    }
    d
}

/// What the state file held, and whether it came from format 1 (classes unknown).
pub struct Loaded {
    /// The desired state.
    pub desired: Desired,
    /// Format 1: jobs' classes must be read from where their directories are.
    pub legacy: bool,
}

/// Loads the state; a missing file is the empty state.
pub fn load(path: &Path) -> anyhow::Result<Loaded> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Loaded { desired: Desired::default(), legacy: false }),
        Err(e) => return Err(e).with_context(|| format!("cannot read state file {}", path.display())),
    };
    let corrupt = || format!("state file {} is corrupt; move it aside to start afresh (funding and job settings in it are lost)", path.display());
    let v: serde_json::Value = serde_json::from_str(&text).with_context(corrupt)?;
    match v.get("version").and_then(|x| x.as_u64()) {
        Some(2) => Ok(Loaded { desired: from_v2(serde_json::from_value(v).with_context(corrupt)?, path)?, legacy: false }),
        None => Ok(Loaded { desired: from_v1(serde_json::from_value(v).with_context(corrupt)?), legacy: true }),
        Some(n) => anyhow::bail!("state file {} is format {n}, newer than this allot (2): run the newer allot daemon", path.display()),
    }
}

/// Saves the state atomically. On failure the old file stands and the partial temp file
/// is removed (on a full disk it would hold the space the next attempt needs).
pub fn save(path: &Path, d: &Desired) -> anyhow::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(".{}.tmp", path.file_name().and_then(|n| n.to_str()).unwrap_or("state")));
    let r = write_then_rename(&tmp, path, d);
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r?;
    std::fs::File::open(dir).and_then(|d| d.sync_all()).with_context(|| format!("fsync {}", dir.display()))?;
    Ok(())
}

fn write_then_rename(tmp: &Path, path: &Path, d: &Desired) -> anyhow::Result<()> {
    let mut f = std::fs::File::create(tmp).with_context(|| format!("create {}", tmp.display()))?;
    f.write_all(serde_json::to_string_pretty(&to_file(d))?.as_bytes()).with_context(|| format!("write {}", tmp.display()))?;
    f.sync_all().with_context(|| format!("fsync {}", tmp.display()))?;
    std::fs::rename(tmp, path).with_context(|| format!("rename {} to {}", tmp.display(), path.display()))
}

/// The config's defaults for one user: funding of their currency, cap of their default job,
/// hard cap of their currency.
pub type UserDefaults = (Option<u32>, Option<Cap>, Option<Cap>);

/// The registry: the desired state, where it is persisted, and the config's per-user
/// defaults looked up for it (kept until the config is reloaded).
#[derive(Debug, Default)]
pub struct Registry {
    desired: Desired,
    /// Where `desired` is persisted (None: an ephemeral daemon for tests and benchmarks).
    state_path: Option<std::path::PathBuf>,
    defaults: std::cell::RefCell<std::collections::HashMap<u32, UserDefaults>>,
}

impl Registry {
    /// A registry holding `desired`, persisted at `state_path`.
    pub fn new(desired: Desired, state_path: Option<std::path::PathBuf>) -> Self {
        Self { desired, state_path, defaults: Default::default() }
    }
    /// What users asked for.
    pub fn desired(&self) -> &Desired {
        &self.desired
    }
    /// Takes a fresh job id.
    pub fn take_id(&mut self) -> JobId {
        self.desired.take_id()
    }
    /// Numbered ids up to `n` are taken (a job found in the tree at start).
    pub fn taken_id(&mut self, n: u64) {
        self.desired.next_id = self.desired.next_id.max(n + 1);
    }
    /// A job as asked for, made or changed.
    pub fn put_job(&mut self, spec: JobSpec) {
        self.desired.jobs.insert(spec.id, spec);
    }
    /// A job, to change in place (adoption finishing a cut-short move).
    pub fn job_mut(&mut self, id: &JobId) -> Option<&mut JobSpec> {
        self.desired.jobs.get_mut(id)
    }
    /// A job gone.
    pub fn drop_job(&mut self, id: &JobId) {
        self.desired.jobs.remove(id);
    }
    /// Every job gone (a release or a clean stop of an ephemeral daemon).
    pub fn drop_jobs(&mut self) {
        self.desired.jobs.clear();
    }
    /// A currency's funding set with `allot fund`.
    pub fn set_funding(&mut self, c: CurrencyId, f: u32) {
        self.desired.funding.insert(c, f);
    }
    /// A currency's cap set with `allot fund --cap` (None: `--cap none`).
    pub fn set_cap(&mut self, c: CurrencyId, cap: Option<Cap>) {
        self.desired.caps.insert(c, cap);
    }
    /// The desired state as it was before a change that could not be saved.
    pub fn restore(&mut self, before: Desired) {
        self.desired = before;
    }
    /// Persists the desired state; a failure is logged (intent stays in memory) and returned.
    pub fn save(&self) -> Result<(), String> {
        let Some(p) = &self.state_path else { return Ok(()) };
        save(p, &self.desired).map_err(|e| {
            log::error!("could not save the state file (settings are kept in memory until it can be written): {e:#}");
            format!("{e:#}")
        })
    }
    /// A user's defaults if they were looked up since the last reload.
    pub fn cached_defaults(&self, uid: u32) -> Option<UserDefaults> {
        self.defaults.borrow().get(&uid).copied()
    }
    /// Keeps a user's defaults until the config is reloaded.
    pub fn cache_defaults(&self, uid: u32, v: UserDefaults) {
        self.defaults.borrow_mut().insert(uid, v);
    }
    /// Forgets every user's defaults (the config changed).
    pub fn clear_defaults(&self) {
        self.defaults.borrow_mut().clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("allot-state-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("state.json")
    }

    #[test]
    fn round_trips_every_job_and_replaces_atomically() {
        let p = tmp("rt");
        assert_eq!(load(&p).unwrap().desired, Desired::default());
        let mut d = Desired::default();
        d.funding.insert(CurrencyId::User(1000), 300);
        d.funding.insert(CurrencyId::Named("ci".into()), 5);
        let mut j = JobSpec::new(JobId::Numbered(7), CurrencyId::Named("ci".into()), 1001);
        j.cap = Some("0.5!".parse().unwrap());
        j.mem = Some("64M!".parse().unwrap());
        j.background = true;
        j.focus = true;
        j.tickets = Tickets::new(300).unwrap();
        d.jobs.insert(j.id, j);
        d.jobs.insert(JobId::Default(1000), JobSpec::new(JobId::Default(1000), CurrencyId::User(1000), 1000));
        d.next_id = 8;
        save(&p, &d).unwrap();
        save(&p, &d).unwrap();
        let back = load(&p).unwrap();
        assert!(!back.legacy);
        assert_eq!(back.desired, d);
        assert!(!p.parent().unwrap().join(".state.json.tmp").exists());
        std::fs::write(&p, "{not json").unwrap();
        assert!(load(&p).err().unwrap().to_string().contains("corrupt"));
        std::fs::write(&p, r#"{"version":2,"next_id":1,"funding":{"x":0},"jobs":[]}"#).unwrap();
        assert!(load(&p).err().unwrap().to_string().contains("funding of x"));
        std::fs::write(&p, r#"{"version":9}"#).unwrap();
        assert!(load(&p).err().unwrap().to_string().contains("newer than this allot"));
        std::fs::remove_dir_all(p.parent().unwrap()).unwrap();
    }

    #[test]
    fn the_registry_saves_through_the_state_file() {
        let p = tmp("registry");
        let mut r = Registry::new(Desired::default(), Some(p.clone()));
        r.set_funding(CurrencyId::User(1000), 250);
        r.save().unwrap();
        assert_eq!(load(&p).unwrap().desired, *r.desired());
        // A state file that cannot be written: the registry says why and keeps the intent.
        let gone = Registry::new(r.desired().clone(), Some(p.parent().unwrap().join("no-such-dir/state.json")));
        assert!(gone.save().unwrap_err().contains("no-such-dir"));
        assert_eq!(gone.desired().funding.get(&CurrencyId::User(1000)), Some(&250));
        assert!(Registry::new(Desired::default(), None).save().is_ok(), "an ephemeral daemon saves nothing");
        std::fs::remove_dir_all(p.parent().unwrap()).unwrap();
    }

    #[test]
    fn currency_caps_round_trip_and_a_file_without_them_loads() {
        let p = tmp("caps");
        // As written before currency caps existed: no "caps" key.
        std::fs::write(&p, r#"{"version":2,"next_id":1,"funding":{"user-1000":300},"jobs":[]}"#).unwrap();
        let old = load(&p).unwrap().desired;
        assert!(old.caps.is_empty());
        assert_eq!(old.funding[&CurrencyId::User(1000)], 300);
        let mut d = Desired::default();
        d.caps.insert(CurrencyId::User(1000), Some(Cap::parse_currency("4!").unwrap()));
        d.caps.insert(CurrencyId::Named("ci".into()), None);
        save(&p, &d).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.contains(r#""user-1000": "4!""#) && text.contains(r#""ci": "none""#), "{text}");
        assert_eq!(load(&p).unwrap().desired, d);
        // Without caps the key is left out, so an older allot still reads the file.
        save(&p, &Desired::default()).unwrap();
        assert!(!std::fs::read_to_string(&p).unwrap().contains("caps"));
        std::fs::write(&p, r#"{"version":2,"next_id":1,"funding":{},"caps":{"user-1000":"4"},"jobs":[]}"#).unwrap();
        let e = load(&p).err().unwrap().to_string();
        assert!(e.contains("cap of user-1000") && e.contains("not a hard cap"), "{e}");
        std::fs::remove_dir_all(p.parent().unwrap()).unwrap();
    }

    #[test]
    fn a_failed_save_keeps_the_old_file() {
        let p = tmp("fail");
        let mut d = Desired::default();
        d.funding.insert(CurrencyId::User(1000), 300);
        save(&p, &d).unwrap();
        // A temp path that cannot be a file (a directory in its place) makes the write fail.
        let t = p.parent().unwrap().join(".state.json.tmp");
        std::fs::create_dir(&t).unwrap();
        d.funding.insert(CurrencyId::User(1000), 5);
        let e = save(&p, &d).unwrap_err();
        assert!(format!("{e:#}").contains(".state.json.tmp"), "{e:#}");
        assert_eq!(load(&p).unwrap().desired.funding[&CurrencyId::User(1000)], 300);
        std::fs::remove_dir_all(p.parent().unwrap()).unwrap();
    }

    #[test]
    fn reads_format_1() {
        let p = tmp("v1");
        std::fs::write(&p, r#"{"funding":{"user-1000":250},"jobs":{"user-1000/j3-u1000":{"tickets":50,"cap":"0.5"}},"next_id":4}"#).unwrap();
        let l = load(&p).unwrap();
        assert!(l.legacy);
        assert_eq!(l.desired.funding[&CurrencyId::User(1000)], 250);
        let j = &l.desired.jobs[&JobId::Numbered(3)];
        assert_eq!((j.tickets.get(), j.cap.map(|c| c.to_string()), j.owner), (50, Some("0.5".into()), 1000));
        assert_eq!(l.desired.next_id, 4);
        std::fs::remove_dir_all(p.parent().unwrap()).unwrap();
    }
}
