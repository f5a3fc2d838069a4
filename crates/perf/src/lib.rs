//! `rdmakit-perf`: perftest-shaped RDMA benchmarks over the rdmakit Verbs API.
//!
//! Tests: `write-bw`, `read-bw`, `send-bw`, `atomic-bw`, `write-lat`,
//! `read-lat`, `send-lat`, over RC. A server ([`run_server`]) waits on a TCP
//! port (default [`DEFAULT_PORT`], 18515 as perftest); a client
//! ([`run_client`]) connects, sends the run parameters, and both exchange
//! their QP information as one line each (`LID:QPN:PSN:RKey:VAddr:GID`, hex,
//! see [`QpInfo`]). Then, per message size, a small line protocol over the
//! same TCP connection keeps both sides in step (`SIZE n` → `GO`, the run,
//! `DONE count` → `OK` or `BAD why`, and `END`).
//!
//! Each side busy-polls its CQ, or with `use_event` ([`ClientOpts`],
//! [`ServerOpts`]; perftest's `-e`) sleeps on the CQ's completion channel
//! while it waits: a choice of that side alone, never in the exchanged
//! parameters, which the header reports.
//!
//! Results are data ([`Report`]): bandwidth rows (BW peak / BW average in
//! MB/sec where MB = 2^20 bytes, as perftest; MsgRate in Mpps) and latency
//! rows (t_min, t_max, t_typical = median, t_avg, t_stdev, 99% and 99.9%
//! percentiles in usec; like perftest, `send-lat` and `write-lat` report half
//! the round trip, `read-lat` the full READ). Plus the control-path timings
//! (reg_mr, create_cq, create_qp, each modify_qp, destroy_qp, dereg_mr) that
//! no common tool reports.
#![warn(missing_docs)]

mod engine;
mod error;
pub mod options;
mod proto;
pub mod render;
mod stats;

pub use engine::{
    client_on, run_client, run_server, serve_on, ClientOpts, HeaderHook, Progress, ServerOpts,
    Step, PERMILLE,
};
pub use error::PerfError;
pub use proto::{Params, QpInfo};
pub use stats::{bw_row, lat_row, BwResult, LatResult};

use serde::{Deserialize, Serialize};

/// perftest's default TCP port for the QP information exchange.
pub const DEFAULT_PORT: u16 = 18515;

/// Largest message size of an `-a` sweep (2^23, as perftest).
pub const SWEEP_MAX: usize = 1 << 23;

/// One of the benchmarks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Test {
    /// RDMA WRITE bandwidth.
    WriteBw,
    /// RDMA READ bandwidth.
    ReadBw,
    /// SEND bandwidth.
    SendBw,
    /// Fetch-and-add bandwidth.
    AtomicBw,
    /// RDMA WRITE ping-pong latency (half round trip).
    WriteLat,
    /// RDMA READ latency (full READ).
    ReadLat,
    /// SEND ping-pong latency (half round trip).
    SendLat,
}

impl Test {
    /// Every test, in CLI order.
    pub const ALL: [Test; 7] = [
        Test::WriteBw,
        Test::ReadBw,
        Test::SendBw,
        Test::AtomicBw,
        Test::WriteLat,
        Test::ReadLat,
        Test::SendLat,
    ];

    /// The CLI name (`write-bw`).
    pub const fn name(self) -> &'static str {
        match self {
            Test::WriteBw => "write-bw",
            Test::ReadBw => "read-bw",
            Test::SendBw => "send-bw",
            Test::AtomicBw => "atomic-bw",
            Test::WriteLat => "write-lat",
            Test::ReadLat => "read-lat",
            Test::SendLat => "send-lat",
        }
    }

    /// Parses a CLI name (also perftest's `ib_write_bw` / `write_bw` forms).
    pub fn parse(s: &str) -> Option<Test> {
        let s = s.trim_start_matches("ib_").replace('_', "-");
        Test::ALL.into_iter().find(|t| t.name() == s)
    }

    /// A bandwidth test.
    pub const fn is_bw(self) -> bool {
        matches!(
            self,
            Test::WriteBw | Test::ReadBw | Test::SendBw | Test::AtomicBw
        )
    }

    /// perftest's title line (`RDMA_Write BW Test`).
    pub const fn title(self) -> &'static str {
        match self {
            Test::WriteBw => "RDMA_Write BW Test",
            Test::ReadBw => "RDMA_Read BW Test",
            Test::SendBw => "Send BW Test",
            Test::AtomicBw => "Atomic FETCH_AND_ADD BW Test",
            Test::WriteLat => "RDMA_Write Latency Test",
            Test::ReadLat => "RDMA_Read Latency Test",
            Test::SendLat => "Send Latency Test",
        }
    }

    /// Default iterations (perftest: 5000 for bandwidth, 1000 for latency).
    pub const fn default_iters(self) -> u64 {
        if self.is_bw() {
            5000
        } else {
            1000
        }
    }

    /// Default TX depth (perftest: 128 for bandwidth, 1 for latency).
    pub const fn default_tx_depth(self) -> u32 {
        if self.is_bw() {
            128
        } else {
            1
        }
    }

    /// Message sizes of an `-a` sweep up to `max` (atomics: always 8).
    pub fn sweep_sizes(self, max: usize) -> Vec<usize> {
        if self == Test::AtomicBw {
            return vec![8];
        }
        let mut v = Vec::new();
        let mut s = 2usize;
        while s <= max.min(SWEEP_MAX) {
            v.push(s);
            s *= 2;
        }
        v
    }
}

