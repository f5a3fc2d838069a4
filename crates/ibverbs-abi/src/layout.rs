//! Every type's size and every field's offset, named as C names them, so a
//! test can compare them with `sizeof` / `offsetof` compiled against the
//! installed `<infiniband/verbs.h>` (tests/layout.rs).

use core::mem::{offset_of, size_of};

use crate::types::*;

/// One field: the C struct, the C member designator (`wr.rdma.rkey`), and
/// the offset our type gives it.
#[derive(Clone, Copy, Debug)]
pub struct Field {
    /// `struct` name in C.
    pub c_struct: &'static str,
    /// Member designator as `offsetof` takes it.
    pub c_member: &'static str,
    /// Our offset.
    pub offset: usize,
}

/// One type: its C name and our size.
#[derive(Clone, Copy, Debug)]
pub struct Size {
    /// `struct` / `union` name in C, with the keyword.
    pub c_type: &'static str,
    /// Our size.
    pub size: usize,
}

macro_rules! fields {
    ($($t:ident { $($f:ident $(= $c:literal)?),* $(,)? })*) => {
        /// Every field checked against the C header.
        pub const FIELDS: &[Field] = &[
            $($(Field {
                c_struct: stringify!($t),
                c_member: fields!(@name $f $($c)?),
                offset: offset_of!($t, $f),
            },)*)*
        ];
    };
    (@name $f:ident) => { stringify!($f) };
    (@name $f:ident $c:literal) => { $c };
}

