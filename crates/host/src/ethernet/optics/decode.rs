//! The three memory maps: SFF-8472, SFF-8636 and CMIS.

use super::image::{upper, Image};
use super::{
    Absence, Facet, Lane, Levels, Missing, Module, OpticsError, Page, RxPowerKind, Spec,
    Thresholds, A2,
};

pub(super) fn decode(img: &Image) -> Result<Module, OpticsError> {
    let identifier = img.byte(0).ok_or(OpticsError::Truncated {
        spec: "module",
        region: "the identifier (byte 0)",
        offset: 0,
    })?;
    match identifier {
        0x03 => sff8472(img),
        0x0c | 0x0d | 0x11 => sff8636(img, identifier),
        // ethtool decodes all of these with its CMIS code.
        0x18 | 0x19 | 0x1b | 0x1e | 0x1f | 0x20 => cmis(img, identifier),
        _ => Err(OpticsError::UnsupportedIdentifier { identifier }),
    }
}

fn identifier_name(id: u8) -> &'static str {
    match id {
        0x03 => "SFP",
        0x0c => "QSFP",
        0x0d => "QSFP+",
        0x11 => "QSFP28",
        0x18 => "QSFP-DD",
        0x19 => "OSFP",
        0x1b => "DSFP",
        0x1e => "QSFP+ (CMIS)",
        0x1f => "SFP-DD",
        0x20 => "SFP+ (CMIS)",
        _ => "unknown",
    }
}

fn require(
    img: &Image,
    spec: &'static str,
    region: &'static str,
    range: std::ops::Range<usize>,
) -> Result<(), OpticsError> {
    match img.first_absent(range) {
        Some(offset) => Err(OpticsError::Truncated {
            spec,
            region,
            offset,
        }),
        None => Ok(()),
    }
}

fn celsius(raw: f64) -> f64 {
    raw / 256.0
}

fn volts(raw: f64) -> f64 {
    raw * 100e-6
}

fn milliamps(raw: f64) -> f64 {
    raw * 2e-3
}

fn milliwatts(raw: f64) -> f64 {
    raw * 1e-4
}

fn dbm(mw: f64) -> Option<f64> {
    (mw > 0.0 && mw.is_finite()).then(|| 10.0 * mw.log10())
}

fn finite(v: f64) -> Option<f64> {
    v.is_finite().then_some(v)
}

fn lane(n: u8, bias_ma: Option<f64>, tx_mw: Option<f64>, rx_mw: Option<f64>) -> Lane {
    Lane {
        lane: n,
        tx_bias_ma: bias_ma,
        tx_power_mw: tx_mw,
        tx_power_dbm: tx_mw.and_then(dbm),
        rx_power_mw: rx_mw,
        rx_power_dbm: rx_mw.and_then(dbm),
    }
}

fn module(
    spec: Spec,
    identifier: u8,
    img: &Image,
    name: usize,
    pn: usize,
    rev: (usize, usize),
    sn: usize,
) -> Module {
    Module {
        spec,
        identifier,
        identifier_name: identifier_name(identifier).to_string(),
        vendor: img.ascii(name..name + 16),
        part_number: img.ascii(pn..pn + 16),
        serial: img.ascii(sn..sn + 16),
        revision: img.ascii(rev.0..rev.0 + rev.1),
        temperature_c: None,
        vcc_v: None,
        lanes: Vec::new(),
        rx_power_kind: None,
        thresholds: None,
        externally_calibrated: false,
        missing: Vec::new(),
        bad_checksums: Vec::new(),
    }
}

fn missing(what: Facet, page: Page, reason: Absence) -> Missing {
    Missing { what, page, reason }
}

