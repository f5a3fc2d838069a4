//! Binds every exported libibverbs function to the version node rdma-core
//! 44 gives it (`nm -D --with-symbol-versions` of Debian's libibverbs.so.1;
//! `tests/symbols.rs` compares the sets). build.rs declares the nodes;
//! binaries are linked against `name@VERSION`, so a symbol without its
//! version does not resolve. The IBVERBS_1.0 compatibility versions are
//! bound in `compat`, the libmlx5 / libefa entry points in `providers`.

use rdmakit_ibverbs_abi::versioned;

versioned! {
    "IBVERBS_1.0": [
        ibv_create_comp_channel, ibv_destroy_comp_channel, ibv_read_sysfs_file,
        ibv_get_sysfs_path, ibv_copy_qp_attr_from_kern, ibv_copy_path_rec_from_kern,
        ibv_copy_path_rec_to_kern, ibv_rate_to_mult, mult_to_ibv_rate,
    ]
    "IBVERBS_1.1": [
        ibv_get_device_list, ibv_free_device_list, ibv_get_device_name, ibv_get_device_guid,
        ibv_open_device, ibv_close_device, ibv_query_device, ibv_query_port, ibv_query_gid,
        ibv_query_pkey, ibv_alloc_pd, ibv_dealloc_pd, ibv_reg_mr, ibv_dereg_mr,
        ibv_create_cq, ibv_destroy_cq, ibv_resize_cq, ibv_get_cq_event, ibv_ack_cq_events,
        ibv_create_qp, ibv_modify_qp, ibv_query_qp, ibv_destroy_qp, ibv_create_srq,
        ibv_modify_srq, ibv_query_srq, ibv_destroy_srq, ibv_create_ah, ibv_destroy_ah,
        ibv_create_ah_from_wc, ibv_init_ah_from_wc, ibv_attach_mcast, ibv_detach_mcast,
        ibv_get_async_event, ibv_ack_async_event, ibv_fork_init, ibv_dontfork_range,
        ibv_dofork_range, ibv_node_type_str, ibv_port_state_str, ibv_event_type_str,
        ibv_wc_status_str, ibv_rate_to_mbps, mbps_to_ibv_rate, ibv_copy_ah_attr_from_kern,
        ibv_rereg_mr, ibv_resolve_eth_l2_from_gid,
    ]
    "IBVERBS_1.5": [ibv_get_pkey_index]
    "IBVERBS_1.6": [ibv_qp_to_qp_ex]
    "IBVERBS_1.7": [ibv_reg_mr_iova]
    "IBVERBS_1.8": [ibv_reg_mr_iova2]
    "IBVERBS_1.9": [ibv_get_device_index]
    "IBVERBS_1.10": [
        ibv_query_ece, ibv_set_ece, ibv_import_device, ibv_import_pd, ibv_import_mr,
        ibv_unimport_pd, ibv_unimport_mr,
    ]
    "IBVERBS_1.11": [_ibv_query_gid_ex, _ibv_query_gid_table]
    "IBVERBS_1.12": [ibv_reg_dmabuf_mr]
    "IBVERBS_1.13": [ibv_is_fork_initialized, ibv_import_dm, ibv_unimport_dm]
    "IBVERBS_1.14": [ibv_query_qp_data_in_order]
    "IBVERBS_PRIVATE_34": [ibv_query_gid_type]
    // rdmakit's own librdmacm.so.1 only (src/rdmakit.rs): not rdma-core's.
    "RDMAKIT_PRIVATE_1": [rdmakit_dev_info, rdmakit_gsi_open, rdmakit_gsi_recv, rdmakit_gsi_send]
}
