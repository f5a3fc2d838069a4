//! Whole RoCEv2 frames: Ethernet (+ one VLAN tag) | IPv4 or IPv6 | UDP 4791 | RoCE.
//!
//! [`Datagram`] is the part from the IP header on (what a raw-IP capture or a
//! Linux cooked capture holds); [`Repr`] adds the Ethernet header.
//! `emit` writes every length, the IPv4 header checksum, the UDP checksum (as the
//! Repr says) and the ICRC.

use core::fmt;
use std::net::IpAddr;

use crate::ethernet::{self, EtherType};
use crate::roce::{self, ICRC_LEN};
use crate::{icrc, ipv4, ipv6, udp, vlan, ROCEV2_UDP_PORT};
use crate::{Error, Result};

/// The IP header of a RoCEv2 packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpRepr {
    /// IPv4.
    Ipv4(ipv4::Repr),
    /// IPv6.
    Ipv6(ipv6::Repr),
}

impl IpRepr {
    /// Source address.
    pub fn src_addr(&self) -> IpAddr {
        match self {
            IpRepr::Ipv4(r) => IpAddr::V4(r.src_addr),
            IpRepr::Ipv6(r) => IpAddr::V6(r.src_addr),
        }
    }

    /// Destination address.
    pub fn dst_addr(&self) -> IpAddr {
        match self {
            IpRepr::Ipv4(r) => IpAddr::V4(r.dst_addr),
            IpRepr::Ipv6(r) => IpAddr::V6(r.dst_addr),
        }
    }

    /// Payload length (what follows the IP header).
    pub fn payload_len(&self) -> usize {
        match self {
            IpRepr::Ipv4(r) => r.payload_len,
            IpRepr::Ipv6(r) => r.payload_len,
        }
    }

    /// Set the payload length.
    pub fn set_payload_len(&mut self, len: usize) {
        match self {
            IpRepr::Ipv4(r) => r.payload_len = len,
            IpRepr::Ipv6(r) => r.payload_len = len,
        }
    }

    /// The EtherType announcing this IP version.
    pub fn ethertype(&self) -> EtherType {
        match self {
            IpRepr::Ipv4(_) => EtherType::IPV4,
            IpRepr::Ipv6(_) => EtherType::IPV6,
        }
    }

    /// Header length (20 or 40).
    pub fn buffer_len(&self) -> usize {
        match self {
            IpRepr::Ipv4(r) => r.buffer_len(),
            IpRepr::Ipv6(r) => r.buffer_len(),
        }
    }

    /// Emit the header (with checksum for IPv4) into `buf[..buffer_len()]`.
    ///
    /// # Panics
    /// If `buf` is shorter than `buffer_len()`.
    pub fn emit(&self, buf: &mut [u8]) {
        match self {
            IpRepr::Ipv4(r) => r.emit(&mut ipv4::Packet::new_unchecked(buf)),
            IpRepr::Ipv6(r) => r.emit(&mut ipv6::Packet::new_unchecked(buf)),
        }
    }
}

impl fmt::Display for IpRepr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            IpRepr::Ipv4(r) => r.fmt(f),
            IpRepr::Ipv6(r) => r.fmt(f),
        }
    }
}

/// What to write in the UDP checksum field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum UdpChecksum {
    /// Zero: no checksum (what rxe sends over IPv4; not allowed over IPv6).
    #[default]
    None,
    /// Compute the real checksum.
    Compute,
    /// Write this value as it is (keeps a captured wrong or offloaded checksum, so
    /// that emit(parse(p)) == p).
    Raw(u16),
}

/// IP | UDP | RoCE: a RoCEv2 packet from the IP header on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Datagram<'a> {
    /// IP header (its payload length is rewritten by `emit`).
    pub ip: IpRepr,
    /// UDP header (its payload length is rewritten by `emit`).
    pub udp: udp::Repr,
    /// UDP checksum policy.
    pub udp_checksum: UdpChecksum,
    /// The transport packet.
    pub roce: roce::Repr<'a>,
}

