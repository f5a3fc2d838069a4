//! The soft device: resource tables, posting through descriptor rings, the
//! progress engine and the completion machinery.

use std::collections::{HashMap, VecDeque};

use rustc_hash::FxHashMap;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

use rdmakit_proto::{
    Access, AddressHandle, AttrMask, Clock, Extent, Instant, Key, LazyClock, MemError, MemResult,
    Memory, Pd, QpAttr, QpConfig, QpState, QpType, RecvWr, SendWr, Wc, WcStatus,
};

use crate::attr::{DeviceAttr, Gid, Limits, PortAttr};
use crate::cma::SoftTransport;
use crate::dma::MrTable;
use crate::errno::{Errno, Origin, Result, SoftError};
use crate::net::{self, Net};
use crate::registry::{Kind, Registry};
use crate::ring::{FaultInjector, MapFailure, Ring, RingStats};
use crate::{lock, read, write};
pub use rdmakit_types::device::{AsyncEvent, QpInit, SendRequest};

mod cma;
mod config;
mod cq;
mod datapath;
mod gsi;
mod mem;
mod qp;
mod srq;
pub use cma::DataPath;
pub use config::{DeviceConfig, Exhaustion};
use datapath::progress_loop;
pub use gsi::{GsiMad, GSI_QPN};

/// The LID of the loopback device's port (see [`Device::lid_destination`]).
pub const LOOPBACK_LID: u16 = 1;

/// A failed post: which request and why (`bad_wr`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("work request {index}: {error}")]
pub struct PostFailure {
    /// Index of the first request not posted.
    pub index: usize,
    /// Why.
    pub error: SoftError,
}

/// Device-wide counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Packets sent.
    pub tx_packets: u64,
    /// Packets received and handed to a QP.
    pub rx_packets: u64,
    /// Datagrams dropped for a bad ICRC.
    pub rx_icrc_errors: u64,
    /// Datagrams for a QPN that does not exist.
    pub rx_unknown_qp: u64,
    /// Datagrams too short for a BTH + ICRC.
    pub rx_malformed: u64,
    /// Socket send failures.
    pub tx_errors: u64,
    /// Completions lost to CQ overrun.
    pub cq_overruns: u64,
    /// Descriptor mappings that failed as a device fault (injected): the
    /// soft NIC's "DMA mapping error" lines in dmesg.
    pub dma_map_errors: u64,
    /// Packets written into same-host rings (`RDMAKIT_SOFT_TRANSPORT=auto`,
    /// the default; counted in `tx_packets` too).
    pub ring_tx_packets: u64,
    /// Packets taken from same-host rings (counted in `rx_packets` too
    /// when a QP took them).
    pub ring_rx_packets: u64,
    /// Ring pushes that found the receiving context's progress thread
    /// asleep: each owed it a wake-up datagram (one per receiver and
    /// transmit pass).
    pub ring_wakeups: u64,
    /// Rings other contexts offered this one and it refused (another
    /// user's process, a bad hello, a pidfd naming another process, a ring
    /// that is not one).
    pub ring_refused: u64,
    /// Same-host requests dropped: they came in a UDP datagram (they are
    /// taken only from same-host rings) or on a ring that is not the QP's
    /// peer's.
    pub rx_same_host_refused: u64,
    /// Packets taken from the UDP socket and handed to a QP (counted in
    /// `rx_packets` too): with same-host rings, what did not come by them.
    pub rx_socket_packets: u64,
}

/// Numbers of live objects.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResourceCounts {
    /// PDs.
    pub pd: usize,
    /// MRs.
    pub mr: usize,
    /// CQs.
    pub cq: usize,
    /// QPs.
    pub qp: usize,
    /// SRQs.
    pub srq: usize,
    /// AHs.
    pub ah: usize,
}

/// The software RDMA NIC. Dropping it stops the progress thread.
#[derive(Debug)]
pub struct Device {
    sh: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Debug, Default)]
