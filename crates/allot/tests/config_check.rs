//! The CLI without a daemon, as any user: `allot config check` and `config example`, and
//! `allot run` when the daemon is down. Needs no root and starts no daemon.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn allot(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_allot"))
        .args(args)
        .env_remove("ALLOT_CONFIG")
        .env("ALLOT_SOCKET", "/nonexistent/allot-test/allot.sock")
        .output()
        .unwrap()
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// A directory of this test's own, removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("allot-config-check-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
    fn file(&self, name: &str, bytes: &[u8]) -> String {
        let p = self.0.join(name);
        std::fs::write(&p, bytes).unwrap();
        p.display().to_string()
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn example() -> String {
    let o = allot(&["config", "example"]);
    assert!(o.status.success());
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn example_is_the_packaged_file() {
    let shipped = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging/allot.toml")).unwrap();
    assert_eq!(example(), shipped);
}

/// The shipped example with [funding] uncommented and `defualt_funding = 50` appended: the
/// daemon would take it (funding for a user of that name), so the check passes with a
/// warning at that line; --strict fails it.
#[test]
fn a_typo_after_funding_is_a_warning_and_strict_fails_it() {
    let d = Dir::new("typo");
    let body = example().replace("# [funding]", "[funding]") + "defualt_funding = 50\n";
    let line = body.lines().count();
    let f = d.file("allot.toml", body.as_bytes());
    let o = allot(&["config", "check", &f]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert!(err.contains(&format!("{f}:{line}: warning: [funding] \"defualt_funding\" is no user")), "{err}");
    assert!(err.contains("top-level setting default_funding"), "{err}");
    assert!(out.contains("1 warning"), "{out}");
    let o = allot(&["config", "check", "--strict", &f]);
    assert_eq!(o.status.code(), Some(1), "{:?}", text(&o));
    let o = allot(&["--json", "config", "check", &f]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((v["ok"].as_bool(), v["warnings"][0]["line"].as_u64()), (Some(true), Some(line as u64)), "{v}");
    // ALLOT_CONFIG names the file when no FILE is given, as for the daemon.
    let o = Command::new(env!("CARGO_BIN_EXE_allot")).args(["config", "check", "--strict"]).env("ALLOT_CONFIG", &f).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{:?}", text(&o));
}

/// `--print` writes the config in force as TOML on stdout, the verdict on stderr; what it
/// prints checks good and prints the same again; a refused file prints nothing.
#[test]
fn print_writes_the_config_in_force_and_it_reads_back() {
    let d = Dir::new("print");
    let f = d.file("allot.toml", b"tick_ms = 200\n[funding]\nroot = { funding = 300, cap = \"1/3!\" }\n[policy]\nboost_below = 0.75\n");
    let o = allot(&["config", "check", "--print", &f]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert!(err.contains(&format!("{f}: good")) && !out.contains("good"), "{out}{err}");
    for want in ["tick_ms = 200", "boost_below = 0.75", "cap = \"0.3333333333333333!\"", "[memory]", "half_life_ms = "] {
        assert!(out.contains(want), "{want:?} missing from\n{out}");
    }
    let again = d.file("printed.toml", out.as_bytes());
    let o = allot(&["config", "check", "--print", &again]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    assert_eq!(text(&o).0, out, "the printed config prints the same");
    let bad = d.file("bad.toml", b"tick_ms = 1\n");
    let o = allot(&["config", "check", "--print", &bad]);
    assert_eq!((o.status.code(), o.stdout.is_empty()), (Some(1), true), "{:?}", text(&o));
    let o = allot(&["--json", "config", "check", "--print", &f]);
    assert!(!o.status.success() && text(&o).1.contains("leave out --json"), "{:?}", text(&o));
}

#[test]
fn a_broken_file_exits_1_naming_file_and_line() {
    let d = Dir::new("broken");
    for (name, body, line, needle) in [
        ("range.toml", &b"tick_ms = 100\n[policy]\nboost_below = 3\n"[..], 3, "policy.boost_below must be in (0, 1], got 3"),
        ("nottoml.toml", b"tick_ms = 100\n\nthis is not toml\n", 3, "a TOML line is `key = value`"),
        ("latin1.toml", b"# caf\xe9\n", 1, "byte 0xe9 is not UTF-8"),
        ("unknown.toml", b"\n\ntik_ms = 100\n", 3, "unknown field `tik_ms`, expected one of `default_funding`, `tick_ms`"),
    ] {
        let f = d.file(name, body);
        let o = allot(&["config", "check", &f]);
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(1), "{name}: {out}{err}");
        assert!(err.contains(&format!("{f}:{line}")) && err.contains(needle), "{name}: {err}");
    }
    let big = d.file("big.toml", &vec![b'#'; 2 << 20]);
    let (_, err) = text(&allot(&["config", "check", &big]));
    assert!(err.contains("larger than 1024 KiB"), "{err}");
    let missing = d.0.join("absent.toml").display().to_string();
    let o = allot(&["config", "check", &missing]);
    assert_eq!(o.status.code(), Some(1), "a named file must exist, as for allot daemon --config");
}

/// The policy (field 41 of /proc/PID/stat) of a shell `allot run` started with no daemon.
fn policy_of_unmanaged(flags: &[&str]) -> (u32, String) {
    let mut args = vec!["run"];
    args.extend_from_slice(flags);
    args.extend(["--", "sh", "-c", "cat /proc/$$/stat"]);
    let o = allot(&args);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    let after = &out[out.rfind(')').unwrap() + 2..];
    (after.split(' ').nth(41 - 3).unwrap().parse().unwrap(), err)
}

#[test]
fn run_without_a_daemon_keeps_background_as_sched_idle_and_names_what_it_drops() {
    let (policy, err) = policy_of_unmanaged(&[]);
    assert_eq!(policy, 0, "a plain run stays SCHED_OTHER; {err}");
    let (policy, err) = policy_of_unmanaged(&["--background", "-t", "300", "--cap", "0.5!", "--oom-group"]);
    assert_eq!(policy, 5, "--background is SCHED_IDLE; {err}");
    assert!(err.contains("--cap 0.5! was not applied: no daemon to enforce it"), "{err}");
    assert!(err.contains("--oom-group on was not applied: no daemon to enforce it"), "{err}");
    assert!(err.contains("-t 300 was not applied: no daemon to enforce it"), "{err}");
    assert!(err.contains("--background kept as SCHED_IDLE"), "{err}");
    let (policy, err) = policy_of_unmanaged(&["--cap", "0"]);
    assert_eq!(policy, 5, "--cap 0 is the background too; {err}");
    assert!(!err.contains("was not applied"), "{err}");
    let start = if Path::new("/run/systemd/system").is_dir() { "sudo systemctl start allot" } else { "sudo allot daemon" };
    assert!(err.contains(&format!("start it with: {start}")), "{err}");
}

#[test]
fn run_strict_without_a_daemon_fails_and_runs_nothing() {
    let d = Dir::new("strict");
    let mark = d.0.join("ran");
    let o = allot(&["run", "--strict", "--background", "--", "touch", mark.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{:?}", text(&o));
    assert!(!mark.exists());
}

#[test]
fn a_cap_above_the_machine_names_the_value_the_cpus_and_the_forms() {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    let over = format!("{}", n + 1);
    let o = allot(&["run", "--cap", &over, "--", "true"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("cap \"{over}\" is more than this machine's {n} CPU")) && err.contains(&format!("give at most {n} CPUs")), "{err}");
    assert!(err.contains("1/2!") && err.contains("50%") && err.contains("0 for the background"), "{err}");
    // The whole machine is allowed.
    let o = allot(&["run", "--cap", &format!("{n}!"), "--", "true"]);
    assert!(o.status.success(), "{:?}", text(&o));
}
