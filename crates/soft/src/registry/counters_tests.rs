use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use super::*;
use crate::registry::tests::OtherUser;
use crate::registry::Registry;
use crate::userdir;

fn vals(first: u64) -> Values {
    Values(std::array::from_fn(|i| first + i as u64))
}

/// A context whose owner is gone: a reaped child's pid, a start time no
/// process of it had.
fn dead() -> Ctx {
    let mut c = Command::new("true").spawn().unwrap();
    let pid = c.id();
    c.wait().unwrap();
    Ctx {
        pid,
        start_time: 1,
        instance: 3,
    }
}

fn plant(dir: &Path, name: &str, text: &[u8]) {
    std::fs::write(dir.join(name), text).unwrap();
}

fn why<'a>(d: &'a DeviceCounters, name: &str) -> &'a str {
    &d.ignored
        .iter()
        .find(|i| i.path.file_name().is_some_and(|n| n == name))
        .unwrap_or_else(|| panic!("{name} not reported: {:?}", d.ignored))
        .why
}

#[test]
fn text_round_trips_and_bad_text_is_refused() {
    let c = dead();
    let v = vals(5);
    let p = parse(v.emit(&[c]).as_bytes()).unwrap();
    assert_eq!((p.values, p.folded), (v, vec![c]));
    // Unknown names are skipped (a newer rdmakit), missing ones are 0.
    let p = parse(b"np_cnp_sent=7\nfuture_counter=9\n").unwrap();
    assert_eq!(p.values.get("np_cnp_sent"), Some(7));
    assert_eq!(p.values.0.iter().sum::<u64>(), 7);
    for bad in [
        &b"np_cnp_sent=1\nnp_cnp_sent=2\n"[..],
        b"np_cnp_sent=-1\n",
        b"np_cnp_sent=+1\n",
        b"np_cnp_sent=18446744073709551616\n",
        b"np_cnp_sent\n",
        b"folded=1-2\n",
        b"\xff=1\n",
    ] {
        assert!(parse(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
    }
    let many: String = (0..=MAX_FOLDED)
        .map(|i| format!("folded={i}-1-1\n"))
        .collect();
    assert!(parse(many.as_bytes()).is_err());
    assert!(parse(&vec![b'\n'; MAX_COUNTERS_BYTES + 1]).is_err());
}

#[test]
fn sums_saturate() {
    let max = Values([u64::MAX; NAMES.len()]);
    assert_eq!(max.saturating_add(&vals(1)), max);
}

#[test]
fn names_are_the_transport_counters_and_the_ports_packets() {
    assert_eq!(&NAMES[..2], &PORT_COUNTERS[..]);
    assert_eq!(&NAMES[2..], &crate::TRANSPORT_COUNTERS[..]);
}

#[test]
fn contexts_publish_and_a_reader_sums_them_per_user() {
    let b = tempfile::tempdir().unwrap();
    let r1 = Registry::open_in(b.path(), "c0").unwrap();
    let r2 = Registry::open_in(b.path(), "c0").unwrap();
    // Not attached: nothing is published.
    r1.publish(&vals(1)).unwrap();
    assert_eq!(read_in(b.path(), "c0").unwrap().total, Values::default());
    r1.attach(false).unwrap();
    r2.attach(false).unwrap();
    r1.publish(&vals(1)).unwrap();
    r2.publish(&vals(10)).unwrap();
    r1.publish(&vals(2)).unwrap();
    let d = read_in(b.path(), "c0").unwrap();
    assert_eq!(d.total, vals(2).saturating_add(&vals(10)));
    assert_eq!(d.users.len(), 1);
    assert_eq!(d.users[0].uid, userdir::euid());
    assert_eq!(d.users[0].contexts.len(), 2);
    assert!(d.ignored.is_empty(), "{:?}", d.ignored);
    let mode = std::fs::metadata(r1.dir().join(r1.my_ctx().counters_name()))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o644);
    // Another context's sweep does not fold a held one.
    let r3 = Registry::open_in(b.path(), "c0").unwrap();
    r3.attach(false).unwrap();
    assert!(r1.dir().join(r1.my_ctx().counters_name()).exists());
    // Closing folds into the user's cumulative file: the total stays.
    r1.remove_instance();
    r1.fold_now();
    assert!(!r1.dir().join(r1.my_ctx().counters_name()).exists());
    let d = read_in(b.path(), "c0").unwrap();
    assert_eq!(d.total, vals(2).saturating_add(&vals(10)));
    assert_eq!(d.users[0].folded, vals(2));
    r2.remove_instance();
    r3.remove_instance();
}

/// A process killed without closing leaves its last snapshot: counted by
/// readers until the user's next sweep folds it, once.
#[test]
fn a_dead_processs_context_is_folded_once_not_twice() {
    let b = tempfile::tempdir().unwrap();
    let r = Registry::open_in(b.path(), "d0").unwrap();
    let c = dead();
    plant(r.dir(), &c.counters_name(), vals(100).emit(&[]).as_bytes());
    assert_eq!(read_in(b.path(), "d0").unwrap().total, vals(100));
    r.attach(false).unwrap();
    assert!(!r.dir().join(c.counters_name()).exists());
    let d = read_in(b.path(), "d0").unwrap();
    assert_eq!((d.total, d.users[0].folded), (vals(100), vals(100)));
    // More sweeps, and the same context's file coming back after a fold
    // that died before removing it: still counted once.
    assert!(r.add(super::super::Kind::Qp, 1, 8).unwrap());
    plant(r.dir(), &c.counters_name(), vals(100).emit(&[]).as_bytes());
    assert_eq!(read_in(b.path(), "d0").unwrap().total, vals(100));
    assert!(r.add(super::super::Kind::Qp, 2, 8).unwrap());
    assert!(!r.dir().join(c.counters_name()).exists());
    let d = read_in(b.path(), "d0").unwrap();
    assert_eq!(d.total, vals(100));
    // Once its file is gone, the cumulative file forgets the context.
    assert!(r.add(super::super::Kind::Qp, 3, 8).unwrap());
    let cum = std::fs::read_to_string(r.dir().join(CUMULATIVE)).unwrap();
    assert!(!cum.contains("folded="), "{cum}");
    assert_eq!(read_in(b.path(), "d0").unwrap().total, vals(100));
    r.remove_instance();
}

#[test]
fn forged_oversized_and_odd_files_are_ignored_and_reported() {
    let b = tempfile::tempdir().unwrap();
    let r = Registry::open_in(b.path(), "x0").unwrap();
    let dir = r.dir().to_path_buf();
    let c = dead();
    let big = Ctx { instance: 4, ..c };
    plant(
        &dir,
        &big.counters_name(),
        &vec![b'\n'; MAX_COUNTERS_BYTES + 1],
    );
    let garbage = Ctx { instance: 5, ..c };
    plant(&dir, &garbage.counters_name(), b"np_cnp_sent=lots\n");
    let fifo = Ctx { instance: 6, ..c };
    rustix::fs::mknodat(
        rustix::fs::CWD,
        dir.join(fifo.counters_name()),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    let link = Ctx { instance: 7, ..c };
    let secret = b.path().join("secret");
    std::fs::write(&secret, vals(9).emit(&[])).unwrap();
    std::os::unix::fs::symlink(&secret, dir.join(link.counters_name())).unwrap();
    // A file naming a live process of another user (root's, or nobody's
    // when this is root).
    let other = OtherUser::start();
    let theirs = other.ctx();
    plant(
        &dir,
        &theirs.counters_name(),
        vals(1000).emit(&[]).as_bytes(),
    );
    let t = Instant::now();
    let d = read_in(b.path(), "x0").unwrap();
    assert!(t.elapsed() < Duration::from_secs(2));
    assert_eq!(d.total, Values::default());
    assert!(why(&d, &big.counters_name()).contains("more than the 4096"));
    assert!(why(&d, &garbage.counters_name()).contains("not a counters file"));
    assert!(why(&d, &fifo.counters_name()).contains("not a regular file"));
    assert!(why(&d, &link.counters_name()).contains("symbolic link"));
    assert!(why(&d, &theirs.counters_name()).contains("forged"));
    // The owner's fold takes none of them (the forged one is of a live
    // process) and never follows the link.
    r.attach(false).unwrap();
    assert_eq!(read_in(b.path(), "x0").unwrap().total, Values::default());
    assert_eq!(
        std::fs::read(&secret).unwrap(),
        vals(9).emit(&[]).into_bytes()
    );
    r.remove_instance();
}

/// Another user's directory counts as that user's own numbers; a file in it
/// that its user does not own is ignored.
#[test]
fn another_users_counters_count_as_theirs_and_foreign_files_do_not() {
    if userdir::euid() != 0 {
        eprintln!("skipped: needs root to make another user's directory");
        return;
    }
    let b = tempfile::tempdir().unwrap();
    std::fs::set_permissions(b.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    let mine = Registry::open_in(b.path(), "o0").unwrap();
    mine.attach(false).unwrap();
    mine.publish(&vals(1)).unwrap();
    let theirs = b.path().join("rdmakit-soft.65534");
    let dev = theirs.join("o0");
    std::fs::create_dir_all(&dev).unwrap();
    for d in [&theirs, &dev] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::chown(d, Some(65534), Some(65534)).unwrap();
    }
    plant(&dev, CUMULATIVE, vals(50).emit(&[]).as_bytes());
    std::os::unix::fs::chown(dev.join(CUMULATIVE), Some(65534), Some(65534)).unwrap();
    // Root's file in nobody's directory: not nobody's word.
    let c = dead();
    plant(&dev, &c.counters_name(), vals(7000).emit(&[]).as_bytes());
    let d = read_in(b.path(), "o0").unwrap();
    assert_eq!(d.total, vals(1).saturating_add(&vals(50)));
    let uids: Vec<u32> = d.users.iter().map(|u| u.uid).collect();
    assert_eq!(uids, [0, 65534]);
    assert_eq!(d.users[1].folded, vals(50));
    assert!(why(&d, &c.counters_name()).contains("owned by uid 0"));
    mine.remove_instance();
}
