//! Scenario files: users describe their own workloads in TOML. Every error names the
//! file, the line and the field, and says what is allowed.
//!
//! ```toml
//! name = "two-users"
//! cpus = 1
//! duration = "60s"
//! quantum = "10ms"                  # optional (lottery, stride, hybrid)
//! schedulers = ["lottery", "bsd"]   # optional, default ["lottery"]
//! seed = 1                          # optional
//!
//! [[currency]]                      # optional; unknown users get funding 100
//! name = "alice"
//! funding = 200
//!
//! [[resource]]                      # kernel resources for kind = "kernel"
//! name = "biowait"
//! priority = 16
//!
//! [[task]]
//! name = "sim"
//! user = "alice"                    # currency, default "user"
//! tickets = 100                     # nice, policy = "fifo:50", cap = "1/2" or "0.5!",
//! count = 5                         # slice = "3ms", start = "1s", job = "..."
//! behaviour = { kind = "cpu", work = "30s" }
//! ```
//! Behaviour kinds: cpu {work?}, periodic {work, sleep, absolute?}, spinner {period},
//! interactive {work, think}, phased {phases = [{for, kind, ...}]}, fork_heavy
//! {parent_work, child_work, children?}, server {}, client {work, period?, server,
//! request}, kernel {work, resource, block}.

use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

use crate::scenario::{Run, Scenario};
use crate::sched::SchedSpec;
use crate::time::{parse_duration, Ns, SEC};
use crate::workload::{Behaviour, Cap, CurrencySpec, Policy, ResourceSpec, TaskSpec, Workload};

/// A scenario file error.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// Could not read it.
    #[error("cannot read scenario file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// Something in it is wrong.
    #[error("{path}:{line}: field `{field}`: {msg}")]
    Bad {
        /// The file.
        path: String,
        /// 1-based line.
        line: usize,
        /// The field.
        field: String,
        /// What is wrong and what is allowed.
        msg: String,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: Option<String>,
    description: Option<String>,
    cpus: Option<Spanned<i64>>,
    duration: Spanned<String>,
    quantum: Option<Spanned<String>>,
    sample: Option<Spanned<String>>,
    seed: Option<Spanned<i64>>,
    schedulers: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    currency: Vec<RawCurrency>,
    #[serde(default)]
    resource: Vec<RawResource>,
    #[serde(default)]
    task: Vec<RawTask>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCurrency {
    name: Spanned<String>,
    funding: Option<Spanned<i64>>,
    parent: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawResource {
    name: Spanned<String>,
    priority: Spanned<i64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTask {
    name: Spanned<String>,
    user: Option<Spanned<String>>,
    job: Option<String>,
    tickets: Option<Spanned<i64>>,
    nice: Option<Spanned<i64>>,
    policy: Option<Spanned<String>>,
    cap: Option<Spanned<String>>,
    slice: Option<Spanned<String>>,
    start: Option<Spanned<String>>,
    count: Option<Spanned<i64>>,
    behaviour: Spanned<RawBehaviour>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBehaviour {
    kind: Spanned<String>,
    #[serde(rename = "for")]
    len: Option<Spanned<String>>,
    work: Option<Spanned<String>>,
    sleep: Option<Spanned<String>>,
    absolute: Option<bool>,
    jitter: Option<f64>,
    spin: Option<bool>,
    period: Option<Spanned<String>>,
    think: Option<Spanned<String>>,
    parent_work: Option<Spanned<String>>,
    child_work: Option<Spanned<String>>,
    children: Option<Spanned<i64>>,
    server: Option<Spanned<String>>,
    request: Option<Spanned<String>>,
    resource: Option<Spanned<String>>,
    block: Option<Spanned<String>>,
    phases: Option<Vec<Spanned<RawBehaviour>>>,
}

struct Ctx<'a> {
    path: String,
    src: &'a str,
}

impl Ctx<'_> {
    fn line(&self, pos: usize) -> usize {
        self.src[..pos.min(self.src.len())].bytes().filter(|&b| b == b'\n').count() + 1
    }
    fn err<T>(&self, span: std::ops::Range<usize>, field: &str, msg: impl Into<String>) -> Result<T, FileError> {
        Err(FileError::Bad { path: self.path.clone(), line: self.line(span.start), field: field.into(), msg: msg.into() })
    }
    fn dur(&self, v: &Spanned<String>, field: &str) -> Result<Ns, FileError> {
        parse_duration(v.get_ref()).or_else(|m| self.err(v.span(), field, m))
    }
    fn need<'b, T>(&self, v: &'b Option<Spanned<T>>, at: std::ops::Range<usize>, field: &str, kind: &str) -> Result<&'b Spanned<T>, FileError> {
        match v {
            Some(x) => Ok(x),
            None => self.err(at, field, format!("behaviour kind {kind:?} needs `{field}`")),
        }
    }
    fn range(&self, v: &Spanned<i64>, field: &str, lo: i64, hi: i64) -> Result<i64, FileError> {
        let x = *v.get_ref();
        if x < lo || x > hi {
            return self.err(v.span(), field, format!("must be {lo}..{hi}, got {x}"));
        }
        Ok(x)
    }
}

