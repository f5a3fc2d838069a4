//! What a registry file says: the record of one object and the names of
//! records and context files. Pure: no I/O, never panics on any input (the
//! fuzz target `registry_record` in crates/soft/fuzz holds it to that).
//!
//! A record is at most [`MAX_RECORD_BYTES`] of UTF-8 `key=value` lines,
//! every known key exactly once, values plain decimal digits (`leaky` 0 or
//! 1); unknown keys are skipped so a newer rdmakit may add some. Its file
//! name repeats the identity fields (`<kind>-<pid>-<start_time>-<instance>-<handle>`)
//! and must equal the name the fields give: a file whose name and content
//! disagree is not a record.

use std::fmt;

/// The most bytes a record (or a context file) may have: one is about 120.
/// A larger file is not read.
pub const MAX_RECORD_BYTES: usize = 512;

/// The kind of a registered object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// Queue pair.
    Qp,
    /// Completion queue.
    Cq,
    /// Memory region.
    Mr,
    /// Protection domain.
    Pd,
    /// Shared receive queue.
    Srq,
    /// Address handle.
    Ah,
}

impl Kind {
    /// All kinds, in display order.
    pub const ALL: [Kind; 6] = [Kind::Qp, Kind::Cq, Kind::Mr, Kind::Pd, Kind::Srq, Kind::Ah];

    /// The short name (`qp`, `cq`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Qp => "qp",
            Kind::Cq => "cq",
            Kind::Mr => "mr",
            Kind::Pd => "pd",
            Kind::Srq => "srq",
            Kind::Ah => "ah",
        }
    }

    /// Parses a short name.
    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The fields of one record, as its file holds them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fields {
    /// Object kind.
    pub kind: Kind,
    /// Handle (QPN for QPs, lkey for MRs, id otherwise).
    pub handle: u32,
    /// Owner process id.
    pub pid: u32,
    /// Owner's start time (`/proc/<pid>/stat` field 22).
    pub start_time: u64,
    /// The owner's device instance (context) that created it.
    pub instance: u32,
    /// Creation time, seconds since the Unix epoch.
    pub created_at: u64,
    /// The device limit for this kind its creator had (0: unknown).
    pub limit: u32,
    /// Created by a leaky device.
    pub leaky: bool,
}

/// Why bytes are not a record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParseError {
    /// More than [`MAX_RECORD_BYTES`].
    TooLarge(usize),
    /// Not UTF-8.
    NotText,
    /// A line without `=`.
    NoEquals(usize),
    /// A known key twice.
    Duplicate(&'static str),
    /// A known key missing.
    Missing(&'static str),
    /// A value that is not what the key takes.
    BadValue(&'static str),
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::TooLarge(n) => write!(
                f,
                "{n} bytes, more than the {MAX_RECORD_BYTES} a record may have"
            ),
            ParseError::NotText => f.write_str("not UTF-8 text"),
            ParseError::NoEquals(l) => write!(f, "line {l} is not key=value"),
            ParseError::Duplicate(k) => write!(f, "{k} given twice"),
            ParseError::Missing(k) => write!(f, "no {k}"),
            ParseError::BadValue(k) => write!(f, "{k} is not a valid value"),
        }
    }
}

impl std::error::Error for ParseError {}

const KEYS: [&str; 8] = [
    "kind",
    "handle",
    "pid",
    "start_time",
    "instance",
    "created_at",
    "limit",
    "leaky",
];

/// A decimal number of plain ASCII digits (no sign, no spaces), at most 20
/// digits: `str::parse` alone would take `+5`.
fn number<T: std::str::FromStr>(v: &str) -> Option<T> {
    (!v.is_empty() && v.len() <= 20 && v.bytes().all(|b| b.is_ascii_digit()))
        .then(|| v.parse().ok())
        .flatten()
}