/// Four 16-bit levels at `at` (high alarm, low alarm, high warning, low warning),
/// each scaled by `f`.
fn levels(img: &Image, at: usize, signed: bool, f: impl Fn(f64) -> f64) -> Option<Levels> {
    let word = |k: usize| -> Option<f64> {
        let a = at + 2 * k;
        Some(if signed {
            f64::from(img.i16(a)?)
        } else {
            f64::from(img.u16(a)?)
        })
    };
    Some(Levels {
        high_alarm: f(word(0)?),
        low_alarm: f(word(1)?),
        high_warning: f(word(2)?),
        low_warning: f(word(3)?),
    })
}

// --- SFF-8472 (SFP): SFF-8472 rev 12.4 tables 4-1 (A0h) and 9-5 (A2h); offsets
// as in ethtool sfpdiag.c (SFF_A2_TEMP 96 ... SFF_A2_RX_PWR 104, thresholds 0-39,
// calibration 56-91).

fn sff8472(img: &Image) -> Result<Module, OpticsError> {
    require(img, "SFF-8472", "A0h bytes 0-95", 0..96)?;
    let mut m = module(Spec::Sff8472, 0x03, img, 20, 40, (56, 4), 68);
    m.bad_checksums.extend(img.checksum("CC_BASE", 0..63, 63));
    m.bad_checksums.extend(img.checksum("CC_EXT", 64..95, 95));
    let dom = img.byte(92).unwrap_or(0);
    let options = img.byte(93).unwrap_or(0);
    if dom & 0x40 == 0 {
        // No digital diagnostics: the module may still answer at A2h (the
        // MikroTik fixture does), but the values mean nothing.
        m.missing
            .push(missing(Facet::Monitors, Page::A2h, Absence::NotImplemented));
        m.missing.push(missing(
            Facet::Thresholds,
            Page::A2h,
            Absence::NotImplemented,
        ));
        return Ok(m);
    }
    m.rx_power_kind = Some(if dom & 0x08 != 0 {
        RxPowerKind::Average
    } else {
        RxPowerKind::Oma
    });
    m.externally_calibrated = dom & 0x10 != 0;
    let cal = if m.externally_calibrated {
        match Calibration::read(img) {
            Some(c) => c,
            None => {
                m.missing
                    .push(missing(Facet::Monitors, Page::A2h, Absence::NotInDump));
                m.missing
                    .push(missing(Facet::Thresholds, Page::A2h, Absence::NotInDump));
                return Ok(m);
            }
        }
    } else {
        Calibration::INTERNAL
    };
    m.bad_checksums
        .extend(img.checksum("CC_DMI", A2..A2 + 95, A2 + 95));
    if img.has(A2 + 96..A2 + 106) {
        let t = cal.temperature(f64::from(img.i16(A2 + 96).unwrap_or(0)));
        let v = cal.vcc(f64::from(img.u16(A2 + 98).unwrap_or(0)));
        let bias = cal.bias(f64::from(img.u16(A2 + 100).unwrap_or(0)));
        let tx = cal.tx_power(f64::from(img.u16(A2 + 102).unwrap_or(0)));
        let rx = cal.rx_power(f64::from(img.u16(A2 + 104).unwrap_or(0)));
        m.temperature_c = finite(celsius(t));
        m.vcc_v = finite(volts(v));
        m.lanes.push(lane(
            1,
            finite(milliamps(bias)),
            finite(milliwatts(tx)),
            finite(milliwatts(rx)),
        ));
    } else {
        m.missing
            .push(missing(Facet::Monitors, Page::A2h, Absence::NotInDump));
    }
    if options & 0x80 == 0 {
        m.missing.push(missing(
            Facet::Thresholds,
            Page::A2h,
            Absence::NotImplemented,
        ));
    } else {
        let t = |at: usize, signed: bool, f: &dyn Fn(f64) -> f64| levels(img, A2 + at, signed, f);
        let th = (|| {
            Some(Thresholds {
                temperature_c: t(0, true, &|r| celsius(cal.temperature(r)))?,
                vcc_v: t(8, false, &|r| volts(cal.vcc(r)))?,
                tx_bias_ma: t(16, false, &|r| milliamps(cal.bias(r)))?,
                tx_power_mw: t(24, false, &|r| milliwatts(cal.tx_power(r)))?,
                rx_power_mw: t(32, false, &|r| milliwatts(cal.rx_power(r)))?,
            })
        })();
        match th {
            Some(th) => m.thresholds = Some(th),
            None => m
                .missing
                .push(missing(Facet::Thresholds, Page::A2h, Absence::NotInDump)),
        }
    }
    Ok(m)
}

