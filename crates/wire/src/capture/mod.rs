//! Decoding of packet captures (pcap / pcapng) into a [`CaptureReport`].
//!
//! Frames are taken from Ethernet (with any number of VLAN tags), Linux cooked
//! (SLL and SLL2), raw IP and BSD loopback link types; a RoCEv2 packet is UDP to
//! port 4791 over IPv4 or IPv6. For each one the report gives the transport
//! fields, a one-line summary and whether the ICRC is right (Wireshark decodes
//! RoCE but does not check the ICRC), and it flags protocol anomalies: NAKs with
//! their code, RNR NAKs, PSN gaps and retransmissions per QP and direction, and
//! the connection manager's exchanges that failed: requests left unanswered,
//! requests sent again, rejects (module `exchanges`).
//!
//! Each packet also carries its IP DSCP and ECN codepoint; the report counts
//! them, lists the congestion notification packets (CNPs) per flow and flags
//! CE-marked packets no CNP answered (module `congestion`).
//!
//! Garbage in gives a report with warnings, or a [`CaptureError`] when the file
//! header itself is not a capture: never a panic.

mod analyze;
mod congestion;
mod exchanges;
mod file;
mod gso;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::IpAddr;

use serde::Serialize;

pub use self::congestion::{CnpFlow, Ecn, CNP_WINDOW_NS};
pub use self::file::{read_frames, CaptureFormat, CapturedFrame, Frames};
use crate::aeth::{AethKind, NakCode};
use crate::frame::{self, Datagram};
use crate::opcode::OpCode;
use crate::{bth, cnp, ipv4, ipv6, udp, ROCEV2_UDP_PORT};

/// Why a byte string could not be read as a capture at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CaptureError {
    /// Shorter than the file header.
    #[error("file too short for a pcap or pcapng header")]
    TooShort,
    /// The first 4 bytes are no pcap or pcapng magic.
    #[error("not a pcap or pcapng file (magic 0x{0:08x})")]
    UnknownFormat(u32),
    /// A pcap major version other than 2.
    #[error("unsupported pcap version {0}")]
    UnsupportedVersion(u16),
    /// A broken file header.
    #[error("bad {0}")]
    BadHeader(&'static str),
}

/// Everything [`decode_capture`] found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaptureReport {
    /// Container format.
    pub format: CaptureFormat,
    /// Link-layer types seen (LINKTYPE_* numbers), sorted.
    pub link_types: Vec<u32>,
    /// Frames in the file.
    pub frames: usize,
    /// Frames that are RoCEv2 (UDP to port 4791).
    pub roce_packets: usize,
    /// Frames that are something else.
    pub other_frames: usize,
    /// RoCE packets whose ICRC is right.
    pub icrc_valid: usize,
    /// RoCE packets whose ICRC is wrong.
    pub icrc_invalid: usize,
    /// RoCE packets whose ICRC could not be checked (cut by the snap length, or
    /// too short).
    pub icrc_unchecked: usize,
    /// Packets per opcode name (e.g. `RC_SEND_ONLY`).
    pub opcode_counts: BTreeMap<String, usize>,
    /// Anomalies per kind.
    pub anomaly_counts: BTreeMap<String, usize>,
    /// One record per RoCE packet, in capture order.
    pub packets: Vec<PacketRecord>,
    /// Protocol anomalies, in capture order.
    pub anomalies: Vec<Anomaly>,
    /// One summary per direction of each QP (source, destination, destination
    /// QP), in order of first appearance.
    pub flows: Vec<FlowSummary>,
    /// Problems with the file itself (a damaged tail, unknown interfaces, ...).
    pub warnings: Vec<String>,
    /// What the capture cannot settle: a CM request whose answer time had
    /// not run out when the capture ended; CE-marked packets whose receiver's
    /// direction the capture does not hold.
    pub notes: Vec<String>,
    /// Frames decoded: fewer than [`CaptureReport::frames`] when the packet
    /// budget ([`decode_capture_with`]) ended the decoding early.
    pub decoded_frames: usize,
    /// RoCE packets per ECN codepoint (`not_ect`, `ect1`, `ect0`, `ce`; all
    /// four, zeros included).
    pub ecn_counts: BTreeMap<String, usize>,
    /// RoCE packets per IP DSCP (0..=63), the ones seen.
    pub dscp_counts: BTreeMap<u8, usize>,
    /// The CNPs per notification point and notified QP, in order of first
    /// appearance.
    pub cnp_flows: Vec<CnpFlow>,
}

impl CaptureReport {
    /// Whether the packet budget left frames undecoded.
    pub fn incomplete(&self) -> bool {
        self.decoded_frames < self.frames
    }
}

