//! The connection manager's exchanges in a capture: which requests were
//! answered, which were sent again, which were refused.
//!
//! A CM MAD (IBTA Vol 1 ch. 12) belongs to an exchange by its transaction ID:
//! the sender of a REQ, DREQ or SIDR_REQ picks the TID, and every answer —
//! MRA, REJ, REP, RTU, DREP, SIDR_REP — repeats it (Linux even reuses the
//! REQ's TID for the active side's DREQ, so the message kind is part of the
//! key). Per exchange, in capture order:
//!
//! - **retry**: a message whose (sender, receiver, kind, TID) was already
//!   seen: the sender's CM timed out waiting and sent it again (or answers a
//!   duplicate it received).
//! - **unanswered**: a REQ with no REP, REJ or MRA back, a REP with no RTU,
//!   REJ or MRA, a DREQ with no DREP (or a crossing DREQ), a SIDR_REQ with no
//!   SIDR_REP. Judged within the capture: a REQ announces how long its
//!   sender waits (the receiver's CM response time plus a round trip of the
//!   path), a REP inherits that of its REQ, an MRA stretches either to its
//!   service timeout; such a request counts as unanswered only when the
//!   capture goes on past that time, otherwise it is a note ("no answer yet").
//!   A DREQ or SIDR_REQ announces no time: no answer anywhere after it in the
//!   capture is unanswered.
//! - **reject**: every REJ, named by its reason (and whose side sent it), and
//!   every SIDR_REP whose status is not success.
//!
//! Pure bookkeeping over the records the decoder hands in; no I/O.

use std::collections::HashMap;
use std::net::IpAddr;

use super::{Anomaly, AnomalyKind, CmAnomaly};
use crate::cm::{self, duration_text, timeout_nanos, Message, MsgResponse};

/// The kinds of message that expect an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Ask {
    Req,
    Rep,
    Dreq,
    SidrReq,
}

impl Ask {
    fn name(self) -> &'static str {
        match self {
            Ask::Req => "REQ",
            Ask::Rep => "REP",
            Ask::Dreq => "DREQ",
            Ask::SidrReq => "SIDR_REQ",
        }
    }

    /// What answers it, as the detail of an unanswered one says.
    fn answers(self) -> &'static str {
        match self {
            Ask::Req => "REP, REJ or MRA",
            Ask::Rep => "RTU, REJ or MRA",
            Ask::Dreq => "DREP",
            Ask::SidrReq => "SIDR_REP",
        }
    }
}

/// Where one CM MAD was seen.
pub(crate) struct Seen {
    pub index: usize,
    pub ts: Option<u64>,
    pub src: IpAddr,
    pub dst: IpAddr,
    pub qpn: u32,
    pub psn: u32,
}

/// One request and what became of it.
struct Request {
    ask: Ask,
    src: IpAddr,
    dst: IpAddr,
    tid: u64,
    /// Frame numbers of every send.
    frames: Vec<usize>,
    first_ts: Option<u64>,
    qpn: u32,
    psn: u32,
    /// How long the sender waits for the answer, when the request (or its
    /// REQ) says.
    wait_ns: Option<u64>,
    /// When an MRA moved the deadline: (its time, the new wait from then).
    mra: Option<(u64, u64)>,
    /// Frame of the answer.
    answered: Option<usize>,
    /// The sender's own REJ for it: (frame, reason).
    given_up: Option<(usize, u16)>,
    /// The service it was for, as printed (`rdma_cm TCP port 7174`).
    service: Option<String>,
    /// DREQ: (local, remote) communication IDs, to pair crossing DREQs.
    comm_ids: Option<(u32, u32)>,
}

/// What a REQ told about its connection, for the REP that answers it.
#[derive(Clone, Copy)]
struct ReqFacts {
    /// The REP's answer time: the requester's CM response time plus a round trip.
    rep_wait_ns: u64,
    /// A round trip of the path (twice the packet life time).
    round_trip_ns: u64,
}

/// The sends of one message: the first one's frame and time, and how many.
struct Sends {
    first: usize,
    first_ts: Option<u64>,
    count: usize,
}

