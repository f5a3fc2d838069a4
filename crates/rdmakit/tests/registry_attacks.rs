//! The soft NIC's resource registry attacked by an
//! unprivileged user (uid 65534) against a root rdmakit, each attack run for
//! real and shown to fail:
//!
//! - planted links (the registry base, a user directory, `.lock`, records)
//!   never make root change a file or directory outside the user's own
//!   directory: the planted targets keep their mode and bytes;
//! - the attacker's held lock, FIFOs named like records, and links stall no
//!   root command (each returns within 10 s, saying what it refused), and the
//!   attacker cannot even open root's lock;
//! - 16,384 forged records do not exhaust root's max_qp and are reported;
//! - a real leak by the attacker's live process does exhaust root's device,
//!   as one user's leaked QPs exhaust a real NIC for everyone; a context its
//!   forked child holds too, and root's reclaim refuses it; and root's leaks
//!   exhaust it for the unprivileged user, who cannot open root's context
//!   files (their holding is read from /proc/locks);
//! - the attacker's own leaky option does not bind root; root's does, and
//!   root's `soft reclaim` frees records of contexts nobody holds in the
//!   attacker's directory;
//! - a lock held too long fails the open in bounded time, naming the holder;
//! - the attacker's counters files (FIFOs, links to root's files, oversized,
//!   naming root's live process) stall no root `stat` or `metrics`, are never
//!   followed and are reported; its own numbers count as its own, saturating.
//!
//! Running the attacker needs root (`setpriv`): without it a test skips,
//! saying so, unless RDMAKIT_REQUIRE_ROOT is set (scripts/test; CI runs as
//! root), when it fails. Every test has its own registry base, a root-owned
//! 1777 directory as /dev/shm is, and its own device names. The attacker's
//! live process is this test binary re-run as uid 65534 with
//! `RDK_ATTACK_CHILD` set (`attack_child`).

mod common;

use std::fs::{self, Permissions};
use std::io::{BufRead, BufReader};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::*;
use rdmakit_soft::faults::Plan;
use rdmakit_soft::proto::QpType;
use rdmakit_soft::registry::{FileId, Locks};
use rdmakit_soft::{Device, DeviceConfig, Errno, Limits, QpInit};
use rdmakit_testkit::{as_attacker, attacker_dir, retry, wait, ATTACKER_UID};
use tempfile::TempDir;

/// No command may take longer: no command hangs.
const LIMIT: Duration = Duration::from_secs(10);

/// How long the attacker's own setup script may take (one writes 16,384
/// forged records with a shell loop; under a loaded CI machine that took
/// over 10 s). It is a hang guard for the setup, not the bound under test.
const SETUP_LIMIT: Duration = Duration::from_secs(60);
const CHILD_ENV: &str = "RDK_ATTACK_CHILD";

fn unique(tag: &str) -> String {
    format!("rdka-{tag}-{}", std::process::id())
}

/// A registry base like /dev/shm: root's, mode 1777.
fn shared_base() -> TempDir {
    let d = tempfile::Builder::new()
        .prefix("rdk-base-")
        .tempdir()
        .unwrap();
    fs::set_permissions(d.path(), Permissions::from_mode(0o1777)).unwrap();
    d
}

/// Runs `script` with `sh` as the attacker and returns its output; None
/// when this is not root (the test then skips, or fails when required).
fn attacker_sh(script: &str) -> Option<Output> {
    let mut c = as_attacker("sh")?;
    c.args(["-c", script])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    Some(wait(
        c.spawn().unwrap(),
        SETUP_LIMIT,
        "the attacker's script",
    ))
}

