//! A whole RoCEv2 transport packet: the UDP payload on port 4791.
//!
//! ```text
//! BTH 12 | DETH | RETH | AtomicETH | AETH | AtomicAckETH | ImmDt | IETH | payload | pad 0-3 | ICRC 4
//! ```
//! Which extension headers are present follows from the opcode ([`crate::opcode`]).
//! The ICRC covers parts of the IP and UDP headers too, so it is computed by
//! [`crate::icrc`] (or by [`crate::frame::Repr::emit`]); this module only reads and
//! writes its 4 bytes.
//!
//! A RoCEv2 UDP payload is either a transport packet of the RC/UC/UD table
//! ([`Repr`]) or a congestion notification packet ([`crate::cnp`]): a receive
//! path that must take both parses with [`Kind`]. [`Repr::parse`] keeps
//! refusing a CNP ([`Error::Unsupported`], its opcode is in no table).

use core::fmt;

use crate::opcode::{OpCode, OpInfo};
use crate::view::{len_at_least, view};
use crate::{aeth, atomic_ack_eth, atomic_eth, bth, cnp, deth, ieth, immdt, reth};
use crate::{Error, Result};

/// Length of the ICRC trailer.
pub const ICRC_LEN: usize = 4;

/// The smallest possible RoCE packet: BTH + ICRC.
pub const MIN_LEN: usize = bth::HEADER_LEN + ICRC_LEN;

/// Pad bytes needed after a payload of `payload_len` bytes (0..=3).
pub const fn pad_len(payload_len: usize) -> u8 {
    ((4 - payload_len % 4) % 4) as u8
}

/// Byte offsets of each extension header after the BTH, for one opcode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Layout {
    deth: Option<usize>,
    reth: Option<usize>,
    atomic_eth: Option<usize>,
    aeth: Option<usize>,
    atomic_ack_eth: Option<usize>,
    immdt: Option<usize>,
    ieth: Option<usize>,
    header_len: usize,
}

impl Layout {
    fn of(info: &OpInfo) -> Layout {
        let h = info.headers;
        let mut at = bth::HEADER_LEN;
        let mut take = |present: bool, len: usize| {
            if present {
                let here = at;
                at += len;
                Some(here)
            } else {
                None
            }
        };
        let deth = take(h.deth, deth::HEADER_LEN);
        let reth = take(h.reth, reth::HEADER_LEN);
        let atomic_eth = take(h.atomic_eth, atomic_eth::HEADER_LEN);
        let aeth = take(h.aeth, aeth::HEADER_LEN);
        let atomic_ack_eth = take(h.atomic_ack_eth, atomic_ack_eth::HEADER_LEN);
        let immdt = take(h.immdt, immdt::HEADER_LEN);
        let ieth = take(h.ieth, ieth::HEADER_LEN);
        Layout {
            deth,
            reth,
            atomic_eth,
            aeth,
            atomic_ack_eth,
            immdt,
            ieth,
            header_len: at,
        }
    }
}

/// What a RoCEv2 UDP payload holds: a transport packet or a CNP. The entry
/// point of a receive path that takes congestion notifications too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind<'a> {
    /// A transport packet of the RC/UC/UD opcode table.
    Transport(Repr<'a>),
    /// A congestion notification packet (opcode 0x81).
    Cnp(cnp::Repr),
}

impl<'a> Kind<'a> {
    /// Parse a whole UDP payload (BTH through ICRC; the ICRC is not checked
    /// here, see [`crate::icrc`]): a CNP when the opcode is 0x81, otherwise
    /// as [`Repr::parse`].
    ///
    /// # Errors
    /// As [`Repr::parse`] or [`cnp::Repr::parse`].
    pub fn parse(bytes: &'a [u8]) -> Result<Kind<'a>> {
        if bytes.first() == Some(&OpCode::CNP.0) {
            cnp::Repr::parse(&cnp::Packet::new_checked(bytes)?).map(Kind::Cnp)
        } else {
            Repr::parse(&Packet::new_checked(bytes)?).map(Kind::Transport)
        }
    }

    /// Parse a packet without its ICRC slot (BTH through pad, or a CNP's BTH
    /// and reserved bytes): what a protocol engine sees.
    ///
    /// # Errors
    /// As [`Repr::parse_without_icrc`] or [`cnp::Repr::parse_without_icrc`].
    #[inline]
    pub fn parse_without_icrc(bytes: &'a [u8]) -> Result<Kind<'a>> {
        if bytes.first() == Some(&OpCode::CNP.0) {
            cnp::Repr::parse_without_icrc(bytes).map(Kind::Cnp)
        } else {
            Repr::parse_without_icrc(bytes).map(Kind::Transport)
        }
    }

    /// The BTH.
    pub fn bth(&self) -> bth::Repr {
        match self {
            Kind::Transport(r) => r.bth,
            Kind::Cnp(c) => c.bth(),
        }
    }
}

impl fmt::Display for Kind<'_> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Kind::Transport(r) => r.fmt(f),
            Kind::Cnp(c) => c.fmt(f),
        }
    }
}