impl<'a> Datagram<'a> {
    /// Parse an IP packet carrying RoCEv2; returns it and the bytes after the IP
    /// total length (link-layer padding).
    ///
    /// # Errors
    /// As the IP/UDP/RoCE parsers; [`Error::Unsupported`] if the IP payload is not
    /// UDP to port 4791.
    pub fn parse(bytes: &'a [u8]) -> Result<(Datagram<'a>, &'a [u8])> {
        let (ip, ip_total) = match bytes.first().map(|b| b >> 4) {
            Some(4) => {
                let p = ipv4::Packet::new_checked(bytes)?;
                let r = ipv4::Repr::parse(&p)?;
                (IpRepr::Ipv4(r), usize::from(p.total_len()))
            }
            Some(6) => {
                let p = ipv6::Packet::new_checked(bytes)?;
                let r = ipv6::Repr::parse(&p)?;
                (
                    IpRepr::Ipv6(r),
                    ipv6::HEADER_LEN + usize::from(p.payload_len()),
                )
            }
            Some(_) => return Err(Error::Malformed),
            None => return Err(Error::Truncated),
        };
        let next = match ip {
            IpRepr::Ipv4(r) => r.next_header,
            IpRepr::Ipv6(r) => r.next_header,
        };
        if next != ipv4::PROTOCOL_UDP {
            return Err(Error::Unsupported);
        }
        let ip_hl = ip.buffer_len();
        let ip_bytes = &bytes[..ip_total];
        let udp_p = udp::Packet::new_checked(&ip_bytes[ip_hl..])?;
        let udp = udp::Repr::parse(&udp_p)?;
        if udp.dst_port != ROCEV2_UDP_PORT {
            return Err(Error::Unsupported);
        }
        if udp.payload_len != ip.payload_len() - udp::HEADER_LEN {
            // UDP length disagrees with the IP length: emit could not reproduce it.
            return Err(Error::Malformed);
        }
        let udp_checksum = match udp_p.checksum() {
            0 => UdpChecksum::None,
            _ if udp_p.verify_checksum(&ip.src_addr(), &ip.dst_addr()) => UdpChecksum::Compute,
            c => UdpChecksum::Raw(c),
        };
        let roce_bytes: &'a [u8] = &ip_bytes[ip_hl + udp::HEADER_LEN..];
        let roce = roce::Repr::parse(&roce::Packet::new_checked(roce_bytes)?)?;
        Ok((
            Datagram {
                ip,
                udp,
                udp_checksum,
                roce,
            },
            &bytes[ip_total..],
        ))
    }

    /// Length of IP + UDP + RoCE (through the ICRC).
    pub fn buffer_len(&self) -> usize {
        self.ip.buffer_len() + udp::HEADER_LEN + self.roce.buffer_len()
    }

