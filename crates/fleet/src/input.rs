//! Inputs: any mix of directories of per-node `rdmakit collect` bundles, capture
//! directories (a `root/` tree, as in fixtures/), `rdmakit doctor --json` files, and
//! JSON lines (one node's doctor report per line, as a sweep prints them), plain or
//! gzip-compressed.
//!
//! Nothing is dropped silently: an input that cannot be read, a line that is not a
//! doctor report, a file in a directory that is none of the above — each is an
//! [`InputError`] or a skipped entry named in [`InputSummary`], and every other input
//! is still read. Bundles and capture directories are replayed through the doctor
//! (`rdmakit_host::collect` + `Report::build`), which never touches the host.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use rdmakit_doctor::checks::Config;
use rdmakit_doctor::report::Report;
use rdmakit_host::bounded::{self, Cap, ReadError};
use rdmakit_host::bundle::{Bundle, FORMAT as BUNDLE_FORMAT};
use rdmakit_host::capture::import_capture;
use rdmakit_host::collect::collect;
use serde::{Deserialize, Serialize};

use crate::node::{Head, NodeReport, DOCTOR_SCHEMA};
use crate::report::SCHEMA as FLEET_SCHEMA;
use crate::unique::{Duplicate, Unique, MAX_NODES};

/// Largest input file read: a JSON lines file, before and after gunzip
/// ([`Cap::JSON_LINES`]). A file that is one JSON document (a doctor report, a
/// bundle, a fleet report) is at most [`Cap::DOCUMENT`]; a longer one can only be
/// JSON lines, which are read one line at a time ([`Cap::REPORT`] each).
pub const MAX_INPUT_BYTES: u64 = Cap::JSON_LINES.bytes;

/// Files larger than this on disk (and pipes) are read one at a time, so that
/// the worker threads together never hold more than one large input.
const LARGE_FILE: u64 = 1 << 20;

/// How deep directories are searched for inputs.
const MAX_DEPTH: usize = 3;

/// What an input turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputKind {
    /// A directory holding other inputs.
    Directory,
    /// A capture directory (`root/` tree, optional `_unreadable.txt`, `netlink/`).
    Capture,
    /// An `rdmakit collect` bundle.
    Bundle,
    /// One `rdmakit doctor --json` report.
    DoctorJson,
    /// Doctor reports, one per line.
    JsonLines,
    /// A previous `rdmakit fleet report --json` (only valid as a baseline).
    FleetJson,
    /// Could not be read or recognized.
    Unreadable,
}

/// An input (or one line of it) that could not be used, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputError {
    /// The path, with `:LINE` for a line of a JSON lines file.
    pub input: String,
    pub message: String,
}

/// What one input given on the command line held.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputSummary {
    pub path: String,
    pub kind: InputKind,
    /// Nodes read from it.
    pub nodes: usize,
    /// Errors in it (also in the report's `errors[]`).
    pub errors: usize,
    /// Files in a directory that are not inputs (named, not read).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
}

/// How to read inputs.
pub struct LoadOptions<'a> {
    /// The doctor's configuration for replayed bundles and captures.
    pub doctor: Config,
    /// `rdmakit 0.1.0`, for replayed reports.
    pub tool: String,
    /// Told (done, total) as inputs are read (for a progress bar).
    pub progress: Option<&'a dyn rdmakit_vocab::progress::Meter>,
    /// Worker threads (0: one per CPU).
    pub threads: usize,
}

impl Default for LoadOptions<'_> {
    fn default() -> Self {
        LoadOptions {
            doctor: Config::default(),
            tool: crate::TOOL.to_string(),
            progress: None,
            threads: 0,
        }
    }
}

/// Everything read from a set of inputs.
#[derive(Debug, Default)]
pub struct Loaded {
    /// One report per node name, in order of each name's first appearance
    /// (inputs in the order given, a JSON lines file's lines in order); of
    /// several reports of one name the last read ([`crate::unique`]).
    pub nodes: Vec<NodeReport>,
    pub errors: Vec<InputError>,
    pub inputs: Vec<InputSummary>,
    /// Previous fleet reports found among the inputs (path, JSON text).
    pub fleets: Vec<(String, Vec<u8>)>,
    /// Node names more than one report carried.
    pub duplicates: Vec<Duplicate>,
}

