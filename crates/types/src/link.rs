//! A port's link rate: its [`Width`] (lanes) and [`Speed`] (per-lane rate), each
//! by the code `ibv_query_port` reports (`active_width`, `active_speed`), the name
//! the kernel prints in `ports/<n>/rate` (`4X`, `EDR`) and the text `ibv_devinfo`
//! prints. One table each; `verbs`' and `res`' devinfo, `host`'s rate parser and
//! the pairwise agent's port rate read them.
//!
//! ```
//! use rdmakit_types::{Speed, Width};
//! let (w, s) = (Width::from_code(2).unwrap(), Speed::from_name("EDR").unwrap());
//! assert_eq!((w.lanes(), s.code(), s.devinfo()), (4, 32, "25.0 Gbps"));
//! assert_eq!(f64::from(w.lanes()) * s.data_gbps(), 100.0);
//! ```

/// A link's width: how many lanes it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Width {
    /// 1X.
    X1,
    /// 2X.
    X2,
    /// 4X.
    X4,
    /// 8X.
    X8,
    /// 12X.
    X12,
}

/// (width, `active_width` code, lanes), in declaration order.
const WIDTHS: [(Width, u8, u8); 5] = [
    (Width::X1, 1, 1),
    (Width::X2, 16, 2),
    (Width::X4, 2, 4),
    (Width::X8, 4, 8),
    (Width::X12, 8, 12),
];

impl Width {
    /// The width of an `active_width` code (1, 2, 4, 8, 16); None for any other.
    pub fn from_code(code: u8) -> Option<Width> {
        WIDTHS.iter().find(|w| w.1 == code).map(|w| w.0)
    }

    /// The width of a lane count (`ports/<n>/rate`'s `4X` is 4).
    pub fn from_lanes(lanes: u8) -> Option<Width> {
        WIDTHS.iter().find(|w| w.2 == lanes).map(|w| w.0)
    }

    /// The widths a PortInfo LinkWidthEnabled or LinkWidthSupported mask
    /// holds (each bit is an `active_width` code), narrowest first; unknown
    /// bits are left out.
    pub fn in_mask(mask: u8) -> Vec<Width> {
        let mut v: Vec<Width> = WIDTHS
            .iter()
            .filter(|w| mask & w.1 != 0)
            .map(|w| w.0)
            .collect();
        v.sort_by_key(|w| w.lanes());
        v
    }

    /// The width of its name as ibnetdiscover and iblinkinfo print it (`4x`,
    /// `4X`; any case).
    pub fn from_name(name: &str) -> Option<Width> {
        let lanes = name.strip_suffix(['x', 'X'])?;
        Width::from_lanes(lanes.parse().ok()?)
    }

    /// Its name: `"4X"`.
    pub fn name(self) -> &'static str {
        WIDTH_NAMES[self as usize]
    }

    /// Its `active_width` code.
    pub fn code(self) -> u8 {
        self.row().1
    }

    /// Its lanes.
    pub fn lanes(self) -> u8 {
        self.row().2
    }

    fn row(self) -> &'static (Width, u8, u8) {
        // The table is in declaration order (its test proves it).
        &WIDTHS[self as usize]
    }
}

/// The widths' names, in declaration order.
const WIDTH_NAMES: [&str; 5] = ["1X", "2X", "4X", "8X", "12X"];

/// A link's per-lane speed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Speed {
    /// Single data rate, 2.5 Gb/s a lane.
    Sdr,
    /// Double, 5 Gb/s.
    Ddr,
    /// Quad, 10 Gb/s.
    Qdr,
    /// FDR10: FDR's 64b/66b coding at QDR's signalling rate.
    Fdr10,
    /// Fourteen, 14.0625 Gb/s.
    Fdr,
    /// Enhanced, 25.78125 Gb/s.
    Edr,
    /// High, 53.125 Gb/s (PAM4).
    Hdr,
    /// Next, 106.25 Gb/s.
    Ndr,
    /// eXtended, 212.5 Gb/s (`active_speed_ex` only: its code does not fit
    /// `active_speed`'s byte).
    Xdr,
}

/// (speed, code, name, `ibv_devinfo` text, signalling Gb/s, data Gb/s).
type SpeedRow = (Speed, u32, &'static str, &'static str, f64, f64);