/// One RoCEv2 packet of a capture.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PacketRecord {
    /// 1-based frame number in the file (as tshark counts).
    pub index: usize,
    /// Capture time in nanoseconds since the Unix epoch, when known.
    pub timestamp_ns: Option<u64>,
    /// IP source.
    pub src: IpAddr,
    /// IP destination.
    pub dst: IpAddr,
    /// UDP source port (flow entropy).
    pub src_port: u16,
    /// BTH opcode byte.
    pub opcode: u8,
    /// Opcode name (`RC_SEND_ONLY`, or `OPCODE_0x15` when unknown).
    pub opcode_name: String,
    /// BTH destination QP.
    pub qpn: u32,
    /// BTH PSN.
    pub psn: u32,
    /// BTH AckReq.
    pub ack_req: bool,
    /// Extension headers, one short text each (e.g. `RETH va 0x... rkey 0x4d6 len 8192`).
    pub headers: Vec<String>,
    /// Payload length (without pad), when the packet parsed.
    pub payload_len: Option<usize>,
    /// Pad count from the BTH.
    pub pad: u8,
    /// ICRC right? `None` when it could not be checked.
    pub icrc_valid: Option<bool>,
    /// Why the packet did not parse completely, if it did not.
    pub error: Option<String>,
    /// The one-line summary (what `render_human` prints, before the DSCP and
    /// ECN).
    pub summary: String,
    /// IP DSCP (the TOS byte's or traffic class's high six bits).
    pub dscp: u8,
    /// ECN codepoint (their low two bits).
    pub ecn: Ecn,
}

/// Traffic of one direction of one QP: packets from `src` to `dst` addressed to
/// QP `qpn`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FlowSummary {
    /// IP source.
    pub src: IpAddr,
    /// IP destination.
    pub dst: IpAddr,
    /// Destination QP.
    pub qpn: u32,
    /// RoCE packets.
    pub packets: usize,
    /// Payload bytes (packets that parsed).
    pub payload_bytes: u64,
    /// Frame number of the first packet.
    pub first_index: usize,
    /// Frame number of the last packet.
    pub last_index: usize,
    /// Request packets (not ACKs or READ responses; those carry the PSNs of the
    /// other direction's requests).
    pub requests: usize,
    /// PSN of the first request packet.
    pub first_request_psn: Option<u32>,
    /// PSN of the last request packet.
    pub last_request_psn: Option<u32>,
    /// Anomalies found on this flow.
    pub anomalies: usize,
    /// Packets marked CE (congestion experienced) on the way.
    pub ce_packets: usize,
}

/// The kind of a protocol anomaly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AnomalyKind {
    /// The ICRC is wrong: a receiver drops the packet silently.
    IcrcInvalid,
    /// The RoCE packet does not parse (truncated, bad lengths, IP options, ...).
    Malformed,
    /// A BTH opcode outside the RC/UC/UD table (RD, vendor, newer extensions such
    /// as FLUSH or ATOMIC_WRITE). CNPs (0x81) are decoded, not flagged.
    UnknownOpcode,
    /// A NAK (PSN sequence error, invalid request, remote access or operational error).
    Nak,
    /// A receiver-not-ready NAK.
    RnrNak,
    /// Request PSNs skipped forward on a QP: packets lost before the capture point.
    PsnGap,
    /// A request PSN at or below one already seen: a retransmission.
    Retransmission,
    /// A soft-NIC same-host request (vendor opcode 0xC0-0xC2) in a UDP
    /// datagram: they travel only in same-host rings between processes the
    /// kernel identified, and every rdmakit receiver drops them from the
    /// network. From an rdmakit older than the authenticated path, or an
    /// attempt to reach a process's memory from the network.
    SameHostOnWire,
    /// A CM request (REQ, REP, DREQ, SIDR_REQ) with no answer within the
    /// time it allows (or, when it announces none, in the rest of the capture).
    CmUnanswered,
    /// A CM message sent again with the same transaction ID.
    CmRetry,
    /// A CM REJ (any reason), or a SIDR_REP whose status is not success.
    CmReject,
    /// CE-marked data packets of a flow that no CNP from their receiver
    /// answered within the capture: the sender never learned of the
    /// congestion (one per flow, at the first such packet).
    CeWithoutCnp,
}

impl AnomalyKind {
    /// snake_case name, as in JSON.
    pub fn name(self) -> &'static str {
        match self {
            AnomalyKind::IcrcInvalid => "icrc_invalid",
            AnomalyKind::Malformed => "malformed",
            AnomalyKind::UnknownOpcode => "unknown_opcode",
            AnomalyKind::Nak => "nak",
            AnomalyKind::RnrNak => "rnr_nak",
            AnomalyKind::PsnGap => "psn_gap",
            AnomalyKind::Retransmission => "retransmission",
            AnomalyKind::SameHostOnWire => "same_host_on_wire",
            AnomalyKind::CmUnanswered => "cm_unanswered",
            AnomalyKind::CmRetry => "cm_retry",
            AnomalyKind::CmReject => "cm_reject",
            AnomalyKind::CeWithoutCnp => "ce_without_cnp",
        }
    }
}

