//! ClassPortInfo of the PMA (attribute 0x0001, IBTA Vol 1 §13.4.8.1 and
//! §16.1.3.1): which optional counters and features the PMA has, and where to
//! redirect requests. Read it before PortCounters to know whether
//! PortCountersExtended and PortXmitWait exist.
//!
//! ```text
//! byte 0       BaseVersion
//! byte 1       ClassVersion
//! bytes 2-3    CapabilityMask (the PMA bits below)
//! bytes 4-7    CapabilityMask2(27) RespTimeValue(5)
//! bytes 8-23   RedirectGID
//! bytes 24-27  RedirectTC(8) RedirectSL(4) RedirectFL(20)
//! bytes 28-29  RedirectLID
//! bytes 30-31  RedirectP_Key
//! bytes 32-35  reserved(8) RedirectQP(24)
//! bytes 36-39  RedirectQ_Key
//! bytes 40-55  TrapGID
//! bytes 56-59  TrapTC(8) TrapSL(4) TrapFL(20)
//! bytes 60-61  TrapLID
//! bytes 62-63  TrapP_Key
//! bytes 64-67  TrapHL(8) TrapQP(24)
//! bytes 68-71  TrapQ_Key
//! ```

use core::fmt;

use crate::view::{
    get_u24, get_u32, layout, set_u24, set_u32, Bits, Codec, Zeroing, U16, U24, U32, U8,
};

/// Length of the attribute.
pub const LEN: usize = 72;

/// CapabilityMask: PortSelect 255 (all ports) is supported.
pub const CAP_ALL_PORT_SELECT: u16 = 1 << 8;
/// CapabilityMask: PortCountersExtended with every counter (ExtendedWidth).
pub const CAP_EXTENDED_WIDTH: u16 = 1 << 9;
/// CapabilityMask: PortCountersExtended without the unicast/multicast counters.
pub const CAP_EXTENDED_WIDTH_NO_IETF: u16 = 1 << 10;
/// CapabilityMask: PortSamplesControl only (no PortCounters).
pub const CAP_SAMPLES_ONLY: u16 = 1 << 11;
/// CapabilityMask: PortCounters has PortXmitWait.
pub const CAP_PORT_XMIT_WAIT: u16 = 1 << 12;
/// CapabilityMask: limited-member P_Key multicast drops do not count as
/// PortRcvConstraintErrors.
pub const CAP_INHIBIT_LIMITED_PKEY_MC_CONSTRAINT: u16 = 1 << 13;
/// CapabilityMask: the RS-FEC counters of PortExtendedSpeedsCounters exist.
pub const CAP_RSFEC_COUNTERS: u16 = 1 << 14;
/// CapabilityMask: PortCounters has QP1Dropped.
pub const CAP_QP1_DROP: u16 = 1 << 15;
/// CapabilityMask2: the PMA checks a PM_Key.
pub const CAP2_PM_KEY: u32 = 1 << 0;
/// CapabilityMask2: PortCountersExtended carries the 64-bit error counters
/// (bytes 72-183).
pub const CAP2_ADDITIONAL_PORT_COUNTERS_EXTENDED: u32 = 1 << 1;

/// CapabilityMask2: the high 27 bits of the 32-bit word at byte 4.
struct CapMask2;
impl Codec<u32> for CapMask2 {
    fn get(b: &[u8]) -> u32 {
        get_u32(b, 4) >> 5
    }
    fn set(b: &mut [u8], v: u32) {
        let keep = get_u32(b, 4) & 0x1f;
        set_u32(b, 4, (v << 5) | keep)
    }
}

/// A 20-bit flow label in the low bits of the 3 bytes at `OFF`.
struct FlowLabel<const OFF: usize>;
impl<const OFF: usize> Codec<u32> for FlowLabel<OFF> {
    fn get(b: &[u8]) -> u32 {
        get_u24(b, OFF) & 0xf_ffff
    }
    fn set(b: &mut [u8], v: u32) {
        let keep = get_u24(b, OFF) & 0xf0_0000;
        set_u24(b, OFF, keep | (v & 0xf_ffff))
    }
}

