//! The transport packets the engine consumes and produces: BTH, extension
//! headers and payload (plus pad), without the IP/UDP encapsulation and
//! without the ICRC. The ICRC covers the IP and UDP headers, which the engine
//! never sees, so the caller (the UDP driver or the simulator) computes and
//! checks it; see `NEEDS-FROM-WIRE.md` for the plan to use `rdmakit-wire`'s
//! Reprs here once they exist.
//!
//! [`Packet::parse`] never panics: any truncation, unknown opcode, reserved
//! transport version or inconsistent pad count is an `Err`.

use crate::psn::Psn;

/// BTH length.
pub const BTH_LEN: usize = 12;

/// What a packet does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// SEND (any position / variant).
    Send,
    /// RDMA WRITE.
    Write,
    /// RDMA READ request.
    ReadReq,
    /// RDMA READ response.
    ReadResp,
    /// ACKNOWLEDGE (ACK, RNR NAK, NAK).
    Ack,
    /// ATOMIC ACKNOWLEDGE.
    AtomicAck,
    /// COMPARE_SWAP request.
    CmpSwap,
    /// FETCH_ADD request.
    FetchAdd,
}

/// Position of a packet in its message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pos {
    /// First of several.
    First,
    /// Neither first nor last.
    Middle,
    /// Last of several.
    Last,
    /// The whole message.
    Only,
}

impl Pos {
    /// Starts a message.
    pub const fn starts(self) -> bool {
        matches!(self, Pos::First | Pos::Only)
    }
    /// Ends a message.
    pub const fn ends(self) -> bool {
        matches!(self, Pos::Last | Pos::Only)
    }
}

/// Transport service encoded in the top 3 bits of the opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transport {
    /// 0x00
    Rc,
    /// 0x20
    Uc,
    /// 0x60
    Ud,
}

/// Static facts about one opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpInfo {
    /// Transport.
    pub transport: Transport,
    /// Operation.
    pub kind: Kind,
    /// Position in the message.
    pub pos: Pos,
    /// RETH follows.
    pub reth: bool,
    /// AtomicETH follows.
    pub atomic_eth: bool,
    /// AETH follows.
    pub aeth: bool,
    /// AtomicAckETH follows.
    pub atomic_ack_eth: bool,
    /// ImmDt follows.
    pub imm: bool,
    /// IETH follows.
    pub ieth: bool,
    /// DETH follows.
    pub deth: bool,
    /// Carries payload.
    pub payload: bool,
}

const fn op(transport: Transport, kind: Kind, pos: Pos) -> OpInfo {
    OpInfo {
        transport,
        kind,
        pos,
        reth: false,
        atomic_eth: false,
        aeth: false,
        atomic_ack_eth: false,
        imm: false,
        ieth: false,
        deth: false,
        payload: matches!(kind, Kind::Send | Kind::Write | Kind::ReadResp),
    }
}

/// Looks up an opcode; `None` for opcodes this engine does not speak
/// (RD, XRC, CNP, reserved).
pub fn opinfo(opcode: u8) -> Option<OpInfo> {
    use Kind::*;
    use Pos::*;
    let (t, base) = match opcode >> 5 {
        0 => (Transport::Rc, opcode),
        1 => (Transport::Uc, opcode & 0x1f),
        3 => (Transport::Ud, opcode & 0x1f),
        _ => return None,
    };
    let mut i = match base {
        0x00 => op(t, Send, First),
        0x01 => op(t, Send, Middle),
        0x02 => op(t, Send, Last),
        0x03 => OpInfo {
            imm: true,
            ..op(t, Send, Last)
        },
        0x04 => op(t, Send, Only),
        0x05 => OpInfo {
            imm: true,
            ..op(t, Send, Only)
        },
        0x06 => OpInfo {
            reth: true,
            ..op(t, Write, First)
        },
        0x07 => op(t, Write, Middle),
        0x08 => op(t, Write, Last),
        0x09 => OpInfo {
            imm: true,
            ..op(t, Write, Last)
        },
        0x0a => OpInfo {
            reth: true,
            ..op(t, Write, Only)
        },
        0x0b => OpInfo {
            reth: true,
            imm: true,
            ..op(t, Write, Only)
        },
        0x0c => OpInfo {
            reth: true,
            ..op(t, ReadReq, Only)
        },
        0x0d => OpInfo {
            aeth: true,
            ..op(t, ReadResp, First)
        },
        0x0e => op(t, ReadResp, Middle),
        0x0f => OpInfo {
            aeth: true,
            ..op(t, ReadResp, Last)
        },
        0x10 => OpInfo {
            aeth: true,
            ..op(t, ReadResp, Only)
        },
        0x11 => OpInfo {
            aeth: true,
            ..op(t, Ack, Only)
        },
        0x12 => OpInfo {
            aeth: true,
            atomic_ack_eth: true,
            ..op(t, AtomicAck, Only)
        },
        0x13 => OpInfo {
            atomic_eth: true,
            ..op(t, CmpSwap, Only)
        },
        0x14 => OpInfo {
            atomic_eth: true,
            ..op(t, FetchAdd, Only)
        },
        0x16 => OpInfo {
            ieth: true,
            ..op(t, Send, Last)
        },
        0x17 => OpInfo {
            ieth: true,
            ..op(t, Send, Only)
        },
        _ => return None,
    };
    let ok = match t {
        Transport::Rc => true,
        Transport::Uc => base <= 0x0b,
        Transport::Ud => base == 0x04 || base == 0x05,
    };
    if !ok {
        return None;
    }
    if t == Transport::Ud {
        i.deth = true;
    }
    Some(i)
}

