//! In-process loopback through the Verbs API: two soft devices (distinct
//! auto-picked 127.x.y.z addresses) talking RoCEv2 over UDP.

use std::sync::Arc;
use std::time::Duration;

use rdmakit_verbs::{
    Access, AsyncEvent, ConnectOpts, Context, Cq, DeviceConfig, InitQp, Layer, MrBuf, Mtu, Pd, Qp,
    QpBuilder, QpType, RecvWr, SendOp, SendWr, WcOpcode, WcStatus,
};

const T: Duration = Duration::from_secs(10);

struct Side {
    ctx: Arc<Context>,
    pd: Arc<Pd>,
    cq: Arc<Cq>,
}

fn side() -> Side {
    side_with(DeviceConfig::default(), 256)
}

/// A soft device with its PD and one CQ of `cqe` entries.
fn side_with(cfg: DeviceConfig, cqe: u32) -> Side {
    let ctx = Context::open_soft(cfg).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(cqe, None).unwrap();
    Side { ctx, pd, cq }
}

/// Event mode: only the progress thread receives.
fn no_busy_poll() -> DeviceConfig {
    DeviceConfig {
        busy_poll: false,
        ..DeviceConfig::default()
    }
}

fn connect(a: &Side, b: &Side, t: QpType, opts: ConnectOpts) -> (Qp, Qp) {
    connect_cqs(a, &a.cq, b, &b.cq, t, opts)
}

/// Two connected QPs of type `t`, each on the given CQ of its side.
fn connect_cqs(
    a: &Side,
    acq: &Arc<Cq>,
    b: &Side,
    bcq: &Arc<Cq>,
    t: QpType,
    opts: ConnectOpts,
) -> (Qp, Qp) {
    let qa = init(a.pd.qp_builder(t, acq), opts);
    let qb = init(b.pd.qp_builder(t, bcq), opts);
    pair(qa, qb)
}

/// A built QP in INIT.
fn init(b: QpBuilder, opts: ConnectOpts) -> InitQp {
    b.build().unwrap().into_init(opts).unwrap()
}

/// Two QPs in INIT connected to each other, both ready to send.
fn pair(qa: InitQp, qb: InitQp) -> (Qp, Qp) {
    let (ea, eb) = (qa.endpoint().unwrap(), qb.endpoint().unwrap());
    (
        qa.connect(&eb).unwrap().ready_to_send().unwrap(),
        qb.connect(&ea).unwrap().ready_to_send().unwrap(),
    )
}

/// Issue 20: a device has one GID table. Two contexts of the loopback
/// device (as two `ibv_open_device` calls, or two processes) see the same
/// GID and GUID, and their QPs are told apart by QPN alone.
#[test]
fn two_contexts_share_one_gid_table_and_distinct_qpns() {
    let (a, b) = (side(), side());
    let ga = a.ctx.query_gid(1, 0).unwrap();
    let gb = b.ctx.query_gid(1, 0).unwrap();
    assert_eq!(ga, gb);
    // The host's first non-loopback address (as rxe on eth0), or 127.0.0.1.
    assert_eq!(ga.to_ipv4(), Some(rdmakit_soft::net::host_device_addr()));
    assert_eq!(
        a.ctx.query_device().unwrap().node_guid,
        b.ctx.query_device().unwrap().node_guid
    );
    let (qa, qb) = connect(&a, &b, QpType::Rc, ConnectOpts::default());
    assert_ne!(qa.qpn(), qb.qpn());
    let ba = a.pd.alloc_buf(64, Access::all()).unwrap();
    let bb = b.pd.alloc_buf(64, Access::all()).unwrap();
    qb.recv(1, &bb, 0..64).unwrap();
    ba.write(0, b"one gid").unwrap();
    qa.send(2, &ba, 0..7).unwrap();
    assert_eq!(b.cq.wait(1, T).unwrap()[0].status, WcStatus::Success);
    assert_eq!(bb.to_vec(0..7).unwrap(), b"one gid");
    let port = a.ctx.query_port(1).unwrap();
    assert_eq!(
        port.state,
        rdmakit_soft::attr::port_attr(ga.to_ipv4().unwrap(), 4192).state
    );
    assert_eq!(port.link_layer, rdmakit_soft::attr::LinkLayer::Ethernet);
    assert_eq!(port.active_mtu, Mtu::Mtu4096);
    let e = a.ctx.query_port(2).unwrap_err();
    assert_eq!((e.errno.name(), e.layer), ("EINVAL", Layer::Kernel));
    assert_eq!(a.ctx.query_pkey(1, 0).unwrap(), 0xffff);
    let d = a.ctx.query_device().unwrap();
    assert_eq!(d.phys_port_cnt, 1);
    assert_eq!(d.vendor_id, 0xffffff);
    assert!(d.max_qp > 0 && d.max_cqe > 0);
}

