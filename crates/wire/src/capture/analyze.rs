//! Per-QP, per-direction PSN bookkeeping for the anomaly report.
//!
//! Requests (SEND, WRITE, READ request, atomics) must carry consecutive PSNs per
//! flow (source, destination, destination QP, and the DETH source QP for UD).
//! A PSN ahead of the expected one is a gap (packets lost before the capture
//! point); one at or behind the highest seen is a retransmission. A READ request
//! of L bytes consumes ceil(L / PMTU) PSNs; the PMTU is learned from the payload
//! of FIRST/MIDDLE packets of the flow, and until it is known the PSN after a
//! READ request is accepted as it comes. ACK PSNs are not checked (ACKs are
//! coalesced); READ response PSNs are checked within one response.
//!
//! UD never retransmits: a UD PSN at or behind the highest seen is a new
//! sender on that QP (a QP created again), and the flow starts over. MADs to
//! QP1 are not judged by PSN at all (each CM has its own QP1 sequence; their
//! losses show as CM retries, see `exchanges`). A REQ or REP announces the
//! QPs of a new connection: the flows to those QPs start over, as a QPN is
//! reused by the next connection with a new starting PSN.
//!
//! Connections set up out of band (perftest's and ibv_*_pingpong's TCP
//! exchange) announce nothing, and a soft NIC's or a restarted driver's
//! next connection reuses the QPN with a new random starting PSN. So an RC
//! flow also starts over ([`Tracker::restarts`], a note, not an anomaly)
//! when a request's PSN was never sent on it: behind the first PSN the
//! flow has seen (a retransmission resends a PSN already sent), or a
//! message's first packet more than [`RESTART_JUMP`] PSNs ahead of the
//! expected one (more packets than any requester keeps outstanding, all
//! missing from the capture).

use std::collections::HashMap;
use std::net::IpAddr;

use super::{Anomaly, AnomalyKind, PacketRecord};
use crate::opcode::{Operation, Position};
use crate::psn;
use crate::roce;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct FlowKey {
    src: IpAddr,
    dst: IpAddr,
    qpn: u32,
    src_qp: Option<u32>,
}

/// A forward PSN jump, at a message's first packet, beyond which an RC
/// flow is a new connection rather than a gap: 2^20 packets (1 GiB at a
/// 1024-byte path MTU) missing from a capture that holds the packets on
/// either side. A requester's outstanding packets are far fewer (mlx5
/// and rxe keep at most a few thousand in flight).
pub(crate) const RESTART_JUMP: i32 = 1 << 20;

#[derive(Debug, Default, Clone, Copy)]
struct Flow {
    /// The first request PSN of the flow's current connection.
    first: Option<u32>,
    /// The PSN the next new request packet should carry; `None` until the first
    /// packet, or after a READ request of unknown PSN span.
    expected: Option<u32>,
    /// Highest PSN seen plus one (for retransmission detection).
    next_new: Option<u32>,
    /// Path MTU learned from FIRST/MIDDLE payloads.
    pmtu: Option<usize>,
    /// Next PSN inside a multi-packet READ response.
    read_resp_next: Option<u32>,
}

#[derive(Debug, Default)]
pub(crate) struct Tracker {
    flows: HashMap<FlowKey, Flow>,
    restarts: Vec<Restart>,
}

/// An RC flow that started over without a CM exchange in the capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Restart {
    pub index: usize,
    pub src: IpAddr,
    pub dst: IpAddr,
    pub qpn: u32,
    pub psn: u32,
}

impl Tracker {
    /// A soft-NIC same-host request ([`crate::cma`]): it holds the PSNs of
    /// the packets it replaces, a span the capture cannot know, so the
    /// flow's sequence expectations start afresh.
    pub(crate) fn forget(&mut self, rec: &PacketRecord) {
        self.flows.remove(&FlowKey {
            src: rec.src,
            dst: rec.dst,
            qpn: rec.qpn,
            src_qp: None,
        });
    }

    /// The RC flows that started over with no CM exchange in the capture
    /// (see the module's text), in capture order.
    pub(crate) fn restarts(&self) -> &[Restart] {
        &self.restarts
    }

