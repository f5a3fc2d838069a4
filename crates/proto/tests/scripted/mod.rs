//! The fixture of the scripted state tests (smoltcp style): a QP is put
//! into a fixture state (`qp_rts()`), packets are fed with `send()` and
//! what it transmits is checked with `recv()` / `recv_nothing()`. Shared by
//! scripted_modify.rs, scripted_responder.rs and scripted_requester.rs.

#![allow(dead_code, unused_imports)]

pub use std::time::Duration;

pub use rdmakit_proto::sim::{LinkConfig, Network};
pub use rdmakit_proto::{
    Access, AddressHandle, AttrMask, Instant, MemTable, Memory, Mtu, Pd, Psn, Qp, QpAttr, QpConfig,
    QpState, QpType, RecvWr, SendOp, SendWr, Sge, UdDest, WcOpcode, WcStatus,
};
pub use rdmakit_wire::aeth::{AethKind, NakCode};
pub use rdmakit_wire::opcode::OpCode;
pub use rdmakit_wire::roce::Repr as Packet;
pub use rdmakit_wire::{aeth, atomic_ack_eth, atomic_eth, deth, ieth, immdt, reth};

/// The AETHs the tests send and expect, by name.
pub mod syndrome {
    use super::{AethKind, NakCode};

    /// ACK with unlimited credits (what rxe and the engine send).
    pub const ACK: AethKind = AethKind::Ack { credits: 31 };
    /// RNR NAK with timer code `timer`.
    pub const fn rnr(timer: u8) -> AethKind {
        AethKind::RnrNak { timer }
    }
    /// NAK: PSN sequence error.
    pub const NAK_PSN_SEQ: AethKind = AethKind::Nak(NakCode::PsnSequenceError);
    /// NAK: invalid request.
    pub const NAK_INV_REQ: AethKind = AethKind::Nak(NakCode::InvalidRequest);
    /// NAK: remote access error.
    pub const NAK_REM_ACCESS: AethKind = AethKind::Nak(NakCode::RemoteAccessError);
    /// NAK: remote operational error.
    pub const NAK_REM_OP: AethKind = AethKind::Nak(NakCode::RemoteOperationalError);
    /// NAK: invalid RD request.
    pub const NAK_INV_RD_REQ: AethKind = AethKind::Nak(NakCode::InvalidRdRequest);
}

pub const QPN: u32 = 0x11;
pub const RQPN: u32 = 0x22;
pub const BASE: u64 = 0x1000;
pub const MTU: usize = 256;

pub struct Fix {
    pub qp: Qp,
    pub mem: MemTable,
    pub now: Instant,
    pub lkey: u32,
    pub rkey: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Out {
    pub opcode: u8,
    pub psn: u32,
    pub ack_req: bool,
    pub syndrome: Option<AethKind>,
    pub reth: Option<reth::Repr>,
    pub atomic_ack: Option<u64>,
    pub payload: Vec<u8>,
}

pub fn attrs() -> QpAttr {
    QpAttr {
        path_mtu: Mtu::Mtu256,
        qkey: 0x1111_1111,
        rq_psn: 100,
        sq_psn: 500,
        dest_qp_num: RQPN,
        qp_access_flags: Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC,
        ah: AddressHandle(1),
        timeout: 10,
        retry_cnt: 2,
        rnr_retry: 1,
        min_rnr_timer: 14,
        max_rd_atomic: 2,
        max_dest_rd_atomic: 2,
        ..QpAttr::default()
    }
}

pub fn qp_in(t: QpType, upto: QpState, a: &QpAttr) -> Fix {
    qp_with(QpConfig::new(QPN, t, Pd(1)), upto, a)
}

pub fn qp_with(cfg: QpConfig, upto: QpState, a: &QpAttr) -> Fix {
    let mut qp = Qp::new(cfg);
    qp.bring_up(a, upto).unwrap();
    let mut mem = MemTable::new();
    let (lkey, rkey) = mem.register(Pd(1), BASE, 4096, Access::all());
    Fix {
        qp,
        mem,
        now: Instant::ZERO,
        lkey,
        rkey,
    }
}

pub fn qp_rts(t: QpType) -> Fix {
    qp_in(t, QpState::Rts, &attrs())
}

pub fn mk_sge(addr: u64, length: u32, lkey: u32) -> Sge {
    Sge { addr, length, lkey }
}

/// A packet of `opcode` to the fixture's QP with every extension header
/// the opcode carries, zeroed: a test sets the fields it is about.
pub fn mk(opcode: u8, psn: u32) -> Packet<'static> {
    Packet::with_zeroed_headers(OpCode(opcode), QPN, psn).expect("opcode")
}

