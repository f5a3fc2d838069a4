//! The Ethernet-layer parsers on real outputs (fixtures/ethernet/*, each with a
//! SOURCE). Decoded module values are checked against ethtool's own decoding of
//! the same dump where the source has one, else against the bytes by hand, with
//! the arithmetic in a comment.

use std::path::PathBuf;

use rdmakit_host::ethernet::optics::{
    parse_module, Absence, Facet, Levels, Module, OpticsError, Page, RxPowerKind, Spec,
};
use rdmakit_host::ethernet::parse::dcb::{self, Selector, Trust, Tsa};
use rdmakit_host::ethernet::parse::ethtool;

fn fixture(rel: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/ethernet")
        .join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn module(rel: &str) -> Module {
    parse_module(fixture(rel).as_bytes()).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}

#[track_caller]
fn assert_close(a: Option<f64>, b: f64, tol: f64) {
    let a = a.expect("value present");
    assert!(close(a, b, tol), "{a} != {b} (tolerance {tol})");
}

/// The first number after `label :` in ethtool's decoded `-m` text.
fn decoded(text: &str, label: &str) -> f64 {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with(label) && l[label.len()..].trim_start().starts_with(':'))
        .unwrap_or_else(|| panic!("no line {label:?}"));
    let value = line.split_once(':').unwrap().1.trim();
    let num: String = value
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == '-')
        .collect();
    num.parse().unwrap_or_else(|_| panic!("{line:?}"))
}

/// The text after `label :` in ethtool's decoded `-m` text.
fn decoded_str<'a>(text: &'a str, label: &str) -> &'a str {
    text.lines()
        .map(str::trim)
        .find(|l| l.starts_with(label) && l[label.len()..].trim_start().starts_with(':'))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim())
        .unwrap_or_else(|| panic!("no line {label:?}"))
}

/// The four levels ethtool prints as `<what> high alarm threshold` etc.
#[track_caller]
fn assert_levels(got: &Levels, text: &str, what: &str, tol: f64) {
    let want = [
        (got.high_alarm, "high alarm threshold"),
        (got.low_alarm, "low alarm threshold"),
        (got.high_warning, "high warning threshold"),
        (got.low_warning, "low warning threshold"),
    ];
    for (value, which) in want {
        let label = format!("{what} {which}");
        let expected = decoded(text, &label);
        assert!(
            close(value, expected, tol),
            "{label}: {value} != {expected}"
        );
    }
}

// --- SFF-8636 -------------------------------------------------------------

#[test]
fn qsfp28_mellanox_mlxsw_640_byte_dump_decodes_page_03h_thresholds() {
    let m = module("qsfp28-mellanox-mlxsw/module.txt");
    assert_eq!(m.spec, Spec::Sff8636);
    assert_eq!((m.identifier, m.identifier_name.as_str()), (0x11, "QSFP28"));
    assert_eq!(m.vendor, "Mellanox");
    assert_eq!(m.part_number, "MMA1B00-SS1");
    assert_eq!(m.serial, "MT1834FT03846");
    assert_eq!(m.revision, "A2");
    // Bytes 22-23 = 27 79: 0x2779 = 10105, / 256 = 39.4727 degrees C.
    assert_close(m.temperature_c, 10105.0 / 256.0, 1e-12);
    // Bytes 26-27 = 82 c5: 0x82c5 = 33477 x 100 uV = 3.3477 V.
    assert_close(m.vcc_v, 3.3477, 1e-9);
    // Byte 220 = 0x0c: bit 3 set, average power.
    assert_eq!(m.rx_power_kind, Some(RxPowerKind::Average));
    assert_eq!(m.lanes.len(), 4);
    assert!(m
        .lanes
        .iter()
        .all(|l| l.rx_power_mw == Some(0.0) && l.rx_power_dbm.is_none()));
    assert!(m.bad_checksums.is_empty(), "{:?}", m.bad_checksums);
    assert!(m.missing.is_empty(), "{:?}", m.missing);

    let th = m.thresholds.expect("page 03h is in the 640-byte dump");
    let text = fixture("qsfp28-mellanox-mlxsw/module-decoded-thresholds.txt");
    assert_levels(&th.tx_bias_ma, &text, "Laser bias current", 5e-4);
    assert_levels(&th.tx_power_mw, &text, "Laser output power", 5e-5);
    assert_levels(&th.temperature_c, &text, "Module temperature", 5e-3);
    assert_close(
        Some(th.vcc_v.high_alarm),
        decoded(&text, "Module voltage high alarm threshold"),
        5e-5,
    );
    assert_close(
        Some(th.vcc_v.low_alarm),
        decoded(&text, "Module voltage low alarm threshold"),
        5e-5,
    );
    // Not quoted in the mail; page 03h bytes 0x94-0x97 = 87 5a 7a 76:
    // 34650 and 31350 x 100 uV = 3.465 / 3.135 V.
    assert_close(Some(th.vcc_v.high_warning), 3.465, 1e-9);
    assert_close(Some(th.vcc_v.low_warning), 3.135, 1e-9);
    // Rx power thresholds, page 03h 0xb0-0xb7 = 87 71 01 d3 43 e2 03 a5:
    // 34673, 467, 17378, 933 x 0.1 uW.
    assert_close(Some(th.rx_power_mw.high_alarm), 3.4673, 1e-9);
    assert_close(Some(th.rx_power_mw.low_alarm), 0.0467, 1e-9);
    assert_close(Some(th.rx_power_mw.high_warning), 1.7378, 1e-9);
    assert_close(Some(th.rx_power_mw.low_warning), 0.0933, 1e-9);
}

