//! NodeInfo (attribute 0x0011, IBTA Vol 1 §14.2.5.3): what a node is and how
//! many ports it has, and which of its ports answered (LocalPortNum).
//!
//! ```text
//! byte 0       BaseVersion
//! byte 1       ClassVersion
//! byte 2       NodeType (1 channel adapter, 2 switch, 3 router)
//! byte 3       NumPorts
//! bytes 4-11   SystemImageGUID
//! bytes 12-19  NodeGUID
//! bytes 20-27  PortGUID
//! bytes 28-29  PartitionCap
//! bytes 30-31  DeviceID
//! bytes 32-35  Revision
//! byte 36      LocalPortNum
//! bytes 37-39  VendorID
//! bytes 40-63  reserved
//! ```

use core::fmt;

use crate::view::{layout, Zeroing, U16, U24, U32, U64, U8};

/// Length of the attribute (the SMP data).
pub const LEN: usize = 64;

/// NodeType of a channel adapter.
pub const NODE_TYPE_CA: u8 = 1;
/// NodeType of a switch.
pub const NODE_TYPE_SWITCH: u8 = 2;
/// NodeType of a router.
pub const NODE_TYPE_ROUTER: u8 = 3;

layout! {
    a "NodeInfo", LEN, "64 bytes";
    fields {
        /// BaseVersion (1).
        base_version / set_base_version: u8 = Zeroing<U8<0>, 0, LEN>;
        /// ClassVersion of the SMA (1).
        class_version / set_class_version: u8 = U8<1>;
        /// NodeType: 1 channel adapter, 2 switch, 3 router.
        node_type / set_node_type: u8 = U8<2>;
        /// Number of physical ports.
        num_ports / set_num_ports: u8 = U8<3>;
        /// SystemImageGUID.
        system_image_guid / set_system_image_guid: u64 = U64<4>;
        /// NodeGUID.
        node_guid / set_node_guid: u64 = U64<12>;
        /// PortGUID of the port that answered (a switch's is its node's).
        port_guid / set_port_guid: u64 = U64<20>;
        /// PartitionCap: P_Key table entries.
        partition_cap / set_partition_cap: u16 = U16<28>;
        /// DeviceID.
        device_id / set_device_id: u16 = U16<30>;
        /// Revision.
        revision / set_revision: u32 = U32<32>;
        /// LocalPortNum: the port the SMP came in by (0 for a switch's port 0).
        local_port_num / set_local_port_num: u8 = U8<36>;
        /// VendorID (24 bits).
        vendor_id / set_vendor_id: u32 = U24<37>;
    }
}

crate::mad::attribute!(SmpAttribute, super::attr::NODE_INFO);

impl Repr {
    /// The node type's name as smpquery prints it.
    pub fn node_type_name(&self) -> &'static str {
        match self.node_type {
            NODE_TYPE_CA => "Channel Adapter",
            NODE_TYPE_SWITCH => "Switch",
            NODE_TYPE_ROUTER => "Router",
            _ => "unknown",
        }
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "NodeInfo {} ports {} node_guid 0x{:016x} port_guid 0x{:016x} local_port {} vendor 0x{:06x} device 0x{:04x}",
            self.node_type_name(),
            self.num_ports,
            self.node_guid,
            self.port_guid,
            self.local_port_num,
            self.vendor_id,
            self.device_id
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::tests::{attr_data, mad_fixture};

    // `smpquery nodeinfo 2` (switch S1 of the ibsim dumbbell):
    // fixtures/mad/smp-nodeinfo-lid2.resp.hex, SMP data at byte 64.
    fn data() -> [u8; 64] {
        attr_data(&mad_fixture!("smp-nodeinfo-lid2.resp.hex"))
    }

    fn repr() -> Repr {
        Repr {
            base_version: 1,
            class_version: 1,
            node_type: NODE_TYPE_SWITCH,
            num_ports: 8,
            system_image_guid: 0x20_0000,
            node_guid: 0x20_0000,
            port_guid: 0x20_0000,
            partition_cap: 8,
            device_id: 0,
            revision: 0xa1,
            local_port_num: 0,
            vendor_id: 0,
        }
    }

    #[test]
    fn deconstruct_smpquery_nodeinfo() {
        let d = data();
        let p = Packet::new_checked(&d[..]).unwrap();
        assert_eq!((p.node_type(), p.num_ports()), (2, 8));
        assert_eq!(p.node_guid(), 0x20_0000);
        assert_eq!(p.revision(), 0xa1);
    }

    #[test]
    fn construct_smpquery_nodeinfo() {
        let mut b = [0xa5u8; 64];
        let mut p = Packet::new_unchecked(&mut b[..]);
        p.set_base_version(1);
        p.set_class_version(1);
        p.set_node_type(2);
        p.set_num_ports(8);
        p.set_system_image_guid(0x20_0000);
        p.set_node_guid(0x20_0000);
        p.set_port_guid(0x20_0000);
        p.set_partition_cap(8);
        p.set_device_id(0);
        p.set_revision(0xa1);
        p.set_local_port_num(0);
        p.set_vendor_id(0);
        assert_eq!(b, data());
    }

    #[test]
    fn parse_smpquery_nodeinfo() {
        let d = data();
        assert_eq!(
            Repr::parse(&Packet::new_checked(&d[..]).unwrap()).unwrap(),
            repr()
        );
    }

    #[test]
    fn emit_smpquery_nodeinfo() {
        let mut b = [0xa5u8; 64];
        repr().emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, data());
        assert!(repr().to_string().contains("Switch ports 8"));
    }

    #[test]
    fn truncated() {
        assert_eq!(
            Packet::new_checked(&data()[..63]).unwrap_err(),
            crate::Error::Truncated
        );
    }
}
