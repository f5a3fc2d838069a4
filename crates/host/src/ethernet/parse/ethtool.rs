//! `ethtool -S`, `ethtool -a` and `ethtool --show-fec`.
//!
//! The formats are ethtool's (`ethtool.c` `dump_stats`: `"     %.*s: %llu\n"`
//! under `NIC statistics:`; `netlink/pause.c`; `netlink/fec.c`), as printed by
//! ethtool 5.x-6.x and as pasted into mails (tabs turned into spaces).

use serde::{Deserialize, Serialize};

use super::{numbered_lines, on_off, TextError};

/// The driver's statistics of `ethtool -S IF`, in the driver's order and with
/// the driver's names: everything before the last `": "` of a line, so a per-ring
/// name such as bnxt_en's `"[0]: rx_ucast_packets"` stays whole.
///
/// Header lines (`NIC statistics:`, `Standard stats for IF:`) and a driver's
/// `no stats available` are skipped.
///
/// # Errors
/// A line that is not `name: unsigned integer`.
pub fn stats(text: &str) -> Result<Vec<(String, u64)>, TextError> {
    const CMD: &str = "ethtool -S";
    let mut out = Vec::new();
    for (n, line) in numbered_lines(text) {
        let t = line.trim();
        if t.is_empty() || t.ends_with(':') || t == "no stats available" {
            continue;
        }
        let (name, value) = t
            .rsplit_once(':')
            .ok_or_else(|| TextError::new(CMD, n, line, "no \"name: value\""))?;
        let name = name.trim_end();
        if name.is_empty() {
            return Err(TextError::new(CMD, n, line, "statistic without a name"));
        }
        let value = value
            .trim()
            .parse::<u64>()
            .map_err(|_| TextError::new(CMD, n, line, "value is not an unsigned integer"))?;
        out.push((name.to_string(), value));
    }
    Ok(out)
}

/// Global (802.3x) pause settings, `ethtool -a IF`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Pause {
    /// `Autonegotiate:`; `None` when ethtool printed `n/a`.
    pub autoneg: Option<bool>,
    /// `RX:` — the port obeys received pause frames.
    pub rx: Option<bool>,
    /// `TX:` — the port sends pause frames.
    pub tx: Option<bool>,
    /// `RX negotiated:` (netlink ethtool, autonegotiation on).
    pub rx_negotiated: Option<bool>,
    /// `TX negotiated:`.
    pub tx_negotiated: Option<bool>,
    /// `Statistics:` of `ethtool -I -a` (`tx_pause_frames`, `rx_pause_frames`).
    pub stats: Vec<(String, u64)>,
}

/// Reads `ethtool -a IF` (also with `-I`, statistics included).
///
/// # Errors
/// A setting that is not `on`/`off`/`n/a`, a statistic that is not a number, or
/// output without any of `Autonegotiate:`, `RX:`, `TX:` (an error message such
/// as `Cannot get device pause settings`).
pub fn pause(text: &str) -> Result<Pause, TextError> {
    const CMD: &str = "ethtool -a";
    let mut p = Pause::default();
    let mut seen = false;
    for Entry {
        n,
        line,
        in_stats,
        key,
        value,
    } in entries(text, "Pause parameters for")
    {
        if in_stats {
            let v = value.parse::<u64>().map_err(|_| {
                TextError::new(CMD, n, line, "statistic is not an unsigned integer")
            })?;
            p.stats.push((key.to_string(), v));
            continue;
        }
        let slot = match key {
            "Autonegotiate" => &mut p.autoneg,
            "RX" => &mut p.rx,
            "TX" => &mut p.tx,
            "RX negotiated" => &mut p.rx_negotiated,
            "TX negotiated" => &mut p.tx_negotiated,
            _ => continue,
        };
        *slot = on_off(value).ok_or_else(|| TextError::new(CMD, n, line, "not on, off or n/a"))?;
        seen |= matches!(key, "Autonegotiate" | "RX" | "TX");
    }
    if !seen {
        let first = text.lines().next().unwrap_or("");
        return Err(TextError::new(
            CMD,
            0,
            first,
            "no pause parameters in the output",
        ));
    }
    Ok(p)
}

/// One `key: value` line of `ethtool -a` or `--show-fec` output, trimmed, and
/// whether it is under the `Statistics:` heading.
struct Entry<'a> {
    n: usize,
    line: &'a str,
    in_stats: bool,
    key: &'a str,
    value: &'a str,
}

/// The `key: value` lines of output that opens with a line starting with
/// `header` and may end with a `Statistics:` section; other lines are skipped.
fn entries<'a>(text: &'a str, header: &'static str) -> impl Iterator<Item = Entry<'a>> {
    let mut in_stats = false;
    numbered_lines(text).filter_map(move |(n, line)| {
        let t = line.trim();
        if t.is_empty() || t.starts_with(header) {
            return None;
        }
        if t == "Statistics:" {
            in_stats = true;
            return None;
        }
        let (key, value) = t.split_once(':')?;
        Some(Entry {
            n,
            line,
            in_stats,
            key: key.trim(),
            value: value.trim(),
        })
    })
}

/// FEC settings and statistics, `ethtool [-I] --show-fec IF`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Fec {
    /// `Configured FEC encodings:` (newer ethtool: `Supported/Configured`), as
    /// printed: `Auto`, `Off`, `None`, `RS`, `BaseR`, `LLRS`.
    pub configured: Vec<String>,
    /// `Active FEC encoding:`.
    pub active: Vec<String>,
    /// `Statistics:` (with `-I`), in order.
    pub stats: Vec<FecStat>,
}

impl Fec {
    /// The total of a statistic by name.
    pub fn stat(&self, name: &str) -> Option<u64> {
        self.stats.iter().find(|s| s.name == name).map(|s| s.total)
    }

