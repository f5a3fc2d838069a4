//! Attributes of the PCI device behind an RDMA device: PCIe link speed and width
//! (`current_link_speed`, `max_link_width`, ...) and `numa_node`. sysfs re-exports
//! them.

use serde::{Deserialize, Serialize};

use super::sysfs::{decimal, digits_only, i64_value, strip};
use super::{ParseError, Result};

/// PCIe link speed (`current_link_speed`, `max_link_speed`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PcieSpeed {
    /// Transfer rate per lane in GT/s; `None` when the kernel printed `Unknown`.
    pub gts: Option<f64>,
    /// The value as read, without the trailing newline.
    pub raw: String,
}

impl PcieSpeed {
    /// PCIe generation for the transfer rate (2.5 → 1, 5 → 2, 8 → 3, 16 → 4,
    /// 32 → 5, 64 → 6).
    pub fn generation(&self) -> Option<u8> {
        let gts = self.gts?;
        PCIE_GENERATIONS
            .iter()
            .find(|(rate, _)| (gts - rate).abs() < 0.01)
            .map(|(_, generation)| *generation)
    }
}

const PCIE_GENERATIONS: [(f64, u8); 6] = [
    (2.5, 1),
    (5.0, 2),
    (8.0, 3),
    (16.0, 4),
    (32.0, 5),
    (64.0, 6),
];

/// Parses a PCIe link speed: `"8.0 GT/s PCIe"`, `"16.0 GT/s PCIe"`, `"2.5 GT/s"`,
/// `"5 GT/s"`; `"Unknown"` (any text starting with it) gives `gts: None`.
///
/// # Errors
/// Anything else.
pub fn pcie_speed(s: &str) -> Result<PcieSpeed> {
    let raw = strip(s);
    let text = raw.trim();
    let err = || ParseError::new("PCIe link speed", raw);
    let first = text.split_whitespace().next().ok_or_else(err)?;
    if first.eq_ignore_ascii_case("unknown") {
        return Ok(PcieSpeed {
            gts: None,
            raw: raw.to_string(),
        });
    }
    // "8.0 GT/s PCIe" or the unspaced "8.0GT/s".
    let (number, rest) = match first.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
        Some(split) => (&first[..split], &text[split..]),
        None => (first, &text[first.len()..]),
    };
    let gts = decimal(number).ok_or_else(err)?;
    let unit = rest.split_whitespace().next().ok_or_else(err)?;
    if !unit.eq_ignore_ascii_case("GT/s") {
        return Err(err());
    }
    Ok(PcieSpeed {
        gts: Some(gts),
        raw: raw.to_string(),
    })
}

/// Parses a PCIe link width, `"16"` or `"x16"`. `0` and `255` are what some devices
/// report when the width is unknown; they are returned as they are.
///
/// # Errors
/// Not a number that fits a `u8`.
pub fn pcie_width(s: &str) -> Result<u8> {
    let text = strip(s).trim();
    let digits = text.strip_prefix(['x', 'X']).unwrap_or(text);
    digits_only(digits)
        .and_then(|d| d.parse::<u8>().ok())
        .ok_or_else(|| ParseError::new("PCIe link width", text))
}

/// Parses `numa_node`; `-1` (no NUMA information) is returned as it is.
///
/// # Errors
/// Not a number that fits an `i32`.
pub fn numa_node(s: &str) -> Result<i32> {
    let value = i64_value(s).map_err(|e| ParseError::new("NUMA node", &e.value))?;
    i32::try_from(value).map_err(|_| ParseError::new("NUMA node", strip(s).trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pcie_speeds() {
        let s = pcie_speed("8.0 GT/s PCIe\n").unwrap();
        assert_eq!(s.gts, Some(8.0));
        assert_eq!(s.generation(), Some(3));
        assert_eq!(s.raw, "8.0 GT/s PCIe");
        assert_eq!(pcie_speed("16.0 GT/s PCIe").unwrap().generation(), Some(4));
        assert_eq!(pcie_speed("2.5 GT/s").unwrap().generation(), Some(1));
        assert_eq!(pcie_speed("5 GT/s").unwrap().gts, Some(5.0));
        assert_eq!(pcie_speed("32.0GT/s").unwrap().gts, Some(32.0));
        assert_eq!(pcie_speed("Unknown").unwrap().gts, None);
        assert_eq!(pcie_speed("Unknown speed").unwrap().generation(), None);
        assert!(pcie_speed("").is_err());
        assert!(pcie_speed("fast").is_err());
        assert!(pcie_speed("8.0").is_err());
    }

    #[test]
    fn pcie_widths_and_numa() {
        assert_eq!(pcie_width("16\n").unwrap(), 16);
        assert_eq!(pcie_width("x16").unwrap(), 16);
        assert_eq!(pcie_width("255").unwrap(), 255);
        assert_eq!(pcie_width("0").unwrap(), 0);
        assert!(pcie_width("x").is_err());
        assert!(pcie_width("256").is_err());
        assert_eq!(numa_node("-1\n").unwrap(), -1);
        assert_eq!(numa_node("1").unwrap(), 1);
        assert!(numa_node("4294967296").is_err());
        assert!(numa_node("node0").is_err());
    }
}
