//! The optional TOML config (`/etc/allot/allot.toml`). Every field has a default, so no
//! file is needed; unknown fields are refused, naming the file, line and field.

pub use crate::config_metrics::MetricsConfig;
pub use crate::config_rules::{Rule, RuleConfig};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The whole config.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Funding of a currency nobody has funded (1..10000).
    pub default_funding: u32,
    /// How often the daemon measures usage and reaps empty jobs, ms.
    pub tick_ms: u64,
    /// How often it scans /proc for new processes to place when the kernel's process events
    /// are not available, ms (with them, a safety scan every 5 minutes).
    pub scan_ms: u64,
    /// Usage-rate half-life, ms: 1000..100000, default 5000 (EBS's range and default).
    pub half_life_ms: u64,
    /// Automatic placement of users' processes.
    pub users: Users,
    /// The dynamic policy: boost, soft caps, nice emulation.
    pub policy: Policy,
    /// Named currencies.
    pub currencies: BTreeMap<String, NamedCurrency>,
    /// Where processes are placed from.
    pub placement: Placement,
    /// What one user may ask of the daemon.
    pub limits: Limits,
    /// What `show` reveals of other users' jobs.
    pub privacy: Privacy,
    /// Who decides funding: "local" (`allot fund`, over the config's) or "config" (`[funding]` and group defaults only: a fleet managed centrally).
    pub funding_authority: FundingAuthority,
    /// Funding, and a currency cap, by user name or uid (or named currency).
    pub funding: BTreeMap<String, crate::config_funding::FundingEntry>,
    /// Defaults for members of a group: funding of their currencies, a cap on their default jobs.
    pub groups: BTreeMap<String, GroupDefaults>,
    /// Rules: the first that matches a process gives it a job.
    pub rules: Vec<toml::Spanned<RuleConfig>>,
    /// The metrics endpoint.
    pub metrics: MetricsConfig,
    /// allot's tree against load outside it (hosts without systemd).
    pub outside: Outside,
    /// Memory by share (config_memory.rs).
    pub memory: crate::config_memory::MemoryConfig,
    /// I/O by share (config_io.rs).
    pub io: crate::config_io::IoConfig,
    /// The CPU scheduler backend: "cgroup" (the default) or "scx" (docs/scx.md).
    pub scheduler: crate::config_scheduler::Scheduler,
    /// Login sessions on a systemd host: how a background rule reaches their processes.
    pub sessions: crate::config_sessions::Sessions,
    /// The rules, compiled by [`Config::load`].
    #[serde(skip)]
    pub compiled_rules: Vec<Rule>,
}

/// allot's whole tree against processes outside it (root's, daemons'), on hosts where allot keeps its own tree. On a systemd host
/// that split is systemd's (`user.slice` against `system.slice`, both weight 100 by default) and this is not used.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Outside {
    /// The weight of allot's tree (cgroup v2 units, 1..10000; v1 cpu.shares is ×10.24).
    /// 100, the kernel's default, weighs the whole tree as one nice-0 process outside it.
    pub weight: u32,
}

impl Default for Outside {
    fn default() -> Self {
        Self { weight: allot_model::units::DEFAULT }
    }
}

pub use crate::config_funding::FundingAuthority;

/// Defaults for a group's members.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct GroupDefaults {
    /// Funding of each member's own currency.
    pub funding: Option<u32>,
    /// Cap of each member's default job, e.g. "1!".
    pub default_cap: Option<String>,
    /// Hard cap of each member's own currency, all their jobs together, e.g. "4!".
    pub currency_cap: Option<String>,
}

/// Where automatic placement takes processes from.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Placement {
    /// cgroups (as /proc/PID/cgroup names them in the cpu hierarchy) whose processes may be
    /// placed: the root by default. Every other cgroup belongs to another manager.
    pub from: Vec<String>,
}

impl Default for Placement {
    fn default() -> Self {
        Self { from: vec!["/".into()] }
    }
}

