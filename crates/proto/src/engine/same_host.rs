//! Same-host requests: the soft NIC's one-copy path between two processes
//! on one host (wire format: [`rdmakit_wire::cma`]).
//!
//! The requester sends an RC RDMA WRITE, SEND or RDMA READ longer than the
//! path MTU as one vendor packet naming its own buffers, when the driver
//! said the QP's packets reach the peer over a channel the kernel
//! authenticated ([`Qp::set_same_host`](super::Qp::set_same_host)) and the
//! [`Memory`] can name them ([`Memory::host_addr`]). The request names no
//! process: the responder's [`Memory::peer_copy`] reaches the process its
//! channel identified. The packet takes the PSNs of the packets it
//! replaces, so ACKs, NAKs, retries and ordering are the engine's as usual.
//! The responder makes every check a normal request gets (state, PSN,
//! access flags, R_Key/PD/bounds, receive WQE and its length) before
//! [`Memory::peer_copy`] moves the bytes, then ACKs the last PSN. A
//! responder that cannot copy answers a NAK with code
//! [`rdmakit_wire::cma::NAK_DECLINE`]; the requester then resends from that
//! PSN as ordinary packets, and keeps doing so on this QP.
//!
//! The extension owns whether it is on and whether the peer declined
//! ([`SameHost`]). The [`Requester`](super::requester::Requester) asks it
//! for a WR's request ([`SameHost::request`]) and books the PSNs; the
//! [`Completer`](super::completer::Completer) tells it of a decline; a
//! request from the network goes to [`handle_request`], which executes it
//! through the [`Responder`]'s methods.

use rdmakit_wire::aeth::{AethKind, NakCode};
use rdmakit_wire::cma as wcma;
use rdmakit_wire::{bth, reth, roce};

use super::qp::Common;
use super::responder::{check_reth, rem_access, RespErr, Responder};
use super::{pkts_for, DropReason};
use crate::mem::{Key, Memory, PeerCopy, PeerDir, PeerError};
use crate::psn::Psn;
use crate::qp::{Access, QpType};
use crate::wr::{SendOp, SendWr, WcOpcode, WcStatus};

/// Most PSNs a requester keeps unacknowledged while it sends same-host
/// requests (each is one packet however many PSNs it takes; the window
/// counts packets): 1 GiB of messages at MTU 1024, and a sixteenth of the
/// PSN space.
pub(super) const SAME_HOST_MAX_PSNS: i32 = 1 << 20;

/// The NAK that declines a same-host request ([`wcma::SYNDROME_DECLINE`]).
const DECLINE: AethKind = AethKind::Nak(NakCode::Reserved(wcma::NAK_DECLINE));

/// Whether a QP sends large RC messages as same-host requests.
#[derive(Debug, Default)]
pub(super) struct SameHost {
    /// The driver reaches the peer over an authenticated same-host channel.
    on: bool,
    /// The peer declined a request: packets from now on.
    declined: bool,
}

/// One WR as a same-host request: the vendor opcode and the header.
pub(super) struct Request {
    opcode: u8,
    hdr: wcma::Repr,
}

/// Why a same-host request was not executed.
enum Refusal {
    /// As a normal request would have been refused.
    Resp(RespErr),
    /// The copy cannot be made: decline NAK, the requester falls back.
    Decline,
}

impl SameHost {
    pub(super) fn new() -> SameHost {
        SameHost::default()
    }

    /// On or off; turning it on forgets an earlier decline.
    pub(super) fn set(&mut self, on: bool) {
        self.on = on;
        if on {
            self.declined = false;
        }
    }

    /// The peer declined a request: packets from now on.
    pub(super) fn declined(&mut self) {
        self.declined = true;
    }

    /// Whether large messages go as same-host requests (on, RC, and not
    /// declined by the peer).
    pub(super) fn active(&self, c: &Common) -> bool {
        self.on && !self.declined && c.cfg().qp_type == QpType::Rc
    }

