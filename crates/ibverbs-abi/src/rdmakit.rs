//! What rdmakit's two C libraries share beyond libibverbs' ABI: the private
//! `rdmakit_dev_info` struct its libibverbs.so.1 (crates/ibverbs-shim) fills
//! for its librdmacm.so.1 (crates/rdmacm-shim), and the macro both use to
//! bind their exports to their version nodes.

use libc::c_char;

/// What librdmacm needs to know of a context's device
/// (`struct rdmakit_dev_info`; version 1).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct RdmakitDevInfo {
    /// Size of this struct as the caller knows it.
    pub size: u32,
    /// The device's IPv4 address, network order.
    pub ipv4: u32,
    /// Its RoCEv2 GID.
    pub gid: [u8; 16],
    /// GID table index of `gid`.
    pub gid_index: u32,
    /// Node GUID (host order).
    pub node_guid: u64,
    /// Active path MTU in bytes.
    pub active_mtu: u32,
    /// `local_ca_ack_delay`.
    pub ack_delay: u32,
    /// Device limits librdmacm adopts.
    pub max_qp_rd_atom: u32,
    /// See `max_qp_rd_atom`.
    pub max_qp_init_rd_atom: u32,
    /// See `max_qp_rd_atom`.
    pub max_qp_wr: u32,
    /// NUL-terminated directory shared by every process using this device
    /// name (the rdma_cm port table lives there).
    pub shared_dir: [c_char; 256],
    /// Where this context's QP1 is reached (IPv4, network order): the
    /// device's address, or on a loopback device — whose contexts share
    /// 127.0.0.1 and are told apart by QPN, which QP1 lacks — the
    /// context's private endpoint 127.77.s.t.
    pub endpoint_ipv4: u32,
}

impl RdmakitDevInfo {
    /// All zero but `size`, ready to be filled.
    pub fn zeroed() -> RdmakitDevInfo {
        RdmakitDevInfo {
            size: core::mem::size_of::<RdmakitDevInfo>() as u32,
            ipv4: 0,
            gid: [0; 16],
            gid_index: 0,
            node_guid: 0,
            active_mtu: 0,
            ack_delay: 0,
            max_qp_rd_atom: 0,
            max_qp_init_rd_atom: 0,
            max_qp_wr: 0,
            shared_dir: [0; 256],
            endpoint_ipv4: 0,
        }
    }

    /// The device's IPv4 address.
    pub fn addr(&self) -> std::net::Ipv4Addr {
        std::net::Ipv4Addr::from(u32::from_be(self.ipv4))
    }

    /// Where the context's QP1 is reached (the device address from a
    /// libibverbs that does not say).
    pub fn endpoint(&self) -> std::net::Ipv4Addr {
        match u32::from_be(self.endpoint_ipv4) {
            0 => self.addr(),
            a => std::net::Ipv4Addr::from(a),
        }
    }

    /// `shared_dir` as a path.
    pub fn shared_dir(&self) -> std::path::PathBuf {
        let bytes: Vec<u8> = self
            .shared_dir
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        std::path::PathBuf::from(String::from_utf8_lossy(&bytes).into_owned())
    }
}

/// Binds each exported function to its default version node
/// (`.symver sym, sym@@VERSION`): `versioned! { "NODE_1.0": [a, b] }`.
/// The nodes themselves are declared by the library's build.rs.
#[macro_export]
macro_rules! versioned {
    ($($ver:literal: [$($sym:ident),* $(,)?])*) => {
        $($(
            ::core::arch::global_asm!(concat!(
                ".symver ", stringify!($sym), ", ", stringify!($sym), "@@", $ver
            ));
        )*)*
    };
}
