//! The structs of `<infiniband/verbs.h>` (rdma-core 44), field for field.

use core::mem::{offset_of, size_of};

use libc::{c_char, c_int, c_uint, c_void, pthread_cond_t, pthread_mutex_t, size_t, timespec};

/// Declares types a program only ever holds pointers to.
macro_rules! opaque {
    ($($(#[$m:meta])* $name:ident),* $(,)?) => {$(
        $(#[$m])*
        #[repr(C)]
        pub struct $name {
            _private: [u8; 0],
        }
    )*};
}

opaque!(
    /// `struct ibv_xrcd`.
    ibv_xrcd,
    /// `struct ibv_dm`.
    ibv_dm,
    /// `struct ibv_flow`.
    ibv_flow,
    /// `struct ibv_flow_attr`.
    ibv_flow_attr,
    /// `struct ibv_flow_action`.
    ibv_flow_action,
    /// `struct ibv_flow_action_esp_attr`.
    ibv_flow_action_esp_attr,
    /// `struct ibv_counters`.
    ibv_counters,
    /// `struct ibv_counters_init_attr`.
    ibv_counters_init_attr,
    /// `struct ibv_counter_attach_attr`.
    ibv_counter_attach_attr,
    /// `struct ibv_td`.
    ibv_td,
    /// `struct ibv_td_init_attr`.
    ibv_td_init_attr,
    /// `struct ibv_parent_domain_init_attr`.
    ibv_parent_domain_init_attr,
    /// `struct ibv_alloc_dm_attr`.
    ibv_alloc_dm_attr,
    /// `struct ibv_wq`.
    ibv_wq,
    /// `struct ibv_wq_init_attr`.
    ibv_wq_init_attr,
    /// `struct ibv_wq_attr`.
    ibv_wq_attr,
    /// `struct ibv_rwq_ind_table`.
    ibv_rwq_ind_table,
    /// `struct ibv_rwq_ind_table_init_attr`.
    ibv_rwq_ind_table_init_attr,
    /// `struct ibv_qp_open_attr`.
    ibv_qp_open_attr,
    /// `struct ibv_ops_wr`.
    ibv_ops_wr,
    /// `struct ibv_modify_cq_attr`.
    ibv_modify_cq_attr,
    /// `struct ibv_qp_rate_limit_attr`.
    ibv_qp_rate_limit_attr,
    /// `struct ibv_xrcd_init_attr`.
    ibv_xrcd_init_attr,
    /// `struct verbs_ex_private` (libibverbs-internal).
    verbs_ex_private,
    /// `struct _compat_ibv_port_attr`: the 48-byte `ibv_port_attr` prefix.
    _compat_ibv_port_attr,
);

/// `union ibv_gid`: 16 bytes, 8-aligned (its other view is two `__be64`).
#[repr(C, align(8))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_gid {
    /// The GID in network byte order.
    pub raw: [u8; 16],
}

/// `struct ibv_gid_entry` (`ibv_query_gid_ex`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(missing_docs)]
pub struct ibv_gid_entry {
    pub gid: ibv_gid,
    pub gid_index: u32,
    pub port_num: u32,
    /// `IBV_GID_TYPE_*`.
    pub gid_type: u32,
    pub ndev_ifindex: u32,
}

/// `struct ibv_device_attr` (`ibv_query_device`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[allow(missing_docs)]
pub struct ibv_device_attr {
    pub fw_ver: [c_char; 64],
    /// Network byte order.
    pub node_guid: u64,
    /// Network byte order.
    pub sys_image_guid: u64,
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub max_qp: c_int,
    pub max_qp_wr: c_int,
    pub device_cap_flags: c_uint,
    pub max_sge: c_int,
    pub max_sge_rd: c_int,
    pub max_cq: c_int,
    pub max_cqe: c_int,
    pub max_mr: c_int,
    pub max_pd: c_int,
    pub max_qp_rd_atom: c_int,
    pub max_ee_rd_atom: c_int,
    pub max_res_rd_atom: c_int,
    pub max_qp_init_rd_atom: c_int,
    pub max_ee_init_rd_atom: c_int,
    /// `IBV_ATOMIC_*`.
    pub atomic_cap: u32,
    pub max_ee: c_int,
    pub max_rdd: c_int,
    pub max_mw: c_int,
    pub max_raw_ipv6_qp: c_int,
    pub max_raw_ethy_qp: c_int,
    pub max_mcast_grp: c_int,
    pub max_mcast_qp_attach: c_int,
    pub max_total_mcast_qp_attach: c_int,
    pub max_ah: c_int,
    pub max_fmr: c_int,
    pub max_map_per_fmr: c_int,
    pub max_srq: c_int,
    pub max_srq_wr: c_int,
    pub max_srq_sge: c_int,
    pub max_pkeys: u16,
    pub local_ca_ack_delay: u8,
    pub phys_port_cnt: u8,
}

/// `struct ibv_query_device_ex_input`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(missing_docs)]
pub struct ibv_query_device_ex_input {
    pub comp_mask: u32,
}

/// `struct ibv_odp_caps`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(missing_docs)]
pub struct ibv_odp_caps {
    pub general_caps: u64,
    pub rc_odp_caps: u32,
    pub uc_odp_caps: u32,
    pub ud_odp_caps: u32,
}

/// `struct ibv_tso_caps`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(missing_docs)]
pub struct ibv_tso_caps {
    pub max_tso: u32,
    pub supported_qpts: u32,
}

/// `struct ibv_rss_caps`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(missing_docs)]
pub struct ibv_rss_caps {
    pub supported_qpts: u32,
    pub max_rwq_indirection_tables: u32,
    pub max_rwq_indirection_table_size: u32,
    pub rx_hash_fields_mask: u64,
    pub rx_hash_function: u8,
}

/// `struct ibv_packet_pacing_caps`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(missing_docs)]
pub struct ibv_packet_pacing_caps {
    pub qp_rate_limit_min: u32,
    pub qp_rate_limit_max: u32,
    pub supported_qpts: u32,
}

/// `struct ibv_tm_caps`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(missing_docs)]
pub struct ibv_tm_caps {
    pub max_rndv_hdr_size: u32,
    pub max_num_tags: u32,
    pub flags: u32,
    pub max_ops: u32,
    pub max_sge: u32,
}

/// `struct ibv_cq_moderation_caps`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(missing_docs)]
pub struct ibv_cq_moderation_caps {
    pub max_cq_count: u16,
    pub max_cq_period: u16,
}

/// `struct ibv_pci_atomic_caps`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(missing_docs)]
pub struct ibv_pci_atomic_caps {
    pub fetch_add: u16,
    pub swap: u16,
    pub compare_swap: u16,
}

/// `struct ibv_device_attr_ex` (`ibv_query_device_ex`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[allow(missing_docs)]
pub struct ibv_device_attr_ex {
    pub orig_attr: ibv_device_attr,
    pub comp_mask: u32,
    pub odp_caps: ibv_odp_caps,
    pub completion_timestamp_mask: u64,
    pub hca_core_clock: u64,
    pub device_cap_flags_ex: u64,
    pub tso_caps: ibv_tso_caps,
    pub rss_caps: ibv_rss_caps,
    pub max_wq_type_rq: u32,
    pub packet_pacing_caps: ibv_packet_pacing_caps,
    pub raw_packet_caps: u32,
    pub tm_caps: ibv_tm_caps,
    pub cq_mod_caps: ibv_cq_moderation_caps,
    pub max_dm_size: u64,
    pub pci_atomic_caps: ibv_pci_atomic_caps,
    pub xrc_odp_caps: u32,
    pub phys_port_cnt_ex: u32,
}

/// `struct ibv_port_attr` (`ibv_query_port`; the IBVERBS_1.1 entry point
/// writes only its first 48 bytes, without `port_cap_flags2`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(missing_docs)]
pub struct ibv_port_attr {
    /// `IBV_PORT_*`.
    pub state: u32,
    /// `IBV_MTU_*`.
    pub max_mtu: u32,
    /// `IBV_MTU_*`.
    pub active_mtu: u32,
    pub gid_tbl_len: c_int,
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
    pub active_width: u8,
    pub active_speed: u8,
    pub phys_state: u8,
    pub link_layer: u8,
    pub flags: u8,
    pub port_cap_flags2: u16,
}

/// The first 48 bytes of [`ibv_port_attr`]: what `ibv_query_port@IBVERBS_1.1`
/// may write.
pub const COMPAT_PORT_ATTR_SIZE: usize = offset_of!(ibv_port_attr, port_cap_flags2);

/// The `element` union of [`ibv_async_event`].
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(missing_docs)]
pub union ibv_async_event_element {
    pub cq: *mut ibv_cq,
    pub qp: *mut ibv_qp,
    pub srq: *mut ibv_srq,
    pub wq: *mut ibv_wq,
    pub port_num: c_int,
}