/// [`attacker_sh`] that must succeed.
fn attacker_ok(script: &str) -> Option<()> {
    let o = attacker_sh(script)?;
    assert!(
        o.status.success(),
        "attacker's script failed: {script}\n{}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    Some(())
}

/// Root's `rdmakit ARGS` on registry base `base`, which must return within
/// [`LIMIT`] (killed and failed otherwise).
fn root_rdmakit(base: &Path, args: &[&str]) -> Output {
    root_rdmakit_on(base, "soft0", args)
}

/// [`root_rdmakit`] with the soft device named `dev`.
fn root_rdmakit_on(base: &Path, dev: &str, args: &[&str]) -> Output {
    let c = bin()
        .args(args)
        .env("RDMAKIT_SOFT_REGISTRY_DIR", base)
        .env("RDMAKIT_SOFT_NAME", dev)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let o = wait(c, LIMIT, &format!("root's rdmakit {}", args.join(" ")));
    assert!(t0.elapsed() < LIMIT);
    o
}

fn both(o: &Output) -> String {
    format!("{}{}", text(&o.stdout), text(&o.stderr))
}

/// A root file (0600, a secret) and a root directory (0700, empty) for the
/// attacker to point links at.
struct Targets {
    file: PathBuf,
    dir: PathBuf,
    _keep: TempDir,
}

const SECRET: &[u8] = b"root's secret\n";

fn targets() -> Targets {
    let keep = tempfile::Builder::new()
        .prefix("rdk-target-")
        .tempdir()
        .unwrap();
    fs::set_permissions(keep.path(), Permissions::from_mode(0o755)).unwrap();
    let file = keep.path().join("secret");
    fs::write(&file, SECRET).unwrap();
    fs::set_permissions(&file, Permissions::from_mode(0o600)).unwrap();
    let dir = keep.path().join("private");
    fs::create_dir(&dir).unwrap();
    fs::set_permissions(&dir, Permissions::from_mode(0o700)).unwrap();
    Targets {
        file,
        dir,
        _keep: keep,
    }
}

impl Targets {
    /// Neither target changed mode, owner or content.
    fn untouched(&self, after: &str) {
        assert_eq!(
            mode_and_owner(&self.file),
            (0o600, 0),
            "{after}: the root file's mode or owner changed"
        );
        assert_eq!(
            fs::read(&self.file).unwrap(),
            SECRET,
            "{after}: the root file's bytes changed"
        );
        assert_eq!(
            mode_and_owner(&self.dir),
            (0o700, 0),
            "{after}: the root directory's mode or owner changed"
        );
        assert!(
            fs::read_dir(&self.dir).unwrap().next().is_none(),
            "{after}: something was created in the root directory"
        );
    }
}

/// The permission bits and owner of `p`.
fn mode_and_owner(p: &Path) -> (u32, u32) {
    let m = fs::metadata(p).unwrap();
    (m.mode() & 0o7777, m.uid())
}

/// Root's `devinfo` of the soft provider fails, saying `why`.
fn root_devinfo_refuses(base: &Path, why: &str) {
    let o = root_rdmakit(base, &["--provider", "soft", "devinfo"]);
    assert!(
        !o.status.success() && both(&o).contains(why),
        "{}",
        both(&o)
    );
}

/// What `doctor --json` printed.
fn doctor_json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", both(o)))
}

