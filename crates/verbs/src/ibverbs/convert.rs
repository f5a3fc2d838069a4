//! Conversions between the C structs of libibverbs and this crate's types.
//! Pure functions: no calls into the library.

use rdmakit_ibverbs_abi::consts::*;
use rdmakit_ibverbs_abi::*;
use rdmakit_proto::{
    Access, AddressHandle, Mtu, QpAttr, QpState, QpType, SendOp, SendWr, Wc, WcOpcode, WcStatus,
};
use rdmakit_types::{DeviceAttr, Gid, GidEntry, GidType, LinkLayer, PortAttr, PortState};

/// `ibv_device_attr` → [`DeviceAttr`] (`node_guid`/`sys_image_guid` from
/// network to host order; `max_inline` is not a device attribute in verbs
/// and stays 0).
pub(crate) fn device_attr(
    a: &ibv_device_attr,
    num_comp_vectors: i32,
    node_type: i32,
    transport: i32,
) -> DeviceAttr {
    let u = |v: i32| u32::try_from(v).unwrap_or(0);
    let fw: Vec<u8> = a
        .fw_ver
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    DeviceAttr {
        fw_ver: String::from_utf8_lossy(&fw).into_owned(),
        node_guid: u64::from_be(a.node_guid),
        sys_image_guid: u64::from_be(a.sys_image_guid),
        max_mr_size: a.max_mr_size,
        page_size_cap: a.page_size_cap,
        vendor_id: a.vendor_id,
        vendor_part_id: a.vendor_part_id,
        hw_ver: a.hw_ver,
        max_qp: u(a.max_qp),
        max_qp_wr: u(a.max_qp_wr),
        device_cap_flags: u64::from(a.device_cap_flags),
        max_sge: u(a.max_sge),
        max_sge_rd: u(a.max_sge_rd),
        max_cq: u(a.max_cq),
        max_cqe: u(a.max_cqe),
        max_mr: u(a.max_mr),
        max_pd: u(a.max_pd),
        max_qp_rd_atom: u(a.max_qp_rd_atom),
        max_ee_rd_atom: u(a.max_ee_rd_atom),
        max_res_rd_atom: u(a.max_res_rd_atom),
        max_qp_init_rd_atom: u(a.max_qp_init_rd_atom),
        max_ee_init_rd_atom: u(a.max_ee_init_rd_atom),
        atomic_cap: a.atomic_cap,
        max_ee: u(a.max_ee),
        max_rdd: u(a.max_rdd),
        max_mw: u(a.max_mw),
        max_raw_ipv6_qp: u(a.max_raw_ipv6_qp),
        max_raw_ethy_qp: u(a.max_raw_ethy_qp),
        max_mcast_grp: u(a.max_mcast_grp),
        max_mcast_qp_attach: u(a.max_mcast_qp_attach),
        max_total_mcast_qp_attach: u(a.max_total_mcast_qp_attach),
        max_ah: u(a.max_ah),
        max_fmr: u(a.max_fmr),
        max_map_per_fmr: u(a.max_map_per_fmr),
        max_srq: u(a.max_srq),
        max_srq_wr: u(a.max_srq_wr),
        max_srq_sge: u(a.max_srq_sge),
        max_pkeys: a.max_pkeys,
        local_ca_ack_delay: a.local_ca_ack_delay,
        phys_port_cnt: a.phys_port_cnt,
        num_comp_vectors: u(num_comp_vectors),
        max_inline: 0,
        node_type: u32::try_from(node_type).unwrap_or(u32::MAX),
        transport: u32::try_from(transport).unwrap_or(u32::MAX),
    }
}

/// `IBV_MTU_*` → [`Mtu`]; `None` for a value outside 1..=5.
pub(crate) fn mtu(v: u32) -> Option<Mtu> {
    Some(match v {
        IBV_MTU_256 => Mtu::Mtu256,
        IBV_MTU_512 => Mtu::Mtu512,
        IBV_MTU_1024 => Mtu::Mtu1024,
        IBV_MTU_2048 => Mtu::Mtu2048,
        IBV_MTU_4096 => Mtu::Mtu4096,
        _ => return None,
    })
}