fields! {
    ibv_gid_entry { gid, gid_index, port_num, gid_type, ndev_ifindex }
    ibv_device_attr {
        fw_ver, node_guid, sys_image_guid, max_mr_size, page_size_cap, vendor_id,
        vendor_part_id, hw_ver, max_qp, max_qp_wr, device_cap_flags, max_sge, max_sge_rd,
        max_cq, max_cqe, max_mr, max_pd, max_qp_rd_atom, max_ee_rd_atom, max_res_rd_atom,
        max_qp_init_rd_atom, max_ee_init_rd_atom, atomic_cap, max_ee, max_rdd, max_mw,
        max_raw_ipv6_qp, max_raw_ethy_qp, max_mcast_grp, max_mcast_qp_attach,
        max_total_mcast_qp_attach, max_ah, max_fmr, max_map_per_fmr, max_srq, max_srq_wr,
        max_srq_sge, max_pkeys, local_ca_ack_delay, phys_port_cnt
    }
    ibv_odp_caps {
        general_caps, rc_odp_caps = "per_transport_caps.rc_odp_caps",
        uc_odp_caps = "per_transport_caps.uc_odp_caps",
        ud_odp_caps = "per_transport_caps.ud_odp_caps"
    }
    ibv_rss_caps {
        supported_qpts, max_rwq_indirection_tables, max_rwq_indirection_table_size,
        rx_hash_fields_mask, rx_hash_function
    }
    ibv_tm_caps { max_rndv_hdr_size, max_num_tags, flags, max_ops, max_sge }
    ibv_pci_atomic_caps { fetch_add, swap, compare_swap }
    ibv_device_attr_ex {
        orig_attr, comp_mask, odp_caps, completion_timestamp_mask, hca_core_clock,
        device_cap_flags_ex, tso_caps, rss_caps, max_wq_type_rq, packet_pacing_caps,
        raw_packet_caps, tm_caps, cq_mod_caps, max_dm_size, pci_atomic_caps, xrc_odp_caps,
        phys_port_cnt_ex
    }
    ibv_port_attr {
        state, max_mtu, active_mtu, gid_tbl_len, port_cap_flags, max_msg_sz, bad_pkey_cntr,
        qkey_viol_cntr, pkey_tbl_len, lid, sm_lid, lmc, max_vl_num, sm_sl, subnet_timeout,
        init_type_reply, active_width, active_speed, phys_state, link_layer, flags,
        port_cap_flags2
    }
    ibv_async_event { element, event_type }
    ibv_wc {
        wr_id, status, opcode, vendor_err, byte_len, imm_data, qp_num, src_qp, wc_flags,
        pkey_index, slid, sl, dlid_path_bits
    }
    ibv_mw_bind_info { mr, addr, length, mw_access_flags }
    ibv_pd { context, handle }
    ibv_mr { context, pd, addr, length, handle, lkey, rkey }
    ibv_mw { context, pd, rkey, handle, type_ = "type" }
    ibv_mw_bind { wr_id, send_flags, bind_info }
    ibv_global_route { dgid, flow_label, sgid_index, hop_limit, traffic_class }
    ibv_grh { version_tclass_flow, paylen, next_hdr, hop_limit, sgid, dgid }
    ibv_ah_attr { grh, dlid, sl, src_path_bits, static_rate, is_global, port_num }
    ibv_srq_attr { max_wr, max_sge, srq_limit }
    ibv_srq_init_attr { srq_context, attr }
    ibv_srq_init_attr_ex {
        srq_context, attr, comp_mask, srq_type, pd, xrcd, cq, tm_cap
    }
    ibv_qp_cap { max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline_data }
    ibv_qp_init_attr { qp_context, send_cq, recv_cq, srq, cap, qp_type, sq_sig_all }
    ibv_rx_hash_conf { rx_hash_function, rx_hash_key_len, rx_hash_key, rx_hash_fields_mask }
    ibv_qp_init_attr_ex {
        qp_context, send_cq, recv_cq, srq, cap, qp_type, sq_sig_all, comp_mask, pd, xrcd,
        create_flags, max_tso_header, rwq_ind_tbl, rx_hash_conf, source_qpn, send_ops_flags
    }
    ibv_qp_attr {
        qp_state, cur_qp_state, path_mtu, path_mig_state, qkey, rq_psn, sq_psn, dest_qp_num,
        qp_access_flags, cap, ah_attr, alt_ah_attr, pkey_index, alt_pkey_index,
        en_sqd_async_notify, sq_draining, max_rd_atomic, max_dest_rd_atomic, min_rnr_timer,
        port_num, timeout, retry_cnt, rnr_retry, alt_port_num, alt_timeout, rate_limit
    }
    ibv_data_buf { addr, length }
    ibv_sge { addr, length, lkey }
    ibv_send_wr {
        wr_id, next, sg_list, num_sge, opcode, send_flags, imm_data, wr,
        remote_srqn = "qp_type.xrc.remote_srqn", ext = "bind_mw"
    }
    ibv_recv_wr { wr_id, next, sg_list, num_sge }
    ibv_srq { context, srq_context, pd, handle, mutex, cond, events_completed }
    ibv_qp {
        context, qp_context, pd, send_cq, recv_cq, srq, handle, qp_num, state, qp_type,
        mutex, cond, events_completed
    }
    ibv_qp_ex {
        qp_base, comp_mask, wr_id, wr_flags, wr_atomic_cmp_swp, wr_atomic_fetch_add,
        wr_bind_mw, wr_local_inv, wr_rdma_read, wr_rdma_write, wr_rdma_write_imm, wr_send,
        wr_send_imm, wr_send_inv, wr_send_tso, wr_set_ud_addr, wr_set_xrc_srqn,
        wr_set_inline_data, wr_set_inline_data_list, wr_set_sge, wr_set_sge_list, wr_start,
        wr_complete, wr_abort, wr_atomic_write
    }
    ibv_comp_channel { context, fd, refcnt }
    ibv_cq {
        context, channel, cq_context, handle, cqe, mutex, cond, comp_events_completed,
        async_events_completed
    }
    ibv_wc_tm_info { tag, priv_ = "priv" }
    ibv_cq_ex {
        context, channel, cq_context, handle, cqe, mutex, cond, comp_events_completed,
        async_events_completed, comp_mask, status, wr_id, start_poll, next_poll, end_poll,
        read_opcode, read_vendor_err, read_byte_len, read_imm_data, read_qp_num, read_src_qp,
        read_wc_flags, read_slid, read_sl, read_dlid_path_bits, read_completion_ts,
        read_cvlan, read_flow_tag, read_tm_info, read_completion_wallclock_ns
    }
    ibv_cq_init_attr_ex {
        cqe, cq_context, channel, comp_vector, wc_flags, comp_mask, flags, parent_domain
    }
    ibv_ah { context, pd, handle }
    ibv_device { _ops, node_type, transport_type, name, dev_name, dev_path, ibdev_path }
    ibv_context_ops {
        _compat_query_device, _compat_query_port, _compat_alloc_pd, _compat_dealloc_pd,
        _compat_reg_mr, _compat_rereg_mr, _compat_dereg_mr, alloc_mw, bind_mw, dealloc_mw,
        _compat_create_cq, poll_cq, req_notify_cq, _compat_cq_event, _compat_resize_cq,
        _compat_destroy_cq, _compat_create_srq, _compat_modify_srq, _compat_query_srq,
        _compat_destroy_srq, post_srq_recv, _compat_create_qp, _compat_query_qp,
        _compat_modify_qp, _compat_destroy_qp, post_send, post_recv, _compat_create_ah,
        _compat_destroy_ah, _compat_attach_mcast, _compat_detach_mcast, _compat_async_event
    }
    ibv_context { device, ops, cmd_fd, async_fd, num_comp_vectors, mutex, abi_compat }
    ibv_values_ex { comp_mask, raw_clock }
    verbs_context {
        query_port, advise_mr, alloc_null_mr, read_counters, attach_counters_point_flow,
        create_counters, destroy_counters, reg_dm_mr, alloc_dm, free_dm,
        modify_flow_action_esp, destroy_flow_action, create_flow_action_esp,
        modify_qp_rate_limit, alloc_parent_domain, dealloc_td, alloc_td, modify_cq,
        post_srq_ops, destroy_rwq_ind_table, create_rwq_ind_table, destroy_wq, modify_wq,
        create_wq, query_rt_values, create_cq_ex, priv_ = "priv", query_device_ex,
        ibv_destroy_flow, abi_placeholder2 = "ABI_placeholder2", ibv_create_flow,
        abi_placeholder1 = "ABI_placeholder1", open_qp, create_qp_ex, get_srq_num,
        create_srq_ex, open_xrcd, close_xrcd, _abi_placeholder3 = "_ABI_placeholder3", sz,
        context
    }
}