/// Parses a record.
///
/// # Errors
/// What makes `bytes` not a record ([`ParseError`]).
pub fn parse_record(bytes: &[u8]) -> Result<Fields, ParseError> {
    if bytes.len() > MAX_RECORD_BYTES {
        return Err(ParseError::TooLarge(bytes.len()));
    }
    let text = std::str::from_utf8(bytes).map_err(|_| ParseError::NotText)?;
    let mut seen = [None::<&str>; 8];
    for (n, line) in text.lines().enumerate() {
        if line.is_empty() {
            continue;
        }
        let (k, v) = line.split_once('=').ok_or(ParseError::NoEquals(n + 1))?;
        if let Some(i) = KEYS.iter().position(|key| *key == k) {
            if seen[i].is_some() {
                return Err(ParseError::Duplicate(KEYS[i]));
            }
            seen[i] = Some(v);
        }
    }
    let get = |i: usize| seen[i].ok_or(ParseError::Missing(KEYS[i]));
    let num = |i: usize| get(i).and_then(|v| number::<u64>(v).ok_or(ParseError::BadValue(KEYS[i])));
    let num32 =
        |i: usize| num(i).and_then(|v| u32::try_from(v).map_err(|_| ParseError::BadValue(KEYS[i])));
    Ok(Fields {
        kind: Kind::parse(get(0)?).ok_or(ParseError::BadValue("kind"))?,
        handle: num32(1)?,
        pid: num32(2)?,
        start_time: num(3)?,
        instance: num32(4)?,
        created_at: num(5)?,
        limit: num32(6)?,
        leaky: match get(7)? {
            "0" => false,
            "1" => true,
            _ => return Err(ParseError::BadValue("leaky")),
        },
    })
}

impl Fields {
    /// The record's text (what [`parse_record`] reads back).
    pub fn emit(&self) -> String {
        format!(
            "kind={}\nhandle={}\npid={}\nstart_time={}\ninstance={}\ncreated_at={}\nlimit={}\nleaky={}\n",
            self.kind,
            self.handle,
            self.pid,
            self.start_time,
            self.instance,
            self.created_at,
            self.limit,
            u8::from(self.leaky)
        )
    }

    /// The record's file name: `<kind>-<pid>-<start_time>-<instance>-<handle>`.
    pub fn file_name(&self) -> String {
        record_name(
            self.kind,
            Ctx {
                pid: self.pid,
                start_time: self.start_time,
                instance: self.instance,
            },
            self.handle,
        )
    }

    /// The context the object belongs to.
    pub fn ctx(&self) -> Ctx {
        Ctx {
            pid: self.pid,
            start_time: self.start_time,
            instance: self.instance,
        }
    }
}

/// A context (one device instance of one process): its owner's pid and
/// start time, and the instance within the process. Its file is
/// `ctx-<pid>-<start_time>-<instance>`: the start time keeps a later
/// process with a recycled pid from taking the name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ctx {
    /// Owner pid.
    pub pid: u32,
    /// Owner start time.
    pub start_time: u64,
    /// Instance within the owner.
    pub instance: u32,
}

impl Ctx {
    /// The context file's name.
    pub fn file_name(&self) -> String {
        format!("ctx-{}-{}-{}", self.pid, self.start_time, self.instance)
    }

    /// The name of the file its counters are published in.
    pub fn counters_name(&self) -> String {
        format!("hw-{}-{}-{}", self.pid, self.start_time, self.instance)
    }
}

/// A record's file name.
pub fn record_name(kind: Kind, ctx: Ctx, handle: u32) -> String {
    format!(
        "{kind}-{}-{}-{}-{handle}",
        ctx.pid, ctx.start_time, ctx.instance
    )
}

/// What a directory entry's name says it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Name {
    /// A record of `kind`, `handle`, in context `ctx`.
    Record(Kind, Ctx, u32),
    /// A context file.
    Context(Ctx),
    /// A context's published counters (`hw-<pid>-<start_time>-<instance>`,
    /// [`super::counters`]).
    Counters(Ctx),
    /// `.lock`, `.options`, a file being written (`.*.tmp`) or another
    /// name starting with a dot: not a record.
    Dot,
    /// Anything else: not a name rdmakit writes.
    Other,
}

