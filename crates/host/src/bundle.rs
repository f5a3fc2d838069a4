//! Support bundles: every answer a collection got, in one file, replayable.
//!
//! A bundle is JSON (gzip-compressed when the file name ends in `.gz`; reading
//! detects compression by its magic bytes). It is meant to be read by people too:
//! `zcat bundle.json.gz | jq '.records[] | select(.path | test("ports/1/state"))'`.
//!
//! ```json
//! { "format": "rdmakit-bundle", "version": 1, "tool": "rdmakit 0.1.0",
//!   "created_unix": 1764690000, "options": { ... },
//!   "records": [
//!     { "op": "read", "path": "/sys/class/infiniband/rxe0/ports/1/state", "text": "4: ACTIVE\n" },
//!     { "op": "read", "path": "/sys/.../gid_attrs/types/5", "errno": 22, "error": "EINVAL" },
//!     { "op": "dir",  "path": "/sys/class/infiniband", "entries": [["rxe0", "symlink"]] },
//!     { "op": "link", "path": "/sys/class/infiniband/rxe0", "target": "../../devices/virtual/infiniband/rxe0" },
//!     { "op": "stat", "path": "/dev/infiniband/uverbs0", "stat": { "kind": "char", "mode": 438, ... } },
//!     { "op": "probe", "path": "rlimit_memlock", "text": "8388608 8388608" } ] }
//! ```
//! File contents that are not UTF-8 are stored as `"base64"` instead of `"text"`.
//! Replaying a question the bundle never recorded answers ENOENT and is counted in
//! [`Bundle::misses`], so a report can say the bundle came from another version
//! (except the questions [`ASKED_SINCE`] lists, which older bundles lack by design).
//!
//! A bundle comes from elsewhere (a customer's host, a sweep's node), so reading
//! one is bounded ([`crate::bounded`]): at most [`Cap::BUNDLE`] of JSON, before
//! and after gunzip, and [`bounded::MAX_RECORDS`] records.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::bounded::{self, Cap, ReadError};
use crate::collect::CollectOptions;
use crate::source::{canonicalize, Answer, Entry, Errno, Kind, Meta, Op, Probe, Source};

/// The value of the `format` field.
pub const FORMAT: &str = "rdmakit-bundle";
/// The current bundle version; readers accept this version only.
pub const VERSION: u32 = 1;

/// Questions [`crate::collect::collect`] asks that bundles recorded before it
/// asked them lack (the boot id; `/proc/self/status`, where the walk up the
/// collecting process's ancestors starts). A replay answers them ENOENT — the
/// fact is absent, as from a host that lacks it — without counting a miss, so
/// an older bundle replays without a note.
/// An entry ending in `*` stands for any one path component or probe name
/// there ("/sys/class/net/*": every netdev's directory listing).
pub const ASKED_SINCE: &[&str] = &[
    "/proc/sys/kernel/random/boot_id",
    "/proc/self/status",
    // The Ethernet layer beneath RoCE (crate::ethernet): the listings it walks
    // to find what exists, and its probes.
    "/sys",
    "/proc/net",
    "/sys/class/net/*",
    "ethtool-*",
    "dcb:*",
    // The soft NIC's published counters (crate::source::Probe::SoftCounters).
    "soft_counters",
];

/// Whether `key` is a question [`ASKED_SINCE`] lists.
pub fn asked_since(key: &str) -> bool {
    ASKED_SINCE.iter().any(|a| match a.strip_suffix('*') {
        Some(prefix) => key
            .strip_prefix(prefix)
            .is_some_and(|rest| !rest.is_empty() && !rest.contains('/')),
        None => *a == key,
    })
}

/// Why a bundle could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// Writing the bundle failed.
    #[error("{path}: {err}")]
    Io { path: String, err: std::io::Error },
    /// Reading it failed: missing, not a regular file or a pipe, over
    /// [`Cap::BUNDLE`], a pipe out of time, corrupt gzip.
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error("{path}: not an rdmakit bundle: {reason}")]
    Malformed { path: String, reason: String },
    #[error(
        "{path}: bundle version {found} is not supported (this rdmakit reads version {VERSION})"
    )]
    Version { path: String, found: u32 },
}

