//! Property tests of the config parser (proptest; docs/layout.md): any text is parsed or
//! refused with a line inside the text, never panicked on; a setting written into a
//! config reads back as written when it is in its range, and is refused at its own line,
//! naming the setting and the value, when it is not.

use crate::config::Config;
use proptest::prelude::*;
use std::path::Path;

/// Settings with a range and no other setting to agree with: (table, key, range, read back).
type Setting = (&'static str, &'static str, std::ops::RangeInclusive<u64>, fn(&Config) -> u64);

const SETTINGS: &[Setting] = &[
    ("", "default_funding", 1..=10_000, |c| c.default_funding as u64),
    ("", "scan_ms", 100..=60_000, |c| c.scan_ms),
    ("", "half_life_ms", 1000..=100_000, |c| c.half_life_ms),
    ("outside", "weight", 1..=10_000, |c| c.outside.weight as u64),
    ("limits", "jobs_per_user", 1..=u32::MAX as u64, |c| c.limits.jobs_per_user as u64),
];

/// Values near each range's ends, and any others a u32 holds.
fn value() -> impl Strategy<Value = u64> {
    prop_oneof![0u64..1200, 9_990u64..10_010, 59_990u64..60_010, 99_990u64..100_010, 0..=u32::MAX as u64]
}

proptest! {
    // 256 cases each (proptest's default).
    #[test]
    fn any_text_is_parsed_or_refused_at_a_line_inside_it(text in prop_oneof![any::<String>(), "([a-z_.\\[\\]=\"# 0-9]{0,20}\n){0,6}"]) {
        if let Err(e) = Config::parse(Path::new("allot.toml"), &text) {
            let lines = text.split('\n').count();
            prop_assert!(e.line.is_none_or(|l| (1..=lines).contains(&l)), "line {:?} of {} lines: {}", e.line, lines, e);
            prop_assert!(e.column.is_none_or(|c| c >= 1), "{}", e);
            prop_assert!(!e.message.is_empty());
        }
    }

    #[test]
    fn a_setting_reads_back_or_is_refused_at_its_line(which in 0..SETTINGS.len(), n in value(), comments in 0usize..3) {
        let (table, key, range, read) = &SETTINGS[which];
        let mut text = "# allot.toml\n".repeat(comments);
        if !table.is_empty() {
            text.push_str(&format!("[{table}]\n"));
        }
        text.push_str(&format!("{key} = {n}\n"));
        let line = text.lines().count();
        match Config::parse(Path::new("allot.toml"), &text) {
            Ok(c) => {
                prop_assert!(range.contains(&n), "{} = {} was taken; allowed {:?}", key, n, range);
                prop_assert_eq!(read(&c), n);
            }
            Err(e) => {
                prop_assert!(!range.contains(&n), "{} = {} was refused: {}", key, n, e);
                prop_assert_eq!(e.line, Some(line), "{}", e);
                prop_assert!(e.message.contains(key) && e.message.contains(&n.to_string()), "{}", e);
            }
        }
    }
}
