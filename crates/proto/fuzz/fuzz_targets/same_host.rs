//! Same-host requests (vendor opcodes 0xC0-0xC2, issue 34) against an RC
//! responder in RTS, as a ring delivers them: whatever the header says, the
//! engine never panics, asks for a copy only after every local range passed
//! the memory's checks (key, PD, bounds, rights), never asks for more bytes
//! than the header's length or for an empty or oversized peer list, and
//! writes no region it has no right to.
//!
//! Input: records `[len u16 LE][op][flags][header..]`: `op % 3` picks
//! WRITE, SEND or READ; `flags` bit 0 sets the PSN to the expected one,
//! bit 1 puts a valid rkey into the header, bit 2 makes the memory decline.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rdmakit_proto::testing::{HookedMem, SameHostHook};
use rdmakit_proto::{
    Access, Instant, MemTable, Memory, Pd, PeerCopy, PeerDir, PeerError, QpType, RecvWr, Sge,
};

mod common;

use common::QPN;

const OPS: [u8; 3] = [0xc0, 0xc1, 0xc2];

/// A responder's memory that checks every copy the engine asks for.
struct Checked {
    decline: bool,
    copies: usize,
}

impl SameHostHook for Checked {
    fn peer_copy(&mut self, t: &MemTable, copy: &PeerCopy<'_>) -> Result<u64, PeerError> {
        let mut local = 0u64;
        for &(k, a, n) in copy.local {
            // The engine must only ask for ranges that pass the checks.
            assert!(
                t.check(copy.pd, k, a, n, copy.need).is_ok(),
                "a copy into a range the memory refuses"
            );
            local += n;
        }
        let peer: u64 = copy.peer.iter().map(|&(_, n)| n).sum();
        assert!(!copy.peer.is_empty() && copy.peer.len() <= 16);
        assert_eq!(local, peer, "local and peer lengths differ");
        if copy.dir == PeerDir::Push {
            assert!(copy.need.contains(Access::REMOTE_READ));
        }
        if self.decline {
            return Err(PeerError::Declined("fuzz"));
        }
        self.copies += 1;
        Ok(local)
    }
}

fuzz_target!(|data: &[u8]| {
    let mut qp = common::rts_qp(QpType::Rc, Access::REMOTE_WRITE | Access::REMOTE_READ);
    let mut t = MemTable::new();
    let (lk, rw) = t.register(Pd(1), 0x1_0000, 4096, Access::LOCAL_WRITE | Access::REMOTE_WRITE);
    let (_, ro) = t.register(Pd(1), 0x2_0000, 4096, Access::REMOTE_READ);
    let (_, other) = t.register(Pd(2), 0x3_0000, 4096, Access::all());
    for i in 0..4u64 {
        let sge = Sge { addr: 0x1_0000 + i * 1024, length: 1024, lkey: lk };
        let _ = qp.post_recv(RecvWr { wr_id: i, sg_list: vec![sge] });
    }
    let mut mem = HookedMem { t, hook: Checked { decline: false, copies: 0 } };
    let ro_before = mem.t.region(ro).map(|r| r.data.clone());
    let other_before = mem.t.region(other).map(|r| r.data.clone());
    let now = Instant::ZERO;
    let mut out = vec![0u8; 4096];
    let mut rest = data;
    while rest.len() >= 4 {
        let len = usize::from(u16::from_le_bytes([rest[0], rest[1]])).min(rest.len() - 4);
        let (op, flags) = (OPS[usize::from(rest[2] % 3)], rest[3]);
        let mut pkt = vec![op, 0, 0xff, 0xff, 0, 0, 0, 0, 0x80, 0, 0, 0];
        pkt[5..8].copy_from_slice(&QPN.to_be_bytes()[1..]);
        if flags & 1 != 0 {
            let psn = qp.attr().rq_psn & 0x00ff_ffff;
            pkt[9..12].copy_from_slice(&psn.to_be_bytes()[1..]);
        }
        let mut hdr = rest[4..4 + len].to_vec();
        rest = &rest[4 + len..];
        if flags & 2 != 0 && hdr.len() >= 12 {
            let key = if op == 0xc2 { ro } else { rw };
            hdr[8..12].copy_from_slice(&key.to_be_bytes());
        }
        pkt.extend_from_slice(&hdr);
        mem.hook.decline = flags & 4 != 0;
        qp.handle_packet(now, &pkt, &mut mem);
        while qp.poll_transmit(now, &mut out, &mut mem).is_some() {}
        while qp.poll_completion().is_some() {}
    }
    let _ = mem.hook.copies;
    assert!(mem.t.region(ro).map(|r| r.data.clone()) == ro_before, "read-only region written");
    assert!(mem.t.region(other).map(|r| r.data.clone()) == other_before, "foreign-PD region written");
});
