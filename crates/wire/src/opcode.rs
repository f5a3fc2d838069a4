//! The BTH opcode and the table of what each RC, UC and UD opcode carries.
//!
//! The high 3 bits of an opcode select the transport (RC 0x00, UC 0x20, RD 0x40,
//! UD 0x60), the low 5 bits the operation. The table follows IBTA Vol 1 table 38
//! and Linux rxe's `rxe_opcode.c`; RD opcodes are not supported.

use core::fmt;

/// A BTH opcode (any byte; [`OpCode::info`] says whether it is one we know).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct OpCode(pub u8);

/// The transport service an opcode belongs to (its high 3 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum Transport {
    /// Reliable Connected (0x00).
    Rc,
    /// Unreliable Connected (0x20).
    Uc,
    /// Reliable Datagram (0x40; not supported by this crate).
    Rd,
    /// Unreliable Datagram (0x60).
    Ud,
    /// Congestion notification packet (0x80).
    Cnp,
    /// Reserved or manufacturer-specific (0xa0..).
    Other,
}

/// What an opcode does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum Operation {
    /// SEND (FIRST/MIDDLE/LAST/ONLY).
    Send,
    /// SEND_LAST / SEND_ONLY with immediate data.
    SendWithImmediate,
    /// SEND_LAST / SEND_ONLY with invalidate.
    SendWithInvalidate,
    /// RDMA WRITE (FIRST/MIDDLE/LAST/ONLY).
    RdmaWrite,
    /// RDMA WRITE LAST/ONLY with immediate data.
    RdmaWriteWithImmediate,
    /// RDMA READ request.
    RdmaReadRequest,
    /// RDMA READ response (FIRST/MIDDLE/LAST/ONLY).
    RdmaReadResponse,
    /// ACKNOWLEDGE (ACK, NAK or RNR NAK, by the AETH syndrome).
    Acknowledge,
    /// ATOMIC ACKNOWLEDGE.
    AtomicAcknowledge,
    /// Atomic CMP & SWAP.
    CompareSwap,
    /// Atomic FETCH & ADD.
    FetchAdd,
}

impl Operation {
    /// Whether packets of this operation go from responder to requester.
    #[inline]
    pub fn is_response(self) -> bool {
        matches!(
            self,
            Operation::RdmaReadResponse | Operation::Acknowledge | Operation::AtomicAcknowledge
        )
    }
}

/// Where a packet sits in its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum Position {
    /// First packet of a multi-packet message (payload exactly PMTU).
    First,
    /// Middle packet (payload exactly PMTU).
    Middle,
    /// Last packet (payload 1..=PMTU).
    Last,
    /// The only packet of the message (payload 0..=PMTU).
    Only,
}

impl Position {
    /// Whether this packet starts a message (FIRST or ONLY).
    #[inline]
    pub fn starts_message(self) -> bool {
        matches!(self, Position::First | Position::Only)
    }

    /// Whether this packet ends a message (LAST or ONLY).
    #[inline]
    pub fn ends_message(self) -> bool {
        matches!(self, Position::Last | Position::Only)
    }
}

/// Which extension headers follow the BTH. Their order on the wire is always
/// DETH, RETH, AtomicETH, AETH, AtomicAckETH, ImmDt, IETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ExtHeaders {
    /// DETH (UD).
    pub deth: bool,
    /// RETH (WRITE FIRST/ONLY, READ request).
    pub reth: bool,
    /// AtomicETH (CMP & SWAP, FETCH & ADD).
    pub atomic_eth: bool,
    /// AETH (ACK, READ response FIRST/LAST/ONLY, ATOMIC ACK).
    pub aeth: bool,
    /// AtomicAckETH (ATOMIC ACK).
    pub atomic_ack_eth: bool,
    /// ImmDt (… WITH_IMMEDIATE).
    pub immdt: bool,
    /// IETH (SEND … WITH_INVALIDATE).
    pub ieth: bool,
}