#[derive(Default)]
pub(crate) struct Tracker {
    requests: Vec<Request>,
    /// (sender, receiver, kind, TID) → index in `requests`.
    open: HashMap<(IpAddr, IpAddr, Ask, u64), usize>,
    /// (sender, receiver, attribute, TID) → its first send and how many.
    sent: HashMap<(IpAddr, IpAddr, u16, u64), Sends>,
    /// (requester, passive side, TID) → what the REQ said.
    reqs: HashMap<(IpAddr, IpAddr, u64), ReqFacts>,
}

impl Tracker {
    /// One CM MAD of the capture, in capture order.
    pub(crate) fn observe(&mut self, at: &Seen, m: &cm::Repr, anomalies: &mut Vec<Anomaly>) {
        self.retry(at, m, anomalies);
        let (src, dst, tid) = (at.src, at.dst, m.tid);
        match &m.message {
            Message::Req(r) => {
                let life = r.primary.local_ack_timeout.saturating_sub(1);
                let round_trip_ns = 2 * timeout_nanos(life);
                self.reqs.insert(
                    (src, dst, tid),
                    ReqFacts {
                        rep_wait_ns: timeout_nanos(r.local_cm_response_timeout) + round_trip_ns,
                        round_trip_ns,
                    },
                );
                let service = Some(service_text(r.service_id));
                self.ask(
                    at,
                    Ask::Req,
                    tid,
                    Some(r.answer_timeout_nanos()),
                    service,
                    None,
                );
            }
            Message::Rep(_) => {
                self.answer(at, Ask::Req, tid);
                let wait = self.reqs.get(&(dst, src, tid)).map(|f| f.rep_wait_ns);
                self.ask(at, Ask::Rep, tid, wait, None, None);
            }
            Message::Rtu(_) => {
                self.answer(at, Ask::Rep, tid);
            }
            Message::Mra(r) => {
                let ask = match r.message_mraed {
                    MsgResponse::Rep => Ask::Rep,
                    _ => Ask::Req,
                };
                let (requester, passive) = if ask == Ask::Req {
                    (dst, src)
                } else {
                    (src, dst)
                };
                let rtt = self
                    .reqs
                    .get(&(requester, passive, tid))
                    .map_or(0, |f| f.round_trip_ns);
                if let (Some(&i), Some(ts)) = (self.open.get(&(dst, src, ask, tid)), at.ts) {
                    let q = &mut self.requests[i];
                    if q.answered.is_none() {
                        q.mra = Some((ts, timeout_nanos(r.service_timeout) + rtt));
                    }
                }
            }
            Message::Rej(r) => {
                // From the other side: the answer. From the requester's
                // own side: it gave up (or refuses the REP it got).
                let of_req = self.answer(at, Ask::Req, tid);
                let of_rep = self.answer(at, Ask::Rep, tid);
                let answered = of_req || of_rep;
                let mut own = None;
                if !answered {
                    for ask in [Ask::Req, Ask::Rep] {
                        if let Some(&i) = self.open.get(&(src, dst, ask, tid)) {
                            let q = &mut self.requests[i];
                            if q.answered.is_none() && q.given_up.is_none() {
                                q.given_up = Some((at.index, r.reason));
                                own = Some(i);
                            }
                        }
                    }
                }
                anomalies.push(self.reject(at, m, r, own));
            }
            Message::Dreq(r) => {
                // A DREQ crossing ours answers it as a DREP would.
                let crossing = self
                    .requests
                    .iter_mut()
                    .filter(|q| q.ask == Ask::Dreq && q.answered.is_none())
                    .find(|q| {
                        q.src == dst
                            && q.dst == src
                            && q.comm_ids == Some((r.remote_comm_id, r.local_comm_id))
                    });
                let crossed = crossing.map(|q| {
                    q.answered = Some(at.index);
                    q.frames[0]
                });
                let ids = Some((r.local_comm_id, r.remote_comm_id));
                self.ask(at, Ask::Dreq, tid, None, None, ids);
                // ... and ours answers it.
                if let (Some(frame), Some(&i)) =
                    (crossed, self.open.get(&(src, dst, Ask::Dreq, tid)))
                {
                    self.requests[i].answered.get_or_insert(frame);
                }
            }
            Message::Drep(_) => {
                self.answer(at, Ask::Dreq, tid);
            }
            Message::SidrReq(r) => {
                let service = Some(service_text(r.service_id));
                self.ask(at, Ask::SidrReq, tid, None, service, None);
            }
            Message::SidrRep(r) => {
                self.answer(at, Ask::SidrReq, tid);
                if r.status != cm::sidr_rep::status::SUCCESS {
                    let name = cm::sidr_rep::status_name(r.status).unwrap_or("reserved");
                    let detail = format!(
                        "SIDR_REP tid 0x{tid:016x} status {name} ({}) from {src}: the service \
                         ID resolution failed ({})",
                        r.status,
                        service_text(r.service_id)
                    );
                    let mut a = anomaly(at, AnomalyKind::CmReject, detail);
                    a.cm = Some(CmAnomaly {
                        message: "SIDR_REP".into(),
                        tid: tid_text(tid),
                        frames: vec![at.index],
                        reason: Some(u16::from(r.status)),
                        reason_name: Some(name.into()),
                    });
                    anomalies.push(a);
                }
            }
        }
    }

