//! The provider libraries' entry points: every function of rdma-core 44's
//! `libmlx5.so.1` (version nodes MLX5_1.0 … MLX5_1.24) and `libefa.so.1`
//! (EFA_1.0 … EFA_1.2), answered the way those libraries answer for a
//! device that is not theirs.
//!
//! Programs link these names directly (perftest, UCX, libfabric, Open MPI,
//! pyverbs), and a missing one stops the program at load time (`undefined
//! symbol: efadv_create_cq, version EFA_1.2`) even when it never uses that
//! provider. `rdmakit shim install` makes `libmlx5.so.1` and `libefa.so.1`
//! links to this library, so the loader finds them here. The soft NIC is
//! neither an mlx5 nor an EFA device: `mlx5dv_is_supported` is false,
//! queries return `EOPNOTSUPP`, constructors return NULL with errno
//! `EOPNOTSUPP`, destructors of objects that cannot exist do nothing. The
//! first call of each constructor prints one line on stderr saying so
//! (queries only with `RDMAKIT_SHIM_DEBUG`: they are how programs probe).
//!
//! The functions take no parameters here: they never read them, and in the
//! C calling conventions the caller owns its arguments, so any C prototype
//! may call them. Only the return type matters, and it follows the header
//! (mlx5dv.h / efadv.h of rdma-core 44): `int` → positive errno, pointer →
//! NULL + errno, `ssize_t` / file descriptor → -1 + errno, `bool` → false.

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

use libc::{c_int, c_void, ssize_t};

use crate::guard;

/// Says once per function that it is not available here. Queries are how
/// programs probe for a provider (libfabric asks `efadv_query_device` of
/// every device), so their answer is printed only with `RDMAKIT_SHIM_DEBUG`.
fn not_here(name: &'static str) {
    if name.contains("query") && !guard::debug_on() {
        return;
    }
    static SEEN: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let first = SEEN
        .get_or_init(|| Mutex::new(HashSet::new()))
        .lock()
        .map(|mut s| s.insert(name))
        .unwrap_or(false);
    if first {
        let family = if name.starts_with("efadv") {
            "EFA direct verbs"
        } else {
            "mlx5 direct verbs"
        };
        eprintln!(
            "rdmakit libibverbs: {name}: {family} are not available on the rdmakit software NIC \
             (not an mlx5 or EFA device; returned EOPNOTSUPP)"
        );
    }
}

macro_rules! stand_in {
    (int $name:ident) => {
        #[no_mangle]
        pub unsafe extern "C" fn $name() -> c_int {
            not_here(stringify!($name));
            libc::EOPNOTSUPP
        }
    };
    (ptr $name:ident) => {
        #[no_mangle]
        pub unsafe extern "C" fn $name() -> *mut c_void {
            not_here(stringify!($name));
            guard::set_errno(libc::EOPNOTSUPP);
            std::ptr::null_mut()
        }
    };
    (ssize $name:ident) => {
        #[no_mangle]
        pub unsafe extern "C" fn $name() -> ssize_t {
            not_here(stringify!($name));
            guard::set_errno(libc::EOPNOTSUPP);
            -1
        }
    };
    (fd $name:ident) => {
        #[no_mangle]
        pub unsafe extern "C" fn $name() -> c_int {
            not_here(stringify!($name));
            guard::set_errno(libc::EOPNOTSUPP);
            -1
        }
    };
    (void $name:ident) => {
        #[no_mangle]
        pub unsafe extern "C" fn $name() {}
    };
    // `mlx5dv_is_supported`: the question every mlx5-aware program asks
    // first (UCX, Open MPI, libfabric); "no" is the whole answer.
    (bool $name:ident) => {
        #[no_mangle]
        pub unsafe extern "C" fn $name() -> bool {
            false
        }
    };
}

macro_rules! stand_ins {
    ($($kind:ident $name:ident $node:literal;)*) => {
        $(
            stand_in!($kind $name);
            std::arch::global_asm!(concat!(
                ".symver ", stringify!($name), ", ", stringify!($name), "@@", $node
            ));
        )*
        /// Every stand-in and its version node (the symbol test's list).
        #[allow(dead_code)]
        pub(crate) const STAND_INS: &[(&str, &str)] = &[$((stringify!($name), $node)),*];
    };
}

