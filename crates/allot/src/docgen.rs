//! Shell completions and man pages, generated from the CLI's own definition (and, for
//! allot.toml(5), the config's: [`config_page`]) so they never drift from it. Both
//! packages (packaging/deb/build.sh, packaging/rpm/allot.spec) install them.
//!
//! clap_mangen writes each command's NAME, SYNOPSIS, DESCRIPTION and OPTIONS; the
//! sections a reader of a daemon's page looks for (FILES, SIGNALS, EXIT STATUS,
//! ENVIRONMENT, EXAMPLES, SEE ALSO, and the cap forms of `run` and `set`) come from
//! [`sections`], inserted before VERSION.

mod config_page;
mod sections;

use clap::{Command, CommandFactory};
use std::path::{Path, PathBuf};

/// `allot completions SHELL`: the completion script on stdout.
#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    pub shell: clap_complete::Shell,
}

/// `allot manpages DIR`: DIR/man1/allot.1 and allot-COMMAND.1, DIR/man5/allot.toml.5.
#[derive(Debug, clap::Args)]
pub struct ManpagesArgs {
    /// The man directory to write into (e.g. /usr/share/man): the pages go to its man1
    /// and man5 (made if missing).
    pub dir: PathBuf,
}

pub fn completions<C: CommandFactory>(a: CompletionsArgs) -> anyhow::Result<i32> {
    let mut cmd = C::command();
    clap_complete::generate(a.shell, &mut cmd, "allot", &mut std::io::stdout());
    Ok(0)
}

pub fn manpages<C: CommandFactory>(a: ManpagesArgs) -> anyhow::Result<i32> {
    let (man1, man5) = (a.dir.join("man1"), a.dir.join("man5"));
    for d in [&man1, &man5] {
        std::fs::create_dir_all(d).map_err(|e| anyhow::anyhow!("cannot make {}: {e}", d.display()))?;
    }
    let n = write_pages(&C::command(), &man1)?;
    let path = man5.join("allot.toml.5");
    std::fs::write(&path, config_page::render(env!("CARGO_PKG_VERSION"))).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    eprintln!("allot: wrote {n} pages to {} and allot.toml.5 to {}", man1.display(), man5.display());
    Ok(0)
}

/// The section-1 pages: allot.1, allot-COMMAND.1 and allot-COMMAND-SUB.1 for every command
/// not hidden. Returns how many.
fn write_pages(root: &Command, dir: &Path) -> anyhow::Result<usize> {
    let mut n = 0;
    for (name, cmd) in pages(root) {
        let path = dir.join(format!("{name}.1"));
        std::fs::write(&path, page(root, cmd, &name)?).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
        n += 1;
    }
    Ok(n)
}

/// Every page's name (allot, allot-run, allot-config-check) and its command.
fn pages(root: &Command) -> Vec<(String, Command)> {
    let mut out = vec![("allot".to_string(), root.clone())];
    for sub in root.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("allot-{}", sub.get_name());
        out.push((name.clone(), sub.clone()));
        for sub2 in sub.get_subcommands().filter(|s| !s.is_hide_set()) {
            out.push((format!("{name}-{}", sub2.get_name()), sub2.clone()));
        }
    }
    out
}

/// One section-1 page: clap_mangen's, with [`sections::for_page`]'s before VERSION.
fn page(root: &Command, cmd: Command, name: &str) -> anyhow::Result<String> {
    let cmd = cmd.name(name.to_string()).bin_name(name.replace('-', " "));
    let mut buf = vec![];
    clap_mangen::Man::new(cmd).render(&mut buf)?;
    let page = String::from_utf8(buf)?;
    let extra: String = sections::for_page(name, root).iter().map(Section::roff).collect();
    // No hyphenation from here on: paths and commands are copied as written.
    let extra = if extra.is_empty() { extra } else { format!(".nh\n{extra}") };
    Ok(match page.find("\n.SH VERSION") {
        Some(at) => format!("{}\n{extra}{}", &page[..at], &page[at + 1..]),
        None => format!("{page}{extra}"),
    })
}

/// A section of a page: its title and its body, already roff.
pub struct Section {
    pub title: &'static str,
    pub body: String,
}

impl Section {
    fn roff(&self) -> String {
        format!(".SH \"{}\"\n{}", self.title, self.body)
    }
}

/// Text for one roff line: backslashes and hyphens escaped (a hyphen as `\-`, so an
/// option copies as typed), a leading `.` or `'` made literal, and `` `code` `` set in
/// bold.
pub fn text(s: &str) -> String {
    let mut out = String::new();
    for (i, part) in s.split('`').enumerate() {
        let part = part.replace('\\', "\\e").replace('-', "\\-");
        if i % 2 == 1 {
            out.push_str(&format!("\\fB{part}\\fR"));
        } else {
            out.push_str(&part);
        }
    }
    if out.starts_with('.') || out.starts_with('\'') {
        out.insert_str(0, "\\&");
    }
    out
}

/// A paragraph.
pub fn para(s: &str) -> String {
    format!(".PP\n{}\n", text(s))
}

/// A tagged paragraph: `term` on its own line, `body` indented below it.
pub fn item(term: &str, body: &str) -> String {
    format!(".TP\n{}\n{}\n", text(term), text(body))
}

/// An example: what it does, then the command line set apart, as typed.
pub fn example(what: &str, line: &str) -> String {
    format!(".PP\n{}\n.PP\n.RS 4\n.nf\n{}\n.fi\n.RE\n", text(what), text(line).replace("\\fB", "").replace("\\fR", ""))
}

/// A reference to another page, for SEE ALSO: `name(section)` with the name in bold.
pub fn page_ref(name: &str, section: u8) -> String {
    format!("\\fB{}\\fR({section})", text(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_escapes_what_roff_would_read_as_markup() {
        assert_eq!(text("--cap 50%"), "\\-\\-cap 50%");
        assert_eq!(text(".hidden"), "\\&.hidden");
        assert_eq!(text("'quoted"), "\\&'quoted");
        assert_eq!(text("a\\b"), "a\\eb");
        assert_eq!(text("run `allot show` now"), "run \\fBallot show\\fR now");
    }

    #[test]
    fn every_page_has_its_sections_before_version() {
        let root = <crate::Cli as CommandFactory>::command();
        for (name, cmd) in pages(&root) {
            let p = page(&root, cmd, &name).unwrap();
            assert!(p.starts_with(".ie") || p.starts_with(".TH"), "{name}: {}", &p[..40]);
            let version = p.find(".SH VERSION").unwrap_or(p.len());
            for s in sections::for_page(&name, &root) {
                let at = p.find(&format!(".SH \"{}\"", s.title)).unwrap_or_else(|| panic!("{name}: no {}", s.title));
                assert!(at < version, "{name}: {} after VERSION", s.title);
            }
        }
    }

    #[test]
    fn manpages_writes_both_sections() {
        let dir = std::env::temp_dir().join(format!("allot-man-{}", std::process::id()));
        let r = manpages::<crate::Cli>(ManpagesArgs { dir: dir.clone() });
        let has = |p: &str| dir.join(p).is_file();
        let ok = r.is_ok() && has("man1/allot.1") && has("man1/allot-run.1") && has("man1/allot-config-check.1") && has("man5/allot.toml.5");
        let _ = std::fs::remove_dir_all(&dir);
        assert!(ok, "{r:?}");
    }
}