/// One thing to read, found by walking the inputs.
#[derive(Debug, Clone)]
enum Item {
    Capture(String),
    /// A file, and whether the user named it (a pipe is read only then).
    File(String, bool),
}

/// Reads every input. Never fails as a whole: what cannot be read is in
/// [`Loaded::errors`].
pub fn load(paths: &[String], opts: &LoadOptions) -> Loaded {
    let mut out = Loaded::default();
    // Walk first (cheap), then read every item on worker threads.
    let mut items: Vec<(usize, Item)> = Vec::new();
    for (i, p) in paths.iter().enumerate() {
        let path = Path::new(p);
        let mut summary = InputSummary {
            path: p.clone(),
            kind: InputKind::Unreadable,
            nodes: 0,
            errors: 0,
            skipped: Vec::new(),
        };
        match std::fs::metadata(path) {
            Err(e) => {
                out.errors.push(InputError {
                    input: p.clone(),
                    message: format!("cannot read: {}", rdmakit_host::errno::io_text(&e)),
                });
                summary.errors = 1;
            }
            Ok(m) if m.is_dir() => {
                if path.join("root").is_dir() {
                    summary.kind = InputKind::Capture;
                    items.push((i, Item::Capture(p.clone())));
                } else {
                    summary.kind = InputKind::Directory;
                    walk(p, 0, i, &mut items, &mut summary, &mut out.errors);
                }
            }
            Ok(_) => items.push((i, Item::File(p.clone(), true))),
        }
        out.inputs.push(summary);
    }

    let results = read_all(&items, opts);
    let mut nodes = Unique::new();
    for ((i, _), r) in items.iter().zip(results) {
        let s = &mut out.inputs[*i];
        if s.kind != InputKind::Directory {
            s.kind = r.kind;
        }
        s.nodes += r.reports;
        s.errors += r.errors.len();
        nodes.extend(r.nodes);
        out.errors.extend(r.errors);
        if let Some(f) = r.fleet {
            out.fleets.push(f);
        }
    }
    (out.nodes, out.duplicates) = nodes.into_parts();
    out
}

fn walk(
    dir: &str,
    depth: usize,
    input: usize,
    items: &mut Vec<(usize, Item)>,
    summary: &mut InputSummary,
    errors: &mut Vec<InputError>,
) {
    let mut entries: Vec<_> = match std::fs::read_dir(dir) {
        Ok(rd) => rd.filter_map(Result::ok).collect(),
        Err(e) => {
            errors.push(InputError {
                input: dir.to_string(),
                message: format!("cannot list: {e}"),
            });
            summary.errors += 1;
            return;
        }
    };
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let path = e.path();
        let shown = path.display().to_string();
        let name = e.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if path.join("root").is_dir() {
                items.push((input, Item::Capture(shown)));
            } else if depth + 1 < MAX_DEPTH {
                walk(&shown, depth + 1, input, items, summary, errors);
            } else {
                summary.skipped.push(shown);
            }
        } else if looks_like_input(&name) {
            items.push((input, Item::File(shown, false)));
        } else {
            summary.skipped.push(shown);
        }
    }
}

/// File names read from a directory: JSON, JSON lines, and their gzip forms.
fn looks_like_input(name: &str) -> bool {
    let n = name.strip_suffix(".gz").unwrap_or(name);
    [".json", ".jsonl", ".ndjson"]
        .iter()
        .any(|ext| n.ends_with(ext))
}

/// What one item held.
struct ItemResult {
    kind: InputKind,
    /// One per name (a JSON lines file may repeat a name).
    nodes: Unique,
    /// Node reports read, repeats included.
    reports: usize,
    errors: Vec<InputError>,
    fleet: Option<(String, Vec<u8>)>,
}

impl ItemResult {
    fn error(kind: InputKind, input: &str, message: String) -> ItemResult {
        ItemResult {
            kind,
            nodes: Unique::new(),
            reports: 0,
            errors: vec![InputError {
                input: input.to_string(),
                message,
            }],
            fleet: None,
        }
    }

