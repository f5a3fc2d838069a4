//! `rdmakit completions SHELL` and `rdmakit man`: shell completions and man pages
//! generated from the CLI definition itself (clap_complete, clap_mangen), so they
//! never drift from the flags. The Debian package ships both (scripts/package).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use rdmakit_vocab::exit::Exit;

use super::exits;

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
    Ok(Exit::Ok.into())
}

/// `cmd` with each subcommand's exit statuses at the end of its `--help`
/// (clap's long help: `-h` stays short), and the table every subcommand shares
/// at the end of `rdmakit --help`.
pub fn with_exit_status(cmd: clap::Command) -> clap::Command {
    let top = Exit::help_text(&general());
    apply(cmd.after_long_help(top), "")
}

fn apply(cmd: clap::Command, path: &str) -> clap::Command {
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    names.into_iter().fold(cmd, |cmd, name| {
        let sub_path = if path.is_empty() {
            name.clone()
        } else {
            format!("{path} {name}")
        };
        cmd.mut_subcommand(&name, |sub| {
            let sub = match statuses(&sub_path) {
                Some(t) => sub.after_long_help(Exit::help_text(&t)),
                None => sub,
            };
            apply(sub, &sub_path)
        })
    })
}

/// The statuses of `path`: its row of the table, or for a group (`fleet`,
/// `soft`) the general table.
fn statuses(path: &str) -> Option<Vec<(Exit, String)>> {
    match exits::of(path) {
        Some(t) => Some(t),
        None if path == "help" || path.ends_with(" help") => None,
        None => Some(general()),
    }
}

/// Every status with what it means for every subcommand.
fn general() -> Vec<(Exit, String)> {
    Exit::ALL
        .iter()
        .map(|e| (*e, e.meaning().to_string()))
        .collect()
}

/// The man page's EXIT STATUS section (roff).
fn man_section(t: &[(Exit, String)]) -> String {
    use clap_mangen::roff::{bold, roman, Roff};
    let mut r = Roff::new();
    r.control("SH", ["EXIT STATUS"]);
    for (e, m) in t {
        r.control("TP", [] as [&str; 0]);
        r.text([bold(e.code().to_string())]);
        r.text([roman(m.as_str())]);
    }
    r.to_roff()
}

/// Writes the man pages.
pub fn man(a: ManArgs, cmd: clap::Command) -> anyhow::Result<ExitCode> {
    let cmd = cmd.version(env!("CARGO_PKG_VERSION"));
    match &a.dir {
        None => {
            let page = render_page(cmd, "rdmakit", &general())?;
            std::io::stdout().write_all(page.as_bytes())?;
        }
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(|e| {
                anyhow::anyhow!(
                    "--dir {}: cannot create it: {}",
                    dir.display(),
                    rdmakit_vocab::errno::io_text(&e)
                )
            })?;
            let mut n = 0;
            write_pages(&cmd, "rdmakit", "", dir, &mut n)?;
            eprintln!("rdmakit: wrote {n} man pages to {}", dir.display());
        }
    }
    Ok(Exit::Ok.into())
}

/// One page: clap_mangen's sections, with EXIT STATUS before VERSION.
fn render_page(cmd: clap::Command, title: &str, t: &[(Exit, String)]) -> anyhow::Result<String> {
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd)
        .title(title.to_ascii_uppercase())
        .render(&mut buf)?;
    let page = String::from_utf8_lossy(&buf).into_owned();
    let section = man_section(t);
    Ok(match page.find(".SH VERSION") {
        Some(at) => format!("{}{section}{}", &page[..at], &page[at..]),
        None => page + &section,
    })
}

/// `cmd`'s page as `name.1`, then each subcommand's as `name-sub.1`, depth first.
fn write_pages(
    cmd: &clap::Command,
    name: &str,
    path: &str,
    dir: &Path,
    n: &mut usize,
) -> anyhow::Result<()> {
    let mut cmd = cmd.clone().display_name(name.to_string());
    cmd.build();
    let t = if path.is_empty() {
        general()
    } else {
        statuses(path).unwrap_or_else(general)
    };
    let file = dir.join(format!("{name}.1"));
    let page = render_page(cmd.clone(), name, &t)?;
    std::fs::write(&file, page).map_err(|e| {
        anyhow::anyhow!(
            "--dir: cannot write {}: {}",
            file.display(),
            rdmakit_vocab::errno::io_text(&e)
        )
    })?;
    *n += 1;
    for sub in cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        let sub_path = if path.is_empty() {
            sub.get_name().to_string()
        } else {
            format!("{path} {}", sub.get_name())
        };
        write_pages(
            sub,
            &format!("{name}-{}", sub.get_name()),
            &sub_path,
            dir,
            n,
        )?;
    }
    Ok(())
}
