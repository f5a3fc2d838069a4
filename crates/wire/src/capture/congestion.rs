//! Congestion signals in a capture: the ECN codepoint and DSCP of every
//! packet, the CNPs per flow, and whether each CE mark was answered.
//!
//! A switch marks CE on an ECN-capable packet when its queue builds up; the
//! receiver (the notification point) answers with a CNP to the sender's QP,
//! at most one per QP per `np_min_time_between_cnps` (4 µs on mlx5 and the
//! soft NIC), and the sender slows down. A CE mark nobody answers means a
//! sender that never learns of the congestion, so the capture flags it:
//!
//! * A **CE-marked data packet** is a transport packet (any opcode of the
//!   RC/UC/UD table, not a CNP) that parsed, whose ICRC was not found wrong
//!   (a receiver drops those unseen) and whose ECN bits are CE.
//! * It is **answered** when a CNP from its receiver to its sender comes
//!   later in the capture, or came at most [`CNP_WINDOW_NS`] before it (the
//!   rate limit suppresses a second CNP within that time). The data packet
//!   names only its receiver's QP; when the capture tells the sender's QP
//!   (a response of the other direction, an ACK or a READ response, to one
//!   QP carries the PSN of one of the flow's requests, and no other QP's
//!   does) the CNP must name that QP, otherwise any CNP between the two
//!   addresses counts.
//! * It can be **judged** only when the capture holds packets from its
//!   receiver to its sender; otherwise a note says it cannot be. A CE packet
//!   within [`CNP_WINDOW_NS`] of the capture's end is not judged either: its
//!   CNP may have left after the capture stopped.
//! * Unanswered CE packets give one `ce_without_cnp` anomaly per flow
//!   (source, destination, QP), at the first of them, counting the rest in
//!   its detail: an NP that never answers makes one finding per flow, not
//!   one per packet.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;

use serde::Serialize;

use super::{Anomaly, AnomalyKind, PacketRecord};
use crate::opcode::OpCode;

/// How long before a CE-marked packet a CNP may have been sent and still
/// answer it, and how close to the capture's end a CE packet is left
/// unjudged: 1 ms, well above the notification point's rate limit (4 µs
/// on mlx5 and the soft NIC, 50 µs in the DCQCN simulator).
pub const CNP_WINDOW_NS: u64 = 1_000_000;

/// The ECN codepoint: the low two bits of the IPv4 TOS byte or of the IPv6
/// traffic class (RFC 3168).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Ecn {
    /// `00`: the sender does not do ECN; a switch drops instead of marking.
    NotEct,
    /// `01`: ECN-capable transport (1).
    Ect1,
    /// `10`: ECN-capable transport (0), what RoCE NICs send with DCQCN.
    Ect0,
    /// `11`: congestion experienced, marked by a switch.
    Ce,
}

impl Ecn {
    /// The four codepoints, in bit order.
    pub const ALL: [Ecn; 4] = [Ecn::NotEct, Ecn::Ect1, Ecn::Ect0, Ecn::Ce];

    /// The codepoint in the low two bits of a TOS byte or traffic class.
    pub fn from_tos(tos: u8) -> Ecn {
        Ecn::ALL[usize::from(tos & 0x03)]
    }

    /// snake_case name, as in JSON (`not_ect`, `ect1`, `ect0`, `ce`).
    pub fn name(self) -> &'static str {
        match self {
            Ecn::NotEct => "not_ect",
            Ecn::Ect1 => "ect1",
            Ecn::Ect0 => "ect0",
            Ecn::Ce => "ce",
        }
    }

    /// The RFC 3168 name (`Not-ECT`, `ECT(1)`, `ECT(0)`, `CE`).
    pub fn label(self) -> &'static str {
        match self {
            Ecn::NotEct => "Not-ECT",
            Ecn::Ect1 => "ECT(1)",
            Ecn::Ect0 => "ECT(0)",
            Ecn::Ce => "CE",
        }
    }
}

/// The CNPs one notification point sent to one QP: from `src` to `dst`,
/// DestQP `qpn` (the notified sender's QP).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CnpFlow {
    /// IP source: the receiver of the CE-marked packets.
    pub src: IpAddr,
    /// IP destination: their sender.
    pub dst: IpAddr,
    /// The notified QP.
    pub qpn: u32,
    /// CNPs.
    pub cnps: usize,
    /// Frame number of the first.
    pub first_index: usize,
    /// Frame number of the last.
    pub last_index: usize,
}

/// Whether a record is a CNP that decoded.
pub(super) fn is_cnp(p: &PacketRecord) -> bool {
    p.opcode == OpCode::CNP.0 && p.error.is_none()
}