/// The opcode for (transport, kind, pos, imm, inv); `None` if no such opcode.
pub fn opcode_for(t: Transport, kind: Kind, pos: Pos, imm: bool, inv: bool) -> Option<u8> {
    use Kind::*;
    use Pos::*;
    let base = match (kind, pos, imm, inv) {
        (Send, First, false, false) => 0x00,
        (Send, Middle, false, false) => 0x01,
        (Send, Last, false, false) => 0x02,
        (Send, Last, true, false) => 0x03,
        (Send, Only, false, false) => 0x04,
        (Send, Only, true, false) => 0x05,
        (Send, Last, false, true) => 0x16,
        (Send, Only, false, true) => 0x17,
        (Write, First, false, false) => 0x06,
        (Write, Middle, false, false) => 0x07,
        (Write, Last, false, false) => 0x08,
        (Write, Last, true, false) => 0x09,
        (Write, Only, false, false) => 0x0a,
        (Write, Only, true, false) => 0x0b,
        (ReadReq, Only, false, false) => 0x0c,
        (ReadResp, First, false, false) => 0x0d,
        (ReadResp, Middle, false, false) => 0x0e,
        (ReadResp, Last, false, false) => 0x0f,
        (ReadResp, Only, false, false) => 0x10,
        (Ack, Only, false, false) => 0x11,
        (AtomicAck, Only, false, false) => 0x12,
        (CmpSwap, Only, false, false) => 0x13,
        (FetchAdd, Only, false, false) => 0x14,
        _ => return None,
    };
    let code = match t {
        Transport::Rc => base,
        Transport::Uc => base | 0x20,
        Transport::Ud => base | 0x60,
    };
    opinfo(code).map(|_| code)
}

/// Base Transport Header fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bth {
    /// OpCode.
    pub opcode: u8,
    /// Solicited event.
    pub se: bool,
    /// MigReq.
    pub mig: bool,
    /// P_Key.
    pub pkey: u16,
    /// FECN / BECN (byte 4, top two bits), kept for information.
    pub becn_fecn: u8,
    /// Destination QP (24 bits).
    pub dqpn: u32,
    /// AckReq.
    pub ack_req: bool,
    /// PSN.
    pub psn: Psn,
}

/// RDMA Extended Transport Header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reth {
    /// Virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// DMA length.
    pub len: u32,
}

/// Atomic Extended Transport Header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AtomicEth {
    /// Virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Swap (CMP_SWP) or add (FETCH_ADD) value.
    pub swap_add: u64,
    /// Compare value.
    pub compare: u64,
}

/// ACK Extended Transport Header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Aeth {
    /// Syndrome.
    pub syndrome: u8,
    /// Message sequence number (24 bits).
    pub msn: u32,
}

/// Datagram Extended Transport Header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deth {
    /// Q_Key.
    pub qkey: u32,
    /// Source QP (24 bits).
    pub src_qp: u32,
}

/// A parsed packet, borrowing its payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<'a> {
    /// The BTH.
    pub bth: Bth,
    /// Opcode facts.
    pub info: OpInfo,
    /// DETH (UD).
    pub deth: Option<Deth>,
    /// RETH.
    pub reth: Option<Reth>,
    /// AtomicETH.
    pub atomic_eth: Option<AtomicEth>,
    /// AETH.
    pub aeth: Option<Aeth>,
    /// AtomicAckETH: original remote value.
    pub atomic_ack: Option<u64>,
    /// Immediate data.
    pub imm: Option<u32>,
    /// IETH: rkey to invalidate.
    pub ieth: Option<u32>,
    /// Payload without pad.
    pub payload: &'a [u8],
}

