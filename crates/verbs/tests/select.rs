//! Provider selection (`RDMAKIT_PROVIDER`, `RDMAKIT_IBVERBS_LIB`). One test
//! in its own binary: it changes the process environment.

use rdmakit_verbs::{default_provider, devices, open_device, Errno, Layer, ProviderChoice};

#[test]
fn auto_falls_back_to_the_soft_nic_and_explicit_ibverbs_reports_the_library() {
    let soft = std::env::var("RDMAKIT_SOFT_NAME").unwrap_or_else(|_| "soft0".into());
    std::env::set_var("RDMAKIT_IBVERBS_LIB", "/nonexistent/libibverbs.so.1");

    // auto: no library → the soft NIC, silently.
    std::env::set_var("RDMAKIT_PROVIDER", "auto");
    let auto = ProviderChoice::from_env().unwrap();
    assert_eq!(auto, ProviderChoice::Auto);
    assert_eq!(default_provider(auto).unwrap().kind(), "soft");
    assert_eq!(devices(auto).unwrap(), vec![soft.clone()]);
    let ctx = open_device(auto, &soft).unwrap();
    assert!(ctx.soft().is_some());
    let e = open_device(auto, "rxe0").unwrap_err();
    assert_eq!((e.errno, e.layer), (Errno::ENODEV, Layer::Library));
    // The ENODEV says what was tried, the library's failure included.
    assert!(e.detail.contains("/nonexistent/libibverbs.so.1"), "{e}");
    assert!(e.detail.contains(&soft), "{e}");

    // ibverbs: the library's error, no fallback.
    std::env::set_var("RDMAKIT_PROVIDER", "ibverbs");
    let ibverbs = ProviderChoice::from_env().unwrap();
    let e = devices(ibverbs).unwrap_err();
    assert_eq!(
        (e.verb, e.errno, e.layer),
        ("dlopen", Errno::ENOENT, Layer::Library)
    );
    let e = open_device(ibverbs, &soft).unwrap_err();
    assert_eq!(e.verb, "dlopen");

    // soft: only the soft NIC.
    std::env::set_var("RDMAKIT_PROVIDER", "soft");
    assert_eq!(
        devices(ProviderChoice::from_env().unwrap()).unwrap(),
        vec![soft]
    );

    // A bad choice is the application's error.
    std::env::set_var("RDMAKIT_PROVIDER", "mlx5");
    let e = ProviderChoice::from_env().unwrap_err();
    assert_eq!((e.errno, e.layer), (Errno::EINVAL, Layer::Application));
}
