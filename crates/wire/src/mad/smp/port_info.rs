//! PortInfo (attribute 0x0015, IBTA Vol 1 §14.2.5.6): a port's addresses, link
//! width and speed, state, MTU and error thresholds. The attribute modifier is
//! the port number (a channel adapter answers for the port it was asked by).
//!
//! Offsets as IBTA 1.3 and libibmad's `fields.c` give them; names as `smpquery
//! portinfo` prints them in brackets where they differ.
//!
//! ```text
//! bytes 0-7    M_Key (Mkey)
//! bytes 8-15   GidPrefix
//! bytes 16-17  LID
//! bytes 18-19  MasterSMLID (SMLid)
//! bytes 20-23  CapabilityMask (CapMask)
//! bytes 24-25  DiagCode
//! bytes 26-27  M_KeyLeasePeriod
//! byte 28      LocalPortNum
//! byte 29      LinkWidthEnabled
//! byte 30      LinkWidthSupported
//! byte 31      LinkWidthActive
//! byte 32      LinkSpeedSupported(4) PortState(4) (LinkState)
//! byte 33      PortPhysicalState(4) (PhysLinkState) LinkDownDefaultState(4)
//! byte 34      M_KeyProtectBits(2) reserved(3) LMC(3)
//! byte 35      LinkSpeedActive(4) LinkSpeedEnabled(4)
//! byte 36      NeighborMTU(4) MasterSMSL(4)
//! byte 37      VLCap(4) InitType(4)
//! byte 38      VLHighLimit
//! byte 39      VLArbitrationHighCap
//! byte 40      VLArbitrationLowCap
//! byte 41      InitTypeReply(4) MTUCap(4)
//! byte 42      VLStallCount(3) HOQLife(5)
//! byte 43      OperationalVLs(4) PartitionEnforcementInbound(1)
//!              PartitionEnforcementOutbound(1) FilterRawInbound(1) FilterRawOutbound(1)
//! bytes 44-45  M_KeyViolations
//! bytes 46-47  P_KeyViolations
//! bytes 48-49  Q_KeyViolations
//! byte 50      GUIDCap
//! byte 51      ClientReregister(1) MulticastPKeyTrapSuppressionEnabled(2) SubnetTimeOut(5)
//! byte 52      reserved(3) RespTimeValue(5)
//! byte 53      LocalPhyErrors(4) OverrunErrors(4)
//! bytes 54-55  MaxCreditHint
//! byte 56      reserved
//! bytes 57-59  LinkRoundTripLatency (RoundTrip)
//! bytes 60-61  CapabilityMask2
//! byte 62      LinkSpeedExtActive(4) LinkSpeedExtSupported(4)
//! byte 63      reserved(3) LinkSpeedExtEnabled(5)
//! ```
//!
//! Width and speed are the raw IBTA codes (width 1=1X 2=4X 4=8X 8=12X 16=2X;
//! speed 1=SDR 2=DDR 4=QDR; extended speed 1=FDR 2=EDR 4=HDR 8=NDR); mapping
//! them to rates is the caller's (`rdmakit_types::Width` / `Speed`).

use core::fmt;

use crate::view::{layout, Bits, Flag, Zeroing, U16, U24, U32, U64, U8};

/// Length of the attribute (the SMP data).
pub const LEN: usize = 64;

/// CapabilityMask bit: the port runs an SM (IsSM).
pub const CAP_IS_SM: u32 = 1 << 1;
/// CapabilityMask bit: extended link speeds are supported.
pub const CAP_IS_EXTENDED_SPEEDS_SUPPORTED: u32 = 1 << 14;
/// CapabilityMask bit: CapabilityMask2 is valid.
pub const CAP_IS_CAPABILITY_MASK2_SUPPORTED: u32 = 1 << 15;

