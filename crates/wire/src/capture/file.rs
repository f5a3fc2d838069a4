//! pcap and pcapng container parsing: frames out, never a panic.

use super::CaptureError;

/// The container format of a capture file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CaptureFormat {
    /// libpcap (tcpdump) format.
    Pcap,
    /// pcapng.
    Pcapng,
}

/// One captured frame, borrowed from the file.
#[derive(Debug, Clone, Copy)]
pub struct CapturedFrame<'a> {
    /// 1-based frame number, as tshark counts.
    pub index: usize,
    /// Nanoseconds since the Unix epoch, when the file says.
    pub timestamp_ns: Option<u64>,
    /// Link-layer type (LINKTYPE_*).
    pub link_type: u32,
    /// Captured bytes.
    pub data: &'a [u8],
    /// Original length on the wire.
    pub orig_len: u32,
}

/// Frames of a file plus problems met on the way (a damaged tail is a warning,
/// not an error: the frames before it are still good).
#[derive(Debug, Clone)]
pub struct Frames<'a> {
    /// Container format.
    pub format: CaptureFormat,
    /// The frames, in file order.
    pub frames: Vec<CapturedFrame<'a>>,
    /// Problems met after the file header.
    pub warnings: Vec<String>,
}

#[derive(Clone, Copy)]
enum Endian {
    Little,
    Big,
}

impl Endian {
    fn u16(self, b: &[u8], at: usize) -> Option<u16> {
        let s = b.get(at..at.checked_add(2)?)?;
        let a = [s[0], s[1]];
        Some(match self {
            Endian::Little => u16::from_le_bytes(a),
            Endian::Big => u16::from_be_bytes(a),
        })
    }

    fn u32(self, b: &[u8], at: usize) -> Option<u32> {
        let s = b.get(at..at.checked_add(4)?)?;
        let a = [s[0], s[1], s[2], s[3]];
        Some(match self {
            Endian::Little => u32::from_le_bytes(a),
            Endian::Big => u32::from_be_bytes(a),
        })
    }
}

/// Split a pcap or pcapng file into its frames (any link type).
///
/// # Errors
/// [`CaptureError`] when the file header is not a supported capture header.
pub fn read_frames(bytes: &[u8]) -> Result<Frames<'_>, CaptureError> {
    let magic = bytes.get(..4).ok_or(CaptureError::TooShort)?;
    match magic {
        [0xd4, 0xc3, 0xb2, 0xa1] => read_pcap(bytes, Endian::Little, 1_000),
        [0xa1, 0xb2, 0xc3, 0xd4] => read_pcap(bytes, Endian::Big, 1_000),
        [0x4d, 0x3c, 0xb2, 0xa1] => read_pcap(bytes, Endian::Little, 1),
        [0xa1, 0xb2, 0x3c, 0x4d] => read_pcap(bytes, Endian::Big, 1),
        [0x0a, 0x0d, 0x0d, 0x0a] => read_pcapng(bytes),
        _ => Err(CaptureError::UnknownFormat(u32::from_be_bytes([
            magic[0], magic[1], magic[2], magic[3],
        ]))),
    }
}

const PCAP_HEADER_LEN: usize = 24;
const PCAP_RECORD_LEN: usize = 16;