    /// The requests left without an answer once the capture, whose last
    /// frame is at `end_ns`, is read: anomalies, or notes when the capture
    /// ends before the request's time is up.
    pub(crate) fn finish(
        &self,
        end_ns: Option<u64>,
        anomalies: &mut Vec<Anomaly>,
        notes: &mut Vec<String>,
    ) {
        for q in self.requests.iter().filter(|q| q.answered.is_none()) {
            let due = match (q.mra, q.first_ts, q.wait_ns) {
                (Some((at, wait)), _, _) => Some(at + wait),
                (None, Some(first), Some(wait)) => Some(first + wait),
                _ => None,
            };
            let after = match (end_ns, q.first_ts) {
                (Some(end), Some(first)) => Some(end.saturating_sub(first)),
                _ => None,
            };
            let what = format!(
                "{} tid 0x{:016x}{} from {}",
                q.ask.name(),
                q.tid,
                q.service
                    .as_ref()
                    .map_or_else(String::new, |s| format!(" ({s})")),
                q.src
            );
            if let (Some(due), Some(end), Some(after)) = (due, end_ns, after) {
                if end < due {
                    notes.push(format!(
                        "{what} at frame {}: no answer yet; the capture ends {} after it, \
                         before the {} its sender waits",
                        q.frames[0],
                        duration_text(after),
                        duration_text(due.saturating_sub(q.first_ts.unwrap_or(due)))
                    ));
                    continue;
                }
            }
            let sends = match q.frames.len() {
                1 => "sent once".to_string(),
                n => format!("sent {n} times (frames {})", frame_list(&q.frames)),
            };
            let within = match (q.mra, q.wait_ns, after) {
                (Some((_, wait)), _, _) => {
                    format!("within the {} an MRA asked for", duration_text(wait))
                }
                (None, Some(wait), _) => format!("within the {} it allows", duration_text(wait)),
                (None, None, Some(after)) => {
                    format!("in the {} the capture holds after it", duration_text(after))
                }
                (None, None, None) => "in the rest of the capture".to_string(),
            };
            let mut detail = format!(
                "{what} {sends}: no {} from {} {within}",
                q.ask.answers(),
                q.dst
            );
            if let Some((frame, reason)) = q.given_up {
                detail.push_str(&format!(
                    "; its sender gave up (REJ {} at frame {frame})",
                    cm::rej::Reason(reason)
                ));
            }
            let mut a = Anomaly {
                kind: AnomalyKind::CmUnanswered,
                index: q.frames[0],
                src: q.src,
                dst: q.dst,
                qpn: q.qpn,
                psn: q.psn,
                nak_code: None,
                rnr_timer: None,
                detail,
                cm: None,
            };
            a.cm = Some(CmAnomaly {
                message: q.ask.name().into(),
                tid: tid_text(q.tid),
                frames: q.frames.clone(),
                reason: None,
                reason_name: None,
            });
            anomalies.push(a);
        }
    }