/// Why a packet could not be parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum ParseError {
    /// Shorter than its headers.
    #[error("truncated packet")]
    Truncated,
    /// Opcode not in the RC/UC/UD tables.
    #[error("unknown opcode")]
    UnknownOpcode,
    /// Transport header version is not 0.
    #[error("bad transport version")]
    BadVersion,
    /// Pad on an opcode without payload, or pad longer than the payload area.
    #[error("inconsistent pad count")]
    BadPad,
}

fn be16(b: &[u8], i: usize) -> u16 {
    u16::from_be_bytes([b[i], b[i + 1]])
}
fn be24(b: &[u8], i: usize) -> u32 {
    u32::from_be_bytes([0, b[i], b[i + 1], b[i + 2]])
}
fn be32(b: &[u8], i: usize) -> u32 {
    u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}
fn be64(b: &[u8], i: usize) -> u64 {
    (u64::from(be32(b, i)) << 32) | u64::from(be32(b, i + 4))
}

impl<'a> Packet<'a> {
    /// Length of the headers (BTH included) for an opcode.
    pub fn header_len(info: &OpInfo) -> usize {
        BTH_LEN
            + if info.deth { 8 } else { 0 }
            + if info.reth { 16 } else { 0 }
            + if info.atomic_eth { 28 } else { 0 }
            + if info.aeth { 4 } else { 0 }
            + if info.atomic_ack_eth { 8 } else { 0 }
            + if info.imm { 4 } else { 0 }
            + if info.ieth { 4 } else { 0 }
    }

    /// Parses `b` (starting at the BTH, ending after the pad, no ICRC).
    ///
    /// # Errors
    /// See [`ParseError`]; never panics.
    pub fn parse(b: &'a [u8]) -> Result<Packet<'a>, ParseError> {
        if b.len() < BTH_LEN {
            return Err(ParseError::Truncated);
        }
        let info = opinfo(b[0]).ok_or(ParseError::UnknownOpcode)?;
        if b[1] & 0x0f != 0 {
            return Err(ParseError::BadVersion);
        }
        let pad = usize::from((b[1] >> 4) & 3);
        let bth = Bth {
            opcode: b[0],
            se: b[1] & 0x80 != 0,
            mig: b[1] & 0x40 != 0,
            pkey: be16(b, 2),
            becn_fecn: b[4] >> 6,
            dqpn: be24(b, 5),
            ack_req: b[8] & 0x80 != 0,
            psn: Psn::new(be24(b, 9)),
        };
        let hlen = Self::header_len(&info);
        if b.len() < hlen {
            return Err(ParseError::Truncated);
        }
        let mut i = BTH_LEN;
        let mut p = Packet {
            bth,
            info,
            deth: None,
            reth: None,
            atomic_eth: None,
            aeth: None,
            atomic_ack: None,
            imm: None,
            ieth: None,
            payload: &[],
        };
        if info.deth {
            p.deth = Some(Deth {
                qkey: be32(b, i),
                src_qp: be24(b, i + 5),
            });
            i += 8;
        }
        if info.reth {
            p.reth = Some(Reth {
                va: be64(b, i),
                rkey: be32(b, i + 8),
                len: be32(b, i + 12),
            });
            i += 16;
        }
        if info.atomic_eth {
            p.atomic_eth = Some(AtomicEth {
                va: be64(b, i),
                rkey: be32(b, i + 8),
                swap_add: be64(b, i + 12),
                compare: be64(b, i + 20),
            });
            i += 28;
        }
        if info.aeth {
            p.aeth = Some(Aeth {
                syndrome: b[i],
                msn: be24(b, i + 1),
            });
            i += 4;
        }
        if info.atomic_ack_eth {
            p.atomic_ack = Some(be64(b, i));
            i += 8;
        }
        if info.imm {
            p.imm = Some(be32(b, i));
            i += 4;
        }
        if info.ieth {
            p.ieth = Some(be32(b, i));
            i += 4;
        }
        let rest = &b[i..];
        if !info.payload {
            if pad != 0 || !rest.is_empty() {
                return Err(ParseError::BadPad);
            }
            return Ok(p);
        }
        if rest.len() < pad || (rest.len() % 4) != 0 {
            return Err(ParseError::BadPad);
        }
        p.payload = &rest[..rest.len() - pad];
        Ok(p)
    }

    /// Bytes [`Packet::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        let n = Self::header_len(&self.info) + self.payload.len();
        n + pad_of(self.payload.len())
    }

