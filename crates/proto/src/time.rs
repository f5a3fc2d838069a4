//! Virtual time and the IBTA timer encodings.
//!
//! The engine never reads a clock: every entry point takes `now` from the
//! caller, as a [`Clock`]. [`Instant`] is a count of nanoseconds since an
//! epoch the caller chooses (a simulator starts at zero, a driver uses a
//! monotonic clock).

use core::cell::Cell;
use core::ops::{Add, Sub};
use core::time::Duration;

/// The time an engine entry point runs at: an [`Instant`] already known
/// (a simulator's), or a [`LazyClock`] the engine reads only when it arms
/// or checks a timer. Most calls need neither: a packet that acknowledges
/// everything outstanding clears the timer, a responder's packet never
/// sets one.
pub trait Clock: Copy {
    /// The current time.
    fn now(self) -> Instant;
}

impl Clock for Instant {
    fn now(self) -> Instant {
        self
    }
}

/// A clock read at most once: the first [`Clock::now`] calls `read`, later
/// ones return that reading. A driver makes one per engine pass; where a
/// clock read costs a system call (a guest whose clock source has no vDSO
/// path, ~1 µs), a pass that arms no timer pays none.
pub struct LazyClock<F> {
    read: F,
    at: Cell<Option<Instant>>,
}

impl<F: Fn() -> Instant> LazyClock<F> {
    /// A clock that calls `read` on first use.
    pub fn new(read: F) -> LazyClock<F> {
        LazyClock {
            read,
            at: Cell::new(None),
        }
    }
}

impl<F: Fn() -> Instant> Clock for &LazyClock<F> {
    fn now(self) -> Instant {
        match self.at.get() {
            Some(t) => t,
            None => {
                let t = (self.read)();
                self.at.set(Some(t));
                t
            }
        }
    }
}

/// A point in (virtual) time, in nanoseconds since the caller's epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(u64);

impl Instant {
    /// The epoch.
    pub const ZERO: Instant = Instant(0);

    /// An instant `nanos` nanoseconds after the epoch.
    pub const fn from_nanos(nanos: u64) -> Instant {
        Instant(nanos)
    }

    /// Nanoseconds since the epoch.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Time from `earlier` to `self`, zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        let n = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        Instant(self.0.saturating_add(n))
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, rhs: Instant) -> Duration {
        self.saturating_duration_since(rhs)
    }
}

/// Local ACK timeout for the 5-bit `timeout` attribute: 4.096 µs × 2^timeout.
/// `0` means "no timer" (infinite) and returns `None`.
pub fn local_ack_timeout(timeout: u8) -> Option<Duration> {
    if timeout == 0 || timeout > 31 {
        return None;
    }
    Some(Duration::from_nanos(4096u64 << timeout))
}

/// The IBTA "RNR NAK timer field encoding": the minimum RNR delay, in
/// microseconds × 100 (10 µs units), for each 5-bit code.
const RNR_TIMER_10US: [u32; 32] = [
    65536, // 0: 655.36 ms
    1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048,
    3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152,
];

/// Delay a requester waits after an RNR NAK carrying timer `code` (low 5 bits
/// used): 0 = 655.36 ms, 1 = 0.01 ms, ... 14 = 1.28 ms, ... 31 = 491.52 ms.
pub fn rnr_timer(code: u8) -> Duration {
    Duration::from_micros(u64::from(RNR_TIMER_10US[usize::from(code & 0x1f)]) * 10)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_match_ibta_table() {
        assert_eq!(rnr_timer(0), Duration::from_micros(655_360));
        assert_eq!(rnr_timer(1), Duration::from_micros(10));
        assert_eq!(rnr_timer(14), Duration::from_micros(1_280));
        assert_eq!(rnr_timer(31), Duration::from_micros(491_520));
        assert_eq!(local_ack_timeout(0), None);
        assert_eq!(local_ack_timeout(1), Some(Duration::from_nanos(8192)));
        assert_eq!(
            local_ack_timeout(14),
            Some(Duration::from_nanos(4096 << 14))
        );
    }
}