impl ExtHeaders {
    /// Total length in bytes of these extension headers.
    #[inline]
    pub const fn len(&self) -> usize {
        let mut n = 0;
        if self.deth {
            n += crate::deth::HEADER_LEN;
        }
        if self.reth {
            n += crate::reth::HEADER_LEN;
        }
        if self.atomic_eth {
            n += crate::atomic_eth::HEADER_LEN;
        }
        if self.aeth {
            n += crate::aeth::HEADER_LEN;
        }
        if self.atomic_ack_eth {
            n += crate::atomic_ack_eth::HEADER_LEN;
        }
        if self.immdt {
            n += crate::immdt::HEADER_LEN;
        }
        if self.ieth {
            n += crate::ieth::HEADER_LEN;
        }
        n
    }

    /// Whether there is no extension header.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Everything the opcode table says about one known opcode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OpInfo {
    /// The opcode.
    pub opcode: OpCode,
    /// Name as in IBTA / rxe, e.g. `RC_SEND_ONLY`.
    pub name: &'static str,
    /// Transport service.
    pub transport: Transport,
    /// Operation.
    pub operation: Operation,
    /// FIRST / MIDDLE / LAST / ONLY.
    pub position: Position,
    /// Extension headers after the BTH.
    pub headers: ExtHeaders,
    /// Whether the packet carries a payload (may still be 0 bytes long for ONLY).
    pub has_payload: bool,
}

impl OpInfo {
    /// BTH plus extension headers: the offset of the payload in a RoCE packet.
    #[inline]
    pub const fn header_len(&self) -> usize {
        crate::bth::HEADER_LEN + self.headers.len()
    }
}

const NONE: ExtHeaders = ExtHeaders {
    deth: false,
    reth: false,
    atomic_eth: false,
    aeth: false,
    atomic_ack_eth: false,
    immdt: false,
    ieth: false,
};
const IMM: ExtHeaders = ExtHeaders {
    immdt: true,
    ..NONE
};
const INV: ExtHeaders = ExtHeaders { ieth: true, ..NONE };
const RETH: ExtHeaders = ExtHeaders { reth: true, ..NONE };
const RETH_IMM: ExtHeaders = ExtHeaders {
    reth: true,
    immdt: true,
    ..NONE
};
const AETH: ExtHeaders = ExtHeaders { aeth: true, ..NONE };
const AETH_ATOMIC_ACK: ExtHeaders = ExtHeaders {
    aeth: true,
    atomic_ack_eth: true,
    ..NONE
};
const ATOMIC: ExtHeaders = ExtHeaders {
    atomic_eth: true,
    ..NONE
};

use Operation as Op;
use Position as Pos;

/// (low 5 bits, operation, position, headers, payload) for RC.
const RC_BASE: [(u8, Operation, Position, ExtHeaders, bool); 23] = [
    (0x00, Op::Send, Pos::First, NONE, true),
    (0x01, Op::Send, Pos::Middle, NONE, true),
    (0x02, Op::Send, Pos::Last, NONE, true),
    (0x03, Op::SendWithImmediate, Pos::Last, IMM, true),
    (0x04, Op::Send, Pos::Only, NONE, true),
    (0x05, Op::SendWithImmediate, Pos::Only, IMM, true),
    (0x06, Op::RdmaWrite, Pos::First, RETH, true),
    (0x07, Op::RdmaWrite, Pos::Middle, NONE, true),
    (0x08, Op::RdmaWrite, Pos::Last, NONE, true),
    (0x09, Op::RdmaWriteWithImmediate, Pos::Last, IMM, true),
    (0x0a, Op::RdmaWrite, Pos::Only, RETH, true),
    (0x0b, Op::RdmaWriteWithImmediate, Pos::Only, RETH_IMM, true),
    (0x0c, Op::RdmaReadRequest, Pos::Only, RETH, false),
    (0x0d, Op::RdmaReadResponse, Pos::First, AETH, true),
    (0x0e, Op::RdmaReadResponse, Pos::Middle, NONE, true),
    (0x0f, Op::RdmaReadResponse, Pos::Last, AETH, true),
    (0x10, Op::RdmaReadResponse, Pos::Only, AETH, true),
    (0x11, Op::Acknowledge, Pos::Only, AETH, false),
    (
        0x12,
        Op::AtomicAcknowledge,
        Pos::Only,
        AETH_ATOMIC_ACK,
        false,
    ),
    (0x13, Op::CompareSwap, Pos::Only, ATOMIC, false),
    (0x14, Op::FetchAdd, Pos::Only, ATOMIC, false),
    (0x16, Op::SendWithInvalidate, Pos::Last, INV, true),
    (0x17, Op::SendWithInvalidate, Pos::Only, INV, true),
];

