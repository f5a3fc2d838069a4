//! rdmakit's exit statuses: one table for every subcommand, so a health check,
//! a Slurm Prolog or a script acts on the same number for the same situation
//! whichever command it ran.
//!
//! | status | meaning |
//! |---|---|
//! | 0 | done: nothing to act on was found (a view with nothing to show is 0 too) |
//! | 1 | something to act on was found: a finding at or above `--fail-on`, an anomaly, a failed check, test or run |
//! | 2 | rdmakit could not do what was asked: bad arguments, an input it cannot read, an output it cannot write |
//! | 3 | incomplete: part of what was asked exists but could not be read (not recorded in this bundle, no permission, a malformed reply); what could be read was shown, the rest is named on stderr |
//!
//! Why a fourth status: a script must tell "there is nothing" (0) from "rdmakit
//! could not look" — and neither is a finding (1) nor a usage error (2). A
//! replayed bundle that never recorded QP counters, or a kernel that refused
//! one dump, is that case.
//!
//! One exception keeps an outside contract: `doctor --npd` speaks
//! node-problem-detector's plugin statuses (0 OK, 1 problem, 2 unknown).
//!
//! ```
//! use rdmakit_vocab::exit::Exit;
//! assert_eq!(Exit::Incomplete.code(), 3);
//! assert_eq!(Exit::from_code(1), Some(Exit::Found));
//! ```

/// One exit status of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Exit {
    /// 0: done, nothing to act on.
    Ok,
    /// 1: something to act on was found.
    Found,
    /// 2: bad arguments, or rdmakit itself failed (an unreadable input, an
    /// unwritable output).
    Failed,
    /// 3: part of what was asked could not be read; the rest was shown.
    Incomplete,
}

impl Exit {
    /// Every status, in number order.
    pub const ALL: [Exit; 4] = [Exit::Ok, Exit::Found, Exit::Failed, Exit::Incomplete];

    /// The process exit status.
    pub const fn code(self) -> u8 {
        match self {
            Exit::Ok => 0,
            Exit::Found => 1,
            Exit::Failed => 2,
            Exit::Incomplete => 3,
        }
    }

    /// "Exit status:" and one entry per status of `table` (a status and what
    /// it means there), as a command's `--help` ends: each meaning wrapped at
    /// 78 columns under its own text, so an 80-column terminal shows it as
    /// written.
    pub fn help_text(table: &[(Exit, String)]) -> String {
        const WIDTH: usize = 78;
        const INDENT: &str = "     ";
        let mut s = String::from("Exit status:");
        for (e, m) in table {
            let mut line = format!("  {}  ", e.code());
            let mut fresh = true;
            for w in m.split_whitespace() {
                if !fresh && line.len() + 1 + w.len() > WIDTH {
                    s.push('\n');
                    s.push_str(&line);
                    line = INDENT.to_string();
                    fresh = true;
                }
                if !fresh {
                    line.push(' ');
                }
                line.push_str(w);
                fresh = false;
            }
            s.push('\n');
            s.push_str(&line);
        }
        s
    }

    /// The status with this number, if the table has one.
    pub fn from_code(code: u8) -> Option<Exit> {
        Exit::ALL.into_iter().find(|e| e.code() == code)
    }

    /// What the status means for every subcommand (the README's table).
    pub const fn meaning(self) -> &'static str {
        match self {
            Exit::Ok => "done; nothing to act on was found (a view with nothing to show is 0 too)",
            Exit::Found => {
                "something to act on was found: a finding at or above --fail-on, an anomaly, \
                 a failed check, test or run"
            }
            Exit::Failed => {
                "rdmakit could not do what was asked: bad arguments, an input it cannot read, \
                 an output it cannot write"
            }
            Exit::Incomplete => {
                "incomplete: part of what was asked exists but could not be read (not recorded \
                 in this bundle, no permission, a malformed reply); the rest was shown and what \
                 is missing is named on stderr"
            }
        }
    }
}

impl From<Exit> for std::process::ExitCode {
    fn from(e: Exit) -> std::process::ExitCode {
        std::process::ExitCode::from(e.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_distinct_and_round_trip() {
        for (i, e) in Exit::ALL.into_iter().enumerate() {
            assert_eq!(usize::from(e.code()), i);
            assert_eq!(Exit::from_code(e.code()), Some(e));
            assert!(!e.meaning().is_empty());
        }
        assert_eq!(Exit::from_code(4), None);
    }

    #[test]
    fn help_text_wraps_each_meaning_under_itself() {
        let t = [
            (Exit::Ok, "shown".to_string()),
            (Exit::Failed, "word ".repeat(20)),
        ];
        let h = Exit::help_text(&t);
        assert_eq!(
            h,
            "Exit status:\n  0  shown\n  2  word word word word word word word word word word word \
             word word word\n     word word word word word word"
        );
        assert!(h.lines().all(|l| l.len() <= 78));
    }
}
