//! Result rows: bandwidth and latency statistics.

use serde::{Deserialize, Serialize};

/// perftest's MB: 2^20 bytes.
const MB: f64 = 1_048_576.0;

/// A bandwidth row (`#bytes #iterations BW peak[MB/sec] BW average[MB/sec] MsgRate[Mpps]`;
/// JSON names as perftest's --out_json).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct BwResult {
    /// Message size.
    #[serde(rename = "MsgSize")]
    pub size: usize,
    /// Completed messages.
    #[serde(rename = "n_iterations")]
    pub iters: u64,
    /// Best windowed bandwidth, MB/sec (2^20).
    #[serde(rename = "BW_peak")]
    pub bw_peak: f64,
    /// Average bandwidth, MB/sec (2^20).
    #[serde(rename = "BW_average")]
    pub bw_avg: f64,
    /// Messages per second, millions.
    #[serde(rename = "MsgRate")]
    pub msg_rate: f64,
    /// Wall time of the measurement, seconds.
    pub seconds: f64,
}

/// A latency row, usec.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct LatResult {
    /// Message size.
    #[serde(rename = "MsgSize")]
    pub size: usize,
    /// Samples.
    #[serde(rename = "n_iterations")]
    pub iters: u64,
    /// Smallest.
    pub t_min: f64,
    /// Largest.
    pub t_max: f64,
    /// Median.
    pub t_typical: f64,
    /// Mean.
    pub t_avg: f64,
    /// Standard deviation.
    pub t_stdev: f64,
    /// 99th percentile.
    #[serde(rename = "percentile_99")]
    pub p99: f64,
    /// 99.9th percentile.
    #[serde(rename = "percentile_99_9")]
    pub p999: f64,
}

/// Bandwidth of `iters` messages of `size` bytes in `seconds`, with the best
/// window's rate (`peak_bytes_per_sec`, 0 when unknown) as the peak.
pub fn bw_row(size: usize, iters: u64, seconds: f64, peak_bytes_per_sec: f64) -> BwResult {
    let secs = seconds.max(1e-9);
    let avg = (size as f64 * iters as f64) / secs / MB;
    BwResult {
        size,
        iters,
        bw_peak: (peak_bytes_per_sec / MB).max(avg),
        bw_avg: avg,
        msg_rate: iters as f64 / secs / 1e6,
        seconds,
    }
}

/// Latency statistics of `samples` (usec); `None` without samples.
pub fn lat_row(size: usize, samples: &mut [f64]) -> Option<LatResult> {
    if samples.is_empty() {
        return None;
    }
    samples.sort_by(f64::total_cmp);
    let n = samples.len();
    let avg = samples.iter().sum::<f64>() / n as f64;
    let var = samples.iter().map(|x| (x - avg) * (x - avg)).sum::<f64>() / n as f64;
    let pct = |p: f64| samples[(((n as f64) * p).ceil() as usize).clamp(1, n) - 1];
    Some(LatResult {
        size,
        iters: n as u64,
        t_min: samples[0],
        t_max: samples[n - 1],
        t_typical: samples[n / 2],
        t_avg: avg,
        t_stdev: var.sqrt(),
        p99: pct(0.99),
        p999: pct(0.999),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_statistics() {
        let mut v: Vec<f64> = (1..=1000).map(f64::from).collect();
        v.reverse();
        let r = lat_row(2, &mut v).unwrap();
        assert_eq!((r.t_min, r.t_max, r.t_typical), (1.0, 1000.0, 501.0));
        assert_eq!((r.p99, r.p999), (990.0, 999.0));
        assert!((r.t_avg - 500.5).abs() < 1e-9);
        assert!(lat_row(2, &mut []).is_none());
    }

    #[test]
    fn bandwidth_units_are_perftest_mb() {
        let r = bw_row(1 << 20, 100, 1.0, 0.0);
        assert!((r.bw_avg - 100.0).abs() < 1e-9);
        assert_eq!(r.bw_peak, r.bw_avg);
        assert!((r.msg_rate - 0.0001).abs() < 1e-12);
    }
}
