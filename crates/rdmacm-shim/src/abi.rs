//! rdma-core 44's `<rdma/rdma_cma.h>` and `<infiniband/sa.h>` structs as C
//! lays them out; tests/layout.rs compares every size and offset with the
//! installed headers.

#![allow(non_camel_case_types, missing_docs)]

use core::mem::{offset_of, size_of};

use libc::{
    c_char, c_int, c_void, size_t, sockaddr, sockaddr_in, sockaddr_in6, sockaddr_storage, socklen_t,
};
use rdmakit_ibverbs_abi::{
    ibv_ah_attr, ibv_comp_channel, ibv_context, ibv_cq, ibv_gid, ibv_pd, ibv_qp, ibv_srq,
};

pub const RDMA_PS_IPOIB: u32 = 0x0002;
pub const RDMA_PS_TCP: u32 = 0x0106;
pub const RDMA_PS_UDP: u32 = 0x0111;
pub const RDMA_PS_IB: u32 = 0x013f;

pub const RDMA_MAX_RESP_RES: u8 = 0xff;
pub const RDMA_MAX_INIT_DEPTH: u8 = 0xff;

pub const RAI_PASSIVE: c_int = 0x1;
pub const RAI_NUMERICHOST: c_int = 0x2;
pub const RAI_NOROUTE: c_int = 0x4;
pub const RAI_FAMILY: c_int = 0x8;

pub const RDMA_OPTION_ID: c_int = 0;
pub const RDMA_OPTION_IB: c_int = 1;
pub const RDMA_OPTION_ID_TOS: c_int = 0;
pub const RDMA_OPTION_ID_REUSEADDR: c_int = 1;
pub const RDMA_OPTION_ID_AFONLY: c_int = 2;
pub const RDMA_OPTION_ID_ACK_TIMEOUT: c_int = 3;
pub const RDMA_OPTION_IB_PATH: c_int = 1;

/// `struct rdma_ib_addr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_ib_addr {
    pub sgid: ibv_gid,
    pub dgid: ibv_gid,
    /// Network order.
    pub pkey: u16,
}

/// The sockaddr unions of `struct rdma_addr` (all views of 128 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub union rdma_sockaddr {
    pub addr: sockaddr,
    pub sin: sockaddr_in,
    pub sin6: sockaddr_in6,
    pub storage: sockaddr_storage,
}

/// `struct rdma_addr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_addr {
    pub src: rdma_sockaddr,
    pub dst: rdma_sockaddr,
    /// `union { struct rdma_ib_addr ibaddr; } addr`.
    pub ibaddr: rdma_ib_addr,
}

/// `struct ibv_sa_path_rec`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_sa_path_rec {
    pub dgid: ibv_gid,
    pub sgid: ibv_gid,
    pub dlid: u16,
    pub slid: u16,
    pub raw_traffic: c_int,
    pub flow_label: u32,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub reversible: c_int,
    pub numb_path: u8,
    pub pkey: u16,
    pub sl: u8,
    pub mtu_selector: u8,
    pub mtu: u8,
    pub rate_selector: u8,
    pub rate: u8,
    pub packet_life_time_selector: u8,
    pub packet_life_time: u8,
    pub preference: u8,
}

/// `struct rdma_route`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_route {
    pub addr: rdma_addr,
    pub path_rec: *mut ibv_sa_path_rec,
    pub num_paths: c_int,
}

/// `struct rdma_event_channel`.
#[repr(C)]
pub struct rdma_event_channel {
    pub fd: c_int,
}

/// `struct rdma_cm_id`.
#[repr(C)]
pub struct rdma_cm_id {
    pub verbs: *mut ibv_context,
    pub channel: *mut rdma_event_channel,
    pub context: *mut c_void,
    pub qp: *mut ibv_qp,
    pub route: rdma_route,
    /// `enum rdma_port_space`.
    pub ps: u32,
    pub port_num: u8,
    pub event: *mut rdma_cm_event,
    pub send_cq_channel: *mut ibv_comp_channel,
    pub send_cq: *mut ibv_cq,
    pub recv_cq_channel: *mut ibv_comp_channel,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub pd: *mut ibv_pd,
    /// `enum ibv_qp_type`.
    pub qp_type: u32,
}

