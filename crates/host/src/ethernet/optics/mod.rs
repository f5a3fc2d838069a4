//! The plug-in module's EEPROM, as `ethtool -m IF hex on` prints it (or as raw
//! bytes), decoded into what a link diagnosis needs: who made the module, its live
//! temperature, supply voltage and per-lane bias and optical power, and the
//! module's own alarm and warning thresholds.
//!
//! One pure function, [`parse_module`]: no I/O, the same bytes always give the same
//! [`Module`], input beyond [`MAX_INPUT`] bytes is ignored, and no input makes it
//! panic (a property test feeds it arbitrary bytes). A dump too short for the
//! layout its identifier names is an [`OpticsError::Truncated`] that says which
//! region is missing; an optional page that is absent (thresholds, lane monitors)
//! is not an error but a [`Missing`] entry saying which page, and whether the
//! dump lacks it or the module does not implement it.
//!
//! # Input forms
//!
//! * ethtool's hex dump: an `Offset  Values` header and rows `0x0080:  11 8c ..`,
//!   any whitespace between fields (mail clients turn ethtool's tabs into spaces);
//! * several dumps in one text, each introduced by a line naming its page:
//!   the command line (`ethtool -m eth0 page 0x11 hex on`, `... i2c 0x51 ...`) or
//!   SONiC `sfputil show eeprom-hexdump` headers (`Lower page 0h`,
//!   `Upper page 0x11h`), whose rows are `hexdump -C` style
//!   (`00000080 1e 48 .. |.H..|`, `*` for repeated rows);
//! * raw binary (what `ethtool -m IF raw on` writes), recognized by holding a
//!   control byte other than tab, CR and LF (text never does; every real image
//!   has zero bytes).
//!
//! Without a page header, offsets are the legacy flat layout ethtool's ioctl path
//! returns: bytes 0-127 the lower page, and upper page N at `128 * (N + 1)`, so
//! SFF-8636 pages 00h-03h sit at 0x80, 0x100, 0x180, 0x200 (a 640-byte dump) and
//! CMIS pages 01h/02h at 0x100/0x180. For SFF-8472 (SFP) the flat layout is A0h at
//! 0-255 and A2h (diagnostics) at 256-511.
//!
//! # Layouts decoded (by identifier byte 0, SFF-8024)
//!
//! | identifier | spec | identity | monitors | thresholds |
//! |---|---|---|---|---|
//! | 0x03 SFP | SFF-8472 | A0h 20-83 | A2h 96-105 (one lane) | A2h 0-39 |
//! | 0x0c/0x0d/0x11 QSFP/QSFP+/QSFP28 | SFF-8636 | page 00h 148-211 | lower 22-57 (4 lanes) | page 03h 128-199 |
//! | 0x18/0x19/0x1e (and 0x1b, 0x1f, 0x20) | CMIS | page 00h 129-181 | lower 14-17, page 11h 154-201 | page 02h 128-199 |
//!
//! Units, the same in the three specs: temperature a signed 16-bit count of
//! 1/256 °C, supply voltage 100 µV, laser bias 2 µA, optical power 0.1 µW, all
//! big-endian. Verified against ethtool (codacy-open-source-projects-scans/ethtool
//! @9f64c46d, a mirror of ethtool upstream, 2026-04): `sff-common.h` prints
//! temperature as `temp / 256.`, voltage as `/ 10000.` V, bias as `/ 500.` mA
//! (= 2 µA) and power as `/ 10000.` mW (= 0.1 µW); `qsfp.h`, `cmis.h` and
//! `sfpdiag.c` of the same tree give the offsets used here.
//!
//! ```
//! use rdmakit_host::ethernet::optics::{parse_module, Spec};
//!
//! let mut eeprom = vec![0u8; 256];
//! eeprom[0] = 0x11; // QSFP28
//! eeprom[22] = 0x19; // temperature 0x1980 / 256 = 25.5 degrees C
//! eeprom[23] = 0x80;
//! eeprom[148..156].copy_from_slice(b"ACME    ");
//! let m = parse_module(&eeprom).unwrap();
//! assert_eq!(m.spec, Spec::Sff8636);
//! assert_eq!(m.vendor, "ACME");
//! assert_eq!(m.temperature_c, Some(25.5));
//! assert!(m.thresholds.is_none()); // page 03h is not in a 256-byte dump
//! ```

use std::fmt;

use serde::{Deserialize, Serialize};

use image::Image;

mod decode;
mod image;

/// Input beyond this many bytes is ignored.
pub const MAX_INPUT: usize = 64 * 1024;

/// Bytes per page (a lower page, or the upper half of a numbered page).
const PAGE: usize = 128;

/// The flat image: lower page plus 256 upper pages.
const IMAGE_LEN: usize = PAGE * 257;

/// Flat address of the first byte of SFF-8472's A2h (diagnostics) page.
const A2: usize = 256;

/// Bytes one dump row may hold (ethtool prints 16, hexdump -C 16).
const MAX_ROW: usize = 64;

