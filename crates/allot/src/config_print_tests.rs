//! The config parser's round trip (proptest; docs/layout.md): a config of every table the
//! loader reads — settings at any value in their range, named currencies, funding entries
//! with caps and memory caps, groups, rules, metrics, memory, sessions, and the scheduler
//! (`scx` where this kernel lets the config ask for it) — printed and parsed again is the
//! config that was printed, and the defaults and `allot config example` print and parse
//! back to the same.

use super::print;
use crate::config::{Config, GroupDefaults, Limits, NamedCurrency, Outside, Placement, Policy, Privacy, RuleConfig, Users};
use crate::config_funding::{FundingAuthority, FundingEntry};
use crate::config_memory::MemoryConfig;
use crate::config_metrics::MetricsConfig;
use crate::config_scheduler::{check, support, Draw, Kind, Scheduler, Tasks};
use crate::config_sessions::{BackgroundIn, Sessions};
use allot_model::memory::{MemCap, Reserve};
use allot_model::Cap;
use proptest::prelude::*;
use std::path::Path;

/// Text for names and patterns: letters, digits, and what TOML must quote or escape
/// (dots, spaces, quotes, backslashes, a tab, non-ASCII).
const TEXT: &str = "[a-z0-9 ._\"\\\\\t/*?é€-]{1,10}";

/// A map key as users write them: a user name, a uid, a dotted or spaced name (quoted).
fn key() -> impl Strategy<Value = String> {
    prop_oneof!["[a-z][a-z0-9_-]{0,8}", "[0-9]{1,6}", TEXT]
}

fn funding() -> impl Strategy<Value = u32> {
    1u32..=10_000
}

/// A hard cap anywhere in allot's range, with as many digits as an f64 has.
fn hard_cap() -> impl Strategy<Value = Cap> {
    prop_oneof![0.01f64..=4096.0, (1u32..=409_600).prop_map(|h| f64::from(h) / 100.0)].prop_map(|cpus| Cap { cpus, hard: true })
}

/// A cap as written in a group or a rule, in each of the grammar's forms.
fn cap_text(hard: bool) -> impl Strategy<Value = String> {
    let bang = if hard { "!" } else { "" };
    prop_oneof![
        (1u32..=4096).prop_map(move |n| format!("{n}{bang}")),
        (1u32..=4096, 1u32..=8).prop_map(move |(n, d)| format!("{n}/{d}{bang}")),
        (1u32..=400_000).prop_map(move |p| format!("{p}%{bang}")),
        (0.01f64..=4096.0).prop_map(move |c| format!("{c}{bang}")),
    ]
}

fn mem_cap() -> impl Strategy<Value = MemCap> {
    (prop_oneof![(1u64 << 20)..=(1u64 << 50), (1u64..=1024).prop_map(|g| g << 30)], any::<bool>()).prop_map(|(bytes, hard)| MemCap { bytes, hard })
}

fn funding_entry() -> impl Strategy<Value = FundingEntry> {
    (proptest::option::of(funding()), proptest::option::of(hard_cap()), proptest::option::of(mem_cap()))
        .prop_map(|(funding, cap, mem)| FundingEntry { funding, cap, mem })
}

fn group() -> impl Strategy<Value = GroupDefaults> {
    (proptest::option::of(funding()), proptest::option::of(cap_text(false)), proptest::option::of(cap_text(true)))
        .prop_map(|(funding, default_cap, currency_cap)| GroupDefaults { funding, default_cap, currency_cap })
}

fn names() -> impl Strategy<Value = Vec<String>> {
    proptest::collection::vec(key(), 0..3)
}

fn currency_name() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9_-]{0,10}".prop_filter("allot's own names", |n| n != "background" && !n.starts_with("user-"))
}

fn currency() -> impl Strategy<Value = NamedCurrency> {
    (proptest::option::of(funding()), names(), names(), names()).prop_map(|(funding, users, groups, owners)| NamedCurrency {
        funding,
        users,
        groups,
        owners,
    })
}

/// A glob without brackets, or a regex that compiles.
fn pattern() -> impl Strategy<Value = String> {
    prop_oneof![TEXT.prop_filter("no brackets", |p| !p.contains(['[', ']'])), "re:\\^?[a-z]{1,6}(\\.\\*)?\\$?"]
}