struct AtomicCounters {
    tx_packets: AtomicU64,
    rx_packets: AtomicU64,
    rx_icrc_errors: AtomicU64,
    rx_unknown_qp: AtomicU64,
    rx_malformed: AtomicU64,
    tx_errors: AtomicU64,
    cq_overruns: AtomicU64,
    dma_map_errors: AtomicU64,
    rx_same_host_refused: AtomicU64,
    rx_socket_packets: AtomicU64,
}

/// The receive buffer every datagram and ring packet is taken into (one
/// thread at a time), and what busy polls know about where traffic comes
/// from.
#[derive(Debug)]
pub(crate) struct PollBuf {
    buf: Vec<u8>,
    /// The last packet came from a same-host ring, not the socket: a busy
    /// poll then reads the socket only every [`SOCKET_EVERY`]th time it
    /// finds the rings empty, instead of a `recvfrom` per spin (the one
    /// system call left on a ring's busy poll).
    rings_last: bool,
    /// Ring-empty busy polls until the socket is read again.
    socket_in: u32,
}

/// How often a busy poll reads the socket while the rings carry the
/// traffic: a datagram from a peer that takes no rings waits at most this
/// many spins, and its arrival makes every poll read the socket again.
const SOCKET_EVERY: u32 = 16;

impl PollBuf {
    /// Whether a busy poll that found the rings empty leaves the socket
    /// alone this time: while a ring carried the last packet, all but every
    /// [`SOCKET_EVERY`]th time.
    fn spare_socket(&mut self) -> bool {
        if !self.rings_last {
            return false;
        }
        if self.socket_in > 0 {
            self.socket_in -= 1;
            return true;
        }
        self.socket_in = SOCKET_EVERY - 1;
        false
    }
}

impl Default for PollBuf {
    fn default() -> PollBuf {
        PollBuf {
            buf: vec![0; 65536],
            rings_last: false,
            socket_in: 0,
        }
    }
}

#[derive(Debug)]
pub(crate) struct Shared {
    name: String,
    registry: Option<Registry>,
    exhaustion: Errno,
    attr: DeviceAttr,
    port: PortAttr,
    limits: Limits,
    /// How packets and RC data reach a peer on this host, resolved once
    /// at open ([`Net::transport`]) and handed to the MR table.
    transport: SoftTransport,
    /// CLOCK_MONOTONIC at creation, ns: the engine's time is read from the
    /// clock directly (see [`monotonic_ns`]), not through `Instant`.
    epoch_ns: u64,
    pub(crate) net: Net,
    mem: RwLock<MrTable>,
    objs: Mutex<Objects>,
    // Looked up per datagram and per post: FxHash, not SipHash (the keys
    // are the device's own numbers, nothing to defend against).
    qps: RwLock<FxHashMap<u32, Arc<QpShared>>>,
    cqs: RwLock<FxHashMap<u32, Arc<CqShared>>>,
    srqs: RwLock<HashMap<u32, Arc<SrqShared>>>,
    channels: Mutex<HashMap<u32, Arc<Channel>>>,
    paths: Mutex<Vec<Ipv4Addr>>,
    faults: FaultInjector,
    events: Mutex<VecDeque<AsyncEvent>>,
    events_cv: Condvar,
    /// Readable while an async event is pending (`ibv_context.async_fd`).
    events_efd: OwnedFd,
    /// The context descriptor when no registry holds one.
    ctx_fd_anon: OwnedFd,
    leaky: bool,
    shutdown: AtomicBool,
    /// The device is being closed: blocked `get_cq_event` /
    /// `get_async_event` callers return.
    closing: AtomicBool,
    counters: AtomicCounters,
    wake_at: AtomicU64,
    /// When the progress thread's nap ends (0: not napping); an earlier
    /// engine deadline unparks it.
    nap_until: AtomicU64,
    /// A deadline earlier than the progress thread's plan was set.
    rescan: AtomicBool,
    busy_poll: bool,
    /// Bumped by every busy poll of an empty CQ (the progress thread
    /// watches it move; see `progress_loop`).
    busy_polls: AtomicU64,
    /// CQs armed (`ibv_req_notify_cq`) and not yet notified: an application
    /// may be blocked on their channel, so the progress thread receives for
    /// it instead of napping on the strength of earlier busy polls (see
    /// `progress_loop`).
    armed_cqs: AtomicUsize,
    /// The progress thread, unparked from its nap when a CQ is armed.
    progress: std::sync::OnceLock<std::thread::Thread>,
    poll_buf: Mutex<PollBuf>,
    /// QPs whose plain ACKs an application thread held back (see
    /// [`Shared::drive_with`]); `acks_held` says the list may be non-empty.
    held_acks: Mutex<Vec<u32>>,
    acks_held: AtomicBool,
    /// QP1 and the management agent attached to it.
    gsi: Mutex<gsi::Gsi>,
}

