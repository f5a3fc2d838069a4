//! The one place rdmakit's Verbs types (`rdmakit-types`) and libibverbs'
//! C structs convert into each other: the drop-in shim writes C structs
//! from the soft NIC's answers, the rdma-core provider reads them back.
//! Each conversion is a `From`/`TryFrom` pair (or, where the orphan rule
//! keeps a foreign number type out, a pair of functions), and the tests
//! check that a value survives the round trip.
//!
//! Reading C is lenient where a real device may report a value outside
//! the Rust enum (documented per conversion); writing C is exact.

use libc::c_int;
use rdmakit_types::{
    Access, AddressHandle, AttrMask, DeviceAttr, GidType, InvalidValue, LinkLayer, Mtu, PortAttr,
    PortState, QpAttr, QpState, QpType, SendOp, SendRequest, SendWr, Sge, UdDest, Wc, WcOpcode,
    WcStatus,
};

use crate::consts::*;
use crate::types::*;

// ---- work completions ------------------------------------------------------

impl From<&Wc> for ibv_wc {
    /// Immediate data goes in network order; an invalidated rkey shares the
    /// field, in host order. `pkey_index`, `slid`, `sl` and
    /// `dlid_path_bits` are 0 (a provider with something to say sets them).
    fn from(w: &Wc) -> ibv_wc {
        let mut flags = 0;
        if w.imm_data.is_some() {
            flags |= IBV_WC_WITH_IMM;
        }
        if w.invalidated_rkey.is_some() {
            flags |= IBV_WC_WITH_INV;
        }
        if w.grh {
            flags |= IBV_WC_GRH;
        }
        ibv_wc {
            wr_id: w.wr_id,
            status: w.status as u32,
            opcode: w.opcode as u32,
            vendor_err: w.vendor_err,
            byte_len: w.byte_len,
            imm_data: match (w.imm_data, w.invalidated_rkey) {
                (Some(imm), _) => imm.to_be(),
                (None, Some(rkey)) => rkey,
                (None, None) => 0,
            },
            qp_num: w.qp_num,
            src_qp: w.src_qp,
            wc_flags: flags,
            pkey_index: 0,
            slid: 0,
            sl: 0,
            dlid_path_bits: 0,
        }
    }
}

impl From<&ibv_wc> for Wc {
    /// Immediate data from network to host order. Never fails, so a
    /// completion is never lost: an unknown status reads as GENERAL_ERR and
    /// an opcode without a variant (TSO, ATOMIC_WRITE) as SEND — on an
    /// error completion the opcode is undefined anyway.
    fn from(w: &ibv_wc) -> Wc {
        let flags = w.wc_flags;
        Wc {
            wr_id: w.wr_id,
            status: WcStatus::try_from(w.status).unwrap_or(WcStatus::GeneralErr),
            opcode: WcOpcode::try_from(w.opcode).unwrap_or(WcOpcode::Send),
            byte_len: w.byte_len,
            imm_data: (flags & IBV_WC_WITH_IMM != 0).then(|| u32::from_be(w.imm_data)),
            invalidated_rkey: (flags & IBV_WC_WITH_INV != 0).then_some(w.imm_data),
            qp_num: w.qp_num,
            src_qp: w.src_qp,
            grh: flags & IBV_WC_GRH != 0,
            vendor_err: w.vendor_err,
        }
    }
}

// ---- QP attributes -----------------------------------------------------------