/// A protocol anomaly found at one packet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Anomaly {
    /// What it is.
    pub kind: AnomalyKind,
    /// Frame number of the packet.
    pub index: usize,
    /// IP source of the packet.
    pub src: IpAddr,
    /// IP destination of the packet.
    pub dst: IpAddr,
    /// Destination QP of the packet.
    pub qpn: u32,
    /// PSN of the packet.
    pub psn: u32,
    /// NAK code, for [`AnomalyKind::Nak`].
    pub nak_code: Option<NakCode>,
    /// RNR timer code, for [`AnomalyKind::RnrNak`].
    pub rnr_timer: Option<u8>,
    /// Human explanation (expected PSN, number missing, ...).
    pub detail: String,
    /// The connection manager's exchange, for the `cm_*` kinds.
    pub cm: Option<CmAnomaly>,
}

/// The CM exchange an anomaly is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CmAnomaly {
    /// The message (`REQ`, `REJ`, `SIDR_REQ`, ...).
    pub message: String,
    /// Its transaction ID, `0x` and 16 hex digits.
    pub tid: String,
    /// Frame numbers: every send of an unanswered request; the first and
    /// the repeated send of a retry; the REJ or SIDR_REP itself.
    pub frames: Vec<usize>,
    /// REJ reason or SIDR_REP status.
    pub reason: Option<u16>,
    /// Its name (`timeout`, `invalid service ID`, `no QP`, ...).
    pub reason_name: Option<String>,
}

/// The RoCE packets `rdmakit pcap` decodes in one run: every packet's record
/// is kept (about 1.4 KB each once rendered as JSON), so 100,000 of them take
/// ~140 MB; a larger capture is decoded up to there and says how to decode
/// the rest ([`decode_capture_with`]).
pub const MAX_PACKETS: usize = 100_000;

/// Decode a pcap or pcapng capture held in memory.
///
/// # Errors
/// [`CaptureError`] when the file header is not a supported capture header.
/// Damage after the header ends decoding with a warning in the report.
pub fn decode_capture(bytes: &[u8]) -> Result<CaptureReport, CaptureError> {
    decode_capture_with(bytes, usize::MAX)
}

/// [`decode_capture`] that stops after the frame that brings the RoCE
/// packets to `max_packets`: every packet's record is kept, so this bounds
/// what a capture of millions of packets costs. The report then says how
/// many frames it decoded ([`CaptureReport::incomplete`]) and a warning
/// says how to decode the rest.
///
/// # Errors
/// As [`decode_capture`].
pub fn decode_capture_with(
    bytes: &[u8],
    max_packets: usize,
) -> Result<CaptureReport, CaptureError> {
    let frames = file::read_frames(bytes)?;
    let mut report = CaptureReport {
        format: frames.format,
        link_types: Vec::new(),
        frames: frames.frames.len(),
        roce_packets: 0,
        other_frames: 0,
        icrc_valid: 0,
        icrc_invalid: 0,
        icrc_unchecked: 0,
        opcode_counts: BTreeMap::new(),
        anomaly_counts: BTreeMap::new(),
        packets: Vec::new(),
        anomalies: Vec::new(),
        flows: Vec::new(),
        warnings: frames.warnings,
        notes: Vec::new(),
        decoded_frames: 0,
        ecn_counts: BTreeMap::new(),
        dscp_counts: BTreeMap::new(),
        cnp_flows: Vec::new(),
    };
    let mut tracker = analyze::Tracker::default();
    let mut cm = exchanges::Tracker::default();
    let end_ns = frames.frames.iter().filter_map(|f| f.timestamp_ns).max();
    let (mut gso_size, mut gso_frames, mut gso_packets) = (None, 0usize, 0usize);
    for f in &frames.frames {
        if report.roce_packets >= max_packets {
            report.warnings.push(format!(
                "decoded the first {} of {} frames ({} RoCE packets, the most one run keeps): \
                 decode the rest in parts (editcap -r FILE part.pcap {}-{})",
                report.decoded_frames,
                report.frames,
                report.roce_packets,
                report.decoded_frames + 1,
                report.frames
            ));
            break;
        }
        report.decoded_frames += 1;
        if !report.link_types.contains(&f.link_type) {
            report.link_types.push(f.link_type);
        }
        let Some(ip) = link_payload(f.link_type, f.data) else {
            report.other_frames += 1;
            continue;
        };
        // A sender's UDP GSO datagram, captured before segmentation: its
        // RoCE packets one by one.
        if let Some((size, segments)) = gso::split(ip, gso_size) {
            gso_size = Some(size);
            gso_frames += 1;
            for seg in &segments {
                let sf = CapturedFrame {
                    data: seg,
                    orig_len: u32::try_from(seg.len()).unwrap_or(u32::MAX),
                    ..*f
                };
                if let Some((record, datagram)) = decode_ip(&sf, seg, &mut report.anomalies) {
                    account(
                        &mut report,
                        &mut tracker,
                        &mut cm,
                        record,
                        datagram.as_ref(),
                    );
                    gso_packets += 1;
                }
            }
            continue;
        }
        let Some((record, datagram)) = decode_ip(f, ip, &mut report.anomalies) else {
            report.other_frames += 1;
            continue;
        };
        account(
            &mut report,
            &mut tracker,
            &mut cm,
            record,
            datagram.as_ref(),
        );
    }
    cm.finish(end_ns, &mut report.anomalies, &mut report.notes);
    restart_notes(tracker.restarts(), &mut report.notes);
    congestion::judge(
        &report.packets,
        end_ns,
        &mut report.anomalies,
        &mut report.notes,
    );
    (report.ecn_counts, report.dscp_counts) = congestion::counts(&report.packets);
    report.cnp_flows = congestion::cnp_flows(&report.packets);
    // In capture order: a request found unanswered at the end is reported
    // at its frame.
    report.anomalies.sort_by_key(|a| a.index);
    if gso_frames > 0 {
        report.warnings.push(format!(
            "{gso_frames} frame(s) were UDP GSO datagrams (a batching sender's send seen before \
             segmentation, e.g. on lo): split into {gso_packets} RoCE packets by the segment \
             size at which every ICRC is valid"
        ));
    }
    report.link_types.sort_unstable();
    report.flows = flows(&report.packets, &report.anomalies);
    for a in &report.anomalies {
        *report
            .anomaly_counts
            .entry(a.kind.name().to_string())
            .or_default() += 1;
    }
    Ok(report)
}

