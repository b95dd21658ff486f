//! Rules: the admin's `[[rules]]` give processes a job when they are placed and when they
//! exec — by user, group, executable path, process name or command line (glob, or a
//! regex with `re:`) — with tickets, a cap, the background class or a currency. The first
//! matching rule wins. All matching processes of one user share one job per rule, so a
//! build that execs a thousand compilers makes one job, not a thousand.
//!
//! Here is a rule as written (`RuleConfig`), compiled (`Rule`) and matched (`Rule::test`):
//! the config loads and compiles rules, the daemon's placement matches them, and this
//! module needs neither.

use serde::{Deserialize, Serialize};

/// One `[[rules]]` entry.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct RuleConfig {
    /// A name for logs and `allot rules test`.
    pub name: Option<String>,
    /// Matches processes of this user (name or uid).
    pub user: Option<String>,
    /// Matches processes running with this group (primary or supplementary, as `id` shows).
    pub group: Option<String>,
    /// Glob on the executable's path (/proc/PID/exe); `re:` for a regex.
    pub exe: Option<String>,
    /// Glob on the process name (comm).
    pub comm: Option<String>,
    /// Glob on the command line; `re:` for a regex.
    pub cmdline: Option<String>,
    /// Tickets of its jobs.
    pub tickets: Option<u32>,
    /// Cap of its jobs.
    pub cap: Option<String>,
    /// Its jobs run in the background.
    pub background: Option<bool>,
    /// Its jobs' currency (default: the process owner's).
    pub currency: Option<String>,
}

/// A glob (`*`, `?`, `[abc]`, `[a-z]`, `[!x]`) or, prefixed `re:`, a regex.
#[derive(Debug, Clone)]
pub enum Pattern {
    /// Matched against the whole string.
    Glob(Vec<char>),
    /// Matched anywhere unless anchored.
    Regex(regex_lite::Regex),
}

impl Pattern {
    /// Compiles a pattern, naming what is wrong.
    pub fn new(p: &str) -> Result<Self, String> {
        match p.strip_prefix("re:") {
            Some(r) => regex_lite::Regex::new(r).map(Pattern::Regex).map_err(|e| format!("regex {r:?} is invalid: {e}")),
            None => {
                let c: Vec<char> = p.chars().collect();
                let mut depth = 0;
                for &ch in &c {
                    match ch {
                        '[' => depth += 1,
                        ']' if depth > 0 => depth -= 1,
                        _ => {}
                    }
                }
                if depth != 0 {
                    return Err(format!("glob {p:?} has an unclosed '['"));
                }
                Ok(Pattern::Glob(c))
            }
        }
    }
    /// Does `s` match?
    pub fn matches(&self, s: &str) -> bool {
        match self {
            Pattern::Glob(p) => glob(p, &s.chars().collect::<Vec<_>>()),
            Pattern::Regex(r) => r.is_match(s),
        }
    }
}

