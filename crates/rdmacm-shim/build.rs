//! Declares the version nodes of librdmacm.so.1 (rdma-core 44: RDMACM_1.0 …
//! RDMACM_1.3) and its soname. src/exports.rs binds each symbol to its node
//! with `.symver`.

use std::fmt::Write as _;

fn main() {
    let mut map = String::new();
    let mut prev: Option<String> = None;
    for m in 0..=3 {
        let n = format!("RDMACM_1.{m}");
        match &prev {
            None => writeln!(map, "{n} {{ }};").unwrap(),
            Some(p) => writeln!(map, "{n} {{ }} {p};").unwrap(),
        }
        prev = Some(n);
    }
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let path = out.join("librdmacm.map");
    std::fs::write(&path, map).unwrap();
    println!(
        "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
        path.display()
    );
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,librdmacm.so.1");
    println!("cargo:rerun-if-changed=build.rs");
}
