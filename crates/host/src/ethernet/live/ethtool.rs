//! ethtool's answers through the SIOCETHTOOL ioctl, and the text ethtool
//! prints for them.
//!
//! The `render_*` functions are pure (struct → text) and define the formats
//! the capture files hold; the `read_*` functions ask the running kernel
//! (GET commands only) in the calling thread's network namespace.

use super::ioctl::{Ethtool, GuardedBuf};
use crate::source::Errno;

// The commands (linux/ethtool.h). Only GETs.
const ETHTOOL_GSET: u32 = 0x01;
const ETHTOOL_GDRVINFO: u32 = 0x03;
const ETHTOOL_GPAUSEPARAM: u32 = 0x12;
const ETHTOOL_GSTRINGS: u32 = 0x1b;
const ETHTOOL_GSTATS: u32 = 0x1d;
const ETHTOOL_GSSET_INFO: u32 = 0x37;
const ETHTOOL_GMODULEINFO: u32 = 0x42;
const ETHTOOL_GMODULEEEPROM: u32 = 0x43;
const ETHTOOL_GFECPARAM: u32 = 0x50;

const ETH_SS_STATS: u32 = 1;
/// Bytes per name in a string set.
pub const ETH_GSTRING_LEN: usize = 32;
/// The most statistics read of one netdev (mlx5 with many channels has a
/// few thousand).
pub const MAX_STATS: usize = 65_536;

/// `ethtool_fecparam` bits.
pub const ETHTOOL_FEC_NONE: u32 = 1 << 0;
pub const ETHTOOL_FEC_AUTO: u32 = 1 << 1;
pub const ETHTOOL_FEC_OFF: u32 = 1 << 2;
pub const ETHTOOL_FEC_RS: u32 = 1 << 3;
pub const ETHTOOL_FEC_BASER: u32 = 1 << 4;
pub const ETHTOOL_FEC_LLRS: u32 = 1 << 5;

/// `ethtool_cmd.advertising` bits for pause.
const ADVERTISED_PAUSE: u32 = 1 << 13;
const ADVERTISED_ASYM_PAUSE: u32 = 1 << 14;

/// `ethtool_modinfo.type`: the standard the module's memory map follows.
pub const ETH_MODULE_SFF_8079: u32 = 1;
pub const ETH_MODULE_SFF_8472: u32 = 2;
pub const ETH_MODULE_SFF_8636: u32 = 3;
pub const ETH_MODULE_SFF_8436: u32 = 4;
/// The most EEPROM bytes read when the type is not one of those.
pub const MAX_MODULE_EEPROM: usize = 4096;

/// How often a count that changed under us is asked again.
const ATTEMPTS: usize = 3;

/// One driver statistic: its name as the driver gives it (at most 32 bytes,
/// up to the first NUL) and its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    pub name: Vec<u8>,
    pub value: u64,
}

/// `ethtool -S IF`:
///
/// ```text
/// NIC statistics:
///      peer_ifindex: 7
///      rx_queue_0_xdp_packets: 0
/// ```
///
/// A first line `NIC statistics:`, then one line per statistic in the
/// driver's order: five spaces, the name (bytes as the driver gives them,
/// at most 32, which may repeat), `": "`, the value in decimal (u64).
pub fn render_stats(stats: &[Stat]) -> Vec<u8> {
    let mut out = b"NIC statistics:\n".to_vec();
    for s in stats {
        out.extend_from_slice(b"     ");
        out.extend_from_slice(&s.name);
        out.extend_from_slice(format!(": {}\n", s.value).as_bytes());
    }
    out
}

/// Global pause settings (`struct ethtool_pauseparam`), with what was
/// negotiated when autonegotiation is on and the link partner advertised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pause {
    pub autoneg: bool,
    pub rx: bool,
    pub tx: bool,
    /// (RX, TX) as negotiated (IEEE 802.3 table 28B-3).
    pub negotiated: Option<(bool, bool)>,
}

