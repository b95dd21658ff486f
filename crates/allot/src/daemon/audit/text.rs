//! How a record spells what happened: a request as the CLI would (client strings quoted,
//! escaped and cut, pids deduplicated and bounded), and the changes between two desired
//! states with each job's settings before and after.

use super::super::registry::{CurrencyId, Desired, JobSpec};
use super::{MAX_ARG, PIDS_SHOWN};
use crate::proto::{AuditChange, CapChange, MemChange, Request};
use std::collections::HashSet;

fn settings(j: &JobSpec) -> String {
    format!(
        "tickets {}, cap {}, {}, focus {}{}{}",
        j.tickets.get(),
        j.cap.map_or("none".into(), |c| c.to_string()),
        if j.background { "background" } else { "foreground" },
        if j.focus { "on" } else { "off" },
        j.rule.as_ref().map(|r| format!(", rule {r}")).unwrap_or_default(),
        j.mem.map(|m| format!(", memory cap {m}")).unwrap_or_default()
    )
}

/// What changed between two desired states, and the jobs it touched.
pub fn diff(a: &Desired, b: &Desired, name: impl Fn(&CurrencyId) -> String) -> (Vec<AuditChange>, Vec<JobSpec>) {
    let mut out = vec![];
    let mut touched = vec![];
    // A job as `show` names it (`alice/default`, `3`); a numbered job's owner is said too.
    let label = |j: &JobSpec| match j.id {
        super::super::registry::JobId::Default(_) => format!("{} in {}", j.id, name(&j.currency)),
        super::super::registry::JobId::Numbered(_) => format!("{} of uid {} in {}", j.id, j.owner, name(&j.currency)),
    };
    let mut change = |what: String, before: String, after: String| out.push(AuditChange { what, before, after });
    for (id, j) in &b.jobs {
        match a.jobs.get(id) {
            None => change(label(j), "-".into(), settings(j)),
            Some(old) if old != j => change(label(j), settings(old), settings(j)),
            _ => continue,
        }
        touched.push(j.clone());
    }
    for (id, j) in &a.jobs {
        if !b.jobs.contains_key(id) {
            change(label(j), settings(j), "-".into());
            touched.push(j.clone());
        }
    }
    for (c, f) in &b.funding {
        if a.funding.get(c) != Some(f) {
            change(format!("currency {}", name(c)), a.funding.get(c).map_or("-".into(), |x| format!("funding {x}")), format!("funding {f}"));
        }
    }
    let cap = |c: &Option<allot_model::Cap>| format!("cap {}", c.map_or("none".into(), |x| x.to_string()));
    for (c, x) in &b.caps {
        if a.caps.get(c) != Some(x) {
            change(format!("currency {}", name(c)), a.caps.get(c).map_or("-".into(), cap), cap(x));
        }
    }
    (out, touched)
}

/// A client's string as a record spells it: bare when it is a plain word, else quoted with
/// every control, quote and bidi character escaped (Rust's `{:?}`), and cut at
/// [`MAX_ARG`] characters with its length said.
pub fn arg(s: &str) -> String {
    let plain = !s.is_empty() && s.len() <= MAX_ARG && s.chars().all(|c| c.is_ascii_alphanumeric() || "._-/:!%+@,".contains(c));
    if plain {
        return s.to_string();
    }
    let cut: String = s.chars().take(MAX_ARG).collect();
    if cut.len() < s.len() {
        format!("{cut:?}…({} bytes)", s.len())
    } else {
        format!("{cut:?}")
    }
}

/// `set`'s pids: each once, at most [`PIDS_SHOWN`], with how many there were.
pub fn pids(p: &[i64]) -> String {
    let mut seen = HashSet::new();
    let distinct: Vec<i64> = p.iter().copied().filter(|x| seen.insert(*x)).collect();
    let mut s = distinct.iter().take(PIDS_SHOWN).map(|p| p.to_string()).collect::<Vec<_>>().join(" ");
    let more = distinct.len() > PIDS_SHOWN;
    if more {
        s.push_str(" …");
    }
    if more || distinct.len() != p.len() {
        let n = distinct.len();
        s.push_str(&format!(" ({n} pid{}", if n == 1 { "" } else { "s" }));
        if more {
            s.push_str(&format!(", first {PIDS_SHOWN} shown"));
        }
        if distinct.len() != p.len() {
            s.push_str(&format!(", {} given", p.len()));
        }
        s.push(')');
    }
    s
}