/// `struct ibv_async_event`.
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(missing_docs)]
pub struct ibv_async_event {
    pub element: ibv_async_event_element,
    /// `IBV_EVENT_*`.
    pub event_type: u32,
}

/// `struct ibv_wc`. C's anonymous union `{ imm_data; invalidated_rkey }` is
/// the one field `imm_data` (both are 32 bits).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(missing_docs)]
pub struct ibv_wc {
    pub wr_id: u64,
    /// `IBV_WC_*` status.
    pub status: u32,
    /// `IBV_WC_*` opcode.
    pub opcode: u32,
    pub vendor_err: u32,
    pub byte_len: u32,
    /// Immediate data in network byte order, or the invalidated rkey.
    pub imm_data: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub wc_flags: c_uint,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
}

/// `struct ibv_mw_bind_info`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[allow(missing_docs)]
pub struct ibv_mw_bind_info {
    pub mr: *mut ibv_mr,
    pub addr: u64,
    pub length: u64,
    pub mw_access_flags: c_uint,
}

/// `struct ibv_pd`.
#[repr(C)]
#[derive(Debug)]
#[allow(missing_docs)]
pub struct ibv_pd {
    pub context: *mut ibv_context,
    pub handle: u32,
}

/// `struct ibv_mr`.
#[repr(C)]
#[derive(Debug)]
#[allow(missing_docs)]
pub struct ibv_mr {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub addr: *mut c_void,
    pub length: size_t,
    pub handle: u32,
    pub lkey: u32,
    pub rkey: u32,
}

/// `struct ibv_mw`.
#[repr(C)]
#[derive(Debug)]
#[allow(missing_docs)]
pub struct ibv_mw {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub rkey: u32,
    pub handle: u32,
    /// `IBV_MW_TYPE_*`.
    pub type_: u32,
}