/// `ethtool -a IF`, as ethtool 5.8 and later print it (over netlink; `\t` is
/// a tab):
///
/// ```text
/// Pause parameters for eth0:
/// Autonegotiate:\ton
/// RX:\t\ton
/// TX:\t\ton
/// RX negotiated: on
/// TX negotiated: on
///
/// ```
///
/// `Autonegotiate:` and a tab, `RX:`/`TX:` and two tabs, each `on` or
/// `off`; the two `negotiated` lines only when autonegotiation is on and
/// the link partner advertised something; then an empty line. (The ioctl
/// ethtool before 5.8 prints a tab instead of the space after
/// `negotiated:`.)
pub fn render_pause(ifname: &str, p: &Pause) -> Vec<u8> {
    let on = |b: bool| if b { "on" } else { "off" };
    let mut s = format!(
        "Pause parameters for {ifname}:\nAutonegotiate:\t{}\nRX:\t\t{}\nTX:\t\t{}\n",
        on(p.autoneg),
        on(p.rx),
        on(p.tx)
    );
    if let Some((rx, tx)) = p.negotiated {
        s.push_str(&format!(
            "RX negotiated: {}\nTX negotiated: {}\n",
            on(rx),
            on(tx)
        ));
    }
    s.push('\n');
    s.into_bytes()
}

/// What pause autonegotiation resolved to, from our and the link partner's
/// advertised modes (`ethtool_cmd.advertising`, `lp_advertising`); None
/// when the partner advertised nothing.
pub fn negotiated_pause(advertising: u32, lp_advertising: u32) -> Option<(bool, bool)> {
    if lp_advertising == 0 {
        return None;
    }
    let both = advertising & lp_advertising;
    Some(if both & ADVERTISED_PAUSE != 0 {
        (true, true)
    } else if both & ADVERTISED_ASYM_PAUSE != 0 {
        if advertising & ADVERTISED_PAUSE != 0 {
            (true, false)
        } else if lp_advertising & ADVERTISED_PAUSE != 0 {
            (false, true)
        } else {
            (false, false)
        }
    } else {
        (false, false)
    })
}

/// FEC settings (`struct ethtool_fecparam`): bitmaps of `ETHTOOL_FEC_*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fec {
    /// Supported or configured modes (`fec`).
    pub configured: u32,
    /// The mode in use (`active_fec`).
    pub active: u32,
}

/// The FEC modes ethtool names, in the order of their link-mode bits
/// (FEC_NONE 49 = "Off", FEC_RS 50, FEC_BASER 51, FEC_LLRS 74).
const FEC_NAMES: [(u32, &str); 4] = [
    (ETHTOOL_FEC_OFF, "Off"),
    (ETHTOOL_FEC_RS, "RS"),
    (ETHTOOL_FEC_BASER, "BaseR"),
    (ETHTOOL_FEC_LLRS, "LLRS"),
];

/// `ethtool --show-fec IF`, as ethtool 5.13 and later print it (over
/// netlink, from the same driver answer):
///
/// ```text
/// FEC parameters for eth0:
/// Supported/Configured FEC encodings: Auto RS BaseR
/// Active FEC encoding: RS
/// ```
///
/// Each list is its modes after a space each: `Auto` first when set, then
/// `Off`, `RS`, `BaseR`, `LLRS`; an empty list is `None`. The active
/// encoding is one word (the first of `Off RS BaseR LLRS` set), `None`
/// when none is. (The ioctl ethtool before 5.13 lists `None Auto Off BaseR
/// RS LLRS` in that order, `None` meaning "not supported", and prints
/// nothing for an empty list. Before 5.18 both begin the second line
/// `Configured FEC encodings:`.)
pub fn render_fec(ifname: &str, f: &Fec) -> Vec<u8> {
    let mut s = format!("FEC parameters for {ifname}:\nSupported/Configured FEC encodings:");
    let mut empty = true;
    if f.configured & ETHTOOL_FEC_AUTO != 0 {
        s.push_str(" Auto");
        empty = false;
    }
    for (bit, name) in FEC_NAMES {
        if f.configured & bit != 0 {
            s.push(' ');
            s.push_str(name);
            empty = false;
        }
    }
    if empty {
        s.push_str(" None");
    }
    s.push_str("\nActive FEC encoding:");
    match FEC_NAMES.iter().find(|(bit, _)| f.active & bit != 0) {
        Some((_, name)) => {
            s.push(' ');
            s.push_str(name);
        }
        None => s.push_str(" None"),
    }
    s.push('\n');
    s.into_bytes()
}

