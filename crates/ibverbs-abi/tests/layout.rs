//! Compares every size and field offset of our types with `sizeof` and
//! `offsetof` compiled against the installed `<infiniband/verbs.h>` (Debian's
//! libibverbs-dev, rdma-core 44 on Debian 12).
//!
//! The header is only needed here, never to build. scripts/test installs it and
//! sets `RDMAKIT_REQUIRE_IBVERBS_DEV=1`, which turns "header missing" from a
//! skip into a failure.

use std::fmt::Write as _;
use std::process::Command;

use rdmakit_ibverbs_abi::layout::{FIELDS, SEND_WR_UNION, SIZES};

const HEADER: &str = "/usr/include/infiniband/verbs.h";

fn c_program() -> String {
    let mut c = String::from(
        "#include <stddef.h>\n#include <stdio.h>\n#include <infiniband/verbs.h>\nint main(void) {\n",
    );
    for s in SIZES {
        writeln!(
            c,
            "  printf(\"size {} %zu\\n\", sizeof({}));",
            s.c_type, s.c_type
        )
        .unwrap();
    }
    for f in FIELDS {
        writeln!(
            c,
            "  printf(\"field {}.{} %zu\\n\", offsetof(struct {}, {}));",
            f.c_struct, f.c_member, f.c_struct, f.c_member
        )
        .unwrap();
    }
    for (member, _) in SEND_WR_UNION {
        writeln!(
            c,
            "  printf(\"union ibv_send_wr.{m} %zu\\n\", offsetof(struct ibv_send_wr, {m}) - offsetof(struct ibv_send_wr, wr));",
            m = member
        )
        .unwrap();
    }
    c.push_str("  return 0;\n}\n");
    c
}

fn ours() -> Vec<String> {
    let mut v = Vec::new();
    for s in SIZES {
        v.push(format!("size {} {}", s.c_type, s.size));
    }
    for f in FIELDS {
        v.push(format!("field {}.{} {}", f.c_struct, f.c_member, f.offset));
    }
    for (member, off) in SEND_WR_UNION {
        v.push(format!("union ibv_send_wr.{member} {off}"));
    }
    v
}

#[test]
fn every_size_and_offset_matches_the_installed_verbs_h() {
    if !rdmakit_testkit::have_file(HEADER, "libibverbs-dev", "RDMAKIT_REQUIRE_IBVERBS_DEV") {
        return;
    }
    // A compile error here means a member name we list is not in verbs.h.
    let (_dir, bin) = rdmakit_testkit::compile_c_text(&c_program(), "layout", &[], &[]);
    let run = Command::new(&bin).output().unwrap();
    assert!(run.status.success());
    let theirs: Vec<String> = String::from_utf8(run.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let ours = ours();
    assert_eq!(theirs.len(), ours.len());
    let diff: Vec<String> = ours
        .iter()
        .zip(&theirs)
        .filter(|(a, b)| a != b)
        .map(|(a, b)| format!("ours: {a:<60} verbs.h: {b}"))
        .collect();
    assert!(diff.is_empty(), "layout differs:\n{}", diff.join("\n"));
    // Not vacuous: the lists cover every type the shim hands out.
    assert!(
        SIZES.len() >= 50 && FIELDS.len() >= 400,
        "{} {}",
        SIZES.len(),
        FIELDS.len()
    );
}