/// At most this many restarted flows are named one by one in the notes.
const MAX_RESTART_NOTES: usize = 16;

/// One note per RC flow that started over without a CM exchange (a QPN
/// reused by a connection set up out of band), the rest counted.
fn restart_notes(restarts: &[analyze::Restart], notes: &mut Vec<String>) {
    for r in restarts.iter().take(MAX_RESTART_NOTES) {
        notes.push(format!(
            "#{} {} > {} qp 0x{:06x}: a new connection from PSN {} (a reused QPN, \
             no CM exchange in the capture); its PSNs are judged afresh",
            r.index, r.src, r.dst, r.qpn, r.psn
        ));
    }
    if restarts.len() > MAX_RESTART_NOTES {
        notes.push(format!(
            "{} more flows started over as new connections",
            restarts.len() - MAX_RESTART_NOTES
        ));
    }
}

/// Counts one RoCE packet in the report and feeds the flow and CM trackers.
fn account(
    report: &mut CaptureReport,
    tracker: &mut analyze::Tracker,
    cm: &mut exchanges::Tracker,
    record: PacketRecord,
    datagram: Option<&Datagram<'_>>,
) {
    if crate::cma::is_cma_opcode(record.opcode) && record.error.is_none() {
        tracker.forget(&record);
    } else {
        tracker.observe(&record, datagram.map(|d| &d.roce), &mut report.anomalies);
    }
    // A CM MAD with a valid ICRC (a receiver drops the others).
    if let (Some(d), Some(true) | None) = (datagram, record.icrc_valid) {
        if let Some(m) = cm_message(&d.roce) {
            let at = exchanges::Seen {
                index: record.index,
                ts: record.timestamp_ns,
                src: record.src,
                dst: record.dst,
                qpn: record.qpn,
                psn: record.psn,
            };
            tracker.connecting(&record, &m);
            cm.observe(&at, &m, &mut report.anomalies);
        }
    }
    report.roce_packets += 1;
    match record.icrc_valid {
        Some(true) => report.icrc_valid += 1,
        Some(false) => report.icrc_invalid += 1,
        None => report.icrc_unchecked += 1,
    }
    *report
        .opcode_counts
        .entry(record.opcode_name.clone())
        .or_default() += 1;
    report.packets.push(record);
}

