//! Values of single sysfs attributes: `/sys/class/infiniband/<dev>/...`, the PCI
//! device attributes behind it, and `/etc/libibverbs.d/*.driver`.
//!
//! The formats are the ones the kernel's `sysfs_emit` calls print (for example
//! `"%d: %s\n"` for a port state). Numbers a kernel does not know how to name are kept
//! with their code; names we do not know are kept as text.

use std::net::{Ipv4Addr, Ipv6Addr};

use serde::{Deserialize, Serialize};

pub use rdmakit_types::{GidType, LinkLayer, Speed};

use super::{lossy, ParseError, Result};

pub use super::cpu::{cpulist, cpumask, CpuSet, MAX_CPU};
pub use super::pci::{numa_node, pcie_speed, pcie_width, PcieSpeed};

/// `ports/<n>/state`, e.g. `"4: ACTIVE"`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortState {
    /// The numeric state (IB spec PortState: 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE,
    /// 5 ACTIVE_DEFER).
    pub code: u8,
    /// The name as printed (or the known name when the kernel printed none).
    pub name: String,
}

impl PortState {
    /// The port can carry traffic: ACTIVE (4) or ACTIVE_DEFER (5).
    pub fn is_active(&self) -> bool {
        self.code == 4 || self.code == 5
    }

    /// The kernel's name for a state code.
    pub fn known_name(code: u8) -> Option<&'static str> {
        PORT_STATES
            .iter()
            .find(|(c, _)| *c == code)
            .map(|(_, name)| *name)
    }
}

/// `ports/<n>/phys_state`, e.g. `"5: LinkUp"`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhysState {
    /// The numeric physical state (5 = LinkUp).
    pub code: u8,
    /// The name as printed.
    pub name: String,
}

impl PhysState {
    /// The physical link is up (code 5).
    pub fn is_link_up(&self) -> bool {
        self.code == 5
    }

    /// The kernel's name for a physical state code.
    pub fn known_name(code: u8) -> Option<&'static str> {
        PHYS_STATES
            .iter()
            .find(|(c, _)| *c == code)
            .map(|(_, name)| *name)
    }
}

/// `ports/<n>/rate`, e.g. `"100 Gb/sec (4X EDR)"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rate {
    /// The rate the kernel printed, in Gb/s (nominal: width × per-lane rate).
    pub gbps: f64,
    /// Link width in lanes (`4` for `4X`), when printed.
    pub width: Option<u8>,
    /// Speed name (`"EDR"`, `"NDR"`, or an unknown name kept as printed), when
    /// printed. Kernels before 3.x printed no name for SDR.
    pub speed: Option<String>,
    /// The value as read, without the trailing newline.
    pub raw: String,
}

impl Rate {
    /// Width × the signalling rate of one lane at the named speed, when both are
    /// known (e.g. 4X EDR → 103.125 Gb/s on the wire for a nominal 100).
    pub fn signaling_gbps(&self) -> Option<f64> {
        let lane = Speed::from_name(self.speed.as_deref()?.trim())?.signaling_gbps();
        Some(lane * f64::from(self.width?))
    }
}

/// `<dev>/node_type`, e.g. `"1: CA"`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeType {
    /// 1 CA, 2 switch, 3 router, 4 RNIC (iWARP), 5 usNIC, 6 usNIC UDP, 7 unspecified.
    pub code: u8,
    /// The name as printed.
    pub name: String,
}

impl NodeType {
    /// An InfiniBand / RoCE channel adapter (code 1).
    pub fn is_ca(&self) -> bool {
        self.code == 1
    }

    /// An iWARP RNIC (code 4).
    pub fn is_rnic(&self) -> bool {
        self.code == 4
    }
}

/// A counter file (`counters/*`, `hw_counters/*`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Counter {
    /// A number.
    Value(u64),
    /// The driver says there is no value, e.g. `"N/A (no PMA)"` (kept as printed).
    Unavailable(String),
}

impl Counter {
    /// The number, if there is one.
    pub fn value(&self) -> Option<u64> {
        match self {
            Counter::Value(v) => Some(*v),
            Counter::Unavailable(_) => None,
        }
    }
}