/// True when one of the doctor's notes satisfies `f`.
fn has_note(v: &serde_json::Value, f: impl Fn(&str) -> bool) -> bool {
    v["notes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|n| f(n.as_str().unwrap()))
}

/// Every root command that reads or writes the registry, each within
/// [`LIMIT`]; returns `soft status`'s output.
fn every_root_command(base: &Path, t: &Targets, dev: &str) -> String {
    let mut status = String::new();
    for args in [
        &["--provider", "soft", "devinfo"][..],
        &["soft", "status"],
        &["soft", "status", "--json"],
        &["res"],
        &["stat", "--json"],
        &["doctor", "--device", dev, "--json"],
        &["soft", "reclaim"],
        &["soft", "leaky", "on", "--device", dev],
        &["soft", "leaky", "off", "--device", dev],
    ] {
        let o = root_rdmakit(base, args);
        if args == ["soft", "status"] {
            status = both(&o);
        }
        t.untouched(&format!("root's rdmakit {}", args.join(" ")));
    }
    status
}

/// The first registry attack: links planted where root's rdmakit
/// would create or lock its registry. Root refuses a base or directory it
/// cannot trust, with the path and why, and changes nothing they point at.
#[test]
fn planted_links_never_change_a_root_file_or_directory() {
    let t = targets();
    let (file, dir) = (t.file.display(), t.dir.display());

    // The attack as found: the attacker's 1777 directory as the base, with
    // soft0/.lock (the old layout) and a user directory for root in it
    // whose .lock is a link to root's 0600 file.
    let a = attacker_dir();
    let ad = a.path().display();
    let Some(()) = attacker_ok(&format!(
        "set -e; chmod 1777 {ad}; mkdir -p {ad}/soft0 {ad}/rdmakit-soft.0/soft0
         ln -s {file} {ad}/soft0/.lock; ln -s {file} {ad}/rdmakit-soft.0/soft0/.lock
         ln -s {file} {ad}/rdmakit-soft.0/soft0/.options"
    )) else {
        return;
    };
    root_devinfo_refuses(
        a.path(),
        &format!("refusing {ad}: it is owned by uid {ATTACKER_UID}"),
    );
    every_root_command(a.path(), &t, "soft0");

    // In a base like /dev/shm: root's own directory planted as a link to a
    // root directory, then as the attacker's directory with a linked .lock.
    let b = shared_base();
    let bd = b.path().display();
    attacker_ok(&format!("ln -s {dir} {bd}/rdmakit-soft.0"));
    root_devinfo_refuses(
        b.path(),
        &format!("refusing {bd}/rdmakit-soft.0: it is not a directory (a symbolic link or a file)"),
    );
    every_root_command(b.path(), &t, "soft0");
    attacker_ok(&format!(
        "set -e; rm {bd}/rdmakit-soft.0; mkdir -p {bd}/rdmakit-soft.0/soft0
         ln -s {file} {bd}/rdmakit-soft.0/soft0/.lock"
    ));
    root_devinfo_refuses(
        b.path(),
        &format!("refusing {bd}/rdmakit-soft.0: it is owned by uid {ATTACKER_UID}"),
    );
    every_root_command(b.path(), &t, "soft0");

    // Root removes the planted directory (as the error says) and uses its
    // own; the attacker plants links in its own directory: records, a
    // context, .lock and .options pointing at root's file, a device
    // directory pointing at root's directory.
    fs::remove_dir_all(b.path().join("rdmakit-soft.0")).unwrap();
    let o = root_rdmakit(b.path(), &["--provider", "soft", "devinfo"]);
    assert!(o.status.success(), "{}", both(&o));
    let mine = format!("{bd}/rdmakit-soft.{ATTACKER_UID}");
    attacker_ok(&format!(
        "set -e; umask 022; mkdir -p {mine}/soft0; cd {mine}/soft0
         for n in .lock .options qp-1-2-3-4 ctx-1-2-3 .qp-1-2-3-4.tmp; do ln -s {file} $n; done
         ln -s {dir} {mine}/soft1"
    ));
    let status = every_root_command(b.path(), &t, "soft0");
    assert!(
        status.contains(&format!("ignored {mine}/soft0/qp-1-2-3-4: a symbolic link")),
        "{status}"
    );
    assert!(
        status.contains(&format!("ignored {mine}/soft0/ctx-1-2-3: a symbolic link")),
        "{status}"
    );
    let o = root_rdmakit(b.path(), &["soft", "status", "--device", "soft1"]);
    assert!(
        both(&o).contains(&format!(
            "ignored {mine}/soft1: refusing {mine}/soft1: it is not a directory"
        )),
        "{}",
        both(&o)
    );
    t.untouched("soft status --device soft1");

    // The attacker's whole directory a link to root's directory.
    let c = shared_base();
    let cd = c.path().display();
    attacker_ok(&format!("ln -s {dir} {cd}/rdmakit-soft.{ATTACKER_UID}"));
    let status = every_root_command(c.path(), &t, "soft0");
    // soft status lists devices by their directories: the refused one has
    // none, so `--device` shows the refusal.
    let _ = status;
    let o = root_rdmakit(c.path(), &["soft", "status", "--device", "soft0"]);
    assert!(
        both(&o).contains(&format!(
            "ignored {cd}/rdmakit-soft.{ATTACKER_UID}: refusing {cd}/rdmakit-soft.{ATTACKER_UID}: \
             it is not a directory"
        )),
        "{}",
        both(&o)
    );
    t.untouched("the attacker's directory as a link");
}

/// The processes a test started. Whatever it has not ended when it returns
/// — or fails — is killed (SIGKILL) and, when its child, reaped: a failed
/// assertion leaves no holder behind.
#[derive(Default)]
struct Procs {
    children: Vec<Child>,
    /// Children that lead a process group of their own (killed whole).
    groups: Vec<u32>,
    /// Grandchildren a child forked, by pid.
    forked: Vec<u32>,
}

impl Procs {
    /// Keeps `c`; returns its pid.
    fn keep(&mut self, c: Child) -> u32 {
        let pid = c.id();
        self.children.push(c);
        pid
    }

    /// Keeps `c`, spawned with `process_group(0)`: ending it ends its group.
    fn keep_group(&mut self, c: Child) -> u32 {
        let pid = self.keep(c);
        self.groups.push(pid);
        pid
    }

    /// Ends `pid` now, one of the processes kept (its group too when it
    /// leads one); returns it.
    fn end(&mut self, pid: u32) -> u32 {
        if let Some(i) = self.forked.iter().position(|&p| p == pid) {
            self.forked.remove(i);
            // SAFETY: kill(2) on a grandchild this test's child forked.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        } else if let Some(i) = self.children.iter().position(|c| c.id() == pid) {
            let mut c = self.children.remove(i);
            if let Some(g) = self.groups.iter().position(|&p| p == pid) {
                self.groups.remove(g);
                // SAFETY: kill(2) on the process group of a child this test
                // spawned with process_group(0).
                unsafe { libc::kill(-(pid as i32), libc::SIGKILL) };
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        pid
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        let pids: Vec<u32> = self
            .forked
            .iter()
            .copied()
            .chain(self.children.iter().map(Child::id))
            .collect();
        for p in pids {
            self.end(p);
        }
    }
}

/// Waits until some process holds a `flock` on `path`.
fn await_flock(path: &Path) {
    retry(LIMIT, Duration::from_millis(20), || {
        let locked = fs::metadata(path).is_ok_and(|m| {
            !Locks::read()
                .unwrap()
                .holders(FileId::new(m.dev(), m.ino()))
                .is_empty()
        });
        locked
            .then_some(())
            .ok_or_else(|| format!("nobody ever locked {}", path.display()))
    })
}

/// The second attack: the attacker holds its lock for 25 s and
/// plants FIFOs named like a record and a context. No root command waits on
/// them; status, res and the doctor name what they ignored and why; the
/// attacker cannot open root's lock at all.
#[test]
fn an_attackers_lock_and_fifos_stall_no_root_command() {
    let t = targets();
    let b = shared_base();
    let bd = b.path().display();
    let o = root_rdmakit(b.path(), &["--provider", "soft", "devinfo"]);
    assert!(o.status.success(), "{}", both(&o));
    let mine = format!("{bd}/rdmakit-soft.{ATTACKER_UID}/soft0");
    let Some(()) = attacker_ok(&format!(
        "set -e; umask 022; mkdir -p {mine}; cd {mine}; : > .lock
         mkfifo qp-1-2-3-4 ctx-1-2-3 .options"
    )) else {
        return;
    };
    let mut procs = Procs::default();
    let mut hold = as_attacker("flock").unwrap();
    hold.args(["-x", "-o", &format!("{mine}/.lock"), "sleep", "25"])
        .stdin(Stdio::null())
        .process_group(0);
    procs.keep_group(hold.spawn().unwrap());
    await_flock(Path::new(&format!("{mine}/.lock")));

    // Root's lock is out of the attacker's reach: it cannot even open it.
    let roots = format!("{bd}/rdmakit-soft.0/soft0");
    let o = attacker_sh(&format!("flock -n -x {roots}/.lock true")).unwrap();
    assert!(!o.status.success(), "the attacker locked root's registry");
    assert!(both(&o).contains("Permission denied"), "{}", both(&o));
    let o = attacker_sh(&format!("echo x > {roots}/qp-1-2-3-4")).unwrap();
    assert!(!o.status.success(), "the attacker wrote in root's registry");

    let status = every_root_command(b.path(), &t, "soft0");
    for what in ["qp-1-2-3-4", "ctx-1-2-3"] {
        assert!(
            status.contains(&format!(
                "ignored {mine}/{what}: not a regular file (a FIFO)"
            )),
            "{status}"
        );
    }
    let o = root_rdmakit(b.path(), &["res"]);
    assert!(
        text(&o.stderr).contains(&format!(
            "rdmakit: note: soft0: ignored {mine}/qp-1-2-3-4: not a regular file (a FIFO)"
        )),
        "{}",
        both(&o)
    );
    let v = doctor_json(&root_rdmakit(
        b.path(),
        &["doctor", "--device", "soft0", "--json"],
    ));
    let fifo = format!("ignored {mine}/qp-1-2-3-4: not a regular file (a FIFO)");
    assert!(has_note(&v, |n| n.contains(&fifo)), "{v:#}");

    // And root's own process creates objects meanwhile without waiting.
    let t0 = Instant::now();
    let dev = open(b.path(), "soft0", 4, false);
    let pd = dev.alloc_pd().unwrap();
    let cq = dev.create_cq(16, None).unwrap();
    assert_eq!(create_qps(&dev, pd, cq, 4), (4, 0));
    assert!(t0.elapsed() < LIMIT);
    drop(dev);
    drop(procs);
    t.untouched("the FIFOs and the held lock");
}

fn open(base: &Path, name: &str, max_qp: u32, leaky: bool) -> Device {
    Device::open(DeviceConfig {
        registry_dir: Some(base.to_path_buf()),
        ..soft_config(name, max_qp, Errno::ENOSPC, leaky)
    })
    .unwrap()
}

/// Creates up to `n` QPs; returns how many and the errno that stopped it.
fn create_qps(dev: &Device, pd: u32, cq: u32, n: u32) -> (u32, i32) {
    let mut made = 0;
    for _ in 0..n {
        match dev.create_qp(&QpInit::new(QpType::Rc, pd, cq, 4)) {
            Ok(_) => made += 1,
            Err(e) => return (made, e.errno.0),
        }
    }
    (made, 0)
}

/// The third attack: 16,384 forged `qp-…` records in the
/// attacker's directory — of a dead pid (leaky or not) and naming root's own
/// live process — with limit 0, which would count against any max_qp. None
/// counts for root; the ones naming root's process are reported as forged;
/// root's reclaim deletes the dead ones.
#[test]
fn forged_records_do_not_exhaust_roots_max_qp_and_are_reported() {
    let b = shared_base();
    let bd = b.path().display();
    let name = unique("forge");
    let me = std::process::id();
    let start = rdmakit_soft::registry::proc_stat(me).unwrap().1;
    let dir = format!("{bd}/rdmakit-soft.{ATTACKER_UID}/{name}");
    let t0 = Instant::now();
    let Some(()) = attacker_ok(&format!(
        "set -e; umask 022; mkdir -p {dir}; cd {dir}; i=0
         while [ $i -lt 16384 ]; do
           case $((i % 3)) in
             0) p=4294967294; s=1; l=1;;
             1) p=4294967294; s=1; l=0;;
             *) p={me}; s={start}; l=0;;
           esac
           printf 'kind=qp\\nhandle=%d\\npid=%d\\nstart_time=%d\\ninstance=1\\ncreated_at=1\\nlimit=0\\nleaky=%d\\n' \
             $i $p $s $l > qp-$p-$s-1-$i
           i=$((i+1))
         done"
    )) else {
        return;
    };
    eprintln!("16,384 forged records written in {:?}", t0.elapsed());
    assert_eq!(fs::read_dir(&dir).unwrap().count(), 16384);

    let dev = open(b.path(), &name, 4, false);
    let pd = dev.alloc_pd().unwrap();
    let cq = dev.create_cq(16, None).unwrap();
    let t0 = Instant::now();
    assert_eq!(create_qps(&dev, pd, cq, 5), (4, Errno::ENOSPC.0));
    eprintln!("5 creates past 16,384 forged records: {:?}", t0.elapsed());
    assert!(t0.elapsed() < LIMIT);

    let o = root_rdmakit(b.path(), &["soft", "status", "--device", &name]);
    let s = both(&o);
    assert!(o.status.success(), "{s}");
    assert!(
        s.contains(&format!(
            "names pid {me}, a live process of uid 0, in the directory of uid {ATTACKER_UID}: forged"
        )),
        "{s}"
    );
    assert!(s.contains("more entries ignored"), "{s}");
    // The dead leaky ones are the attacker's own leak: shown, not counted.
    assert!(
        s.contains(&format!(
            "(uid {ATTACKER_UID}) — kept by uid {ATTACKER_UID}'s own leaky option until reclaim"
        )),
        "{s}"
    );
    let v = doctor_json(&root_rdmakit_on(
        b.path(),
        &name,
        &["doctor", "--device", &name, "--json"],
    ));
    assert!(has_note(&v, |n| n.ends_with(": forged")), "{v:#}");
    // R002 counts root's 4 QPs only.
    let r002 = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "RDK-R002" && f["subject"] == format!("{name} qp"))
        .unwrap_or_else(|| panic!("no RDK-R002 for {name} qp: {v:#}"));
    assert!(
        r002["message"]
            .as_str()
            .unwrap()
            .contains("4 of 4 QPs in use across processes"),
        "{r002:#}"
    );
    drop(dev);

    // Root's reclaim deletes the records of dead pids (contexts nobody
    // holds) in the attacker's directory and leaves the forged rest.
    let o = root_rdmakit(b.path(), &["soft", "reclaim", "--device", &name]);
    assert!(o.status.success(), "{}", both(&o));
    // Both kinds of dead record, leaky or not: every handle not ≡ 2 mod 3.
    let dead: Vec<String> = (0..16384u32)
        .filter(|i| i % 3 != 2)
        .map(|i| i.to_string())
        .collect();
    assert!(
        text(&o.stdout).contains(&format!(
            "freed qp {} ({} …) of dead pid 4294967294 (uid {ATTACKER_UID})",
            dead.len(),
            dead[..32].join(" ")
        )),
        "{}",
        both(&o)
    );
    let left = fs::read_dir(&dir).unwrap().count();
    assert_eq!(left, 16384 / 3, "forged records naming root's pid stay");
}