/// `struct rdma_conn_param`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_conn_param {
    pub private_data: *const c_void,
    pub private_data_len: u8,
    pub responder_resources: u8,
    pub initiator_depth: u8,
    pub flow_control: u8,
    pub retry_count: u8,
    pub rnr_retry_count: u8,
    pub srq: u8,
    pub qp_num: u32,
}

/// `struct rdma_ud_param`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_ud_param {
    pub private_data: *const c_void,
    pub private_data_len: u8,
    pub ah_attr: ibv_ah_attr,
    pub qp_num: u32,
    pub qkey: u32,
}

/// The `param` union of `struct rdma_cm_event`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union rdma_cm_event_param {
    pub conn: rdma_conn_param,
    pub ud: rdma_ud_param,
}

/// `struct rdma_cm_event`.
#[repr(C)]
pub struct rdma_cm_event {
    pub id: *mut rdma_cm_id,
    pub listen_id: *mut rdma_cm_id,
    /// `enum rdma_cm_event_type`.
    pub event: u32,
    pub status: c_int,
    pub param: rdma_cm_event_param,
}

/// `struct rdma_addrinfo`.
#[repr(C)]
pub struct rdma_addrinfo {
    pub ai_flags: c_int,
    pub ai_family: c_int,
    pub ai_qp_type: c_int,
    pub ai_port_space: c_int,
    pub ai_src_len: socklen_t,
    pub ai_dst_len: socklen_t,
    pub ai_src_addr: *mut sockaddr,
    pub ai_dst_addr: *mut sockaddr,
    pub ai_src_canonname: *mut c_char,
    pub ai_dst_canonname: *mut c_char,
    pub ai_route_len: size_t,
    pub ai_route: *mut c_void,
    pub ai_connect_len: size_t,
    pub ai_connect: *mut c_void,
    pub ai_next: *mut rdma_addrinfo,
}

/// `struct ibv_ece` (`<infiniband/verbs.h>`; ECE options of a connection).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_ece {
    pub vendor_id: u32,
    pub options: u32,
    pub comp_mask: u32,
}

/// `struct rdma_cm_join_mc_attr_ex`.
#[repr(C)]
pub struct rdma_cm_join_mc_attr_ex {
    pub comp_mask: u32,
    pub join_flags: u32,
    pub addr: *mut sockaddr,
}

/// One size or offset to compare with C.
#[derive(Clone, Copy, Debug)]
pub struct Item {
    /// A C expression (`sizeof(struct x)` or `offsetof(struct x, y)`).
    pub c_expr: &'static str,
    /// Our value.
    pub value: usize,
}

macro_rules! items {
    ($($c:literal = $v:expr;)*) => {
        /// Every size and offset checked against the installed headers.
        pub const LAYOUT: &[Item] = &[$(Item { c_expr: $c, value: $v },)*];
    };
}

