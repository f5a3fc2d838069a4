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
//! - `_capture.log` (rdmacap): the capture ran as root, so the identity probe answers
//!   uid 0; `netlink/_index.txt`: the kernel answered NETLINK_RDMA, so the netlink
//!   probe succeeds.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use crate::bundle::{Bundle, Header};
use crate::collect::CollectOptions;
use crate::errno;
use crate::source::{Answer, Entry, Errno, Kind, Meta, Op};

/// The library directory `_libs.txt` describes (Debian multiarch, as captured).
const CAPTURE_LIB_DIR: &str = "/usr/lib/x86_64-linux-gnu";

/// Why a capture directory could not be imported.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}: no root/ directory: not a capture directory")]
    NoRoot(String),
}

type Records = BTreeMap<(Op, String), Answer>;

/// Reads a capture directory into a bundle.
///
/// # Errors
/// The directory has no `root/`, or a file in it cannot be read.
pub fn import_capture(dir: &Path) -> Result<Bundle, ImportError> {
    let root = dir.join("root");
    if !root.is_dir() {
        return Err(ImportError::NoRoot(dir.display().to_string()));
    }
    let mut recs = Records::new();
    walk(&root, "", &mut recs)?;

    let side = |name: &str| fs::read(dir.join(name)).ok();
    if let Some(b) = side("_unreadable.txt") {
        for line in String::from_utf8_lossy(&b).lines() {
            if let Some((path, name)) = line.split_once('\t') {
                let n = errno::number(name.trim()).unwrap_or(Errno::EIO.0);
                add_to_parent_listing(&mut recs, path, Kind::File);
                recs.insert((Op::Read, path.to_string()), Answer::Err(Errno(n)));
            }
        }
    }
    if let Some(b) = side("_dev_infiniband.txt") {
        import_ls(&mut recs, "/dev/infiniband", &String::from_utf8_lossy(&b));
    }
    if let Some(b) = side("_libs.txt") {
        import_ls(&mut recs, CAPTURE_LIB_DIR, &String::from_utf8_lossy(&b));
    }
    if let Some(b) = side("_dmesg.txt") {
        recs.insert((Op::Probe, "kmsg".into()), Answer::Data(b));
    }
    if dir.join("_capture.log").is_file() {
        recs.insert(
            (Op::Probe, "identity".into()),
            Answer::Data(b"uid=0 euid=0 gid=0 egid=0 groups=0".to_vec()),
        );
    }
    if dir.join("netlink/_index.txt").is_file() {
        recs.insert((Op::Probe, "netlink_rdma".into()), Answer::Data(Vec::new()));
        import_netlink(&dir.join("netlink"), &mut recs)?;
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

/// `netlink/opN-name.req.bin` (the request sent) and `opN-name.bin` (every reply
/// datagram) become netlink probe answers keyed by the request.
fn import_netlink(dir: &Path, recs: &mut Records) -> Result<(), ImportError> {
    let rd = fs::read_dir(dir).map_err(|e| io_err(dir, e))?;
    for ent in rd {
        let ent = ent.map_err(|e| io_err(dir, e))?;
        let name = ent.file_name().to_string_lossy().into_owned();
        let Some(stem) = name.strip_suffix(".req.bin") else {
            continue;
        };
        let req = fs::read(ent.path()).map_err(|e| io_err(&ent.path(), e))?;
        let reply_path = dir.join(format!("{stem}.bin"));
        let reply = fs::read(&reply_path).map_err(|e| io_err(&reply_path, e))?;
        recs.insert(
            (Op::Probe, crate::source::netlink_key(&req)),
            Answer::Data(reply),
        );
    }
    Ok(())
}

/// True when a file's bytes are a flattened symlink target.
fn is_flattened_link(bytes: &[u8]) -> bool {
    !bytes.is_empty()
        && bytes.len() < 4096
        && !bytes.ends_with(b"\n")
        && (bytes.starts_with(b"../") || bytes.starts_with(b"./") || bytes.starts_with(b"/"))
        && !bytes.iter().any(|b| b.is_ascii_whitespace() || *b == 0)
}

fn io_err(path: &Path, source: std::io::Error) -> ImportError {
    ImportError::Io {
        path: path.display().to_string(),
        source,
    }
}

fn walk(disk: &Path, host: &str, recs: &mut Records) -> Result<(), ImportError> {
    let mut entries = Vec::new();
    let rd = fs::read_dir(disk).map_err(|e| io_err(disk, e))?;
    for ent in rd {
        let ent = ent.map_err(|e| io_err(disk, e))?;
        let name = ent.file_name().to_string_lossy().into_owned();
        let child_disk = ent.path();
        let child_host = format!("{host}/{name}");
        let ft = ent.file_type().map_err(|e| io_err(&child_disk, e))?;
        let kind = if ft.is_symlink() {
            let t = fs::read_link(&child_disk).map_err(|e| io_err(&child_disk, e))?;
            recs.insert(
                (Op::Link, child_host.clone()),
                Answer::Link(t.to_string_lossy().into_owned()),
            );
            Kind::Symlink
        } else if ft.is_dir() {
            walk(&child_disk, &child_host, recs)?;
            Kind::Dir
        } else {
            let bytes = fs::read(&child_disk).map_err(|e| io_err(&child_disk, e))?;
            if is_flattened_link(&bytes) {
                recs.insert(
                    (Op::Link, child_host.clone()),
                    Answer::Link(String::from_utf8_lossy(&bytes).into_owned()),
                );
                Kind::Symlink
            } else {
                recs.insert((Op::Read, child_host.clone()), Answer::Data(bytes));
                Kind::File
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
