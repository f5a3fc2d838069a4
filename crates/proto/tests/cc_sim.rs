//! DCQCN in closed loop: RC flows of back-to-back 64 KiB RDMA WRITEs into
//! one receiver through a 10 Mb/s bottleneck with a 60 kB queue marking CE
//! above 20 kB (the numbers of the namespace test bed), 1 ms
//! base RTT, 100 Mb/s NICs, in virtual time. Without congestion control
//! the queue overflows; with it (the profile `Params::for_bottleneck`)
//! the flows share the link fairly, nearly without loss, and a flow that
//! joins late gets its share within a second.

use std::sync::Arc;
use std::time::Duration;

use rdmakit_proto::cc::{Params, Rate};
use rdmakit_proto::sim::{Bottleneck, LinkConfig, Network, QpRef};
use rdmakit_proto::{Instant, Mtu, Pd, QpConfig, QpType, SendOp, SendWr, Sge, WcStatus};

const BOTTLENECK: Rate = Rate::from_mbps(10);
const LINE: Rate = Rate::from_mbps(100);
const QUEUE: usize = 60_000;
const K: usize = 20_000;
const MSG: u32 = 64 * 1024;
/// WRITEs each sender keeps posted.
const DEPTH: usize = 4;

struct Flow {
    qp: QpRef,
    peer: QpRef,
    lkey: u32,
    rkey: u32,
    posted: usize,
    done: u64,
    failed: u64,
}

struct Run {
    net: Network,
    flows: Vec<Flow>,
    ms: u64,
}

impl Run {
    fn new(params: Params) -> Run {
        Run::new_with(params, 11, 0)
    }

    /// A run whose links add up to `jitter_us` per packet, from generator
    /// state `rng`.
    fn new_with(params: Params, rng: u64, jitter_us: u64) -> Run {
        let link = LinkConfig {
            latency: Duration::from_micros(500),
            mtu: Mtu::Mtu1024,
            // 67 ms: above the full queue's 48 ms of delay.
            timeout: 14,
            retry_cnt: 7,
            jitter: Duration::from_micros(jitter_us),
            ..LinkConfig::default()
        };
        let mut net = Network::new(link, rng);
        net.set_nic_rate(LINE);
        let rx = net.add_node();
        net.set_bottleneck(rx, Bottleneck::new(BOTTLENECK, QUEUE, K));
        let params = Arc::new(params);
        let mut flows = Vec::new();
        for i in 0..3u32 {
            let node = net.add_node();
            let cfg = |qpn| {
                let mut c = QpConfig::new(qpn, QpType::Rc, Pd(1));
                c.cc = params.clone();
                c.line_rate = LINE;
                c
            };
            let qp = net.add_qp(node, cfg(0x100 + i));
            let peer = net.add_qp(rx, cfg(0x200 + i));
            net.connect(qp, peer);
            net.connect(peer, qp);
            let (lkey, _) = net.register_all(qp, 0x10000, MSG as usize);
            let (_, rkey) = net.register_all(peer, 0x100000 * u64::from(i + 1), MSG as usize);
            flows.push(Flow {
                qp,
                peer,
                lkey,
                rkey,
                posted: 0,
                done: 0,
                failed: 0,
            });
        }
        Run { net, flows, ms: 0 }
    }

    /// Runs `active` flows (the first ones) until `until_ms`, keeping
    /// [`DEPTH`] WRITEs posted on each.
    fn run(&mut self, active: usize, until_ms: u64) {
        while self.ms < until_ms {
            for (i, f) in self.flows.iter_mut().enumerate().take(active) {
                for wc in self.net.take_completions(f.qp) {
                    f.posted -= 1;
                    if wc.status == WcStatus::Success {
                        f.done += 1;
                    } else {
                        f.failed += 1;
                    }
                }
                while f.posted < DEPTH && self.net.qp(f.qp).state() == rdmakit_proto::QpState::Rts {
                    let op = SendOp::Write {
                        remote_addr: 0x100000 * (i as u64 + 1),
                        rkey: f.rkey,
                    };
                    let sge = Sge {
                        addr: 0x10000,
                        length: MSG,
                        lkey: f.lkey,
                    };
                    self.net
                        .qp_mut(f.qp)
                        .post_send(SendWr::new(self.ms, op, vec![sge]))
                        .unwrap();
                    f.posted += 1;
                }
            }
            self.ms += 1;
            self.net.run_until(Instant::from_nanos(self.ms * 1_000_000));
        }
    }

