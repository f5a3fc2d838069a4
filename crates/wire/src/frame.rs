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