impl From<&QpAttr> for ibv_qp_attr {
    /// Every field [`QpAttr`] has; the mask passed alongside selects what
    /// the library reads. The AV, capabilities and alternate path stay zero
    /// (the caller fills what it has).
    fn from(a: &QpAttr) -> ibv_qp_attr {
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
}

/// The scalar fields of `a` with the three enum fields given; the AV has
/// no handle in these terms (`ah` reads 0).
fn qp_attr_with(a: &ibv_qp_attr, qp_state: QpState, cur: QpState, mtu: Mtu) -> QpAttr {
    QpAttr {
        qp_state,
        cur_qp_state: cur,
        path_mtu: mtu,
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
    }
}

impl TryFrom<&ibv_qp_attr> for QpAttr {
    type Error = InvalidValue;
    /// `ibv_query_qp`'s answer: fails only when `qp_state` is not a state
    /// (UNKNOWN or garbage). A `cur_qp_state` outside the enum reads as
    /// RESET and a `path_mtu` outside 1..=5 as 256, as a QP without a path
    /// may report them.
    fn try_from(a: &ibv_qp_attr) -> Result<QpAttr, InvalidValue> {
        Ok(qp_attr_with(
            a,
            QpState::try_from(a.qp_state)?,
            QpState::try_from(a.cur_qp_state).unwrap_or(QpState::Reset),
            Mtu::try_from(a.path_mtu).unwrap_or(Mtu::Mtu256),
        ))
    }
}

/// `ibv_modify_qp`'s reading of `a` under `mask`: the state, current state
/// and path MTU must be valid when the mask names them and are
/// [`QpAttr::default`]'s when it does not; QP access flags keep the four
/// bits a QP has (LOCAL_WRITE, REMOTE_WRITE, REMOTE_READ, REMOTE_ATOMIC).
pub fn qp_attr_for_modify(a: &ibv_qp_attr, mask: AttrMask) -> Result<QpAttr, InvalidValue> {
    let d = QpAttr::default();
    let state = match mask.contains(AttrMask::STATE) {
        true => QpState::try_from(a.qp_state)?,
        false => d.qp_state,
    };
    let cur = match mask.contains(AttrMask::CUR_STATE) {
        true => QpState::try_from(a.cur_qp_state)?,
        false => d.cur_qp_state,
    };
    let mtu = match mask.contains(AttrMask::PATH_MTU) {
        true => Mtu::try_from(a.path_mtu)?,
        false => d.path_mtu,
    };
    let mut p = qp_attr_with(a, state, cur, mtu);
    p.qp_access_flags = Access(a.qp_access_flags & 0xf);
    Ok(p)
}

/// [`QpType`] → `IBV_QPT_*`.
pub fn qp_type_to_c(t: QpType) -> u32 {
    match t {
        QpType::Rc => IBV_QPT_RC,
        QpType::Uc => IBV_QPT_UC,
        QpType::Ud => IBV_QPT_UD,
    }
}

/// `IBV_QPT_*` → [`QpType`]; `None` for the types rdmakit has no
/// transport for (XRC, raw packet, driver) and for garbage.
pub fn qp_type_from_c(t: u32) -> Option<QpType> {
    match t {
        IBV_QPT_RC => Some(QpType::Rc),
        IBV_QPT_UC => Some(QpType::Uc),
        IBV_QPT_UD => Some(QpType::Ud),
        _ => None,
    }
}

// ---- work requests -----------------------------------------------------------

impl From<&Sge> for ibv_sge {
    fn from(s: &Sge) -> ibv_sge {
        ibv_sge {
            addr: s.addr,
            length: s.length,
            lkey: s.lkey,
        }
    }
}

impl From<&ibv_sge> for Sge {
    fn from(s: &ibv_sge) -> Sge {
        Sge {
            addr: s.addr,
            length: s.length,
            lkey: s.lkey,
        }
    }
}

/// The `IBV_SEND_*` flags of a request (SIGNALED, FENCE, SOLICITED, INLINE).
pub fn send_flags_to_c(r: &SendRequest) -> u32 {
    let w = &r.wr;
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
    if r.inline {
        f |= IBV_SEND_INLINE;
    }
    f
}

/// A request from the parts of an `ibv_send_wr` (or of an `ibv_wr_*`
/// batch): the inverse of [`send_flags_to_c`] for the flags, other
/// `IBV_SEND_*` bits (IP_CSUM) ignored.
pub fn send_request_from_c(
    wr_id: u64,
    op: SendOp,
    sg_list: Vec<Sge>,
    flags: u32,
    ud: Option<UdDest>,
) -> SendRequest {
    SendRequest {
        wr: SendWr {
            wr_id,
            op,
            sg_list,
            signaled: flags & IBV_SEND_SIGNALED != 0,
            fence: flags & IBV_SEND_FENCE != 0,
            solicited: flags & IBV_SEND_SOLICITED != 0,
            ud,
        },
        inline: flags & IBV_SEND_INLINE != 0,
    }
}

/// The `ibv_qp_init_attr_ex` that says what `a` says: its fields, no
/// `comp_mask` bit, every extended field zero.
pub fn qp_init_attr_ex(a: &ibv_qp_init_attr) -> ibv_qp_init_attr_ex {
    ibv_qp_init_attr_ex {
        qp_context: a.qp_context,
        send_cq: a.send_cq,
        recv_cq: a.recv_cq,
        srq: a.srq,
        cap: a.cap,
        qp_type: a.qp_type,
        sq_sig_all: a.sq_sig_all,
        // SAFETY: plain data (integers and pointers); all-zero is valid.
        ..unsafe { core::mem::zeroed() }
    }
}

/// The basic `ibv_qp_init_attr` part of `a` (its extended fields dropped).
pub fn qp_init_attr_basic(a: &ibv_qp_init_attr_ex) -> ibv_qp_init_attr {
    ibv_qp_init_attr {
        qp_context: a.qp_context,
        send_cq: a.send_cq,
        recv_cq: a.recv_cq,
        srq: a.srq,
        cap: a.cap,
        qp_type: a.qp_type,
        sq_sig_all: a.sq_sig_all,
    }
}

// ---- send operations -----------------------------------------------------------

/// A send operation as `ibv_send_wr` carries it: opcode, `imm_data` (network
/// order for an immediate; host order for an rkey to invalidate) and the `wr`
/// union. A memory-window bind names an `ibv_mw` these terms do not have: it
/// goes as `IBV_WR_BIND_MW` without one (the caller fills `bind_mw`).
pub fn send_op_to_c(op: &SendOp) -> (u32, u32, ibv_send_wr_wr) {
    let rdma = |remote_addr, rkey| ibv_send_wr_wr {
        rdma: ibv_send_wr_rdma { remote_addr, rkey },
    };
    let atomic = |remote_addr, rkey, compare_add, swap| ibv_send_wr_wr {
        atomic: ibv_send_wr_atomic {
            remote_addr,
            compare_add,
            swap,
            rkey,
        },
    };
    match *op {
        SendOp::Send => (IBV_WR_SEND, 0, rdma(0, 0)),
        SendOp::SendWithImm { imm } => (IBV_WR_SEND_WITH_IMM, imm.to_be(), rdma(0, 0)),
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
            atomic(remote_addr, rkey, compare, swap),
        ),
        SendOp::FetchAdd {
            remote_addr,
            rkey,
            add,
        } => (
            IBV_WR_ATOMIC_FETCH_AND_ADD,
            0,
            atomic(remote_addr, rkey, add, 0),
        ),
        SendOp::LocalInv { rkey } => (IBV_WR_LOCAL_INV, rkey, rdma(0, 0)),
        SendOp::BindMw(_) => (IBV_WR_BIND_MW, 0, rdma(0, 0)),
    }
}

