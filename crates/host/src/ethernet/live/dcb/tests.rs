use super::*;

fn text(b: Vec<u8>) -> String {
    String::from_utf8(b).unwrap()
}

fn nla(kind: u16, payload: &[u8]) -> Vec<u8> {
    let mut a = Vec::new();
    a.extend_from_slice(&((4 + payload.len()) as u16).to_ne_bytes());
    a.extend_from_slice(&kind.to_ne_bytes());
    a.extend_from_slice(payload);
    a.resize((a.len() + 3) & !3, 0);
    a
}

fn app(sel: u8, prio: u8, proto: u16) -> Vec<u8> {
    let mut b = vec![sel, prio];
    b.extend_from_slice(&proto.to_ne_bytes());
    b
}

/// An mlx5-like port as the kernel's dcbnl_ieee_fill answers it after
/// `dcb pfc set dev X prio-pfc 3:on` and DSCP 24, 26 → 3, 48 → 6: ETS as
/// the driver sets it up (vendor TSA, priority 0 on TC 1 and 1 on TC 0).
fn mlx5_like() -> Dcb {
    Dcb {
        dcbx: Some(0x01 | 0x08),
        ets: Some(IeeeEts {
            willing: 0,
            ets_cap: 8,
            cbs: 0,
            tc_tx_bw: [100, 0, 0, 0, 0, 0, 0, 0],
            tc_tsa: [255; 8],
            prio_tc: [1, 0, 2, 3, 4, 5, 6, 7],
            ..IeeeEts::default()
        }),
        pfc: Some(IeeePfc {
            pfc_cap: 8,
            pfc_en: 1 << 3,
            mbc: 0,
            delay: 0,
            requests: [0, 0, 0, 112, 0, 0, 0, 0],
            indications: [0, 0, 0, 37, 0, 0, 0, 0],
        }),
        app: Some(vec![
            DcbApp {
                selector: APP_SEL_DSCP,
                priority: 6,
                protocol: 48,
            },
            DcbApp {
                selector: APP_SEL_DSCP,
                priority: 3,
                protocol: 26,
            },
            DcbApp {
                selector: APP_SEL_DSCP,
                priority: 3,
                protocol: 24,
            },
        ]),
    }
}

const MLX5_LIKE_TEXT: &str = "\
host ieee \n\
willing off ets-cap 8 cbs off \n\
tc-bw 0:100 1:0 2:0 3:0 4:0 5:0 6:0 7:0 \n\
pg-bw 0:0 1:0 2:0 3:0 4:0 5:0 6:0 7:0 \n\
tc-tsa 0:vendor 1:vendor 2:vendor 3:vendor 4:vendor 5:vendor 6:vendor 7:vendor \n\
prio-tc 0:1 1:0 2:2 3:3 4:4 5:5 6:6 7:7 \n\
reco-tc-bw 0:0 1:0 2:0 3:0 4:0 5:0 6:0 7:0 \n\
reco-tc-tsa 0:strict 1:strict 2:strict 3:strict 4:strict 5:strict 6:strict 7:strict \n\
reco-prio-tc 0:0 1:0 2:0 3:0 4:0 5:0 6:0 7:0 \n\
pfc-cap 8 macsec-bypass off delay 0 \n\
prio-pfc 0:off 1:off 2:off 3:on 4:off 5:off 6:off 7:off \n\
requests 0:0 1:0 2:0 3:112 4:0 5:0 6:0 7:0 \n\
indications 0:0 1:0 2:0 3:37 4:0 5:0 6:0 7:0 \n\
dscp-prio 24:3 26:3 48:6 \n";