fn read_pcap(bytes: &[u8], e: Endian, ns_per_frac: u64) -> Result<Frames<'_>, CaptureError> {
    if bytes.len() < PCAP_HEADER_LEN {
        return Err(CaptureError::TooShort);
    }
    let major = e.u16(bytes, 4).ok_or(CaptureError::TooShort)?;
    if major != 2 {
        return Err(CaptureError::UnsupportedVersion(major));
    }
    // The upper bits of the link-type word may carry FCS information.
    let link_type = e.u32(bytes, 20).ok_or(CaptureError::TooShort)? & 0x0fff_ffff;
    let mut out = Frames {
        format: CaptureFormat::Pcap,
        frames: Vec::new(),
        warnings: Vec::new(),
    };
    let mut at = PCAP_HEADER_LEN;
    while at < bytes.len() {
        let rec = (
            e.u32(bytes, at),
            e.u32(bytes, at + 4),
            e.u32(bytes, at + 8),
            e.u32(bytes, at + 12),
        );
        let (Some(sec), Some(frac), Some(incl), Some(orig)) = rec else {
            out.warnings
                .push(format!("truncated record header at byte offset {at}"));
            break;
        };
        let start = at + PCAP_RECORD_LEN;
        let Some(data) = usize::try_from(incl)
            .ok()
            .and_then(|n| bytes.get(start..start.checked_add(n)?))
        else {
            out.warnings.push(format!(
                "record {} at byte offset {at} claims {incl} bytes, file has {}",
                out.frames.len() + 1,
                bytes.len().saturating_sub(start)
            ));
            break;
        };
        let timestamp_ns = u64::from(sec)
            .checked_mul(1_000_000_000)
            .and_then(|s| s.checked_add(u64::from(frac).checked_mul(ns_per_frac)?));
        out.frames.push(CapturedFrame {
            index: out.frames.len() + 1,
            timestamp_ns,
            link_type,
            data,
            orig_len: orig,
        });
        at = start + data.len();
    }
    Ok(out)
}

const SHB: u32 = 0x0a0d_0d0a;
const IDB: u32 = 1;
const OPB: u32 = 2;
const SPB: u32 = 3;
const EPB: u32 = 6;
const BYTE_ORDER_MAGIC: u32 = 0x1a2b_3c4d;

struct Interface {
    link_type: u32,
    /// Nanoseconds per timestamp unit, or units per nanosecond when < 1 (stored
    /// as (numerator, denominator) to stay in integers).
    ts_num: u64,
    ts_den: u64,
}

impl Interface {
    fn timestamp_ns(&self, ts: u64) -> Option<u64> {
        let ns = u128::from(ts) * u128::from(self.ts_num) / u128::from(self.ts_den.max(1));
        u64::try_from(ns).ok()
    }
}

fn read_pcapng(bytes: &[u8]) -> Result<Frames<'_>, CaptureError> {
    let mut out = Frames {
        format: CaptureFormat::Pcapng,
        frames: Vec::new(),
        warnings: Vec::new(),
    };
    let mut endian = Endian::Little;
    let mut interfaces: Vec<Interface> = Vec::new();
    let mut at = 0usize;
    let mut first = true;
    while at < bytes.len() {
        // The SHB decides the byte order of its section, including its own length.
        if bytes.get(at..at + 4) == Some(&[0x0a, 0x0d, 0x0d, 0x0a]) {
            match bytes.get(at + 8..at + 12) {
                Some([0x4d, 0x3c, 0x2b, 0x1a]) => endian = Endian::Little,
                Some([0x1a, 0x2b, 0x3c, 0x4d]) => endian = Endian::Big,
                _ => {
                    if first {
                        return Err(CaptureError::BadHeader("pcapng byte-order magic"));
                    }
                    out.warnings.push(format!(
                        "section header at byte offset {at} has no byte-order magic"
                    ));
                    break;
                }
            }
            interfaces.clear();
        } else if first {
            return Err(CaptureError::BadHeader("pcapng section header"));
        }
        first = false;
        let (Some(block_type), Some(block_len)) =
            (endian.u32(bytes, at), endian.u32(bytes, at + 4))
        else {
            out.warnings
                .push(format!("truncated block header at byte offset {at}"));
            break;
        };
        let block_len = block_len as usize;
        let Some(block) = bytes.get(at..at.saturating_add(block_len)) else {
            out.warnings.push(format!(
                "block at byte offset {at} claims {block_len} bytes, file has {}",
                bytes.len() - at
            ));
            break;
        };
        if block_len < 12 || block_len % 4 != 0 {
            out.warnings.push(format!(
                "block at byte offset {at} has invalid length {block_len}"
            ));
            break;
        }
        let body = &block[8..block_len - 4];
        match block_type {
            SHB if endian.u32(body, 0) != Some(BYTE_ORDER_MAGIC) => {
                out.warnings
                    .push(format!("bad section header at byte offset {at}"));
                break;
            }
            SHB => {}
            IDB => match parse_idb(body, endian) {
                Some(i) => interfaces.push(i),
                None => out.warnings.push(format!(
                    "bad interface description block at byte offset {at}"
                )),
            },
            EPB | OPB => {
                let parsed = if block_type == EPB {
                    parse_epb(body, endian)
                } else {
                    parse_opb(body, endian)
                };
                let Some((iface, ts, data, orig_len)) = parsed else {
                    out.warnings
                        .push(format!("bad packet block at byte offset {at}"));
                    at += block_len;
                    continue;
                };
                let Some(i) = interfaces.get(iface) else {
                    out.warnings.push(format!(
                        "packet block at byte offset {at} names unknown interface {iface}"
                    ));
                    at += block_len;
                    continue;
                };
                out.frames.push(CapturedFrame {
                    index: out.frames.len() + 1,
                    timestamp_ns: i.timestamp_ns(ts),
                    link_type: i.link_type,
                    data,
                    orig_len,
                });
            }
            SPB => {
                let orig_len = endian.u32(body, 0).unwrap_or(0);
                let data = body.get(4..).unwrap_or(&[]);
                let data = &data[..data.len().min(orig_len as usize)];
                match interfaces.first() {
                    Some(i) => out.frames.push(CapturedFrame {
                        index: out.frames.len() + 1,
                        timestamp_ns: None,
                        link_type: i.link_type,
                        data,
                        orig_len,
                    }),
                    None => out.warnings.push(format!(
                        "simple packet block at byte offset {at} before any interface"
                    )),
                }
            }
            // Name resolution, statistics, custom and unknown blocks.
            _ => {}
        }
        at += block_len;
    }
    Ok(out)
}