/// SFF-8472 external calibration (A2h bytes 56-91): slopes are unsigned 8.8
/// fixed point, offsets signed 16-bit in the measurement's units, Rx power a
/// polynomial of IEEE-754 single-precision coefficients Rx_PWR(4)..Rx_PWR(0) at
/// 56, 60, 64, 68, 72 (SFF-8472 rev 12.4 section 9.3; ethtool's sfpdiag.c reads
/// the same bytes but applies Rx_PWR(1..3) as linear terms and ignores
/// Rx_PWR(4) — here the spec's polynomial is used).
struct Calibration {
    rx: [f64; 5],
    bias: (f64, f64),
    tx: (f64, f64),
    temp: (f64, f64),
    vcc: (f64, f64),
}

impl Calibration {
    const INTERNAL: Calibration = Calibration {
        rx: [0.0, 1.0, 0.0, 0.0, 0.0],
        bias: (1.0, 0.0),
        tx: (1.0, 0.0),
        temp: (1.0, 0.0),
        vcc: (1.0, 0.0),
    };

    fn read(img: &Image) -> Option<Calibration> {
        let f32_at = |a: usize| -> Option<f64> {
            let b = [
                img.byte(A2 + a)?,
                img.byte(A2 + a + 1)?,
                img.byte(A2 + a + 2)?,
                img.byte(A2 + a + 3)?,
            ];
            Some(f64::from(f32::from_be_bytes(b)))
        };
        let slope_off = |a: usize| -> Option<(f64, f64)> {
            let slope = f64::from(img.byte(A2 + a)?) + f64::from(img.byte(A2 + a + 1)?) / 256.0;
            Some((slope, f64::from(img.i16(A2 + a + 2)?)))
        };
        Some(Calibration {
            rx: [
                f32_at(72)?,
                f32_at(68)?,
                f32_at(64)?,
                f32_at(60)?,
                f32_at(56)?,
            ],
            bias: slope_off(76)?,
            tx: slope_off(80)?,
            temp: slope_off(84)?,
            vcc: slope_off(88)?,
        })
    }

    fn temperature(&self, raw: f64) -> f64 {
        raw * self.temp.0 + self.temp.1
    }

    fn vcc(&self, raw: f64) -> f64 {
        raw * self.vcc.0 + self.vcc.1
    }

    fn bias(&self, raw: f64) -> f64 {
        raw * self.bias.0 + self.bias.1
    }

    fn tx_power(&self, raw: f64) -> f64 {
        raw * self.tx.0 + self.tx.1
    }

    fn rx_power(&self, raw: f64) -> f64 {
        self.rx.iter().rev().fold(0.0, |acc, c| acc * raw + c)
    }
}

// --- SFF-8636 (QSFP/QSFP+/QSFP28): lower page monitors 22-57, upper page 00h
// identity 148-211 and diagnostic type 220, page 03h thresholds 128-199
// (ethtool qsfp.h: SFF8636_TEMP_HALRM 0x80, VCC 0x90, RX_PWR 0xB0, TX_BIAS 0xB8,
// TX_PWR 0xC0; page 03h present unless lower byte 2 bit 2, flat memory, is set).

