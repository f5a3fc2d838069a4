//! A netdev's DCB configuration through rtnetlink (RTM_GETDCB,
//! DCB_CMD_IEEE_GET), and the text iproute2's `dcb` prints for it.
//!
//! [`decode`] and [`render`] are pure; [`read`] asks the running kernel in
//! the calling thread's network namespace (a GET: nothing changes).

use super::rtnl;
use crate::netlink::msg::{self, RawAttr};
use crate::source::Errno;

const RTM_GETDCB: u16 = 78;
const DCB_CMD_IEEE_GET: u8 = 21;
const DCB_ATTR_IFNAME: u16 = 1;
const DCB_ATTR_DCBX: u16 = 7;
const DCB_ATTR_IEEE: u16 = 13;
const DCB_ATTR_IEEE_ETS: u16 = 1;
const DCB_ATTR_IEEE_PFC: u16 = 2;
const DCB_ATTR_IEEE_APP_TABLE: u16 = 3;
const DCB_ATTR_IEEE_APP: u16 = 1;
const DCB_ATTR_DCB_APP: u16 = 2;

/// DCBX mode bits (`DCB_CAP_DCBX_*`) and the words `dcb dcbx show` prints.
const DCBX_FLAGS: [(u8, &str); 5] = [
    (0x01, "host"),
    (0x02, "lld-managed"),
    (0x04, "cee"),
    (0x08, "ieee"),
    (0x10, "static"),
];

/// APP selectors (`IEEE_8021QAZ_APP_SEL_*`, and `DCB_APP_SEL_PCP`).
pub const APP_SEL_ETHERTYPE: u8 = 1;
pub const APP_SEL_STREAM: u8 = 2;
pub const APP_SEL_DGRAM: u8 = 3;
pub const APP_SEL_ANY: u8 = 4;
pub const APP_SEL_DSCP: u8 = 5;
pub const APP_SEL_PCP: u8 = 255;

/// What the kernel answered for one netdev; a part it did not answer is None.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dcb {
    /// DCBX mode bits (DCB_ATTR_DCBX).
    pub dcbx: Option<u8>,
    pub ets: Option<IeeeEts>,
    pub pfc: Option<IeeePfc>,
    /// The APP table, as the kernel lists it.
    pub app: Option<Vec<DcbApp>>,
}

/// `struct ieee_ets` (59 bytes).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IeeeEts {
    pub willing: u8,
    pub ets_cap: u8,
    pub cbs: u8,
    pub tc_tx_bw: [u8; 8],
    pub tc_rx_bw: [u8; 8],
    pub tc_tsa: [u8; 8],
    pub prio_tc: [u8; 8],
    pub tc_reco_bw: [u8; 8],
    pub tc_reco_tsa: [u8; 8],
    pub reco_prio_tc: [u8; 8],
}

/// `struct ieee_pfc` (136 bytes: `delay` at 4, the counters at 8 and 72).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IeeePfc {
    pub pfc_cap: u8,
    /// Bit p: PFC on priority p.
    pub pfc_en: u8,
    /// MACsec bypass capability.
    pub mbc: u8,
    /// Allowance for the cable delay, in bit times.
    pub delay: u16,
    /// PFC frames sent per priority.
    pub requests: [u64; 8],
    /// PFC frames received per priority.
    pub indications: [u64; 8],
}

/// `struct dcb_app`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DcbApp {
    pub selector: u8,
    pub priority: u8,
    pub protocol: u16,
}

impl IeeeEts {
    pub const LEN: usize = 59;

    /// The struct from exactly [`Self::LEN`] bytes (`dcb` refuses any other
    /// length, and so does this).
    pub fn parse(b: &[u8]) -> Option<IeeeEts> {
        if b.len() != Self::LEN {
            return None;
        }
        let arr = |i: usize| -> [u8; 8] {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[3 + 8 * i..11 + 8 * i]);
            a
        };
        Some(IeeeEts {
            willing: b[0],
            ets_cap: b[1],
            cbs: b[2],
            tc_tx_bw: arr(0),
            tc_rx_bw: arr(1),
            tc_tsa: arr(2),
            prio_tc: arr(3),
            tc_reco_bw: arr(4),
            tc_reco_tsa: arr(5),
            reco_prio_tc: arr(6),
        })
    }
}

