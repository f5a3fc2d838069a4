//! The soft NIC's device-wide resource registry across processes: limits
//! shared between processes; kernel-like lifetime (a killed process's
//! objects go with it, unless a forked child still holds its context — a
//! leak the doctor names with the child and its descriptor); and the leaked-QP
//! case end to end on a leaky device — an application killed with SIGKILL
//! leaves its QPs, the next one hits ENOSPC early, `rdmakit soft status` and
//! `rdmakit doctor` show the dead pid, `rdmakit soft reclaim` frees them
//! (refusing live owners) and creation works again.
//!
//! The child process is this test binary re-run with `RDK_REG_CHILD` set
//! (see `child_holder`). Every test uses its own device name, so tests run
//! in parallel and never touch a real user's registry.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};

use common::*;
use rdmakit_soft::proto::QpType;
use rdmakit_soft::registry::{OwnerState, Registry};
use rdmakit_soft::{Device, Errno, QpInit};

const CHILD_ENV: &str = "RDK_REG_CHILD";

fn unique(tag: &str) -> String {
    format!("rdkt-{tag}-{}", std::process::id())
}

fn open(name: &str, max_qp: u32, exhaustion: Errno) -> Device {
    open_as(name, max_qp, exhaustion, false)
}

fn open_as(name: &str, max_qp: u32, exhaustion: Errno, leaky: bool) -> Device {
    Device::open(soft_config(name, max_qp, exhaustion, leaky)).unwrap()
}

fn qp_init(pd: u32, cq: u32) -> QpInit {
    QpInit::new(QpType::Rc, pd, cq, 4)
}

/// Creates QPs until `n` exist or one fails; returns (created, errno or 0).
fn create_qps(dev: &Device, pd: u32, cq: u32, n: u32) -> (Vec<u32>, i32) {
    let mut v = Vec::new();
    for _ in 0..n {
        match dev.create_qp(&qp_init(pd, cq)) {
            Ok(q) => v.push(q),
            Err(e) => return (v, e.errno.0),
        }
    }
    (v, 0)
}

/// Not a test of its own: with `RDK_REG_CHILD=NAME,N,MAX_QP[,leaky][,fork]`
/// it is the child process that opens NAME (a leaky device with `leaky`),
/// creates N QPs, forks a grandchild that inherits the context and sleeps
/// (with `fork`, saying `child PID`), says `ready N`, and waits to be killed.
#[test]
fn child_holder() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let v: Vec<&str> = spec.split(',').collect();
    let (name, n) = (v[0], v[1]);
    let leaky = v.contains(&"leaky");
    let dev = open_as(name, v[2].parse().unwrap(), Errno::ENOSPC, leaky);
    let pd = dev.alloc_pd().unwrap();
    let cq = dev.create_cq(16, None).unwrap();
    let (made, errno) = create_qps(&dev, pd, cq, n.parse().unwrap());
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
    println!("ready {} {errno}", made.len());
    loop {
        std::thread::sleep(std::time::Duration::from_secs(3600));
    }
}

/// Starts a child holding `n` QPs on `name` and waits until it has them.
fn spawn_holder(name: &str, n: u32, max_qp: u32) -> Child {
    spawn_holder_with(name, n, max_qp, "").0
}

/// [`spawn_holder`] with flags (`,leaky`, `,fork`); also returns the
/// forked grandchild's pid.
fn spawn_holder_with(name: &str, n: u32, max_qp: u32, flags: &str) -> (Child, Option<u32>) {
    let mut grandchild = None;
    let mut c = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_holder", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, format!("{name},{n},{max_qp}{flags}"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = c.stdout.take().unwrap();
    for line in BufReader::new(out).lines() {
        let line = line.unwrap();
        if let Some(pid) = line.split_once("child ").map(|(_, r)| r) {
            grandchild = pid.trim().parse().ok();
        }
        // libtest prints "test child_holder ... " before the child's line.
        if let Some(rest) = line.split_once("ready ").map(|(_, r)| r) {
            assert_eq!(rest, format!("{n} 0"), "child could not create its QPs");
            return (c, grandchild);
        }
    }
    let _ = c.kill();
    let _ = c.wait();
    panic!("child exited before it was ready");
}

