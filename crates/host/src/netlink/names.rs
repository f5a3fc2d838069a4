//! The names `rdma` (iproute2) prints for NLDEV enumerations, so output can be
//! compared with `rdma -j`. Values outside a table print as "UNKNOWN".

fn pick(table: &[&'static str], i: usize) -> &'static str {
    table.get(i).copied().unwrap_or("UNKNOWN")
}

/// DEV_NODE_TYPE ("ca" for 1).
pub fn node_type(v: u8) -> &'static str {
    const T: &[&str] = &[
        "unknown",
        "ca",
        "switch",
        "router",
        "rnic",
        "usnic",
        "usnic_udp",
        "unspecified",
    ];
    pick(T, v.into())
}

/// PORT_STATE ("ACTIVE" for 4).
pub fn port_state(v: u8) -> &'static str {
    const T: &[&str] = &["NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"];
    pick(T, v.into())
}

/// PORT_PHYS_STATE ("LINK_UP" for 5).
pub fn phys_state(v: u8) -> &'static str {
    const T: &[&str] = &[
        "NOP",
        "SLEEP",
        "POLLING",
        "DISABLED",
        "ARMED",
        "LINK_UP",
        "LINK_ERROR_RECOVER",
        "PHY_TEST",
        "UNKNOWN",
        "OPA_OFFLINE",
        "UNKNOWN",
        "OPA_TEST",
    ];
    pick(T, v.into())
}

/// RES_TYPE of a QP or CM ID ("RC" for 2).
pub fn qp_type(v: u8) -> &'static str {
    const T: &[&str] = &[
        "SMI",
        "GSI",
        "RC",
        "UC",
        "UD",
        "RAW_IPV6",
        "RAW_ETHERTYPE",
        "UNKNOWN",
        "RAW_PACKET",
        "XRC_INI",
        "XRC_TGT",
    ];
    pick(T, v.into())
}

/// RES_STATE of a QP ("RTS" for 3).
pub fn qp_state(v: u8) -> &'static str {
    const T: &[&str] = &["RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"];
    pick(T, v.into())
}

/// RES_PATH_MIG_STATE ("MIGRATED" for 0).
pub fn path_mig_state(v: u8) -> &'static str {
    const T: &[&str] = &["MIGRATED", "REARM", "ARMED"];
    pick(T, v.into())
}

/// RES_POLL_CTX of a CQ ("WORKQUEUE" for 2).
pub fn poll_ctx(v: u8) -> &'static str {
    const T: &[&str] = &["DIRECT", "SOFTIRQ", "WORKQUEUE", "UNBOUND_WORKQUEUE"];
    pick(T, v.into())
}

/// RES_STATE of a CM ID ("LISTEN" for 8).
pub fn cm_id_state(v: u8) -> &'static str {
    const T: &[&str] = &[
        "IDLE",
        "ADDR_QUERY",
        "ADDR_RESOLVED",
        "ROUTE_QUERY",
        "ROUTE_RESOLVED",
        "CONNECT",
        "DISCONNECT",
        "ADDR_BOUND",
        "LISTEN",
        "DEVICE_REMOVAL",
        "DESTROYING",
    ];
    pick(T, v.into())
}

/// RES_PS, the RDMA CM port space.
pub fn port_space(v: u32) -> &'static str {
    match v {
        0x0002 | 0x013f => "IPoIB",
        0x0106 => "TCP",
        0x0111 => "UDP",
        _ => "---",
    }
}

/// RES_TYPE of an SRQ.
pub fn srq_type(v: u8) -> &'static str {
    pick(&["BASIC", "XRC", "TM"], v.into())
}

/// EVENT_TYPE of a monitor event.
pub fn event(v: u32) -> &'static str {
    const T: &[&str] = &[
        "REGISTER",
        "UNREGISTER",
        "NETDEV_ATTACH",
        "NETDEV_DETACH",
        "RENAME",
        "NETDEV_RENAME",
    ];
    pick(T, v as usize)
}

/// A GUID as `rdma` and sysfs print it: "5054:00ff:fe12:3456".
pub fn guid(v: u64) -> String {
    format!(
        "{:04x}:{:04x}:{:04x}:{:04x}",
        (v >> 48) & 0xffff,
        (v >> 32) & 0xffff,
        (v >> 16) & 0xffff,
        v & 0xffff
    )
}
