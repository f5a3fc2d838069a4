//! Imports a capture directory (the layout of `rdmacap.py` in fixtures/, or any
//! plain copy of a host tree under `root/`) into a [`Bundle`].
//!
//! What a capture directory holds and how it maps to bundle answers:
//! - `root/**`: files become reads, directories become listings. A file whose
//!   content has no trailing newline and looks like a relative or absolute path is a
//!   symlink that was flattened into a file holding its target text (sysfs values
//!   always end in a newline; copies that cannot keep symlinks store them this way).
//! - `_unreadable.txt`: `path<TAB>ERRNO` — files that exist but failed to read.
//! - `_dev_infiniband.txt`: `ls -l /dev/infiniband` — node kinds, modes, owners and
//!   device numbers.
//! - `_libs.txt`: `ls -l` of libibverbs.so.1* and libibverbs/*.so in the library
//!   directory (links and files).
//! - `_dmesg.txt`: the kernel log (answers the kmsg probe).
//! - `ethtool/IF/STEM.txt` / `STEM.errno`: what `ethtool -S`, `-a`,
//!   `--show-fec`, `-m … hex on` and `dcb` printed for netdev IF, or the errno
//!   they failed with ([`crate::ethernet`]).
//! - `_capture.log` (rdmacap): the capture ran as root, so the identity probe answers
//!   uid 0; `netlink/_index.txt`: the kernel answered NETLINK_RDMA, so the netlink
//!   probe succeeds.

use std::collections::BTreeMap;
use std::ffi::CStr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

use crate::bounded::{self, Cap, ReadError};
use crate::bundle::{Bundle, Header};
use crate::collect::CollectOptions;
use crate::errno;
use crate::source::{Answer, Entry, Errno, Kind, Meta, Op, MAX_READ};

/// The library directory `_libs.txt` describes (Debian multiarch, as captured).
const CAPTURE_LIB_DIR: &str = "/usr/lib/x86_64-linux-gnu";

/// The most files, directories and links a capture directory may hold
/// (fixtures/healthy: 1,328 files), as a bundle holds at most
/// [`bounded::MAX_RECORDS`] records.
pub const MAX_ENTRIES: usize = bounded::MAX_RECORDS;

/// How deep `root/` may nest (a PCI device's sysfs path is about 15 deep).
pub const MAX_DEPTH: usize = 64;

/// One file of `root/` is read up to [`MAX_READ`] bytes, as a live source reads it.
const TREE_FILE: Cap = Cap::new(MAX_READ as u64, "files of a capture");

/// Why a capture directory could not be imported.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// A file or directory of the capture's own layout that does not read.
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error("{0}: no root/ directory: not a capture directory")]
    NoRoot(String),
    /// More than [`Cap::CAPTURE`] in all.
    #[error("capture directory {dir} holds over {cap}")]
    TooLarge { dir: String, cap: Cap },
    /// More than [`MAX_ENTRIES`] files, directories and links.
    #[error("capture directory {dir} holds over {MAX_ENTRIES} files, directories and links (the cap for capture directories)")]
    TooMany { dir: String },
    /// Directories nested deeper than [`MAX_DEPTH`].
    #[error("{path}: directories nested over {MAX_DEPTH} deep (the cap for capture directories)")]
    TooDeep { path: String },
}

type Records = BTreeMap<(Op, String), Answer>;