/// The QPNs `pid` holds on device `name`, as `rdmakit soft` lists them.
fn qpns_of(name: &str, pid: u32) -> String {
    let mut q: Vec<u32> = Registry::open(name)
        .unwrap()
        .list()
        .unwrap()
        .into_iter()
        .filter(|r| r.pid == pid && r.kind.as_str() == "qp")
        .map(|r| r.handle)
        .collect();
    q.sort_unstable();
    let q: Vec<String> = q.iter().map(u32::to_string).collect();
    q.join(" ")
}

/// SIGKILL, then reap (a dead owner, not a zombie).
fn kill9(mut c: Child) -> u32 {
    let pid = c.id();
    c.kill().unwrap(); // std's kill is SIGKILL
    c.wait().unwrap();
    pid
}

fn rdmakit(name: &str, args: &[&str]) -> Output {
    bin()
        .args(args)
        .env("RDMAKIT_SOFT_NAME", name)
        .output()
        .unwrap()
}

struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Ok(r) = Registry::open(&self.0) {
            let _ = std::fs::remove_dir_all(r.dir());
        }
    }
}

#[test]
fn two_processes_share_limits() {
    let name = unique("share");
    let _c = Cleanup(name.clone());
    let child = spawn_holder(&name, 3, 4);
    let child_pid = child.id();

    // max_qp 4 on the device: the child's 3 live QPs leave room for one.
    let dev = open(&name, 4, Errno::EINVAL);
    let pd = dev.alloc_pd().unwrap();
    let cq = dev.create_cq(16, None).unwrap();
    let (made, errno) = create_qps(&dev, pd, cq, 4);
    assert_eq!((made.len(), errno), (1, Errno::EINVAL.0));

    let reg = Registry::open(&name).unwrap();
    let theirs: Vec<_> = reg
        .list()
        .unwrap()
        .into_iter()
        .filter(|r| r.pid == child_pid && r.kind.as_str() == "qp")
        .collect();
    assert_eq!(theirs.len(), 3);
    assert!(theirs.iter().all(|r| r.owner_state() == OwnerState::Alive));

    // Kernel-like lifetime: the killed child's objects go with it (nothing
    // else holds its context); ours through destroy.
    kill9(child);
    assert!(
        !reg.list().unwrap().iter().any(|r| r.pid == child_pid),
        "a dead process's objects are gone"
    );
    for q in made {
        dev.destroy_qp(q).unwrap();
    }
    let (made, errno) = create_qps(&dev, pd, cq, 4);
    assert_eq!((made.len(), errno), (4, 0));
    drop(dev);
    assert!(reg.list().unwrap().is_empty(), "Drop removes every record");
    // And the files are gone too: no record, no context file of anyone.
    let left = rdmakit_testkit::file_names(reg.dir(), |n| !n.starts_with('.'));
    assert!(left.is_empty(), "{left:?}");
}