    /// Bytes through the bottleneck from each flow's node so far.
    fn bytes(&self) -> Vec<u64> {
        let b = self.net.bottleneck().unwrap();
        self.flows
            .iter()
            .map(|f| b.stats.bytes_from.get(f.qp.node).copied().unwrap_or(0))
            .collect()
    }

    fn retransmitted(&self) -> u64 {
        self.flows
            .iter()
            .map(|f| self.net.qp(f.qp).stats().retransmitted)
            .sum()
    }
}

/// Jain's fairness index of `x`.
fn jain(x: &[f64]) -> f64 {
    let s: f64 = x.iter().sum();
    let q: f64 = x.iter().map(|v| v * v).sum();
    s * s / (x.len() as f64 * q)
}

/// Mb/s of `bytes` over `ms`.
fn mbps(bytes: u64, ms: u64) -> f64 {
    bytes as f64 * 8.0 / (ms as f64 * 1000.0)
}

/// What a run shows (printed with `{:?}`, so a failing run shows all).
#[derive(Debug)]
#[allow(dead_code)] // some fields are only printed
struct Figures {
    utilisation: f64,
    jain: f64,
    rates: Vec<f64>,
    drop_pct: f64,
    /// Drops of the last 3 s.
    steady_drop_pct: f64,
    marked: u64,
    retransmitted: u64,
    failed: u64,
}

/// Two flows for 4 s; the figures of the last 3 s (utilisation, Jain,
/// steady drops) and of the whole run (drops, retransmissions).
fn two_flows(run: &mut Run) -> Figures {
    run.run(2, 1000);
    let b0 = run.bytes();
    let at1 = run.net.bottleneck().unwrap().stats.clone();
    run.run(2, 4000);
    let b1 = run.bytes();
    let rates: Vec<f64> = b0
        .iter()
        .zip(&b1)
        .take(2)
        .map(|(a, b)| mbps(b - a, 3000))
        .collect();
    let bn = run.net.bottleneck().unwrap().stats.clone();
    Figures {
        utilisation: rates.iter().sum::<f64>() / (BOTTLENECK.kbps() as f64 / 1000.0),
        jain: jain(&rates),
        rates,
        drop_pct: 100.0 * bn.dropped as f64 / bn.arrived.max(1) as f64,
        steady_drop_pct: 100.0 * (bn.dropped - at1.dropped) as f64
            / (bn.arrived - at1.arrived).max(1) as f64,
        marked: bn.marked,
        retransmitted: run.retransmitted(),
        failed: run.flows.iter().map(|f| f.failed).sum(),
    }
}

fn cc_off() -> Params {
    let mut p = Params::for_bottleneck(BOTTLENECK);
    p.rp_enable = 0;
    p.np_enable = 0;
    p
}

#[test]
fn without_cc_the_bottleneck_queue_overflows() {
    let mut run = Run::new(cc_off());
    let f = two_flows(&mut run);
    println!("CC off: {f:.3?}");
    assert!(f.drop_pct >= 1.0, "{f:?}");
    assert!(f.retransmitted >= 100, "{f:?}");
    assert_eq!(f.marked, 0, "Not-ECT packets are never marked");
}

