//! A provider-independent verbs suite: the loopback cases the soft NIC's
//! tests cover (RC SEND/WRITE/READ/atomics/immediates, UC, UD through an
//! AH, SRQ, completion channel with a pollable fd, inline sends, CQ overrun
//! async event, error completions), run on any two contexts — two soft NICs, two opens of one
//! real device, or the rdmakit shim behind libibverbs. Every case checks
//! the data that arrived, not only the completion status.
//!
//! Used by the crate's tests (soft NIC and shim), by the `verbs-suite`
//! example the VM tier runs on rxe, and usable by any tool.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rdmakit_proto::{AttrMask, QpAttr, QpState, RecvWr, SendOp, SendWr, WcOpcode, WcStatus};

use crate::error::Error;
use crate::objects::{ConnectOpts, Context, Cq, Endpoint, InitQp, MrBuf, Pd, Qp, QpBuilder};
use crate::{Access, PortState, QpType};

/// One case's outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaseResult {
    /// Case name (`rc.send_write_read_atomics`).
    pub name: &'static str,
    /// Whether every check held.
    pub passed: bool,
    /// What was checked, or the first failure.
    pub detail: String,
    /// Wall time in milliseconds.
    pub millis: u64,
}

/// A failed check or verb, as text.
struct Fail(String);

impl From<Error> for Fail {
    fn from(e: Error) -> Fail {
        Fail(e.to_string())
    }
}

type R = Result<String, Fail>;

fn ensure(cond: bool, msg: impl FnOnce() -> String) -> Result<(), Fail> {
    if cond {
        Ok(())
    } else {
        Err(Fail(msg()))
    }
}

struct Side {
    ctx: Arc<Context>,
    pd: Arc<Pd>,
    cq: Arc<Cq>,
}

fn side(ctx: &Arc<Context>) -> Result<Side, Fail> {
    let pd = ctx.alloc_pd()?;
    let cq = ctx.create_cq(256, None)?;
    Ok(Side {
        ctx: Arc::clone(ctx),
        pd,
        cq,
    })
}

/// Builds both QPs and brings them to INIT.
fn init_pair(a: QpBuilder, b: QpBuilder, opts: ConnectOpts) -> Result<(InitQp, InitQp), Fail> {
    Ok((a.build()?.into_init(opts)?, b.build()?.into_init(opts)?))
}

/// Connects two QPs in INIT to the given endpoints of each other and brings
/// both to RTS.
fn connect_to(qa: InitQp, ea: &Endpoint, qb: InitQp, eb: &Endpoint) -> Result<(Qp, Qp), Fail> {
    Ok((
        qa.connect(eb)?.ready_to_send()?,
        qb.connect(ea)?.ready_to_send()?,
    ))
}

/// Connects two QPs in INIT to each other and brings both to RTS.
fn connect((qa, qb): (InitQp, InitQp)) -> Result<(Qp, Qp), Fail> {
    let (ea, eb) = (qa.endpoint()?, qb.endpoint()?);
    connect_to(qa, &ea, qb, &eb)
}

fn pair(a: &Side, b: &Side, t: QpType, opts: ConnectOpts) -> Result<(Qp, Qp), Fail> {
    connect(init_pair(
        a.pd.qp_builder(t, &a.cq),
        b.pd.qp_builder(t, &b.cq),
        opts,
    )?)
}

fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32)
        .map(|i| (i.wrapping_mul(7).wrapping_add(seed)) as u8)
        .collect()
}

/// Waits for `n` completions and requires them all successful.
fn ok_wcs(cq: &Cq, n: usize, t: Duration, what: &str) -> Result<Vec<rdmakit_proto::Wc>, Fail> {
    let w = cq.wait(n, t)?;
    ensure(w.iter().all(|w| w.status == WcStatus::Success), || {
        format!("{what}: {w:?}")
    })?;
    Ok(w)
}

fn same(buf: &MrBuf, off: usize, want: &[u8], what: &str) -> Result<(), Fail> {
    let got = buf.to_vec(off..off + want.len())?;
    ensure(got == want, || {
        let at = got.iter().zip(want).position(|(g, w)| g != w).unwrap_or(0);
        format!("{what}: data differs at byte {at} of {}", want.len())
    })
}

