//! Work completion statuses: `enum ibv_wc_status` of rdma-core's `<infiniband/verbs.h>`,
//! what each means in practice. Names and the text `ibv_wc_status_str()` prints come
//! from [`rdmakit_vocab::wc`].

use super::Entry;
use crate::codes::Layer::{self, *};

/// One work completion status.
pub struct WcStatus {
    pub num: u32,
    /// The enum name without the `IBV_WC_` prefix.
    pub name: &'static str,
    /// What `ibv_wc_status_str()` returns for it.
    pub text: &'static str,
    pub entry: Entry,
}

const fn wc(
    num: u32,
    layer: Layer,
    summary: &'static str,
    causes: &'static [&'static str],
    checks: &'static [&'static str],
    related: &'static [&'static str],
) -> WcStatus {
    let (Some(name), Some(text)) = (rdmakit_vocab::wc::name(num), rdmakit_vocab::wc::text(num))
    else {
        panic!("not a status of enum ibv_wc_status");
    };
    WcStatus {
        num,
        name,
        text,
        entry: Entry {
            layer,
            summary,
            causes,
            checks,
            related,
        },
    }
}

const RD_ONLY: &[&str] = &[
    "This status belongs to the Reliable Datagram (RD) transport, which Linux does not \
     implement; seeing it means a provider or firmware bug, or a corrupted ibv_wc \
     (reading a completion that was not filled, a wrong struct layout/ABI)",
];
const RD_CHECKS: &[&str] = &[
    "check that the completion was actually returned by ibv_poll_cq (only the first n entries are valid)",
    "dpkg -l ibverbs-providers libibverbs1   # provider and library from the same rdma-core",
];

