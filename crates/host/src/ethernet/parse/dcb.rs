//! A netdev's DCB configuration — DCBX mode, trust, ETS, PFC, the APP table and
//! the receive buffers — read from either of the two tools that print it:
//! iproute2's `dcb` ([`dcb`]) and MLNX_OFED's `mlnx_qos -i IF` ([`mlnx_qos`]),
//! into one [`Dcb`].
//!
//! `dcb` has no trust line: as `mlnx_qos` infers it when the kernel has no
//! `qos/trust` file, trust is DSCP iff the APP table holds a DSCP-selector entry
//! (mlx5's `ieee_setapp` switches the port to DSCP trust on the first such entry).
//! `mlnx_qos` prints the trust and the dscp2prio table, which become DSCP APP
//! entries here.
//!
//! Formats: `dcb/dcb_ets.c`, `dcb_pfc.c`, `dcb_app.c`, `dcb_dcbx.c`,
//! `dcb_buffer.c`, `dcb_maxrate.c` of iproute2 (one `keyword k:v k:v ..` line per
//! attribute; `-N` prints DSCP numerically, without it DSCP values with a name in
//! `rt_dsfield` print as `CS3`, `AF31`, `EF`); `python/mlnx_qos` of mlnx-tools.

use serde::{Deserialize, Serialize};

use super::{numbered_lines, on_off, TextError};

/// Traffic classes and priorities per port.
pub const N: usize = 8;

/// The DCB configuration of one netdev.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Dcb {
    /// DCBX mode as printed: `host ieee` (dcb), `OS controlled`,
    /// `Firmware controlled` (mlnx_qos).
    pub dcbx: Option<String>,
    /// Which header field classifies received packets.
    pub trust: Option<Trust>,
    /// Enhanced transmission selection.
    pub ets: Option<Ets>,
    /// Priority flow control.
    pub pfc: Option<Pfc>,
    /// APP table entries, in the order printed; several entries for one DSCP are
    /// legal and kept.
    pub app: Vec<App>,
    /// Receive buffers (dcb buffer, mlnx_qos receive buffer rows and cable length).
    pub buffer: Option<Buffer>,
    /// Lines of a known command that this parser does not know (newer tools).
    pub unknown: Vec<String>,
}

impl Dcb {
    /// The priorities the APP table maps `dscp` to (empty: the DSCP is not in
    /// the table).
    pub fn dscp_priorities(&self, dscp: u8) -> Vec<u8> {
        self.app
            .iter()
            .filter(|a| a.selector == Selector::Dscp && a.protocol == u16::from(dscp))
            .map(|a| a.priority)
            .collect()
    }

    /// Whether PFC is enabled on `priority`.
    pub fn pfc_enabled(&self, priority: u8) -> Option<bool> {
        self.pfc
            .as_ref()?
            .enabled
            .get(usize::from(priority))
            .copied()
            .flatten()
    }
}

/// Packet classification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Trust {
    /// 802.1p priority of the VLAN tag (untagged RoCE lands on priority 0).
    Pcp,
    /// IP DSCP, through the dscp→priority map.
    Dscp,
}

/// ETS: bandwidth and scheduling per traffic class, priority→TC map.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Ets {
    /// `willing` (dcb).
    pub willing: Option<bool>,
    /// `ets-cap`: traffic classes supported.
    pub ets_cap: Option<u8>,
    /// `cbs`: credit-based shaper supported.
    pub cbs: Option<bool>,
    /// Bandwidth share per TC, percent.
    pub tc_bw: [Option<u8>; N],
    /// Transmission selection algorithm per TC.
    pub tc_tsa: [Option<Tsa>; N],
    /// Traffic class of each priority.
    pub prio_tc: [Option<u8>; N],
    /// Rate limit per TC as printed (`unlimited`, `10.0 Gbps`; mlnx_qos) or in
    /// bits per second (`dcb maxrate`).
    pub tc_ratelimit: [Option<String>; N],
}

/// Transmission selection algorithm (IEEE 802.1Qaz TSA values 0, 1, 2, 255).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Tsa {
    /// Strict priority.
    Strict,
    /// Credit-based shaper.
    Cbs,
    /// Enhanced transmission selection (weighted).
    Ets,
    /// Vendor-specific (mlx5's initial setting).
    Vendor,
    /// A name this parser does not know, as printed.
    Other(String),
}

