//! Scenario files: good ones run; bad ones name the file, the line and the field.

use allot_sim::scenario_file::{parse, FileError};

fn err(src: &str) -> (usize, String, String) {
    match parse("bad.toml", src) {
        Err(FileError::Bad { path, line, field, msg }) => {
            assert_eq!(path, "bad.toml");
            (line, field, msg)
        }
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("accepted:\n{src}"),
    }
}

const GOOD: &str = r#"
name = "mine"
cpus = 1
duration = "5s"
quantum = "10ms"
schedulers = ["lottery", "stride", "hybrid:boost=off"]

[[currency]]
name = "alice"
funding = 200

[[resource]]
name = "biowait"
priority = 16

[[task]]
name = "a"
user = "alice"
tickets = 300
behaviour = { kind = "cpu" }

[[task]]
name = "b"
count = 2
behaviour = { kind = "periodic", work = "5ms", sleep = "20ms", jitter = 0.1 }

[[task]]
name = "x"
behaviour = { kind = "server" }

[[task]]
name = "game"
nice = -5
behaviour = { kind = "client", work = "10ms", period = "16ms", server = "x", request = "1ms" }

[[task]]
name = "io"
behaviour = { kind = "kernel", work = "1ms", resource = "biowait", block = "5ms" }

[[task]]
name = "bimodal"
behaviour = { kind = "phased", phases = [ { for = "2s", kind = "cpu" }, { for = "3s", kind = "interactive", work = "1ms", think = "50ms" } ] }
"#;

#[test]
fn a_good_file_runs() {
    let s = parse("good.toml", GOOD).unwrap();
    assert_eq!(s.name, "mine");
    assert_eq!(s.runs.len(), 3);
    assert_eq!(s.runs[0].workload.tasks.len(), 7);
    assert_eq!(s.runs[0].workload.tasks[1].name, "b.1");
    let res = s.run(1);
    // alice (funding 200) outweighs "user" (100): a gets more than anyone else.
    let lot = &res[0].1;
    let a = lot.tasks.iter().find(|t| t.name == "a").unwrap().cpu;
    assert!(lot.tasks.iter().filter(|t| t.name != "a").all(|t| t.cpu < a));
}

#[test]
fn wrong_type_names_line_and_field() {
    let (line, field, msg) = err("duration = \"5s\"\ncpus = \"two\"\n[[task]]\nname = \"a\"\nbehaviour = { kind = \"cpu\" }\n");
    assert_eq!(line, 2);
    assert_eq!(field, "cpus");
    assert!(msg.contains("invalid type"), "{msg}");
}

#[test]
fn unknown_field_is_named() {
    let (line, field, _) = err("duration = \"5s\"\n[[task]]\nname = \"a\"\ntickts = 5\nbehaviour = { kind = \"cpu\" }\n");
    assert_eq!(line, 4);
    assert_eq!(field, "tickts");
}

#[test]
fn bad_values_say_what_is_allowed() {
    let (line, field, msg) = err("duration = \"5s\"\n[[task]]\nname = \"a\"\ntickets = 0\nbehaviour = { kind = \"cpu\" }\n");
    assert_eq!((line, field.as_str()), (4, "task.tickets"));
    assert!(msg.contains("1..10000") && msg.contains("got 0"), "{msg}");

    let (line, field, msg) = err("duration = \"5 parsecs\"\n[[task]]\nname = \"a\"\nbehaviour = { kind = \"cpu\" }\n");
    assert_eq!((line, field.as_str()), (1, "duration"));
    assert!(msg.contains("unknown unit"), "{msg}");

    let (line, field, msg) = err("duration = \"5s\"\nschedulers = [\"lotery\"]\n[[task]]\nname = \"a\"\nbehaviour = { kind = \"cpu\" }\n");
    assert_eq!((line, field.as_str()), (2, "schedulers"));
    assert!(msg.contains("valid schedulers: lottery, stride"), "{msg}");

    let (line, field, msg) = err("duration = \"5s\"\n[[task]]\nname = \"a\"\ncap = \"0!\"\nbehaviour = { kind = \"cpu\" }\n");
    assert_eq!((line, field.as_str()), (4, "task.cap"));
    assert!(msg.contains("hard cap of 0"), "{msg}");

    let (line, field, msg) =
        err("duration = \"5s\"\n[[task]]\nname = \"a\"\nbehaviour = { kind = \"client\", work = \"1ms\", server = \"nobody\", request = \"1ms\" }\n");
    assert_eq!((line, field.as_str()), (4, "behaviour.server"));
    assert!(msg.contains("nobody"), "{msg}");

    let (line, field, msg) = err("duration = \"5s\"\n[[task]]\nname = \"a\"\nbehaviour = { kind = \"periodc\" }\n");
    assert_eq!((line, field.as_str()), (4, "kind"));
    assert!(msg.contains("kinds: cpu, periodic"), "{msg}");
}

#[test]
fn load_names_the_file() {
    let dir = std::env::temp_dir().join(format!("allot-sim-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("bad.toml");
    std::fs::write(&p, "duration = 5\n").unwrap();
    let e = allot_sim::scenario_file::load(&p).unwrap_err().to_string();
    assert!(e.starts_with(&format!("{}:1: field `duration`", p.display())), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
