//! RoCE transport packets (UDP payloads): views, getters and Repr round trip;
//! the same bytes without an ICRC slot (what the protocol engine parses and
//! emits) round trip through the ICRC-less entry points; a CNP (opcode 0x81)
//! parses through `roce::Kind` and re-emits to the same Repr.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rdmakit_wire::{cnp, roce};

fuzz_target!(|data: &[u8]| {
    without_icrc(data);
    kind(data);
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

/// `data` as an engine's transport packet (BTH through pad, no ICRC): what
/// parses emits back, headers then payload in place, to the same Repr, and
/// agrees with the ICRC-carrying parse of the same bytes plus 4.
fn without_icrc(data: &[u8]) {
    let Ok(repr) = roce::Repr::parse_without_icrc(data) else {
        return;
    };
    let mut with = data.to_vec();
    with.extend_from_slice(&[0; roce::ICRC_LEN]);
    let p = roce::Packet::new_checked(&with[..]).expect("parses with an ICRC slot");
    assert_eq!(roce::Repr::parse(&p).expect("parses with an ICRC slot"), repr);
    let n = repr.payload.len();
    let mut out = vec![0xa5u8; data.len() + 3];
    let (at, len) = repr
        .emit_header_without_icrc(&mut out, n)
        .expect("a parsed Repr emits");
    assert_eq!(at, repr.header_len());
    out[at..at + n].copy_from_slice(repr.payload);
    let again = roce::Repr::parse_without_icrc(&out[..len]).expect("emitted packet parses");
    let mut expected = repr;
    expected.bth.pad_count = roce::pad_len(n);
    assert_eq!(again, expected);
}

/// `data` through `roce::Kind`, with and without an ICRC slot: a CNP
/// re-emits (reserved bytes zeroed, flags canonical) to the same Repr; a
/// transport packet is what `roce::Repr` gives.
fn kind(data: &[u8]) {
    match roce::Kind::parse(data) {
        Ok(roce::Kind::Cnp(c)) => {
            let mut out = [0xa5u8; cnp::PACKET_LEN];
            c.emit(&mut cnp::Packet::new_unchecked(&mut out[..]));
            let again = cnp::Packet::new_checked(&out[..]).expect("checked");
            assert_eq!(cnp::Repr::parse(&again), Ok(c));
        }
        Ok(roce::Kind::Transport(t)) => {
            let p = roce::Packet::new_checked(data).expect("parsed as a transport packet");
            assert_eq!(roce::Repr::parse(&p), Ok(t));
        }
        Err(_) => {}
    }
    if let Ok(roce::Kind::Cnp(c)) = roce::Kind::parse_without_icrc(data) {
        let mut out = [0u8; cnp::LEN_WITHOUT_ICRC];
        c.emit_without_icrc(&mut out).expect("28 bytes");
        assert_eq!(cnp::Repr::parse_without_icrc(&out), Ok(c));
    }
}
