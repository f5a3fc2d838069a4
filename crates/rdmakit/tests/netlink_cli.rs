//! `rdmakit dev / link / res / stat / monitor` against the real netlink replies of
//! fixtures/ (healthy, healthy-busy: 6.1 kernel, rxe), compared field for field
//! with what iproute2's `rdma -j` printed for the same state (cmd/rdma-j-*.out).
//!
//! Justified differences, checked here rather than hidden:
//! - healthy-busy was captured while ib_write_bw ran: PSNs and packet counters moved
//!   between the netlink capture and the `rdma` commands, so in that scenario
//!   `rq-psn`, `sq-psn` and the statistic counters are compared as numbers, not
//!   values.
//! - The captures hold no /proc/<pid>: `rdma` read the process names live, rdmakit
//!   cannot, so user-owned objects have no "comm" and "owner-state" is "unknown".
//! - rdmakit adds "owner-state" (alive / dead / zombie / kernel / unknown).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::*;
use serde_json::Value;

/// A cmd/*.out file without its final "exit=N" line.
fn cmd_out(scn: &str, name: &str) -> String {
    let text = std::fs::read_to_string(fixtures().join(scn).join("cmd").join(name)).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.pop(), Some("exit=0"), "{scn}/{name}");
    lines.join("\n")
}

fn ours(scn: &str, args: &[&str]) -> Output {
    let dir = fixtures().join(scn);
    let mut a = args.to_vec();
    a.extend(["--from", dir.to_str().unwrap()]);
    rdmakit(&a)
}

fn ours_json(scn: &str, args: &[&str]) -> Vec<Value> {
    let mut a = args.to_vec();
    a.push("--json");
    let o = ours(scn, &a);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)));
    v.as_array().unwrap().clone()
}

/// Keys whose values moved between the netlink capture and the `rdma` commands.
fn volatile(scn: &str, file: &str, key: &str) -> bool {
    scn == "healthy-busy"
        && (key == "rq-psn"
            || key == "sq-psn"
            || (file == "rdma-j-statistic.out" && key != "ifname" && key != "port"))
}

/// Every object iproute2 printed has its twin, in the same order, with the same keys
/// and values (see the module doc for the documented exceptions).
fn compare(scn: &str, file: &str, args: &[&str]) -> usize {
    let theirs: Value = serde_json::from_str(&cmd_out(scn, file)).unwrap();
    let theirs = theirs.as_array().unwrap();
    let ours = ours_json(scn, args);
    assert_eq!(ours.len(), theirs.len(), "{scn} {file}: object count");
    let mut checked = 0;
    for (i, (o, t)) in ours.iter().zip(theirs).enumerate() {
        let (o, t) = (o.as_object().unwrap(), t.as_object().unwrap());
        let unknown_owner = o.get("owner-state") == Some(&Value::from("unknown"));
        for (k, tv) in t {
            if k == "comm" && unknown_owner {
                assert!(t.contains_key("pid"), "{scn} {file}[{i}]: kernel comm lost");
                assert!(
                    !o.contains_key("comm"),
                    "{scn} {file}[{i}]: comm without /proc"
                );
                continue;
            }
            let ov = o
                .get(k)
                .unwrap_or_else(|| panic!("{scn} {file}[{i}]: key {k:?} missing in {o:?}"));
            if volatile(scn, file, k) {
                assert!(ov.is_u64() && tv.is_u64(), "{scn} {file}[{i}] {k}");
            } else {
                assert_eq!(ov, tv, "{scn} {file}[{i}] key {k}");
            }
            checked += 1;
        }
        for k in o.keys() {
            assert!(
                t.contains_key(k) || k == "owner-state" || (k == "comm" && !unknown_owner),
                "{scn} {file}[{i}]: extra key {k:?}"
            );
        }
    }
    checked
}

const CASES: [(&str, &[&str]); 8] = [
    ("rdma-j-dev.out", &["dev"]),
    ("rdma-j-link.out", &["link"]),
    ("rdma-j-resource.out", &["res"]),
    ("rdma-j-resource-show-qp.out", &["res", "qp"]),
    ("rdma-j-resource-show-cq.out", &["res", "cq"]),
    ("rdma-j-resource-show-mr.out", &["res", "mr"]),
    ("rdma-j-resource-show-pd.out", &["res", "pd"]),
    ("rdma-j-statistic.out", &["stat"]),
];

#[test]
fn netlink_json_matches_rdma_j_healthy() {
    for (file, args) in CASES {
        compare("healthy", file, args);
    }
}