fn query(a: &Side, _b: &Side, _t: Duration) -> R {
    let d = a.ctx.query_device()?;
    ensure(d.phys_port_cnt >= 1 && d.max_qp > 0 && d.max_cq > 0, || {
        format!("implausible device attributes: {d:?}")
    })?;
    ensure(d.max_mr > 0 && d.max_pd > 0 && d.max_cqe > 0, || {
        format!("limits missing: {d:?}")
    })?;
    let p = a.ctx.query_port(1)?;
    ensure(p.state == PortState::Active, || {
        format!("port 1 is {:?}", p.state)
    })?;
    ensure(
        p.gids.len() == p.gid_tbl_len as usize && p.gids.iter().any(|g| !g.gid.is_zero()),
        || format!("GID table: {} entries, none set", p.gids.len()),
    )?;
    let bad = a.ctx.query_port(d.phys_port_cnt.saturating_add(1));
    ensure(bad.is_err(), || {
        "a port past phys_port_cnt answered".to_string()
    })?;
    a.ctx.query_pkey(1, 0)?;
    Ok(format!(
        "{}: {} port(s), max_qp {} max_cq {} max_mr {} max_pd {}, port 1 ACTIVE {:?} MTU {}",
        a.ctx.name(),
        d.phys_port_cnt,
        d.max_qp,
        d.max_cq,
        d.max_mr,
        d.max_pd,
        p.link_layer,
        p.active_mtu.bytes()
    ))
}

fn rc(a: &Side, b: &Side, t: Duration) -> R {
    let (qa, qb) = pair(a, b, QpType::Rc, ConnectOpts::default())?;
    let ba = a.pd.alloc_buf(65536, Access::all())?;
    let bb = b.pd.alloc_buf(65536, Access::all())?;
    // Multi-packet SEND (40000 bytes at MTU 1024).
    let data = pattern(40000, 3);
    ba.write(0, &data)?;
    qb.recv(10, &bb, 0..65536)?;
    qa.send(1, &ba, 0..40000)?;
    let w = ok_wcs(&b.cq, 1, t, "RECV")?;
    ensure(
        (w[0].wr_id, w[0].opcode, w[0].byte_len) == (10, WcOpcode::Recv, 40000),
        || format!("RECV completion {:?}", w[0]),
    )?;
    same(&bb, 0, &data, "SEND")?;
    ok_wcs(&a.cq, 1, t, "SEND")?;
    // WRITE while B does nothing.
    ba.write(50000, b"written by A")?;
    qa.write(2, &ba, 50000..50012, bb.remote(60000))?;
    let w = ok_wcs(&a.cq, 1, t, "WRITE")?;
    ensure(w[0].opcode == WcOpcode::RdmaWrite, || format!("{:?}", w[0]))?;
    same(&bb, 60000, b"written by A", "WRITE")?;
    // READ.
    let rd = pattern(3000, 9);
    bb.write(61000, &rd)?;
    qa.read(3, &ba, 10000..13000, bb.remote(61000))?;
    let w = ok_wcs(&a.cq, 1, t, "READ")?;
    ensure(w[0].opcode == WcOpcode::RdmaRead, || format!("{:?}", w[0]))?;
    same(&ba, 10000, &rd, "READ")?;
    // Atomics.
    bb.write(64000, &100u64.to_ne_bytes())?;
    qa.fetch_add(4, &ba, 20000, bb.remote(64000), 23)?;
    qa.compare_swap(5, &ba, 20008, bb.remote(64000), 123, 7)?;
    qa.compare_swap(6, &ba, 20016, bb.remote(64000), 999, 1)?;
    ok_wcs(&a.cq, 3, t, "atomics")?;
    let got = (
        ba.read_u64(20000)?,
        ba.read_u64(20008)?,
        ba.read_u64(20016)?,
        bb.read_u64(64000)?,
    );
    ensure(got == (100, 123, 7, 7), || {
        format!("atomics returned/left {got:?}, want (100, 123, 7, 7)")
    })?;
    // SEND with immediate and WRITE with immediate.
    qb.recv(11, &bb, 0..64)?;
    qb.recv(12, &bb, 0..64)?;
    let mut s = SendWr::new(
        7,
        SendOp::SendWithImm { imm: 0xdead_beef },
        vec![ba.sge(0..16)?],
    );
    s.solicited = true;
    let w2 = SendWr::new(
        8,
        SendOp::WriteWithImm {
            remote_addr: bb.remote(30000).addr,
            rkey: bb.remote(30000).rkey,
            imm: 0x0102_0304,
        },
        vec![ba.sge(100..200)?],
    );
    qa.post_send_wrs(&[s, w2])?;
    ok_wcs(&a.cq, 2, t, "SEND/WRITE with immediate")?;
    let w = ok_wcs(&b.cq, 2, t, "receives of immediates")?;
    ensure(
        w[0].imm_data == Some(0xdead_beef)
            && w[0].opcode == WcOpcode::Recv
            && w[0].byte_len == 16
            && w[1].imm_data == Some(0x0102_0304)
            && w[1].opcode == WcOpcode::RecvRdmaWithImm,
        || format!("immediate completions {w:?}"),
    )?;
    same(&bb, 0, &data[..16], "SEND with immediate")?;
    same(&bb, 30000, &ba.to_vec(100..200)?, "WRITE with immediate")?;
    Ok("SEND 40000 B, WRITE, READ 3000 B, FETCH_ADD, CMP_SWAP hit/miss, SEND/WRITE with immediate: data intact".into())
}

