//! QP1, the General Services Interface: management datagrams (the CM's REQ,
//! REP, ... on RoCE) arrive as UD SEND_ONLY packets to QP 1 with the GSI
//! Q_Key and leave the same way. The device owns QP1 as a NIC's driver does;
//! a management agent in the process (rdmakit's librdmacm) attaches to it,
//! takes the received MADs from a queue whose eventfd is readable while MADs
//! wait, and sends MADs to a peer's QP1. With no agent attached, MADs for
//! QP1 are dropped and counted like datagrams for an unknown QP.
//!
//! QP1 has no QPN slot: on a host device every context shares the one GID
//! (`::ffff:` and the host's address), so a MAD cannot be routed by its destination QPN the
//! way other packets are. MADs therefore go to a context's *endpoint*
//! ([`Device::endpoint`](super::Device::endpoint), `127.77.s.t`), which the agent learns from the
//! rdma_cm port table (who listens where) or from the MAD it answers
//! ([`GsiMad::via`]); the GID the MAD's GRH carries ([`GsiMad::src`]) is the
//! device's address, as for any packet between two contexts.

use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use rdmakit_wire::{bth, deth, OpCode};

use crate::errno::{Errno, Origin, Result};
use crate::lock;
use crate::net::{self, Net};

use super::err;
use super::info::AtomicCounters;

/// The GSI QP number.
pub const GSI_QPN: u32 = 1;
/// Largest management datagram (a MAD on a UD QP).
pub const MAD_LEN: usize = 256;

/// A management datagram received on QP1.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GsiMad {
    /// The sender's IPv4 address as its GRH names it (its GID is `::ffff:`
    /// that): on a loopback device, the device's address.
    pub src: Ipv4Addr,
    /// Where the sender's QP1 is reached: the address its packet came from
    /// (another context's endpoint on a loopback device; `src` otherwise).
    /// Answers go here.
    pub via: Ipv4Addr,
    /// The sender's QP (1 for the GSI).
    pub src_qp: u32,
    /// The P_Key of the packet.
    pub pkey: u16,
    /// The MAD.
    pub mad: Vec<u8>,
}

/// QP1: the agent attached to it, if any, and the PSNs of its sends.
#[derive(Debug)]
pub(super) struct Gsi {
    agent: Mutex<Option<Agent>>,
    psn: AtomicU32,
}

#[derive(Debug)]
struct Agent {
    queue: VecDeque<GsiMad>,
    efd: OwnedFd,
    flow: net::FlowCache,
    buf: Vec<u8>,
}

/// MADs kept for an agent that does not take them (each 256 bytes); older
/// ones beyond this are dropped, as a full receive queue would.
const QUEUE_MAX: usize = 1024;

impl Gsi {
    /// QP1 with no agent attached.
    pub(super) fn new() -> Gsi {
        Gsi {
            agent: Mutex::new(None),
            psn: AtomicU32::new(crate::dma::random_u32() & 0xff_ffff),
        }
    }

