//! The node-problem-detector custom-plugin contract (`rdmakit doctor --npd`): exit 0
//! when the node is fine, 1 when it has a problem, anything else (2) when that is
//! not known; one line on stdout, at most [`MAX_MESSAGE`] bytes (NPD's default
//! `max_output_length`), the most useful words first.
//!
//! Never healthy by default: a verdict is `ok` or `problem` only from a check that
//! completed in the same invocation. When the check cannot complete (it outlived its
//! deadline — a sysfs read can hang on a wedged device — or the host could not be
//! read), the verdict is `unknown`, and the small state file written after each
//! completed check ([`State`]: the boot it ran in, when, its verdict) lets the line
//! say what the last completed check of this boot found — or that none has completed
//! since the node booted. With NPD's `skip_initial_status`, which keeps NPD from
//! publishing its default (healthy) condition when it starts, a restarted node or
//! plugin therefore reads "unknown", never "healthy", until its first check has run.
//! See docs/npd.md.

use serde::{Deserialize, Serialize};

use crate::codes::Severity;
use crate::finding::Finding;
use crate::oneline::{finding_line, shorten, Unit};
use crate::report::Report;

/// NPD's default `max_output_length`: longer output is cut there.
pub const MAX_MESSAGE: usize = 80;

/// The state file's schema.
pub const STATE_SCHEMA: &str = "rdmakit.npd-state/v1";

/// What the plugin tells NPD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Ok(String),
    Problem(String),
    Unknown(String),
}

impl Verdict {
    /// NPD's status: 0 OK, 1 NonOK, 2 Unknown.
    pub fn exit_code(&self) -> u8 {
        match self {
            Verdict::Ok(_) => 0,
            Verdict::Problem(_) => 1,
            Verdict::Unknown(_) => 2,
        }
    }

    /// The one line, within [`MAX_MESSAGE`] bytes, shortened by dropping detail
    /// (never inside a word; [`crate::oneline::shorten`]).
    pub fn line(&self) -> String {
        let m = match self {
            Verdict::Ok(m) | Verdict::Problem(m) | Verdict::Unknown(m) => m,
        };
        shorten(m, MAX_MESSAGE, Unit::Bytes)
    }
}

/// The line of a problem: the finding's code, device and port, what is wrong,
/// and how many more findings failed the check, within [`MAX_MESSAGE`] bytes
/// ([`crate::oneline`]).
pub fn problem_line(f: &Finding, more: usize) -> String {
    let tail = match more {
        0 => String::new(),
        n => format!("(+{n} more)"),
    };
    finding_line("", f, &tail, MAX_MESSAGE, Unit::Bytes)
}

/// The last completed check, kept between invocations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    pub schema: String,
    /// /proc/sys/kernel/random/boot_id of the boot the check ran in.
    pub boot_id: String,
    /// When it completed (seconds since the epoch).
    pub checked_unix: u64,
    /// Its exit status (0 or 1).
    pub exit: u8,
    /// Its line.
    pub message: String,
}

impl State {
    /// Writes the state to `path` atomically: a temporary file in the same
    /// directory (created if missing), renamed.
    ///
    /// # Errors
    /// The directory, the write or the rename failing.
    pub fn save(&self, path: &str) -> std::io::Result<()> {
        let p = std::path::Path::new(path);
        if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let tmp = p.with_extension(format!("tmp.{}", std::process::id()));
        std::fs::write(&tmp, self.to_json() + "\n")?;
        std::fs::rename(&tmp, p)
    }

    /// The state after a completed check.
    pub fn of(v: &Verdict, boot_id: &str, now_unix: u64) -> State {
        State {
            schema: STATE_SCHEMA.to_string(),
            boot_id: boot_id.to_string(),
            checked_unix: now_unix,
            exit: v.exit_code(),
            message: v.line(),
        }
    }

    /// Parses a state file; anything else is no state.
    pub fn parse(text: &str) -> Option<State> {
        serde_json::from_str::<State>(text)
            .ok()
            .filter(|s| s.schema == STATE_SCHEMA)
    }