/// `struct ibv_mw_bind`.
#[repr(C)]
#[allow(missing_docs)]
pub struct ibv_mw_bind {
    pub wr_id: u64,
    pub send_flags: c_uint,
    pub bind_info: ibv_mw_bind_info,
}

/// `struct ibv_global_route`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(missing_docs)]
pub struct ibv_global_route {
    pub dgid: ibv_gid,
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
}

/// `struct ibv_grh`: the 40-byte header at the start of a UD receive buffer.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(missing_docs)]
pub struct ibv_grh {
    pub version_tclass_flow: u32,
    pub paylen: u16,
    pub next_hdr: u8,
    pub hop_limit: u8,
    pub sgid: [u8; 16],
    pub dgid: [u8; 16],
}

/// `struct ibv_ah_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(missing_docs)]
pub struct ibv_ah_attr {
    pub grh: ibv_global_route,
    pub dlid: u16,
    pub sl: u8,
    pub src_path_bits: u8,
    pub static_rate: u8,
    pub is_global: u8,
    pub port_num: u8,
}

/// `struct ibv_srq_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(missing_docs)]
pub struct ibv_srq_attr {
    pub max_wr: u32,
    pub max_sge: u32,
    pub srq_limit: u32,
}

/// `struct ibv_srq_init_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[allow(missing_docs)]
pub struct ibv_srq_init_attr {
    pub srq_context: *mut c_void,
    pub attr: ibv_srq_attr,
}

/// `struct ibv_tm_cap`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(missing_docs)]
pub struct ibv_tm_cap {
    pub max_num_tags: u32,
    pub max_ops: u32,
}

/// `struct ibv_srq_init_attr_ex`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[allow(missing_docs)]
pub struct ibv_srq_init_attr_ex {
    pub srq_context: *mut c_void,
    pub attr: ibv_srq_attr,
    pub comp_mask: u32,
    /// `IBV_SRQT_*`.
    pub srq_type: u32,
    pub pd: *mut ibv_pd,
    pub xrcd: *mut ibv_xrcd,
    pub cq: *mut ibv_cq,
    pub tm_cap: ibv_tm_cap,
}

/// `struct ibv_qp_cap`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(missing_docs)]
pub struct ibv_qp_cap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

/// `struct ibv_qp_init_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[allow(missing_docs)]
pub struct ibv_qp_init_attr {
    pub qp_context: *mut c_void,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub cap: ibv_qp_cap,
    /// `IBV_QPT_*`.
    pub qp_type: u32,
    pub sq_sig_all: c_int,
}

/// `struct ibv_rx_hash_conf`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[allow(missing_docs)]
pub struct ibv_rx_hash_conf {
    pub rx_hash_function: u8,
    pub rx_hash_key_len: u8,
    pub rx_hash_key: *mut u8,
    pub rx_hash_fields_mask: u64,
}

/// `struct ibv_qp_init_attr_ex`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[allow(missing_docs)]
pub struct ibv_qp_init_attr_ex {
    pub qp_context: *mut c_void,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub cap: ibv_qp_cap,
    /// `IBV_QPT_*`.
    pub qp_type: u32,
    pub sq_sig_all: c_int,
    /// `IBV_QP_INIT_ATTR_*`.
    pub comp_mask: u32,
    pub pd: *mut ibv_pd,
    pub xrcd: *mut ibv_xrcd,
    pub create_flags: u32,
    pub max_tso_header: u16,
    pub rwq_ind_tbl: *mut ibv_rwq_ind_table,
    pub rx_hash_conf: ibv_rx_hash_conf,
    pub source_qpn: u32,
    /// `IBV_QP_EX_WITH_*`.
    pub send_ops_flags: u64,
}

/// `struct ibv_qp_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(missing_docs)]
pub struct ibv_qp_attr {
    /// `IBV_QPS_*`.
    pub qp_state: u32,
    /// `IBV_QPS_*`.
    pub cur_qp_state: u32,
    /// `IBV_MTU_*`.
    pub path_mtu: u32,
    /// `IBV_MIG_*`.
    pub path_mig_state: u32,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub qp_access_flags: c_uint,
    pub cap: ibv_qp_cap,
    pub ah_attr: ibv_ah_attr,
    pub alt_ah_attr: ibv_ah_attr,
    pub pkey_index: u16,
    pub alt_pkey_index: u16,
    pub en_sqd_async_notify: u8,
    pub sq_draining: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub port_num: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub alt_port_num: u8,
    pub alt_timeout: u8,
    pub rate_limit: u32,
}

/// `struct ibv_data_buf`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[allow(missing_docs)]
pub struct ibv_data_buf {
    pub addr: *mut c_void,
    pub length: size_t,
}

/// `struct ibv_sge`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct ibv_sge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

/// `wr.rdma` of [`ibv_send_wr`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(missing_docs)]
pub struct ibv_send_wr_rdma {
    pub remote_addr: u64,
    pub rkey: u32,
}

/// `wr.atomic` of [`ibv_send_wr`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(missing_docs)]
pub struct ibv_send_wr_atomic {
    pub remote_addr: u64,
    pub compare_add: u64,
    pub swap: u64,
    pub rkey: u32,
}