    /// Writes the packet into `buf` and returns its length; `None` if `buf`
    /// is shorter than [`Packet::buffer_len`]. Headers that `info` does not
    /// call for are ignored; missing ones are written as zeros.
    pub fn emit(&self, buf: &mut [u8]) -> Option<usize> {
        let (at, len) = self.emit_header(buf, self.payload.len())?;
        let n = self.payload.len();
        if self.info.payload {
            buf[at..at + n].copy_from_slice(self.payload);
        } else {
            buf[at..at + n].fill(0);
        }
        Some(len)
    }

    /// Writes the headers of a packet whose payload is `payload_len` bytes
    /// (`self.payload` is ignored) and the pad bytes after it, leaving the
    /// payload area for the caller to fill in place (no staging copy).
    /// Returns the payload's offset and the packet length; `None` if `buf`
    /// is too short.
    pub fn emit_header(&self, buf: &mut [u8], payload_len: usize) -> Option<(usize, usize)> {
        let pad = pad_of(payload_len);
        let len = Self::header_len(&self.info) + payload_len + pad;
        let buf = buf.get_mut(..len)?;
        let b = &self.bth;
        buf[0] = b.opcode;
        buf[1] = (u8::from(b.se) << 7) | (u8::from(b.mig) << 6) | ((pad as u8) << 4);
        buf[2..4].copy_from_slice(&b.pkey.to_be_bytes());
        buf[4] = (b.becn_fecn & 3) << 6;
        buf[5..8].copy_from_slice(&b.dqpn.to_be_bytes()[1..]);
        buf[8] = u8::from(b.ack_req) << 7;
        buf[9..12].copy_from_slice(&b.psn.value().to_be_bytes()[1..]);
        let mut i = BTH_LEN;
        let info = &self.info;
        if info.deth {
            let d = self.deth.unwrap_or(Deth { qkey: 0, src_qp: 0 });
            buf[i..i + 4].copy_from_slice(&d.qkey.to_be_bytes());
            buf[i + 4..i + 8].copy_from_slice(&(d.src_qp & 0x00ff_ffff).to_be_bytes());
            i += 8;
        }
        if info.reth {
            let r = self.reth.unwrap_or(Reth {
                va: 0,
                rkey: 0,
                len: 0,
            });
            buf[i..i + 8].copy_from_slice(&r.va.to_be_bytes());
            buf[i + 8..i + 12].copy_from_slice(&r.rkey.to_be_bytes());
            buf[i + 12..i + 16].copy_from_slice(&r.len.to_be_bytes());
            i += 16;
        }
        if info.atomic_eth {
            let a = self.atomic_eth.unwrap_or(AtomicEth {
                va: 0,
                rkey: 0,
                swap_add: 0,
                compare: 0,
            });
            buf[i..i + 8].copy_from_slice(&a.va.to_be_bytes());
            buf[i + 8..i + 12].copy_from_slice(&a.rkey.to_be_bytes());
            buf[i + 12..i + 20].copy_from_slice(&a.swap_add.to_be_bytes());
            buf[i + 20..i + 28].copy_from_slice(&a.compare.to_be_bytes());
            i += 28;
        }
        if info.aeth {
            let a = self.aeth.unwrap_or(Aeth {
                syndrome: 0,
                msn: 0,
            });
            buf[i] = a.syndrome;
            buf[i + 1..i + 4].copy_from_slice(&a.msn.to_be_bytes()[1..]);
            i += 4;
        }
        if info.atomic_ack_eth {
            buf[i..i + 8].copy_from_slice(&self.atomic_ack.unwrap_or(0).to_be_bytes());
            i += 8;
        }
        if info.imm {
            buf[i..i + 4].copy_from_slice(&self.imm.unwrap_or(0).to_be_bytes());
            i += 4;
        }
        if info.ieth {
            buf[i..i + 4].copy_from_slice(&self.ieth.unwrap_or(0).to_be_bytes());
            i += 4;
        }
        buf[i + payload_len..].fill(0);
        Some((i, len))
    }
}

/// Pad bytes that make `n` a multiple of 4.
pub const fn pad_of(n: usize) -> usize {
    (4 - (n % 4)) % 4
}

