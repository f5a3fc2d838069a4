//! The traffic class through the safe Verbs API, seen on the wire: an RC
//! pair connected with `ConnectOpts::traffic_class` and a UD send through an
//! AH created from an `Av` with a traffic class, two soft devices over UDP
//! on loopback, captured on `lo` (testkit's `lo_capture`, needs
//! CAP_NET_RAW; without it the test skips unless `RDMAKIT_REQUIRE_ROOT`).

use std::sync::Arc;
use std::time::Duration;

use rdmakit_testkit::lo_capture::LoCapture;
use rdmakit_verbs::{Access, Av, ConnectOpts, Context, Cq, DeviceConfig, Pd, Qp, QpType, WcStatus};

const T: Duration = Duration::from_secs(10);

struct Side {
    ctx: Arc<Context>,
    pd: Arc<Pd>,
    cq: Arc<Cq>,
}

/// A soft device that sends every packet as a datagram (no same-host
/// ring), with its PD and a CQ.
fn side() -> Side {
    let cfg = DeviceConfig {
        transport: rdmakit_soft::SoftTransport::Udp,
        ..DeviceConfig::default()
    };
    let ctx = Context::open_soft(cfg).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(64, None).unwrap();
    Side { ctx, pd, cq }
}

fn connect(a: &Side, b: &Side, t: QpType, o: ConnectOpts) -> (Qp, Qp) {
    let qa = a.pd.qp_builder(t, &a.cq).build().unwrap();
    let qb = b.pd.qp_builder(t, &b.cq).build().unwrap();
    let (qa, qb) = (qa.into_init(o).unwrap(), qb.into_init(o).unwrap());
    let (ea, eb) = (qa.endpoint().unwrap(), qb.endpoint().unwrap());
    (
        qa.connect(&eb).unwrap().ready_to_send().unwrap(),
        qb.connect(&ea).unwrap().ready_to_send().unwrap(),
    )
}

#[test]
fn connect_opts_and_an_av_put_their_traffic_class_on_the_wire() {
    let Some(cap) = LoCapture::start() else {
        return;
    };
    let (a, b) = (side(), side());
    // RC: DSCP 44 from ConnectOpts on both sides (requests and ACKs).
    let rc = ConnectOpts {
        traffic_class: 44 << 2,
        ..ConnectOpts::default()
    };
    let (qa, qb) = connect(&a, &b, QpType::Rc, rc);
    let bb = b.pd.alloc_buf(64, Access::all()).unwrap();
    qb.recv(1, &bb, 0..64).unwrap();
    qa.send_inline(2, b"class").unwrap();
    assert_eq!(b.cq.wait(1, T).unwrap()[0].status, WcStatus::Success);
    assert_eq!(a.cq.wait(1, T).unwrap()[0].status, WcStatus::Success);
    // UD: DSCP 45 from the AH; the QPs' own ConnectOpts class is unused.
    let ud = ConnectOpts::default();
    let (ua, ub) = connect(&a, &b, QpType::Ud, ud);
    let ba = a.pd.alloc_buf(64, Access::all()).unwrap();
    ba.write(0, b"datagram").unwrap();
    ub.recv(3, &bb, 0..64).unwrap();
    let av = Av {
        dgid: b.ctx.query_gid(1, 0).unwrap(),
        traffic_class: 45 << 2,
    };
    let ah = a.pd.create_ah(av).unwrap();
    assert_eq!(ah.traffic_class(), 45 << 2);
    ua.send_ud(4, &ah, ub.qpn(), ud.qkey, &ba, 0..8).unwrap();
    assert_eq!(b.cq.wait(1, T).unwrap()[0].status, WcStatus::Success);
    let pkts = cap.finish();
    let count = |dscp: u8, op: u8| {
        pkts.iter()
            .filter(|p| p.dscp() == dscp && p.opcode == op)
            .count()
    };
    // RC SEND ONLY and its ACK; UD SEND ONLY.
    assert!(
        count(44, 0x04) >= 1 && count(44, 0x11) >= 1 && count(45, 0x64) >= 1,
        "RC SEND {}, ACK {}, UD SEND {} with their DSCPs among {} captured",
        count(44, 0x04),
        count(44, 0x11),
        count(45, 0x64),
        pkts.len()
    );
}
