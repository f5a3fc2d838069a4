//! Every size and field offset of the `<rdma/rdma_cma.h>` structs this
//! library hands to C (crate::abi::LAYOUT) compared with `sizeof` /
//! `offsetof` compiled against the installed header (Debian's librdmacm-dev,
//! rdma-core 44). The header is needed only here. `RDMAKIT_REQUIRE_RDMACM_DEV=1`
//! (scripts/test) makes a missing header a failure instead of a skip.
//!
//! The cdylib's modules are not a library crate a test can import, so the
//! table is compiled into this test from the same source file.

#[allow(dead_code, non_camel_case_types, missing_docs, clippy::all)]
#[path = "../src/abi.rs"]
mod abi;

use std::fmt::Write as _;
use std::process::Command;

const HEADER: &str = "/usr/include/rdma/rdma_cma.h";

#[test]
fn every_size_and_offset_matches_the_installed_rdma_cma_h() {
    if !rdmakit_testkit::have_file(HEADER, "librdmacm-dev", "RDMAKIT_REQUIRE_RDMACM_DEV") {
        return;
    }
    let mut c = String::from(
        "#include <stddef.h>\n#include <stdio.h>\n#include <rdma/rdma_cma.h>\n\
         #include <infiniband/sa.h>\nint main(void) {\n",
    );
    for i in abi::LAYOUT {
        writeln!(c, "  printf(\"{} %zu\\n\", {});", i.c_expr, i.c_expr).unwrap();
    }
    c.push_str("  return 0;\n}\n");
    let (_dir, bin) = rdmakit_testkit::compile_c_text(&c, "layout", &[], &[]);
    let run = Command::new(&bin).output().unwrap();
    let theirs = String::from_utf8(run.stdout).unwrap();
    let ours: String = abi::LAYOUT
        .iter()
        .map(|i| format!("{} {}\n", i.c_expr, i.value))
        .collect();
    let diff: Vec<String> = ours
        .lines()
        .zip(theirs.lines())
        .filter(|(a, b)| a != b)
        .map(|(a, b)| format!("ours {a}  /  C {b}"))
        .collect();
    assert!(diff.is_empty(), "layout differs:\n{}", diff.join("\n"));
    assert_eq!(ours.lines().count(), theirs.lines().count());
    assert!(abi::LAYOUT.len() > 70);
}
