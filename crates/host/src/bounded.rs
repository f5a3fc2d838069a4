//! The one reader for every file rdmakit is given or finds: bounded in size, in
//! time and in what it agrees to open.
//!
//! Every file read from an argument (`--from`, `--baseline`, `--kernel-log`,
//! `--token-file`, `--expect`, `pcap FILE`, the inputs of `fleet report`) or from
//! inside a captured tree (a capture directory, a `--root` tree) goes through this
//! module, because each of them may have been prepared by someone else: a support
//! bundle from a customer, a tarball unpacked as root, a directory others can write.
//!
//! - **What it opens.** A path the user *named* ([`open_named`], [`read_named`],
//!   [`read_named_gz`]) may be a regular file or a pipe — a FIFO, or `<(command)`,
//!   which the shell passes as `/dev/fd/N` — since that is a choice the user made.
//!   A pipe is read to its end within [`PIPE_DEADLINE`] (for the whole content, so
//!   a writer sending one byte a second cannot hold rdmakit either), else the read
//!   fails naming the path. Character and block devices (`/dev/zero`, a terminal),
//!   sockets and directories are refused *before* they are opened: opening a
//!   device can have effects of its own (a watchdog starts, a tape rewinds) and
//!   reading one may never end. A file *found* inside a tree ([`read_tree_file`],
//!   [`read_in_dir`]) must be a regular file: a FIFO, socket or device there is
//!   refused without blocking (opened with `O_NONBLOCK`, checked with `fstat`),
//!   and inside a capture directory without following a symlink (`O_NOFOLLOW`,
//!   relative to the directory's descriptor). To a [`crate::source::Source`] such a
//!   file is a read error, EINVAL — read(2)'s errno for "an object unsuitable for
//!   reading" — which the doctor reports like any other unreadable file.
//! - **How much.** Each kind of source has a [`Cap`], chosen from the real sizes in
//!   `fixtures/` with a wide margin and from what rdmakit's memory may grow to while
//!   it holds and parses that much (at most 500 MB for any input). Past it the read
//!   stops and fails saying which cap ("… is over 64 MiB (the cap for bundles)").
//!   gzip is inflated as a stream and stopped at the same cap, so a gzip bomb costs
//!   at most the cap, whatever its ratio.
//! - **How long.** A regular file is read as it is (a slow disk is not an attack);
//!   a pipe has [`PIPE_DEADLINE`] for everything it sends.
//!
//! Errors name the path and what was wrong, once ([`ReadError`] keeps the
//! `io::Error` in its message and does not also expose it as its source, so an
//! error chain printed with `{:#}` says "No such file or directory" once).
//!
//! ```
//! use rdmakit_host::bounded::{read_named, Cap, ReadError};
//! let dir = tempfile::tempdir().unwrap();
//! let p = dir.path().join("t");
//! std::fs::write(&p, b"0123456789").unwrap();
//! let small = Cap::new(10, "examples");
//! assert_eq!(read_named(&p, small).unwrap(), b"0123456789");
//! let tiny = Cap::new(9, "examples");
//! assert!(matches!(read_named(&p, tiny), Err(ReadError::TooLarge { .. })));
//! let e = read_named(std::path::Path::new("/dev/zero"), small).unwrap_err();
//! assert!(e.to_string().contains("a character device"), "{e}");
//! ```

use std::ffi::CStr;
use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::time::{Duration, Instant};

use rustix::fs::{FileType, Mode, OFlags};

use crate::source::Errno;

/// How long a pipe a user named may take to send everything it sends.
///
/// Five seconds: `vault read`, `zcat` or `journalctl -k` behind `<(...)` finish in
/// well under a second; a pipe with no writer, or one that trickles, fails in time
/// for the whole command to answer within ten.
pub const PIPE_DEADLINE: Duration = Duration::from_secs(5);

/// A size limit for one kind of source, and how to name it in an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cap {
    /// The most bytes read (after decompression, for gzip).
    pub bytes: u64,
    /// The kind of source, plural: "bundles", "pcap files".
    pub what: &'static str,
}

impl Cap {
    /// A cap of `bytes` for sources called `what` (plural).
    pub const fn new(bytes: u64, what: &'static str) -> Cap {
        Cap { bytes, what }
    }

