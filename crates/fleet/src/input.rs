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

use std::io::Read as _;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use rdmakit_doctor::checks::Config;
use rdmakit_doctor::report::Report;
use rdmakit_host::bundle::{Bundle, FORMAT as BUNDLE_FORMAT};
use rdmakit_host::capture::import_capture;
use rdmakit_host::collect::collect;
use serde::{Deserialize, Serialize};

use crate::node::{NodeReport, DOCTOR_SCHEMA};
use crate::report::SCHEMA as FLEET_SCHEMA;

/// Largest input file read (a gzip bomb or a wrong file should not eat the memory).
pub const MAX_INPUT_BYTES: u64 = 1 << 30;

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
    /// Called with (done, total) as inputs are read (for a progress bar).
    pub progress: Option<&'a (dyn Fn(usize, usize) + Sync)>,
    /// Worker threads (0: one per CPU).
    pub threads: usize,
}

impl Default for LoadOptions<'_> {
    fn default() -> Self {
        LoadOptions {
            doctor: Config::default(),
            tool: format!("rdmakit {}", env!("CARGO_PKG_VERSION")),
            progress: None,
            threads: 0,
        }
    }
}

/// Everything read from a set of inputs.
#[derive(Debug, Default)]
pub struct Loaded {
    /// Nodes in input order (within a JSON lines file, line order).
    pub nodes: Vec<NodeReport>,
    pub errors: Vec<InputError>,
    pub inputs: Vec<InputSummary>,
    /// Previous fleet reports found among the inputs (path, parsed JSON).
    pub fleets: Vec<(String, serde_json::Value)>,
}

/// One thing to read, found by walking the inputs.
#[derive(Debug, Clone)]
enum Item {
    Capture(String),
    File(String),
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
                    message: format!("cannot read: {e}"),
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
            Ok(_) => items.push((i, Item::File(p.clone()))),
        }
        out.inputs.push(summary);
    }

    let results = read_all(&items, opts);
    for ((i, _), r) in items.iter().zip(results) {
        let s = &mut out.inputs[*i];
        if s.kind != InputKind::Directory {
            s.kind = r.kind;
        }
        s.nodes += r.nodes.len();
        s.errors += r.errors.len();
        out.nodes.extend(r.nodes);
        out.errors.extend(r.errors);
        if let Some(f) = r.fleet {
            out.fleets.push(f);
        }
    }
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
            items.push((input, Item::File(shown)));
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
    nodes: Vec<NodeReport>,
    errors: Vec<InputError>,
    fleet: Option<(String, serde_json::Value)>,
}