fn parse_idb(body: &[u8], e: Endian) -> Option<Interface> {
    let link_type = u32::from(e.u16(body, 0)?);
    let mut iface = Interface {
        link_type,
        ts_num: 1_000,
        ts_den: 1,
    };
    // Options: code u16, length u16, value padded to 4.
    let mut at = 8;
    while let (Some(code), Some(len)) = (e.u16(body, at), e.u16(body, at + 2)) {
        let len = usize::from(len);
        let value = body.get(at + 4..at + 4 + len)?;
        match code {
            0 => break,
            9 if len == 1 => {
                let r = value[0];
                let exp = u32::from(r & 0x7f);
                if r & 0x80 == 0 {
                    // 10^-exp seconds per unit.
                    if exp <= 9 {
                        iface.ts_num = 10u64.pow(9 - exp);
                        iface.ts_den = 1;
                    } else if exp <= 19 {
                        iface.ts_num = 1;
                        iface.ts_den = 10u64.pow(exp - 9);
                    }
                } else if exp < 64 {
                    // 2^-exp seconds per unit.
                    iface.ts_num = 1_000_000_000;
                    iface.ts_den = 1u64 << exp;
                }
            }
            _ => {}
        }
        at += 4 + len.div_ceil(4) * 4;
    }
    Some(iface)
}

fn parse_epb(body: &[u8], e: Endian) -> Option<(usize, u64, &[u8], u32)> {
    let iface = e.u32(body, 0)? as usize;
    let ts = (u64::from(e.u32(body, 4)?) << 32) | u64::from(e.u32(body, 8)?);
    let cap = e.u32(body, 12)? as usize;
    let orig = e.u32(body, 16)?;
    let data = body.get(20..20usize.checked_add(cap)?)?;
    Some((iface, ts, data, orig))
}

fn parse_opb(body: &[u8], e: Endian) -> Option<(usize, u64, &[u8], u32)> {
    let iface = usize::from(e.u16(body, 0)?);
    let ts = (u64::from(e.u32(body, 4)?) << 32) | u64::from(e.u32(body, 8)?);
    let cap = e.u32(body, 12)? as usize;
    let orig = e.u32(body, 16)?;
    let data = body.get(20..20usize.checked_add(cap)?)?;
    Some((iface, ts, data, orig))
}