impl Tsa {
    fn from_name(s: &str) -> Tsa {
        match s {
            "strict" => Tsa::Strict,
            "cbs" => Tsa::Cbs,
            "ets" => Tsa::Ets,
            "vendor" => Tsa::Vendor,
            other => Tsa::Other(other.to_string()),
        }
    }
}

/// PFC settings.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Pfc {
    /// `pfc-cap`: priorities that can be PFC-enabled at once.
    pub cap: Option<u8>,
    /// `macsec-bypass`.
    pub macsec_bypass: Option<bool>,
    /// `delay`: allowance for the link's round trip, bits.
    pub delay: Option<u32>,
    /// PFC per priority.
    pub enabled: [Option<bool>; N],
    /// PFC frames sent per priority (`requests`, printed by `dcb -s`).
    pub requests: [Option<u64>; N],
    /// PFC frames received per priority (`indications`).
    pub indications: [Option<u64>; N],
}

/// One APP table entry: traffic matching `selector`/`protocol` gets `priority`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct App {
    /// What `protocol` identifies.
    pub selector: Selector,
    /// EtherType, port, DSCP (0-63), or PCP + 8 × DEI; 0 for the default entry.
    pub protocol: u16,
    /// 802.1p priority.
    pub priority: u8,
}

/// APP selector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Selector {
    /// EtherType.
    Ethtype,
    /// The port's default priority.
    Default,
    /// IP DSCP.
    Dscp,
    /// TCP/SCTP port.
    StreamPort,
    /// UDP/DCCP port.
    DgramPort,
    /// Any transport port.
    Port,
    /// 802.1p PCP with DEI.
    Pcp,
}

/// Receive buffer configuration.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Buffer {
    /// Buffer each priority uses.
    pub prio_buffer: [Option<u8>; N],
    /// Buffer sizes, bytes, buffer 0 first.
    pub buffer_size: Vec<u64>,
    /// `total-size` (dcb) / `max_buffer_size` (mlnx_qos), bytes.
    pub total_size: Option<u64>,
    /// `Cable len:` (mlnx_qos), meters.
    pub cable_len: Option<u32>,
}

