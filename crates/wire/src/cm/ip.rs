//! The RDMA CM IP addressing header (IBTA Annex A11, "RDMA IP CM Service";
//! Linux's `struct cma_hdr`): the first 36 bytes of the private data of a REQ
//! or SIDR_REQ that rdma_cm sends, so the passive side learns the IP addresses
//! and the source port. The user's private data follows it (56 bytes in a REQ).
//!
//! ```text
//! byte 0       MajV(4) MinV(4)         (rdma_cm: 0x00)
//! byte 1       IPV(4) reserved(4)      (4 or 6)
//! bytes 2-3    Source port
//! bytes 4-19   Source IP address       (IPv4: bytes 16-19, the rest zero)
//! bytes 20-35  Destination IP address  (IPv4: bytes 32-35)
//! ```
//!
//! The service ID of such a connection is `port space << 16 | destination port`
//! ([`service_id`]).

use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::view::view;
use crate::{Error, Result};

mod field {
    use crate::field::{Field, Rest};
    pub const VERSION: usize = 0;
    pub const IP_VERSION: usize = 1;
    pub const SRC_PORT: Field = 2..4;
    pub const SRC_ADDR: Field = 4..20;
    pub const DST_ADDR: Field = 20..36;
    pub const USER_DATA: Rest = 36..;
}

/// Length of the header.
pub const HEADER_LEN: usize = field::USER_DATA.start;
/// The version byte rdma_cm writes (`CMA_VERSION`).
pub const CMA_VERSION: u8 = 0x00;

/// rdma_cm port space of TCP-like (RC) connections.
pub const PS_TCP: u16 = 0x0106;
/// rdma_cm port space of UDP-like (UD) service.
pub const PS_UDP: u16 = 0x0111;
/// rdma_cm port space of IPoIB.
pub const PS_IPOIB: u16 = 0x0002;
/// rdma_cm native IB port space.
pub const PS_IB: u16 = 0x013f;

/// The name of an rdma_cm port space (`TCP`, `UDP`, `IB`, `IPoIB`).
pub fn port_space_name(ps: u16) -> Option<&'static str> {
    match ps {
        PS_TCP => Some("TCP"),
        PS_UDP => Some("UDP"),
        PS_IB => Some("IB"),
        PS_IPOIB => Some("IPoIB"),
        _ => None,
    }
}

/// The service ID of port `port` in port space `ps` (`cma_get_service_id`).
pub const fn service_id(ps: u16, port: u16) -> u64 {
    ((ps as u64) << 16) | port as u64
}

/// The port space and port of an rdma_cm service ID, if it is one
/// (`0x0000_0000_01_PS_PORT`: the top 40 bits hold only the port space).
pub fn split_service_id(sid: u64) -> Option<(u16, u16)> {
    if sid >> 32 != 0 {
        return None;
    }
    Some(((sid >> 16) as u16, sid as u16))
}

view!(a "RDMA CM IP header", HEADER_LEN, "36 bytes");

impl<T: AsRef<[u8]>> Packet<T> {
    /// Version byte (MajV, MinV).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION]
    }

    /// IP version (4 or 6).
    pub fn ip_version(&self) -> u8 {
        self.buffer.as_ref()[field::IP_VERSION] >> 4
    }

    /// The low 4 reserved bits of the IP version byte.
    pub fn ip_version_reserved(&self) -> u8 {
        self.buffer.as_ref()[field::IP_VERSION] & 0x0f
    }

    /// The active side's source port.
    pub fn src_port(&self) -> u16 {
        let d = &self.buffer.as_ref()[field::SRC_PORT];
        u16::from_be_bytes([d[0], d[1]])
    }

    /// The 16 source address bytes.
    pub fn src_addr_raw(&self) -> [u8; 16] {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.buffer.as_ref()[field::SRC_ADDR]);
        a
    }

    /// The 16 destination address bytes.
    pub fn dst_addr_raw(&self) -> [u8; 16] {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.buffer.as_ref()[field::DST_ADDR]);
        a
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The user's private data after the header.
    pub fn user_data(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::USER_DATA]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the version byte.
    pub fn set_version(&mut self, v: u8) {
        self.buffer.as_mut()[field::VERSION] = v
    }
    /// Set the IP version (the reserved nibble is cleared).
    pub fn set_ip_version(&mut self, v: u8) {
        self.buffer.as_mut()[field::IP_VERSION] = v << 4
    }
    /// Set the source port.
    pub fn set_src_port(&mut self, v: u16) {
        self.buffer.as_mut()[field::SRC_PORT].copy_from_slice(&v.to_be_bytes())
    }
    /// Set the 16 source address bytes.
    pub fn set_src_addr_raw(&mut self, a: &[u8; 16]) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(a)
    }
    /// Set the 16 destination address bytes.
    pub fn set_dst_addr_raw(&mut self, a: &[u8; 16]) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(a)
    }
    /// The user's private data, mutable.
    pub fn user_data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::USER_DATA]
    }
}

fn to_raw(a: IpAddr) -> [u8; 16] {
    match a {
        // rdma_cm's cma_ip_addr: IPv4 in the last word, the rest zero.
        IpAddr::V4(v4) => {
            let mut r = [0u8; 16];
            r[12..].copy_from_slice(&v4.octets());
            r
        }
        IpAddr::V6(v6) => v6.octets(),
    }
}

