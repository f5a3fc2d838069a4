//! Subnet management packets (IBTA Vol 1 §14.2.1): the MADs of management
//! classes 0x01 (LID-routed) and 0x81 (directed route) that an SM or a
//! discovery tool sends on QP0, and the attributes they carry.
//!
//! ```text
//!              LID-routed (0x01)            directed route (0x81)
//! bytes 0-3    common MAD header (crate::mad)
//! bytes 4-5    Status                       D(1) Status(15)
//! byte 6       ClassSpecific (high)         HopPointer
//! byte 7       ClassSpecific (low)          HopCount
//! bytes 8-23   common MAD header: TID, AttributeID, AttributeModifier
//! bytes 24-31  M_Key                        M_Key
//! bytes 32-33  reserved                     DrSLID
//! bytes 34-35  reserved                     DrDLID
//! bytes 36-63  reserved                     reserved
//! bytes 64-127 SMP data (64 bytes)          SMP data (64 bytes)
//! bytes 128-191 reserved                    InitialPath (64 port numbers)
//! bytes 192-255 reserved                    ReturnPath (64 port numbers)
//! ```
//!
//! A directed route names the egress port at each hop: `InitialPath[1..=HopCount]`
//! (entry 0 is unused), at most 63 hops. The D bit is 0 on the way out and 1 on
//! the way back; DrSLID/DrDLID are the permissive LID 0xffff when the route is
//! directed end to end, as `smpquery -D` sends it.
//!
//! The attributes live beside this module: [`node_description`], [`node_info`],
//! [`switch_info`], [`port_info`], [`lft`] (LinearForwardingTable), [`sm_info`];
//! each parses the 64 bytes of [`Repr::data`].
//!
//! ```
//! use rdmakit_wire::mad::smp::{self, attr, Route};
//! // NodeInfo of the node two hops away: out of local port 1, then port 7.
//! let req = smp::Repr::get(attr::NODE_INFO, 0, Route::directed(&[1, 7]).unwrap(), 0x42);
//! let bytes = req.to_bytes();
//! assert_eq!((bytes[1], bytes[7], bytes[129], bytes[130]), (0x81, 2, 1, 7));
//! ```

use core::fmt;

use crate::mad::status::Status;
use crate::mad::{self as madh, SmpAttribute, BASE_VERSION, METHOD_GET};
use crate::view::{get_u16, get_u64, set_u16, set_u64, view};
use crate::{Error, Result};

pub mod lft;
pub mod node_description;
pub mod node_info;
pub mod port_info;
pub mod sm_info;
pub mod switch_info;

mod field {
    use crate::field::Field;
    pub const STATUS: usize = 4;
    pub const HOP_POINTER: usize = 6;
    pub const HOP_COUNT: usize = 7;
    pub const M_KEY: usize = 24;
    pub const DR_SLID: usize = 32;
    pub const DR_DLID: usize = 34;
    pub const DATA: Field = 64..128;
    pub const INITIAL_PATH: Field = 128..192;
    pub const RETURN_PATH: Field = 192..256;
}

/// Length of an SMP (always a whole 256-byte MAD).
pub const SMP_LEN: usize = madh::MAD_LEN;
/// Length of the SMP data (the attribute).
pub const DATA_LEN: usize = 64;
/// Length of InitialPath and ReturnPath.
pub const PATH_LEN: usize = 64;
/// The most hops a directed route can take.
pub const MAX_HOPS: usize = 63;
/// Management class of a LID-routed SMP.
pub const CLASS_LID_ROUTED: u8 = 0x01;
/// Management class of a directed-route SMP.
pub const CLASS_DIRECTED: u8 = 0x81;
/// Class version of every SMP.
pub const CLASS_VERSION: u8 = 1;
/// The permissive LID, used as DrSLID/DrDLID on a route directed end to end.
pub const PERMISSIVE_LID: u16 = 0xffff;
/// Method `Set`.
pub const METHOD_SET: u8 = 0x02;

/// The attribute IDs of the SMP attributes this module knows.
pub mod attr {
    /// NodeDescription: 64 bytes of text.
    pub const NODE_DESCRIPTION: u16 = 0x0010;
    /// NodeInfo.
    pub const NODE_INFO: u16 = 0x0011;
    /// SwitchInfo.
    pub const SWITCH_INFO: u16 = 0x0012;
    /// PortInfo (modifier: the port number).
    pub const PORT_INFO: u16 = 0x0015;
    /// LinearForwardingTable (modifier: the block of 64 LIDs).
    pub const LINEAR_FORWARDING_TABLE: u16 = 0x0019;
    /// SMInfo.
    pub const SM_INFO: u16 = 0x0020;
}

