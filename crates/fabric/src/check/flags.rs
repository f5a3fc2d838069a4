//! `rdmakit fabric check`'s flags made into what the check needs: the files
//! it names read as the repository reads every file a user names (bounded in
//! size, a pipe within its deadline, a device or a FIFO with no writer refused
//! in time: `rdmakit_host::bounded`), `--severity` and `--fail-on` parsed.
//! The binary only hands the flags over.

use std::path::Path;

use rdmakit_doctor::codes::{Code, Severity};
use rdmakit_host::bounded::{read_named, Cap};

use super::counters::MAX_JSON_BYTES;
use super::{Config, CounterSnapshot, MAX_THRESHOLD_BYTES};
use crate::format::ibnetdiscover::MAX_BYTES;
use crate::Expected;

/// The flags as given.
#[derive(Clone, Copy, Debug, Default)]
pub struct Flags<'a> {
    /// `--baseline FILE`: an earlier counters snapshot.
    pub baseline: Option<&'a Path>,
    /// `--expected FILE`: a topology file or a cable list.
    pub expected: Option<&'a Path>,
    /// `--thresholds FILE`: infiniband-diags' `error_thresholds` format.
    pub thresholds: Option<&'a Path>,
    /// `--severity CODE=LEVEL`, each.
    pub severity: &'a [String],
    /// `--fail-on LEVEL` (error, warning, info, never).
    pub fail_on: &'a str,
}

/// What the flags name, read and parsed.
#[derive(Clone, Debug)]
pub struct Inputs {
    /// The counters to judge growth against.
    pub baseline: Option<CounterSnapshot>,
    /// The expected cabling.
    pub expected: Option<Expected>,
    /// Thresholds and severity overrides.
    pub config: Config,
    /// Exit 1 at or above this severity; None: never.
    pub fail_on: Option<Severity>,
}

const THRESHOLDS: Cap = Cap::new(MAX_THRESHOLD_BYTES as u64, "threshold files");
const SNAPSHOTS: Cap = Cap::new(MAX_JSON_BYTES as u64, "counters snapshots");
const TOPOLOGIES: Cap = Cap::new(MAX_BYTES as u64, "topology files");

/// A file the user named, as text; the error names the flag and the path.
fn text(flag: &str, path: &Path, cap: Cap) -> Result<String, String> {
    let bytes = read_named(path, cap).map_err(|e| format!("{flag} {e}"))?;
    String::from_utf8(bytes).map_err(|_| format!("{flag} {}: not UTF-8 text", path.display()))
}

impl Inputs {
    /// Reads and parses what `f` names.
    ///
    /// # Errors
    /// A file that cannot be read (or is over its cap, or a pipe past its
    /// deadline) or does not parse; a `--severity` or `--fail-on` that is not
    /// understood: each said with its flag.
    pub fn of_flags(f: &Flags) -> Result<Inputs, String> {
        let mut config = Config::default();
        if let Some(p) = f.thresholds {
            config
                .read_error_thresholds(&text("--thresholds", p, THRESHOLDS)?)
                .map_err(|e| format!("--thresholds {}: {e}", p.display()))?;
        }
        for o in f.severity {
            let (code, level) = o
                .split_once('=')
                .ok_or_else(|| format!("--severity {o}: expected CODE=LEVEL (RDK-F005=error)"))?;
            let code = Code::lookup(code)
                .filter(|c| c.is_fabric())
                .ok_or_else(|| format!("--severity {o}: {code} is not a fabric code"))?;
            let level = Severity::parse(level)
                .ok_or_else(|| format!("--severity {o}: {level} is not error, warning or info"))?;
            config.overrides.insert(code, level);
        }
        let fail_on = match f.fail_on.to_ascii_lowercase().as_str() {
            "never" | "none" => None,
            other => Some(Severity::parse(other).ok_or_else(|| {
                format!("--fail-on {other}: expected error, warning, info or never")
            })?),
        };
        let baseline = match f.baseline {
            Some(p) => Some(
                CounterSnapshot::from_json(&text("--baseline", p, SNAPSHOTS)?)
                    .map_err(|e| format!("--baseline {}: {e}", p.display()))?,
            ),
            None => None,
        };
        let expected = match f.expected {
            Some(p) => Some(
                Expected::parse(&text("--expected", p, TOPOLOGIES)?)
                    .map_err(|e| format!("--expected {}: {e}", p.display()))?,
            ),
            None => None,
        };
        Ok(Inputs {
            baseline,
            expected,
            config,
            fail_on,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(sev: &[String], fail_on: &'static str) -> Result<Inputs, String> {
        Inputs::of_flags(&Flags {
            severity: sev,
            fail_on,
            ..Flags::default()
        })
    }

    #[test]
    fn severities_and_fail_on_are_parsed_or_named() {
        let i = flags(&["RDK-F005=error".into()], "warning").unwrap();
        assert_eq!(i.fail_on, Some(Severity::Warning));
        assert_eq!(i.config.overrides.len(), 1);
        assert_eq!(flags(&[], "never").unwrap().fail_on, None);
        let e = flags(&["RDK-H001=error".into()], "error").unwrap_err();
        assert!(e.contains("not a fabric code"), "{e}");
        let e = flags(&["RDK-F005".into()], "error").unwrap_err();
        assert!(e.contains("expected CODE=LEVEL"), "{e}");
        let e = flags(&[], "loud").unwrap_err();
        assert!(e.starts_with("--fail-on loud"), "{e}");
    }

    /// A device is refused before it is read (it would never end), a file
    /// over its cap is refused, and each error names its flag.
    #[test]
    fn named_files_are_bounded() {
        let e = Inputs::of_flags(&Flags {
            baseline: Some(Path::new("/dev/zero")),
            fail_on: "error",
            ..Flags::default()
        })
        .unwrap_err();
        assert!(e.starts_with("--baseline /dev/zero"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("thresholds");
        std::fs::write(&big, vec![b'#'; MAX_THRESHOLD_BYTES + 1]).unwrap();
        let e = Inputs::of_flags(&Flags {
            thresholds: Some(&big),
            fail_on: "error",
            ..Flags::default()
        })
        .unwrap_err();
        assert!(e.starts_with("--thresholds"), "{e}");
        let missing = dir.path().join("nope");
        let e = Inputs::of_flags(&Flags {
            expected: Some(&missing),
            fail_on: "error",
            ..Flags::default()
        })
        .unwrap_err();
        assert!(e.starts_with("--expected"), "{e}");
    }
}
