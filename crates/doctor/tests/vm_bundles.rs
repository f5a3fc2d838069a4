//! Bundles that `rdmakit collect` wrote inside the Soft-RoCE VM (scripts/vm, plans
//! `doctor` and `faults`: Debian 12's 6.1 kernel with rdma_rxe, rdma-core 44, rxe0 on
//! eth0), with the fault each scenario created for real. The fault catalogue
//! (vm_catalogue.rs) asserts every bundle's findings and exit status; the tests here
//! pin what the catalogue does not: the healthy baseline's check statuses, replay
//! completeness, and how the new rules behave around the real states. Refresh the
//! bundles with scripts/vm/refresh-fixtures (see scripts/vm/README.md).

mod common;

use std::path::PathBuf;

use common::*;
use rdmakit_doctor::checks::Status;
use rdmakit_doctor::codes::{Code, Severity};
use rdmakit_doctor::report::Report;
use rdmakit_host::bundle::Bundle;

fn vm_bundle(name: &str) -> Bundle {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/vm")
        .join(format!("{name}.json.gz"));
    Bundle::read(p.to_str().unwrap()).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn status(r: &Report, id: &str) -> Status {
    r.checks
        .iter()
        .find(|c| c.id == id)
        .unwrap_or_else(|| panic!("no check {id}"))
        .status
        .clone()
}

fn evidence(r: &Report, code: Code, path_end: &str) -> String {
    r.findings
        .iter()
        .filter(|f| f.code == code)
        .flat_map(|f| f.evidence.iter())
        .find(|e| e.path.ends_with(path_end))
        .unwrap_or_else(|| panic!("no {code:?} evidence {path_end}\n{}", summary(r)))
        .value
        .clone()
}

#[test]
fn vm_healthy_rxe() {
    let b = vm_bundle("healthy");
    let r = report(&b);
    assert!(
        codes_at(&r, Severity::Warning).is_empty(),
        "{}",
        summary(&r)
    );
    // the notes a live rxe on a 1500-byte virtio-net gets: GID index 1, MTU 1024
    assert_eq!(
        all_codes(&r),
        [Code::H007, Code::H008].into_iter().collect(),
        "{}",
        summary(&r)
    );
    for id in ["irq.vectors", "irq.affinity", "pcie.link"] {
        assert!(
            matches!(status(&r, id), Status::NotApplicable(_)),
            "{id}: {:?}",
            status(&r, id)
        );
    }
    for id in [
        "kernel.modules",
        "device.present",
        "port.state",
        "library.providers",
    ] {
        assert_eq!(status(&r, id), Status::Pass, "{id}\n{}", summary(&r));
    }
    assert_eq!(r.kernel.as_deref(), Some("6.1.0-57-amd64"));
}

/// The scenario's variables (tests/data/vm/NAME.vars: KEY=VALUE the plan observed).
fn vars(name: &str) -> std::collections::BTreeMap<String, String> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/vm")
        .join(format!("{name}.vars"));
    std::fs::read_to_string(&p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The leaked-QP case on a real kernel (plan `doctor`, scenario
/// `orphaned_by_fork`): python3 created 4 RC QPs on rxe0 through libibverbs, forked
/// (the child inherits the uverbs descriptor) and was killed with SIGKILL. The kernel
/// keeps the objects and stops naming an owner; doctor names the process that keeps
/// them alive, its descriptor, and the device's QP headroom against rxe's max_qp
/// (the catalogue, vm_catalogue.rs, asserts the rest).
#[test]
fn vm_objects_orphaned_by_a_killed_process_that_forked() {
    let healthy = report(&vm_bundle("healthy"));
    let b = vm_bundle("orphaned_by_fork");
    let r = report(&b);
    assert_adds(&healthy, &r, &[Code::R001]);
    let child = &vars("orphaned_by_fork")["child"];
    let f = r.findings.iter().find(|f| f.code == Code::R001).unwrap();
    assert!(
        f.message
            .contains("(rxe0: 5 of max_qp 1048560 QPs in use, headroom 1048555)"),
        "{}",
        f.message
    );
    assert_eq!(
        evidence(&r, Code::R001, "ibv_query_device(rxe0).max_qp"),
        "1048560"
    );
    let lqpn = evidence(&r, Code::R001, "RES_QP_GET rxe0");
    assert!(
        lqpn.starts_with("lqpn ") && lqpn.ends_with(" without RES_PID or RES_KERN_NAME"),
        "{lqpn}"
    );
    assert!(
        f.next.iter().any(|n| n.contains(child.as_str())),
        "{:?}",
        f.next
    );
}

/// The bundles carry every answer the doctor asks for: nothing is missing on replay
/// (a new question in `collect` needs fresh bundles: scripts/vm/refresh-fixtures).
#[test]
fn vm_bundles_replay_completely() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/vm");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        let Some(stem) = name.strip_suffix(".json.gz") else {
            continue;
        };
        let b = vm_bundle(stem);
        let _ = report(&b);
        assert_eq!(
            b.misses(),
            0,
            "{stem}: replay asked something the bundle lacks"
        );
        n += 1;
    }
    assert!(n >= 20, "only {n} bundles in {}", dir.display());
}