/// A forked child that inherited the context keeps the objects
/// of its killed parent (as the kernel keeps them for a child holding the
/// uverbs descriptor); status and doctor name the child and its descriptor;
/// reclaim refuses; the objects go with the child.
#[test]
fn a_forked_child_keeps_a_dead_parents_objects_and_doctor_names_it() {
    let name = unique("fork");
    let _c = Cleanup(name.clone());
    let (parent, child) = spawn_holder_with(&name, 4, 16, ",fork");
    let child = child.expect("the holder printed its child's pid");
    let parent = kill9(parent);
    let reg = Registry::open(&name).unwrap();
    let recs = reg.list().unwrap();
    let theirs: Vec<_> = recs.iter().filter(|r| r.pid == parent).collect();
    assert_eq!(theirs.iter().filter(|r| r.kind.as_str() == "qp").count(), 4);
    assert!(theirs
        .iter()
        .all(|r| r.holding == rdmakit_soft::registry::Holding::Inherited));

    let o = rdmakit(&name, &["soft", "status", "--device", &name]);
    let s = text(&o.stdout);
    assert!(
        s.contains(&format!("pid {parent:<8} dead    qp 4"))
            && s.contains(&format!("context held by pid {child} (/proc/{child}/fd/")),
        "{s}"
    );

    let o = rdmakit(&name, &["doctor", "--device", &name, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", text(&o.stdout), text(&o.stderr)));
    let f = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "RDK-R001")
        .unwrap_or_else(|| panic!("no RDK-R001 in {v:#}"));
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains(&format!("held by pid {child}")),
        "{f:#}"
    );
    let ctx = format!("ctx-{parent}-");
    assert!(
        f["evidence"].as_array().unwrap().iter().any(|e| e["path"]
            .as_str()
            .unwrap()
            .starts_with(&format!("/proc/{child}/fd/"))
            && e["value"].as_str().unwrap().contains(&ctx)),
        "{f:#}"
    );

    let o = rdmakit(&name, &["soft", "reclaim", "--device", &name]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains(&format!("its context is still held by pid {child}")),
        "{}",
        text(&o.stderr)
    );

    // SAFETY: kill(2) on the grandchild this test started.
    unsafe { libc::kill(child as i32, libc::SIGKILL) };
    let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while reg.list().unwrap().iter().any(|r| r.pid == parent) {
        assert!(
            std::time::Instant::now() < end,
            "the objects outlived their last holder"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn leaked_qps_of_a_killed_process_enospc_doctor_and_reclaim() {
    let name = unique("leak");
    let _c = Cleanup(name.clone());

    // On a leaky device an application creates 5 QPs and is killed with
    // SIGKILL: they stay.
    let dead = kill9(spawn_holder_with(&name, 5, 8, ",leaky").0);
    let dead_qpns = qpns_of(&name, dead);

    // The next one, on a device with max_qp 8, runs out after 3: ENOSPC.
    let dev = open(&name, 8, Errno::ENOSPC);
    let pd = dev.alloc_pd().unwrap();
    let cq = dev.create_cq(16, None).unwrap();
    let (mine, errno) = create_qps(&dev, pd, cq, 8);
    assert_eq!((mine.len(), errno), (3, Errno::ENOSPC.0));

    // status: the dead pid and its objects.
    let o = rdmakit(&name, &["soft", "status", "--device", &name]);
    let s = text(&o.stdout);
    assert!(o.status.success(), "{s}{}", text(&o.stderr));
    assert!(
        s.contains(&format!("pid {dead:<8} dead    qp 5 ({})", dead_qpns)),
        "{s}"
    );
    let me = std::process::id();
    assert!(s.contains(&format!("pid {me:<8} alive   qp 3")), "{s}");

    // doctor: RDK-R001 with the dead pid, remedy reclaim.
    let o = rdmakit(&name, &["doctor", "--device", &name, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", text(&o.stdout), text(&o.stderr)));
    let r001: Vec<_> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"] == "RDK-R001")
        .collect();
    assert_eq!(r001.len(), 1, "{v:#}");
    let f = r001[0];
    assert_eq!(f["subject"], format!("pid {dead}"));
    assert!(f["message"].as_str().unwrap().contains("5 QPs"), "{f:#}");
    assert!(
        f["remedy"]
            .as_str()
            .unwrap()
            .contains(&format!("rdmakit soft reclaim --device {name}")),
        "{f:#}"
    );
    assert_eq!(f["evidence"][0]["path"], format!("/proc/{dead}/stat"));
    assert_eq!(f["evidence"][0]["value"], "<absent>");
    // RDK-R002: the device is at its limit, 5 of the 8 QPs are the dead pid's.
    let r002: Vec<_> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"] == "RDK-R002" && f["subject"] == format!("{name} qp"))
        .collect();
    assert_eq!(r002.len(), 1, "{v:#}");
    let m = r002[0]["message"].as_str().unwrap();
    assert!(
        m.contains("8 of 8 QPs in use across processes (100%, headroom 0); 5 of them"),
        "{m}"
    );
    assert!(r002[0]["remedy"]
        .as_str()
        .unwrap()
        .contains("rdmakit soft reclaim"));

    // dry run frees nothing.
    let o = rdmakit(&name, &["soft", "reclaim", "--device", &name, "--dry-run"]);
    assert!(text(&o.stdout).contains("would free qp 5"));
    assert_eq!(create_qps(&dev, pd, cq, 1).1, Errno::ENOSPC.0);

    // reclaim: frees the dead pid's objects, refuses ours (alive): exit 1.
    let o = rdmakit(&name, &["soft", "reclaim", "--device", &name]);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    assert!(
        out.contains(&format!(
            "freed qp 5 ({dead_qpns}), cq 1 (1), pd 1 (1) of dead pid {dead}"
        )),
        "{out}"
    );
    assert!(
        err.contains("refused to reclaim qp 3") && err.contains(&format!("pid {me} (alive")),
        "{err}"
    );

    // Creation works again, up to the limit.
    let (more, errno) = create_qps(&dev, pd, cq, 5);
    assert_eq!((more.len(), errno), (5, 0));
    assert_eq!(create_qps(&dev, pd, cq, 1).1, Errno::ENOSPC.0);

    // Nothing leaked is left for doctor to report.
    let o = rdmakit(&name, &["doctor", "--device", &name, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        !v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["code"] == "RDK-R001"),
        "{v:#}"
    );
}

/// `rdmakit res qp --json` on this machine lists the soft-NIC
/// QPs of a process killed with SIGKILL (on a leaky device), with a dead owner, like rxe's objects in
/// `rdma -j res show qp`; `rdmakit res` counts them per device and marks the leak.
/// On a host without kernel RDMA (this build machine) both exit 0 and say on stderr
/// that there are no kernel RDMA devices. `--pid` keeps that process's objects.
#[test]
fn res_lists_a_killed_process_qps_with_a_dead_owner() {
    let name = unique("res");
    let _c = Cleanup(name.clone());
    // A leaky device keeps a killed process's objects (a kernel device keeps them
    // only while a forked child holds the uverbs file).
    let dead = kill9(spawn_holder_with(&name, 3, 8, ",leaky").0);

    let o = rdmakit(&name, &["res", "qp", "--json"]);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    if !std::path::Path::new("/sys/class/infiniband").exists() {
        assert!(err.contains("no kernel RDMA devices"), "{err}");
    }
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let mine: Vec<&serde_json::Value> = v
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["ifname"] == name.as_str())
        .collect();
    // The soft NIC's QPNs are `slot << 14 | index` (one slot per context): the
    // holder's three QPs are indices 17, 18, 19 of one slot.
    let qpns: Vec<u64> = mine.iter().map(|r| r["lqpn"].as_u64().unwrap()).collect();
    let idx: Vec<u64> = qpns.iter().map(|q| q & 0x3fff).collect();
    assert_eq!(idx, [17, 18, 19], "{out}");
    assert!(
        qpns.iter()
            .all(|q| q >> 14 == qpns[0] >> 14 && q >> 14 != 0),
        "{out}"
    );
    for r in &mine {
        assert_eq!(r["pid"], dead, "{r}");
        assert_eq!(r["owner-state"], "dead", "{r}");
        assert_eq!(r["port"], 1, "{r}");
    }

    // Human: the rdma-style line, dead owner marked.
    let o = rdmakit(&name, &["res", "qp", &name]);
    assert_eq!(o.status.code(), Some(0));
    assert!(
        text(&o.stdout).contains(&format!(
            "link {name}/1 lqpn {} pid {dead} owner-state dead",
            qpns[0]
        )),
        "{}",
        text(&o.stdout)
    );

    // The summary: one row for the device, its counts and the leak.
    let o = rdmakit(&name, &["res", "--json", &name]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 1, "{v:#}");
    assert_eq!(v[0]["ifname"], name.as_str());
    assert_eq!(
        (
            v[0]["qp"].as_u64(),
            v[0]["cq"].as_u64(),
            v[0]["pd"].as_u64()
        ),
        (Some(3), Some(1), Some(1))
    );
    assert_eq!(v[0]["leaked"], 5);

    // --pid: the dead process's objects, every kind; another's: none.
    let dead_s = dead.to_string();
    let o = rdmakit(&name, &["res", "qp", &name, "--pid", &dead_s, "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 3, "{v:#}");
    let o = rdmakit(&name, &["res", &name, "--pid", &dead_s]);
    assert!(
        text(&o.stdout).starts_with(&format!(
            "-: {name}: (rdmakit soft NIC) pid {dead} pd 1 cq 1 qp 3 mr 0 srq 0 ah 0 leaked 5"
        )),
        "{}",
        text(&o.stdout)
    );
    let o = rdmakit(&name, &["res", "qp", &name, "--pid", "1", "--json"]);
    assert_eq!(text(&o.stdout), "[]\n");

    // After reclaim nothing of it is left.
    let o = rdmakit(&name, &["soft", "reclaim", "--device", &name]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = rdmakit(&name, &["res", "qp", "--json", &name]);
    assert_eq!(text(&o.stdout), "[]\n");
}