/// `IBV_PORT_*` → [`PortState`]. NOP (0) reads as DOWN and ACTIVE_DEFER (5)
/// as ACTIVE: the enum has only the four states ports report in practice.
pub(crate) fn port_state(v: u32) -> PortState {
    match v {
        IBV_PORT_INIT => PortState::Init,
        IBV_PORT_ARMED => PortState::Armed,
        IBV_PORT_ACTIVE | IBV_PORT_ACTIVE_DEFER => PortState::Active,
        _ => PortState::Down,
    }
}

/// `ibv_port_attr` → [`PortAttr`] with the given GID and P_Key tables.
/// An MTU outside the enum reads as 256 (never seen: the kernel reports 1..=5).
pub(crate) fn port_attr(a: &ibv_port_attr, gids: Vec<GidEntry>, pkeys: Vec<u16>) -> PortAttr {
    PortAttr {
        state: port_state(a.state),
        max_mtu: mtu(a.max_mtu).unwrap_or(Mtu::Mtu256),
        active_mtu: mtu(a.active_mtu).unwrap_or(Mtu::Mtu256),
        gid_tbl_len: u32::try_from(a.gid_tbl_len).unwrap_or(0),
        port_cap_flags: a.port_cap_flags,
        max_msg_sz: a.max_msg_sz,
        bad_pkey_cntr: a.bad_pkey_cntr,
        qkey_viol_cntr: a.qkey_viol_cntr,
        pkey_tbl_len: a.pkey_tbl_len,
        lid: a.lid,
        sm_lid: a.sm_lid,
        lmc: a.lmc,
        max_vl_num: a.max_vl_num,
        sm_sl: a.sm_sl,
        subnet_timeout: a.subnet_timeout,
        init_type_reply: a.init_type_reply,
        active_width: a.active_width,
        active_speed: a.active_speed,
        phys_state: a.phys_state,
        link_layer: if a.link_layer == IBV_LINK_LAYER_ETHERNET {
            LinkLayer::Ethernet
        } else {
            // ibv_devinfo prints UNSPECIFIED as InfiniBand too.
            LinkLayer::InfiniBand
        },
        gids,
        pkeys,
    }
}

/// `IBV_GID_TYPE_*` → [`GidType`]: RoCE v2 or else v1 (IB GIDs have no
/// RoCE type; renderers print none for an InfiniBand port).
pub(crate) fn gid_type(t: u32) -> GidType {
    if t == IBV_GID_TYPE_ROCE_V2 {
        GidType::RoceV2
    } else {
        GidType::RoceV1
    }
}

/// `IBV_QPS_*` → [`QpState`]; `None` for UNKNOWN or garbage.
pub(crate) fn qp_state(v: u32) -> Option<QpState> {
    QpState::ALL.get(usize::try_from(v).ok()?).copied()
}

pub(crate) fn qp_type_to_c(t: QpType) -> u32 {
    match t {
        QpType::Rc => IBV_QPT_RC,
        QpType::Uc => IBV_QPT_UC,
        QpType::Ud => IBV_QPT_UD,
    }
}

pub(crate) fn qp_type_from_c(t: u32) -> Option<QpType> {
    match t {
        IBV_QPT_RC => Some(QpType::Rc),
        IBV_QPT_UC => Some(QpType::Uc),
        IBV_QPT_UD => Some(QpType::Ud),
        _ => None,
    }
}

/// [`QpAttr`] → `ibv_qp_attr` (every field; the mask selects what the
/// library reads). The AV is filled by the caller.
pub(crate) fn qp_attr_to_c(a: &QpAttr) -> ibv_qp_attr {
    ibv_qp_attr {
        qp_state: a.qp_state as u32,
        cur_qp_state: a.cur_qp_state as u32,
        path_mtu: a.path_mtu as u32,
        qkey: a.qkey,
        rq_psn: a.rq_psn,
        sq_psn: a.sq_psn,
        dest_qp_num: a.dest_qp_num,
        qp_access_flags: a.qp_access_flags.0,
        pkey_index: a.pkey_index,
        port_num: a.port_num,
        timeout: a.timeout,
        retry_cnt: a.retry_cnt,
        rnr_retry: a.rnr_retry,
        min_rnr_timer: a.min_rnr_timer,
        max_rd_atomic: a.max_rd_atomic,
        max_dest_rd_atomic: a.max_dest_rd_atomic,
        en_sqd_async_notify: u8::from(a.en_sqd_async_notify),
        ..ibv_qp_attr::default()
    }
}