/// Render a report for a terminal: a header, one tcpdump-like line per RoCE
/// packet, then opcode counts, ICRC counts and anomalies.
pub fn render_human(report: &CaptureReport) -> String {
    let mut s = String::new();
    let links: Vec<String> = report
        .link_types
        .iter()
        .map(|&l| format!("{}({l})", link_type_name(l)))
        .collect();
    let _ = writeln!(
        s,
        "{} capture, link type {}: {} frames, {} RoCEv2 packets, {} other",
        match report.format {
            CaptureFormat::Pcap => "pcap",
            CaptureFormat::Pcapng => "pcapng",
        },
        if links.is_empty() {
            "-".to_string()
        } else {
            links.join(", ")
        },
        report.frames,
        report.roce_packets,
        report.other_frames
    );
    let width = report.frames.to_string().len();
    for p in &report.packets {
        let ts = p.timestamp_ns.map_or_else(|| "-".repeat(15), format_time);
        let tos = match p.ecn {
            Ecn::Ce => format!("dscp {} CE (congestion experienced)", p.dscp),
            e => format!("dscp {} {}", p.dscp, e.label()),
        };
        let _ = writeln!(s, "{:>width$} {ts} {}, {tos}", p.index, p.summary);
    }
    let counts: Vec<String> = report
        .opcode_counts
        .iter()
        .map(|(k, v)| format!("{k} x{v}"))
        .collect();
    let _ = writeln!(
        s,
        "opcodes: {}",
        if counts.is_empty() {
            "none".to_string()
        } else {
            counts.join(", ")
        }
    );
    let ecn: Vec<String> = Ecn::ALL
        .iter()
        .filter_map(|e| {
            let n = report.ecn_counts.get(e.name()).copied().unwrap_or(0);
            (n > 0).then(|| format!("{} x{n}", e.label()))
        })
        .collect();
    let dscp: Vec<String> = report
        .dscp_counts
        .iter()
        .map(|(d, n)| format!("{d} x{n}"))
        .collect();
    let _ = writeln!(
        s,
        "ecn: {}; dscp: {}",
        if ecn.is_empty() {
            "none".to_string()
        } else {
            ecn.join(", ")
        },
        if dscp.is_empty() {
            "none".to_string()
        } else {
            dscp.join(", ")
        }
    );
    for fl in &report.flows {
        let ce = if fl.ce_packets > 0 {
            format!(", {} CE-marked", fl.ce_packets)
        } else {
            String::new()
        };
        let _ = writeln!(
            s,
            "flow {} > {} qp 0x{:06x}: {} ({}{}), {} payload bytes{ce}, {}",
            fl.src,
            fl.dst,
            fl.qpn,
            plural(fl.packets, "packet", "packets"),
            plural(fl.requests, "request", "requests"),
            match (fl.first_request_psn, fl.last_request_psn) {
                (Some(a), Some(b)) if a == b => format!(", psn {a}"),
                (Some(a), Some(b)) => format!(", psn {a}..{b}"),
                _ => String::new(),
            },
            fl.payload_bytes,
            plural(fl.anomalies, "anomaly", "anomalies")
        );
    }
    for c in &report.cnp_flows {
        let _ = writeln!(
            s,
            "cnp {} > {} qp 0x{:06x}: {}, frames {}..{}",
            c.src,
            c.dst,
            c.qpn,
            plural(c.cnps, "CNP", "CNPs"),
            c.first_index,
            c.last_index
        );
    }
    let _ = writeln!(
        s,
        "ICRC: {} valid, {} invalid, {} not checked",
        report.icrc_valid, report.icrc_invalid, report.icrc_unchecked
    );
    if report.anomalies.is_empty() {
        let _ = writeln!(s, "anomalies: none");
    } else {
        let counts: Vec<String> = report
            .anomaly_counts
            .iter()
            .map(|(k, v)| format!("{k} x{v}"))
            .collect();
        let _ = writeln!(s, "anomalies: {}", counts.join(", "));
        for a in &report.anomalies {
            let _ = writeln!(
                s,
                "  #{} {} {} > {} qp 0x{:06x} psn {}: {}",
                a.index,
                a.kind.name(),
                a.src,
                a.dst,
                a.qpn,
                a.psn,
                a.detail
            );
        }
    }
    for n in &report.notes {
        let _ = writeln!(s, "note: {n}");
    }
    for w in &report.warnings {
        let _ = writeln!(s, "warning: {w}");
    }
    s
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Name of a LINKTYPE_* value this decoder knows.
pub fn link_type_name(link_type: u32) -> &'static str {
    match link_type {
        LINKTYPE_NULL => "NULL",
        LINKTYPE_ETHERNET => "EN10MB",
        LINKTYPE_RAW | LINKTYPE_RAW_OLD => "RAW",
        LINKTYPE_LINUX_SLL => "LINUX_SLL",
        LINKTYPE_IPV4 => "IPV4",
        LINKTYPE_IPV6 => "IPV6",
        LINKTYPE_LINUX_SLL2 => "LINUX_SLL2",
        _ => "UNKNOWN",
    }
}

const LINKTYPE_NULL: u32 = 0;
const LINKTYPE_ETHERNET: u32 = 1;
const LINKTYPE_RAW_OLD: u32 = 12;
const LINKTYPE_RAW: u32 = 101;
const LINKTYPE_LINUX_SLL: u32 = 113;
const LINKTYPE_IPV4: u32 = 228;
const LINKTYPE_IPV6: u32 = 229;
const LINKTYPE_LINUX_SLL2: u32 = 276;