#[test]
fn qsfp28_mellanox_mlxsw_256_byte_dump_says_page_03h_is_not_in_it() {
    let m = module("qsfp28-mellanox-mlxsw/module-256.txt");
    // Bytes 22-23 = 2a 90: 10896 / 256 = 42.5625 degrees C.
    assert_eq!(m.temperature_c, Some(42.5625));
    assert!(m.thresholds.is_none());
    let why = m.missing(Facet::Thresholds).expect("thresholds missing");
    assert_eq!((why.page, why.reason), (Page::Upper(3), Absence::NotInDump));
    assert_eq!(why.to_string(), "thresholds: page 03h is not in the dump");
}

// --- SFF-8472 -------------------------------------------------------------

#[test]
fn sfp28_fs_25gsr_matches_ethtools_own_decoding() {
    let m = module("sfp28-fs-25gsr/module.txt");
    let text = fixture("sfp28-fs-25gsr/module-decoded.txt");
    assert_eq!(m.spec, Spec::Sff8472);
    assert_eq!(m.vendor, decoded_str(&text, "Vendor name"));
    assert_eq!(m.part_number, decoded_str(&text, "Vendor PN"));
    assert_eq!(m.revision, decoded_str(&text, "Vendor rev"));
    assert_eq!(m.serial, decoded_str(&text, "Vendor SN"));
    assert!(!m.externally_calibrated);
    assert_eq!(m.rx_power_kind, Some(RxPowerKind::Average));
    let lane = &m.lanes[0];
    assert_close(lane.tx_bias_ma, decoded(&text, "Laser bias current"), 5e-4);
    assert_close(m.vcc_v, decoded(&text, "Module voltage"), 5e-5);
    assert_close(
        lane.rx_power_mw,
        decoded(&text, "Receiver signal average optical power"),
        5e-5,
    );
    // ethtool's decoded text was taken moments before the hex dump; temperature
    // and Tx power moved in between. From the dump: A2h 96-97 = 29 64 (10596 /
    // 256 = 41.3906 C; ethtool said 41.52), A2h 102-103 = 3a ee (15086 x 0.1 uW =
    // 1.5086 mW; ethtool said 1.5198).
    assert_close(m.temperature_c, 10596.0 / 256.0, 1e-12);
    assert_close(lane.tx_power_mw, 1.5086, 1e-9);
    assert_close(lane.tx_power_dbm, 10.0 * 1.5086f64.log10(), 1e-9);
    let th = m.thresholds.expect("A2h thresholds");
    assert_levels(&th.tx_bias_ma, &text, "Laser bias current", 5e-4);
    assert_levels(&th.tx_power_mw, &text, "Laser output power", 5e-5);
    assert_levels(&th.temperature_c, &text, "Module temperature", 5e-3);
    assert_levels(&th.vcc_v, &text, "Module voltage", 5e-5);
    assert_levels(&th.rx_power_mw, &text, "Laser rx power", 5e-5);
    assert!(m.bad_checksums.is_empty(), "{:?}", m.bad_checksums);
}

