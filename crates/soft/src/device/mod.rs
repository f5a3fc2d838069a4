//! The soft device: one table per object (PD, MR, MW, AH, CQ, SRQ, QP,
//! and the completion channels), each a type in its own module owning its
//! state and its limits; posting through descriptor rings; the receive
//! path, the progress thread and the completion machinery.
//!
//! [`Device`] is the verbs' face: each verb is one narrow call into the
//! part that owns what it touches ([`shared::Shared`] composes the parts).
//! A type's fields are touched only in the file that defines it; other
//! modules go through its methods (docs/architecture.md, "The soft
//! device's object tables").

use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{BorrowedFd, RawFd};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use rdmakit_proto::{Access, AttrMask, QpAttr, QpState, RecvWr, Wc};

use crate::attr::{Av, DeviceAttr, Gid, Limits, PortAttr};
use crate::cma::SoftTransport;
use crate::errno::{Errno, Origin, Result, SoftError};
use crate::faults::Verb;
use crate::lock;
use crate::net;
use crate::registry::Registry;
use crate::ring::RingStats;
pub use rdmakit_types::device::{AsyncEvent, QpInit, SendRequest};

mod admit;
mod ah;
mod channel;
mod config;
mod cq;
mod events;
mod gsi;
mod info;
mod mr;
mod mw;
mod pd;
mod progress;
mod qp;
mod shared;
mod srq;

pub use config::{parse_cc, DeviceConfig, CC_VAR};
pub use gsi::{GsiMad, GSI_QPN};
pub use info::TRANSPORT_COUNTERS;
pub use info::{Counters, DataPath, PostFailure, ResourceCounts};
use shared::Shared;

/// The LID of the loopback device's port (see [`Device::lid_destination`]).
pub const LOOPBACK_LID: u16 = 1;

