//! QP bring-up, loopback traffic with data checks, and the latency /
//! bandwidth sample. Two QPs of the same device talk to each other through
//! the device's own address (loopback), as `ibv_rc_pingpong` does with both
//! ends on one host.

use std::sync::Arc;
use std::time::Instant;

use rdmakit_verbs::{Access, ConnectOpts, Context, Cq, MrBuf, Pd, Qp, QpState, QpType, WcStatus};

use super::{probe, Fail, PResult, ProbeConfig, ProbeKind, ProbeResult};

const BUF: usize = 1 << 16;

struct Pair {
    a: Qp,
    b: Qp,
    ca: Arc<Cq>,
    cb: Arc<Cq>,
}

fn bring_up(pd: &Arc<Pd>, t: QpType, opts: ConnectOpts) -> PResult<(Pair, String)> {
    let ctx = pd.context();
    let ca = ctx.create_cq(256, None)?;
    let cb = ctx.create_cq(256, None)?;
    let mk = |cq: &Arc<Cq>| pd.qp_builder(t, cq).max_send_wr(64).max_recv_wr(64).build();
    let (qa, qb) = (mk(&ca)?, mk(&cb)?);
    let states = |q: &Qp| q.state().map(|s| qp_state_name(s).to_string());
    let mut seen = vec![states(&qa)?];
    let (ia, ib) = (qa.into_init(opts)?, qb.into_init(opts)?);
    seen.push(states(ia.qp())?);
    let (ea, eb) = (ia.endpoint()?, ib.endpoint()?);
    let (ra, rb) = (ia.connect(&eb)?, ib.connect(&ea)?);
    seen.push(states(ra.qp())?);
    let (a, b) = (ra.ready_to_send()?, rb.ready_to_send()?);
    seen.push(states(&a)?);
    for q in [&a, &b] {
        let s = q.state()?;
        if s != QpState::Rts {
            return Err(Fail::Check(format!(
                "QP {:#x} is in {}, not RTS",
                q.qpn(),
                qp_state_name(s)
            )));
        }
    }
    Ok((
        Pair { a, b, ca, cb },
        format!("QPs {:#x}, {:#x}: {}", ea.qpn, eb.qpn, seen.join("->")),
    ))
}

/// A QP state as `ibv_qp_state` names it, without the prefix: "RTS".
pub(crate) fn qp_state_name(s: QpState) -> &'static str {
    match s {
        QpState::Reset => "RESET",
        QpState::Init => "INIT",
        QpState::Rtr => "RTR",
        QpState::Rts => "RTS",
        QpState::Sqd => "SQD",
        QpState::Sqe => "SQE",
        QpState::Err => "ERR",
    }
}

/// A completion status as `ibv_wc_status` names it: "IBV_WC_RETRY_EXC_ERR".
fn wc_status_name(s: WcStatus) -> String {
    match rdmakit_vocab::wc::name(s as u32) {
        Some(n) => format!("IBV_WC_{n}"),
        None => format!("status {}", s as u32),
    }
}