layout! {
    a "ClassPortInfo", LEN, "72 bytes";
    fields {
        /// BaseVersion (1).
        base_version / set_base_version: u8 = Zeroing<U8<0>, 0, LEN>;
        /// ClassVersion of the PMA (1).
        class_version / set_class_version: u8 = U8<1>;
        /// CapabilityMask (see the `CAP_*` bits).
        capability_mask / set_capability_mask: u16 = U16<2>;
        /// CapabilityMask2 (27 bits).
        capability_mask2 / set_capability_mask2: u32 = CapMask2;
        /// RespTimeValue (5 bits).
        resp_time_value / set_resp_time_value: u8 = Bits<7, 3, 5>;
        /// RedirectTC.
        redirect_tc / set_redirect_tc: u8 = U8<24>;
        /// RedirectSL.
        redirect_sl / set_redirect_sl: u8 = Bits<25, 0, 4>;
        /// RedirectFL (20 bits).
        redirect_fl / set_redirect_fl: u32 = FlowLabel<25>;
        /// RedirectLID.
        redirect_lid / set_redirect_lid: u16 = U16<28>;
        /// RedirectP_Key.
        redirect_pkey / set_redirect_pkey: u16 = U16<30>;
        /// RedirectQP (24 bits).
        redirect_qp / set_redirect_qp: u32 = U24<33>;
        /// RedirectQ_Key.
        redirect_qkey / set_redirect_qkey: u32 = U32<36>;
        /// TrapTC.
        trap_tc / set_trap_tc: u8 = U8<56>;
        /// TrapSL.
        trap_sl / set_trap_sl: u8 = Bits<57, 0, 4>;
        /// TrapFL (20 bits).
        trap_fl / set_trap_fl: u32 = FlowLabel<57>;
        /// TrapLID.
        trap_lid / set_trap_lid: u16 = U16<60>;
        /// TrapP_Key.
        trap_pkey / set_trap_pkey: u16 = U16<62>;
        /// TrapHL.
        trap_hl / set_trap_hl: u8 = U8<64>;
        /// TrapQP (24 bits).
        trap_qp / set_trap_qp: u32 = U24<65>;
        /// TrapQ_Key.
        trap_qkey / set_trap_qkey: u32 = U32<68>;
    }
    bytes {
        /// RedirectGID.
        redirect_gid / redirect_gid_mut: [8; 16];
        /// TrapGID.
        trap_gid / trap_gid_mut: [40; 16];
    }
}

crate::mad::attribute!(PmaAttribute, super::attr::CLASS_PORT_INFO);

impl Repr {
    /// True when PortCountersExtended is there (either ExtendedWidth bit).
    pub fn has_extended_counters(&self) -> bool {
        self.capability_mask & (CAP_EXTENDED_WIDTH | CAP_EXTENDED_WIDTH_NO_IETF) != 0
    }

    /// True when PortCountersExtended also carries the 64-bit error counters.
    pub fn has_additional_extended_counters(&self) -> bool {
        self.capability_mask2 & CAP2_ADDITIONAL_PORT_COUNTERS_EXTENDED != 0
    }

    /// True when PortCounters carries QP1Dropped.
    pub fn has_qp1_dropped(&self) -> bool {
        self.capability_mask & CAP_QP1_DROP != 0
    }

    /// True when PortCounters carries PortXmitWait.
    pub fn has_xmit_wait(&self) -> bool {
        self.capability_mask & CAP_PORT_XMIT_WAIT != 0
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "ClassPortInfo v{} CapMask 0x{:04x} CapMask2 0x{:07x}",
            self.class_version, self.capability_mask, self.capability_mask2
        )?;
        if self.redirect_lid != 0 {
            write!(
                f,
                " redirect lid {} qp 0x{:06x}",
                self.redirect_lid, self.redirect_qp
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::tests::{attr_data, mad_fixture};

    // The first exchange of `perfquery 2 7`, which printed `(CapMask: 0x1300)`:
    // fixtures/mad/pma-classportinfo-lid2.resp.hex.
    fn data() -> [u8; LEN] {
        attr_data(&mad_fixture!("pma-classportinfo-lid2.resp.hex"))
    }

    #[test]
    fn parse_and_emit_perfquery_classportinfo() {
        let d = data();
        let r = Repr::parse(&Packet::new_checked(&d[..]).unwrap()).unwrap();
        assert_eq!((r.base_version, r.class_version), (1, 1));
        assert_eq!(r.capability_mask, 0x1300);
        assert!(r.has_extended_counters() && r.has_xmit_wait());
        assert!(!r.has_qp1_dropped() && !r.has_additional_extended_counters());
        assert_eq!(r.capability_mask & CAP_ALL_PORT_SELECT, CAP_ALL_PORT_SELECT);
        let mut b = [0xa5u8; LEN];
        r.emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, d);
    }

    #[test]
    fn packed_fields_keep_their_neighbours() {
        let mut r = Repr {
            capability_mask2: 0x7ff_ffff,
            resp_time_value: 0x15,
            redirect_sl: 0xa,
            redirect_fl: 0xf_ffff,
            trap_sl: 3,
            trap_fl: 0x1_2345,
            ..Repr::default()
        };
        let mut b = [0u8; LEN];
        r.emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(&b[4..8], &[0xff, 0xff, 0xff, 0xf5]);
        assert_eq!(&b[25..28], &[0xaf, 0xff, 0xff]);
        assert_eq!(&b[57..60], &[0x31, 0x23, 0x45]);
        assert_eq!(
            Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap(),
            r
        );
        r.trap_fl = 0;
        assert!(!r.has_extended_counters());
    }
}