fn rc_ipv4_gid(a: &Side, b: &Side, t: Duration) -> R {
    // Connect through the port's IPv4-mapped RoCE v2 GID (rxe: index 1;
    // the soft NIC: index 0) whatever index the typed endpoint hands out.
    let v4 = |s: &Side| -> Result<crate::Gid, Fail> {
        let p = s.ctx.query_port(1)?;
        p.gids
            .iter()
            .map(|g| g.gid)
            .find(|g| g.to_ipv4().is_some())
            .ok_or_else(|| Fail(format!("{}: no IPv4-mapped GID", s.ctx.name())))
    };
    let opts = ConnectOpts::default();
    let (qa, qb) = init_pair(
        a.pd.qp_builder(QpType::Rc, &a.cq),
        b.pd.qp_builder(QpType::Rc, &b.cq),
        opts,
    )?;
    let ea = crate::Endpoint {
        gid: v4(a)?,
        ..qa.endpoint()?
    };
    let eb = crate::Endpoint {
        gid: v4(b)?,
        ..qb.endpoint()?
    };
    let (qa, qb) = connect_to(qa, &ea, qb, &eb)?;
    let ba = a.pd.alloc_buf(8192, Access::all())?;
    let bb = b.pd.alloc_buf(8192, Access::all())?;
    let data = pattern(5000, 17);
    ba.write(0, &data)?;
    qb.recv(1, &bb, 0..8192)?;
    qa.send(2, &ba, 0..5000)?;
    ok_wcs(&a.cq, 1, t, "SEND")?;
    ok_wcs(&b.cq, 1, t, "RECV")?;
    same(&bb, 0, &data, "SEND over the IPv4 GID")?;
    Ok(format!("RC SEND 5000 B via {}", eb.gid.to_ipv6()))
}

fn ud(a: &Side, b: &Side, t: Duration) -> R {
    let opts = ConnectOpts::default();
    let (qa, qb) = init_pair(
        a.pd.qp_builder(QpType::Ud, &a.cq),
        b.pd.qp_builder(QpType::Ud, &b.cq),
        opts,
    )?;
    // The GID B hands out in its endpoint, as an application would use it.
    let ep = qb.endpoint()?.gid;
    let (qa, qb) = connect((qa, qb))?;
    let ah = a.pd.create_ah(ep)?;
    let ba = a.pd.alloc_buf(8192, Access::all())?;
    let bb = b.pd.alloc_buf(8192, Access::all())?;
    let data = pattern(512, 5);
    ba.write(0, &data)?;
    qb.recv(1, &bb, 0..40 + 512)?;
    qa.send_ud(2, &ah, qb.qpn(), opts.qkey, &ba, 0..512)?;
    ok_wcs(&a.cq, 1, t, "UD SEND")?;
    let w = ok_wcs(&b.cq, 1, t, "UD RECV")?;
    ensure(w[0].byte_len == 552 && w[0].src_qp == qa.qpn(), || {
        format!(
            "UD RECV {:?} (want byte_len 552, src_qp {:#x})",
            w[0],
            qa.qpn()
        )
    })?;
    same(&bb, 40, &data, "UD SEND")?;
    Ok(format!(
        "512 B via AH to QP {:#x}, GRH area 40 B, src_qp checked",
        qb.qpn()
    ))
}