/// Whether a record is a CE-marked data packet a receiver would take.
fn is_ce_data(p: &PacketRecord) -> bool {
    p.ecn == Ecn::Ce
        && p.error.is_none()
        && p.icrc_valid != Some(false)
        && OpCode(p.opcode).info().is_some()
}

/// Packets per ECN codepoint (all four names, zeros included) and per DSCP.
pub(super) fn counts(packets: &[PacketRecord]) -> (BTreeMap<String, usize>, BTreeMap<u8, usize>) {
    let mut ecn: BTreeMap<String, usize> =
        Ecn::ALL.iter().map(|e| (e.name().to_string(), 0)).collect();
    let mut dscp = BTreeMap::new();
    for p in packets {
        *ecn.entry(p.ecn.name().to_string()).or_default() += 1;
        *dscp.entry(p.dscp).or_default() += 1;
    }
    (ecn, dscp)
}

/// The CNP flows, in order of first appearance.
pub(super) fn cnp_flows(packets: &[PacketRecord]) -> Vec<CnpFlow> {
    let mut out: Vec<CnpFlow> = Vec::new();
    let mut by_key: HashMap<(IpAddr, IpAddr, u32), usize> = HashMap::new();
    for p in packets.iter().filter(|p| is_cnp(p)) {
        let i = *by_key.entry((p.src, p.dst, p.qpn)).or_insert_with(|| {
            out.push(CnpFlow {
                src: p.src,
                dst: p.dst,
                qpn: p.qpn,
                cnps: 0,
                first_index: p.index,
                last_index: p.index,
            });
            out.len() - 1
        });
        out[i].cnps += 1;
        out[i].last_index = p.index;
    }
    out
}

/// The CE packets of one flow that the capture cannot or does not show
/// answered.
#[derive(Default)]
struct Unanswered<'a> {
    packets: Vec<&'a PacketRecord>,
    ce: usize,
}

/// A CNP's frame number and capture time.
type Sent = (usize, Option<u64>);

/// A flow: source, destination, destination QP.
type Flow = (IpAddr, IpAddr, u32);

/// The sender's QP of each flow (A, B, Qb) the capture tells: a response
/// from B to A's QP Qa (an ACK, a READ response, an atomic ACK) carrying
/// the PSN of a request of that flow, and no response to another QP of A
/// doing so. Management datagrams (QP1) and packets that did not parse are
/// left out.
fn senders(packets: &[PacketRecord]) -> HashMap<Flow, u32> {
    let kind = |p: &PacketRecord| {
        OpCode(p.opcode)
            .info()
            .filter(|_| p.error.is_none() && p.qpn != 1)
            .map(|i| i.operation.is_response())
    };
    // (A, B, PSN) → the QPs of B that requests with that PSN went to.
    let mut requests: HashMap<(IpAddr, IpAddr, u32), Vec<u32>> = HashMap::new();
    for p in packets.iter().filter(|p| kind(p) == Some(false)) {
        let qps = requests.entry((p.src, p.dst, p.psn)).or_default();
        if !qps.contains(&p.qpn) {
            qps.push(p.qpn);
        }
    }
    // `None` once two QPs of A answered for the same flow.
    let mut found: HashMap<Flow, Option<u32>> = HashMap::new();
    for r in packets.iter().filter(|p| kind(p) == Some(true)) {
        for &qb in requests.get(&(r.dst, r.src, r.psn)).into_iter().flatten() {
            let e = found.entry((r.dst, r.src, qb)).or_insert(Some(r.qpn));
            if *e != Some(r.qpn) {
                *e = None;
            }
        }
    }
    found
        .into_iter()
        .filter_map(|(k, v)| v.map(|qa| (k, qa)))
        .collect()
}