/// Not a test of its own: with `RDK_ATTACK_CHILD=NAME,N,MAX_QP[,leaky][,fork]`
/// (run as the attacker) it opens NAME under `RDMAKIT_SOFT_REGISTRY_DIR`,
/// creates N QPs, forks a grandchild that inherits the context and sleeps
/// (with `fork`, saying `child PID`), says `ready N ERRNO`, and waits to be
/// killed.
#[test]
fn attack_child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let v: Vec<&str> = spec.split(',').collect();
    let base = std::env::var_os("RDMAKIT_SOFT_REGISTRY_DIR").expect("a registry base");
    let dev = open(
        Path::new(&base),
        v[0],
        v[2].parse().unwrap(),
        v.contains(&"leaky"),
    );
    let pd = dev.alloc_pd().unwrap();
    let cq = dev.create_cq(16, None).unwrap();
    let (made, errno) = create_qps(&dev, pd, cq, v[1].parse().unwrap());
    if v.contains(&"fork") {
        // SAFETY: the forked child only sleeps (async-signal-safe) until it
        // is killed: it holds the inherited context descriptor, nothing else.
        match unsafe { libc::fork() } {
            0 => loop {
                // SAFETY: as above.
                unsafe { libc::sleep(3600) };
            },
            pid => println!("child {pid}"),
        }
    }
    println!("ready {made} {errno}");
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// Starts the attacker's process holding `n` QPs of device `name` (max_qp
/// `max_qp`, `flags` `,leaky` / `,fork`) under `base`, kept in `procs`;
/// returns its pid and the forked grandchild's. None when not root.
fn attacker_holder(
    procs: &mut Procs,
    base: &Path,
    name: &str,
    n: u32,
    max_qp: u32,
    flags: &str,
) -> Option<(u32, Option<u32>)> {
    // This test binary (target/ is readable and searchable by every user).
    let c = as_attacker(std::env::current_exe().unwrap())?;
    let (pid, grandchild, made) = holder(procs, c, base, name, n, max_qp, flags);
    assert_eq!(made, (n, 0), "the attacker could not create its QPs");
    Some((pid, grandchild))
}