/// The key named on the line of `pos`, with the nearest table header, for syntax and
/// type errors that toml reports by position only.
fn field_at(src: &str, pos: usize) -> String {
    let start = src[..pos.min(src.len())].rfind('\n').map(|i| i + 1).unwrap_or(0);
    let line = src[start..].lines().next().unwrap_or("");
    let key = line.split_once('=').map(|(k, _)| k.trim().trim_matches('"').to_string()).filter(|k| !k.is_empty() && !k.starts_with('['));
    let header =
        src[..start].lines().rev().find(|l| l.trim_start().starts_with('[')).map(|l| l.trim().trim_matches(|c| c == '[' || c == ']').to_string());
    match (header, key) {
        (Some(h), Some(k)) => format!("{h}.{k}"),
        (None, Some(k)) => k,
        (Some(h), None) => h,
        (None, None) => "(top level)".into(),
    }
}

/// Loads and validates a scenario file.
pub fn load(path: &Path) -> Result<Scenario, FileError> {
    let src = std::fs::read_to_string(path).map_err(|e| FileError::Read { path: path.display().to_string(), source: e })?;
    parse(&path.display().to_string(), &src)
}

/// Parses and validates scenario text (`path` names it in errors).
pub fn parse(path: &str, src: &str) -> Result<Scenario, FileError> {
    let cx = Ctx { path: path.to_string(), src };
    let raw: RawScenario = toml::from_str(src).map_err(|e| {
        let span = e.span().unwrap_or(0..0);
        let msg = e.message().trim().to_string();
        // Unknown-field messages name the field themselves.
        let field = if let Some(rest) = msg.strip_prefix("unknown field `") {
            rest.split('`').next().unwrap_or("").to_string()
        } else if let Some(rest) = msg.strip_prefix("missing field `") {
            rest.split('`').next().unwrap_or("").to_string()
        } else {
            field_at(src, span.start)
        };
        FileError::Bad { path: path.to_string(), line: cx.line(span.start), field, msg }
    })?;
    let cpus = match &raw.cpus {
        Some(c) => cx.range(c, "cpus", 1, 1024)? as usize,
        None => 1,
    };
    let duration = cx.dur(&raw.duration, "duration")?;
    if duration == 0 || duration > 3600 * SEC {
        return cx.err(raw.duration.span(), "duration", format!("must be more than 0 and at most 1h, got {:?}", raw.duration.get_ref()));
    }
    let mut w = Workload::new(cpus, duration);
    if let Some(q) = &raw.quantum {
        let v = cx.dur(q, "quantum")?;
        if v == 0 {
            return cx.err(q.span(), "quantum", "must be more than 0 (e.g. \"10ms\")");
        }
        w.quantum = Some(v);
    }
    if let Some(s) = &raw.sample {
        let v = cx.dur(s, "sample")?;
        if v == 0 {
            return cx.err(s.span(), "sample", "must be more than 0 (e.g. \"100ms\")");
        }
        w.sample = v;
    }
    for c in &raw.currency {
        let funding = match &c.funding {
            Some(f) => cx.range(f, "currency.funding", 1, 10_000)? as u32,
            None => 100,
        };
        if w.currencies.iter().any(|x| &x.name == c.name.get_ref()) {
            return cx.err(c.name.span(), "currency.name", format!("currency {:?} is defined twice", c.name.get_ref()));
        }
        w.currencies.push(CurrencySpec { name: c.name.get_ref().clone(), parent: c.parent.as_ref().map(|p| p.get_ref().clone()), funding });
    }
    for c in &raw.currency {
        if let Some(p) = &c.parent {
            if !w.currencies.iter().any(|x| &x.name == p.get_ref()) {
                let names: Vec<&str> = w.currencies.iter().map(|x| x.name.as_str()).collect();
                return cx.err(p.span(), "currency.parent", format!("unknown currency {:?}; defined: {}", p.get_ref(), names.join(", ")));
            }
        }
    }
    // Parent chains must end at the base currency.
    for c in &w.currencies {
        let mut seen = vec![c.name.clone()];
        let mut cur = c.parent.clone();
        while let Some(p) = cur {
            if seen.contains(&p) {
                let span = raw.currency.iter().find(|x| x.name.get_ref() == &c.name).map(|x| x.name.span()).unwrap_or(0..0);
                return cx.err(span, "currency.parent", format!("currency {:?} is funded in a cycle ({} → {p})", c.name, seen.join(" → ")));
            }
            seen.push(p.clone());
            cur = w.currencies.iter().find(|x| x.name == p).and_then(|x| x.parent.clone());
        }
    }
    for r in &raw.resource {
        let p = cx.range(&r.priority, "resource.priority", 0, 49)? as u8;
        w.resources.push(ResourceSpec { name: r.name.get_ref().clone(), priority: p });
    }
    if raw.task.is_empty() {
        return cx.err(0..0, "task", "a scenario needs at least one [[task]]");
    }
    for t in &raw.task {
        let behaviour = behaviour(&cx, &t.behaviour, &w, false)?;
        let count = match &t.count {
            Some(c) => cx.range(c, "task.count", 1, 100_000)? as usize,
            None => 1,
        };
        let user = t.user.as_ref().map(|u| u.get_ref().clone()).unwrap_or_else(|| "user".into());
        let mut spec = TaskSpec::new(t.name.get_ref(), &user, behaviour);
        if let Some(x) = &t.tickets {
            spec.tickets = cx.range(x, "task.tickets", 1, 10_000)? as u32;
        }
        if let Some(x) = &t.nice {
            spec.nice = cx.range(x, "task.nice", -20, 19)? as i32;
        }
        if let Some(p) = &t.policy {
            spec.policy = match p.get_ref().as_str() {
                "normal" | "other" => Policy::Normal,
                s => match s.strip_prefix("fifo:").and_then(|n| n.parse::<u8>().ok()).filter(|n| (1..=99).contains(n)) {
                    Some(n) => Policy::Fifo(n),
                    None => return cx.err(p.span(), "task.policy", format!("must be \"normal\" or \"fifo:N\" with N 1..99, got {s:?}")),
                },
            };
        }
        if let Some(c) = &t.cap {
            spec.cap = Some(parse_cap(c.get_ref()).or_else(|m| cx.err(c.span(), "task.cap", m))?);
        }
        if let Some(s) = &t.slice {
            let v = cx.dur(s, "task.slice")?;
            if !(100_000..=100_000_000).contains(&v) {
                return cx.err(s.span(), "task.slice", format!("must be 0.1ms..100ms (sched_setattr limits), got {:?}", s.get_ref()));
            }
            spec.slice = Some(v);
        }
        if let Some(s) = &t.start {
            spec.start = cx.dur(s, "task.start")?;
        }
        if let Some(j) = &t.job {
            spec.job = j.clone();
        }
        for i in 0..count {
            let mut s = spec.clone();
            if count > 1 {
                s.name = format!("{}.{}", spec.name, i + 1);
                if t.job.is_none() {
                    s.job = s.name.clone();
                }
            }
            if w.tasks.iter().any(|x| x.name == s.name) {
                return cx.err(t.name.span(), "task.name", format!("task name {:?} is used twice", s.name));
            }
            w.tasks.push(s);
        }
    }
    // Clients must name a server task.
    for t in &raw.task {
        check_servers(&cx, &t.behaviour, &w)?;
    }
    let schedulers: Vec<SchedSpec> = match &raw.schedulers {
        None => vec![SchedSpec::named("lottery")],
        Some(v) if v.is_empty() => return cx.err(0..0, "schedulers", "must name at least one scheduler"),
        Some(v) => v.iter().map(|s| SchedSpec::parse(s.get_ref()).or_else(|m| cx.err(s.span(), "schedulers", m))).collect::<Result<_, _>>()?,
    };
    let seed = match &raw.seed {
        Some(s) => cx.range(s, "seed", 0, i64::MAX)? as u64,
        None => 1,
    };
    let name = raw.name.clone().unwrap_or_else(|| Path::new(path).file_stem().map(|s| s.to_string_lossy().to_string()).unwrap_or_default());
    Ok(Scenario {
        name,
        title: raw.description.clone().unwrap_or_else(|| format!("scenario file {path}")),
        source: path.to_string(),
        seed,
        runs: schedulers.into_iter().map(|s| Run { label: s.label(), sched: s, workload: w.clone() }).collect(),
        check: None,
        plots: vec![],
    })
}

