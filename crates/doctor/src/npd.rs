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

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use rdmakit_host::bounded::{read_tree_file, Cap};

use crate::finding::Finding;
use crate::health::{NodeCheck, Unknown, Verdict};
use crate::oneline::{finding_line, shorten, Unit};
use crate::report::Report;

/// NPD's default `max_output_length`: longer output is cut there.
pub const MAX_MESSAGE: usize = 80;

/// The state file's schema.
pub const STATE_SCHEMA: &str = "rdmakit.npd-state/v1";

/// What the plugin tells NPD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// NPD's status: 0 OK, 1 NonOK, 2 Unknown ([`Verdict::exit_code`]).
    pub exit: u8,
    /// The one line, within [`MAX_MESSAGE`] bytes.
    pub line: String,
    /// Why the state could not be kept (for stderr, which NPD logs; the
    /// answer stands).
    pub note: Option<String>,
}

/// Runs `check` as the plugin: under `deadline` ([`NodeCheck::within`]), with
/// the last completed check of this boot kept in `state_path` (read as a
/// regular file only — never a wait on a FIFO: the plugin must answer in
/// time — of at most [`Cap::STATE`]; rewritten after each completed check).
/// The boot is the checked node's ([`crate::health::NodeId::boot_id`]).
pub fn run(check: NodeCheck, state_path: &str, deadline: Duration) -> Answer {
    let last = read_tree_file(Path::new(state_path), Cap::STATE.bytes)
        .ok()
        .and_then(|b| State::parse(&String::from_utf8_lossy(&b)));
    let health = check.within(deadline);
    let boot = health.node.as_ref().and_then(|n| n.boot_id.as_deref());
    let now = now_unix();
    let v = &health.verdict;
    let why = match (v, &health.checked) {
        (Verdict::Unknown(Unknown::Hung { limit, .. }), _) => {
            format!("check not done in {}s", limit.as_secs_f64())
        }
        (Verdict::Unknown(Unknown::Failed(e)), _) => format!("cannot read the host: {e}"),
        (_, None) => "no check completed".to_string(),
        (_, Some(c)) => {
            let line = line(v, &c.report);
            let state = State::of(v.exit_code(), &line, boot.unwrap_or_default(), now);
            let note = state
                .save(state_path)
                .err()
                .map(|e| format!("--npd-state {state_path}: {e}"));
            return Answer {
                exit: v.exit_code(),
                line,
                note,
            };
        }
    };
    Answer {
        exit: 2,
        line: unknown(&why, last.as_ref(), boot, now),
        note: None,
    }
}

/// `--npd-deadline SECS` as a duration.
///
/// # Errors
/// Not a positive number of seconds, named as the flag.
pub fn deadline(secs: f64) -> Result<Duration, String> {
    // try_from: a finite but huge number (1e300) does not fit a Duration
    // and from_secs_f64 would panic on it.
    match Duration::try_from_secs_f64(secs) {
        Ok(d) if secs > 0.0 => Ok(d),
        _ => Err(format!(
            "--npd-deadline {secs:?}: must be a positive number of seconds"
        )),
    }
}

/// The line of a completed check: a problem names the first failing finding
/// (with how many more failed), ok says what was seen.
pub fn line(v: &Verdict, r: &Report) -> String {
    let m = match v {
        Verdict::Unhealthy { failing } if !failing.is_empty() => {
            return problem_line(&failing[0], failing.len() - 1)
        }
        _ => ok_message(r),
    };
    fit(&m)
}