layout! {
    a "PortInfo", LEN, "64 bytes";
    fields {
        /// M_Key (zero unless the requester presented it).
        m_key / set_m_key: u64 = Zeroing<U64<0>, 0, LEN>;
        /// GidPrefix.
        gid_prefix / set_gid_prefix: u64 = U64<8>;
        /// LID (0 on a switch's external port).
        lid / set_lid: u16 = U16<16>;
        /// MasterSMLID.
        master_sm_lid / set_master_sm_lid: u16 = U16<18>;
        /// CapabilityMask.
        capability_mask / set_capability_mask: u32 = U32<20>;
        /// DiagCode.
        diag_code / set_diag_code: u16 = U16<24>;
        /// M_KeyLeasePeriod.
        m_key_lease_period / set_m_key_lease_period: u16 = U16<26>;
        /// LocalPortNum: the port the SMP came in by.
        local_port_num / set_local_port_num: u8 = U8<28>;
        /// LinkWidthEnabled (bit mask of width codes; 255 = as supported).
        link_width_enabled / set_link_width_enabled: u8 = U8<29>;
        /// LinkWidthSupported (bit mask of width codes).
        link_width_supported / set_link_width_supported: u8 = U8<30>;
        /// LinkWidthActive (one width code).
        link_width_active / set_link_width_active: u8 = U8<31>;
        /// LinkSpeedSupported (bit mask: 1 SDR, 2 DDR, 4 QDR).
        link_speed_supported / set_link_speed_supported: u8 = Bits<32, 0, 4>;
        /// PortState: 1 Down, 2 Init, 3 Armed, 4 Active (0 = no change on Set).
        port_state / set_port_state: u8 = Bits<32, 4, 4>;
        /// PortPhysicalState: 1 Sleep, 2 Polling, 3 Disabled, 4 PortConfigurationTraining, 5 LinkUp, 6 LinkErrorRecovery, 7 PhyTest.
        port_phys_state / set_port_phys_state: u8 = Bits<33, 0, 4>;
        /// LinkDownDefaultState: 1 Sleep, 2 Polling.
        link_down_default_state / set_link_down_default_state: u8 = Bits<33, 4, 4>;
        /// M_KeyProtectBits.
        m_key_protect_bits / set_m_key_protect_bits: u8 = Bits<34, 0, 2>;
        /// LMC: 2^LMC LIDs per port.
        lmc / set_lmc: u8 = Bits<34, 5, 3>;
        /// LinkSpeedActive (one speed code; 0 when an extended speed is active).
        link_speed_active / set_link_speed_active: u8 = Bits<35, 0, 4>;
        /// LinkSpeedEnabled (bit mask).
        link_speed_enabled / set_link_speed_enabled: u8 = Bits<35, 4, 4>;
        /// NeighborMTU code: 1 256, 2 512, 3 1024, 4 2048, 5 4096 bytes.
        neighbor_mtu / set_neighbor_mtu: u8 = Bits<36, 0, 4>;
        /// MasterSMSL.
        master_sm_sl / set_master_sm_sl: u8 = Bits<36, 4, 4>;
        /// VLCap: 1 VL0, 2 VL0-1, 3 VL0-3, 4 VL0-7, 5 VL0-14.
        vl_cap / set_vl_cap: u8 = Bits<37, 0, 4>;
        /// InitType.
        init_type / set_init_type: u8 = Bits<37, 4, 4>;
        /// VLHighLimit.
        vl_high_limit / set_vl_high_limit: u8 = U8<38>;
        /// VLArbitrationHighCap.
        vl_arbitration_high_cap / set_vl_arbitration_high_cap: u8 = U8<39>;
        /// VLArbitrationLowCap.
        vl_arbitration_low_cap / set_vl_arbitration_low_cap: u8 = U8<40>;
        /// InitTypeReply.
        init_type_reply / set_init_type_reply: u8 = Bits<41, 0, 4>;
        /// MTUCap code (as NeighborMTU).
        mtu_cap / set_mtu_cap: u8 = Bits<41, 4, 4>;
        /// VLStallCount (3 bits).
        vl_stall_count / set_vl_stall_count: u8 = Bits<42, 0, 3>;
        /// HOQLife (5 bits).
        hoq_life / set_hoq_life: u8 = Bits<42, 3, 5>;
        /// OperationalVLs (as VLCap).
        operational_vls / set_operational_vls: u8 = Bits<43, 0, 4>;
        /// PartitionEnforcementInbound.
        partition_enforcement_inbound / set_partition_enforcement_inbound: bool = Flag<43, 4>;
        /// PartitionEnforcementOutbound.
        partition_enforcement_outbound / set_partition_enforcement_outbound: bool = Flag<43, 5>;
        /// FilterRawInbound.
        filter_raw_inbound / set_filter_raw_inbound: bool = Flag<43, 6>;
        /// FilterRawOutbound.
        filter_raw_outbound / set_filter_raw_outbound: bool = Flag<43, 7>;
        /// M_KeyViolations.
        m_key_violations / set_m_key_violations: u16 = U16<44>;
        /// P_KeyViolations.
        p_key_violations / set_p_key_violations: u16 = U16<46>;
        /// Q_KeyViolations.
        q_key_violations / set_q_key_violations: u16 = U16<48>;
        /// GUIDCap: GUIDs the port can hold.
        guid_cap / set_guid_cap: u8 = U8<50>;
        /// ClientReregister.
        client_reregister / set_client_reregister: bool = Flag<51, 0>;
        /// MulticastPKeyTrapSuppressionEnabled (2 bits).
        mcast_pkey_trap_suppression / set_mcast_pkey_trap_suppression: u8 = Bits<51, 1, 2>;
        /// SubnetTimeOut (5 bits).
        subnet_timeout / set_subnet_timeout: u8 = Bits<51, 3, 5>;
        /// RespTimeValue (5 bits).
        resp_time_value / set_resp_time_value: u8 = Bits<52, 3, 5>;
        /// LocalPhyErrors threshold (4 bits).
        local_phy_errors / set_local_phy_errors: u8 = Bits<53, 0, 4>;
        /// OverrunErrors threshold (4 bits).
        overrun_errors / set_overrun_errors: u8 = Bits<53, 4, 4>;
        /// MaxCreditHint.
        max_credit_hint / set_max_credit_hint: u16 = U16<54>;
        /// LinkRoundTripLatency (24 bits).
        link_round_trip_latency / set_link_round_trip_latency: u32 = U24<57>;
        /// CapabilityMask2.
        capability_mask2 / set_capability_mask2: u16 = U16<60>;
        /// LinkSpeedExtActive (one extended speed code; 0 = none).
        link_speed_ext_active / set_link_speed_ext_active: u8 = Bits<62, 0, 4>;
        /// LinkSpeedExtSupported (bit mask: 1 FDR, 2 EDR, 4 HDR, 8 NDR).
        link_speed_ext_supported / set_link_speed_ext_supported: u8 = Bits<62, 4, 4>;
        /// LinkSpeedExtEnabled (5-bit mask; 30 = as supported, 31 = disable all).
        link_speed_ext_enabled / set_link_speed_ext_enabled: u8 = Bits<63, 3, 5>;
    }
}

