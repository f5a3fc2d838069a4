//! The drop-in library exports what Debian's real libraries export, and
//! every program Debian ships against them finds every symbol it imports.
//!
//! The real libraries are rdma-core 44's `libibverbs.so.1` (package
//! libibverbs1) and the `libmlx5.so.1` / `libefa.so.1` of ibverbs-providers;
//! the consumers are the binaries of the packages scripts/test installs
//! (ibverbs-utils, perftest, qperf, rdmacm-utils, librdmacm1, libfabric,
//! UCX, Open MPI, python3-pyverbs). Symbol tables are read with binutils'
//! `nm -D --with-symbol-versions` and `objdump -p` (scripts/test installs
//! gcc, which brings binutils). Missing libraries or tools skip, saying so,
//! unless `RDMAKIT_REQUIRE_IBVERBS_TOOLS=1` (scripts/test) makes that a
//! failure.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

const LIBDIR: &str = "/usr/lib/x86_64-linux-gnu";

/// The real libraries the shim stands in for.
const REAL: [&str; 3] = ["libibverbs.so.1", "libmlx5.so.1", "libefa.so.1"];

/// IBVERBS_PRIVATE_34 is rdma-core's interface to its own provider plugins
/// (`ibv_cmd_*`, `verbs_register_driver_34`, ...); the drop-in library
/// loads no providers, so of that node it exports only what applications
/// call: `ibv_query_gid_type` (perftest). Everything else a real library
/// exports, the shim exports with the same version and default-ness.
const PRIVATE: &str = "IBVERBS_PRIVATE_34";
const PRIVATE_USED_BY_APPLICATIONS: [&str; 1] = ["ibv_query_gid_type@@IBVERBS_PRIVATE_34"];

/// rdmakit's own node: what its librdmacm.so.1 calls (src/rdmakit.rs), and
/// nothing else.
const RDMAKIT_NODE: &str = "RDMAKIT_PRIVATE_1";
const RDMAKIT_PRIVATE: [&str; 4] = [
    "rdmakit_dev_info@@RDMAKIT_PRIVATE_1",
    "rdmakit_gsi_open@@RDMAKIT_PRIVATE_1",
    "rdmakit_gsi_recv@@RDMAKIT_PRIVATE_1",
    "rdmakit_gsi_send@@RDMAKIT_PRIVATE_1",
];

/// Packages whose binaries must all resolve against the shim.
const CONSUMERS: [&str; 12] = [
    "ibverbs-utils",
    "perftest",
    "qperf",
    "rdmacm-utils",
    "librdmacm1",
    "libfabric1",
    "libfabric-bin",
    "libucx0",
    "ucx-utils",
    "openmpi-bin",
    "libopenmpi3",
    "python3-pyverbs",
];

fn required() -> bool {
    std::env::var_os("RDMAKIT_REQUIRE_IBVERBS_TOOLS").is_some()
}

fn skip_or_fail(what: &str) -> bool {
    assert!(!required(), "{what}");
    eprintln!("SKIP: {what}");
    false
}

fn tool(cmd: &str, args: &[&str], file: &Path) -> String {
    let out = Command::new(cmd)
        .args(args)
        .arg(file)
        .output()
        .unwrap_or_else(|e| panic!("{cmd} (binutils) cannot run: {e}"));
    assert!(
        out.status.success(),
        "{cmd} {args:?} {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `name@VER` / `name@@VER` of every function or object a library defines.
fn defined(lib: &Path) -> BTreeSet<String> {
    tool(
        "nm",
        &["-D", "--defined-only", "--with-symbol-versions"],
        lib,
    )
    .lines()
    .filter_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        // Version nodes appear as absolute symbols in older binutils'
        // output; they are compared through `objdump -p` instead.
        (f.len() == 3 && f[1] != "A" && f[2].contains('@')).then(|| f[2].to_string())
    })
    .collect()
}