/// `ethtool -m IF hex on` (the legacy flat EEPROM, offset 0; `\t` is a tab):
///
/// ```text
/// Offset\t\tValues
/// ------\t\t------
/// 0x0000:\t\t0d 00 02 00 00 00 00 00 00 00 00 00 00 00 00 00
/// 0x0010:\t\t00 00 00 00 00 00 27 71 00 00 80 0e 00 00 00 00
/// ```
///
/// Two header lines (words separated by two tabs), then 16 bytes a line:
/// the offset as `0x` and four hex digits, `:`, two tabs, each byte as two
/// lowercase hex digits followed by a space (so every data line ends in a
/// space). Only the last line may hold fewer than 16 bytes. With no bytes
/// the second header line is the last.
pub fn render_module(data: &[u8]) -> Vec<u8> {
    let mut s = String::with_capacity(40 + data.len() * 4);
    s.push_str("Offset\t\tValues\n------\t\t------");
    for (i, b) in data.iter().enumerate() {
        if i % 16 == 0 {
            s.push_str(&format!("\n0x{i:04x}:\t\t"));
        }
        s.push_str(&format!("{b:02x} "));
    }
    s.push('\n');
    s.into_bytes()
}

/// The most bytes of module EEPROM read for a module of type `kind` that
/// says it has `eeprom_len`: SFF-8079 256, SFF-8472 512 (A0h and A2h),
/// SFF-8636/8436 640 (lower page and upper pages 0-3), anything else at
/// most [`MAX_MODULE_EEPROM`].
pub fn module_read_len(kind: u32, eeprom_len: u32) -> usize {
    let cap = match kind {
        ETH_MODULE_SFF_8079 => 256,
        ETH_MODULE_SFF_8472 => 512,
        ETH_MODULE_SFF_8636 | ETH_MODULE_SFF_8436 => 640,
        _ => MAX_MODULE_EEPROM,
    };
    (eeprom_len as usize).min(cap)
}

// ---- Asking the kernel -----------------------------------------------------

fn u32_at(b: &[u8], off: usize) -> u32 {
    b.get(off..off + 4)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u32::from_ne_bytes)
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    b.get(off..off + 8)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u64::from_ne_bytes)
}

fn put_u32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_ne_bytes());
}

/// A fixed-size GET: `len` bytes with `cmd` first; the answer's bytes.
fn get_fixed(sock: &Ethtool, cmd: u32, len: usize) -> Result<Vec<u8>, Errno> {
    let mut buf = GuardedBuf::new(len)?;
    put_u32(buf.bytes_mut(), 0, cmd);
    sock.call(&mut buf)?;
    Ok(buf.bytes().to_vec())
}

/// The driver's statistics, as `ethtool -S` reads them.
///
/// # Errors
/// The kernel's errno (EOPNOTSUPP for a driver without statistics, also when
/// it has none); EFBIG over [`MAX_STATS`]; EAGAIN when the count kept
/// changing between the questions.
pub fn read_stats(ifname: &str) -> Result<Vec<Stat>, Errno> {
    let sock = Ethtool::open(ifname)?;
    for _ in 0..ATTEMPTS {
        let n = stats_count(&sock)?;
        if n == 0 {
            // ethtool: "no stats available".
            return Err(Errno::EOPNOTSUPP);
        }
        if n > MAX_STATS {
            return Err(Errno::EFBIG);
        }
        let Some(names) = stat_names(&sock, n)? else {
            continue;
        };
        let Some(values) = stat_values(&sock, n)? else {
            continue;
        };
        return Ok(names
            .into_iter()
            .zip(values)
            .map(|(name, value)| Stat { name, value })
            .collect());
    }
    Err(Errno::EAGAIN)
}

