//! How a node's report travels over srun's output: framed, gzip-compressed, base64
//! in short lines.
//!
//! srun relays each task's output in messages of at most 1024 bytes and, with
//! `--label`, starts a new labelled line at every message: a 9 KB one-line JSON
//! report arrives as ten lines with no way to tell a split from a newline (measured
//! with Slurm 22.05.8, docs/slurm.md). So a node sends its report as a frame whose
//! lines are all shorter than that, and whose end and integrity can be checked:
//!
//! ```text
//! rdmakit-frame 1 task node=n3                      (the task's shell: which node)
//! rdmakit-frame 1 begin report node=n3 bytes=9351   (rdmakit: uncompressed size)
//! H4sIAAAAAAAA/+1dW2/bOBJ+z68g9NQCcS3Jlyz2LU...      (base64 of gzip, 76 columns)
//! rdmakit-frame 1 end report lines=37
//! rdmakit-frame 1 exit 1                            (the task's shell: rdmakit's status)
//! ```
//!
//! A `bundle` frame (`rdmakit fleet sweep --bundles`) carries the bundle JSON of
//! everything the doctor read, in the same way. gzip's CRC and the sizes catch a
//! truncated or mangled frame.

use std::io::{Read as _, Write as _};

use base64::Engine as _;
use rdmakit_doctor::health::Checked;
use rdmakit_host::bounded::Cap;

/// First word of every frame line.
pub const MAGIC: &str = "rdmakit-frame";
/// The frame format's version.
pub const VERSION: &str = "1";
/// Base64 characters per line.
pub const WIDTH: usize = 76;
/// Largest payload a frame may expand to (a garbage frame must not exhaust
/// memory): a bundle's cap, the largest thing a frame carries.
pub const MAX_PAYLOAD: u64 = Cap::BUNDLE.bytes;

/// Longest body a frame may have, in base64 characters: gzip of an
/// incompressible [`MAX_PAYLOAD`] (plus gzip's overhead), times 4/3.
pub const MAX_BODY: usize = ((MAX_PAYLOAD + (MAX_PAYLOAD >> 10) + 1024) / 3 * 4) as usize;

/// The shell each task runs (`sh -c TASK_SCRIPT sh RDMAKIT ARGS...`): names the
/// node before rdmakit starts and reports rdmakit's exit status after it ends, so a
/// node whose rdmakit cannot start, dies or hangs is still told apart.
///
/// The exit line starts on a new line of its own even when rdmakit's output stopped
/// mid-line (the empty line this leaves otherwise is ignored).
pub const TASK_SCRIPT: &str =
    "echo \"rdmakit-frame 1 task node=${SLURMD_NODENAME:-$(hostname -s)}\"; \
     \"$@\"; printf '\\nrdmakit-frame 1 exit %s\\n' $?";

/// What a frame carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The doctor's JSON report (schema rdmakit.doctor/v1).
    Report,
    /// A bundle (`rdmakit collect` format, JSON).
    Bundle,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Report => "report",
            Kind::Bundle => "bundle",
        }
    }

    fn parse(s: &str) -> Option<Kind> {
        match s {
            "report" => Some(Kind::Report),
            "bundle" => Some(Kind::Bundle),
            _ => None,
        }
    }
}

/// One line of a task's output, classified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line<'a> {
    /// The task's shell named its node.
    Task {
        node: &'a str,
    },
    Begin {
        kind: Kind,
        node: &'a str,
        bytes: u64,
    },
    End {
        kind: Kind,
        lines: usize,
    },
    /// rdmakit ended with this status (the task's shell).
    Exit {
        status: i32,
    },
    /// Anything else: frame body, or garbage outside a frame.
    Other(&'a str),
}

