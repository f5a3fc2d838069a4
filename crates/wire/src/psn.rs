//! 24-bit packet sequence number arithmetic (compare modulo 2^24).

/// Mask of the 24 bits a PSN (or a QPN) occupies.
pub const MASK: u32 = 0x00ff_ffff;

/// `psn + n` modulo 2^24.
pub fn add(psn: u32, n: u32) -> u32 {
    psn.wrapping_add(n) & MASK
}

/// `psn - n` modulo 2^24.
pub fn sub(psn: u32, n: u32) -> u32 {
    psn.wrapping_sub(n) & MASK
}

/// The signed distance `a - b` in the 24-bit sequence space: positive when `a` is
/// after `b`, negative when before, within -2^23..2^23.
pub fn delta(a: u32, b: u32) -> i32 {
    (a.wrapping_sub(b) << 8) as i32 >> 8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraparound() {
        assert_eq!(add(MASK, 1), 0);
        assert_eq!(sub(0, 1), MASK);
        assert_eq!(delta(0, MASK), 1);
        assert_eq!(delta(MASK, 0), -1);
        assert_eq!(delta(5, 3), 2);
        assert_eq!(delta(0x80_0000, 0), -0x80_0000);
    }

    proptest::proptest! {
        #[test]
        fn add_then_delta(a in 0u32..=MASK, n in 0u32..0x80_0000) {
            proptest::prop_assert_eq!(delta(add(a, n), a), n as i32);
            proptest::prop_assert_eq!(sub(add(a, n), n), a);
        }
    }
}