/// Flags CE-marked data packets no CNP answered (one anomaly per flow) and
/// notes what cannot be judged (see the module documentation).
pub(super) fn judge(
    packets: &[PacketRecord],
    end_ns: Option<u64>,
    anomalies: &mut Vec<Anomaly>,
    notes: &mut Vec<String>,
) {
    // CNPs per (notification point, notified host) and per notified QP
    // too, in capture order; the directions the capture holds.
    let mut cnps: HashMap<(IpAddr, IpAddr), Vec<Sent>> = HashMap::new();
    let mut cnps_to_qp: HashMap<Flow, Vec<Sent>> = HashMap::new();
    let mut directions: HashSet<(IpAddr, IpAddr)> = HashSet::new();
    for p in packets {
        directions.insert((p.src, p.dst));
        if is_cnp(p) && p.icrc_valid != Some(false) {
            let sent = (p.index, p.timestamp_ns);
            cnps.entry((p.src, p.dst)).or_default().push(sent);
            cnps_to_qp
                .entry((p.src, p.dst, p.qpn))
                .or_default()
                .push(sent);
        }
    }
    let senders = senders(packets);
    let answered = |p: &PacketRecord| {
        let list = match senders.get(&(p.src, p.dst, p.qpn)) {
            Some(&qa) => cnps_to_qp.get(&(p.dst, p.src, qa)),
            None => cnps.get(&(p.dst, p.src)),
        };
        let Some(list) = list else {
            return false;
        };
        // The first CNP after it, else the last one before it.
        let after = list.partition_point(|&(i, _)| i < p.index);
        if after < list.len() {
            return true;
        }
        match (after.checked_sub(1).map(|i| list[i].1), p.timestamp_ns) {
            (Some(Some(cnp)), Some(ce)) => ce.saturating_sub(cnp) <= CNP_WINDOW_NS,
            _ => false,
        }
    };
    let near_end = |p: &PacketRecord| match (p.timestamp_ns, end_ns) {
        (Some(t), Some(end)) => end.saturating_sub(t) <= CNP_WINDOW_NS,
        _ => false,
    };

    let mut order: Vec<(IpAddr, IpAddr, u32)> = Vec::new();
    let mut flows: HashMap<(IpAddr, IpAddr, u32), Unanswered<'_>> = HashMap::new();
    // (sender, receiver) → CE packets, when the receiver's direction is absent.
    let mut one_way: BTreeMap<(IpAddr, IpAddr), usize> = BTreeMap::new();
    let mut at_end = 0usize;
    for p in packets.iter().filter(|p| is_ce_data(p)) {
        if !directions.contains(&(p.dst, p.src)) {
            *one_way.entry((p.src, p.dst)).or_default() += 1;
            continue;
        }
        let key = (p.src, p.dst, p.qpn);
        let flow = flows.entry(key).or_insert_with(|| {
            order.push(key);
            Unanswered::default()
        });
        flow.ce += 1;
        if answered(p) {
            continue;
        }
        if near_end(p) {
            at_end += 1;
            continue;
        }
        flow.packets.push(p);
    }
    for key in order {
        let f = &flows[&key];
        let (Some(first), Some(last)) = (f.packets.first(), f.packets.last()) else {
            continue;
        };
        let (src, dst, qpn) = key;
        let n = f.packets.len();
        let to = senders
            .get(&key)
            .map_or_else(String::new, |qa| format!(" for QP 0x{qa:06x}"));
        anomalies.push(Anomaly {
            kind: AnomalyKind::CeWithoutCnp,
            index: first.index,
            src,
            dst,
            qpn,
            psn: first.psn,
            nak_code: None,
            rnr_timer: None,
            detail: format!(
                "{n} of {} CE-marked packets to QP 0x{qpn:06x} (frames {}..{}) had no CNP from \
                 {dst} to {src}{to} after them, nor one within {} µs before: the sender was \
                 not told to slow down (ECN disabled on {dst}'s NIC, or it does not send CNPs)",
                f.ce,
                first.index,
                last.index,
                CNP_WINDOW_NS / 1000
            ),
            cm: None,
        });
    }
    for ((src, dst), n) in one_way {
        notes.push(format!(
            "{n} CE-marked packet(s) from {src} to {dst}: whether {dst} answered them with \
             CNPs cannot be judged, the capture holds no packet from {dst} to {src}"
        ));
    }
    if at_end > 0 {
        notes.push(format!(
            "{at_end} CE-marked packet(s) in the last {} µs of the capture had no CNP yet: \
             one may have followed after the capture ended",
            CNP_WINDOW_NS / 1000
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ecn_codepoints_from_the_low_two_bits() {
        assert_eq!(Ecn::from_tos(0x00), Ecn::NotEct);
        assert_eq!(Ecn::from_tos(0x69), Ecn::Ect1);
        assert_eq!(Ecn::from_tos(0x6a), Ecn::Ect0); // DSCP 26, ECT(0)
        assert_eq!(Ecn::from_tos(0xc3), Ecn::Ce);
        let names: Vec<_> = Ecn::ALL.iter().map(|e| e.name()).collect();
        assert_eq!(names, ["not_ect", "ect1", "ect0", "ce"]);
        for e in Ecn::ALL {
            assert_eq!(
                serde_json::to_value(e).unwrap(),
                serde_json::Value::from(e.name())
            );
        }
        assert_eq!(Ecn::Ce.label(), "CE");
        assert_eq!(Ecn::Ect0.label(), "ECT(0)");
    }
}