#[test]
fn sfp_intel_e10gsfpsrx_on_ice_decodes_by_hand() {
    let m = module("sfp-intel-e10gsfpsrx-ice/module.txt");
    assert_eq!(m.vendor, "Intel Corp");
    assert_eq!(m.part_number, "FTLX8574D3BNL-IT");
    assert_eq!(m.revision, "A");
    assert_eq!(m.serial, "A41ASYK");
    // A2h 96-105 = 23 56 85 e0 10 f8 16 94 00 15:
    // 0x2356 = 9046 / 256 = 35.3359 C; 0x85e0 = 34272 -> 3.4272 V;
    // 0x10f8 = 4344 x 2 uA = 8.688 mA; 0x1694 = 5780 -> 0.578 mW;
    // 0x0015 = 21 -> 0.0021 mW (-26.8 dBm: next to no light arriving).
    assert_close(m.temperature_c, 9046.0 / 256.0, 1e-12);
    assert_close(m.vcc_v, 3.4272, 1e-9);
    let lane = &m.lanes[0];
    assert_close(lane.tx_bias_ma, 8.688, 1e-9);
    assert_close(lane.tx_power_mw, 0.578, 1e-9);
    assert_close(lane.rx_power_mw, 0.0021, 1e-9);
    assert_close(lane.rx_power_dbm, -26.778, 1e-3);
    let th = m.thresholds.expect("thresholds");
    // A2h 0-7 = 5d 00 f3 00 58 00 f8 00: 93, -13, 88, -8 C.
    assert_eq!(
        (th.temperature_c.high_alarm, th.temperature_c.low_alarm),
        (93.0, -13.0)
    );
    assert_eq!(
        (th.temperature_c.high_warning, th.temperature_c.low_warning),
        (88.0, -8.0)
    );
    // A2h 32-39 = 27 10 00 64 1f 07 00 9e: 10000, 100, 7943, 158 x 0.1 uW.
    assert_close(Some(th.rx_power_mw.high_alarm), 1.0, 1e-12);
    assert_close(Some(th.rx_power_mw.low_alarm), 0.01, 1e-12);
    assert_close(Some(th.rx_power_mw.low_warning), 0.0158, 1e-12);
    // The live Rx power is below the module's own low alarm.
    assert!(lane.rx_power_mw.unwrap() < th.rx_power_mw.low_alarm);
    assert!(m.bad_checksums.is_empty());
}

#[test]
fn sfp_read_garbled_by_bnxt_fails_its_checksums() {
    let m = module("sfp-intel-e10gsfpsrx-bnxt-garbled/module.txt");
    // Byte 0 still says SFP, so the decoder runs; the check codes expose it.
    assert_eq!(m.identifier, 0x03);
    let names: Vec<(&str, u8, u8)> = m
        .bad_checksums
        .iter()
        .map(|c| (c.name.as_str(), c.stored, c.computed))
        .collect();
    assert_eq!(names, vec![("CC_BASE", 0x00, 0x86), ("CC_EXT", 0xa3, 0xc3)]);
    // Byte 92 reads 0x00 in the garbage: no diagnostics.
    assert!(m.lanes.is_empty());
    assert_eq!(
        m.missing(Facet::Monitors).unwrap().reason,
        Absence::NotImplemented
    );
    assert!(m.vendor.contains('_'), "{:?}", m.vendor);
}

