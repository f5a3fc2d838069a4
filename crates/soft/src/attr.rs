//! Device and port attributes (what `ibv_query_device` / `ibv_query_port`
//! return and `ibv_devinfo -v` prints) and the configurable limits.
//!
//! Values are modelled on Linux's software RoCE driver (rxe_param.h) where a
//! userspace NIC can honour them, and chosen smaller where rxe's `1 << 20`
//! defaults would only promise memory a test machine does not have. Every
//! limit in [`Limits`] is enforced by the resource tables (see
//! docs/soft-nic.md for the errno each one produces).

use std::net::Ipv4Addr;

use rdmakit_proto::Mtu;
pub use rdmakit_types::attr::{
    Av, DeviceAttr, Gid, GidEntry, GidType, LinkLayer, PortAttr, PortState,
};

/// `IBV_DEVICE_*` capability bits the soft NIC advertises.
pub mod cap {
    /// Counts bad P_Keys.
    pub const BAD_PKEY_CNTR: u64 = 1 << 1;
    /// Counts Q_Key violations.
    pub const BAD_QKEY_CNTR: u64 = 1 << 2;
    /// Raises PORT_ACTIVE.
    pub const PORT_ACTIVE_EVENT: u64 = 1 << 10;
    /// `sys_image_guid` is meaningful.
    pub const SYS_IMAGE_GUID: u64 = 1 << 11;
    /// Generates RNR NAKs.
    pub const RC_RNR_NAK_GEN: u64 = 1 << 12;
    /// `ibv_req_notify_cq` may be re-armed before polling.
    pub const N_NOTIFY_CQ: u64 = 1 << 14;
    /// Memory windows.
    pub const MEM_WINDOW: u64 = 1 << 17;
    /// Type 2B memory windows (bound by a work request, usable by any QP of
    /// the window's PD).
    pub const MEM_WINDOW_TYPE_2B: u64 = 1 << 24;
}

/// Configurable resource limits (the enforced part of [`DeviceAttr`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// QPs per device.
    pub max_qp: u32,
    /// Work requests per send or receive queue.
    pub max_qp_wr: u32,
    /// Scatter/gather entries per send or receive WR.
    pub max_sge: u32,
    /// CQs per device.
    pub max_cq: u32,
    /// Entries per CQ.
    pub max_cqe: u32,
    /// MRs per device.
    pub max_mr: u32,
    /// PDs per device.
    pub max_pd: u32,
    /// Address handles per device.
    pub max_ah: u32,
    /// Memory windows per device.
    pub max_mw: u32,
    /// SRQs per device.
    pub max_srq: u32,
    /// Work requests per SRQ.
    pub max_srq_wr: u32,
    /// SGEs per SRQ WR.
    pub max_srq_sge: u32,
    /// Outstanding READ/atomic a QP may have as responder.
    pub max_qp_rd_atom: u32,
    /// Outstanding READ/atomic a QP may initiate.
    pub max_qp_init_rd_atom: u32,
    /// Largest inline send.
    pub max_inline: u32,
    /// Largest MR.
    pub max_mr_size: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_qp: 16384,
            max_qp_wr: 16384,
            max_sge: 32,
            max_cq: 16384,
            // mlx5's 4,194,303, not rxe's 32,767: libfabric's ofi_rxm asks
            // for a 262,144-entry MSG CQ (rx size × its universe of 256
            // peers). A CQ's entries are allocated as completions arrive
            // (none at create), so a large CQ costs only the completions
            // it holds — at most this many (~56 B each), as a hardware CQ
            // of that size pins them all at create.
            max_cqe: (1 << 22) - 1,
            max_mr: 65536,
            max_pd: 65536,
            max_ah: 65536,
            max_mw: 65536,
            max_srq: 16384,
            max_srq_wr: 16384,
            max_srq_sge: 27,
            max_qp_rd_atom: 128,
            max_qp_init_rd_atom: 128,
            max_inline: 256,
            max_mr_size: u64::MAX,
        }
    }
}

/// Index of the RoCEv2 IPv4-mapped GID of the bound address in the GID table.
/// Stable: always 0 (the soft NIC has exactly one address per device).
pub const ROCEV2_GID_INDEX: u8 = 0;

/// Path MTU that fits a netdev MTU (subtract 96 bytes of worst-case headers,
/// take the largest IB MTU that fits; roce-wire.md).
pub fn mtu_for_netdev(netdev_mtu: u32) -> Mtu {
    let room = netdev_mtu.saturating_sub(96);
    [Mtu::Mtu4096, Mtu::Mtu2048, Mtu::Mtu1024, Mtu::Mtu512]
        .into_iter()
        .find(|m| m.bytes() <= room)
        .unwrap_or(Mtu::Mtu256)
}

/// An EUI-64 GUID derived from the device address (`02:00:a:b:c:d` with
/// `ff:fe` inserted, as rxe derives its GUID from the netdev MAC).
pub fn guid_for(addr: Ipv4Addr) -> u64 {
    let o = addr.octets();
    u64::from_be_bytes([0x02, 0x00, o[0], 0xff, 0xfe, o[1], o[2], o[3]])
}