/// Classifies one line (without its newline).
pub fn classify(line: &str) -> Line<'_> {
    let Some(rest) = line
        .strip_prefix(MAGIC)
        .and_then(|r| r.strip_prefix(' '))
        .and_then(|r| r.strip_prefix(VERSION))
        .and_then(|r| r.strip_prefix(' '))
    else {
        return Line::Other(line);
    };
    let words: Vec<&str> = rest.split(' ').collect();
    let field = |name: &str| {
        words
            .iter()
            .find_map(|w| w.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
    };
    match words.as_slice() {
        ["task", ..] => match field("node") {
            Some(node) => Line::Task { node },
            None => Line::Other(line),
        },
        ["begin", kind, ..] => match (
            Kind::parse(kind),
            field("node"),
            field("bytes").and_then(|b| b.parse().ok()),
        ) {
            (Some(kind), Some(node), Some(bytes)) => Line::Begin { kind, node, bytes },
            _ => Line::Other(line),
        },
        ["end", kind, ..] => match (
            Kind::parse(kind),
            field("lines").and_then(|b| b.parse().ok()),
        ) {
            (Some(kind), Some(lines)) => Line::End { kind, lines },
            _ => Line::Other(line),
        },
        ["exit", status] => match status.parse() {
            Ok(status) => Line::Exit { status },
            Err(_) => Line::Other(line),
        },
        _ => Line::Other(line),
    }
}

/// What `rdmakit doctor --frame` prints for a completed check: its report as
/// `--json` prints it (groups included, so a sweep's node is the doctor's),
/// then its bundle when one was recorded, framed under the node's Slurm name
/// ([`super::env::node_name`] of `slurmd_nodename`, `SLURMD_NODENAME`).
pub fn of_check(c: &Checked, slurmd_nodename: Option<&str>) -> String {
    let hostname = c.node.hostname.as_deref().unwrap_or_default();
    let node = super::env::node_name(slurmd_nodename, hostname);
    let json = rdmakit_doctor::render::json(&c.report);
    let bundle = c.bundle.as_ref().map(|b| b.to_json());
    doctor_output(&node, json.as_bytes(), bundle.as_deref())
}

/// What `rdmakit doctor --frame` prints: the report's frame, then the
/// bundle's when one was recorded (`--frame-bundle`).
pub fn doctor_output(node: &str, report_json: &[u8], bundle_json: Option<&[u8]>) -> String {
    let mut text = encode(Kind::Report, node, report_json);
    if let Some(b) = bundle_json {
        text.push_str(&encode(Kind::Bundle, node, b));
    }
    text
}

/// A node's frame: header, base64 of gzip(payload) in [`WIDTH`]-column lines,
/// footer. Every line ends with `\n`.
pub fn encode(kind: Kind, node: &str, payload: &[u8]) -> String {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    // Writing into a Vec cannot fail.
    let _ = gz.write_all(payload);
    let gz = gz.finish().unwrap_or_default();
    let b64 = base64::engine::general_purpose::STANDARD.encode(gz);
    let node: String = node
        .chars()
        .map(|c| if c.is_whitespace() { '_' } else { c })
        .collect();
    let mut out = format!(
        "{MAGIC} {VERSION} begin {} node={node} bytes={}\n",
        kind.as_str(),
        payload.len()
    );
    let mut lines = 0;
    for chunk in b64.as_bytes().chunks(WIDTH) {
        // base64 output is ASCII.
        out.push_str(std::str::from_utf8(chunk).unwrap_or_default());
        out.push('\n');
        lines += 1;
    }
    out.push_str(&format!(
        "{MAGIC} {VERSION} end {} lines={lines}\n",
        kind.as_str()
    ));
    out
}

/// Why a frame's body did not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("{got} body lines, the footer says {want}")]
    LineCount { got: usize, want: usize },
    #[error("not base64: {0}")]
    Base64(String),
    #[error("not gzip or corrupt: {0}")]
    Gzip(String),
    #[error("{got} bytes after gunzip, the header says {want}")]
    Size { got: u64, want: u64 },
    #[error("the header announces {0} bytes, over {MAX_PAYLOAD} (the cap for frames)")]
    TooLarge(u64),
}

