//! 24-bit packet sequence numbers.
//!
//! PSNs live in a circle of 2^24 values. Two PSNs are compared by the signed
//! distance between them (`((a - b) << 8) as i32 >> 8`), which is only
//! meaningful while they are less than 2^23 apart; the engine never lets more
//! than a small window of PSNs be outstanding, so that always holds.

use core::fmt;

/// Mask of the 24 significant bits of a PSN.
pub const PSN_MASK: u32 = 0x00ff_ffff;

/// A 24-bit packet sequence number with modular arithmetic.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Psn(u32);

impl Psn {
    /// Builds a PSN from the low 24 bits of `v` (higher bits are ignored).
    pub const fn new(v: u32) -> Psn {
        Psn(v & PSN_MASK)
    }

    /// The 24-bit value.
    pub const fn value(self) -> u32 {
        self.0
    }

    /// `self + n` modulo 2^24.
    #[must_use]
    pub const fn add(self, n: u32) -> Psn {
        Psn(self.0.wrapping_add(n) & PSN_MASK)
    }

    /// `self - n` modulo 2^24.
    #[must_use]
    pub const fn sub(self, n: u32) -> Psn {
        Psn(self.0.wrapping_sub(n) & PSN_MASK)
    }

    /// Signed distance `self - other` in the range `-2^23 ..= 2^23 - 1`.
    pub const fn diff(self, other: Psn) -> i32 {
        ((self.0.wrapping_sub(other.0)) << 8) as i32 >> 8
    }

    /// `self` comes strictly before `other`.
    pub const fn before(self, other: Psn) -> bool {
        self.diff(other) < 0
    }

    /// `self` comes strictly after `other`.
    pub const fn after(self, other: Psn) -> bool {
        self.diff(other) > 0
    }

    /// `lo <= self <= hi` on the circle (with `lo` taken as the origin).
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_at_2_pow_24() {
        let p = Psn::new(PSN_MASK);
        assert_eq!(p.add(1), Psn::new(0));
        assert_eq!(Psn::new(0).sub(1), p);
        assert_eq!(Psn::new(0).diff(p), 1);
        assert_eq!(p.diff(Psn::new(0)), -1);
        assert!(p.before(Psn::new(3)));
        assert!(Psn::new(2).within(p, Psn::new(5)));
    }
}
