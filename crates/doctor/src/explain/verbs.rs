//! Verb + errno pairs: what a given verb failing with a given errno usually means.
//!
//! `errno` is the errno name, or "" for failures that carry no errno (an empty device
//! list, a negative `ibv_poll_cq`).

use super::Entry;
use crate::codes::Layer::{self, *};

pub struct VerbErrno {
    pub verb: &'static str,
    pub errno: &'static str,
    /// One line: what the caller saw.
    pub title: &'static str,
    pub entry: Entry,
}

#[allow(clippy::too_many_arguments)]
const fn v(
    verb: &'static str,
    errno: &'static str,
    title: &'static str,
    layer: Layer,
    summary: &'static str,
    causes: &'static [&'static str],
    checks: &'static [&'static str],
    related: &'static [&'static str],
) -> VerbErrno {
    VerbErrno {
        verb,
        errno,
        title,
        entry: Entry {
            layer,
            summary,
            causes,
            checks,
            related,
        },
    }
}

const MEMLOCK_CHECKS: &[&str] = &["ulimit -l", "grep 'locked memory' /proc/<pid>/limits"];

pub const VERB_ERRNOS: &[VerbErrno] = &[
    v("ibv_get_device_list", "ENOSYS", "ibv_get_device_list returned NULL with ENOSYS (\"Failed to get IB devices list: Function not implemented\")", Kernel,
        "libibverbs found no usable kernel RDMA interface: /sys/class/infiniband_verbs is missing, or the kernel's uverbs ABI version is not one it supports.",
        &[
            "The kernel has no RDMA support (no /sys/class/infiniband, NETLINK_RDMA unsupported)",
            "ib_uverbs (or ib_core) is not loaded",
            "Unsupported uverbs ABI: libibverbs printed 'Fatal: kernel ABI version N doesn't match library version 6'",
            "A container whose /sys hides /sys/class/infiniband_verbs",
        ],
        &["ls /sys/class/infiniband_verbs && cat /sys/class/infiniband_verbs/abi_version", "lsmod | grep -E 'ib_core|ib_uverbs'", "rdma link show", "zcat /proc/config.gz | grep CONFIG_INFINIBAND"],
        &["RDK-K001", "RDK-K002", "RDK-K005", "ENOSYS"]),
    v("ibv_get_device_list", "", "ibv_get_device_list returned an empty list (\"No IB devices found\")", Library,
        "The kernel side answered but no device survived libibverbs' filtering. libibverbs drops devices \
         silently; set IBV_SHOW_WARNINGS=1 to make it say why.",
        &[
            "No provider (user-space driver) for the device: missing ibverbs-providers or a .driver file",
            "No RDMA device registered at all (vendor RDMA driver not loaded, rxe/siw link not created)",
            "/dev/infiniband/uverbsN missing (container without --device) or the device has no uverbs node",
            "The device is in another network namespace",
        ],
        &["IBV_SHOW_WARNINGS=1 ibv_devinfo", "ls /sys/class/infiniband /sys/class/infiniband_verbs /dev/infiniband", "rdma link show", "ls /etc/libibverbs.d"],
        &["RDK-L002", "RDK-H001", "RDK-A004", "RDK-K006", "RDK-K004"]),
    v("ibv_open_device", "EACCES", "ibv_open_device failed with EACCES (\"Failed to open device\", \"Couldn't get context\")", Application,
        "The uverbs node exists but this user may not open it read-write.",
        &[
            "A udev rule or hardening policy restricted /dev/infiniband/uverbsN (the kernel default is 0666)",
            "The user is not in the group the rule grants",
            "SELinux/AppArmor policy",
        ],
        &["ls -l /dev/infiniband/", "id", "grep -rE 'uverbs|infiniband' /etc/udev/rules.d/"],
        &["RDK-A002", "EACCES"]),
    v("ibv_open_device", "EPERM", "ibv_open_device failed with EPERM", Application,
        "Opening the uverbs node was refused by policy rather than by its file mode.",
        &[
            "Container device cgroup: the node was bind-mounted but not allowed (use --device or the RDMA device plugin)",
            "seccomp or an LSM denies the open",
        ],
        &["ls -l /dev/infiniband/", "cat /proc/self/cgroup", "docker inspect <ctr> | grep -A5 Devices"],
        &["RDK-A002", "RDK-A004", "EPERM"]),
    v("ibv_open_device", "ENODEV", "ibv_open_device failed with ENODEV", Kernel,
        "The device disappeared between listing and opening.",
        &[
            "Driver reload, firmware reset or VF removal after ibv_get_device_list",
            "Hot-unplug or a device fatal error (see the kernel log)",
        ],
        &["rdma link show", "dmesg | tail -30"],
        &["RDK-K008", "ENODEV"]),
    v("ibv_open_device", "ENOENT", "ibv_open_device failed with ENOENT", Application,
        "The device's /dev/infiniband/uverbsN node does not exist.",
        &[
            "Container started without the node (--device /dev/infiniband/uverbsN, RDMA device plugin)",
            "No udev/devtmpfs in a chroot or initramfs",
            "The device list is stale (device renamed/re-registered)",
        ],
        &["ls -l /dev/infiniband/", "cat /sys/class/infiniband_verbs/uverbs*/dev"],
        &["RDK-A004", "ENOENT"]),
    v("ibv_open_device", "ENXIO", "ibv_open_device failed with ENXIO", Kernel,
        "The uverbs node exists but no device answers behind its major:minor.",
        &[
            "A stale node (copied into an image, or from before a driver reload) whose numbers no longer match",
            "ib_uverbs was unloaded or the device unbound",
        ],
        &["ls -l /dev/infiniband/uverbs*", "cat /sys/class/infiniband_verbs/uverbs*/dev"],
        &["RDK-A004", "RDK-K006", "ENXIO"]),
    v("ibv_alloc_pd", "ENOMEM", "ibv_alloc_pd failed with ENOMEM", Kernel,
        "The driver could not allocate a protection domain.",
        &[
            "The device's max_pd reached (PDs leaked by processes that never dealloc)",
            "Host memory pressure, or memlock exhausted by earlier registrations",
        ],
        &["rdma resource show pd | wc -l", "ibv_devinfo -v | grep max_pd", "ulimit -l"],
        &["RDK-A001", "ENOMEM"]),
    v("ibv_reg_mr", "ENOMEM", "ibv_reg_mr failed with ENOMEM (\"Couldn't allocate MR\", \"Couldn't register MR\")", Application,
        "The memory could not be pinned or mapped for the device. Suspect `ulimit -l` first, \
         then DMA mapping errors in the kernel log.",
        &[
            "RLIMIT_MEMLOCK smaller than the memory registered so far plus this region",
            "DMA mapping failure (swiotlb full, IOMMU): the kernel log says 'DMA mapping error'",
            "Device MR/translation resources exhausted (max_mr, very many small MRs)",
            "Host memory pressure for the page lists of a very large registration",
        ],
        &["ulimit -l", "grep 'locked memory' /proc/<pid>/limits", "dmesg | grep -iE 'dma|swiotlb|iommu' | tail", "ibv_devinfo -v | grep -E 'max_mr|max_mr_size'", "rdma resource show mr | wc -l"],
        &["RDK-A001", "RDK-K007", "ENOMEM"]),
    v("ibv_reg_mr", "EPERM", "ibv_reg_mr failed with EPERM", Application,
        "The kernel refused to pin memory at all: RLIMIT_MEMLOCK is 0 and the process lacks CAP_IPC_LOCK.",
        &[
            "memlock limit 0 (containers, systemd units, batch schedulers that set it to 0)",
            "Capabilities dropped in a container (no IPC_LOCK) together with a zero limit",
        ],
        MEMLOCK_CHECKS,
        &["RDK-A001", "EPERM"]),
    v("ibv_reg_mr", "EFAULT", "ibv_reg_mr failed with EFAULT", Application,
        "The kernel could not pin the given range of the process's memory.",
        &[
            "The range is not fully mapped: freed buffer, wrong length, pointer arithmetic error",
            "Write access requested on read-only memory (PROT_READ mapping, constant data)",
            "Memory that cannot be pinned by get_user_pages: GPU/device memory without nvidia-peermem or dma-buf, VM_IO/VM_PFNMAP mappings",
        ],
        &["grep -E '^<start>' /proc/<pid>/maps   # is [addr, addr+len) mapped and writable?", "lsmod | grep -E 'nvidia_peermem|peer_mem'"],
        &["EFAULT"]),
    v("ibv_reg_mr", "EINVAL", "ibv_reg_mr failed with EINVAL", Application,
        "The registration request itself is invalid for this device.",
        &[
            "Access flags: REMOTE_WRITE or REMOTE_ATOMIC without LOCAL_WRITE",
            "Length 0 or above max_mr_size",
            "IBV_ACCESS_ON_DEMAND on a device or kernel without ODP (some return EOPNOTSUPP)",
            "A PD from another device context",
        ],
        &["ibv_devinfo -v | grep -E 'max_mr_size|odp'", "print the access flags and length passed"],
        &["EINVAL", "ibv_reg_mr:EFAULT"]),
    v("ibv_create_cq", "ENOMEM", "ibv_create_cq failed with ENOMEM (\"Cannot allocate memory\")", Application,
        "The CQ ring could not be allocated or pinned. In containers this is the classic memlock symptom.",
        &[
            "RLIMIT_MEMLOCK too small (the CQ buffer is pinned like an MR)",
            "Very large cqe, or the device's CQ resources exhausted (max_cq)",
        ],
        &["ulimit -l", "ibv_devinfo -v | grep -E 'max_cq|max_cqe'", "rdma resource show cq | wc -l"],
        &["RDK-A001", "ENOMEM"]),
    v("ibv_create_cq", "EINVAL", "ibv_create_cq failed with EINVAL", Kernel,
        "The CQ parameters exceed what the device accepts.",
        &[
            "cqe larger than max_cqe",
            "comp_vector >= num_comp_vectors",
            "A completion channel from another context",
        ],
        &["ibv_devinfo -v | grep -E 'max_cqe|num_comp_vectors'"],
        &["RDK-I002", "EINVAL"]),
    v("ibv_create_qp", "ENOSYS", "ibv_create_qp failed with ENOSYS", Library,
        "The user-space library asked the kernel for a command or method it does not \
         implement — rdma-core and the kernel do not match.",
        &[
            "rdma-core much newer than the kernel (or a container's rdma-core on an old host kernel)",
            "A vendor user space (MLNX_OFED/DOCA) with in-box kernel modules, or the reverse",
            "A provider using an extended create path the kernel driver lacks",
        ],
        &["uname -r", "dpkg -l rdma-core libibverbs1 ibverbs-providers   # or: rpm -q rdma-core libibverbs", "readlink -f /usr/lib/x86_64-linux-gnu/libibverbs.so.1", "modinfo -F filename ib_uverbs"],
        &["RDK-L003", "RDK-K005", "ENOSYS", "EOPNOTSUPP"]),
    v("ibv_create_qp", "ENOSPC", "ibv_create_qp failed with ENOSPC", Hardware,
        "The device ran out of QPs (or QP-related resources). A typical case: a crashed application \
         had not destroyed its QPs, and `ib_send_bw` then failed until the stack was restarted. The kernel frees \
         a process's QPs when the last file descriptor to its uverbs device closes, so 'leaked' QPs mean \
         something still holds that descriptor. The exact errno for exhaustion is driver-specific \
         (ENOMEM, EAGAIN and EINVAL also occur).",
        &[
            "A hung/zombie process, a forked child that inherited the uverbs fd, or a still-running container owns the QPs",
            "Many processes × threads × peers reach the device's max_qp",
            "Kernel users (NFS/RDMA, iSER, SRP, IPoIB) hold QPs too",
            "An rdma cgroup limit (usually EAGAIN)",
        ],
        &["rdma resource show qp | wc -l", "rdma resource show qp        # pid and comm of each owner", "ps -o pid,stat,cmd -p <pid>", "ibv_devinfo -v | grep -E 'max_qp[^_]'"],
        &["ENOSPC", "EAGAIN", "ibv_create_qp:ENOMEM"]),
    v("ibv_create_qp", "EINVAL", "ibv_create_qp failed with EINVAL", Kernel,
        "A kernel-layer failure: the requested QP does not fit the device's resources or configuration.",
        &[
            "max_send_wr/max_recv_wr above max_qp_wr, max_send_sge/max_recv_sge above max_sge",
            "max_inline_data above what the provider supports",
            "QP type not supported by the transport (UD/UC on iWARP, RAW_PACKET without privilege)",
            "Missing or foreign send_cq/recv_cq, receive caps given together with an SRQ",
        ],
        &["ibv_devinfo -v | grep -E 'max_qp_wr|max_sge|max_qp[^_]|max_cqe'", "print the ibv_qp_init_attr.cap values"],
        &["EINVAL", "RDK-K005"]),
    v("ibv_create_qp", "ENOMEM", "ibv_create_qp failed with ENOMEM", Application,
        "The QP's queues could not be allocated or pinned.",
        &[
            "RLIMIT_MEMLOCK too small (the work queues are pinned)",
            "Very deep queues (max_send_wr × WQE size) or host memory pressure",
            "Device QP resources exhausted on drivers that report it as ENOMEM",
        ],
        &["ulimit -l", "rdma resource show qp | wc -l", "ibv_devinfo -v | grep -E 'max_qp[^_]|max_qp_wr'"],
        &["RDK-A001", "ibv_create_qp:ENOSPC", "ENOMEM"]),
    v("ibv_modify_qp", "EINVAL", "ibv_modify_qp failed with EINVAL (\"Failed to modify QP to RTR/RTS\")", Application,
        "The attributes or attribute mask do not fit the transition or the port.",
        &[
            "Wrong attr_mask for the transition (RC: RESET→INIT needs STATE|PKEY_INDEX|PORT|ACCESS_FLAGS; INIT→RTR needs STATE|AV|PATH_MTU|DEST_QPN|RQ_PSN|MAX_DEST_RD_ATOMIC|MIN_RNR_TIMER; RTR→RTS needs STATE|TIMEOUT|RETRY_CNT|RNR_RETRY|SQ_PSN|MAX_QP_RD_ATOMIC)",
            "Bad address vector: sgid_index out of range or an empty GID entry; RoCE requires is_global = 1 with a GRH",
            "path_mtu above the port's active_mtu",
            "max_rd_atomic/max_dest_rd_atomic above max_qp_rd_atom, retry_cnt/rnr_retry above 7, wrong port_num, QP not in the expected current state",
        ],
        &["ibv_devinfo -v | grep -E 'active_mtu|GID|max_qp_rd_atom|max_qp_init_rd_atom'", "rdma resource show qp lqpn <qpn>   # current state", "rdmakit doctor   # RDK-H007 names the GID index"],
        &["RDK-H007", "RDK-H008", "RDK-H005", "EINVAL"]),
    v("ibv_modify_qp", "ETIMEDOUT", "ibv_modify_qp to RTR failed with ETIMEDOUT", Hardware,
        "On RoCE the kernel resolves the destination MAC from the destination GID's IP through the \
         neighbour table of the source GID's netdev; nobody answered the ARP/ND request.",
        &[
            "Wrong source GID index: the GID belongs to another netdev/VLAN than the one that reaches the peer",
            "Peer IP unreachable from that netdev (other subnet without route, peer down)",
            "VLAN mismatch or ARP filtering on multi-homed hosts (arp_ignore, rp_filter)",
        ],
        &["cat /sys/class/infiniband/<dev>/ports/1/gid_attrs/ndevs/<idx>", "ping -I <if> <peer ip>; ip neigh show dev <if>", "sysctl net.ipv4.conf.all.arp_ignore net.ipv4.conf.all.rp_filter"],
        &["RDK-H007", "RDK-H006", "ETIMEDOUT", "wc:12"]),
    v("ibv_modify_qp", "ENETUNREACH", "ibv_modify_qp to RTR failed with ENETUNREACH", Kernel,
        "On RoCE the kernel found no route from the source GID's netdev to the destination IP.",
        &["The destination is in a subnet with no route on that interface", "Wrong GID index (the address is on another interface)"],
        &["ip route get <peer ip>", "ibv_devinfo -v | grep GID"],
        &["RDK-H007", "ENETUNREACH"]),
    v("ibv_post_send", "ENOMEM", "ibv_post_send returned ENOMEM", Application,
        "The send queue is full. Note that ibv_post_send returns the errno value directly (and sets bad_wr); it does not set errno.",
        &[
            "More outstanding work requests than max_send_wr: completions are not polled fast enough",
            "Unsignaled sends without a periodic signaled one: slots are never released",
            "The CQ is too small and overran (check for IBV_EVENT_CQ_ERR)",
        ],
        &["count outstanding WRs against the QP's cap.max_send_wr", "signal every Nth WR (N < max_send_wr) and poll the CQ"],
        &["ibv_post_recv:ENOMEM", "ENOMEM"]),
    v("ibv_post_send", "EINVAL", "ibv_post_send returned EINVAL", Application,
        "The work request does not fit the QP.",
        &[
            "num_sge above the QP's max_send_sge",
            "IBV_SEND_INLINE with more data than max_inline_data",
            "Opcode invalid for the QP type (RDMA on UD, atomics on UC), or a UD WR without an AH",
            "QP not in RTS (some providers check)",
        ],
        &["compare the WR with the QP's ibv_qp_cap (ibv_query_qp)", "rdma resource show qp lqpn <qpn>   # state"],
        &["wc:2", "EINVAL"]),
    v("ibv_post_recv", "ENOMEM", "ibv_post_recv returned ENOMEM", Application,
        "The receive queue is full: more posted receives than max_recv_wr (the value is returned directly).",
        &["Re-posting more receives than completions consumed", "max_recv_wr sized smaller than the posting depth"],
        &["count posted receives against cap.max_recv_wr"],
        &["wc:13", "ENOMEM"]),
    v("ibv_post_recv", "EINVAL", "ibv_post_recv returned EINVAL", Application,
        "The receive work request does not fit the QP.",
        &[
            "num_sge above max_recv_sge",
            "The QP uses an SRQ: post with ibv_post_srq_recv instead",
            "The QP is still in RESET (receives may be posted from INIT on)",
        ],
        &["ibv_query_qp: state and cap.max_recv_sge"],
        &["EINVAL"]),
    v("ibv_poll_cq", "", "ibv_poll_cq returned a negative value", Kernel,
        "Polling itself failed (as opposed to a completion with an error status).",
        &[
            "CQ overrun: more completions than cqe (an IBV_EVENT_CQ_ERR async event follows)",
            "The device hit a fatal error or was reset",
            "A corrupted or already destroyed CQ pointer",
        ],
        &["handle ibv_get_async_event and log CQ_ERR / DEVICE_FATAL", "size cqe ≥ all WRs that can complete into the CQ", "dmesg | tail"],
        &["RDK-K008", "wc:19"]),
    v("ibv_req_notify_cq", "", "ibv_req_notify_cq failed", Kernel,
        "The CQ could not be armed for a completion event.",
        &["The device is in a fatal state or the context was disassociated", "The CQ is in error (overrun)"],
        &["dmesg | tail", "handle ibv_get_async_event"],
        &["RDK-K008", "RDK-I001"]),
    v("ibv_create_ah", "EINVAL", "ibv_create_ah failed with EINVAL", Application,
        "The address handle attributes are invalid for the port.",
        &[
            "sgid_index out of range or an empty GID entry",
            "RoCE without is_global = 1 (a GRH is mandatory)",
            "dlid 0 on InfiniBand, or a wrong port_num",
        ],
        &["ibv_devinfo -v | grep -E 'GID|port_lid|link_layer'"],
        &["RDK-H007", "EINVAL"]),
    v("ibv_create_ah", "ETIMEDOUT", "ibv_create_ah failed with ETIMEDOUT", Hardware,
        "On RoCE the kernel could not resolve the destination MAC (ARP/ND unanswered) for the AH's destination GID.",
        &["Peer unreachable from the source GID's netdev", "Wrong GID index / VLAN"],
        &["ping -I <if> <peer ip>; ip neigh show dev <if>"],
        &["RDK-H007", "ibv_modify_qp:ETIMEDOUT"]),
    v("rdma_resolve_addr", "ETIMEDOUT", "rdma_resolve_addr failed (RDMA_CM_EVENT_ADDR_ERROR) with ETIMEDOUT", Hardware,
        "Address resolution (ARP/ND for the destination) did not complete within the timeout.",
        &["Peer down or its interface down", "Wrong subnet or VLAN", "The timeout passed to rdma_resolve_addr is very short"],
        &["ping <peer ip>", "ip neigh show", "ip route get <peer ip>"],
        &["ETIMEDOUT", "RDK-H002"]),
    v("rdma_resolve_addr", "EADDRNOTAVAIL", "rdma_resolve_addr failed with EADDRNOTAVAIL", Kernel,
        "The source address is not usable for RDMA on this host.",
        &["The source IP is not configured here (or still tentative)", "The IP is on a netdev with no RDMA device, so no GID matches it", "IPv6 link-local without scope id"],
        &["ip addr show", "ibv_devinfo -v | grep GID"],
        &["RDK-H006", "EADDRNOTAVAIL"]),
    v("rdma_resolve_addr", "ENODEV", "rdma_resolve_addr failed with ENODEV", Kernel,
        "The route to the destination leaves through a netdev that has no RDMA device.",
        &["The routing table sends the destination via a non-RDMA NIC (e.g. the default route)", "Binding to an IP of a non-RDMA interface"],
        &["ip route get <peer ip>", "rdma link show   # which netdevs have RDMA"],
        &["ENODEV", "RDK-H001"]),
    v("rdma_resolve_addr", "EHOSTUNREACH", "rdma_resolve_addr failed with EHOSTUNREACH", Hardware,
        "The neighbour (ARP/ND) for the destination could not be resolved.",
        &["Peer down or not on that L2 segment", "ARP filtering or VLAN mismatch"],
        &["arping -I <if> <peer ip>", "ip neigh show dev <if>"],
        &["EHOSTUNREACH"]),
    v("rdma_resolve_addr", "ENETUNREACH", "rdma_resolve_addr failed with ENETUNREACH (\"Network is unreachable\")", Kernel,
        "There is no route to the destination.",
        &["Missing route or address on the RDMA interface", "IPv6 link-local destination without interface"],
        &["ip route get <peer ip>", "ip addr show"],
        &["ENETUNREACH"]),
    v("rdma_resolve_route", "ETIMEDOUT", "rdma_resolve_route failed (RDMA_CM_EVENT_ROUTE_ERROR) with ETIMEDOUT", Hardware,
        "On InfiniBand, the path record query to the subnet administrator was not answered.",
        &["No subnet manager running (ports stay in INIT)", "The SM is unreachable or overloaded; P_Key mismatch", "On RoCE: rare; check the netdev and routing"],
        &["sminfo", "ibv_devinfo | grep state", "cat /sys/class/infiniband/<dev>/ports/1/sm_lid"],
        &["RDK-H002", "RDK-K003", "ETIMEDOUT"]),
    v("rdma_connect", "ECONNREFUSED", "rdma_connect failed: RDMA_CM_EVENT_REJECTED / ECONNREFUSED", Application,
        "The remote CM rejected the connection request.",
        &[
            "Nothing listens on that IP/port on the server (not started yet, wrong port, bound to another address)",
            "The server application rejected it (private data, limits)",
            "rdma_ucm not loaded on the server",
        ],
        &["on the server: rdma resource show cm_id   # is there a LISTEN id on the port?", "lsmod | grep rdma_ucm   # on the server"],
        &["ECONNREFUSED", "RDK-K002"]),
    v("rdma_connect", "ETIMEDOUT", "rdma_connect failed: RDMA_CM_EVENT_UNREACHABLE / ETIMEDOUT", Hardware,
        "The connection request or its reply was lost: the remote CM never answered.",
        &[
            "Remote port down or unreachable on the path the GIDs select",
            "RoCE version mismatch between the ends (default_roce_mode)",
            "ACLs or firewalls dropping RoCE v2 (UDP 4791)",
        ],
        &["ibv_devinfo | grep state   # both ends", "cat /sys/kernel/config/rdma_cm/<dev>/ports/1/default_roce_mode"],
        &["RDK-H002", "RDK-H007", "ETIMEDOUT"]),
];

/// "ibv_create_qp", "IBV_CREATE_QP", "create_qp" → "create_qp"; "rdma_connect" → "connect".
pub fn verb_key(s: &str) -> String {
    let l = s.trim().to_ascii_lowercase();
    match l.strip_prefix("ibv_").or_else(|| l.strip_prefix("rdma_")) {
        Some(rest) => rest.to_string(),
        None => l,
    }
}

/// The canonical name of a known verb.
pub fn canonical(verb: &str) -> Option<&'static str> {
    let k = verb_key(verb);
    VERB_ERRNOS
        .iter()
        .map(|e| e.verb)
        .find(|v| verb_key(v) == k)
}

/// The entry for a verb and errno name ("" for no errno).
pub fn find(verb: &str, errno: &str) -> Option<&'static VerbErrno> {
    let k = verb_key(verb);
    VERB_ERRNOS
        .iter()
        .find(|e| verb_key(e.verb) == k && e.errno.eq_ignore_ascii_case(errno))
}

/// All entries of a verb.
pub fn of_verb(verb: &str) -> impl Iterator<Item = &'static VerbErrno> {
    let k = verb_key(verb);
    VERB_ERRNOS.iter().filter(move |e| verb_key(e.verb) == k)
}
