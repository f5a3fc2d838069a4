//! PortXmitDiscardDetails (attribute 0x0016, IBTA Vol 1 §16.1.4.3): why a port
//! counted PortXmitDiscards, one 16-bit counter per cause.
//!
//! ```text
//! byte 0       reserved
//! byte 1       PortSelect
//! bytes 2-3    CounterSelect
//! bytes 4-5    PortInactiveDiscards
//! bytes 6-7    PortNeighborMTUDiscards
//! bytes 8-9    PortSwLifetimeLimitDiscards
//! bytes 10-11  PortSwHOQLifetimeLimitDiscards
//! ```

use core::fmt;

use super::Counter;
use crate::view::{layout, Zeroing, U16, U8};

/// Length of the attribute's defined part.
pub const LEN: usize = 12;

layout! {
    a "PortXmitDiscardDetails", LEN, "12 bytes";
    fields {
        /// PortSelect.
        port_select / set_port_select: u8 = Zeroing<U8<1>, 0, LEN>;
        /// CounterSelect.
        counter_select / set_counter_select: u16 = U16<2>;
        /// PortInactiveDiscards: the port was not Active.
        port_inactive_discards / set_port_inactive_discards: u16 = U16<4>;
        /// PortNeighborMTUDiscards: the packet exceeded the neighbor's MTU.
        port_neighbor_mtu_discards / set_port_neighbor_mtu_discards: u16 = U16<6>;
        /// PortSwLifetimeLimitDiscards.
        port_sw_lifetime_limit_discards / set_port_sw_lifetime_limit_discards: u16 = U16<8>;
        /// PortSwHOQLifetimeLimitDiscards: head-of-queue timeouts (congestion).
        port_sw_hoq_lifetime_limit_discards / set_port_sw_hoq_lifetime_limit_discards: u16 = U16<10>;
    }
}

crate::mad::attribute!(PmaAttribute, super::attr::PORT_XMIT_DISCARD_DETAILS);

/// The counters, in the order `perfquery -D` prints them, with their widths.
pub const COUNTERS: [Counter; 4] = [
    Counter {
        name: "PortInactiveDiscards",
        bits: 16,
    },
    Counter {
        name: "PortNeighborMTUDiscards",
        bits: 16,
    },
    Counter {
        name: "PortSwLifetimeLimitDiscards",
        bits: 16,
    },
    Counter {
        name: "PortSwHOQLifetimeLimitDiscards",
        bits: 16,
    },
];

impl Repr {
    /// Each counter of [`COUNTERS`] with its value.
    pub fn counters(&self) -> [(Counter, u64); 4] {
        let v = [
            self.port_inactive_discards,
            self.port_neighbor_mtu_discards,
            self.port_sw_lifetime_limit_discards,
            self.port_sw_hoq_lifetime_limit_discards,
        ];
        core::array::from_fn(|i| (COUNTERS[i], u64::from(v[i])))
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "PortXmitDiscardDetails port {}", self.port_select)?;
        for (c, v) in self.counters().into_iter().filter(|(_, v)| *v != 0) {
            write!(f, " {}={v}", c.name)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::tests::hex_mad;

    // `perfquery -D 2 7`: fixtures/mad/pma-xmitdiscarddetails-lid2-p7.resp.hex.
    #[test]
    fn parse_and_emit_perfquery_d() {
        let m = hex_mad(include_str!(
            "../../../../../fixtures/mad/pma-xmitdiscarddetails-lid2-p7.resp.hex"
        ));
        let d = &m[64..64 + LEN];
        let r = Repr::parse(&Packet::new_checked(d).unwrap()).unwrap();
        assert_eq!(
            r,
            Repr {
                port_select: 7,
                port_inactive_discards: 6,
                ..Repr::default()
            }
        );
        let mut b = [0xa5u8; LEN];
        r.emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(&b[..], d);
    }
}
