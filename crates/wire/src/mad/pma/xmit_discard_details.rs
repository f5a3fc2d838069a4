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

super::counters! {
    /// The counters, in the order `perfquery -D` prints them, with their widths.
    COUNTERS / counters, shown as "PortXmitDiscardDetails" {
        "PortInactiveDiscards": 16 = port_inactive_discards,
        "PortNeighborMTUDiscards": 16 = port_neighbor_mtu_discards,
        "PortSwLifetimeLimitDiscards": 16 = port_sw_lifetime_limit_discards,
        "PortSwHOQLifetimeLimitDiscards": 16 = port_sw_hoq_lifetime_limit_discards,
    }
}

impl Repr {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::tests::mad_fixture;

    // `perfquery -D 2 7`: fixtures/mad/pma-xmitdiscarddetails-lid2-p7.resp.hex.
    #[test]
    fn parse_and_emit_perfquery_d() {
        let m = mad_fixture!("pma-xmitdiscarddetails-lid2-p7.resp.hex");
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