#[test]
fn netlink_json_matches_rdma_j_healthy_busy() {
    let mut n = 0;
    for (file, args) in CASES {
        n += compare("healthy-busy", file, args);
    }
    assert!(n > 100, "{n} fields compared");
}

/// healthy-busy: the three test programs' PIDs, owner state unknown (the capture has
/// no process table), the kernel's GSI QP owned by ib_core.
#[test]
fn netlink_busy_owners_unknown_not_dead() {
    let qps = ours_json("healthy-busy", &["res", "qp"]);
    let pids: Vec<u64> = qps.iter().filter_map(|q| q["pid"].as_u64()).collect();
    assert_eq!(pids, [342, 345, 343]);
    for q in &qps {
        let want = if q.get("pid").is_some() {
            "unknown"
        } else {
            "kernel"
        };
        assert_eq!(q["owner-state"], want, "{q}");
    }
}

/// Human output is `rdma`'s line for line (healthy: nothing moves), except
/// rdmakit's lines carry no trailing blank.
#[test]
fn netlink_human_matches_rdma_healthy() {
    let cases: [(&str, &[&str]); 8] = [
        ("rdma-dev.out", &["dev"]),
        ("rdma-link.out", &["link"]),
        ("rdma-resource.out", &["res"]),
        ("rdma-resource-show-qp.out", &["res", "qp"]),
        ("rdma-resource-show-cq.out", &["res", "cq"]),
        ("rdma-resource-show-mr.out", &["res", "mr"]),
        ("rdma-resource-show-pd.out", &["res", "pd"]),
        ("rdma-statistic.out", &["stat"]),
    ];
    for (file, args) in cases {
        let o = ours("healthy", args);
        assert_eq!(o.status.code(), Some(0), "{args:?}");
        let want: Vec<String> = cmd_out("healthy", file)
            .lines()
            .map(|l| l.trim_end().to_string())
            .collect();
        let got: Vec<String> = String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(str::to_string)
            .collect();
        assert_eq!(got, want, "{file}");
    }
}

/// An object the capture never asked about: a clear note and exit 3 (part of
/// the answer could not be read), no panic.
#[test]
fn netlink_not_recorded_is_exit_3() {
    for args in [&["res", "ctx"][..], &["res", "cm_id"], &["stat", "qp"]] {
        let o = ours("healthy", args);
        assert_eq!(o.status.code(), Some(3), "{args:?}");
        assert!(String::from_utf8_lossy(&o.stderr).contains("not recorded"));
    }
}

fn copy_netlink(from: &Path, to: &Path) {
    std::fs::create_dir_all(to.join("root")).unwrap();
    std::fs::create_dir_all(to.join("netlink")).unwrap();
    for e in std::fs::read_dir(from.join("netlink")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join("netlink").join(e.file_name())).unwrap();
    }
}