/// Reads the output of `dcb dcbx show`, `dcb ets show`, `dcb pfc show`,
/// `dcb app show` (and `dcb buffer show`, `dcb maxrate show`) for one device,
/// in any order and concatenated, numeric (`-N`) or with DSCP names.
///
/// # Errors
/// A known line whose mappings are not `index:value` with an index 0-7 and a
/// value of the right kind, a DSCP name not in iproute2's table, or text in
/// which no line is `dcb` output at all.
pub fn dcb(text: &str) -> Result<Dcb, TextError> {
    const CMD: &str = "dcb";
    let mut d = Dcb::default();
    for (n, line) in numbered_lines(text) {
        let t = line.trim();
        let tokens: Vec<&str> = t.split_whitespace().collect();
        let Some((&keyword, rest)) = tokens.split_first() else {
            continue;
        };
        let err = |reason| TextError::new(CMD, n, line, reason);
        match keyword {
            "willing" | "ets-cap" | "cbs" => {
                let ets = d.ets.get_or_insert_with(Ets::default);
                for pair in tokens.chunks(2) {
                    let [k, v] = pair else {
                        return Err(err("attribute without a value"));
                    };
                    match *k {
                        "willing" => ets.willing = on_off(v).flatten(),
                        "ets-cap" => {
                            ets.ets_cap =
                                Some(v.parse().map_err(|_| err("ets-cap is not a number"))?)
                        }
                        "cbs" => ets.cbs = on_off(v).flatten(),
                        _ => {}
                    }
                }
            }
            "tc-bw" => {
                let ets = d.ets.get_or_insert_with(Ets::default);
                for (i, v) in mappings(rest).map_err(err)? {
                    ets.tc_bw[i] = Some(v.parse().map_err(|_| err("bandwidth is not a number"))?);
                }
            }
            "tc-tsa" => {
                let ets = d.ets.get_or_insert_with(Ets::default);
                for (i, v) in mappings(rest).map_err(err)? {
                    ets.tc_tsa[i] = Some(Tsa::from_name(v));
                }
            }
            "prio-tc" => {
                let ets = d.ets.get_or_insert_with(Ets::default);
                for (i, v) in mappings(rest).map_err(err)? {
                    ets.prio_tc[i] = Some(tc(v).ok_or_else(|| err("traffic class is not 0-7"))?);
                }
            }
            "tc-maxrate" => {
                let ets = d.ets.get_or_insert_with(Ets::default);
                for (i, v) in mappings(rest).map_err(err)? {
                    ets.tc_ratelimit[i] = Some(v.to_string());
                }
            }
            "pg-bw" | "reco-tc-bw" | "reco-tc-tsa" | "reco-prio-tc" => {
                mappings(rest).map_err(err)?;
            }
            "requests" | "indications" => {
                let pfc = d.pfc.get_or_insert_with(Pfc::default);
                let counts = if keyword == "requests" {
                    &mut pfc.requests
                } else {
                    &mut pfc.indications
                };
                for (i, v) in mappings(rest).map_err(err)? {
                    counts[i] = Some(v.parse().map_err(|_| err("count is not a number"))?);
                }
            }
            "pfc-cap" | "macsec-bypass" | "delay" => {
                let pfc = d.pfc.get_or_insert_with(Pfc::default);
                for pair in tokens.chunks(2) {
                    let [k, v] = pair else {
                        return Err(err("attribute without a value"));
                    };
                    match *k {
                        "pfc-cap" => {
                            pfc.cap = Some(v.parse().map_err(|_| err("pfc-cap is not a number"))?)
                        }
                        "macsec-bypass" => pfc.macsec_bypass = on_off(v).flatten(),
                        "delay" => {
                            pfc.delay = Some(v.parse().map_err(|_| err("delay is not a number"))?)
                        }
                        _ => {}
                    }
                }
            }
            "prio-pfc" => {
                let pfc = d.pfc.get_or_insert_with(Pfc::default);
                for (i, v) in mappings(rest).map_err(err)? {
                    pfc.enabled[i] = Some(on_off(v).flatten().ok_or_else(|| err("not on or off"))?);
                }
            }
            "default-prio" => {
                for v in rest {
                    let priority = prio(v).ok_or_else(|| err("priority is not 0-7"))?;
                    d.app.push(App {
                        selector: Selector::Default,
                        protocol: 0,
                        priority,
                    });
                }
            }
            "ethtype-prio" | "dscp-prio" | "stream-port-prio" | "dgram-port-prio" | "port-prio"
            | "pcp-prio" => {
                for entry in rest {
                    let (pid, p) = entry
                        .rsplit_once(':')
                        .ok_or_else(|| err("entry is not PROTOCOL:PRIO"))?;
                    let priority = prio(p).ok_or_else(|| err("priority is not 0-7"))?;
                    let (selector, protocol) = match keyword {
                        "ethtype-prio" => (
                            Selector::Ethtype,
                            u16::from_str_radix(pid.trim_start_matches("0x"), 16)
                                .map_err(|_| err("EtherType is not hexadecimal"))?,
                        ),
                        "dscp-prio" => (
                            Selector::Dscp,
                            u16::from(dscp(pid).ok_or_else(|| err("unknown DSCP"))?),
                        ),
                        "pcp-prio" => (
                            Selector::Pcp,
                            pcp(pid).ok_or_else(|| err("PCP is not 0-7 with nd/de"))?,
                        ),
                        other => (
                            match other {
                                "stream-port-prio" => Selector::StreamPort,
                                "dgram-port-prio" => Selector::DgramPort,
                                _ => Selector::Port,
                            },
                            pid.parse().map_err(|_| err("port is not a number"))?,
                        ),
                    };
                    d.app.push(App {
                        selector,
                        protocol,
                        priority,
                    });
                }
            }
            "prio-buffer" => {
                let b = d.buffer.get_or_insert_with(Buffer::default);
                for (i, v) in mappings(rest).map_err(err)? {
                    b.prio_buffer[i] = Some(tc(v).ok_or_else(|| err("buffer is not 0-7"))?);
                }
            }
            "buffer-size" => {
                let b = d.buffer.get_or_insert_with(Buffer::default);
                b.buffer_size = Vec::new();
                for (i, v) in mappings(rest).map_err(err)? {
                    b.buffer_size.resize(b.buffer_size.len().max(i + 1), 0);
                    b.buffer_size[i] =
                        size(v).ok_or_else(|| err("size is not a number with b/Kb/Mb"))?;
                }
            }
            "total-size" => {
                let b = d.buffer.get_or_insert_with(Buffer::default);
                let v = rest
                    .first()
                    .ok_or_else(|| err("total-size without a value"))?;
                b.total_size =
                    Some(size(v).ok_or_else(|| err("size is not a number with b/Kb/Mb"))?);
            }
            _ if tokens.iter().all(|t| DCBX_WORDS.contains(t)) => d.dcbx = Some(tokens.join(" ")),
            _ => d.unknown.push(t.to_string()),
        }
    }
    if d.dcbx.is_none()
        && d.ets.is_none()
        && d.pfc.is_none()
        && d.app.is_empty()
        && d.buffer.is_none()
        && !d.unknown.is_empty()
    {
        return Err(TextError::new(
            CMD,
            1,
            text.lines().next().unwrap_or(""),
            "no dcb output in the text",
        ));
    }
    d.trust = Some(if d.app.iter().any(|a| a.selector == Selector::Dscp) {
        Trust::Dscp
    } else {
        Trust::Pcp
    });
    Ok(d)
}

