//! `allot config check [FILE]`: loads a config exactly as the daemon does
//! ([`Config::load`], so the two cannot disagree) without touching a daemon, and warns
//! about names NSS does not know: a `[funding]` key that is no user, uid or named
//! currency (a top-level setting written after `[funding]` becomes one), unknown groups
//! in `[groups]` and `[currencies]`, unknown users in `[users] only` and `[currencies]`
//! (an unknown user or group in a rule is an error: the loader refuses it). `--print` then
//! prints the config in force as TOML (config_print.rs). `allot config example` prints the
//! annotated example.

use crate::config::{locate, read_text, Config, ConfigError};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// The annotated example config, every setting commented out at its default (the package
/// also installs it as /usr/share/doc/allot/examples/allot.toml).
pub const EXAMPLE: &str = include_str!("../../../packaging/allot.toml");

/// The config the daemon reads when not told otherwise.
pub const DEFAULT_PATH: &str = "/etc/allot/allot.toml";

/// `allot config check`.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The file (default: ALLOT_CONFIG, else /etc/allot/allot.toml, which may be absent).
    #[arg(env = "ALLOT_CONFIG")]
    pub file: Option<PathBuf>,
    /// Warnings fail the check too (exit 1).
    #[arg(long)]
    pub strict: bool,
    /// Print the config the daemon would run on, as TOML on stdout: every setting, the
    /// defaults filled in (the verdict goes to stderr). It reads back as the same config.
    #[arg(long)]
    pub print: bool,
}

/// Whether names exist, as NSS (or a test) knows them. Err: the lookup itself failed.
pub trait Names {
    /// A user by name.
    fn user(&self, name: &str) -> Result<bool, String>;
    /// A group by name.
    fn group(&self, name: &str) -> Result<bool, String>;
}

/// The system's NSS (getpwnam_r, getgrnam_r).
pub struct Nss;

impl Names for Nss {
    fn user(&self, name: &str) -> Result<bool, String> {
        allot_linux::process::users::try_user_by_name(name).map(|u| u.is_some()).map_err(|e| e.to_string())
    }
    fn group(&self, name: &str) -> Result<bool, String> {
        allot_linux::process::users::try_group_by_name(name).map(|g| g.is_some()).map_err(|e| e.to_string())
    }
}

/// One finding: its line where known, and what is wrong.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// The line, from 1.
    pub line: Option<usize>,
    /// The column (parse errors).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<usize>,
    /// What is wrong, and what is allowed.
    pub message: String,
}

/// The outcome of a check.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// The file checked.
    pub file: PathBuf,
    /// False when it does not exist (and was not named: the defaults apply).
    pub exists: bool,
    /// The daemon would load it (start) or take it (reload).
    pub ok: bool,
    /// Why it would be refused.
    pub error: Option<Finding>,
    /// Names NSS does not know, and other things that load but are likely mistakes.
    pub warnings: Vec<Finding>,
}

/// Checks a config file: the daemon's loader, then the names in it.
pub fn check(path: &Path, required: bool, names: &dyn Names) -> Report {
    let mut r = Report { file: path.to_path_buf(), exists: true, ok: false, error: None, warnings: vec![] };
    let refused = |e: ConfigError| Finding { line: e.line, column: e.column, message: e.message };
    let text = match read_text(path, required) {
        Ok(Some(t)) => t,
        Ok(None) => {
            r.exists = false;
            r.ok = true;
            return r;
        }
        Err(e) => {
            r.error = Some(refused(e));
            return r;
        }
    };
    match Config::parse(path, &text) {
        Ok(cfg) => {
            r.ok = true;
            r.warnings = warnings(&cfg, &text, names);
        }
        Err(e) => r.error = Some(refused(e)),
    }
    r
}

/// The config's top-level settings (not tables), as its loader lists them.
fn top_level_settings() -> Vec<String> {
    const PROBE: &str = "zz_no_such_setting";
    let e = toml::from_str::<Config>(&format!("{PROBE} = 1")).err().map(|e| e.message().to_string()).unwrap_or_default();
    let tables: Vec<&str> = [
        "users",
        "policy",
        "currencies",
        "placement",
        "limits",
        "privacy",
        "funding",
        "groups",
        "rules",
        "metrics",
        "outside",
        "memory",
        "io",
        "scheduler",
        "sessions",
    ]
    .into();
    e.split('`').skip(1).step_by(2).filter(|k| *k != PROBE && !tables.contains(k)).map(str::to_string).collect()
}

/// Edit distance (Levenshtein) between two short names.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            cur.push((prev[j] + usize::from(ca != *cb)).min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