/// Glob matching with backtracking over `*` (linear in practice).
fn glob(p: &[char], s: &[char]) -> bool {
    let (mut pi, mut si) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        if pi < p.len() {
            match p[pi] {
                '*' => {
                    star = Some((pi, si));
                    pi += 1;
                    continue;
                }
                '?' => {
                    pi += 1;
                    si += 1;
                    continue;
                }
                '[' => {
                    if let Some((ok, len)) = class(&p[pi..], s[si]) {
                        if ok {
                            pi += len;
                            si += 1;
                            continue;
                        }
                    }
                }
                c if c == s[si] => {
                    pi += 1;
                    si += 1;
                    continue;
                }
                _ => {}
            }
        }
        match star {
            Some((sp, ss)) => {
                pi = sp + 1;
                si = ss + 1;
                star = Some((sp, ss + 1));
            }
            None => return false,
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// A `[...]` class at the start of `p`: (matches `c`, the class's length).
fn class(p: &[char], c: char) -> Option<(bool, usize)> {
    let end = p.iter().skip(1).position(|&x| x == ']')? + 1;
    let body = &p[1..end];
    let (neg, body) = match body.first() {
        Some('!') | Some('^') => (true, &body[1..]),
        _ => (false, body),
    };
    let mut hit = false;
    let mut i = 0;
    while i < body.len() {
        if i + 2 < body.len() && body[i + 1] == '-' {
            hit |= body[i] <= c && c <= body[i + 2];
            i += 3;
        } else {
            hit |= body[i] == c;
            i += 1;
        }
    }
    Some((hit != neg, end + 1))
}

/// A rule, compiled.
#[derive(Debug, Clone)]
pub struct Rule {
    /// Its name (the config's, or "rule N").
    pub name: String,
    /// Where it is in the config.
    pub line: usize,
    user: Option<u32>,
    group: Option<u32>,
    exe: Option<Pattern>,
    comm: Option<Pattern>,
    cmdline: Option<Pattern>,
    /// Tickets for its jobs.
    pub tickets: Option<allot_model::Tickets>,
    /// Cap for its jobs.
    pub cap: Option<allot_model::Cap>,
    /// Its jobs run in the background.
    pub background: bool,
    /// Its jobs' currency (None: the process owner's).
    pub currency: Option<String>,
}

/// What a rule looks at.
pub struct Facts<'a> {
    /// The process's uid.
    pub uid: u32,
    /// The groups it runs with (real, effective, supplementary), as `id` shows them.
    pub groups: &'a [u32],
    /// /proc/PID/exe.
    pub exe: &'a str,
    /// Its name (comm).
    pub comm: &'a str,
    /// Its command line.
    pub cmdline: &'a str,
}

impl Rule {
    /// Compiles the `n`th rule of the config (at `line`), or names what is wrong.
    pub fn compile(n: usize, line: usize, r: &RuleConfig) -> Result<Self, String> {
        let user = r
            .user
            .as_ref()
            .map(|u| {
                allot_linux::process::procfs::user_uid(u)
                    .or_else(|| u.parse().ok())
                    .ok_or_else(|| format!("user {u:?} is unknown (not in NSS, not a uid)"))
            })
            .transpose()?;
        let group = r
            .group
            .as_ref()
            .map(|g| {
                allot_linux::process::users::group_by_name(g)
                    .map(|g| g.gid)
                    .or_else(|| g.parse().ok())
                    .ok_or_else(|| format!("group {g:?} is unknown (not in NSS, not a gid)"))
            })
            .transpose()?;
        let pat = |p: &Option<String>| p.as_deref().map(Pattern::new).transpose();
        let tickets = r.tickets.map(|t| allot_model::Tickets::new(t as i64).map_err(|e| e.to_string())).transpose()?;
        let cap = r.cap.as_deref().map(|c| c.parse::<allot_model::Cap>().map_err(|e| e.to_string())).transpose()?;
        if cap.is_some_and(|c| c.is_background()) && r.background == Some(false) {
            return Err("cap 0 means background; it contradicts background = false".into());
        }
        let background = r.background.unwrap_or(false) || cap.is_some_and(|c| c.is_background());
        if background && cap.is_some_and(|c| !c.is_background()) {
            return Err("background and a cap contradict each other: background is soft cap 0".into());
        }
        if r.user.is_none() && r.group.is_none() && r.exe.is_none() && r.comm.is_none() && r.cmdline.is_none() {
            return Err("a rule needs at least one of user, group, exe, comm, cmdline to match".into());
        }
        if tickets.is_none() && cap.is_none() && !background && r.currency.is_none() {
            return Err("a rule needs at least one of tickets, cap, background, currency to do".into());
        }
        Ok(Rule {
            name: r.name.clone().unwrap_or_else(|| format!("rule {}", n + 1)),
            line,
            user,
            group,
            exe: pat(&r.exe)?,
            comm: pat(&r.comm)?,
            cmdline: pat(&r.cmdline)?,
            tickets,
            cap: cap.filter(|c| !c.is_background()),
            background,
            currency: r.currency.clone(),
        })
    }

    /// Does it match? Err: the first condition that does not, in words.
    pub fn test(&self, f: &Facts) -> Result<(), String> {
        if let Some(u) = self.user {
            if u != f.uid {
                return Err(format!("user is uid {u}, the process's is {}", f.uid));
            }
        }
        if let Some(g) = self.group {
            if !f.groups.contains(&g) {
                return Err(format!("group gid {g} is not among the process's groups"));
            }
        }
        for (what, p, v) in [("exe", &self.exe, f.exe), ("comm", &self.comm, f.comm), ("cmdline", &self.cmdline, f.cmdline)] {
            if let Some(p) = p {
                if !p.matches(v) {
                    return Err(format!("{what} {v:?} does not match"));
                }
            }
        }
        Ok(())
    }

    /// What it does, in words.
    pub fn action(&self) -> String {
        let mut v = vec![];
        if let Some(t) = self.tickets {
            v.push(format!("tickets {}", t.get()));
        }
        if let Some(c) = self.cap {
            v.push(format!("cap {c}"));
        }
        if self.background {
            v.push("background".into());
        }
        if let Some(c) = &self.currency {
            v.push(format!("currency {c}"));
        }
        v.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_and_regexes() {
        let m = |p: &str, s: &str| Pattern::new(p).unwrap().matches(s);
        assert!(m("*/make", "/usr/bin/make") && !m("*/make", "/usr/bin/cmake2"));
        assert!(m("cc1*", "cc1plus") && m("?c", "gc") && !m("?c", "gcc"));
        assert!(m("[a-c]x", "bx") && !m("[!a-c]x", "bx") && m("*", ""));
        assert!(m("re:^python[0-9.]*$", "python3.11") && !m("re:^python$", "python3"));
        assert!(Pattern::new("[abc").is_err() && Pattern::new("re:(").is_err());
    }

    #[test]
    fn rules_check_their_own_sense() {
        let base = RuleConfig { comm: Some("make".into()), tickets: Some(50), ..Default::default() };
        assert!(Rule::compile(0, 3, &base).is_ok());
        let e = |r: RuleConfig| Rule::compile(0, 1, &r).unwrap_err();
        assert!(e(RuleConfig { tickets: Some(0), ..base.clone() }).contains("tickets must be"));
        assert!(e(RuleConfig { cap: Some("0.5!".into()), background: Some(true), ..base.clone() }).contains("contradict"));
        assert!(e(RuleConfig { comm: None, ..base.clone() }).contains("at least one of user"));
        assert!(e(RuleConfig { tickets: None, ..base.clone() }).contains("at least one of tickets"));
        assert!(e(RuleConfig { user: Some("no-such-user-allot".into()), ..base.clone() }).contains("unknown"));
        let r = Rule::compile(0, 1, &RuleConfig { exe: Some("*/make".into()), user: Some("2901".into()), ..base }).unwrap();
        let f = Facts { uid: 2901, groups: &[], exe: "/usr/bin/make", comm: "make", cmdline: "make -j8" };
        assert!(r.test(&f).is_ok());
        assert!(r.test(&Facts { uid: 2902, ..f }).unwrap_err().contains("uid 2901"));
    }
}
