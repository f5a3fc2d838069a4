//! Management Datagram common header (IBTA Vol 1 §13.4.3): the first 24 bytes of
//! every MAD, which a RoCEv2 UD SEND to QP1 (the GSI) carries as its 256-byte
//! payload. Communication management ([`crate::cm`]) is class 0x07.
//!
//! ```text
//! byte 0      BaseVersion (1)
//! byte 1      MgmtClass
//! byte 2      ClassVersion
//! byte 3      R(1) Method(7)
//! bytes 4-5   Status
//! bytes 6-7   ClassSpecific
//! bytes 8-15  TransactionID
//! bytes 16-17 AttributeID
//! bytes 18-19 reserved
//! bytes 20-23 AttributeModifier
//! bytes 24-   class data (232 bytes in a 256-byte MAD)
//! ```
//!
//! Beside the header: [`smp`], subnet management packets (classes 0x01 and
//! 0x81) and their attributes; [`pma`], performance management (class 0x04)
//! and its counters; [`status`], the status word decoded. Link width and speed
//! codes stay raw numbers here.
//!
//! A request is built whole (`smp::Repr::get`, `pma::Repr::get`, `reset_port_counters`)
//! and `to_bytes` gives the 256 bytes to send; a reply parses with
//! `smp::Repr::parse` / `pma::Repr::parse`, and `attribute::<node_info::Repr>()`
//! (any [`Attribute`]) reads what it carries.

use core::fmt;

use crate::view::{get_u16, view};
use crate::{Error, Result};

pub mod pma;
pub mod smp;
pub mod status;

pub use status::{InvalidField, Status};

mod field {
    use crate::field::{Field, Rest};
    pub const BASE_VERSION: usize = 0;
    pub const MGMT_CLASS: usize = 1;
    pub const CLASS_VERSION: usize = 2;
    pub const METHOD: usize = 3;
    pub const STATUS: Field = 4..6;
    pub const CLASS_SPECIFIC: Field = 6..8;
    pub const TID: Field = 8..16;
    pub const ATTR_ID: Field = 16..18;
    pub const RESERVED: Field = 18..20;
    pub const ATTR_MOD: Field = 20..24;
    pub const DATA: Rest = 24..;
}

/// An attribute a MAD carries in its data (an SMP's 64 bytes, a PMA's 192):
/// its attribute ID and length, parsed from and emitted into those bytes.
pub trait Attribute: Sized {
    /// The attribute ID.
    const ATTR_ID: u16;
    /// The bytes the attribute defines (the rest of the data is reserved).
    const LEN: usize;

    /// Parse the attribute from the MAD's data.
    ///
    /// # Errors
    /// [`Error::Truncated`] if `data` is shorter than [`Attribute::LEN`].
    fn from_data(data: &[u8]) -> Result<Self>;

    /// Emit the attribute into the MAD's data (its reserved bytes zeroed).
    ///
    /// # Errors
    /// [`Error::Truncated`] if `data` is shorter than [`Attribute::LEN`].
    fn to_data(&self, data: &mut [u8]) -> Result<()>;
}

/// An attribute of the subnet management class ([`smp`]).
pub trait SmpAttribute: Attribute {}
/// An attribute of the performance management class ([`pma`]).
pub trait PmaAttribute: Attribute {}

/// Implements [`Attribute`] and `$marker` for the `Repr` of a `layout!`
/// module whose length is `LEN`.
macro_rules! attribute {
    ($marker:ident, $id:expr) => {
        impl $crate::mad::Attribute for Repr {
            const ATTR_ID: u16 = $id;
            const LEN: usize = LEN;

            fn from_data(data: &[u8]) -> $crate::Result<Repr> {
                Repr::parse(&Packet::new_checked(data)?)
            }

            fn to_data(&self, data: &mut [u8]) -> $crate::Result<()> {
                let d = data.get_mut(..LEN).ok_or($crate::Error::Truncated)?;
                self.emit(&mut Packet::new_unchecked(d));
                Ok(())
            }
        }

        impl $crate::mad::$marker for Repr {}
    };
}
pub(crate) use attribute;