#[derive(Debug, Default)]
struct Objects {
    pds: HashMap<u32, usize>,
    next_pd: u32,
    mrs: HashMap<u32, u32>,
    /// Memory window key → PD.
    mws: HashMap<u32, u32>,
    ahs: HashMap<u32, (u32, u32)>,
    next_ah: u32,
    next_cq: u32,
    next_srq: u32,
    next_qpn: u32,
    next_channel: u32,
}

#[derive(Debug)]
struct Channel {
    id: u32,
    queue: Mutex<VecDeque<u32>>,
    cv: Condvar,
    efd: OwnedFd,
    /// What a blocked `ibv_get_cq_event` sleeps in, as the kernel's
    /// `read()` of the channel: a blocking semaphore eventfd, one count
    /// per event (many when the channel goes), so a signal interrupts the
    /// wait (EINTR) or restarts it (`SA_RESTART`) exactly as it would
    /// interrupt the kernel's.
    bell: OwnedFd,
    /// Destroyed (or its device closed): a waiter returns instead of
    /// waiting for an event that can no longer come.
    closed: AtomicBool,
}

#[derive(Debug)]
struct CqShared {
    id: u32,
    /// Entries it holds (`ibv_resize_cq` changes it).
    cap: AtomicUsize,
    queue: Mutex<VecDeque<Wc>>,
    /// `queue.len()`, stored under its lock after every change: an empty
    /// busy poll reads it instead of taking the lock.
    ready: AtomicUsize,
    overrun: AtomicBool,
    armed: AtomicBool,
    channel: Option<Arc<Channel>>,
    users: AtomicUsize,
}

#[derive(Debug)]
struct SrqShared {
    id: u32,
    pd: u32,
    max_sge: u32,
    ring: Mutex<Ring<RecvWr>>,
    limit: AtomicU64,
    users: AtomicUsize,
}

#[derive(Debug)]
struct SendDesc {
    wr: SendWr,
    inline: Option<InlineData>,
}

/// Bytes of inline data a send descriptor holds in place; longer inline
/// sends take a heap buffer.
const INLINE_IN_PLACE: usize = 64;

/// The inline bytes of a posted send, copied at post time: in the
/// descriptor itself when they fit (no allocation per small send).
#[derive(Debug)]
enum InlineData {
    InPlace {
        len: u8,
        bytes: [u8; INLINE_IN_PLACE],
    },
    Heap(Vec<u8>),
}

impl InlineData {
    /// Copies the bytes every SGE names.
    ///
    /// # Safety
    /// Every SGE's `[addr, addr + length)` must be readable memory.
    unsafe fn copy(sges: &[rdmakit_proto::Sge]) -> InlineData {
        let total: usize = sges.iter().map(|s| s.length as usize).sum();
        if total <= INLINE_IN_PLACE {
            let mut bytes = [0u8; INLINE_IN_PLACE];
            let mut at = 0;
            for s in sges {
                let n = s.length as usize;
                // SAFETY: forwarded from this function's contract.
                unsafe { crate::dma::copy_inline_to(s.addr, &mut bytes[at..at + n]) };
                at += n;
            }
            // `total <= 64` fits a u8.
            return InlineData::InPlace {
                len: total as u8,
                bytes,
            };
        }
        let mut v = Vec::with_capacity(total);
        for s in sges {
            // SAFETY: forwarded from this function's contract.
            unsafe { crate::dma::copy_inline(s.addr, s.length as usize, &mut v) };
        }
        InlineData::Heap(v)
    }