    fn node(kind: InputKind, node: NodeReport) -> ItemResult {
        ItemResult {
            kind,
            nodes: std::iter::once(node).collect(),
            reports: 1,
            errors: Vec::new(),
            fleet: None,
        }
    }
}

/// Reads every item, in parallel, keeping their order.
fn read_all(items: &[(usize, Item)], opts: &LoadOptions) -> Vec<ItemResult> {
    let total = items.len();
    let threads = match opts.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
    .clamp(1, total.max(1));
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let cx = Ctx {
        opts,
        large: Mutex::new(()),
        names: Mutex::new(HashSet::new()),
    };
    let slots: Vec<Mutex<Option<ItemResult>>> = items.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some((_, item)) = items.get(i) else {
                    break;
                };
                let r = read_item(item, &cx);
                *slots[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
                let d = done.fetch_add(1, Ordering::Relaxed) + 1;
                if let Some(p) = opts.progress {
                    p.position(d as u64, Some(total as u64));
                }
            });
        }
    });
    slots
        .into_iter()
        .zip(items)
        .map(|(m, (_, item))| {
            m.into_inner()
                .unwrap_or_else(|p| p.into_inner())
                .unwrap_or_else(|| {
                    // A worker panicked on this item: say so rather than lose it.
                    let p = match item {
                        Item::Capture(p) | Item::File(p, _) => p,
                    };
                    ItemResult::error(
                        InputKind::Unreadable,
                        p,
                        "internal error while reading".into(),
                    )
                })
        })
        .collect()
}

/// What the workers share: the options, the one-large-input-at-a-time lock,
/// and the node names taken so far (at most [`MAX_NODES`]).
struct Ctx<'a> {
    opts: &'a LoadOptions<'a>,
    large: Mutex<()>,
    names: Mutex<HashSet<String>>,
}

impl Ctx<'_> {
    /// True when `name` may be held: seen already, or one more fits the cap.
    fn admit(&self, name: &str) -> bool {
        let mut names = self.names.lock().unwrap_or_else(|p| p.into_inner());
        if names.contains(name) {
            return true;
        }
        if names.len() >= MAX_NODES {
            return false;
        }
        names.insert(name.to_string());
        true
    }

    /// An item of one node, unless the fleet is already full.
    fn node(&self, kind: InputKind, path: &str, node: NodeReport) -> ItemResult {
        if self.admit(&node.name) {
            ItemResult::node(kind, node)
        } else {
            ItemResult::error(kind, path, full())
        }
    }
}

/// Why a node was not read: the fleet holds [`MAX_NODES`] names already.
fn full() -> String {
    format!("over {MAX_NODES} node names (the cap for fleets): not read")
}

fn read_item(item: &Item, cx: &Ctx) -> ItemResult {
    match item {
        Item::Capture(p) => match import_capture(Path::new(p)) {
            Ok(b) => cx.node(InputKind::Capture, p, replay(&b, p, cx.opts)),
            Err(e) => ItemResult::error(InputKind::Unreadable, p, format!("capture: {e}")),
        },
        Item::File(p, named) => read_file(p, *named, cx),
    }
}

/// Runs the doctor over a bundle (or imported capture): the same code a node's own
/// `rdmakit doctor --from` runs.
fn replay(b: &Bundle, origin: &str, opts: &LoadOptions) -> NodeReport {
    let facts = collect(b, &b.header.options.clone());
    let report = Report::build(&facts, &opts.doctor, &opts.tool, origin);
    NodeReport::from_report(&report, origin)
}

/// An input file's plain bytes as a stream ([`bounded`]: a file the user named
/// may be a pipe, one found in a directory must be a regular file; gunzipped
/// when it is gzip; at most [`Cap::JSON_LINES`]), and whether it is a pipe.
fn open_input(path: &str, named: bool) -> Result<(Box<dyn Read>, bool), ReadError> {
    let p = Path::new(path);
    let f = if named {
        bounded::open_named(p, Cap::JSON_LINES)?
    } else {
        bounded::open_found(p, Cap::JSON_LINES)?
    };
    let pipe = f.is_pipe();
    Ok((bounded::plain(path, f, Cap::JSON_LINES)?, pipe))
}

