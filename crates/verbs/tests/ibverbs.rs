//! The rdma-core (dlopen) provider on this host: a missing library and a
//! file that is not libibverbs fail in library-layer terms; Debian's real
//! libibverbs without kernel RDMA reports the kernel's ENOSYS; the
//! provider-independent suite passes on the soft NIC. (The shim runs in its
//! own test binary, ibverbs_shim.rs: once a library with the soname
//! libibverbs.so.1 is loaded, `dlopen("libibverbs.so.1")` in the same
//! process returns it.)

use std::time::Duration;

use rdmakit_verbs::ibverbs::{suite, IbverbsProvider};
use rdmakit_verbs::{Context, DeviceConfig, Errno, Layer, Provider};

const T: Duration = Duration::from_secs(10);

#[test]
fn a_missing_library_is_a_library_layer_error_naming_the_file_and_dlerror() {
    let e = IbverbsProvider::load_from("/nonexistent/rdmakit/libibverbs.so.1").unwrap_err();
    assert_eq!(
        (e.verb, e.errno, e.layer),
        ("dlopen", Errno::ENOENT, Layer::Library)
    );
    assert!(
        e.detail.contains("/nonexistent/rdmakit/libibverbs.so.1"),
        "{e}"
    );
    // dlerror's own words.
    assert!(e.detail.contains("No such file or directory"), "{e}");
    let e = IbverbsProvider::load_from("libibverbs-does-not-exist.so.9").unwrap_err();
    assert!(e.detail.contains("search path"), "{e}");
}

#[test]
fn a_library_that_is_not_libibverbs_is_refused() {
    let e = IbverbsProvider::load_from("libc.so.6").unwrap_err();
    assert_eq!(
        (e.verb, e.errno, e.layer),
        ("dlopen", Errno::ENOSYS, Layer::Library)
    );
    assert!(e.detail.contains("ibv_get_device_list"), "{e}");
}

/// Debian's libibverbs1 on this host: without kernel RDMA it answers
/// ENOSYS, which is the kernel layer's; with devices it lists them.
#[test]
fn the_system_libibverbs_lists_devices_or_reports_the_missing_kernel_support() {
    let p = match IbverbsProvider::load_from(&rdmakit_verbs::ibverbs::select::library_from_env()) {
        Ok(p) => p,
        Err(e) => {
            // No libibverbs installed: the error must say so.
            assert_eq!((e.verb, e.layer), ("dlopen", Layer::Library), "{e}");
            eprintln!("libibverbs.so.1 not installed: {e}");
            return;
        }
    };
    let kernel = std::path::Path::new("/sys/class/infiniband_verbs/abi_version").exists();
    match p.device_names() {
        Ok(names) => {
            assert!(kernel, "devices {names:?} without ib_uverbs?");
            let sys: Vec<String> = std::fs::read_dir("/sys/class/infiniband")
                .map(|d| {
                    d.filter_map(|e| e.ok())
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default();
            for n in &names {
                assert!(sys.contains(n), "{n} not in /sys/class/infiniband {sys:?}");
            }
        }
        Err(e) => {
            assert!(!kernel, "ib_uverbs is loaded but listing failed: {e}");
            assert_eq!(
                (e.verb, e.errno, e.layer),
                ("ibv_get_device_list", Errno::ENOSYS, Layer::Kernel)
            );
            assert!(e.detail.contains("ib_uverbs"), "{e}");
            // And opening anything names the same cause.
            let e = Context::open(&p, "rxe0").unwrap_err();
            assert_eq!(e.errno, Errno::ENOSYS);
        }
    }
}

#[test]
fn the_suite_passes_on_two_soft_nics() {
    let a = Context::open_soft(DeviceConfig::default()).unwrap();
    let b = Context::open_soft(DeviceConfig::default()).unwrap();
    let r = suite::run(&a, &b, T, None);
    assert_eq!(r.len(), suite::CASES.len());
    for c in &r {
        assert!(c.passed, "{}: {}", c.name, c.detail);
    }
}
