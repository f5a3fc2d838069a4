//! The bounded reader on the attacks it exists for: a cap met exactly and missed
//! by one byte, a FIFO with no writer and one that trickles, /dev/zero, a gzip
//! bomb, a FIFO and a symlink inside a tree.

use std::ffi::CString;
use std::io::Write as _;
use std::os::fd::AsFd as _;
use std::path::Path;
use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::*;

const SHORT: Duration = Duration::from_millis(300);

fn file_of(dir: &Path, name: &str, len: usize) -> std::path::PathBuf {
    let p = dir.join(name);
    let body: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    std::fs::write(&p, body).unwrap();
    p
}

fn fifo(dir: &Path, name: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &p,
        FileType::Fifo,
        Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    p
}

/// gzip of `zeros` zero bytes.
fn gz_zeros(zeros: usize) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(&vec![0u8; zeros]).unwrap();
    e.finish().unwrap()
}

#[test]
fn a_file_of_exactly_the_cap_reads_and_one_byte_more_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let cap = Cap::new(1000, "tests");
    let at = file_of(d.path(), "at", 1000);
    assert_eq!(read_named(&at, cap).unwrap().len(), 1000);
    let over = file_of(d.path(), "over", 1001);
    let e = read_named(&over, cap).unwrap_err();
    assert!(matches!(e, ReadError::TooLarge { .. }), "{e}");
    assert_eq!(
        e.to_string(),
        format!("{} is over 1000 bytes (the cap for tests)", over.display())
    );
    assert_eq!(e.errno(), Errno::EFBIG);
    assert_eq!(e.reason(), "over 1000 bytes (the cap for tests)");
    // The same through the streaming reader (a file that grows after fstat).
    assert!(matches!(
        open_named(&at, Cap::new(999, "tests")),
        Err(ReadError::TooLarge { .. })
    ));
}

#[test]
fn a_pipe_is_held_to_the_cap_while_it_streams() {
    let d = tempfile::tempdir().unwrap();
    let p = fifo(d.path(), "p");
    let writer = {
        let p = p.clone();
        std::thread::spawn(move || {
            let mut w = std::fs::OpenOptions::new().write(true).open(p).unwrap();
            // Stops when the reader gives up (EPIPE), long before 1 GiB.
            let chunk = vec![7u8; 1 << 16];
            for _ in 0..(1 << 14) {
                if w.write_all(&chunk).is_err() {
                    break;
                }
            }
        })
    };
    let t = Instant::now();
    let e = read_named(&p, Cap::new(1 << 20, "tests")).unwrap_err();
    assert!(matches!(e, ReadError::TooLarge { .. }), "{e}");
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    writer.join().unwrap();
}

#[test]
fn a_fifo_with_no_writer_fails_at_the_deadline_naming_the_path() {
    let d = tempfile::tempdir().unwrap();
    let p = fifo(d.path(), "never");
    let t = Instant::now();
    let e = open_named_with(&p, Cap::TOKEN, SHORT)
        .unwrap()
        .read_all()
        .unwrap_err();
    let took = t.elapsed();
    assert!(matches!(e, ReadError::Timeout { read: 0, .. }), "{e}");
    assert!(took >= SHORT && took < SHORT * 10, "{took:?}");
    assert!(e.to_string().contains(&p.display().to_string()), "{e}");
    assert!(e.to_string().contains("did not end within 0.3 s"), "{e}");
    assert_eq!(e.errno(), Errno::ETIMEDOUT);
}