const PORT_STATES: [(u8, &str); 6] = [
    (0, "NOP"),
    (1, "DOWN"),
    (2, "INIT"),
    (3, "ARMED"),
    (4, "ACTIVE"),
    (5, "ACTIVE_DEFER"),
];

const PHYS_STATES: [(u8, &str); 7] = [
    (1, "Sleep"),
    (2, "Polling"),
    (3, "Disabled"),
    (4, "PortConfigurationTraining"),
    (5, "LinkUp"),
    (6, "LinkErrorRecovery"),
    (7, "Phy Test"),
];

const NODE_TYPES: [(u8, &str); 7] = [
    (1, "CA"),
    (2, "switch"),
    (3, "router"),
    (4, "RNIC"),
    (5, "usNIC"),
    (6, "usNIC UDP"),
    (7, "unspecified"),
];

/// `s` without trailing newlines, NULs and whitespace.
pub fn strip(s: &str) -> &str {
    s.trim_end_matches(|c: char| c == '\0' || c.is_whitespace())
}

/// Parses a port state such as `"4: ACTIVE"`. An unknown code with a name is kept;
/// a bare known name (`"ACTIVE"`) is accepted too.
///
/// # Errors
/// When there is no code, or the code does not fit a `u8`, or an unknown code has
/// no name.
pub fn port_state(s: &str) -> Result<PortState> {
    let (code, name) = code_and_name(s, "port state", &PORT_STATES)?;
    Ok(PortState { code, name })
}

/// Parses a physical port state such as `"5: LinkUp"` (same rules as
/// [`port_state`]).
///
/// # Errors
/// As [`port_state`].
pub fn phys_state(s: &str) -> Result<PhysState> {
    let (code, name) = code_and_name(s, "physical port state", &PHYS_STATES)?;
    Ok(PhysState { code, name })
}

/// Parses a node type such as `"1: CA"` (same rules as [`port_state`]).
///
/// # Errors
/// As [`port_state`].
pub fn node_type(s: &str) -> Result<NodeType> {
    let (code, name) = code_and_name(s, "node type", &NODE_TYPES)?;
    Ok(NodeType { code, name })
}

/// Parses a port rate: `"<number> Gb/sec (<width>X <speed>)"`, where the
/// parenthesised part may be missing (`"0 GB/sec"`) or carry no speed name
/// (`"10 Gb/sec (4X)"`, old kernels' SDR). Unknown speed names are kept.
///
/// # Errors
/// When there is no finite non-negative number, the unit is not Gb/sec, or the
/// parenthesised part is malformed.
pub fn rate(s: &str) -> Result<Rate> {
    let raw = strip(s);
    let err = || ParseError::new("rate", raw);
    let text = raw.trim();
    let (head, detail) = match text.find('(') {
        Some(open) => {
            let inner = text[open + 1..].strip_suffix(')').ok_or_else(err)?;
            (&text[..open], Some(inner.trim()))
        }
        None => (text, None),
    };
    let mut words = head.split_whitespace();
    let gbps = decimal(words.next().ok_or_else(err)?).ok_or_else(err)?;
    match words.next() {
        Some(unit) if is_gbit_unit(unit) => {}
        _ => return Err(err()),
    }
    if words.next().is_some() {
        return Err(err());
    }
    let (width, speed) = match detail {
        None => (None, None),
        Some(inner) => {
            let mut parts = inner.split_whitespace();
            let width_text = parts.next().ok_or_else(err)?;
            let lanes = width_text
                .strip_suffix(['X', 'x'])
                .and_then(|n| n.parse::<u8>().ok())
                .ok_or_else(err)?;
            let speed: Vec<&str> = parts.collect();
            let speed = if speed.is_empty() {
                None
            } else {
                Some(speed.join(" "))
            };
            (Some(lanes), speed)
        }
    };
    Ok(Rate {
        gbps,
        width,
        speed,
        raw: raw.to_string(),
    })
}