    /// A message sent again: an anomaly, and one more send of its request.
    fn retry(&mut self, at: &Seen, m: &cm::Repr, anomalies: &mut Vec<Anomaly>) {
        let attr = m.message.attr_id();
        let e = self
            .sent
            .entry((at.src, at.dst, attr, m.tid))
            .or_insert(Sends {
                first: at.index,
                first_ts: at.ts,
                count: 0,
            });
        e.count += 1;
        let (first, first_ts, n) = (e.first, e.first_ts, e.count);
        if n == 1 {
            return;
        }
        let after = match (at.ts, first_ts) {
            (Some(t), Some(f)) => format!(
                " {} after frame {first}",
                duration_text(t.saturating_sub(f))
            ),
            _ => format!(" after frame {first}"),
        };
        let name = m.message.name();
        let why = match &m.message {
            Message::Req(_) => format!("no {} came in time", Ask::Req.answers()),
            Message::Rep(_) => format!("no {} came in time", Ask::Rep.answers()),
            Message::Dreq(_) => format!("no {} came in time", Ask::Dreq.answers()),
            Message::SidrReq(_) => format!("no {} came in time", Ask::SidrReq.answers()),
            Message::Rtu(_) => "the answer to a repeated REP".into(),
            Message::Drep(_) => "the answer to a repeated DREQ".into(),
            Message::SidrRep(_) => "the answer to a repeated SIDR_REQ".into(),
            Message::Mra(_) | Message::Rej(_) => "the answer to a repeated request".into(),
        };
        let detail = format!(
            "{name} tid 0x{:016x} sent again{after} (send {n}): {why}",
            m.tid
        );
        let mut a = anomaly(at, AnomalyKind::CmRetry, detail);
        a.cm = Some(CmAnomaly {
            message: name.into(),
            tid: tid_text(m.tid),
            frames: vec![first, at.index],
            reason: None,
            reason_name: None,
        });
        anomalies.push(a);
    }

    /// A request sent (or sent again).
    fn ask(
        &mut self,
        at: &Seen,
        ask: Ask,
        tid: u64,
        wait_ns: Option<u64>,
        service: Option<String>,
        comm_ids: Option<(u32, u32)>,
    ) {
        if let Some(&i) = self.open.get(&(at.src, at.dst, ask, tid)) {
            self.requests[i].frames.push(at.index);
            return;
        }
        self.open
            .insert((at.src, at.dst, ask, tid), self.requests.len());
        self.requests.push(Request {
            ask,
            src: at.src,
            dst: at.dst,
            tid,
            frames: vec![at.index],
            first_ts: at.ts,
            qpn: at.qpn,
            psn: at.psn,
            wait_ns,
            mra: None,
            answered: None,
            given_up: None,
            service,
            comm_ids,
        });
    }

    /// An answer from `at.src` to a request of kind `ask` it received.
    /// Returns whether there was one.
    fn answer(&mut self, at: &Seen, ask: Ask, tid: u64) -> bool {
        match self.open.get(&(at.dst, at.src, ask, tid)) {
            Some(&i) => {
                let q = &mut self.requests[i];
                q.answered.get_or_insert(at.index);
                true
            }
            None => false,
        }
    }

