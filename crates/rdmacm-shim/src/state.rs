//! The process's connection manager: the soft device librdmacm opened, the
//! sans-IO engine ([`rdmakit_cm::rdma::RdmaCm`]) behind one lock, and the
//! agent thread that feeds it MADs from QP1 and time — what the kernel's
//! rdma_cm and ib_cm do for a process on a real host.
//!
//! Every API call locks [`Global`], drives the engine, then [`Global::flush`]
//! sends the MADs it produced through QP1 and turns its events into
//! `rdma_cm_event`s on the IDs' channels. The agent sleeps in `poll` on the
//! QP1 eventfd and its own wake-up eventfd until a MAD arrives or the engine's
//! next deadline, and does the same.

use std::collections::{HashMap, HashSet};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::{Mutex, MutexGuard, OnceLock, TryLockError};
use std::time::Duration;

use libc::c_int;
use rdmakit_cm::rdma::{Device, EventKind, RdmaCm, RdmaEvent};
use rdmakit_cm::Peer;
use rdmakit_cm::{gid_of, ipv4_of};
use rdmakit_ibverbs_abi::{
    ibv_ah_attr, ibv_context, ibv_device_attr, ibv_gid, ibv_global_route, ibv_pd,
};
use rdmakit_proto::Instant;

use crate::abi::*;
use crate::addr::PortTable;
use crate::channel::{Channel, CmEvent};
use crate::guard::Res;
use crate::id::IdPriv;
use crate::verbs::{verbs, DevInfo, Verbs};

/// The device librdmacm opened (rdma-core keeps one context per device).
pub(crate) struct Dev {
    pub ctx: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub info: DevInfo,
    pub gsi_fd: c_int,
    pub max_init_depth: u8,
    pub max_resp_res: u8,
}

/// Everything behind the lock.
pub(crate) struct Global {
    pub v: &'static Verbs,
    pub dev: Dev,
    pub cm: RdmaCm,
    /// Engine ID → our ID.
    pub ids: HashMap<u32, *mut IdPriv>,
    /// Our live IDs.
    pub live: HashSet<usize>,
    pub ports: PortTable,
    epoch: std::time::Instant,
    wake_fd: c_int,
}

// SAFETY: the raw pointers are to objects this library owns (IDs) or that
// libibverbs keeps alive until closed (context, PD); they are only used
// under the lock.
unsafe impl Send for Global {}

struct Shared(Result<Mutex<Global>, c_int>);

fn shared() -> &'static Shared {
    static S: OnceLock<Shared> = OnceLock::new();
    S.get_or_init(|| Shared(init().map(Mutex::new)))
}

/// The connection manager, initialised on first use (`ucma_init`).
///
/// # Errors
/// `ENODEV` when no device could be opened (the reason is printed once).
pub(crate) fn state() -> Res<MutexGuard<'static, Global>> {
    match &shared().0 {
        Ok(m) => Ok(m.lock().unwrap_or_else(|p| p.into_inner())),
        Err(e) => Err(*e),
    }
}

fn random_seed() -> u64 {
    let mut b = [0u8; 8];
    // SAFETY: getrandom into a local buffer.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), 8, 0) };
    if n == 8 {
        u64::from_ne_bytes(b)
    } else {
        u64::from(std::process::id()) << 20 ^ 0x9e37_79b9
    }
}