/// `wr.ud` of [`ibv_send_wr`].
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[allow(missing_docs)]
pub struct ibv_send_wr_ud {
    pub ah: *mut ibv_ah,
    pub remote_qpn: u32,
    pub remote_qkey: u32,
}

/// The `wr` union of [`ibv_send_wr`].
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(missing_docs)]
pub union ibv_send_wr_wr {
    pub rdma: ibv_send_wr_rdma,
    pub atomic: ibv_send_wr_atomic,
    pub ud: ibv_send_wr_ud,
}

/// `bind_mw` of [`ibv_send_wr`]'s last union.
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(missing_docs)]
pub struct ibv_send_wr_bind_mw {
    pub mw: *mut ibv_mw,
    pub rkey: u32,
    pub bind_info: ibv_mw_bind_info,
}

/// `tso` of [`ibv_send_wr`]'s last union.
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(missing_docs)]
pub struct ibv_send_wr_tso {
    pub hdr: *mut c_void,
    pub hdr_sz: u16,
    pub mss: u16,
}

/// [`ibv_send_wr`]'s last union (anonymous in C).
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(missing_docs)]
pub union ibv_send_wr_ext {
    pub bind_mw: ibv_send_wr_bind_mw,
    pub tso: ibv_send_wr_tso,
}

/// `struct ibv_send_wr`. C's anonymous unions are named: `imm_data` (also
/// `invalidate_rkey`) and `ext` (`bind_mw` / `tso`).
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(missing_docs)]
pub struct ibv_send_wr {
    pub wr_id: u64,
    pub next: *mut ibv_send_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
    /// `IBV_WR_*`.
    pub opcode: u32,
    /// `IBV_SEND_*`.
    pub send_flags: c_uint,
    /// Immediate data in network byte order, or the rkey to invalidate.
    pub imm_data: u32,
    pub wr: ibv_send_wr_wr,
    /// `qp_type.xrc.remote_srqn`.
    pub remote_srqn: u32,
    pub ext: ibv_send_wr_ext,
}

/// `struct ibv_recv_wr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[allow(missing_docs)]
pub struct ibv_recv_wr {
    pub wr_id: u64,
    pub next: *mut ibv_recv_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
}

/// `struct ibv_srq`.
#[repr(C)]
#[allow(missing_docs)]
pub struct ibv_srq {
    pub context: *mut ibv_context,
    pub srq_context: *mut c_void,
    pub pd: *mut ibv_pd,
    pub handle: u32,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub events_completed: u32,
}

/// `struct ibv_qp`.
#[repr(C)]
#[allow(missing_docs)]
pub struct ibv_qp {
    pub context: *mut ibv_context,
    pub qp_context: *mut c_void,
    pub pd: *mut ibv_pd,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub handle: u32,
    pub qp_num: u32,
    /// `IBV_QPS_*`.
    pub state: u32,
    /// `IBV_QPT_*`.
    pub qp_type: u32,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub events_completed: u32,
}

/// The work-request builder table of [`ibv_qp_ex`] (`ibv_wr_*`).
#[allow(missing_docs)]
pub mod wr_fn {
    use super::*;
    pub type AtomicCmpSwp = unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, u64, u64);
    pub type AtomicFetchAdd = unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, u64);
    pub type BindMw =
        unsafe extern "C" fn(*mut ibv_qp_ex, *mut ibv_mw, u32, *const ibv_mw_bind_info);
    pub type LocalInv = unsafe extern "C" fn(*mut ibv_qp_ex, u32);
    pub type Rdma = unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64);
    pub type RdmaImm = unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, u32);
    pub type Send = unsafe extern "C" fn(*mut ibv_qp_ex);
    pub type SendImm = unsafe extern "C" fn(*mut ibv_qp_ex, u32);
    pub type SendTso = unsafe extern "C" fn(*mut ibv_qp_ex, *mut c_void, u16, u16);
    pub type SetUdAddr = unsafe extern "C" fn(*mut ibv_qp_ex, *mut ibv_ah, u32, u32);
    pub type SetXrcSrqn = unsafe extern "C" fn(*mut ibv_qp_ex, u32);
    pub type SetInlineData = unsafe extern "C" fn(*mut ibv_qp_ex, *mut c_void, size_t);
    pub type SetInlineDataList = unsafe extern "C" fn(*mut ibv_qp_ex, size_t, *const ibv_data_buf);
    pub type SetSge = unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, u32);
    pub type SetSgeList = unsafe extern "C" fn(*mut ibv_qp_ex, size_t, *const ibv_sge);
    pub type Start = unsafe extern "C" fn(*mut ibv_qp_ex);
    pub type Complete = unsafe extern "C" fn(*mut ibv_qp_ex) -> c_int;
    pub type AtomicWrite = unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, *const c_void);
}