/// The speeds (rdma-core's `ibv_port_speed`, the kernel's `ib_port_speed`), in
/// declaration order: each with its code, its name, what `ibv_devinfo` prints, and
/// its per-lane signalling and data rates in Gb/s. The data rate is after line
/// coding (8b/10b up to QDR, 64b/66b from FDR); FDR10 is counted at QDR's 8 Gb/s,
/// as the pairwise agent always has.
const SPEEDS: [SpeedRow; 9] = [
    (Speed::Sdr, 1, "SDR", "2.5 Gbps", 2.5, 2.0),
    (Speed::Ddr, 2, "DDR", "5.0 Gbps", 5.0, 4.0),
    (Speed::Qdr, 4, "QDR", "10.0 Gbps", 10.0, 8.0),
    (Speed::Fdr10, 8, "FDR10", "10.0 Gbps", 10.3125, 8.0),
    (Speed::Fdr, 16, "FDR", "14.0 Gbps", 14.0625, 13.64),
    (Speed::Edr, 32, "EDR", "25.0 Gbps", 25.78125, 25.0),
    (Speed::Hdr, 64, "HDR", "50.0 Gbps", 53.125, 50.0),
    (Speed::Ndr, 128, "NDR", "100.0 Gbps", 106.25, 100.0),
    (Speed::Xdr, 256, "XDR", "200.0 Gbps", 212.5, 200.0),
];

impl Speed {
    /// The speed of an `active_speed` (or `active_speed_ex`) code; None for any
    /// other.
    pub fn from_code(code: u32) -> Option<Speed> {
        SPEEDS.iter().find(|s| s.1 == code).map(|s| s.0)
    }

    /// The speed of a name as the kernel prints it (`EDR`; any case).
    pub fn from_name(name: &str) -> Option<Speed> {
        SPEEDS
            .iter()
            .find(|s| s.2.eq_ignore_ascii_case(name))
            .map(|s| s.0)
    }

    /// The speed a PortInfo reports as active: `LinkSpeedExtActive` (1 FDR,
    /// 2 EDR, 4 HDR, 8 NDR) when it is not 0, else `LinkSpeedActive` (1 SDR,
    /// 2 DDR, 4 QDR); None for any other code. FDR10 is not in PortInfo (it is
    /// in Mellanox's ExtendedPortInfo) and XDR is in a later field, so neither
    /// comes from here.
    pub fn from_port_info(active: u8, ext_active: u8) -> Option<Speed> {
        match ext_active {
            0 => Speed::from_port_info_base(active),
            e => Speed::from_port_info_ext(e),
        }
    }

    /// The speeds a PortInfo LinkSpeedEnabled (or Supported) mask and its
    /// LinkSpeedExtEnabled (or ExtSupported) mask hold, slowest first;
    /// unknown bits are left out.
    pub fn in_port_info_masks(mask: u8, ext_mask: u8) -> Vec<Speed> {
        let base = [1u8, 2, 4].into_iter().filter(|b| mask & b != 0);
        let base = base.filter_map(Speed::from_port_info_base);
        let ext = [1u8, 2, 4, 8].into_iter().filter(|b| ext_mask & b != 0);
        base.chain(ext.filter_map(Speed::from_port_info_ext))
            .collect()
    }

    /// Its bits in PortInfo: (`LinkSpeedActive`, `LinkSpeedExtActive`). An
    /// extended speed also reports QDR in the first, as ibnetdiscover expects;
    /// FDR10 and XDR have no PortInfo code and give None.
    pub fn port_info_code(self) -> Option<(u8, u8)> {
        Some(match self {
            Speed::Sdr => (1, 0),
            Speed::Ddr => (2, 0),
            Speed::Qdr => (4, 0),
            Speed::Fdr => (4, 1),
            Speed::Edr => (4, 2),
            Speed::Hdr => (4, 4),
            Speed::Ndr => (4, 8),
            Speed::Fdr10 | Speed::Xdr => return None,
        })
    }

    fn from_port_info_base(code: u8) -> Option<Speed> {
        match code {
            1 => Some(Speed::Sdr),
            2 => Some(Speed::Ddr),
            4 => Some(Speed::Qdr),
            _ => None,
        }
    }

    fn from_port_info_ext(code: u8) -> Option<Speed> {
        match code {
            1 => Some(Speed::Fdr),
            2 => Some(Speed::Edr),
            4 => Some(Speed::Hdr),
            8 => Some(Speed::Ndr),
            _ => None,
        }
    }

    /// Its code.
    pub fn code(self) -> u32 {
        self.row().1
    }