    fn reject(&self, at: &Seen, m: &cm::Repr, r: &cm::rej::Repr, own: Option<usize>) -> Anomaly {
        let reason = cm::rej::Reason(r.reason);
        let of = match own.map(|i| &self.requests[i]) {
            Some(q) => format!(
                "of its own {} at frame {}{}: the sender gave up waiting for {}",
                q.ask.name(),
                q.frames[0],
                q.service
                    .as_ref()
                    .map_or_else(String::new, |s| format!(" ({s})")),
                q.dst
            ),
            None => {
                let asked = [Ask::Req, Ask::Rep]
                    .into_iter()
                    .find_map(|ask| self.open.get(&(at.dst, at.src, ask, m.tid)))
                    .map(|&i| &self.requests[i]);
                match asked {
                    Some(q) => format!(
                        "from {} to the {} at frame {}{}",
                        at.src,
                        q.ask.name(),
                        q.frames[0],
                        q.service
                            .as_ref()
                            .map_or_else(String::new, |s| format!(" ({s})"))
                    ),
                    None => format!("of a {} from {}", r.message_rejected, at.src),
                }
            }
        };
        let hint = match (r.reason, own.is_some()) {
            (cm::rej::reason::TIMEOUT, true) => String::new(),
            (cm::rej::reason::TIMEOUT, false) => "; the peer timed out waiting".into(),
            (cm::rej::reason::INVALID_SERVICE_ID, _) => {
                format!("; nothing listens on that service at {}", at.src)
            }
            (cm::rej::reason::CONSUMER_DEFINED, _) => {
                "; the application refused it (rdma_reject)".into()
            }
            (cm::rej::reason::STALE_CONN, _) => {
                "; the peer still holds this QP from an earlier connection".into()
            }
            (cm::rej::reason::NO_RESOURCES | cm::rej::reason::NO_QP, _) => {
                format!("; {} is out of resources", at.src)
            }
            _ => String::new(),
        };
        let detail = format!("REJ {reason} {of}{hint}");
        let mut a = anomaly(at, AnomalyKind::CmReject, detail);
        a.cm = Some(CmAnomaly {
            message: "REJ".into(),
            tid: tid_text(m.tid),
            frames: vec![at.index],
            reason: Some(r.reason),
            reason_name: Some(
                cm::rej::reason_name(r.reason)
                    .unwrap_or("unassigned")
                    .into(),
            ),
        });
        a
    }
}

fn anomaly(at: &Seen, kind: AnomalyKind, detail: String) -> Anomaly {
    Anomaly {
        kind,
        index: at.index,
        src: at.src,
        dst: at.dst,
        qpn: at.qpn,
        psn: at.psn,
        nak_code: None,
        rnr_timer: None,
        detail,
        cm: None,
    }
}

/// `rdma_cm TCP port 7174`, or the service ID in hex.
fn service_text(sid: u64) -> String {
    match cm::ip::split_service_id(sid)
        .and_then(|(ps, port)| cm::ip::port_space_name(ps).map(|n| (n, port)))
    {
        Some((name, port)) => format!("rdma_cm {name} port {port}"),
        None => format!("service ID 0x{sid:016x}"),
    }
}

fn tid_text(tid: u64) -> String {
    format!("0x{tid:016x}")
}