/// A truncated QP dump and a garbage PD dump: reported per object, exit 3, never a
/// panic; the rest still prints.
#[test]
fn netlink_malformed_replies_are_reported() {
    let tmp = tempfile::tempdir().unwrap();
    copy_netlink(&fixtures().join("healthy-busy"), tmp.path());
    let nl = tmp.path().join("netlink");
    let qp = std::fs::read(nl.join("op10-res-qp-get.bin")).unwrap();
    std::fs::write(nl.join("op10-res-qp-get.bin"), &qp[..qp.len() / 2]).unwrap();
    std::fs::write(nl.join("op14-res-pd-get.bin"), [0xffu8; 40]).unwrap();
    let dir = tmp.path().to_str().unwrap();
    for (kind, why) in [("qp", "malformed reply"), ("pd", "malformed reply")] {
        let o = rdmakit(&["res", kind, "--from", dir]);
        assert_eq!(o.status.code(), Some(3), "{kind}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(why), "{kind}: {err}");
    }
    let o = rdmakit(&["res", "cq", "--from", dir]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count(), 4);
}

/// `rdmakit collect` records the netlink answers: the bundle replays `res qp`.
#[test]
fn netlink_collect_bundle_replays() {
    let tmp = tempfile::tempdir().unwrap();
    let bundle = tmp.path().join("b.json");
    let dir = fixtures().join("healthy-busy");
    let o = rdmakit(&[
        "collect",
        "--from",
        dir.to_str().unwrap(),
        "-o",
        bundle.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0));
    let a = rdmakit(&["res", "qp", "--json", "--from", bundle.to_str().unwrap()]);
    let b = ours("healthy-busy", &["res", "qp", "--json"]);
    assert_eq!(a.status.code(), Some(0));
    assert_eq!(a.stdout, b.stdout);
}

/// Live: without NETLINK_RDMA, `dev` lists nothing and says why (exit 0: there
/// are no kernel RDMA devices) and `monitor` has nothing to subscribe to (exit
/// 3), both naming the kernel layer; with it, `dev` works and `monitor` waits for
/// events (stopped after 2 s).
#[test]
fn netlink_live_dev_and_monitor() {
    let o = rdmakit(&["dev", "--json"]);
    assert_eq!(o.status.code(), Some(0));
    let err = String::from_utf8_lossy(&o.stderr);
    if !err.is_empty() {
        assert!(err.contains("no kernel RDMA devices"), "{err}");
        assert!(err.contains("checks the kernel layer"), "{err}");
        assert_eq!(String::from_utf8_lossy(&o.stdout), "[]\n");
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_rdmakit"))
        .arg("monitor")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            assert_eq!(st.code(), Some(3));
            let mut err = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
            assert!(err.contains("kernel layer"), "{err}");
            break;
        }
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            let _ = child.wait();
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn netlink_bad_arguments() {
    let dir = fixtures().join("healthy");
    let d = dir.to_str().unwrap();
    for args in [
        &["res", "qpx", "--from", d][..],
        &["link", "rxe0/x", "--from", d],
        &["dev", "mlx5_9", "--from", d],
    ] {
        let o = rdmakit(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
    }
}

/// A bundle recorded by `rdmakit collect` inside the VM tier (real 6.1 kernel, rxe,
/// live NETLINK_RDMA, including the ctx / srq / cm_id and QP-counter dumps the
/// fixtures lack): every command replays it with exit 0.
#[test]
fn netlink_vm_bundle_replays_every_command() {
    let b =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../doctor/tests/data/vm/healthy.json.gz");
    assert!(b.is_file(), "{} is part of the repository", b.display());
    let b = b.to_str().unwrap();
    for args in [
        &["dev"][..],
        &["link"],
        &["res"],
        &["res", "qp"],
        &["res", "cq"],
        &["res", "mr"],
        &["res", "pd"],
        &["res", "ctx"],
        &["res", "srq"],
        &["res", "cm_id"],
        &["stat"],
        &["stat", "qp"],
    ] {
        let mut a = args.to_vec();
        a.extend(["--json", "--from", b]);
        let o = rdmakit(&a);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert!(v.is_array());
    }
}

/// `res KIND --pid N` (`rdma res show KIND pid N`): healthy-busy's three test
/// programs, each kind — exactly the objects iproute2's `rdma -j` listed with
/// that pid, in text and JSON; without a kind, that process's count per kind.
#[test]
fn netlink_res_pid_keeps_that_process_objects() {
    let ids = [("qp", "lqpn"), ("cq", "cqn"), ("mr", "mrn"), ("pd", "pdn")];
    for (kind, id) in ids {
        let theirs: Value = serde_json::from_str(&cmd_out(
            "healthy-busy",
            &format!("rdma-j-resource-show-{kind}.out"),
        ))
        .unwrap();
        for pid in [342u64, 343, 345] {
            let want: Vec<&Value> = theirs
                .as_array()
                .unwrap()
                .iter()
                .filter(|o| o["pid"].as_u64() == Some(pid))
                .map(|o| &o[id])
                .collect();
            assert_eq!(want.len(), 1, "{kind} {pid}");
            let p = pid.to_string();
            let got = ours_json("healthy-busy", &["res", kind, "--pid", &p]);
            let got: Vec<&Value> = got.iter().map(|o| &o[id]).collect();
            assert_eq!(got, want, "{kind} --pid {pid}");
            let o = ours("healthy-busy", &["res", kind, "--pid", &p]);
            let lines = String::from_utf8_lossy(&o.stdout).into_owned();
            assert_eq!(lines.lines().count(), 1, "{lines}");
            assert!(
                lines.contains(&format!(" pid {pid} owner-state unknown")),
                "{lines}"
            );
        }
    }
    // The summary of one process: counted from the dumps; ctx was not recorded.
    let o = ours("healthy-busy", &["res", "--pid", "345"]);
    assert_eq!(o.status.code(), Some(3));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "0: rxe0: pid 345 pd 1 cq 1 qp 1 cm_id 0 mr 1 srq 0\n"
    );
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "rdmakit: rxe0: pid 345: ctx: not recorded in this source\n"
    );
}