#[test]
fn sfp_mikrotik_aoc_without_ddm_has_no_monitors_despite_a2h_bytes() {
    let m = module("sfp-mikrotik-aoc/module.txt");
    let text = fixture("sfp-mikrotik-aoc/module-decoded.txt");
    assert_eq!(m.vendor, decoded_str(&text, "Vendor name"));
    assert_eq!(m.part_number, decoded_str(&text, "Vendor PN"));
    assert_eq!(m.revision, decoded_str(&text, "Vendor rev"));
    assert_eq!(m.serial, decoded_str(&text, "Vendor SN"));
    assert_eq!(m.temperature_c, None);
    assert!(m.lanes.is_empty() && m.thresholds.is_none());
    let why = m.missing(Facet::Monitors).unwrap();
    assert_eq!((why.page, why.reason), (Page::A2h, Absence::NotImplemented));
    assert!(m.bad_checksums.is_empty());
}

// --- CMIS -----------------------------------------------------------------

#[test]
fn cmis_hisense_aoc_from_sfputil_pages_00h_and_11h() {
    let m = module("cmis-hisense-def8504/sfputil-eeprom-hexdump.txt");
    let sonic = fixture("cmis-hisense-def8504/sfputil-eeprom-decoded.txt");
    assert_eq!(m.spec, Spec::Cmis);
    assert_eq!(
        (m.identifier, m.identifier_name.as_str()),
        (0x1e, "QSFP+ (CMIS)")
    );
    assert_eq!(m.vendor, decoded_str(&sonic, "Vendor Name"));
    assert_eq!(m.part_number, decoded_str(&sonic, "Vendor PN"));
    assert_eq!(m.revision, decoded_str(&sonic, "Vendor Rev"));
    assert_eq!(m.serial, decoded_str(&sonic, "Vendor SN"));
    // The lower page was read twice; the later read (bytes 14-17 = 1a 3e 7e ea)
    // wins: 0x1a3e = 6718 / 256 = 26.2422 C, 0x7eea = 32490 -> 3.249 V.
    assert_close(m.temperature_c, 6718.0 / 256.0, 1e-12);
    assert_close(m.vcc_v, 3.249, 1e-9);
    // Byte 88 = 0x44: 4 media lanes. Page 11h:
    // Tx power 154-161 = 28 44 28 38 28 44 28 38 -> 10308, 10296 x 0.1 uW;
    // bias 170-177 = 0e 56 0e 52 .. -> 3670, 3666 x 2 uA (scale 1 assumed);
    // Rx power 186-193 = 1f 29 1f 68 1f fe 1f fe -> 7977, 8040, 8190, 8190.
    assert_eq!(m.lanes.len(), 4);
    let want = [
        (1.0308, 7.34, 0.7977),
        (1.0296, 7.332, 0.804),
        (1.0308, 7.34, 0.819),
        (1.0296, 7.332, 0.819),
    ];
    for (lane, (tx, bias, rx)) in m.lanes.iter().zip(want) {
        assert_close(lane.tx_power_mw, tx, 1e-9);
        assert_close(lane.tx_bias_ma, bias, 1e-9);
        assert_close(lane.rx_power_mw, rx, 1e-9);
    }
    // Pages 01h and 02h were not dumped.
    assert!(m.thresholds.is_none());
    assert_eq!(m.missing(Facet::Thresholds).unwrap().page, Page::Upper(2));
    assert_eq!(
        m.missing(Facet::BiasScale).unwrap().reason,
        Absence::NotInDump
    );
    assert_eq!(m.rx_power_kind, None);
    assert!(m.bad_checksums.is_empty());
}

