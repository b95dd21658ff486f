//! Shell completions and man pages, generated from the CLI's own definition so they never
//! drift from it. The Debian package (packaging/deb/build.sh) installs both.

use clap::{Command, CommandFactory};
use std::path::{Path, PathBuf};

/// `allot completions SHELL`: the completion script on stdout.
#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    pub shell: clap_complete::Shell,
}

/// `allot manpages DIR`: one page per command, allot.1 and allot-COMMAND.1.
#[derive(Debug, clap::Args)]
pub struct ManpagesArgs {
    /// The directory to write the pages to (made if missing).
    pub dir: PathBuf,
}

pub fn completions<C: CommandFactory>(a: CompletionsArgs) -> anyhow::Result<i32> {
    let mut cmd = C::command();
    clap_complete::generate(a.shell, &mut cmd, "allot", &mut std::io::stdout());
    Ok(0)
}

pub fn manpages<C: CommandFactory>(a: ManpagesArgs) -> anyhow::Result<i32> {
    std::fs::create_dir_all(&a.dir).map_err(|e| anyhow::anyhow!("cannot make {}: {e}", a.dir.display()))?;
    let cmd = C::command();
    let mut n = 0;
    write_page(&a.dir, cmd.clone(), "allot", &mut n)?;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("allot-{}", sub.get_name());
        write_page(&a.dir, sub.clone(), &name, &mut n)?;
        for sub2 in sub.get_subcommands().filter(|s| !s.is_hide_set()) {
            write_page(&a.dir, sub2.clone(), &format!("{name}-{}", sub2.get_name()), &mut n)?;
        }
    }
    eprintln!("allot: wrote {n} man pages to {}", a.dir.display());
    Ok(0)
}

fn write_page(dir: &Path, cmd: Command, name: &str, n: &mut usize) -> anyhow::Result<()> {
    let cmd = cmd.name(name.to_string()).bin_name(name.replace("-", " "));
    let mut buf = vec![];
    clap_mangen::Man::new(cmd).render(&mut buf)?;
    let path = dir.join(format!("{name}.1"));
    std::fs::write(&path, buf).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    *n += 1;
    Ok(())
}