    /// The same-host request for `wr` (`len` bytes), if it qualifies: an
    /// RDMA WRITE, SEND or RDMA READ longer than the MTU whose buffers all
    /// have host addresses. `None` sends it as packets.
    pub(super) fn request<M: Memory + ?Sized>(
        &self,
        c: &Common,
        wr: &SendWr,
        len: u32,
        mem: &M,
    ) -> Option<Request> {
        if !self.active(c) {
            return None;
        }
        let pd = c.cfg().pd;
        let (opcode, rkey, va, need) = match wr.op {
            SendOp::Write { remote_addr, rkey } => {
                (wcma::OP_WRITE, rkey, remote_addr, Access::empty())
            }
            SendOp::Send => (wcma::OP_SEND, 0, 0, Access::empty()),
            SendOp::Read { remote_addr, rkey } => {
                (wcma::OP_READ, rkey, remote_addr, Access::LOCAL_WRITE)
            }
            _ => return None,
        };
        if len <= c.mtu() || wr.sg_list.len() > wcma::MAX_IOV {
            return None;
        }
        let mut iov = [(0u64, 0u64); wcma::MAX_IOV];
        let mut n = 0usize;
        for s in wr.sg_list.iter().filter(|s| s.length > 0) {
            let l = u64::from(s.length);
            let a = mem.host_addr(pd, Key::Local(s.lkey), s.addr, l, need)?;
            *iov.get_mut(n)? = (a, l);
            n += 1;
        }
        let hdr = wcma::Repr {
            len,
            rkey,
            va,
            iov_count: u8::try_from(n).ok()?,
            iov,
        };
        Some(Request { opcode, hdr })
    }
}

impl Request {
    /// Writes the request into `buf` under `bth` (this QP's RC SEND ONLY
    /// for the first PSN, which it emits with AckReq and relabels with the
    /// vendor opcode); its length, `None` if `buf` is too short.
    pub(super) fn emit(&self, mut p: roce::Repr<'_>, buf: &mut [u8]) -> Option<usize> {
        let hlen = self.hdr.buffer_len();
        p.bth.ack_req = true;
        let (at, len) = p.emit_header_without_icrc(buf, hlen).ok()?;
        self.hdr
            .emit(&mut wcma::Packet::new_unchecked(
                buf.get_mut(at..at + hlen)?,
            ))
            .ok()?;
        buf[0] = self.opcode;
        Some(len)
    }
}

/// A same-host request from the network: checked as a packet would be
/// (state, QPN, P_Key, PSN), executed, then ACKed, or NAKed as a packet
/// would be, or declined.
pub(super) fn handle_request<M: Memory + ?Sized>(
    resp: &mut Responder,
    c: &mut Common,
    bytes: &[u8],
    mem: &mut M,
) {
    let Ok(b) = bth::Packet::new_checked(bytes) else {
        c.drop(DropReason::malformed);
        return;
    };
    let Ok(h) = wcma::Packet::new_checked(b.payload()).and_then(|h| wcma::Repr::parse(&h)) else {
        c.drop(DropReason::malformed);
        return;
    };
    let reason = c
        .refusal(b.dest_qp(), c.cfg().qp_type == QpType::Rc, b.pkey())
        .or(resp.fatal_pending().then_some(DropReason::bad_state));
    if !c.admit(reason) {
        return;
    }
    let psn = Psn::new(b.psn());
    // A duplicate was executed already (its ACK was lost): acknowledge
    // again.
    if !resp.in_sequence(psn, c, |r, _| r.push_ack(r.epsn().sub(1))) {
        return;
    }
    match execute(b.opcode().0, &h, resp, c, mem) {
        Ok(npk) => {
            c.stats_mut().same_host_executed += 1;
            resp.executed(psn, npk);
        }
        Err(Refusal::Decline) => {
            c.stats_mut().same_host_declined += 1;
            resp.push_nak(psn, DECLINE, false);
        }
        Err(Refusal::Resp(RespErr::Rnr)) => {
            let timer = c.attr().min_rnr_timer;
            resp.push_nak(psn, AethKind::RnrNak { timer }, false);
        }
        Err(Refusal::Resp(RespErr::Nak(code, _))) => {
            resp.push_nak(psn, AethKind::Nak(code), true);
        }
    }
}

