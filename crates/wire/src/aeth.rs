//! ACK Extended Transport Header (4 bytes): syndrome and MSN.
//!
//! Syndrome bit 7 is 0; bits 6:5 are the type (00 ACK, 01 RNR NAK, 11 NAK);
//! the low 5 bits are the credit count (ACK), the RNR timer code (RNR NAK) or the
//! NAK code (NAK).

use core::fmt;

use crate::view::view;
use crate::Result;

mod field {
    use crate::field::{Field, Rest};
    pub const SYNDROME: usize = 0;
    pub const MSN: Field = 1..4;
    pub const PAYLOAD: Rest = 4..;
}

/// Length of the AETH.
pub const HEADER_LEN: usize = field::PAYLOAD.start;

/// Credit count code meaning "no flow control" (what rxe always sends).
pub const CREDITS_UNLIMITED: u8 = 31;

/// A NAK code (the low 5 bits of a NAK syndrome, 0x60 | code).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum NakCode {
    /// 0: PSN sequence error.
    PsnSequenceError,
    /// 1: invalid request.
    InvalidRequest,
    /// 2: remote access error.
    RemoteAccessError,
    /// 3: remote operational error.
    RemoteOperationalError,
    /// 4: invalid RD request.
    InvalidRdRequest,
    /// Any other (reserved) code.
    Reserved(u8),
}

impl NakCode {
    /// From the low 5 bits of the syndrome.
    #[inline]
    pub fn from_bits(code: u8) -> NakCode {
        match code & 0x1f {
            0 => NakCode::PsnSequenceError,
            1 => NakCode::InvalidRequest,
            2 => NakCode::RemoteAccessError,
            3 => NakCode::RemoteOperationalError,
            4 => NakCode::InvalidRdRequest,
            c => NakCode::Reserved(c),
        }
    }

    /// The low 5 bits of the syndrome.
    #[inline]
    pub fn bits(self) -> u8 {
        match self {
            NakCode::PsnSequenceError => 0,
            NakCode::InvalidRequest => 1,
            NakCode::RemoteAccessError => 2,
            NakCode::RemoteOperationalError => 3,
            NakCode::InvalidRdRequest => 4,
            NakCode::Reserved(c) => c & 0x1f,
        }
    }

    /// A short name, e.g. `PSN_SEQ_ERROR`.
    pub fn name(self) -> &'static str {
        match self {
            NakCode::PsnSequenceError => "PSN_SEQ_ERROR",
            NakCode::InvalidRequest => "INVALID_REQUEST",
            NakCode::RemoteAccessError => "REMOTE_ACCESS_ERROR",
            NakCode::RemoteOperationalError => "REMOTE_OPERATIONAL_ERROR",
            NakCode::InvalidRdRequest => "INVALID_RD_REQUEST",
            NakCode::Reserved(crate::cma::NAK_DECLINE) => "SOFT_SAME_HOST_DECLINE",
            NakCode::Reserved(_) => "RESERVED",
        }
    }
}

/// What an AETH syndrome says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum AethKind {
    /// ACK with a credit count code (31 = unlimited).
    Ack {
        /// Credit count code.
        credits: u8,
    },
    /// RNR NAK with a timer code (see [`rnr_timer_micros`]).
    RnrNak {
        /// RNR timer code (0..=31).
        timer: u8,
    },
    /// NAK with a code.
    Nak(NakCode),
    /// Type 10 (reserved) or bit 7 set: the raw syndrome.
    Reserved(u8),
}

impl AethKind {
    /// Decode a syndrome byte.
    #[inline]
    pub fn from_syndrome(syndrome: u8) -> AethKind {
        if syndrome & 0x80 != 0 {
            return AethKind::Reserved(syndrome);
        }
        let low = syndrome & 0x1f;
        match (syndrome >> 5) & 3 {
            0 => AethKind::Ack { credits: low },
            1 => AethKind::RnrNak { timer: low },
            3 => AethKind::Nak(NakCode::from_bits(low)),
            _ => AethKind::Reserved(syndrome),
        }
    }

    /// Encode as a syndrome byte.
    #[inline]
    pub fn syndrome(self) -> u8 {
        match self {
            AethKind::Ack { credits } => credits & 0x1f,
            AethKind::RnrNak { timer } => 0x20 | (timer & 0x1f),
            AethKind::Nak(code) => 0x60 | code.bits(),
            AethKind::Reserved(s) => s,
        }
    }
}

