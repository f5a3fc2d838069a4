//! Device and port attributes (what `ibv_query_device` / `ibv_query_port`
//! return and `ibv_devinfo -v` prints) and GIDs, as every provider reports them.

use std::net::Ipv4Addr;

use crate::link::{Speed, Width};
use crate::qp::Mtu;

/// `struct ibv_device_attr` (+ `num_comp_vectors` and `max_inline`), as a
/// plain struct a `devinfo` renderer can print field by field.
#[allow(missing_docs)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceAttr {
    pub fw_ver: String,
    pub node_guid: u64,
    pub sys_image_guid: u64,
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub max_qp: u32,
    pub max_qp_wr: u32,
    pub device_cap_flags: u64,
    pub max_sge: u32,
    pub max_sge_rd: u32,
    pub max_cq: u32,
    pub max_cqe: u32,
    pub max_mr: u32,
    pub max_pd: u32,
    pub max_qp_rd_atom: u32,
    pub max_ee_rd_atom: u32,
    pub max_res_rd_atom: u32,
    pub max_qp_init_rd_atom: u32,
    pub max_ee_init_rd_atom: u32,
    /// 0 NONE, 1 HCA (atomic within this device), 2 GLOB.
    pub atomic_cap: u32,
    pub max_ee: u32,
    pub max_rdd: u32,
    pub max_mw: u32,
    pub max_raw_ipv6_qp: u32,
    pub max_raw_ethy_qp: u32,
    pub max_mcast_grp: u32,
    pub max_mcast_qp_attach: u32,
    pub max_total_mcast_qp_attach: u32,
    pub max_ah: u32,
    pub max_fmr: u32,
    pub max_map_per_fmr: u32,
    pub max_srq: u32,
    pub max_srq_wr: u32,
    pub max_srq_sge: u32,
    pub max_pkeys: u16,
    pub local_ca_ack_delay: u8,
    pub phys_port_cnt: u8,
    pub num_comp_vectors: u32,
    pub max_inline: u32,
    /// `ibv_node_type`: 1 = CA.
    pub node_type: u32,
    /// `ibv_transport_type`: 0 = InfiniBand (RoCE reports IB transport).
    pub transport: u32,
}

/// `enum ibv_port_state`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PortState {
    /// 1.
    Down = 1,
    /// 2.
    Init = 2,
    /// 3.
    Armed = 3,
    /// 4.
    Active = 4,
}

impl PortState {
    /// Its name as `ibv_port_state_str` gives it: `PORT_ACTIVE`.
    pub fn name(self) -> &'static str {
        // The discriminants (1..=4) index the table.
        PORT_STATE_NAMES[self as usize]
    }
}

/// `ibv_port_state_str`'s names, by code.
const PORT_STATE_NAMES: [&str; 6] = [
    "PORT_NOP",
    "PORT_DOWN",
    "PORT_INIT",
    "PORT_ARMED",
    "PORT_ACTIVE",
    "PORT_ACTIVE_DEFER",
];

/// `ibv_port_state_str`'s name of a port state code, also those [`PortState`]
/// has no variant for (0 NOP, 5 ACTIVE_DEFER); None past 5.
pub fn port_state_name(code: u8) -> Option<&'static str> {
    PORT_STATE_NAMES.get(usize::from(code)).copied()
}

/// `ibv_devinfo`'s name of a physical port state ([`PortAttr::phys_state`]:
/// 1 SLEEP ... 5 LINK_UP ... 7 PHY TEST); None for any other code.
pub fn phys_state_name(code: u8) -> Option<&'static str> {
    const NAMES: [&str; 7] = [
        "SLEEP",
        "POLLING",
        "DISABLED",
        "PORT_CONFIGURATION TRAINING",
        "LINK_UP",
        "LINK_ERROR_RECOVERY",
        "PHY TEST",
    ];
    NAMES.get(usize::from(code).checked_sub(1)?).copied()
}