/// ETHTOOL_GSSET_INFO for ETH_SS_STATS; ETHTOOL_GDRVINFO's `n_stats` on a
/// kernel without it (as ethtool does).
fn stats_count(sock: &Ethtool) -> Result<usize, Errno> {
    // struct ethtool_sset_info { u32 cmd; u32 reserved; u64 sset_mask; u32 data[]; }
    let mut buf = GuardedBuf::new(24)?;
    let b = buf.bytes_mut();
    put_u32(b, 0, ETHTOOL_GSSET_INFO);
    b[8..16].copy_from_slice(&(1u64 << ETH_SS_STATS).to_ne_bytes());
    match sock.call(&mut buf) {
        Ok(()) => {
            let b = buf.bytes();
            Ok(if u64_at(b, 8) != 0 {
                u32_at(b, 16) as usize
            } else {
                0
            })
        }
        Err(Errno::EOPNOTSUPP) => {
            // struct ethtool_drvinfo: n_stats at 180 of 196 bytes.
            let d = get_fixed(sock, ETHTOOL_GDRVINFO, 196)?;
            Ok(u32_at(&d, 180) as usize)
        }
        Err(e) => Err(e),
    }
}

/// The `n` names of ETH_SS_STATS, or None when the driver's count is no
/// longer `n`.
fn stat_names(sock: &Ethtool, n: usize) -> Result<Option<Vec<Vec<u8>>>, Errno> {
    // struct ethtool_gstrings { u32 cmd; u32 string_set; u32 len; u8 data[]; }
    let mut buf = GuardedBuf::new(12 + n * ETH_GSTRING_LEN)?;
    let b = buf.bytes_mut();
    put_u32(b, 0, ETHTOOL_GSTRINGS);
    put_u32(b, 4, ETH_SS_STATS);
    put_u32(b, 8, n as u32);
    match sock.call(&mut buf) {
        Ok(()) => {}
        Err(e) if e.0 == libc::EFAULT => return Ok(None),
        Err(e) => return Err(e),
    }
    let b = buf.bytes();
    if u32_at(b, 8) as usize != n {
        return Ok(None);
    }
    Ok(Some(
        b[12..]
            .chunks_exact(ETH_GSTRING_LEN)
            .map(|s| {
                let end = s.iter().position(|c| *c == 0).unwrap_or(s.len());
                s[..end].to_vec()
            })
            .collect(),
    ))
}

/// The `n` values of ETH_SS_STATS, or None when the driver's count is no
/// longer `n`.
fn stat_values(sock: &Ethtool, n: usize) -> Result<Option<Vec<u64>>, Errno> {
    // struct ethtool_stats { u32 cmd; u32 n_stats; u64 data[]; }
    let mut buf = GuardedBuf::new(8 + n * 8)?;
    let b = buf.bytes_mut();
    put_u32(b, 0, ETHTOOL_GSTATS);
    put_u32(b, 4, n as u32);
    match sock.call(&mut buf) {
        Ok(()) => {}
        Err(e) if e.0 == libc::EFAULT => return Ok(None),
        Err(e) => return Err(e),
    }
    let b = buf.bytes();
    if u32_at(b, 4) as usize != n {
        return Ok(None);
    }
    Ok(Some(b[8..].chunks_exact(8).map(|v| u64_at(v, 0)).collect()))
}