/// `struct ibv_qp_ex`: an [`ibv_qp`] followed by the `ibv_wr_*` table.
#[repr(C)]
#[allow(missing_docs)]
pub struct ibv_qp_ex {
    pub qp_base: ibv_qp,
    pub comp_mask: u64,
    pub wr_id: u64,
    /// `IBV_SEND_*`.
    pub wr_flags: c_uint,
    pub wr_atomic_cmp_swp: Option<wr_fn::AtomicCmpSwp>,
    pub wr_atomic_fetch_add: Option<wr_fn::AtomicFetchAdd>,
    pub wr_bind_mw: Option<wr_fn::BindMw>,
    pub wr_local_inv: Option<wr_fn::LocalInv>,
    pub wr_rdma_read: Option<wr_fn::Rdma>,
    pub wr_rdma_write: Option<wr_fn::Rdma>,
    pub wr_rdma_write_imm: Option<wr_fn::RdmaImm>,
    pub wr_send: Option<wr_fn::Send>,
    pub wr_send_imm: Option<wr_fn::SendImm>,
    pub wr_send_inv: Option<wr_fn::LocalInv>,
    pub wr_send_tso: Option<wr_fn::SendTso>,
    pub wr_set_ud_addr: Option<wr_fn::SetUdAddr>,
    pub wr_set_xrc_srqn: Option<wr_fn::SetXrcSrqn>,
    pub wr_set_inline_data: Option<wr_fn::SetInlineData>,
    pub wr_set_inline_data_list: Option<wr_fn::SetInlineDataList>,
    pub wr_set_sge: Option<wr_fn::SetSge>,
    pub wr_set_sge_list: Option<wr_fn::SetSgeList>,
    pub wr_start: Option<wr_fn::Start>,
    pub wr_complete: Option<wr_fn::Complete>,
    pub wr_abort: Option<wr_fn::Start>,
    pub wr_atomic_write: Option<wr_fn::AtomicWrite>,
}

/// `struct ibv_comp_channel`.
#[repr(C)]
#[derive(Debug)]
#[allow(missing_docs)]
pub struct ibv_comp_channel {
    pub context: *mut ibv_context,
    pub fd: c_int,
    pub refcnt: c_int,
}

/// `struct ibv_cq`.
#[repr(C)]
#[allow(missing_docs)]
pub struct ibv_cq {
    pub context: *mut ibv_context,
    pub channel: *mut ibv_comp_channel,
    pub cq_context: *mut c_void,
    pub handle: u32,
    pub cqe: c_int,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub comp_events_completed: u32,
    pub async_events_completed: u32,
}

/// `struct ibv_poll_cq_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(missing_docs)]
pub struct ibv_poll_cq_attr {
    pub comp_mask: u32,
}

/// `struct ibv_wc_tm_info`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(missing_docs)]
pub struct ibv_wc_tm_info {
    pub tag: u64,
    pub priv_: u32,
}

/// The polling table of [`ibv_cq_ex`] (`ibv_start_poll`, `ibv_wc_read_*`).
#[allow(missing_docs)]
pub mod cq_fn {
    use super::*;
    pub type StartPoll = unsafe extern "C" fn(*mut ibv_cq_ex, *mut ibv_poll_cq_attr) -> c_int;
    pub type NextPoll = unsafe extern "C" fn(*mut ibv_cq_ex) -> c_int;
    pub type EndPoll = unsafe extern "C" fn(*mut ibv_cq_ex);
    pub type ReadU32 = unsafe extern "C" fn(*mut ibv_cq_ex) -> u32;
    pub type ReadU16 = unsafe extern "C" fn(*mut ibv_cq_ex) -> u16;
    pub type ReadU8 = unsafe extern "C" fn(*mut ibv_cq_ex) -> u8;
    pub type ReadU64 = unsafe extern "C" fn(*mut ibv_cq_ex) -> u64;
    pub type ReadUint = unsafe extern "C" fn(*mut ibv_cq_ex) -> c_uint;
    pub type ReadTmInfo = unsafe extern "C" fn(*mut ibv_cq_ex, *mut ibv_wc_tm_info);
}

/// `struct ibv_cq_ex`: an [`ibv_cq`] followed by the polling table.
#[repr(C)]
#[allow(missing_docs)]
pub struct ibv_cq_ex {
    pub context: *mut ibv_context,
    pub channel: *mut ibv_comp_channel,
    pub cq_context: *mut c_void,
    pub handle: u32,
    pub cqe: c_int,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub comp_events_completed: u32,
    pub async_events_completed: u32,
    pub comp_mask: u32,
    /// `IBV_WC_*` status of the current entry.
    pub status: u32,
    pub wr_id: u64,
    pub start_poll: Option<cq_fn::StartPoll>,
    pub next_poll: Option<cq_fn::NextPoll>,
    pub end_poll: Option<cq_fn::EndPoll>,
    pub read_opcode: Option<cq_fn::ReadU32>,
    pub read_vendor_err: Option<cq_fn::ReadU32>,
    pub read_byte_len: Option<cq_fn::ReadU32>,
    pub read_imm_data: Option<cq_fn::ReadU32>,
    pub read_qp_num: Option<cq_fn::ReadU32>,
    pub read_src_qp: Option<cq_fn::ReadU32>,
    pub read_wc_flags: Option<cq_fn::ReadUint>,
    pub read_slid: Option<cq_fn::ReadU32>,
    pub read_sl: Option<cq_fn::ReadU8>,
    pub read_dlid_path_bits: Option<cq_fn::ReadU8>,
    pub read_completion_ts: Option<cq_fn::ReadU64>,
    pub read_cvlan: Option<cq_fn::ReadU16>,
    pub read_flow_tag: Option<cq_fn::ReadU32>,
    pub read_tm_info: Option<cq_fn::ReadTmInfo>,
    pub read_completion_wallclock_ns: Option<cq_fn::ReadU64>,
}