#[test]
fn cmis_thresholds_from_a_flat_ioctl_style_image() {
    // Synthetic, built from the Hisense pages: no real QSFP-DD/OSFP dump with
    // page 02h was found. The Hisense lower page and page 00h, plus a page 01h
    // (average Rx power, bias scale x2, all monitors) and a page 02h with
    // round thresholds, laid out flat (page N at 128 * (N + 1)).
    let real = module("cmis-hisense-def8504/sfputil-eeprom-hexdump.txt");
    assert_eq!(real.spec, Spec::Cmis);
    let text = fixture("cmis-hisense-def8504/sfputil-eeprom-hexdump.txt");
    let mut flat = vec![0u8; 128 * 19];
    let mut page = 0usize;
    for line in text.lines().map(str::trim) {
        if line.starts_with("Lower page") {
            page = 0;
        } else if line.starts_with("Upper page 0h") {
            page = 1;
        } else if line.starts_with("Upper page 0x11h") {
            page = 0x12;
        } else if let Some((off, rest)) = line.split_once(' ') {
            if let Ok(off) = usize::from_str_radix(off, 16) {
                let base = if page == 0 { 0 } else { 128 * page - 128 };
                for (k, b) in rest
                    .split('|')
                    .next()
                    .unwrap()
                    .split_whitespace()
                    .enumerate()
                {
                    flat[base + off + k] = u8::from_str_radix(b, 16).unwrap();
                }
            }
        }
    }
    flat[256 + (151 - 128)] = 0x10; // page 01h byte 151: average power
    flat[256 + (160 - 128)] = 0x08 | 0x07; // byte 160: bias scale x2, all monitors
    let p2 = 384 - 128;
    let words: [(usize, [u16; 4]); 5] = [
        (0x80, [75 * 256, (-5i16 * 256) as u16, 70 * 256, 0]), // temperature
        (0x88, [36300, 29700, 34650, 31350]),                  // Vcc
        (0xB0, [22387, 1259, 20000, 1738]),                    // Tx power
        (0xB8, [6000, 500, 5500, 1000]),                       // bias (x2 scale)
        (0xC0, [22387, 630, 20000, 870]),                      // Rx power
    ];
    for (off, ws) in words {
        for (k, w) in ws.iter().enumerate() {
            let a = p2 + off + 2 * k;
            flat[a..a + 2].copy_from_slice(&w.to_be_bytes());
        }
    }
    let m = parse_module(&flat).expect("decodes");
    assert!(m.missing.is_empty(), "{:?}", m.missing);
    let th = m.thresholds.expect("page 02h present");
    assert_eq!(th.temperature_c.low_alarm, -5.0);
    assert_close(Some(th.vcc_v.high_alarm), 3.63, 1e-9);
    // 6000 x 2 uA x 2 (scale) = 24 mA.
    assert_close(Some(th.tx_bias_ma.high_alarm), 24.0, 1e-9);
    assert_close(Some(th.rx_power_mw.low_warning), 0.087, 1e-9);
    // The lane bias doubles with the scale: 3670 x 2 uA x 2 = 14.68 mA.
    assert_close(m.lanes[0].tx_bias_ma, 14.68, 1e-9);
    assert_eq!(m.rx_power_kind, Some(RxPowerKind::Average));
}

#[test]
fn every_module_fixture_parses_or_fails_with_a_reason() {
    for rel in [
        "qsfp28-mellanox-mlxsw/module.txt",
        "qsfp28-mellanox-mlxsw/module-256.txt",
        "sfp28-fs-25gsr/module.txt",
        "sfp-intel-e10gsfpsrx-ice/module.txt",
        "sfp-intel-e10gsfpsrx-bnxt-garbled/module.txt",
        "sfp-mikrotik-aoc/module.txt",
        "cmis-hisense-def8504/sfputil-eeprom-hexdump.txt",
    ] {
        let text = fixture(rel);
        let m = parse_module(text.as_bytes()).unwrap();
        // Cutting the text anywhere never panics; losing the first row is a
        // clear error.
        for cut in (0..text.len()).step_by(97) {
            let _ = parse_module(&text.as_bytes()[..cut]);
        }
        assert!(matches!(
            parse_module(b"Offset\t\tValues\n"),
            Err(OpticsError::NoData)
        ));
        assert!(!m.identifier_name.is_empty(), "{rel}");
    }
}

// --- ethtool -S / -a / --show-fec -----------------------------------------

#[test]
fn mlx5_cx6dx_xdp_overload_stats() {
    let s = ethtool::stats(&fixture("mlx5-cx6dx-xdp-overload/stats-kernel-6.5.txt")).unwrap();
    assert_eq!(s.len(), 108);
    assert_eq!(s.first().unwrap(), &("rx_packets".to_string(), 7282880));
    assert_eq!(
        s.last().unwrap(),
        &("rx0_xdp_tx_cqes".to_string(), 733694572)
    );
    let get = |name: &str| s.iter().find(|(n, _)| n == name).map(|(_, v)| *v);
    assert_eq!(get("rx_out_of_buffer"), Some(534918379));
    assert_eq!(get("rx_discards_phy"), Some(441063206498));
    assert_eq!(get("tx_global_pause"), Some(44414017));
    assert_eq!(get("rx_buffer_passed_thres_phy"), Some(1192226));
    let old = ethtool::stats(&fixture("mlx5-cx6dx-xdp-overload/stats-kernel-5.15.txt")).unwrap();
    assert_eq!(old.len(), 101);
}