/// Reads a capture directory into a bundle.
///
/// The directory is a file tree someone else made, so it is read as
/// [`crate::bounded`] reads trees: relative to directory descriptors, without
/// following a symlink (a symlink is recorded as one, never read through), and
/// without blocking: a FIFO, socket or device under `root/` is a read error of
/// that path (EINVAL), as a file that failed to read is; all of it is held to
/// [`Cap::CAPTURE`], [`MAX_ENTRIES`] and [`MAX_DEPTH`].
///
/// # Errors
/// The directory has no `root/`, a file of its own layout (`_unreadable.txt`,
/// `netlink/`, ...) cannot be read, or it is over a cap.
pub fn import_capture(dir: &Path) -> Result<Bundle, ImportError> {
    let shown = dir.display().to_string();
    // The directory itself was named by the user: a symlink to it is followed.
    let top = rustix::fs::open(
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| io(&shown, e))?;
    let root = match open_subdir(top.as_fd(), c"root") {
        Ok(fd) => fd,
        Err(_) => return Err(ImportError::NoRoot(shown)),
    };
    let mut budget = Budget {
        dir: shown.clone(),
        bytes: 0,
        entries: 0,
    };
    let mut recs = Records::new();
    walk(
        root.as_fd(),
        &format!("{shown}/root"),
        "",
        0,
        &mut recs,
        &mut budget,
    )?;

    let mut side = |name: &CStr| -> Result<Option<Vec<u8>>, ReadError> {
        let path = format!("{shown}/{}", name.to_string_lossy());
        match bounded::read_in_dir(top.as_fd(), name, &path, Cap::CAPTURE, false) {
            Ok(b) => {
                budget.add(b.len())?;
                Ok(Some(b))
            }
            Err(e) if e.errno() == Errno::ENOENT => Ok(None),
            Err(e) => Err(e),
        }
    };
    if let Some(b) = side(c"_unreadable.txt")? {
        for line in String::from_utf8_lossy(&b).lines() {
            if let Some((path, name)) = line.split_once('\t') {
                let n = errno::number(name.trim()).unwrap_or(Errno::EIO.0);
                add_to_parent_listing(&mut recs, path, Kind::File);
                recs.insert((Op::Read, path.to_string()), Answer::Err(Errno(n)));
            }
        }
    }
    if let Some(b) = side(c"_dev_infiniband.txt")? {
        import_ls(&mut recs, "/dev/infiniband", &String::from_utf8_lossy(&b));
    }
    if let Some(b) = side(c"_libs.txt")? {
        import_ls(&mut recs, CAPTURE_LIB_DIR, &String::from_utf8_lossy(&b));
    }
    // The kernel log answers the kmsg probe; one that does not read is that
    // probe's error, as an unreadable /dev/kmsg would be.
    match side(c"_dmesg.txt") {
        Ok(Some(b)) => {
            recs.insert((Op::Probe, "kmsg".into()), Answer::Data(b));
        }
        Ok(None) => {}
        Err(ReadError::TooLarge { .. }) => return Err(budget.over()),
        Err(e) => {
            recs.insert((Op::Probe, "kmsg".into()), Answer::Err(e.errno()));
        }
    }
    if is_file(top.as_fd(), c"_capture.log") {
        recs.insert(
            (Op::Probe, "identity".into()),
            Answer::Data(b"uid=0 euid=0 gid=0 egid=0 groups=0".to_vec()),
        );
    }
    if let Ok(nl) = open_subdir(top.as_fd(), c"netlink") {
        if is_file(nl.as_fd(), c"_index.txt") {
            recs.insert((Op::Probe, "netlink_rdma".into()), Answer::Data(Vec::new()));
            import_netlink(
                nl.as_fd(),
                &format!("{shown}/netlink"),
                &mut recs,
                &mut budget,
            )?;
        }
    }
    if let Ok(eth) = open_subdir(top.as_fd(), c"ethtool") {
        import_ethernet(
            eth.as_fd(),
            &format!("{shown}/ethtool"),
            &mut recs,
            &mut budget,
        )?;
    }
    let mut header = Bundle::header_now("rdmacap import", CollectOptions::default());
    header.created_unix = 0;
    Ok(Bundle::new(
        Header {
            tool: format!("capture import of {}", dir.display()),
            ..header
        },
        recs,
    ))
}

/// What a capture has cost so far, against its caps.
struct Budget {
    dir: String,
    bytes: u64,
    entries: usize,
}