/// The members inside [`ibv_send_wr`]'s `wr` union, relative to `wr`.
pub const SEND_WR_UNION: &[(&str, usize)] = &[
    (
        "wr.rdma.remote_addr",
        offset_of!(ibv_send_wr_rdma, remote_addr),
    ),
    ("wr.rdma.rkey", offset_of!(ibv_send_wr_rdma, rkey)),
    (
        "wr.atomic.remote_addr",
        offset_of!(ibv_send_wr_atomic, remote_addr),
    ),
    (
        "wr.atomic.compare_add",
        offset_of!(ibv_send_wr_atomic, compare_add),
    ),
    ("wr.atomic.swap", offset_of!(ibv_send_wr_atomic, swap)),
    ("wr.atomic.rkey", offset_of!(ibv_send_wr_atomic, rkey)),
    ("wr.ud.ah", offset_of!(ibv_send_wr_ud, ah)),
    ("wr.ud.remote_qpn", offset_of!(ibv_send_wr_ud, remote_qpn)),
    ("wr.ud.remote_qkey", offset_of!(ibv_send_wr_ud, remote_qkey)),
];

macro_rules! sizes {
    ($($t:ident = $c:literal),* $(,)?) => {
        /// Every type whose size is checked against the C header.
        pub const SIZES: &[Size] = &[$(Size { c_type: $c, size: size_of::<$t>() },)*];
    };
}

sizes! {
    ibv_gid = "union ibv_gid",
    ibv_gid_entry = "struct ibv_gid_entry",
    ibv_device_attr = "struct ibv_device_attr",
    ibv_query_device_ex_input = "struct ibv_query_device_ex_input",
    ibv_odp_caps = "struct ibv_odp_caps",
    ibv_tso_caps = "struct ibv_tso_caps",
    ibv_rss_caps = "struct ibv_rss_caps",
    ibv_packet_pacing_caps = "struct ibv_packet_pacing_caps",
    ibv_tm_caps = "struct ibv_tm_caps",
    ibv_cq_moderation_caps = "struct ibv_cq_moderation_caps",
    ibv_pci_atomic_caps = "struct ibv_pci_atomic_caps",
    ibv_device_attr_ex = "struct ibv_device_attr_ex",
    ibv_port_attr = "struct ibv_port_attr",
    ibv_async_event = "struct ibv_async_event",
    ibv_wc = "struct ibv_wc",
    ibv_mw_bind_info = "struct ibv_mw_bind_info",
    ibv_pd = "struct ibv_pd",
    ibv_mr = "struct ibv_mr",
    ibv_mw = "struct ibv_mw",
    ibv_mw_bind = "struct ibv_mw_bind",
    ibv_global_route = "struct ibv_global_route",
    ibv_grh = "struct ibv_grh",
    ibv_ah_attr = "struct ibv_ah_attr",
    ibv_srq_attr = "struct ibv_srq_attr",
    ibv_srq_init_attr = "struct ibv_srq_init_attr",
    ibv_tm_cap = "struct ibv_tm_cap",
    ibv_srq_init_attr_ex = "struct ibv_srq_init_attr_ex",
    ibv_qp_cap = "struct ibv_qp_cap",
    ibv_qp_init_attr = "struct ibv_qp_init_attr",
    ibv_rx_hash_conf = "struct ibv_rx_hash_conf",
    ibv_qp_init_attr_ex = "struct ibv_qp_init_attr_ex",
    ibv_qp_attr = "struct ibv_qp_attr",
    ibv_data_buf = "struct ibv_data_buf",
    ibv_sge = "struct ibv_sge",
    ibv_send_wr = "struct ibv_send_wr",
    ibv_recv_wr = "struct ibv_recv_wr",
    ibv_srq = "struct ibv_srq",
    ibv_qp = "struct ibv_qp",
    ibv_qp_ex = "struct ibv_qp_ex",
    ibv_comp_channel = "struct ibv_comp_channel",
    ibv_cq = "struct ibv_cq",
    ibv_poll_cq_attr = "struct ibv_poll_cq_attr",
    ibv_wc_tm_info = "struct ibv_wc_tm_info",
    ibv_cq_ex = "struct ibv_cq_ex",
    ibv_cq_init_attr_ex = "struct ibv_cq_init_attr_ex",
    ibv_ah = "struct ibv_ah",
    _ibv_device_ops = "struct _ibv_device_ops",
    ibv_device = "struct ibv_device",
    ibv_context_ops = "struct ibv_context_ops",
    ibv_context = "struct ibv_context",
    ibv_values_ex = "struct ibv_values_ex",
    verbs_context = "struct verbs_context",
}
