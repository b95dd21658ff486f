use super::*;
use crate::config::Config;
use std::collections::BTreeSet;
use std::path::Path;

const PROBE: &str = "zz_no_such_setting";

fn load(text: &str) -> Result<Config, crate::config::ConfigError> {
    Config::parse(Path::new("test.toml"), text)
}

/// `lines` under the table's probe (its header and what it needs to load).
fn in_table(t: &Table, lines: &str) -> String {
    if t.probe.is_empty() {
        format!("{lines}\n")
    } else {
        format!("{}\n{lines}\n", t.probe)
    }
}

/// The fields serde's derive accepts in a table: a setting it does not know is refused
/// with the list of those it does ("unknown field `x`, expected one of `a`, `b`").
fn fields_the_loader_accepts(t: &Table) -> BTreeSet<String> {
    let e = load(&in_table(t, &format!("{PROBE} = 1"))).expect_err("an unknown setting is refused").message;
    assert!(e.contains("unknown field"), "{}: {e}", t.header);
    e.split('`').skip(1).step_by(2).filter(|k| *k != PROBE).map(str::to_string).collect()
}

fn table(header: &str) -> &'static Table {
    TABLES.iter().find(|t| t.header == header).unwrap()
}

/// The config has a field this page does not document, or the page documents one it does
/// not have: either fails here, naming it.
#[test]
fn every_setting_the_loader_accepts_is_on_the_page_and_only_those() {
    let tables: BTreeSet<String> = TABLES.iter().filter(|t| !t.field.is_empty()).map(|t| t.field.to_string()).collect();
    let mut top: BTreeSet<String> = table("").keys.iter().map(|k| k.name.to_string()).collect();
    top.extend(tables);
    assert_eq!(fields_the_loader_accepts(table("")), top, "top-level settings and tables (config.rs Config against allot.toml(5))");
    for t in TABLES.iter().filter(|t| !t.field.is_empty() && t.field != "funding") {
        let keys: BTreeSet<String> = t.keys.iter().map(|k| k.name.to_string()).collect();
        assert_eq!(fields_the_loader_accepts(t), keys, "{} (config.rs against allot.toml(5))", t.header);
    }
    // [funding] is a map: any name is a key.
    load("[funding]\nanyone = 5\n").expect("[funding] takes any name");
}

#[test]
fn every_default_stated_is_the_built_in_one() {
    let defaults = format!("{:?}", Config::default());
    let mut n = 0;
    for t in TABLES {
        for k in t.keys {
            if let DefaultIs::Value(v) = k.default {
                let text = in_table(t, &format!("{} = {v}", k.name));
                let c = load(&text).unwrap_or_else(|e| panic!("{}: {e}", dotted(t, k)));
                assert_eq!(format!("{c:?}"), defaults, "{} = {v} is not the built-in default", dotted(t, k));
                n += 1;
            }
        }
    }
    assert!(n >= 20, "{n} defaults checked");
}

/// A value in range loads, or is refused only by another setting's rule (tick_ms 60000
/// is in range, but above the default boost_window_ms).
fn accepted(t: &Table, k: &Key, v: &str) {
    let text = in_table(t, &format!("{} = {v}", k.name));
    if let Err(e) = load(&text) {
        assert!(by_another(t, k, &e.message), "{} = {v} is in the page's range, but refused: {e}", dotted(t, k));
    }
}

/// A value out of range is refused by its own rule (or its type), not another's.
fn refused(t: &Table, k: &Key, v: &str) {
    let text = in_table(t, &format!("{} = {v}", k.name));
    match load(&text) {
        Ok(_) => panic!("{} = {v} is outside the page's range, but loads", dotted(t, k)),
        Err(e) => assert!(!by_another(t, k, &e.message), "{} = {v} is refused only by another setting's rule: {e}", dotted(t, k)),
    }
}

/// The message is another setting's (it starts with that setting's dotted name, whole).
fn by_another(t: &Table, k: &Key, message: &str) -> bool {
    let names = |d: &str| message.strip_prefix(d).is_some_and(|rest| !rest.starts_with(|c: char| c.is_alphanumeric() || c == '_'));
    TABLES.iter().flat_map(|t| t.keys.iter().map(move |k| dotted(t, k))).any(|d| d != dotted(t, k) && names(&d))
}

#[test]
fn every_range_stated_is_the_loaders() {
    let mut n = 0;
    for t in TABLES {
        for k in t.keys {
            match k.allowed {
                Allowed::Ints(lo, hi) => {
                    accepted(t, k, &lo.to_string());
                    accepted(t, k, &hi.to_string());
                    refused(t, k, &(lo - 1).to_string());
                    refused(t, k, &(hi + 1).to_string());
                }
                Allowed::AtLeast(lo) => {
                    accepted(t, k, &lo.to_string());
                    refused(t, k, &(lo - 1).to_string());
                }
                Allowed::Floats(lo, hi) => {
                    accepted(t, k, &format!("{lo:?}"));
                    accepted(t, k, &format!("{hi:?}"));
                    refused(t, k, &format!("{:?}", lo - 0.5));
                    refused(t, k, &format!("{:?}", hi + 0.5));
                }
                Allowed::Words(_) => continue,
            }
            n += 1;
        }
    }
    assert!(n >= 13, "{n} ranges checked");
}