impl std::fmt::Display for Test {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Times of the control-path verbs on this side, in usec.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ControlTimings {
    /// `ibv_reg_mr` of the data buffer (allocation included).
    pub reg_mr: f64,
    /// `ibv_create_cq`.
    pub create_cq: f64,
    /// `ibv_create_qp`.
    pub create_qp: f64,
    /// `ibv_modify_qp` RESET → INIT.
    pub modify_qp_init: f64,
    /// `ibv_modify_qp` INIT → RTR.
    pub modify_qp_rtr: f64,
    /// `ibv_modify_qp` RTR → RTS.
    pub modify_qp_rts: f64,
    /// `ibv_destroy_qp`.
    pub destroy_qp: f64,
    /// `ibv_dereg_mr` (free included).
    pub dereg_mr: f64,
    /// Bytes registered.
    pub mr_bytes: usize,
}

/// The transport counters of this side's QP on the soft NIC (a real NIC's
/// are in its hw_counters: `rdmakit stat`). Retransmissions or drops here
/// explain a bandwidth or latency figure.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QpCounters {
    /// Packets sent (requests, responses, ACKs).
    pub tx_packets: u64,
    /// Packets received.
    pub rx_packets: u64,
    /// Request packets sent again (timeouts, sequence NAKs).
    pub retransmitted: u64,
    /// ACK timeouts (retries).
    pub timeouts: u64,
    /// ACK probes: timeouts after an unsignaled tail, answered (no retry).
    pub ack_probes: u64,
    /// ACK and NAK packets sent.
    pub acks_sent: u64,
    /// NAKs received.
    pub naks_received: u64,
    /// Duplicate requests received.
    pub duplicates: u64,
    /// Packets dropped (sequence, malformed, resources).
    pub dropped: u64,
    /// Same-host requests sent or executed: messages moved by one
    /// cross-memory copy instead of datagrams (docs/soft-nic.md, "Same-host
    /// data path").
    #[serde(default)]
    pub same_host: u64,
    /// Same-host requests the peer declined (the QP then sent packets).
    #[serde(default)]
    pub same_host_fallbacks: u64,
    /// Its packets went through a same-host ring, not the socket.
    #[serde(default)]
    pub ring: bool,
}

impl QpCounters {
    /// The data path this side's QP used: `same-host` when its messages
    /// went by cross-memory copy and the peer never declined, else `udp`
    /// (datagrams); `+rings` when its packets went through a same-host
    /// ring instead of the socket.
    pub fn data_path(&self) -> &'static str {
        match (
            self.same_host > 0 && self.same_host_fallbacks == 0,
            self.ring,
        ) {
            (true, true) => "same-host+rings",
            (true, false) => "same-host",
            (false, true) => "rings",
            (false, false) => "udp",
        }
    }
}

impl From<&rdmakit_verbs::Stats> for QpCounters {
    fn from(s: &rdmakit_verbs::Stats) -> QpCounters {
        QpCounters {
            tx_packets: s.tx_packets,
            rx_packets: s.rx_packets,
            retransmitted: s.retransmitted,
            timeouts: s.timeouts,
            ack_probes: s.ack_probes,
            acks_sent: s.acks_sent + s.naks_sent.iter().sum::<u64>() + s.rnr_naks_sent,
            naks_received: s.naks_received + s.rnr_naks_received,
            duplicates: s.duplicates,
            dropped: s.dropped,
            same_host: s.same_host_sent + s.same_host_executed,
            same_host_fallbacks: s.same_host_fallbacks,
            ring: false,
        }
    }
}

