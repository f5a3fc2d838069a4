//! SwitchInfo (attribute 0x0012, IBTA Vol 1 §14.2.5.4): a switch's forwarding
//! capabilities and state.
//!
//! ```text
//! bytes 0-1    LinearFDBCap
//! bytes 2-3    RandomFDBCap
//! bytes 4-5    MulticastFDBCap
//! bytes 6-7    LinearFDBTop
//! byte 8       DefaultPort
//! byte 9       DefaultMulticastPrimaryPort
//! byte 10      DefaultMulticastNotPrimaryPort
//! byte 11      LifeTimeValue(5) PortStateChange(1) OptimizedSLtoVLMappingProgramming(2)
//! bytes 12-13  LIDsPerPort
//! bytes 14-15  PartitionEnforcementCap
//! byte 16      InboundEnforcementCap(1) OutboundEnforcementCap(1)
//!              FilterRawInboundCap(1) FilterRawOutboundCap(1) EnhancedPort0(1) reserved(3)
//! byte 17      reserved
//! bytes 18-19  MulticastFDBTop
//! bytes 20-63  reserved
//! ```

use core::fmt;

use crate::view::{layout, Bits, Flag, Zeroing, U16, U8};

/// Length of the attribute (the SMP data).
pub const LEN: usize = 64;

layout! {
    a "SwitchInfo", LEN, "64 bytes";
    fields {
        /// LinearFDBCap: LIDs the linear forwarding table can hold.
        linear_fdb_cap / set_linear_fdb_cap: u16 = Zeroing<U16<0>, 0, LEN>;
        /// RandomFDBCap.
        random_fdb_cap / set_random_fdb_cap: u16 = U16<2>;
        /// MulticastFDBCap.
        multicast_fdb_cap / set_multicast_fdb_cap: u16 = U16<4>;
        /// LinearFDBTop: the highest LID routed.
        linear_fdb_top / set_linear_fdb_top: u16 = U16<6>;
        /// DefaultPort.
        default_port / set_default_port: u8 = U8<8>;
        /// DefaultMulticastPrimaryPort.
        default_mcast_primary_port / set_default_mcast_primary_port: u8 = U8<9>;
        /// DefaultMulticastNotPrimaryPort.
        default_mcast_not_primary_port / set_default_mcast_not_primary_port: u8 = U8<10>;
        /// LifeTimeValue (5 bits).
        life_time_value / set_life_time_value: u8 = Bits<11, 0, 5>;
        /// PortStateChange: a port changed state since the SM last cleared it.
        port_state_change / set_port_state_change: bool = Flag<11, 5>;
        /// OptimizedSLtoVLMappingProgramming (2 bits).
        optimized_sl_to_vl / set_optimized_sl_to_vl: u8 = Bits<11, 6, 2>;
        /// LIDsPerPort.
        lids_per_port / set_lids_per_port: u16 = U16<12>;
        /// PartitionEnforcementCap.
        partition_enforcement_cap / set_partition_enforcement_cap: u16 = U16<14>;
        /// InboundEnforcementCap.
        inbound_enforcement / set_inbound_enforcement: bool = Flag<16, 0>;
        /// OutboundEnforcementCap.
        outbound_enforcement / set_outbound_enforcement: bool = Flag<16, 1>;
        /// FilterRawInboundCap.
        filter_raw_inbound / set_filter_raw_inbound: bool = Flag<16, 2>;
        /// FilterRawOutboundCap.
        filter_raw_outbound / set_filter_raw_outbound: bool = Flag<16, 3>;
        /// EnhancedPort0: port 0 supports the enhanced features.
        enhanced_port0 / set_enhanced_port0: bool = Flag<16, 4>;
        /// MulticastFDBTop.
        multicast_fdb_top / set_multicast_fdb_top: u16 = U16<18>;
    }
}

crate::mad::attribute!(SmpAttribute, super::attr::SWITCH_INFO);

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "SwitchInfo linear_fdb_cap {} linear_fdb_top {} multicast_fdb_cap {} enhanced_port0 {}",
            self.linear_fdb_cap,
            self.linear_fdb_top,
            self.multicast_fdb_cap,
            u8::from(self.enhanced_port0)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::tests::{attr_data, mad_fixture};

    // `smpquery switchinfo 2` (switch S1): fixtures/mad/smp-switchinfo-lid2.resp.hex.
    fn data() -> [u8; 64] {
        attr_data(&mad_fixture!("smp-switchinfo-lid2.resp.hex"))
    }

    fn repr() -> Repr {
        Repr {
            linear_fdb_cap: 30720,
            multicast_fdb_cap: 1024,
            linear_fdb_top: 6,
            life_time_value: 18,
            partition_enforcement_cap: 64,
            filter_raw_inbound: true,
            filter_raw_outbound: true,
            ..Repr::default()
        }
    }

    #[test]
    fn deconstruct_smpquery_switchinfo() {
        let d = data();
        let p = Packet::new_checked(&d[..]).unwrap();
        assert_eq!((p.linear_fdb_cap(), p.linear_fdb_top()), (30720, 6));
        assert_eq!(p.life_time_value(), 18);
        assert!(!p.enhanced_port0() && p.filter_raw_inbound());
    }

    #[test]
    fn parse_and_emit_smpquery_switchinfo() {
        let d = data();
        assert_eq!(
            Repr::parse(&Packet::new_checked(&d[..]).unwrap()).unwrap(),
            repr()
        );
        let mut b = [0xa5u8; 64];
        repr().emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, d);
    }
}