const NAMES: [(u8, &str); 38] = [
    (0x00, "RC_SEND_FIRST"),
    (0x01, "RC_SEND_MIDDLE"),
    (0x02, "RC_SEND_LAST"),
    (0x03, "RC_SEND_LAST_WITH_IMMEDIATE"),
    (0x04, "RC_SEND_ONLY"),
    (0x05, "RC_SEND_ONLY_WITH_IMMEDIATE"),
    (0x06, "RC_RDMA_WRITE_FIRST"),
    (0x07, "RC_RDMA_WRITE_MIDDLE"),
    (0x08, "RC_RDMA_WRITE_LAST"),
    (0x09, "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE"),
    (0x0a, "RC_RDMA_WRITE_ONLY"),
    (0x0b, "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE"),
    (0x0c, "RC_RDMA_READ_REQUEST"),
    (0x0d, "RC_RDMA_READ_RESPONSE_FIRST"),
    (0x0e, "RC_RDMA_READ_RESPONSE_MIDDLE"),
    (0x0f, "RC_RDMA_READ_RESPONSE_LAST"),
    (0x10, "RC_RDMA_READ_RESPONSE_ONLY"),
    (0x11, "RC_ACKNOWLEDGE"),
    (0x12, "RC_ATOMIC_ACKNOWLEDGE"),
    (0x13, "RC_COMPARE_SWAP"),
    (0x14, "RC_FETCH_ADD"),
    (0x16, "RC_SEND_LAST_WITH_INVALIDATE"),
    (0x17, "RC_SEND_ONLY_WITH_INVALIDATE"),
    (0x20, "UC_SEND_FIRST"),
    (0x21, "UC_SEND_MIDDLE"),
    (0x22, "UC_SEND_LAST"),
    (0x23, "UC_SEND_LAST_WITH_IMMEDIATE"),
    (0x24, "UC_SEND_ONLY"),
    (0x25, "UC_SEND_ONLY_WITH_IMMEDIATE"),
    (0x26, "UC_RDMA_WRITE_FIRST"),
    (0x27, "UC_RDMA_WRITE_MIDDLE"),
    (0x28, "UC_RDMA_WRITE_LAST"),
    (0x29, "UC_RDMA_WRITE_LAST_WITH_IMMEDIATE"),
    (0x2a, "UC_RDMA_WRITE_ONLY"),
    (0x2b, "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE"),
    (0x64, "UD_SEND_ONLY"),
    (0x65, "UD_SEND_ONLY_WITH_IMMEDIATE"),
    (0x81, "CNP"),
];

/// [`OpCode::info`] of every byte, built from `RC_BASE` and `NAMES`.
static INFO: [Option<OpInfo>; 256] = build_info();

const fn name_of(code: u8) -> &'static str {
    let mut i = 0;
    while i < NAMES.len() {
        if NAMES[i].0 == code {
            return NAMES[i].1;
        }
        i += 1;
    }
    "UNKNOWN"
}

