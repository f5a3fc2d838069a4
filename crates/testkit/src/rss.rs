//! A child's peak memory, for tests of inputs meant to exhaust it (issue 34:
//! no input may take rdmakit past 500 MB).
//!
//! Measured by GNU time (`/usr/bin/time`, Debian package `time`), which forks
//! the program and reports its maximum resident set size from wait4(2). The test
//! process cannot ask wait4 itself: a child spawned from it (vfork, then exec)
//! has the test process's own high-water mark folded into its `ru_maxrss` at
//! exec, so a 2 MB `sh -c 'exit 3'` reads as 50 MB. time's own footprint is a
//! few hundred KB, so what it reports is the program's.

use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

/// Where GNU time is.
const TIME: &str = "/usr/bin/time";

/// What [`run_measured`] saw.
#[derive(Debug)]
pub struct Measured {
    /// Exit status, stdout and stderr (time's own report is not in them).
    pub output: Output,
    /// Peak resident set size in bytes.
    pub peak_rss: u64,
}

impl Measured {
    /// Fails, showing the end of stderr, unless the program stayed under `mb`
    /// megabytes (10^6 bytes) of resident memory.
    pub fn assert_rss_under(&self, mb: u64, what: &str) {
        assert!(
            self.peak_rss < mb * 1_000_000,
            "{what}: peak RSS {} MB, over {mb} MB\n{}",
            self.peak_rss / 1_000_000,
            crate::tail(&self.output.stderr)
        );
    }
}

/// Runs `cmd` under GNU time, at most `limit` (past it the test fails, as
/// [`crate::wait`] does), and returns its output and peak memory. Fails loudly
/// when GNU time is missing: a memory bound no one measured is no test.
pub fn run_measured(cmd: &Command, limit: Duration, what: &str) -> Measured {
    assert!(
        std::path::Path::new(TIME).exists(),
        "{TIME} is missing (apt-get install time): it measures {what}'s peak memory"
    );
    let report = tempfile::NamedTempFile::new().expect("a temporary file");
    let mut timed = Command::new(TIME);
    timed
        .args(["-f", "%M", "-o"])
        .arg(report.path())
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => timed.env(k, v),
            None => timed.env_remove(k),
        };
    }
    if let Some(d) = cmd.get_current_dir() {
        timed.current_dir(d);
    }
    // Its own process group: past the limit, time and the program both die
    // (killing time alone would leave a hung program holding the pipes).
    let child = timed
        .process_group(0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{TIME} {:?}: {e}", cmd.get_program()));
    let output = wait_group(child, limit, what);
    let text = std::fs::read_to_string(report.path()).unwrap_or_default();
    // The last line is %M (KiB); a line before it says when the program was
    // killed by a signal ("Command terminated by signal 9").
    let kib: u64 = text
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("{what}: no peak memory from {TIME}: {text:?}"));
    Measured {
        output,
        peak_rss: kib * 1024,
    }
}

/// [`crate::wait`] for a child leading its own process group: past `limit` the
/// whole group is killed, then the test fails showing the end of the output.
fn wait_group(child: Child, limit: Duration, what: &str) -> Output {
    crate::wait_or(child, limit, what, |c| {
        // SAFETY: kill(2) with the negated id of a group this test created.
        unsafe { libc::kill(-(c.id() as libc::pid_t), libc::SIGKILL) };
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut c = Command::new("sh");
        c.args(["-c", script]);
        c
    }

    #[test]
    fn a_child_that_holds_60_mb_measures_over_60_mb_and_one_that_does_not_under() {
        let m = run_measured(
            &sh("x=$(head -c 60000000 /dev/zero | tr '\\0' a); echo ${#x}"),
            Duration::from_secs(60),
            "sh",
        );
        assert_eq!(String::from_utf8_lossy(&m.output.stdout), "60000000\n");
        assert!(m.peak_rss > 60_000_000, "{}", m.peak_rss);
        let r = std::panic::catch_unwind(|| m.assert_rss_under(50, "sh"));
        assert!(r.is_err(), "60 MB passed a 50 MB bound");
        let mut small = sh("echo $V; exit 3");
        small.env("V", "passed");
        let small = run_measured(&small, Duration::from_secs(10), "sh");
        assert_eq!(small.output.status.code(), Some(3));
        assert_eq!(String::from_utf8_lossy(&small.output.stdout), "passed\n");
        small.assert_rss_under(10, "sh");
    }

    #[test]
    fn a_child_past_its_limit_fails_the_test() {
        let r = std::panic::catch_unwind(|| {
            run_measured(&sh("sleep 30"), Duration::from_millis(200), "sleep")
        });
        assert!(r.is_err());
    }
}