fn uc(a: &Side, b: &Side, t: Duration) -> R {
    let (qa, qb) = pair(a, b, QpType::Uc, ConnectOpts::default())?;
    let ba = a.pd.alloc_buf(8192, Access::all())?;
    let bb = b.pd.alloc_buf(8192, Access::all())?;
    let data = pattern(3000, 11);
    ba.write(0, &data)?;
    qa.write(1, &ba, 0..3000, bb.remote(4096))?;
    ok_wcs(&a.cq, 1, t, "UC WRITE")?;
    // UC has no ACK: the WRITE completes at the sender before it lands.
    let deadline = Instant::now() + t;
    while bb.to_vec(4096..7096)? != data && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    same(&bb, 4096, &data, "UC WRITE")?;
    qb.recv(2, &bb, 0..4096)?;
    qa.send(3, &ba, 0..1000)?;
    ok_wcs(&a.cq, 1, t, "UC SEND")?;
    let w = ok_wcs(&b.cq, 1, t, "UC RECV")?;
    ensure(w[0].byte_len == 1000, || format!("{:?}", w[0]))?;
    same(&bb, 0, &data[..1000], "UC SEND")?;
    Ok("UC WRITE 3000 B and SEND 1000 B intact".into())
}

fn srq(a: &Side, b: &Side, t: Duration) -> R {
    let s = b.pd.create_srq(64, 2)?;
    let opts = ConnectOpts::default();
    let bb = b.pd.alloc_buf(16384, Access::all())?;
    let ba = a.pd.alloc_buf(16384, Access::all())?;
    let wrs: Vec<RecvWr> = (0..4)
        .map(|i| {
            Ok(RecvWr {
                wr_id: 100 + i as u64,
                sg_list: vec![bb.sge(i * 4096..(i + 1) * 4096)?],
            })
        })
        .collect::<Result<_, Error>>()?;
    s.post_recv(&wrs)?;
    let mut qps = Vec::new();
    for _ in 0..2 {
        qps.push(connect(init_pair(
            a.pd.qp_builder(QpType::Rc, &a.cq),
            b.pd.qp_builder(QpType::Rc, &b.cq).srq(&s),
            opts,
        )?)?);
    }
    for (i, (qa, _)) in qps.iter().enumerate() {
        ba.write(i * 100, &pattern(100, i as u32))?;
        qa.send(i as u64, &ba, i * 100..i * 100 + 100)?;
    }
    ok_wcs(&a.cq, 2, t, "SENDs to the SRQ QPs")?;
    let w = ok_wcs(&b.cq, 2, t, "SRQ receives")?;
    let qpns: Vec<u32> = qps.iter().map(|(_, qb)| qb.qpn()).collect();
    for wc in &w {
        let slot = usize::try_from(wc.wr_id - 100).unwrap_or(99);
        ensure(slot < 4 && qpns.contains(&wc.qp_num), || {
            format!("SRQ completion {wc:?}")
        })?;
        let from = qpns.iter().position(|&q| q == wc.qp_num).unwrap_or(0);
        same(&bb, slot * 4096, &pattern(100, from as u32), "SRQ receive")?;
    }
    Ok("two RC QPs share one SRQ; each SEND landed in an SRQ buffer intact".into())
}