#[test]
fn rc_send_write_read_atomics_with_data_checks() {
    let (a, b) = (side(), side());
    let (qa, qb) = connect(&a, &b, QpType::Rc, ConnectOpts::default());
    let ba = a.pd.alloc_buf(65536, Access::all()).unwrap();
    let bb = b.pd.alloc_buf(65536, Access::all()).unwrap();
    // A multi-packet SEND (40000 bytes at MTU 1024).
    let pattern: Vec<u8> = (0..40000u32).map(|i| (i * 7 + 3) as u8).collect();
    ba.write(0, &pattern).unwrap();
    qb.recv(10, &bb, 0..65536).unwrap();
    qa.send(1, &ba, 0..40000).unwrap();
    let w = b.cq.wait(1, T).unwrap();
    assert_eq!(
        (w[0].wr_id, w[0].status, w[0].opcode, w[0].byte_len),
        (10, WcStatus::Success, WcOpcode::Recv, 40000)
    );
    assert_eq!(bb.to_vec(0..40000).unwrap(), pattern);
    assert_eq!(a.cq.wait(1, T).unwrap()[0].status, WcStatus::Success);

    // WRITE into B while B does nothing.
    ba.write(50000, b"written by A").unwrap();
    qa.write(2, &ba, 50000..50012, bb.remote(60000)).unwrap();
    let w = a.cq.wait(1, T).unwrap();
    assert_eq!(
        (w[0].status, w[0].opcode),
        (WcStatus::Success, WcOpcode::RdmaWrite)
    );
    assert_eq!(bb.to_vec(60000..60012).unwrap(), b"written by A");

    // READ from B.
    bb.write(61000, &[0xab; 3000]).unwrap();
    qa.read(3, &ba, 10000..13000, bb.remote(61000)).unwrap();
    let w = a.cq.wait(1, T).unwrap();
    assert_eq!(
        (w[0].status, w[0].opcode),
        (WcStatus::Success, WcOpcode::RdmaRead)
    );
    assert_eq!(ba.to_vec(10000..13000).unwrap(), vec![0xab; 3000]);

    // Atomics on an 8-byte aligned word of B.
    bb.write(64000, &100u64.to_le_bytes()).unwrap();
    qa.fetch_add(4, &ba, 20000, bb.remote(64000), 23).unwrap();
    qa.compare_swap(5, &ba, 20008, bb.remote(64000), 123, 7)
        .unwrap();
    qa.compare_swap(6, &ba, 20016, bb.remote(64000), 999, 1)
        .unwrap();
    let w = a.cq.wait(3, T).unwrap();
    assert!(w.iter().all(|w| w.status == WcStatus::Success), "{w:?}");
    assert_eq!(ba.read_u64(20000).unwrap(), 100);
    assert_eq!(ba.read_u64(20008).unwrap(), 123);
    assert_eq!(ba.read_u64(20016).unwrap(), 7);
    assert_eq!(bb.read_u64(64000).unwrap(), 7);

    // Inline SEND.
    qb.recv(11, &bb, 0..100).unwrap();
    qa.send_inline(7, b"inline!").unwrap();
    assert_eq!(b.cq.wait(1, T).unwrap()[0].byte_len, 7);
    assert_eq!(bb.to_vec(0..7).unwrap(), b"inline!");
    a.cq.wait(1, T).unwrap();

    // Remote access error: WRITE with a wrong rkey.
    let mut bad = bb.remote(0);
    bad.rkey ^= 0x55;
    qa.write(8, &ba, 0..8, bad).unwrap();
    let w = a.cq.wait(1, T).unwrap();
    assert_eq!(w[0].status, WcStatus::RemAccessErr);
}