    /// A bundle (`rdmakit collect`), after gunzip: 64 MiB. The bundles of the
    /// fixtures' hosts are 6 KB to 505 KB (fixtures/healthy: 3,429 records); a
    /// host with 16 ports and thousands of IRQs stays within a few MiB. Parsed,
    /// a bundle of small records takes about 8 times its size (measured: 64 MiB of
    /// 50-byte records, 565 MB), so bundles also hold at most [`MAX_RECORDS`].
    pub const BUNDLE: Cap = Cap::new(64 << 20, "bundles");
    /// Everything a capture directory holds, together: 64 MiB, as a bundle (it is
    /// imported as one). fixtures/healthy holds 1,328 files.
    pub const CAPTURE: Cap = Cap::new(64 << 20, "capture directories");
    /// A pcap or pcapng file: 128 MiB, read whole. The decoder keeps a record
    /// of at most `rdmakit_wire::capture::MAX_PACKETS` RoCE packets (about 1.4
    /// KB each with `--json`) and says where it stopped; the frames' index
    /// costs some 50 bytes a frame. With 128 MiB of the smallest RoCE frames the
    /// peak stays under 500 MB (measured in crates/rdmakit/tests/bounded_inputs.rs).
    /// The fixtures' captures are 2 KB to 54 KB; the VM tier's soft NIC to rxe
    /// capture, 26 MB.
    pub const PCAP: Cap = Cap::new(128 << 20, "pcap files");
    /// A kernel log (`--kernel-log`, `journalctl -k` or `dmesg` output): 32 MiB.
    /// The fixtures' logs are 30 KB to 60 KB; the kernel's own ring is at most a
    /// few MiB (`log_buf_len`), `journalctl -k -b` one boot of it.
    pub const KERNEL_LOG: Cap = Cap::new(32 << 20, "kernel logs");
    /// A token file (`--token-file`): 4 KiB (a token is 64 hex digits).
    pub const TOKEN: Cap = Cap::new(4 << 10, "token files");
    /// One JSON document a user names or a fleet input holds: a bundle, a
    /// previous fleet report (about 6 KB per node: 64 MiB is ten thousand nodes
    /// with room to spare), an expected inventory, a saved pairwise run. Such
    /// documents are read into their own types, never into a generic JSON value
    /// (which takes up to 16 times the text: 63 MiB of numbers, 1.1 GB).
    pub const DOCUMENT: Cap = Cap::new(64 << 20, "JSON documents");
    /// A JSON lines file of doctor reports (a sweep's output), read one line at
    /// a time, each at most [`Cap::REPORT`]: 256 MiB, twenty thousand 12 KB
    /// reports (the fixtures' hosts give 12 KB to 60 KB). The reports kept take
    /// about their size in memory.
    pub const JSON_LINES: Cap = Cap::new(256 << 20, "JSON lines files");
    /// One doctor report (`rdmakit doctor --json`, or one line of JSON lines):
    /// 16 MiB. The fixtures' hosts give 12 KB to 60 KB; parsed, a report of
    /// tiny findings takes about 5 times its size.
    pub const REPORT: Cap = Cap::new(16 << 20, "doctor reports");
    /// A small state file rdmakit keeps itself (the NPD plugin's last result): 1 MiB.
    pub const STATE: Cap = Cap::new(1 << 20, "state files");
}

/// The most records a bundle may hold (fixtures/healthy has 3,429): what bounds
/// a bundle's memory when its records are tiny.
pub const MAX_RECORDS: usize = 400_000;

/// Why a file was not read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The operating system's error (the file is missing, not readable, ...).
    #[error("{path}: {err}")]
    Io {
        /// The path.
        path: String,
        /// What the system said (in the message, not a separate source, so a
        /// printed chain says it once).
        err: io::Error,
    },
    /// A path the user named that is neither a regular file nor a pipe.
    #[error("{path}: {kind}, not a regular file or a pipe: refused")]
    Refused {
        /// The path.
        path: String,
        /// "a character device", "a socket", "a directory".
        kind: &'static str,
    },
    /// Something found in a tree that is not a regular file.
    #[error("{path}: {kind}, not a regular file: not read")]
    NotRegular {
        /// The path.
        path: String,
        /// "a FIFO", "a character device", "a symlink", ...
        kind: &'static str,
    },
    /// More bytes than the cap.
    #[error("{path} is over {} (the cap for {})", size(cap.bytes), cap.what)]
    TooLarge {
        /// The path.
        path: String,
        /// The cap it is over.
        cap: Cap,
    },
    /// gzip that inflates to more than the cap.
    #[error("{path} decompresses to over {} (the cap for {})", size(cap.bytes), cap.what)]
    Inflated {
        /// The path.
        path: String,
        /// The cap it is over.
        cap: Cap,
    },
    /// Starts like gzip but does not inflate.
    #[error("{path}: not gzip or corrupt: {reason}")]
    Gzip {
        /// The path.
        path: String,
        /// The decoder's complaint.
        reason: String,
    },
    /// A pipe that did not reach its end in time.
    #[error(
        "{path}: a pipe that did not end within {} s ({read} bytes read): is its writer stuck?",
        deadline.as_secs_f64()
    )]
    Timeout {
        /// The path.
        path: String,
        /// The deadline it missed.
        deadline: Duration,
        /// What had arrived by then.
        read: u64,
    },
}