/// Waits for one successful completion on `cq`.
fn one(cq: &Cq, cfg: &ProbeConfig, what: &str) -> PResult<rdmakit_verbs::Wc> {
    let wcs = cq.wait(1, cfg.timeout)?;
    let wc = wcs
        .into_iter()
        .next()
        .ok_or_else(|| Fail::Check(format!("{what}: no completion")))?;
    if wc.status != WcStatus::Success {
        return Err(Fail::Check(format!(
            "{what}: completed with {} (vendor_err {})",
            wc_status_name(wc.status),
            wc.vendor_err
        )));
    }
    Ok(wc)
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn expect(buf: &MrBuf, off: usize, want: &[u8], what: &str) -> PResult<()> {
    let got = buf.to_vec(off..off + want.len())?;
    if got != want {
        let at = got.iter().zip(want).position(|(g, w)| g != w).unwrap_or(0);
        return Err(Fail::Check(format!(
            "{what}: data mismatch at byte {at} of {} (got {:#04x}, want {:#04x})",
            want.len(),
            got[at],
            want[at]
        )));
    }
    Ok(())
}

pub(super) fn run(ctx: &Arc<Context>, cfg: &ProbeConfig, out: &mut Vec<ProbeResult>) {
    let pd = match ctx.alloc_pd() {
        Ok(pd) => pd,
        Err(e) => {
            out.push(probe("qp.alloc_pd", ProbeKind::QpBringup, || Err(e.into())));
            return;
        }
    };
    let opts = ConnectOpts::default();
    let mut rc = None;
    out.push(probe(
        "qp.rc RESET->INIT->RTR->RTS",
        ProbeKind::QpBringup,
        || {
            let (p, d) = bring_up(&pd, QpType::Rc, opts)?;
            rc = Some(p);
            Ok(d)
        },
    ));
    let mut ud = None;
    out.push(probe(
        "qp.ud RESET->INIT->RTR->RTS",
        ProbeKind::QpBringup,
        || {
            let (p, d) = bring_up(&pd, QpType::Ud, opts)?;
            ud = Some(p);
            Ok(d)
        },
    ));
    let bufs = (
        pd.alloc_buf(BUF, Access::all()),
        pd.alloc_buf(BUF, Access::all()),
    );
    let (ba, bb) = match bufs {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => {
            out.push(probe("traffic.buffers", ProbeKind::Traffic, || {
                Err(e.into())
            }));
            return;
        }
    };
    if let Some(p) = &rc {
        rc_traffic(p, &ba, &bb, cfg, out);
        sample(p, &ba, &bb, cfg, out);
    }
    if let Some(p) = &ud {
        out.push(probe("ud.send", ProbeKind::Traffic, || {
            ud_send(&pd, p, &ba, &bb, cfg)
        }));
    }
    // Drop order: QPs, CQs (in Pair), then buffers (MRs), then the PD.
    drop(rc);
    drop(ud);
    drop((ba, bb));
}

fn rc_traffic(p: &Pair, ba: &MrBuf, bb: &MrBuf, cfg: &ProbeConfig, out: &mut Vec<ProbeResult>) {
    out.push(probe("rc.send", ProbeKind::Traffic, || {
        let data = pattern(4096, 1);
        ba.write(0, &data)?;
        p.b.recv(1, bb, 0..4096)?;
        p.a.send(2, ba, 0..4096)?;
        one(&p.ca, cfg, "SEND")?;
        let wc = one(&p.cb, cfg, "RECV")?;
        if wc.byte_len != 4096 {
            return Err(Fail::Check(format!(
                "RECV byte_len {} != 4096",
                wc.byte_len
            )));
        }
        expect(bb, 0, &data, "SEND")?;
        Ok("4 KiB SEND received intact".into())
    }));
    out.push(probe("rc.write", ProbeKind::Traffic, || {
        let data = pattern(8192, 2);
        ba.write(0, &data)?;
        p.a.write(3, ba, 0..8192, bb.remote(4096))?;
        one(&p.ca, cfg, "RDMA WRITE")?;
        expect(bb, 4096, &data, "RDMA WRITE")?;
        Ok("8 KiB RDMA WRITE landed intact".into())
    }));
    out.push(probe("rc.read", ProbeKind::Traffic, || {
        let data = pattern(8192, 3);
        bb.write(16384, &data)?;
        p.a.read(4, ba, 16384..24576, bb.remote(16384))?;
        one(&p.ca, cfg, "RDMA READ")?;
        expect(ba, 16384, &data, "RDMA READ")?;
        Ok("8 KiB RDMA READ returned intact".into())
    }));
    out.push(probe("rc.atomic", ProbeKind::Traffic, || {
        let off = 32768;
        bb.write(off, &40u64.to_ne_bytes())?;
        p.a.fetch_add(5, ba, off, bb.remote(off), 2)?;
        one(&p.ca, cfg, "FETCH_ADD")?;
        let (old, new) = (ba.read_u64(off)?, bb.read_u64(off)?);
        if (old, new) != (40, 42) {
            return Err(Fail::Check(format!(
                "FETCH_ADD: returned {old}, remote now {new} (want 40, 42)"
            )));
        }
        p.a.compare_swap(6, ba, off + 8, bb.remote(off), 42, 7)?;
        one(&p.ca, cfg, "CMP_SWAP")?;
        let (old, new) = (ba.read_u64(off + 8)?, bb.read_u64(off)?);
        if (old, new) != (42, 7) {
            return Err(Fail::Check(format!(
                "CMP_SWAP: returned {old}, remote now {new} (want 42, 7)"
            )));
        }
        Ok("FETCH_ADD 40+2 and CMP_SWAP 42->7 correct".into())
    }));
}

fn ud_send(pd: &Arc<Pd>, p: &Pair, ba: &MrBuf, bb: &MrBuf, cfg: &ProbeConfig) -> PResult<String> {
    let ctx = pd.context();
    let gid = ctx.query_gid(1, ROCEV2_GID_INDEX)?;
    let ah = pd.create_ah(gid)?;
    let data = pattern(512, 4);
    ba.write(40960, &data)?;
    // UD receives start with the 40-byte GRH area.
    p.b.recv(7, bb, 40960..40960 + 40 + 512)?;
    let qkey = ConnectOpts::default().qkey;
    p.a.send_ud(8, &ah, p.b.qpn(), qkey, ba, 40960..40960 + 512)?;
    one(&p.ca, cfg, "UD SEND")?;
    let wc = one(&p.cb, cfg, "UD RECV")?;
    if wc.byte_len != 40 + 512 {
        return Err(Fail::Check(format!(
            "UD RECV byte_len {} != 552 (40-byte GRH + 512)",
            wc.byte_len
        )));
    }
    expect(bb, 40960 + 40, &data, "UD SEND")?;
    Ok(format!(
        "512-byte UD SEND via AH to QP {:#x} intact",
        p.b.qpn()
    ))
}

/// GID index of the RoCE v2 IPv4-mapped GID (the soft NIC's index 0, as
/// `InitQp::endpoint` uses).
const ROCEV2_GID_INDEX: u32 = 0;

fn sample(p: &Pair, ba: &MrBuf, bb: &MrBuf, cfg: &ProbeConfig, out: &mut Vec<ProbeResult>) {
    out.push(probe("sample.latency", ProbeKind::Performance, || {
        let mut rtts = Vec::with_capacity(cfg.latency_iters);
        for i in 0..cfg.latency_iters {
            let t = Instant::now();
            p.b.recv(100, bb, 49152..49160)?;
            p.a.recv(101, ba, 49152..49160)?;
            p.a.send(102, ba, 0..8)?;
            one(&p.cb, cfg, "ping RECV")?;
            p.b.send(103, bb, 0..8)?;
            one(&p.ca, cfg, "pong RECV or ping SEND")?;
            one(&p.ca, cfg, "pong RECV or ping SEND")?;
            one(&p.cb, cfg, "pong SEND")?;
            if i > 0 {
                rtts.push(t.elapsed());
            }
        }
        if rtts.is_empty() {
            return Ok("no iterations".into());
        }
        rtts.sort();
        let med = rtts[rtts.len() / 2];
        Ok(format!(
            "8-byte RC SEND ping-pong: median RTT {:.1} us over {} round trips",
            med.as_secs_f64() * 1e6,
            rtts.len()
        ))
    }));
    out.push(probe("sample.bandwidth", ProbeKind::Performance, || {
        let n = cfg.bw_iters;
        let window = 16usize;
        let t = Instant::now();
        let (mut posted, mut done) = (0usize, 0usize);
        while done < n {
            while posted < n && posted - done < window {
                p.a.write(200 + posted as u64, ba, 0..BUF, bb.remote(0))?;
                posted += 1;
            }
            one(&p.ca, cfg, "RDMA WRITE")?;
            done += 1;
        }
        let s = t.elapsed().as_secs_f64();
        let mb = (n * BUF) as f64 / 1e6;
        Ok(format!(
            "{n} x 64 KiB RC WRITE, {window} in flight: {:.0} MB/s",
            mb / s.max(1e-9)
        ))
    }));
}
