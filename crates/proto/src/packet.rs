//! The transport packets the engine consumes and produces: BTH, extension
//! headers and payload (plus pad), without the IP/UDP encapsulation and
//! without the ICRC. The ICRC covers the IP and UDP headers, which the engine
//! never sees, so the caller (the UDP driver or the simulator) computes and
//! checks it.
//!
//! The bytes are `rdmakit-wire`'s: [`Packet::parse`] and [`Packet::emit`]
//! read and write every header through wire's header views and Reprs (the
//! checks and bytes of `roce::Repr`'s ICRC-less entry points, without
//! building a whole `roce::Repr` per packet) and [`opinfo`] is a
//! view of wire's opcode table, so wire's byte-exact proofs against rxe
//! captures cover what the engine sends. The types here are the engine's
//! vocabulary (raw AETH syndrome, one [`OpInfo`] per opcode), not a codec.
//!
//! [`Packet::parse`] never panics: any truncation, unknown opcode, reserved
//! transport version or inconsistent pad count is an `Err`.

use rdmakit_wire::opcode::{OpCode, Operation, Position};
use rdmakit_wire::{aeth, atomic_ack_eth, atomic_eth, bth, deth, ieth, immdt, reth};

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

/// [`opinfo`] of every byte, built at compile time from wire's table.
static OPINFO: [Option<OpInfo>; 256] = {
    let mut t = [None; 256];
    let mut c = 0;
    while c < 256 {
        t[c] = from_wire(OpCode(c as u8));
        c += 1;
    }
    t
};

/// The engine's view of one entry of wire's opcode table.
const fn from_wire(code: OpCode) -> Option<OpInfo> {
    let Some(w) = code.info() else {
        return None;
    };
    let transport = match w.transport {
        rdmakit_wire::Transport::Rc => Transport::Rc,
        rdmakit_wire::Transport::Uc => Transport::Uc,
        rdmakit_wire::Transport::Ud => Transport::Ud,
        _ => return None,
    };
    let kind = match w.operation {
        Operation::Send | Operation::SendWithImmediate | Operation::SendWithInvalidate => {
            Kind::Send
        }
        Operation::RdmaWrite | Operation::RdmaWriteWithImmediate => Kind::Write,
        Operation::RdmaReadRequest => Kind::ReadReq,
        Operation::RdmaReadResponse => Kind::ReadResp,
        Operation::Acknowledge => Kind::Ack,
        Operation::AtomicAcknowledge => Kind::AtomicAck,
        Operation::CompareSwap => Kind::CmpSwap,
        Operation::FetchAdd => Kind::FetchAdd,
    };
    let pos = match w.position {
        Position::First => Pos::First,
        Position::Middle => Pos::Middle,
        Position::Last => Pos::Last,
        Position::Only => Pos::Only,
    };
    let h = w.headers;
    Some(OpInfo {
        transport,
        kind,
        pos,
        reth: h.reth,
        atomic_eth: h.atomic_eth,
        aeth: h.aeth,
        atomic_ack_eth: h.atomic_ack_eth,
        imm: h.immdt,
        ieth: h.ieth,
        deth: h.deth,
        payload: w.has_payload,
    })
}

/// Looks up an opcode; `None` for opcodes this engine does not speak
/// (RD, XRC, CNP, reserved).
#[inline]
pub fn opinfo(opcode: u8) -> Option<OpInfo> {
    OPINFO[usize::from(opcode)]
}