fn sff8636(img: &Image, identifier: u8) -> Result<Module, OpticsError> {
    require(
        img,
        "SFF-8636",
        "lower page and upper page 00h (bytes 0-255)",
        0..256,
    )?;
    let mut m = module(Spec::Sff8636, identifier, img, 148, 168, (184, 2), 196);
    m.bad_checksums
        .extend(img.checksum("CC_BASE", 128..191, 191));
    m.bad_checksums
        .extend(img.checksum("CC_EXT", 192..223, 223));
    let w = |a: usize| f64::from(img.u16(a).unwrap_or(0));
    m.temperature_c = Some(celsius(f64::from(img.i16(22).unwrap_or(0))));
    m.vcc_v = Some(volts(w(26)));
    m.lanes = (0..4u8)
        .map(|i| {
            let k = 2 * i as usize;
            lane(
                i + 1,
                Some(milliamps(w(42 + k))),
                Some(milliwatts(w(50 + k))),
                Some(milliwatts(w(34 + k))),
            )
        })
        .collect();
    m.rx_power_kind = Some(if img.byte(220).unwrap_or(0) & 0x08 != 0 {
        RxPowerKind::Average
    } else {
        RxPowerKind::Oma
    });
    if img.byte(2).unwrap_or(0) & 0x04 != 0 {
        m.missing.push(missing(
            Facet::Thresholds,
            Page::Upper(3),
            Absence::NotImplemented,
        ));
        return Ok(m);
    }
    let p3 = |off: usize| upper(3, off);
    let th = (|| {
        Some(Thresholds {
            temperature_c: levels(img, p3(0x80), true, celsius)?,
            vcc_v: levels(img, p3(0x90), false, volts)?,
            rx_power_mw: levels(img, p3(0xB0), false, milliwatts)?,
            tx_bias_ma: levels(img, p3(0xB8), false, milliamps)?,
            tx_power_mw: levels(img, p3(0xC0), false, milliwatts)?,
        })
    })();
    match th {
        Some(th) => m.thresholds = Some(th),
        None => m.missing.push(missing(
            Facet::Thresholds,
            Page::Upper(3),
            Absence::NotInDump,
        )),
    }
    Ok(m)
}

// --- CMIS: lower page temperature 14, Vcc 16, memory model byte 2 bit 7;
// page 00h identity 129-181 and the first application descriptor at 86-89
// (media lane count, low nibble of 88); page 01h Rx power type 151 bit 4 (set =
// average), monitor advertisement 160 (bit 0 bias, 1 Tx power, 2 Rx power, bits
// 3-4 bias scale); page 02h thresholds 128-199; page 11h lane monitors Tx power
// 154, bias 170, Rx power 186 (ethtool cmis.h, module-common.h).
//
// Bias scale: the raw bias is multiplied by 1, 2 or 4 as SONiC's
// sonic-platform-common cmis.py does (`tx_bias *= 2**scale`); ethtool's cmis.c
// shifts the raw value right instead, which reads a scaled module low by the
// square of the factor — fixtures here all have scale 1 or no page 01h.

