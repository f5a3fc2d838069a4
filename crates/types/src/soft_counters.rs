//! The counters the soft NIC publishes for a device (its port 1), by name:
//! what its registry writes (crates/soft) and what host facts read back from
//! a live host or a bundle (crates/host), so both use one list.

/// The port's packets, with the kernel's `ports/<n>/counters` names.
pub const PORT: [&str; 2] = ["port_xmit_packets", "port_rcv_packets"];

/// The transport counters summed over the QPs: mlx5's `hw_counters` names
/// (what `rdma statistic` shows of a ConnectX port), and
/// `retransmitted_packets`, the soft NIC's own (mlx5 counts no
/// retransmitted packets, only their causes).
pub const TRANSPORT: [&str; 10] = [
    "retransmitted_packets",
    "local_ack_timeout_err",
    "out_of_sequence",
    "packet_seq_err",
    "duplicate_request",
    "rnr_nak_retry_err",
    "np_ecn_marked_roce_packets",
    "np_cnp_sent",
    "rp_cnp_handled",
    "rp_cnp_ignored",
];

/// Every published counter: [`PORT`], then [`TRANSPORT`].
pub const ALL: [&str; PORT.len() + TRANSPORT.len()] = {
    let mut names = [""; PORT.len() + TRANSPORT.len()];
    let mut i = 0;
    while i < names.len() {
        names[i] = if i < PORT.len() {
            PORT[i]
        } else {
            TRANSPORT[i - PORT.len()]
        };
        i += 1;
    }
    names
};