/// The parts every class of 256-byte MAD (`smp`, `pma`) shares, given the
/// module's length constant and what it calls one of its MADs: the view's
/// header accessors; the `Repr`'s (fields named as in [`Repr`])
/// `is_response`, `status`, `from_bytes`, `buffer_len`, `to_bytes`, and the
/// `emit_header` its `emit` starts with.
macro_rules! class_mad {
    ($len:ident, $what:literal) => {
        impl<T: AsRef<[u8]>> Packet<T> {
            /// The common header of this MAD.
            pub fn header(&self) -> $crate::mad::Packet<&[u8]> {
                $crate::mad::Packet::new_unchecked(self.buffer.as_ref())
            }

            /// True when the method's response bit is set.
            pub fn is_response(&self) -> bool {
                self.header().is_response()
            }

            /// Transaction ID.
            pub fn tid(&self) -> u64 {
                self.header().tid()
            }

            /// Attribute ID.
            pub fn attr_id(&self) -> u16 {
                self.header().attr_id()
            }
        }

        impl Repr {
            /// True when the method's response bit is set.
            pub fn is_response(&self) -> bool {
                self.method & $crate::mad::METHOD_RESPONSE != 0
            }

            /// The status, decoded.
            pub fn status(&self) -> $crate::mad::Status {
                $crate::mad::Status(self.status)
            }

            #[doc = concat!("[`Packet::new_checked`] then [`Repr::parse`]: ", $what, " from")]
            /// the bytes a MAD transport delivered.
            ///
            /// # Errors
            /// As [`Repr::parse`].
            pub fn from_bytes(bytes: &[u8]) -> $crate::Result<Repr> {
                Repr::parse(&Packet::new_checked(bytes)?)
            }

            /// The length this Repr emits (256).
            pub const fn buffer_len(&self) -> usize {
                $len
            }

            /// The 256 bytes of this MAD.
            pub fn to_bytes(&self) -> [u8; $len] {
                let mut b = [0; $len];
                self.emit(&mut Packet::new_unchecked(&mut b[..]));
                b
            }

            /// Zeroes `b` and emits the common header, of class `mgmt_class`.
            fn emit_header(&self, mgmt_class: u8, b: &mut [u8]) {
                b.fill(0);
                $crate::mad::Repr {
                    base_version: $crate::mad::BASE_VERSION,
                    mgmt_class,
                    class_version: self.class_version,
                    method: self.method,
                    status: self.status,
                    class_specific: 0,
                    tid: self.tid,
                    attr_id: self.attr_id,
                    attr_mod: self.attr_mod,
                }
                .emit(&mut $crate::mad::Packet::new_unchecked(b));
            }
        }
    };
}
pub(crate) use class_mad;

/// Length of the common MAD header.
pub const HEADER_LEN: usize = field::DATA.start;
/// Length of a MAD on a UD QP (header + class data).
pub const MAD_LEN: usize = 256;
/// Length of the class data of a 256-byte MAD.
pub const DATA_LEN: usize = MAD_LEN - HEADER_LEN;

/// `BaseVersion` of every IBTA MAD.
pub const BASE_VERSION: u8 = 1;
/// Management class: communication management.
pub const CLASS_CM: u8 = 0x07;
/// Method `Send` (CM messages are all sends).
pub const METHOD_SEND: u8 = 0x03;
/// Method `Get`.
pub const METHOD_GET: u8 = 0x01;
/// The response bit of the method byte.
pub const METHOD_RESPONSE: u8 = 0x80;

view!(a "MAD", HEADER_LEN, "the 24-byte header");

impl<T: AsRef<[u8]>> Packet<T> {
    fn u16_at(&self, f: core::ops::Range<usize>) -> u16 {
        get_u16(self.buffer.as_ref(), f.start)
    }

    /// Base version (1).
    pub fn base_version(&self) -> u8 {
        self.buffer.as_ref()[field::BASE_VERSION]
    }

    /// Management class.
    pub fn mgmt_class(&self) -> u8 {
        self.buffer.as_ref()[field::MGMT_CLASS]
    }

    /// Class version.
    pub fn class_version(&self) -> u8 {
        self.buffer.as_ref()[field::CLASS_VERSION]
    }

    /// The method byte, response bit included.
    pub fn method(&self) -> u8 {
        self.buffer.as_ref()[field::METHOD]
    }

    /// True when the method byte's response bit is set.
    pub fn is_response(&self) -> bool {
        self.method() & METHOD_RESPONSE != 0
    }

    /// Status.
    pub fn status(&self) -> u16 {
        self.u16_at(field::STATUS)
    }

    /// Class-specific field.
    pub fn class_specific(&self) -> u16 {
        self.u16_at(field::CLASS_SPECIFIC)
    }

    /// Transaction ID.
    pub fn tid(&self) -> u64 {
        let d = &self.buffer.as_ref()[field::TID];
        let mut b = [0u8; 8];
        b.copy_from_slice(d);
        u64::from_be_bytes(b)
    }