fn cmis(img: &Image, identifier: u8) -> Result<Module, OpticsError> {
    require(
        img,
        "CMIS",
        "lower page and upper page 00h (bytes 0-255)",
        0..256,
    )?;
    let mut m = module(Spec::Cmis, identifier, img, 129, 148, (164, 2), 166);
    m.bad_checksums
        .extend(img.checksum("page 00h", 128..222, 222));
    m.temperature_c = Some(celsius(f64::from(img.i16(14).unwrap_or(0))));
    m.vcc_v = Some(volts(f64::from(img.u16(16).unwrap_or(0))));
    if img.byte(2).unwrap_or(0) & 0x80 != 0 {
        m.missing.push(missing(
            Facet::LaneMonitors,
            Page::Upper(0x11),
            Absence::NotImplemented,
        ));
        m.missing.push(missing(
            Facet::Thresholds,
            Page::Upper(2),
            Absence::NotImplemented,
        ));
        return Ok(m);
    }
    let lanes = match img.byte(88).unwrap_or(0) & 0x0f {
        n @ 1..=8 if img.byte(86) != Some(0xff) => n,
        _ => 8,
    };
    let (scale, support) = match (img.byte(upper(1, 151)), img.byte(upper(1, 160))) {
        (Some(types), Some(adv)) => {
            m.rx_power_kind = Some(if types & 0x10 != 0 {
                RxPowerKind::Average
            } else {
                RxPowerKind::Oma
            });
            let scale = match adv & 0x18 {
                0x08 => 2.0,
                0x10 => 4.0,
                _ => 1.0,
            };
            (scale, adv)
        }
        _ => {
            m.missing.push(missing(
                Facet::RxPowerKind,
                Page::Upper(1),
                Absence::NotInDump,
            ));
            m.missing.push(missing(
                Facet::BiasScale,
                Page::Upper(1),
                Absence::NotInDump,
            ));
            (1.0, 0x07)
        }
    };
    let bias = |raw: f64| milliamps(raw * scale);
    let p11 = |off: usize| upper(0x11, off);
    if img.has(p11(154)..p11(154 + 2 * lanes as usize))
        && img.has(p11(170)..p11(170 + 2 * lanes as usize))
        && img.has(p11(186)..p11(186 + 2 * lanes as usize))
    {
        let w = |a: usize| f64::from(img.u16(a).unwrap_or(0));
        m.lanes = (0..lanes)
            .map(|i| {
                let k = 2 * i as usize;
                lane(
                    i + 1,
                    (support & 0x01 != 0).then(|| bias(w(p11(170) + k))),
                    (support & 0x02 != 0).then(|| milliwatts(w(p11(154) + k))),
                    (support & 0x04 != 0).then(|| milliwatts(w(p11(186) + k))),
                )
            })
            .collect();
    } else {
        m.missing.push(missing(
            Facet::LaneMonitors,
            Page::Upper(0x11),
            Absence::NotInDump,
        ));
    }
    let p2 = |off: usize| upper(2, off);
    let th = (|| {
        Some(Thresholds {
            temperature_c: levels(img, p2(0x80), true, celsius)?,
            vcc_v: levels(img, p2(0x88), false, volts)?,
            tx_power_mw: levels(img, p2(0xB0), false, milliwatts)?,
            tx_bias_ma: levels(img, p2(0xB8), false, bias)?,
            rx_power_mw: levels(img, p2(0xC0), false, milliwatts)?,
        })
    })();
    match th {
        Some(th) => m.thresholds = Some(th),
        None => m.missing.push(missing(
            Facet::Thresholds,
            Page::Upper(2),
            Absence::NotInDump,
        )),
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ethernet::optics::parse_module;
    use crate::ethernet::optics::tests::blank;

    #[test]
    fn sff8472_external_calibration_applies_slopes_offsets_and_polynomial() {
        // Hand-made: an SFP with DDM, external calibration and thresholds.
        let mut e = blank(0x03, 512);
        e[92] = 0x40 | 0x10 | 0x08; // DDM, externally calibrated, average power
        e[93] = 0x80; // alarm/warning flags implemented
        let a2 = &mut e[256..];
        a2[96..98].copy_from_slice(&0x1000i16.to_be_bytes()); // raw 4096
        a2[84..88].copy_from_slice(&[0x02, 0x00, 0x01, 0x00]); // T slope 2.0, offset 256
        a2[98..100].copy_from_slice(&30000u16.to_be_bytes());
        a2[88..92].copy_from_slice(&[0x01, 0x00, 0x00, 0x00]); // V slope 1.0, offset 0
        a2[100..102].copy_from_slice(&1000u16.to_be_bytes());
        a2[76..80].copy_from_slice(&[0x01, 0x80, 0xff, 0x9c]); // bias slope 1.5, offset -100
        a2[104..106].copy_from_slice(&100u16.to_be_bytes());
        a2[72..76].copy_from_slice(&10.0f32.to_be_bytes()); // Rx_PWR(0)
        a2[68..72].copy_from_slice(&2.0f32.to_be_bytes()); // Rx_PWR(1)
        a2[64..68].copy_from_slice(&0.5f32.to_be_bytes()); // Rx_PWR(2)
        a2[80..84].copy_from_slice(&[0x01, 0x00, 0x00, 0x00]);
        let m = parse_module(&e).unwrap();
        assert!(m.externally_calibrated);
        // (4096 * 2 + 256) / 256 = 33 degrees C.
        assert_eq!(m.temperature_c, Some(33.0));
        // (1000 * 1.5 - 100) * 2 uA = 2.8 mA.
        assert!((m.lanes[0].tx_bias_ma.unwrap() - 2.8).abs() < 1e-9);
        // 10 + 2*100 + 0.5*100^2 = 5210 (0.1 uW) = 0.521 mW.
        assert!((m.lanes[0].rx_power_mw.unwrap() - 0.521).abs() < 1e-9);
        assert_eq!(m.vcc_v, Some(3.0));
    }

    #[test]
    fn sff8636_flat_memory_has_no_page_03h() {
        let mut e = blank(0x0d, 256);
        e[2] = 0x04;
        let m = parse_module(&e).unwrap();
        assert_eq!(
            m.missing(Facet::Thresholds),
            Some(&Missing {
                what: Facet::Thresholds,
                page: Page::Upper(3),
                reason: Absence::NotImplemented
            })
        );
        assert_eq!(m.lanes.len(), 4);
        assert_eq!(
            m.missing[0].to_string(),
            "thresholds: page 03h is not implemented by the module"
        );
    }

    #[test]
    fn cmis_bias_scale_and_support_bits_come_from_page_01h() {
        let mut e = blank(0x18, 128 * 19);
        e[86] = 0x11;
        e[88] = 0x88; // 8 host lanes, 8 media lanes
        e[upper(1, 151)] = 0x10; // average power
        e[upper(1, 160)] = 0x08 | 0x01 | 0x04; // scale x2, bias and Rx power, no Tx power
        for lane in 0..8 {
            let k = 2 * lane;
            e[upper(0x11, 170) + k..upper(0x11, 170) + k + 2]
                .copy_from_slice(&3000u16.to_be_bytes());
            e[upper(0x11, 186) + k..upper(0x11, 186) + k + 2]
                .copy_from_slice(&5000u16.to_be_bytes());
        }
        let m = parse_module(&e).unwrap();
        assert_eq!(m.lanes.len(), 8);
        // 3000 * 2 uA * 2 = 12 mA.
        assert!((m.lanes[7].tx_bias_ma.unwrap() - 12.0).abs() < 1e-9);
        assert_eq!(m.lanes[0].tx_power_mw, None);
        assert!((m.lanes[0].rx_power_mw.unwrap() - 0.5).abs() < 1e-9);
        assert_eq!(m.rx_power_kind, Some(RxPowerKind::Average));
        // Page 02h is all zeros here: present, so thresholds decode (to zeros).
        assert!(m.thresholds.is_some());
        assert!(m.missing.is_empty());
    }

    #[test]
    fn cmis_flat_memory_has_no_lane_pages() {
        let mut e = blank(0x18, 256);
        e[2] = 0x80;
        let m = parse_module(&e).unwrap();
        assert!(m.lanes.is_empty());
        assert_eq!(
            m.missing(Facet::LaneMonitors).unwrap().reason,
            Absence::NotImplemented
        );
    }

    #[test]
    fn dbm_of_zero_power_is_none() {
        assert_eq!(dbm(0.0), None);
        assert!((dbm(1.0).unwrap()).abs() < 1e-12);
        assert!((dbm(2.0).unwrap() - 3.0103).abs() < 1e-4);
    }
}