impl ItemResult {
    fn error(kind: InputKind, input: &str, message: String) -> ItemResult {
        ItemResult {
            kind,
            nodes: Vec::new(),
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
            nodes: vec![node],
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
    let slots: Vec<Mutex<Option<ItemResult>>> = items.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some((_, item)) = items.get(i) else {
                    break;
                };
                let r = read_item(item, opts);
                *slots[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
                let d = done.fetch_add(1, Ordering::Relaxed) + 1;
                if let Some(p) = opts.progress {
                    p(d, total);
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
                        Item::Capture(p) | Item::File(p) => p,
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

fn read_item(item: &Item, opts: &LoadOptions) -> ItemResult {
    match item {
        Item::Capture(p) => match import_capture(Path::new(p)) {
            Ok(b) => ItemResult::node(InputKind::Capture, replay(&b, p, opts)),
            Err(e) => ItemResult::error(InputKind::Unreadable, p, format!("capture: {e}")),
        },
        Item::File(p) => read_file(p, opts),
    }
}

/// Runs the doctor over a bundle (or imported capture): the same code a node's own
/// `rdmakit doctor --from` runs.
fn replay(b: &Bundle, origin: &str, opts: &LoadOptions) -> NodeReport {
    let facts = collect(b, &b.header.options.clone());
    let report = Report::build(&facts, &opts.doctor, &opts.tool, origin);
    NodeReport::from_report(&report, origin)
}

/// The bytes of a file, gunzipped when they are gzip.
fn file_bytes(path: &str) -> Result<Vec<u8>, String> {
    let f = std::fs::File::open(path).map_err(|e| format!("cannot read: {e}"))?;
    let mut raw = Vec::new();
    f.take(MAX_INPUT_BYTES + 1)
        .read_to_end(&mut raw)
        .map_err(|e| format!("cannot read: {e}"))?;
    if raw.len() as u64 > MAX_INPUT_BYTES {
        return Err(format!("larger than {MAX_INPUT_BYTES} bytes"));
    }
    if !raw.starts_with(&[0x1f, 0x8b]) {
        return Ok(raw);
    }
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(&raw[..])
        .take(MAX_INPUT_BYTES + 1)
        .read_to_end(&mut out)
        .map_err(|e| format!("gzip: {e}"))?;
    if out.len() as u64 > MAX_INPUT_BYTES {
        return Err(format!("decompresses to more than {MAX_INPUT_BYTES} bytes"));
    }
    Ok(out)
}

fn read_file(path: &str, opts: &LoadOptions) -> ItemResult {
    let bytes = match file_bytes(path) {
        Ok(b) => b,
        Err(e) => return ItemResult::error(InputKind::Unreadable, path, e),
    };
    let Ok(text) = std::str::from_utf8(&bytes) else {
        return ItemResult::error(
            InputKind::Unreadable,
            path,
            "not UTF-8 text (not a doctor report, bundle or JSON lines)".into(),
        );
    };
    if text.trim().is_empty() {
        return ItemResult::error(InputKind::Unreadable, path, "empty file".into());
    }
    // One JSON document (a pretty doctor report, a bundle, a fleet report) ...
    let whole = serde_json::from_str::<serde_json::Value>(text);
    if let Ok(v) = whole {
        return read_document(v, &bytes, path, opts);
    }
    // ... else one doctor report per line.
    read_lines(text, path)
}

fn read_document(v: serde_json::Value, bytes: &[u8], path: &str, opts: &LoadOptions) -> ItemResult {
    let schema = v.get("schema").and_then(|s| s.as_str()).map(str::to_string);
    if schema.as_deref() == Some(DOCTOR_SCHEMA) {
        return match NodeReport::from_doctor_value(v, path) {
            Ok(n) => ItemResult::node(InputKind::DoctorJson, n),
            Err(e) => ItemResult::error(InputKind::Unreadable, path, e.to_string()),
        };
    }
    if schema.as_deref() == Some(FLEET_SCHEMA) {
        return ItemResult {
            kind: InputKind::FleetJson,
            nodes: Vec::new(),
            errors: Vec::new(),
            fleet: Some((path.to_string(), v)),
        };
    }
    if v.get("format").and_then(|f| f.as_str()) == Some(BUNDLE_FORMAT) {
        drop(v);
        return match Bundle::from_bytes(path, bytes) {
            Ok(b) => ItemResult::node(InputKind::Bundle, replay(&b, path, opts)),
            Err(e) => ItemResult::error(InputKind::Unreadable, path, e.to_string()),
        };
    }
    ItemResult::error(
        InputKind::Unreadable,
        path,
        match schema {
            Some(s) => format!("JSON of schema {s:?}: not a doctor report, bundle or fleet report"),
            None => "JSON without \"schema\" or \"format\": not a doctor report, bundle or fleet \
                     report"
                .to_string(),
        },
    )
}

fn read_lines(text: &str, path: &str) -> ItemResult {
    let mut r = ItemResult {
        kind: InputKind::JsonLines,
        nodes: Vec::new(),
        errors: Vec::new(),
        fleet: None,
    };
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let origin = format!("{path}:{}", i + 1);
        match NodeReport::from_doctor_json(line, &origin) {
            Ok(n) => r.nodes.push(n),
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
        let r = read_lines(&text, "sweep.jsonl");
        assert_eq!(r.nodes.len(), 2);
        assert_eq!(r.errors.len(), 1);
        assert_eq!(r.errors[0].input, "sweep.jsonl:3");
        assert!(r.errors[0].message.contains("not JSON"), "{:?}", r.errors);
    }
}
