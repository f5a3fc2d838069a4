//! What each exit status of the one table ([`rdmakit_vocab::exit::Exit`]) means
//! for each subcommand: the end of its `--help` and its man page's EXIT STATUS
//! section. The table is crates/manual/exit-status.md, compiled in: a section
//! names the subcommands it is for, each item is a status and its meaning. The test
//! `every_subcommand_exits_as_the_table_says` (crates/rdmakit/tests/exit_status.rs)
//! holds every subcommand to it.

use rdmakit_vocab::exit::Exit;

const PAGE: &str = include_str!("../exit-status.md");

/// The statuses of the subcommand `path` ("fleet report"), or None when the
/// page has no section for it (a group such as `fleet`).
pub fn of(path: &str) -> Option<Vec<(Exit, String)>> {
    let section = PAGE.split("\n## ").skip(1).find(|s| {
        let names = s.lines().next().unwrap_or_default();
        names.split(", ").any(|n| n == path)
    })?;
    let mut table: Vec<(Exit, String)> = Vec::new();
    for line in section.lines().skip(1) {
        let item = line.strip_prefix("- `").and_then(|l| l.split_once("` "));
        match (item, table.last_mut(), line.strip_prefix("  ")) {
            (Some((code, text)), _, _) => {
                let exit = code.parse().ok().and_then(Exit::from_code)?;
                table.push((exit, text.to_string()));
            }
            (None, Some((_, text)), Some(more)) => {
                text.push(' ');
                text.push_str(more.trim());
            }
            _ => {}
        }
    }
    Some(table)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_reads_back_whole() {
        let doctor = of("doctor").unwrap();
        assert_eq!(doctor.len(), 3);
        assert!(doctor[2]
            .1
            .ends_with("with --slurm-health-check: the checks or scontrol could not run"));
        assert_eq!(of("stat"), of("dev"));
        assert_eq!(of("monitor").unwrap()[0].0, Exit::Failed);
        assert_eq!(of("fleet"), None);
    }
}