    pub fn to_json(&self) -> String {
        // Plain data with string keys: serialization cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// The verdict of a completed check: a problem when a finding at or above `fail_on`
/// was found (the first one named, with how many more), else ok with what was seen.
pub fn verdict(r: &Report, fail_on: Option<Severity>) -> Verdict {
    let failing: Vec<_> = match fail_on {
        Some(level) => r.findings.iter().filter(|f| f.severity >= level).collect(),
        None => Vec::new(),
    };
    if let Some(f) = failing.first() {
        return Verdict::Problem(problem_line(f, failing.len() - 1));
    }
    let ports: Vec<&String> = r.devices.iter().flat_map(|d| d.ports.iter()).collect();
    let active = ports.iter().filter(|p| p.contains(" ACTIVE ")).count();
    let warnings = r.counts.warning;
    Verdict::Ok(format!(
        "ok: {} RDMA device{}, {active}/{} ports ACTIVE{}",
        r.devices.len(),
        if r.devices.len() == 1 { "" } else { "s" },
        ports.len(),
        match warnings {
            0 => String::new(),
            1 => ", 1 warning".to_string(),
            n => format!(", {n} warnings"),
        }
    ))
}

/// The verdict when no check completed: unknown, with what the last completed check
/// of this boot found, or that none has since the node booted.
pub fn unknown(why: &str, last: Option<&State>, boot_id: &str, now_unix: u64) -> Verdict {
    match last.filter(|s| s.boot_id == boot_id) {
        // Room for each part: why it is unknown, then as much of the last line
        // as fits, each shortened by whole words.
        Some(s) => {
            let last = format!(
                "; last check {} ago",
                age(now_unix.saturating_sub(s.checked_unix))
            );
            let head = shorten(
                &format!("unknown: {why}"),
                MAX_MESSAGE.saturating_sub(last.len() + 24),
                Unit::Bytes,
            );
            let room = MAX_MESSAGE.saturating_sub(head.len() + last.len() + 2);
            match shorten(&s.message, room, Unit::Bytes) {
                m if m.is_empty() => Verdict::Unknown(format!("{head}{last}")),
                m => Verdict::Unknown(format!("{head}{last}: {m}")),
            }
        }
        None => Verdict::Unknown(format!("unknown: {why}; no check completed since boot")),
    }
}

fn age(secs: u64) -> String {
    match secs {
        0..=119 => format!("{secs}s"),
        120..=7199 => format!("{}m", secs / 60),
        _ => format!("{}h", secs / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_fit_npds_limit_and_end_on_a_whole_word() {
        let v = Verdict::Problem(format!("RDK-H002 {}", "é".repeat(100)));
        let l = v.line();
        assert!(l.len() <= MAX_MESSAGE);
        assert!(l.starts_with("RDK-H002 ..."), "{l}");
        let v = Verdict::Unknown(format!("unknown: cannot read {}", "the host ".repeat(20)));
        assert_eq!(
            v.line(),
            "unknown: cannot read the host the host the host the host the host the host ..."
        );
        assert_eq!(Verdict::Ok("a\nb".into()).line(), "a b");
        assert_eq!(
            (
                Verdict::Ok(String::new()).exit_code(),
                Verdict::Problem(String::new()).exit_code(),
                Verdict::Unknown(String::new()).exit_code()
            ),
            (0, 1, 2)
        );
    }

    #[test]
    fn the_state_is_saved_whole_and_read_back() {
        let d = std::env::temp_dir().join(format!("rdmakit-npd-{}", std::process::id()));
        let path = d.join("sub/state.json");
        let ok = State::of(&Verdict::Ok("ok".into()), "boot-a", 1000);
        ok.save(path.to_str().unwrap()).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(State::parse(&text), Some(ok));
        assert_eq!(
            std::fs::read_dir(path.parent().unwrap()).unwrap().count(),
            1
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn unknown_never_reuses_another_boots_state() {
        let ok = State::of(&Verdict::Ok("ok: 1 RDMA device".into()), "boot-a", 1000);
        let back = State::parse(&ok.to_json()).unwrap();
        assert_eq!(back, ok);
        let same = unknown("timed out", Some(&back), "boot-a", 1090);
        assert_eq!(
            same.line(),
            "unknown: timed out; last check 90s ago: ok: 1 RDMA device"
        );
        // Too long for one line: each part keeps its first whole words.
        let long = State::of(
            &Verdict::Ok("ok: 1 RDMA device, 1/1 ports ACTIVE".into()),
            "boot-a",
            1000,
        );
        let l = unknown("check not done in 15s", Some(&long), "boot-a", 1003).line();
        assert_eq!(
            l,
            "unknown: check not done in 15s; last check 3s ago: ok: 1 RDMA device ..."
        );
        let other = unknown("timed out", Some(&back), "boot-b", 1090);
        assert_eq!(
            other.line(),
            "unknown: timed out; no check completed since boot"
        );
        assert_eq!(other.exit_code(), 2);
        assert!(State::parse("{\"schema\":\"x\"}").is_none());
        assert!(State::parse("garbage").is_none());
    }
}
