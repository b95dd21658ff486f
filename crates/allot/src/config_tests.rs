//! The config parser's unit tests (config_props.rs holds its properties).
use super::*;

#[test]
fn empty_file_is_the_defaults() {
    let c: Config = toml::from_str("").unwrap();
    assert_eq!(c.default_funding, 100);
    assert!(c.users.auto_place && c.users.min_uid.is_none());
    assert_eq!(c.placement.from, vec!["/".to_string()]);
    // The policy's defaults are the model's, through the mapping the daemon uses.
    assert_eq!(c.policy.params(true), allot_model::plan::Params::default());
    assert_eq!(c.policy.boost_window_ms, allot_model::plan::DEFAULT_BOOST_WINDOW_MS);
}

#[test]
fn typos_name_the_field_and_line() {
    let e = toml::from_str::<Config>("tick_ms = 500\ndefualt_funding = 3\n").unwrap_err().to_string();
    assert!(e.contains("defualt_funding") && e.contains("line 2"), "{e}");
}

/// The packaged example (/usr/share/doc/allot/examples/allot.toml): as shipped, all
/// commented out, it is the defaults; with every setting uncommented it loads.
#[test]
fn packaged_example_is_the_defaults_and_every_setting_in_it_loads() {
    let text = include_str!("../../../packaging/allot.toml");
    let c: Config = toml::from_str(text).unwrap();
    assert_eq!(format!("{c:?}"), format!("{:?}", Config::default()));
    let setting = regex_lite::Regex::new(r"^# ([a-z_]+ = |\[)").unwrap();
    let on: String = text.lines().map(|l| if setting.is_match(l) { l[2..].to_string() } else { l.to_string() }).collect::<Vec<_>>().join("\n");
    let path = std::env::temp_dir().join(format!("allot-example-{}.toml", std::process::id()));
    std::fs::write(&path, &on).unwrap();
    let c = Config::load(&path, true);
    let _ = std::fs::remove_file(&path);
    let c = c.unwrap_or_else(|e| panic!("{e:#}\n{on}"));
    assert_eq!(c.compiled_rules.len(), 1);
    assert_eq!(c.currencies["ci"].funding, Some(300));
    assert_eq!(c.metrics.listen.as_deref(), Some("127.0.0.1:9743"));
    for (name, line) in [("half_life_ms", "half_life_ms = 5000"), ("tick_ms", "tick_ms = 100"), ("boost_window_ms", "boost_window_ms = 500")] {
        assert!(on.contains(line), "the example states the default {name}");
    }
}

#[test]
fn reads_named_currencies() {
    let c: Config = toml::from_str("[currencies.ci]\nfunding = 300\nusers = [\"alice\"]\nowners = [\"carol\"]\n").unwrap();
    assert_eq!(c.currencies["ci"].funding, Some(300));
    assert!(c.check().is_ok());
    let bad: Config = toml::from_str("[currencies.background]\n").unwrap();
    assert!(bad.check().unwrap_err().1.contains("reserved"));
    let bad: Config = toml::from_str("half_life_ms = 10").unwrap();
    assert!(bad.check().unwrap_err().1.contains("half_life_ms must be 1000..100000"));
}

#[test]
fn a_line_the_toml_crate_gives_no_words_for_is_still_named() {
    // Found by config_props: the toml crate's message for `""=` is empty.
    let e = Config::parse(Path::new("allot.toml"), "\"\"=").unwrap_err();
    assert_eq!(e.line, Some(1));
    assert!(e.message.starts_with("not TOML (a TOML line is"), "{e}");
}
