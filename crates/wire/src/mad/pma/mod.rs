//! Performance management (IBTA Vol 1 §16.1): the GMPs of management class
//! 0x04 that read and clear a port's counters through its PMA on QP1.
//!
//! ```text
//! bytes 0-23   common MAD header (crate::mad)
//! bytes 24-63  reserved (40 bytes)
//! bytes 64-255 PMA data (192 bytes): the attribute
//! ```
//!
//! The attributes live beside this module: [`class_port_info`] (which
//! optional counters the PMA has), [`port_counters`] (PortCounters, 16- and
//! 32-bit counters that stop at all ones), [`port_counters_ext`]
//! (PortCountersExtended, 64-bit), [`rcv_error_details`] and
//! [`xmit_discard_details`]. Each counter attribute publishes a table of its
//! counters ([`Counter`]: the name perfquery prints, the width in bits) so a
//! caller can tell a saturated counter (all ones) from a large one.
//!
//! ```
//! use rdmakit_wire::mad::pma::{self, attr};
//! // What `perfquery 2 7` sends second: PortCounters of port 7.
//! let req = pma::Repr::get(attr::PORT_COUNTERS, 7, 0x42).to_bytes();
//! assert_eq!((req[1], req[3], req[17], req[65]), (0x04, 0x01, 0x12, 7));
//! // And what `perfquery -R 3 7` sends: clear every counter of port 7.
//! let reset = pma::Repr::reset_port_counters(7, 0xffff, 0x01, 0x43).to_bytes();
//! assert_eq!((reset[3], &reset[66..68]), (0x02, &[0xff, 0xff][..]));
//! ```

use core::fmt;

use crate::mad::status::Status;
use crate::mad::{self as madh, PmaAttribute, METHOD_GET};
use crate::view::view;
use crate::{Error, Result};

pub mod class_port_info;
pub mod port_counters;
pub mod port_counters_ext;
pub mod rcv_error_details;
pub mod xmit_discard_details;

/// Length of a PMA MAD.
pub const PMA_LEN: usize = madh::MAD_LEN;
/// Where the PMA data starts.
pub const DATA_OFFSET: usize = 64;
/// Length of the PMA data.
pub const DATA_LEN: usize = PMA_LEN - DATA_OFFSET;
/// Management class: performance management.
pub const CLASS_PERF: u8 = 0x04;
/// Class version of the PMA.
pub const CLASS_VERSION: u8 = 1;
/// Method `Set` (clears the counters CounterSelect names).
pub const METHOD_SET: u8 = 0x02;
/// PortSelect meaning "all ports" (when ClassPortInfo has AllPortSelect).
pub const ALL_PORTS: u8 = 0xff;

/// The attribute IDs of the PMA attributes this module knows.
pub mod attr {
    /// ClassPortInfo.
    pub const CLASS_PORT_INFO: u16 = 0x0001;
    /// PortCounters.
    pub const PORT_COUNTERS: u16 = 0x0012;
    /// PortRcvErrorDetails.
    pub const PORT_RCV_ERROR_DETAILS: u16 = 0x0015;
    /// PortXmitDiscardDetails.
    pub const PORT_XMIT_DISCARD_DETAILS: u16 = 0x0016;
    /// PortCountersExtended.
    pub const PORT_COUNTERS_EXTENDED: u16 = 0x001d;
}

/// One counter of a counter attribute: the name perfquery prints and its
/// width. A counter that reads all ones ([`Counter::max`]) has saturated and
/// stays there until cleared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Counter {
    /// The name as perfquery prints it (`SymbolErrorCounter`).
    pub name: &'static str,
    /// Width in bits (4, 8, 16, 32 or 64).
    pub bits: u8,
}

impl Counter {
    /// The largest value the counter holds: all `bits` ones.
    pub const fn max(self) -> u64 {
        if self.bits >= 64 {
            u64::MAX
        } else {
            (1u64 << self.bits) - 1
        }
    }

    /// True when `value` is all ones: the counter stopped counting.
    pub const fn is_saturated(self, value: u64) -> bool {
        value >= self.max()
    }
}