/// The decoded module.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Module {
    /// Which memory map the identifier selects.
    pub spec: Spec,
    /// SFF-8024 identifier, byte 0.
    pub identifier: u8,
    /// Its name ("QSFP28", "QSFP-DD", "SFP").
    pub identifier_name: String,
    /// Vendor name, ASCII with trailing spaces (and NUL padding) removed; a
    /// non-printable byte becomes `_` (as ethtool prints it).
    pub vendor: String,
    /// Vendor part number.
    pub part_number: String,
    /// Vendor serial number.
    pub serial: String,
    /// Vendor revision.
    pub revision: String,
    /// Module temperature, °C; `None` when the module has no monitors.
    pub temperature_c: Option<f64>,
    /// Supply voltage, V.
    pub vcc_v: Option<f64>,
    /// Per-lane monitors, lane 1 first; empty when none could be read.
    pub lanes: Vec<Lane>,
    /// Whether the received power is average power or OMA, when the module
    /// says so.
    pub rx_power_kind: Option<RxPowerKind>,
    /// The module's own alarm and warning thresholds, when the page holding them
    /// is in the dump (see [`Module::missing`] otherwise).
    pub thresholds: Option<Thresholds>,
    /// SFF-8472 external calibration was applied (A0h byte 92 bit 4).
    pub externally_calibrated: bool,
    /// What could not be decoded, and why.
    pub missing: Vec<Missing>,
    /// Check codes that do not match their bytes: a garbled read (a driver that
    /// returned the wrong bytes) shows here before its values mislead anyone.
    pub bad_checksums: Vec<BadChecksum>,
}

impl Module {
    /// Why `what` is missing, if it is.
    pub fn missing(&self, what: Facet) -> Option<&Missing> {
        self.missing.iter().find(|m| m.what == what)
    }
}

/// The management interface a module speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Spec {
    /// SFP/SFP+/SFP28: A0h identity, A2h diagnostics.
    Sff8472,
    /// QSFP/QSFP+/QSFP28 (SFF-8636, formerly SFF-8436).
    Sff8636,
    /// Common Management Interface Specification (QSFP-DD, OSFP, QSFP+ CMIS).
    Cmis,
}

/// One lane's monitors; a value the module does not monitor is `None`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lane {
    /// Lane number, from 1.
    pub lane: u8,
    /// Laser bias current, mA.
    pub tx_bias_ma: Option<f64>,
    /// Transmitted optical power, mW.
    pub tx_power_mw: Option<f64>,
    /// The same in dBm; `None` for 0 mW.
    pub tx_power_dbm: Option<f64>,
    /// Received optical power, mW (average or OMA: see [`Module::rx_power_kind`]).
    pub rx_power_mw: Option<f64>,
    /// The same in dBm; `None` for 0 mW.
    pub rx_power_dbm: Option<f64>,
}

/// What the received-power monitor measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RxPowerKind {
    /// Average optical power.
    Average,
    /// Optical modulation amplitude.
    Oma,
}

/// The module's thresholds, in the units of the monitors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Thresholds {
    /// °C.
    pub temperature_c: Levels,
    /// V.
    pub vcc_v: Levels,
    /// mA.
    pub tx_bias_ma: Levels,
    /// mW.
    pub tx_power_mw: Levels,
    /// mW.
    pub rx_power_mw: Levels,
}

/// High/low alarm and warning levels of one monitor.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Levels {
    /// High alarm.
    pub high_alarm: f64,
    /// Low alarm.
    pub low_alarm: f64,
    /// High warning.
    pub high_warning: f64,
    /// Low warning.
    pub low_warning: f64,
}

/// Something that could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Missing {
    /// What is missing.
    pub what: Facet,
    /// The page that holds it.
    pub page: Page,
    /// Whether the dump lacks the page or the module does not implement it.
    pub reason: Absence,
}

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let why = match self.reason {
            Absence::NotInDump => "is not in the dump",
            Absence::NotImplemented => "is not implemented by the module",
        };
        write!(f, "{}: {} {why}", self.what, self.page)
    }
}

/// A part of the decoded module.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Facet {
    /// Temperature, voltage and (SFP) the lane monitors.
    Monitors,
    /// Per-lane bias and power (SFF-8636 keeps them with the module monitors).
    LaneMonitors,
    /// Alarm and warning thresholds.
    Thresholds,
    /// CMIS bias scale factor (page 01h byte 160); 1 is assumed without it.
    BiasScale,
    /// Average power or OMA.
    RxPowerKind,
}

impl fmt::Display for Facet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Facet::Monitors => "monitors",
            Facet::LaneMonitors => "lane monitors",
            Facet::Thresholds => "thresholds",
            Facet::BiasScale => "bias scale",
            Facet::RxPowerKind => "receive power type",
        })
    }
}

/// A page of module memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Page {
    /// SFF-8472 diagnostics, I2C address 0x51.
    A2h,
    /// Upper page N (SFF-8636, CMIS), bank 0.
    Upper(u8),
}