/// Parses `ports/<n>/link_layer`: `InfiniBand` or `Ethernet`; None for the
/// kernel's `Unknown` (an unspecified link layer) and any other name, which the
/// attribute keeps as its text.
///
/// # Errors
/// When the value is empty.
pub fn link_layer(s: &str) -> Result<Option<LinkLayer>> {
    let text = strip(s).trim();
    if text.is_empty() {
        return Err(ParseError::new("link layer", s));
    }
    Ok(LinkLayer::from_name(text))
}

/// Parses a GUID as sysfs prints it, `"5054:00ff:fe12:3456"` (four groups of up to
/// four hex digits), or as `0x`-prefixed hex (`"0x0002c90300a0b1c2"`, ibstat's form).
///
/// # Errors
/// Any other shape.
pub fn guid(s: &str) -> Result<u64> {
    let text = strip(s).trim();
    let err = || ParseError::new("GUID", text);
    if let Some(hex) = strip_hex_prefix(text) {
        return hex_digits_u64(hex).ok_or_else(err);
    }
    let mut value: u64 = 0;
    let mut groups = 0;
    for group in text.split(':') {
        groups += 1;
        if groups > 4 || group.is_empty() || group.len() > 4 {
            return Err(err());
        }
        let part = u16::from_str_radix(group, 16).map_err(|_| err())?;
        value = (value << 16) | u64::from(part);
    }
    if groups != 4 {
        return Err(err());
    }
    Ok(value)
}

/// Parses a GID: sysfs prints all eight groups in full
/// (`"fe80:0000:0000:0000:5054:00ff:fe12:3456"`); any IPv6 text form is accepted,
/// including `"::ffff:10.0.2.15"`.
///
/// # Errors
/// When the text is not an IPv6 address.
pub fn gid(s: &str) -> Result<Ipv6Addr> {
    let text = strip(s).trim();
    text.parse::<Ipv6Addr>()
        .map_err(|_| ParseError::new("GID", text))
}

/// An empty GID table slot (all zeros).
pub fn gid_is_zero(gid: &Ipv6Addr) -> bool {
    gid.is_unspecified()
}

/// The IPv4 address of an IPv4-mapped GID (`::ffff:a.b.c.d`), the form RoCE uses
/// for IPv4 addresses.
pub fn gid_ipv4(gid: &Ipv6Addr) -> Option<Ipv4Addr> {
    gid.to_ipv4_mapped()
}

/// A link-local GID (`fe80::/10`), e.g. the default GID derived from the MAC.
pub fn gid_is_link_local(gid: &Ipv6Addr) -> bool {
    (gid.segments()[0] & 0xffc0) == 0xfe80
}

/// Parses `gid_attrs/types/<i>`: `"IB/RoCE v1"` and `"RoCE v1"` →
/// [`GidType::RoceV1`], `"RoCE v2"` → [`GidType::RoceV2`]; None for any other
/// name, which the attribute keeps as its text.
///
/// # Errors
/// When the value is empty.
pub fn gid_type(s: &str) -> Result<Option<GidType>> {
    let text = strip(s).trim();
    if text.is_empty() {
        return Err(ParseError::new("GID type", s));
    }
    Ok(GidType::from_name(text))
}

/// Parses a counter file: a decimal number, or a driver's `"N/A ..."` placeholder
/// (`"N/A (no PMA)"`) which becomes [`Counter::Unavailable`].
///
/// # Errors
/// Anything else (empty, negative, words).
pub fn counter(s: &str) -> Result<Counter> {
    let text = strip(s).trim();
    if text.len() >= 3 && text.is_char_boundary(3) && text[..3].eq_ignore_ascii_case("n/a") {
        return Ok(Counter::Unavailable(text.to_string()));
    }
    text.parse::<u64>()
        .map(Counter::Value)
        .map_err(|_| ParseError::new("counter", text))
}