/// The bytes of `d` as the kernel sends them after `struct dcbmsg`.
fn reply(d: &Dcb, extra_apps: &[Vec<u8>]) -> Vec<u8> {
    let mut ieee = Vec::new();
    if let Some(e) = &d.ets {
        let mut b = vec![e.willing, e.ets_cap, e.cbs];
        for a in [
            e.tc_tx_bw,
            e.tc_rx_bw,
            e.tc_tsa,
            e.prio_tc,
            e.tc_reco_bw,
            e.tc_reco_tsa,
            e.reco_prio_tc,
        ] {
            b.extend_from_slice(&a);
        }
        assert_eq!(b.len(), IeeeEts::LEN);
        ieee.extend(nla(DCB_ATTR_IEEE_ETS, &b));
    }
    if let Some(p) = &d.pfc {
        let mut b = vec![p.pfc_cap, p.pfc_en, p.mbc, 0];
        b.extend_from_slice(&p.delay.to_ne_bytes());
        b.extend_from_slice(&[0, 0]);
        for v in p.requests.iter().chain(&p.indications) {
            b.extend_from_slice(&v.to_ne_bytes());
        }
        assert_eq!(b.len(), IeeePfc::LEN);
        ieee.extend(nla(DCB_ATTR_IEEE_PFC, &b));
    }
    if let Some(apps) = &d.app {
        let mut t = Vec::new();
        for a in apps {
            let kind = if a.selector == APP_SEL_PCP {
                DCB_ATTR_DCB_APP
            } else {
                DCB_ATTR_IEEE_APP
            };
            t.extend(nla(kind, &app(a.selector, a.priority, a.protocol)));
        }
        for e in extra_apps {
            t.extend_from_slice(e);
        }
        ieee.extend(nla(DCB_ATTR_IEEE_APP_TABLE, &t));
    }
    // MAXRATE (7), which this does not show.
    ieee.extend(nla(7, &[0; 64]));
    let mut p = vec![0, DCB_CMD_IEEE_GET, 0, 0];
    p.extend(nla(DCB_ATTR_IFNAME, b"ens1f0np0\0"));
    p.extend(nla(DCB_ATTR_IEEE, &ieee));
    if let Some(x) = d.dcbx {
        p.extend(nla(DCB_ATTR_DCBX, &[x]));
    }
    p
}

#[test]
fn renders_what_dcb_prints_for_each_part() {
    assert_eq!(text(render(&mlx5_like())), MLX5_LIKE_TEXT);
}

#[test]
fn decodes_the_kernels_reply() {
    let d = mlx5_like();
    assert_eq!(decode(&reply(&d, &[])), Ok(d));
}

#[test]
fn app_entries_dcb_would_not_show_are_left_out() {
    let d = Dcb {
        app: Some(vec![]),
        ..Dcb::default()
    };
    let extra = [
        nla(DCB_ATTR_IEEE_APP, &[APP_SEL_DSCP, 3]),      // short
        nla(DCB_ATTR_IEEE_APP, &app(APP_SEL_PCP, 1, 2)), // PCP in an IEEE entry
        nla(DCB_ATTR_DCB_APP, &app(APP_SEL_DSCP, 1, 2)), // DSCP in a DCB entry
        nla(9, &app(APP_SEL_DSCP, 1, 2)),                // unknown kind
        nla(DCB_ATTR_IEEE_APP, &app(0, 1, 2)),           // reserved selector
        nla(DCB_ATTR_IEEE_APP, &app(APP_SEL_DSCP, 5, 46)),
    ];
    let got = decode(&reply(&d, &extra)).unwrap();
    assert_eq!(
        got.app,
        Some(vec![DcbApp {
            selector: APP_SEL_DSCP,
            priority: 5,
            protocol: 46
        }])
    );
    assert_eq!(text(render(&got)), "dscp-prio 46:5 \n");
}

