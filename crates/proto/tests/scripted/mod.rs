//! The fixture of the scripted state tests (smoltcp style): a QP is put
//! into a fixture state (`qp_rts()`), packets are fed with `send()` and
//! what it transmits is checked with `recv()` / `recv_nothing()`. Shared by
//! scripted_modify.rs, scripted_responder.rs and scripted_requester.rs.

#![allow(dead_code, unused_imports)]

pub use std::time::Duration;

pub use rdmakit_proto::packet::{opinfo, syndrome, Aeth, AtomicEth, Bth, Deth, Packet, Reth};
pub use rdmakit_proto::sim::{LinkConfig, Network};
pub use rdmakit_proto::{
    Access, AddressHandle, AttrMask, Instant, MemTable, Memory, Mtu, Pd, Psn, Qp, QpAttr, QpConfig,
    QpState, QpType, RecvWr, SendOp, SendWr, Sge, UdDest, WcOpcode, WcStatus,
};

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
    pub syndrome: Option<u8>,
    pub reth: Option<Reth>,
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

pub fn mk(opcode: u8, psn: u32) -> Packet<'static> {
    let info = opinfo(opcode).expect("opcode");
    Packet::new(Bth::new(opcode, QPN, Psn::new(psn)), info, &[])
}

impl Fix {
    pub fn send(&mut self, p: &Packet<'_>) {
        let mut buf = vec![0u8; 8192];
        let n = p.emit(&mut buf).unwrap();
        self.qp.handle_packet(self.now, &buf[..n], &mut self.mem);
    }
    pub fn send_raw(&mut self, b: &[u8]) {
        self.qp.handle_packet(self.now, b, &mut self.mem);
    }
    pub fn recv(&mut self) -> Vec<Out> {
        let mut buf = vec![0u8; 8192];
        let mut v = Vec::new();
        while let Some(t) = self.qp.poll_transmit(self.now, &mut buf, &mut self.mem) {
            let p = Packet::parse(&buf[..t.len]).expect("engine emits valid packets");
            assert_eq!(p.bth.dqpn, RQPN);
            v.push(Out {
                opcode: p.bth.opcode,
                psn: p.bth.psn.value(),
                ack_req: p.bth.ack_req,
                syndrome: p.aeth.map(|a| a.syndrome),
                reth: p.reth,
                atomic_ack: p.atomic_ack,
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

pub fn ack(psn: u32, syn: u8) -> Packet<'static> {
    let mut p = mk(0x11, psn);
    p.aeth = Some(Aeth {
        syndrome: syn,
        msn: 0,
    });
    p
}

/// A response (`opcode`) to `psn` with a positive AETH of `msn`.
pub fn resp(opcode: u8, psn: u32, msn: u32) -> Packet<'static> {
    let mut p = mk(opcode, psn);
    p.aeth = Some(Aeth {
        syndrome: syndrome::ACK,
        msn,
    });
    p
}

pub fn write_pkt(psn: u32, va: u64, rkey: u32, data: &[u8]) -> Packet<'_> {
    let mut p = mk(0x0a, psn);
    p.reth = Some(Reth {
        va,
        rkey,
        len: data.len() as u32,
    });
    p.payload = data;
    p.bth.ack_req = true;
    p
}