/// The IP packet inside a frame of the given link type, if it carries IP.
fn link_payload(link_type: u32, data: &[u8]) -> Option<&[u8]> {
    let (mut ethertype, mut rest) = match link_type {
        LINKTYPE_ETHERNET => (u16_be(data, 12)?, data.get(14..)?),
        LINKTYPE_LINUX_SLL => (u16_be(data, 14)?, data.get(16..)?),
        LINKTYPE_LINUX_SLL2 => (u16_be(data, 0)?, data.get(20..)?),
        LINKTYPE_RAW | LINKTYPE_RAW_OLD | LINKTYPE_IPV4 | LINKTYPE_IPV6 => return Some(data),
        LINKTYPE_NULL => {
            // The address family is in the byte order of the capturing host.
            let af = data.get(..4)?;
            let le = u32::from_le_bytes([af[0], af[1], af[2], af[3]]);
            let be = u32::from_be_bytes([af[0], af[1], af[2], af[3]]);
            let is_ip = |v: u32| matches!(v, 2 | 10 | 24 | 28 | 30);
            return if is_ip(le) || is_ip(be) {
                data.get(4..)
            } else {
                None
            };
        }
        _ => return None,
    };
    // Any number of 802.1Q / 802.1ad tags.
    while matches!(ethertype, 0x8100 | 0x88a8 | 0x9100) {
        ethertype = u16_be(rest, 2)?;
        rest = rest.get(4..)?;
    }
    match ethertype {
        0x0800 | 0x86dd => Some(rest),
        _ => None,
    }
}

fn u16_be(d: &[u8], at: usize) -> Option<u16> {
    let s = d.get(at..at + 2)?;
    Some(u16::from_be_bytes([s[0], s[1]]))
}