/// `struct ibv_cq_init_attr_ex`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[allow(missing_docs)]
pub struct ibv_cq_init_attr_ex {
    pub cqe: u32,
    pub cq_context: *mut c_void,
    pub channel: *mut ibv_comp_channel,
    pub comp_vector: u32,
    /// `IBV_WC_EX_WITH_*`.
    pub wc_flags: u64,
    /// `IBV_CQ_INIT_ATTR_MASK_*`.
    pub comp_mask: u32,
    /// `IBV_CREATE_CQ_ATTR_*`.
    pub flags: u32,
    pub parent_domain: *mut ibv_pd,
}

/// `struct ibv_ah`.
#[repr(C)]
#[derive(Debug)]
#[allow(missing_docs)]
pub struct ibv_ah {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub handle: u32,
}

/// `struct _ibv_device_ops` (obsolete, never called).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(missing_docs)]
pub struct _ibv_device_ops {
    pub _dummy1: Option<unsafe extern "C" fn(*mut ibv_device, c_int) -> *mut ibv_context>,
    pub _dummy2: Option<unsafe extern "C" fn(*mut ibv_context)>,
}

/// `struct ibv_device`.
#[repr(C)]
#[allow(missing_docs)]
pub struct ibv_device {
    pub _ops: _ibv_device_ops,
    /// `IBV_NODE_*`.
    pub node_type: c_int,
    /// `IBV_TRANSPORT_*`.
    pub transport_type: c_int,
    pub name: [c_char; crate::consts::IBV_SYSFS_NAME_MAX],
    pub dev_name: [c_char; crate::consts::IBV_SYSFS_NAME_MAX],
    pub dev_path: [c_char; crate::consts::IBV_SYSFS_PATH_MAX],
    pub ibdev_path: [c_char; crate::consts::IBV_SYSFS_PATH_MAX],
}