view!(a "RoCEv2 transport packet (BTH through ICRC)");

impl<T: AsRef<[u8]>> Packet<T> {
    /// Ensure that no accessor method will panic if called.
    ///
    /// # Errors
    /// [`Error::Truncated`] if the buffer is shorter than the BTH, or than the
    /// headers of its opcode plus pad plus ICRC; [`Error::Unsupported`] if the
    /// opcode is not in the RC/UC/UD table.
    pub fn check_len(&self) -> Result<()> {
        let len = len_at_least(self.buffer.as_ref(), bth::HEADER_LEN)?;
        let layout = self.layout().ok_or(Error::Unsupported)?;
        if len < layout.header_len + usize::from(self.bth().pad_count()) + ICRC_LEN {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    fn layout(&self) -> Option<Layout> {
        self.info().map(|i| Layout::of(&i))
    }

    fn at(&self, offset: Option<usize>) -> Option<&[u8]> {
        offset.map(|o| &self.buffer.as_ref()[o..])
    }

    /// A view of the BTH.
    pub fn bth(&self) -> bth::Packet<&[u8]> {
        bth::Packet::new_unchecked(self.buffer.as_ref())
    }

    /// The opcode's table entry (`None` for an unknown opcode).
    pub fn info(&self) -> Option<OpInfo> {
        OpCode(self.buffer.as_ref()[0]).info()
    }

    /// Length of BTH + extension headers.
    pub fn header_len(&self) -> usize {
        self.layout().map_or(bth::HEADER_LEN, |l| l.header_len)
    }

    /// The DETH, if the opcode carries one.
    pub fn deth(&self) -> Option<deth::Packet<&[u8]>> {
        self.at(self.layout()?.deth)
            .map(deth::Packet::new_unchecked)
    }

    /// The RETH, if the opcode carries one.
    pub fn reth(&self) -> Option<reth::Packet<&[u8]>> {
        self.at(self.layout()?.reth)
            .map(reth::Packet::new_unchecked)
    }

    /// The AtomicETH, if the opcode carries one.
    pub fn atomic_eth(&self) -> Option<atomic_eth::Packet<&[u8]>> {
        self.at(self.layout()?.atomic_eth)
            .map(atomic_eth::Packet::new_unchecked)
    }

    /// The AETH, if the opcode carries one.
    pub fn aeth(&self) -> Option<aeth::Packet<&[u8]>> {
        self.at(self.layout()?.aeth)
            .map(aeth::Packet::new_unchecked)
    }

    /// The AtomicAckETH, if the opcode carries one.
    pub fn atomic_ack_eth(&self) -> Option<atomic_ack_eth::Packet<&[u8]>> {
        self.at(self.layout()?.atomic_ack_eth)
            .map(atomic_ack_eth::Packet::new_unchecked)
    }

    /// The ImmDt, if the opcode carries one.
    pub fn immdt(&self) -> Option<immdt::Packet<&[u8]>> {
        self.at(self.layout()?.immdt)
            .map(immdt::Packet::new_unchecked)
    }

    /// The IETH, if the opcode carries one.
    pub fn ieth(&self) -> Option<ieth::Packet<&[u8]>> {
        self.at(self.layout()?.ieth)
            .map(ieth::Packet::new_unchecked)
    }

    fn payload_range(&self) -> core::ops::Range<usize> {
        let len = self.buffer.as_ref().len();
        let start = self.header_len();
        let end = len - ICRC_LEN - usize::from(self.bth().pad_count());
        start..end
    }

    /// The payload (between the headers and the pad).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.payload_range()]
    }

    /// The pad bytes.
    pub fn pad(&self) -> &[u8] {
        let len = self.buffer.as_ref().len();
        &self.buffer.as_ref()[self.payload_range().end..len - ICRC_LEN]
    }

    /// Everything the ICRC covers after the UDP header: BTH through pad.
    pub fn without_icrc(&self) -> &[u8] {
        let len = self.buffer.as_ref().len();
        &self.buffer.as_ref()[..len - ICRC_LEN]
    }

    /// The ICRC as the CRC value (the wire carries it least-significant byte first).
    pub fn icrc(&self) -> u32 {
        let d = self.buffer.as_ref();
        let t = &d[d.len() - ICRC_LEN..];
        u32::from_le_bytes([t[0], t[1], t[2], t[3]])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// A mutable view of the BTH.
    pub fn bth_mut(&mut self) -> bth::Packet<&mut [u8]> {
        bth::Packet::new_unchecked(self.buffer.as_mut())
    }

    /// A mutable view of the payload.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let range = self.payload_range();
        &mut self.buffer.as_mut()[range]
    }

    /// Write the ICRC (least-significant byte first).
    pub fn set_icrc(&mut self, value: u32) {
        let d = self.buffer.as_mut();
        let len = d.len();
        d[len - ICRC_LEN..].copy_from_slice(&value.to_le_bytes())
    }
}

/// A high-level representation of a RoCE transport packet.
///
/// Exactly the extension headers the opcode carries are `Some`. `bth.pad_count`
/// is what the wire said after `parse`; `emit` writes `pad_len(payload.len())`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr<'a> {
    /// Base transport header.
    pub bth: bth::Repr,
    /// DETH (UD).
    pub deth: Option<deth::Repr>,
    /// RETH.
    pub reth: Option<reth::Repr>,
    /// AtomicETH.
    pub atomic_eth: Option<atomic_eth::Repr>,
    /// AETH.
    pub aeth: Option<aeth::Repr>,
    /// AtomicAckETH.
    pub atomic_ack_eth: Option<atomic_ack_eth::Repr>,
    /// ImmDt.
    pub immdt: Option<immdt::Repr>,
    /// IETH.
    pub ieth: Option<ieth::Repr>,
    /// Payload (without pad).
    pub payload: &'a [u8],
}