    fn bytes(&self) -> &[u8] {
        match self {
            InlineData::InPlace { len, bytes } => &bytes[..usize::from(*len)],
            InlineData::Heap(v) => v,
        }
    }
}

#[derive(Debug)]
struct QpShared {
    qpn: u32,
    qp_type: QpType,
    pd: u32,
    init: QpInit,
    send_cq: Arc<CqShared>,
    recv_cq: Arc<CqShared>,
    srq: Option<Arc<SrqShared>>,
    sq: Mutex<Ring<SendDesc>>,
    rq: Mutex<Ring<RecvWr>>,
    engine: Mutex<Engine>,
    state: AtomicU8,
    deadline: AtomicU64,
}

#[derive(Debug)]
struct Engine {
    qp: rdmakit_proto::Qp,
    /// Send WRs inside the engine, oldest first: does it own a descriptor?
    fifo: VecDeque<bool>,
    rq_in_engine: usize,
    srq_fed: usize,
    inline_store: Vec<u8>,
    inline_slot: usize,
    /// Transmit buffer: the engine writes each packet at the batch's tail.
    txbuf: Vec<u8>,
    /// Packets at the start of `txbuf` waiting for one send.
    batch: net::TxBatch,
    sport: u16,
    /// The flow socket of `sport`, looked up once per port, not per packet.
    flow: net::FlowCache,
    /// A connected QP's peer endpoint (from its AV, set at RTR): the only
    /// sender whose same-host ring may carry same-host requests to it.
    remote: Option<std::net::SocketAddrV4>,
    /// The last path looked up, `(AddressHandle, address)`: interned paths
    /// never change, so a packet to the same one skips the path table.
    path: Option<(u32, Ipv4Addr)>,
    last_state: QpState,
    last_error: Option<WcStatus>,
    /// Plain ACKs held back, the QP listed in `Shared::held_acks`.
    ack_held: bool,
}

/// lkey of the engine-internal inline store (never a registered MR's key:
/// MR indices skip 0xffffff).
const INLINE_LKEY: u32 = 0xffff_ff00;

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

/// [`Memory`] for the engine: the MR table plus the QP's inline store.
struct EngineMem<'a> {
    view: crate::dma::MemView<'a>,
    pd: Pd,
    inline: &'a [u8],
    /// The process the packet being handled came from, when it came on a
    /// same-host ring (the kernel identified it when the ring was handed
    /// over); None for a datagram, and when transmitting.
    peer: Option<&'a crate::net::shm::Peer>,
}

impl EngineMem<'_> {
    fn inline_range(&self, pd: Pd, addr: u64, len: u64) -> MemResult<usize> {
        let store = Extent {
            pd: self.pd,
            addr: 0,
            len: self.inline.len() as u64,
            access: Access::empty(),
        };
        store.offset(pd, addr, len, Access::empty())
    }
}

