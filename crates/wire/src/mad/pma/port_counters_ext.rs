//! PortCountersExtended (attribute 0x001D, IBTA Vol 1 §16.1.4.11): 64-bit
//! data and packet counters, which do not saturate in practice. The unicast
//! and multicast packet counters are there only when ClassPortInfo has
//! ExtendedWidthSupported (not just the NoIETF variant).
//!
//! ```text
//! byte 0          reserved
//! byte 1          PortSelect
//! bytes 2-3       CounterSelect
//! bytes 4-7       CounterSelect2 (selects the additional counters)
//! bytes 8-15      PortXmitData (4-byte words)
//! bytes 16-23     PortRcvData (4-byte words)
//! bytes 24-31     PortXmitPkts
//! bytes 32-39     PortRcvPkts
//! bytes 40-47     PortUnicastXmitPkts
//! bytes 48-55     PortUnicastRcvPkts
//! bytes 56-63     PortMulticastXmitPkts
//! bytes 64-71     PortMulticastRcvPkts
//! -- additional counters, only with IsAdditionalPortCountersExtendedSupported:
//! bytes 72-79     SymbolErrorCounter
//! bytes 80-87     LinkErrorRecoveryCounter
//! bytes 88-95     LinkDownedCounter
//! bytes 96-103    PortRcvErrors
//! bytes 104-111   PortRcvRemotePhysicalErrors
//! bytes 112-119   PortRcvSwitchRelayErrors
//! bytes 120-127   PortXmitDiscards
//! bytes 128-135   PortXmitConstraintErrors
//! bytes 136-143   PortRcvConstraintErrors
//! bytes 144-151   LocalLinkIntegrityErrors
//! bytes 152-159   ExcessiveBufferOverrunErrors
//! bytes 160-167   VL15Dropped
//! bytes 168-175   PortXmitWait
//! bytes 176-183   QP1Dropped
//! bytes 184-191   reserved
//! ```

use crate::view::{layout, Zeroing, U16, U32, U64, U8};

/// Length of the attribute's defined part (with the additional counters).
pub const LEN: usize = 184;
/// Where the additional 64-bit error counters start.
pub const ADDITIONAL_OFFSET: usize = 72;

layout! {
    a "PortCountersExtended", LEN, "184 bytes";
    fields {
        /// PortSelect.
        port_select / set_port_select: u8 = Zeroing<U8<1>, 0, LEN>;
        /// CounterSelect (bit 0 PortXmitData ... bit 7 PortMulticastRcvPkts).
        counter_select / set_counter_select: u16 = U16<2>;
        /// CounterSelect2 (the additional counters, bit 0 SymbolErrorCounter on).
        counter_select2 / set_counter_select2: u32 = U32<4>;
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
        /// SymbolErrorCounter (64 bits; additional counter).
        symbol_error_counter / set_symbol_error_counter: u64 = U64<72>;
        /// LinkErrorRecoveryCounter (64 bits; additional counter).
        link_error_recovery_counter / set_link_error_recovery_counter: u64 = U64<80>;
        /// LinkDownedCounter (64 bits; additional counter).
        link_downed_counter / set_link_downed_counter: u64 = U64<88>;
        /// PortRcvErrors (64 bits; additional counter).
        port_rcv_errors / set_port_rcv_errors: u64 = U64<96>;
        /// PortRcvRemotePhysicalErrors (64 bits; additional counter).
        port_rcv_remote_physical_errors / set_port_rcv_remote_physical_errors: u64 = U64<104>;
        /// PortRcvSwitchRelayErrors (64 bits; additional counter).
        port_rcv_switch_relay_errors / set_port_rcv_switch_relay_errors: u64 = U64<112>;
        /// PortXmitDiscards (64 bits; additional counter).
        port_xmit_discards / set_port_xmit_discards: u64 = U64<120>;
        /// PortXmitConstraintErrors (64 bits; additional counter).
        port_xmit_constraint_errors / set_port_xmit_constraint_errors: u64 = U64<128>;
        /// PortRcvConstraintErrors (64 bits; additional counter).
        port_rcv_constraint_errors / set_port_rcv_constraint_errors: u64 = U64<136>;
        /// LocalLinkIntegrityErrors (64 bits; additional counter).
        local_link_integrity_errors / set_local_link_integrity_errors: u64 = U64<144>;
        /// ExcessiveBufferOverrunErrors (64 bits; additional counter).
        excessive_buffer_overrun_errors / set_excessive_buffer_overrun_errors: u64 = U64<152>;
        /// VL15Dropped (64 bits; additional counter).
        vl15_dropped / set_vl15_dropped: u64 = U64<160>;
        /// PortXmitWait (64 bits; additional counter).
        port_xmit_wait / set_port_xmit_wait: u64 = U64<168>;
        /// QP1Dropped (64 bits; additional counter).
        qp1_dropped / set_qp1_dropped: u64 = U64<176>;
    }
}

