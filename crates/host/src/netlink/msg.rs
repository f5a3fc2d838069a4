//! Netlink framing: request builder, `nlmsghdr` walk and attribute parser.
//!
//! Pure functions on bytes. Every length is checked before it is used, so any input
//! (truncated, lying lengths, garbage) yields an [`Malformed`] error, never a panic.

use serde::Serialize;

/// `struct nlmsghdr` size.
pub const NLMSG_HDRLEN: usize = 16;
/// `struct nlattr` size.
pub const NLA_HDRLEN: usize = 4;

pub const NLMSG_NOOP: u16 = 1;
pub const NLMSG_ERROR: u16 = 2;
pub const NLMSG_DONE: u16 = 3;

pub const NLM_F_REQUEST: u16 = 0x1;
pub const NLM_F_MULTI: u16 = 0x2;
pub const NLM_F_ACK: u16 = 0x4;
/// NLM_F_ROOT | NLM_F_MATCH.
pub const NLM_F_DUMP: u16 = 0x300;

/// The attribute-type bits that are flags, not the type (NLA_F_NESTED,
/// NLA_F_NET_BYTEORDER).
pub const NLA_TYPE_MASK: u16 = 0x3fff;

/// Why bytes could not be read as netlink messages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
pub enum Malformed {
    /// Fewer bytes than a header needs, or a length pointing past the end.
    #[error("truncated at byte {offset}: need {need} bytes, have {have}")]
    Truncated {
        offset: usize,
        need: usize,
        have: usize,
    },
    /// A length field smaller than its own header.
    #[error("bad length {len} at byte {offset}")]
    BadLength { offset: usize, len: usize },
    /// A known attribute whose payload has the wrong size for its type.
    #[error("attribute {attr} has {len} bytes, expected {expected}")]
    BadAttr {
        attr: u16,
        len: usize,
        expected: &'static str,
    },
    /// A required attribute is missing.
    #[error("attribute {0} missing")]
    Missing(u16),
}

/// One attribute, its type without the flag bits; the payload as sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RawAttr {
    #[serde(rename = "type")]
    pub kind: u16,
    /// NLA_F_NESTED was set.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub nested: bool,
    #[serde(serialize_with = "hex")]
    pub data: Vec<u8>,
}

fn hex<S: serde::Serializer>(d: &[u8], s: S) -> Result<S::Ok, S::Error> {
    let mut out = String::with_capacity(d.len() * 2);
    for b in d {
        out.push_str(&format!("{b:02x}"));
    }
    s.serialize_str(&out)
}

/// What one message is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Body {
    /// A data message: its attributes (not yet parsed).
    Data(Vec<u8>),
    /// NLMSG_ERROR: 0 is an ACK, negative is `-errno`. The echoed request follows.
    Error(i32),
    /// NLMSG_DONE and the dump's status (0, or `-errno` when a dump failed).
    Done(i32),
    /// NLMSG_NOOP or a control type this crate does not use.
    Other,
}

/// One netlink message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Message {
    #[serde(rename = "type")]
    pub kind: u16,
    pub flags: u16,
    pub seq: u32,
    pub port: u32,
    pub body: Body,
}