impl ReadError {
    /// The path the error is about.
    pub fn path(&self) -> &str {
        match self {
            ReadError::Io { path, .. }
            | ReadError::Refused { path, .. }
            | ReadError::NotRegular { path, .. }
            | ReadError::TooLarge { path, .. }
            | ReadError::Inflated { path, .. }
            | ReadError::Gzip { path, .. }
            | ReadError::Timeout { path, .. } => path,
        }
    }

    /// What was wrong, without the path (for a report that shows the path
    /// beside it): "over 64 MiB (the cap for bundles)".
    pub fn reason(&self) -> String {
        let msg = self.to_string();
        let path = self.path();
        match msg.strip_prefix(path) {
            Some(rest) => rest
                .strip_prefix(": ")
                .or_else(|| rest.strip_prefix(" is "))
                .or_else(|| rest.strip_prefix(' '))
                .unwrap_or(rest)
                .to_string(),
            None => msg,
        }
    }

    /// The errno a [`crate::source::Source`] records for it: the system's own, or
    /// EINVAL for what is not a regular file (read(2)'s "unsuitable for
    /// reading"), EFBIG past a cap, ETIMEDOUT for a pipe out of time.
    pub fn errno(&self) -> Errno {
        match self {
            ReadError::Io { err, .. } => Errno::from_io(err),
            ReadError::Refused { .. } | ReadError::NotRegular { .. } | ReadError::Gzip { .. } => {
                Errno::EINVAL
            }
            ReadError::TooLarge { .. } | ReadError::Inflated { .. } => Errno::EFBIG,
            ReadError::Timeout { .. } => Errno::ETIMEDOUT,
        }
    }

    /// The `ReadError` an `io::Error` from a [`Bounded`] reader carries, else an
    /// I/O error on `path`.
    pub fn from_io(path: &str, e: io::Error) -> ReadError {
        if e.get_ref().is_some_and(|i| i.is::<ReadError>()) {
            if let Some(inner) = e.into_inner() {
                if let Ok(r) = inner.downcast::<ReadError>() {
                    return *r;
                }
            }
            // `is::<ReadError>` said it is one; unreachable in practice.
            return ReadError::Io {
                path: path.to_string(),
                err: io::Error::other("reader error"),
            };
        }
        ReadError::Io {
            path: path.to_string(),
            err: e,
        }
    }
}

/// "64 MiB", "4 KiB", "100 bytes".
fn size(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes & ((1 << 20) - 1) == 0 {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes & ((1 << 10) - 1) == 0 {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} bytes")
    }
}

/// "a FIFO", "a character device", ... for messages.
fn kind_name(t: FileType) -> &'static str {
    match t {
        FileType::RegularFile => "a regular file",
        FileType::Directory => "a directory",
        FileType::Symlink => "a symlink",
        FileType::Fifo => "a FIFO (named pipe)",
        FileType::Socket => "a socket",
        FileType::CharacterDevice => "a character device",
        FileType::BlockDevice => "a block device",
        FileType::Unknown => "of an unknown file type",
    }
}

fn io_err(path: &str, e: impl Into<io::Error>) -> ReadError {
    ReadError::Io {
        path: path.to_string(),
        err: e.into(),
    }
}

/// An open file that stops at its cap and, for a pipe, at its deadline: errors
/// from [`Read`] carry a [`ReadError`] ([`ReadError::from_io`] gets it back).
#[derive(Debug)]
pub struct Bounded {
    file: File,
    path: String,
    cap: Cap,
    read: u64,
    /// Set for a pipe: when it must have ended.
    deadline: Option<(Instant, Duration)>,
    stat: rustix::fs::Stat,
}

impl Bounded {
    /// The path, as errors name it.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// `fstat` of the open file (what was checked is what is read).
    pub fn stat(&self) -> &rustix::fs::Stat {
        &self.stat
    }

