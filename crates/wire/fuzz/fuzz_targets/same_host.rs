//! The soft NIC's same-host request header (vendor opcodes 0xC0-0xC2):
//! every getter after `check_len` never panics, a parsed header
//! names at most 16 non-empty iovecs adding up to its length, and re-emits
//! to the same bytes it parses from.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rdmakit_wire::cma;

fuzz_target!(|data: &[u8]| {
    let Ok(p) = cma::Packet::new_checked(data) else {
        return;
    };
    let _ = (p.iov_count(), p.flags(), p.len(), p.rkey(), p.va());
    for i in 0..=cma::MAX_IOV + 1 {
        let _ = p.iov(i);
    }
    let Ok(r) = cma::Repr::parse(&p) else {
        return;
    };
    let _ = r.to_string();
    let iov = r.iovecs();
    assert!(!iov.is_empty() && iov.len() <= cma::MAX_IOV);
    assert!(iov.iter().all(|&(_, n)| n > 0), "an empty iovec parsed");
    assert_eq!(
        iov.iter().map(|&(_, n)| u128::from(n)).sum::<u128>(),
        u128::from(r.len)
    );
    let mut out = vec![0xa5u8; r.buffer_len()];
    r.emit(&mut cma::Packet::new_unchecked(&mut out[..]))
        .expect("a parsed header emits");
    assert_eq!(&out[..], &data[..r.buffer_len()]);
});