impl BundleError {
    /// "-o FILE: cannot write the bundle: ENOENT (No such file or directory):
    /// its directory does not exist": the bundle a user asked for with `flag`
    /// at `path` and could not have, in rdmakit's words, with what to do for
    /// the usual causes.
    pub fn when_writing(&self, flag: &str, path: &str) -> String {
        let (why, errno) = match self {
            BundleError::Io { err, .. } => (crate::errno::io_text(err), err.raw_os_error()),
            e => (crate::errno::plain(&e.to_string()), None),
        };
        let hint = match errno {
            Some(2) => ": its directory does not exist",
            Some(1 | 13 | 30) => ": write it where you may (e.g. under /tmp)",
            _ => "",
        };
        format!("{flag} {path}: cannot write the bundle: {why}{hint}")
    }
}

/// A recorded collection, which is also a [`Source`] that replays it.
#[derive(Debug)]
pub struct Bundle {
    pub header: Header,
    records: HashMap<(Op, String), Answer>,
    misses: AtomicUsize,
}

/// What the bundle says about itself.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Header {
    pub format: String,
    pub version: u32,
    /// "rdmakit 0.1.0", or "rdmacap import" for a converted capture directory.
    pub tool: String,
    pub created_unix: u64,
    /// The options the collection ran with; a replay runs with the same ones.
    pub options: CollectOptions,
}

/// The file layout: the header's fields, then the records. (Not `#[serde(flatten)]`:
/// flattening buffers every record through an intermediate map, twice the parse time.)
#[derive(Serialize, Deserialize)]
struct FileRepr {
    format: String,
    version: u32,
    tool: String,
    created_unix: u64,
    options: CollectOptions,
    #[serde(deserialize_with = "at_most_max_records")]
    records: Vec<RecordRepr>,
}

/// The records, refused past [`bounded::MAX_RECORDS`] while they are parsed (a
/// bundle of tiny records takes about eight times its size in memory).
fn at_most_max_records<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Vec<RecordRepr>, D::Error> {
    struct Bounded;
    impl<'de> serde::de::Visitor<'de> for Bounded {
        type Value = Vec<RecordRepr>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            write!(f, "a list of at most {} records", bounded::MAX_RECORDS)
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
            while let Some(r) = seq.next_element()? {
                if out.len() == bounded::MAX_RECORDS {
                    return Err(serde::de::Error::custom(format_args!(
                        "over {} records (the cap for bundles)",
                        bounded::MAX_RECORDS
                    )));
                }
                out.push(r);
            }
            Ok(out)
        }
    }
    d.deserialize_seq(Bounded)
}

#[derive(Serialize, Deserialize)]
struct RecordRepr {
    op: Op,
    path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    base64: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    entries: Option<Vec<(String, Kind)>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    target: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stat: Option<Meta>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    errno: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

impl RecordRepr {
    fn new(op: Op, path: String, answer: &Answer) -> RecordRepr {
        let mut r = RecordRepr {
            op,
            path,
            text: None,
            base64: None,
            entries: None,
            target: None,
            stat: None,
            errno: None,
            error: None,
        };
        match answer {
            Answer::Data(d) => match std::str::from_utf8(d) {
                Ok(s) => r.text = Some(s.to_string()),
                Err(_) => r.base64 = Some(base64::engine::general_purpose::STANDARD.encode(d)),
            },
            Answer::Entries(e) => {
                r.entries = Some(e.iter().map(|e| (e.name.clone(), e.kind)).collect())
            }
            Answer::Link(t) => r.target = Some(t.clone()),
            Answer::Meta(m) => r.stat = Some(*m),
            Answer::Err(e) => {
                r.errno = Some(e.0);
                r.error = Some(e.name());
            }
        }
        r
    }