impl Memory for EngineMem<'_> {
    fn check(&self, pd: Pd, key: Key, addr: u64, len: u64, need: Access) -> MemResult {
        if key == Key::Local(INLINE_LKEY) {
            if need.contains(Access::LOCAL_WRITE) {
                return Err(MemError::AccessDenied);
            }
            return self.inline_range(pd, addr, len).map(|_| ());
        }
        self.view.check(pd, key, addr, len, need)
    }
    fn read(&self, pd: Pd, key: Key, addr: u64, out: &mut [u8], need: Access) -> MemResult {
        if key == Key::Local(INLINE_LKEY) {
            let off = self.inline_range(pd, addr, out.len() as u64)?;
            out.copy_from_slice(&self.inline[off..off + out.len()]);
            return Ok(());
        }
        self.view.read(pd, key, addr, out, need)
    }
    fn write(&mut self, pd: Pd, key: Key, addr: u64, data: &[u8], need: Access) -> MemResult {
        if key == Key::Local(INLINE_LKEY) {
            return Err(MemError::AccessDenied);
        }
        self.view.write(pd, key, addr, data, need)
    }
    fn atomic(
        &mut self,
        pd: Pd,
        rkey: u32,
        addr: u64,
        op: rdmakit_proto::AtomicOp,
    ) -> MemResult<u64> {
        self.view.atomic(pd, rkey, addr, op)
    }
    fn invalidate(&mut self, pd: Pd, rkey: u32) -> MemResult {
        self.view.invalidate(pd, rkey)
    }
    fn bind_mw(&mut self, pd: Pd, bind: &rdmakit_proto::MwBind) -> MemResult {
        self.view.bind_mw(pd, bind)
    }
    fn invalidate_local(&mut self, pd: Pd, rkey: u32) -> MemResult {
        self.view.invalidate_local(pd, rkey)
    }
    fn host_addr(&self, pd: Pd, key: Key, addr: u64, len: u64, need: Access) -> Option<u64> {
        // Inline data lives in the QP's store: it goes as packets.
        (key != Key::Local(INLINE_LKEY))
            .then(|| self.view.host_addr(pd, key, addr, len, need))
            .flatten()
    }
    fn peer_copy(
        &mut self,
        copy: &rdmakit_proto::PeerCopy<'_>,
    ) -> core::result::Result<u64, rdmakit_proto::PeerError> {
        if copy.local.iter().any(|l| l.0 == Key::Local(INLINE_LKEY)) {
            return Err(MemError::AccessDenied.into());
        }
        self.view.peer_copy_from(copy, self.peer)
    }
}

