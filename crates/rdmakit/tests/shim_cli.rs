//! `rdmakit shim install DIR`: lays out the drop-in libibverbs.so.1 next to
//! its libmlx5/libefa links, and Debian's ibv_devinfo then runs on it.
//!
//! The library is a workspace build product next to the rdmakit binary
//! (`cargo test --workspace` builds it); without it, or without Debian's
//! ibverbs-utils, the test skips unless `RDMAKIT_REQUIRE_IBVERBS_TOOLS=1`.

use std::path::Path;
use std::process::Command;

fn rdmakit() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rdmakit"))
}

fn ready() -> bool {
    let lib = Path::new(env!("CARGO_BIN_EXE_rdmakit")).with_file_name("libibverbs.so");
    let ok = lib.exists() && Path::new("/usr/bin/ibv_devinfo").exists();
    if !ok {
        assert!(
            std::env::var_os("RDMAKIT_REQUIRE_IBVERBS_TOOLS").is_none(),
            "{} or /usr/bin/ibv_devinfo missing (cargo build -p rdmakit-ibverbs-shim; apt-get install ibverbs-utils)",
            lib.display()
        );
        eprintln!("SKIP: build the workspace and install ibverbs-utils");
    }
    ok
}

#[test]
fn install_then_ibv_devinfo_sees_the_soft_nic() {
    if !ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("lib");
    let o = rdmakit()
        .args(["shim", "install", "--json"])
        .arg(&d)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["rocev2_gid_index"], 0);
    // The drop-in librdmacm is built with the workspace and installed beside it.
    assert_eq!(v["rdmacm"], serde_json::json!(d.join("librdmacm.so.1")));
    assert!(d.join("librdmacm.so.1").is_file());
    for l in ["libmlx5.so.1", "libefa.so.1"] {
        assert_eq!(
            std::fs::read_link(d.join(l)).unwrap(),
            Path::new("libibverbs.so.1")
        );
    }
    // Installing twice replaces the files and links.
    assert!(rdmakit()
        .args(["shim", "install"])
        .arg(&d)
        .status()
        .unwrap()
        .success());
    let o = Command::new("ibv_devinfo")
        .env("LD_LIBRARY_PATH", &d)
        .output()
        .unwrap();
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && t.contains("hca_id:\tsoft0"), "{t}");
}

#[test]
fn install_refuses_a_library_that_is_not_the_shim() {
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("libibverbs.so.1");
    std::fs::write(&fake, b"\x7fELF not really").unwrap();
    let o = rdmakit()
        .args(["shim", "install", "--from"])
        .arg(&fake)
        .arg(dir.path().join("out"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("is not rdmakit's drop-in libibverbs"), "{e}");
    assert!(!dir.path().join("out/libibverbs.so.1").exists());
}

/// After `cargo install` (the binary alone, no drop-in library beside it),
/// `shim install` says where it looked and how to get the library, and
/// installs nothing.
#[test]
fn install_without_the_library_says_how_to_build_it() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin/rdmakit");
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_rdmakit"), &bin).unwrap();
    let o = Command::new(&bin)
        .args(["shim", "install"])
        .arg(dir.path().join("out"))
        .env_remove("RDMAKIT_SHIM_LIB")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    for want in [
        "the drop-in libibverbs is not next to",
        "cargo build --release -p rdmakit-ibverbs-shim -p rdmakit-rdmacm-shim",
        "--from target/release/libibverbs.so",
        "Debian package",
    ] {
        assert!(e.contains(want), "missing {want:?} in: {e}");
    }
    assert!(!dir.path().join("out/libibverbs.so.1").exists());
}
