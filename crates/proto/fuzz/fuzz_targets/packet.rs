//! proto's transport-packet codec: parse never panics, and whatever parses
//! emits back to a packet that parses to the same fields and payload.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rdmakit_proto::packet::Packet;

fuzz_target!(|data: &[u8]| {
    let Ok(p) = Packet::parse(data) else { return };
    let mut out = vec![0xa5u8; p.buffer_len()];
    let n = p.emit(&mut out).expect("emit into buffer_len bytes");
    assert_eq!(n, data.len());
    let q = Packet::parse(&out).expect("emitted packet parses");
    assert_eq!(p, q);
    // Reserved bits (BTH byte 4 low bits, byte 8 low bits, DETH byte 4)
    // are not reproduced; the headers' fields and the payload are.
    let h = Packet::header_len(&p.info);
    assert_eq!(out[h..h + p.payload.len()], data[h..h + p.payload.len()]);
});