#[test]
fn the_ranges_in_words_are_the_loaders_too() {
    let top = table("");
    let e = load("funding_authority = \"zz\"").unwrap_err().message;
    let variants: BTreeSet<&str> = e.split('`').skip(1).step_by(2).filter(|v| *v != "zz").collect();
    assert_eq!(variants, BTreeSet::from(["local", "config"]), "{e}");
    let fa = top.keys.iter().find(|k| k.name == "funding_authority").unwrap();
    assert!(matches!(fa.allowed, Allowed::Words("\"local\" or \"config\"")));
    let p = table("[policy]");
    for (v, ok) in [("0.0", false), ("0.01", true), ("1.0", true), ("1.01", false)] {
        assert_eq!(load(&in_table(p, &format!("boost_below = {v}"))).is_ok(), ok, "boost_below = {v}: above 0, at most 1");
    }
    for (v, ok) in [("0", true), ("99", false), ("100", true), ("100000", true), ("100001", false)] {
        assert_eq!(load(&in_table(p, &format!("boost_slice_us = {v}"))).is_ok(), ok, "boost_slice_us = {v}: 0, or 100..100000");
    }
    for (v, ok) in [("99", false), ("100", true), ("60000", true), ("60001", false)] {
        assert_eq!(load(&format!("tick_ms = 100\n[policy]\nboost_window_ms = {v}\n")).is_ok(), ok, "boost_window_ms = {v}: tick_ms..60000");
    }
    // every window the config takes, at the shortest tick, is one the loader takes
    for (v, ok) in [("49", false), ("50", true), ("60000", true), ("60001", false)] {
        let got = load(&format!("tick_ms = 50\n[policy]\nboost_window_ms = {v}\n")).is_ok();
        assert_eq!((got, allot_model::wake::window_ns(v.parse().unwrap()).is_ok()), (ok, ok), "boost_window_ms = {v}");
    }
    let l = table("[limits]");
    for (k, v, ok) in
        [("requests_per_second", "0.0", false), ("requests_per_second", "0.1", true), ("request_burst", "0.9", false), ("request_burst", "1.0", true)]
    {
        assert_eq!(load(&in_table(l, &format!("{k} = {v}"))).is_ok(), ok, "{k} = {v}");
    }
    assert!(load("[currencies.background]\n").is_err() && load("[currencies.user-x]\n").is_err() && load("[currencies.Ci]\n").is_err());
    assert!(load("[groups.g]\ndefault_cap = \"0\"\n").is_err() && load("[groups.g]\ndefault_cap = \"50%\"\n").is_ok());
}

/// `allot config example` shows every key the page documents, under its table.
#[test]
fn every_key_is_in_the_annotated_example() {
    let ex = crate::config_check::EXAMPLE;
    for t in TABLES {
        let block = if t.header.is_empty() {
            ex[..ex.find("\n# [").unwrap()].to_string()
        } else {
            let prefix = format!("# {}", t.header.find('.').map_or(t.header, |i| &t.header[..=i]));
            let start = ex.lines().position(|l| l.starts_with(&prefix)).unwrap_or_else(|| panic!("the example has no {prefix}"));
            ex.lines()
                .skip(start)
                .take_while({
                    let mut first = true;
                    move |l| std::mem::take(&mut first) || !l.starts_with("# [")
                })
                .collect::<Vec<_>>()
                .join("\n")
        };
        for k in t.keys.iter().filter(|k| k.name != "USER") {
            let word = regex_lite::Regex::new(&format!(r"\b{}\b", k.name)).unwrap();
            assert!(word.is_match(&block), "the example's {} does not mention {}:\n{block}", t.header, k.name);
        }
    }
}

#[test]
fn the_page_documents_every_key_and_is_plain_roff() {
    let p = render("9.9.9");
    assert!(p.starts_with(".TH allot.toml 5 "));
    for t in TABLES {
        if !t.header.is_empty() {
            assert!(p.contains(&format!(".SH \"{}\"", text(t.header))), "{}", t.header);
        }
        for k in t.keys {
            assert!(p.contains(&format!(".TP\n\\fB{}\\fR ({})", text(k.name), k.ty)), "{}", dotted(t, k));
        }
    }
    for l in p.lines().filter(|l| l.starts_with('.')) {
        let m = l[1..].split(' ').next().unwrap();
        assert!(["TH", "nh", "SH", "PP", "TP", "RS", "RE", "nf", "fi"].contains(&m), "not a macro this page uses: {l}");
    }
    for jargon in ["seed ", "run_tickets", "lott_chuser"] {
        assert!(!p.contains(jargon), "the page says {jargon:?}");
    }
}