crate::mad::attribute!(SmpAttribute, super::attr::PORT_INFO);

/// The name smpquery prints for a PortState code (`Active`).
pub fn port_state_name(code: u8) -> &'static str {
    match code {
        0 => "NoChange",
        1 => "Down",
        2 => "Initialize",
        3 => "Armed",
        4 => "Active",
        _ => "?",
    }
}

/// The name smpquery prints for a PortPhysicalState code (`LinkUp`).
pub fn phys_state_name(code: u8) -> &'static str {
    match code {
        0 => "NoChange",
        1 => "Sleep",
        2 => "Polling",
        3 => "Disabled",
        4 => "PortConfigurationTraining",
        5 => "LinkUp",
        6 => "LinkErrorRecovery",
        7 => "PhyTest",
        _ => "?",
    }
}

/// Bytes of an MTU code (NeighborMTU, MTUCap): 1 → 256 … 5 → 4096.
pub fn mtu_bytes(code: u8) -> Option<u16> {
    (1..=5).contains(&code).then(|| 128 << code)
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "PortInfo lid {} sm_lid {} port {} {}/{} width {} speed {} ext {} mtu {}",
            self.lid,
            self.master_sm_lid,
            self.local_port_num,
            port_state_name(self.port_state),
            phys_state_name(self.port_phys_state),
            self.link_width_active,
            self.link_speed_active,
            self.link_speed_ext_active,
            self.neighbor_mtu
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::tests::{attr_data, mad_fixture};

    // `smpquery portinfo 1 1` (H1, the SM's port): fixtures/mad/smp-portinfo-lid1-p1.resp.hex
    // and portinfo-lid1.txt for what smpquery printed.
    fn data() -> [u8; 64] {
        attr_data(&mad_fixture!("smp-portinfo-lid1-p1.resp.hex"))
    }

    fn repr() -> Repr {
        Repr {
            gid_prefix: 0xfe80_0000_0000_0000,
            lid: 1,
            master_sm_lid: 1,
            capability_mask: 0x0050_c04a,
            m_key_lease_period: 4089,
            local_port_num: 1,
            link_width_enabled: 2,
            link_width_supported: 0x1f,
            link_width_active: 2,
            link_speed_supported: 7,
            port_state: 4,
            port_phys_state: 5,
            link_down_default_state: 2,
            link_speed_active: 4,
            link_speed_enabled: 4,
            neighbor_mtu: 4,
            vl_cap: 4,
            vl_arbitration_high_cap: 8,
            vl_arbitration_low_cap: 8,
            mtu_cap: 4,
            vl_stall_count: 7,
            operational_vls: 4,
            guid_cap: 32,
            subnet_timeout: 31,
            capability_mask2: 0x30,
            ..Repr::default()
        }
    }

    #[test]
    fn deconstruct_smpquery_portinfo() {
        let d = data();
        let p = Packet::new_checked(&d[..]).unwrap();
        assert_eq!((p.lid(), p.master_sm_lid()), (1, 1));
        assert_eq!((p.link_width_active(), p.link_speed_active()), (2, 4));
        assert_eq!((p.port_state(), p.port_phys_state()), (4, 5));
        assert_eq!(p.capability_mask() & CAP_IS_SM, CAP_IS_SM);
    }

    #[test]
    fn construct_smpquery_portinfo() {
        let mut b = [0xa5u8; 64];
        let mut p = Packet::new_unchecked(&mut b[..]);
        let r = repr();
        p.set_m_key(0);
        p.set_gid_prefix(r.gid_prefix);
        p.set_lid(1);
        p.set_master_sm_lid(1);
        p.set_capability_mask(r.capability_mask);
        p.set_m_key_lease_period(4089);
        p.set_local_port_num(1);
        p.set_link_width_enabled(2);
        p.set_link_width_supported(0x1f);
        p.set_link_width_active(2);
        p.set_link_speed_supported(7);
        p.set_port_state(4);
        p.set_port_phys_state(5);
        p.set_link_down_default_state(2);
        p.set_link_speed_active(4);
        p.set_link_speed_enabled(4);
        p.set_neighbor_mtu(4);
        p.set_vl_cap(4);
        p.set_vl_arbitration_high_cap(8);
        p.set_vl_arbitration_low_cap(8);
        p.set_mtu_cap(4);
        p.set_vl_stall_count(7);
        p.set_operational_vls(4);
        p.set_guid_cap(32);
        p.set_subnet_timeout(31);
        p.set_capability_mask2(0x30);
        assert_eq!(b, data());
    }

    #[test]
    fn parse_smpquery_portinfo() {
        let d = data();
        assert_eq!(
            Repr::parse(&Packet::new_checked(&d[..]).unwrap()).unwrap(),
            repr()
        );
    }

    #[test]
    fn emit_smpquery_portinfo() {
        let mut b = [0xa5u8; 64];
        repr().emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, data());
    }

    #[test]
    fn extended_speed_bits_do_not_bleed() {
        let mut b = [0u8; 64];
        let mut p = Packet::new_unchecked(&mut b[..]);
        p.set_link_speed_ext_active(2); // EDR
        p.set_link_speed_ext_supported(0xf);
        p.set_link_speed_ext_enabled(30);
        assert_eq!((b[62], b[63]), (0x2f, 30));
        let p = Packet::new_unchecked(&b[..]);
        assert_eq!(
            (p.link_speed_ext_active(), p.link_speed_ext_enabled()),
            (2, 30)
        );
    }

    #[test]
    fn names_and_mtu() {
        assert_eq!(
            (port_state_name(4), phys_state_name(5)),
            ("Active", "LinkUp")
        );
        assert_eq!(
            (mtu_bytes(4), mtu_bytes(5), mtu_bytes(0)),
            (Some(2048), Some(4096), None)
        );
    }
}