    /// True when it is a pipe (read with a deadline).
    pub fn is_pipe(&self) -> bool {
        self.deadline.is_some()
    }

    /// Everything, up to the cap.
    ///
    /// # Errors
    /// Over the cap, past the deadline, or the system's read error.
    pub fn read_all(mut self) -> Result<Vec<u8>, ReadError> {
        let hint = if self.is_pipe() {
            0
        } else {
            self.stat.st_size.clamp(0, self.cap.bytes as i64) as usize
        };
        let mut out = Vec::with_capacity(hint);
        let path = self.path.clone();
        self.read_to_end(&mut out)
            .map_err(|e| ReadError::from_io(&path, e))?;
        Ok(out)
    }

    fn fail(&self, e: ReadError) -> io::Error {
        io::Error::other(e)
    }

    fn read_pipe(
        &mut self,
        buf: &mut [u8],
        until: Instant,
        deadline: Duration,
    ) -> io::Result<usize> {
        use rustix::event::{poll, PollFd, PollFlags};
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(self.fail(ReadError::Timeout {
                    path: self.path.clone(),
                    deadline,
                    read: self.read,
                }));
            }
            let ms = i32::try_from(left.as_millis().max(1)).unwrap_or(i32::MAX);
            let mut fds = [PollFd::new(&self.file, PollFlags::IN)];
            match poll(&mut fds, ms) {
                Ok(0) => continue,
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
            // Readable, or its writer is gone (POLLHUP: the read returns 0, the end).
            match self.file.read(buf) {
                Ok(n) => return Ok(n),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                    ) =>
                {
                    continue
                }
                Err(e) => return Err(e),
            }
        }
    }
}

impl Read for Bounded {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // One byte past the cap may be read, to tell "exactly the cap" from "over".
        let room = (self.cap.bytes + 1).saturating_sub(self.read);
        let want = buf.len().min(usize::try_from(room).unwrap_or(usize::MAX));
        if want == 0 {
            return Ok(0);
        }
        let n = match self.deadline {
            Some((until, d)) => self.read_pipe(&mut buf[..want], until, d)?,
            None => loop {
                match self.file.read(&mut buf[..want]) {
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    r => break r?,
                }
            },
        };
        self.read += n as u64;
        if self.read > self.cap.bytes {
            return Err(self.fail(ReadError::TooLarge {
                path: self.path.clone(),
                cap: self.cap,
            }));
        }
        Ok(n)
    }
}

/// Opens a path the user named: a regular file, or a pipe (read with
/// [`PIPE_DEADLINE`]); anything else is refused before it is opened.
///
/// # Errors
/// The path does not open, is a device, socket or directory, or a regular file
/// already larger than `cap`.
pub fn open_named(path: &Path, cap: Cap) -> Result<Bounded, ReadError> {
    open_named_with(path, cap, PIPE_DEADLINE)
}

/// [`open_named`] with another deadline for pipes (tests use a short one).
///
/// # Errors
/// As [`open_named`].
pub fn open_named_with(path: &Path, cap: Cap, deadline: Duration) -> Result<Bounded, ReadError> {
    open(path, cap, Some(deadline))
}

/// Opens a file found while walking a directory the user named (the files of
/// `fleet report DIR`): a regular file only — nobody chose a FIFO there, so
/// none is waited on — following symlinks, never blocking.
///
/// # Errors
/// The path does not open, is not a regular file, or is already over `cap`.
pub fn open_found(path: &Path, cap: Cap) -> Result<Bounded, ReadError> {
    open(path, cap, None)
}

/// Opens `path` as a regular file, or as a pipe read within `pipe` when given.
fn open(path: &Path, cap: Cap, pipe: Option<Duration>) -> Result<Bounded, ReadError> {
    let shown = path.display().to_string();
    let check = |st: &rustix::fs::Stat| -> Result<FileType, ReadError> {
        match FileType::from_raw_mode(st.st_mode) {
            t @ FileType::RegularFile => Ok(t),
            t @ FileType::Fifo if pipe.is_some() => Ok(t),
            t if pipe.is_none() => Err(ReadError::NotRegular {
                path: shown.clone(),
                kind: kind_name(t),
            }),
            t => Err(ReadError::Refused {
                path: shown.clone(),
                kind: kind_name(t),
            }),
        }
    };
    // Refused before open(2): opening a device is itself an action.
    check(&rustix::fs::stat(path).map_err(|e| io_err(&shown, e))?)?;
    // O_NONBLOCK: a FIFO opens without waiting for a writer.
    let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK;
    let fd = rustix::fs::open(path, flags, Mode::empty()).map_err(|e| io_err(&shown, e))?;
    // Checked again on what was opened: the path may have changed in between.
    let stat = rustix::fs::fstat(&fd).map_err(|e| io_err(&shown, e))?;
    let t = check(&stat)?;
    if t == FileType::RegularFile && stat.st_size as u64 > cap.bytes {
        return Err(ReadError::TooLarge { path: shown, cap });
    }
    Ok(Bounded {
        file: File::from(fd),
        path: shown,
        cap,
        read: 0,
        deadline: pipe
            .filter(|_| t == FileType::Fifo)
            .map(|d| (Instant::now() + d, d)),
        stat,
    })
}

