//! What each errno usually means when an RDMA call returns it, and the layer it points at.
//!
//! Numbers, names and messages come from [`rdmakit_vocab::errno`] (every errno Linux
//! assigns, with its aliases); this module adds what each means for RDMA.

use super::Entry;
use crate::codes::Layer::{self, *};

pub use rdmakit_vocab::errno::{all_names, by_message, message, name, number};

/// The knowledge for one errno name.
pub struct ErrnoKb {
    pub name: &'static str,
    pub entry: Entry,
}

const fn e(
    name: &'static str,
    layer: Layer,
    summary: &'static str,
    causes: &'static [&'static str],
    checks: &'static [&'static str],
    related: &'static [&'static str],
) -> ErrnoKb {
    ErrnoKb {
        name,
        entry: Entry {
            layer,
            summary,
            causes,
            checks,
            related,
        },
    }
}

pub const ERRNO_KB: &[ErrnoKb] = &[
    e("EPERM", Application,
        "A privilege or policy check refused the call (file modes give EACCES instead).",
        &[
            "ibv_reg_mr with RLIMIT_MEMLOCK = 0 and no CAP_IPC_LOCK: the kernel refuses to pin anything",
            "A container's device cgroup, seccomp or an LSM denies opening /dev/infiniband/* even though the node's mode allows it",
            "The operation needs a capability: raw packet QPs and flow steering (CAP_NET_RAW), `rdma link add`/netns changes (CAP_NET_ADMIN), reading /dev/kmsg (CAP_SYSLOG)",
            "Kernel lockdown forbids mapping PCI resource files",
        ],
        &["ulimit -l", "grep CapEff /proc/self/status", "ls -l /dev/infiniband", "cat /proc/self/cgroup"],
        &["RDK-A001", "RDK-A002", "RDK-A004", "ibv_reg_mr:EPERM", "ibv_open_device:EPERM"]),
    e("ENOENT", Application,
        "Something the call needs does not exist: usually a device node, a sysfs file or a config entry.",
        &[
            "/dev/infiniband/uverbsN or rdma_cm missing (container started without --device, no udev)",
            "The device was renamed or removed after the device list was read",
            "A sysfs attribute an older kernel does not have",
        ],
        &["ls -l /dev/infiniband", "ls /sys/class/infiniband_verbs", "rdma link show"],
        &["RDK-A004", "RDK-K006", "ibv_open_device:ENOENT"]),
    e("EIO", Kernel,
        "The driver could not talk to the device: a firmware command failed, or the device is in an error or reset state.",
        &[
            "Device or firmware fatal error / health event, device reset in progress",
            "The context was disassociated (driver reload, hot-unplug): every later verb fails",
            "PCIe errors (AER), device fell off the bus",
        ],
        &["dmesg -T | grep -iE 'health|fatal|synd|aer|reset|cmd' | tail", "devlink health show", "rdma link show"],
        &["RDK-K008", "wc:19", "ENODEV"]),
    e("ENXIO", Kernel,
        "The device node exists but no live device stands behind it.",
        &[
            "Stale /dev/infiniband node: its major:minor no longer matches a device (container image or bind mount from another boot)",
            "The RDMA driver was unloaded or the device unbound while the node remained",
        ],
        &["ls -l /dev/infiniband", "cat /sys/class/infiniband_verbs/uverbs*/dev", "lsmod | grep ib_uverbs"],
        &["RDK-A004", "RDK-K006"]),
    e("EAGAIN", Kernel,
        "Resource temporarily unavailable: a limit was hit that may clear, or a non-blocking call had nothing to return.",
        &[
            "The rdma cgroup limit (rdma.max: hca_handle / hca_object) of this container/job is reached",
            "Non-blocking read of a completion channel or async event fd with no event pending (normal)",
            "Firmware command interface busy or the device is resetting",
        ],
        &["cat /sys/fs/cgroup/<cgroup>/rdma.max /sys/fs/cgroup/<cgroup>/rdma.current", "dmesg | tail"],
        &["ENOSPC", "ENOMEM"]),
    e("ENOMEM", Application,
        "Memory could not be allocated or pinned. In RDMA this is most often the locked-memory limit, \
         not a lack of RAM; ibv_post_send/ibv_post_recv return it when the queue is full.",
        &[
            "RLIMIT_MEMLOCK too small: registered memory and queue buffers are pinned and charged to it",
            "DMA/IOMMU mapping failure (swiotlb full, IOMMU fault): check the kernel log",
            "Work queue full: more outstanding work requests than max_send_wr / max_recv_wr",
            "Device resources (MR/translation tables, ICM) or host memory exhausted",
        ],
        &["ulimit -l", "grep 'locked memory' /proc/<pid>/limits", "dmesg | grep -iE 'dma|swiotlb|iommu' | tail", "ibv_devinfo -v | grep -E 'max_mr|max_qp_wr|max_cqe'"],
        &["RDK-A001", "RDK-K007", "ibv_reg_mr:ENOMEM", "ibv_post_send:ENOMEM", "ibv_create_cq:ENOMEM"]),
    e("EACCES", Application,
        "Permission denied by file mode/ownership or a security policy.",
        &[
            "/dev/infiniband/uverbsN (or rdma_cm) not readable+writable by this user (site udev rule, container)",
            "umadN/issmN are root-only by design (MAD tools need root)",
            "PCI resource files or /dev/kmsg are root-only",
            "SELinux InfiniBand pkey/subnet policy denies the P_Key used by the QP or AH",
        ],
        &["ls -l /dev/infiniband", "id", "getenforce 2>/dev/null; ausearch -m avc -ts recent 2>/dev/null | tail"],
        &["RDK-A002", "RDK-A003", "RDK-K010", "ibv_open_device:EACCES"]),
    e("EFAULT", Application,
        "The kernel could not access a user address the call passed.",
        &[
            "ibv_reg_mr over a range that is not fully mapped (freed buffer, wrong length, guard page)",
            "Registering read-only memory with write access (PROT_READ mapping, string literal) with LOCAL_WRITE/REMOTE_WRITE",
            "Memory that cannot be pinned: device or GPU memory without peer-memory/dma-buf support, VM_IO/VM_PFNMAP mappings",
        ],
        &["grep <address range> /proc/<pid>/maps", "lsmod | grep -E 'nvidia_peermem|peer_mem'"],
        &["ibv_reg_mr:EFAULT"]),
    e("EBUSY", Application,
        "The object is still in use.",
        &[
            "Destroying a parent before its children: ibv_dealloc_pd with MRs/QPs/AHs alive, ibv_destroy_cq with QPs attached, ibv_close_device with open objects",
            "modprobe -r of an RDMA module that has users (a process holds uverbs, NFS/RDMA mounted)",
            "A device reset or reconfiguration is in progress",
        ],
        &["rdma resource show", "lsmod | grep -E 'ib_|mlx|rdma'", "lsof /dev/infiniband/* 2>/dev/null"],
        &["ENOSPC"]),
    e("EEXIST", Application,
        "The object already exists.",
        &[
            "rdma link add for a name or netdev that already has an RDMA link (rxe/siw)",
            "Attaching a QP to a multicast group it is already in; duplicate flow steering rule",
            "Creating a configfs directory (rdma_cm) that exists",
        ],
        &["rdma link show", "ls /sys/kernel/config/rdma_cm/"],
        &["RDK-H001"]),
    e("ENODEV", Kernel,
        "No such device: the device is gone, or the address/netdev chosen has no RDMA device behind it.",
        &[
            "The device was reset, unbound or removed (driver reload, firmware reset, VF removal) after the application opened it",
            "rdma_cm: the source IP (or the route to the destination) uses a netdev without an RDMA device",
            "Wrong device name, or the device lives in another network namespace",
        ],
        &["rdma link show", "dmesg | tail -30", "ip route get <peer ip>", "rdma system show"],
        &["RDK-H001", "RDK-K008", "rdma_resolve_addr:ENODEV", "ibv_open_device:ENODEV"]),
    e("EINVAL", Kernel,
        "An argument is invalid for this device or state. As a rule at the kernel layer, EINVAL from \
         create/modify calls points at hardware resource limits or configuration.",
        &[
            "A size beyond the device's capabilities (max_qp_wr, max_sge, max_cqe, max_inline_data, max_qp_rd_atom, max_mr_size)",
            "Wrong attr_mask or state for a QP transition, or a QP type the transport does not support",
            "Addressing: invalid or empty GID index, is_global = 0 on RoCE, path MTU above the port's active MTU, bad port number",
            "Access flag combinations the kernel rejects (REMOTE_WRITE without LOCAL_WRITE)",
        ],
        &["ibv_devinfo -v        # device limits and port attributes", "ibv_devinfo -v | grep -E 'GID|active_mtu'", "rdma resource show qp"],
        &["ibv_create_qp:EINVAL", "ibv_modify_qp:EINVAL", "ibv_reg_mr:EINVAL", "RDK-H007", "RDK-H008"]),
    e("ENOSPC", Hardware,
        "A fixed-size resource is exhausted: QPs, CQs, MRs, IDs or table entries on the device.",
        &[
            "Objects held by another process: a hung or zombie process, a forked child that inherited the uverbs fd, a container still running (typically an application that exited abnormally and left its QPs)",
            "The device's max_qp/max_cq/max_mr reached by many processes or threads",
            "Kernel users (NFS/RDMA, iSER, SRP, IPoIB) consume the same resources",
            "GID table full (more addresses/VLANs than gid_tbl_len)",
        ],
        &["rdma resource show               # counts per type", "rdma resource show qp           # owner pid and comm", "ibv_devinfo -v | grep -E 'max_qp|max_cq|max_mr'"],
        &["ibv_create_qp:ENOSPC", "EAGAIN", "ENOMEM"]),
    e("ENOSYS", Kernel,
        "The kernel does not implement what was asked: no RDMA user interface at all, or a command \
         this kernel's uverbs does not know (library newer than the kernel).",
        &[
            "No kernel RDMA support or ib_uverbs not loaded (ibv_get_device_list fails with ENOSYS)",
            "Unsupported uverbs ABI version (libibverbs prints 'Fatal: kernel ABI version')",
            "rdma-core and kernel far apart: the library uses a command the kernel lacks (ibv_create_qp failing with ENOSYS)",
        ],
        &["ls /sys/class/infiniband_verbs", "lsmod | grep -E 'ib_core|ib_uverbs'", "uname -r; dpkg -l rdma-core libibverbs1"],
        &["RDK-K001", "RDK-K002", "RDK-K005", "RDK-L003", "ibv_get_device_list:ENOSYS", "ibv_create_qp:ENOSYS"]),
    e("EPROTONOSUPPORT", Kernel,
        "A protocol family or mode is not supported: for RDMA usually the NETLINK_RDMA socket, which exists only with ib_core loaded.",
        &[
            "ib_core not loaded, or a kernel without RDMA (the `rdma` tool prints 'Failed to open NETLINK_RDMA socket')",
            "rdma_cm: port space or QP type not supported on this transport",
        ],
        &["lsmod | grep ib_core", "zcat /proc/config.gz | grep CONFIG_INFINIBAND", "rdma link show"],
        &["RDK-K001", "RDK-K002"]),
    e("EOPNOTSUPP", Library,
        "The device or its provider does not support the feature (ENOTSUP is the same number).",
        &[
            "Device capability missing: ODP, atomics (atomic_cap NONE), memory windows, XRC, DC, UD on iWARP, raw packet",
            "The provider (user-space driver) is too old for an extended verb (create_cq_ex, create_qp_ex with comp_mask, query_device_ex)",
            "The kernel driver lacks the method (new rdma-core on an old kernel)",
        ],
        &["ibv_devinfo -v | grep -E 'cap_flags|atomic_cap|odp'", "dpkg -l ibverbs-providers libibverbs1; uname -r"],
        &["RDK-L003", "ENOSYS"]),
    e("ETIMEDOUT", Hardware,
        "Something on the network did not answer in time.",
        &[
            "rdma_resolve_addr: ARP/ND for the destination unanswered (peer down, wrong subnet or VLAN)",
            "rdma_resolve_route on InfiniBand: the subnet manager / SA did not answer (no SM: port stuck in INIT)",
            "ibv_modify_qp to RTR or ibv_create_ah on RoCE: the kernel could not resolve the destination MAC",
            "rdma_connect: the remote CM never answered (port down, RoCE version mismatch, ACLs dropping UDP 4791)",
            "A firmware command timed out (see the kernel log)",
        ],
        &["ibv_devinfo | grep -E 'state|link_layer'", "ping -I <if> <peer ip>; ip neigh show dev <if>", "sminfo   # InfiniBand: is there an SM?", "dmesg | tail"],
        &["RDK-H002", "RDK-H007", "ibv_modify_qp:ETIMEDOUT", "rdma_resolve_addr:ETIMEDOUT", "rdma_resolve_route:ETIMEDOUT"]),
    e("ECONNREFUSED", Application,
        "The remote side refused the connection (RDMA CM REJECTED).",
        &[
            "No listener on that address/port (server not started, wrong port, listening on another IP or device)",
            "The server application rejected it (private data, limits)",
            "rdma_ucm not loaded on the server, so nothing can listen",
            "For perftest/ibv_* out-of-band exchange: nothing listens on the TCP port (default 18515)",
        ],
        &["on the server: ss -ltn | grep 18515 (perftest) or check the rdma_cm listener", "rdma resource show cm_id   # listeners on the server", "lsmod | grep rdma_ucm"],
        &["rdma_connect:ECONNREFUSED", "RDK-K002"]),
    e("ECONNRESET", Application,
        "The peer reset the connection: it disconnected, crashed or destroyed its QP.",
        &[
            "The remote process exited or crashed (check its logs first)",
            "RDMA CM DISCONNECTED after a remote error or timeout",
            "perftest's TCP exchange: the server closed the socket (mismatched options, server error)",
        ],
        &["check the remote process's output and exit status", "dmesg on both hosts"],
        &["wc:5", "wc:12"]),
    e("ENETUNREACH", Kernel,
        "No route to the destination network from this host.",
        &[
            "No route for the destination IP (missing route, wrong subnet on the RDMA interface)",
            "IPv6 link-local destination without a scope/interface",
            "The RDMA netdev is down",
        ],
        &["ip route get <peer ip>", "ip addr show", "ip link show <if>"],
        &["EHOSTUNREACH", "rdma_resolve_addr:ENETUNREACH"]),
    e("EHOSTUNREACH", Hardware,
        "The destination host could not be reached (no neighbour answer or route says unreachable).",
        &[
            "Peer down or its RDMA port/netdev down",
            "Wrong subnet/VLAN: ARP never answered on the chosen interface",
            "ARP filtering on multi-homed hosts (arp_ignore/arp_announce, rp_filter)",
        ],
        &["ping -I <if> <peer ip>", "ip neigh show dev <if>", "sysctl net.ipv4.conf.all.arp_ignore net.ipv4.conf.all.rp_filter"],
        &["RDK-H002", "rdma_resolve_addr:EHOSTUNREACH"]),
    e("EADDRNOTAVAIL", Kernel,
        "The address asked for is not usable on this host.",
        &[
            "rdma_bind_addr/rdma_resolve_addr with a source IP that is not configured here (or still tentative)",
            "The IP is on a netdev without an RDMA device, so no GID matches it",
            "IPv6 link-local address without a scope id",
        ],
        &["ip addr show", "ibv_devinfo -v | grep GID", "rdma link show"],
        &["RDK-H006", "rdma_resolve_addr:EADDRNOTAVAIL"]),
    e("EADDRINUSE", Application,
        "The address/port is already in use.",
        &[
            "Another rdma_cm listener (or a previous instance still running) holds the port",
            "perftest's TCP port 18515 is taken by another test",
        ],
        &["rdma resource show cm_id", "ss -ltnp | grep 18515"],
        &["ECONNREFUSED"]),
    e("ENETDOWN", Hardware,
        "The network interface under the RDMA port is down.",
        &["The RoCE netdev is administratively down or has no carrier"],
        &["ip link show <if>", "ip link set dev <if> up"],
        &["RDK-H002"]),
    e("ENODATA", Kernel,
        "There is no data for the request: usually an unused table entry.",
        &[
            "Querying an unused GID table entry (ibv_query_gid_ex, netlink GID queries)",
            "RoCE address resolution found no valid neighbour entry yet (transient; ends as ETIMEDOUT)",
            "A counter or attribute the device does not provide",
        ],
        &["ibv_devinfo -v | grep GID", "ip neigh show"],
        &["RDK-H005", "RDK-H007"]),
    e("EMSGSIZE", Application,
        "A message is larger than allowed.",
        &[
            "UD send larger than the path MTU (UD messages must fit one packet)",
            "Inline data above max_inline_data, or a message above max_msg_sz, on providers that report it this way",
            "rdma_cm private data longer than the transport allows",
        ],
        &["ibv_devinfo -v | grep -E 'active_mtu|max_msg_sz'"],
        &["RDK-H008", "wc:1"]),
    e("ERANGE", Application,
        "A numeric argument is outside the range the kernel or driver accepts.",
        &[
            "Queue or table sizes that overflow after rounding (very large cqe or wr counts)",
            "An index beyond a table (GID/P_Key index, port number) on interfaces that report it as ERANGE",
            "A netlink attribute out of range in the `rdma` tool",
        ],
        &["ibv_devinfo -v   # the limits to compare with"],
        &["EINVAL"]),
    e("ENOBUFS", Kernel,
        "No buffer space: a kernel queue or socket buffer is full.",
        &["Netlink replies larger than the receive buffer (very large resource dumps)", "IPoIB/netdev transmit queues full"],
        &["dmesg | tail"],
        &["ENOMEM"]),
    e("ENOTCONN", Application,
        "The endpoint is not connected.",
        &["Posting or disconnecting on an rdma_cm id that never connected or already disconnected"],
        &["check the RDMA CM event sequence (ESTABLISHED before posting)"],
        &["ECONNRESET"]),
];

/// The knowledge for an errno name, if any; an alias ("ENOTSUP") finds its
/// canonical name's ("EOPNOTSUPP").
pub fn kb(name: &str) -> Option<&'static ErrnoKb> {
    let canonical = number(name).and_then(self::name).unwrap_or(name);
    ERRNO_KB
        .iter()
        .find(|k| k.name.eq_ignore_ascii_case(canonical))
}