    /// Its name: `"EDR"`.
    pub fn name(self) -> &'static str {
        self.row().2
    }

    /// What `ibv_devinfo` prints for it: `"25.0 Gbps"`.
    pub fn devinfo(self) -> &'static str {
        self.row().3
    }

    /// One lane's signalling rate, Gb/s (EDR: 25.78125).
    pub fn signaling_gbps(self) -> f64 {
        self.row().4
    }

    /// One lane's data rate after line coding, Gb/s (EDR: 25).
    pub fn data_gbps(self) -> f64 {
        self.row().5
    }

    fn row(self) -> &'static SpeedRow {
        // The table is in declaration order (its test proves it).
        &SPEEDS[self as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_width_and_speed_has_its_row() {
        for (i, w) in WIDTHS.iter().enumerate() {
            assert_eq!(w.0 as usize, i, "{w:?} out of order");
        }
        for (i, s) in SPEEDS.iter().enumerate() {
            assert_eq!(s.0 as usize, i, "{:?} out of order", s.0);
        }
        for w in [Width::X1, Width::X2, Width::X4, Width::X8, Width::X12] {
            assert_eq!(Width::from_code(w.code()), Some(w));
            assert_eq!(Width::from_lanes(w.lanes()), Some(w));
        }
        assert_eq!(WIDTHS.len(), 5);
        for s in [
            Speed::Sdr,
            Speed::Ddr,
            Speed::Qdr,
            Speed::Fdr10,
            Speed::Fdr,
            Speed::Edr,
            Speed::Hdr,
            Speed::Ndr,
            Speed::Xdr,
        ] {
            assert_eq!(Speed::from_code(s.code()), Some(s));
            assert_eq!(Speed::from_name(s.name()), Some(s));
        }
        assert_eq!(SPEEDS.len(), 9);
    }

    #[test]
    fn rdma_core_codes_and_ibv_devinfo_texts() {
        // rdma-core's verbs.h: IBV_WIDTH_1X = 1 ... IBV_WIDTH_2X = 16.
        assert_eq!(Width::from_code(16).map(Width::lanes), Some(2));
        assert_eq!(Width::from_code(3), None);
        assert_eq!(Width::from_lanes(3), None);
        // ibv_devinfo.c speed_str(): FDR10 prints as QDR does.
        assert_eq!(Speed::from_code(8).map(Speed::devinfo), Some("10.0 Gbps"));
        assert_eq!(Speed::from_code(3), None);
        assert_eq!(Speed::from_name("ndr"), Some(Speed::Ndr));
        assert_eq!(Speed::from_name("GDR"), None);
    }

    #[test]
    fn width_names_and_port_info_masks() {
        for w in [Width::X1, Width::X2, Width::X4, Width::X8, Width::X12] {
            assert_eq!(Width::from_name(w.name()), Some(w));
        }
        // ibnetdiscover prints "4x", iblinkinfo "4X".
        assert_eq!(Width::from_name("4x"), Some(Width::X4));
        assert_eq!(Width::from_name("12x").map(Width::name), Some("12X"));
        assert_eq!(Width::from_name("3x"), None);
        assert_eq!(Width::from_name("x"), None);
        assert_eq!(Width::from_name("4"), None);
        // ibsim's LinkWidthSupported: 1X|2X|4X|8X|12X = 0x1f.
        assert_eq!(
            Width::in_mask(0x1f),
            [Width::X1, Width::X2, Width::X4, Width::X8, Width::X12]
        );
        assert_eq!(Width::in_mask(2), [Width::X4]);
        assert_eq!(Width::in_mask(0x20), []);
    }

    #[test]
    fn port_info_speed_codes_as_ibnetdiscover_reads_them() {
        // ibnetdiscover.c: LinkSpeedExtActive wins when it is not 0.
        assert_eq!(Speed::from_port_info(4, 0), Some(Speed::Qdr));
        assert_eq!(Speed::from_port_info(1, 0), Some(Speed::Sdr));
        assert_eq!(Speed::from_port_info(4, 2), Some(Speed::Edr));
        assert_eq!(Speed::from_port_info(0, 8), Some(Speed::Ndr));
        assert_eq!(Speed::from_port_info(3, 0), None);
        assert_eq!(Speed::from_port_info(4, 3), None);
        assert_eq!(Speed::from_port_info(0, 0), None);
        // ibsim: supported SDR|DDR|QDR = 7, ext HDR|EDR|FDR = 7.
        assert_eq!(
            Speed::in_port_info_masks(7, 7),
            [
                Speed::Sdr,
                Speed::Ddr,
                Speed::Qdr,
                Speed::Fdr,
                Speed::Edr,
                Speed::Hdr
            ]
        );
        assert_eq!(Speed::in_port_info_masks(0x8, 0x10), []);
        for s in [
            Speed::Sdr,
            Speed::Ddr,
            Speed::Qdr,
            Speed::Fdr,
            Speed::Edr,
            Speed::Hdr,
            Speed::Ndr,
        ] {
            let (a, e) = s.port_info_code().unwrap();
            assert_eq!(Speed::from_port_info(a, e), Some(s));
        }
        assert_eq!(Speed::Fdr10.port_info_code(), None);
        assert_eq!(Speed::Xdr.port_info_code(), None);
    }
}