impl Budget {
    fn add(&mut self, bytes: usize) -> Result<(), ReadError> {
        self.bytes += bytes as u64;
        if self.bytes > Cap::CAPTURE.bytes {
            return Err(ReadError::TooLarge {
                path: format!("capture directory {}", self.dir),
                cap: Cap::CAPTURE,
            });
        }
        Ok(())
    }

    fn over(&self) -> ImportError {
        ImportError::TooLarge {
            dir: self.dir.clone(),
            cap: Cap::CAPTURE,
        }
    }

    fn entry(&mut self) -> Result<(), ImportError> {
        self.entries += 1;
        if self.entries > MAX_ENTRIES {
            return Err(ImportError::TooMany {
                dir: self.dir.clone(),
            });
        }
        Ok(())
    }

    /// Counts a file's bytes: over the capture's cap is the import's error.
    fn file(&mut self, bytes: usize) -> Result<(), ImportError> {
        self.add(bytes).map_err(|_| self.over())
    }
}

fn io(path: &str, e: rustix::io::Errno) -> ImportError {
    ImportError::Read(ReadError::Io {
        path: path.to_string(),
        err: e.into(),
    })
}

/// Opens the directory `name` in `dir`, not through a symlink.
fn open_subdir(dir: BorrowedFd<'_>, name: &CStr) -> rustix::io::Result<OwnedFd> {
    rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// True when `name` in `dir` is a regular file (not through a symlink).
fn is_file(dir: BorrowedFd<'_>, name: &CStr) -> bool {
    rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::RegularFile)
}

/// `netlink/opN-name.req.bin` (the request sent) and `opN-name.bin` (every reply
/// datagram) become netlink probe answers keyed by the request.
fn import_netlink(
    dir: BorrowedFd<'_>,
    shown: &str,
    recs: &mut Records,
    budget: &mut Budget,
) -> Result<(), ImportError> {
    let names = list(dir, shown)?;
    for (name, _) in names {
        let Some(stem) = name.to_str().ok().and_then(|n| n.strip_suffix(".req.bin")) else {
            continue;
        };
        budget.entry()?;
        let reply_name = std::ffi::CString::new(format!("{stem}.bin"))
            .map_err(|_| ImportError::NoRoot(shown.to_string()))?;
        let mut read = |n: &CStr| -> Result<Vec<u8>, ImportError> {
            let path = format!("{shown}/{}", n.to_string_lossy());
            let b = bounded::read_in_dir(dir, n, &path, Cap::CAPTURE, false)?;
            budget.file(b.len())?;
            Ok(b)
        };
        let req = read(&name)?;
        let reply = read(&reply_name)?;
        recs.insert(
            (Op::Probe, crate::source::netlink_key(&req)),
            Answer::Data(reply),
        );
    }
    Ok(())
}

/// `ethtool/IF/STEM.txt` (a command's output) and `ethtool/IF/STEM.errno` (the
/// name of the errno it failed with) become answers of the Ethernet probes
/// ([`crate::ethernet`]); other names are not imported.
fn import_ethernet(
    dir: BorrowedFd<'_>,
    shown: &str,
    recs: &mut Records,
    budget: &mut Budget,
) -> Result<(), ImportError> {
    for (ifname, t) in list(dir, shown)? {
        let Some(ifname) = ifname
            .to_str()
            .ok()
            .filter(|n| crate::ethernet::valid_ifname(n))
        else {
            continue;
        };
        if t != FileType::Directory {
            continue;
        }
        let c = std::ffi::CString::new(ifname).map_err(|_| ImportError::NoRoot(shown.into()))?;
        let sub = open_subdir(dir, &c).map_err(|e| io(&format!("{shown}/{ifname}"), e))?;
        let sub_shown = format!("{shown}/{ifname}");
        for (name, t) in list(sub.as_fd(), &sub_shown)? {
            let Some((stem, ext)) = name.to_str().ok().and_then(|n| n.rsplit_once('.')) else {
                continue;
            };
            let Some(q) = crate::ethernet::EthQuery::from_file_stem(stem, ifname) else {
                continue;
            };
            if t != FileType::RegularFile || !matches!(ext, "txt" | "errno") {
                continue;
            }
            budget.entry()?;
            let path = format!("{sub_shown}/{}", name.to_string_lossy());
            let b = bounded::read_in_dir(sub.as_fd(), &name, &path, Cap::CAPTURE, false)?;
            budget.file(b.len())?;
            let answer = if ext == "txt" {
                Answer::Data(b)
            } else {
                let n = errno::number(String::from_utf8_lossy(&b).trim());
                Answer::Err(Errno(n.unwrap_or(Errno::EIO.0)))
            };
            recs.insert((Op::Probe, q.key()), answer);
        }
    }
    Ok(())
}

