//! The exported functions and version nodes of our librdmacm.so.1 compared
//! with Debian 12's (rdma-core 44, package librdmacm1): every `name@VERSION`
//! the real library defines must be ours too, so a program linked against
//! it loads. Read from the dynamic symbol tables with `objdump -T`
//! (binutils, which gcc brings). Without the real library the test skips,
//! unless `RDMAKIT_REQUIRE_RDMACM_TOOLS=1` (scripts/test) makes that a failure.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

const REAL: &str = "/usr/lib/x86_64-linux-gnu/librdmacm.so.1";

/// `name@VERSION` of every defined function.
fn exported(lib: &Path) -> BTreeSet<String> {
    let out = Command::new("objdump")
        .arg("-T")
        .arg(lib)
        .output()
        .unwrap_or_else(|e| panic!("objdump: {e} (apt-get install binutils)"));
    assert!(out.status.success(), "objdump -T {}", lib.display());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.contains("*UND*") && l.contains(" DF "))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (ver, name) = (f.get(f.len().checked_sub(2)?)?, f.last()?);
            ver.starts_with("RDMACM_").then(|| {
                format!(
                    "{name}@{}",
                    ver.trim_start_matches('(').trim_end_matches(')')
                )
            })
        })
        .collect()
}

/// The version nodes a library defines (`objdump -p`'s "Version
/// definitions", without the soname entry). GNU ld also exports each node
/// as an absolute symbol; lld does not, and no program references those.
fn version_nodes(lib: &Path) -> BTreeSet<String> {
    let out = Command::new("objdump").arg("-p").arg(lib).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines()
        .skip_while(|l| !l.starts_with("Version definitions:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().nth(3).map(str::to_string))
        .filter(|n| n.starts_with("RDMACM_"))
        .collect()
}

#[test]
fn every_symbol_and_version_node_of_debians_librdmacm_is_exported() {
    if !Path::new(REAL).exists() {
        assert!(
            std::env::var_os("RDMAKIT_REQUIRE_RDMACM_TOOLS").is_none(),
            "{REAL} is missing (apt-get install librdmacm1)"
        );
        eprintln!("SKIP: {REAL} missing (apt-get install librdmacm1)");
        return;
    }
    let ours_path: PathBuf = common::lib_dir().join("librdmacm.so.1");
    let theirs = exported(Path::new(REAL));
    let ours = exported(&ours_path);
    assert!(
        theirs.len() > 60,
        "read only {} symbols of {REAL}",
        theirs.len()
    );
    let missing: Vec<_> = theirs.difference(&ours).collect();
    assert!(missing.is_empty(), "missing from ours: {missing:?}");
    // Nothing of ours claims an RDMACM version the real library lacks.
    let extra: Vec<_> = ours.difference(&theirs).collect();
    assert!(extra.is_empty(), "ours exports more: {extra:?}");
    let nodes = version_nodes(Path::new(REAL));
    assert_eq!(nodes.len(), 4, "{nodes:?}");
    assert_eq!(version_nodes(&ours_path), nodes);
    // The soname is the one programs were linked against.
    let out = Command::new("objdump")
        .arg("-p")
        .arg(&ours_path)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("SONAME               librdmacm.so.1"));
}
