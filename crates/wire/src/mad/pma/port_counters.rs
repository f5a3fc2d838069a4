//! PortCounters (attribute 0x0012, IBTA Vol 1 §16.1.3.5): a port's error and
//! traffic counters. Every counter stops at all ones (it saturates, it does not
//! wrap); [`COUNTERS`] gives each one's width. The data counters count 4-byte
//! words; PortCountersExtended has 64-bit versions of them.
//!
//! perfquery (infiniband-diags 44.0) prints VL15Dropped's bytes a second time
//! as `QP1Dropped`: libibmad's field table places QP1Dropped on the same bits.
//! This module reads QP1Dropped where IBTA puts it (bytes 20-21).
//!
//! ```text
//! byte 0       reserved
//! byte 1       PortSelect
//! bytes 2-3    CounterSelect (a Set clears the counters whose bit is set)
//! bytes 4-5    SymbolErrorCounter
//! byte 6       LinkErrorRecoveryCounter
//! byte 7       LinkDownedCounter
//! bytes 8-9    PortRcvErrors
//! bytes 10-11  PortRcvRemotePhysicalErrors
//! bytes 12-13  PortRcvSwitchRelayErrors
//! bytes 14-15  PortXmitDiscards
//! byte 16      PortXmitConstraintErrors
//! byte 17      PortRcvConstraintErrors
//! byte 18      CounterSelect2 (bit 0: PortXmitWait)
//! byte 19      LocalLinkIntegrityErrors(4) ExcessiveBufferOverrunErrors(4)
//! bytes 20-21  QP1Dropped (IBTA 1.3; only with ClassPortInfo's IsQP1DropSupported)
//! bytes 22-23  VL15Dropped
//! bytes 24-27  PortXmitData
//! bytes 28-31  PortRcvData
//! bytes 32-35  PortXmitPkts
//! bytes 36-39  PortRcvPkts
//! bytes 40-43  PortXmitWait
//! ```

use super::Counter;
use crate::view::{layout, Bits, Zeroing, U16, U32, U8};

/// Length of the attribute's defined part (of the 192 bytes of PMA data).
pub const LEN: usize = 44;

/// CounterSelect bits: which counters a Set clears.
pub mod select {
    /// SymbolErrorCounter.
    pub const SYMBOL_ERROR: u16 = 1 << 0;
    /// LinkErrorRecoveryCounter.
    pub const LINK_ERROR_RECOVERY: u16 = 1 << 1;
    /// LinkDownedCounter.
    pub const LINK_DOWNED: u16 = 1 << 2;
    /// PortRcvErrors.
    pub const RCV_ERRORS: u16 = 1 << 3;
    /// PortRcvRemotePhysicalErrors.
    pub const RCV_REMOTE_PHYSICAL_ERRORS: u16 = 1 << 4;
    /// PortRcvSwitchRelayErrors.
    pub const RCV_SWITCH_RELAY_ERRORS: u16 = 1 << 5;
    /// PortXmitDiscards.
    pub const XMIT_DISCARDS: u16 = 1 << 6;
    /// PortXmitConstraintErrors.
    pub const XMIT_CONSTRAINT_ERRORS: u16 = 1 << 7;
    /// PortRcvConstraintErrors.
    pub const RCV_CONSTRAINT_ERRORS: u16 = 1 << 8;
    /// LocalLinkIntegrityErrors.
    pub const LOCAL_LINK_INTEGRITY_ERRORS: u16 = 1 << 9;
    /// ExcessiveBufferOverrunErrors.
    pub const EXCESSIVE_BUFFER_OVERRUN_ERRORS: u16 = 1 << 10;
    /// VL15Dropped.
    pub const VL15_DROPPED: u16 = 1 << 11;
    /// PortXmitData.
    pub const XMIT_DATA: u16 = 1 << 12;
    /// PortRcvData.
    pub const RCV_DATA: u16 = 1 << 13;
    /// PortXmitPkts.
    pub const XMIT_PKTS: u16 = 1 << 14;
    /// PortRcvPkts.
    pub const RCV_PKTS: u16 = 1 << 15;
    /// Every counter of CounterSelect.
    pub const ALL: u16 = 0xffff;
}

