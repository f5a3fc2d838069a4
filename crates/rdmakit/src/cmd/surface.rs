//! `rdmakit completions SHELL` and `rdmakit man`: shell completions and man pages
//! generated from the CLI definition itself (clap_complete, clap_mangen), so they
//! never drift from the flags. The Debian package ships both (scripts/package).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;

#[derive(clap::Args, Debug)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish (also elvish, powershell).
    #[arg(value_name = "SHELL")]
    shell: clap_complete::Shell,
}

#[derive(clap::Args, Debug)]
pub struct ManArgs {
    /// Write rdmakit.1 and one page per subcommand (rdmakit-doctor.1, rdmakit-soft-status.1,
    /// ...) into DIR; without it, print rdmakit.1 to stdout.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

/// Prints the completion script for `shell` to stdout.
pub fn completions(a: CompletionsArgs, mut cmd: clap::Command) -> anyhow::Result<ExitCode> {
    clap_complete::generate(a.shell, &mut cmd, "rdmakit", &mut std::io::stdout());
    Ok(ExitCode::SUCCESS)
}

/// Writes the man pages.
pub fn man(a: ManArgs, cmd: clap::Command) -> anyhow::Result<ExitCode> {
    let cmd = cmd.version(env!("CARGO_PKG_VERSION"));
    match &a.dir {
        None => {
            clap_mangen::Man::new(cmd).render(&mut std::io::stdout())?;
        }
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            let mut n = 0;
            write_pages(&cmd, "rdmakit", dir, &mut n)?;
            eprintln!("rdmakit: wrote {n} man pages to {}", dir.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `cmd`'s page as `name.1`, then each subcommand's as `name-sub.1`, depth first.
fn write_pages(cmd: &clap::Command, name: &str, dir: &Path, n: &mut usize) -> anyhow::Result<()> {
    let mut cmd = cmd.clone().display_name(name.to_string());
    cmd.build();
    let path = dir.join(format!("{name}.1"));
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .title(name.to_ascii_uppercase())
        .render(&mut buf)?;
    std::fs::write(&path, buf).with_context(|| format!("writing {}", path.display()))?;
    *n += 1;
    for sub in cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        write_pages(sub, &format!("{name}-{}", sub.get_name()), dir, n)?;
    }
    Ok(())
}