/// Parses an unsigned integer: decimal, or hex with a `0x` prefix.
///
/// # Errors
/// Anything else, or a value above `u64::MAX`.
pub fn u64_value(s: &str) -> Result<u64> {
    let text = strip(s).trim();
    let parsed = match strip_hex_prefix(text) {
        Some(hex) => hex_digits_u64(hex),
        None => digits_only(text).and_then(|d| d.parse::<u64>().ok()),
    };
    parsed.ok_or_else(|| ParseError::new("integer", text))
}

/// As [`u64_value`], for values that must fit 32 bits.
///
/// # Errors
/// Anything [`u64_value`] rejects, or a value above `u32::MAX`.
pub fn u32_value(s: &str) -> Result<u32> {
    let value = u64_value(s)?;
    u32::try_from(value).map_err(|_| ParseError::new("32-bit integer", strip(s).trim()))
}

/// Parses a signed decimal integer (`"-1"` for an unknown netdev speed).
///
/// # Errors
/// Anything else.
pub fn i64_value(s: &str) -> Result<i64> {
    let text = strip(s).trim();
    let digits = text.strip_prefix('-').unwrap_or(text);
    if digits_only(digits).is_none() {
        return Err(ParseError::new("signed integer", text));
    }
    text.parse::<i64>()
        .map_err(|_| ParseError::new("signed integer", text))
}

/// Parses a hex value with or without `0x`: `cap_mask` (`"0x00010000"`), `lid`
/// (`"0x1"`), `pkeys/<i>` (`"0xffff"`).
///
/// # Errors
/// Not hex, or above `u32::MAX`.
pub fn hex_u32(s: &str) -> Result<u32> {
    let text = strip(s).trim();
    let hex = strip_hex_prefix(text).unwrap_or(text);
    hex_digits_u64(hex)
        .and_then(|v| u32::try_from(v).ok())
        .ok_or_else(|| ParseError::new("hex integer", text))
}

/// The provider names of a libibverbs config file (`/etc/libibverbs.d/*.driver`):
/// one `driver <name>` per line; blank lines and `#` comments are skipped. Like
/// libibverbs, other lines are ignored when at least one valid line is present (see
/// [`driver_file_checked`] to get them).
///
/// # Errors
/// When the file has directives but none of them is a valid `driver <name>`.
pub fn driver_file(bytes: &[u8]) -> Result<Vec<String>> {
    let (drivers, bad) = driver_file_checked(bytes);
    match bad.first() {
        Some(first) if drivers.is_empty() => Err(ParseError::new("libibverbs driver file", first)),
        _ => Ok(drivers),
    }
}

/// As [`driver_file`], also returning the lines libibverbs would ignore as bad
/// directives.
pub fn driver_file_checked(bytes: &[u8]) -> (Vec<String>, Vec<String>) {
    let text = lossy(bytes);
    let mut drivers = Vec::new();
    let mut bad = Vec::new();
    for line in text.lines() {
        let line = strip(line).trim_start();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut words = line.split_whitespace();
        match (words.next(), words.next()) {
            (Some("driver"), Some(name)) => drivers.push(name.to_string()),
            _ => bad.push(line.to_string()),
        }
    }
    (drivers, bad)
}

// ---------------------------------------------------------------------------
// helpers