#[test]
fn bnxt_en_stats_keep_per_ring_names() {
    let s = ethtool::stats(&fixture("bnxt-en-sfp-10g/stats.txt")).unwrap();
    assert_eq!(s.len(), 395);
    assert_eq!(s[0], ("[0]: rx_ucast_packets".to_string(), 19121609));
    assert_eq!(s.iter().filter(|(n, _)| n.starts_with('[')).count(), 192);
    let get = |name: &str| s.iter().find(|(n, _)| n == name).map(|(_, v)| *v);
    assert_eq!(get("link_down_events"), Some(4));
    assert_eq!(get("pfc_pri3_rx_duration_us"), Some(0));
    assert_eq!(s.last().unwrap().0, "tx_packets_pri7");
}

#[test]
fn pause_outputs_of_ice_and_netlink_ethtool() {
    let p = ethtool::pause(&fixture("ethtool-pause-fec/pause-ice-statistics.txt")).unwrap();
    assert_eq!(
        (p.autoneg, p.rx, p.tx),
        (Some(true), Some(false), Some(false))
    );
    assert_eq!(
        (p.rx_negotiated, p.tx_negotiated),
        (Some(false), Some(false))
    );
    assert_eq!(
        p.stats,
        vec![
            ("tx_pause_frames".to_string(), 0),
            ("rx_pause_frames".to_string(), 0)
        ]
    );
    let p = ethtool::pause(&fixture("ethtool-pause-fec/pause-negotiated.txt")).unwrap();
    assert_eq!(
        (p.autoneg, p.rx, p.tx, p.rx_negotiated),
        (Some(true), Some(true), Some(true), Some(true))
    );
}

#[test]
fn fec_outputs_with_and_without_lanes() {
    let f = ethtool::fec(&fixture("ethtool-pause-fec/fec-ice-statistics.txt")).unwrap();
    assert_eq!(f.configured, ["Auto", "RS", "BaseR"]);
    assert_eq!(f.active, ["RS"]);
    assert_eq!(
        (f.corrected_blocks(), f.uncorrectable_blocks()),
        (Some(0), Some(0))
    );
    let f = ethtool::fec(&fixture("ethtool-pause-fec/fec-per-lane.txt")).unwrap();
    assert_eq!(f.active, ["None"]);
    assert_eq!(f.corrected_blocks(), Some(256));
    assert_eq!(f.stats[0].lanes, vec![255, 1]);
    assert_eq!(f.stats[1].lanes, vec![128, 17]);
}

// --- DCB ------------------------------------------------------------------

#[test]
fn mlnx_qos_dscp_trust_with_pfc_on_priority_3() {
    let d = dcb::mlnx_qos(&fixture("mlnx-qos-dscp-trust/mlnx_qos.txt")).unwrap();
    assert_eq!(d.dcbx.as_deref(), Some("OS controlled"));
    assert_eq!(d.trust, Some(Trust::Dscp));
    assert_eq!(d.app.len(), 64);
    assert_eq!(d.dscp_priorities(26), vec![3]);
    assert_eq!(d.dscp_priorities(48), vec![6]);
    for p in 0..8u8 {
        assert_eq!(d.pfc_enabled(p), Some(p == 3), "priority {p}");
    }
    let ets = d.ets.as_ref().unwrap();
    // mlx5's initial ETS: priority 0 -> tc 1, priority 1 -> tc 0, others identity.
    assert_eq!(
        ets.prio_tc,
        [
            Some(1),
            Some(0),
            Some(2),
            Some(3),
            Some(4),
            Some(5),
            Some(6),
            Some(7)
        ]
    );
    assert!(ets.tc_tsa.iter().all(|t| t == &Some(Tsa::Vendor)));
    assert_eq!(ets.tc_ratelimit[0].as_deref(), Some("unlimited"));
    assert_eq!(d.buffer.as_ref().unwrap().cable_len, Some(7));
    assert!(d.unknown.is_empty(), "{:?}", d.unknown);
}