/// Words `dcb dcbx show` prints.
const DCBX_WORDS: [&str; 5] = ["host", "lld-managed", "cee", "ieee", "static"];

/// `0:33 1:33 ..` as (index 0-7, value) pairs.
fn mappings<'a>(tokens: &[&'a str]) -> Result<Vec<(usize, &'a str)>, &'static str> {
    tokens
        .iter()
        .map(|t| {
            let (k, v) = t.split_once(':').ok_or("mapping is not INDEX:VALUE")?;
            let k: usize = k.parse().map_err(|_| "index is not a number")?;
            if k >= N {
                return Err("index is not 0-7");
            }
            Ok((k, v))
        })
        .collect()
}

fn prio(s: &str) -> Option<u8> {
    s.parse().ok().filter(|p: &u8| usize::from(*p) < N)
}

fn tc(s: &str) -> Option<u8> {
    prio(s)
}

/// DSCP by number or by iproute2 `rt_dsfield` name.
fn dscp(s: &str) -> Option<u8> {
    if let Ok(v) = s.parse::<u8>() {
        return (v < 64).then_some(v);
    }
    if let Some(h) = s.strip_prefix("0x") {
        return u8::from_str_radix(h, 16).ok().filter(|v| *v < 64);
    }
    let up = s.to_ascii_uppercase();
    match up.as_str() {
        "DEFAULT" | "BE" => Some(0),
        "EF" => Some(46),
        "VA" => Some(44),
        _ => {
            if let Some(n) = up.strip_prefix("CS") {
                n.parse::<u8>().ok().filter(|n| *n < 8).map(|n| n * 8)
            } else if let Some(xy) = up.strip_prefix("AF") {
                let b = xy.as_bytes();
                match b {
                    [x @ b'1'..=b'4', y @ b'1'..=b'3'] => Some((x - b'0') * 8 + (y - b'0') * 2),
                    _ => None,
                }
            } else {
                None
            }
        }
    }
}

/// `1nd` / `2de` (or numeric PCP + 8 × DEI, as `-N` prints it).
fn pcp(s: &str) -> Option<u16> {
    if let Ok(v) = s.parse::<u16>() {
        return (v < 16).then_some(v);
    }
    let (digit, dei) = s.split_at(s.len().checked_sub(2)?);
    let p: u16 = digit.parse().ok().filter(|p| *p < 8)?;
    match dei {
        "nd" => Some(p),
        "de" => Some(p + 8),
        _ => None,
    }
}

/// `10Kb`, `1Mb`, `130944b`, `262016`: bytes (dcb prints powers of 1024).
fn size(s: &str) -> Option<u64> {
    let (num, mult) = if let Some(n) = s.strip_suffix("Mb") {
        (n, 1024 * 1024)
    } else if let Some(n) = s.strip_suffix("Kb") {
        (n, 1024)
    } else {
        (s.strip_suffix('b').unwrap_or(s), 1)
    };
    num.parse::<u64>().ok()?.checked_mul(mult)
}

/// Reads `mlnx_qos -i IF`: DCBX mode, trust, the dscp2prio table (as DSCP APP
/// entries), default priority, receive buffers, cable length, the PFC table
/// (`priority`, `enabled`, `buffer` rows) and the per-TC blocks (`tc: N
/// ratelimit: R, tsa: T[, bw: B%]` followed by its `priority:` lines).
///
/// # Errors
/// A known line with a malformed value (a PFC row that is not eight 0/1 flags, a
/// dscp2prio line with a DSCP above 63), or text without any mlnx_qos line.
pub fn mlnx_qos(text: &str) -> Result<Dcb, TextError> {
    const CMD: &str = "mlnx_qos";
    let mut d = Dcb::default();
    let mut tc_now: Option<usize> = None;
    let mut recognized = false;
    for (n, line) in numbered_lines(text) {
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        let err = |reason| TextError::new(CMD, n, line, reason);
        if let Some(mode) = t.strip_prefix("DCBX mode:") {
            d.dcbx = Some(mode.trim().to_string());
        } else if let Some(v) = t
            .strip_prefix("Priority trust state:")
            .or_else(|| t.strip_prefix("Priority trust mode:"))
        {
            d.trust = match v.trim() {
                "dscp" => Some(Trust::Dscp),
                "pcp" => Some(Trust::Pcp),
                _ => return Err(err("trust is not pcp or dscp")),
            };
        } else if matches!(t, "dscp2prio mapping:" | "PFC configuration:")
            || t.starts_with("priority ")
        {
            // Section titles and the PFC table's header row.
        } else if let Some(rest) = t.strip_prefix("prio:") {
            let (p, dscps) = rest
                .split_once("dscp:")
                .ok_or_else(|| err("no dscp: list"))?;
            let priority = prio(p.trim()).ok_or_else(|| err("priority is not 0-7"))?;
            for v in dscps.split(',').map(str::trim).filter(|v| !v.is_empty()) {
                let dscp: u8 = v
                    .parse()
                    .ok()
                    .filter(|v| *v < 64)
                    .ok_or_else(|| err("DSCP is not 0-63"))?;
                d.app.push(App {
                    selector: Selector::Dscp,
                    protocol: u16::from(dscp),
                    priority,
                });
            }
        } else if let Some(v) = t.strip_prefix("default priority:") {
            if let Some(p) = v.split_whitespace().next() {
                let priority = prio(p).ok_or_else(|| err("priority is not 0-7"))?;
                d.app.push(App {
                    selector: Selector::Default,
                    protocol: 0,
                    priority,
                });
            }
        } else if let Some(v) = t.strip_prefix("Receive buffer size (bytes):") {
            let b = d.buffer.get_or_insert_with(Buffer::default);
            for item in v.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                if let Some(max) = item.strip_prefix("max_buffer_size=") {
                    b.total_size = Some(
                        max.parse()
                            .map_err(|_| err("max_buffer_size is not a number"))?,
                    );
                } else {
                    b.buffer_size.push(
                        item.parse()
                            .map_err(|_| err("buffer size is not a number"))?,
                    );
                }
            }
        } else if let Some(v) = t.strip_prefix("Cable len:") {
            let b = d.buffer.get_or_insert_with(Buffer::default);
            b.cable_len = Some(
                v.trim()
                    .parse()
                    .map_err(|_| err("cable length is not a number"))?,
            );
        } else if let Some(v) = t.strip_prefix("enabled ") {
            let flags = row8(v).ok_or_else(|| err("PFC row is not eight numbers"))?;
            let pfc = d.pfc.get_or_insert_with(Pfc::default);
            for (i, f) in flags.iter().enumerate() {
                pfc.enabled[i] = Some(*f != 0);
            }
        } else if let Some(v) = t.strip_prefix("buffer ") {
            let bufs = row8(v).ok_or_else(|| err("buffer row is not eight numbers"))?;
            let b = d.buffer.get_or_insert_with(Buffer::default);
            for (i, f) in bufs.iter().enumerate() {
                b.prio_buffer[i] = Some(*f);
            }
        } else if let Some(v) = t.strip_prefix("tc:") {
            let mut parts = v.split(',');
            let head = parts.next().unwrap_or("");
            let (num, rate) = head
                .split_once("ratelimit:")
                .ok_or_else(|| err("tc line without ratelimit"))?;
            let tcn = tc(num.trim()).ok_or_else(|| err("traffic class is not 0-7"))? as usize;
            let ets = d.ets.get_or_insert_with(Ets::default);
            ets.tc_ratelimit[tcn] = Some(rate.trim().to_string());
            for part in parts {
                let (k, v) = part
                    .split_once(':')
                    .ok_or_else(|| err("tc attribute is not key: value"))?;
                match k.trim() {
                    "tsa" => ets.tc_tsa[tcn] = Some(Tsa::from_name(v.trim())),
                    "bw" => {
                        let bw = v.trim().trim_end_matches('%');
                        ets.tc_bw[tcn] =
                            Some(bw.parse().map_err(|_| err("bw is not a percentage"))?);
                    }
                    _ => {}
                }
            }
            tc_now = Some(tcn);
        } else if let Some(v) = t.strip_prefix("priority:") {
            let tcn = tc_now.ok_or_else(|| err("priority line before any tc line"))?;
            let p = prio(v.trim()).ok_or_else(|| err("priority is not 0-7"))?;
            d.ets.get_or_insert_with(Ets::default).prio_tc[usize::from(p)] = Some(tcn as u8);
        } else {
            d.unknown.push(t.to_string());
            continue;
        }
        recognized = true;
    }
    if !recognized {
        return Err(TextError::new(
            CMD,
            1,
            text.lines().next().unwrap_or(""),
            "no mlnx_qos output in the text",
        ));
    }
    Ok(d)
}

