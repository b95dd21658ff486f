//! The daemon's top type has no public field (no root): its state is components, each
//! reached from the other files through `core/access.rs`'s methods, so no file can reach
//! into another component's data (docs/layout.md). Read from the source, as imports.rs
//! reads the module tree.

/// The fields of `pub struct NAME { … }` in `src` that are visible outside their module
/// (`pub`, `pub(crate)`, `pub(super)`, `pub(in …)`), by name.
fn visible_fields(src: &str, name: &str) -> Option<Vec<String>> {
    let start = src.find(&format!("pub struct {name} {{"))?;
    let body = &src[start..];
    let end = body.find("\n}")?;
    let fields = body[..end]
        .lines()
        .skip(1)
        .map(str::trim)
        .filter(|l| !l.starts_with("//") && !l.starts_with("#["))
        .filter(|l| l.starts_with("pub ") || l.starts_with("pub("))
        .map(|l| l.split(':').next().unwrap_or(l).to_string())
        .collect();
    Some(fields)
}

#[test]
fn the_daemon_has_no_public_field() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/daemon/core.rs");
    let src = std::fs::read_to_string(path).unwrap();
    let fields = visible_fields(&src, "Daemon").expect("core.rs defines pub struct Daemon");
    assert!(fields.is_empty(), "the Daemon's fields reachable from other files: {fields:?}");
    // The struct was read, not missed: it holds the components the layout names.
    let body = &src[src.find("pub struct Daemon {").unwrap()..];
    for component in ["registry:", "tree:", "backend:", "placement:"] {
        assert!(body[..body.find("\n}").unwrap()].contains(component), "{component} in the Daemon");
    }
}

#[test]
fn a_public_field_is_seen() {
    let src = "pub struct Daemon {\n    /// Doc.\n    cfg: Config,\n    pub registry: Registry,\n    pub(crate) tree: Tree,\n}\n";
    assert_eq!(visible_fields(src, "Daemon").unwrap(), ["pub registry", "pub(crate) tree"]);
    assert_eq!(visible_fields("pub struct Daemon {\n    cfg: Config,\n}\n", "Daemon").unwrap(), Vec::<String>::new());
    assert_eq!(visible_fields("struct Other {}", "Daemon"), None);
}