impl Device {
    /// Opens a device: binds its UDP socket and starts its progress thread.
    ///
    /// # Errors
    /// `EADDRINUSE` / `EADDRNOTAVAIL` when the address cannot be bound.
    pub fn open(cfg: DeviceConfig) -> Result<Device> {
        let name = cfg.name.clone().unwrap_or_else(|| "soft0".to_string());
        let addr = cfg.configured_addr()?;
        let exhaustion = cfg.exhaustion.unwrap_or_default();
        // A registry that cannot be used safely (a refused base or
        // directory, a lock held past the bounded wait) fails the open,
        // saying which path and why: limits never silently stop counting.
        let registry = if cfg.shared_registry {
            let root = cfg.registry_root();
            Some(Registry::open_in(&root, &name).map_err(|e| registry_error(&e, &root))?)
        } else {
            None
        };
        let leaky = cfg
            .leaky
            .unwrap_or_else(|| registry.as_ref().is_some_and(Registry::device_leaky));
        // The context the objects belong to: held (flock) while this device
        // is open or a forked child keeps the descriptor.
        if let Some(r) = &registry {
            r.attach(leaky).map_err(|e| registry_error(&e, r.dir()))?;
        }
        // A failed open leaves no context file behind (a second bind of a
        // configured address left one until the next open swept it).
        let detach = |e: SoftError| {
            if let Some(r) = &registry {
                r.remove_instance();
            }
            e
        };
        let ctx_fd_anon =
            rustix::event::eventfd(0, rustix::event::EventfdFlags::CLOEXEC).map_err(|e| {
                detach(err(
                    "ibv_open_device",
                    Errno(e.raw_os_error()),
                    Origin::Kernel,
                    "eventfd for the context descriptor failed",
                ))
            })?;
        let events_efd = rustix::event::eventfd(
            0,
            rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK,
        )
        .map_err(|e| {
            detach(err(
                "ibv_open_device",
                Errno(e.raw_os_error()),
                Origin::Kernel,
                "eventfd for async events failed",
            ))
        })?;
        let allowed = net::Offloads {
            gso: cfg.gso,
            gro: cfg.gro,
        };
        let net =
            Net::bind(addr, cfg.udp_port, allowed, cfg.raw_tx, cfg.transport).map_err(detach)?;
        // The one transport the device uses from now on: what was asked
        // for, unless the rings could not be had.
        let transport = net.transport();
        let addr = net.addr();
        let local = *net.endpoint().ip();
        let sh = Arc::new(Shared {
            name,
            registry,
            exhaustion: exhaustion.errno(),
            attr: crate::attr::device_attr(&cfg.limits, addr),
            port: {
                let mut p = crate::attr::port_attr(addr, cfg.netdev_mtu);
                // The loopback device's port has LID 1: RoCE has no LIDs
                // (rxe's port_lid is 0, and an AV without a GRH is refused),
                // but a device that is the whole host can say what an
                // InfiniBand-style program means by the LID it exchanged —
                // this port (`lid_destination`).
                if net.qpn_base().is_some() {
                    p.lid = LOOPBACK_LID;
                }
                p
            },
            limits: cfg.limits.clone(),
            epoch_ns: monotonic_ns(),
            net,
            transport,
            mem: RwLock::new(MrTable::new(transport)),
            objs: Mutex::new(Objects {
                next_pd: 1,
                next_ah: 1,
                next_cq: 1,
                next_srq: 1,
                next_qpn: 17,
                next_channel: 1,
                ..Objects::default()
            }),
            qps: RwLock::new(FxHashMap::default()),
            cqs: RwLock::new(FxHashMap::default()),
            srqs: RwLock::new(HashMap::new()),
            channels: Mutex::new(HashMap::new()),
            paths: Mutex::new(Vec::new()),
            faults: FaultInjector::new(cfg.fault_seed),
            events: Mutex::new(VecDeque::new()),
            events_cv: Condvar::new(),
            events_efd,
            ctx_fd_anon,
            leaky,
            shutdown: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            counters: AtomicCounters::default(),
            wake_at: AtomicU64::new(u64::MAX),
            nap_until: AtomicU64::new(0),
            rescan: AtomicBool::new(false),
            busy_polls: AtomicU64::new(0),
            armed_cqs: AtomicUsize::new(0),
            progress: std::sync::OnceLock::new(),
            busy_poll: cfg.busy_poll,
            poll_buf: Mutex::new(PollBuf::default()),
            held_acks: Mutex::new(Vec::new()),
            acks_held: AtomicBool::new(false),
            gsi: Mutex::new(gsi::Gsi::new()),
        });
        let t = Arc::clone(&sh);
        let thread = std::thread::Builder::new()
            .name(format!("rdmakit-soft-{local}"))
            .spawn(move || progress_loop(&t))
            .map_err(|e| {
                if let Some(r) = &sh.registry {
                    r.remove_instance();
                }
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

    /// Device name.
    pub fn name(&self) -> &str {
        &self.sh.name
    }

    /// The device's IPv4 address: its GID is `::ffff:` that. The same for
    /// every context of the device ([`crate::net`]).
    pub fn addr(&self) -> Ipv4Addr {
        self.sh.net.addr()
    }

    /// The context's descriptor (`ibv_context.cmd_fd` of the drop-in
    /// libibverbs): the locked context file of the registry, which a forked
    /// child inherits and which keeps the context's objects alive while any
    /// process holds it (as a uverbs descriptor does). Close-on-exec. Valid
    /// while the device is open.
    pub fn context_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        self.sh
            .registry
            .as_ref()
            .and_then(Registry::context_fd)
            .unwrap_or_else(|| self.sh.ctx_fd_anon.as_raw_fd())
    }

    /// This user's registry directory of the device
    /// (`<base>/rdmakit-soft.<uid>/<name>`, [`crate::registry`]), when it
    /// shares a registry: only this user can write in it.
    pub fn registry_dir(&self) -> Option<&std::path::Path> {
        self.sh.registry.as_ref().map(Registry::dir)
    }

    /// Whether this device keeps a dead process's objects (a leaky driver).
    pub fn leaky(&self) -> bool {
        self.sh.leaky
    }

    /// Where this context's socket is bound: the device address's port
    /// 4791, or (loopback device) this context's private endpoint.
    pub fn endpoint(&self) -> SocketAddrV4 {
        self.sh.net.endpoint()
    }

    /// The UDP offloads this context's socket uses, probed when it was
    /// opened: segmentation (UDP_SEGMENT) on send, coalescing (UDP_GRO) on
    /// receive. Either is off when the kernel lacks it or the configuration
    /// turned it off ([`DeviceConfig::gso`] / [`DeviceConfig::gro`]).
    pub fn offloads(&self) -> net::Offloads {
        self.sh.net.offloads()
    }

    /// Device attributes (`ibv_query_device`).
    pub fn attr(&self) -> &DeviceAttr {
        &self.sh.attr
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
        let mut p = self.sh.port.clone();
        p.state = crate::attr::PortState::Active;
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
        let lid = self.sh.port.lid;
        if self.sh.net.qpn_base().is_none() {
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
        Ok(Gid::from_ipv4(self.sh.net.addr()))
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
        &self.sh.limits
    }

    /// Device counters.
    pub fn counters(&self) -> Counters {
        let c = &self.sh.counters;
        let (ring_tx_packets, ring_rx_packets, ring_wakeups) =
            self.sh.net.rings().map_or((0, 0, 0), |r| r.counts());
        Counters {
            tx_packets: c.tx_packets.load(Ordering::Relaxed),
            rx_packets: c.rx_packets.load(Ordering::Relaxed),
            rx_icrc_errors: c.rx_icrc_errors.load(Ordering::Relaxed),
            rx_unknown_qp: c.rx_unknown_qp.load(Ordering::Relaxed),
            rx_malformed: c.rx_malformed.load(Ordering::Relaxed),
            tx_errors: c.tx_errors.load(Ordering::Relaxed),
            cq_overruns: c.cq_overruns.load(Ordering::Relaxed),
            dma_map_errors: c.dma_map_errors.load(Ordering::Relaxed),
            ring_tx_packets,
            ring_rx_packets,
            ring_wakeups,
            ring_refused: self.sh.net.rings().map_or(0, |r| r.refused()),
            rx_same_host_refused: c.rx_same_host_refused.load(Ordering::Relaxed),
            rx_socket_packets: c.rx_socket_packets.load(Ordering::Relaxed),
        }
    }

    /// Live objects per type.
    pub fn resource_counts(&self) -> ResourceCounts {
        let o = lock(&self.sh.objs);
        ResourceCounts {
            pd: o.pds.len(),
            mr: o.mrs.len(),
            cq: read(&self.sh.cqs).len(),
            qp: read(&self.sh.qps).len(),
            srq: read(&self.sh.srqs).len(),
            ah: o.ahs.len(),
        }
    }

    /// Makes descriptor mappings fail with probability `rate`, seeded.
    pub fn set_fault_injection(&self, rate: f64, seed: u64) {
        self.sh.faults.set(rate, seed);
    }
}

/// The devices open in this process (for [`flush_held_acks`]).
fn live_devices() -> &'static Mutex<Vec<std::sync::Weak<Shared>>> {
    static LIVE: Mutex<Vec<std::sync::Weak<Shared>>> = Mutex::new(Vec::new());
    &LIVE
}

/// Sends every plain ACK a busy-polling application thread held back, on
/// every device open in this process. For a process about to exit without
/// destroying its QPs (an `atexit` hook): the peer's last send then still
/// completes, as it would with a real NIC's ACK.
pub fn flush_held_acks() {
    let devs: Vec<Arc<Shared>> = lock(live_devices())
        .iter()
        .filter_map(std::sync::Weak::upgrade)
        .collect();
    for d in devs {
        d.flush_held_acks();
    }
}

impl Device {
    /// Wakes every thread blocked in [`Device::get_cq_event`] or
    /// [`Device::get_async_event`] of this device: they return (an error,
    /// or no event) instead of waiting for events that can no longer come.
    /// Called when the device is closing, before the memory goes.
    pub fn wake_waiters(&self) {
        self.sh.closing.store(true, Ordering::Release);
        {
            let _q = lock(&self.sh.events);
            self.sh.events_cv.notify_all();
        }
        for c in lock(&self.sh.channels).values() {
            c.closed.store(true, Ordering::Release);
            let _q = lock(&c.queue);
            c.cv.notify_all();
            c.ring_all();
        }
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        self.wake_waiters();
        self.sh.flush_held_acks();
        self.sh.shutdown.store(true, Ordering::Release);
        self.sh.net.kick();
        if let Some(t) = self.thread.take() {
            // A panicked progress thread has nothing left to clean up.
            let _ = t.join();
        }
        // Objects the application never destroyed go with the device;
        // errors are swallowed (no panics in Drop).
        if let Some(r) = &self.sh.registry {
            r.remove_instance();
        }
    }
}

impl Shared {
    /// The error of a create verb past a device limit: rxe's `EINVAL`
    /// (`__rxe_add_to_pool` once num_elem > max_elem) or, in ENOSPC mode,
    /// mlx5's `ENOSPC`.
    fn exhausted(&self, verb: &'static str, what: &str, limit: u32) -> SoftError {
        err(
            verb,
            self.exhaustion,
            Origin::Kernel,
            format!("{what} ({limit}) reached"),
        )
    }

    /// Records a new object in the shared registry; fails like the device
    /// limit when every process's objects of this kind (live or leaked)
    /// already reach `limit`.
    fn register(
        &self,
        verb: &'static str,
        kind: Kind,
        handle: u32,
        what: &str,
        limit: u32,
    ) -> Result<()> {
        let Some(r) = &self.registry else {
            return Ok(());
        };
        match r.add(kind, handle, limit) {
            Ok(true) => Ok(()),
            Ok(false) => Err(err(
                verb,
                self.exhaustion,
                Origin::Kernel,
                format!(
                    "{what} ({limit}) reached across all processes using {} (registry {})",
                    self.name,
                    r.dir().display()
                ),
            )),
            Err(e) => Err(err(
                verb,
                io_errno(&e),
                Origin::Library,
                format!("resource registry {}: {e}", r.dir().display()),
            )),
        }
    }

    /// Removes an object's registry record; errors are ignored (the object
    /// is gone either way, and `rdmakit soft status` shows a stale record).
    fn unregister(&self, kind: Kind, handle: u32) {
        if let Some(r) = &self.registry {
            let _ = r.remove(kind, handle);
        }
    }

    fn map_failure(&self, verb: &'static str, e: MapFailure<MemError>) -> SoftError {
        if matches!(e, MapFailure::Injected) {
            self.counters.dma_map_errors.fetch_add(1, Ordering::Relaxed);
        }
        map_failure(verb, e)
    }
}

/// The errno of a registry error: its own, else by kind.
fn io_errno(e: &std::io::Error) -> Errno {
    use std::io::ErrorKind as K;
    match (e.raw_os_error(), e.kind()) {
        (Some(n), _) => Errno(n),
        (None, K::PermissionDenied) => Errno(13),
        (None, K::TimedOut) => Errno::ETIMEDOUT,
        (None, K::NotFound) => Errno::ENOENT,
        (None, K::InvalidInput) => Errno::EINVAL,
        _ => Errno::EIO,
    }
}

/// `ibv_open_device` failing on the registry at `path`.
fn registry_error(e: &std::io::Error, path: &std::path::Path) -> SoftError {
    err(
        "ibv_open_device",
        io_errno(e),
        Origin::Library,
        format!(
            "the soft NIC's resource registry ({}) cannot be used: {e}",
            path.display()
        ),
    )
}

fn map_failure(verb: &'static str, e: MapFailure<MemError>) -> SoftError {
    match e {
        MapFailure::Full => err(verb, Errno::ENOMEM, Origin::Library, "work queue full"),
        MapFailure::Injected => err(
            verb,
            Errno::ENOMEM,
            Origin::Hardware,
            "DMA mapping error (injected fault)",
        ),
        MapFailure::Refused(m) => err(
            verb,
            Errno::EINVAL,
            Origin::Hardware,
            format!("DMA mapping refused: {m}"),
        ),
    }
}

fn map_sges(mem: &MrTable, pd: Pd, sges: &[rdmakit_proto::Sge], need: Access) -> MemResult {
    let v = mem.view();
    for s in sges {
        v.check(pd, Key::Local(s.lkey), s.addr, u64::from(s.length), need)?;
    }
    Ok(())
}

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