    /// A datagram for QP1 (UDP payload without the ICRC) from `src`;
    /// `net` names the sender's device address.
    pub(super) fn receive(
        &self,
        src: SocketAddrV4,
        pkt: &[u8],
        net: &Net,
        counters: &AtomicCounters,
    ) {
        let mut g = lock(&self.agent);
        let Some(agent) = g.as_mut() else {
            counters.rx_unknown_qp.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let parsed = bth::Packet::new_checked(pkt).and_then(|b| {
            let h = bth::Repr::parse(&b)?;
            let rest = &pkt[bth::HEADER_LEN..];
            let d = deth::Repr::parse(&deth::Packet::new_checked(rest)?)?;
            Ok((h, d, &rest[deth::HEADER_LEN..]))
        });
        let Ok((h, d, payload)) = parsed else {
            counters.rx_malformed.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let pad = usize::from(h.pad_count);
        if h.opcode != OpCode::UD_SEND_ONLY
            || d.qkey != deth::GSI_QKEY
            || payload.len() < pad
            || payload.len() - pad > MAD_LEN
        {
            counters.rx_malformed.fetch_add(1, Ordering::Relaxed);
            return;
        }
        counters.rx_packets.fetch_add(1, Ordering::Relaxed);
        if agent.queue.len() >= QUEUE_MAX {
            agent.queue.pop_front();
        }
        agent.queue.push_back(GsiMad {
            src: net.source_addr(*src.ip()),
            via: *src.ip(),
            src_qp: d.src_qp,
            pkey: h.pkey,
            mad: payload[..payload.len() - pad].to_vec(),
        });
        let _ = rustix::io::write(agent.efd.as_fd(), &1u64.to_ne_bytes());
    }

    /// Attaches the process's agent: see [`super::Device::gsi_attach`].
    pub(super) fn attach(&self) -> Result<RawFd> {
        let mut g = lock(&self.agent);
        if let Some(a) = g.as_ref() {
            return Ok(a.efd.as_raw_fd());
        }
        let efd = rustix::event::eventfd(
            0,
            rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK,
        )
        .map_err(|e| {
            err(
                "gsi_attach",
                Errno(e.raw_os_error()),
                Origin::Kernel,
                "cannot create the QP1 event fd",
            )
        })?;
        let fd = efd.as_raw_fd();
        *g = Some(Agent {
            queue: VecDeque::new(),
            efd,
            flow: net::FlowCache::default(),
            buf: vec![0; bth::HEADER_LEN + deth::HEADER_LEN + MAD_LEN + net::ICRC_LEN],
        });
        Ok(fd)
    }

    /// The next MAD received, if any (never blocks). When the queue
    /// becomes empty the eventfd is drained, so it polls readable exactly
    /// while MADs wait.
    pub(super) fn recv(&self) -> Option<GsiMad> {
        let mut g = lock(&self.agent);
        let a = g.as_mut()?;
        let m = a.queue.pop_front();
        if a.queue.is_empty() {
            let mut b = [0u8; 8];
            let _ = rustix::io::read(a.efd.as_fd(), &mut b);
        }
        m
    }

    /// Sends `mad` to QP1 at `dst` through `net`: see
    /// [`super::Device::gsi_send`].
    pub(super) fn send(
        &self,
        dst: Ipv4Addr,
        mad: &[u8],
        net: &Net,
        counters: &AtomicCounters,
    ) -> Result<()> {
        if mad.len() > MAD_LEN {
            return Err(err(
                "gsi_send",
                Errno::EINVAL,
                Origin::Library,
                format!("a MAD is at most {MAD_LEN} bytes, not {}", mad.len()),
            ));
        }
        let mut g = lock(&self.agent);
        let psn = self.psn.fetch_add(1, Ordering::Relaxed) & 0xff_ffff;
        let Some(a) = g.as_mut() else {
            return Err(err(
                "gsi_send",
                Errno::EINVAL,
                Origin::Library,
                "no management agent attached to QP1",
            ));
        };
        let pad = (4 - mad.len() % 4) % 4;
        let h = bth::Repr {
            opcode: OpCode::UD_SEND_ONLY,
            pad_count: pad as u8,
            pkey: bth::DEFAULT_PKEY,
            dest_qp: GSI_QPN,
            // rxe sets AckReq on the last packet of every message, UD too.
            ack_req: true,
            psn,
            ..bth::Repr::default()
        };
        let d = deth::Repr {
            qkey: deth::GSI_QKEY,
            src_qp: GSI_QPN,
        };
        let len = bth::HEADER_LEN + deth::HEADER_LEN + mad.len() + pad;
        a.buf.resize(len + net::ICRC_LEN, 0);
        h.emit(&mut bth::Packet::new_unchecked(&mut a.buf[..]));
        d.emit(&mut deth::Packet::new_unchecked(
            &mut a.buf[bth::HEADER_LEN..],
        ));
        let off = bth::HEADER_LEN + deth::HEADER_LEN;
        a.buf[off..off + mad.len()].copy_from_slice(mad);
        a.buf[off + mad.len()..len].fill(0);
        let sport = net::flow_port(GSI_QPN, GSI_QPN);
        let Agent { flow, buf, .. } = a;
        // MADs leave on DSCP 0, Not-ECT: management traffic is not
        // congestion-controlled (the CM's MADs are few and retried).
        net.send(
            dst,
            sport,
            0,
            flow,
            buf,
            len,
            false,
            &counters.tx_packets,
            &counters.tx_errors,
        );
        Ok(())
    }
}
