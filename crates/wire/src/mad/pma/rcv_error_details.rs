//! PortRcvErrorDetails (attribute 0x0015, IBTA Vol 1 §16.1.4.2): why a port
//! counted PortRcvErrors, one 16-bit counter per cause.
//!
//! ```text
//! byte 0       reserved
//! byte 1       PortSelect
//! bytes 2-3    CounterSelect
//! bytes 4-5    PortLocalPhysicalErrors
//! bytes 6-7    PortMalformedPacketErrors (perfquery: PortMalformedPktErrors)
//! bytes 8-9    PortBufferOverrunErrors
//! bytes 10-11  PortDLIDMappingErrors
//! bytes 12-13  PortVLMappingErrors
//! bytes 14-15  PortLoopingErrors
//! ```

use crate::view::{layout, Zeroing, U16, U8};

/// Length of the attribute's defined part.
pub const LEN: usize = 16;

layout! {
    a "PortRcvErrorDetails", LEN, "16 bytes";
    fields {
        /// PortSelect.
        port_select / set_port_select: u8 = Zeroing<U8<1>, 0, LEN>;
        /// CounterSelect.
        counter_select / set_counter_select: u16 = U16<2>;
        /// PortLocalPhysicalErrors.
        port_local_physical_errors / set_port_local_physical_errors: u16 = U16<4>;
        /// PortMalformedPacketErrors.
        port_malformed_pkt_errors / set_port_malformed_pkt_errors: u16 = U16<6>;
        /// PortBufferOverrunErrors.
        port_buffer_overrun_errors / set_port_buffer_overrun_errors: u16 = U16<8>;
        /// PortDLIDMappingErrors.
        port_dlid_mapping_errors / set_port_dlid_mapping_errors: u16 = U16<10>;
        /// PortVLMappingErrors.
        port_vl_mapping_errors / set_port_vl_mapping_errors: u16 = U16<12>;
        /// PortLoopingErrors.
        port_looping_errors / set_port_looping_errors: u16 = U16<14>;
    }
}

crate::mad::attribute!(PmaAttribute, super::attr::PORT_RCV_ERROR_DETAILS);

super::counters! {
    /// The counters, in the order `perfquery -E` prints them, with their widths.
    COUNTERS / counters, shown as "PortRcvErrorDetails" {
        "PortLocalPhysicalErrors": 16 = port_local_physical_errors,
        "PortMalformedPktErrors": 16 = port_malformed_pkt_errors,
        "PortBufferOverrunErrors": 16 = port_buffer_overrun_errors,
        "PortDLIDMappingErrors": 16 = port_dlid_mapping_errors,
        "PortVLMappingErrors": 16 = port_vl_mapping_errors,
        "PortLoopingErrors": 16 = port_looping_errors,
    }
}

impl Repr {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::tests::mad_fixture;

    // `perfquery -E 2 7`: fixtures/mad/pma-rcverrordetails-lid2-p7.resp.hex.
    #[test]
    fn parse_and_emit_perfquery_e() {
        let m = mad_fixture!("pma-rcverrordetails-lid2-p7.resp.hex");
        let d = &m[64..64 + LEN];
        let r = Repr::parse(&Packet::new_checked(d).unwrap()).unwrap();
        let want = Repr {
            port_select: 7,
            port_local_physical_errors: 9,
            port_malformed_pkt_errors: 5,
            ..Repr::default()
        };
        assert_eq!(r, want);
        let mut b = [0xa5u8; LEN];
        r.emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(&b[..], d);
        assert_eq!(
            Packet::new_checked(&d[..LEN - 1]).unwrap_err(),
            crate::Error::Truncated
        );
    }
}
