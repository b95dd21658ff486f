//! No module of any crate in the workspace imports a module that imports it back (no root).
//!
//! Each crate's module tree is read from its sources, from `lib.rs`, `main.rs` and its other
//! binaries down their `mod` declarations. A module imports another when it names an item
//! through it: a `use` path, or a `crate::`, `super::` or `self::` path in the code, taken to
//! the deepest module it names (so `crate::cgroup::Max`, a re-export, is an import of
//! `cgroup/mod.rs`). A module naming its own ancestors is not counted (it is inside them),
//! nor are test modules (`#[cfg(test)]`). The daemon's core holds its components' state
//! from leaf files, and the files that add the `Daemon`'s methods import the core, never the
//! reverse (docs/layout.md): this test keeps it so.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The text with comments, strings and character literals blanked (their newlines kept).
fn strip(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let keep_lines = |out: &mut String, s: &[u8]| out.extend(s.iter().filter(|&&c| c == b'\n').map(|_| '\n'));
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            let (start, mut depth) = (i, 0);
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            keep_lines(&mut out, &b[start..i]);
        } else if (b[i] == b'r' || b[i..].starts_with(b"br")) && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')) && {
            let j = i + if b[i] == b'b' { 2 } else { 1 };
            let h = b[j..].iter().take_while(|&&c| c == b'#').count();
            b.get(j + h) == Some(&b'"')
        } {
            let j = i + if b[i] == b'b' { 2 } else { 1 };
            let h = b[j..].iter().take_while(|&&c| c == b'#').count();
            let end: Vec<u8> = std::iter::once(b'"').chain(std::iter::repeat_n(b'#', h)).collect();
            let body = j + h + 1;
            let close = b[body..].windows(end.len()).position(|w| w == end.as_slice()).map_or(b.len(), |p| body + p + end.len());
            keep_lines(&mut out, &b[i..close]);
            out.push_str("\"\"");
            i = close;
        } else if b[i] == b'"' {
            let start = i;
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            keep_lines(&mut out, &b[start..i.min(b.len())]);
            out.push_str("\"\"");
        } else if b[i] == b'\'' && char_literal_len(&b[i..]).is_some() {
            i += char_literal_len(&b[i..]).unwrap();
            out.push_str("' '");
        } else {
            let ch = src[i..].chars().next().unwrap();
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// The length of a character literal at the start of `b` (not a lifetime).
fn char_literal_len(b: &[u8]) -> Option<usize> {
    if b.get(1) == Some(&b'\\') {
        let end = b.iter().skip(2).position(|&c| c == b'\'')? + 3;
        return (end <= 12).then_some(end);
    }
    let s = std::str::from_utf8(&b[1..b.len().min(6)]).unwrap_or_else(|e| std::str::from_utf8(&b[1..1 + e.valid_up_to()]).unwrap());
    let c = s.chars().next()?;
    (s[c.len_utf8()..].starts_with('\'')).then_some(c.len_utf8() + 2)
}

/// Does `before` end with `#[cfg(test)]` (and maybe other attributes after it)?
fn is_test(before: &str) -> bool {
    let t = before.trim_end();
    let mut t = t.trim_end_matches(|c: char| c.is_whitespace());
    loop {
        if t.ends_with("#[cfg(test)]") {
            return true;
        }
        match (t.ends_with(']'), t.rfind("#[")) {
            (true, Some(at)) => t = t[..at].trim_end(),
            _ => return false,
        }
    }
}

/// A crate's modules: path from the root (`["daemon", "core"]`) to file and whether it is
/// test code.
type Tree = BTreeMap<Vec<String>, (PathBuf, bool)>;

fn tree(root: &Path) -> Tree {
    let mut t = Tree::new();
    visit(&mut t, vec![], root, true, false);
    t
}

fn visit(t: &mut Tree, path: Vec<String>, file: &Path, is_modrs: bool, test: bool) {
    t.insert(path.clone(), (file.to_path_buf(), test));
    let raw = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let src = strip(&raw);
    let dir = file.parent().unwrap();
    let base = if is_modrs { dir.to_path_buf() } else { dir.join(file.file_stem().unwrap()) };
    let decl = regex_lite::Regex::new(r"(?m)^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;").unwrap();
    for m in decl.captures_iter(&src) {
        let name = m.get(1).unwrap().as_str();
        let test = test || is_test(&src[..m.get(0).unwrap().start()]);
        let with_path =
            regex_lite::Regex::new(&format!(r#"#\[path\s*=\s*"([^"]+)"\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+{name}\s*;"#)).unwrap();
        let (f, modrs) = match with_path.captures(&raw) {
            Some(p) => {
                let f = dir.join(p.get(1).unwrap().as_str());
                let modrs = f.file_name().is_some_and(|n| n == "mod.rs");
                (f, modrs)
            }
            None if base.join(format!("{name}.rs")).exists() => (base.join(format!("{name}.rs")), false),
            None => (base.join(name).join("mod.rs"), true),
        };
        let mut p = path.clone();
        p.push(name.to_string());
        visit(t, p, &f, modrs, test);
    }
}

/// `a::{b, c::{d as e}}` as the paths it names.
fn expand(prefix: &[String], tree: &str, out: &mut Vec<Vec<String>>) {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let path = tree.split(" as ").next().unwrap();
        let mut p = prefix.to_vec();
        p.extend(path.split("::").map(str::trim).filter(|s| !s.is_empty()).map(String::from));
        out.push(p);
        return;
    };
    let mut p = prefix.to_vec();
    p.extend(tree[..open].split("::").map(str::trim).filter(|s| !s.is_empty()).map(String::from));
    let inner = &tree[open + 1..tree.rfind('}').unwrap()];
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                expand(&p, &inner[start..i], out);
                start = i + 1;
            }
            _ => {}
        }
    }
    if !inner[start..].trim().is_empty() {
        expand(&p, &inner[start..], out);
    }
}

