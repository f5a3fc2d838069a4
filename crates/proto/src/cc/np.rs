//! The notification point of one QP: whether a CE-marked packet is
//! answered with a CNP.
//!
//! Every CE-marked packet counts (`np_ecn_marked_roce_packets`, the
//! engine's); a CNP goes unless this QP sent one less than
//! `np_min_time_between_cnps` ago. mlx5 documents the knob as per port
//! ("from the port"); here it is per QP, like the DCQCN reference
//! simulator's per-flow CNP interval, so two flows into one receiver
//! each get their own signal.

use core::time::Duration;

use super::params::Params;
use crate::time::Instant;

/// The CNP rate limiter of one QP.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NotificationPoint {
    /// When the last CNP went.
    last_cnp: Option<Instant>,
}

impl NotificationPoint {
    /// A notification point that has sent nothing.
    pub fn new() -> NotificationPoint {
        NotificationPoint::default()
    }

    /// A CE-marked packet arrived at `now`: true if a CNP is to be sent
    /// (and it is recorded as sent).
    pub fn on_marked(&mut self, p: &Params, now: Instant) -> bool {
        let gap = Duration::from_micros(u64::from(p.np_min_time_between_cnps));
        if self.last_cnp.is_some_and(|t| now < t + gap) {
            return false;
        }
        self.last_cnp = Some(now);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(us: u64) -> Instant {
        Instant::from_nanos(us * 1000)
    }

    #[test]
    fn min_time_between_cnps_limits_cnps_not_marks() {
        let p = Params {
            np_min_time_between_cnps: 50,
            ..Params::mlx5()
        };
        let mut np = NotificationPoint::new();
        let sent: Vec<bool> = [0, 10, 49, 50, 60, 100, 200]
            .iter()
            .map(|&us| np.on_marked(&p, t(us)))
            .collect();
        assert_eq!(sent, [true, false, false, true, false, true, true]);
    }

    #[test]
    fn zero_min_time_answers_every_marked_packet() {
        let p = Params {
            np_min_time_between_cnps: 0,
            ..Params::mlx5()
        };
        let mut np = NotificationPoint::new();
        assert!((0..10).all(|_| np.on_marked(&p, t(7))));
    }
}