/// `name@VER` of every versioned symbol a binary imports.
fn imported(bin: &Path) -> BTreeSet<String> {
    tool(
        "nm",
        &["-D", "--undefined-only", "--with-symbol-versions"],
        bin,
    )
    .lines()
    .filter_map(|l| {
        let name = l.split_whitespace().last()?;
        name.contains('@').then(|| name.to_string())
    })
    .collect()
}

/// The version nodes a library defines (`objdump -p`, "Version definitions").
fn nodes(lib: &Path) -> BTreeSet<String> {
    let text = tool("objdump", &["-p"], lib);
    let mut in_defs = false;
    let mut out = BTreeSet::new();
    for l in text.lines() {
        if l.starts_with("Version definitions:") {
            in_defs = true;
            continue;
        }
        if in_defs {
            if l.trim().is_empty() {
                break;
            }
            // "N FLAGS HASH NAME", then one indented line per parent node.
            let f: Vec<&str> = l.split_whitespace().collect();
            // Entry 1 (flag 0x01) is the soname itself.
            if f.len() == 4 && f[1] != "0x01" {
                out.insert(f[3].to_string());
            }
        }
    }
    out
}

fn shim() -> PathBuf {
    common::shim_dir().join("libibverbs.so.1")
}

fn real_libs() -> Option<Vec<PathBuf>> {
    let libs: Vec<PathBuf> = REAL.iter().map(|l| Path::new(LIBDIR).join(l)).collect();
    if let Some(m) = libs.iter().find(|l| !l.exists()) {
        skip_or_fail(&format!(
            "{} is missing (apt-get install libibverbs1 ibverbs-providers)",
            m.display()
        ));
        return None;
    }
    Some(libs)
}

#[test]
fn exports_are_the_real_libraries_public_symbols_with_their_versions() {
    let Some(libs) = real_libs() else { return };
    let mut want = BTreeSet::new();
    for l in &libs {
        want.extend(defined(l));
    }
    let want: BTreeSet<String> = want
        .into_iter()
        .filter(|s| !s.ends_with(PRIVATE) || PRIVATE_USED_BY_APPLICATIONS.contains(&s.as_str()))
        .collect();
    let mut have = defined(&shim());
    let ours: BTreeSet<String> = have
        .iter()
        .filter(|s| s.ends_with(RDMAKIT_NODE))
        .cloned()
        .collect();
    let expected: BTreeSet<String> = RDMAKIT_PRIVATE.iter().map(|s| s.to_string()).collect();
    assert_eq!(ours, expected, "rdmakit's private node for its librdmacm");
    have.retain(|s| !s.ends_with(RDMAKIT_NODE));
    let missing: Vec<&String> = want.difference(&have).collect();
    let invented: Vec<&String> = have.difference(&want).collect();
    assert!(
        missing.is_empty() && invented.is_empty(),
        "symbols Debian's rdma-core 44 exports that the shim lacks: {missing:?}\n\
         symbols the shim exports that rdma-core does not: {invented:?}"
    );
    // Spot checks of what the issue named (a regression would be loud).
    for s in [
        "efadv_create_cq@@EFA_1.2",
        "mlx5dv_is_supported@@MLX5_1.8",
        "ibv_query_qp_data_in_order@@IBVERBS_1.14",
        "_ibv_query_gid_table@@IBVERBS_1.11",
        "ibv_create_qp@IBVERBS_1.0",
        "ibv_create_qp@@IBVERBS_1.1",
        "mlx5dv_init_obj@MLX5_1.0",
        "mlx5dv_init_obj@@MLX5_1.2",
    ] {
        assert!(have.contains(s), "{s}");
    }
    // No unversioned export (a helper leaking out of the library).
    let all = tool(
        "nm",
        &["-D", "--defined-only", "--with-symbol-versions"],
        &shim(),
    );
    let bare: Vec<&str> = all
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .filter(|n| !n.contains('@'))
        .collect();
    assert!(bare.is_empty(), "unversioned exports: {bare:?}");
}