    /// Emit into a buffer of exactly [`Datagram::buffer_len`] bytes: headers with
    /// their lengths, IPv4 checksum, UDP checksum, RoCE packet and ICRC.
    ///
    /// # Errors
    /// From [`roce::Repr::emit`]; [`Error::Truncated`] if the buffer is not
    /// `buffer_len()` long; [`Error::Malformed`] if the packet is too long for
    /// the IP length field.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        if buf.len() != self.buffer_len() {
            return Err(Error::Truncated);
        }
        self.roce.check()?;
        let ip_hl = self.ip.buffer_len();
        let udp_len = udp::HEADER_LEN + self.roce.buffer_len();
        let max = match self.ip {
            IpRepr::Ipv4(_) => usize::from(u16::MAX) - ip_hl,
            IpRepr::Ipv6(_) => usize::from(u16::MAX),
        };
        if udp_len > max {
            return Err(Error::Malformed);
        }
        let mut ip = self.ip;
        ip.set_payload_len(udp_len);
        ip.emit(&mut buf[..ip_hl]);
        let mut udp_repr = self.udp;
        udp_repr.payload_len = self.roce.buffer_len();
        let (_, rest) = buf.split_at_mut(ip_hl);
        let (udp_buf, roce_buf) = rest.split_at_mut(udp::HEADER_LEN);
        udp_repr.emit(&mut udp::Packet::new_unchecked(&mut udp_buf[..]));
        self.roce
            .emit(&mut roce::Packet::new_unchecked(&mut roce_buf[..]))?;
        // The ICRC masks the UDP checksum, so either order works; fill it first
        // so a computed UDP checksum covers the final ICRC bytes.
        icrc::fill(buf)?;
        let (src, dst) = (self.ip.src_addr(), self.ip.dst_addr());
        let mut udp_p = udp::Packet::new_unchecked(&mut buf[ip_hl..]);
        match self.udp_checksum {
            UdpChecksum::None => udp_p.set_checksum(0),
            UdpChecksum::Compute => udp_p.fill_checksum(&src, &dst),
            UdpChecksum::Raw(c) => udp_p.set_checksum(c),
        }
        Ok(())
    }
}

impl fmt::Display for Datagram<'_> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "{}.{} > {}.{}: {}",
            self.ip.src_addr(),
            self.udp.src_port,
            self.ip.dst_addr(),
            self.udp.dst_port,
            self.roce
        )
    }
}

/// A whole Ethernet frame carrying RoCEv2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr<'a> {
    /// Ethernet header (`ethertype` is rewritten by `emit` to match `vlan`/`ip`,
    /// except that an 802.1ad tag type is kept).
    pub ethernet: ethernet::Repr,
    /// One VLAN tag, if present.
    pub vlan: Option<vlan::Repr>,
    /// IP header.
    pub ip: IpRepr,
    /// UDP header.
    pub udp: udp::Repr,
    /// UDP checksum policy.
    pub udp_checksum: UdpChecksum,
    /// The transport packet.
    pub roce: roce::Repr<'a>,
    /// Bytes after the IP packet (Ethernet padding to 60 bytes, a captured FCS).
    pub trailer: &'a [u8],
}

impl<'a> Repr<'a> {
    /// Parse an Ethernet frame carrying RoCEv2 (at most one VLAN tag).
    ///
    /// # Errors
    /// As the layer parsers; [`Error::Unsupported`] for non-IP EtherTypes, stacked
    /// VLAN tags, or anything but UDP to port 4791.
    pub fn parse(bytes: &'a [u8]) -> Result<Repr<'a>> {
        let eth_frame = ethernet::Frame::new_checked(bytes)?;
        let ethernet = ethernet::Repr::parse(&eth_frame)?;
        let mut rest = eth_frame.payload();
        let mut ethertype = ethernet.ethertype;
        let mut vlan = None;
        if ethertype.is_vlan() {
            let tag = vlan::Packet::new_checked(rest)?;
            let r = vlan::Repr::parse(&tag)?;
            ethertype = r.ethertype;
            rest = tag.payload();
            vlan = Some(r);
        }
        let (datagram, trailer) = match ethertype {
            EtherType::IPV4 | EtherType::IPV6 => Datagram::parse(rest)?,
            _ => return Err(Error::Unsupported),
        };
        if datagram.ip.ethertype() != ethertype {
            return Err(Error::Malformed);
        }
        Ok(Repr {
            ethernet,
            vlan,
            ip: datagram.ip,
            udp: datagram.udp,
            udp_checksum: datagram.udp_checksum,
            roce: datagram.roce,
            trailer,
        })
    }

    /// The IP-and-up part.
    pub fn datagram(&self) -> Datagram<'a> {
        Datagram {
            ip: self.ip,
            udp: self.udp,
            udp_checksum: self.udp_checksum,
            roce: self.roce,
        }
    }