    fn answer(self, file: &str) -> Result<((Op, String), Answer), BundleError> {
        let bad = |reason: String| BundleError::Malformed {
            path: file.to_string(),
            reason,
        };
        let answer = if let Some(n) = self.errno {
            Answer::Err(Errno(n))
        } else {
            match self.op {
                Op::Read | Op::Probe => {
                    if let Some(t) = self.text {
                        Answer::Data(t.into_bytes())
                    } else if let Some(b) = self.base64 {
                        Answer::Data(
                            base64::engine::general_purpose::STANDARD
                                .decode(b)
                                .map_err(|e| bad(format!("{}: bad base64: {e}", self.path)))?,
                        )
                    } else {
                        return Err(bad(format!("{}: read record without data", self.path)));
                    }
                }
                Op::Dir => Answer::Entries(
                    self.entries
                        .ok_or_else(|| bad(format!("{}: dir record without entries", self.path)))?
                        .into_iter()
                        .map(|(name, kind)| Entry { name, kind })
                        .collect(),
                ),
                Op::Link => Answer::Link(
                    self.target
                        .ok_or_else(|| bad(format!("{}: link record without target", self.path)))?,
                ),
                Op::Stat => Answer::Meta(
                    self.stat
                        .ok_or_else(|| bad(format!("{}: stat record without stat", self.path)))?,
                ),
            }
        };
        Ok(((self.op, self.path), answer))
    }
}

impl Bundle {
    /// A bundle from recorded answers.
    pub fn new(header: Header, records: BTreeMap<(Op, String), Answer>) -> Bundle {
        Bundle {
            header,
            records: records.into_iter().collect(),
            misses: AtomicUsize::new(0),
        }
    }

    /// A header for a collection made now by this build.
    pub fn header_now(tool: &str, options: CollectOptions) -> Header {
        let created_unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        Header {
            format: FORMAT.into(),
            version: VERSION,
            tool: tool.into(),
            created_unix,
            options,
        }
    }

    /// A bundle of every answer this one holds, under its header (what
    /// `rdmakit collect` writes when it converts a bundle or capture).
    pub fn copy(&self) -> Bundle {
        Bundle {
            header: self.header.clone(),
            records: self.records.clone(),
            misses: AtomicUsize::new(0),
        }
    }

    /// How many of the answers are read errors (kept with their errno).
    pub fn read_errors(&self) -> usize {
        self.records
            .values()
            .filter(|a| matches!(a, Answer::Err(_)))
            .count()
    }

    /// How many questions were asked that the bundle had no answer for.
    pub fn misses(&self) -> usize {
        self.misses.load(Ordering::Relaxed)
    }