impl IeeePfc {
    pub const LEN: usize = 136;

    /// The struct from exactly [`Self::LEN`] bytes, native byte order.
    pub fn parse(b: &[u8]) -> Option<IeeePfc> {
        if b.len() != Self::LEN {
            return None;
        }
        let u64s = |off: usize| -> [u64; 8] {
            let mut a = [0u64; 8];
            for (i, v) in a.iter_mut().enumerate() {
                let s = off + 8 * i;
                let mut w = [0u8; 8];
                w.copy_from_slice(&b[s..s + 8]);
                *v = u64::from_ne_bytes(w);
            }
            a
        };
        Some(IeeePfc {
            pfc_cap: b[0],
            pfc_en: b[1],
            mbc: b[2],
            delay: u16::from_ne_bytes([b[4], b[5]]),
            requests: u64s(8),
            indications: u64s(72),
        })
    }
}

/// The request: RTM_GETDCB, `struct dcbmsg { AF_UNSPEC, DCB_CMD_IEEE_GET }`,
/// DCB_ATTR_IFNAME; with NLM_F_ACK, as `dcb` sends it.
pub fn request(ifname: &str) -> Vec<u8> {
    msg::Request::new(RTM_GETDCB, msg::NLM_F_REQUEST | msg::NLM_F_ACK, 1)
        .family_header(&[0, DCB_CMD_IEEE_GET, 0, 0])
        .string(DCB_ATTR_IFNAME, ifname)
        .build()
}

/// The DCB configuration of `ifname` from the running kernel: one
/// DCB_CMD_IEEE_GET, whose answer also carries the DCBX mode (dcbnl adds
/// DCB_ATTR_DCBX from the same driver operation DCB_CMD_GDCBX asks), which
/// is where `dcb dcbx show` reads it too.
///
/// # Errors
/// The kernel's errno: EOPNOTSUPP for a netdev without DCB (veth, virtio),
/// ENODEV for none of that name; ETIMEDOUT, EFBIG, EBADMSG as
/// [`rtnl::exchange`] says.
pub fn read(ifname: &str) -> Result<Dcb, Errno> {
    let data = rtnl::exchange(&request(ifname))?;
    let mut dcb = Dcb::default();
    for d in &data {
        decode_into(d, &mut dcb)?;
    }
    Ok(dcb)
}

/// One RTM_GETDCB answer's payload (`struct dcbmsg` and the attributes).
/// Parts of the wrong size or kind are left out, as `dcb` leaves them out.
///
/// # Errors
/// EBADMSG when the attributes are not an attribute stream.
pub fn decode(payload: &[u8]) -> Result<Dcb, Errno> {
    let mut dcb = Dcb::default();
    decode_into(payload, &mut dcb)?;
    Ok(dcb)
}