#[test]
fn mlnx_qos_edit_moves_pfc_off_the_roce_priority() {
    let d = dcb::mlnx_qos(&fixture("mlnx-qos-pfc-prio4-edit/mlnx_qos.txt")).unwrap();
    let roce = d.dscp_priorities(26);
    assert_eq!(roce, vec![3]);
    assert_eq!(d.pfc_enabled(3), Some(false));
    assert_eq!(d.pfc_enabled(4), Some(true));
}

#[test]
fn dcb_man_page_examples() {
    let d = dcb::dcb(&fixture("dcb-man-pages/dcb.txt")).unwrap();
    assert_eq!(d.dcbx.as_deref(), Some("host ieee"));
    let ets = d.ets.as_ref().unwrap();
    assert_eq!(ets.prio_tc, [0, 1, 2, 3, 4, 5, 6, 7].map(Some));
    assert_eq!(ets.tc_bw[..3], [Some(33), Some(33), Some(34)]);
    assert_eq!(ets.tc_tsa[0], Some(Tsa::Ets));
    assert_eq!(ets.tc_tsa[7], Some(Tsa::Strict));
    let pfc = d.pfc.as_ref().unwrap();
    assert_eq!(
        (pfc.cap, pfc.delay, pfc.macsec_bypass),
        (Some(8), Some(4096), Some(false))
    );
    assert_eq!(d.pfc_enabled(6), Some(true));
    assert_eq!(d.pfc_enabled(3), Some(false));
    // Conflicting entries for DSCP 24 (CS3) are legal and both kept.
    assert_eq!(d.dscp_priorities(24), vec![2, 3]);
    assert_eq!(d.trust, Some(Trust::Dscp));
    let numeric = dcb::dcb(&fixture("dcb-man-pages/app-numeric.txt")).unwrap();
    assert_eq!(numeric.app, d.app);
    let pcp = dcb::dcb(&fixture("dcb-man-pages/app-pcp.txt")).unwrap();
    assert_eq!(
        pcp.app
            .iter()
            .map(|a| (a.selector, a.protocol, a.priority))
            .collect::<Vec<_>>(),
        vec![(Selector::Pcp, 1, 1), (Selector::Pcp, 10, 2)]
    );
    assert_eq!(pcp.trust, Some(Trust::Pcp));
}

// --- What live::answer renders reads back -----------------------------------

mod live_text {
    use super::*;
    use rdmakit_host::ethernet::live::dcb as kdcb;
    use rdmakit_host::ethernet::live::ethtool as kethtool;

    #[test]
    fn rendered_stats_pause_and_fec_read_back() {
        let stats = [
            kethtool::Stat {
                name: b"[0]: rx_ucast_packets".to_vec(),
                value: 19121609,
            },
            kethtool::Stat {
                name: b"rx_prio3_pause".to_vec(),
                value: u64::MAX,
            },
        ];
        let text = String::from_utf8(kethtool::render_stats(&stats)).unwrap();
        assert_eq!(
            ethtool::stats(&text).unwrap(),
            vec![
                ("[0]: rx_ucast_packets".to_string(), 19121609),
                ("rx_prio3_pause".to_string(), u64::MAX)
            ]
        );

        let pause = kethtool::Pause {
            autoneg: true,
            rx: false,
            tx: true,
            negotiated: Some((true, false)),
        };
        let text = String::from_utf8(kethtool::render_pause("eth0", &pause)).unwrap();
        let p = ethtool::pause(&text).unwrap();
        assert_eq!(
            (p.autoneg, p.rx, p.tx, p.rx_negotiated, p.tx_negotiated),
            (Some(true), Some(false), Some(true), Some(true), Some(false))
        );

        let fec = kethtool::Fec {
            configured: kethtool::ETHTOOL_FEC_AUTO
                | kethtool::ETHTOOL_FEC_RS
                | kethtool::ETHTOOL_FEC_BASER,
            active: kethtool::ETHTOOL_FEC_RS,
        };
        let f =
            ethtool::fec(&String::from_utf8(kethtool::render_fec("eth0", &fec)).unwrap()).unwrap();
        assert_eq!(
            (f.configured.join(" "), f.active.join(" ")),
            ("Auto RS BaseR".into(), "RS".into())
        );
        let none = kethtool::Fec {
            configured: 0,
            active: 0,
        };
        let f =
            ethtool::fec(&String::from_utf8(kethtool::render_fec("eth0", &none)).unwrap()).unwrap();
        assert_eq!(
            (f.configured, f.active),
            (vec!["None".to_string()], vec!["None".to_string()])
        );
    }