fn facts_of(name: &str) -> rdmakit_host::model::HostFacts {
    let b = vm_bundle(name);
    rdmakit_host::collect::collect(&b, &b.header.options.clone())
}

fn build(f: &rdmakit_host::model::HostFacts) -> Report {
    Report::build(f, &Default::default(), "rdmakit test", "vm bundle")
}

/// RDK-K012 rests on the netns mode RDMA netlink reports: the real exclusive-mode
/// bundle (plan faults, rdmakit inside netns blue) with the mode read as shared gives
/// no K012 (every namespace would see rxe0, so this would be another disagreement),
/// and without the mode the check is "not checked", never a guess.
#[test]
fn vm_netns_finding_needs_the_exclusive_mode() {
    let mut f = facts_of("netns_exclusive_inside");
    let r = build(&f);
    assert!(all_codes(&r).contains(&Code::K012));
    // The checklist's "Device visible" row fails with it (it is not "n/a": the device
    // exists and this namespace cannot see it).
    assert_eq!(
        (r.checklist[1].result, r.checklist[1].codes.clone()),
        ("fail", vec![Code::K012]),
        "{}",
        summary(&r)
    );
    let mut sys = f
        .netlink
        .sys
        .clone()
        .expect("SYS_GET answered in the bundle");
    sys.netns_mode = Some(1);
    f.netlink.sys = Ok(sys);
    let r = build(&f);
    assert!(!all_codes(&r).contains(&Code::K012), "{}", summary(&r));
    assert!(all_codes(&r).contains(&Code::H001), "{}", summary(&r));
    f.netlink.sys = Err(rdmakit_host::netlink::NlError::NotRecorded);
    let r = build(&f);
    assert!(
        matches!(status(&r, "kernel.netns"), Status::NotChecked(_)),
        "{:?}",
        status(&r, "kernel.netns")
    );
}

/// RDK-R002 on the real cgroup of plan faults (rdma.max rxe0 hca_object=12): usage
/// below 80 % says nothing, 80 % warns, 95 % and more is an error, and "max" (no
/// limit) never fires.
#[test]
fn vm_cgroup_limit_thresholds() {
    let base = facts_of("qp_leak_cgroup");
    let cgroup_findings = |used: Option<u64>, limit: Option<u64>| {
        let mut f = base.clone();
        let cg = f
            .rdma_cgroups
            .iter_mut()
            .find(|c| c.name == "/leak")
            .expect("the /leak cgroup was recorded");
        if let Some(v) = cg.current.value.as_mut() {
            v[0].hca_object = used;
        }
        if let Some(v) = cg.max.value.as_mut() {
            v[0].hca_object = limit;
        }
        build(&f)
            .findings
            .into_iter()
            .filter(|x| x.code == Code::R002)
            .map(|x| (x.subject, x.severity))
            .collect::<Vec<_>>()
    };
    let subject = "cgroup /leak rxe0".to_string();
    assert_eq!(cgroup_findings(Some(9), Some(12)), []);
    assert_eq!(
        cgroup_findings(Some(10), Some(12)),
        [(subject.clone(), Severity::Warning)]
    );
    assert_eq!(
        cgroup_findings(Some(12), Some(12)),
        [(subject.clone(), Severity::Error)]
    );
    assert_eq!(cgroup_findings(Some(12), None), []);
    // A limit of 0 allows nothing: at the limit whatever is charged.
    assert_eq!(
        cgroup_findings(Some(0), Some(0)),
        [(subject, Severity::Error)]
    );
}
