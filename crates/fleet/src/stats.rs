//! Robust statistics: the one median, MAD and modified z-score that the fleet's
//! cohort outliers ([`crate::outlier`]) and the pairwise matrix
//! ([`crate::pairwise::localize`]) both judge by. Pure functions, no I/O.
//!
//! The modified z-score of Iglewicz and Hoaglin: `z = 0.6745 (x − median) / MAD`,
//! where 0.6745 = Φ⁻¹(0.75), so that MAD / 0.6745 estimates σ of normal data; a
//! value is an outlier beyond [`Z_CUT`] (3.5). Each caller floors the MAD (a
//! uniform sample has none, and noise below a floor is not worth a finding) and
//! decides what a zero spread means.
//!
//! Values that are not finite are not data: they are left out of every median.
//!
//! ```
//! use rdmakit_fleet::stats::{median, Spread};
//! assert_eq!(median(&[4.0, 1.0, 100.0]), Some(4.0));
//! assert_eq!(median(&[]), None);
//! let s = Spread::of(&[1.0, 2.0, 3.0, 4.0, 100.0]);
//! assert_eq!((s.median, s.mad), (3.0, 1.0));
//! assert!(s.z(100.0, 0.0) > 3.5);
//! ```

/// The modified z-score's constant: Φ⁻¹(0.75).
pub const K: f64 = 0.6745;

/// Iglewicz and Hoaglin's cut: a modified z-score beyond ±3.5 is an outlier.
pub const Z_CUT: f64 = 3.5;

/// The mean absolute deviation's constant: √(π/2), so that 1.2533 × MeanAD
/// estimates σ of normal data (the stand-in when more than half a sample is equal
/// and its MAD is 0).
pub const MEAN_AD_K: f64 = 1.253314;

/// The median of a sample's finite values (the mean of the middle two for an even
/// count); None when it has none.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// The robust centre and spread of a sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// The median (0 for an empty sample).
    pub median: f64,
    /// Median absolute deviation from the median.
    pub mad: f64,
    /// Mean absolute deviation from the median.
    pub mean_ad: f64,
}

impl Spread {
    /// Median, MAD and mean absolute deviation of `values` (all 0 when empty).
    pub fn of(values: &[f64]) -> Spread {
        let m = median(values).unwrap_or(0.0);
        let dev: Vec<f64> = values.iter().map(|x| (x - m).abs()).collect();
        let mean_ad = if dev.is_empty() {
            0.0
        } else {
            dev.iter().sum::<f64>() / dev.len() as f64
        };
        Spread {
            median: m,
            mad: median(&dev).unwrap_or(0.0),
            mean_ad,
        }
    }

    /// The modified z-score of `x` with the MAD floored at `mad_floor`; 0 when
    /// even the floored MAD is 0 (every value equal, and no floor).
    pub fn z(&self, x: f64, mad_floor: f64) -> f64 {
        let mad = self.mad.max(mad_floor);
        if mad > 0.0 {
            K * (x - self.median) / mad
        } else {
            0.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[4.0, 1.0]), Some(2.5));
        assert_eq!(median(&[3.0, 1.0, 2.0, 10.0]), Some(2.5));
        // Not-a-number and the infinities are not values.
        assert_eq!(median(&[f64::NAN, 5.0, f64::INFINITY]), Some(5.0));
        assert_eq!(median(&[f64::NAN]), None);
    }

    #[test]
    fn spread_and_scores() {
        let s = Spread::of(&[1.0, 2.0, 3.0, 4.0, 100.0]);
        assert_eq!((s.median, s.mad, s.mean_ad), (3.0, 1.0, 20.2));
        assert_eq!(s.z(3.0, 0.0), 0.0);
        assert_eq!(s.z(4.0, 0.0), K);
        // The floor, not the MAD, when it is larger.
        assert_eq!(s.z(5.0, 2.0), K);
        // A uniform sample without a floor scores 0, with one it scores.
        let u = Spread::of(&[40.0; 8]);
        assert_eq!(u.z(10.0, 0.0), 0.0);
        assert!(u.z(10.0, 4.0) < -Z_CUT);
        assert_eq!(Spread::of(&[]).median, 0.0);
    }
}