/// A node or system image GUID as `ibv_devinfo` (and sysfs) print it: four
/// big-endian 16-bit groups, `5054:00ff:fe12:3456`.
pub fn guid_str(g: u64) -> String {
    format!(
        "{:04x}:{:04x}:{:04x}:{:04x}",
        (g >> 48) & 0xffff,
        (g >> 32) & 0xffff,
        (g >> 16) & 0xffff,
        g & 0xffff
    )
}

/// `ibv_devinfo`'s name of a transport (`enum ibv_transport_type`, in
/// [`DeviceAttr::transport`]): 0 InfiniBand ... 4 unspecified; None for any
/// other.
pub fn transport_name(t: u32) -> Option<&'static str> {
    const NAMES: [&str; 5] = ["InfiniBand", "iWARP", "usNIC", "usNIC UDP", "unspecified"];
    NAMES.get(usize::try_from(t).ok()?).copied()
}

/// Link layer of a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LinkLayer {
    /// InfiniBand.
    InfiniBand,
    /// Ethernet (RoCE; iWARP too, as the kernel reports it).
    Ethernet,
}

impl LinkLayer {
    /// Its name as `ports/<n>/link_layer` and `ibv_devinfo` print it.
    pub fn name(self) -> &'static str {
        match self {
            LinkLayer::InfiniBand => "InfiniBand",
            LinkLayer::Ethernet => "Ethernet",
        }
    }

    /// The link layer of `ports/<n>/link_layer`'s text (any case). None for the
    /// kernel's `Unknown` (an unspecified link layer) and anything else.
    pub fn from_name(text: &str) -> Option<LinkLayer> {
        [LinkLayer::InfiniBand, LinkLayer::Ethernet]
            .into_iter()
            .find(|l| l.name().eq_ignore_ascii_case(text))
    }
}

/// An address vector as `ibv_modify_qp` (`IBV_QP_AV`) and `ibv_create_ah`
/// take it on RoCE: the destination GID and the GRH's traffic class, the
/// byte a RoCEv2 packet carries as its IPv4 TOS (IPv6 traffic class). Its
/// DSCP (the high six bits) is the application's; its ECN bits (the low
/// two) are the NIC's, which ignores what the application puts there, as
/// mlx5 does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Av {
    /// Destination GID (`grh.dgid`).
    pub dgid: Gid,
    /// Traffic class (`grh.traffic_class`).
    pub traffic_class: u8,
}

impl From<Gid> for Av {
    /// An address vector to `dgid` with traffic class 0.
    fn from(dgid: Gid) -> Av {
        Av {
            dgid,
            traffic_class: 0,
        }
    }
}

/// A 16-byte GID.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Gid(pub [u8; 16]);

impl Gid {
    /// The RoCEv2 GID of an IPv4 address: `::ffff:a.b.c.d`.
    pub fn from_ipv4(a: Ipv4Addr) -> Gid {
        Gid(a.to_ipv6_mapped().octets())
    }

    /// The IPv4 address of an IPv4-mapped GID.
    pub fn to_ipv4(self) -> Option<Ipv4Addr> {
        std::net::Ipv6Addr::from(self.0).to_ipv4_mapped()
    }

    /// The GID as an IPv6 address (`ibv_devinfo -v` prints `::ffff:a.b.c.d`).
    pub fn to_ipv6(self) -> std::net::Ipv6Addr {
        std::net::Ipv6Addr::from(self.0)
    }

    /// True for the all-zero GID (an empty table slot).
    pub fn is_zero(self) -> bool {
        self.0 == [0; 16]
    }
}

impl core::fmt::Display for Gid {
    /// `ibv_devinfo` style: `0000:0000:0000:0000:0000:ffff:7f00:0001`.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for (i, c) in self.0.chunks(2).enumerate() {
            if i > 0 {
                f.write_str(":")?;
            }
            write!(f, "{:02x}{:02x}", c[0], c[1])?;
        }
        Ok(())
    }
}

/// GID type of a table entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GidType {
    /// The kernel's one type for an InfiniBand GID and a RoCE v1 one (it prints
    /// `IB/RoCE v1`; the port's link layer tells them apart). Not used by the
    /// soft NIC.
    RoceV1,
    /// RoCE v2 (UDP/IP).
    RoceV2,
}