/// `"<code>: <name>"`, or a bare known name.
fn code_and_name(
    s: &str,
    what: &'static str,
    table: &[(u8, &'static str)],
) -> Result<(u8, String)> {
    let text = strip(s).trim();
    let err = || ParseError::new(what, text);
    match text.split_once(':') {
        Some((code, name)) => {
            let code = digits_only(code.trim())
                .and_then(|d| d.parse::<u8>().ok())
                .ok_or_else(err)?;
            let name = name.trim();
            if !name.is_empty() {
                return Ok((code, name.to_string()));
            }
            table
                .iter()
                .find(|(c, _)| *c == code)
                .map(|(c, n)| (*c, (*n).to_string()))
                .ok_or_else(err)
        }
        None => {
            if let Some(code) = digits_only(text).and_then(|d| d.parse::<u8>().ok()) {
                return table
                    .iter()
                    .find(|(c, _)| *c == code)
                    .map(|(c, n)| (*c, (*n).to_string()))
                    .ok_or_else(err);
            }
            table
                .iter()
                .find(|(_, n)| n.eq_ignore_ascii_case(text))
                .map(|(c, n)| (*c, (*n).to_string()))
                .ok_or_else(err)
        }
    }
}

/// `Some(s)` when `s` is one or more ASCII digits.
pub(super) fn digits_only(s: &str) -> Option<&str> {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        Some(s)
    } else {
        None
    }
}

fn strip_hex_prefix(s: &str) -> Option<&str> {
    s.strip_prefix("0x").or_else(|| s.strip_prefix("0X"))
}

/// 1-16 hex digits (after leading zeros) as a u64.
fn hex_digits_u64(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(s, 16).ok()
}

/// A plain decimal number (`"100"`, `"2.5"`, `"53.125"`): digits with at most one
/// dot; no sign, exponent, `inf` or `NaN`.
pub(crate) fn decimal(s: &str) -> Option<f64> {
    let mut dots = 0;
    let mut digits = 0;
    for b in s.bytes() {
        match b {
            b'0'..=b'9' => digits += 1,
            b'.' => dots += 1,
            _ => return None,
        }
    }
    if digits == 0 || dots > 1 {
        return None;
    }
    s.parse::<f64>().ok().filter(|v| v.is_finite())
}

fn is_gbit_unit(unit: &str) -> bool {
    ["Gb/sec", "Gb/s", "Gbps"]
        .iter()
        .any(|u| u.eq_ignore_ascii_case(unit))
}

#[cfg(test)]
mod tests {
    use super::*;

    // --- healthy/ (Soft-RoCE rxe0 on Debian 12, kernel 6.1) ----------------------

    #[test]
    fn healthy_rxe0_port_state_active() {
        let state = port_state("4: ACTIVE\n").unwrap();
        assert_eq!(
            state,
            PortState {
                code: 4,
                name: "ACTIVE".into()
            }
        );
        assert!(state.is_active());
    }

    #[test]
    fn healthy_rxe0_phys_state_link_up() {
        let phys = phys_state("5: LinkUp\n").unwrap();
        assert_eq!(phys.code, 5);
        assert_eq!(phys.name, "LinkUp");
        assert!(phys.is_link_up());
    }

    #[test]
    fn healthy_rxe0_rate_1x_sdr() {
        let r = rate("2.5 Gb/sec (1X SDR)\n").unwrap();
        assert_eq!(r.gbps, 2.5);
        assert_eq!(r.width, Some(1));
        assert_eq!(r.speed.as_deref(), Some("SDR"));
        assert_eq!(r.raw, "2.5 Gb/sec (1X SDR)");
        assert_eq!(r.signaling_gbps(), Some(2.5));
    }

    #[test]
    fn healthy_rxe0_link_layer_ethernet() {
        assert_eq!(link_layer("Ethernet\n").unwrap(), Some(LinkLayer::Ethernet));
    }

    #[test]
    fn healthy_rxe0_node_type_ca() {
        let t = node_type("1: CA\n").unwrap();
        assert_eq!(t.code, 1);
        assert_eq!(t.name, "CA");
        assert!(t.is_ca());
    }

    #[test]
    fn healthy_rxe0_node_guid_from_mac() {
        assert_eq!(
            guid("5054:00ff:fe12:3456\n").unwrap(),
            0x5054_00ff_fe12_3456
        );
    }

    #[test]
    fn healthy_rxe0_gid_table() {
        let g0 = gid("fe80:0000:0000:0000:5054:00ff:fe12:3456\n").unwrap();
        assert!(gid_is_link_local(&g0));
        assert_eq!(gid_ipv4(&g0), None);
        let g1 = gid("0000:0000:0000:0000:0000:ffff:0a00:020f\n").unwrap();
        assert_eq!(gid_ipv4(&g1), Some(Ipv4Addr::new(10, 0, 2, 15)));
        assert!(!gid_is_link_local(&g1));
        let g2 = gid("fec0:0000:0000:0000:5054:00ff:fe12:3456\n").unwrap();
        assert!(!gid_is_link_local(&g2));
        let g3 = gid("0000:0000:0000:0000:0000:0000:0000:0000\n").unwrap();
        assert!(gid_is_zero(&g3));
        assert_eq!(gid("::ffff:10.0.2.15").unwrap(), g1);
    }

    #[test]
    fn healthy_rxe0_gid_types_roce_v2() {
        assert_eq!(gid_type("RoCE v2\n").unwrap(), Some(GidType::RoceV2));
        assert_eq!(gid_type("IB/RoCE v1\n").unwrap(), Some(GidType::RoceV1));
        assert_eq!(gid_type("IB\n").unwrap(), None);
        assert_eq!(gid_type("RoCE v3\n").unwrap(), None);
        assert!(gid_type("\n").is_err());
    }

    #[test]
    fn healthy_rxe0_lid_cap_mask_pkey() {
        assert_eq!(hex_u32("0x0\n").unwrap(), 0);
        assert_eq!(hex_u32("0x00010000\n").unwrap(), 0x0001_0000);
        assert_eq!(hex_u32("0xffff\n").unwrap(), 0xffff);
        assert_eq!(u32_value("0\n").unwrap(), 0); // lid_mask_count
        assert!(hex_u32("0x1ffffffff").is_err());
        assert!(hex_u32("0x").is_err());
    }

    #[test]
    fn healthy_rxe0_hw_counter_lifespan() {
        assert_eq!(counter("12\n").unwrap(), Counter::Value(12));
    }

    #[test]
    fn healthy_rxe0_fw_ver_empty_is_not_a_number() {
        assert!(u64_value("\n").is_err());
    }

    #[test]
    fn healthy_eth0_speed_unknown_is_minus_one() {
        assert_eq!(i64_value("-1\n").unwrap(), -1);
    }

    #[test]
    fn healthy_libibverbs_d_mlx5_driver() {
        assert_eq!(driver_file(b"driver mlx5\n").unwrap(), vec!["mlx5"]);
    }

    #[test]
    fn healthy_libibverbs_d_every_file_names_its_provider() {
        let dir = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/healthy/root/etc/libibverbs.d"
        );
        let entries = std::fs::read_dir(dir).expect("fixtures/ is part of the repository");
        let mut count = 0;
        for entry in entries.flatten() {
            let bytes = std::fs::read(entry.path()).unwrap();
            let names = driver_file(&bytes).unwrap();
            let stem = entry
                .path()
                .file_stem()
                .unwrap()
                .to_string_lossy()
                .into_owned();
            assert_eq!(names, vec![stem]);
            count += 1;
        }
        assert_eq!(count, 17);
    }

    // --- real-nics-procfs/ (prometheus/procfs captures of real HCAs) -------------

    #[test]
    fn real_nics_mlx4_0_rate_4x_qdr() {
        let r = rate("40 Gb/sec (4X QDR)\n").unwrap();
        assert_eq!((r.gbps, r.width), (40.0, Some(4)));
        assert_eq!(r.speed.as_deref(), Some("QDR"));
        assert_eq!(r.signaling_gbps(), Some(40.0));
    }

    #[test]
    fn real_nics_hfi1_0_rate_4x_edr() {
        let r = rate("100 Gb/sec (4X EDR)\n").unwrap();
        assert_eq!((r.gbps, r.width), (100.0, Some(4)));
        assert_eq!(r.speed.as_deref(), Some("EDR"));
        assert_eq!(r.signaling_gbps(), Some(103.125));
    }

    #[test]
    fn real_nics_mlx5_0_rate_1x_edr() {
        let r = rate("25 Gb/sec (1X EDR)\n").unwrap();
        assert_eq!((r.gbps, r.width), (25.0, Some(1)));
        assert_eq!(r.speed.as_deref(), Some("EDR"));
    }

    #[test]
    fn real_nics_mlx5_0_hand_edited_phys_state_is_kept() {
        // procfs' fixture says "4: ACTIVE" in phys_state: not a real phys state name,
        // but it parses, keeps the name, and is not LinkUp.
        let phys = phys_state("4: ACTIVE\n").unwrap();
        assert_eq!(phys.code, 4);
        assert_eq!(phys.name, "ACTIVE");
        assert!(!phys.is_link_up());
    }

    #[test]
    fn real_nics_mlx5_0_node_guid() {
        assert_eq!(
            guid("0a7f:bc12:45ef:d23b\n").unwrap(),
            0x0a7f_bc12_45ef_d23b
        );
    }

    #[test]
    fn real_nics_mlx5_0_counters() {
        assert_eq!(
            counter("2880761508848\n").unwrap(),
            Counter::Value(2_880_761_508_848)
        );
        assert_eq!(
            counter("10907922116\n").unwrap().value(),
            Some(10_907_922_116)
        );
    }

    #[test]
    fn real_nics_link_layer_infiniband() {
        assert_eq!(
            link_layer("InfiniBand\n").unwrap(),
            Some(LinkLayer::InfiniBand)
        );
        assert_eq!(link_layer("Unknown\n").unwrap(), None);
    }

    #[test]
    fn real_nics_fw_ver_is_not_a_counter() {
        assert!(counter("14.28.2006\n").is_err());
        assert!(u64_value("2.31.5050").is_err());
    }

    // --- host-sources.md: values other drivers and kernels print -----------------

    #[test]
    fn counter_without_pma_is_unavailable() {
        assert_eq!(
            counter("N/A (no PMA)\n").unwrap(),
            Counter::Unavailable("N/A (no PMA)".into())
        );
        assert_eq!(counter("N/A (no PMA)").unwrap().value(), None);
        assert!(counter("fw_ver").is_err());
        assert!(counter("-1").is_err());
        assert!(counter("").is_err());
    }

    #[test]
    fn rates_of_every_generation() {
        let cases: [(&str, f64, Option<u8>, Option<&str>); 9] = [
            ("200 Gb/sec (2X HDR)", 200.0, Some(2), Some("HDR")),
            ("400 Gb/sec (4X NDR)", 400.0, Some(4), Some("NDR")),
            ("800 Gb/sec (4X XDR)", 800.0, Some(4), Some("XDR")),
            ("53.125 Gb/sec (1X HDR)", 53.125, Some(1), Some("HDR")),
            ("56 Gb/sec (4X FDR)", 56.0, Some(4), Some("FDR")),
            ("40 Gb/sec (4X FDR10)", 40.0, Some(4), Some("FDR10")),
            ("0 GB/sec", 0.0, None, None),
            ("10 Gb/sec (4X)", 10.0, Some(4), None),
            ("1600 Gb/sec (4X GDR)", 1600.0, Some(4), Some("GDR")),
        ];
        for (text, gbps, width, speed) in cases {
            let r = rate(text).unwrap();
            assert_eq!(r.gbps, gbps, "{text}");
            assert_eq!(r.width, width, "{text}");
            assert_eq!(r.speed.as_deref(), speed, "{text}");
        }
        // An unknown speed has no lane rate, so no signalling rate either.
        assert_eq!(rate("1600 Gb/sec (4X GDR)").unwrap().signaling_gbps(), None);
    }

    #[test]
    fn garbage_rates_are_errors() {
        for text in [
            "",
            "fast",
            "Gb/sec",
            "NaN Gb/sec",
            "inf Gb/sec",
            "-100 Gb/sec (4X EDR)",
            "100 Mb/sec",
            "100 Gb/sec (4X EDR",
            "100 Gb/sec ()",
            "100 Gb/sec (fourX EDR)",
            "100 Gb/sec (999X EDR)",
            "1e3 Gb/sec",
        ] {
            assert!(rate(text).is_err(), "{text:?}");
        }
    }

    #[test]
    fn lane_rates() {
        let lane = |name| {
            rate(&format!("1 Gb/sec (1X {name})"))
                .unwrap()
                .signaling_gbps()
        };
        assert_eq!(lane("SDR"), Some(2.5));
        assert_eq!(lane("DDR"), Some(5.0));
        assert_eq!(lane("QDR"), Some(10.0));
        assert_eq!(lane("FDR10"), Some(10.3125));
        assert_eq!(lane("FDR"), Some(14.0625));
        assert_eq!(lane("EDR"), Some(25.78125));
        assert_eq!(lane("HDR"), Some(53.125));
        assert_eq!(lane("NDR"), Some(106.25));
        assert_eq!(lane("XDR"), Some(212.5));
        assert_eq!(lane("GDR"), None);
    }

    #[test]
    fn port_states_known_unknown_and_garbage() {
        assert_eq!(port_state("1: DOWN").unwrap().code, 1);
        assert!(!port_state("1: DOWN").unwrap().is_active());
        assert!(port_state("5: ACTIVE_DEFER").unwrap().is_active());
        assert_eq!(
            port_state("9: FUTURE").unwrap(),
            PortState {
                code: 9,
                name: "FUTURE".into()
            }
        );
        assert_eq!(port_state("2:").unwrap().name, "INIT");
        assert_eq!(port_state("ARMED").unwrap().code, 3);
        assert!(port_state("9:").is_err());
        assert!(port_state("256: X").is_err());
        assert!(port_state("").is_err());
        assert!(port_state("fw_ver").is_err());
        assert_eq!(PortState::known_name(4), Some("ACTIVE"));
    }

    #[test]
    fn phys_state_with_space_in_name() {
        let p = phys_state("7: Phy Test").unwrap();
        assert_eq!(p.name, "Phy Test");
        assert_eq!(PhysState::known_name(3), Some("Disabled"));
        assert_eq!(phys_state("3: Disabled").unwrap().code, 3);
    }

    #[test]
    fn node_types() {
        assert!(node_type("4: RNIC").unwrap().is_rnic());
        assert_eq!(node_type("2: switch").unwrap().code, 2);
        assert_eq!(node_type("6: usNIC UDP").unwrap().name, "usNIC UDP");
        assert_eq!(node_type("9: <unknown>").unwrap().name, "<unknown>");
    }

    #[test]
    fn guids_in_other_forms() {
        assert_eq!(guid("0x0002c90300a0b1c2").unwrap(), 0x0002_c903_00a0_b1c2);
        assert!(guid("5054:00ff:fe12").is_err());
        assert!(guid("5054:00ff:fe12:3456:0000").is_err());
        assert!(guid("5054:00ff:fe12:34567").is_err());
        assert!(guid("zzzz:00ff:fe12:3456").is_err());
        assert!(guid("").is_err());
    }

    #[test]
    fn integers() {
        assert_eq!(u64_value("0x10").unwrap(), 16);
        assert_eq!(u64_value("18446744073709551615").unwrap(), u64::MAX);
        assert!(u64_value("18446744073709551616").is_err());
        assert!(u64_value("+1").is_err());
        assert!(u32_value("4294967296").is_err());
        assert!(i64_value("--1").is_err());
        assert!(i64_value("+1").is_err());
        assert_eq!(i64_value("42").unwrap(), 42);
    }

    #[test]
    fn driver_files_with_comments_and_bad_lines() {
        let text = b"# comment\n\ndriver mlx4\n  driver mlx5 extra\nbogus line\n";
        assert_eq!(driver_file(text).unwrap(), vec!["mlx4", "mlx5"]);
        let (ok, bad) = driver_file_checked(text);
        assert_eq!(ok.len(), 2);
        assert_eq!(bad, vec!["bogus line"]);
        assert!(driver_file(b"driver\n").is_err());
        assert_eq!(driver_file(b"").unwrap(), Vec::<String>::new());
        assert_eq!(
            driver_file(b"# only a comment\n").unwrap(),
            Vec::<String>::new()
        );
        assert!(driver_file(b"\xff\xfe").is_err());
    }

    #[test]
    fn strip_trailing_noise() {
        assert_eq!(strip("4: ACTIVE\n\0\0 "), "4: ACTIVE");
        assert_eq!(strip("  x"), "  x");
    }
}