#[test]
fn a_fifo_that_trickles_fails_at_the_deadline_too() {
    let d = tempfile::tempdir().unwrap();
    let p = fifo(d.path(), "slow");
    let writer = {
        let p = p.clone();
        std::thread::spawn(move || {
            let mut w = std::fs::OpenOptions::new().write(true).open(p).unwrap();
            for _ in 0..20 {
                if w.write_all(b"x").is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    let e = open_named_with(&p, Cap::TOKEN, SHORT)
        .unwrap()
        .read_all()
        .unwrap_err();
    assert!(
        matches!(e, ReadError::Timeout { read, .. } if read > 0),
        "{e}"
    );
    writer.join().unwrap();
}

#[test]
fn a_fifo_found_in_a_directory_is_not_waited_on() {
    let d = tempfile::tempdir().unwrap();
    let p = fifo(d.path(), "node1.json");
    let t = Instant::now();
    let e = open_found(&p, Cap::DOCUMENT).unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(1));
    assert!(matches!(e, ReadError::NotRegular { .. }), "{e}");
    let f = file_of(d.path(), "node2.json", 10);
    assert_eq!(
        open_found(&f, Cap::DOCUMENT)
            .unwrap()
            .read_all()
            .unwrap()
            .len(),
        10
    );
}

#[test]
fn a_fifo_the_user_named_is_read_to_its_end() {
    let d = tempfile::tempdir().unwrap();
    let p = fifo(d.path(), "token");
    let writer = {
        let p = p.clone();
        std::thread::spawn(move || {
            // Starts writing after the reader opened: it must wait for the writer.
            std::thread::sleep(Duration::from_millis(100));
            let mut w = std::fs::OpenOptions::new().write(true).open(p).unwrap();
            w.write_all(b"0123456789abcdef0123456789abcdef\n").unwrap();
        })
    };
    let b = open_named(&p, Cap::TOKEN).unwrap();
    assert!(b.is_pipe());
    assert_eq!(b.read_all().unwrap(), b"0123456789abcdef0123456789abcdef\n");
    writer.join().unwrap();
}

#[test]
fn dev_zero_is_refused_before_it_is_opened() {
    let t = Instant::now();
    let e = read_named(Path::new("/dev/zero"), Cap::BUNDLE).unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(1));
    assert_eq!(
        e.to_string(),
        "/dev/zero: a character device, not a regular file or a pipe: refused"
    );
    assert_eq!(e.errno(), Errno::EINVAL);
    let e = read_named(Path::new("/tmp"), Cap::BUNDLE).unwrap_err();
    assert!(
        matches!(
            e,
            ReadError::Refused {
                kind: "a directory",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn a_missing_file_says_no_such_file_once() {
    let e = read_named(Path::new("/nonexistent"), Cap::BUNDLE).unwrap_err();
    assert_eq!(
        e.to_string(),
        "/nonexistent: No such file or directory (os error 2)"
    );
    // Not also a source: a chain printer ({:#}) would say it twice.
    assert!(std::error::Error::source(&e).is_none());
    assert_eq!(e.errno(), Errno::ENOENT);
    assert_eq!(e.reason(), "No such file or directory (os error 2)");
}

#[test]
fn a_gzip_bomb_stops_at_the_cap() {
    // 64 members of 1 MiB of zeros: 64 MiB from about 70 KB.
    let member = gz_zeros(1 << 20);
    let bomb: Vec<u8> = member
        .iter()
        .copied()
        .cycle()
        .take(member.len() * 64)
        .collect();
    assert!(bomb.len() < 100_000, "{}", bomb.len());
    let cap = Cap::new(4 << 20, "tests");
    let e = gunzip("bomb.gz", &bomb, cap).unwrap_err();
    assert_eq!(
        e.to_string(),
        "bomb.gz decompresses to over 4 MiB (the cap for tests)"
    );
    assert_eq!(e.reason(), "decompresses to over 4 MiB (the cap for tests)");
    // Through a named file, too, and a cap met exactly inflates.
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("bomb.json.gz");
    std::fs::write(&p, &bomb).unwrap();
    let e = read_named_gz(&p, cap).unwrap_err();
    assert!(matches!(e, ReadError::Inflated { .. }), "{e}");
    let four: Vec<u8> = member
        .iter()
        .copied()
        .cycle()
        .take(member.len() * 4)
        .collect();
    assert_eq!(gunzip("four.gz", &four, cap).unwrap().len(), 4 << 20);
    // Garbage after the magic is corrupt gzip, said so.
    let e = gunzip("bad.gz", &[0x1f, 0x8b, 0, 0, 1, 2, 3], cap).unwrap_err();
    assert!(matches!(e, ReadError::Gzip { .. }), "{e}");
}

#[test]
fn plain_bytes_pass_through_maybe_inflate() {
    let cap = Cap::new(5, "tests");
    assert_eq!(maybe_inflate("x", &b"hello"[..], cap).unwrap(), b"hello");
    assert_eq!(maybe_inflate("x", &b"h"[..], cap).unwrap(), b"h");
    assert_eq!(maybe_inflate("x", &b""[..], cap).unwrap(), b"");
    let e = maybe_inflate("x", &b"hello!"[..], cap).unwrap_err();
    assert!(matches!(e, ReadError::TooLarge { .. }), "{e}");
}

#[test]
fn inside_a_tree_a_fifo_and_a_symlink_are_refused_without_blocking() {
    let d = tempfile::tempdir().unwrap();
    fifo(d.path(), "fifo");
    file_of(d.path(), "file", 10);
    std::os::unix::fs::symlink("/etc/hostname", d.path().join("link")).unwrap();
    let dir = rustix::fs::open(
        d.path(),
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .unwrap();
    let cap = Cap::CAPTURE;
    let name = |s: &str| CString::new(s).unwrap();
    let t = Instant::now();
    let e = read_in_dir(dir.as_fd(), &name("fifo"), "cap/fifo", cap, true).unwrap_err();
    assert_eq!(
        e.to_string(),
        "cap/fifo: a FIFO (named pipe), not a regular file: not read"
    );
    assert_eq!(e.errno(), Errno::EINVAL);
    let e = read_in_dir(dir.as_fd(), &name("link"), "cap/link", cap, true).unwrap_err();
    assert!(
        matches!(
            e,
            ReadError::NotRegular {
                kind: "a symlink",
                ..
            }
        ),
        "{e}"
    );
    let e = read_tree_file(&d.path().join("fifo"), 100).unwrap_err();
    assert!(matches!(e, ReadError::NotRegular { .. }), "{e}");
    let e = read_tree_file(Path::new("/dev/zero"), 100).unwrap_err();
    assert!(matches!(e, ReadError::NotRegular { .. }), "{e}");
    assert!(t.elapsed() < Duration::from_secs(1));
    // A regular file: truncated at the cap, or refused past it.
    let small = Cap::new(4, "tests");
    let got = read_in_dir(dir.as_fd(), &name("file"), "cap/file", small, true).unwrap();
    assert_eq!(got, [0, 1, 2, 3]);
    let e = read_in_dir(dir.as_fd(), &name("file"), "cap/file", small, false).unwrap_err();
    assert!(matches!(e, ReadError::TooLarge { .. }), "{e}");
    assert_eq!(read_tree_file(&d.path().join("file"), 4).unwrap().len(), 4);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// A file of any length reads whole when it is within the cap and is refused
    /// as too large when it is not, plain or gzip, file or pipe.
    #[test]
    fn the_cap_holds_for_every_length(len in 0usize..3000, cap in 1u64..2000, gz: bool, pipe: bool) {
        let d = tempfile::tempdir().unwrap();
        let body: Vec<u8> = (0..len).map(|i| (i * 7 % 256) as u8).collect();
        let stored = if gz {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(&body).unwrap();
            e.finish().unwrap()
        } else {
            body.clone()
        };
        let cap = Cap::new(cap, "tests");
        let p = if pipe {
            let p = fifo(d.path(), "p");
            let (q, s) = (p.clone(), stored.clone());
            std::thread::spawn(move || {
                if let Ok(mut w) = std::fs::OpenOptions::new().write(true).open(q) {
                    let _ = w.write_all(&s);
                }
            });
            p
        } else {
            let p = d.path().join("f");
            std::fs::write(&p, &stored).unwrap();
            p
        };
        let r = read_named_gz(&p, cap);
        if stored.len() as u64 > cap.bytes {
            prop_assert!(matches!(r, Err(ReadError::TooLarge { .. })), "{r:?}");
        } else if body.len() as u64 > cap.bytes {
            prop_assert!(matches!(r, Err(ReadError::Inflated { .. })), "{r:?}");
        } else {
            prop_assert_eq!(r.unwrap(), body);
        }
    }
}