/// The attributes of a soft device with `limits` bound to `addr`.
pub fn device_attr(limits: &Limits, addr: Ipv4Addr) -> DeviceAttr {
    let guid = guid_for(addr);
    let vectors = std::thread::available_parallelism()
        .map(|n| u32::try_from(n.get()).unwrap_or(1))
        .unwrap_or(1);
    DeviceAttr {
        fw_ver: "0.1.0".to_string(),
        node_guid: guid,
        sys_image_guid: guid,
        max_mr_size: limits.max_mr_size,
        page_size_cap: 0xffff_f000,
        vendor_id: 0xffffff,
        vendor_part_id: 0,
        hw_ver: 0,
        max_qp: limits.max_qp,
        max_qp_wr: limits.max_qp_wr,
        device_cap_flags: cap::BAD_PKEY_CNTR
            | cap::BAD_QKEY_CNTR
            | cap::PORT_ACTIVE_EVENT
            | cap::SYS_IMAGE_GUID
            | cap::RC_RNR_NAK_GEN
            | cap::N_NOTIFY_CQ
            | cap::MEM_WINDOW
            | cap::MEM_WINDOW_TYPE_2B,
        max_sge: limits.max_sge,
        max_sge_rd: limits.max_sge,
        max_cq: limits.max_cq,
        max_cqe: limits.max_cqe,
        max_mr: limits.max_mr,
        max_pd: limits.max_pd,
        max_qp_rd_atom: limits.max_qp_rd_atom,
        max_ee_rd_atom: 0,
        max_res_rd_atom: limits.max_qp_rd_atom.saturating_mul(limits.max_qp),
        max_qp_init_rd_atom: limits.max_qp_init_rd_atom,
        max_ee_init_rd_atom: 0,
        atomic_cap: 1,
        max_ee: 0,
        max_rdd: 0,
        max_mw: limits.max_mw,
        max_raw_ipv6_qp: 0,
        max_raw_ethy_qp: 0,
        max_mcast_grp: 0,
        max_mcast_qp_attach: 0,
        max_total_mcast_qp_attach: 0,
        max_ah: limits.max_ah,
        max_fmr: 0,
        max_map_per_fmr: 0,
        max_srq: limits.max_srq,
        max_srq_wr: limits.max_srq_wr,
        max_srq_sge: limits.max_srq_sge,
        max_pkeys: 1,
        local_ca_ack_delay: 15,
        phys_port_cnt: 1,
        num_comp_vectors: vectors,
        max_inline: limits.max_inline,
        node_type: 1,
        transport: 0,
    }
}

/// Port 1 of a soft device bound to `addr` with a netdev of `netdev_mtu`.
pub fn port_attr(addr: Ipv4Addr, netdev_mtu: u32) -> PortAttr {
    let mtu = mtu_for_netdev(netdev_mtu);
    let mut gids = vec![
        GidEntry {
            gid: Gid::default(),
            gid_type: GidType::RoceV2,
        };
        16
    ];
    gids[usize::from(ROCEV2_GID_INDEX)].gid = Gid::from_ipv4(addr);
    PortAttr {
        state: PortState::Active,
        max_mtu: Mtu::Mtu4096,
        active_mtu: mtu,
        gid_tbl_len: 16,
        // IBV_PORT_CM_SUP, as rxe reports (ibv_devinfo: 0x00010000).
        port_cap_flags: 1 << 16,
        max_msg_sz: 0x8000_0000,
        bad_pkey_cntr: 0,
        qkey_viol_cntr: 0,
        pkey_tbl_len: 1,
        lid: 0,
        sm_lid: 0,
        lmc: 0,
        max_vl_num: 1,
        sm_sl: 0,
        subnet_timeout: 0,
        init_type_reply: 0,
        active_width: 1,
        active_speed: 32,
        phys_state: 5,
        link_layer: LinkLayer::Ethernet,
        gids,
        pkeys: vec![0xffff],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mtu_from_netdev_follows_roce_wire_md() {
        assert_eq!(mtu_for_netdev(1500), Mtu::Mtu1024);
        assert_eq!(mtu_for_netdev(9000), Mtu::Mtu4096);
        assert_eq!(mtu_for_netdev(65536), Mtu::Mtu4096);
        assert_eq!(mtu_for_netdev(100), Mtu::Mtu256);
    }

    #[test]
    fn gid_is_ipv4_mapped_at_index_0() {
        let p = port_attr(Ipv4Addr::new(127, 1, 2, 3), 1500);
        let g = p.gids[usize::from(ROCEV2_GID_INDEX)].gid;
        assert_eq!(g.to_string(), "0000:0000:0000:0000:0000:ffff:7f01:0203");
        assert_eq!(g.to_ipv4(), Some(Ipv4Addr::new(127, 1, 2, 3)));
    }
}