/// `ibv_qp_attr` (from `ibv_query_qp`) → [`QpAttr`]. The AV has no handle
/// in this crate's terms: `ah` reads 0.
pub(crate) fn qp_attr_from_c(a: &ibv_qp_attr) -> Option<QpAttr> {
    Some(QpAttr {
        qp_state: qp_state(a.qp_state)?,
        cur_qp_state: qp_state(a.cur_qp_state).unwrap_or(QpState::Reset),
        path_mtu: mtu(a.path_mtu).unwrap_or(Mtu::Mtu256),
        qkey: a.qkey,
        rq_psn: a.rq_psn,
        sq_psn: a.sq_psn,
        dest_qp_num: a.dest_qp_num,
        qp_access_flags: Access(a.qp_access_flags),
        pkey_index: a.pkey_index,
        port_num: a.port_num,
        ah: AddressHandle(0),
        timeout: a.timeout,
        retry_cnt: a.retry_cnt,
        rnr_retry: a.rnr_retry,
        min_rnr_timer: a.min_rnr_timer,
        max_rd_atomic: a.max_rd_atomic,
        max_dest_rd_atomic: a.max_dest_rd_atomic,
        en_sqd_async_notify: a.en_sqd_async_notify != 0,
    })
}

/// `IBV_WC_*` status → [`WcStatus`] (unknown values read as GENERAL_ERR).
pub(crate) fn wc_status(v: u32) -> WcStatus {
    use WcStatus::*;
    const ALL: [WcStatus; 24] = [
        Success,
        LocLenErr,
        LocQpOpErr,
        LocEecOpErr,
        LocProtErr,
        WrFlushErr,
        MwBindErr,
        BadRespErr,
        LocAccessErr,
        RemInvReqErr,
        RemAccessErr,
        RemOpErr,
        RetryExcErr,
        RnrRetryExcErr,
        LocRddViolErr,
        RemInvRdReqErr,
        RemAbortErr,
        InvEecnErr,
        InvEecStateErr,
        FatalErr,
        RespTimeoutErr,
        GeneralErr,
        TmErr,
        TmRndvIncomplete,
    ];
    usize::try_from(v)
        .ok()
        .and_then(|i| ALL.get(i).copied())
        .unwrap_or(GeneralErr)
}

/// `IBV_WC_*` opcode → [`WcOpcode`]. Opcodes this crate cannot post
/// (BIND_MW, LOCAL_INV, TSO, ATOMIC_WRITE) read as SEND; on an error
/// completion the opcode is undefined anyway.
pub(crate) fn wc_opcode(v: u32) -> WcOpcode {
    match v {
        IBV_WC_RDMA_WRITE => WcOpcode::RdmaWrite,
        IBV_WC_RDMA_READ => WcOpcode::RdmaRead,
        IBV_WC_COMP_SWAP => WcOpcode::CompSwap,
        IBV_WC_FETCH_ADD => WcOpcode::FetchAdd,
        IBV_WC_BIND_MW => WcOpcode::BindMw,
        IBV_WC_LOCAL_INV => WcOpcode::LocalInv,
        IBV_WC_RECV => WcOpcode::Recv,
        IBV_WC_RECV_RDMA_WITH_IMM => WcOpcode::RecvRdmaWithImm,
        _ => WcOpcode::Send,
    }
}

/// `ibv_wc` → [`Wc`]: immediate data from network to host order.
pub(crate) fn wc(w: &ibv_wc) -> Wc {
    let flags = w.wc_flags;
    Wc {
        wr_id: w.wr_id,
        status: wc_status(w.status),
        opcode: wc_opcode(w.opcode),
        byte_len: w.byte_len,
        imm_data: (flags & IBV_WC_WITH_IMM != 0).then(|| u32::from_be(w.imm_data)),
        invalidated_rkey: (flags & IBV_WC_WITH_INV != 0).then_some(w.imm_data),
        qp_num: w.qp_num,
        src_qp: w.src_qp,
        grh: flags & IBV_WC_GRH != 0,
        vendor_err: w.vendor_err,
    }
}