    /// Length of the whole frame (headers, RoCE packet with ICRC, trailer).
    pub fn buffer_len(&self) -> usize {
        ethernet::HEADER_LEN
            + self.vlan.map_or(0, |v| v.buffer_len())
            + self.datagram().buffer_len()
            + self.trailer.len()
    }

    /// Emit the whole frame into a buffer of exactly [`Repr::buffer_len`] bytes,
    /// computing lengths, checksums and the ICRC.
    ///
    /// # Errors
    /// As [`Datagram::emit`].
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        if buf.len() != self.buffer_len() {
            return Err(Error::Truncated);
        }
        let mut eth = self.ethernet;
        let ip_type = self.ip.ethertype();
        let mut at = ethernet::HEADER_LEN;
        match self.vlan {
            Some(mut tag) => {
                if !eth.ethertype.is_vlan() {
                    eth.ethertype = EtherType::VLAN;
                }
                tag.ethertype = ip_type;
                tag.emit(&mut vlan::Packet::new_unchecked(&mut buf[at..]));
                at += tag.buffer_len();
            }
            None => eth.ethertype = ip_type,
        }
        eth.emit(&mut ethernet::Frame::new_unchecked(&mut buf[..]));
        let end = buf.len() - self.trailer.len();
        self.datagram().emit(&mut buf[at..end])?;
        buf[end..].copy_from_slice(self.trailer);
        Ok(())
    }
}

impl fmt::Display for Repr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        if let Some(v) = self.vlan {
            write!(f, "vlan {} ", v.vid)?;
        }
        self.datagram().fmt(f)
    }
}

/// Whether the ICRC of an Ethernet frame carrying RoCEv2 is right (one VLAN tag
/// allowed; link padding after the IP packet is ignored).
///
/// # Errors
/// As [`Repr::parse`] for the link and IP layers.
pub fn icrc_valid(frame: &[u8]) -> Result<bool> {
    let eth = ethernet::Frame::new_checked(frame)?;
    let mut rest = eth.payload();
    if eth.ethertype().is_vlan() {
        rest = vlan::Packet::new_checked(rest)?.payload();
    }
    icrc_valid_ip(rest)
}