    /// Attribute ID.
    pub fn attr_id(&self) -> u16 {
        self.u16_at(field::ATTR_ID)
    }

    /// The reserved 16 bits after the attribute ID (0 on the wire).
    pub fn reserved(&self) -> u16 {
        self.u16_at(field::RESERVED)
    }

    /// Attribute modifier.
    pub fn attr_mod(&self) -> u32 {
        let d = &self.buffer.as_ref()[field::ATTR_MOD];
        u32::from_be_bytes([d[0], d[1], d[2], d[3]])
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The class data after the header.
    pub fn data(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::DATA]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the base version.
    pub fn set_base_version(&mut self, value: u8) {
        self.buffer.as_mut()[field::BASE_VERSION] = value
    }

    /// Set the management class.
    pub fn set_mgmt_class(&mut self, value: u8) {
        self.buffer.as_mut()[field::MGMT_CLASS] = value
    }

    /// Set the class version.
    pub fn set_class_version(&mut self, value: u8) {
        self.buffer.as_mut()[field::CLASS_VERSION] = value
    }

    /// Set the method byte (response bit included).
    pub fn set_method(&mut self, value: u8) {
        self.buffer.as_mut()[field::METHOD] = value
    }

    /// Set the status.
    pub fn set_status(&mut self, value: u16) {
        self.buffer.as_mut()[field::STATUS].copy_from_slice(&value.to_be_bytes())
    }

    /// Set the class-specific field.
    pub fn set_class_specific(&mut self, value: u16) {
        self.buffer.as_mut()[field::CLASS_SPECIFIC].copy_from_slice(&value.to_be_bytes())
    }

    /// Set the transaction ID.
    pub fn set_tid(&mut self, value: u64) {
        self.buffer.as_mut()[field::TID].copy_from_slice(&value.to_be_bytes())
    }

    /// Set the attribute ID.
    pub fn set_attr_id(&mut self, value: u16) {
        self.buffer.as_mut()[field::ATTR_ID].copy_from_slice(&value.to_be_bytes())
    }

    /// Set the reserved field.
    pub fn set_reserved(&mut self, value: u16) {
        self.buffer.as_mut()[field::RESERVED].copy_from_slice(&value.to_be_bytes())
    }

    /// Set the attribute modifier.
    pub fn set_attr_mod(&mut self, value: u32) {
        self.buffer.as_mut()[field::ATTR_MOD].copy_from_slice(&value.to_be_bytes())
    }

    /// The class data, mutable.
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::DATA]
    }
}

/// A high-level representation of the common MAD header (the reserved field is
/// written as 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// Base version (1 for every IBTA class).
    pub base_version: u8,
    /// Management class.
    pub mgmt_class: u8,
    /// Class version.
    pub class_version: u8,
    /// Method, response bit included.
    pub method: u8,
    /// Status.
    pub status: u16,
    /// Class-specific.
    pub class_specific: u16,
    /// Transaction ID.
    pub tid: u64,
    /// Attribute ID.
    pub attr_id: u16,
    /// Attribute modifier.
    pub attr_mod: u32,
}

impl Repr {
    /// True when the method's response bit is set.
    pub fn is_response(&self) -> bool {
        self.method & METHOD_RESPONSE != 0
    }

    /// The status, decoded (for a directed-route SMP use [`smp::Repr::status`],
    /// which strips the D bit).
    pub fn decoded_status(&self) -> Status {
        Status(self.status)
    }