fn u16_at(b: &[u8], off: usize) -> u16 {
    u16::from_ne_bytes([b[off], b[off + 1]])
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_ne_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

const fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// Splits a buffer (one or many datagrams, concatenated) into messages.
///
/// # Errors
/// A header or a message is cut short, or a length field is smaller than a header.
pub fn parse_messages(buf: &[u8]) -> Result<Vec<Message>, Malformed> {
    let mut out = Vec::new();
    let mut off = 0;
    while off < buf.len() {
        let have = buf.len() - off;
        if have < NLMSG_HDRLEN {
            return Err(Malformed::Truncated {
                offset: off,
                need: NLMSG_HDRLEN,
                have,
            });
        }
        let len = u32_at(buf, off) as usize;
        if len < NLMSG_HDRLEN {
            return Err(Malformed::BadLength { offset: off, len });
        }
        if len > have {
            return Err(Malformed::Truncated {
                offset: off,
                need: len,
                have,
            });
        }
        let kind = u16_at(buf, off + 4);
        let flags = u16_at(buf, off + 6);
        let seq = u32_at(buf, off + 8);
        let port = u32_at(buf, off + 12);
        let payload = &buf[off + NLMSG_HDRLEN..off + len];
        let status = |what_off: usize| -> Result<i32, Malformed> {
            if payload.len() < 4 {
                return Err(Malformed::Truncated {
                    offset: what_off,
                    need: 4,
                    have: payload.len(),
                });
            }
            Ok(u32_at(payload, 0) as i32)
        };
        let body = match kind {
            NLMSG_ERROR => Body::Error(status(off + NLMSG_HDRLEN)?),
            // A DONE without payload (some kernels, some families) means success.
            NLMSG_DONE if payload.is_empty() => Body::Done(0),
            NLMSG_DONE => Body::Done(status(off + NLMSG_HDRLEN)?),
            k if k < 16 => Body::Other,
            _ => Body::Data(payload.to_vec()),
        };
        out.push(Message {
            kind,
            flags,
            seq,
            port,
            body,
        });
        off += align4(len).min(have);
    }
    Ok(out)
}

/// Splits an attribute stream into attributes. Fewer than 4 trailing bytes
/// (alignment left over) are ignored.
///
/// # Errors
/// An attribute's length is smaller than its header or runs past the end.
pub fn parse_attrs(buf: &[u8]) -> Result<Vec<RawAttr>, Malformed> {
    let mut out = Vec::new();
    let mut off = 0;
    while buf.len() - off >= NLA_HDRLEN {
        let len = u16_at(buf, off) as usize;
        let ty = u16_at(buf, off + 2);
        if len < NLA_HDRLEN {
            return Err(Malformed::BadLength { offset: off, len });
        }
        if len > buf.len() - off {
            return Err(Malformed::Truncated {
                offset: off,
                need: len,
                have: buf.len() - off,
            });
        }
        out.push(RawAttr {
            kind: ty & NLA_TYPE_MASK,
            nested: ty & 0x8000 != 0,
            data: buf[off + NLA_HDRLEN..off + len].to_vec(),
        });
        off = (off + align4(len)).min(buf.len());
    }
    Ok(out)
}

impl RawAttr {
    /// The payload as a u8.
    ///
    /// # Errors
    /// The payload is not exactly one byte.
    pub fn u8(&self) -> Result<u8, Malformed> {
        match self.data[..] {
            [b] => Ok(b),
            _ => Err(self.bad("u8")),
        }
    }

    /// The payload as a native-endian u32.
    ///
    /// # Errors
    /// The payload is not exactly four bytes.
    pub fn u32(&self) -> Result<u32, Malformed> {
        match self.data[..] {
            [a, b, c, d] => Ok(u32::from_ne_bytes([a, b, c, d])),
            _ => Err(self.bad("u32")),
        }
    }

    /// The payload as a native-endian u64.
    ///
    /// # Errors
    /// The payload is not exactly eight bytes.
    pub fn u64(&self) -> Result<u64, Malformed> {
        let a: [u8; 8] = self.data[..].try_into().map_err(|_| self.bad("u64"))?;
        Ok(u64::from_ne_bytes(a))
    }

    /// The payload as a NUL-terminated string (a missing terminator is tolerated;
    /// bytes that are not UTF-8 are replaced).
    pub fn string(&self) -> String {
        let end = self
            .data
            .iter()
            .position(|b| *b == 0)
            .unwrap_or(self.data.len());
        String::from_utf8_lossy(&self.data[..end]).into_owned()
    }

    /// The payload parsed as nested attributes.
    ///
    /// # Errors
    /// The payload is not a valid attribute stream.
    pub fn nested(&self) -> Result<Vec<RawAttr>, Malformed> {
        parse_attrs(&self.data)
    }

    fn bad(&self, expected: &'static str) -> Malformed {
        Malformed::BadAttr {
            attr: self.kind,
            len: self.data.len(),
            expected,
        }
    }
}

/// Builds one request: header + attributes, each padded to 4 bytes.
#[derive(Debug, Clone)]
pub struct Request {
    buf: Vec<u8>,
}

impl Request {
    /// A request of `kind` with `flags`, sequence `seq` and port id 0.
    pub fn new(kind: u16, flags: u16, seq: u32) -> Request {
        let mut buf = Vec::with_capacity(64);
        buf.extend_from_slice(&(NLMSG_HDRLEN as u32).to_ne_bytes());
        buf.extend_from_slice(&kind.to_ne_bytes());
        buf.extend_from_slice(&flags.to_ne_bytes());
        buf.extend_from_slice(&seq.to_ne_bytes());
        buf.extend_from_slice(&0u32.to_ne_bytes());
        Request { buf }
    }

    /// Appends a family's fixed header (`struct dcbmsg`, `struct ifinfomsg`),
    /// padded to 4 bytes: before any attribute.
    pub fn family_header(mut self, header: &[u8]) -> Request {
        self.buf.extend_from_slice(header);
        self.buf.resize(align4(self.buf.len()), 0);
        self
    }

    /// Appends an attribute with a raw payload.
    pub fn attr(mut self, kind: u16, payload: &[u8]) -> Request {
        let len = (NLA_HDRLEN + payload.len()) as u16;
        self.buf.extend_from_slice(&len.to_ne_bytes());
        self.buf.extend_from_slice(&kind.to_ne_bytes());
        self.buf.extend_from_slice(payload);
        self.buf.resize(align4(self.buf.len()), 0);
        self
    }

    pub fn u32(self, kind: u16, v: u32) -> Request {
        self.attr(kind, &v.to_ne_bytes())
    }

    /// A NUL-terminated string attribute.
    pub fn string(self, kind: u16, s: &str) -> Request {
        let mut p = s.as_bytes().to_vec();
        p.push(0);
        self.attr(kind, &p)
    }

    /// The request bytes, with `nlmsg_len` filled in.
    pub fn build(mut self) -> Vec<u8> {
        let len = (self.buf.len() as u32).to_ne_bytes();
        self.buf[..4].copy_from_slice(&len);
        self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// fixtures/healthy/netlink/op17-stat-get.req.bin: STAT_GET of rxe0 port 1.
    static STAT_REQ: [u8; 32] = [
        0x20, 0, 0, 0, 0x11, 0x14, 0x05, 0, 0xf9, 0x03, 0, 0, 0, 0, 0, 0, 8, 0, 1, 0, 0, 0, 0, 0,
        8, 0, 3, 0, 1, 0, 0, 0,
    ];

    /// The first 24 bytes of healthy/netlink/op1-get.bin (header + DEV_INDEX 0) and
    /// its NLMSG_DONE, with the message length patched to 24.
    static DEV_REPLY: [u8; 44] = [
        24, 0, 0, 0, 0x01, 0x14, 0x02, 0, 0xe9, 0x03, 0, 0, 0, 0, 0, 0, 8, 0, 1, 0, 0, 0, 0, 0, 20,
        0, 0, 0, 3, 0, 2, 0, 0xe9, 0x03, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];

    #[test]
    fn deconstruct_stat_request() {
        let m = parse_messages(&STAT_REQ).unwrap();
        assert_eq!(m.len(), 1);
        assert_eq!((m[0].kind, m[0].flags, m[0].seq), (0x1411, 0x5, 1017));
        let Body::Data(p) = &m[0].body else { panic!() };
        let a = parse_attrs(p).unwrap();
        assert_eq!((a[0].kind, a[0].u32().unwrap()), (1, 0));
        assert_eq!((a[1].kind, a[1].u32().unwrap()), (3, 1));
    }

    #[test]
    fn construct_stat_request() {
        let r = Request::new(0x1411, NLM_F_REQUEST | NLM_F_ACK, 1017)
            .u32(1, 0)
            .u32(3, 1)
            .build();
        assert_eq!(r, STAT_REQ);
    }

    #[test]
    fn parse_dev_reply_and_done() {
        let m = parse_messages(&DEV_REPLY).unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].flags, NLM_F_MULTI);
        assert_eq!(m[1].body, Body::Done(0));
    }

    #[test]
    fn string_attribute_is_padded_and_terminated() {
        // CHARDEV_TYPE "uverbs": nla_len 11, padded to 12 (op15-get-chardev.req.bin).
        let r = Request::new(0x140f, 5, 1015).string(69, "uverbs").build();
        assert_eq!(&r[16..], b"\x0b\x00\x45\x00uverbs\x00\x00");
        let a = parse_attrs(&r[16..]).unwrap();
        assert_eq!(a[0].string(), "uverbs");
    }

    #[test]
    fn lying_lengths() {
        let mut b = DEV_REPLY;
        b[0] = 8; // shorter than a header
        assert_eq!(
            parse_messages(&b),
            Err(Malformed::BadLength { offset: 0, len: 8 })
        );
        assert!(matches!(
            parse_messages(&DEV_REPLY[..30]),
            Err(Malformed::Truncated { offset: 24, .. })
        ));
        assert_eq!(
            parse_attrs(&[2, 0, 1, 0]),
            Err(Malformed::BadLength { offset: 0, len: 2 })
        );
        // Fewer than 4 trailing bytes are alignment, not an attribute.
        assert_eq!(parse_attrs(&[0, 0]).unwrap(), vec![]);
    }
}