    /// How many answers the bundle holds.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// What `rdmakit collect` says once it wrote the bundle to `path`: how
    /// many answers, how many of them read errors, and how to replay it.
    pub fn written_note(&self, path: &str) -> String {
        format!(
            "wrote {path}: {} answers ({} of them read errors, kept with their errno); replay \
             with: rdmakit doctor --from {path}",
            self.len(),
            self.read_errors()
        )
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Adds or replaces one answer (used to build fault variants from real captures).
    pub fn set(&mut self, op: Op, path: &str, answer: Answer) {
        self.records.insert((op, path.to_string()), answer);
    }

    /// Adds process `pid` to the capture's process table: `/proc/<pid>` in
    /// the `/proc` listing (kept sorted), with its `stat` and `comm` answers
    /// when given (building scenarios such as dead or zombie QP owners from
    /// real captures).
    pub fn add_process(&mut self, pid: u32, stat: Option<&str>, comm: Option<&str>) {
        let mut listing = self.read_dir("/proc").unwrap_or_default();
        let name = pid.to_string();
        if !listing.iter().any(|e| e.name == name) {
            listing.push(Entry {
                name,
                kind: Kind::Dir,
            });
            listing.sort();
        }
        self.set(Op::Dir, "/proc", Answer::Entries(listing));
        if let Some(stat) = stat {
            self.set(
                Op::Read,
                &format!("/proc/{pid}/stat"),
                Answer::Data(stat.as_bytes().to_vec()),
            );
        }
        if let Some(comm) = comm {
            self.set(
                Op::Read,
                &format!("/proc/{pid}/comm"),
                Answer::Data(format!("{comm}\n").into_bytes()),
            );
        }
    }

    /// Removes one answer; returns it.
    pub fn remove(&mut self, op: Op, path: &str) -> Option<Answer> {
        self.records.remove(&(op, path.to_string()))
    }

    /// Writes a file into the bundle as if the host had held it: the read answer
    /// (at the path with recorded symlinks resolved) and an entry in every directory
    /// listing up to `/`. Used to derive fault variants from real captures (a port
    /// down, other firmware, a host name).
    pub fn write_file(&mut self, path: &str, content: &[u8]) {
        let key = self.canonical(path);
        self.set(Op::Read, &key, Answer::Data(content.to_vec()));
        self.add_listing_entry(&key, Kind::File);
    }

    /// Removes a path and everything below it (its parent's links resolved, the path
    /// itself not: removing a symlink removes the link), and its directory entry.
    /// Returns how many answers were removed.
    pub fn remove_tree(&mut self, path: &str) -> usize {
        let Some((parent, name)) = path.rsplit_once('/') else {
            return 0;
        };
        let parent = if parent.is_empty() {
            "/".to_string()
        } else {
            self.canonical(parent)
        };
        let key = format!("{}/{name}", parent.trim_end_matches('/'));
        let below = format!("{key}/");
        let before = self.records.len();
        self.records
            .retain(|(_, p), _| p != &key && !p.starts_with(&below));
        let removed = before - self.records.len();
        if let Some(Answer::Entries(v)) = self.records.get_mut(&(Op::Dir, parent)) {
            v.retain(|e| e.name != name);
        }
        removed
    }

    /// Adds `key`'s last component to its parent's listing, creating parents as needed.
    fn add_listing_entry(&mut self, key: &str, kind: Kind) {
        let Some((dir, name)) = key.rsplit_once('/') else {
            return;
        };
        let dir = if dir.is_empty() { "/" } else { dir };
        let entry = Entry {
            name: name.to_string(),
            kind,
        };
        match self.records.get_mut(&(Op::Dir, dir.to_string())) {
            Some(Answer::Entries(v)) => {
                if !v.iter().any(|e| e.name == name) {
                    v.push(entry);
                    v.sort();
                }
            }
            _ => {
                self.records
                    .insert((Op::Dir, dir.to_string()), Answer::Entries(vec![entry]));
                if dir != "/" {
                    self.add_listing_entry(dir, Kind::Dir);
                }
            }
        }
    }

    /// The recorded answer to a question, without counting a miss.
    pub fn get(&self, op: Op, path: &str) -> Option<&Answer> {
        self.records.get(&(op, path.to_string()))
    }

    /// Every recorded key, sorted.
    pub fn keys(&self) -> Vec<(Op, String)> {
        let mut k: Vec<_> = self.records.keys().cloned().collect();
        k.sort();
        k
    }

    /// Serializes to JSON bytes (sorted records, so equal bundles are equal files).
    pub fn to_json(&self) -> Vec<u8> {
        let mut keys: Vec<_> = self.records.iter().collect();
        keys.sort_by(|a, b| a.0.cmp(b.0));
        let h = self.header.clone();
        let repr = FileRepr {
            format: h.format,
            version: h.version,
            tool: h.tool,
            created_unix: h.created_unix,
            options: h.options,
            records: keys
                .into_iter()
                // The last gate before bytes leave the host: no environment, no
                // process arguments (crate::secrets).
                .map(|((op, path), a)| {
                    RecordRepr::new(*op, path.clone(), &crate::secrets::scrub(*op, path, a))
                })
                .collect(),
        };
        // Serializing plain data with string keys cannot fail.
        serde_json::to_vec(&repr).unwrap_or_default()
    }

    /// Writes the bundle to `path`, gzip-compressed when it ends in `.gz`, mode
    /// 0600 ([`crate::outfile::write_private`]).
    ///
    /// # Errors
    /// The file cannot be created or written, or the path is a symlink, a FIFO, or
    /// a file of another user or with other links.
    pub fn write(&self, path: &str) -> Result<(), BundleError> {
        let io = |err| BundleError::Io {
            path: path.to_string(),
            err,
        };
        let json = self.to_json();
        let bytes = if path.ends_with(".gz") {
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            enc.write_all(&json).map_err(io)?;
            enc.finish().map_err(io)?
        } else {
            json
        };
        // Not through a symlink or hard link someone left there, only into a
        // file of ours, and readable by us alone (crate::outfile).
        crate::outfile::write_private(std::path::Path::new(path), &bytes).map_err(io)
    }

    /// Reads a bundle file (plain or gzip JSON) the user named, as
    /// [`bounded::read_named_gz`] reads it: a regular file or a pipe, at most
    /// [`Cap::BUNDLE`] before and after gunzip.
    ///
    /// # Errors
    /// The file cannot be read or is over the cap, is not a bundle, or is of
    /// another version.
    pub fn read(path: &str) -> Result<Bundle, BundleError> {
        let bytes = bounded::read_named_gz(std::path::Path::new(path), Cap::BUNDLE)?;
        Bundle::from_bytes(path, &bytes)
    }

    /// Parses bundle bytes (gzip is inflated, at most [`Cap::BUNDLE`]); `name` is
    /// used in error messages. At most [`bounded::MAX_RECORDS`] records.
    ///
    /// # Errors
    /// Not a bundle, over a cap, or of another version.
    pub fn from_bytes(name: &str, bytes: &[u8]) -> Result<Bundle, BundleError> {
        let bad = |reason: String| BundleError::Malformed {
            path: name.to_string(),
            reason,
        };
        let json;
        let bytes = if bytes.starts_with(&[0x1f, 0x8b]) {
            json = bounded::gunzip(name, bytes, Cap::BUNDLE)?;
            &json[..]
        } else {
            bytes
        };
        let repr: FileRepr = match serde_json::from_slice(bytes) {
            Ok(r) => r,
            // Not of this version's shape: say why as precisely as the JSON allows.
            Err(e) => {
                let v: serde_json::Value =
                    serde_json::from_slice(bytes).map_err(|e| bad(format!("JSON: {e}")))?;
                check_format_version(name, &v)?;
                return Err(bad(e.to_string()));
            }
        };
        if repr.format != FORMAT {
            return Err(bad(format!("no \"format\": \"{FORMAT}\" field")));
        }
        if repr.version != VERSION {
            return Err(BundleError::Version {
                path: name.to_string(),
                found: repr.version,
            });
        }
        let mut records = HashMap::with_capacity(repr.records.len());
        for r in repr.records {
            let (k, a) = r.answer(name)?;
            records.insert(k, a);
        }
        Ok(Bundle {
            header: Header {
                format: repr.format,
                version: repr.version,
                tool: repr.tool,
                created_unix: repr.created_unix,
                options: repr.options,
            },
            records,
            misses: AtomicUsize::new(0),
        })
    }

    /// Finds an answer by exact key, else by the key with recorded symlinks in its
    /// directory part resolved (a capture stores files under their real sysfs paths,
    /// while collectors ask through /sys/class/... links).
    fn lookup(&self, op: Op, key: &str) -> Option<&Answer> {
        if let Some(a) = self.records.get(&(op, key.to_string())) {
            return Some(a);
        }
        if op != Op::Probe {
            if let Some(real) = self.resolve(key) {
                if let Some(a) = self.records.get(&(op, real)) {
                    return Some(a);
                }
            }
        }
        if !asked_since(key) {
            self.misses.fetch_add(1, Ordering::Relaxed);
        }
        None
    }

    /// `path` with every recorded symlink in it resolved (the key a capture stores
    /// the file under).
    pub fn canonical(&self, path: &str) -> String {
        canonicalize(&LinksOnly(self), path).unwrap_or_else(|_| path.to_string())
    }

    /// `key` with the symlinks of its parent directory resolved, if that changes it.
    fn resolve(&self, key: &str) -> Option<String> {
        let (parent, name) = key.rsplit_once('/')?;
        if parent.is_empty() {
            return None;
        }
        let real_parent = canonicalize(&LinksOnly(self), parent).ok()?;
        (real_parent != parent).then(|| format!("{real_parent}/{name}"))
    }
}

fn check_format_version(name: &str, v: &serde_json::Value) -> Result<(), BundleError> {
    if v.get("format").and_then(|f| f.as_str()) != Some(FORMAT) {
        return Err(BundleError::Malformed {
            path: name.to_string(),
            reason: format!("no \"format\": \"{FORMAT}\" field"),
        });
    }
    let found = v.get("version").and_then(|f| f.as_u64()).unwrap_or(0) as u32;
    if found != VERSION {
        return Err(BundleError::Version {
            path: name.to_string(),
            found,
        });
    }
    Ok(())
}

/// A view of a bundle that answers only readlink, by exact key.
struct LinksOnly<'a>(&'a Bundle);

impl Source for LinksOnly<'_> {
    fn read(&self, _: &str) -> Result<Vec<u8>, Errno> {
        Err(Errno::ENOENT)
    }
    fn read_dir(&self, _: &str) -> Result<Vec<Entry>, Errno> {
        Err(Errno::ENOENT)
    }
    fn read_link(&self, path: &str) -> Result<String, Errno> {
        match self.0.records.get(&(Op::Link, path.to_string())) {
            Some(Answer::Link(t)) => Ok(t.clone()),
            _ => Err(Errno::EINVAL),
        }
    }
    fn stat(&self, _: &str) -> Result<Meta, Errno> {
        Err(Errno::ENOENT)
    }
    fn probe(&self, _: &Probe) -> Result<Vec<u8>, Errno> {
        Err(Errno::ENOENT)
    }
}

