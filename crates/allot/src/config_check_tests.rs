//! The checker against hostile and mistaken files: every refusal names the line and what
//! is allowed; every warning names the name NSS does not know.

use super::*;
use std::io::Write;

/// Knows the users and groups it is given, nothing else.
struct Fake {
    users: Vec<&'static str>,
    groups: Vec<&'static str>,
}

impl Names for Fake {
    fn user(&self, name: &str) -> Result<bool, String> {
        Ok(self.users.contains(&name))
    }
    fn group(&self, name: &str) -> Result<bool, String> {
        Ok(self.groups.contains(&name))
    }
}

fn fake() -> Fake {
    Fake { users: vec!["alice", "bob", "builder", "carol"], groups: vec!["students", "ci"] }
}

/// A file in a private temporary directory, removed on drop.
struct Tmp(PathBuf);

impl Tmp {
    fn new(name: &str, bytes: &[u8]) -> Tmp {
        let dir = std::env::temp_dir().join(format!("allot-check-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("allot.toml");
        std::fs::File::create(&p).unwrap().write_all(bytes).unwrap();
        Tmp(p)
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(self.0.parent().unwrap());
    }
}

fn run_check(name: &str, bytes: &[u8]) -> Report {
    let t = Tmp::new(name, bytes);
    check(&t.0, true, &fake())
}

fn error_of(r: &Report) -> &Finding {
    assert!(!r.ok, "refused: {r:?}");
    r.error.as_ref().unwrap()
}

#[test]
fn a_byte_that_is_not_utf8_is_named_with_its_line_and_column() {
    let r = run_check("utf8", b"tick_ms = 100\n# caf\xe9\n");
    let e = error_of(&r);
    assert_eq!((e.line, e.column), (Some(2), Some(6)), "{e:?}");
    assert!(e.message.contains("0xe9") && e.message.contains("UTF-8"), "{}", e.message);
}

#[test]
fn a_huge_file_is_refused_before_it_is_parsed() {
    let big = vec![b'#'; crate::config::MAX_BYTES as usize + 1];
    let r = run_check("huge", &big);
    assert!(error_of(&r).message.contains("larger than 1024 KiB"), "{r:?}");
    // One byte less is read (and is all comment: the defaults).
    assert!(run_check("almost", &big[1..]).ok);
}

#[test]
fn a_line_that_is_not_toml_names_its_line() {
    let r = run_check("nottoml", b"tick_ms = 100\n\nthis is not toml\n");
    let e = error_of(&r);
    assert_eq!(e.line, Some(3), "{e:?}");
}

#[test]
fn an_unknown_setting_names_its_line_and_every_allowed_one() {
    let r = run_check("unknown", b"[policy]\nboost = true\nbost_below = 0.5\n");
    let e = error_of(&r);
    assert_eq!(e.line, Some(3), "{e:?}");
    assert!(e.message.contains("bost_below") && e.message.contains("boost_below") && e.message.contains("nice_emulation"), "{}", e.message);
}

#[test]
fn a_value_out_of_range_names_the_line_of_its_setting() {
    let r = run_check("range", b"tick_ms = 100\n\n[policy]\nboost = true\nboost_below = 2.0\n");
    let e = error_of(&r);
    assert_eq!(e.line, Some(5), "{e:?}");
    assert!(e.message.contains("policy.boost_below must be in (0, 1], got 2"), "{}", e.message);
    let r = run_check("range2", b"# top\n\nhalf_life_ms = 10\n");
    assert_eq!(error_of(&r).line, Some(3));
    let r = run_check("currency", b"[currencies.ci]\nfunding = 3\n\n[currencies.user-x]\n");
    let e = error_of(&r);
    assert_eq!(e.line, Some(4), "{e:?}");
    assert!(e.message.contains("reserved"), "{}", e.message);
}

#[test]
fn a_bad_rule_names_the_line_of_its_table() {
    let r = run_check("rule", b"tick_ms = 100\n\n[[rules]]\nname = \"x\"\ncomm = \"cc1*\"\ntickets = 0\n");
    let e = error_of(&r);
    assert_eq!(e.line, Some(3), "{e:?}");
    assert!(e.message.starts_with("rule x: tickets must be a whole number 1..10000"), "{}", e.message);
}

#[test]
fn a_missing_file_is_the_defaults_unless_it_was_named() {
    let p = std::env::temp_dir().join(format!("allot-check-{}-none.toml", std::process::id()));
    let r = check(&p, false, &fake());
    assert!(r.ok && !r.exists && r.error.is_none());
    let r = check(&p, true, &fake());
    assert!(!r.ok && r.error.as_ref().unwrap().message.contains("No such file"), "{r:?}");
}

#[test]
fn a_directory_is_refused() {
    let r = check(&std::env::temp_dir(), true, &fake());
    assert!(error_of(&r).message.contains("directory"), "{r:?}");
}

/// The shipped example with [funding] uncommented and a top-level setting appended at the
/// end, misspelt: it loads (funding for a user named "defualt_funding"), with a warning
/// that says so and points at the setting it resembles.
#[test]
fn a_setting_appended_after_funding_is_a_warning_naming_the_setting() {
    let text = EXAMPLE.replace("# [funding]", "[funding]") + "defualt_funding = 50\n";
    let last = text.lines().count();
    let r = run_check("typo", text.as_bytes());
    assert!(r.ok, "{r:?}");
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    let w = &r.warnings[0];
    assert_eq!(w.line, Some(last));
    assert!(w.message.contains("\"defualt_funding\" is no user") && w.message.contains("top-level setting default_funding"), "{}", w.message);
    // Spelt right it is the same trap.
    let r = run_check("trap", (EXAMPLE.replace("# [funding]", "[funding]") + "default_funding = 50\n").as_bytes());
    assert!(r.warnings[0].message.contains("top-level setting default_funding"), "{:?}", r.warnings);
    // A known user there is what [funding] is for.
    let r = run_check("fine", (EXAMPLE.replace("# [funding]", "[funding]") + "alice = 50\n1234 = 7\n").as_bytes());
    assert!(r.ok && r.warnings.is_empty(), "{r:?}");
}

#[test]
fn unknown_users_and_groups_are_warned_about_where_they_are() {
    let text = "[users]\nonly = [\"alice\", \"mallory\", \"1001\"]\n\n[groups.studnets]\nfunding = 50\n\n[currencies.ci]\nusers = [\"builder\"]\ngroups = [\"ci\", \"cj\"]\nowners = [\"carl\"]\n\n[funding]\nci = 300\n";
    let r = run_check("names", text.as_bytes());
    assert!(r.ok, "{r:?}");
    let got: Vec<(Option<usize>, &str)> = r.warnings.iter().map(|w| (w.line, w.message.as_str())).collect();
    let has = |line: usize, needle: &str| got.iter().any(|(l, m)| *l == Some(line) && m.contains(needle));
    assert!(has(2, "users.only: no user \"mallory\""), "{got:#?}");
    assert!(has(4, "[groups.studnets]: no group \"studnets\""), "{got:#?}");
    assert!(has(9, "currencies.ci.groups: no group \"cj\""), "{got:#?}");
    assert!(has(10, "currencies.ci.owners: no user \"carl\""), "{got:#?}");
    assert_eq!(got.len(), 4, "a uid, a named currency in [funding], known names: no warning; {got:#?}");
}

/// `[scheduler] draw` and `tasks` choose for the sched_ext scheduler only: set under the
/// cgroup backend they are warned about at their lines; their defaults are not.
#[test]
fn the_sched_ext_scheduler_s_settings_under_the_cgroup_backend_are_a_warning() {
    let r = run_check("draw", b"[scheduler]\nkind = \"cgroup\"\ndraw = \"lottery\"\ntasks = \"all\"\n");
    assert!(r.ok, "{r:?}");
    let got: Vec<(Option<usize>, &str)> = r.warnings.iter().map(|w| (w.line, w.message.as_str())).collect();
    assert_eq!(got.len(), 2, "{got:#?}");
    assert!(got[0].0 == Some(3) && got[0].1.starts_with("scheduler.draw does nothing with kind = \"cgroup\""), "{got:#?}");
    assert!(got[1].0 == Some(4) && got[1].1.starts_with("scheduler.tasks does nothing"), "{got:#?}");
    let r = run_check("defaults", b"[scheduler]\ndraw = \"stride\"\ntasks = \"jobs\"\n");
    assert!(r.ok && r.warnings.is_empty(), "{r:?}");
    // and the plan's window under scx, which the BPF side boosts over too: no warning (the
    // warnings of a file read as it parses: this host has no sched_ext, so the loader
    // refuses kind = "scx" here)
    let scx = |text: &str| {
        let cfg: Config = toml::from_str(text).unwrap();
        warnings(&cfg, text, &fake()).into_iter().map(|w| (w.line, w.message)).collect::<Vec<_>>()
    };
    let got = scx("[scheduler]\nkind = \"scx\"\n[policy]\nboost_window_ms = 800\nboost_below = 0.3\n");
    assert!(got.is_empty(), "boost_window_ms and boost_below are carried to the BPF side: no warning; {got:#?}");
    assert!(scx("[scheduler]\nkind = \"scx\"\n[policy]\nboost_window_ms = 500\n").is_empty());
    assert!(scx("[policy]\nboost_window_ms = 800\n").is_empty(), "the cgroup backend's own window");
}

/// An unknown user in a rule is the loader's error (the daemon would refuse the file), at
/// the rule's line: NSS here, so the name is one no system has.
#[test]
fn an_unknown_user_in_a_rule_is_an_error() {
    let r = run_check("ruleuser", b"\n[[rules]]\nname = \"r\"\nuser = \"no-such-user-allot-x\"\ntickets = 5\n");
    let e = error_of(&r);
    assert_eq!(e.line, Some(2), "{e:?}");
    assert!(e.message.contains("rule r: user \"no-such-user-allot-x\" is unknown"), "{}", e.message);
}

#[test]
fn a_failed_lookup_is_a_warning_not_a_pass() {
    struct Down;
    impl Names for Down {
        fn user(&self, _: &str) -> Result<bool, String> {
            Err("getpwnam_r: Connection refused".into())
        }
        fn group(&self, _: &str) -> Result<bool, String> {
            Err("getgrnam_r: Connection refused".into())
        }
    }
    let t = Tmp::new("down", b"[users]\nonly = [\"alice\"]\n");
    let r = check(&t.0, true, &Down);
    assert!(r.ok && r.warnings.len() == 1 && r.warnings[0].message.contains("could not be looked up"), "{r:?}");
}

#[test]
fn the_top_level_settings_are_the_loaders() {
    let mut s = top_level_settings();
    s.sort();
    assert_eq!(s, ["default_funding", "funding_authority", "half_life_ms", "scan_ms", "tick_ms"]);
}

#[test]
fn locate_finds_settings_under_their_tables() {
    let t = "a = 1\n[policy]\n  boost = true # x\n[\"groups\".'g 1']\nfunding = 2\n[[rules]]\n";
    assert_eq!(locate(t, "a"), Some(1));
    assert_eq!(locate(t, "policy.boost"), Some(3));
    assert_eq!(locate(t, "groups.g 1"), Some(4));
    assert_eq!(locate(t, "groups.g 1.funding"), Some(5));
    assert_eq!(locate(t, "policy.boost_below"), None);
    assert_eq!(distance("defualt_funding", "default_funding"), 2);
}

#[test]
fn the_example_is_the_packaged_file_and_checks_clean() {
    assert!(EXAMPLE.contains("# default_funding = 100"));
    let r = run_check("example", EXAMPLE.as_bytes());
    assert!(r.ok && r.warnings.is_empty(), "{r:?}");
}