/// A rule with something to match and something to do, without contradictions; its
/// currency a uid (a named one is set by `config()`).
fn rule() -> impl Strategy<Value = RuleConfig> {
    let matchers = (
        proptest::option::of("[0-9]{1,5}"),
        proptest::option::of("[0-9]{1,5}"),
        proptest::option::of(pattern()),
        proptest::option::of(pattern()),
        proptest::option::of(pattern()),
    );
    let actions = (
        proptest::option::of(key()),
        proptest::option::of(1u32..=10_000),
        proptest::option::of(prop_oneof![cap_text(false), cap_text(true), Just("0".to_string())]),
        proptest::option::of(any::<bool>()),
        proptest::option::of("[0-9]{1,5}"),
    );
    (matchers, actions).prop_map(|((user, group, exe, comm, cmdline), (name, tickets, cap, background, currency))| {
        let mut r = RuleConfig { name, user, group, exe, comm, cmdline, tickets, cap, background, currency };
        if r.user.is_none() && r.group.is_none() && r.exe.is_none() && r.comm.is_none() && r.cmdline.is_none() {
            r.comm = Some("make".into());
        }
        let zero = r.cap.as_deref().is_some_and(|c| c.parse::<Cap>().is_ok_and(|c| c.is_background()));
        if (zero && r.background == Some(false)) || (!zero && r.background == Some(true)) {
            r.cap = None;
        }
        if r.tickets.is_none() && r.cap.is_none() && r.background != Some(true) && r.currency.is_none() {
            r.tickets = Some(100);
        }
        r
    })
}

fn metrics() -> impl Strategy<Value = MetricsConfig> {
    let net = prop_oneof![
        (any::<[u8; 4]>(), 0u8..=32).prop_map(|(a, p)| format!("{}/{p}", std::net::Ipv4Addr::from(a))),
        any::<[u8; 4]>().prop_map(|a| std::net::Ipv4Addr::from(a).to_string()),
        (any::<[u16; 8]>(), 0u8..=128).prop_map(|(a, p)| format!("{}/{p}", std::net::Ipv6Addr::from(a))),
    ];
    let listen = prop_oneof!["127\\.0\\.0\\.1:[1-9][0-9]{0,3}", "\\[::1\\]:[1-9][0-9]{0,3}", "0\\.0\\.0\\.0:[1-9][0-9]{0,3}"];
    (proptest::option::of(listen), proptest::collection::vec(net, 0..3)).prop_map(|(listen, mut allow)| {
        if listen.as_deref().is_some_and(|l| l.starts_with("0.")) && allow.is_empty() {
            allow.push("10.0.0.0/8".into());
        }
        MetricsConfig { listen, allow }
    })
}

fn memory() -> impl Strategy<Value = MemoryConfig> {
    let reserve = prop_oneof![(0u64..=(1u64 << 50)).prop_map(Reserve::Bytes), (0.0f64..100.0).prop_map(Reserve::Percent)];
    (any::<bool>(), reserve, any::<bool>()).prop_map(|(enable, reserve, oom)| MemoryConfig { enable, reserve, oom })
}

fn users() -> impl Strategy<Value = Users> {
    (any::<bool>(), proptest::option::of(0u32..=70_000), proptest::option::of(0u32..=70_000), proptest::option::of(names())).prop_map(
        |(auto_place, a, b, only)| {
            let (min_uid, max_uid) = match (a, b) {
                (Some(a), Some(b)) => (Some(a.min(b)), Some(a.max(b))),
                other => other,
            };
            Users { auto_place, min_uid, max_uid, only }
        },
    )
}

/// The timing settings, which must agree: tick ≤ boost window.
fn timing() -> impl Strategy<Value = (u64, u64, u64, u64)> {
    (50u64..=60_000, 0u64..=60_000, 100u64..=60_000, 1000u64..=100_000)
        .prop_map(|(tick, w, scan, half)| (tick, tick + w % (60_001 - tick), scan, half))
}

fn policy_rest() -> impl Strategy<Value = (bool, f64, u64, f64, bool)> {
    (any::<bool>(), (0.0f64..=1.0).prop_filter("above 0", |b| *b > 0.0), prop_oneof![Just(0u64), 100u64..=100_000], 1.0f64..=10_000.0, any::<bool>())
}

fn limits() -> impl Strategy<Value = Limits> {
    (1usize..=1 << 40, 1usize..=100_000, 1usize..=100_000, (0.0f64..=1e9).prop_filter("above 0", |r| *r > 0.0), 1.0f64..=1e9).prop_map(
        |(jobs_per_user, connections_per_user, connections, requests_per_second, request_burst)| Limits {
            jobs_per_user,
            connections_per_user,
            connections,
            requests_per_second,
            request_burst,
        },
    )
}

/// `[scheduler]`: allot's sched_ext scheduler where this kernel lets the config ask for it,
/// else the cgroup controller.
fn scheduler(scx: bool, lottery: bool, all: bool) -> Scheduler {
    let draw = if lottery { Draw::Lottery } else { Draw::Stride };
    let tasks = if all { Tasks::All } else { Tasks::Jobs };
    let asked = Scheduler { kind: Kind::Scx, draw, tasks };
    if scx && check(&asked, support()).is_ok() {
        asked
    } else {
        Scheduler { kind: Kind::Cgroup, draw, tasks }
    }
}