/// Every file → file import outside test code, ancestors left out.
fn imports(t: &Tree) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let token = regex_lite::Regex::new(r"\bmod\s+(\w+)\s*\{|\{|\}|\buse\s+([^;]+);|\b((?:crate|super|self)(?:::\w+)+)").unwrap();
    let mut edges: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
    for (path, (file, test)) in t {
        if *test {
            continue;
        }
        let src = strip(&std::fs::read_to_string(file).unwrap());
        // Inline modules open at a depth: (depth, name, test).
        let (mut inline, mut depth): (Vec<(usize, String, bool)>, usize) = (vec![], 0);
        let mut refs: Vec<(Vec<String>, Vec<String>)> = vec![];
        for m in token.captures_iter(&src) {
            let ctx = || path.iter().cloned().chain(inline.iter().map(|(_, n, _)| n.clone())).collect::<Vec<_>>();
            let in_test = inline.iter().any(|(_, _, t)| *t);
            if let Some(name) = m.get(1) {
                depth += 1;
                inline.push((depth, name.as_str().to_string(), is_test(&src[..m.get(0).unwrap().start()])));
            } else if &m[0] == "{" {
                depth += 1;
            } else if &m[0] == "}" {
                if inline.last().is_some_and(|(d, _, _)| *d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
            } else if in_test {
            } else if let Some(u) = m.get(2) {
                let mut paths = vec![];
                expand(&[], u.as_str(), &mut paths);
                refs.extend(paths.into_iter().map(|p| (ctx(), p)));
            } else if let Some(p) = m.get(3) {
                refs.push((ctx(), p.as_str().split("::").map(String::from).collect()));
            }
        }
        for (ctx, segs) in refs {
            let (mut base, mut rest) = match segs.first().map(String::as_str) {
                Some("crate") => (vec![], &segs[1..]),
                Some("super" | "self") => (ctx.clone(), &segs[..]),
                Some(first) => {
                    let mut child = ctx.clone();
                    child.push(first.to_string());
                    if t.contains_key(&child) {
                        (ctx.clone(), &segs[..])
                    } else {
                        continue;
                    }
                }
                None => continue,
            };
            while let Some(s) = rest.first().filter(|s| *s == "super" || *s == "self") {
                if s == "super" {
                    base.pop();
                }
                rest = &rest[1..];
            }
            base.extend(rest.iter().cloned());
            let target = (0..=base.len()).rev().find_map(|k| t.get_key_value(&base[..k]));
            if let Some((tpath, (tfile, _))) = target {
                let ancestor = path.starts_with(tpath);
                if !ancestor && tfile != file {
                    edges.entry(file.clone()).or_default().insert(tfile.clone());
                }
            }
        }
    }
    edges
}

