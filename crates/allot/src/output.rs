//! How the CLI prints replies: tables a person reads at a glance, or JSON.

use serde_json::Value;
use std::fmt::Write;

/// Prints `data` as JSON or through `human`.
pub fn print(json: bool, data: &Value, human: impl Fn(&Value) -> String) -> anyhow::Result<i32> {
    if json {
        println!("{}", serde_json::to_string_pretty(data)?);
    } else {
        print!("{}", human(data));
    }
    Ok(0)
}

fn s(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        v => v.to_string(),
    }
}

fn table(header: &[&str], rows: Vec<Vec<String>>, last_free: bool) -> String {
    let mut w: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in &rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let mut out = String::new();
    let line = |cells: Vec<String>, out: &mut String| {
        let n = cells.len();
        for (i, c) in cells.into_iter().enumerate() {
            if i + 1 == n && last_free {
                out.push_str(&c);
            } else {
                let _ = write!(out, "{:<width$}  ", c, width = w[i]);
            }
        }
        out.push('\n');
    };
    line(header.iter().map(|h| h.to_string()).collect(), &mut out);
    for r in rows {
        line(r, &mut out);
    }
    out
}

/// `allot show`.
pub fn show(d: &Value) -> String {
    let empty = vec![];
    let jobs = d["jobs"].as_array().unwrap_or(&empty);
    let rows = jobs
        .iter()
        .map(|j| {
            let pids: Vec<String> = j["pids"].as_array().unwrap_or(&empty).iter().map(s).collect();
            let pids = if pids.len() > 4 { format!("{},… ({})", pids[..3].join(","), pids.len()) } else { pids.join(",") };
            let mut cmd = s(&j["command"]);
            if cmd.chars().count() > 48 {
                cmd = cmd.chars().take(47).collect::<String>() + "…";
            }
            vec![
                s(&j["id"]),
                s(&j["user"]),
                s(&j["currency"]),
                s(&j["tickets"]),
                s(&j["funding"]),
                format!("{:.2}", j["entitlement"].as_f64().unwrap_or(0.0)),
                format!("{:.2}", j["usage"].as_f64().unwrap_or(0.0)),
                s(&j["cap"]),
                state(j),
                pids,
                cmd,
            ]
        })
        .collect();
    let mut out = table(&["JOB", "USER", "CURRENCY", "TICKETS", "FUNDING", "ENTITLED", "USAGE", "CAP", "STATE", "PIDS", "COMMAND"], rows, true);
    out.push('\n');
    out.push_str(&currencies(&d["currencies"]));
    let _ =
        writeln!(out, "\nENTITLED and USAGE in CPUs (the machine has {}); entitlement counts active jobs and the CPUs they may use.", s(&d["ncpu"]));
    let _ = writeln!(out, "STATE: bg background, boost boosted, focus focused, held soft cap held, nice:N niced.");
    out
}

/// A job's dynamic state in a few words.
fn state(j: &Value) -> String {
    let mut v = vec![];
    let flag = |k: &str| j[k].as_bool() == Some(true);
    if flag("background") {
        v.push("bg".to_string());
    }
    if flag("focus") {
        v.push("focus".into());
    } else if flag("boost") {
        v.push("boost".into());
    }
    if flag("held") {
        v.push("held".into());
    }
    if let Some(n) = j["nice"].as_i64().filter(|&n| n != 0) {
        v.push(format!("nice:{n}"));
    }
    if v.is_empty() {
        "-".into()
    } else {
        v.join(",")
    }
}

fn currencies(c: &Value) -> String {
    let empty = vec![];
    let rows = c
        .as_array()
        .unwrap_or(&empty)
        .iter()
        .map(|c| {
            vec![s(&c["name"]), s(&c["kind"]), s(&c["funding"]), s(&c["jobs"]), s(&c["active"]), format!("{:.2}", c["usage"].as_f64().unwrap_or(0.0))]
        })
        .collect();
    table(&["CURRENCY", "KIND", "FUNDING", "JOBS", "ACTIVE", "USAGE"], rows, true)
}

/// `allot fund`.
pub fn fund(d: &Value) -> String {
    if d.is_array() {
        currencies(d)
    } else {
        format!("{}: funding {}\n", s(&d["currency"]), s(&d["funding"]))
    }
}

/// `allot set`.
pub fn changed(d: &Value) -> String {
    let jobs: Vec<String> = d["jobs"].as_array().map(|a| a.iter().map(s).collect()).unwrap_or_default();
    format!("changed job{} {}\n", if jobs.len() == 1 { "" } else { "s" }, jobs.join(", "))
}

/// `allot status`.
pub fn status(d: &Value) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "allot daemon {} (pid {}, up {} s)", s(&d["version"]), s(&d["pid"]), s(&d["uptime_s"]));
    let _ = writeln!(out, "cgroup            {} at {}", s(&d["cgroup_version"]), s(&d["cgroup_root"]));
    let _ = writeln!(out, "cpus              {}", s(&d["ncpu"]));
    let _ = writeln!(out, "jobs              {}", s(&d["jobs"]));
    let auto = if d["auto_place"].as_bool() == Some(true) { format!("on, uid >= {}", s(&d["min_uid"])) } else { "off".into() };
    let _ = writeln!(out, "auto-place        {auto}");
    if let Some(f) = d["features"].as_object() {
        for (k, v) in f {
            let _ = writeln!(out, "{:<17} {}", k.replace('_', "-"), if v.as_bool() == Some(true) { "yes" } else { "NO" });
        }
    }
    for dgr in d["degraded"].as_array().into_iter().flatten() {
        let _ = writeln!(out, "degraded:         {}", s(dgr));
    }
    out
}