/// Declares a counter attribute's table of [`Counter`]s (name as perfquery
/// prints it, width, and the `Repr` field that holds it) as the `const`
/// `$table` and the `Repr` method `$method` that pairs each with its value;
/// given `shown as "Title"`, also the `Display` that prints the title, the
/// port and every counter that is not zero.
macro_rules! counters {
    (
        $(#[$doc:meta])*
        $table:ident / $method:ident $(, shown as $title:literal)? {
            $( $name:literal: $bits:literal = $field:ident, )+
        }
    ) => {
        $(#[$doc])*
        pub const $table: [$crate::mad::pma::Counter; [$($name),+].len()] = [
            $( $crate::mad::pma::Counter { name: $name, bits: $bits }, )+
        ];

        impl Repr {
            #[doc = concat!("Each counter of [`", stringify!($table), "`] with its value.")]
            pub fn $method(&self) -> [($crate::mad::pma::Counter, u64); $table.len()] {
                let v = [$( u64::from(self.$field) ),+];
                core::array::from_fn(|i| ($table[i], v[i]))
            }
        }

        $(
            impl core::fmt::Display for Repr {
                fn fmt(&self, f: &mut core::fmt::Formatter) -> core::fmt::Result {
                    write!(f, "{} port {}", $title, self.port_select)?;
                    for (c, v) in self.$method().into_iter().filter(|(_, v)| *v != 0) {
                        write!(f, " {}={v}", c.name)?;
                    }
                    Ok(())
                }
            }
        )?
    };
}
pub(crate) use counters;

view!(a "PMA MAD", PMA_LEN, "256 bytes");
madh::class_mad!(PMA_LEN, "a PMA MAD");

impl<T: AsRef<[u8]>> Packet<T> {
    /// The status, decoded.
    pub fn status(&self) -> Status {
        Status(self.header().status())
    }

    /// The 192 bytes of PMA data: the attribute.
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[DATA_OFFSET..PMA_LEN]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// The 192 bytes of PMA data, mutable.
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[DATA_OFFSET..PMA_LEN]
    }
}

/// A high-level representation of a PMA MAD.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Class version (1).
    pub class_version: u8,
    /// Method, response bit included.
    pub method: u8,
    /// Status.
    pub status: u16,
    /// Transaction ID.
    pub tid: u64,
    /// Attribute ID (see [`attr`]).
    pub attr_id: u16,
    /// Attribute modifier (0 for every attribute here).
    pub attr_mod: u32,
    /// The 192 bytes of PMA data.
    pub data: [u8; DATA_LEN],
}

impl Repr {
    /// A Get of `attr_id` for port `port_select` (byte 1 of the data, where
    /// every counter attribute has PortSelect; use 0 for ClassPortInfo).
    pub fn get(attr_id: u16, port_select: u8, tid: u64) -> Repr {
        let mut data = [0; DATA_LEN];
        if attr_id != attr::CLASS_PORT_INFO {
            data[1] = port_select;
        }
        Repr {
            class_version: CLASS_VERSION,
            method: METHOD_GET,
            status: 0,
            tid,
            attr_id,
            attr_mod: 0,
            data,
        }
    }

    /// A Set of a counter attribute that clears, on port `port_select`, the
    /// counters whose bits are set in `counter_select` (bytes 2-3 of the data;
    /// 0xffff = all).
    pub fn reset(attr_id: u16, port_select: u8, counter_select: u16, tid: u64) -> Repr {
        let mut r = Repr::get(attr_id, port_select, tid);
        r.method = METHOD_SET;
        r.data[2..4].copy_from_slice(&counter_select.to_be_bytes());
        r
    }

    /// The Set that clears PortCounters: `counter_select` as
    /// [`port_counters::select`] names the bits, `counter_select2` (byte 18)
    /// bit 0 for PortXmitWait. `perfquery -R` sends 0xffff and 0x01.
    pub fn reset_port_counters(
        port_select: u8,
        counter_select: u16,
        counter_select2: u8,
        tid: u64,
    ) -> Repr {
        let mut r = Repr::reset(attr::PORT_COUNTERS, port_select, counter_select, tid);
        r.data[18] = counter_select2;
        r
    }