/// The message shortened to [`MAX_MESSAGE`] bytes by dropping detail (never
/// inside a word; [`crate::oneline::shorten`]).
fn fit(m: &str) -> String {
    shorten(m, MAX_MESSAGE, Unit::Bytes)
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

    /// The state after a completed check: its status and line, in the boot
    /// `boot_id` ("" when the node's boot is not known: never matched).
    pub fn of(exit: u8, line: &str, boot_id: &str, now_unix: u64) -> State {
        State {
            schema: STATE_SCHEMA.to_string(),
            boot_id: boot_id.to_string(),
            checked_unix: now_unix,
            exit,
            message: fit(line),
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

/// "ok: 1 RDMA device, 1/1 ports ACTIVE, 1 warning": what a healthy check saw.
fn ok_message(r: &Report) -> String {
    let ports: Vec<&String> = r.devices.iter().flat_map(|d| d.ports.iter()).collect();
    let active = ports.iter().filter(|p| p.contains(" ACTIVE ")).count();
    let warnings = r.counts.warning;
    format!(
        "ok: {} RDMA device{}, {active}/{} ports ACTIVE{}",
        r.devices.len(),
        if r.devices.len() == 1 { "" } else { "s" },
        ports.len(),
        match warnings {
            0 => String::new(),
            1 => ", 1 warning".to_string(),
            n => format!(", {n} warnings"),
        }
    )
}

/// The line when no check completed: unknown, with what the last completed check
/// of this boot found, or that none has since the node booted (or since a boot
/// that is not known: `boot_id` `None`).
pub fn unknown(why: &str, last: Option<&State>, boot_id: Option<&str>, now_unix: u64) -> String {
    let same_boot = |s: &&State| !s.boot_id.is_empty() && Some(s.boot_id.as_str()) == boot_id;
    let line = match last.filter(same_boot) {
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
                m if m.is_empty() => format!("{head}{last}"),
                m => format!("{head}{last}: {m}"),
            }
        }
        None => format!("unknown: {why}; no check completed since boot"),
    };
    fit(&line)
}

fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
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
    fn a_deadline_is_a_positive_number_of_seconds() {
        assert_eq!(deadline(1.5), Ok(Duration::from_millis(1500)));
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e300] {
            let e = deadline(bad).unwrap_err();
            assert!(e.starts_with("--npd-deadline "), "{e}");
        }
    }

    #[test]
    fn lines_fit_npds_limit_and_end_on_a_whole_word() {
        let l = fit(&format!("RDK-H002 {}", "é".repeat(100)));
        assert!(l.len() <= MAX_MESSAGE);
        assert!(l.starts_with("RDK-H002 ..."), "{l}");
        assert_eq!(
            fit(&format!("unknown: cannot read {}", "the host ".repeat(20))),
            "unknown: cannot read the host the host the host the host the host the host ..."
        );
        assert_eq!(fit("a\nb"), "a b");
    }

    #[test]
    fn the_state_is_saved_whole_and_read_back() {
        let d = std::env::temp_dir().join(format!("rdmakit-npd-{}", std::process::id()));
        let path = d.join("sub/state.json");
        let ok = State::of(0, "ok", "boot-a", 1000);
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
        let ok = State::of(0, "ok: 1 RDMA device", "boot-a", 1000);
        let back = State::parse(&ok.to_json()).unwrap();
        assert_eq!(back, ok);
        let same = unknown("timed out", Some(&back), Some("boot-a"), 1090);
        assert_eq!(
            same,
            "unknown: timed out; last check 90s ago: ok: 1 RDMA device"
        );
        // Too long for one line: each part keeps its first whole words.
        let long = State::of(0, "ok: 1 RDMA device, 1/1 ports ACTIVE", "boot-a", 1000);
        let l = unknown("check not done in 15s", Some(&long), Some("boot-a"), 1003);
        assert_eq!(
            l,
            "unknown: check not done in 15s; last check 3s ago: ok: 1 RDMA device ..."
        );
        let other = unknown("timed out", Some(&back), Some("boot-b"), 1090);
        assert_eq!(other, "unknown: timed out; no check completed since boot");
        assert!(State::parse("{\"schema\":\"x\"}").is_none());
        assert!(State::parse("garbage").is_none());
    }

    /// A node whose boot is not known (a source and a host without a boot id)
    /// never claims a last check: not even one saved without a boot either.
    #[test]
    fn an_unknown_boot_matches_no_state() {
        let unbooted = State::of(0, "ok: 1 RDMA device", "", 1000);
        let l = unknown("timed out", Some(&unbooted), None, 1090);
        assert_eq!(l, "unknown: timed out; no check completed since boot");
        let l = unknown("timed out", Some(&unbooted), Some(""), 1090);
        assert_eq!(l, "unknown: timed out; no check completed since boot");
    }
}
