//! Base Transport Header (12 bytes), the first header of every RoCEv2 packet.
//!
//! ```text
//! byte 0     OpCode
//! byte 1     SE(1) M(1) PadCnt(2) TVer(4)
//! bytes 2-3  P_Key
//! byte 4     FECN(1) BECN(1) reserved(6)
//! bytes 5-7  DestQP
//! byte 8     AckReq(1) reserved(7)
//! bytes 9-11 PSN
//! ```

use core::fmt;

use crate::opcode::OpCode;
use crate::view::view;
use crate::Result;

mod field {
    use crate::field::{Field, Rest};
    pub const OPCODE: usize = 0;
    pub const FLAGS: usize = 1;
    pub const PKEY: Field = 2..4;
    pub const FECN_BECN: usize = 4;
    pub const DEST_QP: Field = 5..8;
    pub const ACK_REQ: usize = 8;
    pub const PSN: Field = 9..12;
    pub const PAYLOAD: Rest = 12..;
}

/// Length of the BTH.
pub const HEADER_LEN: usize = field::PAYLOAD.start;

/// The default partition key.
pub const DEFAULT_PKEY: u16 = 0xffff;

view!(a "BTH", HEADER_LEN, "12 bytes");

fn u24(d: &[u8]) -> u32 {
    u32::from_be_bytes([0, d[0], d[1], d[2]])
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// OpCode.
    pub fn opcode(&self) -> OpCode {
        OpCode(self.buffer.as_ref()[field::OPCODE])
    }

    /// Solicited Event.
    pub fn solicited(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & 0x80 != 0
    }

    /// MigReq.
    pub fn mig_req(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & 0x40 != 0
    }

    /// Pad count (0..=3 bytes between payload and ICRC).
    pub fn pad_count(&self) -> u8 {
        (self.buffer.as_ref()[field::FLAGS] >> 4) & 0x3
    }

    /// Transport header version (0).
    pub fn tver(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS] & 0x0f
    }

    /// Partition key.
    pub fn pkey(&self) -> u16 {
        let d = &self.buffer.as_ref()[field::PKEY];
        u16::from_be_bytes([d[0], d[1]])
    }

    /// Forward explicit congestion notification.
    pub fn fecn(&self) -> bool {
        self.buffer.as_ref()[field::FECN_BECN] & 0x80 != 0
    }

    /// Backward explicit congestion notification.
    pub fn becn(&self) -> bool {
        self.buffer.as_ref()[field::FECN_BECN] & 0x40 != 0
    }

    /// The 6 reserved bits of byte 4 (0 on the wire).
    pub fn resv6(&self) -> u8 {
        self.buffer.as_ref()[field::FECN_BECN] & 0x3f
    }

    /// Destination QP number (24 bits).
    pub fn dest_qp(&self) -> u32 {
        u24(&self.buffer.as_ref()[field::DEST_QP])
    }

    /// Acknowledge request.
    pub fn ack_req(&self) -> bool {
        self.buffer.as_ref()[field::ACK_REQ] & 0x80 != 0
    }

    /// The 7 reserved bits of byte 8 (0 on the wire).
    pub fn resv7(&self) -> u8 {
        self.buffer.as_ref()[field::ACK_REQ] & 0x7f
    }

    /// Packet sequence number (24 bits).
    pub fn psn(&self) -> u32 {
        u24(&self.buffer.as_ref()[field::PSN])
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The bytes after the BTH.
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn set_bit(&mut self, index: usize, mask: u8, value: bool) {
        let b = &mut self.buffer.as_mut()[index];
        *b = if value { *b | mask } else { *b & !mask };
    }

    fn set_u24(&mut self, f: core::ops::Range<usize>, value: u32) {
        self.buffer.as_mut()[f].copy_from_slice(&value.to_be_bytes()[1..]);
    }

    /// Set the OpCode.
    pub fn set_opcode(&mut self, value: OpCode) {
        self.buffer.as_mut()[field::OPCODE] = value.0
    }

    /// Set Solicited Event.
    pub fn set_solicited(&mut self, value: bool) {
        self.set_bit(field::FLAGS, 0x80, value)
    }

    /// Set MigReq.
    pub fn set_mig_req(&mut self, value: bool) {
        self.set_bit(field::FLAGS, 0x40, value)
    }

    /// Set the pad count (low 2 bits of `value`).
    pub fn set_pad_count(&mut self, value: u8) {
        let b = &mut self.buffer.as_mut()[field::FLAGS];
        *b = (*b & !0x30) | ((value & 3) << 4);
    }

    /// Set the transport header version (low 4 bits of `value`).
    pub fn set_tver(&mut self, value: u8) {
        let b = &mut self.buffer.as_mut()[field::FLAGS];
        *b = (*b & 0xf0) | (value & 0x0f);
    }

    /// Set the partition key.
    pub fn set_pkey(&mut self, value: u16) {
        self.buffer.as_mut()[field::PKEY].copy_from_slice(&value.to_be_bytes())
    }

    /// Set FECN.
    pub fn set_fecn(&mut self, value: bool) {
        self.set_bit(field::FECN_BECN, 0x80, value)
    }

    /// Set BECN.
    pub fn set_becn(&mut self, value: bool) {
        self.set_bit(field::FECN_BECN, 0x40, value)
    }

    /// Set the 6 reserved bits of byte 4.
    pub fn set_resv6(&mut self, value: u8) {
        let b = &mut self.buffer.as_mut()[field::FECN_BECN];
        *b = (*b & 0xc0) | (value & 0x3f);
    }

    /// Set the destination QP (low 24 bits of `value`).
    pub fn set_dest_qp(&mut self, value: u32) {
        self.set_u24(field::DEST_QP, value)
    }

    /// Set AckReq.
    pub fn set_ack_req(&mut self, value: bool) {
        self.set_bit(field::ACK_REQ, 0x80, value)
    }

    /// Set the 7 reserved bits of byte 8.
    pub fn set_resv7(&mut self, value: u8) {
        let b = &mut self.buffer.as_mut()[field::ACK_REQ];
        *b = (*b & 0x80) | (value & 0x7f);
    }

    /// Set the PSN (low 24 bits of `value`).
    pub fn set_psn(&mut self, value: u32) {
        self.set_u24(field::PSN, value)
    }

    /// A mutable view of the bytes after the BTH.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD]
    }
}

