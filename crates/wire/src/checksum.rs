//! The Internet checksum (RFC 1071), for the IPv4 header and UDP.

use std::net::IpAddr;

/// One's-complement sum of `data` as big-endian 16-bit words (odd trailing byte
/// padded with zero), folded to 16 bits, not complemented.
pub fn sum(data: &[u8]) -> u16 {
    let mut acc: u32 = 0;
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        acc += u32::from(*last) << 8;
    }
    fold(acc)
}

/// Add two partial sums.
pub fn combine(parts: &[u16]) -> u16 {
    fold(parts.iter().map(|&p| u32::from(p)).sum())
}

fn fold(mut acc: u32) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// Partial sum of the IPv4 or IPv6 pseudo header for a transport protocol.
pub fn pseudo_header(src: &IpAddr, dst: &IpAddr, next_header: u8, length: u32) -> u16 {
    let len = length.to_be_bytes();
    let proto_len = combine(&[
        u16::from(next_header),
        u16::from_be_bytes([len[0], len[1]]),
        u16::from_be_bytes([len[2], len[3]]),
    ]);
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => combine(&[sum(&s.octets()), sum(&d.octets()), proto_len]),
        (s, d) => {
            let s = match s {
                IpAddr::V4(a) => a.to_ipv6_mapped(),
                IpAddr::V6(a) => *a,
            };
            let d = match d {
                IpAddr::V4(a) => a.to_ipv6_mapped(),
                IpAddr::V6(a) => *a,
            };
            combine(&[sum(&s.octets()), sum(&d.octets()), proto_len])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 section 3 example words.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(sum(&data), 0xddf2);
    }

    #[test]
    fn odd_length() {
        assert_eq!(sum(&[0x12]), 0x1200);
    }
}