layout! {
    a "PortCounters", LEN, "44 bytes";
    fields {
        /// PortSelect: the port counted (255 = all, where supported).
        port_select / set_port_select: u8 = Zeroing<U8<1>, 0, LEN>;
        /// CounterSelect.
        counter_select / set_counter_select: u16 = U16<2>;
        /// SymbolErrorCounter (16 bits).
        symbol_error_counter / set_symbol_error_counter: u16 = U16<4>;
        /// LinkErrorRecoveryCounter (8 bits).
        link_error_recovery_counter / set_link_error_recovery_counter: u8 = U8<6>;
        /// LinkDownedCounter (8 bits).
        link_downed_counter / set_link_downed_counter: u8 = U8<7>;
        /// PortRcvErrors (16 bits).
        port_rcv_errors / set_port_rcv_errors: u16 = U16<8>;
        /// PortRcvRemotePhysicalErrors (16 bits).
        port_rcv_remote_physical_errors / set_port_rcv_remote_physical_errors: u16 = U16<10>;
        /// PortRcvSwitchRelayErrors (16 bits).
        port_rcv_switch_relay_errors / set_port_rcv_switch_relay_errors: u16 = U16<12>;
        /// PortXmitDiscards (16 bits).
        port_xmit_discards / set_port_xmit_discards: u16 = U16<14>;
        /// PortXmitConstraintErrors (8 bits).
        port_xmit_constraint_errors / set_port_xmit_constraint_errors: u8 = U8<16>;
        /// PortRcvConstraintErrors (8 bits).
        port_rcv_constraint_errors / set_port_rcv_constraint_errors: u8 = U8<17>;
        /// CounterSelect2 (bit 0 selects PortXmitWait).
        counter_select2 / set_counter_select2: u8 = U8<18>;
        /// LocalLinkIntegrityErrors (4 bits).
        local_link_integrity_errors / set_local_link_integrity_errors: u8 = Bits<19, 0, 4>;
        /// ExcessiveBufferOverrunErrors (4 bits).
        excessive_buffer_overrun_errors / set_excessive_buffer_overrun_errors: u8 = Bits<19, 4, 4>;
        /// QP1Dropped (16 bits): MADs dropped for want of QP1 resources.
        qp1_dropped / set_qp1_dropped: u16 = U16<20>;
        /// VL15Dropped (16 bits).
        vl15_dropped / set_vl15_dropped: u16 = U16<22>;
        /// PortXmitData (32 bits, in 4-byte words).
        port_xmit_data / set_port_xmit_data: u32 = U32<24>;
        /// PortRcvData (32 bits, in 4-byte words).
        port_rcv_data / set_port_rcv_data: u32 = U32<28>;
        /// PortXmitPkts (32 bits).
        port_xmit_pkts / set_port_xmit_pkts: u32 = U32<32>;
        /// PortRcvPkts (32 bits).
        port_rcv_pkts / set_port_rcv_pkts: u32 = U32<36>;
        /// PortXmitWait (32 bits, ticks with data to send and no credit).
        port_xmit_wait / set_port_xmit_wait: u32 = U32<40>;
    }
}

crate::mad::attribute!(PmaAttribute, super::attr::PORT_COUNTERS);

super::counters! {
    /// The counters, in the order perfquery prints them, with their widths.
    COUNTERS / counters, shown as "PortCounters" {
        "SymbolErrorCounter": 16 = symbol_error_counter,
        "LinkErrorRecoveryCounter": 8 = link_error_recovery_counter,
        "LinkDownedCounter": 8 = link_downed_counter,
        "PortRcvErrors": 16 = port_rcv_errors,
        "PortRcvRemotePhysicalErrors": 16 = port_rcv_remote_physical_errors,
        "PortRcvSwitchRelayErrors": 16 = port_rcv_switch_relay_errors,
        "PortXmitDiscards": 16 = port_xmit_discards,
        "PortXmitConstraintErrors": 8 = port_xmit_constraint_errors,
        "PortRcvConstraintErrors": 8 = port_rcv_constraint_errors,
        "LocalLinkIntegrityErrors": 4 = local_link_integrity_errors,
        "ExcessiveBufferOverrunErrors": 4 = excessive_buffer_overrun_errors,
        "QP1Dropped": 16 = qp1_dropped,
        "VL15Dropped": 16 = vl15_dropped,
        "PortXmitData": 32 = port_xmit_data,
        "PortRcvData": 32 = port_rcv_data,
        "PortXmitPkts": 32 = port_xmit_pkts,
        "PortRcvPkts": 32 = port_rcv_pkts,
        "PortXmitWait": 32 = port_xmit_wait,
    }
}

impl Repr {
    /// The counters that read all ones.
    pub fn saturated(&self) -> impl Iterator<Item = Counter> {
        self.counters()
            .into_iter()
            .filter(|(c, v)| c.is_saturated(*v))
            .map(|(c, _)| c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::tests::{attr_data, mad_fixture};

    // `perfquery 2 7` after PerformanceSet on S1 port 7 (fixtures/mad/SOURCE):
    // fixtures/mad/pma-portcounters-lid2-p7.resp.hex.
    fn data() -> [u8; LEN] {
        attr_data(&mad_fixture!("pma-portcounters-lid2-p7.resp.hex"))
    }

    fn repr() -> Repr {
        Repr {
            port_select: 7,
            symbol_error_counter: 77,
            link_error_recovery_counter: 255,
            link_downed_counter: 3,
            port_rcv_errors: 7,
            port_xmit_discards: 12,
            local_link_integrity_errors: 15,
            excessive_buffer_overrun_errors: 2,
            vl15_dropped: 4,
            port_xmit_data: 4896,
            port_rcv_data: 5112,
            port_xmit_pkts: 68,
            port_rcv_pkts: 71,
            port_xmit_wait: 5000,
            ..Repr::default()
        }
    }

    #[test]
    fn deconstruct_perfquery() {
        let d = data();
        let p = Packet::new_checked(&d[..]).unwrap();
        assert_eq!((p.symbol_error_counter(), p.link_downed_counter()), (77, 3));
        assert_eq!(
            (
                p.local_link_integrity_errors(),
                p.excessive_buffer_overrun_errors()
            ),
            (15, 2)
        );
    }

    #[test]
    fn parse_and_emit_perfquery() {
        let d = data();
        assert_eq!(
            Repr::parse(&Packet::new_checked(&d[..]).unwrap()).unwrap(),
            repr()
        );
        let mut b = [0xa5u8; LEN];
        repr().emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, d);
    }

    #[test]
    fn saturation_by_width() {
        // LinkErrorRecoveryCounter 255 (8 bits) and LocalLinkIntegrityErrors 15
        // (4 bits) are pegged; SymbolErrorCounter 77 is not.
        let names: Vec<_> = repr().saturated().map(|c| c.name).collect();
        assert_eq!(
            names,
            ["LinkErrorRecoveryCounter", "LocalLinkIntegrityErrors"]
        );
    }

    #[test]
    fn names_are_unique() {
        let mut n: Vec<_> = COUNTERS.iter().map(|c| c.name).collect();
        n.sort();
        n.dedup();
        assert_eq!(n.len(), COUNTERS.len());
    }
}