/// Decode one IP packet; `None` if it is not UDP to port 4791.
fn decode_ip<'a>(
    f: &CapturedFrame<'_>,
    ip: &'a [u8],
    anomalies: &mut Vec<Anomaly>,
) -> Option<(PacketRecord, Option<Datagram<'a>>)> {
    // Locate UDP leniently (the capture may be cut by the snap length), so that
    // a truncated RoCE packet is still reported as one.
    let (src, dst, l4, ip_total, tos) = match ip.first()? >> 4 {
        4 => {
            let p = ipv4::Packet::new_unchecked(ip);
            if ip.len() < ipv4::HEADER_LEN || p.header_len() < 20 {
                return None;
            }
            if p.next_header() != ipv4::PROTOCOL_UDP || p.frag_offset() != 0 {
                return None;
            }
            let hl = usize::from(p.header_len());
            let total = usize::from(p.total_len());
            (
                IpAddr::V4(p.src_addr()),
                IpAddr::V4(p.dst_addr()),
                ip.get(hl..total.min(ip.len()).max(hl))?,
                total,
                p.dscp_ecn(),
            )
        }
        6 => {
            let p = ipv6::Packet::new_unchecked(ip);
            if ip.len() < ipv6::HEADER_LEN || p.next_header() != ipv4::PROTOCOL_UDP {
                return None;
            }
            let total = ipv6::HEADER_LEN + usize::from(p.payload_len());
            (
                IpAddr::V6(p.src_addr()),
                IpAddr::V6(p.dst_addr()),
                &ip[ipv6::HEADER_LEN..total.min(ip.len())],
                total,
                p.traffic_class(),
            )
        }
        _ => return None,
    };
    if l4.len() < udp::HEADER_LEN {
        return None;
    }
    let udp_p = udp::Packet::new_unchecked(l4);
    if udp_p.dst_port() != ROCEV2_UDP_PORT {
        return None;
    }
    let src_port = udp_p.src_port();
    let transport = &l4[udp::HEADER_LEN..];
    let captured_whole = ip.len() >= ip_total && f.data.len() as u64 >= u64::from(f.orig_len);

    let bth_view = bth::Packet::new_checked(transport).ok();
    let bth = bth_view
        .as_ref()
        .map(|b| (b.opcode(), b.dest_qp(), b.psn(), b.ack_req(), b.pad_count()));
    let (opcode, qpn, psn, ack_req, pad) = bth.unwrap_or((OpCode(0xff), 0, 0, false, 0));

    let mut record = PacketRecord {
        index: f.index,
        timestamp_ns: f.timestamp_ns,
        src,
        dst,
        src_port,
        opcode: opcode.0,
        opcode_name: opcode.to_string(),
        qpn,
        psn,
        ack_req,
        headers: Vec::new(),
        payload_len: None,
        pad,
        icrc_valid: None,
        error: None,
        summary: String::new(),
        dscp: tos >> 2,
        ecn: Ecn::from_tos(tos),
    };
    let anomaly = |kind, detail: String| Anomaly {
        kind,
        index: f.index,
        src,
        dst,
        qpn,
        psn,
        nak_code: None,
        rnr_timer: None,
        detail,
        cm: None,
    };

    if captured_whole {
        match frame::icrc_valid_ip(ip) {
            Ok(valid) => {
                record.icrc_valid = Some(valid);
                if !valid {
                    let ip_bytes = &ip[..ip_total];
                    let found = ip_bytes
                        .get(ip_total.saturating_sub(4)..)
                        .map_or(0, |t| u32::from_le_bytes([t[0], t[1], t[2], t[3]]));
                    let expected = crate::icrc::compute(ip_bytes).unwrap_or(0);
                    anomalies.push(anomaly(
                        AnomalyKind::IcrcInvalid,
                        format!("ICRC 0x{found:08x}, expected 0x{expected:08x}"),
                    ));
                }
            }
            Err(e) => record.error = Some(format!("ICRC not checked: {e}")),
        }
    }

    let mut datagram = None;
    // A CNP (BTH, 16 reserved bytes, ICRC) is no transport packet: its own
    // Repr decodes it.
    let decoded = if opcode == OpCode::CNP && bth_view.is_some() {
        cnp::Packet::new_checked(transport)
            .and_then(|p| Ok((cnp::Repr::parse(&p)?, p.reserved().iter().any(|&b| b != 0))))
            .map(Decoded::Cnp)
    } else {
        Datagram::parse(&ip[..ip_total.min(ip.len())]).map(|(d, _)| Decoded::Transport(d))
    };
    match decoded {
        Ok(Decoded::Transport(d)) => {
            let r = &d.roce;
            record.headers = header_texts(r);
            record.payload_len = Some(r.payload.len());
            if let Some(a) = r.aeth {
                match a.kind {
                    AethKind::Nak(code) => {
                        let mut an = anomaly(
                            AnomalyKind::Nak,
                            format!(
                                "NAK {} (syndrome 0x{:02x}) msn {}",
                                code.name(),
                                a.kind.syndrome(),
                                a.msn
                            ),
                        );
                        an.nak_code = Some(code);
                        anomalies.push(an);
                    }
                    AethKind::RnrNak { timer } => {
                        let mut an = anomaly(
                            AnomalyKind::RnrNak,
                            format!(
                                "RNR NAK timer {timer} ({} us) msn {}",
                                crate::aeth::rnr_timer_micros(timer),
                                a.msn
                            ),
                        );
                        an.rnr_timer = Some(timer);
                        anomalies.push(an);
                    }
                    _ => {}
                }
            }
            record.summary = d.to_string();
            // A management datagram to QP1: name the CM message.
            if let Some(m) = cm_message(r) {
                let text = format!("CM {m}");
                record.summary.push_str(", ");
                record.summary.push_str(&text);
                record.headers.push(text);
            }
            datagram = Some(d);
        }
        // A RoCEv2 congestion notification packet to QP `c.dest_qp`.
        Ok(Decoded::Cnp((c, reserved_set))) => {
            record.headers = vec!["CNP".to_string()];
            let mut text = c.to_string();
            if reserved_set {
                // Accepted as a receiver does (cnp.rs), but worth seeing.
                record.headers.push("reserved bytes not zero".to_string());
                text.push_str(" (reserved bytes not zero)");
            }
            record.payload_len = Some(0);
            record.summary = format!("{src}.{src_port} > {dst}.{ROCEV2_UDP_PORT}: {text}");
        }
        // The soft NIC's same-host request: BTH, its header, ICRC.
        Err(_) if crate::cma::is_cma_opcode(opcode.0) && same_host_header(&bth_view).is_some() => {
            let bth_text = bth_view
                .as_ref()
                .and_then(|b| bth::Repr::parse(b).ok())
                .map_or_else(String::new, |r| r.to_string());
            let name = crate::cma::opcode_name(opcode.0).unwrap_or("SOFT_SAME_HOST");
            let h = same_host_header(&bth_view).map_or_else(String::new, |h| h.to_string());
            record.opcode_name = name.to_string();
            record.headers = vec![h.clone()];
            record.payload_len = Some(0);
            record.summary =
                format!("{src}.{src_port} > {dst}.{ROCEV2_UDP_PORT}: {name} {bth_text} {h}");
            anomalies.push(anomaly(
                AnomalyKind::SameHostOnWire,
                format!(
                    "{name} in a UDP datagram: rdmakit receivers drop it (same-host requests \
                     travel only in rings between processes the kernel identified); an older \
                     rdmakit, or an attempt to reach a process's memory from the network"
                ),
            ));
        }
        Err(e) => {
            let kind = if e == crate::Error::Unsupported
                && opcode.info().is_none()
                && opcode != OpCode::CNP
            {
                AnomalyKind::UnknownOpcode
            } else {
                AnomalyKind::Malformed
            };
            let why = if captured_whole {
                e.to_string()
            } else {
                format!(
                    "{e} (frame cut to {} of {} bytes by the capture)",
                    f.data.len(),
                    f.orig_len
                )
            };
            record.summary = match bth_view {
                Some(b) => format!(
                    "{src}.{src_port} > {dst}.{ROCEV2_UDP_PORT}: {} [{why}]",
                    bth::Repr::parse(&b).map_or_else(|_| String::new(), |r| r.to_string())
                ),
                None => format!("{src}.{src_port} > {dst}.{ROCEV2_UDP_PORT}: [{why}]"),
            };
            anomalies.push(anomaly(kind, why.clone()));
            record.error = Some(why);
        }
    }
    match record.icrc_valid {
        Some(true) => record.summary.push_str(", icrc ok"),
        Some(false) => record.summary.push_str(", ICRC BAD"),
        None => record.summary.push_str(", icrc unchecked"),
    }
    Some((record, datagram))
}

