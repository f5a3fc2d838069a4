//! Whole Ethernet frames: parse never panics; what parses re-emits to bytes that
//! parse to the same Repr with a valid ICRC.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rdmakit_wire::frame;

fuzz_target!(|data: &[u8]| {
    let _ = frame::icrc_valid(data);
    if let Ok(repr) = frame::Repr::parse(data) {
        let _ = repr.to_string();
        let mut out = vec![0u8; repr.buffer_len()];
        if repr.emit(&mut out).is_ok() {
            let again = frame::Repr::parse(&out).expect("emitted frame parses");
            assert_eq!(again.roce, repr.roce);
            assert_eq!(again.ip.src_addr(), repr.ip.src_addr());
            assert!(frame::icrc_valid(&out).expect("emitted frame has an ICRC"));
        }
    }
});