const fn info_of(code: u8) -> Option<OpInfo> {
    let transport = match code >> 5 {
        0 => Transport::Rc,
        1 => Transport::Uc,
        3 => Transport::Ud,
        _ => return None,
    };
    let low = code & 0x1f;
    let mut i = 0;
    while i < RC_BASE.len() {
        let (l, operation, position, mut headers, has_payload) = RC_BASE[i];
        if l == low {
            match transport {
                Transport::Uc if low > 0x0b => return None,
                Transport::Ud if low != 0x04 && low != 0x05 => return None,
                Transport::Ud => headers.deth = true,
                _ => {}
            }
            return Some(OpInfo {
                opcode: OpCode(code),
                name: name_of(code),
                transport,
                operation,
                position,
                headers,
                has_payload,
            });
        }
        i += 1;
    }
    None
}

const fn build_info() -> [Option<OpInfo>; 256] {
    let mut t = [None; 256];
    let mut c = 0;
    while c < 256 {
        t[c] = info_of(c as u8);
        c += 1;
    }
    t
}

impl OpCode {
    /// RC SEND_FIRST (0x00).
    pub const RC_SEND_FIRST: OpCode = OpCode(0x00);
    /// RC SEND_MIDDLE (0x01).
    pub const RC_SEND_MIDDLE: OpCode = OpCode(0x01);
    /// RC SEND_LAST (0x02).
    pub const RC_SEND_LAST: OpCode = OpCode(0x02);
    /// RC SEND_LAST_WITH_IMMEDIATE (0x03).
    pub const RC_SEND_LAST_WITH_IMMEDIATE: OpCode = OpCode(0x03);
    /// RC SEND_ONLY (0x04).
    pub const RC_SEND_ONLY: OpCode = OpCode(0x04);
    /// RC SEND_ONLY_WITH_IMMEDIATE (0x05).
    pub const RC_SEND_ONLY_WITH_IMMEDIATE: OpCode = OpCode(0x05);
    /// RC RDMA_WRITE_FIRST (0x06).
    pub const RC_RDMA_WRITE_FIRST: OpCode = OpCode(0x06);
    /// RC RDMA_WRITE_MIDDLE (0x07).
    pub const RC_RDMA_WRITE_MIDDLE: OpCode = OpCode(0x07);
    /// RC RDMA_WRITE_LAST (0x08).
    pub const RC_RDMA_WRITE_LAST: OpCode = OpCode(0x08);
    /// RC RDMA_WRITE_LAST_WITH_IMMEDIATE (0x09).
    pub const RC_RDMA_WRITE_LAST_WITH_IMMEDIATE: OpCode = OpCode(0x09);
    /// RC RDMA_WRITE_ONLY (0x0a).
    pub const RC_RDMA_WRITE_ONLY: OpCode = OpCode(0x0a);
    /// RC RDMA_WRITE_ONLY_WITH_IMMEDIATE (0x0b).
    pub const RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE: OpCode = OpCode(0x0b);
    /// RC RDMA_READ_REQUEST (0x0c).
    pub const RC_RDMA_READ_REQUEST: OpCode = OpCode(0x0c);
    /// RC RDMA_READ_RESPONSE_FIRST (0x0d).
    pub const RC_RDMA_READ_RESPONSE_FIRST: OpCode = OpCode(0x0d);
    /// RC RDMA_READ_RESPONSE_MIDDLE (0x0e).
    pub const RC_RDMA_READ_RESPONSE_MIDDLE: OpCode = OpCode(0x0e);
    /// RC RDMA_READ_RESPONSE_LAST (0x0f).
    pub const RC_RDMA_READ_RESPONSE_LAST: OpCode = OpCode(0x0f);
    /// RC RDMA_READ_RESPONSE_ONLY (0x10).
    pub const RC_RDMA_READ_RESPONSE_ONLY: OpCode = OpCode(0x10);
    /// RC ACKNOWLEDGE (0x11).
    pub const RC_ACKNOWLEDGE: OpCode = OpCode(0x11);
    /// RC ATOMIC_ACKNOWLEDGE (0x12).
    pub const RC_ATOMIC_ACKNOWLEDGE: OpCode = OpCode(0x12);
    /// RC COMPARE_SWAP (0x13).
    pub const RC_COMPARE_SWAP: OpCode = OpCode(0x13);
    /// RC FETCH_ADD (0x14).
    pub const RC_FETCH_ADD: OpCode = OpCode(0x14);
    /// RC SEND_LAST_WITH_INVALIDATE (0x16).
    pub const RC_SEND_LAST_WITH_INVALIDATE: OpCode = OpCode(0x16);
    /// RC SEND_ONLY_WITH_INVALIDATE (0x17).
    pub const RC_SEND_ONLY_WITH_INVALIDATE: OpCode = OpCode(0x17);
    /// UC SEND_FIRST (0x20).
    pub const UC_SEND_FIRST: OpCode = OpCode(0x20);
    /// UC SEND_MIDDLE (0x21).
    pub const UC_SEND_MIDDLE: OpCode = OpCode(0x21);
    /// UC SEND_LAST (0x22).
    pub const UC_SEND_LAST: OpCode = OpCode(0x22);
    /// UC SEND_LAST_WITH_IMMEDIATE (0x23).
    pub const UC_SEND_LAST_WITH_IMMEDIATE: OpCode = OpCode(0x23);
    /// UC SEND_ONLY (0x24).
    pub const UC_SEND_ONLY: OpCode = OpCode(0x24);
    /// UC SEND_ONLY_WITH_IMMEDIATE (0x25).
    pub const UC_SEND_ONLY_WITH_IMMEDIATE: OpCode = OpCode(0x25);
    /// UC RDMA_WRITE_FIRST (0x26).
    pub const UC_RDMA_WRITE_FIRST: OpCode = OpCode(0x26);
    /// UC RDMA_WRITE_MIDDLE (0x27).
    pub const UC_RDMA_WRITE_MIDDLE: OpCode = OpCode(0x27);
    /// UC RDMA_WRITE_LAST (0x28).
    pub const UC_RDMA_WRITE_LAST: OpCode = OpCode(0x28);
    /// UC RDMA_WRITE_LAST_WITH_IMMEDIATE (0x29).
    pub const UC_RDMA_WRITE_LAST_WITH_IMMEDIATE: OpCode = OpCode(0x29);
    /// UC RDMA_WRITE_ONLY (0x2a).
    pub const UC_RDMA_WRITE_ONLY: OpCode = OpCode(0x2a);
    /// UC RDMA_WRITE_ONLY_WITH_IMMEDIATE (0x2b).
    pub const UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE: OpCode = OpCode(0x2b);
    /// UD SEND_ONLY (0x64).
    pub const UD_SEND_ONLY: OpCode = OpCode(0x64);
    /// UD SEND_ONLY_WITH_IMMEDIATE (0x65).
    pub const UD_SEND_ONLY_WITH_IMMEDIATE: OpCode = OpCode(0x65);
    /// RoCEv2 congestion notification packet (0x81; not a transport opcode).
    pub const CNP: OpCode = OpCode(0x81);

