//! Feeds the input to every parser of `rdmakit_host::parse`, as bytes and (lossily)
//! as text. Run with `RUSTC_BOOTSTRAP=1 cargo fuzz run parsers` from crates/host.
#![no_main]

use libfuzzer_sys::fuzz_target;

include!("../../tests/support/every_parser.rs");

fuzz_target!(|data: &[u8]| all_byte_parsers(data));