#[test]
fn dcqcn_shares_the_bottleneck_fairly_without_loss() {
    let mut off = Run::new(cc_off());
    let off = two_flows(&mut off);
    let mut run = Run::new(Params::for_bottleneck(BOTTLENECK));
    let f = two_flows(&mut run);
    let s = |r: &Run, pick: fn(&rdmakit_proto::Stats) -> u64, side: bool| -> u64 {
        r.flows
            .iter()
            .map(|fl| pick(r.net.qp(if side { fl.qp } else { fl.peer }).stats()))
            .sum()
    };
    println!(
        "CC on: {f:.3?}\nCC off: {off:.3?}\nCNPs sent {} handled {} ignored {}, marked packets {}",
        s(&run, |s| s.np_cnp_sent, false),
        s(&run, |s| s.rp_cnp_handled, true),
        s(&run, |s| s.rp_cnp_ignored, true),
        s(&run, |s| s.np_ecn_marked_roce_packets, false),
    );
    assert!(f.utilisation >= 0.80, "utilisation {f:?}");
    assert!(f.jain >= 0.9, "fairness {f:?}");
    assert!(
        f.retransmitted * 10 <= off.retransmitted,
        "retransmissions on {} off {}",
        f.retransmitted,
        off.retransmitted
    );
    assert!(f.steady_drop_pct < 0.1, "drops after the start {f:?}");
    assert_eq!(f.failed, 0);
    // Drain, then every CNP sent was handled, and none was sent without a
    // marked packet.
    run.run(0, 4200);
    assert!(run.net.run_until_idle());
    let sent = s(&run, |s| s.np_cnp_sent, false);
    assert!(sent > 0);
    assert_eq!(sent, s(&run, |s| s.rp_cnp_handled, true));
    assert_eq!(s(&run, |s| s.rp_cnp_ignored, true), 0);
    let marked = s(&run, |s| s.np_ecn_marked_roce_packets, false);
    assert!(marked >= sent, "marked {marked} CNPs {sent}");
    assert!(marked <= run.net.bottleneck().unwrap().stats.marked);
}

#[test]
fn a_late_flow_gets_its_share_within_a_second() {
    let mut run = Run::new(Params::for_bottleneck(BOTTLENECK));
    run.run(2, 4000);
    // Its rate over the second half of its first second.
    run.run(3, 4500);
    let b0 = run.bytes();
    run.run(3, 5000);
    let b1 = run.bytes();
    let rates: Vec<f64> = b0.iter().zip(&b1).map(|(a, b)| mbps(b - a, 500)).collect();
    let fair = BOTTLENECK.kbps() as f64 / 1000.0 / 3.0;
    println!(
        "third flow 0.5-1.0 s after joining: {:.2} Mb/s (fair {fair:.2}); all: {rates:.2?}, Jain {:.3}",
        rates[2],
        jain(&rates)
    );
    assert!(
        (rates[2] - fair).abs() <= 0.2 * fair,
        "third flow {:.2} Mb/s, fair share {fair:.2}",
        rates[2]
    );
}

#[test]
fn the_profile_holds_with_jitter() {
    // 50 µs of jitter per packet (the links stay FIFO), two generator
    // states: the same bounds as without.
    for rng in [1, 2] {
        let mut run = Run::new_with(Params::for_bottleneck(BOTTLENECK), rng, 50);
        let f = two_flows(&mut run);
        run.run(3, 4500);
        let b0 = run.bytes();
        run.run(3, 5000);
        let b1 = run.bytes();
        let rates: Vec<f64> = b0.iter().zip(&b1).map(|(a, b)| mbps(b - a, 500)).collect();
        println!("jitter 50 µs ({rng}): {f:.3?}; three flows {rates:.2?}");
        let fair = BOTTLENECK.kbps() as f64 / 1000.0 / 3.0;
        assert!(f.utilisation >= 0.80 && f.jain >= 0.9, "{f:?}");
        assert!(f.steady_drop_pct < 0.1, "{f:?}");
        assert!((rates[2] - fair).abs() <= 0.2 * fair, "{rates:?}");
    }
}