#[test]
fn ud_send_through_an_address_handle() {
    let (a, b) = (side(), side());
    let opts = ConnectOpts::default();
    let (qa, qb) = connect(&a, &b, QpType::Ud, opts);
    let ba = a.pd.alloc_buf(4096, Access::all()).unwrap();
    let bb = b.pd.alloc_buf(4096, Access::all()).unwrap();
    ba.write(0, b"datagram").unwrap();
    qb.recv(1, &bb, 0..4096).unwrap();
    let ah = a.pd.create_ah(b.ctx.query_gid(1, 0).unwrap()).unwrap();
    qa.send_ud(2, &ah, qb.qpn(), opts.qkey, &ba, 0..8).unwrap();
    let w = b.cq.wait(1, T).unwrap();
    assert_eq!(w[0].status, WcStatus::Success);
    assert_eq!(w[0].byte_len, 40 + 8);
    assert_eq!(w[0].src_qp, qa.qpn());
    assert_eq!(bb.to_vec(40..48).unwrap(), b"datagram");
    // The GRH area holds the sender's IPv4 header (source address at 20+12).
    let src = a.ctx.query_gid(1, 0).unwrap().to_ipv4().unwrap();
    assert_eq!(bb.to_vec(32..36).unwrap(), src.octets());
    assert_eq!(a.cq.wait(1, T).unwrap()[0].status, WcStatus::Success);
}

#[test]
fn srq_feeds_receives_of_several_qps() {
    let (a, b) = (side(), side());
    let srq = b.pd.create_srq(16, 2).unwrap();
    let opts = ConnectOpts::default();
    let mk = |s: &Side, srq: Option<&Arc<rdmakit_verbs::Srq>>| {
        let mut bld = s.pd.qp_builder(QpType::Rc, &s.cq);
        if let Some(x) = srq {
            bld = bld.srq(x);
        }
        bld.build().unwrap().into_init(opts).unwrap()
    };
    let bbuf = b.pd.alloc_buf(4096, Access::all()).unwrap();
    let abuf = a.pd.alloc_buf(4096, Access::all()).unwrap();
    abuf.write(0, b"0123456789").unwrap();
    let wrs: Vec<RecvWr> = (0..4)
        .map(|i| RecvWr {
            wr_id: 100 + i,
            sg_list: vec![bbuf.sge(i as usize * 64..i as usize * 64 + 64).unwrap()],
        })
        .collect();
    srq.post_recv(&wrs).unwrap();
    let mut senders = Vec::new();
    let mut receivers = Vec::new();
    for _ in 0..2 {
        let qa = mk(&a, None);
        let qb = mk(&b, Some(&srq));
        let (ea, eb) = (qa.endpoint().unwrap(), qb.endpoint().unwrap());
        senders.push(qa.connect(&eb).unwrap().ready_to_send().unwrap());
        receivers.push(qb.connect(&ea).unwrap().ready_to_send().unwrap());
    }
    senders[0].send(1, &abuf, 0..5).unwrap();
    senders[1].send(2, &abuf, 5..10).unwrap();
    let w = b.cq.wait(2, T).unwrap();
    assert!(w
        .iter()
        .all(|w| w.status == WcStatus::Success && w.byte_len == 5));
    let qpns: std::collections::HashSet<u32> = w.iter().map(|w| w.qp_num).collect();
    assert_eq!(qpns.len(), 2);
    a.cq.wait(2, T).unwrap();
    // Posting to a QP that uses an SRQ is refused.
    let e = receivers[0].recv(9, &bbuf, 0..8).unwrap_err();
    assert_eq!(e.errno.name(), "EINVAL");
}

#[test]
fn completion_channel_wakes_a_blocked_waiter_and_its_fd_is_pollable() {
    let a = side();
    let b = side();
    let ch = b.ctx.create_comp_channel().unwrap();
    let cq = b.ctx.create_cq(16, Some(&ch)).unwrap();
    let opts = ConnectOpts::default();
    let (qa, qb) = connect_cqs(&a, &a.cq, &b, &cq, QpType::Rc, opts);
    let bb = b.pd.alloc_buf(64, Access::all()).unwrap();
    qb.recv(1, &bb, 0..64).unwrap();
    cq.req_notify(false).unwrap();
    // Nothing yet: the wait times out with ETIMEDOUT at the library layer.
    let e = ch
        .get_cq_event(Some(Duration::from_millis(20)))
        .unwrap_err();
    assert_eq!((e.errno.name(), e.layer), ("ETIMEDOUT", Layer::Library));
    let sender = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(30));
        qa.send_inline(5, b"wake up").unwrap();
        qa
    });
    use std::os::fd::AsRawFd;
    let fd = ch.as_raw_fd();
    assert!(fd >= 0);
    // poll(2) on the fd, as an epoll loop would.
    // SAFETY: `fd` is the channel's eventfd, open while `ch` lives (past the poll).
    let bfd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    let mut fds = [rustix_poll_fd(&bfd)];
    let n = rustix::event::poll(&mut fds, 5000).unwrap();
    assert_eq!(n, 1);
    assert_eq!(ch.get_cq_event(Some(T)).unwrap(), cq.handle());
    let w = cq.poll(4).unwrap();
    assert_eq!(w[0].byte_len, 7);
    let _qa = sender.join().unwrap();
}