items! {
    "sizeof(struct rdma_ib_addr)" = size_of::<rdma_ib_addr>();
    "offsetof(struct rdma_ib_addr, dgid)" = offset_of!(rdma_ib_addr, dgid);
    "offsetof(struct rdma_ib_addr, pkey)" = offset_of!(rdma_ib_addr, pkey);
    "sizeof(struct rdma_addr)" = size_of::<rdma_addr>();
    "offsetof(struct rdma_addr, dst_addr)" = offset_of!(rdma_addr, dst);
    "offsetof(struct rdma_addr, addr.ibaddr)" = offset_of!(rdma_addr, ibaddr);
    "sizeof(struct ibv_sa_path_rec)" = size_of::<ibv_sa_path_rec>();
    "offsetof(struct ibv_sa_path_rec, sgid)" = offset_of!(ibv_sa_path_rec, sgid);
    "offsetof(struct ibv_sa_path_rec, dlid)" = offset_of!(ibv_sa_path_rec, dlid);
    "offsetof(struct ibv_sa_path_rec, slid)" = offset_of!(ibv_sa_path_rec, slid);
    "offsetof(struct ibv_sa_path_rec, raw_traffic)" = offset_of!(ibv_sa_path_rec, raw_traffic);
    "offsetof(struct ibv_sa_path_rec, flow_label)" = offset_of!(ibv_sa_path_rec, flow_label);
    "offsetof(struct ibv_sa_path_rec, hop_limit)" = offset_of!(ibv_sa_path_rec, hop_limit);
    "offsetof(struct ibv_sa_path_rec, traffic_class)" = offset_of!(ibv_sa_path_rec, traffic_class);
    "offsetof(struct ibv_sa_path_rec, reversible)" = offset_of!(ibv_sa_path_rec, reversible);
    "offsetof(struct ibv_sa_path_rec, numb_path)" = offset_of!(ibv_sa_path_rec, numb_path);
    "offsetof(struct ibv_sa_path_rec, pkey)" = offset_of!(ibv_sa_path_rec, pkey);
    "offsetof(struct ibv_sa_path_rec, sl)" = offset_of!(ibv_sa_path_rec, sl);
    "offsetof(struct ibv_sa_path_rec, mtu_selector)" = offset_of!(ibv_sa_path_rec, mtu_selector);
    "offsetof(struct ibv_sa_path_rec, mtu)" = offset_of!(ibv_sa_path_rec, mtu);
    "offsetof(struct ibv_sa_path_rec, rate_selector)" = offset_of!(ibv_sa_path_rec, rate_selector);
    "offsetof(struct ibv_sa_path_rec, rate)" = offset_of!(ibv_sa_path_rec, rate);
    "offsetof(struct ibv_sa_path_rec, packet_life_time_selector)" = offset_of!(ibv_sa_path_rec, packet_life_time_selector);
    "offsetof(struct ibv_sa_path_rec, packet_life_time)" = offset_of!(ibv_sa_path_rec, packet_life_time);
    "offsetof(struct ibv_sa_path_rec, preference)" = offset_of!(ibv_sa_path_rec, preference);
    "sizeof(struct rdma_route)" = size_of::<rdma_route>();
    "offsetof(struct rdma_route, path_rec)" = offset_of!(rdma_route, path_rec);
    "offsetof(struct rdma_route, num_paths)" = offset_of!(rdma_route, num_paths);
    "sizeof(struct rdma_event_channel)" = size_of::<rdma_event_channel>();
    "sizeof(struct rdma_cm_id)" = size_of::<rdma_cm_id>();
    "offsetof(struct rdma_cm_id, channel)" = offset_of!(rdma_cm_id, channel);
    "offsetof(struct rdma_cm_id, context)" = offset_of!(rdma_cm_id, context);
    "offsetof(struct rdma_cm_id, qp)" = offset_of!(rdma_cm_id, qp);
    "offsetof(struct rdma_cm_id, route)" = offset_of!(rdma_cm_id, route);
    "offsetof(struct rdma_cm_id, ps)" = offset_of!(rdma_cm_id, ps);
    "offsetof(struct rdma_cm_id, port_num)" = offset_of!(rdma_cm_id, port_num);
    "offsetof(struct rdma_cm_id, event)" = offset_of!(rdma_cm_id, event);
    "offsetof(struct rdma_cm_id, send_cq_channel)" = offset_of!(rdma_cm_id, send_cq_channel);
    "offsetof(struct rdma_cm_id, send_cq)" = offset_of!(rdma_cm_id, send_cq);
    "offsetof(struct rdma_cm_id, recv_cq_channel)" = offset_of!(rdma_cm_id, recv_cq_channel);
    "offsetof(struct rdma_cm_id, recv_cq)" = offset_of!(rdma_cm_id, recv_cq);
    "offsetof(struct rdma_cm_id, srq)" = offset_of!(rdma_cm_id, srq);
    "offsetof(struct rdma_cm_id, pd)" = offset_of!(rdma_cm_id, pd);
    "offsetof(struct rdma_cm_id, qp_type)" = offset_of!(rdma_cm_id, qp_type);
    "sizeof(struct rdma_conn_param)" = size_of::<rdma_conn_param>();
    "offsetof(struct rdma_conn_param, private_data_len)" = offset_of!(rdma_conn_param, private_data_len);
    "offsetof(struct rdma_conn_param, responder_resources)" = offset_of!(rdma_conn_param, responder_resources);
    "offsetof(struct rdma_conn_param, initiator_depth)" = offset_of!(rdma_conn_param, initiator_depth);
    "offsetof(struct rdma_conn_param, flow_control)" = offset_of!(rdma_conn_param, flow_control);
    "offsetof(struct rdma_conn_param, retry_count)" = offset_of!(rdma_conn_param, retry_count);
    "offsetof(struct rdma_conn_param, rnr_retry_count)" = offset_of!(rdma_conn_param, rnr_retry_count);
    "offsetof(struct rdma_conn_param, srq)" = offset_of!(rdma_conn_param, srq);
    "offsetof(struct rdma_conn_param, qp_num)" = offset_of!(rdma_conn_param, qp_num);
    "sizeof(struct rdma_ud_param)" = size_of::<rdma_ud_param>();
    "offsetof(struct rdma_ud_param, private_data_len)" = offset_of!(rdma_ud_param, private_data_len);
    "offsetof(struct rdma_ud_param, ah_attr)" = offset_of!(rdma_ud_param, ah_attr);
    "offsetof(struct rdma_ud_param, qp_num)" = offset_of!(rdma_ud_param, qp_num);
    "offsetof(struct rdma_ud_param, qkey)" = offset_of!(rdma_ud_param, qkey);
    "sizeof(struct rdma_cm_event)" = size_of::<rdma_cm_event>();
    "offsetof(struct rdma_cm_event, listen_id)" = offset_of!(rdma_cm_event, listen_id);
    "offsetof(struct rdma_cm_event, event)" = offset_of!(rdma_cm_event, event);
    "offsetof(struct rdma_cm_event, status)" = offset_of!(rdma_cm_event, status);
    "offsetof(struct rdma_cm_event, param)" = offset_of!(rdma_cm_event, param);
    "sizeof(struct rdma_addrinfo)" = size_of::<rdma_addrinfo>();
    "offsetof(struct rdma_addrinfo, ai_family)" = offset_of!(rdma_addrinfo, ai_family);
    "offsetof(struct rdma_addrinfo, ai_qp_type)" = offset_of!(rdma_addrinfo, ai_qp_type);
    "offsetof(struct rdma_addrinfo, ai_port_space)" = offset_of!(rdma_addrinfo, ai_port_space);
    "offsetof(struct rdma_addrinfo, ai_src_len)" = offset_of!(rdma_addrinfo, ai_src_len);
    "offsetof(struct rdma_addrinfo, ai_dst_len)" = offset_of!(rdma_addrinfo, ai_dst_len);
    "offsetof(struct rdma_addrinfo, ai_src_addr)" = offset_of!(rdma_addrinfo, ai_src_addr);
    "offsetof(struct rdma_addrinfo, ai_dst_addr)" = offset_of!(rdma_addrinfo, ai_dst_addr);
    "offsetof(struct rdma_addrinfo, ai_src_canonname)" = offset_of!(rdma_addrinfo, ai_src_canonname);
    "offsetof(struct rdma_addrinfo, ai_dst_canonname)" = offset_of!(rdma_addrinfo, ai_dst_canonname);
    "offsetof(struct rdma_addrinfo, ai_route_len)" = offset_of!(rdma_addrinfo, ai_route_len);
    "offsetof(struct rdma_addrinfo, ai_route)" = offset_of!(rdma_addrinfo, ai_route);
    "offsetof(struct rdma_addrinfo, ai_connect_len)" = offset_of!(rdma_addrinfo, ai_connect_len);
    "offsetof(struct rdma_addrinfo, ai_connect)" = offset_of!(rdma_addrinfo, ai_connect);
    "offsetof(struct rdma_addrinfo, ai_next)" = offset_of!(rdma_addrinfo, ai_next);
    "sizeof(struct ibv_ece)" = size_of::<ibv_ece>();
    "offsetof(struct ibv_ece, comp_mask)" = offset_of!(ibv_ece, comp_mask);
    "sizeof(struct rdma_cm_join_mc_attr_ex)" = size_of::<rdma_cm_join_mc_attr_ex>();
    "offsetof(struct rdma_cm_join_mc_attr_ex, addr)" = offset_of!(rdma_cm_join_mc_attr_ex, addr);
}