/// The software RDMA NIC. Dropping it stops the progress thread.
#[derive(Debug)]
pub struct Device {
    sh: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Device {
    /// Opens a device: binds its UDP socket and starts its progress thread.
    ///
    /// # Errors
    /// `EADDRINUSE` / `EADDRNOTAVAIL` when the address cannot be bound.
    pub fn open(cfg: DeviceConfig) -> Result<Device> {
        let sh = Arc::new(Shared::open(&cfg)?);
        let local = *sh.net().endpoint().ip();
        let t = Arc::clone(&sh);
        let thread = std::thread::Builder::new()
            .name(format!("rdmakit-soft-{local}"))
            .spawn(move || progress::run(&t))
            .map_err(|e| {
                sh.admission().remove_instance();
                err(
                    "ibv_open_device",
                    Errno::ENOMEM,
                    Origin::Library,
                    format!("cannot start the progress thread: {e}"),
                )
            })?;
        let mut live = lock(live_devices());
        live.retain(|w| w.strong_count() > 0);
        live.push(Arc::downgrade(&sh));
        drop(live);
        Ok(Device {
            sh,
            thread: Some(thread),
        })
    }

    // ------------------------------------------------------------------ device

    /// Device name.
    pub fn name(&self) -> &str {
        self.sh.name()
    }

    /// The device's IPv4 address: its GID is `::ffff:` that. The same for
    /// every context of the device ([`crate::net`]).
    pub fn addr(&self) -> Ipv4Addr {
        self.sh.net().addr()
    }

    /// The context's descriptor (`ibv_context.cmd_fd` of the drop-in
    /// libibverbs): the locked context file of the registry, which a forked
    /// child inherits and which keeps the context's objects alive while any
    /// process holds it (as a uverbs descriptor does). Close-on-exec. Valid
    /// while the device is open.
    pub fn context_fd(&self) -> RawFd {
        self.sh.context_fd()
    }

    /// This user's registry directory of the device
    /// (`<base>/rdmakit-soft.<uid>/<name>`, [`crate::registry`]), when it
    /// shares a registry: only this user can write in it.
    pub fn registry_dir(&self) -> Option<&std::path::Path> {
        self.sh.admission().registry().map(Registry::dir)
    }

    /// Whether this device keeps a dead process's objects (a leaky driver).
    pub fn leaky(&self) -> bool {
        self.sh.leaky()
    }

    /// Where this context's socket is bound: the device address's port
    /// 4791, or (loopback device) this context's private endpoint.
    pub fn endpoint(&self) -> SocketAddrV4 {
        self.sh.net().endpoint()
    }

    /// The UDP offloads this context's socket uses, probed when it was
    /// opened: segmentation (UDP_SEGMENT) on send, coalescing (UDP_GRO) on
    /// receive. Either is off when the kernel lacks it or the configuration
    /// turned it off ([`DeviceConfig::gso`] / [`DeviceConfig::gro`]).
    pub fn offloads(&self) -> net::Offloads {
        self.sh.net().offloads()
    }

    /// Device attributes (`ibv_query_device`).
    pub fn attr(&self) -> &DeviceAttr {
        self.sh.attr()
    }

    /// Port attributes (`ibv_query_port`); only port 1 exists.
    ///
    /// # Errors
    /// `EINVAL` for any other port.
    pub fn port_attr(&self, port: u8) -> Result<PortAttr> {
        if port != 1 {
            return Err(err(
                "ibv_query_port",
                Errno::EINVAL,
                Origin::Kernel,
                format!("port {port} does not exist (phys_port_cnt 1)"),
            ));
        }
        let mut p = self.sh.port().clone();
        // A link the fault plan took down: DOWN, physically Disabled (3).
        (p.state, p.phys_state) = match self.sh.link_down() {
            false => (crate::attr::PortState::Active, p.phys_state),
            true => (crate::attr::PortState::Down, 3),
        };
        Ok(p)
    }

    /// `ibv_query_gid`.
    ///
    /// # Errors
    /// `EINVAL` for a bad port or index.
    pub fn gid(&self, port: u8, index: u32) -> Result<Gid> {
        let p = self.port_attr(port)?;
        p.gids.get(index as usize).map(|g| g.gid).ok_or_else(|| {
            err(
                "ibv_query_gid",
                Errno::EINVAL,
                Origin::Kernel,
                "GID index out of range",
            )
        })
    }

    /// The destination of an address vector without a GRH (LID-addressed,
    /// as programs written for InfiniBand build it: qperf without `-cm`,
    /// the pingpong examples without `-g`). RoCE has no LIDs, so rxe and
    /// hardware refuse such an AV with EINVAL — for LID 0 too (rdma-core's
    /// `test_create_ah_roce`). The loopback device is one port for the
    /// whole host with LID [`LOOPBACK_LID`]: an AV for that LID, which a
    /// program learned from `ibv_query_port` and exchanged, is the device
    /// itself, so those programs run between processes.
    ///
    /// # Errors
    /// `EINVAL` for a device with a configured address (as rxe) or any
    /// other LID.
    pub fn lid_destination(&self, verb: &'static str, dlid: u16) -> Result<Gid> {
        let lid = self.sh.port().lid;
        if self.sh.net().qpn_base().is_none() {
            return Err(err(
                verb,
                Errno::EINVAL,
                Origin::Kernel,
                "RoCE address vectors need a GRH (is_global = 1 with the peer's GID); \
                 LIDs do not exist on Ethernet",
            ));
        }
        if dlid != lid {
            return Err(err(
                verb,
                Errno::EINVAL,
                Origin::Kernel,
                format!(
                    "no GRH and DLID {dlid}: RoCE needs the peer's GID (is_global = 1); the \
                     loopback device's port answers only to its own LID {lid}"
                ),
            ));
        }
        Ok(Gid::from_ipv4(self.sh.net().addr()))
    }

    /// `ibv_query_pkey`.
    ///
    /// # Errors
    /// `EINVAL` for a bad port or index.
    pub fn pkey(&self, port: u8, index: u16) -> Result<u16> {
        let p = self.port_attr(port)?;
        p.pkeys.get(usize::from(index)).copied().ok_or_else(|| {
            err(
                "ibv_query_pkey",
                Errno::EINVAL,
                Origin::Kernel,
                "P_Key index out of range",
            )
        })
    }

    /// The limits this device enforces.
    pub fn limits(&self) -> &Limits {
        self.sh.limits()
    }

    /// Device counters.
    pub fn counters(&self) -> Counters {
        self.sh.counters_now()
    }

    /// Live objects per type.
    pub fn resource_counts(&self) -> ResourceCounts {
        self.sh.resource_counts()
    }

    /// The error of an injected failure of this call of `verb` (named
    /// `name`), when the fault plan has one for it.
    fn injected(&self, name: &'static str, verb: Verb) -> Result<()> {
        match self.sh.injected_failure(verb) {
            Some(e) => Err(err(
                name,
                e,
                Origin::Kernel,
                "injected fault (RDMAKIT_SOFT_FAULTS)",
            )),
            None => Ok(()),
        }
    }

    /// How this device moves packets and RC data to a peer on this host:
    /// `Udp` for a device configured `Auto` that could not listen for rings
    /// (its user's directory refused or not writable), so `devinfo -v` says
    /// what is really in use.
    pub fn soft_transport(&self) -> SoftTransport {
        self.sh.transport()
    }

    /// Why the last same-host ring this context tried to hand over, or was
    /// offered, did not come about (None: none failed, or no rings).
    pub fn ring_miss(&self) -> Option<String> {
        self.sh.net().rings().and_then(|r| r.last_miss())
    }

    /// Wakes every thread blocked in [`Device::get_cq_event`] or
    /// [`Device::get_async_event`] of this device: they return (an error,
    /// or no event) instead of waiting for events that can no longer come.
    /// Called when the device is closing, before the memory goes.
    pub fn wake_waiters(&self) {
        self.sh.events().close();
        self.sh.channels().close_all();
    }

    // ------------------------------------------------------------------ PD

    /// `ibv_alloc_pd`.
    ///
    /// # Errors
    /// `EINVAL` when `max_pd` PDs exist (rxe's pool limit).
    pub fn alloc_pd(&self) -> Result<u32> {
        self.sh.pds().alloc(self.sh.admission())
    }

    /// `ibv_dealloc_pd`.
    ///
    /// # Errors
    /// `EINVAL` for an unknown PD, `EBUSY` while MRs, QPs, SRQs or AHs use it.
    pub fn dealloc_pd(&self, pd: u32) -> Result<()> {
        self.sh.pds().dealloc(self.sh.admission(), pd)
    }

    // ------------------------------------------------------------------ MR

    /// `ibv_reg_mr`: registers `[ptr, ptr + len)`; returns the key (lkey ==
    /// rkey). The MR's virtual address is `ptr`.
    ///
    /// # Safety
    /// The registration contract of [`crate::dma`]: the buffer stays valid
    /// for reads and writes until [`Device::dereg_mr`] returned, and the
    /// application holds no Rust reference to bytes the NIC may write.
    ///
    /// # Errors
    /// `EINVAL` for an unknown PD, a zero or oversized length, remote write
    /// or atomic rights without local write (as ib_core checks), or when
    /// `max_mr` MRs exist.
    pub unsafe fn reg_mr(&self, pd: u32, ptr: *mut u8, len: usize, access: Access) -> Result<u32> {
        // SAFETY: forwarded contract.
        unsafe { self.reg_mr_iova(pd, ptr, len, ptr as u64, access) }
    }

    /// `ibv_reg_mr_iova`: like [`Device::reg_mr`], but the MR's virtual
    /// address (what work requests and remote peers name) is `iova`, not
    /// `ptr` (0 for a zero-based MR).
    ///
    /// # Safety
    /// As [`Device::reg_mr`].
    ///
    /// # Errors
    /// As [`Device::reg_mr`], and `EINVAL` when `iova + len` overflows.
    pub unsafe fn reg_mr_iova(
        &self,
        pd: u32,
        ptr: *mut u8,
        len: usize,
        iova: u64,
        access: Access,
    ) -> Result<u32> {
        self.injected("ibv_reg_mr", Verb::RegMr)?;
        let mut pds = self.sh.pds().lock();
        // SAFETY: forwarded contract.
        unsafe {
            self.sh
                .mrs()
                .register(self.sh.admission(), &mut pds, pd, (ptr, len, iova), access)
        }
    }

    /// `ibv_dereg_mr`. After it returns the NIC never touches the buffer.
    ///
    /// # Errors
    /// `EINVAL` for an unknown key, or while memory windows are bound onto
    /// the MR (rxe's answer).
    pub fn dereg_mr(&self, key: u32) -> Result<()> {
        let mut pds = self.sh.pds().lock();
        self.sh.mrs().deregister(self.sh.admission(), &mut pds, key)
    }

    /// `ibv_rereg_mr`: changes an MR's PD, access rights and/or the memory
    /// it covers (`translation`: new pointer, length and IOVA), keeping its
    /// keys. Work requests that named the old settings complete against the
    /// new ones, as after a real re-registration.
    ///
    /// # Safety
    /// With `translation`, the new buffer is under [`Device::reg_mr`]'s
    /// contract from now on; the old one is released when this returns.
    ///
    /// # Errors
    /// `EINVAL` for an unknown MR or PD, invalid access flags or an invalid
    /// new range.
    pub unsafe fn rereg_mr(
        &self,
        key: u32,
        pd: Option<u32>,
        access: Option<Access>,
        translation: Option<(*mut u8, usize, u64)>,
    ) -> Result<()> {
        let mut pds = self.sh.pds().lock();
        // SAFETY: forwarded contract.
        unsafe { self.sh.mrs().rereg(&mut pds, key, pd, access, translation) }
    }

    // ------------------------------------------------------------------ MW

    /// `ibv_alloc_mw`: an unbound memory window of `pd`, type 1 (bound with
    /// `ibv_bind_mw`) or type 2 (bound by a `BindMw` work request); returns
    /// its key.
    ///
    /// # Errors
    /// `EINVAL` for an unknown PD or when `max_mw` windows exist.
    pub fn alloc_mw(&self, pd: u32, type2: bool) -> Result<u32> {
        let mut pds = self.sh.pds().lock();
        self.sh
            .mws()
            .alloc(self.sh.admission(), &mut pds, self.sh.mrs(), pd, type2)
    }

    /// `ibv_dealloc_mw`: the window and its keys are gone (a bound window's
    /// access ends with it).
    ///
    /// # Errors
    /// `EINVAL` for an unknown window.
    pub fn dealloc_mw(&self, key: u32) -> Result<()> {
        let mut pds = self.sh.pds().lock();
        self.sh.mws().dealloc(&mut pds, self.sh.mrs(), key)
    }

    // ------------------------------------------------------------------ AH

    /// `ibv_create_ah` for a RoCEv2 destination GID (IPv4-mapped) and a
    /// traffic class: each UD send through the AH carries its DSCP (its
    /// ECN bits are the NIC's and ignored, as on mlx5).
    ///
    /// # Errors
    /// `EINVAL` for an unknown PD, a GID that is not IPv4-mapped, or when
    /// `max_ah` AHs exist.
    pub fn create_ah(&self, pd: u32, av: Av) -> Result<u32> {
        let mut pds = self.sh.pds().lock();
        self.sh.ahs().create(self.sh.admission(), &mut pds, pd, av)
    }

    /// `ibv_destroy_ah`.
    ///
    /// # Errors
    /// `EINVAL` for an unknown AH.
    pub fn destroy_ah(&self, ah: u32) -> Result<()> {
        let mut pds = self.sh.pds().lock();
        self.sh.ahs().destroy(self.sh.admission(), &mut pds, ah)
    }

    // ------------------------------------------------------------------ completion channel

    /// `ibv_create_comp_channel`: returns its handle.
    ///
    /// # Errors
    /// `EMFILE`-like failures of eventfd as `ENOMEM`.
    pub fn create_comp_channel(&self) -> Result<u32> {
        self.sh.channels().create()
    }

    /// `ibv_destroy_comp_channel`.
    ///
    /// # Errors
    /// `EINVAL` for an unknown channel, `EBUSY` while a CQ uses it.
    pub fn destroy_comp_channel(&self, ch: u32) -> Result<()> {
        if self.sh.cqs().uses_channel(ch) {
            return Err(err(
                "ibv_destroy_comp_channel",
                Errno::EBUSY,
                Origin::Kernel,
                "a CQ uses the channel",
            ));
        }
        self.sh.channels().destroy(ch)
    }

    /// The channel's file descriptor: readable while an event is pending
    /// (for poll/epoll loops). Valid until the channel is destroyed.
    pub fn comp_channel_fd(&self, ch: u32) -> Option<RawFd> {
        self.sh.channels().fd(ch)
    }

    /// `ibv_get_cq_event`: waits up to `timeout` (None = forever) for a CQ
    /// notification on channel `ch`; returns the CQ handle.
    ///
    /// # Errors
    /// `EINVAL` for an unknown channel; `ETIMEDOUT` (Origin::Library) when
    /// nothing arrived in time; `EIO` when the channel is destroyed or the
    /// device closed while waiting (the event can no longer come); `EINTR`
    /// when a signal whose handler lacks `SA_RESTART` arrives while it
    /// waits forever, as the kernel's `read()` of the channel (qperf ends
    /// its ping-pong on SIGALRM that way).
    pub fn get_cq_event(&self, ch: u32, timeout: Option<Duration>) -> Result<u32> {
        let events = self.sh.events();
        self.sh.channels().wait(ch, timeout, || events.closing())
    }

    // ------------------------------------------------------------------ CQ

    /// `ibv_create_cq` with room for `cqe` completions.
    ///
    /// # Errors
    /// `EINVAL` for `cqe` 0 or above `max_cqe`, an unknown channel, or when
    /// `max_cq` CQs exist.
    pub fn create_cq(&self, cqe: u32, channel: Option<u32>) -> Result<u32> {
        self.injected("ibv_create_cq", Verb::CreateCq)?;
        self.sh
            .cqs()
            .create(self.sh.admission(), self.sh.channels(), cqe, channel)
    }

    /// `ibv_destroy_cq`.
    ///
    /// # Errors
    /// `EINVAL` for an unknown CQ, `EBUSY` while a QP uses it.
    pub fn destroy_cq(&self, cq: u32) -> Result<()> {
        self.sh.cqs().destroy(self.sh.admission(), cq)
    }

    /// `ibv_resize_cq`: the CQ holds `cqe` entries from now on; returns the
    /// new size (as requested, as rxe).
    ///
    /// # Errors
    /// `EINVAL` for an unknown CQ, `cqe` 0 or above `max_cqe`, or fewer
    /// entries than the completions waiting in it (rxe's
    /// `rxe_cq_chk_attr`).
    pub fn resize_cq(&self, cq: u32, cqe: u32) -> Result<u32> {
        self.sh.cqs().resize(cq, cqe)
    }

    /// `ibv_poll_cq`: moves up to `max` completions into `out`. In
    /// busy-poll mode an empty CQ first takes what waits on the network in
    /// the caller's thread.
    ///
    /// # Errors
    /// `EINVAL` for an unknown CQ.
    pub fn poll_cq(&self, cq: u32, out: &mut Vec<Wc>, max: usize) -> Result<usize> {
        self.sh
            .cqs()
            .poll(cq, out, max, |c| self.sh.busy_poll_for(c))
    }

    /// `ibv_req_notify_cq`: the next completion added to the CQ signals its
    /// channel once. (`solicited_only` is treated as "any completion": the
    /// engine does not report the solicited bit per completion.)
    ///
    /// # Errors
    /// `EINVAL` for an unknown CQ or a CQ without channel.
    pub fn req_notify_cq(&self, cq: u32, _solicited_only: bool) -> Result<()> {
        // The caller may block on the channel next: the progress thread
        // stops napping on the strength of earlier busy polls and receives
        // for it (a nap would add up to 8 ms to each completion).
        self.sh.cqs().req_notify(cq, || self.sh.progress().unpark())
    }

    /// Whether the CQ overran (a completion was lost).
    pub fn cq_overrun(&self, cq: u32) -> bool {
        self.sh.cqs().overrun(cq)
    }

    // ------------------------------------------------------------------ async events

    /// The file descriptor of the async event queue (`ibv_context.async_fd`):
    /// readable while an event is pending, for poll/epoll loops (UCX waits
    /// on it). Valid while the device is open.
    pub fn async_fd(&self) -> RawFd {
        self.sh.events().fd()
    }

    /// `ibv_get_async_event`: waits up to `timeout` for the next event;
    /// None at once when the device is closing ([`Device::wake_waiters`]).
    pub fn get_async_event(&self, timeout: Duration) -> Option<AsyncEvent> {
        self.sh.events().next(timeout)
    }

    // ------------------------------------------------------------------ SRQ

    /// `ibv_create_srq`.
    ///
    /// # Errors
    /// `EINVAL` for an unknown PD, `max_wr` 0 or above `max_srq_wr`,
    /// `max_sge` above `max_srq_sge`, or when `max_srq` SRQs exist.
    pub fn create_srq(&self, pd: u32, max_wr: u32, max_sge: u32, srq_limit: u32) -> Result<u32> {
        let mut pds = self.sh.pds().lock();
        self.sh.srqs().create(
            self.sh.admission(),
            &mut pds,
            pd,
            max_wr,
            max_sge,
            srq_limit,
        )
    }

    /// `ibv_modify_srq` with `IBV_SRQ_LIMIT`: arms the limit event.
    ///
    /// # Errors
    /// `EINVAL` for an unknown SRQ or a limit above its depth.
    pub fn arm_srq(&self, srq: u32, limit: u32) -> Result<()> {
        self.sh.srqs().arm(srq, limit)
    }

    /// `ibv_destroy_srq`.
    ///
    /// # Errors
    /// `EINVAL` for an unknown SRQ, `EBUSY` while QPs use it.
    pub fn destroy_srq(&self, srq: u32) -> Result<()> {
        let pd = self.sh.srqs().destroy(self.sh.admission(), srq)?;
        self.sh.pds().release(pd);
        Ok(())
    }

    /// `ibv_post_srq_recv`.
    ///
    /// # Errors
    /// [`PostFailure`]: `EINVAL` (unknown SRQ, too many SGEs), `ENOMEM`
    /// (SRQ full or injected mapping fault).
    pub fn post_srq_recv(&self, srq: u32, wrs: &[RecvWr]) -> core::result::Result<(), PostFailure> {
        let s = self.sh.srqs().get(srq).ok_or_else(|| PostFailure {
            index: 0,
            error: err(
                "ibv_post_srq_recv",
                Errno::EINVAL,
                Origin::Library,
                "no such SRQ",
            ),
        })?;
        let inject = || self.sh.injected_failure(Verb::Post).is_some();
        s.post(wrs, inject, self.sh.counters())
    }

    /// Descriptor-ring counters of an SRQ.
    pub fn srq_ring_stats(&self, srq: u32) -> Option<RingStats> {
        self.sh.srqs().ring_stats(srq)
    }

    // ------------------------------------------------------------------ QP

    /// `ibv_create_qp`: returns the QPN. The QP starts in RESET.
    ///
    /// # Errors
    /// `EINVAL` for unknown PD/CQ/SRQ, capabilities above the device limits
    /// (`max_qp_wr`, `max_sge`, `max_inline`), or when `max_qp` QPs exist
    /// (rxe's pool limit). Zero depths are allowed: a receive-only or
    /// send-only QP.
    pub fn create_qp(&self, init: &QpInit) -> Result<u32> {
        self.injected("ibv_create_qp", Verb::CreateQp)?;
        self.sh.qps().create(&self.sh, init)
    }

    /// `ibv_destroy_qp`: outstanding work requests are discarded.
    ///
    /// # Errors
    /// `EINVAL` for an unknown QP.
    pub fn destroy_qp(&self, qpn: u32) -> Result<()> {
        self.sh.qps().destroy(&self.sh, qpn)
    }

    /// `ibv_modify_qp`, validated like `ib_modify_qp_is_ok`. `av` is the
    /// primary path when `mask` has `AV` (RC/UC/XRC): its destination GID,
    /// and its traffic class, whose DSCP the QP's packets carry from then
    /// on (its ECN bits are the NIC's and ignored, as on mlx5; RESET
    /// forgets it).
    ///
    /// # Errors
    /// `EINVAL` for an unknown QP, a transition or mask the table refuses,
    /// an out-of-range value, a port other than 1, or an AV whose GID is not
    /// IPv4-mapped.
    pub fn modify_qp(&self, qpn: u32, attr: &QpAttr, mask: AttrMask, av: Option<Av>) -> Result<()> {
        self.sh.qps().modify(&self.sh, qpn, attr, mask, av)
    }

    /// `ibv_query_qp`: current attributes and init attributes.
    ///
    /// # Errors
    /// `EINVAL` for an unknown QP.
    pub fn query_qp(&self, qpn: u32) -> Result<(QpAttr, QpInit)> {
        let q = self
            .sh
            .qps()
            .get(qpn)
            .ok_or_else(|| err("ibv_query_qp", Errno::EINVAL, Origin::Kernel, "no such QP"))?;
        Ok(q.query())
    }

    /// Engine counters of a QP.
    pub fn qp_stats(&self, qpn: u32) -> Option<rdmakit_proto::Stats> {
        self.sh.qps().get(qpn).map(|q| q.stats())
    }

    /// Whether QP `qpn`'s packets to its (last) destination go through a
    /// same-host ring rather than the socket; None for an unknown QP.
    pub fn qp_on_ring(&self, qpn: u32) -> Option<bool> {
        self.sh.qps().get(qpn).map(|q| q.on_ring())
    }

    /// The data path QP `qpn` used: same-host once it sent or executed a
    /// same-host request and was never declined; `None` for an unknown QP.
    pub fn qp_data_path(&self, qpn: u32) -> Option<DataPath> {
        self.qp_stats(qpn).map(|s| DataPath::of(&s))
    }

    /// Descriptor-ring counters of a QP's send and receive queues.
    pub fn qp_ring_stats(&self, qpn: u32) -> Option<(RingStats, RingStats)> {
        self.sh.qps().get(qpn).map(|q| q.ring_stats())
    }

    /// `ibv_post_send` of a list.
    ///
    /// Per request, under the send queue's lock: take a descriptor, map
    /// every SGE (lkey, bounds, rights; inline data is copied instead), post
    /// the descriptor; a failed mapping returns the descriptor first.
    /// A protection failure of the mapping (bad lkey, range, rights) is not
    /// an errno: like a real NIC the request completes with `LOC_PROT_ERR`
    /// (and an RC QP goes to ERR).
    ///
    /// # Safety
    /// For `inline` requests, every SGE's `[addr, addr + length)` must be
    /// readable memory for the duration of this call (the lkey is ignored).
    ///
    /// # Errors
    /// [`PostFailure`] naming the first request not posted: `EINVAL` (state
    /// below RTS, opcode invalid for the QP type, too many SGEs, inline too
    /// large, atomic not 8 bytes / not 8-byte aligned, UD without AH or
    /// unknown AH), `ENOMEM` (send queue full, or an injected DMA-mapping
    /// fault).
    pub unsafe fn post_send(
        &self,
        qpn: u32,
        reqs: &[SendRequest],
    ) -> core::result::Result<(), PostFailure> {
        let q = self.posting_qp("ibv_post_send", qpn)?;
        // SAFETY: forwarded from this function's contract.
        unsafe { q.post_send(&self.sh, reqs) }
    }

    /// `ibv_post_recv` of a list.
    ///
    /// # Errors
    /// [`PostFailure`]: `EINVAL` (QP in RESET, QP uses an SRQ, too many
    /// SGEs), `ENOMEM` (receive queue full or an injected mapping fault).
    pub fn post_recv(&self, qpn: u32, wrs: &[RecvWr]) -> core::result::Result<(), PostFailure> {
        self.posting_qp("ibv_post_recv", qpn)?
            .post_recv(&self.sh, wrs)
    }

    /// The QP a post names; `EINVAL` for its first request otherwise.
    fn posting_qp(
        &self,
        verb: &'static str,
        qpn: u32,
    ) -> core::result::Result<Arc<qp::Qp>, PostFailure> {
        self.sh.qps().get(qpn).ok_or_else(|| PostFailure {
            index: 0,
            error: err(verb, Errno::EINVAL, Origin::Library, "no such QP"),
        })
    }

    // ------------------------------------------------------------------ QP1

    /// Attaches this process's management agent to QP1 and returns the
    /// eventfd that is readable while received MADs wait
    /// ([`Device::gsi_recv`] takes them). Attaching again returns the same fd.
    ///
    /// # Errors
    /// `EMFILE`/`ENFILE` when no eventfd can be created.
    pub fn gsi_attach(&self) -> Result<RawFd> {
        self.sh.gsi().attach()
    }

    /// The next MAD received on QP1, if any (never blocks). When the queue
    /// becomes empty the eventfd is drained, so it polls readable exactly
    /// while MADs wait.
    pub fn gsi_recv(&self) -> Option<GsiMad> {
        // MADs may be waiting on the socket with nobody else polling it.
        self.sh.poll_network(64);
        self.sh.gsi().recv()
    }

    /// Sends `mad` from QP1 to QP1 of `dst` (a UD SEND_ONLY with the GSI
    /// Q_Key, as Linux sends CM MADs on RoCEv2). `dst` is where that QP1 is
    /// reached: another host's address, or a context's endpoint on this
    /// loopback device ([`GsiMad::via`], [`Device::endpoint`]); the device's
    /// shared address itself names no context's QP1.
    ///
    /// # Errors
    /// `EINVAL` without an attached agent or for a MAD over 256 bytes.
    pub fn gsi_send(&self, dst: Ipv4Addr, mad: &[u8]) -> Result<()> {
        // A link the fault plan took down loses it, as it would on a wire
        // (received MADs are judged with every other packet).
        if self.sh.lost_to_link() {
            return Ok(());
        }
        self.sh
            .gsi()
            .send(dst, mad, self.sh.net(), self.sh.counters())
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        self.wake_waiters();
        self.sh.flush_held_acks();
        self.sh.send_held_back();
        self.sh.progress().stop();
        self.sh.net().kick();
        if let Some(t) = self.thread.take() {
            // A panicked progress thread has nothing left to clean up.
            let _ = t.join();
        }
        // The last counters, then objects the application never destroyed
        // go with the device and its counters are folded into the user's
        // (without waiting for the lock); errors are swallowed (no panics
        // in Drop).
        self.sh.publish_counters(None);
        self.sh.admission().remove_instance();
        if let Some(r) = self.sh.admission().registry() {
            r.fold_now();
        }
    }
}

/// The devices open in this process (for [`flush_held_acks`]).
fn live_devices() -> &'static Mutex<Vec<std::sync::Weak<Shared>>> {
    static LIVE: Mutex<Vec<std::sync::Weak<Shared>>> = Mutex::new(Vec::new());
    &LIVE
}