/// The inverse of [`send_op_to_c`] for every opcode whose operands are
/// plain numbers. `None` for `IBV_WR_BIND_MW` (its operands are objects
/// the caller resolves), TSO, ATOMIC_WRITE and garbage: the caller knows
/// which of those it supports and which errno the rest get.
pub fn send_op_from_c(opcode: u32, imm_data: u32, wr: &ibv_send_wr_wr) -> Option<SendOp> {
    // SAFETY: every member of the union is plain integers (and UD's AH
    // pointer, not read here); the member read is the one the opcode selects.
    let (rdma, atomic) = unsafe { (wr.rdma, wr.atomic) };
    Some(match opcode {
        IBV_WR_SEND => SendOp::Send,
        IBV_WR_SEND_WITH_IMM => SendOp::SendWithImm {
            imm: u32::from_be(imm_data),
        },
        IBV_WR_SEND_WITH_INV => SendOp::SendWithInv { rkey: imm_data },
        IBV_WR_RDMA_WRITE => SendOp::Write {
            remote_addr: rdma.remote_addr,
            rkey: rdma.rkey,
        },
        IBV_WR_RDMA_WRITE_WITH_IMM => SendOp::WriteWithImm {
            remote_addr: rdma.remote_addr,
            rkey: rdma.rkey,
            imm: u32::from_be(imm_data),
        },
        IBV_WR_RDMA_READ => SendOp::Read {
            remote_addr: rdma.remote_addr,
            rkey: rdma.rkey,
        },
        IBV_WR_ATOMIC_CMP_AND_SWP => SendOp::CompareSwap {
            remote_addr: atomic.remote_addr,
            rkey: atomic.rkey,
            compare: atomic.compare_add,
            swap: atomic.swap,
        },
        IBV_WR_ATOMIC_FETCH_AND_ADD => SendOp::FetchAdd {
            remote_addr: atomic.remote_addr,
            rkey: atomic.rkey,
            add: atomic.compare_add,
        },
        IBV_WR_LOCAL_INV => SendOp::LocalInv { rkey: imm_data },
        _ => return None,
    })
}

// ---- ports and GIDs -------------------------------------------------------------

/// [`PortState`] → `IBV_PORT_*`.
pub fn port_state_to_c(s: PortState) -> u32 {
    match s {
        PortState::Down => IBV_PORT_DOWN,
        PortState::Init => IBV_PORT_INIT,
        PortState::Armed => IBV_PORT_ARMED,
        PortState::Active => IBV_PORT_ACTIVE,
    }
}

/// `IBV_PORT_*` → [`PortState`]. NOP (0) reads as DOWN and ACTIVE_DEFER (5)
/// as ACTIVE: the enum has only the four states ports report in practice.
pub fn port_state_from_c(v: u32) -> PortState {
    match v {
        IBV_PORT_INIT => PortState::Init,
        IBV_PORT_ARMED => PortState::Armed,
        IBV_PORT_ACTIVE | IBV_PORT_ACTIVE_DEFER => PortState::Active,
        _ => PortState::Down,
    }
}

/// [`LinkLayer`] → `IBV_LINK_LAYER_*`.
pub fn link_layer_to_c(l: LinkLayer) -> u8 {
    match l {
        LinkLayer::InfiniBand => IBV_LINK_LAYER_INFINIBAND,
        LinkLayer::Ethernet => IBV_LINK_LAYER_ETHERNET,
    }
}

