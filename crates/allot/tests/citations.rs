//! What the sources cite is there to read (no root): no source cites an issue (a tracker's
//! thread is not in the repository, and its number means nothing to a reader of the code),
//! and every file of the repository a source names by path (`docs/policy.md`,
//! `packaging/allot.toml`, `DESIGN.md`) exists.
//!
//! Sources are the tracked text under `crates/`, `scripts/`, `fuzz/`, `packaging/` and
//! `tests/`: Rust, shell, Python, C, TOML and the BPF program's headers.

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// Every source file under the repository's source folders (build output and the fuzz
/// corpus aside).
fn sources(root: &Path) -> Vec<PathBuf> {
    const EXT: &[&str] = &["rs", "sh", "py", "c", "h", "toml", "spec"];
    const SKIP: &[&str] = &["target", "build", "corpus", "artifacts", ".git", "node_modules"];
    let mut out = vec![];
    let mut todo: Vec<PathBuf> = ["crates", "scripts", "fuzz", "packaging", "tests"].iter().map(|d| root.join(d)).collect();
    while let Some(dir) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if p.is_dir() {
                if !SKIP.contains(&name.as_str()) {
                    todo.push(p);
                }
            } else if p.extension().is_some_and(|x| EXT.iter().any(|e| x == *e)) || dir.ends_with("scripts") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// An issue cited in `line`: "issue 19", "issue #19", "(issue: …)", "the issue's", "part 9:".
fn cites_issue(line: &str) -> Option<String> {
    let l = line.to_ascii_lowercase();
    let words: Vec<&str> = l.split(|c: char| !(c.is_ascii_alphanumeric() || c == '\'' || c == '#' || c == ':')).filter(|w| !w.is_empty()).collect();
    for (i, w) in words.iter().enumerate() {
        let next = words.get(i + 1).copied().unwrap_or("");
        let number =
            |s: &str| s.trim_start_matches('#').trim_end_matches(':').chars().all(|c| c.is_ascii_digit()) && s.chars().any(|c| c.is_ascii_digit());
        let cited = match *w {
            "issue" | "issues" => number(next),
            "issue:" | "issue's" | "#issue" => true,
            "part" => number(next) && next.ends_with(':'),
            _ => false,
        };
        if cited {
            return Some(format!("{w} {next}"));
        }
    }
    None
}

/// The repository paths `line` names: `docs/…`, `packaging/…` and the root's
/// markdown files, as far as a path's characters go (a trailing dot or colon is prose).
fn cited_paths(line: &str) -> Vec<String> {
    let mut out = vec![];
    let path_char = |c: char| c.is_ascii_alphanumeric() || "/._-".contains(c);
    for prefix in ["docs/", "packaging/", "DESIGN.md", "BRIEF.md", "README.md"] {
        let mut from = 0;
        while let Some(at) = line[from..].find(prefix).map(|i| i + from) {
            from = at + prefix.len();
            // Part of a longer path (`tests/vm/systemd/README.md`, `../docs/`): another file.
            if line[..at].chars().next_back().is_some_and(|c| path_char(c) && c != '.' || c == '/') {
                continue;
            }
            let end = line[at..].find(|c: char| !path_char(c)).map_or(line.len(), |i| i + at);
            let p = line[at..end].trim_end_matches(['.', '/']);
            // A folder, or a path built at run time (`docs/results/{name}`), is not checked.
            if p.ends_with(".md") || p.ends_with(".toml") || p.ends_with(".json") || p.ends_with(".sh") {
                out.push(p.to_string());
            }
        }
    }
    out
}

#[test]
fn no_source_cites_an_issue_or_a_file_that_is_not_there() {
    let root = repo();
    let files = sources(&root);
    assert!(files.len() > 300, "{} source files found under {}", files.len(), root.display());
    let mut bad = vec![];
    for f in &files {
        let Ok(text) = std::fs::read_to_string(f) else { continue };
        let rel = f.strip_prefix(&root).unwrap().display().to_string();
        // This file spells the patterns it looks for.
        if rel.ends_with("tests/citations.rs") {
            continue;
        }
        for (n, line) in text.lines().enumerate() {
            if let Some(c) = cites_issue(line) {
                bad.push(format!("{rel}:{}: cites an issue ({c:?})", n + 1));
            }
            for p in cited_paths(line) {
                if !root.join(&p).exists() {
                    bad.push(format!("{rel}:{}: names {p}, which is not in the repository", n + 1));
                }
            }
        }
    }
    assert!(bad.is_empty(), "{} citations a reader cannot follow:\n{}", bad.len(), bad.join("\n"));
}

#[test]
fn the_check_sees_what_it_looks_for() {
    for cited in ["see issue 19", "(issue #4)", "Safe placement (issue: part 7)", "The issue's flood", "part 9: within 0.5 s", "ISSUE 3"] {
        assert!(cites_issue(cited).is_some(), "{cited:?}");
    }
    for fine in ["the request is served; issue the next one", "a part of the tree", "issues with nothing", "part 2 of the cap"] {
        assert_eq!(cites_issue(fine), None, "{fine:?}");
    }
    assert_eq!(cited_paths("see docs/policy.md, and docs/results/ for runs"), ["docs/policy.md"]);
    assert_eq!(cited_paths("(`DESIGN.md`) and tests/vm/systemd/README.md and ../docs/x.md"), ["DESIGN.md"]);
    assert_eq!(cited_paths("packaging/allot.toml."), ["packaging/allot.toml"]);
}