prop_compose! {
    /// A config the loader takes, with every table it reads filled at random.
    fn config()(
        default_funding in funding(),
        (tick_ms, boost_window_ms, scan_ms, half_life_ms) in timing(),
        (boost, boost_below, boost_slice_us, boost_weight, nice_emulation) in policy_rest(),
        users in users(),
        currencies in proptest::collection::btree_map(currency_name(), currency(), 0..4),
        from in proptest::collection::vec("(/[a-z0-9_.-]{1,8}){1,3}".prop_filter("no ..", |p| !p.contains("..")), 0..3),
        limits in limits(),
        show_other_users in any::<bool>(),
        config_authority in any::<bool>(),
        funding in proptest::collection::btree_map(key(), funding_entry(), 0..4),
        groups in proptest::collection::btree_map(key(), group(), 0..3),
        mut rules in proptest::collection::vec(rule(), 0..4),
        named in proptest::collection::vec(any::<prop::sample::Index>(), 4),
        metrics in metrics(),
        weight in 1u32..=10_000,
        memory in memory(),
        io_by_share in any::<bool>(),
        job in any::<bool>(),
        (scx, lottery, all) in any::<(bool, bool, bool)>(),
    ) -> Config {
        // Some rules send processes to a named currency of this config.
        for (r, i) in rules.iter_mut().zip(&named) {
            if !currencies.is_empty() && i.index(2) == 0 {
                r.currency = currencies.keys().nth(i.index(currencies.len())).cloned();
            }
        }
        Config {
            default_funding,
            tick_ms,
            scan_ms,
            half_life_ms,
            users,
            policy: Policy { boost, boost_window_ms, boost_below, boost_slice_us, boost_weight, nice_emulation },
            currencies,
            placement: Placement { from },
            limits,
            privacy: Privacy { show_other_users },
            funding_authority: if config_authority { FundingAuthority::Config } else { FundingAuthority::Local },
            funding,
            groups,
            rules: rules.into_iter().map(|r| toml::Spanned::new(0..0, r)).collect(),
            metrics,
            outside: Outside { weight },
            memory,
            io: crate::config_io::IoConfig { by_share: io_by_share },
            scheduler: scheduler(scx, lottery, all),
            sessions: Sessions { background: if job { BackgroundIn::Job } else { BackgroundIn::Task } },
            compiled_rules: vec![],
        }
    }
}

proptest! {
    // 256 cases (proptest's default).
    #[test]
    fn a_printed_config_parses_back_to_itself(c in config()) {
        let text = print(&c).map_err(|e| TestCaseError::fail(format!("not printed: {e}")))?;
        let back = Config::parse(Path::new("printed.toml"), &text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(back.compiled_rules.len(), c.rules.len());
        prop_assert!(back == c, "{:#?}\nprinted as\n{}\nread back as\n{:#?}", c, text, back);
        prop_assert_eq!(print(&back).unwrap(), text);
    }
}

#[test]
fn the_defaults_and_the_example_print_and_parse_back() {
    let d = Config::default();
    let text = print(&d).unwrap();
    assert!(Config::parse(Path::new("d.toml"), &text).unwrap() == d, "{text}");
    let example = Config::parse(Path::new("example.toml"), crate::config_check::EXAMPLE).unwrap();
    assert!(example == d, "the example, every setting commented out, is the defaults");
    assert!(text.contains("[policy]") && text.contains("[memory]") && text.contains("reserve = \"10%\""), "{text}");
}

#[test]
fn a_change_in_any_table_is_seen() {
    let d = Config::default();
    let mut changed = vec![];
    for text in [
        "tick_ms = 200\n",
        "[policy]\nboost_below = 0.75\n",
        "[funding]\nalice = 300\n",
        "[funding]\nalice = { cap = \"0.3333333333333333!\" }\n",
        "[memory]\nreserve = \"2G\"\n",
        "[[rules]]\ncomm = \"make\"\ntickets = 50\n",
        "[sessions]\nbackground = \"job\"\n",
        "[metrics]\nallow = [\"10.0.0.0/8\"]\n",
    ] {
        let c = Config::parse(Path::new("t.toml"), text).unwrap();
        assert!(c != d, "{text} reads as the defaults");
        let again = Config::parse(Path::new("t.toml"), &print(&c).unwrap()).unwrap();
        assert!(again == c, "{text}: {}", print(&c).unwrap());
        changed.push(c);
    }
    assert_eq!(changed[3].funding["alice"].cap.map(|c| c.cpus), Some(0.3333333333333333));
    assert!(print(&changed[3]).unwrap().contains("0.3333333333333333!"), "every digit of a cap is printed");
}
