//! RoCE transport packets (UDP payloads): views, getters and Repr round trip.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rdmakit_wire::roce;

fuzz_target!(|data: &[u8]| {
    let Ok(p) = roce::Packet::new_checked(data) else {
        return;
    };
    let _ = (
        p.payload(),
        p.pad(),
        p.icrc(),
        p.header_len(),
        p.without_icrc(),
    );
    let _ = p.reth().map(|h| (h.va(), h.rkey(), h.dma_len()));
    let _ = p.aeth().map(|h| (h.syndrome(), h.msn()));
    let _ = p.deth().map(|h| (h.qkey(), h.src_qp()));
    let _ = p.atomic_eth().map(|h| (h.va(), h.compare(), h.swap_add()));
    let _ = p.atomic_ack_eth().map(|h| h.orig_value());
    let _ = p.immdt().map(|h| h.imm());
    let _ = p.ieth().map(|h| h.rkey());
    if let Ok(repr) = roce::Repr::parse(&p) {
        let _ = repr.to_string();
        let mut out = vec![0u8; repr.buffer_len()];
        repr.emit(&mut roce::Packet::new_unchecked(&mut out[..]))
            .expect("a parsed Repr emits");
        let again = roce::Repr::parse(&roce::Packet::new_checked(&out[..]).expect("checked"))
            .expect("emitted packet parses");
        let mut expected = repr;
        expected.bth.pad_count = roce::pad_len(repr.payload.len());
        assert_eq!(again, expected);
    }
});