/// Global pause settings, as `ethtool -a` reads them.
///
/// # Errors
/// The kernel's errno for ETHTOOL_GPAUSEPARAM. When autonegotiation is on
/// and the link settings cannot be read, the answer has no negotiated lines.
pub fn read_pause(ifname: &str) -> Result<Pause, Errno> {
    let sock = Ethtool::open(ifname)?;
    // struct ethtool_pauseparam { u32 cmd, autoneg, rx_pause, tx_pause; }
    let b = get_fixed(&sock, ETHTOOL_GPAUSEPARAM, 16)?;
    let autoneg = u32_at(&b, 4) != 0;
    let negotiated = if autoneg {
        // struct ethtool_cmd (44 bytes): advertising at 8, lp_advertising at 32.
        get_fixed(&sock, ETHTOOL_GSET, 44)
            .ok()
            .and_then(|c| negotiated_pause(u32_at(&c, 8), u32_at(&c, 32)))
    } else {
        None
    };
    Ok(Pause {
        autoneg,
        rx: u32_at(&b, 8) != 0,
        tx: u32_at(&b, 12) != 0,
        negotiated,
    })
}

/// FEC settings, as `ethtool --show-fec` reads them.
///
/// # Errors
/// The kernel's errno for ETHTOOL_GFECPARAM.
pub fn read_fec(ifname: &str) -> Result<Fec, Errno> {
    let sock = Ethtool::open(ifname)?;
    // struct ethtool_fecparam { u32 cmd, active_fec, fec, reserved; }
    let b = get_fixed(&sock, ETHTOOL_GFECPARAM, 16)?;
    Ok(Fec {
        active: u32_at(&b, 4),
        configured: u32_at(&b, 8),
    })
}