/// Eight small numbers, as in mlnx_qos's PFC rows.
fn row8(v: &str) -> Option<[u8; N]> {
    let nums: Vec<u8> = v
        .split_whitespace()
        .map(|s| s.parse().ok())
        .collect::<Option<_>>()?;
    nums.try_into().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dscp_names_follow_rt_dsfield() {
        assert_eq!(dscp("CS3"), Some(24));
        assert_eq!(dscp("AF31"), Some(26));
        assert_eq!(dscp("EF"), Some(46));
        assert_eq!(dscp("CS6"), Some(48));
        assert_eq!(dscp("0"), Some(0));
        assert_eq!(dscp("64"), None);
        assert_eq!(dscp("AF51"), None);
        assert_eq!(pcp("1nd"), Some(1));
        assert_eq!(pcp("2de"), Some(10));
        assert_eq!(pcp("8nd"), None);
        assert_eq!(size("10Kb"), Some(10240));
        assert_eq!(size("1Mb"), Some(1 << 20));
    }

    #[test]
    fn dcb_trust_is_dscp_iff_a_dscp_entry_exists() {
        let d = dcb("pfc-cap 8 macsec-bypass off delay 0\nprio-pfc 0:off 1:off 2:off 3:on 4:off 5:off 6:off 7:off\n").unwrap();
        assert_eq!(d.trust, Some(Trust::Pcp));
        assert_eq!(d.pfc_enabled(3), Some(true));
        let d = dcb("dscp-prio AF31:3\n").unwrap();
        assert_eq!(d.trust, Some(Trust::Dscp));
        assert_eq!(d.dscp_priorities(26), vec![3]);
    }

    #[test]
    fn dcb_errors_name_the_line() {
        let err = dcb("host ieee\nprio-pfc 0:maybe\n").unwrap_err();
        assert_eq!((err.line, err.reason), (2, "not on or off"));
        assert_eq!(dcb("prio-tc 9:1\n").unwrap_err().reason, "index is not 0-7");
        assert_eq!(dcb("dscp-prio XX:1\n").unwrap_err().reason, "unknown DSCP");
        assert_eq!(
            dcb("hello world\n").unwrap_err().reason,
            "no dcb output in the text"
        );
        assert_eq!(dcb("").unwrap().trust, Some(Trust::Pcp));
    }

    #[test]
    fn mlnx_qos_tc_blocks_group_priorities() {
        let text = "DCBX mode: Firmware controlled\nPriority trust state: dscp\n\
                    PFC configuration:\n        priority    0   1   2   3   4   5   6   7\n\
                    enabled     0   0   0   1   0   0   0   0   \n\
                    buffer      0   0   0   1   0   0   0   0   \n\
                    tc: 0 ratelimit: unlimited, tsa: ets, bw: 50%\n priority:  0\n priority:  1\n\
                    tc: 3 ratelimit: unlimited, tsa: ets, bw: 50%\n priority:  3\n";
        let d = mlnx_qos(text).unwrap();
        let ets = d.ets.unwrap();
        assert_eq!(ets.prio_tc[1], Some(0));
        assert_eq!(ets.prio_tc[3], Some(3));
        assert_eq!(ets.tc_bw[3], Some(50));
        assert_eq!(d.buffer.unwrap().prio_buffer[3], Some(1));
        assert_eq!(
            mlnx_qos("priority:  1\n").unwrap_err().reason,
            "priority line before any tc line"
        );
        assert_eq!(mlnx_qos("enabled 0 1\n").unwrap_err().line, 1);
    }
}