/// Reads an entry's name. Numbers must be in the form rdmakit writes them
/// (so one object has one name).
pub fn parse_name(name: &[u8]) -> Name {
    let Ok(name) = std::str::from_utf8(name) else {
        return Name::Other;
    };
    if name.starts_with('.') {
        return Name::Dot;
    }
    let mut parts = name.split('-');
    let first = parts.next().unwrap_or_default();
    let rest: Vec<&str> = parts.collect();
    let canonical = |s: &str| s == "0" || !s.starts_with('0');
    if rest.iter().any(|s| !canonical(s)) {
        return Name::Other;
    }
    let ctx = |p: &[&str]| -> Option<Ctx> {
        Some(Ctx {
            pid: number(p[0])?,
            start_time: number(p[1])?,
            instance: number(p[2])?,
        })
    };
    match (first, rest.len()) {
        ("ctx", 3) => ctx(&rest).map_or(Name::Other, Name::Context),
        ("hw", 3) => ctx(&rest).map_or(Name::Other, Name::Counters),
        (k, 4) => match (Kind::parse(k), ctx(&rest[..3]), number(rest[3])) {
            (Some(kind), Some(c), Some(h)) => Name::Record(kind, c, h),
            _ => Name::Other,
        },
        _ => Name::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields() -> Fields {
        Fields {
            kind: Kind::Qp,
            handle: 0x4011,
            pid: 4242,
            start_time: 123_456,
            instance: 1,
            created_at: 1_796_000_000,
            limit: 16384,
            leaky: true,
        }
    }

    #[test]
    fn a_record_round_trips_and_its_name_parses_back() {
        let f = fields();
        assert_eq!(parse_record(f.emit().as_bytes()), Ok(f));
        assert_eq!(f.file_name(), "qp-4242-123456-1-16401");
        assert_eq!(
            parse_name(f.file_name().as_bytes()),
            Name::Record(Kind::Qp, f.ctx(), 0x4011)
        );
        assert_eq!(f.ctx().file_name(), "ctx-4242-123456-1");
        assert_eq!(
            parse_name(f.ctx().file_name().as_bytes()),
            Name::Context(f.ctx())
        );
    }

    #[test]
    fn what_is_not_a_record_says_why() {
        let good = fields().emit();
        assert_eq!(
            parse_record(&vec![b'a'; 600]),
            Err(ParseError::TooLarge(600))
        );
        assert_eq!(parse_record(b"\xff=1"), Err(ParseError::NotText));
        assert_eq!(
            parse_record(format!("{good}pid=1\n").as_bytes()),
            Err(ParseError::Duplicate("pid"))
        );
        assert_eq!(
            parse_record(good.replace("leaky=1", "leaky=yes").as_bytes()),
            Err(ParseError::BadValue("leaky"))
        );
        assert_eq!(
            parse_record(good.replace("pid=4242", "pid=+4242").as_bytes()),
            Err(ParseError::BadValue("pid"))
        );
        assert_eq!(
            parse_record(good.replace("handle=16401", "handle=4294967296").as_bytes()),
            Err(ParseError::BadValue("handle"))
        );
        assert_eq!(
            parse_record(good.replace("kind=qp\n", "").as_bytes()),
            Err(ParseError::Missing("kind"))
        );
        assert_eq!(
            parse_record(format!("{good}garbage\n").as_bytes()),
            Err(ParseError::NoEquals(9))
        );
        // Unknown keys are a newer rdmakit's: skipped.
        assert_eq!(
            parse_record(format!("{good}color=blue\n").as_bytes()),
            Ok(fields())
        );
    }

    #[test]
    fn names_rdmakit_does_not_write_are_other() {
        for n in [
            "qp-1-2-3",
            "qp-01-2-3-4",
            "xx-1-2-3-4",
            "ctx-1-2",
            "ctx-1-2-3-4",
            "qp-1-2-3-+4",
            "qp-1-2-3-99999999999",
            "",
        ] {
            assert_eq!(parse_name(n.as_bytes()), Name::Other, "{n:?}");
        }
        assert_eq!(parse_name(b".lock"), Name::Dot);
        assert_eq!(parse_name(b".qp-1-2-3-4.tmp"), Name::Dot);
        assert_eq!(
            parse_name(b"qp-0-0-0-0"),
            Name::Record(
                Kind::Qp,
                Ctx {
                    pid: 0,
                    start_time: 0,
                    instance: 0
                },
                0
            )
        );
    }
}