/// The bytes of `p` as the engine takes them: BTH through pad, no ICRC.
pub fn emit(p: &Packet<'_>) -> Vec<u8> {
    let mut buf = vec![0u8; 8192];
    let (at, len) = p
        .emit_header_without_icrc(&mut buf, p.payload.len())
        .expect("the test's packet has its opcode's headers");
    buf[at..at + p.payload.len()].copy_from_slice(p.payload);
    buf.truncate(len);
    buf
}

/// Reads a packet the engine emitted.
pub fn parse(b: &[u8]) -> Packet<'_> {
    Packet::parse_without_icrc(b).expect("engine emits valid packets")
}

impl Fix {
    pub fn send(&mut self, p: &Packet<'_>) {
        let b = emit(p);
        self.qp.handle_packet(self.now, &b, &mut self.mem);
    }
    pub fn send_raw(&mut self, b: &[u8]) {
        self.qp.handle_packet(self.now, b, &mut self.mem);
    }
    pub fn recv(&mut self) -> Vec<Out> {
        let mut buf = vec![0u8; 8192];
        let mut v = Vec::new();
        while let Some(t) = self.qp.poll_transmit(self.now, &mut buf, &mut self.mem) {
            let p = parse(&buf[..t.len]);
            assert_eq!(p.bth.dest_qp, RQPN);
            v.push(Out {
                opcode: p.bth.opcode.0,
                psn: p.bth.psn,
                ack_req: p.bth.ack_req,
                syndrome: p.aeth.map(|a| a.kind),
                reth: p.reth,
                atomic_ack: p.atomic_ack_eth.map(|a| a.orig_value),
                payload: p.payload.to_vec(),
            });
        }
        v
    }
    pub fn recv_nothing(&mut self) {
        let v = self.recv();
        assert!(v.is_empty(), "expected nothing, got {v:?}");
    }
    pub fn wcs(&mut self) -> Vec<rdmakit_proto::Wc> {
        std::iter::from_fn(|| self.qp.poll_completion()).collect()
    }
    pub fn post_recv(&mut self, wr_id: u64, off: u64, len: u32) {
        let sge = Sge {
            addr: BASE + off,
            length: len,
            lkey: self.lkey,
        };
        self.qp
            .post_recv(RecvWr {
                wr_id,
                sg_list: vec![sge],
            })
            .unwrap();
    }
    /// One SGE of `length` bytes at `BASE` under the fixture's lkey.
    pub fn sge(&self, length: u32) -> Sge {
        mk_sge(BASE, length, self.lkey)
    }
    /// Posts a READ into `sge` from `remote_addr` under rkey 1.
    pub fn post_read(&mut self, wr_id: u64, remote_addr: u64, sge: Sge) {
        let op = SendOp::Read {
            remote_addr,
            rkey: 1,
        };
        self.qp
            .post_send(SendWr::new(wr_id, op, vec![sge]))
            .unwrap();
    }
    pub fn bytes(&self, off: usize, len: usize) -> Vec<u8> {
        self.mem.region(self.lkey).unwrap().data[off..off + len].to_vec()
    }
    pub fn fill(&mut self, off: usize, data: &[u8]) {
        self.mem.region_mut(self.lkey).unwrap().data[off..off + data.len()].copy_from_slice(data);
    }
}

pub fn ack(psn: u32, syn: AethKind) -> Packet<'static> {
    let mut p = mk(0x11, psn);
    p.aeth = Some(aeth::Repr { kind: syn, msn: 0 });
    p
}

/// A response (`opcode`) to `psn` with a positive AETH of `msn` (if the
/// opcode carries one).
pub fn resp(opcode: u8, psn: u32, msn: u32) -> Packet<'static> {
    let mut p = mk(opcode, psn);
    if p.aeth.is_some() {
        p.aeth = Some(aeth::Repr {
            kind: syndrome::ACK,
            msn,
        });
    }
    p
}

pub fn write_pkt(psn: u32, va: u64, rkey: u32, data: &[u8]) -> Packet<'_> {
    let mut p = mk(0x0a, psn);
    p.reth = Some(reth::Repr {
        va,
        rkey,
        dma_len: data.len() as u32,
    });
    p.payload = data;
    p.bth.ack_req = true;
    p
}