/// Per-user limits (docs/trust.md).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Jobs one user may have (default jobs not counted).
    pub jobs_per_user: usize,
    /// Connections one user may hold open.
    pub connections_per_user: usize,
    /// Connections all users but root may hold open.
    pub connections: usize,
    /// Requests per second per user, on average.
    pub requests_per_second: f64,
    /// Requests per user at once.
    pub request_burst: f64,
}

impl Default for Limits {
    fn default() -> Self {
        Self { jobs_per_user: 256, connections_per_user: 16, connections: 512, requests_per_second: 50.0, request_burst: 100.0 }
    }
}

/// What `allot show` reveals to an ordinary user of other users' jobs.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Privacy {
    /// Show other users' pids and command lines (as with /proc mounted without hidepid).
    pub show_other_users: bool,
}

/// Which processes are placed into their user's currency automatically.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Users {
    /// Place processes not already in a job.
    pub auto_place: bool,
    /// Human users' uids start here (default: UID_MIN of /etc/login.defs).
    pub min_uid: Option<u32>,
    /// ... and end here (default: UID_MAX of /etc/login.defs).
    pub max_uid: Option<u32>,
    /// If set, only these users (names or uids).
    pub only: Option<Vec<String>>,
}

/// The dynamic policy (Petrou et al. 1999 §3, EBS 2004; docs/references.md).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Policy {
    /// Boost jobs that use less than their entitlement.
    pub boost: bool,
    /// The sliding window over which usage is compared with entitlement, ms.
    pub boost_window_ms: u64,
    /// Boost while usage over the window < this × entitlement.
    pub boost_below: f64,
    /// The EEVDF slice a boosted job's tasks get, µs (kernel range 100..100000; 0: leave
    /// slices alone and boost by weight only).
    pub boost_slice_us: u64,
    /// A boosted job's weight is its tickets times this (at most 10000), so it is
    /// eligible whenever it wakes; the boost is withdrawn at the first tick in which the
    /// job used its entitlement, so it buys latency, never CPU (allot_model::plan).
    pub boost_weight: f64,
    /// Emulate nice across currencies: a niced process gives up part of its currency's
    /// funding, so nice counts against other users too (Petrou et al. 1999 §3.4).
    pub nice_emulation: bool,
}

impl Default for Policy {
    /// The model's defaults (allot_model::plan): they have one home.
    fn default() -> Self {
        let p = allot_model::plan::Params::default();
        let boost_slice_us = p.boost_slice_ns.map_or(0, |ns| ns / 1000);
        let boost_window_ms = allot_model::plan::DEFAULT_BOOST_WINDOW_MS;
        Self {
            boost: p.boost,
            boost_window_ms,
            boost_below: p.boost_below,
            boost_slice_us,
            boost_weight: p.boost_weight,
            nice_emulation: p.nice_emulation,
        }
    }
}

impl Policy {
    /// The plan's parameters; the boost slice only where the kernel has custom slices.
    pub fn params(&self, custom_slices: bool) -> allot_model::plan::Params {
        allot_model::plan::Params {
            boost: self.boost,
            boost_below: self.boost_below,
            boost_weight: self.boost_weight,
            boost_slice_ns: (custom_slices && self.boost_slice_us > 0).then_some(self.boost_slice_us * 1000),
            nice_emulation: self.nice_emulation,
        }
    }
}

/// A named currency (e.g. `ci`) and who may use and fund it.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct NamedCurrency {
    /// Initial funding (later changes with `allot fund` persist and win).
    pub funding: Option<u32>,
    /// Users who may run jobs in it.
    pub users: Vec<String>,
    /// Groups whose members may run jobs in it.
    pub groups: Vec<String>,
    /// Users who may also fund it and move processes into it.
    pub owners: Vec<String>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            default_funding: allot_model::units::DEFAULT,
            tick_ms: 100,
            scan_ms: 1000,
            half_life_ms: allot_model::usage::DEFAULT_HALF_LIFE_MS,
            users: Users::default(),
            policy: Policy::default(),
            currencies: BTreeMap::new(),
            placement: Placement::default(),
            limits: Limits::default(),
            privacy: Privacy::default(),
            funding_authority: FundingAuthority::Local,
            funding: BTreeMap::new(),
            groups: BTreeMap::new(),
            rules: vec![],
            metrics: MetricsConfig::default(),
            outside: Outside::default(),
            memory: Default::default(),
            io: Default::default(),
            scheduler: Default::default(),
            sessions: Default::default(),
            compiled_rules: vec![],
        }
    }
}

