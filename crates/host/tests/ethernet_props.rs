//! Property tests for the Ethernet-layer parsers: no input makes any of them
//! panic, and errors name a line that exists.

use proptest::prelude::*;
use rdmakit_host::ethernet::optics::{parse_module, OpticsError};
use rdmakit_host::ethernet::parse::{dcb, ethtool};

/// Lines shaped like the outputs these parsers read, mixed with noise.
fn output_like() -> impl Strategy<Value = String> {
    let line = prop_oneof![
        "0x0[0-9a-f]{2}0:[ \t]{1,3}([0-9a-f]{2} ){0,17}",
        "[0-9a-f]{8}  ([0-9a-f]{2} ){0,16} \\|[ -~]{0,16}\\|",
        "(Lower|Upper) page (0x)?[0-9a-f]{1,2}h?",
        "# ethtool -m eth0 (page|i2c|bank) (0x)?[0-9a-f]{1,2} hex on",
        "\\*",
        "[ ]{0,5}[a-z_\\[\\]0-9]{1,20}: [0-9-]{0,21}",
        "(Autonegotiate|RX|TX|RX negotiated|TX negotiated):[ \t]+(on|off|n/a|x)",
        "(Supported/Configured|Configured) FEC encodings: ( ?(Auto|RS|BaseR|None|Off)){0,4}",
        "Active FEC encoding: [A-Za-z]{0,5}",
        "Statistics:|  [a-z_]{1,20}: [0-9]{1,5}( \\[ per_lane: ([0-9]{1,3}, ){0,3}[0-9]{0,3} \\])?|    Lane [0-9]: [0-9]{1,4}",
        "(tc-bw|tc-tsa|prio-tc|prio-pfc|reco-tc-bw|prio-buffer|buffer-size|tc-maxrate)( [0-9]{1,2}:[a-z0-9]{1,6}){0,9}",
        "(pfc-cap|willing|ets-cap|cbs|macsec-bypass|delay) [a-z0-9]{0,5}( delay [0-9]{0,6})?",
        "(dscp-prio|pcp-prio|ethtype-prio|port-prio|default-prio|total-size)( [A-Za-z0-9x]{1,5}:?[0-9]{0,2}){0,6}",
        "(host|lld-managed)( (ieee|cee|static)){0,2}",
        "DCBX mode: [A-Za-z ]{0,20}|Priority trust state: (dscp|pcp|x)",
        "[ \t]*prio:[0-9] dscp:([0-9]{2},){0,8}",
        "[ \t]*(enabled|buffer|priority)( +[0-9]){0,9}",
        "tc: [0-9] ratelimit: [a-z0-9.]{0,9}(, tsa: [a-z]{0,6})?(, bw: [0-9]{0,3}%)?",
        "[ \t]*priority: +[0-9]{1,2}",
        "Receive buffer size \\(bytes\\): ([0-9]{0,6},){0,8}(max_buffer_size=[0-9]{0,7})?|Cable len: [0-9a-z]{0,3}",
        "[ -~]{0,60}",
    ];
    proptest::collection::vec(line, 0..40).prop_map(|lines| lines.join("\n"))
}

fn check_line(line: usize, text: &str) {
    assert!(
        line <= text.lines().count().max(1),
        "line {line} beyond the text"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn parse_module_never_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..3000)) {
        let _ = parse_module(&bytes);
    }

    #[test]
    fn parse_module_never_panics_on_binary_images(mut bytes in proptest::collection::vec(any::<u8>(), 0..2600), id in prop_oneof![Just(3u8), Just(0x0c), Just(0x0d), Just(0x11), Just(0x18), Just(0x19), Just(0x1e), any::<u8>()]) {
        if let Some(b) = bytes.first_mut() {
            *b = id;
        }
        if let Ok(m) = parse_module(&bytes) {
            for lane in &m.lanes {
                prop_assert!(lane.tx_power_dbm.iter().all(|d| d.is_finite()));
            }
        }
    }

    #[test]
    fn text_parsers_never_panic(text in output_like()) {
        match parse_module(text.as_bytes()) {
            Err(OpticsError::BadLine { line, .. }) | Err(OpticsError::OffsetOutOfRange { line, .. }) => check_line(line, &text),
            _ => {}
        }
        for err in [
            ethtool::stats(&text).err(),
            ethtool::pause(&text).err(),
            ethtool::fec(&text).err(),
            dcb::dcb(&text).err(),
            dcb::mlnx_qos(&text).err(),
        ]
        .into_iter()
        .flatten()
        {
            check_line(err.line, &text);
            prop_assert!(err.text.chars().count() <= 80);
        }
    }

    #[test]
    fn text_parsers_never_panic_on_noise(text in "[ -~\t\n\u{80}-\u{10ffff}]{0,400}") {
        let _ = parse_module(text.as_bytes());
        let _ = ethtool::stats(&text);
        let _ = ethtool::pause(&text);
        let _ = ethtool::fec(&text);
        let _ = dcb::dcb(&text);
        let _ = dcb::mlnx_qos(&text);
    }
}