/// Reads a path the user named (see [`open_named`]) to its end.
///
/// # Errors
/// As [`open_named`]; over the cap; a pipe past its deadline.
pub fn read_named(path: &Path, cap: Cap) -> Result<Vec<u8>, ReadError> {
    open_named(path, cap)?.read_all()
}

/// Reads a path the user named and inflates it when it is gzip (by its magic
/// bytes, not its name): both the file and what it inflates to are held to `cap`.
///
/// # Errors
/// As [`read_named`]; corrupt gzip; inflating past the cap.
pub fn read_named_gz(path: &Path, cap: Cap) -> Result<Vec<u8>, ReadError> {
    let f = open_named(path, cap)?;
    let shown = f.path().to_string();
    maybe_inflate(&shown, f, cap)
}

/// `reader`'s bytes, inflated when they start with gzip's magic; at most `cap`
/// either way.
///
/// # Errors
/// The reader's error, corrupt gzip, or over the cap.
pub fn maybe_inflate(path: &str, reader: impl Read, cap: Cap) -> Result<Vec<u8>, ReadError> {
    let mut out = Vec::new();
    plain(path, reader, cap)?
        .read_to_end(&mut out)
        .map_err(|e| ReadError::from_io(path, e))?;
    Ok(out)
}

/// `reader`'s bytes as a stream, inflated when they start with gzip's magic:
/// reading past `cap` (after inflating) fails with [`ReadError::Inflated`] (or
/// [`ReadError::TooLarge`] for plain bytes), corrupt gzip with
/// [`ReadError::Gzip`], each carried in the `io::Error` ([`ReadError::from_io`]).
///
/// # Errors
/// The reader fails before its first two bytes.
pub fn plain<'a>(
    path: &str,
    mut reader: impl Read + 'a,
    cap: Cap,
) -> Result<Box<dyn Read + 'a>, ReadError> {
    let mut head = [0u8; 2];
    let mut got = 0;
    while got < 2 {
        match reader.read(&mut head[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ReadError::from_io(path, e)),
        }
    }
    let whole = io::Cursor::new(head[..got].to_vec()).chain(reader);
    let gz = head[..got] == [0x1f, 0x8b];
    let inner: Box<dyn Read + 'a> = if gz {
        Box::new(flate2::read::MultiGzDecoder::new(whole))
    } else {
        Box::new(whole)
    };
    Ok(Box::new(Limit {
        inner,
        path: path.to_string(),
        cap,
        left: cap.bytes + 1,
        gz,
    }))
}

/// Stops a stream one byte past its cap, with the error that names it.
struct Limit<'a> {
    inner: Box<dyn Read + 'a>,
    path: String,
    cap: Cap,
    /// Bytes that may still be read, counting the one that proves "over".
    left: u64,
    gz: bool,
}

impl Read for Limit<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let path = self.path.clone();
        let want = buf
            .len()
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        if want == 0 && !buf.is_empty() {
            let e = if self.gz {
                ReadError::Inflated {
                    path,
                    cap: self.cap,
                }
            } else {
                ReadError::TooLarge {
                    path,
                    cap: self.cap,
                }
            };
            return Err(io::Error::other(e));
        }
        let n = match self.inner.read(&mut buf[..want]) {
            Ok(n) => n,
            Err(e) if e.get_ref().is_some_and(|i| i.is::<ReadError>()) => return Err(e),
            Err(e) if self.gz && e.kind() != io::ErrorKind::Interrupted => {
                return Err(io::Error::other(ReadError::Gzip {
                    path,
                    reason: e.to_string(),
                }))
            }
            Err(e) => return Err(e),
        };
        self.left -= n as u64;
        if self.left == 0 {
            // The byte past the cap arrived.
            return self.read(&mut [0u8; 1]);
        }
        Ok(n)
    }
}