/// Sends every plain ACK a busy-polling application thread held back (and
/// every packet the fault plan holds back on its way out), on every device
/// open in this process. For a process about to exit without
/// destroying its QPs (an `atexit` hook): the peer's last send then still
/// completes, as it would with a real NIC's ACK.
pub fn flush_held_acks() {
    let devs: Vec<Arc<Shared>> = lock(live_devices())
        .iter()
        .filter_map(std::sync::Weak::upgrade)
        .collect();
    for d in devs {
        d.flush_held_acks();
        d.send_held_back();
    }
}

/// CLOCK_MONOTONIC in ns: one vDSO call, without `Instant`'s
/// `Timespec` subtraction and `Duration` conversion per read.
fn monotonic_ns() -> u64 {
    // SAFETY: timespec is plain integers; all-zero is valid.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: `ts` is valid for writing; CLOCK_MONOTONIC always exists on
    // Linux, so the call cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

fn err(verb: &'static str, errno: Errno, origin: Origin, detail: impl Into<String>) -> SoftError {
    SoftError::new(verb, errno, origin, detail)
}

fn state_from_u8(v: u8) -> QpState {
    QpState::ALL
        .get(usize::from(v))
        .copied()
        .unwrap_or(QpState::Err)
}

/// Empties an eventfd that says an event is pending.
fn drain_eventfd(fd: BorrowedFd<'_>) {
    // The application may have made the fd blocking (libibverbs' channel fd
    // is blocking by default, and the drop-in libibverbs clears O_NONBLOCK):
    // read only when a poll says the counter is non-zero.
    let mut p = [rustix::event::PollFd::new(
        &fd,
        rustix::event::PollFlags::IN,
    )];
    if matches!(rustix::event::poll(&mut p, 0), Ok(n) if n > 0) {
        let mut b = [0u8; 8];
        let _ = rustix::io::read(fd, &mut b);
    }
}