#[test]
fn app_lines_come_in_dcbs_order_sorted_by_protocol() {
    let a = |selector, priority, protocol| DcbApp {
        selector,
        priority,
        protocol,
    };
    let d = Dcb {
        app: Some(vec![
            a(APP_SEL_PCP, 3, 6),
            a(APP_SEL_ANY, 4, 4791),
            a(APP_SEL_DGRAM, 3, 4791),
            a(APP_SEL_STREAM, 2, 3260),
            a(APP_SEL_DSCP, 3, 24),
            a(APP_SEL_DSCP, 2, 24),
            a(APP_SEL_ETHERTYPE, 5, 0x8906),
            a(APP_SEL_ETHERTYPE, 4, 0),
            a(APP_SEL_ETHERTYPE, 3, 0x0800),
            a(APP_SEL_PCP, 1, 2),
        ]),
        ..Dcb::default()
    };
    assert_eq!(
        text(render(&d)),
        "ethtype-prio 800:3 8906:5 \n\
         default-prio 4 \n\
         dscp-prio 24:2 24:3 \n\
         stream-port-prio 3260:2 \n\
         dgram-port-prio 4791:3 \n\
         port-prio 4791:4 \n\
         pcp-prio 2:1 6:3 \n"
    );
    // An empty table prints nothing, as `dcb app show` does.
    let empty = Dcb {
        app: Some(vec![]),
        ..Dcb::default()
    };
    assert_eq!(text(render(&empty)), "");
}

#[test]
fn dcbx_words_and_tsa_names() {
    let d = |x| Dcb {
        dcbx: Some(x),
        ..Dcb::default()
    };
    assert_eq!(
        text(render(&d(0x02 | 0x04 | 0x10))),
        "lld-managed cee static \n"
    );
    assert_eq!(text(render(&d(0x80))), "\n");
    assert_eq!(text(render(&d(0))), "\n");
    let e = Dcb {
        ets: Some(IeeeEts {
            willing: 1,
            cbs: 1,
            tc_tsa: [0, 1, 2, 3, 254, 255, 2, 2],
            ..IeeeEts::default()
        }),
        ..Dcb::default()
    };
    let t = text(render(&e));
    assert!(t.starts_with("willing on ets-cap 0 cbs on \n"), "{t}");
    assert!(t.contains("\ntc-tsa 0:strict 1:cbs 2:ets 3:??? 4:??? 5:vendor 6:ets 7:ets \n"));
}

#[test]
fn parts_of_the_wrong_size_are_left_out() {
    let mut d = mlx5_like();
    let mut bytes = reply(&d, &[]);
    // Make the ETS attribute one byte short: it is no longer an ieee_ets.
    let at = bytes
        .windows(4)
        .position(|w| w == [63, 0, 1, 0])
        .expect("the ETS attribute");
    bytes[at] = 62;
    d.ets = None;
    assert_eq!(decode(&bytes), Ok(d));
    // A DCBX attribute of two bytes is no mode.
    let mut p = vec![0, DCB_CMD_IEEE_GET, 0, 0];
    p.extend(nla(DCB_ATTR_DCBX, &[1, 2]));
    assert_eq!(decode(&p), Ok(Dcb::default()));
}

/// Every prefix of a real-shaped reply decodes or is EBADMSG; none panics.
#[test]
fn short_replies_never_panic() {
    let bytes = reply(&mlx5_like(), &[]);
    for n in 0..bytes.len() {
        match decode(&bytes[..n]) {
            Ok(_) => {}
            Err(e) => assert_eq!(e, Errno(libc::EBADMSG), "prefix {n}"),
        }
    }
}

#[test]
fn the_request_is_dcbs() {
    let r = request("eth0");
    // nlmsghdr: length 32, RTM_GETDCB, REQUEST|ACK, seq 1, port 0.
    assert_eq!(&r[..8], &[32, 0, 0, 0, 78, 0, 5, 0]);
    // dcbmsg { AF_UNSPEC, DCB_CMD_IEEE_GET }, then DCB_ATTR_IFNAME "eth0\0".
    assert_eq!(
        &r[16..],
        &[0, 21, 0, 0, 9, 0, 1, 0, b'e', b't', b'h', b'0', 0, 0, 0, 0]
    );
}