    /// The attribute this MAD carries, parsed from its data.
    ///
    /// # Errors
    /// [`Error::Malformed`] if the MAD carries another attribute ID.
    pub fn attribute<A: PmaAttribute>(&self) -> Result<A> {
        if self.attr_id != A::ATTR_ID {
            return Err(Error::Malformed);
        }
        A::from_data(&self.data)
    }

    /// Parse a PMA MAD.
    ///
    /// # Errors
    /// [`Error::Truncated`] if shorter than 256 bytes; [`Error::Malformed`] if the
    /// base version is not 1; [`Error::Unsupported`] if the class is not 0x04.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Repr> {
        p.check_len()?;
        let h = madh::Repr::parse(&p.header())?;
        if h.mgmt_class != CLASS_PERF {
            return Err(Error::Unsupported);
        }
        let mut data = [0; DATA_LEN];
        data.copy_from_slice(p.data());
        Ok(Repr {
            class_version: h.class_version,
            method: h.method,
            status: h.status,
            tid: h.tid,
            attr_id: h.attr_id,
            attr_mod: h.attr_mod,
            data,
        })
    }

    /// Emit the whole MAD (reserved bytes zeroed).
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        let b = &mut p.buffer.as_mut()[..PMA_LEN];
        self.emit_header(CLASS_PERF, b);
        b[DATA_OFFSET..].copy_from_slice(&self.data);
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "PMA method 0x{:02x} attr 0x{:04x} port {} tid 0x{:016x}",
            self.method, self.attr_id, self.data[1], self.tid
        )?;
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

    // `perfquery 2 7` and `perfquery -R 3 7`: fixtures/mad/pma-portcounters-*.hex.
    fn get_req() -> [u8; 256] {
        mad_fixture!("pma-portcounters-lid2-p7.req.hex")
    }
    fn reset_req() -> [u8; 256] {
        mad_fixture!("pma-portcounters-reset-lid3-p7.req.hex")
    }

    #[test]
    fn construct_perfquery_get() {
        let req = get_req();
        let tid = Packet::new_unchecked(&req[..]).tid();
        assert_eq!(Repr::get(attr::PORT_COUNTERS, 7, tid).to_bytes(), req);
    }

    #[test]
    fn construct_perfquery_reset() {
        let req = reset_req();
        let tid = Packet::new_unchecked(&req[..]).tid();
        assert_eq!(
            Repr::reset_port_counters(7, 0xffff, 0x01, tid).to_bytes(),
            req
        );
    }

    #[test]
    fn parse_and_emit_perfquery_reset() {
        let req = reset_req();
        let r = Repr::parse(&Packet::new_checked(&req[..]).unwrap()).unwrap();
        assert_eq!(
            (r.method, r.attr_id, r.data[1]),
            (METHOD_SET, attr::PORT_COUNTERS, 7)
        );
        assert!(!r.is_response() && r.status().is_ok());
        let mut out = [0xa5u8; 256];
        r.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, req);
    }

    #[test]
    fn attribute_of_the_perfquery_response() {
        let m = mad_fixture!("pma-portcounters-lid2-p7.resp.hex");
        let r = Repr::from_bytes(&m).unwrap();
        let pc: port_counters::Repr = r.attribute().unwrap();
        assert_eq!((pc.port_select, pc.symbol_error_counter), (7, 77));
        assert_eq!(
            r.attribute::<port_counters_ext::Repr>().unwrap_err(),
            Error::Malformed
        );
    }

    #[test]
    fn class_port_info_get_has_no_port() {
        let b = Repr::get(attr::CLASS_PORT_INFO, 9, 1).to_bytes();
        assert!(b[64..].iter().all(|&x| x == 0));
    }

    #[test]
    fn truncated_and_wrong_class() {
        let req = get_req();
        assert_eq!(
            Packet::new_checked(&req[..255]).unwrap_err(),
            Error::Truncated
        );
        let mut smp = req;
        smp[1] = 0x01;
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&smp[..])).unwrap_err(),
            Error::Unsupported
        );
    }

    #[test]
    fn counter_widths() {
        let c = |bits| Counter { name: "x", bits };
        assert_eq!(
            (c(4).max(), c(16).max(), c(64).max()),
            (15, 65535, u64::MAX)
        );
        assert!(c(8).is_saturated(255) && !c(8).is_saturated(254));
    }
}
