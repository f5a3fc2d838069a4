//! RoCEv2 Congestion Notification Packet (CNP): what a notification point
//! (the receiver of CE-marked packets) sends back to the reaction point (the
//! sender) so that it slows down. The whole UDP payload on port 4791:
//!
//! ```text
//! bytes 0-11   BTH: OpCode 0x81, SE 0, M 0, PadCnt 0, TVer 0, P_Key,
//!              FECN 0, BECN 1, DestQP = the QP being notified (the data
//!              sender's QP), AckReq 0, PSN
//! bytes 12-27  16 reserved bytes (zero)
//! bytes 28-31  ICRC
//! ```
//!
//! The ICRC is computed as for any RoCEv2 packet ([`crate::icrc`]): it masks the
//! IP TOS / traffic class, so a switch marking CE on a packet (data or CNP)
//! keeps it valid, and it masks BTH byte 4 (FECN, BECN).
//!
//! # What `emit` writes and `parse` accepts
//! * **PSN**: [`Repr::new`] uses 0. A CNP belongs to no PSN sequence: it is not
//!   acknowledged, not retransmitted and its reaction point does not read the
//!   PSN; 0 keeps CNPs identical for identical inputs (deterministic tests and
//!   captures) and is what scapy's `cnp()` writes. Set `psn` to send another.
//! * **Reserved bytes**: written as zero. On parse they are accepted whatever
//!   they hold and dropped, as wire treats every reserved field (BTH resv6 and
//!   resv7, DETH's reserved byte): the ICRC already covers them, so corrupted
//!   bytes fail the ICRC, and a peer that put something there still slows its
//!   sender down. The view's [`Packet::reserved`] shows them to a capture reader.
//! * **Flags**: BECN is written set; on parse the opcode alone makes a CNP and
//!   BECN, FECN, SE, MigReq and AckReq are not checked (BTH byte 4 is masked by
//!   the ICRC, so the path may rewrite it; a CNP is never acknowledged).
//! * **Refused**: another opcode ([`Error::Malformed`]), a length other than
//!   32 bytes (28 without the ICRC; [`Error::Truncated`] when shorter,
//!   [`Error::Malformed`] when longer), a non-zero PadCnt ([`Error::Malformed`])
//!   and a transport version other than 0 ([`Error::Unsupported`], as the
//!   engine drops other versions).
//!
//! # Example
//! ```
//! use rdmakit_wire::{cnp, roce};
//!
//! // The engine: 28 bytes (BTH + reserved) to its driver, which appends the ICRC.
//! let mut buf = [0u8; 64];
//! let n = cnp::Repr::new(0x11).emit_without_icrc(&mut buf).unwrap();
//! assert_eq!(n, cnp::LEN_WITHOUT_ICRC);
//! // The receive path: the same bytes come back as a CNP, not an error.
//! match roce::Kind::parse_without_icrc(&buf[..n]).unwrap() {
//!     roce::Kind::Cnp(c) => assert_eq!(c.dest_qp, 0x11),
//!     roce::Kind::Transport(_) => unreachable!(),
//! }
//! ```

use core::fmt;

use crate::frame::{IpRepr, UdpChecksum};
use crate::opcode::OpCode;
use crate::roce::ICRC_LEN;
use crate::view::view;
use crate::{bth, icrc, udp};
use crate::{Error, Result};

mod field {
    use crate::field::Field;
    pub const BTH: Field = 0..12;
    pub const RESERVED: Field = 12..28;
    pub const ICRC: Field = 28..32;
}

/// The reserved bytes after the BTH.
pub const RESERVED_LEN: usize = field::RESERVED.end - field::RESERVED.start;

/// BTH and reserved bytes: what a protocol engine emits and parses (its
/// driver appends and strips the ICRC).
pub const LEN_WITHOUT_ICRC: usize = field::RESERVED.end;

/// The whole CNP, ICRC included: the UDP payload.
pub const PACKET_LEN: usize = field::ICRC.end;

view!(a "RoCEv2 CNP (BTH, 16 reserved bytes, ICRC)", PACKET_LEN, "32 bytes");

impl<T: AsRef<[u8]>> Packet<T> {
    /// A view of the BTH.
    pub fn bth(&self) -> bth::Packet<&[u8]> {
        bth::Packet::new_unchecked(&self.buffer.as_ref()[field::BTH])
    }

    /// The 16 reserved bytes (zero from a conforming sender).
    pub fn reserved(&self) -> &[u8] {
        &self.buffer.as_ref()[field::RESERVED]
    }