fn warnings(cfg: &Config, text: &str, names: &dyn Names) -> Vec<Finding> {
    let mut out = vec![];
    let mut warn = |line: Option<usize>, message: String| out.push(Finding { line, column: None, message });
    let known = |kind: &str, name: &str, found: Result<bool, String>| -> Option<String> {
        match found {
            Ok(true) => None,
            Ok(false) => {
                Some(format!("no {kind} {name:?} is known to NSS (getent {} {name} finds nothing)", if kind == "user" { "passwd" } else { "group" }))
            }
            Err(e) => Some(format!("{kind} {name:?} could not be looked up ({e}); NSS may be down")),
        }
    };
    let user = |name: &str| if name.parse::<u32>().is_ok() { None } else { known("user", name, names.user(name)) };
    let group = |name: &str| if name.parse::<u32>().is_ok() { None } else { known("group", name, names.group(name)) };
    let settings = top_level_settings();
    for who in cfg.funding.keys() {
        if cfg.currencies.contains_key(who) {
            continue;
        }
        let Some(why) = user(who) else { continue };
        let mut msg = format!("[funding] {who:?} is no user, uid or named currency of [currencies]: {why}");
        if let Some(s) = settings.iter().filter(|s| distance(s, who) <= 2).min_by_key(|s| distance(s, who)) {
            msg.push_str(&format!(
                "; if you meant the top-level setting {s}, move it above the first [table]: written after [funding] it is funding for a user named {who:?}"
            ));
        }
        warn(locate(text, &format!("funding.{who}")), msg);
    }
    for g in cfg.groups.keys() {
        if let Some(why) = group(g) {
            warn(locate(text, &format!("groups.{g}")), format!("[groups.{g}]: {why}; its defaults apply to nobody"));
        }
    }
    for (c, cur) in &cfg.currencies {
        for (key, list, is_user) in [("users", &cur.users, true), ("owners", &cur.owners, true), ("groups", &cur.groups, false)] {
            for n in list {
                if let Some(why) = if is_user { user(n) } else { group(n) } {
                    let line = locate(text, &format!("currencies.{c}.{key}")).or_else(|| locate(text, &format!("currencies.{c}")));
                    warn(line, format!("currencies.{c}.{key}: {why}"));
                }
            }
        }
    }
    // the sched_ext scheduler's settings under the cgroup backend: they choose nothing
    if cfg.scheduler.kind == crate::config_scheduler::Kind::Cgroup {
        use crate::config_scheduler::{Draw, Tasks};
        for (key, set) in [("draw", cfg.scheduler.draw != Draw::Stride), ("tasks", cfg.scheduler.tasks != Tasks::Jobs)] {
            if set {
                warn(
                    locate(text, &format!("scheduler.{key}")),
                    format!("scheduler.{key} does nothing with kind = \"cgroup\": it is a setting of allot's sched_ext scheduler (kind = \"scx\", docs/scx.md)"),
                );
            }
        }
    }
    if let Some(only) = &cfg.users.only {
        for n in only {
            if let Some(why) = user(n) {
                warn(locate(text, "users.only"), format!("users.only: {why}; that entry places nobody"));
            }
        }
    }
    out
}

fn place(file: &Path, f: &Finding) -> String {
    match (f.line, f.column) {
        (Some(l), Some(c)) => format!("{}:{l}:{c}", file.display()),
        (Some(l), None) => format!("{}:{l}", file.display()),
        _ => file.display().to_string(),
    }
}

/// `allot config check`: exit 0 when the daemon would take the file (warnings allowed
/// unless `--strict`), 1 when it would refuse it.
pub fn run(a: CheckArgs, json: bool) -> anyhow::Result<i32> {
    let required = a.file.is_some();
    let path = a.file.unwrap_or_else(|| DEFAULT_PATH.into());
    if a.print && json {
        anyhow::bail!("--print writes the config as TOML; leave out --json (or --print)");
    }
    let r = check(&path, required, &Nss);
    let code = i32::from(!r.ok || (a.strict && !r.warnings.is_empty()));
    if json {
        println!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(code);
    }
    let t = |s: String| allot_report::for_terminal(&s).into_owned();
    // With --print, stdout is the TOML alone, so it can go to a file.
    let verdict = |s: String| if a.print { eprintln!("{s}") } else { println!("{s}") };
    for w in &r.warnings {
        eprintln!("{}", t(format!("{}: warning: {}", place(&r.file, w), w.message)));
    }
    if let Some(e) = &r.error {
        eprintln!("{}", t(format!("{}: error: {}", place(&r.file, e), e.message)));
        eprintln!("{}", t(format!("{}: refused: the daemon would not start with it, and a reload would keep the config in force", r.file.display())));
    } else if !r.exists {
        verdict(t(format!("{}: no such file; the daemon runs on its built-in defaults (allot config example shows them)", r.file.display())));
    } else if r.warnings.is_empty() {
        verdict(t(format!("{}: good", r.file.display())));
    } else {
        let n = r.warnings.len();
        let s = if n == 1 { "" } else { "s" };
        let tail = if a.strict { "refused (--strict)" } else { "the daemon would take it" };
        verdict(t(format!("{}: loads, with {n} warning{s}; {tail}", r.file.display())));
    }
    if a.print && r.ok {
        print!("{}", crate::config_print::print(&Config::load(&path, required)?)?);
    }
    Ok(code)
}

#[cfg(test)]
#[path = "config_check_tests.rs"]
mod tests;