fn frame_list(frames: &[usize]) -> String {
    frames
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;
    use crate::cm::{drep, dreq, mra, req, Repr};

    const S: u64 = 1_000_000_000;

    fn a() -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(10, 0, 3, 2))
    }

    fn b() -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(10, 0, 3, 1))
    }

    fn at(index: usize, secs: u64, src: IpAddr, dst: IpAddr) -> Seen {
        Seen {
            index,
            ts: Some(secs * S),
            src,
            dst,
            qpn: 1,
            psn: index as u32,
        }
    }

    /// rping's REQ: CM response timeout 20, local ACK timeout 19: 6.4 s.
    fn req() -> Repr {
        let mut r = req::Repr {
            local_comm_id: 0x11,
            service_id: cm::ip::service_id(cm::ip::PS_TCP, 7174),
            remote_cm_response_timeout: 20,
            local_cm_response_timeout: 20,
            ..req::Repr::default()
        };
        r.primary.local_ack_timeout = 19;
        Repr {
            tid: 7,
            message: Message::Req(r),
        }
    }

    fn run(msgs: &[(Seen, Repr)], end: u64) -> (Vec<Anomaly>, Vec<String>) {
        let mut t = Tracker::default();
        let (mut an, mut notes) = (Vec::new(), Vec::new());
        for (s, m) in msgs {
            t.observe(s, m, &mut an);
        }
        t.finish(Some(end * S), &mut an, &mut notes);
        (an, notes)
    }

    #[test]
    fn an_mra_stretches_the_wait_for_the_rep_to_its_service_timeout() {
        let mra = Repr {
            tid: 7,
            message: Message::Mra(mra::Repr {
                local_comm_id: 0x22,
                remote_comm_id: 0x11,
                message_mraed: MsgResponse::Req,
                // 4.096 µs × 2^24 = 69 s.
                service_timeout: 24,
                private_data: [0; mra::PRIVATE_DATA_LEN],
            }),
        };
        // 20 s after the REQ: past its 6.4 s, within the MRA's 69 s.
        let (an, notes) = run(
            &[(at(1, 0, a(), b()), req()), (at(2, 1, b(), a()), mra)],
            20,
        );
        assert!(an.is_empty(), "{an:?}");
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("no answer yet"), "{}", notes[0]);
        // Without the MRA the REQ is unanswered.
        let (an, _) = run(&[(at(1, 0, a(), b()), req())], 20);
        assert_eq!(an.len(), 1);
        assert_eq!(an[0].kind, AnomalyKind::CmUnanswered);
        assert!(
            an[0].detail.contains("within the 6.4 s it allows"),
            "{}",
            an[0].detail
        );
    }

    #[test]
    fn crossing_dreqs_answer_each_other() {
        let d = |local, remote| Repr {
            tid: u64::from(local),
            message: Message::Dreq(dreq::Repr {
                local_comm_id: local,
                remote_comm_id: remote,
                remote_qpn: 0x11,
                private_data: [0; dreq::PRIVATE_DATA_LEN],
            }),
        };
        let (an, notes) = run(
            &[
                (at(1, 0, a(), b()), d(0x11, 0x22)),
                (at(2, 0, b(), a()), d(0x22, 0x11)),
            ],
            10,
        );
        assert!(an.is_empty() && notes.is_empty(), "{an:?} {notes:?}");
        // A DREP to the other's DREQ does not answer a DREQ of another connection.
        let drep = Repr {
            tid: 0x99,
            message: Message::Drep(drep::Repr {
                local_comm_id: 0x22,
                remote_comm_id: 0x11,
                private_data: [0; drep::PRIVATE_DATA_LEN],
            }),
        };
        let (an, _) = run(
            &[
                (at(1, 0, a(), b()), d(0x11, 0x22)),
                (at(2, 0, b(), a()), drep),
            ],
            10,
        );
        assert_eq!(an.len(), 1, "{an:?}");
        assert!(an[0].detail.starts_with("DREQ tid 0x0000000000000011 from 10.0.3.2 sent once: no DREP from 10.0.3.1 in the 10 s"), "{}", an[0].detail);
    }

    #[test]
    fn a_rej_of_the_rep_answers_the_rep_even_after_the_req_was_answered() {
        let rep = Repr {
            tid: 7,
            message: Message::Rep(crate::cm::rep::Repr {
                local_comm_id: 0x22,
                remote_comm_id: 0x11,
                local_qkey: 0,
                local_qpn: 0x12,
                local_eecn: 0,
                starting_psn: 0,
                responder_resources: 1,
                initiator_depth: 1,
                target_ack_delay: 0,
                failover_accepted: 0,
                flow_control: false,
                rnr_retry_count: 7,
                srq: false,
                local_ca_guid: 0,
                private_data: [0; crate::cm::rep::PRIVATE_DATA_LEN],
            }),
        };
        let rej = Repr {
            tid: 7,
            message: Message::Rej(crate::cm::rej::Repr {
                local_comm_id: 0x11,
                remote_comm_id: 0x22,
                message_rejected: MsgResponse::Rep,
                reject_info_length: 0,
                reason: crate::cm::rej::reason::CONSUMER_DEFINED,
                ari: [0; crate::cm::rej::ARI_LEN],
                private_data: [0; crate::cm::rej::PRIVATE_DATA_LEN],
            }),
        };
        let (an, notes) = run(
            &[
                (at(1, 0, a(), b()), req()),
                (at(2, 0, b(), a()), rep),
                (at(3, 0, a(), b()), rej),
            ],
            30,
        );
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(an.len(), 1, "{an:?}");
        assert_eq!(an[0].kind, AnomalyKind::CmReject);
        assert_eq!(
            an[0].detail,
            "REJ consumer defined (28) from 10.0.3.2 to the REP at frame 2; the application \
             refused it (rdma_reject)"
        );
    }
}
