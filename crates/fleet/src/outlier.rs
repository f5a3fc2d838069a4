//! Numeric outliers within a cohort, with the robust statistics of [`crate::stats`].
//!
//! The modified z-score of Iglewicz and Hoaglin: `z = 0.6745 (x - median) / MAD`,
//! flagged above 3.5. When more than half the values are equal the MAD is 0; then
//! the mean absolute deviation stands in (`z = (x - median) / (1.2533 MeanAD)`), and
//! when every value is equal z is 0. The denominator never drops below a floor
//! (one unit, or 5 % of the median), so a uniform fleet — or one whose values differ
//! by a rounding error — flags nothing.
//!
//! Two absolute floors sit beside the score, because a small cohort cannot produce
//! a large z (one value among four scores at most 4 / 1.2533 ≈ 3.19):
//! - a link below 90 % of its cohort's median rate (ACTIVE ports only);
//! - an error counter far above the cohort's: at least 10 × (median + 100).
//!
//! A counter flagged by the score must also exceed the median by at least
//! `max(10, median)` events, so that 3 errors against a cohort of zeros stay quiet.

use serde::{Deserialize, Serialize};

use crate::stats::{Spread, K, MEAN_AD_K, Z_CUT};

/// When a cohort's value is an outlier (the defaults are the documented ones);
/// the pairwise matrix's are [`crate::pairwise::report::MatrixThresholds`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CohortThresholds {
    /// Modified z-score above which a value is an outlier.
    pub z: f64,
    /// A link below this fraction of the cohort's median rate is an outlier.
    pub rate_fraction: f64,
    /// A counter flagged by its score exceeds the median by at least this many events.
    pub counter_min_excess: f64,
    /// A counter at least `far_factor × (median + far_min)` is an outlier at any z.
    pub counter_far_factor: f64,
    pub counter_far_min: f64,
    /// Fewest values a metric needs before outliers are looked for.
    pub min_values: usize,
}

impl Default for CohortThresholds {
    fn default() -> Self {
        CohortThresholds {
            z: Z_CUT,
            rate_fraction: 0.9,
            counter_min_excess: 10.0,
            counter_far_factor: 10.0,
            counter_far_min: 100.0,
            min_values: 3,
        }
    }
}

/// The modified z-score of `x` in a cohort of spread `s`: the denominator floored
/// at `max(abs_floor, 5 % of |median|)`, and the mean absolute deviation standing in
/// when the MAD is 0.
pub fn modified_z(x: f64, s: &Spread, abs_floor: f64) -> f64 {
    let floor = abs_floor.max(0.05 * s.median.abs());
    if s.mad > 0.0 {
        s.z(x, floor / K)
    } else if s.mean_ad > 0.0 {
        (x - s.median) / (MEAN_AD_K * s.mean_ad).max(floor)
    } else {
        0.0
    }
}

/// Why a value is an outlier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// Modified z-score above the threshold (and above the minimum excess).
    ModifiedZ,
    /// A link below `rate_fraction` of the cohort's median rate.
    BelowMedianRate,
    /// An error counter at least `far_factor × (median + far_min)`.
    FarAboveCohort,
}

/// One flagged value of a sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Flag {
    /// Index into the sample.
    pub index: usize,
    pub z: f64,
    pub spread: Spread,
    pub rule: Rule,
}

/// Links below `rate_fraction` of the median rate (Gb/s samples of ACTIVE ports).
pub fn low_rates(rates: &[f64], t: &CohortThresholds) -> Vec<Flag> {
    if rates.len() < t.min_values {
        return Vec::new();
    }
    let s = Spread::of(rates);
    rates
        .iter()
        .enumerate()
        .filter(|(_, r)| **r < t.rate_fraction * s.median)
        .map(|(i, r)| Flag {
            index: i,
            z: modified_z(*r, &s, 1.0),
            spread: s,
            rule: Rule::BelowMedianRate,
        })
        .collect()
}