impl<'a> Repr<'a> {
    /// Parse a RoCE packet (BTH through ICRC; the ICRC is not checked here, see
    /// [`crate::icrc`]).
    ///
    /// # Errors
    /// From `check_len`; [`Error::Malformed`] if an opcode without payload has
    /// payload bytes, or payload + pad is not a multiple of 4.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&'a T>) -> Result<Repr<'a>> {
        Self::parse_before(packet.buffer.as_ref(), ICRC_LEN)
    }

    /// Parse a transport packet without its ICRC slot (BTH through pad: what a
    /// protocol engine sees; its driver checks and strips the ICRC).
    ///
    /// # Errors
    /// As [`Repr::parse`].
    #[inline]
    pub fn parse_without_icrc(bytes: &'a [u8]) -> Result<Repr<'a>> {
        Self::parse_before(bytes, 0)
    }

    /// Parse `bytes`, whose last `trailer` bytes follow the pad.
    #[inline]
    fn parse_before(bytes: &'a [u8], trailer: usize) -> Result<Repr<'a>> {
        if bytes.len() < bth::HEADER_LEN {
            return Err(Error::Truncated);
        }
        let info = OpCode(bytes[0]).info().ok_or(Error::Unsupported)?;
        let layout = Layout::of(&info);
        let bth = bth::Packet::new_unchecked(bytes);
        let pad = usize::from(bth.pad_count());
        if bytes.len() < layout.header_len + pad + trailer {
            return Err(Error::Truncated);
        }
        let payload: &'a [u8] = &bytes[layout.header_len..bytes.len() - trailer - pad];
        if (!info.has_payload && !payload.is_empty()) || (payload.len() + pad) % 4 != 0 {
            return Err(Error::Malformed);
        }
        // Each header below lies inside the layout checked above; the views
        // get exactly their header's bytes, so their getters need no bounds
        // checks of their own.
        let at = |o: Option<usize>, len: usize| o.map(|o| &bytes[o..o + len]);
        Ok(Repr {
            bth: bth::Repr::parse(&bth::Packet::new_unchecked(&bytes[..bth::HEADER_LEN]))?,
            deth: at(layout.deth, deth::HEADER_LEN)
                .map(|b| deth::Repr::parse(&deth::Packet::new_unchecked(b)))
                .transpose()?,
            reth: at(layout.reth, reth::HEADER_LEN)
                .map(|b| reth::Repr::parse(&reth::Packet::new_unchecked(b)))
                .transpose()?,
            atomic_eth: at(layout.atomic_eth, atomic_eth::HEADER_LEN)
                .map(|b| atomic_eth::Repr::parse(&atomic_eth::Packet::new_unchecked(b)))
                .transpose()?,
            aeth: at(layout.aeth, aeth::HEADER_LEN)
                .map(|b| aeth::Repr::parse(&aeth::Packet::new_unchecked(b)))
                .transpose()?,
            atomic_ack_eth: at(layout.atomic_ack_eth, atomic_ack_eth::HEADER_LEN)
                .map(|b| atomic_ack_eth::Repr::parse(&atomic_ack_eth::Packet::new_unchecked(b)))
                .transpose()?,
            immdt: at(layout.immdt, immdt::HEADER_LEN)
                .map(|b| immdt::Repr::parse(&immdt::Packet::new_unchecked(b)))
                .transpose()?,
            ieth: at(layout.ieth, ieth::HEADER_LEN)
                .map(|b| ieth::Repr::parse(&ieth::Packet::new_unchecked(b)))
                .transpose()?,
            payload,
        })
    }

    /// A Repr for `opcode` with default BTH fields (P_Key 0xffff), no extension
    /// headers and no payload: fill in what the opcode needs.
    pub fn new(opcode: OpCode, dest_qp: u32, psn: u32) -> Repr<'a> {
        Repr {
            bth: bth::Repr {
                opcode,
                pkey: bth::DEFAULT_PKEY,
                dest_qp,
                psn,
                ..bth::Repr::default()
            },
            ..Repr::default()
        }
    }

    /// [`Repr::new`] with every extension header of `opcode` present and
    /// zeroed (an AETH's syndrome too): set the fields that matter. No
    /// payload.
    ///
    /// # Errors
    /// [`Error::Unsupported`] for an opcode not in the RC/UC/UD table.
    pub fn with_zeroed_headers(opcode: OpCode, dest_qp: u32, psn: u32) -> Result<Repr<'a>> {
        let h = opcode.info().ok_or(Error::Unsupported)?.headers;
        Ok(Repr {
            deth: h.deth.then_some(deth::Repr { qkey: 0, src_qp: 0 }),
            reth: h.reth.then_some(reth::Repr {
                va: 0,
                rkey: 0,
                dma_len: 0,
            }),
            atomic_eth: h.atomic_eth.then_some(atomic_eth::Repr {
                va: 0,
                rkey: 0,
                swap_add: 0,
                compare: 0,
            }),
            aeth: h.aeth.then_some(aeth::Repr {
                kind: aeth::AethKind::from_syndrome(0),
                msn: 0,
            }),
            atomic_ack_eth: h
                .atomic_ack_eth
                .then_some(atomic_ack_eth::Repr { orig_value: 0 }),
            immdt: h.immdt.then_some(immdt::Repr { imm: 0 }),
            ieth: h.ieth.then_some(ieth::Repr { rkey: 0 }),
            ..Repr::new(opcode, dest_qp, psn)
        })
    }

    /// The opcode's table entry.
    ///
    /// # Errors
    /// [`Error::Unsupported`] for an opcode not in the RC/UC/UD table.
    #[inline]
    pub fn info(&self) -> Result<OpInfo> {
        self.bth.opcode.info().ok_or(Error::Unsupported)
    }

    /// Check that exactly the extension headers of the opcode are present and that
    /// an opcode without payload has none.
    ///
    /// # Errors
    /// [`Error::Unsupported`] for an unknown opcode, [`Error::Malformed`] otherwise.
    pub fn check(&self) -> Result<()> {
        let info = self.check_headers()?;
        if info.has_payload || self.payload.is_empty() {
            Ok(())
        } else {
            Err(Error::Malformed)
        }
    }

    /// The extension-header half of [`Repr::check`]; the opcode's entry.
    #[inline]
    fn check_headers(&self) -> Result<OpInfo> {
        let info = self.info()?;
        let h = info.headers;
        let ok = h.deth == self.deth.is_some()
            && h.reth == self.reth.is_some()
            && h.atomic_eth == self.atomic_eth.is_some()
            && h.aeth == self.aeth.is_some()
            && h.atomic_ack_eth == self.atomic_ack_eth.is_some()
            && h.immdt == self.immdt.is_some()
            && h.ieth == self.ieth.is_some();
        if ok {
            Ok(info)
        } else {
            Err(Error::Malformed)
        }
    }

    /// BTH + extension headers (of the opcode, or of what is `Some` when the
    /// opcode is unknown).
    #[inline]
    pub fn header_len(&self) -> usize {
        bth::HEADER_LEN
            + self.deth.map_or(0, |h| h.buffer_len())
            + self.reth.map_or(0, |h| h.buffer_len())
            + self.atomic_eth.map_or(0, |h| h.buffer_len())
            + self.aeth.map_or(0, |h| h.buffer_len())
            + self.atomic_ack_eth.map_or(0, |h| h.buffer_len())
            + self.immdt.map_or(0, |h| h.buffer_len())
            + self.ieth.map_or(0, |h| h.buffer_len())
    }

    /// The whole packet length: headers + payload + pad + ICRC.
    pub fn buffer_len(&self) -> usize {
        self.header_len() + self.payload.len() + usize::from(pad_len(self.payload.len())) + ICRC_LEN
    }

    /// Emit the packet into a buffer of exactly [`Repr::buffer_len`] bytes: the
    /// headers, payload, zero pad (with `PadCnt` set to match) and a zero ICRC.
    /// Fill the ICRC with [`crate::icrc`] once the IP and UDP headers are known
    /// (or use [`crate::frame::Repr::emit`], which does everything).
    ///
    /// # Errors
    /// From [`Repr::check`]; [`Error::Truncated`] if the buffer length is not
    /// `buffer_len()`. Nothing is written on error.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) -> Result<()> {
        self.check()?;
        if packet.buffer.as_ref().len() != self.buffer_len() {
            return Err(Error::Truncated);
        }
        let buf = packet.buffer.as_mut();
        let at = self.emit_headers(buf, self.payload.len());
        buf[at..at + self.payload.len()].copy_from_slice(self.payload);
        buf[at + self.payload.len()..].fill(0);
        Ok(())
    }

    /// Emit the headers of a packet whose payload is `payload_len` bytes
    /// (`self.payload` is ignored) and the zero pad after that payload, without
    /// the ICRC slot: what a protocol engine hands its driver, which appends
    /// the ICRC. The payload area is left for the caller to fill in place (no
    /// staging copy). Returns the payload's offset and the packet's length
    /// (headers + payload + pad).
    ///
    /// `payload_len` is not checked against the opcode: a non-zero length on
    /// an opcode without payload gives a malformed packet (which tests of
    /// receivers want to send).
    ///
    /// # Errors
    /// [`Error::Unsupported`] for an unknown opcode, [`Error::Malformed`] if
    /// the extension headers are not the opcode's; [`Error::Truncated`] if
    /// `buf` is shorter than the packet. Nothing is written on error.
    #[inline]
    pub fn emit_header_without_icrc(
        &self,
        buf: &mut [u8],
        payload_len: usize,
    ) -> Result<(usize, usize)> {
        self.check_headers()?;
        let len = self.header_len() + payload_len + usize::from(pad_len(payload_len));
        let buf = buf.get_mut(..len).ok_or(Error::Truncated)?;
        let at = self.emit_headers(buf, payload_len);
        buf[at + payload_len..].fill(0);
        Ok((at, len))
    }

    /// Writes the BTH (pad count for `payload_len`) and the extension headers
    /// into `buf` (long enough: checked by the caller); returns their length.
    #[inline]
    fn emit_headers(&self, buf: &mut [u8], payload_len: usize) -> usize {
        // Each view gets exactly its header's bytes (no bounds check per field).
        let mut b = self.bth;
        b.pad_count = pad_len(payload_len);
        b.emit(&mut bth::Packet::new_unchecked(&mut buf[..bth::HEADER_LEN]));
        let mut at = bth::HEADER_LEN;
        if let Some(h) = self.deth {
            h.emit(&mut deth::Packet::new_unchecked(
                &mut buf[at..at + deth::HEADER_LEN],
            ));
            at += deth::HEADER_LEN;
        }
        if let Some(h) = self.reth {
            h.emit(&mut reth::Packet::new_unchecked(
                &mut buf[at..at + reth::HEADER_LEN],
            ));
            at += reth::HEADER_LEN;
        }
        if let Some(h) = self.atomic_eth {
            let len = atomic_eth::HEADER_LEN;
            h.emit(&mut atomic_eth::Packet::new_unchecked(
                &mut buf[at..at + len],
            ));
            at += len;
        }
        if let Some(h) = self.aeth {
            h.emit(&mut aeth::Packet::new_unchecked(
                &mut buf[at..at + aeth::HEADER_LEN],
            ));
            at += aeth::HEADER_LEN;
        }
        if let Some(h) = self.atomic_ack_eth {
            let len = atomic_ack_eth::HEADER_LEN;
            h.emit(&mut atomic_ack_eth::Packet::new_unchecked(
                &mut buf[at..at + len],
            ));
            at += len;
        }
        if let Some(h) = self.immdt {
            h.emit(&mut immdt::Packet::new_unchecked(
                &mut buf[at..at + immdt::HEADER_LEN],
            ));
            at += immdt::HEADER_LEN;
        }
        if let Some(h) = self.ieth {
            h.emit(&mut ieth::Packet::new_unchecked(
                &mut buf[at..at + ieth::HEADER_LEN],
            ));
            at += ieth::HEADER_LEN;
        }
        at
    }
}

