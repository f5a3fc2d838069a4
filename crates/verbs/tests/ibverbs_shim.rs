//! The provider-independent suite through this crate's rdma-core provider
//! on the rdmakit shim (a libibverbs.so.1 over the soft NIC): the provider's
//! dlopen, its ops-table data path and the C ABI, end to end.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rdmakit_verbs::ibverbs::{suite, IbverbsProvider};
use rdmakit_verbs::{Context, Errno, Layer, Provider};

const T: Duration = Duration::from_secs(10);

/// The shim built by this workspace (target/<profile>/libibverbs.so), or
/// `RDMAKIT_TEST_SHIM`.
fn shim() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("RDMAKIT_TEST_SHIM") {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    let lib = exe.parent()?.parent()?.join("libibverbs.so");
    if lib.exists() {
        return Some(lib);
    }
    assert!(
        std::env::var_os("RDMAKIT_REQUIRE_SHIM").is_none(),
        "{} was not built (cargo build -p rdmakit-ibverbs-shim)",
        lib.display()
    );
    eprintln!(
        "SKIP: {} not built (cargo build -p rdmakit-ibverbs-shim)",
        lib.display()
    );
    None
}

#[test]
fn the_suite_passes_through_this_provider_on_the_shim() {
    let Some(lib) = shim() else { return };
    let p = IbverbsProvider::load_from(lib.to_str().unwrap()).unwrap();
    let names = p.device_names().unwrap();
    assert!(!names.is_empty(), "the shim lists no device");
    // Two opens of the shim's device: two soft NICs, two addresses.
    let a = Context::open(&p, &names[0]).unwrap();
    let b = Context::open(&p, &names[0]).unwrap();
    assert!(a.soft().is_none(), "must go through the C ABI");
    let r = suite::run(&a, &b, T, None);
    let failed: Vec<String> = r
        .iter()
        .filter(|c| !c.passed)
        .map(|c| format!("{}: {}", c.name, c.detail))
        .collect();
    assert!(failed.is_empty(), "{failed:#?}");
    assert_eq!(r.len(), suite::CASES.len());
    // Limits for doctor come from ibv_query_device through the ABI.
    let (limits, errs) = p.device_limits().unwrap();
    assert!(errs.is_empty(), "{errs:?}");
    let d = &limits[0].attr;
    assert!(
        d.max_qp > 0 && d.max_cq > 0 && d.max_mr > 0 && d.max_pd > 0,
        "{d:?}"
    );
    assert_eq!(d.max_qp, a.query_device().unwrap().max_qp);
}

#[test]
fn shim_errors_keep_verb_errno_and_bad_wr() {
    let Some(lib) = shim() else { return };
    let p = IbverbsProvider::load_from(lib.to_str().unwrap()).unwrap();
    let names = p.device_names().unwrap();
    let e = Context::open(&p, "no-such-dev").unwrap_err();
    assert_eq!(
        (e.verb, e.errno, e.layer),
        ("ibv_open_device", Errno::ENODEV, Layer::Library)
    );
    assert!(e.detail.contains(&names[0]), "{e}");
    let ctx: Arc<Context> = Context::open(&p, &names[0]).unwrap();
    let e = ctx.query_port(9).unwrap_err();
    assert_eq!((e.verb, e.errno), ("ibv_query_port", Errno::EINVAL));
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(16, None).unwrap();
    // A CQ with no channel cannot be armed.
    let e = cq.req_notify(false).unwrap_err();
    assert_eq!(e.errno, Errno::EINVAL);
    // Receives on a QP in RESET: rxe (and the shim) refuse the post.
    let qp = pd
        .qp_builder(rdmakit_verbs::QpType::Rc, &cq)
        .max_recv_wr(4)
        .build()
        .unwrap();
    let buf = pd.alloc_buf(4096, rdmakit_verbs::Access::all()).unwrap();
    let wrs: Vec<rdmakit_verbs::RecvWr> = (0..8)
        .map(|i| rdmakit_verbs::RecvWr {
            wr_id: i,
            sg_list: vec![buf.sge(0..64).unwrap()],
        })
        .collect();
    let e = qp.post_recv(&wrs).unwrap_err();
    assert_eq!((e.verb, e.layer), ("ibv_post_recv", Layer::Library), "{e}");
    assert!(e.bad_wr.is_some(), "{e}");
}
