//! Declares the version nodes of libibverbs.so.1 (and of the libmlx5.so.1 /
//! libefa.so.1 entry points the same library answers) and its soname.
//! src/exports.rs binds each symbol to its node with `.symver`.

use std::fmt::Write as _;

fn chain(out: &mut String, nodes: &[String]) {
    let mut prev: Option<&String> = None;
    for n in nodes {
        match prev {
            None => writeln!(out, "{n} {{ }};").unwrap(),
            Some(p) => writeln!(out, "{n} {{ }} {p};").unwrap(),
        }
        prev = Some(n);
    }
}

fn main() {
    let mut map = String::new();
    // rdma-core 44's public nodes (there never were 1.2 .. 1.4).
    let ib: Vec<String> = [0, 1, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]
        .iter()
        .map(|m| format!("IBVERBS_1.{m}"))
        .collect();
    chain(&mut map, &ib);
    // The private node differs between rdma-core releases (44 has
    // IBVERBS_PRIVATE_34, where `ibv_query_gid_type` lives); a binary built
    // against another release that asks for its node fails to load when the
    // node does not exist, so declare the range in use.
    for p in 17..=60 {
        writeln!(map, "IBVERBS_PRIVATE_{p} {{ }};").unwrap();
    }
    // rdmakit's private interface to its own librdmacm.so.1 (src/rdmakit.rs);
    // bumped when a signature changes, so mismatched builds fail to link
    // instead of calling with the wrong arguments.
    writeln!(map, "RDMAKIT_PRIVATE_1 {{ }};").unwrap();
    let mlx5: Vec<String> = (0..=24).map(|m| format!("MLX5_1.{m}")).collect();
    chain(&mut map, &mlx5);
    let efa: Vec<String> = (0..=2).map(|m| format!("EFA_1.{m}")).collect();
    chain(&mut map, &efa);
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let path = out.join("libibverbs.map");
    std::fs::write(&path, map).unwrap();
    println!(
        "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
        path.display()
    );
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libibverbs.so.1");
    println!("cargo:rerun-if-changed=build.rs");
}