/// The module EEPROM from offset 0, at most [`module_read_len`] bytes, as
/// `ethtool -m IF hex on` reads it.
///
/// # Errors
/// The kernel's errno for ETHTOOL_GMODULEINFO or ETHTOOL_GMODULEEEPROM
/// (EOPNOTSUPP: no module support; EIO and others: no module plugged in).
pub fn read_module(ifname: &str) -> Result<Vec<u8>, Errno> {
    let sock = Ethtool::open(ifname)?;
    // struct ethtool_modinfo { u32 cmd, type, eeprom_len, reserved[8]; }
    let info = get_fixed(&sock, ETHTOOL_GMODULEINFO, 44)?;
    let len = module_read_len(u32_at(&info, 4), u32_at(&info, 8));
    // struct ethtool_eeprom { u32 cmd, magic, offset, len; u8 data[]; }
    let mut buf = GuardedBuf::new(16 + len)?;
    let b = buf.bytes_mut();
    put_u32(b, 0, ETHTOOL_GMODULEEEPROM);
    put_u32(b, 12, len as u32);
    sock.call(&mut buf)?;
    let b = buf.bytes();
    let got = (u32_at(b, 12) as usize).min(len);
    Ok(b[16..16 + got].to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(b: Vec<u8>) -> String {
        String::from_utf8(b).unwrap()
    }

    #[test]
    fn stats_are_five_spaces_name_colon_value() {
        let s = [
            Stat {
                name: b"peer_ifindex".to_vec(),
                value: 7,
            },
            Stat {
                name: b"rx_prio3_pause".to_vec(),
                value: u64::MAX,
            },
        ];
        assert_eq!(
            text(render_stats(&s)),
            "NIC statistics:\n     peer_ifindex: 7\n     rx_prio3_pause: 18446744073709551615\n"
        );
        assert_eq!(text(render_stats(&[])), "NIC statistics:\n");
    }

    #[test]
    fn pause_lines_have_ethtools_tabs_and_end_in_an_empty_line() {
        let p = Pause {
            autoneg: false,
            rx: true,
            tx: false,
            negotiated: None,
        };
        assert_eq!(
            text(render_pause("ens1f0np0", &p)),
            "Pause parameters for ens1f0np0:\nAutonegotiate:\toff\nRX:\t\ton\nTX:\t\toff\n\n"
        );
        let p = Pause {
            autoneg: true,
            negotiated: Some((true, false)),
            ..p
        };
        assert_eq!(
            text(render_pause("eth0", &p)),
            "Pause parameters for eth0:\nAutonegotiate:\ton\nRX:\t\ton\nTX:\t\toff\n\
             RX negotiated: on\nTX negotiated: off\n\n"
        );
    }

    #[test]
    fn negotiated_pause_follows_table_28b_3() {
        let (p, a) = (ADVERTISED_PAUSE, ADVERTISED_ASYM_PAUSE);
        assert_eq!(negotiated_pause(p, 0), None);
        assert_eq!(negotiated_pause(p | a, p), Some((true, true)));
        assert_eq!(negotiated_pause(p | a, a), Some((true, false)));
        assert_eq!(negotiated_pause(a, p | a), Some((false, true)));
        assert_eq!(negotiated_pause(a, a), Some((false, false)));
        assert_eq!(negotiated_pause(0, 1), Some((false, false)));
    }

    #[test]
    fn fec_names_and_order_are_ethtools() {
        let f = Fec {
            configured: ETHTOOL_FEC_AUTO | ETHTOOL_FEC_BASER | ETHTOOL_FEC_RS | ETHTOOL_FEC_OFF,
            active: ETHTOOL_FEC_RS,
        };
        assert_eq!(
            text(render_fec("eth0", &f)),
            "FEC parameters for eth0:\nSupported/Configured FEC encodings: Auto Off RS BaseR\n\
             Active FEC encoding: RS\n"
        );
        // NONE ("not supported" in the ioctl) is no mode; nothing active is None.
        let f = Fec {
            configured: ETHTOOL_FEC_NONE,
            active: 0,
        };
        assert_eq!(
            text(render_fec("eth1", &f)),
            "FEC parameters for eth1:\nSupported/Configured FEC encodings: None\n\
             Active FEC encoding: None\n"
        );
        let f = Fec {
            configured: ETHTOOL_FEC_LLRS,
            active: ETHTOOL_FEC_AUTO | ETHTOOL_FEC_LLRS,
        };
        assert!(text(render_fec("e", &f)).ends_with("encodings: LLRS\nActive FEC encoding: LLRS\n"));
    }

    /// The first bytes of the QSFP+ dump in the reference (an mlx4 host's
    /// page 0: identifier 0x0d, temperature 27 71 at 0x16).
    #[test]
    fn module_hex_dump_is_ethtools_dump_hex() {
        let mut d = vec![0u8; 0x1c];
        d[..4].copy_from_slice(&[0x0d, 0x00, 0x02, 0x00]);
        d[0x16] = 0x27;
        d[0x17] = 0x71;
        d[0x1a] = 0x80;
        d[0x1b] = 0x0e;
        assert_eq!(
            text(render_module(&d)),
            "Offset\t\tValues\n------\t\t------\n\
             0x0000:\t\t0d 00 02 00 00 00 00 00 00 00 00 00 00 00 00 00 \n\
             0x0010:\t\t00 00 00 00 00 00 27 71 00 00 80 0e \n"
        );
        assert_eq!(
            text(render_module(&[])),
            "Offset\t\tValues\n------\t\t------\n"
        );
        let big = vec![0xa5u8; 640];
        let t = text(render_module(&big));
        assert_eq!(t.lines().count(), 2 + 40);
        assert!(t.contains("\n0x0270:\t\ta5 "));
    }

    #[test]
    fn module_length_is_bounded_by_its_standard() {
        assert_eq!(module_read_len(ETH_MODULE_SFF_8636, 640), 640);
        assert_eq!(module_read_len(ETH_MODULE_SFF_8636, 256), 256);
        assert_eq!(module_read_len(ETH_MODULE_SFF_8436, 100_000), 640);
        assert_eq!(module_read_len(ETH_MODULE_SFF_8472, 640), 512);
        assert_eq!(module_read_len(ETH_MODULE_SFF_8079, 512), 256);
        assert_eq!(module_read_len(0x7f, u32::MAX), MAX_MODULE_EEPROM);
    }
}