impl Default for Users {
    fn default() -> Self {
        Self { auto_place: true, min_uid: None, max_uid: None, only: None }
    }
}

/// Names a named currency may not take: they would clash with allot's own directories.
pub fn check_currency_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 32
        && name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if !ok {
        return Err(format!("currency name {name:?} is invalid: use 1..32 of [a-z0-9_-], starting with a letter"));
    }
    if name == "background" || name.starts_with("user-") {
        return Err(format!("currency name {name:?} is reserved (\"background\" and \"user-*\" are allot's own)"));
    }
    Ok(())
}

/// The most of a config file that is read. A config is a few KiB; anything this large is
/// not one (a wrong path, a log), and is refused before it is parsed.
pub const MAX_BYTES: u64 = 1 << 20;

/// A config refused: the file, the line (and column) where known, and why, with what is
/// allowed. Displayed as `FILE:LINE: why` (or `config FILE: why` without a line).
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError {
    /// The file.
    pub path: PathBuf,
    /// Its line, from 1.
    pub line: Option<usize>,
    /// Its column on that line, from 1 (parse errors only).
    pub column: Option<usize>,
    /// Why it is refused.
    pub message: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.line, self.column) {
            (Some(l), Some(c)) => write!(f, "{}:{l}:{c}: {}", self.path.display(), self.message),
            (Some(l), None) => write!(f, "{}:{l}: {}", self.path.display(), self.message),
            _ => write!(f, "config {}: {}", self.path.display(), self.message),
        }
    }
}

impl std::error::Error for ConfigError {}

/// The 1-based line and column of byte `at` in `text`.
pub fn line_col(text: &str, at: usize) -> (usize, usize) {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let before = &text[..at];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (before.matches('\n').count() + 1, before[line_start..].chars().count() + 1)
}

/// The line of a setting named by its dotted path (`policy.boost_below`, `funding.alice`,
/// `currencies.ci`): the `key =` line under its table header, or the header itself. A
/// plain scan of the lines (the file has parsed by then); None when it is spelled some
/// other way (an inline table, a dotted key across tables).
pub fn locate(text: &str, dotted: &str) -> Option<usize> {
    let want: Vec<&str> = dotted.split('.').collect();
    let unquote = |k: &str| k.trim().trim_matches('"').trim_matches('\'').to_string();
    let mut table: Vec<String> = vec![];
    for (i, raw) in text.lines().enumerate() {
        let l = raw.trim();
        if l.starts_with('[') {
            let inner = l.trim_start_matches('[');
            let inner = &inner[..inner.find(']').unwrap_or(inner.len())];
            table = inner.split('.').map(unquote).collect();
            if table == want {
                return Some(i + 1);
            }
        } else if let Some(eq) = l.find('=') {
            if l.starts_with('#') {
                continue;
            }
            let mut path = table.clone();
            path.extend(l[..eq].split('.').map(unquote));
            if path == want {
                return Some(i + 1);
            }
        }
    }
    None
}