fn init() -> Res<Global> {
    let v = verbs()?;
    let mut n: c_int = 0;
    // SAFETY: libibverbs' own function; n is writable.
    let list = unsafe { (v.ibv_get_device_list)(&mut n) };
    if list.is_null() || n < 1 {
        if !list.is_null() {
            // SAFETY: the list we were given.
            unsafe { (v.ibv_free_device_list)(list) };
        }
        eprintln!("rdmakit librdmacm: libibverbs lists no device");
        return Err(libc::ENODEV);
    }
    // SAFETY: n >= 1 entries.
    let ctx = unsafe { (v.ibv_open_device)(*list) };
    // SAFETY: the list we were given.
    unsafe { (v.ibv_free_device_list)(list) };
    if ctx.is_null() {
        let e = std::io::Error::last_os_error();
        eprintln!("rdmakit librdmacm: cannot open the soft NIC: {e}");
        return Err(libc::ENODEV);
    }
    let mut info = DevInfo::zeroed();
    // SAFETY: ctx from ibv_open_device; info is writable and sized.
    let r = unsafe { (v.rdmakit_dev_info)(ctx, &mut info) };
    if r != 0 {
        eprintln!("rdmakit librdmacm: cannot query the soft NIC (errno {r})");
        return Err(libc::ENODEV);
    }
    // SAFETY: zeroed ibv_device_attr is valid plain data; ctx is open.
    let mut attr: ibv_device_attr = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { (v.ibv_query_device)(ctx, &mut attr) };
    // SAFETY: ctx is open.
    let pd = unsafe { (v.ibv_alloc_pd)(ctx) };
    if pd.is_null() {
        eprintln!("rdmakit librdmacm: cannot allocate the device PD");
        return Err(libc::ENODEV);
    }
    // SAFETY: ctx is open.
    let gsi_fd = unsafe { (v.rdmakit_gsi_open)(ctx) };
    if gsi_fd < 0 {
        eprintln!("rdmakit librdmacm: cannot attach to QP1 of the soft NIC");
        return Err(libc::ENODEV);
    }
    // SAFETY: plain syscall.
    let wake_fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if wake_fd < 0 {
        return Err(libc::EMFILE);
    }
    let addr = info.addr();
    let mut dev = Device::roce_v2(addr, info.active_mtu, info.node_guid);
    dev.gid = info.gid;
    dev.sgid_index = info.gid_index as u8;
    dev.ack_delay = info.ack_delay as u8;
    let g = Global {
        v,
        dev: Dev {
            ctx,
            pd,
            info,
            gsi_fd,
            // rdma-core casts the device limits to u8.
            max_init_depth: attr.max_qp_init_rd_atom as u8,
            max_resp_res: attr.max_qp_rd_atom as u8,
        },
        cm: RdmaCm::new(dev, random_seed()),
        ids: HashMap::new(),
        live: HashSet::new(),
        ports: PortTable::new(info.shared_dir()),
        epoch: std::time::Instant::now(),
        wake_fd,
    };
    std::thread::Builder::new()
        .name("rdmakit-cm".into())
        .spawn(agent)
        .map_err(|_| libc::ENOMEM)?;
    extern "C" fn at_exit() {
        close_all();
    }
    // SAFETY: a plain extern "C" fn; a failed registration only loses the
    // exit-time teardown.
    unsafe { libc::atexit(at_exit) };
    Ok(g)
}

/// What the kernel does when a process's rdma_cm file closes: every ID it
/// still has is destroyed, so its peers hear a REJ, DREQ or DREP instead of
/// waiting for retries to run out. Runs at exit (not on a fatal signal).
fn close_all() {
    let Ok(m) = &shared().0 else { return };
    let Some(mut g) = lock_for_exit(m, EXIT_LOCK_WAIT) else {
        return;
    };
    let now = g.now();
    let handles: Vec<u32> = g.ids.keys().copied().collect();
    for h in handles {
        g.cm.destroy(now, h);
    }
    g.ids.clear();
    g.live.clear();
    g.send_and_deliver();
}

/// How long [`close_all`] waits for the lock.
const EXIT_LOCK_WAIT: Duration = Duration::from_secs(1);

/// The lock for the exit-time teardown. The agent thread holds it for a
/// pump at a time, so the teardown waits for it (a bare `try_lock` lost to
/// the agent on a loaded machine and the peers were never told); but at
/// most `limit`, as the exiting thread may hold it itself (exit from a
/// signal handler) or another thread may be stuck with it.
fn lock_for_exit<T>(m: &Mutex<T>, limit: Duration) -> Option<MutexGuard<'_, T>> {
    let end = std::time::Instant::now() + limit;
    loop {
        match m.try_lock() {
            Ok(g) => return Some(g),
            Err(TryLockError::Poisoned(p)) => return Some(p.into_inner()),
            Err(TryLockError::WouldBlock) if std::time::Instant::now() < end => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(TryLockError::WouldBlock) => return None,
        }
    }
}

