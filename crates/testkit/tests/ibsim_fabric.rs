//! The simulated fabric itself: a killed client's slot is freed, the SM
//! stops and starts, and dropping the fabric leaves nothing behind.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use rdmakit_testkit::ibsim::{attached, dumbbell, Fabric};

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

#[test]
fn a_killed_client_keeps_its_slot_until_freed_and_drop_leaves_nothing() {
    let mut f = Fabric::start(&dumbbell());
    let dir = f.dir().to_path_buf();
    let pids = f.pids();
    assert_eq!(pids.len(), 2, "ibsim and opensm");
    let mut server = f
        .command("ibping")
        .arg("-S")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start ibping -S under the preload");
    let pid = server.id();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !attached(&f.console("Attached"))
        .iter()
        .any(|&(_, p)| p == pid)
    {
        assert!(
            Instant::now() < deadline,
            "ibping -S never attached\n{}",
            f.logs()
        );
    }
    server.kill().unwrap();
    server.wait().unwrap();
    assert!(
        attached(&f.console("Attached"))
            .iter()
            .any(|&(_, p)| p == pid),
        "a client killed by a signal keeps its slot"
    );
    assert_eq!(f.free_leaked_slots(), 1);
    let after = attached(&f.console("Attached"));
    assert!(!after.iter().any(|&(_, p)| p == pid), "{after:?}");
    assert_eq!(after.len(), 1, "only opensm is left: {after:?}");

    drop(f);
    for p in pids {
        assert!(!alive(p), "process {p} outlived the fabric");
    }
    assert!(!dir.exists(), "{} outlived the fabric", dir.display());
}

#[test]
fn the_subnet_manager_stops_and_starts_again() {
    let mut f = Fabric::start(&dumbbell());
    let sminfo = |f: &mut Fabric| f.tool("sminfo", &["-t", "100"]);
    let up = sminfo(&mut f);
    assert!(up.status.success(), "{}", rdmakit_testkit::text(&up));
    assert!(rdmakit_testkit::text(&up).contains("SMINFO_MASTER"));
    let sm_pid = f.pids()[1];
    f.stop_sm();
    assert!(!alive(sm_pid), "opensm still runs");
    assert_eq!(f.pids().len(), 1);
    let down = sminfo(&mut f);
    assert!(
        !down.status.success(),
        "sminfo answered with no SM: {}",
        rdmakit_testkit::text(&down)
    );
    f.start_sm();
    let again = sminfo(&mut f);
    assert!(again.status.success(), "{}", rdmakit_testkit::text(&again));
    assert!(rdmakit_testkit::text(&again).contains("SMINFO_MASTER"));
}

#[test]
fn two_fabrics_side_by_side_do_not_meet() {
    let a = Fabric::start(&dumbbell());
    let mut b = Fabric::start(&dumbbell().replace("\"H1\"", "\"HX\""));
    assert_ne!(a.sockname(), b.sockname());
    let out = b.tool("smpquery", &["nodedesc", "1"]);
    let text = rdmakit_testkit::text(&out);
    assert!(out.status.success() && text.contains("HX"), "{text}");
}