impl Source for Bundle {
    fn read(&self, path: &str) -> Result<Vec<u8>, Errno> {
        match self.lookup(Op::Read, path) {
            Some(Answer::Data(d)) => Ok(d.clone()),
            Some(Answer::Err(e)) => Err(*e),
            _ => Err(Errno::ENOENT),
        }
    }

    fn read_dir(&self, path: &str) -> Result<Vec<Entry>, Errno> {
        match self.lookup(Op::Dir, path) {
            Some(Answer::Entries(e)) => Ok(e.clone()),
            Some(Answer::Err(e)) => Err(*e),
            _ => Err(Errno::ENOENT),
        }
    }

    fn read_link(&self, path: &str) -> Result<String, Errno> {
        // Not every path is a link: collectors ask read_link of plain directories
        // while canonicalizing, so a missing answer is EINVAL (as readlink(2) says
        // for a non-link), not a miss.
        let exact = self.records.get(&(Op::Link, path.to_string()));
        let found = match exact {
            Some(a) => Some(a),
            None => self
                .resolve(path)
                .and_then(|real| self.records.get(&(Op::Link, real))),
        };
        match found {
            Some(Answer::Link(t)) => Ok(t.clone()),
            Some(Answer::Err(e)) => Err(*e),
            _ => Err(Errno::EINVAL),
        }
    }