/// Checks and executes an in-sequence same-host request; returns the
/// number of PSNs it covers.
fn execute<M: Memory + ?Sized>(
    opcode: u8,
    h: &wcma::Repr,
    resp: &mut Responder,
    c: &mut Common,
    mem: &mut M,
) -> Result<u32, Refusal> {
    let mtu = c.mtu();
    let pd = c.cfg().pd;
    let acc = c.attr().qp_access_flags;
    let inv_req = || Refusal::Resp(RespErr::Nak(NakCode::InvalidRequest, None));
    // A message in progress must continue with its own packets; a
    // request a packet could carry never comes this way.
    if resp.receiving() || h.len <= mtu || h.len > 1 << 31 {
        return Err(inv_req());
    }
    let peer = h.iovecs();
    let len = u64::from(h.len);
    let reth = reth::Repr {
        va: h.va,
        rkey: h.rkey,
        dma_len: h.len,
    };
    let refused = |e: PeerError| match e {
        PeerError::Mem(_) => Refusal::Resp(rem_access()),
        PeerError::Declined(_) => Refusal::Decline,
    };
    match opcode {
        wcma::OP_WRITE | wcma::OP_READ => {
            let (right, dir) = if opcode == wcma::OP_WRITE {
                (Access::REMOTE_WRITE, PeerDir::Pull)
            } else {
                (Access::REMOTE_READ, PeerDir::Push)
            };
            if !acc.contains(right) {
                return Err(inv_req());
            }
            check_reth(mem, pd, reth, right).map_err(Refusal::Resp)?;
            let local = [(Key::Remote(h.rkey), h.va, len)];
            let copy = PeerCopy {
                pd,
                local: &local,
                need: right,
                peer,
                dir,
            };
            mem.peer_copy(&copy).map_err(refused)?;
        }
        wcma::OP_SEND => {
            let Some(r) = resp.next_recv() else {
                return Err(Refusal::Resp(RespErr::Rnr));
            };
            let mut local = Vec::with_capacity(r.sg_list.len());
            let mut left = len;
            for s in &r.sg_list {
                if left == 0 {
                    break;
                }
                let n = left.min(u64::from(s.length));
                if n > 0 {
                    local.push((Key::Local(s.lkey), s.addr, n));
                }
                left -= n;
            }
            let fail = if left > 0 {
                Some((NakCode::InvalidRequest, WcStatus::LocLenErr))
            } else if local
                .iter()
                .any(|&(k, a, n)| mem.check(pd, k, a, n, Access::LOCAL_WRITE).is_err())
            {
                Some((NakCode::RemoteOperationalError, WcStatus::LocProtErr))
            } else {
                let copy = PeerCopy {
                    pd,
                    local: &local,
                    need: Access::LOCAL_WRITE,
                    peer,
                    dir: PeerDir::Pull,
                };
                match mem.peer_copy(&copy) {
                    Ok(_) => None,
                    Err(PeerError::Declined(_)) => return Err(Refusal::Decline),
                    Err(PeerError::Mem(_)) => {
                        Some((NakCode::RemoteOperationalError, WcStatus::LocProtErr))
                    }
                }
            };
            let Some(r) = resp.take_recv() else {
                return Err(inv_req());
            };
            if let Some((code, status)) = fail {
                c.complete(c.wc(r.wr_id, status, WcOpcode::Recv));
                return Err(Refusal::Resp(RespErr::Nak(code, None)));
            }
            let mut wc = c.wc(r.wr_id, WcStatus::Success, WcOpcode::Recv);
            wc.byte_len = h.len;
            wc.src_qp = c.attr().dest_qp_num;
            c.complete(wc);
            resp.recycle(r.sg_list);
        }
        _ => return Err(inv_req()),
    }
    Ok(pkts_for(h.len, mtu))
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::collections::HashMap;
    use std::rc::Rc;

    use rdmakit_wire::cma as wcma;

    use crate::mem::{
        AtomicOp, Key, MemResult, MemTable, Memory, Pd, PeerCopy, PeerDir, PeerError,
    };
    use crate::qp::{Access, Mtu, QpType};
    use crate::testing::rts_qp;
    use crate::time::Instant;
    use crate::wr::{RecvWr, SendOp, SendWr, Sge, Wc, WcStatus};
    use crate::Qp;

    /// "Processes" on one host: pid → memory. Host addresses are the
    /// tables' virtual addresses.
    type Host = Rc<RefCell<HashMap<u32, MemTable>>>;
    /// (pid, host address, length).
    type Span = (u32, u64, u64);

    struct TestMem {
        pid: u32,
        host: Host,
        /// The process the channel requests arrive on identified (None: a
        /// request that came another way, as over UDP).
        channel: Option<u32>,
        /// Declines every copy (a responder with the feature off).
        decline: bool,
        copies: usize,
    }

    fn with<R>(m: &TestMem, f: impl FnOnce(&MemTable) -> R) -> R {
        f(&m.host.borrow()[&m.pid])
    }

    fn with_mut<R>(m: &TestMem, f: impl FnOnce(&mut MemTable) -> R) -> R {
        f(m.host.borrow_mut().get_mut(&m.pid).unwrap())
    }

    /// Bytes at host address `addr` of a table (any region holding them).
    fn region_at(t: &mut MemTable, addr: u64, len: u64) -> Option<&mut [u8]> {
        let mut i = 0u32;
        loop {
            let r = t.region(i << 8)?;
            if addr >= r.addr && addr + len <= r.addr + r.data.len() as u64 {
                let off = (addr - r.addr) as usize;
                let r = t.region_mut(i << 8)?;
                return r.data.get_mut(off..off + len as usize);
            }
            i += 1;
        }
    }

    impl Memory for TestMem {
        fn check(&self, pd: Pd, key: Key, addr: u64, len: u64, need: Access) -> MemResult {
            with(self, |t| t.check(pd, key, addr, len, need))
        }
        fn read(&self, pd: Pd, key: Key, addr: u64, out: &mut [u8], need: Access) -> MemResult {
            with(self, |t| t.read(pd, key, addr, out, need))
        }
        fn write(&mut self, pd: Pd, key: Key, addr: u64, data: &[u8], need: Access) -> MemResult {
            with_mut(self, |t| t.write(pd, key, addr, data, need))
        }
        fn atomic(&mut self, pd: Pd, rkey: u32, addr: u64, op: AtomicOp) -> MemResult<u64> {
            with_mut(self, |t| t.atomic(pd, rkey, addr, op))
        }
        fn invalidate(&mut self, pd: Pd, rkey: u32) -> MemResult {
            with_mut(self, |t| t.invalidate(pd, rkey))
        }
        fn host_addr(&self, pd: Pd, key: Key, addr: u64, len: u64, need: Access) -> Option<u64> {
            self.check(pd, key, addr, len, need).ok().map(|()| addr)
        }
        fn peer_copy(&mut self, copy: &PeerCopy<'_>) -> Result<u64, PeerError> {
            let PeerCopy {
                pd,
                local,
                need,
                peer,
                dir,
            } = *copy;
            for &(k, a, n) in local {
                self.check(pd, k, a, n, need)?;
            }
            if self.decline {
                return Err(PeerError::Declined("feature off"));
            }
            let Some(peer_pid) = self.channel else {
                return Err(PeerError::Declined("no authenticated channel"));
            };
            let mut host = self.host.borrow_mut();
            // Stage the bytes of the source side, then write the other.
            let (src, dst): (Vec<Span>, Vec<Span>) = {
                let l = local.iter().map(|&(_, a, n)| (self.pid, a, n)).collect();
                let p = peer.iter().map(|&(a, n)| (peer_pid, a, n)).collect();
                match dir {
                    PeerDir::Pull => (p, l),
                    PeerDir::Push => (l, p),
                }
            };
            let mut bytes = Vec::new();
            for (pid, a, n) in src {
                let t = host.get_mut(&pid).unwrap();
                bytes.extend_from_slice(region_at(t, a, n).ok_or(PeerError::Declined("EFAULT"))?);
            }
            let mut at = 0;
            for (pid, a, n) in dst {
                let t = host.get_mut(&pid).unwrap();
                let d = region_at(t, a, n).ok_or(PeerError::Declined("EFAULT"))?;
                d.copy_from_slice(&bytes[at..at + n as usize]);
                at += n as usize;
            }
            self.copies += 1;
            Ok(at as u64)
        }
    }

    const LEN: u32 = 16 * 1024;
    const A_BUF: u64 = 0x10_0000;
    const B_BUF: u64 = 0x80_0000;

    struct Pair {
        a: Qp,
        b: Qp,
        ma: TestMem,
        mb: TestMem,
        a_lkey: u32,
        b_lkey: u32,
        b_rkey: u32,
        /// Packets A sent.
        a_sent: usize,
    }

    fn pair() -> Pair {
        let host: Host = Rc::default();
        let mut ta = MemTable::new();
        let (a_lkey, _) = ta.register(Pd(1), A_BUF, LEN as usize, Access::LOCAL_WRITE);
        let mut tb = MemTable::new();
        let (b_lkey, b_rkey) = tb.register(
            Pd(1),
            B_BUF,
            LEN as usize,
            Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ,
        );
        host.borrow_mut().insert(100, ta);
        host.borrow_mut().insert(200, tb);
        let mem = |pid, peer| TestMem {
            pid,
            host: host.clone(),
            channel: Some(peer),
            decline: false,
            copies: 0,
        };
        let qp = |qpn, dqpn| {
            let access = Access::REMOTE_WRITE | Access::REMOTE_READ;
            rts_qp(qpn, dqpn, QpType::Rc, Mtu::Mtu1024, access, true)
        };
        for (pid, base) in [(100, A_BUF), (200, B_BUF)] {
            let mut h = host.borrow_mut();
            let t = h.get_mut(&pid).unwrap();
            let r = t.region_mut(0).unwrap();
            for (i, b) in r.data.iter_mut().enumerate() {
                *b = (i as u64 * 7 + base / 0x1000) as u8;
            }
        }
        Pair {
            a: qp(0x11, 0x22),
            b: qp(0x22, 0x11),
            ma: mem(100, 200),
            mb: mem(200, 100),
            a_lkey,
            b_lkey,
            b_rkey,
            a_sent: 0,
        }
    }

    impl Pair {
        /// Moves packets both ways until both sides are quiet.
        fn run(&mut self) {
            let now = Instant::ZERO;
            let mut buf = vec![0u8; 4096];
            for _ in 0..1000 {
                let mut moved = false;
                while let Some(t) = self.a.poll_transmit(now, &mut buf, &mut self.ma) {
                    self.a_sent += 1;
                    self.b.handle_packet(now, &buf[..t.len], &mut self.mb);
                    moved = true;
                }
                while let Some(t) = self.b.poll_transmit(now, &mut buf, &mut self.mb) {
                    self.a.handle_packet(now, &buf[..t.len], &mut self.ma);
                    moved = true;
                }
                if !moved {
                    return;
                }
            }
        }

        fn data(&self, pid: u32) -> Vec<u8> {
            self.ma.host.borrow()[&pid].region(0).unwrap().data.clone()
        }
    }

    fn sge(addr: u64, length: u32, lkey: u32) -> Vec<Sge> {
        vec![Sge { addr, length, lkey }]
    }

    fn write(p: &mut Pair, rkey: u32, va: u64) -> Wc {
        let op = SendOp::Write {
            remote_addr: va,
            rkey,
        };
        p.a.post_send(SendWr::new(1, op, sge(A_BUF, LEN, p.a_lkey)))
            .unwrap();
        p.run();
        p.a.poll_completion().expect("a completion")
    }

    /// READs `LEN` bytes at `B_BUF` into `A_BUF` (wr 7).
    fn read(p: &mut Pair) -> Wc {
        let op = SendOp::Read {
            remote_addr: B_BUF,
            rkey: p.b_rkey,
        };
        p.a.post_send(SendWr::new(7, op, sge(A_BUF, LEN, p.a_lkey)))
            .unwrap();
        p.run();
        p.a.poll_completion().expect("a completion")
    }

    /// SENDs `LEN` bytes of `A_BUF` (wr 8) to a receive WQE of `recv_len`
    /// bytes at `B_BUF` (wr 9).
    fn send(p: &mut Pair, recv_len: u32) {
        let sg = sge(B_BUF, recv_len, p.b_lkey);
        p.b.post_recv(RecvWr {
            wr_id: 9,
            sg_list: sg,
        })
        .unwrap();
        let sg = sge(A_BUF, LEN, p.a_lkey);
        p.a.post_send(SendWr::new(8, SendOp::Send, sg)).unwrap();
        p.run();
    }

    #[test]
    fn a_write_goes_as_one_request_and_one_copy() {
        let mut p = pair();
        let b_rkey = p.b_rkey;
        let wc = write(&mut p, b_rkey, B_BUF);
        assert_eq!(wc.status, WcStatus::Success);
        assert_eq!(wc.byte_len, LEN);
        assert_eq!(p.a_sent, 1, "one packet instead of 16");
        assert_eq!(p.mb.copies, 1);
        assert_eq!(p.data(100), p.data(200));
        assert_eq!(p.a.stats().same_host_sent, 1);
        assert_eq!(p.b.stats().same_host_executed, 1);
        // PSNs: the request took 16; the next message follows on.
        let wc = write(&mut p, b_rkey, B_BUF);
        assert_eq!(wc.status, WcStatus::Success);
        assert_eq!(p.b.stats().duplicates, 0);
    }

    #[test]
    fn a_read_pushes_into_the_requester() {
        let mut p = pair();
        let wc = read(&mut p);
        assert_eq!((wc.status, wc.byte_len), (WcStatus::Success, LEN));
        assert_eq!(p.a_sent, 1);
        assert_eq!(p.data(100), p.data(200));
    }

    #[test]
    fn a_send_fills_a_receive_wqe() {
        let mut p = pair();
        send(&mut p, LEN);
        assert_eq!(p.a.poll_completion().unwrap().status, WcStatus::Success);
        let r = p.b.poll_completion().unwrap();
        assert_eq!((r.wr_id, r.status, r.byte_len), (9, WcStatus::Success, LEN));
        assert_eq!(p.a_sent, 1);
        assert_eq!(p.data(100), p.data(200));
    }

    /// A WRITE under `b_rkey ^ rkey_xor` to `va` is NAKed and copies nothing.
    fn assert_write_refused(rkey_xor: u32, va: u64) {
        let mut p = pair();
        let before = p.data(200);
        let rkey = p.b_rkey ^ rkey_xor;
        let wc = write(&mut p, rkey, va);
        assert_eq!(wc.status, WcStatus::RemAccessErr);
        assert_eq!(p.mb.copies, 0);
        assert_eq!(p.data(200), before);
    }

    #[test]
    fn a_bad_rkey_is_naked_and_nothing_is_copied() {
        assert_write_refused(0x100, B_BUF);
    }

    #[test]
    fn an_out_of_bounds_write_is_naked_and_nothing_is_copied() {
        assert_write_refused(0, B_BUF + 8);
    }

    /// Issue 34: a request that did not come on an authenticated channel
    /// (UDP) moves nothing; the requester falls back to packets.
    #[test]
    fn a_request_without_an_authenticated_channel_is_declined_then_packets_deliver() {
        let mut p = pair();
        p.mb.channel = None;
        let b_rkey = p.b_rkey;
        let wc = write(&mut p, b_rkey, B_BUF);
        assert_eq!(wc.status, WcStatus::Success);
        assert_eq!(p.mb.copies, 0, "nothing copied without a channel");
        assert_eq!(p.b.stats().same_host_declined, 1);
        assert_eq!(p.a.stats().same_host_fallbacks, 1);
        assert!(!p.a.same_host_active());
        assert_eq!(p.a_sent, 1 + 16, "the request, then the 16 packets");
        assert_eq!(p.data(100), p.data(200));
    }

    /// Issue 34: the request names buffers, never a process. A READ's data
    /// goes into the process the channel identified; another process with
    /// memory at the very addresses the request names is not touched.
    #[test]
    fn a_read_reaches_the_channels_process_and_no_other() {
        let mut p = pair();
        let mut bystander = MemTable::new();
        bystander.register(Pd(1), A_BUF, LEN as usize, Access::LOCAL_WRITE);
        p.ma.host.borrow_mut().insert(300, bystander);
        let untouched = p.data(300);
        let wc = read(&mut p);
        assert_eq!((wc.status, wc.byte_len), (WcStatus::Success, LEN));
        assert_eq!(p.data(100), p.data(200));
        assert_eq!(p.data(300), untouched);
        // The channel names the bystander: its memory is what the copy
        // reaches, whatever the request says (the soft NIC binds a channel
        // to the process the kernel identified; this pins the engine to
        // asking the memory, not the packet).
        let mut p = pair();
        let mut bystander = MemTable::new();
        bystander.register(Pd(1), A_BUF, LEN as usize, Access::LOCAL_WRITE);
        p.ma.host.borrow_mut().insert(300, bystander);
        p.mb.channel = Some(300);
        let before = p.data(100);
        let wc = read(&mut p);
        assert_eq!(wc.status, WcStatus::Success);
        assert_eq!(p.data(300), p.data(200));
        assert_eq!(
            p.data(100),
            before,
            "the requester's buffer was not the target"
        );
    }

    #[test]
    fn requests_sent_behind_a_declined_one_go_again_as_packets() {
        let mut p = pair();
        p.mb.decline = true;
        let half = LEN / 2;
        for (i, off) in [0, half].into_iter().enumerate() {
            let op = SendOp::Write {
                remote_addr: B_BUF + u64::from(off),
                rkey: p.b_rkey,
            };
            let sg = sge(A_BUF + u64::from(off), half, p.a_lkey);
            p.a.post_send(SendWr::new(i as u64, op, sg)).unwrap();
        }
        p.run();
        for i in 0..2 {
            let wc = p.a.poll_completion().unwrap();
            assert_eq!((wc.wr_id, wc.status), (i, WcStatus::Success));
        }
        // Both requests, then 8 + 8 packets.
        assert_eq!(p.a_sent, 2 + 16);
        assert_eq!(p.a.stats().same_host_fallbacks, 1);
        assert_eq!(p.data(100), p.data(200));
    }

    #[test]
    fn a_responder_without_the_feature_declines_reads_too() {
        let mut p = pair();
        p.mb.decline = true;
        let wc = read(&mut p);
        assert_eq!((wc.status, wc.byte_len), (WcStatus::Success, LEN));
        assert_eq!(p.a_sent, 2, "the request, then a READ request");
        assert_eq!(p.data(100), p.data(200));
    }

    #[test]
    fn a_short_receive_wqe_fails_both_sides_without_a_copy() {
        let mut p = pair();
        send(&mut p, LEN / 2);
        assert_eq!(
            p.a.poll_completion().unwrap().status,
            WcStatus::RemInvReqErr
        );
        assert_eq!(p.b.poll_completion().unwrap().status, WcStatus::LocLenErr);
        assert_eq!(p.mb.copies, 0);
    }

    /// Posts `n` WRITEs of `LEN` bytes (16 PSNs each at MTU 1024).
    fn post_writes(p: &mut Pair, n: u64) {
        for i in 0..n {
            let op = SendOp::Write {
                remote_addr: B_BUF,
                rkey: p.b_rkey,
            };
            let wr = SendWr::new(i, op, sge(A_BUF, LEN, p.a_lkey));
            p.a.post_send(wr).unwrap();
        }
    }

    /// The packets A sends now, not yet delivered.
    fn burst(p: &mut Pair) -> Vec<Vec<u8>> {
        let mut buf = vec![0u8; 4096];
        let mut out = Vec::new();
        while let Some(t) = p.a.poll_transmit(Instant::ZERO, &mut buf, &mut p.ma) {
            out.push(buf[..t.len].to_vec());
        }
        out
    }

    #[test]
    fn the_window_counts_a_same_host_request_as_one_packet() {
        let mut p = pair();
        // 140 requests of 16 PSNs: the 128-packet window lets 128 go (8
        // when it counted PSNs), and the rest once ACKs come.
        post_writes(&mut p, 140);
        let sent = burst(&mut p);
        assert_eq!(sent.len(), 128);
        for pkt in &sent {
            p.b.handle_packet(Instant::ZERO, pkt, &mut p.mb);
        }
        p.run();
        assert_eq!(p.a_sent, 12);
        for i in 0..140 {
            let wc = p.a.poll_completion().expect("a completion");
            assert_eq!((wc.wr_id, wc.status), (i, WcStatus::Success));
        }
        assert_eq!(p.mb.copies, 140);
        assert_eq!(p.b.stats().duplicates, 0);
    }

    #[test]
    fn a_declined_qp_counts_its_window_in_psns_again() {
        let mut p = pair();
        p.mb.channel = None;
        post_writes(&mut p, 2);
        // The first request goes, is declined, and the QP falls back.
        p.run();
        assert!(!p.a.same_host_active());
        post_writes(&mut p, 12);
        assert_eq!(burst(&mut p).len(), 128, "8 messages of 16 packets");
    }

    #[test]
    fn a_truncated_request_is_dropped_as_malformed() {
        let mut p = pair();
        let mut bytes = [0u8; 12 + wcma::FIXED_LEN];
        bytes[0] = wcma::OP_WRITE;
        p.b.handle_packet(Instant::ZERO, &bytes, &mut p.mb);
        assert_eq!(p.b.stats().drops.malformed, 1);
        assert!(p
            .b
            .poll_transmit(Instant::ZERO, &mut [0u8; 256], &mut p.mb)
            .is_none());
    }
}