    /// The ICRC as the CRC value (the wire carries it least-significant byte first).
    pub fn icrc(&self) -> u32 {
        let t = &self.buffer.as_ref()[field::ICRC];
        u32::from_le_bytes([t[0], t[1], t[2], t[3]])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// A mutable view of the BTH.
    pub fn bth_mut(&mut self) -> bth::Packet<&mut [u8]> {
        bth::Packet::new_unchecked(&mut self.buffer.as_mut()[field::BTH])
    }

    /// The reserved bytes, mutable.
    pub fn reserved_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::RESERVED]
    }

    /// Write the ICRC (least-significant byte first).
    pub fn set_icrc(&mut self, value: u32) {
        self.buffer.as_mut()[field::ICRC].copy_from_slice(&value.to_le_bytes())
    }
}

/// A high-level representation of a CNP: what varies from one to the next.
/// Everything else is fixed by the format (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Partition key (default 0xffff): the notified QP's.
    pub pkey: u16,
    /// The QP being notified: the sender of the CE-marked packets (24 bits).
    pub dest_qp: u32,
    /// PSN (24 bits; [`Repr::new`] uses 0).
    pub psn: u32,
}

impl Repr {
    /// The CNP to QP `dest_qp`: P_Key 0xffff, PSN 0.
    pub const fn new(dest_qp: u32) -> Repr {
        Repr {
            pkey: bth::DEFAULT_PKEY,
            dest_qp,
            psn: 0,
        }
    }

    /// Parse a whole CNP (BTH, reserved bytes, ICRC; the ICRC is not checked
    /// here, see [`crate::icrc`]).
    ///
    /// # Errors
    /// [`Error::Truncated`] when shorter than 32 bytes; the rest as the module
    /// documentation says.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        packet.check_len()?;
        Self::parse_exact(packet.buffer.as_ref(), PACKET_LEN)
    }

    /// Parse a CNP without its ICRC slot (BTH and reserved bytes: what a
    /// protocol engine sees; its driver checks and strips the ICRC).
    ///
    /// # Errors
    /// As [`Repr::parse`], for 28 bytes.
    pub fn parse_without_icrc(bytes: &[u8]) -> Result<Repr> {
        Self::parse_exact(bytes, LEN_WITHOUT_ICRC)
    }

    fn parse_exact(bytes: &[u8], len: usize) -> Result<Repr> {
        if bytes.len() < len {
            return Err(Error::Truncated);
        }
        if bytes.len() > len {
            return Err(Error::Malformed);
        }
        let b = bth::Packet::new_checked(&bytes[field::BTH])?;
        if b.opcode() != OpCode::CNP || b.pad_count() != 0 {
            return Err(Error::Malformed);
        }
        if b.tver() != 0 {
            return Err(Error::Unsupported);
        }
        Ok(Repr {
            pkey: b.pkey(),
            dest_qp: b.dest_qp(),
            psn: b.psn(),
        })
    }

    /// The BTH this CNP carries.
    pub const fn bth(&self) -> bth::Repr {
        bth::Repr {
            opcode: OpCode::CNP,
            solicited: false,
            mig_req: false,
            pad_count: 0,
            tver: 0,
            pkey: self.pkey,
            fecn: false,
            becn: true,
            dest_qp: self.dest_qp,
            ack_req: false,
            psn: self.psn,
        }
    }

    /// The length [`Repr::emit`] writes (32, ICRC included).
    pub const fn buffer_len(&self) -> usize {
        PACKET_LEN
    }

    /// Emit the whole CNP with a zero ICRC: fill it with [`crate::icrc`] once
    /// the IP and UDP headers are known, or use [`Repr::emit_ip`]. Values wider
    /// than their field are truncated to it.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        self.bth().emit(&mut packet.bth_mut());
        packet.reserved_mut().fill(0);
        packet.set_icrc(0);
    }

    /// Emit the BTH and the reserved bytes into `buf[..28]`, without the ICRC
    /// slot: what a protocol engine hands its driver, which appends the ICRC
    /// as for any packet. Returns the length written (28).
    ///
    /// # Errors
    /// [`Error::Truncated`] if `buf` is shorter than 28 bytes; nothing is
    /// written then.
    pub fn emit_without_icrc(&self, buf: &mut [u8]) -> Result<usize> {
        let buf = buf.get_mut(..LEN_WITHOUT_ICRC).ok_or(Error::Truncated)?;
        self.bth()
            .emit(&mut bth::Packet::new_unchecked(&mut buf[field::BTH]));
        buf[field::RESERVED].fill(0);
        Ok(LEN_WITHOUT_ICRC)
    }

    /// The length of [`Repr::emit_ip`]'s IP packet with header `ip`.
    pub fn ip_len(&self, ip: &IpRepr) -> usize {
        ip.buffer_len() + udp::HEADER_LEN + PACKET_LEN
    }

    /// Emit a whole IP packet carrying this CNP: `ip` (addresses, TOS or
    /// traffic class, TTL, identification; its payload length is rewritten),
    /// the UDP header from `src_port` to 4791 with the checksum `checksum`
    /// says, the CNP and its ICRC. Returns the length written
    /// ([`Repr::ip_len`]).
    ///
    /// # Errors
    /// [`Error::Truncated`] if `buf` is shorter than [`Repr::ip_len`].
    pub fn emit_ip(
        &self,
        ip: &IpRepr,
        src_port: u16,
        checksum: UdpChecksum,
        buf: &mut [u8],
    ) -> Result<usize> {
        let len = self.ip_len(ip);
        let buf = buf.get_mut(..len).ok_or(Error::Truncated)?;
        let ip_hl = ip.buffer_len();
        let mut ip = *ip;
        ip.set_payload_len(udp::HEADER_LEN + PACKET_LEN);
        ip.emit(&mut buf[..ip_hl]);
        let (src, dst) = (ip.src_addr(), ip.dst_addr());
        let (udp_buf, cnp_buf) = buf[ip_hl..].split_at_mut(udp::HEADER_LEN);
        udp::Repr {
            src_port,
            dst_port: crate::ROCEV2_UDP_PORT,
            payload_len: PACKET_LEN,
        }
        .emit(&mut udp::Packet::new_unchecked(udp_buf));
        self.emit(&mut Packet::new_unchecked(cnp_buf));
        // The ICRC masks the UDP checksum: fill it first so that a computed
        // UDP checksum covers the final ICRC bytes.
        icrc::fill(buf)?;
        let mut u = udp::Packet::new_unchecked(&mut buf[ip_hl..]);
        match checksum {
            UdpChecksum::None => u.set_checksum(0),
            UdpChecksum::Compute => u.fill_checksum(&src, &dst),
            UdpChecksum::Raw(c) => u.set_checksum(c),
        }
        Ok(len)
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "CNP qp 0x{:06x} psn {} BECN", self.dest_qp, self.psn)?;
        if self.pkey != bth::DEFAULT_PKEY {
            write!(f, " pkey 0x{:04x}", self.pkey)?;
        }
        Ok(())
    }
}