/// Whether the ICRC of an IP packet carrying RoCEv2 is right (bytes after the IP
/// total length are ignored).
///
/// # Errors
/// [`Error::Truncated`]/[`Error::Malformed`] for a bad IP header or a packet too
/// short for UDP + BTH + ICRC.
pub fn icrc_valid_ip(bytes: &[u8]) -> Result<bool> {
    let total = match bytes.first().map(|b| b >> 4) {
        Some(4) => usize::from(ipv4::Packet::new_checked(bytes)?.total_len()),
        Some(6) => ipv6::HEADER_LEN + usize::from(ipv6::Packet::new_checked(bytes)?.payload_len()),
        Some(_) => return Err(Error::Malformed),
        None => return Err(Error::Truncated),
    };
    let ip = &bytes[..total];
    if ip.len() < ICRC_LEN {
        return Err(Error::Truncated);
    }
    icrc::verify(ip)
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;
    use crate::aeth::{self, AethKind};
    use crate::opcode::OpCode;

    // Frame 11 of write_bw-s8192.pcap: the whole Ethernet frame of an RC ACK from
    // the server 192.168.100.1 to the client.
    static FRAME_ACK_WRITE_BW_S8192: [u8; 62] = [
        0x52, 0x54, 0x00, 0x00, 0x00, 0x02, 0x52, 0x54, 0x00, 0x00, 0x00, 0x01, 0x08, 0x00, 0x45,
        0x00, 0x00, 0x30, 0x46, 0x98, 0x40, 0x00, 0x40, 0x11, 0xaa, 0xd0, 0xc0, 0xa8, 0x64, 0x01,
        0xc0, 0xa8, 0x64, 0x02, 0xc1, 0x69, 0x12, 0xb7, 0x00, 0x1c, 0x00, 0x00, 0x11, 0x00, 0xff,
        0xff, 0x00, 0x00, 0x00, 0x13, 0x00, 0x14, 0xa9, 0x2a, 0x1f, 0x00, 0x00, 0x01, 0x8c, 0x40,
        0xd0, 0x63,
    ];

    fn repr() -> Repr<'static> {
        Repr {
            ethernet: ethernet::Repr {
                src_addr: ethernet::Address([0x52, 0x54, 0, 0, 0, 1]),
                dst_addr: ethernet::Address([0x52, 0x54, 0, 0, 0, 2]),
                ethertype: EtherType::IPV4,
            },
            vlan: None,
            ip: IpRepr::Ipv4(ipv4::Repr {
                ident: 0x4698,
                ..ipv4::Repr::udp(
                    Ipv4Addr::new(192, 168, 100, 1),
                    Ipv4Addr::new(192, 168, 100, 2),
                    28,
                )
            }),
            udp: udp::Repr {
                src_port: 0xc169,
                dst_port: ROCEV2_UDP_PORT,
                payload_len: 20,
            },
            udp_checksum: UdpChecksum::None,
            roce: roce::Repr {
                aeth: Some(aeth::Repr {
                    kind: AethKind::Ack { credits: 31 },
                    msn: 1,
                }),
                ..roce::Repr::new(OpCode::RC_ACKNOWLEDGE, 0x13, 0x14a92a)
            },
            trailer: &[],
        }
    }

    #[test]
    fn deconstruct_write_bw_s8192() {
        assert!(icrc_valid(&FRAME_ACK_WRITE_BW_S8192).unwrap());
        let (d, trailer) = Datagram::parse(&FRAME_ACK_WRITE_BW_S8192[14..]).unwrap();
        assert!(trailer.is_empty());
        assert_eq!(d.ip.src_addr().to_string(), "192.168.100.1");
        assert_eq!(d.udp.dst_port, 4791);
        assert_eq!(d.roce.bth.opcode, OpCode::RC_ACKNOWLEDGE);
    }

    #[test]
    fn construct_write_bw_s8192() {
        // Build the frame layer by layer with the header views, then fill the ICRC.
        let mut bytes = [0xa5u8; 62];
        let mut eth = ethernet::Frame::new_unchecked(&mut bytes[..]);
        eth.set_dst_addr(ethernet::Address([0x52, 0x54, 0, 0, 0, 2]));
        eth.set_src_addr(ethernet::Address([0x52, 0x54, 0, 0, 0, 1]));
        eth.set_ethertype(EtherType::IPV4);
        let mut ip = ipv4::Packet::new_unchecked(eth.payload_mut());
        ip.set_version(4);
        ip.set_header_len(20);
        ip.set_dscp_ecn(0);
        ip.set_total_len(48);
        ip.set_ident(0x4698);
        ip.set_flags_frag(true, false, 0);
        ip.set_hop_limit(64);
        ip.set_next_header(17);
        ip.set_src_addr(Ipv4Addr::new(192, 168, 100, 1));
        ip.set_dst_addr(Ipv4Addr::new(192, 168, 100, 2));
        ip.fill_checksum();
        let mut u = udp::Packet::new_unchecked(ip.payload_mut());
        u.set_src_port(0xc169);
        u.set_dst_port(4791);
        u.set_len(28);
        u.set_checksum(0);
        let mut r = roce::Packet::new_unchecked(u.payload_mut());
        let mut b = r.bth_mut();
        crate::bth::Repr {
            opcode: OpCode::RC_ACKNOWLEDGE,
            pkey: 0xffff,
            dest_qp: 0x13,
            psn: 0x14a92a,
            ..crate::bth::Repr::default()
        }
        .emit(&mut b);
        let mut a = aeth::Packet::new_unchecked(&mut b.payload_mut()[..]);
        a.set_syndrome(0x1f);
        a.set_msn(1);
        icrc::fill(&mut bytes[14..]).unwrap();
        assert_eq!(bytes, FRAME_ACK_WRITE_BW_S8192);
    }

    #[test]
    fn parse_write_bw_s8192() {
        assert_eq!(Repr::parse(&FRAME_ACK_WRITE_BW_S8192).unwrap(), repr());
    }

    #[test]
    fn emit_write_bw_s8192() {
        let r = repr();
        assert_eq!(r.buffer_len(), 62);
        let mut bytes = [0xa5u8; 62];
        r.emit(&mut bytes).unwrap();
        assert_eq!(bytes, FRAME_ACK_WRITE_BW_S8192);
    }

    #[test]
    fn pretty_line_write_bw_s8192() {
        assert_eq!(
            repr().to_string(),
            "192.168.100.1.49513 > 192.168.100.2.4791: RC_ACKNOWLEDGE qp 0x000013 psn 1354026, \
             AETH ACK credits 31 msn 1, len 0"
        );
    }

    #[test]
    fn vlan_and_trailer_roundtrip_write_bw_s8192() {
        let mut r = repr();
        r.vlan = Some(vlan::Repr {
            pcp: 3,
            dei: false,
            vid: 100,
            ethertype: EtherType::IPV4,
        });
        r.trailer = &[0, 0, 0, 0];
        let mut bytes = vec![0u8; r.buffer_len()];
        r.emit(&mut bytes).unwrap();
        assert_eq!(&bytes[12..18], &[0x81, 0x00, 0x60, 0x64, 0x08, 0x00]);
        let mut expected = r;
        expected.ethernet.ethertype = EtherType::VLAN;
        assert_eq!(Repr::parse(&bytes).unwrap(), expected);
        assert!(icrc_valid(&bytes).unwrap());
        assert!(r.to_string().starts_with("vlan 100 192.168.100.1.49513 >"));
    }

    #[test]
    fn ipv6_frame_has_computed_udp_checksum() {
        let mut r = repr();
        r.ip = IpRepr::Ipv6(ipv6::Repr {
            src_addr: "fec0::1".parse().unwrap(),
            dst_addr: "fec0::2".parse().unwrap(),
            next_header: 17,
            payload_len: 28,
            hop_limit: 64,
            traffic_class: 0,
            flow_label: 0x12345,
        });
        r.udp_checksum = UdpChecksum::Compute;
        let mut bytes = vec![0u8; r.buffer_len()];
        r.emit(&mut bytes).unwrap();
        let u = udp::Packet::new_checked(&bytes[54..]).unwrap();
        assert!(u.verify_checksum(&r.ip.src_addr(), &r.ip.dst_addr()));
        assert!(icrc_valid(&bytes).unwrap());
        let parsed = Repr::parse(&bytes).unwrap();
        let mut expected = r;
        expected.ethernet.ethertype = EtherType::IPV6;
        assert_eq!(parsed, expected);
        // compute_reprs gives the same ICRC as the emitted frame carries.
        let roce_bytes = &bytes[62..bytes.len() - 4];
        let tail = &bytes[bytes.len() - 4..];
        let mut ip = r.ip;
        ip.set_payload_len(28);
        let mut udp = r.udp;
        udp.payload_len = 20;
        assert_eq!(
            icrc::compute_reprs(&ip, &udp, roce_bytes)
                .unwrap()
                .to_le_bytes(),
            tail
        );
    }

    #[test]
    fn not_roce_is_unsupported() {
        let mut b = FRAME_ACK_WRITE_BW_S8192;
        b[36] = 0x12; // UDP destination port 4791 -> 0x1234
        b[37] = 0x34;
        assert_eq!(Repr::parse(&b), Err(Error::Unsupported));
        let mut b = FRAME_ACK_WRITE_BW_S8192;
        b[12] = 0x08;
        b[13] = 0x06; // ARP
        assert_eq!(Repr::parse(&b), Err(Error::Unsupported));
    }
}