/// Every status, indexed by its number.
pub const WC_STATUSES: &[WcStatus] = &[
    wc(0, Application,
        "The work request completed successfully. Not an error.",
        &["Nothing failed; if the application treats this as an error, it is checking the wrong field (wc.status == IBV_WC_SUCCESS is 0)"],
        &["print wc.status with ibv_wc_status_str(wc.status) and wc.opcode"],
        &[]),
    wc(1, Application,
        "A local length check failed: the message did not fit the buffers of the work request.",
        &[
            "Receive side: the incoming SEND is larger than the posted receive buffer (sum of its SGEs)",
            "UD receive: the buffer lacks the 40 extra bytes for the GRH that precede every UD payload",
            "Send side: the message exceeds the port's max_msg_sz, or a UD message exceeds the path MTU",
        ],
        &[
            "compare the sender's message size with the receiver's posted buffer length",
            "ibv_devinfo -v | grep -E 'max_msg_sz|active_mtu'",
            "cat /sys/class/infiniband/<dev>/ports/1/hw_counters/resp_local_length_error   # mlx5",
        ],
        &["wc:2", "wc:11"]),
    wc(2, Application,
        "The work request is inconsistent with the QP it was posted to, detected while processing it.",
        &[
            "Inline data larger than the QP's max_inline_data, or more SGEs than max_send_sge",
            "An opcode the QP type does not support (RDMA READ/atomic on UC, RDMA on UD), or a UD WR without a valid AH",
            "The QP's internal state is broken (posted while moving to ERR, or after a device error)",
        ],
        &[
            "ibv_devinfo -v | grep -E 'max_sge|max_qp_wr'",
            "rdma resource show qp lqpn <qpn>      # QP type and state",
            "dmesg | tail                           # provider warnings",
        ],
        &["wc:1", "wc:5", "ibv_post_send:EINVAL"]),
    wc(3, Application,
        "Reliable Datagram EE context error (not used on Linux).", RD_ONLY, RD_CHECKS, &[]),
    wc(4, Application,
        "A local buffer of the work request is not covered by a valid memory registration with the needed rights.",
        &[
            "The lkey does not cover the address range (buffer outside the MR, wrong length, MR deregistered or re-registered)",
            "The MR belongs to a different protection domain than the QP",
            "A receive buffer or RDMA READ target registered without IBV_ACCESS_LOCAL_WRITE",
            "IOMMU/DMA mapping trouble for the buffer (see the kernel log)",
        ],
        &[
            "check that every SGE's [addr, addr+length) lies inside the MR and uses that MR's lkey",
            "rdma resource show mr                 # MRs, their pd and owner",
            "dmesg | grep -iE 'dma|iommu|DMAR|AMD-Vi'",
        ],
        &["wc:8", "wc:10", "RDK-K007"]),
    wc(5, Application,
        "The QP was already in the error state, so this work request was flushed without being executed. \
         It is a consequence: the cause is the first completion with another error status, or an async event.",
        &[
            "An earlier work request on the same QP failed (find the first non-flush error completion)",
            "The application moved the QP to ERR or destroyed it (normal during teardown)",
            "The remote side disconnected (RDMA CM) or the device hit a fatal error",
        ],
        &[
            "log every non-success completion, not just the last one: the first error is the real one",
            "check ibv_get_async_event for IBV_EVENT_QP_FATAL / DEVICE_FATAL / PORT_ERR",
            "dmesg | tail -30",
        ],
        &["wc:12", "wc:10", "RDK-K008"]),
    wc(6, Application,
        "A memory window bind (or another memory-management work request) failed.",
        &[
            "The MR being bound was not registered with IBV_ACCESS_MW_BIND",
            "The requested window rights exceed the MR's rights, or the range is outside the MR",
            "Wrong memory window type for the operation, or the QP does not support binding",
        ],
        &["ibv_devinfo -v | grep -iE 'mw|device_cap_flags'", "review the access flags of the MR and of the bind"],
        &["wc:4"]),
    wc(7, Hardware,
        "The requester received a response it did not expect (wrong opcode or sequence) from the responder.",
        &[
            "Two QPs talking to the wrong peers (stale QP numbers/PSNs after a reconnect, a restarted peer reusing numbers)",
            "Mismatched transport settings between the ends (RoCE version, MTU)",
            "NIC firmware or switch problems corrupting packets",
        ],
        &[
            "verify the exchanged QPN/PSN/GID on both ends",
            "ibv_devinfo -v | grep -E 'fw_ver|active_mtu|GID'",
            "dmesg | grep -iE 'health|fatal|error'",
        ],
        &["wc:12", "RDK-K008"]),
    wc(8, Application,
        "A protection error on a local buffer while processing an incoming operation (e.g. an RDMA WRITE with immediate targeting a receive buffer).",
        &[
            "The receive buffer's MR lacks IBV_ACCESS_LOCAL_WRITE",
            "The receive buffer is outside its MR or the MR was deregistered",
        ],
        &["check the access flags and bounds of the posted receive buffers", "rdma resource show mr"],
        &["wc:4", "wc:10"]),
    wc(9, Application,
        "The responder found the request invalid.",
        &[
            "The remote QP does not allow the operation: qp_access_flags lack IBV_ACCESS_REMOTE_WRITE/READ/ATOMIC",
            "RDMA READ/atomic with the remote QP's max_dest_rd_atomic = 0",
            "The SEND is longer than the remote receive buffer, or the operation is not supported on the remote QP type",
        ],
        &[
            "check qp_access_flags (INIT) and max_dest_rd_atomic / max_rd_atomic (RTR/RTS) on both ends",
            "cat /sys/class/infiniband/<dev>/ports/1/hw_counters/req_remote_invalid_request   # mlx5",
        ],
        &["wc:10", "wc:1"]),
    wc(10, Application,
        "The responder rejected an RDMA READ/WRITE/atomic: the rkey or the remote address range is not valid for that access.",
        &[
            "Wrong rkey or remote address (stale after the peer re-registered, byte order mixed up in the exchange)",
            "The remote range extends beyond the remote MR",
            "The remote MR lacks IBV_ACCESS_REMOTE_WRITE / REMOTE_READ / REMOTE_ATOMIC",
            "The remote MR was deregistered or its process restarted",
        ],
        &[
            "print addr/rkey/length on both sides and compare with the remote MR",
            "cat /sys/class/infiniband/<dev>/ports/1/hw_counters/req_remote_access_errors   # mlx5",
            "rdma resource show mr   # on the remote host",
        ],
        &["wc:9", "wc:4"]),
    wc(11, Application,
        "The responder could not complete the operation for a reason on its side.",
        &[
            "The remote receive work request failed locally (length or protection error on its receive buffer)",
            "The remote QP went to error while processing the request",
        ],
        &["look at the remote side's completions and async events", "dmesg on the remote host"],
        &["wc:1", "wc:4", "wc:5"]),
    wc(12, Hardware,
        "The remote side never acknowledged: the requester retried retry_cnt times, each after the \
         QP's timeout (4.096 µs × 2^timeout), and gave up. The packets or their ACKs are lost somewhere \
         between the two QPs.",
        &[
            "Remote unreachable: port not ACTIVE, link down or flapping, wrong path",
            "Wrong GID index or RoCE version mismatch between the ends (v1 vs v2, IPv6 link-local vs IPv4 GID)",
            "Remote QP not in RTR/RTS, destroyed, or its process exited (wrong QPN/LID/GID exchanged)",
            "path_mtu larger than what the network carries (switch or peer MTU smaller), so large packets are dropped",
            "Lossy RoCE fabric: PFC/ECN misconfigured, drops under congestion",
            "timeout/retry_cnt too small for the fabric (e.g. timeout 0 or < 14 on big fabrics)",
        ],
        &[
            "ibv_devinfo -v | grep -E 'state|active_mtu|GID'       # on both ends",
            "rdma resource show qp                                   # remote QP exists and is RTS",
            "cat /sys/class/infiniband/<dev>/ports/1/hw_counters/{local_ack_timeout_err,out_of_sequence,packet_seq_err}",
            "ethtool -S <if> | grep -iE 'pause|prio|discard|drop'",
            "rdmakit doctor   # on both ends: port state, GID index, MTU, flaps",
        ],
        &["RDK-H007", "RDK-H006", "RDK-H002", "RDK-H008", "RDK-K009", "wc:13", "ibv_modify_qp:ETIMEDOUT"]),
    wc(13, Application,
        "The receiver kept answering 'Receiver Not Ready': no receive work request was posted when \
         the SEND (or WRITE with immediate) arrived, rnr_retry times in a row.",
        &[
            "The remote posts receives too late or too few (posts after the peer starts sending, or does not re-post)",
            "rnr_retry too small (7 means retry forever) or min_rnr_timer too short",
            "The remote SRQ ran empty (watch IBV_EVENT_SRQ_LIMIT_REACHED)",
        ],
        &[
            "post receives before moving the QP to RTR and before telling the peer to send",
            "cat /sys/class/infiniband/<dev>/ports/1/hw_counters/{rnr_nak_retry_err,out_of_buffer}   # mlx5",
            "check rnr_retry (RTS) and min_rnr_timer (RTR) in the modify_qp attributes",
        ],
        &["wc:12", "ibv_post_recv:ENOMEM"]),
    wc(14, Application,
        "Reliable Datagram domain violation (not used on Linux).", RD_ONLY, RD_CHECKS, &[]),
    wc(15, Application,
        "Reliable Datagram invalid request (not used on Linux).", RD_ONLY, RD_CHECKS, &[]),
    wc(16, Application,
        "The responder aborted the operation.",
        &[
            "The remote QP was moved to error or destroyed while the operation was in progress",
            "The remote receive queue or SRQ was in error",
        ],
        &["look at the remote side's completions and async events", "rdma resource show qp   # on the remote host"],
        &["wc:5", "wc:11"]),
    wc(17, Application,
        "Reliable Datagram EE context number invalid (not used on Linux).", RD_ONLY, RD_CHECKS, &[]),
    wc(18, Application,
        "Reliable Datagram EE context state invalid (not used on Linux).", RD_ONLY, RD_CHECKS, &[]),
    wc(19, Hardware,
        "The device or its driver hit a fatal error; all QPs are in error.",
        &[
            "Firmware/device fatal error (health event, syndrome) or a device reset",
            "PCIe errors (AER) or the device fell off the bus",
            "Driver bug triggered by this workload",
        ],
        &[
            "dmesg -T | grep -iE 'health|fatal|synd|aer|reset' | tail",
            "devlink health show",
            "rdmakit doctor   # RDK-K008 quotes the kernel log lines",
        ],
        &["RDK-K008", "wc:5", "EIO"]),
    wc(20, Hardware,
        "A response was not received in time (used by some providers for responder-side or RD timeouts).",
        &[
            "Peer unreachable or stalled (same family of causes as RETRY_EXC_ERR)",
            "Provider-specific timeout on a stuck operation",
        ],
        &["treat as wc:12: check both ports, GID index and MTU", "dmesg | tail"],
        &["wc:12", "RDK-H002"]),
    wc(21, Kernel,
        "A provider-specific error without a better status; wc.vendor_err carries the detail.",
        &[
            "Provider/firmware-specific failure (print wc.vendor_err and look it up in the vendor's documentation)",
            "Device or driver trouble reported in the kernel log",
            "Unsupported combination of work request features on this device",
        ],
        &["print wc.vendor_err", "dmesg | tail -30", "ibv_devinfo -v | grep fw_ver"],
        &["RDK-K008", "wc:19"]),
    wc(22, Application,
        "A tag-matching operation (tag-matching SRQ, mlx5) failed.",
        &[
            "Tag list operations inconsistent with the SRQ state (adding/removing tags out of sync)",
            "More outstanding tag operations than the SRQ's max_num_tags / max_ops",
        ],
        &["ibv_devinfo -v | grep -i tm_caps", "review the tag-matching add/del/sync sequence"],
        &["wc:23"]),
    wc(23, Application,
        "A tag-matched rendezvous message could not be completed by hardware; software must finish it.",
        &["Expected in tag-matching protocols: the application (e.g. MPI/UCX) must complete the rendezvous in software"],
        &["check that the tag-matching layer (UCX/MPI) handles software rendezvous"],
        &["wc:22"]),
];

/// The status with this number.
pub fn by_num(n: u32) -> Option<&'static WcStatus> {
    WC_STATUSES.iter().find(|w| w.num == n)
}

/// The status for "RETRY_EXC_ERR", "WC_RETRY_EXC_ERR", "IBV_WC_RETRY_EXC_ERR" (any case),
/// or for the text `ibv_wc_status_str()` prints ("transport retry counter exceeded").
pub fn by_name(s: &str) -> Option<&'static WcStatus> {
    rdmakit_vocab::wc::by_name(s).and_then(by_num)
}