/// Runs `cmd` (this test binary, as some user) as [`attack_child`], kept
/// in `procs` with the grandchild it forks, and waits until it says what it
/// created: returns its pid, the grandchild's, and (QPs created, errno that
/// stopped it).
fn holder(
    procs: &mut Procs,
    mut cmd: Command,
    base: &Path,
    name: &str,
    n: u32,
    max_qp: u32,
    flags: &str,
) -> (u32, Option<u32>, (u32, i32)) {
    let mut c = cmd
        .args(["--exact", "attack_child", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, format!("{name},{n},{max_qp}{flags}"))
        .env("RDMAKIT_SOFT_REGISTRY_DIR", base)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = c.stdout.take().unwrap();
    let pid = procs.keep(c);
    let mut grandchild = None;
    for line in BufReader::new(out).lines() {
        let line = line.unwrap();
        // libtest's "test attack_child ... " may precede it on the line.
        if let Some(g) = line.rsplit_once("child ").map(|(_, r)| r) {
            grandchild = g.trim().parse().ok();
            procs.forked.extend(grandchild);
        }
        if let Some(rest) = line.split_once("ready ").map(|(_, r)| r) {
            let (made, errno) = rest.split_once(' ').expect("ready MADE ERRNO");
            return (
                pid,
                grandchild,
                (made.parse().unwrap(), errno.parse().unwrap()),
            );
        }
    }
    panic!("the holder exited before it was ready");
}

/// Waits until root's device can create `n` QPs again (a killed holder's
/// context is released when the kernel closes its descriptors).
fn creates_again(dev: &Device, pd: u32, cq: u32, n: u32) {
    let mut made = 0;
    retry(LIMIT, Duration::from_millis(50), || {
        made += create_qps(dev, pd, cq, n - made).0;
        (made == n)
            .then_some(())
            .ok_or_else(|| format!("created {made} of {n}"))
    })
}

/// One user's real leak exhausts the device for everyone, as on a real NIC:
/// the attacker's live process holding max_qp QPs makes root's next
/// create_qp fail with ENOSPC, and so does a context its forked child keeps
/// after it is killed (root's reclaim refuses it, naming the holder). Once
/// the holders are gone, root creates again.
#[test]
fn a_real_leak_by_the_attackers_live_process_exhausts_root_too() {
    let b = shared_base();
    let name = unique("leak");
    let mut procs = Procs::default();
    let Some((holder, _)) = attacker_holder(&mut procs, b.path(), &name, 4, 4, "") else {
        return;
    };
    let dev = open(b.path(), &name, 4, false);
    let pd = dev.alloc_pd().unwrap();
    let cq = dev.create_cq(16, None).unwrap();
    let e = dev
        .create_qp(&QpInit::new(QpType::Rc, pd, cq, 4))
        .unwrap_err();
    assert_eq!(e.errno, Errno::ENOSPC, "{e:?}");
    assert!(
        e.to_string().contains("reached across all processes"),
        "{e}"
    );
    let o = root_rdmakit(b.path(), &["soft", "status", "--device", &name]);
    assert!(
        text(&o.stdout).contains(&format!("pid {holder:<8} alive   qp 4 "))
            && text(&o.stdout).contains(&format!("(uid {ATTACKER_UID})")),
        "{}",
        both(&o)
    );
    procs.end(holder);
    creates_again(&dev, pd, cq, 4);
    drop(dev);

    // A context the attacker's forked child keeps after its creator died.
    let (parent, child) = attacker_holder(&mut procs, b.path(), &name, 4, 4, ",fork").unwrap();
    let child = child.expect("the attacker's process printed its child's pid");
    procs.end(parent);
    let dev = open(b.path(), &name, 4, false);
    let pd = dev.alloc_pd().unwrap();
    let cq = dev.create_cq(16, None).unwrap();
    assert_eq!(create_qps(&dev, pd, cq, 1), (0, Errno::ENOSPC.0));
    let o = root_rdmakit(b.path(), &["soft", "reclaim", "--device", &name]);
    assert_eq!(o.status.code(), Some(1), "{}", both(&o));
    assert!(
        text(&o.stderr).contains("refused to reclaim qp 4 ")
            && text(&o.stderr).contains(&format!(
                "of pid {parent} (uid {ATTACKER_UID}) (dead: its context is still held by pid {child}"
            )),
        "{}",
        both(&o)
    );
    procs.end(child);
    creates_again(&dev, pd, cq, 4);
}

/// The other way round, read by a user who cannot open root's context
/// files: root's live process holding max_qp QPs, then a context root's
/// forked child keeps after its creator died (seen through /proc/locks),
/// exhaust the device for the unprivileged user too; once they are gone
/// the user creates its QPs.
#[test]
fn roots_leak_exhausts_the_device_for_other_users_too() {
    let b = shared_base();
    let name = unique("rootleak");
    let exe = std::env::current_exe().unwrap();
    let mut procs = Procs::default();
    let (parent, child, made) = holder(
        &mut procs,
        Command::new(&exe),
        b.path(),
        &name,
        4,
        4,
        ",fork",
    );
    assert_eq!(made, (4, 0));
    let child = child.expect("the holder printed its child's pid");
    let tries = |procs: &mut Procs| {
        let c = as_attacker(&exe)?;
        let (pid, _, made) = holder(procs, c, b.path(), &name, 4, 4, "");
        procs.end(pid);
        Some(made)
    };
    let Some(made) = tries(&mut procs) else {
        return;
    };
    assert_eq!(made, (0, Errno::ENOSPC.0), "root's live QPs did not count");
    procs.end(parent);
    assert_eq!(
        tries(&mut procs).unwrap(),
        (0, Errno::ENOSPC.0),
        "root's inherited context did not count for the attacker"
    );
    procs.end(child);
    retry(LIMIT, Duration::from_millis(50), || {
        let made = tries(&mut procs).unwrap();
        (made == (4, 0))
            .then_some(())
            .ok_or_else(|| format!("the attacker still gets {made:?}"))
    })
}

/// A leaky driver's records of a dead process: the attacker's own leaky
/// option keeps its objects for itself but does not bind root; root's option
/// (a driver property) makes them count for everyone; root's reclaim frees
/// them in the attacker's directory (unlinkat on its descriptor).
#[test]
fn roots_reclaim_frees_unheld_contexts_in_every_users_directory() {
    let b = shared_base();
    let bd = b.path().display();
    let name = unique("leaky");
    let mut procs = Procs::default();
    let Some((holder, _)) = attacker_holder(&mut procs, b.path(), &name, 3, 3, ",leaky") else {
        return;
    };
    let dead = procs.end(holder);
    let dir = format!("{bd}/rdmakit-soft.{ATTACKER_UID}/{name}");
    let qps = || rdmakit_testkit::file_names(Path::new(&dir), |n| n.starts_with("qp-")).len();
    assert_eq!(qps(), 3, "the leaky driver kept the attacker's QPs");

    // The attacker's own leaky option is not root's.
    let o = attacker_sh(&format!(
        "RDMAKIT_SOFT_REGISTRY_DIR={bd} {} soft leaky on --device {name}",
        env!("CARGO_BIN_EXE_rdmakit")
    ))
    .unwrap();
    assert!(o.status.success(), "{}", both(&o));
    assert!(
        text(&o.stdout).contains("for your processes that open it from now on"),
        "{}",
        both(&o)
    );
    let dev = Device::open(DeviceConfig {
        name: Some(name.clone()),
        limits: Limits {
            max_qp: 3,
            ..Limits::default()
        },
        faults: Plan {
            exhaust: Some(Errno::ENOSPC),
            ..Plan::default()
        },
        registry_dir: Some(b.path().to_path_buf()),
        ..DeviceConfig::default()
    })
    .unwrap();
    assert!(
        !dev.leaky(),
        "the attacker's option made root's device leaky"
    );
    let pd = dev.alloc_pd().unwrap();
    let cq = dev.create_cq(16, None).unwrap();
    assert_eq!(create_qps(&dev, pd, cq, 3), (3, 0));
    drop(dev);

    // Root's option: the driver keeps dead processes' objects for everyone.
    let o = root_rdmakit(b.path(), &["soft", "leaky", "on", "--device", &name]);
    assert!(
        text(&o.stdout).contains("for every user's processes that open it from now on"),
        "{}",
        both(&o)
    );
    let dev = open(b.path(), &name, 3, false);
    let pd = dev.alloc_pd().unwrap();
    let cq = dev.create_cq(16, None).unwrap();
    assert_eq!(create_qps(&dev, pd, cq, 1), (0, Errno::ENOSPC.0));

    let o = root_rdmakit(b.path(), &["soft", "reclaim", "--device", &name]);
    let out = text(&o.stdout);
    assert!(
        out.contains(&format!("{name}: freed qp 3 ("))
            && out.contains(&format!(
                "), cq 1 (1), pd 1 (1) of dead pid {dead} (uid {ATTACKER_UID})"
            )),
        "{}",
        both(&o)
    );
    assert_eq!(qps(), 0, "root's reclaim left the attacker's records");
    let left = rdmakit_testkit::file_names(Path::new(&dir), |n| !n.starts_with('.'));
    assert!(left.is_empty(), "{left:?}");
    assert_eq!(create_qps(&dev, pd, cq, 3), (3, 0));
    let o = root_rdmakit(b.path(), &["soft", "leaky", "off", "--device", &name]);
    assert!(o.status.success(), "{}", both(&o));
}

/// The lock is taken with a bounded wait: a process (here root's own
/// flock(1)) holding it makes root's devinfo fail in about 5 s, naming the
/// holder, instead of hanging.
#[test]
fn a_held_lock_fails_the_open_in_bounded_time_naming_its_holder() {
    let b = shared_base();
    let o = root_rdmakit(b.path(), &["--provider", "soft", "devinfo"]);
    assert!(o.status.success(), "{}", both(&o));
    let uid = rdmakit_soft::userdir::euid();
    let lock = b.path().join(format!("rdmakit-soft.{uid}/soft0/.lock"));
    let mut procs = Procs::default();
    let holder_pid = procs.keep_group(
        Command::new("flock")
            .args(["-x", "-o"])
            .arg(&lock)
            .args(["sleep", "30"])
            .stdin(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("flock (util-linux)"),
    );
    await_flock(&lock);
    let t0 = Instant::now();
    let o = root_rdmakit(b.path(), &["--provider", "soft", "devinfo"]);
    let took = t0.elapsed();
    procs.end(holder_pid);
    assert!(!o.status.success(), "{}", both(&o));
    assert!(took >= Duration::from_secs(4), "{took:?}");
    assert!(
        both(&o).contains(&format!(
            "the registry lock {} is held by pid {} (flock) for more than 5.0 s",
            lock.display(),
            holder_pid
        )),
        "{}",
        both(&o)
    );
}

/// The device-wide counters (`hw-…` and `.hw_counters` in each user's
/// directory) as the attacker writes them: root's `stat` and `metrics`
/// return in bounded time, follow no link, take no FIFO, count nothing
/// naming root's live process or past 4 KiB, report each, and take the
/// attacker's own numbers only as its own (saturating, never wrapping);
/// nothing root writes lands in the attacker's directory.
#[test]
fn forged_counters_are_ignored_reported_and_never_followed() {
    let t = targets();
    let file = t.file.display();
    let b = shared_base();
    let bd = b.path().display();
    let me = std::process::id();
    let start = rdmakit_soft::registry::proc_stat(me).unwrap().1;
    let max = u64::MAX;
    let big = "x".repeat(5000);
    let Some(()) = attacker_ok(&format!(
        "set -e; d={bd}/rdmakit-soft.{ATTACKER_UID}/soft0; mkdir -p $d; chmod 755 $d $d/..
         printf 'port_xmit_packets=1000\\n' > $d/hw-{me}-{start}-1
         mkfifo $d/hw-1-1-2; ln -s {file} $d/hw-1-1-3; ln -s {file} $d/hw-1-1-6
         printf '{big}' > $d/hw-1-1-4
         printf 'port_xmit_packets=7\\n' > $d/hw-1-1-5
         printf 'port_xmit_packets={max}\\nnp_cnp_sent=3\\n' > $d/.hw_counters"
    )) else {
        return;
    };
    // Root's own numbers: a closed context folded into its file.
    let own = rdmakit_soft::registry::Registry::open_in(b.path(), "soft0").unwrap();
    fs::write(own.dir().join(".hw_counters"), "port_xmit_packets=100\n").unwrap();
    let o = root_rdmakit(b.path(), &["stat", "--json"]);
    let out = both(&o);
    assert!(o.status.success(), "{out}");
    let rows: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let row = rows
        .as_array()
        .and_then(|r| r.iter().find(|x| x["ifname"] == "soft0"))
        .unwrap_or_else(|| panic!("no soft0 row: {out}"));
    assert_eq!(row["port_xmit_packets"], max, "{row}");
    assert_eq!(row["np_cnp_sent"], 3, "{row}");
    let users = row["users"].as_array().unwrap();
    assert_eq!(users[0]["counters"]["port_xmit_packets"], 100, "{row}");
    assert_eq!(users[1]["uid"], ATTACKER_UID, "{row}");
    for (name, why) in [
        (format!("hw-{me}-{start}-1"), "forged"),
        ("hw-1-1-2".into(), "not a regular file (a FIFO)"),
        ("hw-1-1-3".into(), "a symbolic link"),
        ("hw-1-1-4".into(), "more than the 4096"),
    ] {
        assert!(
            out.lines().any(|l| l.contains(&name) && l.contains(why)),
            "{name} not reported as {why}: {out}"
        );
    }
    for args in [&["metrics"][..], &["--provider", "soft", "devinfo"]] {
        root_rdmakit(b.path(), args);
    }
    t.untouched("root's stat, metrics and devinfo");
    let theirs = b.path().join(format!("rdmakit-soft.{ATTACKER_UID}/soft0"));
    for e in fs::read_dir(&theirs).unwrap() {
        let m = fs::symlink_metadata(e.unwrap().path()).unwrap();
        assert_eq!(
            m.uid(),
            ATTACKER_UID,
            "root wrote in the attacker's directory"
        );
    }
    assert!(
        theirs.join("hw-1-1-5").exists(),
        "root folded another user's file"
    );
}