/// Inflates gzip held in memory (a bundle's bytes, `/proc/config.gz`, a sweep
/// frame), stopping at `cap`.
///
/// # Errors
/// Not gzip or corrupt; inflates past the cap.
pub fn gunzip(path: &str, gz: &[u8], cap: Cap) -> Result<Vec<u8>, ReadError> {
    inflate(path, flate2::read::MultiGzDecoder::new(gz), cap)
}

fn inflate(path: &str, decoder: impl Read, cap: Cap) -> Result<Vec<u8>, ReadError> {
    let mut out = Vec::new();
    match decoder.take(cap.bytes + 1).read_to_end(&mut out) {
        Ok(_) => {}
        // The file under the decoder failed (its own cap, a pipe's deadline).
        Err(e) if e.get_ref().is_some_and(|i| i.is::<ReadError>()) => {
            return Err(ReadError::from_io(path, e))
        }
        Err(e) => {
            return Err(ReadError::Gzip {
                path: path.to_string(),
                reason: e.to_string(),
            })
        }
    }
    if out.len() as u64 > cap.bytes {
        return Err(ReadError::Inflated {
            path: path.to_string(),
            cap,
        });
    }
    Ok(out)
}

/// Reads a file found in a tree (following symlinks as open(2) does, as a host
/// tree's absolute links are meant): a regular file only, never blocking;
/// at most `max` bytes, the rest left unread (the [`crate::source::MAX_READ`]
/// contract of a live source).
///
/// # Errors
/// Missing or unreadable; not a regular file ([`ReadError::NotRegular`]).
pub fn read_tree_file(path: &Path, max: u64) -> Result<Vec<u8>, ReadError> {
    let shown = path.display().to_string();
    let st = rustix::fs::stat(path).map_err(|e| io_err(&shown, e))?;
    regular(&shown, &st)?;
    let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK;
    let fd = rustix::fs::open(path, flags, Mode::empty()).map_err(|e| io_err(&shown, e))?;
    read_regular(&shown, fd, max)
}

/// Reads `name` in the directory open as `dir`, without following a symlink
/// (`O_NOFOLLOW`) and without blocking (`O_NONBLOCK`): a regular file only;
/// `shown` is the path errors name. At most `max` bytes when `truncate`; over
/// `max` is [`ReadError::TooLarge`] with `cap` otherwise.
///
/// # Errors
/// Missing or unreadable; a symlink, FIFO, socket or device; over the cap.
pub fn read_in_dir(
    dir: BorrowedFd<'_>,
    name: &CStr,
    shown: &str,
    cap: Cap,
    truncate: bool,
) -> Result<Vec<u8>, ReadError> {
    let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK;
    let fd = match rustix::fs::openat(dir, name, flags | OFlags::NOFOLLOW, Mode::empty()) {
        Ok(fd) => fd,
        // O_NOFOLLOW on a symlink.
        Err(rustix::io::Errno::LOOP) => {
            return Err(ReadError::NotRegular {
                path: shown.to_string(),
                kind: kind_name(FileType::Symlink),
            })
        }
        Err(e) => return Err(io_err(shown, e)),
    };
    if truncate {
        return read_regular(shown, fd, cap.bytes);
    }
    let out = read_regular(shown, fd, cap.bytes + 1)?;
    if out.len() as u64 > cap.bytes {
        return Err(ReadError::TooLarge {
            path: shown.to_string(),
            cap,
        });
    }
    Ok(out)
}

fn regular(shown: &str, st: &rustix::fs::Stat) -> Result<(), ReadError> {
    match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => Ok(()),
        t => Err(ReadError::NotRegular {
            path: shown.to_string(),
            kind: kind_name(t),
        }),
    }
}

/// Checks what `fd` is, then reads at most `max` bytes of it.
fn read_regular(shown: &str, fd: OwnedFd, max: u64) -> Result<Vec<u8>, ReadError> {
    let st = rustix::fs::fstat(fd.as_fd()).map_err(|e| io_err(shown, e))?;
    regular(shown, &st)?;
    let hint = st.st_size.clamp(0, max.min(1 << 20) as i64) as usize;
    let mut out = Vec::with_capacity(hint);
    File::from(fd)
        .take(max)
        .read_to_end(&mut out)
        .map_err(|e| io_err(shown, e))?;
    Ok(out)
}

impl fmt::Display for Cap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (the cap for {})", size(self.bytes), self.what)
    }
}

#[cfg(test)]
mod tests;