/// The function-pointer types of [`ibv_context_ops`] and [`verbs_context`].
#[allow(missing_docs)]
pub mod ctx_fn {
    use super::*;
    pub type CompatQueryDevice =
        unsafe extern "C" fn(*mut ibv_context, *mut ibv_device_attr) -> c_int;
    pub type CompatQueryPort =
        unsafe extern "C" fn(*mut ibv_context, u8, *mut _compat_ibv_port_attr) -> c_int;
    pub type Compat = unsafe extern "C" fn() -> *mut c_void;
    pub type AllocMw = unsafe extern "C" fn(*mut ibv_pd, u32) -> *mut ibv_mw;
    pub type BindMw = unsafe extern "C" fn(*mut ibv_qp, *mut ibv_mw, *mut ibv_mw_bind) -> c_int;
    pub type DeallocMw = unsafe extern "C" fn(*mut ibv_mw) -> c_int;
    pub type PollCq = unsafe extern "C" fn(*mut ibv_cq, c_int, *mut ibv_wc) -> c_int;
    pub type ReqNotifyCq = unsafe extern "C" fn(*mut ibv_cq, c_int) -> c_int;
    pub type PostSrqRecv =
        unsafe extern "C" fn(*mut ibv_srq, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int;
    pub type PostSend =
        unsafe extern "C" fn(*mut ibv_qp, *mut ibv_send_wr, *mut *mut ibv_send_wr) -> c_int;
    pub type PostRecv =
        unsafe extern "C" fn(*mut ibv_qp, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int;
    pub type QueryPort =
        unsafe extern "C" fn(*mut ibv_context, u8, *mut ibv_port_attr, size_t) -> c_int;
    pub type CreateCqEx =
        unsafe extern "C" fn(*mut ibv_context, *mut ibv_cq_init_attr_ex) -> *mut ibv_cq_ex;
    pub type QueryDeviceEx = unsafe extern "C" fn(
        *mut ibv_context,
        *const ibv_query_device_ex_input,
        *mut ibv_device_attr_ex,
        size_t,
    ) -> c_int;
    pub type CreateQpEx =
        unsafe extern "C" fn(*mut ibv_context, *mut ibv_qp_init_attr_ex) -> *mut ibv_qp;
    pub type CreateSrqEx =
        unsafe extern "C" fn(*mut ibv_context, *mut ibv_srq_init_attr_ex) -> *mut ibv_srq;
    pub type GetSrqNum = unsafe extern "C" fn(*mut ibv_srq, *mut u32) -> c_int;
    pub type OpenQp = unsafe extern "C" fn(*mut ibv_context, *mut ibv_qp_open_attr) -> *mut ibv_qp;
    pub type OpenXrcd =
        unsafe extern "C" fn(*mut ibv_context, *mut ibv_xrcd_init_attr) -> *mut ibv_xrcd;
    pub type CloseXrcd = unsafe extern "C" fn(*mut ibv_xrcd) -> c_int;
    pub type QueryRtValues = unsafe extern "C" fn(*mut ibv_context, *mut ibv_values_ex) -> c_int;
    pub type ModifyCq = unsafe extern "C" fn(*mut ibv_cq, *mut ibv_modify_cq_attr) -> c_int;
    pub type Unused = unsafe extern "C" fn();
}

/// `struct ibv_context_ops`: what inline `ibv_poll_cq`, `ibv_req_notify_cq`,
/// `ibv_post_send`, `ibv_post_recv` and `ibv_post_srq_recv` call.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(missing_docs)]
pub struct ibv_context_ops {
    pub _compat_query_device: Option<ctx_fn::CompatQueryDevice>,
    pub _compat_query_port: Option<ctx_fn::CompatQueryPort>,
    pub _compat_alloc_pd: Option<ctx_fn::Compat>,
    pub _compat_dealloc_pd: Option<ctx_fn::Compat>,
    pub _compat_reg_mr: Option<ctx_fn::Compat>,
    pub _compat_rereg_mr: Option<ctx_fn::Compat>,
    pub _compat_dereg_mr: Option<ctx_fn::Compat>,
    pub alloc_mw: Option<ctx_fn::AllocMw>,
    pub bind_mw: Option<ctx_fn::BindMw>,
    pub dealloc_mw: Option<ctx_fn::DeallocMw>,
    pub _compat_create_cq: Option<ctx_fn::Compat>,
    pub poll_cq: Option<ctx_fn::PollCq>,
    pub req_notify_cq: Option<ctx_fn::ReqNotifyCq>,
    pub _compat_cq_event: Option<ctx_fn::Compat>,
    pub _compat_resize_cq: Option<ctx_fn::Compat>,
    pub _compat_destroy_cq: Option<ctx_fn::Compat>,
    pub _compat_create_srq: Option<ctx_fn::Compat>,
    pub _compat_modify_srq: Option<ctx_fn::Compat>,
    pub _compat_query_srq: Option<ctx_fn::Compat>,
    pub _compat_destroy_srq: Option<ctx_fn::Compat>,
    pub post_srq_recv: Option<ctx_fn::PostSrqRecv>,
    pub _compat_create_qp: Option<ctx_fn::Compat>,
    pub _compat_query_qp: Option<ctx_fn::Compat>,
    pub _compat_modify_qp: Option<ctx_fn::Compat>,
    pub _compat_destroy_qp: Option<ctx_fn::Compat>,
    pub post_send: Option<ctx_fn::PostSend>,
    pub post_recv: Option<ctx_fn::PostRecv>,
    pub _compat_create_ah: Option<ctx_fn::Compat>,
    pub _compat_destroy_ah: Option<ctx_fn::Compat>,
    pub _compat_attach_mcast: Option<ctx_fn::Compat>,
    pub _compat_detach_mcast: Option<ctx_fn::Compat>,
    pub _compat_async_event: Option<ctx_fn::Compat>,
}

/// `struct ibv_context`.
#[repr(C)]
#[allow(missing_docs)]
pub struct ibv_context {
    pub device: *mut ibv_device,
    pub ops: ibv_context_ops,
    pub cmd_fd: c_int,
    pub async_fd: c_int,
    pub num_comp_vectors: c_int,
    pub mutex: pthread_mutex_t,
    /// [`crate::ABI_IS_EXTENDED`] when this context sits inside a
    /// [`verbs_context`].
    pub abi_compat: *mut c_void,
}

/// `struct ibv_values_ex`.
#[repr(C)]
#[allow(missing_docs)]
pub struct ibv_values_ex {
    pub comp_mask: u32,
    pub raw_clock: timespec,
}

/// `struct verbs_context`: extended ops "growing up" in front of the
/// [`ibv_context`] it ends with. Unused slots are typed
/// [`ctx_fn::Unused`]; only their size matters.
#[repr(C)]
#[allow(missing_docs)]
pub struct verbs_context {
    pub query_port: Option<ctx_fn::QueryPort>,
    pub advise_mr: Option<ctx_fn::Unused>,
    pub alloc_null_mr: Option<ctx_fn::Unused>,
    pub read_counters: Option<ctx_fn::Unused>,
    pub attach_counters_point_flow: Option<ctx_fn::Unused>,
    pub create_counters: Option<ctx_fn::Unused>,
    pub destroy_counters: Option<ctx_fn::Unused>,
    pub reg_dm_mr: Option<ctx_fn::Unused>,
    pub alloc_dm: Option<ctx_fn::Unused>,
    pub free_dm: Option<ctx_fn::Unused>,
    pub modify_flow_action_esp: Option<ctx_fn::Unused>,
    pub destroy_flow_action: Option<ctx_fn::Unused>,
    pub create_flow_action_esp: Option<ctx_fn::Unused>,
    pub modify_qp_rate_limit: Option<ctx_fn::Unused>,
    pub alloc_parent_domain: Option<ctx_fn::Unused>,
    pub dealloc_td: Option<ctx_fn::Unused>,
    pub alloc_td: Option<ctx_fn::Unused>,
    pub modify_cq: Option<ctx_fn::ModifyCq>,
    pub post_srq_ops: Option<ctx_fn::Unused>,
    pub destroy_rwq_ind_table: Option<ctx_fn::Unused>,
    pub create_rwq_ind_table: Option<ctx_fn::Unused>,
    pub destroy_wq: Option<ctx_fn::Unused>,
    pub modify_wq: Option<ctx_fn::Unused>,
    pub create_wq: Option<ctx_fn::Unused>,
    pub query_rt_values: Option<ctx_fn::QueryRtValues>,
    pub create_cq_ex: Option<ctx_fn::CreateCqEx>,
    pub priv_: *mut verbs_ex_private,
    pub query_device_ex: Option<ctx_fn::QueryDeviceEx>,
    pub ibv_destroy_flow: Option<ctx_fn::Unused>,
    pub abi_placeholder2: Option<ctx_fn::Unused>,
    pub ibv_create_flow: Option<ctx_fn::Unused>,
    pub abi_placeholder1: Option<ctx_fn::Unused>,
    pub open_qp: Option<ctx_fn::OpenQp>,
    pub create_qp_ex: Option<ctx_fn::CreateQpEx>,
    pub get_srq_num: Option<ctx_fn::GetSrqNum>,
    pub create_srq_ex: Option<ctx_fn::CreateSrqEx>,
    pub open_xrcd: Option<ctx_fn::OpenXrcd>,
    pub close_xrcd: Option<ctx_fn::CloseXrcd>,
    pub _abi_placeholder3: u64,
    /// Must be [`crate::VERBS_CONTEXT_SZ`] for the inline helpers to see the ops.
    pub sz: size_t,
    pub context: ibv_context,
}

// The sizes measured against Debian 12's verbs.h (reference/libibverbs-abi.md),
// checked whenever this crate compiles. `tests/layout.rs` checks every field
// offset against the installed header.
const _: () = {
    assert!(size_of::<ibv_device>() == 664);
    assert!(size_of::<ibv_context>() == 328);
    assert!(offset_of!(ibv_context, ops) == 8);
    assert!(offset_of!(ibv_context, ops) + offset_of!(ibv_context_ops, poll_cq) == 96);
    assert!(offset_of!(ibv_context, ops) + offset_of!(ibv_context_ops, req_notify_cq) == 104);
    assert!(offset_of!(ibv_context, ops) + offset_of!(ibv_context_ops, post_srq_recv) == 168);
    assert!(offset_of!(ibv_context, ops) + offset_of!(ibv_context_ops, post_send) == 208);
    assert!(offset_of!(ibv_context, ops) + offset_of!(ibv_context_ops, post_recv) == 216);
    assert!(offset_of!(ibv_context, cmd_fd) == 264);
    assert!(offset_of!(ibv_context, mutex) == 280);
    assert!(offset_of!(ibv_context, abi_compat) == 320);
    assert!(size_of::<verbs_context>() == 648);
    assert!(offset_of!(verbs_context, context) == 320);
    assert!(offset_of!(verbs_context, query_port) == 0);
    assert!(offset_of!(verbs_context, create_cq_ex) == 200);
    assert!(offset_of!(verbs_context, query_device_ex) == 216);
    assert!(offset_of!(verbs_context, create_qp_ex) == 264);
    assert!(offset_of!(verbs_context, sz) == 312);
    assert!(size_of::<ibv_device_attr>() == 232);
    assert!(size_of::<ibv_device_attr_ex>() == 400);
    assert!(size_of::<ibv_port_attr>() == 52);
    assert!(COMPAT_PORT_ATTR_SIZE == 48);
    assert!(size_of::<ibv_pd>() == 16);
    assert!(size_of::<ibv_mr>() == 48);
    assert!(offset_of!(ibv_mr, lkey) == 36);
    assert!(offset_of!(ibv_mr, rkey) == 40);
    assert!(size_of::<ibv_cq>() == 128);
    assert!(size_of::<ibv_cq_ex>() == 288);
    assert!(size_of::<ibv_qp>() == 160);
    assert!(offset_of!(ibv_qp, qp_num) == 52);
    assert!(offset_of!(ibv_qp, state) == 56);
    assert!(offset_of!(ibv_qp, qp_type) == 60);
    assert!(size_of::<ibv_qp_ex>() == 352);
    assert!(offset_of!(ibv_qp_ex, comp_mask) == 160);
    assert!(offset_of!(ibv_qp_ex, wr_id) == 168);
    assert!(offset_of!(ibv_qp_ex, wr_flags) == 176);
    assert!(offset_of!(ibv_qp_ex, wr_rdma_read) == 216);
    assert!(offset_of!(ibv_qp_ex, wr_rdma_write) == 224);
    assert!(offset_of!(ibv_qp_ex, wr_send) == 240);
    assert!(offset_of!(ibv_qp_ex, wr_set_sge) == 304);
    assert!(offset_of!(ibv_qp_ex, wr_set_sge_list) == 312);
    assert!(offset_of!(ibv_qp_ex, wr_start) == 320);
    assert!(offset_of!(ibv_qp_ex, wr_complete) == 328);
    assert!(offset_of!(ibv_qp_ex, wr_abort) == 336);
    assert!(size_of::<ibv_srq>() == 128);
    assert!(size_of::<ibv_ah>() == 24);
    assert!(size_of::<ibv_comp_channel>() == 16);
    assert!(size_of::<ibv_wc>() == 48);
    assert!(size_of::<ibv_send_wr>() == 128);
    assert!(size_of::<ibv_recv_wr>() == 32);
    assert!(size_of::<ibv_sge>() == 16);
    assert!(size_of::<ibv_qp_attr>() == 144);
    assert!(size_of::<ibv_qp_init_attr>() == 64);
    assert!(size_of::<ibv_qp_init_attr_ex>() == 136);
    assert!(size_of::<ibv_ah_attr>() == 32);
    assert!(size_of::<ibv_gid_entry>() == 32);
};