    /// The transport service of this opcode (its high 3 bits).
    pub fn transport(self) -> Transport {
        match self.0 >> 5 {
            0 => Transport::Rc,
            1 => Transport::Uc,
            2 => Transport::Rd,
            3 => Transport::Ud,
            4 => Transport::Cnp,
            _ => Transport::Other,
        }
    }

    /// The table entry for this opcode, or `None` if it is not an RC, UC or UD
    /// opcode this crate knows (RD, CNP, reserved and vendor opcodes). One
    /// index into a table built at compile time (every packet asks).
    #[inline]
    pub const fn info(self) -> Option<OpInfo> {
        INFO[self.0 as usize]
    }

    /// The IBTA/rxe name, e.g. `RC_SEND_ONLY`, or `UNKNOWN`.
    pub fn name(self) -> &'static str {
        NAMES
            .iter()
            .find(|e| e.0 == self.0)
            .map_or("UNKNOWN", |e| e.1)
    }

    /// The opcode for a transport, operation and position, if one exists
    /// (e.g. `(Rc, RdmaWrite, First)` → [`OpCode::RC_RDMA_WRITE_FIRST`]).
    pub fn from_parts(
        transport: Transport,
        operation: Operation,
        position: Position,
    ) -> Option<OpCode> {
        let high = match transport {
            Transport::Rc => 0x00,
            Transport::Uc => 0x20,
            Transport::Ud => 0x60,
            _ => return None,
        };
        let (low, ..) = *RC_BASE
            .iter()
            .find(|e| e.1 == operation && e.2 == position)?;
        let opcode = OpCode(high | low);
        opcode.info().map(|_| opcode)
    }

    /// Every opcode with a table entry, in numeric order.
    pub fn all_known() -> impl Iterator<Item = OpCode> {
        (0u8..=0xff).map(OpCode).filter(|o| o.info().is_some())
    }
}