/// AETH syndrome helpers.
pub mod syndrome {
    /// ACK with unlimited credits (what rxe sends).
    pub const ACK: u8 = 0x1f;
    /// RNR NAK with timer code `t`.
    pub const fn rnr(t: u8) -> u8 {
        0x20 | (t & 0x1f)
    }
    /// NAK: PSN sequence error.
    pub const NAK_PSN_SEQ: u8 = 0x60;
    /// NAK: invalid request.
    pub const NAK_INV_REQ: u8 = 0x61;
    /// NAK: remote access error.
    pub const NAK_REM_ACCESS: u8 = 0x62;
    /// NAK: remote operational error.
    pub const NAK_REM_OP: u8 = 0x63;
    /// NAK: invalid RD request.
    pub const NAK_INV_RD_REQ: u8 = 0x64;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opcode_table_round_trips() {
        for code in 0..=255u8 {
            if let Some(i) = opinfo(code) {
                let t = opcode_for(i.transport, i.kind, i.pos, i.imm, i.ieth);
                assert_eq!(t, Some(code), "{code:#x}");
            }
        }
        assert!(opinfo(0x2c).is_none(), "UC has no READ");
        assert!(opinfo(0x66).is_none());
        assert!(opinfo(0x81).is_none());
    }

    /// Headers written alone, then the payload filled in place, give the
    /// same bytes as `emit`, for every opcode and payload length 0..9 (all
    /// four pad widths), over a dirty buffer.
    #[test]
    fn emit_header_then_payload_in_place_equals_emit() {
        let data = [9u8, 8, 7, 6, 5, 4, 3, 2, 1];
        for code in 0..=255u8 {
            let Some(info) = opinfo(code) else { continue };
            for n in 0..data.len() {
                let payload = if info.payload { &data[..n] } else { &[][..] };
                let p = Packet {
                    bth: Bth {
                        opcode: code,
                        se: n % 2 == 0,
                        mig: false,
                        pkey: 0xffff,
                        becn_fecn: 0,
                        dqpn: 0x01_2345,
                        ack_req: n % 3 == 0,
                        psn: Psn::new(0x00ff_fff0 + n as u32),
                    },
                    info,
                    deth: Some(Deth {
                        qkey: 0x1111_2222,
                        src_qp: 0x33,
                    }),
                    reth: Some(Reth {
                        va: 0xabcd,
                        rkey: 0x44,
                        len: n as u32,
                    }),
                    atomic_eth: Some(AtomicEth {
                        va: 8,
                        rkey: 9,
                        swap_add: 10,
                        compare: 11,
                    }),
                    aeth: Some(Aeth {
                        syndrome: 0x1f,
                        msn: 0x55,
                    }),
                    atomic_ack: Some(0x66),
                    imm: Some(0x77),
                    ieth: Some(0x88),
                    payload,
                };
                let mut want = [0xa5u8; 128];
                let wlen = p.emit(&mut want).unwrap();
                let mut got = [0x5au8; 128];
                let (at, glen) = p.emit_header(&mut got, payload.len()).unwrap();
                got[at..at + payload.len()].copy_from_slice(payload);
                assert_eq!(
                    (glen, &got[..glen]),
                    (wlen, &want[..wlen]),
                    "{code:#x} n={n}"
                );
                assert!(p.emit_header(&mut got[..glen - 1], payload.len()).is_none());
            }
        }
    }

    #[test]
    fn emit_parse_round_trip_with_pad() {
        let info = opinfo(0x0b).unwrap();
        let p = Packet {
            bth: Bth {
                opcode: 0x0b,
                se: true,
                mig: false,
                pkey: 0xffff,
                becn_fecn: 0,
                dqpn: 0x12,
                ack_req: true,
                psn: Psn::new(7),
            },
            info,
            deth: None,
            reth: Some(Reth {
                va: 0x1000,
                rkey: 5,
                len: 3,
            }),
            atomic_eth: None,
            aeth: None,
            atomic_ack: None,
            imm: Some(0xdead_beef),
            ieth: None,
            payload: &[1, 2, 3],
        };
        let mut buf = [0xa5u8; 64];
        let n = p.emit(&mut buf).unwrap();
        assert_eq!(n, 12 + 16 + 4 + 4);
        assert_eq!(Packet::parse(&buf[..n]).unwrap(), p);
        for k in 0..n {
            let _ = Packet::parse(&buf[..k]);
        }
    }
}