/// The agent thread: MADs in, timers, MADs out, events to channels.
fn agent() {
    loop {
        let (gsi, wake, wait_ms) = match state() {
            Ok(mut g) => {
                g.pump();
                let now = g.now();
                let wait = g.cm.poll_timeout().map_or(1000, |t| {
                    let ns = t.as_nanos().saturating_sub(now.as_nanos());
                    i32::try_from(ns.div_ceil(1_000_000))
                        .unwrap_or(1000)
                        .min(1000)
                });
                (g.dev.gsi_fd, g.wake_fd, wait)
            }
            Err(_) => return,
        };
        let mut fds = [
            libc::pollfd {
                fd: gsi,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: wake,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: two pollfds on the stack.
        unsafe { libc::poll(fds.as_mut_ptr(), 2, wait_ms) };
        if fds[1].revents & libc::POLLIN != 0 {
            let mut b = [0u8; 8];
            // SAFETY: reading our non-blocking eventfd into a local buffer.
            unsafe { libc::read(wake, b.as_mut_ptr().cast(), 8) };
        }
    }
}

impl Global {
    /// Monotonic time for the engine.
    pub(crate) fn now(&self) -> Instant {
        Instant::from_nanos(u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }

    /// Takes every waiting MAD, runs due timers, flushes.
    fn pump(&mut self) {
        let mut buf = [0u8; 256];
        loop {
            let (mut src, mut via) = (0u32, 0u32);
            // SAFETY: ctx is open; buf has 256 writable bytes.
            let n = unsafe {
                (self.v.rdmakit_gsi_recv)(
                    self.dev.ctx,
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    &mut src,
                    &mut via,
                )
            };
            let Ok(n) = usize::try_from(n) else { break };
            let from = Ipv4Addr::from(u32::from_be(src));
            let via = match u32::from_be(via) {
                0 => from,
                v => Ipv4Addr::from(v),
            };
            if crate::guard::debug_on() {
                match rdmakit_wire::cm::Repr::parse(&buf[..n.min(buf.len())]) {
                    Ok(r) => eprintln!("rdmakit librdmacm: from {from} via {via}: {r}"),
                    Err(e) => {
                        eprintln!("rdmakit librdmacm: from {from} via {via}: unparsable MAD ({e})")
                    }
                }
            }
            let now = self.now();
            let peer = Peer {
                gid: gid_of(from),
                via: gid_of(via),
            };
            self.cm.handle_mad(now, peer, &buf[..n.min(buf.len())]);
        }
        let now = self.now();
        self.cm.handle_timeout(now);
        self.send_and_deliver();
    }

    /// Wakes the agent so it re-reads the engine's next deadline.
    pub(crate) fn wake(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writing 8 bytes to our eventfd.
        unsafe { libc::write(self.wake_fd, one.as_ptr().cast(), 8) };
    }

    /// After an API call: sends what the engine produced, delivers its
    /// events, and wakes the agent (the engine's next deadline may be sooner
    /// than the one it sleeps toward).
    pub(crate) fn flush(&mut self) {
        self.send_and_deliver();
        self.wake();
    }

    fn send_and_deliver(&mut self) {
        while let Some(t) = self.cm.poll_transmit() {
            let Some(dst) = ipv4_of(&t.dst) else { continue };
            if crate::guard::debug_on() {
                eprintln!("rdmakit librdmacm: send to {dst}: {t:?}");
            }
            // SAFETY: ctx is open; the MAD is 256 readable bytes.
            unsafe {
                (self.v.rdmakit_gsi_send)(
                    self.dev.ctx,
                    u32::from(dst).to_be(),
                    t.mad.as_ptr().cast(),
                    t.mad.len(),
                )
            };
        }
        while let Some(e) = self.cm.poll_event() {
            self.deliver(e);
        }
    }

    /// Our ID for an engine ID.
    pub(crate) fn id_ptr(&self, h: u32) -> Option<*mut IdPriv> {
        self.ids.get(&h).copied()
    }

    /// Turns an engine event into an `rdma_cm_event` on the ID's channel.
    fn deliver(&mut self, e: RdmaEvent) {
        if crate::guard::debug_on() {
            eprintln!(
                "rdmakit librdmacm: {} on ID {} (status {})",
                crate::channel::event_str(e.kind as u32).to_string_lossy(),
                e.id,
                e.status
            );
        }
        let (idp, listen) = if e.kind == EventKind::ConnectRequest {
            let Some(l) = e.listen_id.and_then(|l| self.id_ptr(l)) else {
                return;
            };
            let child = match self.child_for(e.id, l) {
                Ok(c) => c,
                Err(_) => {
                    let now = self.now();
                    self.cm.destroy(now, e.id);
                    return;
                }
            };
            (child, l)
        } else {
            let Some(p) = self.id_ptr(e.id) else { return };
            (p, std::ptr::null_mut())
        };
        // SAFETY: IDs in the map are live (removed before they are freed).
        let id = unsafe { &mut *idp };
        let mut ev = Box::new(CmEvent {
            event: rdma_cm_event {
                id: &mut id.id,
                listen_id: if listen.is_null() {
                    std::ptr::null_mut()
                } else {
                    // SAFETY: live listener.
                    unsafe { &mut (*listen).id }
                },
                event: e.kind as u32,
                status: e.status,
                // SAFETY: all-zero is a valid value of the param union.
                param: unsafe { std::mem::zeroed() },
            },
            data: [0; 256],
            id_priv: idp,
        });
        let ud = id.id.qp_type == rdmakit_ibverbs_abi::consts::IBV_QPT_UD;
        if ud {
            let n = e.ud.private_data.len().min(255);
            ev.data[..n].copy_from_slice(&e.ud.private_data[..n]);
            let mut p = rdma_ud_param {
                private_data: std::ptr::null(),
                private_data_len: n as u8,
                // SAFETY: plain data.
                ah_attr: unsafe { std::mem::zeroed() },
                qp_num: e.ud.qp_num,
                qkey: e.ud.qkey,
            };
            if let Some(av) = e.ud.av {
                p.ah_attr = ibv_ah_attr {
                    grh: ibv_global_route {
                        dgid: ibv_gid { raw: av.dgid },
                        flow_label: av.flow_label,
                        sgid_index: av.sgid_index,
                        hop_limit: av.hop_limit,
                        traffic_class: av.traffic_class,
                    },
                    dlid: 0,
                    sl: av.sl,
                    src_path_bits: 0,
                    static_rate: av.static_rate,
                    is_global: 1,
                    port_num: av.port,
                };
            }
            ev.event.param.ud = p;
        } else {
            let c = &e.conn;
            let n = c.private_data.len().min(255);
            ev.data[..n].copy_from_slice(&c.private_data[..n]);
            ev.event.param.conn = rdma_conn_param {
                private_data: std::ptr::null(),
                private_data_len: n as u8,
                responder_resources: c.responder_resources,
                initiator_depth: c.initiator_depth,
                flow_control: u8::from(c.flow_control),
                retry_count: c.retry_count,
                rnr_retry_count: c.rnr_retry_count,
                srq: u8::from(c.srq),
                qp_num: c.qp_num,
            };
        }
        // The private data pointer points into the boxed event itself.
        let pd = ev.data.as_ptr().cast::<libc::c_void>();
        // SAFETY: writing the pointer field of whichever variant is in use
        // (both start with `private_data`).
        unsafe {
            if ud {
                if ev.event.param.ud.private_data_len > 0 {
                    ev.event.param.ud.private_data = pd;
                }
            } else if ev.event.param.conn.private_data_len > 0 {
                ev.event.param.conn.private_data = pd;
            }
        }
        let ch = if listen.is_null() {
            id.id.channel
        } else {
            // A request is reported on the listener's channel.
            // SAFETY: live listener.
            unsafe { (*listen).id.channel }
        };
        if let Ok(c) = Channel::from_ptr(ch) {
            c.push(ev);
        }
    }

    /// The ID of a new connection request, created like librdmacm does on
    /// `CONNECT_REQUEST`.
    fn child_for(&mut self, h: u32, listener: *mut IdPriv) -> Res<*mut IdPriv> {
        // SAFETY: live listener.
        let l = unsafe { &mut *listener };
        let idp = IdPriv::alloc(l.id.channel, l.id.context, l.id.ps, l.id.qp_type, h, false)?;
        self.ids.insert(h, idp);
        self.live.insert(idp as usize);
        // SAFETY: just allocated.
        let id = unsafe { &mut *idp };
        self.attach(id);
        if let Some(e) = self.cm.id(h).cloned() {
            if let Some(s) = e.src {
                crate::id::set_sockaddr(&mut id.id.route.addr.src, s);
            }
            if let Some(d) = e.dst {
                crate::id::set_sockaddr(&mut id.id.route.addr.dst, d);
            }
            if let Some(g) = e.dgid {
                id.id.route.addr.ibaddr.dgid = ibv_gid { raw: g };
            }
            if let Some(r) = e.route {
                crate::id::set_path(id, &r);
            }
        }
        if l.sync {
            // rdma_get_request: the new ID gets its own synchronous channel.
            let c = Channel::create()?;
            id.id.channel = c.cast();
            id.sync = true;
        }
        Ok(idp)
    }

    /// Attaches an ID to the device (`ucma_get_device`).
    pub(crate) fn attach(&self, id: &mut IdPriv) {
        id.id.verbs = self.dev.ctx;
        if id.id.pd.is_null() {
            id.id.pd = self.dev.pd;
        }
        id.id.port_num = 1;
        id.id.route.addr.ibaddr.sgid = ibv_gid {
            raw: self.dev.info.gid,
        };
        id.id.route.addr.ibaddr.pkey = 0xffffu16.to_be();
    }

    /// The soft NIC's address.
    pub(crate) fn dev_addr(&self) -> Ipv4Addr {
        self.dev.info.addr()
    }

    /// Where this process's QP1 is reached (see `addr`).
    pub(crate) fn endpoint(&self) -> Ipv4Addr {
        self.dev.info.endpoint()
    }

    /// Whether an ID pointer is one of ours and alive.
    pub(crate) fn is_live(&self, p: *mut IdPriv) -> bool {
        self.live.contains(&(p as usize))
    }

    /// The local socket address an ID shows for `port`.
    pub(crate) fn local(&self, port: u16) -> SocketAddrV4 {
        SocketAddrV4::new(self.dev_addr(), port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Barrier};

    #[test]
    fn exit_teardown_waits_for_a_lock_held_briefly() {
        // The agent thread in the middle of a pump when the process exits.
        let m = Arc::new(Mutex::new(0u32));
        let held = Arc::new(Barrier::new(2));
        let agent = {
            let (m, held) = (Arc::clone(&m), Arc::clone(&held));
            std::thread::spawn(move || {
                let mut g = m.lock().unwrap();
                held.wait();
                std::thread::sleep(Duration::from_millis(50));
                *g += 1;
            })
        };
        held.wait();
        let g = lock_for_exit(&m, Duration::from_secs(5));
        assert_eq!(
            g.as_deref(),
            Some(&1),
            "the teardown gave up on a busy lock"
        );
        drop(g);
        agent.join().unwrap();
    }

    #[test]
    fn exit_teardown_gives_up_on_a_lock_never_released() {
        let m = Mutex::new(());
        let _mine = m.lock().unwrap();
        let t = std::time::Instant::now();
        assert!(lock_for_exit(&m, Duration::from_millis(30)).is_none());
        assert!(t.elapsed() >= Duration::from_millis(30));
    }
}