/// The cycles: for each import a → b from which a is reached again, the way back.
fn cycles(edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<Vec<PathBuf>> {
    let mut found = vec![];
    for (a, to) in edges {
        for b in to {
            // Breadth first from b back to a.
            let mut prev: BTreeMap<&PathBuf, &PathBuf> = BTreeMap::new();
            let mut queue = std::collections::VecDeque::from([b]);
            while let Some(x) = queue.pop_front() {
                if x == a {
                    let mut back = vec![a.clone()];
                    let mut at = a;
                    while at != b {
                        at = prev[at];
                        back.push(at.clone());
                    }
                    back.reverse();
                    // a -> b -> ... -> a, started at its least file so each cycle is listed once.
                    let ring: Vec<PathBuf> = std::iter::once(a.clone()).chain(back.into_iter().take_while(|f| f != a)).collect();
                    let least = (0..ring.len()).min_by_key(|&i| &ring[i]).unwrap();
                    let mut way: Vec<PathBuf> = ring[least..].iter().chain(&ring[..least]).cloned().collect();
                    way.push(way[0].clone());
                    if !found.contains(&way) {
                        found.push(way);
                    }
                    break;
                }
                for y in edges.get(x).into_iter().flatten() {
                    if y != b && !prev.contains_key(y) {
                        prev.insert(y, x);
                        queue.push_back(y);
                    }
                }
            }
        }
    }
    found
}

/// Every crate root of the workspace: `lib.rs`, `main.rs` and the binaries its Cargo.toml names.
fn roots() -> Vec<PathBuf> {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut roots = vec![];
    for d in std::fs::read_dir(crates).unwrap().map(|e| e.unwrap().path()) {
        let Ok(manifest) = std::fs::read_to_string(d.join("Cargo.toml")) else { continue };
        let bins = regex_lite::Regex::new(r#"(?m)^path\s*=\s*"([^"]+\.rs)""#).unwrap();
        let named = bins.captures_iter(&manifest).map(|c| d.join(&c[1]));
        roots.extend(["src/lib.rs", "src/main.rs"].iter().map(|f| d.join(f)).chain(named).filter(|f| f.exists()));
    }
    roots.sort();
    roots.dedup();
    roots
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let roots = roots();
    assert!(roots.iter().any(|r| r.ends_with("allot/src/main.rs")) && roots.iter().any(|r| r.ends_with("allot-linux/src/lib.rs")), "{roots:?}");
    let mut all = vec![];
    let mut modules = 0;
    for root in &roots {
        let t = tree(root);
        modules += t.len();
        all.extend(cycles(&imports(&t)));
    }
    assert!(modules > 200, "only {modules} modules found: is the tree read?");
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().parent().unwrap();
    let shown: Vec<String> =
        all.iter().map(|w| w.iter().map(|f| f.strip_prefix(workspace).unwrap_or(f).display().to_string()).collect::<Vec<_>>().join(" -> ")).collect();
    assert!(all.is_empty(), "modules that import each other (move the shared item into a leaf module):\n{}", shown.join("\n"));
}

/// The check sees a cycle, through a re-export and a `super::` path, and does not count a
/// module naming its parent, nor test code.
#[test]
fn a_cycle_is_seen_and_a_parent_or_a_test_is_not_one() {
    let d = std::env::temp_dir().join(format!("allot-imports-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(d.join("a")).unwrap();
    let write = |f: &str, s: &str| std::fs::write(d.join(f), s).unwrap();
    write("lib.rs", "mod a;\nmod b;\n#[cfg(test)]\nmod t;\n");
    write("a/mod.rs", "mod leaf;\npub use leaf::X;\n// crate::b::Y in a comment\nconst S: &str = \"crate::b::Y\";\n");
    write("a/leaf.rs", "use super::super::b::Y;\npub struct X(Y);\n");
    write("b.rs", "pub struct Y;\nfn f() -> crate::a::X { todo!() }\n#[cfg(test)]\nmod tests {\n    use crate::t::Z;\n}\n");
    write("t.rs", "use crate::b::Y;\npub struct Z;\n");
    let t = tree(&d.join("lib.rs"));
    assert_eq!(t.len(), 5, "{t:?}");
    let found = cycles(&imports(&t));
    let names: BTreeSet<Vec<String>> = found.iter().map(|w| w.iter().map(|f| f.strip_prefix(&d).unwrap().display().to_string()).collect()).collect();
    assert_eq!(names, BTreeSet::from([vec!["a/leaf.rs".to_string(), "b.rs".into(), "a/mod.rs".into(), "a/leaf.rs".into()]]));
    assert!(found.iter().all(|w| !w.iter().any(|f| f.ends_with("t.rs"))), "test code is not counted: {names:?}");
    // b no longer names a: a/mod.rs and its leaf name each other, which is no cycle (the
    // leaf is inside a).
    write("b.rs", "pub struct Y;\n");
    write("a/mod.rs", "pub mod leaf;\nfn g(_: leaf::X) {}\n");
    write("a/leaf.rs", "use super::super::b::Y;\nuse super::g;\npub struct X(Y);\n");
    let found = cycles(&imports(&tree(&d.join("lib.rs"))));
    assert!(found.is_empty(), "a/leaf.rs naming its parent a/mod.rs is no cycle: {found:?}");
    let _ = std::fs::remove_dir_all(&d);
}