fn rustix_poll_fd<'a>(fd: &'a std::os::fd::BorrowedFd<'a>) -> rustix::event::PollFd<'a> {
    rustix::event::PollFd::new(fd, rustix::event::PollFlags::IN)
}

#[test]
fn cq_overrun_raises_the_cq_error_async_event() {
    let (a, b) = (side(), side());
    let small = a.ctx.create_cq(2, None).unwrap();
    let opts = ConnectOpts::default();
    let qa = init(a.pd.qp_builder(QpType::Rc, &small), opts);
    let qb = init(b.pd.qp_builder(QpType::Rc, &b.cq), opts);
    let (qa, _qb) = pair(qa, qb);
    let ba = a.pd.alloc_buf(64, Access::all()).unwrap();
    let bb = b.pd.alloc_buf(64, Access::all()).unwrap();
    for i in 0..4 {
        qa.write(i, &ba, 0..8, bb.remote(0)).unwrap();
    }
    let ev = a.ctx.get_async_event(T).unwrap();
    assert_eq!(ev, AsyncEvent::CqErr { cq: small.handle() });
    assert_eq!(small.poll(16).unwrap().len(), 2);
    assert!(a.ctx.soft().unwrap().cq_overrun(small.handle()));
}

#[test]
fn uc_write_and_send() {
    let (a, b) = (side(), side());
    let (qa, qb) = connect(&a, &b, QpType::Uc, ConnectOpts::default());
    let ba = a.pd.alloc_buf(8192, Access::all()).unwrap();
    let bb = b.pd.alloc_buf(8192, Access::all()).unwrap();
    ba.write(0, &[0x42; 3000]).unwrap();
    qa.write(1, &ba, 0..3000, bb.remote(4000)).unwrap();
    qb.recv(2, &bb, 0..100).unwrap();
    qa.send(3, &ba, 0..10).unwrap();
    assert!(a
        .cq
        .wait(2, T)
        .unwrap()
        .iter()
        .all(|w| w.status == WcStatus::Success));
    assert_eq!(b.cq.wait(1, T).unwrap()[0].byte_len, 10);
    assert_eq!(bb.to_vec(4000..7000).unwrap(), vec![0x42; 3000]);
    // READ is not a UC operation.
    let e = qa.read(4, &ba, 0..8, bb.remote(0)).unwrap_err();
    assert_eq!(e.errno.name(), "EINVAL");
}

#[test]
fn configured_address_is_used_and_a_second_bind_fails_with_eaddrinuse() {
    // A fixed address derived from the pid keeps parallel test runs apart.
    let pid = std::process::id();
    let addr = std::net::Ipv4Addr::new(127, 200, (pid >> 8) as u8, (pid as u8).max(1));
    let cfg = DeviceConfig {
        addr: Some(addr),
        name: Some("softX".into()),
        ..DeviceConfig::default()
    };
    let a = Context::open_soft(cfg.clone()).unwrap();
    assert_eq!(a.name(), "softX");
    assert_eq!(a.query_gid(1, 0).unwrap().to_ipv4(), Some(addr));
    let e = Context::open_soft(cfg).unwrap_err();
    assert_eq!(
        (e.verb, e.errno.name(), e.layer),
        ("ibv_open_device", "EADDRINUSE", Layer::Kernel)
    );
}

#[test]
fn srq_limit_event_and_list_posts() {
    let (a, b) = (side(), side());
    let srq = b.pd.create_srq(8, 1).unwrap();
    let bb = b.pd.alloc_buf(4096, Access::all()).unwrap();
    let wrs: Vec<RecvWr> = (0..3)
        .map(|i| RecvWr {
            wr_id: i,
            sg_list: vec![bb.sge(i as usize * 100..i as usize * 100 + 100).unwrap()],
        })
        .collect();
    srq.post_recv(&wrs).unwrap();
    srq.arm_limit(2).unwrap();
    let o = ConnectOpts::default();
    let qa = init(a.pd.qp_builder(QpType::Rc, &a.cq), o);
    let qb = init(b.pd.qp_builder(QpType::Rc, &b.cq).srq(&srq), o);
    let (qa, _qb) = pair(qa, qb);
    qa.send_inline(1, b"x").unwrap();
    qa.send_inline(2, b"y").unwrap();
    b.cq.wait(2, T).unwrap();
    let ev = b.ctx.get_async_event(T).unwrap();
    assert_eq!(ev, AsyncEvent::SrqLimitReached { srq: srq.handle() });
    let stats = b.ctx.soft().unwrap().srq_ring_stats(srq.handle()).unwrap();
    assert!(stats.no_leak(), "{stats:?}");
    assert_eq!(stats.completed, 2);
}