    fn stat(&self, path: &str) -> Result<Meta, Errno> {
        match self.lookup(Op::Stat, path) {
            Some(Answer::Meta(m)) => Ok(*m),
            Some(Answer::Err(e)) => Err(*e),
            _ => Err(Errno::ENOENT),
        }
    }

    fn probe(&self, probe: &Probe) -> Result<Vec<u8>, Errno> {
        match self.lookup(Op::Probe, &probe.key()) {
            Some(Answer::Data(d)) => Ok(d.clone()),
            Some(Answer::Err(e)) => Err(*e),
            _ => Err(Errno::ENOENT),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn asked_since_patterns_stand_for_one_component() {
        assert!(asked_since("/proc/self/status"));
        assert!(asked_since("/sys/class/net/eth0"));
        assert!(!asked_since("/sys/class/net/eth0/mtu"));
        assert!(!asked_since("/sys/class/net/"));
        assert!(asked_since("ethtool-stats:eth0"));
        assert!(asked_since("dcb:ens1f0np0"));
        assert!(asked_since("soft_counters"));
        assert!(!asked_since("/sys/class"));
    }

    #[test]
    fn a_copy_keeps_every_answer_and_counts_read_errors() {
        let b = sample();
        let c = b.copy();
        assert_eq!(c.to_json(), b.to_json());
        assert_eq!(c.len(), b.len());
        assert_eq!(c.read_errors(), 1);
    }

    fn sample() -> Bundle {
        let mut recs = BTreeMap::new();
        recs.insert(
            (Op::Read, "/a".to_string()),
            Answer::Data(b"4: ACTIVE\n".to_vec()),
        );
        recs.insert(
            (Op::Read, "/bin".to_string()),
            Answer::Data(vec![0xff, 0, 1]),
        );
        recs.insert((Op::Read, "/e".to_string()), Answer::Err(Errno::EINVAL));
        recs.insert(
            (Op::Dir, "/d".to_string()),
            Answer::Entries(vec![Entry {
                name: "x".into(),
                kind: Kind::Symlink,
            }]),
        );
        recs.insert((Op::Link, "/d/x".to_string()), Answer::Link("../y".into()));
        recs.insert(
            (Op::Probe, "rlimit_memlock".to_string()),
            Answer::Data(b"65536 65536".to_vec()),
        );
        Bundle::new(Bundle::header_now("test", CollectOptions::default()), recs)
    }

    #[test]
    fn json_round_trip_keeps_every_answer() {
        let b = sample();
        let back = Bundle::from_bytes("mem", &b.to_json()).unwrap();
        assert_eq!(back.header, b.header);
        for k in b.keys() {
            assert_eq!(back.get(k.0, &k.1), b.get(k.0, &k.1), "{k:?}");
        }
        assert_eq!(back.read("/e"), Err(Errno::EINVAL));
        assert_eq!(back.read("/bin").unwrap(), vec![0xff, 0, 1]);
        assert_eq!(back.misses(), 0);
        assert_eq!(back.read("/never"), Err(Errno::ENOENT));
        assert_eq!(back.misses(), 1);
        // A question collect asks only since these bundles were recorded: absent,
        // not a miss.
        assert_eq!(
            back.read("/proc/sys/kernel/random/boot_id"),
            Err(Errno::ENOENT)
        );
        assert_eq!(back.misses(), 1);
    }

    #[test]
    fn gzip_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("b.json.gz");
        let p = p.to_str().unwrap();
        sample().write(p).unwrap();
        let raw = std::fs::read(p).unwrap();
        assert_eq!(&raw[..2], &[0x1f, 0x8b]);
        assert_eq!(Bundle::read(p).unwrap().read("/a").unwrap(), b"4: ACTIVE\n");
    }

    #[test]
    fn garbage_is_a_clear_error() {
        for bytes in [
            &b""[..],
            b"{}",
            b"\x1f\x8bnot gzip",
            b"{\"format\":\"rdmakit-bundle\",\"version\":9}",
        ] {
            let e = Bundle::from_bytes("x", bytes).unwrap_err().to_string();
            assert!(e.starts_with("x: "), "{e}");
        }
    }
}