impl fmt::Display for Page {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Page::A2h => f.write_str("page A2h"),
            Page::Upper(n) => write!(f, "page {n:02X}h"),
        }
    }
}

/// Why a page's content is missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Absence {
    /// The module has the page but the dump does not hold it (a 256-byte
    /// ioctl dump of a paged QSFP28, a CMIS dump of page 00h only).
    NotInDump,
    /// The module says it has no such page or feature (flat memory, no DDM).
    NotImplemented,
}

/// A check code that does not match the bytes it covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BadChecksum {
    /// The spec's name for it (`CC_BASE`, `CC_EXT`, `CC_DMI`, `page 00h`).
    pub name: String,
    /// Flat address of the check byte.
    pub at: usize,
    /// The byte stored there.
    pub stored: u8,
    /// The low 8 bits of the sum of the covered bytes.
    pub computed: u8,
}

/// Why a dump could not be decoded at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpticsError {
    /// No bytes: empty input, or text without a single dump row.
    #[error("no module EEPROM bytes: neither hex dump rows nor a binary dump")]
    NoData,
    /// A dump row that cannot be read.
    #[error("line {line}: {reason}: {text:?}")]
    BadLine {
        /// 1-based line number.
        line: usize,
        /// The line, cut to 80 characters.
        text: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A row addressing memory beyond the 256 pages a module can have.
    #[error("line {line}: offset {offset:#x} is beyond module memory")]
    OffsetOutOfRange {
        /// 1-based line number.
        line: usize,
        /// The offset.
        offset: usize,
    },
    /// The dump ends (or has a hole) inside a region the layout requires.
    #[error("{spec} dump is truncated: {region} is missing (first absent byte {offset:#x})")]
    Truncated {
        /// The layout being decoded.
        spec: &'static str,
        /// The required region.
        region: &'static str,
        /// Flat address of the first absent byte.
        offset: usize,
    },
    /// An identifier this decoder does not know a memory map for.
    #[error("module identifier {identifier:#04x} has no supported memory map")]
    UnsupportedIdentifier {
        /// Byte 0.
        identifier: u8,
    },
}

/// Decodes a module EEPROM given as ethtool's hex dump text or as raw bytes.
///
/// # Errors
/// [`OpticsError::NoData`] for input without bytes, [`OpticsError::BadLine`] /
/// [`OpticsError::OffsetOutOfRange`] for a dump row that cannot be read,
/// [`OpticsError::Truncated`] when a required region (SFF-8472 A0h bytes 0-95,
/// SFF-8636/CMIS bytes 0-255) is incomplete, and
/// [`OpticsError::UnsupportedIdentifier`] for another identifier.
pub fn parse_module(text_or_bytes: &[u8]) -> Result<Module, OpticsError> {
    let input = &text_or_bytes[..text_or_bytes.len().min(MAX_INPUT)];
    // Text never holds NUL or other control bytes; a memory image always does
    // (its zero bytes, and identifiers 0x03, 0x0c, 0x11, ..). Byte 0 alone would
    // not do: QSFP+ is 0x0d, a carriage return.
    let binary = input
        .iter()
        .any(|&b| b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r'));
    let image = if binary {
        Image::from_raw(input)
    } else {
        Image::from_text(&String::from_utf8_lossy(input))?
    };
    if image.is_empty() {
        return Err(OpticsError::NoData);
    }
    decode::decode(&image)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A module image of `len` zero bytes with identifier byte `id`.
    pub(super) fn blank(id: u8, len: usize) -> Vec<u8> {
        let mut v = vec![0u8; len];
        v[0] = id;
        v
    }

    #[test]
    fn malformed_rows_name_their_line() {
        let err = parse_module(b"Offset Values\n0x0000: 11 zz 00\n").unwrap_err();
        assert!(
            matches!(err, OpticsError::BadLine { line: 2, .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains("line 2"));
        assert_eq!(parse_module(b"").unwrap_err(), OpticsError::NoData);
        assert_eq!(
            parse_module(b"no dump here\n").unwrap_err(),
            OpticsError::NoData
        );
        let err = parse_module(b"0x9000: 00\n").unwrap_err();
        assert!(
            matches!(err, OpticsError::OffsetOutOfRange { line: 1, .. }),
            "{err:?}"
        );
    }

    #[test]
    fn a_short_dump_says_which_region_is_missing() {
        let err = parse_module(&blank(0x11, 200)).unwrap_err();
        assert_eq!(
            err,
            OpticsError::Truncated {
                spec: "SFF-8636",
                region: "lower page and upper page 00h (bytes 0-255)",
                offset: 200
            }
        );
        let err = parse_module(&blank(0x03, 90)).unwrap_err();
        assert!(matches!(
            err,
            OpticsError::Truncated {
                spec: "SFF-8472",
                offset: 90,
                ..
            }
        ));
        assert_eq!(
            parse_module(&blank(0x07, 256)).unwrap_err(),
            OpticsError::UnsupportedIdentifier { identifier: 7 }
        );
    }
}
