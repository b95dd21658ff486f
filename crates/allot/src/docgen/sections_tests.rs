use super::*;
use clap::{CommandFactory, Parser};

fn root() -> Command {
    crate::Cli::command()
}

fn body(page: &str, title: &str) -> String {
    for_page(page, &root()).into_iter().find(|s| s.title == title).unwrap_or_else(|| panic!("{page}: no {title}")).body
}

#[test]
fn allot_1_has_the_sections_a_daemons_page_has() {
    let titles: Vec<&str> = for_page("allot", &root()).iter().map(|s| s.title).collect();
    assert_eq!(titles, ["FILES", "SIGNALS", "EXIT STATUS", "ENVIRONMENT", "EXAMPLES", "SEE ALSO"]);
    let titles: Vec<&str> = for_page("allot-daemon", &root()).iter().map(|s| s.title).collect();
    assert_eq!(titles, ["FILES", "SIGNALS", "EXIT STATUS", "ENVIRONMENT", "SEE ALSO"]);
}

#[test]
fn every_example_is_a_command_line_allot_takes() {
    let mut parsed = 0;
    for (_, line) in EXAMPLES {
        for part in line.split("&&").flat_map(|p| p.split('|')) {
            let part = part.trim().trim_start_matches("sudo ");
            if !part.starts_with("allot ") {
                continue;
            }
            crate::Cli::try_parse_from(part.split_whitespace()).unwrap_or_else(|e| panic!("{part}: {e}"));
            parsed += 1;
        }
    }
    assert_eq!(parsed, EXAMPLES.len(), "every example runs allot once");
}

#[test]
fn every_cap_form_shown_is_what_the_parser_reads() {
    for (form, cpus, hard) in CAP_FORMS {
        let c: allot_model::Cap = form.parse().unwrap_or_else(|e| panic!("{form}: {e}"));
        assert_eq!((c.cpus, c.hard), (cpus, hard), "{form}");
    }
    assert!("0!".parse::<allot_model::Cap>().is_err(), "the page says a hard 0 is refused");
    assert!("0.009!".parse::<allot_model::Cap>().is_err() && "0.01!".parse::<allot_model::Cap>().is_ok(), "the page says hard caps start at 0.01");
    let run = body("allot-run", "CAPS");
    for form in ["0.5", "1/2", "50%", "0.5!", "50%!"] {
        assert!(run.contains(&format!("\\fB{}\\fR", super::super::text(form))), "allot-run(1) shows {form}");
    }
    assert!(body("allot-set", "CAPS").contains("\\fBnone\\fR") || body("allot-set", "CAPS").contains("none\n"), "allot-set(1) says none");
}

#[test]
fn the_cap_help_of_run_and_set_names_soft_caps_and_percent() {
    for sub in ["run", "set"] {
        let cmd = root().find_subcommand(sub).cloned().unwrap();
        let cap = cmd.get_arguments().find(|a| a.get_id() == "cap").unwrap();
        let help = cap.get_help().map(|h| h.to_string()).unwrap_or_default();
        for word in ["soft", "50%", "!", "hard"] {
            assert!(help.contains(word), "allot {sub} --help: --cap does not mention {word}: {help}");
        }
    }
}

/// Every environment variable the workspace's code reads (by std::env's var and var_os
/// with a literal name, or clap's env attribute) is in allot(1)'s ENVIRONMENT; the lab's
/// own (src/lab, and the test uids its selftest and benchmarks choose) are in
/// `allot-lab --help`.
#[test]
fn every_environment_variable_read_is_documented() {
    let ws = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let re = regex_lite::Regex::new(r#"(?:env::var(?:_os)?\(|env = )"([A-Z][A-Z0-9_]*)""#).unwrap();
    let mut files = vec![];
    let mut dirs: Vec<_> = std::fs::read_dir(ws.join("crates")).unwrap().map(|e| e.unwrap().path().join("src")).collect();
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() && !p.ends_with("allot/src/lab") {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") && !p.ends_with("allot-measure/src/test_uids.rs") {
                files.push(p);
            }
        }
    }
    assert!(files.len() > 50, "found the sources ({})", files.len());
    let env = body("allot", "ENVIRONMENT");
    let mut seen = 0;
    for f in files {
        let src = std::fs::read_to_string(&f).unwrap();
        for c in re.captures_iter(&src) {
            let name = &c[1];
            seen += 1;
            assert!(env.contains(&super::super::text(name)), "{} reads {name}, which allot(1) ENVIRONMENT does not document", f.display());
        }
    }
    assert!(seen >= 8, "the scan finds the variables ({seen})");
}

#[test]
fn files_names_the_paths_the_code_uses() {
    let files = body("allot", "FILES");
    for p in
        ["/etc/allot/allot.toml", "/var/lib/allot/state.json", "/var/lib/allot/audit.log", "/var/lib/allot/audit\\-root.log", "/run/allot/allot.sock"]
    {
        assert!(files.contains(p), "FILES lacks {p}");
    }
    let sig = body("allot", "SIGNALS");
    assert!(sig.contains("SIGHUP") && sig.contains("config in force is kept") && sig.contains("SIGTERM"));
}

#[test]
fn see_also_names_every_page_that_is_written() {
    let see = body("allot", "SEE ALSO");
    for (name, _) in super::super::pages(&root()).into_iter().skip(1) {
        assert!(see.contains(&format!("\\fB{}\\fR(1)", super::super::text(&name))), "SEE ALSO lacks {name}");
    }
    assert!(see.contains("\\fBallot.toml\\fR(5)") && see.contains("\\fBsystemd.resource\\-control\\fR(5)"));
}
