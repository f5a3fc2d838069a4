//! Binds every exported function to the version node rdma-core 44 gives
//! it (`objdump -T` of Debian's libibverbs.so.1, libmlx5.so.1, libefa.so.1).
//! build.rs declares the nodes; binaries are linked BIND_NOW against
//! `name@VERSION`, so a symbol without its version does not resolve.

macro_rules! versioned {
    ($($ver:literal: [$($sym:ident),* $(,)?])*) => {
        $($(
            std::arch::global_asm!(concat!(
                ".symver ", stringify!($sym), ", ", stringify!($sym), "@@", $ver
            ));
        )*)*
    };
}

versioned! {
    "IBVERBS_1.0": [
        ibv_create_comp_channel, ibv_destroy_comp_channel, ibv_read_sysfs_file,
        ibv_get_sysfs_path, ibv_copy_qp_attr_from_kern, ibv_copy_path_rec_from_kern,
        ibv_copy_path_rec_to_kern, ibv_rate_to_mult,
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
        ibv_wc_status_str, ibv_rate_to_mbps, ibv_copy_ah_attr_from_kern,
    ]
    "IBVERBS_1.5": [ibv_get_pkey_index]
    "IBVERBS_1.6": [ibv_qp_to_qp_ex]
    "IBVERBS_1.7": [ibv_reg_mr_iova]
    "IBVERBS_1.8": [ibv_reg_mr_iova2]
    "IBVERBS_1.9": [ibv_get_device_index]
    "IBVERBS_1.10": [ibv_query_ece, ibv_set_ece]
    "IBVERBS_1.11": [_ibv_query_gid_ex]
    "IBVERBS_1.13": [ibv_is_fork_initialized]
    "IBVERBS_PRIVATE_34": [ibv_query_gid_type]
    "MLX5_1.3": [mlx5dv_create_qp]
    "MLX5_1.7": [mlx5dv_open_device, mlx5dv_devx_general_cmd]
    "MLX5_1.10": [mlx5dv_qp_ex_from_ibv_qp_ex, mlx5dv_create_mkey, mlx5dv_destroy_mkey]
    "MLX5_1.21": [mlx5dv_dek_create, mlx5dv_dek_destroy, mlx5dv_crypto_login]
    "EFA_1.1": [efadv_query_device, efadv_create_qp_ex]
}
