//! The fault plan on a device: RDMA WRITEs through a lossy, duplicating,
//! reordering, delaying, CE-marking link arrive intact, with the
//! retransmissions to show for every loss; verb failures follow the plan's `rng=`.

mod common;

use std::time::{Duration, Instant};

use common::open;
use rdmakit_soft::faults::Plan;
use rdmakit_soft::proto::{Access, QpType, SendOp, SendWr, Sge, Wc, WcStatus};
use rdmakit_soft::{Device, Errno, QpInit, SendRequest};

/// Two connected RC QPs of `d`, 64 WRs deep (MTU 1024, PSNs from 100, ACK
/// timeout 14, seven retries).
fn rc_pair(d: &Device, pd: u32, cq: u32) -> (u32, u32) {
    let deep = QpInit::new(QpType::Rc, pd, cq, 64);
    common::rc_pair(d, &deep, &common::rc_attr())
}

/// 64 WRITEs of 4 KiB (four packets each) between two QPs of one device,
/// every packet judged on its way out and on its way in: 5 % of the
/// WRITE packets lost each way, 3 % duplicated and reordered, 2 % delayed,
/// 5 % CE marked. Every WRITE completes successfully with its bytes in
/// place, and every lost packet was sent again.
#[test]
fn writes_through_a_lossy_duplicating_reordering_link_arrive_intact() {
    let d = open(
        "rng=3; drop p=0.05 dir=both opcode=write; dup p=0.03; reorder depth=3 p=0.03 \
         dir=both; delay 200us p=0.02 dir=tx; ce p=0.05",
    );
    let pd = d.alloc_pd().unwrap();
    let cq = d.create_cq(256, None).unwrap();
    let (a, _b) = rc_pair(&d, pd, cq);
    const N: usize = 64;
    const LEN: usize = 4096;
    let mut src: Vec<u8> = (0..N * LEN).map(|i| (i * 7 + i / LEN) as u8).collect();
    let mut dst = vec![0u8; N * LEN];
    // SAFETY: both buffers outlive the device (dropped at the end of the
    // test) and are only read after every WRITE completed.
    let (sk, dk) = unsafe {
        (
            d.reg_mr(pd, src.as_mut_ptr(), src.len(), Access::LOCAL_WRITE)
                .unwrap(),
            d.reg_mr(pd, dst.as_mut_ptr(), dst.len(), Access::all())
                .unwrap(),
        )
    };
    for i in 0..N {
        let off = (i * LEN) as u64;
        let mut wr = SendWr::new(
            i as u64,
            SendOp::Write {
                remote_addr: dst.as_ptr() as u64 + off,
                rkey: dk,
            },
            vec![Sge {
                addr: src.as_ptr() as u64 + off,
                length: LEN as u32,
                lkey: sk,
            }],
        );
        wr.signaled = true;
        // SAFETY: the registered buffers live until the end of the test.
        unsafe { d.post_send(a, &[SendRequest { wr, inline: false }]) }.unwrap();
    }
    let mut wcs: Vec<Wc> = Vec::new();
    let t = Instant::now();
    while wcs.len() < N && t.elapsed() < Duration::from_secs(60) {
        d.poll_cq(cq, &mut wcs, 64).unwrap();
        std::thread::sleep(Duration::from_micros(200));
    }
    let c = d.counters();
    assert_eq!(wcs.len(), N, "{c:?}");
    assert!(wcs.iter().all(|w| w.status == WcStatus::Success), "{wcs:?}");
    let f = c.faults;
    assert!(
        f.drop > 0 && f.dup > 0 && f.reorder > 0 && f.delay > 0 && f.ce > 0,
        "{f:?}"
    );
    assert!(c.retransmitted_packets >= f.drop, "{c:?}");
    assert!(c.np_ecn_marked_roce_packets > 0, "{c:?}");
    drop(d);
    assert!(src == dst, "the WRITEs' bytes differ");
}

/// The outcomes of 200 create_cq and reg_mr calls.
fn outcomes(plan: &str) -> (Vec<Option<Errno>>, u64) {
    let d = open(plan);
    let pd = d.alloc_pd().unwrap();
    let mut buf = vec![0u8; 64];
    let mut v = Vec::new();
    for _ in 0..100 {
        v.push(d.create_cq(4, None).err().map(|e| e.errno));
        // SAFETY: `buf` outlives the device.
        let mr = unsafe { d.reg_mr(pd, buf.as_mut_ptr(), buf.len(), Access::LOCAL_WRITE) };
        v.push(mr.err().map(|e| e.errno));
    }
    let fails = d.counters().faults.fail;
    drop(d);
    drop(buf);
    (v, fails)
}

/// The same plan gives the same failures, call for call; another `rng=`
/// others. Each failure is counted.
#[test]
fn the_same_rng_fails_the_same_calls() {
    let plan = "rng=5; fail create_cq p=0.3 errno=ENOSPC; fail reg_mr every=7 errno=EFAULT";
    let (a, fails) = outcomes(plan);
    assert_eq!(outcomes(plan).0, a);
    assert_ne!(outcomes(&plan.replace("rng=5", "rng=6")).0, a);
    let cq_fails = a.iter().step_by(2).filter(|e| e.is_some()).count();
    assert!((15..=45).contains(&cq_fails), "{cq_fails}");
    assert!(a.iter().step_by(2).flatten().all(|&e| e == Errno::ENOSPC));
    let mr: Vec<usize> = (0..100).filter(|i| a[2 * i + 1].is_some()).collect();
    assert_eq!(mr, (1..=14).map(|k| 7 * k - 1).collect::<Vec<_>>());
    assert_eq!(fails as usize, a.iter().flatten().count());
    assert!(Plan::parse(plan).unwrap().verbs.len() == 2);
}