// The layout ends in the ICRC of every RoCEv2 packet.
const _: () = assert!(PACKET_LEN == LEN_WITHOUT_ICRC + ICRC_LEN);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{frame, ipv4, ipv6};

    // The UDP payload of frame 1 of tests/data/cnp/scapy-cnp.pcap (scapy
    // 2.8.0's `cnp(0x11)`, see SOURCE): BTH 81 00 ffff 40 000011 00 000000,
    // 16 zero bytes, ICRC 2d fb f7 40.
    static CNP_SCAPY_V4: [u8; 32] = [
        0x81, 0x00, 0xff, 0xff, 0x40, 0x00, 0x00, 0x11, 0x00, 0x00, 0x00, 0x00, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x2d, 0xfb, 0xf7, 0x40,
    ];

    #[test]
    fn deconstruct_scapy_v4() {
        let p = Packet::new_checked(&CNP_SCAPY_V4[..]).unwrap();
        let b = p.bth();
        assert_eq!(b.opcode(), OpCode::CNP);
        assert!(b.becn() && !b.fecn() && !b.ack_req() && !b.solicited());
        assert_eq!((b.pad_count(), b.tver(), b.pkey()), (0, 0, 0xffff));
        assert_eq!((b.dest_qp(), b.psn()), (0x11, 0));
        assert_eq!(p.reserved(), &[0u8; 16]);
        assert_eq!(p.icrc().to_le_bytes(), [0x2d, 0xfb, 0xf7, 0x40]);
    }

    #[test]
    fn construct_scapy_v4() {
        let mut bytes = [0xa5u8; 32];
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        {
            let mut b = p.bth_mut();
            b.set_opcode(OpCode::CNP);
            b.set_solicited(false);
            b.set_mig_req(false);
            b.set_pad_count(0);
            b.set_tver(0);
            b.set_pkey(0xffff);
            b.set_fecn(false);
            b.set_becn(true);
            b.set_resv6(0);
            b.set_dest_qp(0x11);
            b.set_ack_req(false);
            b.set_resv7(0);
            b.set_psn(0);
        }
        p.reserved_mut().fill(0);
        p.set_icrc(u32::from_le_bytes([0x2d, 0xfb, 0xf7, 0x40]));
        assert_eq!(bytes, CNP_SCAPY_V4);
    }

    #[test]
    fn parse_scapy_v4() {
        let p = Packet::new_checked(&CNP_SCAPY_V4[..]).unwrap();
        assert_eq!(Repr::parse(&p).unwrap(), Repr::new(0x11));
        assert_eq!(
            Repr::parse_without_icrc(&CNP_SCAPY_V4[..28]),
            Ok(Repr::new(0x11))
        );
    }

    #[test]
    fn emit_scapy_v4() {
        let r = Repr::new(0x11);
        assert_eq!(r.buffer_len(), 32);
        let mut bytes = [0xa5u8; 32];
        r.emit(&mut Packet::new_unchecked(&mut bytes[..]));
        // The ICRC needs the IP and UDP headers: emit leaves it zero.
        assert_eq!(bytes[..28], CNP_SCAPY_V4[..28]);
        assert_eq!(bytes[28..], [0, 0, 0, 0]);
        let mut engine = [0xa5u8; 40];
        assert_eq!(r.emit_without_icrc(&mut engine), Ok(28));
        assert_eq!(engine[..28], CNP_SCAPY_V4[..28]);
        assert!(engine[28..].iter().all(|&b| b == 0xa5));
    }

    #[test]
    fn emit_without_icrc_refuses_a_short_buffer_untouched() {
        let mut short = [0x5au8; 27];
        assert_eq!(
            Repr::new(1).emit_without_icrc(&mut short),
            Err(Error::Truncated)
        );
        assert!(short.iter().all(|&b| b == 0x5a));
    }

    /// The decisions of the module documentation, one each.
    #[test]
    fn what_parse_accepts_and_refuses() {
        let ok = |b: &[u8]| Repr::parse_without_icrc(b);
        let base = CNP_SCAPY_V4[..28].to_vec();
        // Reserved bytes and flags are ignored.
        let mut odd = base.clone();
        odd[20] = 0x77;
        odd[4] = 0x80; // FECN, no BECN
        odd[8] = 0x80; // AckReq
        odd[1] |= 0xc0; // SE, MigReq
        assert_eq!(ok(&odd), Ok(Repr::new(0x11)));
        // Length, opcode, pad and version are not.
        assert_eq!(ok(&base[..27]), Err(Error::Truncated));
        assert_eq!(ok(&[base.clone(), vec![0]].concat()), Err(Error::Malformed));
        assert_eq!(ok(&[]), Err(Error::Truncated));
        let mut other = base.clone();
        other[0] = 0x80; // IB/OPA's CNP opcode, not RoCEv2's
        assert_eq!(ok(&other), Err(Error::Malformed));
        let mut pad = base.clone();
        pad[1] = 0x10;
        assert_eq!(ok(&pad), Err(Error::Malformed));
        let mut tver = base.clone();
        tver[1] = 0x01;
        assert_eq!(ok(&tver), Err(Error::Unsupported));
        assert_eq!(
            Packet::new_checked(&CNP_SCAPY_V4[..31]).unwrap_err(),
            Error::Truncated
        );
    }

    /// A P_Key, a QP and a PSN wider than 24 bits round trip as their fields.
    #[test]
    fn fields_round_trip_and_truncate_to_their_width() {
        let r = Repr {
            pkey: 0x8001,
            dest_qp: 0xff12_3456,
            psn: 0x0100_0007,
        };
        let mut b = [0u8; 28];
        r.emit_without_icrc(&mut b).unwrap();
        let back = Repr::parse_without_icrc(&b).unwrap();
        assert_eq!((back.pkey, back.dest_qp, back.psn), (0x8001, 0x12_3456, 7));
        assert!(back.bth().becn);
        assert_eq!(back.to_string(), "CNP qp 0x123456 psn 7 BECN pkey 0x8001");
    }

    #[test]
    fn emit_ip_fills_lengths_checksum_and_icrc() {
        let ip = IpRepr::Ipv4(ipv4::Repr {
            dscp_ecn: 0xc0,
            ..ipv4::Repr::udp([10, 0, 2, 16].into(), [10, 0, 2, 15].into(), 0)
        });
        let r = Repr::new(0x11);
        let mut buf = [0xa5u8; 80];
        let n = r
            .emit_ip(&ip, 0xc0de, UdpChecksum::Compute, &mut buf)
            .unwrap();
        assert_eq!(n, 20 + 8 + 32);
        assert_eq!(n, r.ip_len(&ip));
        assert!(icrc::verify(&buf[..n]).unwrap());
        assert_eq!(buf[n - 4..n], CNP_SCAPY_V4[28..]);
        assert!(buf[n..].iter().all(|&b| b == 0xa5));
        assert_eq!(
            r.emit_ip(&ip, 1, UdpChecksum::None, &mut buf[..n - 1]),
            Err(Error::Truncated)
        );
        let v6 = IpRepr::Ipv6(ipv6::Repr {
            src_addr: "fd00::16".parse().unwrap(),
            dst_addr: "fd00::15".parse().unwrap(),
            next_header: ipv4::PROTOCOL_UDP,
            payload_len: 0,
            hop_limit: 64,
            traffic_class: 0,
            flow_label: 0,
        });
        let n = r.emit_ip(&v6, 1, UdpChecksum::Compute, &mut buf).unwrap();
        assert_eq!(n, 40 + 8 + 32);
        assert!(frame::icrc_valid_ip(&buf[..n]).unwrap());
    }
}