/// What perftest prints in its header block.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// `client` or `server`.
    pub role: String,
    /// The test.
    pub test: String,
    /// perftest-style title.
    pub title: String,
    /// Device name.
    pub device: String,
    /// Transport type (`IB` for every RDMA transport, as perftest).
    pub transport: String,
    /// Connection type (`RC`).
    pub connection: String,
    /// Path MTU in bytes.
    pub mtu: u32,
    /// Link type (`Ethernet` for RoCE).
    pub link_type: String,
    /// GID index.
    pub gid_index: u32,
    /// Max inline data.
    pub inline: u32,
    /// TX depth.
    pub tx_depth: u32,
    /// RX depth (SEND tests).
    pub rx_depth: u32,
    /// Sends per signaled send (CQ moderation as applied).
    pub cq_mod: u64,
    /// Iterations per size (0 in duration mode).
    pub iterations: u64,
    /// Duration per size in seconds (duration mode).
    pub duration: Option<f64>,
    /// Data validation on.
    pub validate: bool,
    /// This side sleeps on CQ events (`-e`) instead of busy polling
    /// (absent from reports written before the flag: false).
    #[serde(default)]
    pub use_event: bool,
    /// This side's QP.
    pub local: QpInfo,
    /// The peer's QP.
    pub remote: QpInfo,
}

/// One row of the result table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Row {
    /// A bandwidth row.
    Bw(BwResult),
    /// A latency row.
    Lat(LatResult),
}

/// A finished run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The header block.
    pub header: Header,
    /// One row per message size (the client measures; the server's rows are empty).
    pub results: Vec<Row>,
    /// Control-path timings of this side.
    pub control: ControlTimings,
    /// Data validation outcome (None when validation is off).
    pub validated: Option<bool>,
    /// This side's QP counters, on the soft NIC.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qp_counters: Option<QpCounters>,
    /// This side's soft NIC transport counters at the end of the run,
    /// summed over its QPs, by name (`retransmitted_packets`,
    /// `ack_timeouts`, ...): the context was opened for the run, so they
    /// are what the run moved. Empty on other providers.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub device_counters: std::collections::BTreeMap<String, u64>,
}

impl PerfError {
    /// An error of a failed completion.
    pub fn completion(wc: &rdmakit_verbs::Wc) -> PerfError {
        let name = status_name(wc.status);
        let hint = match wc.status {
            rdmakit_verbs::WcStatus::RetryExcErr => {
                ": the peer stopped acknowledging (gone, unreachable, or a wrong GID); the QP is now in the error state".to_string()
            }
            rdmakit_verbs::WcStatus::RnrRetryExcErr => {
                ": the peer had no receive posted for too long".to_string()
            }
            rdmakit_verbs::WcStatus::RemAccessErr => {
                ": the peer refused the rkey/address/rights".to_string()
            }
            _ => String::new(),
        };
        PerfError::Completion {
            name,
            code: wc.status as u32,
            wr_id: wc.wr_id,
            vendor_err: wc.vendor_err,
            hint,
        }
    }
}

/// `RetryExcErr` → `RETRY_EXC_ERR`: libibverbs' `IBV_WC_` name, from
/// [`rdmakit_vocab::wc`].
pub fn status_name(s: rdmakit_verbs::WcStatus) -> String {
    // Every variant of the enum is a status of `enum ibv_wc_status`.
    rdmakit_vocab::wc::name(s as u32)
        .unwrap_or("UNKNOWN")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_sweeps() {
        for t in Test::ALL {
            assert_eq!(Test::parse(t.name()), Some(t));
        }
        assert_eq!(Test::parse("ib_write_bw"), Some(Test::WriteBw));
        assert_eq!(Test::parse("nope"), None);
        assert_eq!(Test::WriteBw.sweep_sizes(SWEEP_MAX).len(), 23);
        assert_eq!(Test::SendLat.sweep_sizes(16), vec![2, 4, 8, 16]);
        assert_eq!(Test::AtomicBw.sweep_sizes(1 << 20), vec![8]);
        assert_eq!(
            status_name(rdmakit_verbs::WcStatus::RetryExcErr),
            "RETRY_EXC_ERR"
        );
    }

    #[test]
    fn status_names_match_the_variant_names() {
        // The names this crate derived from `{:?}` before the vocabulary existed.
        fn from_debug(s: rdmakit_verbs::WcStatus) -> String {
            let mut out = String::new();
            for (i, c) in format!("{s:?}").chars().enumerate() {
                if c.is_ascii_uppercase() && i > 0 {
                    out.push('_');
                }
                out.push(c.to_ascii_uppercase());
            }
            out
        }
        for (i, s) in rdmakit_verbs::WcStatus::ALL.into_iter().enumerate() {
            assert_eq!(s as usize, i);
            assert_eq!(status_name(s), from_debug(s));
        }
    }
}