/// A request as the CLI would spell it (client strings through [`arg`], pids through
/// [`pids`]): bounded, one line.
pub fn describe(r: &Request) -> String {
    let opt = |k: &str, v: &Option<String>| v.as_ref().map(|v| format!(" {k} {}", arg(v))).unwrap_or_default();
    let num = |k: &str, v: Option<u32>| v.map(|v| format!(" {k} {v}")).unwrap_or_default();
    let cap = |c: &CapChange| match c {
        CapChange::Keep => String::new(),
        CapChange::Clear => " --cap none".into(),
        CapChange::Set(c) => format!(" --cap {c}"),
    };
    let force = |f: bool| if f { " --force" } else { "" };
    match r {
        Request::Run { tickets, currency, cap, background, force: f, mem, oom_group } => format!(
            "run{}{}{}{}{}{}{}",
            num("-t", tickets.map(|t| t.get())),
            opt("--currency", currency),
            cap.map(|c| format!(" --cap {c}")).unwrap_or_default(),
            mem.map(|m| format!(" --mem {m}")).unwrap_or_default(),
            if *oom_group { " --oom-group" } else { "" },
            if *background { " --background" } else { "" },
            force(*f)
        ),
        Request::Set { pids: p, tickets, cap: c, background, force: f, mem, oom_group } => format!(
            "set {}{}{}{}{}{}{}",
            pids(&p.as_slice().iter().map(|p| i64::from(p.get())).collect::<Vec<_>>()),
            num("-t", tickets.map(|t| t.get())),
            cap(c),
            match mem {
                MemChange::Keep => String::new(),
                MemChange::Clear => " --mem none".into(),
                MemChange::Set(m) => format!(" --mem {m}"),
            },
            match oom_group {
                Some(true) => " --oom-group on",
                Some(false) => " --oom-group off",
                None => "",
            },
            match background {
                Some(true) => " --background",
                Some(false) => " --foreground",
                None => "",
            },
            force(*f)
        ),
        Request::Fund { currency, funding, cap: c } => {
            format!(
                "fund{}{}{}",
                currency.as_ref().map(|c| format!(" {}", arg(c))).unwrap_or_default(),
                funding.map(|f| format!(" {f}")).unwrap_or_default(),
                cap(c)
            )
        }
        Request::Focus { pid, on } => format!("focus{} {pid}", if *on { "" } else { " --off" }),
        Request::Move { pid, currency, force: f } => format!("move {pid} {}{}", arg(currency), force(*f)),
        Request::Status {} => "status".into(),
        Request::Show { user } => format!("show{}", opt("--user", user)),
        Request::Log { .. } => "log".into(),
        Request::Explain { target } => format!("explain {}", arg(target)),
        Request::RulesTest { pid } => format!("rules test {pid}"),
    }
}