/// `IBV_LINK_LAYER_*` → [`LinkLayer`]: Ethernet, else InfiniBand
/// (`ibv_devinfo` prints UNSPECIFIED as InfiniBand too).
pub fn link_layer_from_c(l: u8) -> LinkLayer {
    if l == IBV_LINK_LAYER_ETHERNET {
        LinkLayer::Ethernet
    } else {
        LinkLayer::InfiniBand
    }
}

/// [`GidType`] → `IBV_GID_TYPE_*`.
pub fn gid_type_to_c(t: GidType) -> u32 {
    match t {
        GidType::RoceV1 => IBV_GID_TYPE_ROCE_V1,
        GidType::RoceV2 => IBV_GID_TYPE_ROCE_V2,
    }
}

/// `IBV_GID_TYPE_*` → [`GidType`]: RoCE v2 or else v1 (IB GIDs have no
/// RoCE type; renderers print none for an InfiniBand port).
pub fn gid_type_from_c(t: u32) -> GidType {
    if t == IBV_GID_TYPE_ROCE_V2 {
        GidType::RoceV2
    } else {
        GidType::RoceV1
    }
}

/// A count a C `int` field carries, saturating at `INT_MAX`.
fn c_count(v: u32) -> c_int {
    c_int::try_from(v).unwrap_or(c_int::MAX)
}

/// A C `int` count read back; a negative one reads as 0.
fn count(v: c_int) -> u32 {
    u32::try_from(v).unwrap_or(0)
}

impl From<&PortAttr> for ibv_port_attr {
    /// Every field of `struct ibv_port_attr` (the GID and P_Key tables are
    /// queried one entry at a time); `flags` and `port_cap_flags2` are 0.
    fn from(p: &PortAttr) -> ibv_port_attr {
        ibv_port_attr {
            state: port_state_to_c(p.state),
            max_mtu: p.max_mtu as u32,
            active_mtu: p.active_mtu as u32,
            gid_tbl_len: c_count(p.gid_tbl_len),
            port_cap_flags: p.port_cap_flags,
            max_msg_sz: p.max_msg_sz,
            bad_pkey_cntr: p.bad_pkey_cntr,
            qkey_viol_cntr: p.qkey_viol_cntr,
            pkey_tbl_len: p.pkey_tbl_len,
            lid: p.lid,
            sm_lid: p.sm_lid,
            lmc: p.lmc,
            max_vl_num: p.max_vl_num,
            sm_sl: p.sm_sl,
            subnet_timeout: p.subnet_timeout,
            init_type_reply: p.init_type_reply,
            active_width: p.active_width,
            active_speed: p.active_speed,
            phys_state: p.phys_state,
            link_layer: link_layer_to_c(p.link_layer),
            flags: 0,
            port_cap_flags2: 0,
        }
    }
}

impl From<&ibv_port_attr> for PortAttr {
    /// The port's attributes with empty GID and P_Key tables (the caller
    /// queries those). An MTU outside the enum reads as 256 (never seen: the
    /// kernel reports 1..=5); a negative `gid_tbl_len` as 0.
    fn from(a: &ibv_port_attr) -> PortAttr {
        PortAttr {
            state: port_state_from_c(a.state),
            max_mtu: Mtu::try_from(a.max_mtu).unwrap_or(Mtu::Mtu256),
            active_mtu: Mtu::try_from(a.active_mtu).unwrap_or(Mtu::Mtu256),
            gid_tbl_len: count(a.gid_tbl_len),
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
            link_layer: link_layer_from_c(a.link_layer),
            gids: Vec::new(),
            pkeys: Vec::new(),
        }
    }
}

// ---- device attributes -----------------------------------------------------------

impl From<&DeviceAttr> for ibv_device_attr {
    /// Every field of `struct ibv_device_attr`: `fw_ver` truncated to 63
    /// bytes and NUL-terminated, the GUIDs in network order, counts
    /// saturating at `INT_MAX`, the low 32 capability bits (the rest go in
    /// `ibv_device_attr_ex`).
    fn from(a: &DeviceAttr) -> ibv_device_attr {
        let mut fw_ver = [0; 64];
        for (d, b) in fw_ver.iter_mut().zip(a.fw_ver.bytes().take(63)) {
            *d = b as libc::c_char;
        }
        let i = c_count;
        ibv_device_attr {
            fw_ver,
            node_guid: a.node_guid.to_be(),
            sys_image_guid: a.sys_image_guid.to_be(),
            max_mr_size: a.max_mr_size,
            page_size_cap: a.page_size_cap,
            vendor_id: a.vendor_id,
            vendor_part_id: a.vendor_part_id,
            hw_ver: a.hw_ver,
            max_qp: i(a.max_qp),
            max_qp_wr: i(a.max_qp_wr),
            device_cap_flags: (a.device_cap_flags & 0xffff_ffff) as u32,
            max_sge: i(a.max_sge),
            max_sge_rd: i(a.max_sge_rd),
            max_cq: i(a.max_cq),
            max_cqe: i(a.max_cqe),
            max_mr: i(a.max_mr),
            max_pd: i(a.max_pd),
            max_qp_rd_atom: i(a.max_qp_rd_atom),
            max_ee_rd_atom: i(a.max_ee_rd_atom),
            max_res_rd_atom: i(a.max_res_rd_atom),
            max_qp_init_rd_atom: i(a.max_qp_init_rd_atom),
            max_ee_init_rd_atom: i(a.max_ee_init_rd_atom),
            atomic_cap: a.atomic_cap,
            max_ee: i(a.max_ee),
            max_rdd: i(a.max_rdd),
            max_mw: i(a.max_mw),
            max_raw_ipv6_qp: i(a.max_raw_ipv6_qp),
            max_raw_ethy_qp: i(a.max_raw_ethy_qp),
            max_mcast_grp: i(a.max_mcast_grp),
            max_mcast_qp_attach: i(a.max_mcast_qp_attach),
            max_total_mcast_qp_attach: i(a.max_total_mcast_qp_attach),
            max_ah: i(a.max_ah),
            max_fmr: i(a.max_fmr),
            max_map_per_fmr: i(a.max_map_per_fmr),
            max_srq: i(a.max_srq),
            max_srq_wr: i(a.max_srq_wr),
            max_srq_sge: i(a.max_srq_sge),
            max_pkeys: a.max_pkeys,
            local_ca_ack_delay: a.local_ca_ack_delay,
            phys_port_cnt: a.phys_port_cnt,
        }
    }
}