/// Reads a config file's text: None when it does not exist and was not named
/// (`required`), so the defaults apply. Refused: anything but a regular file, more than
/// [`MAX_BYTES`], text that is not UTF-8 (naming the line of the first bad byte).
pub fn read_text(path: &Path, required: bool) -> Result<Option<String>, ConfigError> {
    use std::io::Read;
    let err = |line, message: String| ConfigError { path: path.to_path_buf(), line, column: None, message };
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !required => return Ok(None),
        Err(e) => return Err(err(None, format!("cannot read it: {e}"))),
    };
    if !meta.is_file() {
        let what = if meta.is_dir() { "a directory" } else { "not a regular file (a device, FIFO or socket)" };
        return Err(err(None, format!("is {what}; give the path of a TOML file")));
    }
    let mut bytes = vec![];
    std::fs::File::open(path).and_then(|f| f.take(MAX_BYTES + 1).read_to_end(&mut bytes)).map_err(|e| err(None, format!("cannot read it: {e}")))?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(err(None, format!("is larger than {} KiB; a config is a few KiB: is this the right file?", MAX_BYTES / 1024)));
    }
    match String::from_utf8(bytes) {
        Ok(t) => Ok(Some(t)),
        Err(e) => {
            let at = e.utf8_error().valid_up_to();
            let ok = std::str::from_utf8(&e.as_bytes()[..at]).unwrap_or_default();
            let (line, column) = line_col(ok, at);
            let byte = e.as_bytes()[at];
            Err(ConfigError {
                path: path.to_path_buf(),
                line: Some(line),
                column: Some(column),
                message: format!("byte 0x{byte:02x} is not UTF-8; a config is UTF-8 text (TOML)"),
            })
        }
    }
}

impl Config {
    /// Reads and checks a config file. `required`: a missing file is an error (it was
    /// named explicitly); otherwise a missing file means the defaults. The daemon (start
    /// and reload) and `allot config check` both load through here.
    pub fn load(path: &Path, required: bool) -> anyhow::Result<Self> {
        match read_text(path, required)? {
            None => Ok(Self::default()),
            Some(text) => Ok(Self::parse(path, &text)?),
        }
    }

    /// Parses and checks a config's text (`path` names it in errors).
    pub fn parse(path: &Path, text: &str) -> Result<Self, ConfigError> {
        let at = |line: Option<usize>, message: String| ConfigError { path: path.to_path_buf(), line, column: None, message };
        let mut cfg: Config = toml::from_str(text).map_err(|e| {
            let (line, column) = e.span().map(|s| line_col(text, s.start)).unzip();
            // The toml crate says nothing for some lines (`""=`: a key without a value).
            let mut message = Some(e.message().trim()).filter(|m| !m.is_empty()).unwrap_or("not TOML").to_string();
            if message == "not TOML" || message.starts_with("expected") || message.starts_with("invalid key") {
                message.push_str(" (a TOML line is `key = value`, `[table]`, `[[rules]]` or a # comment)");
            }
            ConfigError { path: path.to_path_buf(), line, column, message }
        })?;
        cfg.check().map_err(|(key, msg)| at(locate(text, &key), msg))?;
        for (n, r) in cfg.rules.iter().enumerate() {
            let line = line_col(text, r.span().start).0;
            let name = r.get_ref().name.clone().unwrap_or_else(|| format!("{}", n + 1));
            let rule = Rule::compile(n, line, r.get_ref()).map_err(|e| at(Some(line), format!("rule {name}: {e}")))?;
            if let Some(c) = &rule.currency {
                if !cfg.currencies.contains_key(c) && allot_linux::process::procfs::user_uid(c).is_none() && c.parse::<u32>().is_err() {
                    return Err(at(
                        Some(line),
                        format!("rule {}: currency {c:?} is neither a named currency of this config ([currencies]) nor a user", rule.name),
                    ));
                }
            }
            cfg.compiled_rules.push(rule);
        }
        Ok(cfg)
    }