    #[test]
    fn rendered_module_eeprom_decodes_like_its_bytes() {
        let from_text = module("qsfp28-mellanox-mlxsw/module.txt");
        let mut raw = Vec::new();
        for line in fixture("qsfp28-mellanox-mlxsw/module.txt").lines().skip(2) {
            raw.extend(
                line.split_whitespace()
                    .skip(1)
                    .map(|b| u8::from_str_radix(b, 16).unwrap()),
            );
        }
        assert_eq!(raw.len(), 640);
        let rendered = kethtool::render_module(&raw);
        assert_eq!(parse_module(&rendered).unwrap(), from_text);
        assert_eq!(parse_module(&raw).unwrap(), from_text);
    }

    #[test]
    fn rendered_dcb_reads_back() {
        let mut ets = kdcb::IeeeEts {
            willing: 0,
            ets_cap: 8,
            cbs: 0,
            ..Default::default()
        };
        ets.prio_tc = [1, 0, 2, 3, 4, 5, 6, 7];
        ets.tc_tsa = [255, 255, 255, 2, 0, 0, 0, 0];
        ets.tc_tx_bw = [0, 0, 0, 50, 0, 0, 0, 0];
        let mut pfc = kdcb::IeeePfc {
            pfc_cap: 8,
            pfc_en: 1 << 3,
            ..Default::default()
        };
        pfc.requests[3] = 41927;
        pfc.indications[3] = 1290418;
        let app = vec![
            kdcb::DcbApp {
                selector: kdcb::APP_SEL_DSCP,
                priority: 3,
                protocol: 26,
            },
            kdcb::DcbApp {
                selector: kdcb::APP_SEL_DSCP,
                priority: 6,
                protocol: 48,
            },
            kdcb::DcbApp {
                selector: kdcb::APP_SEL_ETHERTYPE,
                priority: 3,
                protocol: 0x8906,
            },
            kdcb::DcbApp {
                selector: kdcb::APP_SEL_ETHERTYPE,
                priority: 0,
                protocol: 0,
            },
        ];
        let k = kdcb::Dcb {
            dcbx: Some(0x01 | 0x08),
            ets: Some(ets),
            pfc: Some(pfc),
            app: Some(app),
        };
        let text = String::from_utf8(kdcb::render(&k)).unwrap();
        let d = dcb::dcb(&text).unwrap();
        assert_eq!(d.dcbx.as_deref(), Some("host ieee"));
        let e = d.ets.as_ref().unwrap();
        assert_eq!(e.prio_tc[0], Some(1));
        assert_eq!(e.tc_tsa[0], Some(Tsa::Vendor));
        assert_eq!(e.tc_bw[3], Some(50));
        assert_eq!(d.pfc_enabled(3), Some(true));
        let p = d.pfc.as_ref().unwrap();
        assert_eq!(
            (p.requests[3], p.indications[3]),
            (Some(41927), Some(1290418))
        );
        assert_eq!(d.dscp_priorities(26), vec![3]);
        assert_eq!(d.trust, Some(Trust::Dscp));
        assert!(d
            .app
            .iter()
            .any(|a| a.selector == Selector::Ethtype && a.protocol == 0x8906));
        assert!(d
            .app
            .iter()
            .any(|a| a.selector == Selector::Default && a.priority == 0));
        assert!(d.unknown.is_empty(), "{:?}", d.unknown);
    }
}