/// The entries of the directory open as `dir` (without `.` and `..`), with
/// their types (lstat's, when the file system does not say).
fn list(
    dir: BorrowedFd<'_>,
    shown: &str,
) -> Result<Vec<(std::ffi::CString, FileType)>, ImportError> {
    let rd = rustix::fs::Dir::read_from(dir).map_err(|e| io(shown, e))?;
    let mut out = Vec::new();
    for ent in rd {
        let ent = ent.map_err(|e| io(shown, e))?;
        let name = ent.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        let t = match ent.file_type() {
            FileType::Unknown => rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
                .map_or(FileType::Unknown, |st| FileType::from_raw_mode(st.st_mode)),
            t => t,
        };
        out.push((name.to_owned(), t));
    }
    Ok(out)
}

/// A symlink of a host tree stored as a regular file holding its target, as a
/// copy that cannot keep symlinks leaves it (fixtures/*/root/ in a checkout):
/// the first such entry of the device classes below `root`, with its target.
/// Such a tree reads correctly only as a capture directory (`--from`), where
/// these files are taken for the links they were.
pub fn flattened_link_in_tree(root: &Path) -> Option<(std::path::PathBuf, String)> {
    for class in [
        "sys/class/infiniband",
        "sys/class/infiniband_verbs",
        "sys/class/net",
    ] {
        let Ok(entries) = std::fs::read_dir(root.join(class)) else {
            continue;
        };
        for e in entries.flatten().take(1024) {
            let p = e.path();
            let regular = std::fs::symlink_metadata(&p)
                .is_ok_and(|m| m.file_type().is_file() && m.len() < 4096);
            if !regular {
                continue;
            }
            if let Ok(bytes) = bounded::read_tree_file(&p, 4096) {
                if is_flattened_link(&bytes) {
                    return Some((p, String::from_utf8_lossy(&bytes).into_owned()));
                }
            }
        }
    }
    None
}

/// True when a file's bytes are a flattened symlink target.
fn is_flattened_link(bytes: &[u8]) -> bool {
    !bytes.is_empty()
        && bytes.len() < 4096
        && !bytes.ends_with(b"\n")
        && (bytes.starts_with(b"../") || bytes.starts_with(b"./") || bytes.starts_with(b"/"))
        && !bytes.iter().any(|b| b.is_ascii_whitespace() || *b == 0)
}