    /// Every rule no type can express. Err: the setting's dotted path (to find its line)
    /// and why, with what is allowed.
    fn check(&self) -> Result<(), (String, String)> {
        let bad = |key: &str, msg: String| Err((key.to_string(), msg));
        crate::config_metrics::check(&self.metrics)?;
        crate::config_scheduler::check(&self.scheduler, crate::config_scheduler::support())?;
        if let Err(e) = allot_model::Funding::new(self.default_funding as i64) {
            return bad("default_funding", format!("default_funding: {e}"));
        }
        if !(1..=10_000).contains(&self.outside.weight) {
            return bad("outside.weight", format!("outside.weight must be 1..10000, got {}", self.outside.weight));
        }
        if !(50..=60_000).contains(&self.tick_ms) {
            return bad("tick_ms", format!("tick_ms must be 50..60000, got {}", self.tick_ms));
        }
        let p = &self.policy;
        // the same limits as allot-scx's --boost-window-ms (allot_model::wake::window_ns),
        // tick_ms being 50 at least
        let most = allot_model::plan::MAX_BOOST_WINDOW_MS;
        if !(self.tick_ms..=most).contains(&p.boost_window_ms) {
            return bad(
                "policy.boost_window_ms",
                format!("policy.boost_window_ms must be tick_ms ({})..{most}, got {}", self.tick_ms, p.boost_window_ms),
            );
        }
        if !(p.boost_below > 0.0 && p.boost_below <= 1.0) {
            return bad("policy.boost_below", format!("policy.boost_below must be in (0, 1], got {}", p.boost_below));
        }
        if !(1.0..=10_000.0).contains(&p.boost_weight) {
            return bad("policy.boost_weight", format!("policy.boost_weight must be 1..10000, got {}", p.boost_weight));
        }
        if p.boost_slice_us != 0 && !(100..=100_000).contains(&p.boost_slice_us) {
            return bad(
                "policy.boost_slice_us",
                format!("policy.boost_slice_us must be 0 (no slice) or 100..100000 (the kernel's slice range), got {}", p.boost_slice_us),
            );
        }
        if !(100..=60_000).contains(&self.scan_ms) {
            return bad("scan_ms", format!("scan_ms must be 100..60000, got {}", self.scan_ms));
        }
        if !(1000..=100_000).contains(&self.half_life_ms) {
            return bad("half_life_ms", format!("half_life_ms must be 1000..100000, got {}", self.half_life_ms));
        }
        if let (Some(a), Some(b)) = (self.users.min_uid, self.users.max_uid) {
            if a > b {
                return bad("users.min_uid", format!("users.min_uid ({a}) is above users.max_uid ({b})"));
            }
        }
        if self.placement.from.iter().any(|p| !p.starts_with('/') || p.contains("..")) {
            return bad(
                "placement.from",
                format!("placement.from must list cgroup paths starting with / (as /proc/PID/cgroup shows them), got {:?}", self.placement.from),
            );
        }
        let l = &self.limits;
        for (key, v) in [("jobs_per_user", l.jobs_per_user), ("connections_per_user", l.connections_per_user), ("connections", l.connections)] {
            if v == 0 {
                return bad(&format!("limits.{key}"), format!("limits.{key} must be at least 1, got 0"));
            }
        }
        if l.requests_per_second.is_nan() || l.requests_per_second <= 0.0 {
            return bad("limits.requests_per_second", format!("limits.requests_per_second must be > 0, got {}", l.requests_per_second));
        }
        if l.request_burst.is_nan() || l.request_burst < 1.0 {
            return bad("limits.request_burst", format!("limits.request_burst must be >= 1, got {}", l.request_burst));
        }
        for (g, d) in &self.groups {
            if let Some(f) = d.funding {
                if let Err(e) = allot_model::Funding::new(f as i64) {
                    return bad(&format!("groups.{g}.funding"), format!("groups.{g}.funding: {e}"));
                }
            }
            if let Some(c) = &d.default_cap {
                let key = format!("groups.{g}.default_cap");
                let cap: allot_model::Cap = match c.parse() {
                    Ok(c) => c,
                    Err(e) => return bad(&key, format!("{key}: {e}")),
                };
                if cap.is_background() {
                    return bad(&key, format!("{key}: {c:?} would put every login in the background; give a cap above 0"));
                }
            }
            if let Some(c) = &d.currency_cap {
                let key = format!("groups.{g}.currency_cap");
                if let Err(e) = allot_model::Cap::parse_currency(c) {
                    return bad(&key, format!("{key}: {e}"));
                }
            }
        }
        for (name, c) in &self.currencies {
            if let Err(e) = check_currency_name(name) {
                return bad(&format!("currencies.{name}"), e);
            }
            if let Some(f) = c.funding {
                if let Err(e) = allot_model::Funding::new(f as i64) {
                    return bad(&format!("currencies.{name}.funding"), format!("currencies.{name}.funding: {e}"));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