/// Why a directed route cannot be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum PathError {
    /// More than [`MAX_HOPS`] ports.
    #[error("build directed route: {hops} hops, at most 63 fit in InitialPath")]
    TooLong {
        /// The hops asked for.
        hops: usize,
    },
    /// Port 255 is reserved and routes nowhere.
    #[error("build directed route: hop {hop} names port 255, which is reserved")]
    ReservedPort {
        /// The hop (1-based) that names it.
        hop: usize,
    },
}

view!(an "SMP", SMP_LEN, "256 bytes");
madh::class_mad!(SMP_LEN, "an SMP");

impl<T: AsRef<[u8]>> Packet<T> {
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// Management class: 0x01 or 0x81 in an SMP.
    pub fn mgmt_class(&self) -> u8 {
        self.header().mgmt_class()
    }

    /// True for a directed-route SMP (class 0x81).
    pub fn is_directed(&self) -> bool {
        self.mgmt_class() == CLASS_DIRECTED
    }

    /// The method byte, response bit included.
    pub fn method(&self) -> u8 {
        self.header().method()
    }

    /// Attribute modifier.
    pub fn attr_mod(&self) -> u32 {
        self.header().attr_mod()
    }

    /// The status: 16 bits when LID-routed, 15 (the D bit removed) when directed.
    pub fn status(&self) -> Status {
        let raw = get_u16(self.b(), field::STATUS);
        Status(if self.is_directed() {
            raw & 0x7fff
        } else {
            raw
        })
    }

    /// The D bit of a directed-route SMP: true on the way back.
    pub fn direction(&self) -> bool {
        self.b()[field::STATUS] & 0x80 != 0
    }

    /// Hop pointer of a directed-route SMP.
    pub fn hop_pointer(&self) -> u8 {
        self.b()[field::HOP_POINTER]
    }

    /// Hop count of a directed-route SMP.
    pub fn hop_count(&self) -> u8 {
        self.b()[field::HOP_COUNT]
    }

    /// M_Key.
    pub fn m_key(&self) -> u64 {
        get_u64(self.b(), field::M_KEY)
    }

    /// DrSLID of a directed-route SMP.
    pub fn dr_slid(&self) -> u16 {
        get_u16(self.b(), field::DR_SLID)
    }

    /// DrDLID of a directed-route SMP.
    pub fn dr_dlid(&self) -> u16 {
        get_u16(self.b(), field::DR_DLID)
    }

    /// The 64 bytes of SMP data: the attribute.
    pub fn data(&self) -> &[u8] {
        &self.b()[field::DATA]
    }

    /// InitialPath of a directed-route SMP (entry 0 unused).
    pub fn initial_path(&self) -> &[u8] {
        &self.b()[field::INITIAL_PATH]
    }

    /// ReturnPath of a directed-route SMP.
    pub fn return_path(&self) -> &[u8] {
        &self.b()[field::RETURN_PATH]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// The 64 bytes of SMP data, mutable.
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::DATA]
    }
}

/// How an SMP travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Route {
    /// LID-routed (class 0x01): the LID is in the LRH, outside the MAD.
    Lid,
    /// Directed route (class 0x81).
    Directed(Directed),
}

/// The directed-route fields of a class 0x81 SMP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Directed {
    /// The D bit: false on the way out, true on the way back.
    pub returning: bool,
    /// HopPointer.
    pub hop_pointer: u8,
    /// HopCount (at most 63).
    pub hop_count: u8,
    /// DrSLID.
    pub dr_slid: u16,
    /// DrDLID.
    pub dr_dlid: u16,
    /// InitialPath: the egress port at hop i is entry i (entry 0 unused).
    pub initial_path: [u8; PATH_LEN],
    /// ReturnPath, filled in by the switches on the way.
    pub return_path: [u8; PATH_LEN],
}