/// The opcode, immediate (network order) and `wr` union of a send WR. UD's
/// AH pointer is set by the caller. A memory-window bind names an `ibv_mw`
/// this crate does not hand out: it goes as `IBV_WR_BIND_MW` without one,
/// which rdma-core's providers refuse.
pub(crate) fn send_op(w: &SendWr) -> (u32, u32, ibv_send_wr_wr) {
    let rdma = |remote_addr, rkey| ibv_send_wr_wr {
        rdma: ibv_send_wr_rdma { remote_addr, rkey },
    };
    match w.op {
        SendOp::Send => (IBV_WR_SEND, 0, rdma(0, 0)),
        SendOp::SendWithImm { imm } => (IBV_WR_SEND_WITH_IMM, imm.to_be(), rdma(0, 0)),
        // invalidate_rkey shares the field with imm_data, in host order.
        SendOp::SendWithInv { rkey } => (IBV_WR_SEND_WITH_INV, rkey, rdma(0, 0)),
        SendOp::Write { remote_addr, rkey } => (IBV_WR_RDMA_WRITE, 0, rdma(remote_addr, rkey)),
        SendOp::WriteWithImm {
            remote_addr,
            rkey,
            imm,
        } => (
            IBV_WR_RDMA_WRITE_WITH_IMM,
            imm.to_be(),
            rdma(remote_addr, rkey),
        ),
        SendOp::Read { remote_addr, rkey } => (IBV_WR_RDMA_READ, 0, rdma(remote_addr, rkey)),
        SendOp::CompareSwap {
            remote_addr,
            rkey,
            compare,
            swap,
        } => (
            IBV_WR_ATOMIC_CMP_AND_SWP,
            0,
            ibv_send_wr_wr {
                atomic: ibv_send_wr_atomic {
                    remote_addr,
                    compare_add: compare,
                    swap,
                    rkey,
                },
            },
        ),
        SendOp::LocalInv { rkey } => (IBV_WR_LOCAL_INV, rkey, rdma(0, 0)),
        SendOp::BindMw(_) => (IBV_WR_BIND_MW, 0, rdma(0, 0)),
        SendOp::FetchAdd {
            remote_addr,
            rkey,
            add,
        } => (
            IBV_WR_ATOMIC_FETCH_AND_ADD,
            0,
            ibv_send_wr_wr {
                atomic: ibv_send_wr_atomic {
                    remote_addr,
                    compare_add: add,
                    swap: 0,
                    rkey,
                },
            },
        ),
    }
}

/// `IBV_SEND_*` flags of a WR.
pub(crate) fn send_flags(w: &SendWr, inline: bool) -> u32 {
    let mut f = 0;
    if w.signaled {
        f |= IBV_SEND_SIGNALED;
    }
    if w.fence {
        f |= IBV_SEND_FENCE;
    }
    if w.solicited {
        f |= IBV_SEND_SOLICITED;
    }
    if inline {
        f |= IBV_SEND_INLINE;
    }
    f
}

/// Whether `g` is an IPv4-mapped GID (`::ffff:a.b.c.d`, RoCE v2 over IPv4).
pub(crate) fn is_v4_mapped(g: &Gid) -> bool {
    g.to_ipv4().is_some()
}

/// Whether `g` is an IPv6 link-local GID (`fe80::/10`).
pub(crate) fn is_link_local(g: &Gid) -> bool {
    g.0[0] == 0xfe && g.0[1] & 0xc0 == 0x80
}