/// Records the tree below the directory open as `dir` (`disk` its path, for
/// errors; `host` the host path it stands for).
fn walk(
    dir: BorrowedFd<'_>,
    disk: &str,
    host: &str,
    depth: usize,
    recs: &mut Records,
    budget: &mut Budget,
) -> Result<(), ImportError> {
    if depth > MAX_DEPTH {
        return Err(ImportError::TooDeep {
            path: disk.to_string(),
        });
    }
    let mut entries = Vec::new();
    for (cname, ft) in list(dir, disk)? {
        budget.entry()?;
        let name = cname.to_string_lossy().into_owned();
        let child_disk = format!("{disk}/{name}");
        let child_host = format!("{host}/{name}");
        let kind = match ft {
            FileType::Symlink => {
                let t = rustix::fs::readlinkat(dir, cname.as_c_str(), Vec::new())
                    .map_err(|e| io(&child_disk, e))?;
                recs.insert(
                    (Op::Link, child_host.clone()),
                    Answer::Link(t.to_string_lossy().into_owned()),
                );
                Kind::Symlink
            }
            FileType::Directory => {
                let sub = open_subdir(dir, &cname).map_err(|e| io(&child_disk, e))?;
                walk(
                    sub.as_fd(),
                    &child_disk,
                    &child_host,
                    depth + 1,
                    recs,
                    budget,
                )?;
                Kind::Dir
            }
            FileType::RegularFile => {
                match bounded::read_in_dir(dir, &cname, &child_disk, TREE_FILE, true) {
                    Ok(bytes) if is_flattened_link(&bytes) => {
                        recs.insert(
                            (Op::Link, child_host.clone()),
                            Answer::Link(String::from_utf8_lossy(&bytes).into_owned()),
                        );
                        Kind::Symlink
                    }
                    Ok(bytes) => {
                        budget.file(bytes.len())?;
                        recs.insert((Op::Read, child_host.clone()), Answer::Data(bytes));
                        Kind::File
                    }
                    // Replaced between the listing and the open: as unreadable.
                    Err(e) => {
                        recs.insert((Op::Read, child_host.clone()), Answer::Err(e.errno()));
                        Kind::File
                    }
                }
            }
            // A FIFO, socket or device is never opened: reading it could block
            // for ever or act on a device. Recorded as unsuitable for reading.
            other => {
                recs.insert((Op::Read, child_host.clone()), Answer::Err(Errno::EINVAL));
                match other {
                    FileType::CharacterDevice => Kind::Char,
                    FileType::BlockDevice => Kind::Block,
                    _ => Kind::Other,
                }
            }
        };
        entries.push(Entry { name, kind });
    }
    entries.sort();
    let key = if host.is_empty() {
        "/".to_string()
    } else {
        host.to_string()
    };
    recs.insert((Op::Dir, key), Answer::Entries(entries));
    Ok(())
}

/// Adds `path` to its parent's listing, creating the listings of its ancestors (as
/// directories) where the tree did not have them.
fn add_to_parent_listing(recs: &mut Records, path: &str, kind: Kind) {
    let Some((parent, name)) = path.rsplit_once('/') else {
        return;
    };
    if name.is_empty() {
        return;
    }
    if !parent.is_empty() && !recs.contains_key(&(Op::Dir, parent.to_string())) {
        add_to_parent_listing(recs, parent, Kind::Dir);
    }
    let parent = if parent.is_empty() { "/" } else { parent };
    let entry = recs
        .entry((Op::Dir, parent.to_string()))
        .or_insert_with(|| Answer::Entries(Vec::new()));
    if let Answer::Entries(v) = entry {
        if !v.iter().any(|e| e.name == name) {
            v.push(Entry {
                name: name.to_string(),
                kind,
            });
            v.sort();
        }
    }
}