impl Route {
    /// A route directed end to end through `ports`, the egress port at each
    /// hop (the first is a port of the sending node); `&[]` is the local node.
    ///
    /// # Errors
    /// [`PathError::TooLong`] beyond 63 hops; [`PathError::ReservedPort`] for port 255.
    pub fn directed(ports: &[u8]) -> core::result::Result<Route, PathError> {
        Directed::outbound(ports).map(Route::Directed)
    }
}

impl Directed {
    /// The outbound fields of a route directed end to end through `ports`
    /// (DrSLID and DrDLID permissive, hop pointer 0, D bit clear).
    ///
    /// # Errors
    /// [`PathError::TooLong`] beyond 63 hops; [`PathError::ReservedPort`] for port 255.
    pub fn outbound(ports: &[u8]) -> core::result::Result<Directed, PathError> {
        if ports.len() > MAX_HOPS {
            return Err(PathError::TooLong { hops: ports.len() });
        }
        if let Some(i) = ports.iter().position(|&p| p == 0xff) {
            return Err(PathError::ReservedPort { hop: i + 1 });
        }
        let mut initial_path = [0; PATH_LEN];
        initial_path[1..=ports.len()].copy_from_slice(ports);
        Ok(Directed {
            returning: false,
            hop_pointer: 0,
            // At most 63 (checked above).
            hop_count: ports.len() as u8,
            dr_slid: PERMISSIVE_LID,
            dr_dlid: PERMISSIVE_LID,
            initial_path,
            return_path: [0; PATH_LEN],
        })
    }

    /// The egress ports of the route: `InitialPath[1..=HopCount]`.
    pub fn path(&self) -> &[u8] {
        let n = usize::from(self.hop_count).min(MAX_HOPS);
        &self.initial_path[1..=n]
    }
}

/// A high-level representation of an SMP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Class version (1).
    pub class_version: u8,
    /// Method, response bit included.
    pub method: u8,
    /// Status: 15 bits when directed (the D bit is [`Directed::returning`]).
    pub status: u16,
    /// Transaction ID.
    pub tid: u64,
    /// Attribute ID (see [`attr`]).
    pub attr_id: u16,
    /// Attribute modifier.
    pub attr_mod: u32,
    /// M_Key.
    pub m_key: u64,
    /// LID-routed or directed, with the directed-route fields.
    pub route: Route,
    /// The 64 bytes of SMP data.
    pub data: [u8; DATA_LEN],
}

impl Repr {
    /// A Get of `attr_id` with modifier `attr_mod` (a port, a block number).
    pub fn get(attr_id: u16, attr_mod: u32, route: Route, tid: u64) -> Repr {
        Repr {
            class_version: CLASS_VERSION,
            method: METHOD_GET,
            status: 0,
            tid,
            attr_id,
            attr_mod,
            m_key: 0,
            route,
            data: [0; DATA_LEN],
        }
    }

    /// A Set of `attr_id` to `data` (emit the attribute's Repr into it).
    pub fn set(attr_id: u16, attr_mod: u32, route: Route, tid: u64, data: [u8; DATA_LEN]) -> Repr {
        Repr {
            method: METHOD_SET,
            data,
            ..Repr::get(attr_id, attr_mod, route, tid)
        }
    }

    /// A Set of attribute `attr` (its ID and bytes from the attribute's Repr).
    pub fn set_attribute<A: SmpAttribute>(attr: &A, attr_mod: u32, route: Route, tid: u64) -> Repr {
        let mut data = [0; DATA_LEN];
        // Every SMP attribute fits the 64 bytes (LEN <= DATA_LEN, tested), so
        // this cannot fail.
        let written = attr.to_data(&mut data);
        debug_assert!(written.is_ok());
        Repr::set(A::ATTR_ID, attr_mod, route, tid, data)
    }

    /// The attribute this SMP carries, parsed from its data.
    ///
    /// # Errors
    /// [`Error::Malformed`] if the SMP carries another attribute ID.
    pub fn attribute<A: SmpAttribute>(&self) -> Result<A> {
        if self.attr_id != A::ATTR_ID {
            return Err(Error::Malformed);
        }
        A::from_data(&self.data)
    }

    /// The same request carrying `m_key`.
    pub fn with_m_key(self, m_key: u64) -> Repr {
        Repr { m_key, ..self }
    }

    /// Management class: 0x01 or 0x81.
    pub fn mgmt_class(&self) -> u8 {
        match self.route {
            Route::Lid => CLASS_LID_ROUTED,
            Route::Directed(_) => CLASS_DIRECTED,
        }
    }