#[test]
fn rc_at_path_mtu_4096_moves_multi_packet_writes_and_sends() {
    let (a, b) = (side(), side());
    let o = ConnectOpts {
        path_mtu: Mtu::Mtu4096,
        ..ConnectOpts::default()
    };
    let (qa, qb) = connect(&a, &b, QpType::Rc, o);
    let ba = a.pd.alloc_buf(65536, Access::all()).unwrap();
    let bb = b.pd.alloc_buf(65536, Access::all()).unwrap();
    let p: Vec<u8> = (0..65536u32).map(|i| (i % 251) as u8).collect();
    ba.write(0, &p).unwrap();
    qa.write(1, &ba, 0..65536, bb.remote(0)).unwrap();
    assert_eq!(a.cq.wait(1, T).unwrap()[0].status, WcStatus::Success);
    assert_eq!(bb.to_vec(0..65536).unwrap(), p);
    qb.recv(2, &bb, 0..65536).unwrap();
    qa.send(3, &ba, 100..20000).unwrap();
    assert_eq!(b.cq.wait(1, T).unwrap()[0].byte_len, 19900);
    assert_eq!(qa.query().unwrap().0.path_mtu, Mtu::Mtu4096);
}

#[test]
fn event_mode_without_busy_poll_and_device_list() {
    let choice = rdmakit_verbs::ProviderChoice::from_env().unwrap();
    let names = rdmakit_verbs::devices(choice).unwrap();
    assert_eq!(names.len(), 1);
    let e = rdmakit_verbs::open_device(choice, "no_such_dev").unwrap_err();
    assert_eq!((e.errno.name(), e.layer), ("ENODEV", Layer::Library));
    let (a, b) = (side_with(no_busy_poll(), 16), side_with(no_busy_poll(), 16));
    let (qa, qb) = connect(&a, &b, QpType::Rc, ConnectOpts::default());
    let bb = b.pd.alloc_buf(64, Access::all()).unwrap();
    qb.recv(1, &bb, 0..64).unwrap();
    qa.send_inline(2, b"event").unwrap();
    assert_eq!(b.cq.wait(1, T).unwrap()[0].byte_len, 5);
    assert_eq!(a.cq.wait(1, T).unwrap()[0].status, WcStatus::Success);
    // Event mode on a CQ with a completion channel: sleep until a completion.
    let ch = b.ctx.create_comp_channel().unwrap();
    let ecq = b.ctx.create_cq(8, Some(&ch)).unwrap();
    let o = ConnectOpts::default();
    let (qa2, qb2) = connect_cqs(&a, &a.cq, &b, &ecq, QpType::Rc, o);
    qb2.recv(9, &bb, 0..64).unwrap();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        qa2.send_inline(10, b"evt").unwrap();
        qa2
    });
    let w = ecq.wait_event(4, T).unwrap();
    assert_eq!((w[0].wr_id, w[0].byte_len), (9, 3));
    let _qa2 = t.join().unwrap();
    let e = ecq.wait_event(4, Duration::from_millis(10)).unwrap_err();
    assert_eq!(e.errno.name(), "ETIMEDOUT");
    let c = a.ctx.soft().unwrap().counters();
    assert!(c.tx_packets >= 1 && c.rx_packets >= 1, "{c:?}");
}