impl fmt::Display for OpCode {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self.name() {
            "UNKNOWN" => write!(f, "OPCODE_0x{:02x}", self.0),
            name => f.write_str(name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_transport() {
        let all: Vec<_> = OpCode::all_known().collect();
        assert_eq!(
            all.iter()
                .filter(|o| o.transport() == Transport::Rc)
                .count(),
            23
        );
        assert_eq!(
            all.iter()
                .filter(|o| o.transport() == Transport::Uc)
                .count(),
            12
        );
        assert_eq!(
            all.iter()
                .filter(|o| o.transport() == Transport::Ud)
                .count(),
            2
        );
    }

    #[test]
    fn names_match_table() {
        for op in OpCode::all_known() {
            let name = op.name();
            assert_ne!(name, "UNKNOWN", "{op:?}");
            let prefix = match op.transport() {
                Transport::Rc => "RC_",
                Transport::Uc => "UC_",
                Transport::Ud => "UD_",
                _ => unreachable!(),
            };
            assert!(name.starts_with(prefix), "{name}");
        }
        assert_eq!(OpCode(0x15).name(), "UNKNOWN");
        assert_eq!(OpCode::CNP.name(), "CNP");
        assert!(OpCode::CNP.info().is_none());
        assert_eq!(OpCode(0x15).to_string(), "OPCODE_0x15");
    }

    #[test]
    fn roce_wire_md_table() {
        let i = OpCode::RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE.info().unwrap();
        assert!(i.headers.reth && i.headers.immdt && i.has_payload);
        assert_eq!(i.header_len(), 12 + 16 + 4);
        let i = OpCode::RC_ATOMIC_ACKNOWLEDGE.info().unwrap();
        assert!(i.headers.aeth && i.headers.atomic_ack_eth && !i.has_payload);
        let i = OpCode::UD_SEND_ONLY_WITH_IMMEDIATE.info().unwrap();
        assert!(i.headers.deth && i.headers.immdt);
        assert_eq!(i.header_len(), 12 + 8 + 4);
        let i = OpCode::RC_RDMA_READ_REQUEST.info().unwrap();
        assert!(i.headers.reth && !i.has_payload);
        assert_eq!(OpCode(0x2c).info(), None); // UC has no READ
        assert_eq!(OpCode(0x66).info(), None);
    }

    #[test]
    fn from_parts_inverts_info() {
        for op in OpCode::all_known() {
            let i = op.info().unwrap();
            assert_eq!(
                OpCode::from_parts(i.transport, i.operation, i.position),
                Some(op)
            );
        }
        assert_eq!(
            OpCode::from_parts(Transport::Uc, Operation::RdmaReadRequest, Position::Only),
            None
        );
    }
}