impl From<&ibv_device_attr> for DeviceAttr {
    /// The GUIDs from network to host order, a negative count as 0, `fw_ver`
    /// up to its NUL (invalid UTF-8 replaced). What `ibv_device_attr` does
    /// not hold reads 0: `num_comp_vectors`, `node_type` and `transport`
    /// (the context and device know them) and `max_inline` (not a device
    /// attribute in verbs).
    fn from(a: &ibv_device_attr) -> DeviceAttr {
        let u = count;
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
            num_comp_vectors: 0,
            max_inline: 0,
            node_type: 0,
            transport: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn wc_status() -> impl Strategy<Value = WcStatus> {
        (0u32..24).prop_map(|v| WcStatus::try_from(v).unwrap())
    }

    fn wc_opcode() -> impl Strategy<Value = WcOpcode> {
        prop::sample::select(vec![0u32, 1, 2, 3, 4, 5, 6, 128, 129])
            .prop_map(|v| WcOpcode::try_from(v).unwrap())
    }

    fn qp_state() -> impl Strategy<Value = QpState> {
        prop::sample::select(QpState::ALL.to_vec())
    }

    fn mtu() -> impl Strategy<Value = Mtu> {
        (1u32..=5).prop_map(|v| Mtu::try_from(v).unwrap())
    }

    /// A completion `ibv_wc` can carry: immediate data or an invalidated
    /// rkey, not both (they share one field).
    fn wc() -> impl Strategy<Value = Wc> {
        (
            (any::<u64>(), wc_status(), wc_opcode(), any::<u32>()),
            (0u8..3, any::<u32>(), any::<u32>(), any::<u32>()),
            (any::<bool>(), any::<u32>()),
        )
            .prop_map(
                |(
                    (wr_id, status, opcode, byte_len),
                    (which, x, qp_num, src_qp),
                    (grh, vendor_err),
                )| Wc {
                    wr_id,
                    status,
                    opcode,
                    byte_len,
                    imm_data: (which == 1).then_some(x),
                    invalidated_rkey: (which == 2).then_some(x),
                    qp_num,
                    src_qp,
                    grh,
                    vendor_err,
                },
            )
    }

    fn qp_attr() -> impl Strategy<Value = QpAttr> {
        (
            (qp_state(), qp_state(), mtu(), any::<u32>(), any::<u32>()),
            (
                any::<u32>(),
                any::<u32>(),
                any::<u32>(),
                any::<u16>(),
                any::<u8>(),
            ),
            (
                any::<u8>(),
                any::<u8>(),
                any::<u8>(),
                any::<u8>(),
                any::<u8>(),
            ),
            (any::<u8>(), any::<bool>()),
        )
            .prop_map(
                |(
                    (qp_state, cur_qp_state, path_mtu, qkey, rq_psn),
                    (sq_psn, dest_qp_num, access, pkey_index, port_num),
                    (timeout, retry_cnt, rnr_retry, min_rnr_timer, max_rd_atomic),
                    (max_dest_rd_atomic, en_sqd_async_notify),
                )| QpAttr {
                    qp_state,
                    cur_qp_state,
                    path_mtu,
                    qkey,
                    rq_psn,
                    sq_psn,
                    dest_qp_num,
                    qp_access_flags: Access(access),
                    pkey_index,
                    port_num,
                    ah: AddressHandle(0),
                    timeout,
                    retry_cnt,
                    rnr_retry,
                    min_rnr_timer,
                    max_rd_atomic,
                    max_dest_rd_atomic,
                    en_sqd_async_notify,
                },
            )
    }

    fn send_op() -> impl Strategy<Value = SendOp> {
        (
            0u8..10,
            any::<u64>(),
            any::<u32>(),
            any::<u64>(),
            any::<u64>(),
        )
            .prop_map(|(k, remote_addr, rkey, a, b)| match k {
                0 => SendOp::Send,
                1 => SendOp::SendWithImm { imm: rkey },
                2 => SendOp::SendWithInv { rkey },
                3 => SendOp::Write { remote_addr, rkey },
                4 => SendOp::WriteWithImm {
                    remote_addr,
                    rkey,
                    imm: a as u32,
                },
                5 => SendOp::Read { remote_addr, rkey },
                6 => SendOp::CompareSwap {
                    remote_addr,
                    rkey,
                    compare: a,
                    swap: b,
                },
                7 => SendOp::FetchAdd {
                    remote_addr,
                    rkey,
                    add: a,
                },
                _ => SendOp::LocalInv { rkey },
            })
    }

    fn port_attr() -> impl Strategy<Value = PortAttr> {
        (
            (
                prop::sample::select(vec![
                    PortState::Down,
                    PortState::Init,
                    PortState::Armed,
                    PortState::Active,
                ]),
                mtu(),
                mtu(),
                0u32..=i32::MAX as u32,
                any::<u32>(),
                any::<u32>(),
            ),
            (
                any::<u32>(),
                any::<u32>(),
                any::<u16>(),
                any::<u16>(),
                any::<u16>(),
            ),
            (any::<[u8; 8]>(), any::<bool>()),
        )
            .prop_map(
                |(
                    (state, max_mtu, active_mtu, gid_tbl_len, port_cap_flags, max_msg_sz),
                    (bad_pkey_cntr, qkey_viol_cntr, pkey_tbl_len, lid, sm_lid),
                    (b, eth),
                )| PortAttr {
                    state,
                    max_mtu,
                    active_mtu,
                    gid_tbl_len,
                    port_cap_flags,
                    max_msg_sz,
                    bad_pkey_cntr,
                    qkey_viol_cntr,
                    pkey_tbl_len,
                    lid,
                    sm_lid,
                    lmc: b[0],
                    max_vl_num: b[1],
                    sm_sl: b[2],
                    subnet_timeout: b[3],
                    init_type_reply: b[4],
                    active_width: b[5],
                    active_speed: b[6],
                    phys_state: b[7],
                    link_layer: if eth {
                        LinkLayer::Ethernet
                    } else {
                        LinkLayer::InfiniBand
                    },
                    gids: Vec::new(),
                    pkeys: Vec::new(),
                },
            )
    }

    /// A device's attributes as `ibv_device_attr` holds them: counts up to
    /// `INT_MAX`, 32 capability bits, an ASCII `fw_ver` of up to 63 bytes,
    /// and 0 for the four fields outside the struct.
    fn device_attr() -> impl Strategy<Value = DeviceAttr> {
        let n = || 0u32..=i32::MAX as u32;
        (
            (
                "[ -~]{0,63}",
                any::<u64>(),
                any::<u64>(),
                any::<u64>(),
                any::<u64>(),
            ),
            (
                any::<u32>(),
                any::<u32>(),
                any::<u32>(),
                any::<u32>(),
                any::<u16>(),
            ),
            (any::<u8>(), any::<u8>()),
            prop::collection::vec(n(), 29),
        )
            .prop_map(
                |(
                    (fw_ver, node_guid, sys_image_guid, max_mr_size, page_size_cap),
                    (vendor_id, vendor_part_id, hw_ver, caps, max_pkeys),
                    (local_ca_ack_delay, phys_port_cnt),
                    c,
                )| DeviceAttr {
                    fw_ver,
                    node_guid,
                    sys_image_guid,
                    max_mr_size,
                    page_size_cap,
                    vendor_id,
                    vendor_part_id,
                    hw_ver,
                    max_qp: c[0],
                    max_qp_wr: c[1],
                    device_cap_flags: u64::from(caps),
                    max_sge: c[2],
                    max_sge_rd: c[3],
                    max_cq: c[4],
                    max_cqe: c[5],
                    max_mr: c[6],
                    max_pd: c[7],
                    max_qp_rd_atom: c[8],
                    max_ee_rd_atom: c[9],
                    max_res_rd_atom: c[10],
                    max_qp_init_rd_atom: c[11],
                    max_ee_init_rd_atom: c[12],
                    atomic_cap: c[13],
                    max_ee: c[14],
                    max_rdd: c[15],
                    max_mw: c[16],
                    max_raw_ipv6_qp: c[17],
                    max_raw_ethy_qp: c[18],
                    max_mcast_grp: c[19],
                    max_mcast_qp_attach: c[20],
                    max_total_mcast_qp_attach: c[21],
                    max_ah: c[22],
                    max_fmr: c[23],
                    max_map_per_fmr: c[24],
                    max_srq: c[25],
                    max_srq_wr: c[26],
                    max_srq_sge: c[27],
                    max_pkeys,
                    local_ca_ack_delay,
                    phys_port_cnt,
                    num_comp_vectors: 0,
                    max_inline: 0,
                    node_type: 0,
                    transport: 0,
                },
            )
    }

    proptest! {
        #[test]
        fn wc_round_trips(w in wc()) {
            let c = ibv_wc::from(&w);
            prop_assert_eq!(Wc::from(&c), w);
            // And back: the C struct the conversion wrote reads the same.
            let again = ibv_wc::from(&Wc::from(&c));
            prop_assert_eq!(
                (again.status, again.opcode, again.imm_data, again.wc_flags),
                (c.status, c.opcode, c.imm_data, c.wc_flags)
            );
        }

        #[test]
        fn qp_attr_round_trips_for_query_and_for_modify(a in qp_attr(), m in any::<u32>()) {
            let c = ibv_qp_attr::from(&a);
            prop_assert_eq!(QpAttr::try_from(&c), Ok(a.clone()));
            // modify reads only the masked enum fields, and QP access bits.
            let mask = AttrMask(m);
            let got = qp_attr_for_modify(&c, mask).unwrap();
            let d = QpAttr::default();
            let want = QpAttr {
                qp_state: if mask.contains(AttrMask::STATE) { a.qp_state } else { d.qp_state },
                cur_qp_state: if mask.contains(AttrMask::CUR_STATE) { a.cur_qp_state } else { d.cur_qp_state },
                path_mtu: if mask.contains(AttrMask::PATH_MTU) { a.path_mtu } else { d.path_mtu },
                qp_access_flags: Access(a.qp_access_flags.0 & 0xf),
                ..a
            };
            prop_assert_eq!(got, want);
        }

        #[test]
        fn send_ops_round_trip(op in send_op()) {
            let (opcode, imm, wr) = send_op_to_c(&op);
            prop_assert_eq!(send_op_from_c(opcode, imm, &wr), Some(op));
        }

        #[test]
        fn send_requests_round_trip(
            op in send_op(),
            sge in (any::<u64>(), any::<u32>(), any::<u32>()),
            f in any::<[bool; 4]>(),
        ) {
            let sg = Sge { addr: sge.0, length: sge.1, lkey: sge.2 };
            prop_assert_eq!(Sge::from(&ibv_sge::from(&sg)), sg);
            let r = SendRequest {
                wr: SendWr {
                    signaled: f[0],
                    fence: f[1],
                    solicited: f[2],
                    ..SendWr::new(7, op, vec![sg])
                },
                inline: f[3],
            };
            let flags = send_flags_to_c(&r);
            prop_assert_eq!(
                send_request_from_c(7, op, vec![sg], flags | IBV_SEND_IP_CSUM, None),
                r
            );
        }

        #[test]
        fn port_attr_round_trips(p in port_attr()) {
            let c = ibv_port_attr::from(&p);
            prop_assert_eq!(PortAttr::from(&c), p);
        }

        #[test]
        fn device_attr_round_trips(a in device_attr()) {
            let c = ibv_device_attr::from(&a);
            prop_assert_eq!(c.fw_ver[63], 0, "fw_ver stays NUL-terminated");
            prop_assert_eq!(DeviceAttr::from(&c), a);
        }
    }

    #[test]
    fn wc_byte_orders_and_unknown_values() {
        let w = ibv_wc {
            wr_id: 7,
            status: 0,
            opcode: IBV_WC_RECV,
            byte_len: 12,
            imm_data: 0x1234_5678u32.to_be(),
            wc_flags: IBV_WC_WITH_IMM | IBV_WC_GRH,
            ..ibv_wc::default()
        };
        let c = Wc::from(&w);
        assert_eq!(c.imm_data, Some(0x1234_5678));
        assert!(c.grh);
        assert_eq!(c.invalidated_rkey, None);
        let read = |status, opcode| {
            let w = Wc::from(&ibv_wc {
                status,
                opcode,
                ..ibv_wc::default()
            });
            (w.status, w.opcode)
        };
        assert_eq!(read(99, 99), (WcStatus::GeneralErr, WcOpcode::Send));
        assert_eq!(
            read(12, IBV_WC_LOCAL_INV),
            (WcStatus::RetryExcErr, WcOpcode::LocalInv)
        );
        assert_eq!(read(0, IBV_WC_BIND_MW).1, WcOpcode::BindMw);
        // An invalidated rkey is in host order; immediate data wins the field.
        let both = Wc {
            imm_data: Some(1),
            invalidated_rkey: Some(2),
            ..c
        };
        assert_eq!(ibv_wc::from(&both).imm_data, 1u32.to_be());
        assert_eq!(
            ibv_wc::from(&both).wc_flags,
            IBV_WC_WITH_IMM | IBV_WC_WITH_INV | IBV_WC_GRH
        );
    }

    #[test]
    fn qp_attr_reads_reject_bad_states_and_tolerate_the_rest() {
        let mut c = ibv_qp_attr::from(&QpAttr::default());
        c.qp_state = 7;
        assert_eq!(
            QpAttr::try_from(&c),
            Err(InvalidValue {
                what: "ibv_qp_state",
                value: 7
            })
        );
        c.qp_state = IBV_QPS_RTS;
        c.cur_qp_state = 99;
        c.path_mtu = 0;
        let a = QpAttr::try_from(&c).unwrap();
        assert_eq!(
            (a.qp_state, a.cur_qp_state, a.path_mtu),
            (QpState::Rts, QpState::Reset, Mtu::Mtu256)
        );
        // modify: a masked bad MTU is refused, an unmasked one ignored.
        assert!(qp_attr_for_modify(&c, AttrMask::PATH_MTU).is_err());
        assert!(qp_attr_for_modify(&c, AttrMask::CUR_STATE).is_err());
        assert_eq!(
            qp_attr_for_modify(&c, AttrMask::STATE).unwrap().qp_state,
            QpState::Rts
        );
        let q = QpAttr {
            qp_state: QpState::Sqd,
            port_num: 1,
            ..QpAttr::default()
        };
        let c = ibv_qp_attr::from(&q);
        assert_eq!((c.qp_state, c.port_num), (IBV_QPS_SQD, 1));
    }

    #[test]
    fn c_values_outside_the_enums() {
        assert_eq!(
            send_op_from_c(IBV_WR_BIND_MW, 0, &send_op_to_c(&SendOp::Send).2),
            None
        );
        assert_eq!(
            send_op_from_c(IBV_WR_TSO, 0, &send_op_to_c(&SendOp::Send).2),
            None
        );
        assert_eq!(
            send_op_to_c(&SendOp::SendWithImm { imm: 0x0102_0304 })
                .1
                .to_ne_bytes(),
            [1, 2, 3, 4]
        );
        let (op, _, u) = send_op_to_c(&SendOp::CompareSwap {
            remote_addr: 0x1000,
            rkey: 9,
            compare: 5,
            swap: 6,
        });
        // SAFETY: an atomic fills the `atomic` member.
        let at = unsafe { u.atomic };
        assert_eq!(
            (op, at.remote_addr, at.compare_add, at.swap, at.rkey),
            (IBV_WR_ATOMIC_CMP_AND_SWP, 0x1000, 5, 6, 9)
        );
        let r = SendRequest {
            wr: SendWr {
                fence: true,
                ..SendWr::new(1, SendOp::Send, vec![])
            },
            inline: true,
        };
        assert_eq!(
            send_flags_to_c(&r),
            IBV_SEND_SIGNALED | IBV_SEND_FENCE | IBV_SEND_INLINE
        );
        assert_eq!(port_state_from_c(IBV_PORT_ACTIVE_DEFER), PortState::Active);
        assert_eq!(port_state_from_c(0), PortState::Down);
        for s in [
            PortState::Down,
            PortState::Init,
            PortState::Armed,
            PortState::Active,
        ] {
            assert_eq!(port_state_from_c(port_state_to_c(s)), s);
        }
        for t in [QpType::Rc, QpType::Uc, QpType::Ud] {
            assert_eq!(qp_type_from_c(qp_type_to_c(t)), Some(t));
        }
        assert_eq!(qp_type_from_c(IBV_QPT_XRC_SEND), None);
        for t in [GidType::RoceV1, GidType::RoceV2] {
            assert_eq!(gid_type_from_c(gid_type_to_c(t)), t);
        }
        assert_eq!(gid_type_from_c(IBV_GID_TYPE_IB), GidType::RoceV1);
        for l in [LinkLayer::InfiniBand, LinkLayer::Ethernet] {
            assert_eq!(link_layer_from_c(link_layer_to_c(l)), l);
        }
        assert_eq!(link_layer_from_c(0), LinkLayer::InfiniBand);
        let p = ibv_port_attr {
            active_mtu: 0,
            gid_tbl_len: -1,
            ..ibv_port_attr::default()
        };
        let r = PortAttr::from(&p);
        assert_eq!((r.active_mtu, r.gid_tbl_len), (Mtu::Mtu256, 0));
        // Counts past INT_MAX saturate; fw_ver is cut at 63 bytes.
        let d = DeviceAttr {
            fw_ver: "x".repeat(100),
            max_qp: u32::MAX,
            device_cap_flags: 1 << 40 | 1,
            ..DeviceAttr::from(&zeroed())
        };
        let c = ibv_device_attr::from(&d);
        assert_eq!((c.max_qp, c.device_cap_flags), (i32::MAX, 1));
        assert_eq!(DeviceAttr::from(&c).fw_ver.len(), 63);
    }

    fn zeroed() -> ibv_device_attr {
        // SAFETY: ibv_device_attr is integers and a char array.
        unsafe { std::mem::zeroed() }
    }
}