/// The source GID index for a destination GID: the index holding `dgid`
/// itself (loopback), else the first RoCE v2 GID of the same family
/// (IPv4-mapped, link-local, other IPv6), else the first GID of that family,
/// else 0.
pub(crate) fn sgid_index_for(table: &[(u32, GidEntry)], dgid: &Gid) -> u8 {
    let idx = |i: u32| u8::try_from(i).unwrap_or(0);
    if let Some((i, _)) = table.iter().find(|(_, e)| e.gid == *dgid) {
        return idx(*i);
    }
    let family = |g: &Gid| (is_v4_mapped(g), is_link_local(g));
    let same = |e: &GidEntry| !e.gid.is_zero() && family(&e.gid) == family(dgid);
    table
        .iter()
        .find(|(_, e)| same(e) && e.gid_type == GidType::RoceV2)
        .or_else(|| table.iter().find(|(_, e)| same(e)))
        .map_or(0, |(i, _)| idx(*i))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(g: Gid, t: GidType) -> GidEntry {
        GidEntry {
            gid: g,
            gid_type: t,
        }
    }

    #[test]
    fn sgid_follows_the_destination_family_like_rxe_tables() {
        let mut ll = [0u8; 16];
        ll[0] = 0xfe;
        ll[1] = 0x80;
        ll[15] = 1;
        let v4 = Gid::from_ipv4(std::net::Ipv4Addr::new(10, 0, 2, 15));
        let peer = Gid::from_ipv4(std::net::Ipv4Addr::new(10, 0, 2, 2));
        let table = vec![
            (0, entry(Gid(ll), GidType::RoceV2)),
            (1, entry(v4, GidType::RoceV2)),
        ];
        assert_eq!(sgid_index_for(&table, &v4), 1, "loopback: the same GID");
        assert_eq!(sgid_index_for(&table, &peer), 1, "IPv4 peer: IPv4 GID");
        assert_eq!(sgid_index_for(&table, &Gid(ll)), 0);
        // RoCE v2 preferred over v1 of the same family (mlx5 tables list both).
        let t2 = vec![
            (0, entry(v4, GidType::RoceV1)),
            (1, entry(v4, GidType::RoceV2)),
        ];
        assert_eq!(sgid_index_for(&t2, &peer), 1);
        assert_eq!(sgid_index_for(&[], &peer), 0);
    }

    #[test]
    fn wc_conversion_byte_orders_and_unknown_values() {
        let w = ibv_wc {
            wr_id: 7,
            status: 0,
            opcode: IBV_WC_RECV,
            byte_len: 12,
            imm_data: 0x1234_5678u32.to_be(),
            wc_flags: IBV_WC_WITH_IMM | IBV_WC_GRH,
            ..ibv_wc::default()
        };
        let c = wc(&w);
        assert_eq!(c.imm_data, Some(0x1234_5678));
        assert!(c.grh);
        assert_eq!(c.invalidated_rkey, None);
        assert_eq!(wc_status(99), WcStatus::GeneralErr);
        assert_eq!(wc_status(12), WcStatus::RetryExcErr);
        assert_eq!(wc_opcode(IBV_WC_LOCAL_INV), WcOpcode::LocalInv);
        assert_eq!(wc_opcode(IBV_WC_BIND_MW), WcOpcode::BindMw);
        assert_eq!(wc_opcode(99), WcOpcode::Send);
        assert_eq!(qp_state(7), None);
        assert_eq!(mtu(6), None);
        assert_eq!(port_state(IBV_PORT_ACTIVE_DEFER), PortState::Active);
    }

    #[test]
    fn send_ops_put_immediates_in_network_order_and_atomics_in_their_union() {
        let mut w = SendWr::new(1, SendOp::SendWithImm { imm: 0x0102_0304 }, vec![]);
        let (op, imm, _) = send_op(&w);
        assert_eq!(
            (op, imm.to_ne_bytes()),
            (IBV_WR_SEND_WITH_IMM, [1, 2, 3, 4])
        );
        w.op = SendOp::CompareSwap {
            remote_addr: 0x1000,
            rkey: 9,
            compare: 5,
            swap: 6,
        };
        let (op, _, u) = send_op(&w);
        // SAFETY: send_op filled the `atomic` member for an atomic.
        let a = unsafe { u.atomic };
        assert_eq!(
            (op, a.remote_addr, a.compare_add, a.swap, a.rkey),
            (IBV_WR_ATOMIC_CMP_AND_SWP, 0x1000, 5, 6, 9)
        );
        w.fence = true;
        assert_eq!(
            send_flags(&w, true),
            IBV_SEND_SIGNALED | IBV_SEND_FENCE | IBV_SEND_INLINE
        );
    }
}
