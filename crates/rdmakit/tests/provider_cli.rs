//! `--provider` / RDMAKIT_PROVIDER on the command line, `rdmakit
//! verbs-test`, and `rdmakit devinfo -v` through the rdma-core provider on
//! the shim compared line by line with Debian's `ibv_devinfo -v` on the
//! same shim (the VM tier does the same against rxe).

mod common;

use common::*;
use std::path::PathBuf;
use std::process::Command;

/// The shim as libibverbs.so.1 in a directory of its own, if built.
fn shim_dir() -> Option<tempfile::TempDir> {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_rdmakit"));
    let lib = bin.parent()?.join("libibverbs.so");
    if !lib.exists() {
        assert!(
            std::env::var_os("RDMAKIT_REQUIRE_SHIM").is_none(),
            "{} not built",
            lib.display()
        );
        eprintln!("SKIP: {} not built", lib.display());
        return None;
    }
    let d = tempfile::tempdir().unwrap();
    std::fs::copy(&lib, d.path().join("libibverbs.so.1")).unwrap();
    Some(d)
}

#[test]
fn bad_provider_and_missing_library_are_reported_with_exit_2() {
    let o = rdmakit_env(&["--provider", "mlx5", "devinfo"], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("expected auto, soft or ibverbs"),
        "{}",
        text(&o.stderr)
    );
    let o = rdmakit_env(
        &["--provider", "ibverbs", "devinfo"],
        &[("RDMAKIT_IBVERBS_LIB", "/nonexistent/libibverbs.so.1")],
    );
    assert_eq!(o.status.code(), Some(2));
    let e = text(&o.stderr);
    assert!(e.contains("dlopen failed with ENOENT"), "{e}");
    assert!(e.contains("/nonexistent/libibverbs.so.1"), "{e}");
    assert!(e.contains("library layer"), "{e}");
    // auto with no usable library: the soft NIC, as before.
    let o = rdmakit_env(
        &["devinfo"],
        &[("RDMAKIT_IBVERBS_LIB", "/nonexistent/libibverbs.so.1")],
    );
    assert_eq!(o.status.code(), Some(0));
    assert!(
        text(&o.stdout).starts_with("hca_id:\tsoft0"),
        "{}",
        text(&o.stdout)
    );
}

#[test]
fn verbs_test_passes_on_the_soft_provider_and_filters() {
    let o = rdmakit_env(&["--provider", "soft", "verbs-test"], &[]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("through the soft provider"), "{out}");
    assert!(out.contains("10 passed, 0 failed"), "{out}");
    let o = rdmakit_env(
        &["verbs-test", "--filter", "ud", "--json"],
        &[("RDMAKIT_PROVIDER", "soft")],
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["cases"].as_array().unwrap().len(), 1);
    assert_eq!(v["passed"], true);
    let o = rdmakit_env(&["verbs-test", "--filter", "nothing-matches"], &[]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn verbs_test_and_devinfo_through_the_rdma_core_provider_on_the_shim() {
    let Some(d) = shim_dir() else { return };
    let lib = d.path().join("libibverbs.so.1");
    let lib = lib.to_str().unwrap();
    let o = rdmakit_env(
        &["--provider", "ibverbs", "verbs-test"],
        &[("RDMAKIT_IBVERBS_LIB", lib)],
    );
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}{}", text(&o.stderr));
    assert!(out.contains("through the ibverbs provider"), "{out}");
    assert!(out.contains("10 passed, 0 failed"), "{out}");

    // devinfo -v through libibverbs versus Debian's ibv_devinfo -v, same
    // library, same soft NIC address: identical, line by line.
    if !std::path::Path::new("/usr/bin/ibv_devinfo").exists() {
        assert!(
            std::env::var_os("RDMAKIT_REQUIRE_IBVERBS_TOOLS").is_none(),
            "ibv_devinfo missing"
        );
        eprintln!("SKIP: ibv_devinfo not installed");
        return;
    }
    for args in [&[][..], &["-v"][..]] {
        let real = Command::new("/usr/bin/ibv_devinfo")
            .args(args)
            .env("LD_LIBRARY_PATH", d.path())
            .env("RDMAKIT_SOFT_ADDR", "127.0.77.7")
            .output()
            .unwrap();
        assert!(real.status.success(), "{}", text(&real.stderr));
        let mut a = vec!["--provider", "ibverbs", "devinfo"];
        a.extend_from_slice(args);
        let ours = rdmakit_env(
            &a,
            &[
                ("RDMAKIT_IBVERBS_LIB", lib),
                ("RDMAKIT_SOFT_ADDR", "127.0.77.7"),
            ],
        );
        assert_eq!(ours.status.code(), Some(0), "{}", text(&ours.stderr));
        let (r, o) = (text(&real.stdout), text(&ours.stdout));
        for (i, (lr, lo)) in r.lines().zip(o.lines()).enumerate() {
            assert_eq!(lr, lo, "ibv_devinfo {args:?} line {}", i + 1);
        }
        assert_eq!(r.lines().count(), o.lines().count(), "{r}\n---\n{o}");
    }
}