fn channel(a: &Side, b: &Side, t: Duration) -> R {
    use std::os::fd::AsRawFd;
    let ch = b.ctx.create_comp_channel()?;
    let cqb = b.ctx.create_cq(64, Some(&ch))?;
    let opts = ConnectOpts::default();
    let (qa, qb) = connect(init_pair(
        a.pd.qp_builder(QpType::Rc, &a.cq),
        b.pd.qp_builder(QpType::Rc, &cqb),
        opts,
    )?)?;
    let ba = a.pd.alloc_buf(4096, Access::all())?;
    let bb = b.pd.alloc_buf(4096, Access::all())?;
    ba.write(0, b"event")?;
    qb.recv(1, &bb, 0..64)?;
    cqb.req_notify(false)?;
    let fd = ch.as_raw_fd();
    ensure(fd >= 0, || "completion channel has no fd".into())?;
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let before = unsafe { libc::poll(&mut p, 1, 0) };
    ensure(before == 0, || {
        format!("fd readable before any completion ({before})")
    })?;
    qa.send(2, &ba, 0..5)?;
    ok_wcs(&a.cq, 1, t, "SEND")?;
    let ms = i32::try_from(t.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: as above.
    let n = unsafe { libc::poll(&mut p, 1, ms) };
    ensure(n == 1 && p.revents & libc::POLLIN != 0, || {
        format!(
            "poll on the channel fd returned {n}, revents {:#x}",
            p.revents
        )
    })?;
    let h = ch.get_cq_event(Some(t))?;
    ensure(h == cqb.handle(), || {
        format!("event for CQ {h:#x}, want {:#x}", cqb.handle())
    })?;
    let w = cqb.poll(4)?;
    ensure(w.len() == 1 && w[0].status == WcStatus::Success, || {
        format!("{w:?}")
    })?;
    same(&bb, 0, b"event", "SEND")?;
    // Event mode: wait_event sleeps on the channel.
    qb.recv(3, &bb, 0..64)?;
    let waiter = {
        let cqb = Arc::clone(&cqb);
        std::thread::spawn(move || cqb.wait_event(4, t))
    };
    std::thread::sleep(Duration::from_millis(50));
    qa.send(4, &ba, 0..5)?;
    ok_wcs(&a.cq, 1, t, "SEND")?;
    let w = waiter
        .join()
        .map_err(|_| Fail("waiter panicked".into()))??;
    ensure(w.len() == 1 && w[0].wr_id == 3, || format!("{w:?}"))?;
    let e = ch.get_cq_event(Some(Duration::from_millis(20)));
    ensure(e.is_err(), || "an event without a completion".into())?;
    drop((qa, qb, cqb));
    Ok("fd not readable when idle, readable after the completion; get_cq_event names the CQ; wait_event wakes".into())
}

fn inline(a: &Side, b: &Side, t: Duration) -> R {
    let (qa, qb) = pair(a, b, QpType::Rc, ConnectOpts::default())?;
    let bb = b.pd.alloc_buf(4096, Access::all())?;
    qb.recv(1, &bb, 0..4096)?;
    let data = pattern(48, 21);
    qa.send_inline(2, &data)?;
    ok_wcs(&a.cq, 1, t, "inline SEND")?;
    let w = ok_wcs(&b.cq, 1, t, "RECV")?;
    ensure(w[0].byte_len == 48, || format!("{:?}", w[0]))?;
    same(&bb, 0, &data, "inline SEND")?;
    Ok("48-byte inline SEND (no lkey) intact".into())
}

fn cq_overrun(a: &Side, b: &Side, t: Duration) -> R {
    let small = a.ctx.create_cq(2, None)?;
    let opts = ConnectOpts::default();
    let (qa, _qb) = connect(init_pair(
        a.pd.qp_builder(QpType::Rc, &small),
        b.pd.qp_builder(QpType::Rc, &b.cq),
        opts,
    )?)?;
    let ba = a.pd.alloc_buf(64, Access::all())?;
    let bb = b.pd.alloc_buf(64, Access::all())?;
    // Far more signaled completions than the CQ holds (providers round its
    // size up to a power of two), without polling.
    let mut posted = 0;
    for i in 0..32 {
        if qa.write(i, &ba, 0..8, bb.remote(0)).is_err() {
            break;
        }
        posted += 1;
    }
    let deadline = Instant::now() + t;
    let mut other = Vec::new();
    while Instant::now() < deadline {
        match a
            .ctx
            .get_async_event(deadline.saturating_duration_since(Instant::now()))
        {
            Some(rdmakit_types::AsyncEvent::CqErr { cq }) if cq == small.handle() => {
                return Ok(format!(
                    "{posted} WRITEs on a 2-entry CQ: CQ_ERR async event for CQ {cq:#x}{}",
                    if other.is_empty() {
                        String::new()
                    } else {
                        format!(" (also {other:?})")
                    }
                ));
            }
            Some(e) => other.push(e),
            None => break,
        }
    }
    Err(Fail(format!(
        "no CQ_ERR for CQ {:#x} after {posted} WRITEs (other events: {other:?})",
        small.handle()
    )))
}

fn errors(a: &Side, b: &Side, t: Duration) -> R {
    let (qa, qb) = pair(a, b, QpType::Rc, ConnectOpts::default())?;
    let ba = a.pd.alloc_buf(4096, Access::all())?;
    let bb = b.pd.alloc_buf(4096, Access::all())?;
    // A READ of B's (valid) buffer into A's buffer named with a wrong lkey:
    // a local protection error, at post or as a completion (rxe and the
    // soft NIC: LOC_PROT_ERR when the response is scattered).
    let mut sge = ba.sge(0..64)?;
    sge.lkey ^= 0x00ff_ff00;
    let rb = bb.remote(0);
    let wr = SendWr::new(
        9,
        SendOp::Read {
            remote_addr: rb.addr,
            rkey: rb.rkey,
        },
        vec![sge],
    );
    let how = match qa.post_send_wrs(&[wr]) {
        Err(e) => format!("refused at post: {} {}", e.verb, e.errno.name()),
        Ok(()) => {
            let w = a.cq.wait(1, t)?;
            ensure(
                matches!(w[0].status, WcStatus::LocProtErr | WcStatus::LocAccessErr),
                || format!("bad lkey completed with {:?}", w[0].status),
            )?;
            format!("completed with {:?}", w[0].status)
        }
    };
    // A transition the state table forbids is refused.
    let bad = QpAttr {
        qp_state: QpState::Rtr,
        ..QpAttr::default()
    };
    let e = qb.modify(&bad, AttrMask::STATE, None);
    ensure(e.is_err(), || "RTS -> RTR was accepted".into())?;
    Ok(format!("bad lkey {how}; RTS -> RTR refused"))
}

/// A suite run's report: one line per case and the totals, as
/// `rdmakit verbs-test` prints it.
pub fn text(device: &str, provider: &str, results: &[CaseResult]) -> String {
    let failed = results.iter().filter(|r| !r.passed).count();
    let mut s = format!("verbs suite on {device} through the {provider} provider\n");
    for r in results {
        let tag = if r.passed { "PASS" } else { "FAIL" };
        s.push_str(&format!(
            "{tag} {} ({} ms): {}\n",
            r.name, r.millis, r.detail
        ));
    }
    s.push_str(&format!(
        "{} passed, {failed} failed\n",
        results.len() - failed
    ));
    s
}

/// A suite run's report as one JSON object (`rdmakit verbs-test --json`).
pub fn json(device: &str, provider: &str, results: &[CaseResult]) -> String {
    let cases: Vec<_> = results
        .iter()
        .map(|r| serde_json::json!({"name": r.name, "passed": r.passed, "millis": r.millis, "detail": r.detail}))
        .collect();
    let passed = results.iter().all(|r| r.passed);
    serde_json::json!({"device": device, "provider": provider, "passed": passed, "cases": cases})
        .to_string()
}

/// Every case, in order.
pub const CASES: &[&str] = &[
    "query",
    "rc.send_write_read_atomics_imm",
    "rc.ipv4_gid",
    "ud.send_via_ah",
    "uc.write_send",
    "srq.shared_receives",
    "channel.fd_and_events",
    "rc.inline_send",
    "async.cq_overrun",
    "errors.bad_lkey_and_bad_transition",
];

/// A run of the suite on one device: which, through which provider ("soft" or
/// "ibverbs"), and each case's result.
pub struct DeviceRun {
    /// The device.
    pub device: String,
    /// The provider it was opened through: "soft" or "ibverbs".
    pub kind: &'static str,
    /// Each case run, in the suite's order.
    pub results: Vec<CaseResult>,
}

impl DeviceRun {
    /// What `rdmakit verbs-test` prints: one JSON object ([`json`]) or the
    /// lines of [`text`].
    pub fn output(&self, as_json: bool) -> String {
        match as_json {
            true => json(&self.device, self.kind, &self.results) + "\n",
            false => text(&self.device, self.kind, &self.results),
        }
    }

    /// [`Exit::Ok`] when every case passed, else [`Exit::Found`].
    pub fn exit(&self) -> rdmakit_vocab::exit::Exit {
        use rdmakit_vocab::exit::Exit;
        match self.results.iter().all(|c| c.passed) {
            true => Exit::Ok,
            false => Exit::Found,
        }
    }
}

/// Runs the suite ([`run`]) on `device` of the provider `choice` selects (its
/// first device when `None`), between two contexts of it.
///
/// # Errors
/// No provider, no device, a device that does not open, or `filter` matching
/// no case; each message says which.
pub fn run_device(
    choice: crate::ProviderChoice,
    device: Option<&str>,
    timeout: Duration,
    filter: Option<&str>,
) -> Result<DeviceRun, String> {
    let said =
        |what: &str, e: &crate::Error| format!("{what}: {}", rdmakit_vocab::errno::said_once(e));
    let provider =
        crate::default_provider(choice).map_err(|e| said("choosing a verbs provider", &e))?;
    let device = match device {
        Some(d) => d.to_string(),
        None => match provider
            .device_names()
            .map_err(|e| said("listing devices", &e))?
            .first()
        {
            Some(d) => d.clone(),
            None => return Err(format!("the {} provider lists no device", provider.kind())),
        },
    };
    let open = |what: &str| {
        crate::open_device(choice, &device)
            .map_err(|e| said(&format!("opening {device}{what}"), &e))
    };
    let (ca, cb) = (open("")?, open(" again")?);
    let kind = if ca.soft().is_some() {
        "soft"
    } else {
        "ibverbs"
    };
    let results = run(&ca, &cb, timeout, filter);
    if results.is_empty() {
        return Err(format!(
            "--filter {}: matches no case; the cases: {}",
            filter.unwrap_or_default(),
            CASES.join(", ")
        ));
    }
    Ok(DeviceRun {
        device,
        kind,
        results,
    })
}

/// Runs every case (or those whose name contains `filter`) between `a`
/// and `b` (the same context twice is fine), each with its own PD/CQ.
pub fn run(
    a: &Arc<Context>,
    b: &Arc<Context>,
    timeout: Duration,
    filter: Option<&str>,
) -> Vec<CaseResult> {
    type Case = fn(&Side, &Side, Duration) -> R;
    let cases: [Case; 10] = [
        query,
        rc,
        rc_ipv4_gid,
        ud,
        uc,
        srq,
        channel,
        inline,
        cq_overrun,
        errors,
    ];
    let mut out = Vec::new();
    for (&name, case) in CASES.iter().zip(cases) {
        if filter.is_some_and(|f| !name.contains(f)) {
            continue;
        }
        let start = Instant::now();
        let r = side(a).and_then(|sa| side(b).and_then(|sb| case(&sa, &sb, timeout)));
        let (passed, detail) = match r {
            Ok(d) => (true, d),
            Err(Fail(d)) => (false, d),
        };
        out.push(CaseResult {
            name,
            passed,
            detail,
            millis: u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_list_each_case_and_the_totals() {
        let r = [
            CaseResult {
                name: "query",
                passed: true,
                detail: "ok".into(),
                millis: 3,
            },
            CaseResult {
                name: "ud.send_via_ah",
                passed: false,
                detail: "no completion".into(),
                millis: 20,
            },
        ];
        assert_eq!(
            text("soft0", "soft", &r),
            "verbs suite on soft0 through the soft provider\nPASS query (3 ms): ok\n\
             FAIL ud.send_via_ah (20 ms): no completion\n1 passed, 1 failed\n"
        );
        let v: serde_json::Value = serde_json::from_str(&json("soft0", "soft", &r)).unwrap();
        assert_eq!(v["passed"], false);
        assert_eq!(v["cases"][1]["detail"], "no completion");
        assert_eq!(v["provider"], "soft");
    }
}