/// Error counters far above the cohort's (upward only).
pub fn high_counters(values: &[f64], t: &CohortThresholds) -> Vec<Flag> {
    if values.len() < t.min_values {
        return Vec::new();
    }
    let s = Spread::of(values);
    values
        .iter()
        .enumerate()
        .filter_map(|(i, x)| {
            let z = modified_z(*x, &s, 1.0);
            let excess = x - s.median;
            let far = *x >= t.counter_far_factor * (s.median + t.counter_far_min);
            let scored = z > t.z && excess >= t.counter_min_excess.max(s.median);
            let rule = if scored {
                Rule::ModifiedZ
            } else if far {
                Rule::FarAboveCohort
            } else {
                return None;
            };
            Some(Flag {
                index: i,
                z,
                spread: s,
                rule,
            })
        })
        .collect()
}

/// Counters that count errors (compared across nodes and between sweeps): the
/// InfiniBand port error counters, and driver hw_counters whose name says error,
/// discard, drop, timeout or sequence error — but not flush errors, which every QP
/// teardown produces.
pub fn is_error_counter(name: &str) -> bool {
    const PORT_ERRORS: &[&str] = &[
        "symbol_error",
        "link_error_recovery",
        "link_downed",
        "port_rcv_errors",
        "port_rcv_remote_physical_errors",
        "port_rcv_switch_relay_errors",
        "port_xmit_discards",
        "port_xmit_constraint_errors",
        "port_rcv_constraint_errors",
        "local_link_integrity_errors",
        "excessive_buffer_overrun_errors",
        "VL15_dropped",
    ];
    if PORT_ERRORS.contains(&name) {
        return true;
    }
    let n = name.to_ascii_lowercase();
    if n.contains("flush") {
        return false;
    }
    [
        "err",
        "discard",
        "drop",
        "timeout",
        "out_of_buffer",
        "out_of_sequence",
        "downed",
    ]
    .iter()
    .any(|w| n.contains(w))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_sample_scores_zero() {
        let s = Spread::of(&[40.0; 8]);
        assert_eq!(modified_z(40.0, &s, 1.0), 0.0);
        assert!(low_rates(&[40.0; 8], &CohortThresholds::default()).is_empty());
        assert!(high_counters(&[0.0; 8], &CohortThresholds::default()).is_empty());
    }

    #[test]
    fn one_bad_link_among_four() {
        let f = low_rates(&[40.0, 40.0, 20.0, 40.0], &CohortThresholds::default());
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].index, 2);
        assert_eq!(f[0].rule, Rule::BelowMedianRate);
    }

    #[test]
    fn counters_far_above_and_scored() {
        let t = CohortThresholds::default();
        // Four nodes: the score cannot reach 3.5, the absolute floor does.
        let f = high_counters(&[0.0, 0.0, 5000.0, 0.0], &t);
        assert_eq!(
            (f.len(), f[0].index, f[0].rule),
            (1, 2, Rule::FarAboveCohort)
        );
        // Twelve nodes: the score does.
        let mut v = vec![0.0; 12];
        v[7] = 500.0;
        let f = high_counters(&v, &t);
        assert_eq!((f.len(), f[0].index, f[0].rule), (1, 7, Rule::ModifiedZ));
        // A third of the fleet sharing a value is a pattern, not an outlier.
        let mut v = vec![0.0; 12];
        for i in [1, 4, 7, 10] {
            v[i] = 86.0;
        }
        assert!(high_counters(&v, &t).is_empty());
        // A handful of errors against zeros stays quiet.
        let mut v = vec![0.0; 12];
        v[3] = 3.0;
        assert!(high_counters(&v, &t).is_empty());
    }

    #[test]
    fn error_counter_names() {
        for n in [
            "symbol_error",
            "VL15_dropped",
            "retry_exceeded_err",
            "local_ack_timeout_err",
            "out_of_buffer",
            "out_of_sequence",
            "link_downed",
            "rx_discards_phy",
        ] {
            assert!(is_error_counter(n), "{n}");
        }
        for n in [
            "port_rcv_data",
            "duplicate_request",
            "req_cqe_flush_error",
            "lifespan",
            "roce_adp_retrans",
            "port_xmit_wait",
        ] {
            assert!(!is_error_counter(n), "{n}");
        }
    }
}
