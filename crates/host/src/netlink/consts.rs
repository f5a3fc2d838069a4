//! NLDEV numbers (include/uapi/rdma/rdma_netlink.h, see shared/reference/rdma-netlink.md).

/// NETLINK_RDMA protocol number.
pub const NETLINK_RDMA: i32 = 20;
/// RDMA_NL_NLDEV client.
pub const RDMA_NL_NLDEV: u16 = 5;
/// Multicast group of monitor events.
pub const RDMA_NL_GROUP_NOTIFY: u32 = 4;

/// The message type of an NLDEV command.
pub const fn nldev(op: u16) -> u16 {
    (RDMA_NL_NLDEV << 10) + op
}

/// The NLDEV command of a message type, when the type belongs to NLDEV.
pub const fn nldev_op(kind: u16) -> Option<u16> {
    if kind >> 10 == RDMA_NL_NLDEV {
        Some(kind & 0x3ff)
    } else {
        None
    }
}

pub mod cmd {
    pub const GET: u16 = 1;
    pub const SET: u16 = 2;
    pub const NEWLINK: u16 = 3;
    pub const DELLINK: u16 = 4;
    pub const PORT_GET: u16 = 5;
    pub const SYS_GET: u16 = 6;
    pub const SYS_SET: u16 = 7;
    pub const RES_GET: u16 = 9;
    pub const RES_QP_GET: u16 = 10;
    pub const RES_CM_ID_GET: u16 = 11;
    pub const RES_CQ_GET: u16 = 12;
    pub const RES_MR_GET: u16 = 13;
    pub const RES_PD_GET: u16 = 14;
    pub const GET_CHARDEV: u16 = 15;
    pub const STAT_SET: u16 = 16;
    pub const STAT_GET: u16 = 17;
    pub const STAT_DEL: u16 = 18;
    pub const RES_CTX_GET: u16 = 22;
    pub const RES_SRQ_GET: u16 = 23;
    pub const STAT_GET_STATUS: u16 = 24;
    pub const MONITOR: u16 = 28;
}

pub mod attr {
    pub const DEV_INDEX: u16 = 1;
    pub const DEV_NAME: u16 = 2;
    pub const PORT_INDEX: u16 = 3;
    pub const CAP_FLAGS: u16 = 4;
    pub const FW_VERSION: u16 = 5;
    pub const NODE_GUID: u16 = 6;
    pub const SYS_IMAGE_GUID: u16 = 7;
    pub const SUBNET_PREFIX: u16 = 8;
    pub const LID: u16 = 9;
    pub const SM_LID: u16 = 10;
    pub const LMC: u16 = 11;
    pub const PORT_STATE: u16 = 12;
    pub const PORT_PHYS_STATE: u16 = 13;
    pub const DEV_NODE_TYPE: u16 = 14;
    pub const RES_SUMMARY: u16 = 15;
    pub const RES_SUMMARY_ENTRY: u16 = 16;
    pub const RES_SUMMARY_ENTRY_NAME: u16 = 17;
    pub const RES_SUMMARY_ENTRY_CURR: u16 = 18;
    pub const RES_QP: u16 = 19;
    pub const RES_QP_ENTRY: u16 = 20;
    pub const RES_LQPN: u16 = 21;
    pub const RES_RQPN: u16 = 22;
    pub const RES_RQ_PSN: u16 = 23;
    pub const RES_SQ_PSN: u16 = 24;
    pub const RES_PATH_MIG_STATE: u16 = 25;
    pub const RES_TYPE: u16 = 26;
    pub const RES_STATE: u16 = 27;
    pub const RES_PID: u16 = 28;
    pub const RES_KERN_NAME: u16 = 29;
    pub const RES_CM_ID: u16 = 30;
    pub const RES_CM_ID_ENTRY: u16 = 31;
    pub const RES_PS: u16 = 32;
    pub const RES_SRC_ADDR: u16 = 33;
    pub const RES_DST_ADDR: u16 = 34;
    pub const RES_CQ: u16 = 35;
    pub const RES_CQ_ENTRY: u16 = 36;
    pub const RES_CQE: u16 = 37;
    pub const RES_USECNT: u16 = 38;
    pub const RES_POLL_CTX: u16 = 39;
    pub const RES_MR: u16 = 40;
    pub const RES_MR_ENTRY: u16 = 41;
    pub const RES_RKEY: u16 = 42;
    pub const RES_LKEY: u16 = 43;
    pub const RES_IOVA: u16 = 44;
    pub const RES_MRLEN: u16 = 45;
    pub const RES_PD: u16 = 46;
    pub const RES_PD_ENTRY: u16 = 47;
    pub const RES_LOCAL_DMA_LKEY: u16 = 48;
    pub const RES_UNSAFE_GLOBAL_RKEY: u16 = 49;
    pub const NDEV_INDEX: u16 = 50;
    pub const NDEV_NAME: u16 = 51;
    pub const DRIVER: u16 = 52;
    pub const RES_PDN: u16 = 60;
    pub const RES_CQN: u16 = 61;
    pub const RES_MRN: u16 = 62;
    pub const RES_CM_IDN: u16 = 63;
    pub const RES_CTXN: u16 = 64;
    pub const SYS_ATTR_NETNS_MODE: u16 = 66;
    pub const DEV_PROTOCOL: u16 = 67;
    pub const CHARDEV_TYPE: u16 = 69;
    pub const CHARDEV_NAME: u16 = 70;
    pub const CHARDEV_ABI: u16 = 71;
    pub const CHARDEV: u16 = 72;
    pub const UVERBS_DRIVER_ID: u16 = 73;
    pub const STAT_MODE: u16 = 74;
    pub const STAT_RES: u16 = 75;
    pub const STAT_AUTO_MODE_MASK: u16 = 76;
    pub const STAT_COUNTER: u16 = 77;
    pub const STAT_COUNTER_ENTRY: u16 = 78;
    pub const STAT_COUNTER_ID: u16 = 79;
    pub const STAT_HWCOUNTERS: u16 = 80;
    pub const STAT_HWCOUNTER_ENTRY: u16 = 81;
    pub const STAT_HWCOUNTER_ENTRY_NAME: u16 = 82;
    pub const STAT_HWCOUNTER_ENTRY_VALUE: u16 = 83;
    pub const DEV_DIM: u16 = 84;
    pub const RES_RAW: u16 = 85;
    pub const RES_CTX: u16 = 86;
    pub const RES_CTX_ENTRY: u16 = 87;
    pub const RES_SRQ: u16 = 88;
    pub const RES_SRQ_ENTRY: u16 = 89;
    pub const RES_SRQN: u16 = 90;
    pub const MIN_RANGE: u16 = 91;
    pub const MAX_RANGE: u16 = 92;
    pub const SYS_ATTR_COPY_ON_FORK: u16 = 93;
    pub const SYS_ATTR_PRIVILEGED_QKEY_MODE: u16 = 96;
    pub const RES_SUBTYPE: u16 = 98;
    pub const DEV_TYPE: u16 = 99;
    pub const PARENT_NAME: u16 = 100;
    pub const EVENT_TYPE: u16 = 102;
    /// In the SYS_GET reply of kernels that send monitor events (1).
    pub const SYS_ATTR_MONITOR_MODE: u16 = 103;
}