/// The RNR NAK timer field encoding (IBTA table 45), in microseconds:
/// code 0 = 655.36 ms, 1 = 0.01 ms, ..., 14 = 1.28 ms, ..., 31 = 491.52 ms.
pub fn rnr_timer_micros(code: u8) -> u32 {
    const TABLE: [u32; 32] = [
        655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1_280, 1_920, 2_560,
        3_840, 5_120, 7_680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880,
        163_840, 245_760, 327_680, 491_520,
    ];
    TABLE[usize::from(code & 0x1f)]
}

view!(an "AETH", HEADER_LEN, "4 bytes");

impl<T: AsRef<[u8]>> Packet<T> {
    /// Syndrome byte.
    pub fn syndrome(&self) -> u8 {
        self.buffer.as_ref()[field::SYNDROME]
    }

    /// Message sequence number (24 bits).
    pub fn msn(&self) -> u32 {
        let d = &self.buffer.as_ref()[field::MSN];
        u32::from_be_bytes([0, d[0], d[1], d[2]])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the syndrome byte.
    pub fn set_syndrome(&mut self, value: u8) {
        self.buffer.as_mut()[field::SYNDROME] = value
    }

    /// Set the MSN (low 24 bits).
    pub fn set_msn(&mut self, value: u32) {
        self.buffer.as_mut()[field::MSN].copy_from_slice(&value.to_be_bytes()[1..])
    }
}

/// A high-level representation of an AETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// ACK / RNR NAK / NAK and its code.
    pub kind: AethKind,
    /// Message sequence number (24 bits).
    pub msn: u32,
}

impl Repr {
    /// Parse an AETH.
    ///
    /// # Errors
    /// [`crate::Error::Truncated`] if shorter than 4 bytes.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr {
            kind: AethKind::from_syndrome(packet.syndrome()),
            msn: packet.msn(),
        })
    }

    /// The length of the header this Repr emits (4).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Emit the AETH into a buffer of at least 4 bytes.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_syndrome(self.kind.syndrome());
        packet.set_msn(self.msn);
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self.kind {
            AethKind::Ack { credits } => write!(f, "AETH ACK credits {credits}")?,
            AethKind::RnrNak { timer } => write!(
                f,
                "AETH RNR_NAK timer {timer} ({} us)",
                rnr_timer_micros(timer)
            )?,
            AethKind::Nak(code) => write!(f, "AETH NAK {}", code.name())?,
            AethKind::Reserved(s) => write!(f, "AETH syndrome 0x{s:02x}")?,
        }
        write!(f, " msn {}", self.msn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // AETH of frame 11 of write_bw-s8192.pcap (RC ACKNOWLEDGE, unlimited credits, MSN 1).
    static AETH_WRITE_BW_S8192: [u8; 4] = [0x1f, 0x00, 0x00, 0x01];

    fn repr() -> Repr {
        Repr {
            kind: AethKind::Ack { credits: 31 },
            msn: 1,
        }
    }

    #[test]
    fn deconstruct_write_bw_s8192() {
        let p = Packet::new_checked(&AETH_WRITE_BW_S8192[..]).unwrap();
        assert_eq!(p.syndrome(), 0x1f);
        assert_eq!(p.msn(), 1);
    }

    #[test]
    fn construct_write_bw_s8192() {
        let mut bytes = [0xa5u8; 4];
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        p.set_syndrome(0x1f);
        p.set_msn(1);
        assert_eq!(bytes, AETH_WRITE_BW_S8192);
    }

    #[test]
    fn parse_write_bw_s8192() {
        let p = Packet::new_checked(&AETH_WRITE_BW_S8192[..]).unwrap();
        assert_eq!(Repr::parse(&p).unwrap(), repr());
    }

    #[test]
    fn emit_write_bw_s8192() {
        let mut bytes = [0xa5u8; 4];
        repr().emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, AETH_WRITE_BW_S8192);
    }

    #[test]
    fn syndromes_from_roce_wire_md() {
        assert_eq!(
            AethKind::from_syndrome(0x60),
            AethKind::Nak(NakCode::PsnSequenceError)
        );
        assert_eq!(
            AethKind::from_syndrome(0x61),
            AethKind::Nak(NakCode::InvalidRequest)
        );
        assert_eq!(
            AethKind::from_syndrome(0x62),
            AethKind::Nak(NakCode::RemoteAccessError)
        );
        assert_eq!(
            AethKind::from_syndrome(0x63),
            AethKind::Nak(NakCode::RemoteOperationalError)
        );
        assert_eq!(
            AethKind::from_syndrome(0x2e),
            AethKind::RnrNak { timer: 14 }
        );
        assert_eq!(rnr_timer_micros(14), 1_280);
        assert_eq!(rnr_timer_micros(0), 655_360);
        assert_eq!(rnr_timer_micros(31), 491_520);
        for s in 0..=255u8 {
            assert_eq!(AethKind::from_syndrome(s).syndrome(), s);
        }
    }
}
