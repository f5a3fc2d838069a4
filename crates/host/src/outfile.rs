//! Writing a file a user named, as root, without being turned against the host.
//!
//! `rdmakit collect -o /tmp/node17.json.gz` runs as root. Written with a plain
//! `open(O_CREAT|O_TRUNC)`, a symlink another user left at that path would make
//! root truncate whatever it points to (`/etc/shadow`), a hard link likewise, a
//! file that user owns would receive the bundle (theirs to read), and a FIFO
//! would hang the command. So the file is opened without following a symlink and
//! without blocking, and written only when the opened file is a regular file,
//! ours, with no other name; it is left readable by its owner alone (a bundle
//! describes the host in detail).

use std::fs::{File, OpenOptions};
use std::io::{self, Write as _};
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::Path;

/// Writes `bytes` to `path` (created mode 0600, or an existing file of ours
/// truncated and set to 0600).
///
/// # Errors
/// The path is a symlink (ELOOP), a FIFO or other non-regular file, a file of
/// another user or with more than one link (each said in the error), or it
/// cannot be created or written.
pub fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut f = open_private(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}

/// Opens `path` for writing as [`write_private`] describes, truncated.
///
/// # Errors
/// As [`write_private`].
pub fn open_private(path: &Path) -> io::Result<File> {
    let flags = rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK;
    let f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(flags.bits() as i32)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => refuse("it is a symbolic link"),
            Some(libc::ENXIO) => refuse("it is a FIFO or socket"),
            _ => e,
        })?;
    let md = f.metadata()?;
    if !md.file_type().is_file() {
        return Err(refuse("it is not a regular file"));
    }
    let euid = rustix::process::geteuid().as_raw();
    if md.uid() != euid {
        return Err(refuse(&format!(
            "it belongs to uid {}, not to us (uid {euid})",
            md.uid()
        )));
    }
    if md.nlink() != 1 {
        return Err(refuse(&format!("it has {} hard links", md.nlink())));
    }
    f.set_len(0)?;
    f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    Ok(f)
}

fn refuse(why: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!("refusing to write there: {why}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_file_is_0600_and_an_old_one_of_ours_is_replaced() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("b.json");
        std::fs::write(&p, "older and longer content").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_private(&p, b"new").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        assert_eq!(std::fs::metadata(&p).unwrap().mode() & 0o777, 0o600);
        let q = d.path().join("fresh.json");
        write_private(&q, b"x").unwrap();
        assert_eq!(std::fs::metadata(&q).unwrap().mode() & 0o777, 0o600);
    }

    #[test]
    fn symlinks_hard_links_and_fifos_are_refused_untouched() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("precious");
        std::fs::write(&target, "keep me").unwrap();
        let link = d.path().join("link.json");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let e = write_private(&link, b"x").unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        let hard = d.path().join("hard.json");
        std::fs::hard_link(&target, &hard).unwrap();
        let e = write_private(&hard, b"x").unwrap_err();
        assert!(e.to_string().contains("2 hard links"), "{e}");
        assert_eq!(std::fs::read(&target).unwrap(), b"keep me");
        let fifo = d.path().join("fifo.json");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let t = std::time::Instant::now();
        let e = write_private(&fifo, b"x").unwrap_err();
        assert!(t.elapsed() < std::time::Duration::from_secs(2));
        assert!(e.to_string().contains("FIFO"), "{e}");
    }
}