    /// IEEE 802.3 30.5.1.1.17 aFECCorrectedBlocks.
    pub fn corrected_blocks(&self) -> Option<u64> {
        self.stat("corrected_blocks")
    }

    /// IEEE 802.3 30.5.1.1.18 aFECUncorrectableBlocks.
    pub fn uncorrectable_blocks(&self) -> Option<u64> {
        self.stat("uncorrectable_blocks")
    }
}

/// One FEC statistic: its total and, when printed, per-lane values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FecStat {
    /// `corrected_blocks`, `uncorrectable_blocks`, `corrected_bits`,
    /// `fec_symbol_err_0`, ...
    pub name: String,
    /// The total.
    pub total: u64,
    /// Lane 0 first; empty when not printed.
    pub lanes: Vec<u64>,
}

/// Reads `ethtool --show-fec IF` and `ethtool -I --show-fec IF`. Per-lane values
/// come either as `Lane N: value` lines under their statistic or as
/// `[ per_lane: a, b, .. ]` after it.
///
/// # Errors
/// A statistic or lane that is not a number, a lane line before any statistic or
/// out of order, or output without `Active FEC encoding:`.
pub fn fec(text: &str) -> Result<Fec, TextError> {
    const CMD: &str = "ethtool --show-fec";
    let mut f = Fec::default();
    let mut seen_active = false;
    for Entry {
        n,
        line,
        in_stats,
        key,
        value,
    } in entries(text, "FEC parameters for")
    {
        if key.ends_with("FEC encodings") && !in_stats {
            f.configured = value.split_whitespace().map(str::to_string).collect();
            continue;
        }
        if key == "Active FEC encoding" && !in_stats {
            f.active = value.split_whitespace().map(str::to_string).collect();
            seen_active = true;
            continue;
        }
        if !in_stats {
            continue;
        }
        let num = |s: &str| {
            s.trim()
                .parse::<u64>()
                .map_err(|_| TextError::new(CMD, n, line, "not an unsigned integer"))
        };
        if let Some(idx) = key.strip_prefix("Lane ") {
            let idx: usize = idx
                .trim()
                .parse()
                .map_err(|_| TextError::new(CMD, n, line, "lane is not a number"))?;
            let stat = f
                .stats
                .last_mut()
                .ok_or_else(|| TextError::new(CMD, n, line, "lane before any statistic"))?;
            if idx != stat.lanes.len() {
                return Err(TextError::new(CMD, n, line, "lane out of order"));
            }
            stat.lanes.push(num(value)?);
            continue;
        }
        let (total, lanes) = match value.split_once('[') {
            Some((total, rest)) => {
                let inner = rest.trim_end().trim_end_matches(']');
                let inner = inner.trim().strip_prefix("per_lane:").unwrap_or(inner);
                let lanes = inner
                    .split(',')
                    .filter(|s| !s.trim().is_empty())
                    .map(num)
                    .collect::<Result<Vec<_>, _>>()?;
                (num(total)?, lanes)
            }
            None => (num(value)?, Vec::new()),
        };
        f.stats.push(FecStat {
            name: key.to_string(),
            total,
            lanes,
        });
    }
    if !seen_active {
        let first = text.lines().next().unwrap_or("");
        return Err(TextError::new(
            CMD,
            0,
            first,
            "no \"Active FEC encoding:\" in the output",
        ));
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_keep_names_order_and_colons() {
        let s = stats(
            "NIC statistics:\n     rx_packets: 1\n     [7]: rx_errors: 0\n     rxq0: rx_bytes: 5\n",
        )
        .unwrap();
        assert_eq!(
            s,
            vec![
                ("rx_packets".to_string(), 1),
                ("[7]: rx_errors".to_string(), 0),
                ("rxq0: rx_bytes".to_string(), 5)
            ]
        );
        assert_eq!(stats("no stats available\n").unwrap(), vec![]);
        let err = stats("NIC statistics:\n     rx_packets: -1\n").unwrap_err();
        assert_eq!(
            (err.line, err.reason),
            (2, "value is not an unsigned integer")
        );
        assert_eq!(stats("garbage\n").unwrap_err().line, 1);
    }

    #[test]
    fn pause_reads_on_off_and_na() {
        let p = pause("Pause parameters for eth0:\nAutonegotiate:\tn/a\nRX:\t\ton\nTX:\t\toff\n")
            .unwrap();
        assert_eq!((p.autoneg, p.rx, p.tx), (None, Some(true), Some(false)));
        assert_eq!(pause("RX: maybe\n").unwrap_err().line, 1);
        assert_eq!(
            pause("Cannot get device pause settings: Operation not supported\n")
                .unwrap_err()
                .reason,
            "no pause parameters in the output"
        );
    }

    #[test]
    fn fec_reads_histogram_lanes() {
        let f = fec("FEC parameters for eni8np1:\nSupported/Configured FEC encodings: None\nActive FEC encoding: None\nStatistics:\n  corrected_blocks: 123\n  uncorrectable_blocks: 4\n  fec_symbol_err_0: 445 [ per_lane:  125, 120, 100, 100 ]\n  fec_symbol_err_1_to_3: 12\n").unwrap();
        assert_eq!(f.stat("fec_symbol_err_0"), Some(445));
        assert_eq!(f.stats[2].lanes, vec![125, 120, 100, 100]);
        assert_eq!(f.uncorrectable_blocks(), Some(4));
        let err = fec("Active FEC encoding: RS\nStatistics:\n    Lane 0: 1\n").unwrap_err();
        assert_eq!(err.reason, "lane before any statistic");
        assert_eq!(fec("Configured FEC encodings: RS\n").unwrap_err().line, 0);
    }
}
