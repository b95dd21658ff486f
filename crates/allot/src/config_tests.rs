//! The config parser's unit tests (config_props.rs and config_print_tests.rs hold its
//! properties), with the `[funding]`, `[memory]` and `[sessions]` entries loaded through it
//! (here rather than beside their readers, which the loader imports).
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

/// `config_funding`'s entries, loaded through the whole config.
mod funding {
    use crate::config::Config;

    #[test]
    fn both_forms_load() {
        let c =
            Config::parse("t.toml".as_ref(), "[funding]\nbob = 200\nalice = { funding = 300, cap = \"4!\" }\ncarol = { cap = \"50%!\" }\n").unwrap();
        assert_eq!((c.funding["bob"].funding, c.funding["bob"].cap), (Some(200), None));
        assert_eq!(c.funding["alice"].funding, Some(300));
        assert_eq!(c.funding["alice"].cap.unwrap().to_string(), "4!");
        assert_eq!((c.funding["carol"].funding, c.funding["carol"].cap.unwrap().cpus), (None, 0.5));
        let c = Config::parse("t.toml".as_ref(), "[funding.alice]\nfunding = 300\ncap = \"1/2!\"\n").unwrap();
        assert_eq!(c.funding["alice"].cap.unwrap().cpus, 0.5);
        let c = Config::parse("t.toml".as_ref(), "[groups.students]\nfunding = 50\ncurrency_cap = \"2!\"\ndefault_cap = \"1\"\n").unwrap();
        assert_eq!(c.groups["students"].currency_cap.as_deref(), Some("2!"));
    }

    /// Every funding 1..10000 in both forms, and caps across their range in each form
    /// (decimal, fraction, percent), read back as they were written.
    #[test]
    fn every_accepted_entry_reads_back_as_written() {
        for f in (1..=10_000).step_by(37).chain([10_000]) {
            let c = Config::parse("t.toml".as_ref(), &format!("[funding]\na = {f}\nb = {{ funding = {f} }}\n")).unwrap();
            assert_eq!((c.funding["a"].funding, c.funding["b"].funding), (Some(f), Some(f)));
        }
        for hundredths in (1..=409_600u32).step_by(997) {
            let cpus = hundredths as f64 / 100.0;
            for text in [format!("{cpus}!"), format!("{hundredths}/100!"), format!("{hundredths}%!")] {
                let c = Config::parse("t.toml".as_ref(), &format!("[funding]\na = {{ cap = \"{text}\" }}\n")).unwrap();
                let cap = c.funding["a"].cap.unwrap();
                assert!(cap.hard && (cap.cpus - cpus).abs() < 1e-9, "{text}: {cap:?}");
                let again = allot_model::Cap::parse_currency(&cap.to_string()).unwrap();
                assert!((again.cpus - cap.cpus).abs() <= 0.0005, "{text} -> {cap} -> {again:?}");
            }
        }
        for bad in (10_001..10_010).chain([0, -1, i64::MAX]) {
            assert!(Config::parse("t.toml".as_ref(), &format!("[funding]\na = {{ funding = {bad} }}\n")).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_wrong_entry_is_named_at_its_line_with_the_forms() {
        for (text, line, want) in [
            ("[funding]\nbob = 1\nalice = { funding = 300, cap = \"4\" }\n", 3, "currency cap \"4\" is not a hard cap"),
            ("[funding]\nalice = { funding = 0 }\n", 2, "funding must be a whole number 1..10000, got \"0\""),
            ("[funding]\nalice = { fundng = 3 }\n", 2, "unknown key \"fundng\""),
            ("[funding]\nalice = \"300\"\n", 2, "alice = { funding = 300, cap = \"4!\", mem = \"16G!\" }"),
            ("[funding]\nalice = { cap = 4 }\n", 2, "cap must be a string such as \"4!\""),
            ("[funding]\nalice = -5\n", 2, "got \"-5\""),
            ("\n[groups.g]\ncurrency_cap = \"0.5\"\n", 3, "groups.g.currency_cap: currency cap \"0.5\" is not a hard cap"),
            ("[groups.g]\ncurrency_cap = \"0!\"\n", 2, "hard cap of 0"),
        ] {
            let e = Config::parse("t.toml".as_ref(), text).unwrap_err();
            assert!(e.message.contains(want), "{text}: {}", e.message);
            assert_eq!(e.line, Some(line), "{text}: {}", e.message);
        }
    }
}

/// `config_memory`'s entries, loaded through the whole config.
mod memory {
    use crate::config::Config;
    use crate::config_memory::*;
    use allot_model::memory::Reserve;

    #[test]
    fn defaults_protect_and_cap_nothing() {
        let c = Config::parse("t.toml".as_ref(), "").unwrap();
        assert_eq!(c.memory, MemoryConfig { enable: true, reserve: Reserve::Percent(10.0), oom: true });
        let c = Config::parse("t.toml".as_ref(), "[memory]\nenable = false\nreserve = \"2G\"\noom = false\n").unwrap();
        assert_eq!(c.memory, MemoryConfig { enable: false, reserve: Reserve::Bytes(2 << 30), oom: false });
    }

    #[test]
    fn bad_entries_name_the_value_and_line() {
        for (text, want) in [
            ("[memory]\nreserve = \"100%\"\n", "memory reserve \"100%\" is invalid"),
            ("[memory]\nreserve = 5\n", "memory.reserve must be a string"),
            ("[memory]\nenable = \"yes\"\n", "memory.enable must be true or false, got \"yes\""),
            ("[memory]\nlow = 1\n", "unknown field `low`, expected one of `enable`, `reserve`, `oom`"),
        ] {
            let e = Config::parse("t.toml".as_ref(), text).unwrap_err();
            assert!(e.to_string().contains(want) && e.line.is_some(), "{text}: {e}");
        }
    }

    #[test]
    fn funding_entries_take_a_memory_cap() {
        let c = Config::parse("t.toml".as_ref(), "[funding]\nalice = { funding = 300, mem = \"16G!\" }\nbob = { mem = \"2G\" }\n").unwrap();
        assert_eq!(c.funding["alice"].mem.map(|m| m.to_string()).as_deref(), Some("16G!"));
        assert_eq!(c.funding["bob"].mem.map(|m| (m.bytes, m.hard)), Some((2 << 30, false)));
        let e = Config::parse("t.toml".as_ref(), "[funding]\nalice = { mem = \"16Q\" }\n").unwrap_err();
        assert!(e.to_string().contains("memory cap \"16Q\" is invalid"), "{e}");
    }
}

/// `config_sessions`'s entries, loaded through the whole config.
mod sessions {
    use crate::config::Config;
    use crate::config_sessions::*;

    #[test]
    fn task_is_the_default_job_is_read_and_a_typo_is_refused_at_its_line() {
        assert_eq!(Config::parse("t.toml".as_ref(), "").unwrap().sessions.background, BackgroundIn::Task);
        assert_eq!(Config::parse("t.toml".as_ref(), "[sessions]\nbackground = \"job\"\n").unwrap().sessions.background, BackgroundIn::Job);
        let e = Config::parse("t.toml".as_ref(), "[sessions]\nbackground = \"move\"\n").unwrap_err().to_string();
        assert!(e.contains("t.toml:2") && e.contains("move") && e.contains("task") && e.contains("job"), "{e}");
    }
}
