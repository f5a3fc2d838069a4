//! PortCountersExtended (attribute 0x001D, IBTA Vol 1 §16.1.4.11): 64-bit
//! data and packet counters, which do not saturate in practice. The unicast
//! and multicast packet counters are there only when ClassPortInfo has
//! ExtendedWidthSupported (not just the NoIETF variant).
//!
//! ```text
//! byte 0       reserved
//! byte 1       PortSelect
//! bytes 2-3    CounterSelect
//! bytes 4-7    reserved (CounterSelect2 in later revisions)
//! bytes 8-15   PortXmitData (4-byte words)
//! bytes 16-23  PortRcvData (4-byte words)
//! bytes 24-31  PortXmitPkts
//! bytes 32-39  PortRcvPkts
//! bytes 40-47  PortUnicastXmitPkts
//! bytes 48-55  PortUnicastRcvPkts
//! bytes 56-63  PortMulticastXmitPkts
//! bytes 64-71  PortMulticastRcvPkts
//! ```
//!
//! The 64-bit error counters some PMAs append after byte 72 (CapabilityMask2
//! IsAdditionalPortCountersExtendedSupported) are not decoded here.

use core::fmt;

use super::Counter;
use crate::view::{layout, Zeroing, U16, U64, U8};

/// Length of the attribute's defined part.
pub const LEN: usize = 72;

layout! {
    a "PortCountersExtended", LEN, "72 bytes";
    fields {
        /// PortSelect.
        port_select / set_port_select: u8 = Zeroing<U8<1>, 0, LEN>;
        /// CounterSelect (bit 0 PortXmitData ... bit 7 PortMulticastRcvPkts).
        counter_select / set_counter_select: u16 = U16<2>;
        /// PortXmitData (4-byte words).
        port_xmit_data / set_port_xmit_data: u64 = U64<8>;
        /// PortRcvData (4-byte words).
        port_rcv_data / set_port_rcv_data: u64 = U64<16>;
        /// PortXmitPkts.
        port_xmit_pkts / set_port_xmit_pkts: u64 = U64<24>;
        /// PortRcvPkts.
        port_rcv_pkts / set_port_rcv_pkts: u64 = U64<32>;
        /// PortUnicastXmitPkts.
        port_unicast_xmit_pkts / set_port_unicast_xmit_pkts: u64 = U64<40>;
        /// PortUnicastRcvPkts.
        port_unicast_rcv_pkts / set_port_unicast_rcv_pkts: u64 = U64<48>;
        /// PortMulticastXmitPkts.
        port_multicast_xmit_pkts / set_port_multicast_xmit_pkts: u64 = U64<56>;
        /// PortMulticastRcvPkts.
        port_multicast_rcv_pkts / set_port_multicast_rcv_pkts: u64 = U64<64>;
    }
}

crate::mad::attribute!(PmaAttribute, super::attr::PORT_COUNTERS_EXTENDED);

/// The counters, in the order `perfquery -x` prints them, with their widths.
pub const COUNTERS: [Counter; 8] = [
    Counter {
        name: "PortXmitData",
        bits: 64,
    },
    Counter {
        name: "PortRcvData",
        bits: 64,
    },
    Counter {
        name: "PortXmitPkts",
        bits: 64,
    },
    Counter {
        name: "PortRcvPkts",
        bits: 64,
    },
    Counter {
        name: "PortUnicastXmitPkts",
        bits: 64,
    },
    Counter {
        name: "PortUnicastRcvPkts",
        bits: 64,
    },
    Counter {
        name: "PortMulticastXmitPkts",
        bits: 64,
    },
    Counter {
        name: "PortMulticastRcvPkts",
        bits: 64,
    },
];

impl Repr {
    /// Each counter of [`COUNTERS`] with its value.
    pub fn counters(&self) -> [(Counter, u64); 8] {
        let v = [
            self.port_xmit_data,
            self.port_rcv_data,
            self.port_xmit_pkts,
            self.port_rcv_pkts,
            self.port_unicast_xmit_pkts,
            self.port_unicast_rcv_pkts,
            self.port_multicast_xmit_pkts,
            self.port_multicast_rcv_pkts,
        ];
        core::array::from_fn(|i| (COUNTERS[i], v[i]))
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "PortCountersExtended port {}", self.port_select)?;
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

    // `perfquery -x 2 7`: fixtures/mad/pma-portcountersext-lid2-p7.resp.hex.
    fn data() -> [u8; LEN] {
        let m = hex_mad(include_str!(
            "../../../../../fixtures/mad/pma-portcountersext-lid2-p7.resp.hex"
        ));
        m[64..64 + LEN].try_into().unwrap()
    }

    fn repr() -> Repr {
        Repr {
            port_select: 7,
            port_xmit_data: 1_234_567_890_771,
            port_rcv_data: 5112,
            port_xmit_pkts: 68,
            port_rcv_pkts: 71,
            ..Repr::default()
        }
    }

    #[test]
    fn parse_and_emit_perfquery_x() {
        let d = data();
        let p = Packet::new_checked(&d[..]).unwrap();
        assert_eq!(p.port_xmit_data(), 1_234_567_890_771);
        assert_eq!(Repr::parse(&p).unwrap(), repr());
        let mut b = [0xa5u8; LEN];
        repr().emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, d);
        assert!(repr().counters().iter().all(|(c, v)| !c.is_saturated(*v)));
    }
}