crate::mad::attribute!(PmaAttribute, super::attr::PORT_COUNTERS_EXTENDED);

super::counters! {
    /// The counters, in the order `perfquery -x` prints them, with their widths.
    COUNTERS / counters, shown as "PortCountersExtended" {
        "PortXmitData": 64 = port_xmit_data,
        "PortRcvData": 64 = port_rcv_data,
        "PortXmitPkts": 64 = port_xmit_pkts,
        "PortRcvPkts": 64 = port_rcv_pkts,
        "PortUnicastXmitPkts": 64 = port_unicast_xmit_pkts,
        "PortUnicastRcvPkts": 64 = port_unicast_rcv_pkts,
        "PortMulticastXmitPkts": 64 = port_multicast_xmit_pkts,
        "PortMulticastRcvPkts": 64 = port_multicast_rcv_pkts,
    }
}

super::counters! {
    /// The additional 64-bit error counters, in the order of the layout, named as
    /// in PortCounters; valid only when ClassPortInfo has
    /// [`super::class_port_info::CAP2_ADDITIONAL_PORT_COUNTERS_EXTENDED`].
    ADDITIONAL_COUNTERS / additional_counters {
        "SymbolErrorCounter": 64 = symbol_error_counter,
        "LinkErrorRecoveryCounter": 64 = link_error_recovery_counter,
        "LinkDownedCounter": 64 = link_downed_counter,
        "PortRcvErrors": 64 = port_rcv_errors,
        "PortRcvRemotePhysicalErrors": 64 = port_rcv_remote_physical_errors,
        "PortRcvSwitchRelayErrors": 64 = port_rcv_switch_relay_errors,
        "PortXmitDiscards": 64 = port_xmit_discards,
        "PortXmitConstraintErrors": 64 = port_xmit_constraint_errors,
        "PortRcvConstraintErrors": 64 = port_rcv_constraint_errors,
        "LocalLinkIntegrityErrors": 64 = local_link_integrity_errors,
        "ExcessiveBufferOverrunErrors": 64 = excessive_buffer_overrun_errors,
        "VL15Dropped": 64 = vl15_dropped,
        "PortXmitWait": 64 = port_xmit_wait,
        "QP1Dropped": 64 = qp1_dropped,
    }
}

impl Repr {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::tests::{attr_data, mad_fixture};

    // `perfquery -x 2 7`: fixtures/mad/pma-portcountersext-lid2-p7.resp.hex.
    fn data() -> [u8; LEN] {
        attr_data(&mad_fixture!("pma-portcountersext-lid2-p7.resp.hex"))
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
    fn additional_counters_sit_after_the_data_counters() {
        let mut b = [0u8; LEN];
        let mut p = Packet::new_unchecked(&mut b[..]);
        p.set_symbol_error_counter(1);
        p.set_qp1_dropped(u64::MAX);
        assert_eq!(&b[72..80], &1u64.to_be_bytes());
        assert_eq!(&b[176..184], &[0xff; 8]);
        let r = Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap();
        let sat: Vec<_> = r
            .additional_counters()
            .into_iter()
            .filter(|(c, v)| c.is_saturated(*v))
            .map(|(c, _)| c.name)
            .collect();
        assert_eq!(sat, ["QP1Dropped"]);
        assert_eq!(ADDITIONAL_OFFSET + 8 * ADDITIONAL_COUNTERS.len(), LEN);
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
        // ibsim's PMA has no additional counters: all zero.
        assert!(repr().additional_counters().iter().all(|(_, v)| *v == 0));
    }
}