/// UC has no retransmission, so a packet processed out of order loses its
/// whole message. The receiving side alternates busy-polling (the app thread
/// takes datagrams) with pauses (the progress thread takes them), the moment
/// both could take a flow's datagrams at once; every message of a lossless
/// loopback flow must still arrive. Before taking and processing were one
/// critical section, ibv_uc_pingpong hung on about one run in four under load.
#[test]
fn uc_multi_packet_messages_survive_busy_poll_and_progress_thread_handoffs() {
    const MSGS: u64 = 1500;
    const WINDOW: u64 = 4;
    let (a, b) = (side(), side());
    let (qa, qb) = connect(&a, &b, QpType::Uc, ConnectOpts::default());
    // 4 KiB at MTU 1024: every message is FIRST, MIDDLE, MIDDLE, LAST.
    let ba = a.pd.alloc_buf(4096, Access::all()).unwrap();
    let bb = b.pd.alloc_buf(4096 * 16, Access::all()).unwrap();
    for i in 0..16u64 {
        let at = (i as usize) * 4096;
        qb.recv(i, &bb, at..at + 4096).unwrap();
    }
    let got = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| {
        s.spawn(|| {
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            let mut n = 0u64;
            while n < MSGS && std::time::Instant::now() < deadline {
                for w in b.cq.poll(16).unwrap() {
                    assert_eq!(w.status, WcStatus::Success);
                    assert_eq!(w.byte_len, 4096);
                    let at = (w.wr_id as usize) * 4096;
                    qb.recv(w.wr_id, &bb, at..at + 4096).unwrap();
                    n += 1;
                    got.store(n, std::sync::atomic::Ordering::Release);
                    if n % 15 == 0 {
                        // Long enough for the progress thread to take over:
                        // it notices a stopped poller within two naps of at
                        // most 8 ms.
                        std::thread::sleep(Duration::from_millis(20));
                    }
                }
            }
        });
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let mut sent = 0u64;
        let mut outstanding = 0u64;
        while sent < MSGS && std::time::Instant::now() < deadline {
            outstanding -= a.cq.poll(16).unwrap().len() as u64;
            let delivered = got.load(std::sync::atomic::Ordering::Acquire);
            if sent - delivered < WINDOW && outstanding < 8 {
                qa.send(sent, &ba, 0..4096).unwrap();
                sent += 1;
                outstanding += 1;
            } else if std::time::Instant::now() > deadline - Duration::from_secs(1) {
                break;
            }
        }
    });
    let lost = b.ctx.soft().unwrap().qp_stats(qb.qpn()).map(|s| s.dropped);
    assert_eq!(
        got.load(std::sync::atomic::Ordering::Acquire),
        MSGS,
        "UC messages lost on a lossless loopback flow (receiver drops: {lost:?})"
    );
}

/// A send queue slot is free by the time its completion is visible: an
/// application that keeps exactly `max_send_wr` WRITEs outstanding (perftest
/// does, at TX depth) reposts as soon as it polls a completion and never
/// gets ENOMEM. The progress thread completes them (no busy poll) while the
/// application polls, the race where the slot used to be freed after the
/// completion was published.
#[test]
fn a_polled_send_completion_has_already_freed_its_slot() {
    const DEPTH: u32 = 128;
    const TOTAL: u64 = 20_000;
    let (a, b) = (
        side_with(no_busy_poll(), 256),
        side_with(no_busy_poll(), 256),
    );
    let o = ConnectOpts::default();
    let qa = init(a.pd.qp_builder(QpType::Rc, &a.cq).max_send_wr(DEPTH), o);
    let qb = init(b.pd.qp_builder(QpType::Rc, &b.cq), o);
    let (qa, _qb) = pair(qa, qb);
    let ba = a.pd.alloc_buf(64, Access::all()).unwrap();
    let bb = b.pd.alloc_buf(64, Access::all()).unwrap();
    let (mut posted, mut done) = (0u64, 0u64);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while done < TOTAL && std::time::Instant::now() < deadline {
        while posted < TOTAL && posted - done < u64::from(DEPTH) {
            qa.write(posted, &ba, 0..8, bb.remote(0))
                .unwrap_or_else(|e| {
                    panic!("post {posted} with {} outstanding: {e}", posted - done)
                });
            posted += 1;
        }
        for w in a.cq.poll(16).unwrap() {
            assert_eq!(w.status, WcStatus::Success);
            done += 1;
        }
    }
    assert_eq!(done, TOTAL);
}