/// Does a request ask for a change (and so belong in the audit trail)?
pub fn changes_something(r: &Request) -> bool {
    match r {
        Request::Status {} | Request::Show { .. } | Request::Log { .. } | Request::Explain { .. } | Request::RulesTest { .. } => false,
        Request::Fund { funding, cap, .. } => funding.is_some() || !cap.is_keep(),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{Pid, Pids};
    use allot_model::{Cap, Funding, Tickets};

    #[test]
    fn describe_quotes_escapes_and_bounds_what_clients_send() {
        let set = |pids: Vec<i64>| {
            describe(&Request::Set {
                pids: Pids::new(pids).unwrap(),
                tickets: Tickets::new(5).ok(),
                cap: CapChange::Keep,
                background: None,
                force: false,
                mem: crate::proto::MemChange::Keep,
                oom_group: None,
            })
        };
        assert_eq!(set(vec![100, 101, 102]), "set 100 101 102 -t 5");
        assert_eq!(set(vec![7; 1024]), "set 7 (1 pid, 1024 given) -t 5");
        assert_eq!(set((100..1124).collect()), "set 100 101 102 103 104 105 106 107 … (1024 pids, first 8 shown) -t 5");
        let run = |c: &str| {
            describe(&Request::Run {
                tickets: None,
                currency: Some(c.into()),
                cap: "1/2!".parse().ok(),
                background: false,
                force: false,
                mem: None,
                oom_group: false,
            })
        };
        assert_eq!(run("ci"), "run --currency ci --cap 0.5!");
        let mem = describe(&Request::Run {
            tickets: None,
            currency: None,
            cap: None,
            background: true,
            force: false,
            mem: "64M!".parse().ok(),
            oom_group: false,
        });
        assert_eq!(mem, "run --mem 64M! --background");
        let unmem = |m| {
            describe(&Request::Set {
                pids: Pids::new([9]).unwrap(),
                tickets: None,
                cap: CapChange::Keep,
                background: None,
                force: false,
                mem: m,
                oom_group: None,
            })
        };
        assert_eq!((unmem(MemChange::Clear), unmem(MemChange::Set("4G".parse().unwrap()))), ("set 9 --mem none".into(), "set 9 --mem 4G".into()));
        let mut j = JobSpec::new(super::super::super::registry::JobId::Numbered(3), CurrencyId::User(7), 7);
        j.mem = "64M!".parse().ok();
        assert_eq!(settings(&j), "tickets 100, cap none, foreground, focus off, memory cap 64M!");
        let forged = run("x\naudit: uid 0 (pid 1) fund\r\u{1b}[2K\u{202e}");
        assert_eq!(forged, r#"run --currency "x\naudit: uid 0 (pid 1) fund\r\u{1b}[2K\u{202e}" --cap 0.5!"#);
        assert!(!forged.contains(['\n', '\r', '\u{1b}', '\u{202e}']));
        assert_eq!(arg("my team"), "\"my team\"");
        let long = arg(&format!("0.5{}", "0".repeat(50_000)));
        assert!(long.len() < 100 && long.ends_with("…(50003 bytes)"), "{long}");
        assert_eq!(describe(&Request::Move { pid: Pid::new(5).unwrap(), currency: "a\"b".into(), force: true }), r#"move 5 "a\"b" --force"#);
    }

    #[test]
    fn a_currency_cap_is_described_and_its_change_recorded() {
        let fund =
            |funding: Option<i64>, cap| Request::Fund { currency: Some("alice".into()), funding: funding.and_then(|f| Funding::new(f).ok()), cap };
        assert_eq!(describe(&fund(Some(300), CapChange::Set(Cap::parse_currency("4!").unwrap()))), "fund alice 300 --cap 4!");
        assert_eq!(describe(&fund(None, CapChange::Clear)), "fund alice --cap none");
        assert!(changes_something(&fund(None, CapChange::Clear)) && !changes_something(&fund(None, CapChange::Keep)));
        let a = Desired::default();
        let mut b = a.clone();
        b.caps.insert(CurrencyId::User(1000), Some(allot_model::Cap::parse_currency("4!").unwrap()));
        let mut c = b.clone();
        c.caps.insert(CurrencyId::User(1000), None);
        let said = |x: &Desired, y: &Desired| {
            let ch = diff(x, y, |_| "alice".into()).0;
            ch.iter().map(|c| format!("{}: {} -> {}", c.what, c.before, c.after)).collect::<Vec<_>>()
        };
        assert_eq!(said(&a, &b), ["currency alice: - -> cap 4!"]);
        assert_eq!(said(&b, &c), ["currency alice: cap 4! -> cap none"]);
        assert!(said(&c, &c).is_empty());
    }

    #[test]
    fn a_job_is_named_in_the_trail_as_show_names_it() {
        use super::super::super::registry::JobId;
        let a = Desired::default();
        let mut b = a.clone();
        // uid 0's name is root wherever the tests run (NSS, as show reads it).
        for id in [JobId::Default(0), JobId::Numbered(7)] {
            b.jobs.insert(id, JobSpec::new(id, CurrencyId::User(0), 0));
        }
        let what: Vec<String> = diff(&a, &b, |_| "root".into()).0.into_iter().map(|c| c.what).collect();
        assert_eq!(what, ["job root/default in root", "job 7 of uid 0 in root"]);
    }
}