/// What the bytes after UDP decoded to.
// Lives for one packet on the stack: boxing the large variant would
// allocate per packet for nothing.
#[allow(clippy::large_enum_variant)]
enum Decoded<'a> {
    /// A transport packet, in its IP and UDP headers.
    Transport(Datagram<'a>),
    /// A CNP, and whether its reserved bytes held anything.
    Cnp((cnp::Repr, bool)),
}

/// The CM message of a management datagram to QP1 (GSI Q_Key), if it is one.
fn cm_message(r: &crate::roce::Repr<'_>) -> Option<crate::cm::Repr> {
    if r.bth.dest_qp == 1 && r.deth.is_some_and(|h| h.qkey == crate::deth::GSI_QKEY) {
        crate::cm::Repr::parse(r.payload).ok()
    } else {
        None
    }
}

/// The same-host header after a BTH (the ICRC trails it).
fn same_host_header(b: &Option<bth::Packet<&[u8]>>) -> Option<crate::cma::Repr> {
    let b = b.as_ref()?;
    let p = crate::cma::Packet::new_checked(b.payload()).ok()?;
    crate::cma::Repr::parse(&p).ok()
}

fn flows(packets: &[PacketRecord], anomalies: &[Anomaly]) -> Vec<FlowSummary> {
    let mut out: Vec<FlowSummary> = Vec::new();
    let mut by_key: std::collections::HashMap<(IpAddr, IpAddr, u32), usize> =
        std::collections::HashMap::new();
    for p in packets {
        let i = *by_key.entry((p.src, p.dst, p.qpn)).or_insert_with(|| {
            out.push(FlowSummary {
                src: p.src,
                dst: p.dst,
                qpn: p.qpn,
                packets: 0,
                payload_bytes: 0,
                first_index: p.index,
                last_index: p.index,
                requests: 0,
                first_request_psn: None,
                last_request_psn: None,
                anomalies: 0,
                ce_packets: 0,
            });
            out.len() - 1
        });
        let f = &mut out[i];
        f.packets += 1;
        f.payload_bytes += p.payload_len.unwrap_or(0) as u64;
        f.last_index = p.index;
        f.ce_packets += usize::from(p.ecn == Ecn::Ce);
        let is_request = OpCode(p.opcode)
            .info()
            .is_some_and(|i| !i.operation.is_response());
        if is_request {
            f.requests += 1;
            f.first_request_psn.get_or_insert(p.psn);
            f.last_request_psn = Some(p.psn);
        }
    }
    for a in anomalies {
        if let Some(&i) = by_key.get(&(a.src, a.dst, a.qpn)) {
            out[i].anomalies += 1;
        }
    }
    out
}

fn header_texts(r: &crate::roce::Repr<'_>) -> Vec<String> {
    let mut v = Vec::new();
    if let Some(h) = r.deth {
        v.push(h.to_string());
    }
    if let Some(h) = r.reth {
        v.push(h.to_string());
    }
    if let Some(h) = r.atomic_eth {
        v.push(h.to_string());
    }
    if let Some(h) = r.aeth {
        v.push(h.to_string());
    }
    if let Some(h) = r.atomic_ack_eth {
        v.push(h.to_string());
    }
    if let Some(h) = r.immdt {
        v.push(h.to_string());
    }
    if let Some(h) = r.ieth {
        v.push(h.to_string());
    }
    v
}

/// `HH:MM:SS.uuuuuu` (UTC time of day), like tcpdump.
fn format_time(ns: u64) -> String {
    let secs = ns / 1_000_000_000;
    let micros = (ns % 1_000_000_000) / 1_000;
    let day = secs % 86_400;
    format!(
        "{:02}:{:02}:{:02}.{micros:06}",
        day / 3600,
        (day / 60) % 60,
        day % 60
    )
}