/// Issue 19: a context on `auto` whose one CQ serves a peer on a same-host
/// ring (B, `auto`) and a peer on UDP (C, `udp`: no rings). While the ring
/// carries the last packet, A's busy poll reads its socket only every 16th
/// empty spin; C's datagrams must still all arrive, in turn with B's, with
/// their data, and every SEND of B and C completes.
#[test]
fn a_busy_poller_with_ring_and_udp_peers_takes_both() {
    let udp = DeviceConfig {
        transport: rdmakit_soft::SoftTransport::Udp,
        ..DeviceConfig::default()
    };
    let (a, b, c) = (side(), side(), side_with(udp, 256));
    let (ab, ba) = connect(&a, &b, QpType::Rc, ConnectOpts::default());
    let (ac, ca) = connect(&a, &c, QpType::Rc, ConnectOpts::default());
    let bufa = a.pd.alloc_buf(64, Access::all()).unwrap();
    let bufb = b.pd.alloc_buf(64, Access::all()).unwrap();
    let bufc = c.pd.alloc_buf(64, Access::all()).unwrap();
    let soft = a.ctx.soft().unwrap();
    // Decided (and B's ring made) when the AV was set, before any packet.
    assert_eq!(soft.qp_on_ring(ab.qpn()), Some(true));
    assert_eq!(soft.qp_on_ring(ac.qpn()), Some(false));
    let c0 = soft.counters();
    assert_eq!(c0.ring_tx_packets, 0, "nothing sent yet");
    const ROUNDS: u64 = 200;
    let mut sent = [0usize; 2];
    for i in 0..ROUNDS {
        // B sends first (through its ring into A), then C (through UDP):
        // A's poll sees the ring's packet, then must find C's datagram.
        ab.recv(i * 2, &bufa, 0..32).unwrap();
        ac.recv(i * 2 + 1, &bufa, 32..64).unwrap();
        bufb.write(0, &i.to_le_bytes()).unwrap();
        bufc.write(0, &(!i).to_le_bytes()).unwrap();
        ba.send(i, &bufb, 0..8).unwrap();
        ca.send(i, &bufc, 0..8).unwrap();
        let w = a.cq.wait(2, T).unwrap();
        assert!(w.iter().all(|w| w.status == WcStatus::Success), "{w:?}");
        let mut ids: Vec<u64> = w.iter().map(|w| w.wr_id).collect();
        ids.sort_unstable();
        assert_eq!(ids, [i * 2, i * 2 + 1], "round {i}");
        assert_eq!(bufa.to_vec(0..8).unwrap(), i.to_le_bytes());
        assert_eq!(bufa.to_vec(32..40).unwrap(), (!i).to_le_bytes());
        // The senders' completions wait for A's ACKs (held while A
        // polls, sent at its next poll): taken as they come.
        for (side, n) in [&b, &c].into_iter().zip(&mut sent) {
            let w = side.cq.poll(4).unwrap();
            assert!(w.iter().all(|w| w.status == WcStatus::Success), "{w:?}");
            *n += w.len();
        }
    }
    for (side, n) in [&b, &c].into_iter().zip(sent) {
        let w = side.cq.wait(ROUNDS as usize - n, T).unwrap();
        assert!(w.iter().all(|w| w.status == WcStatus::Success), "{w:?}");
    }
    let c1 = soft.counters();
    let ring_rx = c1.ring_rx_packets - c0.ring_rx_packets;
    let udp_rx = (c1.rx_packets - c0.rx_packets) - ring_rx;
    assert!(
        ring_rx >= ROUNDS,
        "B's SENDs came through the ring: {ring_rx}"
    );
    assert!(
        udp_rx >= ROUNDS,
        "C's SENDs came through the socket: {udp_rx}"
    );
    assert_eq!(soft.soft_transport(), rdmakit_soft::SoftTransport::Auto);
    assert_eq!(
        c.ctx.soft().unwrap().soft_transport(),
        rdmakit_soft::SoftTransport::Udp
    );
}

/// `n` WRITEs of `len` bytes, the i-th from `src` at i * len to `dst` at
/// the same offset.
fn writes(src: &MrBuf, dst: &MrBuf, n: usize, len: usize) -> Vec<SendWr> {
    (0..n)
        .map(|i| {
            let to = dst.remote(i * len);
            let op = SendOp::Write {
                remote_addr: to.addr,
                rkey: to.rkey,
            };
            let sge = src.sge(i * len..(i + 1) * len).unwrap();
            SendWr::new(i as u64, op, vec![sge])
        })
        .collect()
}