#[test]
fn version_nodes_include_every_real_node() {
    let Some(libs) = real_libs() else { return };
    let mut want = BTreeSet::new();
    for l in &libs {
        want.extend(nodes(l));
    }
    let have = nodes(&shim());
    let missing: Vec<&String> = want.difference(&have).collect();
    assert!(missing.is_empty(), "version nodes missing: {missing:?}");
    // The only extras: empty IBVERBS_PRIVATE_* nodes of other rdma-core
    // releases (build.rs says why) and rdmakit's own private node.
    let extra: Vec<&String> = have
        .difference(&want)
        .filter(|n| n.as_str() != RDMAKIT_NODE)
        .filter(|n| {
            n.strip_prefix("IBVERBS_PRIVATE_")
                .and_then(|v| v.parse::<u32>().ok())
                .is_none_or(|v| !(17..=60).contains(&v))
        })
        .collect();
    assert!(extra.is_empty(), "unexpected version nodes: {extra:?}");
    assert!(want.contains("EFA_1.2") && want.contains("MLX5_1.24"));
}

/// Files of a Debian package (`dpkg -L`), or None when it is not installed.
fn package_files(pkg: &str) -> Option<Vec<PathBuf>> {
    let out = Command::new("dpkg").args(["-L", pkg]).output().ok()?;
    if !out.status.success() {
        return None;
    }
    Some(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(PathBuf::from)
            .filter(|p| p.is_file() && !p.is_symlink())
            .collect(),
    )
}

/// True when `file` is an ELF object that links one of the real libraries.
fn links_verbs(file: &Path) -> bool {
    let Ok(bytes) = std::fs::read(file) else {
        return false;
    };
    if !bytes.starts_with(b"\x7fELF") {
        return false;
    }
    let hay = |n: &[u8]| bytes.windows(n.len()).any(|w| w == n);
    if !REAL.iter().any(|l| hay(l.as_bytes())) {
        return false;
    }
    let d = tool("objdump", &["-p"], file);
    d.lines()
        .any(|l| l.trim_start().starts_with("NEEDED") && REAL.iter().any(|r| l.contains(r)))
}

#[test]
fn every_debian_consumer_finds_every_symbol_it_imports() {
    let have = defined(&shim());
    let have_plain: BTreeSet<String> = have.iter().map(|s| s.replace("@@", "@")).collect();
    let mut checked = Vec::new();
    let mut unresolved = Vec::new();
    for pkg in CONSUMERS {
        let Some(files) = package_files(pkg) else {
            if !skip_or_fail(&format!(
                "package {pkg} is not installed (scripts/test installs it)"
            )) {
                continue;
            }
            continue;
        };
        for f in files.iter().filter(|f| links_verbs(f)) {
            for s in imported(f) {
                let ver = s.split('@').nth(1).unwrap_or("");
                let ours = ver.starts_with("IBVERBS_")
                    || ver.starts_with("MLX5_")
                    || ver.starts_with("EFA_");
                if ours && !have_plain.contains(&s) {
                    unresolved.push(format!("{}: {s}", f.display()));
                }
            }
            checked.push(f.display().to_string());
        }
    }
    assert!(
        unresolved.is_empty(),
        "imports the drop-in library does not export:\n{}",
        unresolved.join("\n")
    );
    if required() {
        // ibv_devinfo, ib_write_bw, qperf, rping, libfabric, UCX's IB
        // transport, Open MPI's verbs code, pyverbs.
        for want in [
            "ibv_devinfo",
            "ib_write_bw",
            "qperf",
            "rping",
            "libfabric.so",
            "libuct_ib.so",
            "libmca_common_verbs.so",
            "pyverbs/device.cpython",
        ] {
            assert!(
                checked.iter().any(|c| c.contains(want)),
                "{want} was not among the consumers checked: {checked:?}"
            );
        }
    }
    eprintln!("{} consumers resolve against the shim", checked.len());
}