/// Parses `ls -l` lines (as in `_dev_infiniband.txt` and `_libs.txt`) into listings,
/// stats and links below `base`. Lines that are not `ls -l` entries are skipped.
fn import_ls(recs: &mut Records, base: &str, text: &str) {
    for line in text.lines() {
        if line.starts_with('#') {
            break; // _libs.txt's "# resolved:" section repeats the same files
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        let Some(perms) = f.first() else { continue };
        if perms.len() != 10 {
            continue;
        }
        let kind = match perms.as_bytes()[0] {
            b'c' => Kind::Char,
            b'b' => Kind::Block,
            b'd' => Kind::Dir,
            b'l' => Kind::Symlink,
            b'-' => Kind::File,
            _ => continue,
        };
        let mode = perms[1..].bytes().enumerate().fold(0u32, |m, (i, c)| {
            if c == b'-' {
                m
            } else {
                m | (1 << (8 - i))
            }
        });
        let uid = |name: &str| {
            if name == "root" {
                0
            } else {
                name.parse().unwrap_or(u32::MAX)
            }
        };
        // crw-rw-rw- 1 root root 231, 192 Dec  2 13:39 uverbs0
        // lrwxrwxrwx 1 root root 23 Jan 10  2023 libibverbs.so.1 -> libibverbs.so.1.14.44.0
        let (rdev, size, rest) = if matches!(kind, Kind::Char | Kind::Block) {
            let maj = f.get(4).and_then(|s| s.trim_end_matches(',').parse().ok());
            let min = f.get(5).and_then(|s| s.parse().ok());
            (maj.zip(min), 0, f.get(9..))
        } else {
            (
                None,
                f.get(4).and_then(|s| s.parse().ok()).unwrap_or(0),
                f.get(8..),
            )
        };
        let Some(rest) = rest else { continue };
        let Some(name) = rest.first() else { continue };
        let path = format!("{base}/{name}");
        if kind == Kind::Symlink {
            if let (Some(&"->"), Some(target)) = (rest.get(1), rest.get(2)) {
                recs.insert((Op::Link, path.clone()), Answer::Link(target.to_string()));
            }
        }
        let meta = Meta {
            kind,
            mode,
            uid: f.get(2).map_or(u32::MAX, |s| uid(s)),
            gid: f.get(3).map_or(u32::MAX, |s| uid(s)),
            rdev,
            size,
        };
        recs.insert((Op::Stat, path.clone()), Answer::Meta(meta));
        add_to_parent_listing(recs, &path, kind);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flattened_links_are_told_from_values() {
        assert!(is_flattened_link(b"../../devices/virtual/infiniband/rxe0"));
        assert!(!is_flattened_link(b"4: ACTIVE\n"));
        assert!(!is_flattened_link(b"\n"));
        assert!(!is_flattened_link(b"rxe"));
    }

    #[test]
    fn ls_lines_from_the_healthy_capture() {
        let mut recs = Records::new();
        import_ls(
            &mut recs,
            "/dev/infiniband",
            "total 0\ncrw------- 1 root root 231,  64 Dec  2 13:39 issm0\ncrw-rw-rw- 1 root root 231, 192 Dec  2 13:39 uverbs0\n",
        );
        let m = &recs[&(Op::Stat, "/dev/infiniband/uverbs0".to_string())];
        assert_eq!(
            *m,
            Answer::Meta(Meta {
                kind: Kind::Char,
                mode: 0o666,
                uid: 0,
                gid: 0,
                rdev: Some((231, 192)),
                size: 0
            })
        );
        let Answer::Entries(e) = &recs[&(Op::Dir, "/dev/infiniband".to_string())] else {
            panic!()
        };
        assert_eq!(e.len(), 2);
    }

    #[test]
    fn lib_links() {
        let mut recs = Records::new();
        import_ls(
            &mut recs,
            CAPTURE_LIB_DIR,
            "lrwxrwxrwx 1 root root     23 Jan 10  2023 libibverbs.so.1 -> libibverbs.so.1.14.44.0\n-rw-r--r-- 1 root root  34896 Jan 10  2023 libibverbs/librxe-rdmav34.so\n# resolved:\nlibibverbs.so.1 -> /x\n",
        );
        assert_eq!(
            recs[&(Op::Link, format!("{CAPTURE_LIB_DIR}/libibverbs.so.1"))],
            Answer::Link("libibverbs.so.1.14.44.0".into())
        );
        assert!(recs.contains_key(&(Op::Dir, format!("{CAPTURE_LIB_DIR}/libibverbs"))));
    }
}