    /// Parse an SMP.
    ///
    /// # Errors
    /// [`Error::Truncated`] if shorter than 256 bytes; [`Error::Malformed`] if the
    /// base version is not 1 or a directed route claims more than 63 hops;
    /// [`Error::Unsupported`] if the class is neither 0x01 nor 0x81.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Repr> {
        p.check_len()?;
        let h = p.header();
        if h.base_version() != BASE_VERSION {
            return Err(Error::Malformed);
        }
        let route = match h.mgmt_class() {
            CLASS_LID_ROUTED => Route::Lid,
            CLASS_DIRECTED => {
                if usize::from(p.hop_count()) > MAX_HOPS {
                    return Err(Error::Malformed);
                }
                let mut d = Directed {
                    returning: p.direction(),
                    hop_pointer: p.hop_pointer(),
                    hop_count: p.hop_count(),
                    dr_slid: p.dr_slid(),
                    dr_dlid: p.dr_dlid(),
                    initial_path: [0; PATH_LEN],
                    return_path: [0; PATH_LEN],
                };
                d.initial_path.copy_from_slice(p.initial_path());
                d.return_path.copy_from_slice(p.return_path());
                Route::Directed(d)
            }
            _ => return Err(Error::Unsupported),
        };
        let mut data = [0; DATA_LEN];
        data.copy_from_slice(p.data());
        Ok(Repr {
            class_version: h.class_version(),
            method: h.method(),
            status: p.status().raw(),
            tid: h.tid(),
            attr_id: h.attr_id(),
            attr_mod: h.attr_mod(),
            m_key: p.m_key(),
            route,
            data,
        })
    }

    /// Emit the whole SMP (reserved bytes zeroed).
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        let b = &mut p.buffer.as_mut()[..SMP_LEN];
        self.emit_header(self.mgmt_class(), b);
        set_u64(b, field::M_KEY, self.m_key);
        b[field::DATA].copy_from_slice(&self.data);
        if let Route::Directed(d) = &self.route {
            let status = (self.status & 0x7fff) | if d.returning { 0x8000 } else { 0 };
            set_u16(b, field::STATUS, status);
            b[field::HOP_POINTER] = d.hop_pointer;
            b[field::HOP_COUNT] = d.hop_count;
            set_u16(b, field::DR_SLID, d.dr_slid);
            set_u16(b, field::DR_DLID, d.dr_dlid);
            b[field::INITIAL_PATH].copy_from_slice(&d.initial_path);
            b[field::RETURN_PATH].copy_from_slice(&d.return_path);
        }
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "SMP {} method 0x{:02x} attr 0x{:04x} mod 0x{:x} tid 0x{:016x}",
            match self.route {
                Route::Lid => "lid-routed",
                Route::Directed(_) => "directed",
            },
            self.method,
            self.attr_id,
            self.attr_mod,
            self.tid
        )?;
        if let Route::Directed(d) = &self.route {
            write!(f, " path {:?}", d.path())?;
            if d.returning {
                f.write_str(" returning")?;
            }
        }
        if self.status != 0 {
            write!(f, " status {}", self.status())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::tests::mad_fixture;

    // smpquery -D nodeinfo 0,1,7 from H1 of the ibsim dumbbell:
    // fixtures/mad/smp-nodeinfo-dr-0-1-7.{req,resp}.hex.
    fn dr_req() -> [u8; 256] {
        mad_fixture!("smp-nodeinfo-dr-0-1-7.req.hex")
    }
    fn dr_resp() -> [u8; 256] {
        mad_fixture!("smp-nodeinfo-dr-0-1-7.resp.hex")
    }
    // smpquery nodeinfo 2: fixtures/mad/smp-nodeinfo-lid2.req.hex.
    fn lid_req() -> [u8; 256] {
        mad_fixture!("smp-nodeinfo-lid2.req.hex")
    }

    #[test]
    fn deconstruct_smpquery_dr_nodeinfo() {
        let req = dr_req();
        let p = Packet::new_checked(&req[..]).unwrap();
        assert!(p.is_directed() && !p.is_response() && !p.direction());
        assert_eq!((p.hop_pointer(), p.hop_count()), (0, 2));
        assert_eq!((p.dr_slid(), p.dr_dlid()), (0xffff, 0xffff));
        assert_eq!(&p.initial_path()[..4], &[0, 1, 7, 0]);
        assert_eq!(p.attr_id(), attr::NODE_INFO);
        assert!(p.status().is_ok());
        let resp = dr_resp();
        let p = Packet::new_checked(&resp[..]).unwrap();
        assert!(p.is_response() && p.direction());
        assert!(p.status().is_ok(), "the D bit is not status");
        // The low 32 bits are the tool's; the kernel (here umad2sim) owns the high ones.
        assert_eq!(p.tid(), 0x0001_0001_0475_0678);
    }

    #[test]
    fn construct_smpquery_dr_nodeinfo() {
        let req = dr_req();
        let tid = Packet::new_unchecked(&req[..]).tid();
        let built = Repr::get(attr::NODE_INFO, 0, Route::directed(&[1, 7]).unwrap(), tid);
        assert_eq!(built.to_bytes(), req);
    }

    #[test]
    fn construct_smpquery_lid_nodeinfo() {
        let req = lid_req();
        let tid = Packet::new_unchecked(&req[..]).tid();
        assert_eq!(
            Repr::get(attr::NODE_INFO, 0, Route::Lid, tid).to_bytes(),
            req
        );
    }

    #[test]
    fn parse_and_emit_dr_response() {
        let resp = dr_resp();
        let repr = Repr::parse(&Packet::new_checked(&resp[..]).unwrap()).unwrap();
        let Route::Directed(d) = repr.route else {
            panic!("not directed: {repr}")
        };
        assert!(d.returning);
        assert_eq!(d.path(), &[1, 7]);
        assert_eq!(repr.method, 0x81);
        let mut out = [0xa5u8; 256];
        repr.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, resp);
    }

    #[test]
    fn attribute_of_the_dr_response() {
        let resp = dr_resp();
        let repr = Repr::from_bytes(&resp).unwrap();
        let ni: node_info::Repr = repr.attribute().unwrap();
        assert_eq!((ni.node_guid, ni.local_port_num), (0x20_0001, 7));
        assert_eq!(
            repr.attribute::<port_info::Repr>().unwrap_err(),
            Error::Malformed
        );
        let back = Repr::set_attribute(&ni, 0, repr.route, repr.tid);
        assert_eq!(
            (back.method, back.attr_id, back.data),
            (METHOD_SET, attr::NODE_INFO, repr.data)
        );
    }

    #[test]
    fn every_attribute_fits_the_smp_data() {
        use crate::mad::Attribute;
        for len in [
            node_description::Repr::LEN,
            node_info::Repr::LEN,
            switch_info::Repr::LEN,
            port_info::Repr::LEN,
            lft::Repr::LEN,
            sm_info::Repr::LEN,
        ] {
            assert!(len <= DATA_LEN);
        }
    }

    #[test]
    fn path_limits() {
        assert!(Route::directed(&[1; 63]).is_ok());
        assert_eq!(
            Route::directed(&[1; 64]),
            Err(PathError::TooLong { hops: 64 })
        );
        assert_eq!(
            Route::directed(&[1, 255]),
            Err(PathError::ReservedPort { hop: 2 })
        );
        let Route::Directed(d) = Route::directed(&[]).unwrap() else {
            unreachable!()
        };
        assert_eq!(d.hop_count, 0);
        assert!(d.path().is_empty());
    }

    #[test]
    fn set_carries_data_and_method() {
        let r = Repr::set(attr::PORT_INFO, 3, Route::Lid, 7, [0x11; 64]).with_m_key(9);
        let b = r.to_bytes();
        assert_eq!((b[1], b[3]), (CLASS_LID_ROUTED, METHOD_SET));
        assert_eq!(&b[24..32], &9u64.to_be_bytes());
        assert_eq!(&b[64..128], &[0x11; 64]);
        assert!(b[128..].iter().all(|&x| x == 0));
    }

    #[test]
    fn truncated_bad_class_and_hops() {
        let req = dr_req();
        assert_eq!(
            Packet::new_checked(&req[..255]).unwrap_err(),
            Error::Truncated
        );
        let mut bad = req;
        bad[7] = 64;
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&bad[..])).unwrap_err(),
            Error::Malformed
        );
        let mut bad = req;
        bad[1] = 0x04;
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&bad[..])).unwrap_err(),
            Error::Unsupported
        );
    }
}