stand_ins! {
    int mlx5dv_query_device "MLX5_1.0";
    ptr mlx5dv_create_cq "MLX5_1.1";
    int mlx5dv_init_obj "MLX5_1.2";
    int mlx5dv_set_context_attr "MLX5_1.2";
    ptr mlx5dv_create_qp "MLX5_1.3";
    ptr mlx5dv_create_wq "MLX5_1.3";
    int mlx5dv_get_clock_info "MLX5_1.4";
    ptr mlx5dv_create_flow_action_esp "MLX5_1.5";
    ptr mlx5dv_create_flow "MLX5_1.6";
    ptr mlx5dv_create_flow_matcher "MLX5_1.6";
    int mlx5dv_destroy_flow_matcher "MLX5_1.6";
    ptr mlx5dv_create_flow_action_modify_header "MLX5_1.7";
    ptr mlx5dv_create_flow_action_packet_reformat "MLX5_1.7";
    ptr mlx5dv_devx_alloc_uar "MLX5_1.7";
    void mlx5dv_devx_free_uar "MLX5_1.7";
    int mlx5dv_devx_general_cmd "MLX5_1.7";
    ptr mlx5dv_devx_obj_create "MLX5_1.7";
    int mlx5dv_devx_obj_destroy "MLX5_1.7";
    int mlx5dv_devx_obj_modify "MLX5_1.7";
    int mlx5dv_devx_obj_query "MLX5_1.7";
    int mlx5dv_devx_query_eqn "MLX5_1.7";
    int mlx5dv_devx_umem_dereg "MLX5_1.7";
    ptr mlx5dv_devx_umem_reg "MLX5_1.7";
    ptr mlx5dv_open_device "MLX5_1.7";
    int mlx5dv_devx_cq_modify "MLX5_1.8";
    int mlx5dv_devx_cq_query "MLX5_1.8";
    int mlx5dv_devx_ind_tbl_modify "MLX5_1.8";
    int mlx5dv_devx_ind_tbl_query "MLX5_1.8";
    int mlx5dv_devx_qp_modify "MLX5_1.8";
    int mlx5dv_devx_qp_query "MLX5_1.8";
    int mlx5dv_devx_srq_modify "MLX5_1.8";
    int mlx5dv_devx_srq_query "MLX5_1.8";
    int mlx5dv_devx_wq_modify "MLX5_1.8";
    int mlx5dv_devx_wq_query "MLX5_1.8";
    bool mlx5dv_is_supported "MLX5_1.8";
    ptr mlx5dv_devx_create_cmd_comp "MLX5_1.9";
    void mlx5dv_devx_destroy_cmd_comp "MLX5_1.9";
    int mlx5dv_devx_get_async_cmd_comp "MLX5_1.9";
    int mlx5dv_devx_obj_query_async "MLX5_1.9";
    ptr mlx5dv_alloc_dm "MLX5_1.10";
    ptr mlx5dv_create_mkey "MLX5_1.10";
    int mlx5dv_destroy_mkey "MLX5_1.10";
    ptr mlx5dv_dr_action_create_dest_ibv_qp "MLX5_1.10";
    ptr mlx5dv_dr_action_create_dest_table "MLX5_1.10";
    ptr mlx5dv_dr_action_create_dest_vport "MLX5_1.10";
    ptr mlx5dv_dr_action_create_drop "MLX5_1.10";
    ptr mlx5dv_dr_action_create_flow_counter "MLX5_1.10";
    ptr mlx5dv_dr_action_create_modify_header "MLX5_1.10";
    ptr mlx5dv_dr_action_create_packet_reformat "MLX5_1.10";
    ptr mlx5dv_dr_action_create_tag "MLX5_1.10";
    int mlx5dv_dr_action_destroy "MLX5_1.10";
    ptr mlx5dv_dr_domain_create "MLX5_1.10";
    int mlx5dv_dr_domain_destroy "MLX5_1.10";
    int mlx5dv_dr_domain_sync "MLX5_1.10";
    ptr mlx5dv_dr_matcher_create "MLX5_1.10";
    int mlx5dv_dr_matcher_destroy "MLX5_1.10";
    ptr mlx5dv_dr_rule_create "MLX5_1.10";
    int mlx5dv_dr_rule_destroy "MLX5_1.10";
    ptr mlx5dv_dr_table_create "MLX5_1.10";
    int mlx5dv_dr_table_destroy "MLX5_1.10";
    ptr mlx5dv_qp_ex_from_ibv_qp_ex "MLX5_1.10";
    ptr mlx5dv_devx_create_event_channel "MLX5_1.11";
    void mlx5dv_devx_destroy_event_channel "MLX5_1.11";
    ssize mlx5dv_devx_get_event "MLX5_1.11";
    int mlx5dv_devx_subscribe_devx_event "MLX5_1.11";
    int mlx5dv_devx_subscribe_devx_event_fd "MLX5_1.11";
    ptr mlx5dv_alloc_var "MLX5_1.12";
    ptr mlx5dv_dr_action_create_flow_meter "MLX5_1.12";
    int mlx5dv_dr_action_modify_flow_meter "MLX5_1.12";
    int mlx5dv_dump_dr_domain "MLX5_1.12";
    int mlx5dv_dump_dr_matcher "MLX5_1.12";
    int mlx5dv_dump_dr_rule "MLX5_1.12";
    int mlx5dv_dump_dr_table "MLX5_1.12";
    void mlx5dv_free_var "MLX5_1.12";
    ptr mlx5dv_pp_alloc "MLX5_1.13";
    void mlx5dv_pp_free "MLX5_1.13";
    ptr mlx5dv_dr_action_create_default_miss "MLX5_1.14";
    void mlx5dv_dr_domain_set_reclaim_device_memory "MLX5_1.14";
    int mlx5dv_modify_qp_lag_port "MLX5_1.14";
    int mlx5dv_query_qp_lag_port "MLX5_1.14";
    ptr mlx5dv_dr_action_create_dest_devx_tir "MLX5_1.15";
    ptr mlx5dv_dr_action_create_dest_array "MLX5_1.16";
    ptr mlx5dv_dr_action_create_flow_sampler "MLX5_1.16";
    ptr mlx5dv_dr_action_create_aso "MLX5_1.17";
    ptr mlx5dv_dr_action_create_pop_vlan "MLX5_1.17";
    ptr mlx5dv_dr_action_create_push_vlan "MLX5_1.17";
    int mlx5dv_dr_action_modify_aso "MLX5_1.17";
    int mlx5dv_modify_qp_sched_elem "MLX5_1.17";
    int mlx5dv_modify_qp_udp_sport "MLX5_1.17";
    ptr mlx5dv_sched_leaf_create "MLX5_1.17";
    int mlx5dv_sched_leaf_destroy "MLX5_1.17";
    int mlx5dv_sched_leaf_modify "MLX5_1.17";
    ptr mlx5dv_sched_node_create "MLX5_1.17";
    int mlx5dv_sched_node_destroy "MLX5_1.17";
    int mlx5dv_sched_node_modify "MLX5_1.17";
    int mlx5dv_reserved_qpn_alloc "MLX5_1.18";
    int mlx5dv_reserved_qpn_dealloc "MLX5_1.18";
    int _mlx5dv_query_port "MLX5_1.19";
    ptr mlx5dv_devx_umem_reg_ex "MLX5_1.19";
    ptr mlx5dv_dm_map_op_addr "MLX5_1.19";
    int _mlx5dv_mkey_check "MLX5_1.20";
    void mlx5dv_dr_domain_allow_duplicate_rules "MLX5_1.20";
    int mlx5dv_map_ah_to_qp "MLX5_1.20";
    int mlx5dv_qp_cancel_posted_send_wrs "MLX5_1.20";
    int mlx5dv_crypto_login "MLX5_1.21";
    int mlx5dv_crypto_login_query_state "MLX5_1.21";
    int mlx5dv_crypto_logout "MLX5_1.21";
    int mlx5dv_dci_stream_id_reset "MLX5_1.21";
    ptr mlx5dv_dek_create "MLX5_1.21";
    int mlx5dv_dek_destroy "MLX5_1.21";
    int mlx5dv_dek_query "MLX5_1.21";
    ptr mlx5dv_dr_action_create_dest_ib_port "MLX5_1.21";
    int mlx5dv_dr_matcher_set_layout "MLX5_1.21";
    ptr mlx5dv_get_vfio_device_list "MLX5_1.21";
    fd mlx5dv_vfio_get_events_fd "MLX5_1.21";
    int mlx5dv_vfio_process_events "MLX5_1.21";
    int mlx5dv_dr_aso_other_domain_link "MLX5_1.22";
    int mlx5dv_dr_aso_other_domain_unlink "MLX5_1.22";
    ptr mlx5dv_devx_alloc_msi_vector "MLX5_1.23";
    ptr mlx5dv_devx_create_eq "MLX5_1.23";
    int mlx5dv_devx_destroy_eq "MLX5_1.23";
    int mlx5dv_devx_free_msi_vector "MLX5_1.23";
    ptr mlx5dv_create_steering_anchor "MLX5_1.24";
    ptr mlx5dv_crypto_login_create "MLX5_1.24";
    int mlx5dv_crypto_login_destroy "MLX5_1.24";
    int mlx5dv_crypto_login_query "MLX5_1.24";
    int mlx5dv_destroy_steering_anchor "MLX5_1.24";
    ptr mlx5dv_dr_action_create_dest_root_table "MLX5_1.24";
    int efadv_query_device "EFA_1.1";
    int efadv_query_ah "EFA_1.1";
    ptr efadv_create_driver_qp "EFA_1.0";
    ptr efadv_create_qp_ex "EFA_1.1";
    ptr efadv_create_cq "EFA_1.2";
    ptr efadv_cq_from_ibv_cq_ex "EFA_1.2";
}

// `mlx5dv_init_obj` has two versions in libmlx5: the 1.0 one (older binaries)
// and the default 1.2 one above.
// A thunk, not a Rust item, so its own name stays local (see `compat`).
thunk!(
    "mlx5dv_init_obj_v1_0",
    "mlx5dv_init_obj@MLX5_1.0",
    mlx5dv_init_obj
);
