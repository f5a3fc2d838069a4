//! 24-bit packet sequence numbers: the one PSN arithmetic of the stack (the
//! protocol engine's [`Psn`] and the capture analysis both use it).
//!
//! PSNs live in a circle of 2^24 values. Two PSNs are compared by the signed
//! distance between them (`((a - b) << 8) as i32 >> 8`), which is only
//! meaningful while they are less than 2^23 apart; the engine never lets more
//! than a small window of PSNs be outstanding, so that always holds.

use core::fmt;

/// Mask of the 24 bits a PSN (or a QPN) occupies.
pub const MASK: u32 = 0x00ff_ffff;

/// A 24-bit packet sequence number with modular arithmetic.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Psn(u32);

impl Psn {
    /// Builds a PSN from the low 24 bits of `v` (higher bits are ignored).
    #[inline]
    pub const fn new(v: u32) -> Psn {
        Psn(v & MASK)
    }

    /// The 24-bit value.
    #[inline]
    pub const fn value(self) -> u32 {
        self.0
    }

    /// `self + n` modulo 2^24.
    #[inline]
    #[must_use]
    pub const fn add(self, n: u32) -> Psn {
        Psn(self.0.wrapping_add(n) & MASK)
    }

    /// `self - n` modulo 2^24.
    #[inline]
    #[must_use]
    pub const fn sub(self, n: u32) -> Psn {
        Psn(self.0.wrapping_sub(n) & MASK)
    }

    /// Signed distance `self - other` in the range `-2^23 ..= 2^23 - 1`:
    /// positive when `self` is after `other`.
    #[inline]
    pub const fn diff(self, other: Psn) -> i32 {
        ((self.0.wrapping_sub(other.0)) << 8) as i32 >> 8
    }

    /// `self` comes strictly before `other`.
    #[inline]
    pub const fn before(self, other: Psn) -> bool {
        self.diff(other) < 0
    }

    /// `self` comes strictly after `other`.
    #[inline]
    pub const fn after(self, other: Psn) -> bool {
        self.diff(other) > 0
    }

    /// `lo <= self <= hi` on the circle (with `lo` taken as the origin).
    #[inline]
    pub const fn within(self, lo: Psn, hi: Psn) -> bool {
        let d = self.diff(lo);
        d >= 0 && d <= hi.diff(lo)
    }
}

impl fmt::Debug for Psn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Psn({:#08x})", self.0)
    }
}

impl fmt::Display for Psn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// `psn + n` modulo 2^24, on raw header values.
pub fn add(psn: u32, n: u32) -> u32 {
    Psn::new(psn).add(n).value()
}

/// `psn - n` modulo 2^24, on raw header values.
pub fn sub(psn: u32, n: u32) -> u32 {
    Psn::new(psn).sub(n).value()
}

/// The signed distance `a - b` of two raw header values (see [`Psn::diff`]).
pub fn delta(a: u32, b: u32) -> i32 {
    Psn::new(a).diff(Psn::new(b))
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

    #[test]
    fn wraps_at_2_pow_24() {
        let p = Psn::new(MASK);
        assert_eq!(p.add(1), Psn::new(0));
        assert_eq!(Psn::new(0).sub(1), p);
        assert_eq!(Psn::new(0).diff(p), 1);
        assert_eq!(p.diff(Psn::new(0)), -1);
        assert!(p.before(Psn::new(3)));
        assert!(Psn::new(2).within(p, Psn::new(5)));
        assert_eq!(
            format!("{:?} {}", Psn::new(0x12), Psn::new(0x12)),
            "Psn(0x000012) 18"
        );
    }

    proptest::proptest! {
        #[test]
        fn add_then_delta(a in 0u32..=MASK, n in 0u32..0x80_0000) {
            proptest::prop_assert_eq!(delta(add(a, n), a), n as i32);
            proptest::prop_assert_eq!(sub(add(a, n), n), a);
        }
    }
}