/// A responder's progress thread drains what a ring holds and answers it
/// with one cumulative ACK, not one per request: 16 signaled WRITEs posted
/// in one call wake it once with all 16 waiting (the wake-up goes when the
/// requester's pass ends). The fewest ACKs of three rounds is taken: a
/// progress thread awake for another reason may start draining before the
/// 16th arrives.
#[test]
fn a_progress_thread_acknowledges_a_drained_batch_once() {
    const N: usize = 16;
    let (a, b) = (side(), side_with(no_busy_poll(), 256));
    let (ab, _ba) = connect(&a, &b, QpType::Rc, ConnectOpts::default());
    assert_eq!(a.ctx.soft().unwrap().qp_on_ring(ab.qpn()), Some(true));
    let src = a.pd.alloc_buf(64 * N, Access::all()).unwrap();
    let dst = b.pd.alloc_buf(64 * N, Access::all()).unwrap();
    let soft_b = b.ctx.soft().unwrap();
    let mut fewest = u64::MAX;
    for round in 0..3u8 {
        src.write(0, &[round + 1; 64 * N]).unwrap();
        let wrs = writes(&src, &dst, N, 64);
        let before = soft_b.counters().tx_packets;
        ab.post_send_wrs(&wrs).unwrap();
        let w = a.cq.wait(N, T).unwrap();
        assert!(w.iter().all(|w| w.status == WcStatus::Success), "{w:?}");
        assert_eq!(dst.to_vec(0..64 * N).unwrap(), vec![round + 1; 64 * N]);
        fewest = fewest.min(soft_b.counters().tx_packets - before);
    }
    assert_eq!(fewest, 1, "ACKs for {N} requests drained at once");
}

/// Rounds of [`batch_wakeups`].
const BATCH_ROUNDS: u64 = 20;

/// The wake-ups a requester on CPU `req` owes a responder whose progress
/// thread runs on CPU `resp`, in [`BATCH_ROUNDS`] rounds of 16 same-host
/// WRITEs, each round posted as the last one completes: one count per try,
/// up to 10 tries, until `enough` holds for one (the other tests' threads
/// share these two cores and can change a try's timing).
fn batch_wakeups(resp: usize, req: usize, enough: impl Fn(u64) -> bool) -> Vec<u64> {
    const N: usize = 16;
    rdmakit_testkit::pin_to_cpu(resp);
    let b = side_with(no_busy_poll(), 256);
    rdmakit_testkit::pin_to_cpu(req);
    let a = side();
    let (ab, _ba) = connect(&a, &b, QpType::Rc, ConnectOpts::default());
    assert_eq!(a.ctx.soft().unwrap().qp_on_ring(ab.qpn()), Some(true));
    let src = a.pd.alloc_buf(4096 * N, Access::all()).unwrap();
    let dst = b.pd.alloc_buf(4096 * N, Access::all()).unwrap();
    let wrs = writes(&src, &dst, N, 4096);
    let soft_a = a.ctx.soft().unwrap();
    let mut tries = Vec::new();
    while tries.len() < 10 && !tries.last().is_some_and(|&n| enough(n)) {
        // The first round wakes a sleeping progress thread.
        ab.post_send_wrs(&wrs).unwrap();
        a.cq.wait(N, T).unwrap();
        let before = soft_a.counters().ring_wakeups;
        for _ in 0..BATCH_ROUNDS {
            ab.post_send_wrs(&wrs).unwrap();
            let w = a.cq.wait(N, T).unwrap();
            assert!(w.iter().all(|w| w.status == WcStatus::Success), "{w:?}");
        }
        tries.push(soft_a.counters().ring_wakeups - before);
        std::thread::sleep(Duration::from_millis(5));
    }
    tries
}

/// A responder's progress thread that drained a batch its requester pushed
/// from another CPU keeps looking at its rings a while before it sleeps:
/// a requester that answers the batch's ACK with the next batch at once
/// finds it awake and owes it no wake-up (on a VM, an idle vCPU's wake-up
/// cost each batch of a same-host WRITE stream ~0.1-2 ms). Without the
/// linger every round wakes it; with it, on an idle host, 0-2 rounds of 20
/// do, and at most half with both cores busy compiling.
///
/// On the requester's own core it does not linger: it would only take the
/// core the requester needs to answer (and the scheduler, counting the
/// spin against it, can leave it off the core for a whole time slice). It
/// sleeps, and each round wakes it; a progress thread preempted just
/// before it sleeps finds the next round already waiting, hence 3/4.
#[test]
fn a_progress_thread_lingers_only_for_a_requester_on_another_cpu() {
    let (here, there) = rdmakit_testkit::two_cpus();
    let w = batch_wakeups(there, here, |n| n <= BATCH_ROUNDS / 2);
    assert!(
        w.iter().any(|&n| n <= BATCH_ROUNDS / 2),
        "another CPU: {w:?} wake-ups in {BATCH_ROUNDS} back-to-back rounds"
    );
    let w = batch_wakeups(here, here, |n| n >= BATCH_ROUNDS * 3 / 4);
    assert!(
        w.iter().any(|&n| n >= BATCH_ROUNDS * 3 / 4),
        "the same CPU: {w:?} wake-ups in {BATCH_ROUNDS} back-to-back rounds"
    );
}