    /// Parse a MAD header.
    ///
    /// # Errors
    /// [`Error::Truncated`] if shorter than 24 bytes; [`Error::Malformed`] if the
    /// base version is not 1.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        packet.check_len()?;
        if packet.base_version() != BASE_VERSION {
            return Err(Error::Malformed);
        }
        Ok(Repr {
            base_version: packet.base_version(),
            mgmt_class: packet.mgmt_class(),
            class_version: packet.class_version(),
            method: packet.method(),
            status: packet.status(),
            class_specific: packet.class_specific(),
            tid: packet.tid(),
            attr_id: packet.attr_id(),
            attr_mod: packet.attr_mod(),
        })
    }

    /// The length of the header this Repr emits (24).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Emit the header into a buffer of at least 24 bytes.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_base_version(self.base_version);
        packet.set_mgmt_class(self.mgmt_class);
        packet.set_class_version(self.class_version);
        packet.set_method(self.method);
        packet.set_status(self.status);
        packet.set_class_specific(self.class_specific);
        packet.set_tid(self.tid);
        packet.set_attr_id(self.attr_id);
        packet.set_reserved(0);
        packet.set_attr_mod(self.attr_mod);
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "MAD class 0x{:02x} v{} method 0x{:02x} attr 0x{:04x} tid 0x{:016x}",
            self.mgmt_class, self.class_version, self.method, self.attr_id, self.tid
        )?;
        if self.status != 0 {
            write!(f, " status 0x{:04x}", self.status)?;
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The 256 bytes of a MAD fixture: hex digit pairs, whitespace ignored.
    pub(crate) fn hex_mad(s: &str) -> [u8; MAD_LEN] {
        let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
        assert_eq!(digits.len(), 2 * MAD_LEN, "a MAD fixture is 256 bytes");
        let mut out = [0; MAD_LEN];
        for (o, pair) in out.iter_mut().zip(digits.chunks(2)) {
            *o = u8::from_str_radix(core::str::from_utf8(pair).unwrap(), 16).unwrap();
        }
        out
    }

    /// The 256 bytes of the MAD fixture `fixtures/mad/$name` (see [`hex_mad`]).
    macro_rules! mad_fixture {
        ($name:literal) => {
            $crate::mad::tests::hex_mad(include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../fixtures/mad/",
                $name
            )))
        };
    }
    pub(crate) use mad_fixture;

    /// The first `N` bytes of the attribute a MAD carries: an SMP's or a
    /// PMA's data, both at byte 64.
    pub(crate) fn attr_data<const N: usize>(mad: &[u8; MAD_LEN]) -> [u8; N] {
        mad[64..64 + N].try_into().unwrap()
    }

    // The MAD header of the REQ Linux 6.1's rdma_cm sent from rxe1
    // (10.0.3.2) for `rping -c -a 10.0.3.1 -p 7174`:
    // fixtures/pcap-cm/rxe-requests-unanswered.pcap, frame 1.
    static MAD: &[u8; 256] = include_bytes!("../../tests/data/cm/rxe-req.mad");

    fn header() -> &'static [u8] {
        &MAD[..HEADER_LEN]
    }

    fn repr() -> Repr {
        Repr {
            base_version: 1,
            mgmt_class: CLASS_CM,
            class_version: 2,
            method: METHOD_SEND,
            status: 0,
            class_specific: 0,
            tid: 0x0000_0004_99e9_8983,
            attr_id: 0x0010,
            attr_mod: 0,
        }
    }

    #[test]
    fn deconstruct_rxe_req() {
        let p = Packet::new_checked(&MAD[..]).unwrap();
        assert_eq!(p.base_version(), 1);
        assert_eq!(p.mgmt_class(), 0x07);
        assert_eq!(p.class_version(), 2);
        assert_eq!(p.method(), 0x03);
        assert_eq!(p.status(), 0);
        assert_eq!(p.class_specific(), 0);
        assert_eq!(p.tid(), 0x0000_0004_99e9_8983);
        assert_eq!(p.attr_id(), 0x0010);
        assert_eq!(p.reserved(), 0);
        assert_eq!(p.attr_mod(), 0);
        assert_eq!(p.data().len(), DATA_LEN);
    }

    #[test]
    fn construct_rxe_req() {
        let mut bytes = [0xa5u8; HEADER_LEN];
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        p.set_base_version(1);
        p.set_mgmt_class(CLASS_CM);
        p.set_class_version(2);
        p.set_method(METHOD_SEND);
        p.set_status(0);
        p.set_class_specific(0);
        p.set_tid(0x0000_0004_99e9_8983);
        p.set_attr_id(0x0010);
        p.set_reserved(0);
        p.set_attr_mod(0);
        assert_eq!(&bytes[..], header());
    }

    #[test]
    fn parse_rxe_req() {
        let p = Packet::new_checked(&MAD[..]).unwrap();
        assert_eq!(Repr::parse(&p).unwrap(), repr());
    }

    #[test]
    fn emit_rxe_req() {
        let mut bytes = [0xa5u8; HEADER_LEN];
        repr().emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(&bytes[..], header());
    }

    #[test]
    fn truncated_and_bad_version() {
        assert_eq!(
            Packet::new_checked(&MAD[..HEADER_LEN - 1]).unwrap_err(),
            Error::Truncated
        );
        let mut bad = *MAD;
        bad[0] = 2;
        let p = Packet::new_checked(&bad[..]).unwrap();
        assert_eq!(Repr::parse(&p).unwrap_err(), Error::Malformed);
    }
}
