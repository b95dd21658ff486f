//! The product apart from the lab (no root): `allot --help` lists only the product's
//! commands, the lab's commands are the lab's, and every other command given to the lab
//! runs the product beside it (or `$ALLOT_BIN`), keeping its exit status and words.

mod common;
use common::*;
use std::process::Command;

fn out(c: &mut Command) -> (i32, String, String) {
    let o = c.output().unwrap();
    (o.status.code().unwrap_or(-1), String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

#[test]
fn allot_help_lists_only_the_product() {
    let (code, help, _) = out(Command::new(exe()).arg("--help"));
    assert_eq!(code, 0);
    for product in ["daemon", "run", "set", "show", "fund", "status", "top", "metrics", "probe", "why"] {
        assert!(help.contains(&format!("\n  {product} ")), "allot --help lacks {product}:\n{help}");
    }
    for lab in ["bench", "sim", "selftest", "workload", "flood", "launcher"] {
        assert!(!help.contains(&format!("\n  {lab} ")), "allot --help lists the lab's {lab}:\n{help}");
        let (code, _, err) = out(Command::new(exe()).args([lab, "--help"]));
        assert_eq!(code, 2, "allot {lab} is not a command of the product: {err}");
    }
}

#[test]
fn the_lab_runs_its_own_commands_and_passes_the_rest_to_allot() {
    let (code, o, _) = out(Command::new(lab()).args(["workload", "cpu", "--duration", "0.1s"]));
    assert_eq!(code, 0);
    assert!(o.contains("\"kind\":\"cpu\""), "{o}");
    // A product command through the lab: the product's own error and exit status.
    let gone = std::env::temp_dir().join(format!("allot-lab-test-{}.sock", std::process::id()));
    let (code, _, err) = out(Command::new(lab()).args(["--socket", gone.to_str().unwrap(), "--json", "status"]));
    assert_eq!(code, 1, "{err}");
    assert!(err.starts_with("allot: cannot reach the allot daemon"), "the product answered: {err}");
    // No product where it is looked for: one error naming the path.
    let (code, _, err) = out(Command::new(lab()).arg("status").env("ALLOT_BIN", "/nonexistent/allot"));
    assert_eq!(code, 1);
    assert!(err.starts_with("allot-lab: run /nonexistent/allot status:") && err.lines().count() == 1, "{err}");
}
