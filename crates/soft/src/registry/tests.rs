use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::*;

fn base() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

fn me() -> Ctx {
    let pid = std::process::id();
    Ctx {
        pid,
        start_time: proc_stat(pid).unwrap().1,
        instance: 9999,
    }
}

/// Writes `text` as `name` in `r`'s directory, as a forger would.
fn plant(r: &Registry, name: &str, text: &str) -> PathBuf {
    let p = r.dir().join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn record_text(kind: Kind, c: Ctx, handle: u32, limit: u32, leaky: bool) -> (String, String) {
    let f = Fields {
        kind,
        handle,
        pid: c.pid,
        start_time: c.start_time,
        instance: c.instance,
        created_at: 1,
        limit,
        leaky,
    };
    (f.file_name(), f.emit())
}

fn ignored_why(s: &Survey, name: &str) -> String {
    s.ignored
        .iter()
        .find(|i| i.path.file_name().is_some_and(|n| n == name))
        .unwrap_or_else(|| panic!("{name} not reported: {:?}", s.ignored))
        .why
        .clone()
}

/// A live process of another user: nobody's `sleep 30` when this is root
/// (started through setpriv and waited for until it has switched uid),
/// else init, root's. A started process is killed when this is dropped.
pub(super) struct OtherUser {
    pub pid: u32,
    child: Option<std::process::Child>,
}

impl OtherUser {
    pub fn start() -> OtherUser {
        if userdir::euid() != 0 {
            return OtherUser {
                pid: 1,
                child: None,
            };
        }
        let c = Command::new("setpriv")
            .args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
            .args(["sleep", "30"])
            .stdin(Stdio::null())
            .spawn()
            .expect("setpriv (util-linux)");
        let pid = c.id();
        let other = OtherUser {
            pid,
            child: Some(c),
        };
        // Until setpriv has switched uid.
        let end = Instant::now() + Duration::from_secs(5);
        while check_owner(pid, proc_stat(pid).map_or(0, |s| s.1), 0) != Owner::Foreign(65534) {
            assert!(Instant::now() < end, "setpriv never became uid 65534");
            std::thread::sleep(Duration::from_millis(10));
        }
        other
    }

    /// The context (instance 1) of the process, as its records would name
    /// it.
    pub fn ctx(&self) -> Ctx {
        Ctx {
            pid: self.pid,
            start_time: proc_stat(self.pid).unwrap().1,
            instance: 1,
        }
    }
}

impl Drop for OtherUser {
    fn drop(&mut self) {
        if let Some(c) = &mut self.child {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[test]
fn add_counts_remove_and_self_is_alive() {
    let b = base();
    let r = Registry::open_in(b.path(), "u0").unwrap();
    assert!(r.add(Kind::Qp, 17, 2).unwrap());
    assert!(r.add(Kind::Qp, 18, 2).unwrap());
    assert!(!r.add(Kind::Qp, 19, 2).unwrap());
    assert!(r.add(Kind::Cq, 1, 2).unwrap());
    let l = r.list().unwrap();
    assert_eq!(l.len(), 3);
    assert!(l.iter().all(|x| x.owner_state() == OwnerState::Alive));
    assert!(l.iter().all(|x| x.counts && x.uid == userdir::euid()));
    r.remove(Kind::Qp, 17).unwrap();
    assert_eq!(r.list().unwrap().len(), 2);
    let rc = r.reclaim(true).unwrap();
    assert_eq!((rc.freed.len(), rc.live.len()), (0, 2));
    r.remove_instance();
    assert!(r.list().unwrap().is_empty());
}

#[test]
fn files_have_their_modes_whatever_the_umask() {
    let b = base();
    let r = Registry::open_in(b.path(), "m0").unwrap();
    r.attach(false).unwrap();
    assert!(r.add(Kind::Qp, 17, 8).unwrap());
    let mode = |n: &str| std::fs::metadata(r.dir().join(n)).unwrap().mode() & 0o7777;
    let ctx = Ctx {
        instance: r.instance,
        ..me()
    };
    assert_eq!(mode(&ctx.file_name()), 0o600);
    assert_eq!(mode(".lock"), 0o600);
    assert_eq!(mode(&record::record_name(Kind::Qp, ctx, 17)), 0o644);
    assert_eq!(mode("."), 0o755);
    r.set_leaky(true).unwrap();
    assert_eq!(mode(".options"), 0o644);
    assert!(r.device_leaky());
    r.remove_instance();
}

#[test]
fn an_attached_context_holds_its_records_until_removed() {
    let b = base();
    let owner = Registry::open_in(b.path(), "c0").unwrap();
    owner.attach(false).unwrap();
    assert!(owner.context_fd().is_some());
    assert!(owner.add(Kind::Qp, 17, 8).unwrap());
    // Another handle (another process's view) sees the lock held.
    let other = Registry::open_in(b.path(), "c0").unwrap();
    let l = other.list().unwrap();
    assert_eq!(l.len(), 1);
    assert_eq!(l[0].holding, Holding::Owner);
    assert!(l[0].context_path().exists());
    let rc = other.reclaim(true).unwrap();
    assert_eq!((rc.freed.len(), rc.live.len()), (0, 1));
    owner.remove_instance();
    assert!(other.list().unwrap().is_empty());
    assert!(!l[0].context_path().exists());
}

#[test]
fn a_released_context_is_freed_unless_leaky() {
    let b = base();
    for leaky in [false, true] {
        let owner = Registry::open_in(b.path(), "r0").unwrap();
        owner.attach(leaky).unwrap();
        assert!(owner.add(Kind::Cq, 1, 8).unwrap());
        // What process death does to the lock: the descriptor closes.
        drop(owner.ctx.lock().unwrap().take());
        let other = Registry::open_in(b.path(), "r0").unwrap();
        let l = other.list().unwrap();
        if leaky {
            assert_eq!(l.len(), 1);
            assert_eq!((l[0].holding, l[0].leaky), (Holding::Nobody, true));
            // A leaky record of this user's own counts for this user.
            assert!(l[0].counts);
            let rc = other.reclaim(false).unwrap();
            assert_eq!(rc.freed.len(), 1);
        } else {
            assert!(l.is_empty(), "{l:?}");
            // The next create deletes the files.
            other.add(Kind::Pd, 1, 8).unwrap();
            other.remove(Kind::Pd, 1).unwrap();
        }
        let left = rdmakit_testkit::file_names(other.dir(), |n| !n.starts_with('.'));
        assert!(left.is_empty(), "{left:?}");
    }
}

/// Issue 34: a FIFO named like a record or a context, a link, junk, an
/// oversized record and one whose text names another object: none blocks,
/// none counts, each is reported with why.
#[test]
fn fifos_links_and_junk_are_ignored_reported_and_never_block() {
    let b = base();
    let r = Registry::open_in(b.path(), "j0").unwrap();
    let dead = Ctx {
        pid: u32::MAX - 1,
        start_time: 1,
        instance: 1,
    };
    let fifo = record::record_name(Kind::Qp, me(), 1);
    rustix::fs::mknodat(
        r.own.fd(),
        fifo.as_str(),
        rustix::fs::FileType::Fifo,
        Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    let ctx_fifo = Ctx {
        instance: 7,
        ..me()
    };
    rustix::fs::mknodat(
        r.own.fd(),
        ctx_fifo.file_name().as_str(),
        rustix::fs::FileType::Fifo,
        Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let (n, t) = record_text(Kind::Qp, ctx_fifo, 2, 0, false);
    plant(&r, &n, &t);
    let secret = b.path().join("secret");
    std::fs::write(&secret, "s").unwrap();
    let link = record::record_name(Kind::Qp, me(), 3);
    std::os::unix::fs::symlink(&secret, r.dir().join(&link)).unwrap();
    plant(&r, "garbage", "x");
    let big = record::record_name(Kind::Qp, me(), 4);
    plant(&r, &big, &"x".repeat(4096));
    let (_, t) = record_text(Kind::Qp, me(), 6, 0, false);
    let liar = record::record_name(Kind::Qp, me(), 5);
    plant(&r, &liar, &t);
    let unparsable = record::record_name(Kind::Qp, me(), 8);
    plant(&r, &unparsable, "kind=qp\n");
    let (n, t) = record_text(Kind::Qp, dead, 9, 0, false);
    plant(&r, &n, &t);

    let t0 = Instant::now();
    let s = survey_in(b.path(), "j0").unwrap();
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    assert!(ignored_why(&s, &fifo).contains("not a regular file (a FIFO)"));
    assert!(ignored_why(&s, &ctx_fifo.file_name()).contains("FIFO"));
    assert_eq!(ignored_why(&s, &link), "a symbolic link");
    assert_eq!(ignored_why(&s, "garbage"), "not a name rdmakit writes");
    assert!(ignored_why(&s, &big).contains("4096 bytes, more than the 512"));
    assert!(ignored_why(&s, &liar).contains("names another object"));
    assert!(ignored_why(&s, &unparsable).starts_with("not a record: no handle"));
    // The record of a live owner whose context file is a FIFO is judged by
    // its pid; the dead owner's is gone.
    let qps: Vec<u32> = s.records.iter().map(|r| r.handle).collect();
    assert_eq!(qps, [2], "{:?}", s.records);
    // And a create is not stalled either.
    assert!(r.add(Kind::Qp, 10, 2).unwrap());
    assert!(r.add(Kind::Qp, 11, 2).unwrap());
    assert!(!r.add(Kind::Qp, 12, 2).unwrap());
    // Reclaim leaves what is not a record alone.
    let rc = r.reclaim(false).unwrap();
    assert!(rc.ignored.len() >= 7, "{:?}", rc.ignored);
    assert!(r.dir().join(&fifo).exists() && r.dir().join("garbage").exists());
    assert_eq!(std::fs::read(&secret).unwrap(), b"s");
}

/// A record in this user's directory naming a live process of another user
/// (root's, or nobody's when this is root) is forged: ignored, reported,
/// never counted.
#[test]
fn a_record_naming_another_users_process_is_forged() {
    let b = base();
    let r = Registry::open_in(b.path(), "f0").unwrap();
    let other = OtherUser::start();
    let pid = other.pid;
    let theirs = other.ctx();
    let (n, t) = record_text(Kind::Qp, theirs, 1, 0, false);
    plant(&r, &n, &t);
    let s = r.survey().unwrap();
    assert!(s.records.is_empty(), "{:?}", s.records);
    assert!(
        ignored_why(&s, &n).contains(&format!("names pid {pid}, a live process of uid")),
        "{:?}",
        s.ignored
    );
    assert!(r.add(Kind::Qp, 2, 1).unwrap());
}

/// Issue 34: the lock is taken with a bounded wait, and the error names
/// the process holding it.
#[test]
fn a_held_lock_fails_in_bounded_time_naming_its_holder() {
    let b = base();
    let r = Registry::open_in(b.path(), "l0").unwrap();
    r.set_lock_wait(Duration::from_millis(300));
    let lock = r.dir().join(".lock");
    std::fs::write(&lock, "").unwrap();
    std::fs::set_permissions(&lock, std::fs::Permissions::from_mode(0o600)).unwrap();
    // -o: flock(1) keeps the lock itself, its `sleep` does not inherit it.
    let mut holder = Command::new("flock")
        .args(["-x", "-o"])
        .arg(&lock)
        .args(["sleep", "30"])
        .stdin(Stdio::null())
        .spawn()
        .expect("flock (util-linux)");
    let end = Instant::now() + Duration::from_secs(5);
    while Locks::read()
        .unwrap()
        .holders(FileId::of(&rustix::fs::stat(&lock).unwrap()))
        .is_empty()
    {
        assert!(
            Instant::now() < end,
            "flock never locked {}",
            lock.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let t0 = Instant::now();
    let e = r.add(Kind::Qp, 1, 8).unwrap_err();
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    assert_eq!(e.kind(), io::ErrorKind::TimedOut);
    let m = e.to_string();
    assert!(
        m.contains(&format!("held by pid {} (flock)", holder.id())),
        "{m}"
    );
    assert!(r.attach(false).is_err());
    // Reading never takes the lock.
    assert!(r.survey().is_ok());
    let _ = holder.kill();
    let _ = holder.wait();
    assert!(r.add(Kind::Qp, 1, 8).unwrap());
}

#[test]
fn a_temporary_file_of_a_dead_writer_is_swept() {
    let b = base();
    let r = Registry::open_in(b.path(), "t0").unwrap();
    let dead = Ctx {
        pid: u32::MAX - 1,
        start_time: 1,
        instance: 1,
    };
    let mine = format!(".{}.tmp", record::record_name(Kind::Qp, me(), 1));
    let theirs = format!(".{}.tmp", record::record_name(Kind::Qp, dead, 1));
    plant(&r, &mine, "");
    plant(&r, &theirs, "");
    r.attach(false).unwrap();
    assert!(r.dir().join(&mine).exists());
    assert!(!r.dir().join(&theirs).exists());
    r.remove_instance();
}

/// The bound on entries read per directory: the rest is not read, and that
/// is reported; this user's own creates refuse rather than miscount.
#[test]
fn a_directory_past_its_entry_cap_is_read_up_to_it_and_reported() {
    let b = base();
    let r = Registry::open_in(b.path(), "e0").unwrap();
    for i in 0..=MAX_ENTRIES {
        rfs::openat(
            r.own.fd(),
            format!("j{i}").as_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o644),
        )
        .unwrap();
    }
    let t0 = Instant::now();
    let s = r.survey().unwrap();
    let took = t0.elapsed();
    assert!(took < Duration::from_secs(5), "{took:?}");
    let why: Vec<&str> = s.ignored.iter().map(|i| i.why.as_str()).collect();
    assert!(
        why.contains(
            &format!("holds more than {MAX_ENTRIES} entries: the rest were not read").as_str()
        ),
        "{why:?}"
    );
    assert_eq!(s.ignored.len(), MAX_REPORTED + 1, "{why:?}");
    assert!(why.iter().any(|w| w.ends_with("more entries ignored")));
    let e = r.add(Kind::Qp, 1, 8).unwrap_err();
    assert!(e.to_string().contains("more than 65536 entries"), "{e}");
}

#[test]
fn device_names_are_plain_and_listed_from_every_user() {
    let b = base();
    Registry::open_in(b.path(), "soft7").unwrap();
    Registry::open_in(b.path(), "soft3").unwrap();
    std::fs::create_dir(
        Registry::open_in(b.path(), "soft3")
            .unwrap()
            .dir()
            .with_file_name("net"),
    )
    .unwrap();
    for bad in ["", ".", "..", ".lock", "a/b", "net"] {
        assert!(Registry::open_in(b.path(), bad).is_err(), "{bad:?}");
    }
    assert_eq!(device_names_in(b.path()), ["soft3", "soft7"]);
    assert!(device_names_in(&b.path().join("missing")).is_empty());
}
