//! Device and port attributes (what `ibv_query_device` / `ibv_query_port`
//! return and `ibv_devinfo -v` prints) and GIDs, as every provider reports them.

use std::net::Ipv4Addr;

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

/// Link layer of a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LinkLayer {
    /// InfiniBand.
    InfiniBand,
    /// Ethernet (RoCE).
    Ethernet,
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
    /// RoCE v1 (not used by the soft NIC).
    RoceV1,
    /// RoCE v2 (UDP/IP).
    RoceV2,
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
    /// `active_width` encoding: 1 = 1X, 2 = 4X.
    pub active_width: u8,
    /// `active_speed` encoding: 1 = 2.5 Gbps (SDR) ... 32 = 25 Gbps (EDR).
    pub active_speed: u8,
    /// 5 = LINK_UP.
    pub phys_state: u8,
    pub link_layer: LinkLayer,
    /// The GID table (`gid_tbl_len` entries; unused ones are zero).
    pub gids: Vec<GidEntry>,
    /// The P_Key table.
    pub pkeys: Vec<u16>,
}
