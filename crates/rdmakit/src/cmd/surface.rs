//! `rdmakit completions SHELL` and `rdmakit man`: shell completions and man pages
//! generated from the CLI definition itself (crates/manual), so they never drift
//! from the flags. The Debian package ships both (scripts/package).

use std::io::Write as _;
use std::path::PathBuf;

use rdmakit_vocab::exit::Exit;

#[derive(clap::Args, Debug)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish (also elvish, powershell).
    #[arg(value_name = "SHELL")]
    shell: rdmakit_manual::Shell,
}

#[derive(clap::Args, Debug)]
pub struct ManArgs {
    /// Write rdmakit.1 and one page per subcommand (rdmakit-doctor.1, rdmakit-soft-status.1,
    /// ...) into DIR; without it, print rdmakit.1 to stdout.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

/// Prints the completion script for the shell to stdout.
pub fn completions(a: CompletionsArgs, cmd: clap::Command) -> anyhow::Result<Exit> {
    rdmakit_manual::completions(a.shell, cmd, &mut std::io::stdout());
    Ok(Exit::Ok)
}

/// Prints the man page, or writes every page into `--dir`.
pub fn man(a: ManArgs, cmd: clap::Command) -> anyhow::Result<Exit> {
    match &a.dir {
        None => std::io::stdout().write_all(rdmakit_manual::page(cmd)?.as_bytes())?,
        Some(dir) => {
            let n = rdmakit_manual::write_pages(cmd, dir)?;
            eprintln!("rdmakit: wrote {n} man pages to {}", dir.display());
        }
    }
    Ok(Exit::Ok)
}