fn read_file(path: &str, named: bool, cx: &Ctx) -> ItemResult {
    let unreadable = |e: ReadError| ItemResult::error(InputKind::Unreadable, path, cannot(e));
    let (reader, pipe) = match open_input(path, named) {
        Ok(r) => r,
        Err(e) => return unreadable(e),
    };
    let mut reader = BufReader::new(reader);
    let mut head = Vec::new();
    if let Err(e) = read_upto(&mut reader, &mut head, LARGE_FILE) {
        return unreadable(ReadError::from_io(path, e));
    }
    // Past its first MiB (inflated), an input is read, parsed and replayed one
    // at a time, so what the threads hold together stays bounded. (Not a pipe:
    // its deadline runs from its opening; the user named it, one of a few.)
    let _one = (head.len() as u64 > LARGE_FILE && !pipe)
        .then(|| cx.large.lock().unwrap_or_else(|p| p.into_inner()));
    // Up to one document's cap; longer can only be JSON lines.
    if head.len() as u64 > LARGE_FILE {
        if let Err(e) = read_upto(&mut reader, &mut head, Cap::DOCUMENT.bytes) {
            return unreadable(ReadError::from_io(path, e));
        }
    }
    if head.len() as u64 > Cap::DOCUMENT.bytes {
        return read_lines(std::io::Cursor::new(head).chain(reader), path, cx);
    }
    if head.iter().all(u8::is_ascii_whitespace) {
        return ItemResult::error(InputKind::Unreadable, path, "empty file".into());
    }
    // One JSON document (a pretty doctor report, a bundle, a fleet report) ...
    if let Ok(kind) = Head::of(&head) {
        return read_document(kind, head, path, cx);
    }
    if std::str::from_utf8(&head).is_err() {
        return ItemResult::error(
            InputKind::Unreadable,
            path,
            "not UTF-8 text (not a doctor report, bundle or JSON lines)".into(),
        );
    }
    // ... else one doctor report per line.
    read_lines(&head[..], path, cx)
}

/// Reads into `head` until it holds one byte more than `upto`, or the end.
fn read_upto(reader: &mut impl Read, head: &mut Vec<u8>, upto: u64) -> std::io::Result<usize> {
    reader
        .take((upto + 1).saturating_sub(head.len() as u64))
        .read_to_end(head)
}

/// What was wrong with an input, without its path (the error names it):
/// "cannot read: …" for a file that did not open or read, "gzip: …" for corrupt
/// gzip, the reader's own words otherwise ("over 1024 MiB (the cap for …)").
fn cannot(e: ReadError) -> String {
    match e {
        ReadError::Io { err, .. } => {
            format!("cannot read: {}", rdmakit_host::errno::io_text(&err))
        }
        ReadError::Gzip { reason, .. } => format!("gzip: {reason}"),
        e => e.reason(),
    }
}

fn read_document(kind: Head, bytes: Vec<u8>, path: &str, cx: &Ctx) -> ItemResult {
    let unreadable = |e: String| ItemResult::error(InputKind::Unreadable, path, e);
    if kind.schema() == Some(DOCTOR_SCHEMA) {
        if bytes.len() as u64 > Cap::REPORT.bytes {
            return unreadable(format!("over {}", Cap::REPORT));
        }
        let text = String::from_utf8_lossy(&bytes);
        return match NodeReport::from_doctor_json(&text, path) {
            Ok(n) => cx.node(InputKind::DoctorJson, path, n),
            Err(e) => unreadable(e.to_string()),
        };
    }
    if kind.schema() == Some(FLEET_SCHEMA) {
        return ItemResult {
            kind: InputKind::FleetJson,
            nodes: Unique::new(),
            reports: 0,
            errors: Vec::new(),
            fleet: Some((path.to_string(), bytes)),
        };
    }
    if kind.format.as_ref().and_then(|f| f.as_str()) == Some(BUNDLE_FORMAT) {
        return match Bundle::from_bytes(path, &bytes) {
            Ok(b) => cx.node(InputKind::Bundle, path, replay(&b, path, cx.opts)),
            Err(e) => unreadable(e.to_string()),
        };
    }
    unreadable(match kind.schema {
        Some(s) => format!("JSON of schema {s}: not a doctor report, bundle or fleet report"),
        None => "JSON without \"schema\" or \"format\": not a doctor report, bundle or fleet \
                 report"
            .to_string(),
    })
}