fn check_servers(cx: &Ctx, b: &Spanned<RawBehaviour>, w: &Workload) -> Result<(), FileError> {
    if let Some(s) = &b.get_ref().server {
        match w.tasks.iter().find(|t| &t.name == s.get_ref()) {
            Some(t) if matches!(t.behaviour, Behaviour::Server) => {}
            Some(_) => return cx.err(s.span(), "behaviour.server", format!("task {:?} is not a server (kind = \"server\")", s.get_ref())),
            None => return cx.err(s.span(), "behaviour.server", format!("no task named {:?}", s.get_ref())),
        }
    }
    for p in b.get_ref().phases.iter().flatten() {
        check_servers(cx, p, w)?;
    }
    Ok(())
}

/// Parses a cap with allot-model's grammar ("0.5", "1/2" or "50%" soft, "0.5!" hard;
/// soft 0 is background, hard 0 is refused) and EBS's bound: "the proportion of a single
/// CPU's capacity that the task may use", 0.0 to 1.0 (EBS 2004 "CPU usage rate caps").
/// allot's own bounds (a job may have more than 1 CPU; a hard cap needs the kernel's 1 ms
/// quota) do not apply to a simulated task.
pub fn parse_cap(s: &str) -> Result<Cap, String> {
    let cap = Cap::parse_form(s).map_err(|e| e.to_string())?;
    if cap.cpus > 1.0 {
        let why = format!("EBS caps one task to at most 1 CPU (EBS 2004), got {}", cap.cpus);
        return Err(allot_model::ModelError::BadCap { got: s.to_string(), why }.to_string());
    }
    Ok(cap)
}

