//! `rdmakit-manual`: rdmakit's manual, generated from its command-line
//! definition (the `clap::Command` the binary passes in) so it never drifts from
//! the flags: shell completions (clap_complete), man pages (clap_mangen), and at
//! the end of every subcommand's `--help` and man page what each exit status
//! means there ([`exits`], the table crates/manual/exit-status.md). The Debian
//! package ships the pages and completions (scripts/package).
//!
//! Promises: the same command gives the same bytes; nothing is read but the
//! compiled-in table, and only [`write_pages`] writes (into the directory it is
//! given).
//!
//! ```
//! let cmd = clap::Command::new("rdmakit").subcommand(clap::Command::new("doctor"));
//! let cmd = rdmakit_manual::with_exit_status(cmd);
//! let doctor = cmd.find_subcommand("doctor").unwrap();
//! assert!(doctor.get_after_long_help().is_some());
//! assert!(rdmakit_manual::page(cmd).unwrap().contains("EXIT STATUS"));
//! ```

pub mod exits;

use std::path::{Path, PathBuf};

pub use clap_complete::Shell;
use rdmakit_vocab::errno::io_text;
use rdmakit_vocab::exit::Exit;

/// Why the man pages could not be written; each names `--dir` and the path.
#[derive(Debug, thiserror::Error)]
pub enum ManError {
    /// The directory could not be created.
    #[error("--dir {}: cannot create it: {}", dir.display(), io_text(error))]
    CreateDir {
        /// The directory `--dir` named.
        dir: PathBuf,
        /// What the system said.
        error: std::io::Error,
    },
    /// A page could not be written.
    #[error("--dir: cannot write {}: {}", file.display(), io_text(error))]
    Write {
        /// The page's file.
        file: PathBuf,
        /// What the system said.
        error: std::io::Error,
    },
    /// clap_mangen could not render a page.
    #[error(transparent)]
    Render(#[from] std::io::Error),
}

/// Writes the completion script of `cmd` (named `rdmakit`) for `shell` to `out`.
pub fn completions(shell: Shell, mut cmd: clap::Command, out: &mut dyn std::io::Write) {
    clap_complete::generate(shell, &mut cmd, "rdmakit", out);
}

/// The subcommand `matches` ran, as typed ("fleet report"), for messages.
pub fn typed(mut matches: &clap::ArgMatches) -> String {
    let mut path = Vec::new();
    while let Some((name, sub)) = matches.subcommand() {
        path.push(name);
        matches = sub;
    }
    path.join(" ")
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

/// The top command's page (`rdmakit.1`), with the statuses every subcommand
/// shares.
///
/// # Errors
/// clap_mangen failed to render it.
pub fn page(cmd: clap::Command) -> Result<String, ManError> {
    render_page(cmd, "rdmakit", &general())
}

/// Writes `rdmakit.1` and one page per subcommand (`rdmakit-doctor.1`,
/// `rdmakit-soft-status.1`, ...) into `dir`, created if missing; returns how
/// many it wrote.
///
/// # Errors
/// [`ManError`]: `dir` cannot be created or a page cannot be written.
pub fn write_pages(cmd: clap::Command, dir: &Path) -> Result<usize, ManError> {
    std::fs::create_dir_all(dir).map_err(|error| ManError::CreateDir {
        dir: dir.to_path_buf(),
        error,
    })?;
    let mut n = 0;
    write_tree(&cmd, "rdmakit", "", dir, &mut n)?;
    Ok(n)
}

/// One page: clap_mangen's sections, with EXIT STATUS before VERSION.
fn render_page(cmd: clap::Command, title: &str, t: &[(Exit, String)]) -> Result<String, ManError> {
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
fn write_tree(
    cmd: &clap::Command,
    name: &str,
    path: &str,
    dir: &Path,
    n: &mut usize,
) -> Result<(), ManError> {
    let mut cmd = cmd.clone().display_name(name.to_string());
    cmd.build();
    let t = if path.is_empty() {
        general()
    } else {
        statuses(path).unwrap_or_else(general)
    };
    let file = dir.join(format!("{name}.1"));
    let page = render_page(cmd.clone(), name, &t)?;
    std::fs::write(&file, page).map_err(|error| ManError::Write {
        file: file.clone(),
        error,
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
        write_tree(
            sub,
            &format!("{name}-{}", sub.get_name()),
            &sub_path,
            dir,
            n,
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli() -> clap::Command {
        clap::Command::new("rdmakit")
            .subcommand(clap::Command::new("doctor"))
            .subcommand(clap::Command::new("fleet").subcommand(clap::Command::new("report")))
    }

    #[test]
    fn every_page_is_written_with_its_exit_statuses() {
        let dir = tempfile::tempdir().unwrap();
        let n = write_pages(cli(), dir.path()).unwrap();
        assert_eq!(n, 4);
        let doctor = std::fs::read_to_string(dir.path().join("rdmakit-doctor.1")).unwrap();
        assert!(doctor.contains(".SH \"EXIT STATUS\""), "{doctor}");
        assert!(dir.path().join("rdmakit-fleet-report.1").is_file());
    }

    #[test]
    fn a_directory_that_cannot_be_made_is_named() {
        let e = write_pages(cli(), Path::new("/proc/rdmakit")).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("--dir /proc/rdmakit: cannot create it: E"),
            "{e}"
        );
    }
}