/// Lines that are not doctor reports named one by one before the rest of the
/// file is given up (a binary file has a "line" every 256 bytes).
const MAX_BAD_LINES: usize = 100;

/// One doctor report per line, read one line at a time (each at most
/// [`Cap::REPORT`]); a name repeated keeps its last line.
fn read_lines(reader: impl BufRead, path: &str, cx: &Ctx) -> ItemResult {
    let mut r = ItemResult {
        kind: InputKind::JsonLines,
        nodes: Unique::new(),
        reports: 0,
        errors: Vec::new(),
        fleet: None,
    };
    let mut reader = reader;
    let mut buf = Vec::new();
    for i in 1.. {
        buf.clear();
        let got = (&mut reader)
            .take(Cap::REPORT.bytes + 1)
            .read_until(b'\n', &mut buf);
        match got {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                r.errors.push(InputError {
                    input: path.to_string(),
                    message: cannot(ReadError::from_io(path, e)),
                });
                break;
            }
        }
        let origin = format!("{path}:{i}");
        if r.errors.len() == MAX_BAD_LINES {
            r.errors.push(InputError {
                input: origin,
                message: format!(
                    "{MAX_BAD_LINES} lines were not doctor reports: the rest of the file is not read"
                ),
            });
            break;
        }
        if buf.len() as u64 > Cap::REPORT.bytes {
            r.errors.push(InputError {
                input: origin,
                message: format!(
                    "longer than {} (the rest of the file is not read)",
                    Cap::REPORT
                ),
            });
            break;
        }
        let Ok(line) = std::str::from_utf8(&buf) else {
            r.errors.push(InputError {
                input: origin,
                message: "not UTF-8 text".into(),
            });
            continue;
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        match NodeReport::from_doctor_json(line, &origin) {
            Ok(n) if !cx.admit(&n.name) => {
                r.errors.push(InputError {
                    input: origin,
                    message: format!("{} (and the rest of the file)", full()),
                });
                break;
            }
            Ok(n) => {
                r.reports += 1;
                r.nodes.push(n);
            }
            Err(e) => r.errors.push(InputError {
                input: origin,
                message: format!("{e} (line starts {:?})", preview(line)),
            }),
        }
    }
    if r.nodes.is_empty() {
        r.kind = InputKind::Unreadable;
    }
    r
}

/// The first 40 characters of a line, for error messages.
fn preview(line: &str) -> String {
    line.chars().take(40).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_file_names() {
        for n in ["a.json", "a.json.gz", "sweep.jsonl", "x.ndjson.gz"] {
            assert!(looks_like_input(n), "{n}");
        }
        for n in ["SOURCE", "notes.txt", "a.gz", "a.tar.gz"] {
            assert!(!looks_like_input(n), "{n}");
        }
    }

    #[test]
    fn json_lines_keep_good_lines_and_name_bad_ones() {
        let good = r#"{"schema":"rdmakit.doctor/v1","findings":[],"inventory":{"hostname":"n1"}}"#;
        let text = format!("{good}\n\nnot json at all\n{good}\n");
        let opts = LoadOptions::default();
        let cx = Ctx {
            opts: &opts,
            large: Mutex::new(()),
            names: Mutex::new(HashSet::new()),
        };
        let r = read_lines(text.as_bytes(), "sweep.jsonl", &cx);
        // Two reports of one node (n1): one node, the line read last.
        assert_eq!(r.reports, 2);
        assert_eq!(r.nodes.len(), 1);
        assert_eq!(r.errors.len(), 1);
        assert_eq!(r.errors[0].input, "sweep.jsonl:3");
        assert!(r.errors[0].message.contains("not JSON"), "{:?}", r.errors);
    }
}