/// The opcode for (transport, kind, pos, imm, inv); `None` if no such opcode.
pub fn opcode_for(t: Transport, kind: Kind, pos: Pos, imm: bool, inv: bool) -> Option<u8> {
    let operation = match (kind, imm, inv) {
        (Kind::Send, false, false) => Operation::Send,
        (Kind::Send, true, false) => Operation::SendWithImmediate,
        (Kind::Send, false, true) => Operation::SendWithInvalidate,
        (Kind::Write, false, false) => Operation::RdmaWrite,
        (Kind::Write, true, false) => Operation::RdmaWriteWithImmediate,
        (Kind::ReadReq, false, false) => Operation::RdmaReadRequest,
        (Kind::ReadResp, false, false) => Operation::RdmaReadResponse,
        (Kind::Ack, false, false) => Operation::Acknowledge,
        (Kind::AtomicAck, false, false) => Operation::AtomicAcknowledge,
        (Kind::CmpSwap, false, false) => Operation::CompareSwap,
        (Kind::FetchAdd, false, false) => Operation::FetchAdd,
        _ => return None,
    };
    let transport = match t {
        Transport::Rc => rdmakit_wire::Transport::Rc,
        Transport::Uc => rdmakit_wire::Transport::Uc,
        Transport::Ud => rdmakit_wire::Transport::Ud,
    };
    let position = match pos {
        Pos::First => Position::First,
        Pos::Middle => Position::Middle,
        Pos::Last => Position::Last,
        Pos::Only => Position::Only,
    };
    OpCode::from_parts(transport, operation, position).map(|o| o.0)
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

impl Bth {
    /// A BTH for `opcode` to `dqpn` at `psn` with the default P_Key
    /// (0xffff) and every flag clear.
    pub fn new(opcode: u8, dqpn: u32, psn: Psn) -> Bth {
        Bth {
            opcode,
            se: false,
            mig: false,
            pkey: 0xffff,
            becn_fecn: 0,
            dqpn,
            ack_req: false,
            psn,
        }
    }
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

impl<'a> Packet<'a> {
    /// A packet of `bth` with `payload` and no extension header (set the
    /// ones `info` calls for).
    pub fn new(bth: Bth, info: OpInfo, payload: &'a [u8]) -> Packet<'a> {
        Packet {
            bth,
            info,
            deth: None,
            reth: None,
            atomic_eth: None,
            aeth: None,
            atomic_ack: None,
            imm: None,
            ieth: None,
            payload,
        }
    }

    /// Length of the headers (BTH included) for an opcode.
    pub fn header_len(info: &OpInfo) -> usize {
        BTH_LEN
            + if info.deth { deth::HEADER_LEN } else { 0 }
            + if info.reth { reth::HEADER_LEN } else { 0 }
            + if info.atomic_eth {
                atomic_eth::HEADER_LEN
            } else {
                0
            }
            + if info.aeth { aeth::HEADER_LEN } else { 0 }
            + if info.atomic_ack_eth {
                atomic_ack_eth::HEADER_LEN
            } else {
                0
            }
            + if info.imm { immdt::HEADER_LEN } else { 0 }
            + if info.ieth { ieth::HEADER_LEN } else { 0 }
    }

    /// Parses `b` (starting at the BTH, ending after the pad, no ICRC): the
    /// checks of [`rdmakit_wire::roce::Repr::parse_without_icrc`], the fields read
    /// through wire's header views (each on exactly its header's bytes).
    ///
    /// # Errors
    /// See [`ParseError`]; never panics.
    #[inline]
    pub fn parse(b: &'a [u8]) -> Result<Packet<'a>, ParseError> {
        if b.len() < BTH_LEN {
            return Err(ParseError::Truncated);
        }
        let info = opinfo(b[0]).ok_or(ParseError::UnknownOpcode)?;
        let h = bth::Packet::new_unchecked(&b[..BTH_LEN]);
        if h.tver() != 0 {
            return Err(ParseError::BadVersion);
        }
        let hlen = Self::header_len(&info);
        if b.len() < hlen {
            return Err(ParseError::Truncated);
        }
        let pad = usize::from(h.pad_count());
        let rest = &b[hlen..];
        let payload = if !info.payload {
            if pad != 0 || !rest.is_empty() {
                return Err(ParseError::BadPad);
            }
            &rest[..0]
        } else {
            if rest.len() < pad || (rest.len() % 4) != 0 {
                return Err(ParseError::BadPad);
            }
            &rest[..rest.len() - pad]
        };
        let bth = Bth {
            opcode: b[0],
            se: h.solicited(),
            mig: h.mig_req(),
            pkey: h.pkey(),
            becn_fecn: (u8::from(h.fecn()) << 1) | u8::from(h.becn()),
            dqpn: h.dest_qp(),
            ack_req: h.ack_req(),
            psn: Psn::new(h.psn()),
        };
        let mut p = Packet::new(bth, info, payload);
        let mut i = BTH_LEN;
        let mut take = |len: usize| {
            let here = &b[i..i + len];
            i += len;
            here
        };
        if info.deth {
            let d = deth::Packet::new_unchecked(take(deth::HEADER_LEN));
            p.deth = Some(Deth {
                qkey: d.qkey(),
                src_qp: d.src_qp(),
            });
        }
        if info.reth {
            let r = reth::Packet::new_unchecked(take(reth::HEADER_LEN));
            p.reth = Some(Reth {
                va: r.va(),
                rkey: r.rkey(),
                len: r.dma_len(),
            });
        }
        if info.atomic_eth {
            let a = atomic_eth::Packet::new_unchecked(take(atomic_eth::HEADER_LEN));
            p.atomic_eth = Some(AtomicEth {
                va: a.va(),
                rkey: a.rkey(),
                swap_add: a.swap_add(),
                compare: a.compare(),
            });
        }
        if info.aeth {
            let a = aeth::Packet::new_unchecked(take(aeth::HEADER_LEN));
            p.aeth = Some(Aeth {
                syndrome: a.syndrome(),
                msn: a.msn(),
            });
        }
        if info.atomic_ack_eth {
            let a = atomic_ack_eth::Packet::new_unchecked(take(atomic_ack_eth::HEADER_LEN));
            p.atomic_ack = Some(a.orig_value());
        }
        if info.imm {
            p.imm = Some(immdt::Packet::new_unchecked(take(immdt::HEADER_LEN)).imm());
        }
        if info.ieth {
            p.ieth = Some(ieth::Packet::new_unchecked(take(ieth::HEADER_LEN)).rkey());
        }
        Ok(p)
    }

    /// Bytes [`Packet::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        let n = Self::header_len(&self.info) + self.payload.len();
        n + pad_of(self.payload.len())
    }

    /// Writes the packet into `buf` and returns its length; `None` if `buf`
    /// is shorter than [`Packet::buffer_len`]. Headers that `info` does not
    /// call for are ignored; missing ones are written as zeros (and so is a
    /// payload on an opcode without one: a malformed packet, for tests).
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
    /// payload area for the caller to fill in place (no staging copy), with
    /// wire's header Reprs and views (the bytes of
    /// [`rdmakit_wire::roce::Repr::emit_header_without_icrc`]). Returns the payload's
    /// offset and the packet length; `None` if `buf` is too short.
    pub fn emit_header(&self, buf: &mut [u8], payload_len: usize) -> Option<(usize, usize)> {
        let pad = pad_of(payload_len);
        let len = Self::header_len(&self.info) + payload_len + pad;
        let buf = buf.get_mut(..len)?;
        let b = &self.bth;
        bth::Repr {
            opcode: OpCode(b.opcode),
            solicited: b.se,
            mig_req: b.mig,
            pad_count: pad as u8,
            tver: 0,
            pkey: b.pkey,
            fecn: b.becn_fecn & 2 != 0,
            becn: b.becn_fecn & 1 != 0,
            dest_qp: b.dqpn,
            ack_req: b.ack_req,
            psn: b.psn.value(),
        }
        .emit(&mut bth::Packet::new_unchecked(&mut buf[..BTH_LEN]));
        let info = &self.info;
        let mut i = BTH_LEN;
        let mut take = |len: usize| {
            let here = i;
            i += len;
            here..here + len
        };
        if info.deth {
            let d = self.deth.unwrap_or(Deth { qkey: 0, src_qp: 0 });
            deth::Repr {
                qkey: d.qkey,
                src_qp: d.src_qp,
            }
            .emit(&mut deth::Packet::new_unchecked(
                &mut buf[take(deth::HEADER_LEN)],
            ));
        }
        if info.reth {
            let r = self.reth.unwrap_or(Reth {
                va: 0,
                rkey: 0,
                len: 0,
            });
            reth::Repr {
                va: r.va,
                rkey: r.rkey,
                dma_len: r.len,
            }
            .emit(&mut reth::Packet::new_unchecked(
                &mut buf[take(reth::HEADER_LEN)],
            ));
        }
        if info.atomic_eth {
            let a = self.atomic_eth.unwrap_or(AtomicEth {
                va: 0,
                rkey: 0,
                swap_add: 0,
                compare: 0,
            });
            atomic_eth::Repr {
                va: a.va,
                rkey: a.rkey,
                swap_add: a.swap_add,
                compare: a.compare,
            }
            .emit(&mut atomic_eth::Packet::new_unchecked(
                &mut buf[take(atomic_eth::HEADER_LEN)],
            ));
        }
        if info.aeth {
            // The raw syndrome, through the view (the Repr's AethKind would
            // round-trip it).
            let a = self.aeth.unwrap_or(Aeth {
                syndrome: 0,
                msn: 0,
            });
            let mut v = aeth::Packet::new_unchecked(&mut buf[take(aeth::HEADER_LEN)]);
            v.set_syndrome(a.syndrome);
            v.set_msn(a.msn);
        }
        if info.atomic_ack_eth {
            atomic_ack_eth::Repr {
                orig_value: self.atomic_ack.unwrap_or(0),
            }
            .emit(&mut atomic_ack_eth::Packet::new_unchecked(
                &mut buf[take(atomic_ack_eth::HEADER_LEN)],
            ));
        }
        if info.imm {
            immdt::Repr {
                imm: self.imm.unwrap_or(0),
            }
            .emit(&mut immdt::Packet::new_unchecked(
                &mut buf[take(immdt::HEADER_LEN)],
            ));
        }
        if info.ieth {
            ieth::Repr {
                rkey: self.ieth.unwrap_or(0),
            }
            .emit(&mut ieth::Packet::new_unchecked(
                &mut buf[take(ieth::HEADER_LEN)],
            ));
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