fn decode_into(payload: &[u8], dcb: &mut Dcb) -> Result<(), Errno> {
    let bad = |_| Errno(libc::EBADMSG);
    let attrs = msg::parse_attrs(payload.get(4..).unwrap_or(&[])).map_err(bad)?;
    for a in &attrs {
        match a.kind {
            DCB_ATTR_DCBX => dcb.dcbx = a.u8().ok(),
            DCB_ATTR_IEEE => {
                for n in a.nested().map_err(bad)? {
                    match n.kind {
                        DCB_ATTR_IEEE_ETS => dcb.ets = IeeeEts::parse(&n.data),
                        DCB_ATTR_IEEE_PFC => dcb.pfc = IeeePfc::parse(&n.data),
                        DCB_ATTR_IEEE_APP_TABLE => dcb.app = Some(app_table(&n)?),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// The entries of DCB_ATTR_IEEE_APP_TABLE that `dcb` shows: IEEE ones with
/// an IEEE selector, DCB ones with the PCP selector, at least 4 bytes.
fn app_table(table: &RawAttr) -> Result<Vec<DcbApp>, Errno> {
    let entries = table.nested().map_err(|_| Errno(libc::EBADMSG))?;
    Ok(entries
        .iter()
        .filter(|e| e.data.len() >= 4)
        .map(|e| {
            let app = DcbApp {
                selector: e.data[0],
                priority: e.data[1],
                protocol: u16::from_ne_bytes([e.data[2], e.data[3]]),
            };
            (e.kind, app)
        })
        .filter(|(kind, app)| match app.selector {
            APP_SEL_ETHERTYPE..=APP_SEL_DSCP => *kind == DCB_ATTR_IEEE_APP,
            APP_SEL_PCP => *kind == DCB_ATTR_DCB_APP,
            _ => false,
        })
        .map(|(_, app)| app)
        .collect())
}

/// The text of `dcb -s -N dcbx show dev IF`, `... ets show ...`, `... pfc
/// show ...` and `... app show ...`, one after the other; a part the kernel
/// did not answer prints nothing (`dcb` fails on it). Every line is words
/// separated by single spaces and ends in a space before the newline, as
/// `dcb` prints; a line is known by its first word:
///
/// ```text
/// host ieee
/// willing off ets-cap 8 cbs off
/// tc-bw 0:100 1:0 2:0 3:0 4:0 5:0 6:0 7:0
/// pg-bw 0:0 1:0 2:0 3:0 4:0 5:0 6:0 7:0
/// tc-tsa 0:vendor 1:vendor 2:vendor 3:vendor 4:vendor 5:vendor 6:vendor 7:vendor
/// prio-tc 0:1 1:0 2:2 3:3 4:4 5:5 6:6 7:7
/// reco-tc-bw 0:0 1:0 2:0 3:0 4:0 5:0 6:0 7:0
/// reco-tc-tsa 0:strict 1:strict 2:strict 3:strict 4:strict 5:strict 6:strict 7:strict
/// reco-prio-tc 0:0 1:0 2:0 3:0 4:0 5:0 6:0 7:0
/// pfc-cap 8 macsec-bypass off delay 0
/// prio-pfc 0:off 1:off 2:off 3:on 4:off 5:off 6:off 7:off
/// requests 0:0 1:0 2:0 3:112 4:0 5:0 6:0 7:0
/// indications 0:0 1:0 2:0 3:37 4:0 5:0 6:0 7:0
/// dscp-prio 24:3 26:3 48:6
/// ```
///
/// - DCBX: the set mode bits as words, lowest first, from `host`,
///   `lld-managed`, `cee`, `ieee`, `static` (unknown bits print nothing; a
///   mode of 0 is an empty line).
/// - ETS: `willing`, `ets-cap`, `cbs`, then per-TC (or per-priority for
///   `prio-tc`, `reco-prio-tc`) maps `K:V` for K 0..7; TSA values are
///   `strict`, `cbs`, `ets`, `vendor` or `???`.
/// - PFC: `pfc-cap`, `macsec-bypass on|off`, `delay`; `prio-pfc` per
///   priority; `requests` (sent) and `indications` (received) PFC frames
///   per priority.
/// - APP: only selectors present, in this order: `ethtype-prio HEX:P`
///   (EtherType in lowercase hex without 0x), `default-prio P P ...`
///   (EtherType 0 entries), `dscp-prio D:P`, `stream-port-prio N:P`,
///   `dgram-port-prio N:P`, `port-prio N:P`, `pcp-prio N:P` (N = PCP*2+DEI
///   style protocol value, decimal); within a line sorted by protocol, then
///   priority; a protocol may repeat with another priority.
pub fn render(d: &Dcb) -> Vec<u8> {
    let mut s = String::new();
    if let Some(dcbx) = d.dcbx {
        for (bit, word) in DCBX_FLAGS {
            if dcbx & bit != 0 {
                s.push_str(word);
                s.push(' ');
            }
        }
        s.push('\n');
    }
    if let Some(e) = &d.ets {
        render_ets(&mut s, e);
    }
    if let Some(p) = &d.pfc {
        render_pfc(&mut s, p);
    }
    if let Some(app) = &d.app {
        render_app(&mut s, app);
    }
    s.into_bytes()
}

fn on_off(v: u8) -> &'static str {
    if v != 0 {
        "on"
    } else {
        "off"
    }
}

fn tsa(v: u8) -> &'static str {
    match v {
        0 => "strict",
        1 => "cbs",
        2 => "ets",
        255 => "vendor",
        _ => "???",
    }
}

/// `NAME 0:V 1:V ... 7:V \n`.
fn named_array<T>(s: &mut String, name: &str, a: &[T], f: impl Fn(&T) -> String) {
    s.push_str(name);
    s.push(' ');
    for (i, v) in a.iter().enumerate() {
        s.push_str(&format!("{i}:{} ", f(v)));
    }
    s.push('\n');
}

fn render_ets(s: &mut String, e: &IeeeEts) {
    s.push_str(&format!(
        "willing {} ets-cap {} cbs {} \n",
        on_off(e.willing),
        e.ets_cap,
        on_off(e.cbs)
    ));
    let num = |v: &u8| v.to_string();
    let tsa = |v: &u8| tsa(*v).to_string();
    named_array(s, "tc-bw", &e.tc_tx_bw, num);
    named_array(s, "pg-bw", &e.tc_rx_bw, num);
    named_array(s, "tc-tsa", &e.tc_tsa, tsa);
    named_array(s, "prio-tc", &e.prio_tc, num);
    named_array(s, "reco-tc-bw", &e.tc_reco_bw, num);
    named_array(s, "reco-tc-tsa", &e.tc_reco_tsa, tsa);
    named_array(s, "reco-prio-tc", &e.reco_prio_tc, num);
}

fn render_pfc(s: &mut String, p: &IeeePfc) {
    s.push_str(&format!(
        "pfc-cap {} macsec-bypass {} delay {} \n",
        p.pfc_cap,
        on_off(p.mbc),
        p.delay
    ));
    let en: Vec<u8> = (0..8).map(|i| p.pfc_en >> i & 1).collect();
    named_array(s, "prio-pfc", &en, |v| on_off(*v).to_string());
    named_array(s, "requests", &p.requests, u64::to_string);
    named_array(s, "indications", &p.indications, u64::to_string);
}

fn render_app(s: &mut String, table: &[DcbApp]) {
    let mut apps = table.to_vec();
    apps.sort_by_key(|a| (a.protocol, a.priority));
    let line = |s: &mut String, name: &str, keep: &dyn Fn(&DcbApp) -> bool, hex: bool| {
        let mut any = false;
        for a in apps.iter().filter(|a| keep(a)) {
            if !any {
                s.push_str(name);
                s.push(' ');
                any = true;
            }
            if hex {
                s.push_str(&format!("{:x}:{} ", a.protocol, a.priority));
            } else {
                s.push_str(&format!("{}:{} ", a.protocol, a.priority));
            }
        }
        if any {
            s.push('\n');
        }
    };
    let sel = |want: u8| move |a: &DcbApp| a.selector == want;
    line(
        s,
        "ethtype-prio",
        &|a| a.selector == APP_SEL_ETHERTYPE && a.protocol != 0,
        true,
    );
    let defaults: Vec<_> = apps
        .iter()
        .filter(|a| a.selector == APP_SEL_ETHERTYPE && a.protocol == 0)
        .collect();
    if !defaults.is_empty() {
        s.push_str("default-prio ");
        for a in defaults {
            s.push_str(&format!("{} ", a.priority));
        }
        s.push('\n');
    }
    line(s, "dscp-prio", &sel(APP_SEL_DSCP), false);
    line(s, "stream-port-prio", &sel(APP_SEL_STREAM), false);
    line(s, "dgram-port-prio", &sel(APP_SEL_DGRAM), false);
    line(s, "port-prio", &sel(APP_SEL_ANY), false);
    line(s, "pcp-prio", &sel(APP_SEL_PCP), false);
}

#[cfg(test)]
mod tests;