impl GidType {
    /// Its name as `ibv_devinfo -v` prints it: `RoCE v1`, `RoCE v2`.
    pub fn name(self) -> &'static str {
        match self {
            GidType::RoceV1 => "RoCE v1",
            GidType::RoceV2 => "RoCE v2",
        }
    }

    /// The type of `gid_attrs/types/<i>`'s text (any case): `IB/RoCE v1` (also
    /// `RoCE v1`, `RoCE`) and `RoCE v2`; None for anything else.
    pub fn from_name(text: &str) -> Option<GidType> {
        match text.to_ascii_lowercase().as_str() {
            "ib/roce v1" | "roce v1" | "roce" => Some(GidType::RoceV1),
            "roce v2" => Some(GidType::RoceV2),
            _ => None,
        }
    }
}

/// One GID table entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GidEntry {
    /// The GID.
    pub gid: Gid,
    /// Its type.
    pub gid_type: GidType,
}

/// `struct ibv_port_attr` (+ the GID and P_Key tables).
#[allow(missing_docs)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortAttr {
    pub state: PortState,
    pub max_mtu: Mtu,
    pub active_mtu: Mtu,
    pub gid_tbl_len: u32,
    pub port_cap_flags: u32,
    pub max_msg_sz: u32,
    pub bad_pkey_cntr: u32,
    pub qkey_viol_cntr: u32,
    pub pkey_tbl_len: u16,
    pub lid: u16,
    pub sm_lid: u16,
    pub lmc: u8,
    pub max_vl_num: u8,
    pub sm_sl: u8,
    pub subnet_timeout: u8,
    pub init_type_reply: u8,
    /// `active_width` encoding: 1 = 1X, 2 = 4X ([`PortAttr::width`]).
    pub active_width: u8,
    /// `active_speed` encoding: 1 = 2.5 Gbps (SDR) ... 32 = 25 Gbps (EDR)
    /// ([`PortAttr::speed`]).
    pub active_speed: u8,
    /// 5 = LINK_UP.
    pub phys_state: u8,
    pub link_layer: LinkLayer,
    /// The GID table (`gid_tbl_len` entries; unused ones are zero).
    pub gids: Vec<GidEntry>,
    /// The P_Key table.
    pub pkeys: Vec<u16>,
}

impl PortAttr {
    /// The link's width, when `active_width` is a known code.
    pub fn width(&self) -> Option<Width> {
        Width::from_code(self.active_width)
    }

    /// The link's per-lane speed, when `active_speed` is a known code.
    pub fn speed(&self) -> Option<Speed> {
        Speed::from_code(self.active_speed.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_and_ibv_devinfo_names() {
        assert_eq!(
            LinkLayer::from_name("InfiniBand"),
            Some(LinkLayer::InfiniBand)
        );
        assert_eq!(LinkLayer::from_name("ethernet"), Some(LinkLayer::Ethernet));
        assert_eq!(LinkLayer::from_name("Unknown"), None);
        assert_eq!(GidType::from_name("IB/RoCE v1"), Some(GidType::RoceV1));
        assert_eq!(
            GidType::from_name("RoCE v2").map(GidType::name),
            Some("RoCE v2")
        );
        assert_eq!(GidType::from_name("IB"), None);
        assert_eq!(PortState::Active.name(), "PORT_ACTIVE");
        assert_eq!(PortState::Down.name(), port_state_name(1).unwrap());
        assert_eq!(port_state_name(5), Some("PORT_ACTIVE_DEFER"));
        assert_eq!(port_state_name(6), None);
        assert_eq!(phys_state_name(5), Some("LINK_UP"));
        assert_eq!(phys_state_name(0), None);
        assert_eq!(phys_state_name(8), None);
        assert_eq!(guid_str(0x5054_00ff_fe12_3456), "5054:00ff:fe12:3456");
        assert_eq!(transport_name(1), Some("iWARP"));
        assert_eq!(transport_name(5), None);
    }
}