fn from_raw(version: u8, r: [u8; 16]) -> Result<IpAddr> {
    match version {
        4 => Ok(IpAddr::V4(Ipv4Addr::new(r[12], r[13], r[14], r[15]))),
        6 => Ok(IpAddr::V6(Ipv6Addr::from(r))),
        _ => Err(Error::Malformed),
    }
}

/// A high-level representation of the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// The active side's source port.
    pub src_port: u16,
    /// The active side's address.
    pub src_addr: IpAddr,
    /// The address the active side connects to.
    pub dst_addr: IpAddr,
}

impl Repr {
    /// Parse the header.
    ///
    /// # Errors
    /// [`Error::Truncated`] if shorter than 36 bytes; [`Error::Unsupported`] for
    /// a version other than 0 (rdma_cm's own check); [`Error::Malformed`] for an
    /// IP version other than 4 or 6, or the two addresses of different versions.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Repr> {
        p.check_len()?;
        if p.version() != CMA_VERSION {
            return Err(Error::Unsupported);
        }
        let v = p.ip_version();
        Ok(Repr {
            src_port: p.src_port(),
            src_addr: from_raw(v, p.src_addr_raw())?,
            dst_addr: from_raw(v, p.dst_addr_raw())?,
        })
    }

    /// The length of the header (36).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Emit the header.
    ///
    /// # Errors
    /// [`Error::Malformed`] if the two addresses are of different versions.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) -> Result<()> {
        let v = match (self.src_addr, self.dst_addr) {
            (IpAddr::V4(_), IpAddr::V4(_)) => 4,
            (IpAddr::V6(_), IpAddr::V6(_)) => 6,
            _ => return Err(Error::Malformed),
        };
        p.set_version(CMA_VERSION);
        p.set_ip_version(v);
        p.set_src_port(self.src_port);
        p.set_src_addr_raw(&to_raw(self.src_addr));
        p.set_dst_addr_raw(&to_raw(self.dst_addr));
        Ok(())
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "rdma_cm {}:{} -> {}",
            self.src_addr, self.src_port, self.dst_addr
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad;

    // The private data header of rxe's REQ for `rping -c -a 10.0.3.1 -p 7174`
    // (source port 45641): fixtures/pcap-cm/rxe-requests-unanswered.pcap, frame 1.
    static MAD: &[u8; 256] = include_bytes!("../../tests/data/cm/rxe-req.mad");
    /// REQ private data starts 140 bytes into the CM data.
    const PD: usize = mad::HEADER_LEN + 140;

    fn hdr() -> &'static [u8] {
        &MAD[PD..PD + HEADER_LEN]
    }

    fn repr() -> Repr {
        Repr {
            src_port: 45641,
            src_addr: IpAddr::V4(Ipv4Addr::new(10, 0, 3, 2)),
            dst_addr: IpAddr::V4(Ipv4Addr::new(10, 0, 3, 1)),
        }
    }

    #[test]
    fn deconstruct_rxe_req_header() {
        let p = Packet::new_checked(&MAD[PD..]).unwrap();
        assert_eq!(p.version(), CMA_VERSION);
        assert_eq!(p.ip_version(), 4);
        assert_eq!(p.ip_version_reserved(), 0);
        assert_eq!(p.src_port(), 45641);
        assert_eq!(p.src_addr_raw()[12..], [10, 0, 3, 2]);
        assert_eq!(p.dst_addr_raw()[12..], [10, 0, 3, 1]);
        assert_eq!(p.user_data().len(), 92 - HEADER_LEN);
    }

    #[test]
    fn construct_rxe_req_header() {
        let mut bytes = [0xa5u8; HEADER_LEN];
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        p.set_version(CMA_VERSION);
        p.set_ip_version(4);
        p.set_src_port(45641);
        let mut s = [0u8; 16];
        s[12..].copy_from_slice(&[10, 0, 3, 2]);
        p.set_src_addr_raw(&s);
        let mut d = [0u8; 16];
        d[12..].copy_from_slice(&[10, 0, 3, 1]);
        p.set_dst_addr_raw(&d);
        assert_eq!(&bytes[..], hdr());
    }

    #[test]
    fn parse_rxe_req_header() {
        let p = Packet::new_checked(hdr()).unwrap();
        assert_eq!(Repr::parse(&p).unwrap(), repr());
    }

    #[test]
    fn emit_rxe_req_header() {
        let mut bytes = [0xa5u8; HEADER_LEN];
        repr()
            .emit(&mut Packet::new_unchecked(&mut bytes[..]))
            .unwrap();
        assert_eq!(&bytes[..], hdr());
    }

    #[test]
    fn service_ids_of_the_port_spaces() {
        // The REQ and SIDR_REQ of the capture: TCP and UDP port space, port 7174.
        assert_eq!(service_id(PS_TCP, 7174), 0x0106_1c06);
        assert_eq!(service_id(PS_UDP, 7174), 0x0111_1c06);
        assert_eq!(split_service_id(0x0106_1c06), Some((PS_TCP, 7174)));
        assert_eq!(split_service_id(0x1_0000_0000), None);
    }

    #[test]
    fn malformed() {
        let mut b = [0u8; HEADER_LEN];
        b[1] = 0x50;
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(Repr::parse(&p).unwrap_err(), Error::Malformed);
        b[0] = 0x10;
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(Repr::parse(&p).unwrap_err(), Error::Unsupported);
        assert_eq!(Packet::new_checked(&b[..35]).unwrap_err(), Error::Truncated);
    }
}
