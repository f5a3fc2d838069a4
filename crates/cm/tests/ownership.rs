//! Issue 36: the CM's parts own their state. Every type's inherent `impl`
//! blocks live in the file that defines it — the engine, a connection and
//! the connection table each keep their fields to themselves — and no
//! source file is over 1,200 lines.

use std::path::Path;

#[test]
fn types_are_implemented_where_they_are_defined() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let v = rdmakit_testkit::ownership::violations(&src, 1200);
    assert!(v.is_empty(), "{}", v.join("\n"));
}