/// Decodes a frame's body (its base64 lines, concatenated without newlines) and
/// checks it against the header's size and the footer's line count.
///
/// # Errors
/// Wrong line count, not base64, not gzip (or a bad CRC), wrong size.
pub fn decode(
    body: &str,
    lines: usize,
    footer_lines: usize,
    bytes: u64,
) -> Result<Vec<u8>, FrameError> {
    if lines != footer_lines {
        return Err(FrameError::LineCount {
            got: lines,
            want: footer_lines,
        });
    }
    if bytes > MAX_PAYLOAD {
        return Err(FrameError::TooLarge(bytes));
    }
    let gz = base64::engine::general_purpose::STANDARD
        .decode(body.trim())
        .map_err(|e| FrameError::Base64(e.to_string()))?;
    // Inflated at most to the size the header announced (and one byte to see more).
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(&gz[..])
        .take(bytes + 1)
        .read_to_end(&mut out)
        .map_err(|e| FrameError::Gzip(e.to_string()))?;
    if out.len() as u64 != bytes {
        return Err(FrameError::Size {
            got: out.len() as u64,
            want: bytes,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_doctor_prints_the_report_then_the_bundle() {
        let only = doctor_output("n1", b"{}", None);
        assert_eq!(only, encode(Kind::Report, "n1", b"{}"));
        let both = doctor_output("n1", b"{}", Some(b"[]"));
        assert_eq!(both, only + &encode(Kind::Bundle, "n1", b"[]"));
    }

    fn roundtrip(payload: &[u8]) -> Vec<u8> {
        let text = encode(Kind::Report, "n3", payload);
        let mut body = String::new();
        let (mut bytes, mut n, mut footer) = (0, 0, usize::MAX);
        for l in text.lines() {
            assert!(l.len() < 1024, "a line srun would split: {} bytes", l.len());
            match classify(l) {
                Line::Begin {
                    kind,
                    node,
                    bytes: b,
                } => {
                    assert_eq!((kind, node), (Kind::Report, "n3"));
                    bytes = b;
                }
                Line::End { lines, .. } => footer = lines,
                Line::Other(s) => {
                    body.push_str(s);
                    n += 1;
                }
                other => panic!("{other:?}"),
            }
        }
        decode(&body, n, footer, bytes).unwrap()
    }

    #[test]
    fn frames_round_trip_in_short_lines() {
        let json = br#"{"schema":"rdmakit.doctor/v1","findings":[]}"#;
        assert_eq!(roundtrip(json), json);
        assert_eq!(roundtrip(b""), b"");
        let big: Vec<u8> = (0..200_000u32).flat_map(|i| i.to_le_bytes()).collect();
        assert_eq!(roundtrip(&big), big);
    }

    #[test]
    fn task_and_exit_lines_as_the_shell_prints_them() {
        assert_eq!(
            classify("rdmakit-frame 1 task node=n12"),
            Line::Task { node: "n12" }
        );
        assert_eq!(
            classify("rdmakit-frame 1 exit 127"),
            Line::Exit { status: 127 }
        );
        assert!(TASK_SCRIPT.contains("rdmakit-frame 1 task node="));
        assert!(TASK_SCRIPT.contains("rdmakit-frame 1 exit %s"));
    }

    #[test]
    fn damaged_frames_are_errors() {
        let text = encode(Kind::Bundle, "n1", &[7u8; 5000]);
        let lines: Vec<&str> = text.lines().collect();
        let body_lines = &lines[1..lines.len() - 1];
        let body: String = body_lines.concat();
        let n = body_lines.len();
        assert_eq!(decode(&body, n, n, 5000).unwrap(), vec![7u8; 5000]);
        assert!(matches!(
            decode(&body, n - 1, n, 5000),
            Err(FrameError::LineCount { .. })
        ));
        assert!(matches!(
            decode("!!!!", 1, 1, 1),
            Err(FrameError::Base64(_))
        ));
        assert!(matches!(
            decode("aGVsbG8=", 1, 1, 5),
            Err(FrameError::Gzip(_))
        ));
        assert!(matches!(
            decode(&body, n, n, 4999),
            Err(FrameError::Size { .. })
        ));
        // A flipped character: base64 still decodes, gzip's CRC or inflate fails.
        let mut bad = body.clone().into_bytes();
        let mid = bad.len() / 2;
        bad[mid] = if bad[mid] == b'A' { b'B' } else { b'A' };
        assert!(decode(std::str::from_utf8(&bad).unwrap(), n, n, 5000).is_err());
    }

    #[test]
    fn malformed_frame_lines_are_other() {
        for l in [
            "rdmakit-frame 2 begin report node=n1 bytes=1",
            "rdmakit-frame 1 begin nonsense node=n1 bytes=1",
            "rdmakit-frame 1 begin report node=n1 bytes=x",
            "rdmakit-frame 1 end report",
            "rdmakit-frame 1 exit",
            "rdmakit-frame 1 task",
            "rdmakit-frame 1",
            "",
        ] {
            assert_eq!(classify(l), Line::Other(l), "{l:?}");
        }
    }
}