    /// A CM REQ or REP: the RC flows towards the QP it announces belong
    /// to a new connection from here on.
    pub(crate) fn connecting(&mut self, rec: &PacketRecord, m: &crate::cm::Repr) {
        let qpn = match &m.message {
            crate::cm::Message::Req(r) => r.local_qpn,
            crate::cm::Message::Rep(r) => r.local_qpn,
            _ => return,
        };
        // The peer's packets to the announced QP.
        self.flows.remove(&FlowKey {
            src: rec.dst,
            dst: rec.src,
            qpn,
            src_qp: None,
        });
    }

    pub(crate) fn observe(
        &mut self,
        rec: &PacketRecord,
        roce: Option<&roce::Repr<'_>>,
        anomalies: &mut Vec<Anomaly>,
    ) {
        // A packet with a bad ICRC would be dropped by the receiver: it says
        // nothing reliable about sequence numbers.
        let (Some(r), Some(true) | None) = (roce, rec.icrc_valid) else {
            return;
        };
        let Ok(info) = r.info() else { return };
        // Management datagrams: judged as CM exchanges, not by PSN.
        if r.bth.dest_qp == 1 {
            return;
        }
        let key = FlowKey {
            src: rec.src,
            dst: rec.dst,
            qpn: r.bth.dest_qp,
            src_qp: r.deth.map(|d| d.src_qp),
        };
        let flow = self.flows.entry(key).or_default();
        let psn = r.bth.psn;
        let anomaly = |kind, detail: String| Anomaly {
            kind,
            index: rec.index,
            src: rec.src,
            dst: rec.dst,
            qpn: r.bth.dest_qp,
            psn,
            nak_code: None,
            rnr_timer: None,
            detail,
            cm: None,
        };

        if info.operation == Operation::RdmaReadResponse {
            if let (Some(next), Position::Middle | Position::Last) =
                (flow.read_resp_next, info.position)
            {
                let d = psn::delta(psn, next);
                if d > 0 {
                    anomalies.push(anomaly(
                        AnomalyKind::PsnGap,
                        format!("READ response PSN {psn}, expected {next}: {d} missing"),
                    ));
                }
            }
            flow.read_resp_next = if info.position.ends_message() {
                None
            } else {
                Some(psn::add(psn, 1))
            };
            return;
        }
        if info.operation.is_response() {
            return;
        }

        if matches!(info.position, Position::First | Position::Middle) && !r.payload.is_empty() {
            flow.pmtu = Some(r.payload.len());
        }
        let span = if info.operation == Operation::RdmaReadRequest {
            match (flow.pmtu, r.reth) {
                (Some(pmtu), Some(reth)) => {
                    Some((reth.dma_len as usize).div_ceil(pmtu).max(1) as u32)
                }
                _ => None,
            }
        } else {
            Some(1)
        };

        if let Some(next_new) = flow.next_new {
            if psn::delta(psn, next_new) < 0 && r.deth.is_some() {
                // UD never sends a packet again: a new sender on this QP.
                *flow = Flow::default();
                flow.expected = Some(psn::add(psn, 1));
                flow.next_new = Some(psn::add(psn, 1));
                return;
            }
            let never_sent = flow.first.is_some_and(|f| psn::delta(psn, f) < 0);
            let jumped = flow
                .expected
                .is_some_and(|e| psn::delta(psn, e) > RESTART_JUMP)
                && info.position.starts_message();
            if (psn::delta(psn, next_new) < 0 && never_sent) || jumped {
                // A new connection on a reused QPN, set up out of band.
                self.restarts.push(Restart {
                    index: rec.index,
                    src: rec.src,
                    dst: rec.dst,
                    qpn: r.bth.dest_qp,
                    psn,
                });
                *flow = Flow {
                    pmtu: flow.pmtu,
                    ..Flow::default()
                };
            } else if psn::delta(psn, next_new) < 0 {
                anomalies.push(anomaly(
                    AnomalyKind::Retransmission,
                    format!(
                        "{} PSN {psn} again (highest new PSN would be {next_new})",
                        info.name
                    ),
                ));
                return;
            }
        }
        if let Some(expected) = flow.expected {
            let d = psn::delta(psn, expected);
            if d > 0 {
                anomalies.push(anomaly(
                    AnomalyKind::PsnGap,
                    format!("PSN {psn}, expected {expected}: {d} missing"),
                ));
            }
        }
        flow.first.get_or_insert(psn);
        flow.expected = span.map(|n| psn::add(psn, n));
        flow.next_new = Some(psn::add(psn, span.unwrap_or(1)));
    }
}