/// A high-level representation of a BTH. Reserved bits are dropped by `parse`
/// and written as zero by `emit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// OpCode.
    pub opcode: OpCode,
    /// Solicited Event.
    pub solicited: bool,
    /// MigReq (0 in the rxe captures).
    pub mig_req: bool,
    /// Pad count (0..=3). [`crate::roce::Repr::emit`] computes it from the payload.
    pub pad_count: u8,
    /// Transport header version (0).
    pub tver: u8,
    /// Partition key (default 0xffff).
    pub pkey: u16,
    /// FECN.
    pub fecn: bool,
    /// BECN.
    pub becn: bool,
    /// Destination QP (24 bits).
    pub dest_qp: u32,
    /// AckReq.
    pub ack_req: bool,
    /// PSN (24 bits).
    pub psn: u32,
}

impl Repr {
    /// Parse a BTH. Any opcode byte is accepted here.
    ///
    /// # Errors
    /// [`crate::Error::Truncated`] if shorter than 12 bytes.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr {
            opcode: packet.opcode(),
            solicited: packet.solicited(),
            mig_req: packet.mig_req(),
            pad_count: packet.pad_count(),
            tver: packet.tver(),
            pkey: packet.pkey(),
            fecn: packet.fecn(),
            becn: packet.becn(),
            dest_qp: packet.dest_qp(),
            ack_req: packet.ack_req(),
            psn: packet.psn(),
        })
    }

    /// The length of the header this Repr emits (12).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Emit the BTH into a buffer of at least 12 bytes. Values wider than their
    /// field are truncated to it.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_opcode(self.opcode);
        let flags = if self.solicited { 0x80 } else { 0 }
            | if self.mig_req { 0x40 } else { 0 }
            | ((self.pad_count & 3) << 4)
            | (self.tver & 0x0f);
        packet.buffer.as_mut()[field::FLAGS] = flags;
        packet.set_pkey(self.pkey);
        packet.buffer.as_mut()[field::FECN_BECN] =
            if self.fecn { 0x80 } else { 0 } | if self.becn { 0x40 } else { 0 };
        packet.set_dest_qp(self.dest_qp);
        packet.buffer.as_mut()[field::ACK_REQ] = if self.ack_req { 0x80 } else { 0 };
        packet.set_psn(self.psn);
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "{} qp 0x{:06x} psn {}",
            self.opcode, self.dest_qp, self.psn
        )?;
        if self.ack_req {
            write!(f, " A")?;
        }
        if self.solicited {
            write!(f, " SE")?;
        }
        if self.mig_req {
            write!(f, " M")?;
        }
        if self.fecn {
            write!(f, " FECN")?;
        }
        if self.becn {
            write!(f, " BECN")?;
        }
        if self.pkey != DEFAULT_PKEY {
            write!(f, " pkey 0x{:04x}", self.pkey)?;
        }
        if self.pad_count != 0 {
            write!(f, " pad {}", self.pad_count)?;
        }
        if self.tver != 0 {
            write!(f, " tver {}", self.tver)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    // BTH of frame 1 of rc_pingpong-s64.pcap: RC SEND_ONLY to QP 0x11, AckReq,
    // PSN 0x5ab4a9.
    static BTH_RC_PINGPONG_S64: [u8; 12] = [
        0x04, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x80, 0x5a, 0xb4, 0xa9,
    ];

    fn repr() -> Repr {
        Repr {
            opcode: OpCode::RC_SEND_ONLY,
            pkey: 0xffff,
            dest_qp: 0x11,
            ack_req: true,
            psn: 0x5ab4a9,
            ..Repr::default()
        }
    }

    #[test]
    fn deconstruct_rc_pingpong_s64() {
        let p = Packet::new_checked(&BTH_RC_PINGPONG_S64[..]).unwrap();
        assert_eq!(p.opcode(), OpCode::RC_SEND_ONLY);
        assert!(!p.solicited());
        assert!(!p.mig_req());
        assert_eq!(p.pad_count(), 0);
        assert_eq!(p.tver(), 0);
        assert_eq!(p.pkey(), 0xffff);
        assert!(!p.fecn());
        assert!(!p.becn());
        assert_eq!(p.resv6(), 0);
        assert_eq!(p.dest_qp(), 0x11);
        assert!(p.ack_req());
        assert_eq!(p.resv7(), 0);
        assert_eq!(p.psn(), 0x5ab4a9);
        assert!(p.payload().is_empty());
    }

    #[test]
    fn construct_rc_pingpong_s64() {
        let mut bytes = [0xa5u8; 12];
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        p.set_opcode(OpCode::RC_SEND_ONLY);
        p.set_solicited(false);
        p.set_mig_req(false);
        p.set_pad_count(0);
        p.set_tver(0);
        p.set_pkey(0xffff);
        p.set_fecn(false);
        p.set_becn(false);
        p.set_resv6(0);
        p.set_dest_qp(0x11);
        p.set_ack_req(true);
        p.set_resv7(0);
        p.set_psn(0x5ab4a9);
        assert_eq!(bytes, BTH_RC_PINGPONG_S64);
    }

    #[test]
    fn parse_rc_pingpong_s64() {
        let p = Packet::new_checked(&BTH_RC_PINGPONG_S64[..]).unwrap();
        assert_eq!(Repr::parse(&p).unwrap(), repr());
    }

    #[test]
    fn emit_rc_pingpong_s64() {
        let mut bytes = [0xa5u8; 12];
        repr().emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, BTH_RC_PINGPONG_S64);
    }

    #[test]
    fn truncated() {
        assert_eq!(
            Packet::new_checked(&BTH_RC_PINGPONG_S64[..11]).unwrap_err(),
            Error::Truncated
        );
    }
}