fn behaviour(cx: &Ctx, b: &Spanned<RawBehaviour>, w: &Workload, in_phase: bool) -> Result<Behaviour, FileError> {
    let r = b.get_ref();
    let kind = r.kind.get_ref().as_str();
    let at = r.kind.span();
    let d = |v: &Option<Spanned<String>>, f: &str| -> Result<Ns, FileError> { cx.dur(cx.need(v, at.clone(), f, kind)?, f) };
    let pos = |v: Ns, f: &str, s: &Option<Spanned<String>>| -> Result<Ns, FileError> {
        if v == 0 {
            return cx.err(s.as_ref().map(|x| x.span()).unwrap_or(at.clone()), f, format!("must be more than 0 for kind {kind:?}"));
        }
        Ok(v)
    };
    if let (Some(l), false) = (&r.len, in_phase) {
        return cx.err(l.span(), "behaviour.for", "`for` is only allowed inside `phases`");
    }
    let out = match kind {
        "cpu" => Behaviour::Cpu {
            work: match &r.work {
                Some(x) => Some(pos(cx.dur(x, "work")?, "work", &r.work)?),
                None => None,
            },
        },
        "periodic" => Behaviour::Periodic {
            work: pos(d(&r.work, "work")?, "work", &r.work)?,
            sleep: pos(d(&r.sleep, "sleep")?, "sleep", &r.sleep)?,
            absolute: r.absolute.unwrap_or(false),
            jitter: match r.jitter {
                Some(j) if !(0.0..1.0).contains(&j) => return cx.err(at, "jitter", format!("must be a fraction 0..1 (e.g. 0.1 for ±10%), got {j}")),
                Some(j) => j,
                None => 0.0,
            },
        },
        "spinner" => Behaviour::Spinner { period: pos(d(&r.period, "period")?, "period", &r.period)? },
        "interactive" => {
            Behaviour::Interactive { work: pos(d(&r.work, "work")?, "work", &r.work)?, think: pos(d(&r.think, "think")?, "think", &r.think)? }
        }
        "fork_heavy" => Behaviour::ForkHeavy {
            parent_work: pos(d(&r.parent_work, "parent_work")?, "parent_work", &r.parent_work)?,
            child_work: pos(d(&r.child_work, "child_work")?, "child_work", &r.child_work)?,
            children: match &r.children {
                Some(c) => Some(cx.range(c, "children", 1, 10_000_000)? as u64),
                None => None,
            },
        },
        "server" => Behaviour::Server,
        "client" => Behaviour::Client {
            work: pos(d(&r.work, "work")?, "work", &r.work)?,
            period: match &r.period {
                Some(p) => cx.dur(p, "period")?,
                None => 0,
            },
            server: cx.need(&r.server, at.clone(), "server", kind)?.get_ref().clone(),
            request: pos(d(&r.request, "request")?, "request", &r.request)?,
            spin: r.spin.unwrap_or(false),
        },
        "kernel" => {
            let res = cx.need(&r.resource, at.clone(), "resource", kind)?;
            if !w.resources.iter().any(|x| &x.name == res.get_ref()) {
                let names: Vec<&str> = w.resources.iter().map(|x| x.name.as_str()).collect();
                return cx.err(
                    res.span(),
                    "resource",
                    format!(
                        "unknown resource {:?}; define it in [[resource]] (defined: {})",
                        res.get_ref(),
                        if names.is_empty() { "none".into() } else { names.join(", ") }
                    ),
                );
            }
            Behaviour::Kernel {
                work: pos(d(&r.work, "work")?, "work", &r.work)?,
                resource: res.get_ref().clone(),
                block: pos(d(&r.block, "block")?, "block", &r.block)?,
            }
        }
        "phased" => {
            if in_phase {
                return cx.err(at, "kind", "phases cannot nest");
            }
            let phases = cx.need(&None::<Spanned<String>>, at.clone(), "phases", kind).err();
            let list = match &r.phases {
                Some(p) if !p.is_empty() => p,
                _ => {
                    return Err(phases.unwrap_or(FileError::Bad {
                        path: cx.path.clone(),
                        line: cx.line(at.start),
                        field: "phases".into(),
                        msg: "kind \"phased\" needs a non-empty `phases` list".into(),
                    }))
                }
            };
            let mut out = Vec::new();
            for p in list {
                let len = match &p.get_ref().len {
                    Some(l) => pos(cx.dur(l, "for")?, "for", &p.get_ref().len)?,
                    None => return cx.err(p.span(), "phases.for", "each phase needs `for` (its wall-clock length, e.g. \"15s\")"),
                };
                out.push((len, behaviour(cx, p, w, true)?));
            }
            Behaviour::Phased { phases: out }
        }
        other => {
            return cx.err(
                at,
                "kind",
                format!("unknown behaviour kind {other:?}; kinds: cpu, periodic, spinner, interactive, phased, fork_heavy, server, client, kernel"),
            );
        }
    };
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::parse_cap;
    use crate::workload::Cap;

    #[test]
    fn caps_read_as_allot_reads_them_within_one_cpu() {
        assert_eq!(parse_cap("1/2").unwrap(), Cap { cpus: 0.5, hard: false });
        assert_eq!(parse_cap("50%!").unwrap(), Cap { cpus: 0.5, hard: true });
        assert_eq!(parse_cap("100%").unwrap(), Cap { cpus: 1.0, hard: false });
        // EBS has no kernel quota floor: a tiny hard cap is EBS's to allow.
        assert_eq!(parse_cap("0.001!").unwrap(), Cap { cpus: 0.001, hard: true });
        assert!(parse_cap("0").unwrap().is_background());
        for (bad, why) in
            [("1.5", "at most 1 CPU"), ("150%!", "at most 1 CPU"), ("0!", "hard cap of 0"), ("x", "not a number"), ("2/0", "denominator")]
        {
            let e = parse_cap(bad).unwrap_err();
            assert!(e.contains(why) && e.contains(&format!("{bad:?}")), "{bad}: {e}");
        }
    }
}