impl fmt::Display for Repr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}", self.bth)?;
        if let Some(h) = self.deth {
            write!(f, ", {h}")?;
        }
        if let Some(h) = self.reth {
            write!(f, ", {h}")?;
        }
        if let Some(h) = self.atomic_eth {
            write!(f, ", {h}")?;
        }
        if let Some(h) = self.aeth {
            write!(f, ", {h}")?;
        }
        if let Some(h) = self.atomic_ack_eth {
            write!(f, ", {h}")?;
        }
        if let Some(h) = self.immdt {
            write!(f, ", {h}")?;
        }
        if let Some(h) = self.ieth {
            write!(f, ", {h}")?;
        }
        write!(f, ", len {}", self.payload.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aeth::AethKind;

    // UDP payload of frame 11 of write_bw-s8192.pcap: RC ACKNOWLEDGE to QP 0x13,
    // PSN 0x14a92a, AETH ACK (31 credits) MSN 1, ICRC bytes 8c 40 d0 63.
    static ACK_WRITE_BW_S8192: [u8; 20] = [
        0x11, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x13, 0x00, 0x14, 0xa9, 0x2a, 0x1f, 0x00, 0x00,
        0x01, 0x8c, 0x40, 0xd0, 0x63,
    ];

    fn repr() -> Repr<'static> {
        Repr {
            aeth: Some(aeth::Repr {
                kind: AethKind::Ack { credits: 31 },
                msn: 1,
            }),
            ..Repr::new(OpCode::RC_ACKNOWLEDGE, 0x13, 0x14a92a)
        }
    }

    #[test]
    fn deconstruct_write_bw_s8192() {
        let p = Packet::new_checked(&ACK_WRITE_BW_S8192[..]).unwrap();
        assert_eq!(p.bth().opcode(), OpCode::RC_ACKNOWLEDGE);
        assert_eq!(p.bth().dest_qp(), 0x13);
        assert_eq!(p.bth().psn(), 0x14a92a);
        assert_eq!(p.header_len(), 16);
        let a = p.aeth().unwrap();
        assert_eq!(a.syndrome(), 0x1f);
        assert_eq!(a.msn(), 1);
        assert!(p.reth().is_none() && p.deth().is_none() && p.immdt().is_none());
        assert!(p.payload().is_empty());
        assert!(p.pad().is_empty());
        assert_eq!(p.icrc().to_le_bytes(), [0x8c, 0x40, 0xd0, 0x63]);
        assert_eq!(p.without_icrc().len(), 16);
    }

    #[test]
    fn construct_write_bw_s8192() {
        let mut bytes = [0xa5u8; 20];
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        {
            let mut b = p.bth_mut();
            b.set_opcode(OpCode::RC_ACKNOWLEDGE);
            b.set_solicited(false);
            b.set_mig_req(false);
            b.set_pad_count(0);
            b.set_tver(0);
            b.set_pkey(0xffff);
            b.set_fecn(false);
            b.set_becn(false);
            b.set_resv6(0);
            b.set_dest_qp(0x13);
            b.set_ack_req(false);
            b.set_resv7(0);
            b.set_psn(0x14a92a);
        }
        let mut a = aeth::Packet::new_unchecked(&mut p.buffer[bth::HEADER_LEN..]);
        a.set_syndrome(0x1f);
        a.set_msn(1);
        p.set_icrc(u32::from_le_bytes([0x8c, 0x40, 0xd0, 0x63]));
        assert_eq!(bytes, ACK_WRITE_BW_S8192);
    }

    #[test]
    fn parse_write_bw_s8192() {
        let p = Packet::new_checked(&ACK_WRITE_BW_S8192[..]).unwrap();
        assert_eq!(Repr::parse(&p).unwrap(), repr());
    }

    #[test]
    fn emit_write_bw_s8192() {
        let r = repr();
        assert_eq!(r.buffer_len(), 20);
        let mut bytes = [0xa5u8; 20];
        r.emit(&mut Packet::new_unchecked(&mut bytes[..])).unwrap();
        // The ICRC needs the IP and UDP headers: emit leaves it zero.
        assert_eq!(bytes[..16], ACK_WRITE_BW_S8192[..16]);
        assert_eq!(bytes[16..], [0, 0, 0, 0]);
    }

    #[test]
    fn emit_rejects_header_mismatch_and_wrong_length() {
        let mut r = repr();
        r.aeth = None;
        let mut bytes = [0u8; 16];
        assert_eq!(
            r.emit(&mut Packet::new_unchecked(&mut bytes[..])),
            Err(Error::Malformed)
        );
        let r = repr();
        let mut bytes = [0u8; 21];
        assert_eq!(
            r.emit(&mut Packet::new_unchecked(&mut bytes[..])),
            Err(Error::Truncated)
        );
        let mut r = repr();
        r.payload = &[1, 2, 3];
        assert_eq!(r.check(), Err(Error::Malformed)); // ACK has no payload
        let mut r = repr();
        r.bth.opcode = OpCode(0x15);
        assert_eq!(r.check(), Err(Error::Unsupported));
    }

    #[test]
    fn pad_is_computed_and_checked() {
        let payload = [7u8; 5];
        let r = Repr {
            payload: &payload,
            ..Repr::new(OpCode::RC_SEND_ONLY, 1, 1)
        };
        assert_eq!(r.buffer_len(), 12 + 5 + 3 + 4);
        let mut bytes = vec![0xa5u8; r.buffer_len()];
        r.emit(&mut Packet::new_unchecked(&mut bytes[..])).unwrap();
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.bth().pad_count(), 3);
        assert_eq!(p.pad(), &[0, 0, 0]);
        let parsed = Repr::parse(&p).unwrap();
        assert_eq!(parsed.payload, &payload);
        // A packet whose payload + pad is not a multiple of 4 is malformed.
        bytes.push(0);
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(Repr::parse(&p), Err(Error::Malformed));
    }

    #[test]
    fn truncated_and_unknown() {
        assert_eq!(
            Packet::new_checked(&ACK_WRITE_BW_S8192[..19]).unwrap_err(),
            Error::Truncated
        );
        let mut b = ACK_WRITE_BW_S8192;
        b[0] = 0x15;
        assert_eq!(Packet::new_checked(&b[..]).unwrap_err(), Error::Unsupported);
    }

    /// Every known opcode gets exactly its extension headers, zeroed; an
    /// unknown one is refused.
    #[test]
    fn with_zeroed_headers_has_exactly_the_opcodes_headers() {
        for opcode in OpCode::all_known() {
            let r = Repr::with_zeroed_headers(opcode, 0x11, 7).unwrap();
            assert_eq!(r.check(), Ok(()), "{opcode:?}");
            assert_eq!((r.bth.opcode, r.bth.dest_qp, r.bth.psn), (opcode, 0x11, 7));
            assert_eq!(r.reth.map_or(0, |h| h.va | u64::from(h.rkey)), 0);
        }
        assert_eq!(
            Repr::with_zeroed_headers(OpCode(0xff), 0, 0).unwrap_err(),
            Error::Unsupported
        );
    }

    /// For every known opcode and payloads of 0..=8 bytes (all pad widths):
    /// the headers written without the ICRC slot, the payload copied in
    /// place, are `emit`'s bytes without the ICRC, into a dirty buffer; they
    /// parse back without the ICRC to the Repr `parse` gives with it; a
    /// buffer one byte short is refused untouched.
    #[test]
    fn without_icrc_is_emit_and_parse_minus_the_icrc() {
        let data = [9u8, 8, 7, 6, 5, 4, 3, 2];
        for opcode in OpCode::all_known() {
            let h = opcode.info().unwrap().headers;
            for n in 0..=data.len() {
                let payload = if opcode.info().unwrap().has_payload {
                    &data[..n]
                } else {
                    &data[..0]
                };
                let r = Repr {
                    deth: h.deth.then_some(deth::Repr {
                        qkey: 0x1111_2222,
                        src_qp: 0x33,
                    }),
                    reth: h.reth.then_some(reth::Repr {
                        va: 0xabcd,
                        rkey: 0x44,
                        dma_len: 5,
                    }),
                    atomic_eth: h.atomic_eth.then_some(atomic_eth::Repr {
                        va: 8,
                        rkey: 9,
                        swap_add: 10,
                        compare: 11,
                    }),
                    aeth: h.aeth.then_some(aeth::Repr {
                        kind: AethKind::from_syndrome(0x61),
                        msn: 0x55,
                    }),
                    atomic_ack_eth: h
                        .atomic_ack_eth
                        .then_some(atomic_ack_eth::Repr { orig_value: 0x66 }),
                    immdt: h.immdt.then_some(immdt::Repr { imm: 0x77 }),
                    ieth: h.ieth.then_some(ieth::Repr { rkey: 0x88 }),
                    payload,
                    ..Repr::new(opcode, 0x01_2345, 0x00ff_fff0 + n as u32)
                };
                let mut want = vec![0xa5u8; r.buffer_len()];
                r.emit(&mut Packet::new_unchecked(&mut want[..])).unwrap();
                let mut got = [0x5au8; 128];
                let (at, len) = r.emit_header_without_icrc(&mut got, payload.len()).unwrap();
                assert_eq!(at, r.header_len());
                got[at..at + payload.len()].copy_from_slice(payload);
                assert_eq!(
                    &got[..len],
                    &want[..want.len() - ICRC_LEN],
                    "{opcode} n={n}"
                );
                let parsed = Repr::parse(&Packet::new_checked(&want[..]).unwrap()).unwrap();
                assert_eq!(Repr::parse_without_icrc(&got[..len]), Ok(parsed));
                let mut short = [0x5au8; 128];
                assert_eq!(
                    r.emit_header_without_icrc(&mut short[..len - 1], payload.len()),
                    Err(Error::Truncated)
                );
                assert!(short.iter().all(|&b| b == 0x5a));
                let missing = Repr {
                    ieth: None,
                    reth: None,
                    aeth: None,
                    ..r
                };
                if h.ieth || h.reth || h.aeth {
                    assert_eq!(
                        missing.emit_header_without_icrc(&mut short, payload.len()),
                        Err(Error::Malformed)
                    );
                }
            }
        }
        // Bad pad and truncation without the ICRC slot.
        let ack = [
            0x11, 0x00, 0xff, 0xff, 0, 0, 0, 0x13, 0, 0x14, 0xa9, 0x2a, 0x1f, 0, 0, 1,
        ];
        assert!(Repr::parse_without_icrc(&ack).is_ok());
        assert_eq!(Repr::parse_without_icrc(&ack[..15]), Err(Error::Truncated));
        let mut padded = [0u8; 17];
        padded[..16].copy_from_slice(&ack);
        padded[1] = 0x10; // one pad byte on an opcode without payload
        assert_eq!(
            Repr::parse_without_icrc(&padded[..16]),
            Err(Error::Truncated)
        );
        assert_eq!(Repr::parse_without_icrc(&padded), Err(Error::Malformed));
        assert_eq!(
            Repr::parse_without_icrc(&[0x81; 16]),
            Err(Error::Unsupported)
        );
    }

    /// `Kind` gives a CNP its own variant, every other packet exactly what
    /// `Repr` gives, and `Repr` still refuses a CNP as it did.
    #[test]
    fn kind_tells_a_cnp_from_a_transport_packet() {
        let mut cnp_bytes = [0u8; cnp::PACKET_LEN];
        cnp::Repr::new(0x13).emit(&mut cnp::Packet::new_unchecked(&mut cnp_bytes[..]));
        let want = Kind::Cnp(cnp::Repr::new(0x13));
        assert_eq!(Kind::parse(&cnp_bytes), Ok(want));
        assert_eq!(Kind::parse_without_icrc(&cnp_bytes[..28]), Ok(want));
        assert_eq!(want.bth().opcode, OpCode::CNP);
        assert!(want.bth().becn);
        assert_eq!(want.to_string(), "CNP qp 0x000013 psn 0 BECN");
        assert_eq!(
            Packet::new_checked(&cnp_bytes[..]).unwrap_err(),
            Error::Unsupported
        );
        assert_eq!(
            Repr::parse_without_icrc(&cnp_bytes[..28]),
            Err(Error::Unsupported)
        );
        // A malformed CNP is an error of its own, not a transport packet.
        assert_eq!(Kind::parse(&cnp_bytes[..31]), Err(Error::Truncated));
        assert_eq!(Kind::parse_without_icrc(&[0x81; 16]), Err(Error::Truncated));
        let t = Kind::parse(&ACK_WRITE_BW_S8192).unwrap();
        assert_eq!(t, Kind::Transport(repr()));
        assert_eq!(t.bth(), repr().bth);
        assert_eq!(
            Kind::parse_without_icrc(&ACK_WRITE_BW_S8192[..16]),
            Ok(Kind::Transport(repr()))
        );
        assert_eq!(Kind::parse(&[]), Err(Error::Truncated));
        assert_eq!(
            Kind::parse_without_icrc(&[0x15; 20]),
            Err(Error::Unsupported)
        );
    }
}
