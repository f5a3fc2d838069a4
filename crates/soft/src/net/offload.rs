//! The UDP driver's offloads: UDP_SEGMENT (GSO) sends of a run of equal-size
//! packets, UDP_GRO receives split by the kernel's segment size, probed once
//! per socket and refused batches falling back per packet size.

use super::*;

/// `setsockopt(SOL_UDP, UDP_SEGMENT)` and its control message (Linux 4.18).
const UDP_SEGMENT: libc::c_int = 103;
/// `setsockopt(SOL_UDP, UDP_GRO)` and its control message (Linux 5.0).
pub(crate) const UDP_GRO: libc::c_int = 104;
/// The most segments the kernel takes in one UDP_SEGMENT send
/// (`UDP_MAX_SEGMENTS`: 64; recent kernels allow 128).
pub(crate) const GSO_MAX_SEGMENTS: usize = 64;
/// The most UDP payload bytes of one send, GSO or not: an IPv4 datagram's
/// 65535 bytes less its IPv4 and UDP headers.
pub(crate) const GSO_MAX_BYTES: usize = 65535 - 20 - 8;

/// The UDP offloads a device's socket uses, probed once when it is bound.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Offloads {
    /// Segmentation offload: the packets of a message that share a size
    /// leave in one `sendmsg` with a UDP_SEGMENT control message; the
    /// kernel (or the NIC) cuts them into one datagram each.
    pub gso: bool,
    /// Receive coalescing: UDP_GRO on the socket; a receive may return
    /// several datagrams of one flow back to back, which the driver splits
    /// by the control message's segment size.
    pub gro: bool,
}

impl Offloads {
    /// Both offloads (as allowed: each still only when the kernel has it).
    pub const ALL: Offloads = Offloads {
        gso: true,
        gro: true,
    };
}

impl Offloads {
    /// `"gso gro"`, `"gso"`, `"gro"` or `"none"`.
    pub fn describe(self) -> &'static str {
        match (self.gso, self.gro) {
            (true, true) => "gso gro",
            (true, false) => "gso",
            (false, true) => "gro",
            (false, false) => "none",
        }
    }
}

/// Packets queued for one send: `count` RoCEv2 packets (each with its
/// ICRC) back to back at the start of the engine's transmit buffer, all
/// `seg` bytes but the last, which may be shorter, to one destination from
/// one flow port — what one UDP_SEGMENT `sendmsg` carries.
///
/// `wake` is not part of the batch's packets: a same-host ring whose
/// receiver was asleep when this pass pushed into it, woken once the pass
/// ends ([`crate::net::Net::flush`]) rather than at that packet.
#[derive(Debug, Default)]
pub(crate) struct TxBatch {
    pub(crate) bytes: usize,
    pub(crate) seg: usize,
    pub(crate) count: usize,
    pub(crate) to: Option<SocketAddrV4>,
    pub(crate) port: u16,
    /// The IP TOS byte every packet of the batch carries.
    pub(crate) tos: u8,
    pub(crate) wake: Option<SocketAddrV4>,
}

impl TxBatch {
    /// Where the next packet is written in the transmit buffer.
    pub(crate) fn tail(&self) -> usize {
        self.bytes
    }

    /// Whether a packet of `len` bytes (with ICRC) to `to` from flow port
    /// `port` with IP TOS `tos` may join: same destination, port and TOS
    /// (one send has one TOS), no longer than the segment size, and within
    /// the kernel's limits.
    pub(crate) fn admits(&self, to: SocketAddrV4, port: u16, tos: u8, len: usize) -> bool {
        self.count == 0
            || (!self.closed()
                && self.to == Some(to)
                && self.port == port
                && self.tos == tos
                && len <= self.seg
                && self.bytes + len <= GSO_MAX_BYTES)
    }

    /// Whether no further packet may join: a shorter packet ended the run,
    /// or the segment or byte limit is reached.
    pub(crate) fn closed(&self) -> bool {
        self.count > 0
            && (self.bytes != self.count * self.seg
                || self.count >= GSO_MAX_SEGMENTS
                || self.bytes + self.seg > GSO_MAX_BYTES)
    }

    pub(crate) fn add(&mut self, to: SocketAddrV4, port: u16, tos: u8, len: usize) {
        if self.count == 0 {
            self.seg = len;
            self.to = Some(to);
            self.port = port;
            self.tos = tos;
        }
        self.count += 1;
        self.bytes += len;
    }
}

/// The datagrams of one receive: `seg`-byte pieces, the last perhaps
/// shorter (a UDP_GRO receive), or the whole buffer when `seg` is 0.
pub(crate) fn gro_split(buf: &[u8], seg: usize) -> std::slice::Chunks<'_, u8> {
    buf.chunks(if seg == 0 { buf.len().max(1) } else { seg })
}

/// The segment size of a UDP_GRO control message among the control
/// messages `control` (as `recvmsg` filled them), or 0 (none, or
/// malformed: the receive is then one datagram).
pub(crate) fn gro_size(control: &[u8]) -> usize {
    cmsg_data(control, libc::SOL_UDP, UDP_GRO)
        .and_then(|v| v.get(..4))
        .map_or(0, |v| {
            usize::try_from(i32::from_ne_bytes([v[0], v[1], v[2], v[3]])).unwrap_or(0)
        })
}

/// When UDP_GRO is worth its cost on the receive socket. With GRO on, every
/// receive is a `recvmsg` with a control buffer (the segment size of a
/// coalesced buffer); a ping-pong of small messages never coalesces and
/// pays for it on every spin (8-byte RTT 5.7% higher, 6 interleaved
/// rounds). After [`GroSwitch::SMALL_RUN`] consecutive small, uncoalesced
/// datagrams GRO goes off; the first large one (bulk traffic, which GRO
/// coalesces) turns it back on.
///
/// Off has three steps, so that no buffer coalesced before the switch is
/// read without its segment size: `Draining` (GRO off on the socket, but
/// receives still read the control message) lasts until a receive finds
/// the socket empty — everything queued from then on was queued with GRO
/// off — and only then `Off` (plain `recvfrom`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GroSwitch {
    /// GRO on; the count of consecutive small uncoalesced datagrams.
    On(u32),
    /// GRO off on the socket; datagrams coalesced earlier may still wait.
    Draining,
    /// GRO off; nothing coalesced can be queued.
    Off,
}

/// What a receive found, for [`GroSwitch::observe`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RecvSeen {
    /// A datagram of `len` bytes, coalesced with segment size `seg` (0: not).
    Datagram { len: usize, seg: usize },
    /// The socket had nothing waiting.
    Empty,
}

impl GroSwitch {
    /// Consecutive small datagrams after which GRO goes off.
    pub(crate) const SMALL_RUN: u32 = 1024;
    /// A datagram at least this long is bulk traffic (a 1 KiB path MTU's
    /// full packet); shorter is a small message or an ACK.
    pub(crate) const LARGE: usize = 1024;

    /// Whether receives must read the UDP_GRO control message.
    pub(crate) fn reads_control(self) -> bool {
        self != GroSwitch::Off
    }

    /// The state after a receive saw `seen`, and the UDP_GRO value to set
    /// on the socket when it changes.
    pub(crate) fn observe(self, seen: RecvSeen) -> (GroSwitch, Option<bool>) {
        let large = match seen {
            RecvSeen::Datagram { len, seg } => Some(seg != 0 || len >= Self::LARGE),
            RecvSeen::Empty => None,
        };
        match (self, large) {
            (GroSwitch::On(_), Some(true)) => (GroSwitch::On(0), None),
            (GroSwitch::On(n), Some(false)) if n + 1 >= Self::SMALL_RUN => {
                (GroSwitch::Draining, Some(false))
            }
            (GroSwitch::On(n), Some(false)) => (GroSwitch::On(n + 1), None),
            (GroSwitch::On(n), None) => (GroSwitch::On(n), None),
            (GroSwitch::Draining | GroSwitch::Off, Some(true)) => (GroSwitch::On(0), Some(true)),
            (GroSwitch::Draining, None) => (GroSwitch::Off, None),
            (s, _) => (s, None),
        }
    }

    /// Packs the state into a u64 (for an atomic).
    pub(crate) fn to_bits(self) -> u64 {
        match self {
            GroSwitch::On(n) => u64::from(n),
            GroSwitch::Draining => 1 << 32,
            GroSwitch::Off => 2 << 32,
        }
    }

    /// The inverse of [`GroSwitch::to_bits`].
    pub(crate) fn from_bits(b: u64) -> GroSwitch {
        match b >> 32 {
            0 => GroSwitch::On(b as u32),
            1 => GroSwitch::Draining,
            _ => GroSwitch::Off,
        }
    }
}

/// `setsockopt(IPPROTO_IP, opt, val)`; whether the kernel took it.
pub(crate) fn set_ip_opt(sock: &UdpSocket, opt: libc::c_int, val: libc::c_int) -> bool {
    set_opt(sock, libc::IPPROTO_IP, opt, val)
}

pub(crate) fn set_udp_opt(sock: &UdpSocket, opt: libc::c_int, val: libc::c_int) -> bool {
    set_opt(sock, libc::SOL_UDP, opt, val)
}

fn set_opt(sock: &UdpSocket, level: libc::c_int, opt: libc::c_int, val: libc::c_int) -> bool {
    // SAFETY: a valid fd and a c_int option value of its size.
    unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            level,
            opt,
            (&val as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        ) == 0
    }
}

/// Probes the offloads the kernel offers on `sock` among those `allowed`
/// (the device configuration's `gso` / `gro`: a packet capture on `lo` sees
/// one GSO send as one large datagram; turning them off keeps one per
/// packet) and turns GSO on. Returns the GRO state to start in: `Off` when
/// the kernel can say whether it has UDP_GRO without turning it on
/// (getsockopt, Linux 5.13) — the first large datagram turns it on
/// ([`GroSwitch`]): a socket that ever had UDP_GRO on enables the kernel's
/// UDP encapsulation path for the rest of its life, which costs every small
/// datagram (8-byte RTT 7% higher, 6 interleaved rounds). Older kernels get
/// it on at once, as before.
pub(crate) fn probe_offloads(sock: &UdpSocket, allowed: Offloads) -> (Offloads, GroSwitch) {
    // Segment size 0: per-send control messages only.
    let gso = allowed.gso && set_udp_opt(sock, UDP_SEGMENT, 0);
    if !allowed.gro {
        return (Offloads { gso, gro: false }, GroSwitch::Off);
    }
    if get_udp_opt(sock, UDP_GRO).is_some() {
        return (Offloads { gso, gro: true }, GroSwitch::Off);
    }
    let gro = set_udp_opt(sock, UDP_GRO, 1);
    (Offloads { gso, gro }, GroSwitch::On(0))
}

/// `getsockopt(SOL_UDP, opt)`, None when the kernel does not know it.
fn get_udp_opt(sock: &UdpSocket, opt: libc::c_int) -> Option<libc::c_int> {
    let mut val: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: a valid fd, and `val`/`len` valid for writing a c_int.
    let r = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_UDP,
            opt,
            (&mut val as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    (r == 0).then_some(val)
}

pub(crate) fn sockaddr_v4(a: SocketAddrV4) -> libc::sockaddr_in {
    // SAFETY: sockaddr_in is plain integers; all-zero is valid.
    let mut s: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    s.sin_family = libc::AF_INET as libc::sa_family_t;
    s.sin_port = a.port().to_be();
    s.sin_addr.s_addr = u32::from_ne_bytes(a.ip().octets());
    s
}

/// A `msghdr` for one datagram: the peer `addr`, the one buffer `iov` and
/// the first `ctrl_len` bytes of `ctrl` as control messages. The pointers
/// it holds must stay valid until the system call has returned.
pub(crate) fn msghdr(
    addr: &mut libc::sockaddr_in,
    iov: &mut libc::iovec,
    ctrl: &mut [u64; 8],
    ctrl_len: usize,
) -> libc::msghdr {
    // SAFETY: msghdr is plain integers and pointers; all-zero is valid.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = (addr as *mut libc::sockaddr_in).cast();
    msg.msg_namelen = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    msg.msg_iov = iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctrl.as_mut_ptr().cast();
    msg.msg_controllen = ctrl_len as _;
    msg
}

/// A UDP socket and the IP TOS byte its `IP_TOS` option gives every send.
///
/// A packet must leave with the TOS the engine asks for (DSCP and ECN). A
/// control message per send says it race-free — flow sockets are shared by
/// the QPs whose flows fold to one port, and a QP's CNPs use another DSCP
/// than its data — but costs a `sendmsg` where a plain `sendto` would do
/// (an 8-byte ping-pong's RTT +6 %, interleaved rounds). So the socket
/// option is set once, to the first TOS the socket sends with (a flow's
/// data TOS, nearly always), and never changed: a send with that TOS is a
/// plain `sendto`, any other carries its TOS in a control message. Until
/// the option is known, every send carries a control message.
#[derive(Debug)]
pub(crate) struct TosSocket {
    udp: UdpSocket,
    /// The option's TOS; [`TosSocket::UNSET`] before it is set,
    /// [`TosSocket::SETTING`] while one thread sets it.
    tos: std::sync::atomic::AtomicU16,
}

impl TosSocket {
    const UNSET: u16 = 0x100;
    const SETTING: u16 = 0x200;

    pub(crate) fn new(udp: UdpSocket) -> TosSocket {
        TosSocket {
            udp,
            tos: std::sync::atomic::AtomicU16::new(TosSocket::UNSET),
        }
    }

    /// The TOS a send of `tos` must carry in a control message, or None
    /// when the socket option already gives it (a plain send). The first
    /// caller sets the option to its `tos`.
    pub(crate) fn cmsg_tos(&self, tos: u8) -> Option<u8> {
        use std::sync::atomic::Ordering::{AcqRel, Acquire, Release};
        match self.tos.load(Acquire) {
            t if t == u16::from(tos) => None,
            TosSocket::UNSET => {
                if self
                    .tos
                    .compare_exchange(TosSocket::UNSET, TosSocket::SETTING, AcqRel, Acquire)
                    .is_ok()
                {
                    if set_ip_opt(&self.udp, libc::IP_TOS, libc::c_int::from(tos)) {
                        self.tos.store(u16::from(tos), Release);
                        return None;
                    }
                    // Refused: stay with control messages for good.
                    self.tos.store(TosSocket::SETTING, Release);
                }
                Some(tos)
            }
            _ => Some(tos),
        }
    }
}

impl std::ops::Deref for TosSocket {
    type Target = UdpSocket;

    fn deref(&self) -> &UdpSocket {
        &self.udp
    }
}

impl AsFd for TosSocket {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.udp.as_fd()
    }
}

/// One `sendmsg` of `data` to `to` with a UDP_SEGMENT control message of
/// `seg`: the kernel sends `data` as datagrams of `seg` bytes, the last
/// perhaps shorter; each carries the IP TOS byte `tos`.
pub(crate) fn send_segments(
    sock: &TosSocket,
    to: SocketAddrV4,
    data: &[u8],
    seg: u16,
    tos: u8,
) -> std::io::Result<()> {
    send_msg(sock, to, data, Some(seg), sock.cmsg_tos(tos))
}

/// One `sendmsg` of `data` to `to` with, as control messages, UDP_SEGMENT
/// (when `seg` is given) and IP_TOS (when `tos` is given: this send's DSCP
/// and ECN bits, whatever the socket option says).
/// A direct syscall, as rustix's sendto (see [`Net::send`]).
pub(crate) fn send_msg(
    sock: &UdpSocket,
    to: SocketAddrV4,
    data: &[u8],
    seg: Option<u16>,
    tos: Option<u8>,
) -> std::io::Result<()> {
    let mut addr = sockaddr_v4(to);
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    let hdr = std::mem::size_of::<libc::cmsghdr>();
    let align = std::mem::size_of::<usize>();
    let mut ctrl = [0u64; 8];
    let mut len = 0;
    let mut put = |level: libc::c_int, kind: libc::c_int, value: &[u8]| {
        // SAFETY: cmsghdr is plain integers; all-zero is valid.
        let mut c: libc::cmsghdr = unsafe { std::mem::zeroed() };
        c.cmsg_len = (hdr + value.len()) as _;
        c.cmsg_level = level;
        c.cmsg_type = kind;
        // SAFETY: `ctrl` is 64 bytes; two messages of at most
        // CMSG_SPACE(4) = 24 bytes each fit at 8-aligned offsets.
        unsafe {
            let p = ctrl.as_mut_ptr().cast::<u8>().add(len);
            std::ptr::write_unaligned(p.cast::<libc::cmsghdr>(), c);
            std::ptr::copy_nonoverlapping(value.as_ptr(), p.add(hdr), value.len());
        }
        len += (hdr + value.len()).div_ceil(align) * align;
    };
    if let Some(seg) = seg {
        put(libc::SOL_UDP, UDP_SEGMENT, &seg.to_ne_bytes());
    }
    if let Some(tos) = tos {
        put(
            libc::IPPROTO_IP,
            libc::IP_TOS,
            &libc::c_int::from(tos).to_ne_bytes(),
        );
    }
    let msg = msghdr(&mut addr, &mut iov, &mut ctrl, len);
    // SAFETY: every pointer in `msg` is valid for the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_sendmsg,
            sock.as_fd().as_raw_fd(),
            &msg as *const libc::msghdr,
            libc::MSG_NOSIGNAL,
        )
    };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// The IP TOS byte of a received datagram among the control messages
/// `control` (IP_RECVTOS), or None (none, or malformed).
pub(crate) fn tos_of(control: &[u8]) -> Option<u8> {
    cmsg_data(control, libc::IPPROTO_IP, libc::IP_TOS).and_then(|d| d.first().copied())
}

/// The data of the first control message of `level`/`kind` in `control`
/// (as `recvmsg` filled it), or None (absent, or the buffer is malformed).
fn cmsg_data(control: &[u8], level: libc::c_int, kind: libc::c_int) -> Option<&[u8]> {
    let hdr = std::mem::size_of::<libc::cmsghdr>();
    let align = std::mem::size_of::<usize>();
    let mut off = 0;
    while let Some(h) = control.get(off..off + hdr) {
        // SAFETY: `h` holds `hdr` bytes; cmsghdr is plain integers.
        let c: libc::cmsghdr = unsafe { std::ptr::read_unaligned(h.as_ptr().cast()) };
        let len = c.cmsg_len as usize;
        if len < hdr {
            return None;
        }
        let data = control.get(off + hdr..off + len)?;
        if c.cmsg_level == level && c.cmsg_type == kind {
            return Some(data);
        }
        off += len.div_ceil(align) * align;
    }
    None
}

#[cfg(test)]
mod offload_tests {
    use super::*;

    /// The sends a sequence of packet lengths (with ICRC) makes, as
    /// [`Net::queue`] groups them: (segment size, packets, bytes).
    fn plan(lens: &[usize]) -> Vec<(usize, usize, usize)> {
        let to = SocketAddrV4::new(Ipv4Addr::LOCALHOST, ROCE_PORT);
        let mut b = TxBatch::default();
        let mut out = Vec::new();
        let mut flush = |b: &mut TxBatch| {
            let b = std::mem::take(b);
            if b.count > 0 {
                out.push((b.seg, b.count, b.bytes));
            }
        };
        for &len in lens {
            if !b.admits(to, 0xc001, 2, len) {
                flush(&mut b);
            }
            b.add(to, 0xc001, 2, len);
            if b.closed() {
                flush(&mut b);
            }
        }
        flush(&mut b);
        out
    }

    #[test]
    fn runs_of_equal_packets_share_a_send_and_a_short_one_ends_the_run() {
        // A 64 KiB RDMA WRITE at MTU 4096: FIRST carries a RETH (4128
        // bytes), 14 MIDDLE and the LAST 4112. The second packet is shorter
        // than the first, so it ends their run; the byte limit cuts the rest.
        let mut w = vec![4128];
        w.extend([4112; 15]);
        assert_eq!(
            plan(&w),
            vec![(4128, 2, 4128 + 4112), (4112, 14, 14 * 4112)]
        );
        // Short last segment, then a single packet of another size.
        assert_eq!(
            plan(&[1052, 1052, 1052, 300, 1052]),
            vec![(1052, 4, 3 * 1052 + 300), (1052, 1, 1052)]
        );
        // One packet alone.
        assert_eq!(plan(&[64]), vec![(64, 1, 64)]);
        // A longer packet never joins a run of shorter ones.
        assert_eq!(plan(&[100, 200]), vec![(100, 1, 100), (200, 1, 200)]);
        // The kernel's segment limit: 64 small packets per send.
        assert_eq!(
            plan(&[40; 130]),
            vec![(40, 64, 2560), (40, 64, 2560), (40, 2, 80)]
        );
        // Every run keeps to the byte limit.
        for (seg, n, bytes) in plan(&[1500; 200]) {
            assert!(bytes <= GSO_MAX_BYTES && n <= GSO_MAX_SEGMENTS && seg == 1500);
        }
    }

    #[test]
    fn a_batch_is_one_destination_one_flow_and_one_tos() {
        let a = SocketAddrV4::new(Ipv4Addr::LOCALHOST, ROCE_PORT);
        let b = SocketAddrV4::new(Ipv4Addr::new(127, 77, 0, 9), ROCE_PORT);
        let mut t = TxBatch::default();
        t.add(a, 0xc001, 0x6a, 100);
        assert!(t.admits(a, 0xc001, 0x6a, 100));
        assert!(!t.admits(b, 0xc001, 0x6a, 100));
        assert!(!t.admits(a, 0xc002, 0x6a, 100));
        // A CNP (DSCP 48, Not-ECT) behind data (DSCP 26, ECT(0)).
        assert!(!t.admits(a, 0xc001, 48 << 2, 100));
    }

    #[test]
    fn gro_goes_off_after_a_run_of_small_datagrams_and_back_on_for_bulk() {
        let small = RecvSeen::Datagram { len: 40, seg: 0 };
        let mut s = GroSwitch::On(0);
        for _ in 0..GroSwitch::SMALL_RUN - 1 {
            let (n, change) = s.observe(small);
            assert_eq!(change, None);
            s = n;
        }
        // Empty polls neither count nor reset the run.
        assert_eq!(s.observe(RecvSeen::Empty), (s, None));
        let (s, change) = s.observe(small);
        assert_eq!((s, change), (GroSwitch::Draining, Some(false)));
        // Still draining: coalesced buffers queued before may wait.
        assert!(s.reads_control());
        let (s, change) = s.observe(small);
        assert_eq!((s, change), (GroSwitch::Draining, None));
        let (s, change) = s.observe(RecvSeen::Empty);
        assert_eq!((s, change), (GroSwitch::Off, None));
        assert!(!s.reads_control());
        assert_eq!(s.observe(small), (GroSwitch::Off, None));
        // A full-size packet turns GRO back on at once.
        let big = RecvSeen::Datagram {
            len: 4096 + 40,
            seg: 0,
        };
        assert_eq!(s.observe(big), (GroSwitch::On(0), Some(true)));
        assert_eq!(
            GroSwitch::Draining.observe(big),
            (GroSwitch::On(0), Some(true))
        );
    }

    #[test]
    fn bulk_traffic_keeps_gro_on() {
        let small = RecvSeen::Datagram { len: 40, seg: 0 };
        let coalesced = RecvSeen::Datagram { len: 800, seg: 400 };
        let mut s = GroSwitch::On(0);
        // ACKs among coalesced data never make a run long enough.
        for i in 0..10 * GroSwitch::SMALL_RUN {
            let seen = if i % 100 == 99 { coalesced } else { small };
            let (n, change) = s.observe(seen);
            assert_eq!(change, None, "datagram {i}");
            s = n;
        }
        assert!(matches!(s, GroSwitch::On(_)));
    }

    #[test]
    fn the_gro_switch_packs_into_bits() {
        for s in [
            GroSwitch::On(0),
            GroSwitch::On(GroSwitch::SMALL_RUN - 1),
            GroSwitch::Draining,
            GroSwitch::Off,
        ] {
            assert_eq!(GroSwitch::from_bits(s.to_bits()), s);
        }
    }

    #[test]
    fn gro_buffers_split_into_their_datagrams() {
        let buf: Vec<u8> = (0..250u8).collect();
        let parts: Vec<&[u8]> = gro_split(&buf, 100).collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [100, 100, 50]
        );
        assert_eq!(parts.concat(), buf);
        // No control message: one datagram; a segment size beyond it, too.
        assert_eq!(gro_split(&buf, 0).count(), 1);
        assert_eq!(gro_split(&buf, 4096).next().map(<[u8]>::len), Some(250));
        assert_eq!(gro_split(&buf[..100], 100).count(), 1);
        // An empty datagram (a wake-up) yields nothing to process.
        assert_eq!(gro_split(&[], 0).count(), 0);
    }

    fn cmsg(level: libc::c_int, ty: libc::c_int, data: &[u8], len: Option<usize>) -> Vec<u8> {
        let hdr = std::mem::size_of::<libc::cmsghdr>();
        // SAFETY: cmsghdr is plain integers; all-zero is valid.
        let mut c: libc::cmsghdr = unsafe { std::mem::zeroed() };
        c.cmsg_len = len.unwrap_or(hdr + data.len()) as _;
        c.cmsg_level = level;
        c.cmsg_type = ty;
        let mut v = vec![0u8; hdr];
        // SAFETY: `v` holds `hdr` bytes.
        unsafe { std::ptr::write_unaligned(v.as_mut_ptr().cast(), c) };
        v.extend_from_slice(data);
        v.resize(v.len().div_ceil(8) * 8, 0);
        v
    }

    #[test]
    fn the_gro_segment_size_is_read_from_the_control_messages() {
        let gro = cmsg(libc::SOL_UDP, UDP_GRO, &4112i32.to_ne_bytes(), None);
        assert_eq!(gro_size(&gro), 4112);
        // After another control message.
        let mut two = cmsg(libc::SOL_IP, libc::IP_TTL, &64i32.to_ne_bytes(), None);
        two.extend_from_slice(&gro);
        assert_eq!(gro_size(&two), 4112);
        // None at all, or only others.
        assert_eq!(gro_size(&[]), 0);
        assert_eq!(gro_size(&two[..gro.len()]), 0);
        // Malformed: a cut header, a length past the buffer, a length
        // below the header, a payload too short for the int, a negative.
        assert_eq!(gro_size(&gro[..7]), 0);
        assert_eq!(
            gro_size(&cmsg(libc::SOL_UDP, UDP_GRO, &[1, 0, 0, 0], Some(4096))),
            0
        );
        assert_eq!(
            gro_size(&cmsg(libc::SOL_UDP, UDP_GRO, &[1, 0, 0, 0], Some(3))),
            0
        );
        let hdr = std::mem::size_of::<libc::cmsghdr>();
        assert_eq!(
            gro_size(&cmsg(libc::SOL_UDP, UDP_GRO, &[1, 0], Some(hdr + 2))),
            0
        );
        assert_eq!(
            gro_size(&cmsg(libc::SOL_UDP, UDP_GRO, &(-5i32).to_ne_bytes(), None)),
            0
        );
    }

    /// A packet of `len` bytes (ICRC space included) for QP `dqpn`.
    fn packet(dqpn: u32, len: usize, fill: u8) -> Vec<u8> {
        let mut p = vec![fill; len];
        p[0] = 0x07; // RC RDMA WRITE MIDDLE
        p[1..5].copy_from_slice(&[0, 0xff, 0xff, 0]);
        p[5..8].copy_from_slice(&dqpn.to_be_bytes()[1..]);
        p
    }

    /// Queues `packets` ((length with ICRC, TOS); the i-th filled with i)
    /// through `a` to `dst`, from flow port `sport`, for QP `dqpn`, and
    /// flushes: every one must leave.
    fn send_all(a: &Net, dst: Ipv4Addr, sport: u16, dqpn: u32, packets: &[(usize, u8)]) {
        let (tx, err) = (AtomicU64::new(0), AtomicU64::new(0));
        let mut cache = FlowCache::default();
        let mut batch = TxBatch::default();
        let mut buf = Vec::new();
        for (i, &(len, tos)) in packets.iter().enumerate() {
            let at = batch.tail();
            buf.resize(at + len, 0);
            buf[at..].copy_from_slice(&packet(dqpn, len, i as u8));
            a.queue(
                dst,
                sport,
                tos,
                &mut cache,
                &mut batch,
                &mut buf,
                len - ICRC_LEN,
                &tx,
                &err,
            );
        }
        a.flush(&cache, &mut batch, &buf, &tx, &err);
        assert_eq!(
            (tx.load(Ordering::Relaxed), err.load(Ordering::Relaxed)),
            (packets.len() as u64, 0)
        );
    }

    /// Receives on `b` until `n` datagrams arrived (a coalesced receive's
    /// pieces counted one by one) or 5 s passed, handing each with its
    /// receive to `each`; returns how many receives that took.
    fn receive_n(b: &Net, n: usize, mut each: impl FnMut(&super::Datagram, &[u8])) -> usize {
        let (mut seen, mut recvs) = (0, 0);
        let mut rb = vec![0u8; 65536];
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while seen < n && std::time::Instant::now() < deadline {
            let Some(d) = b.try_recv(&mut rb) else {
                std::thread::sleep(Duration::from_millis(1));
                continue;
            };
            recvs += 1;
            for piece in gro_split(&rb[..d.len], d.seg) {
                each(&d, piece);
                seen += 1;
            }
        }
        recvs
    }

    /// `lens` packets queued through `a` to `b`'s endpoint; what `b`
    /// receives, split into datagrams, each checked by its ICRC.
    /// Also returns how many receives that took.
    fn round_trip(a: &Net, b: &Net, lens: &[usize]) -> (Vec<(usize, u8)>, usize) {
        let dqpn = b.qpn_base().unwrap() | 5;
        let packets: Vec<(usize, u8)> = lens.iter().map(|&l| (l, 0)).collect();
        send_all(a, a.addr(), 0xc123, dqpn, &packets);
        let (malformed, bad) = (AtomicU64::new(0), AtomicU64::new(0));
        let mut got = Vec::new();
        let recvs = receive_n(b, lens.len(), |d, piece| {
            assert_eq!(d.from.port(), 0xc123, "sent from the flow's port");
            let pkt = b
                .check_icrc(d.from, piece, &malformed, &bad)
                .expect("ICRC valid");
            got.push((piece.len(), pkt[12]));
        });
        assert_eq!((malformed.into_inner(), bad.into_inner()), (0, 0));
        (got, recvs)
    }

    /// A receiver on a configured address reads every datagram's IP TOS:
    /// what a sender asked for per send (ECT(0) data on DSCP 26, a CNP on
    /// DSCP 48), through one send, a GSO batch and the batch a TOS change
    /// cuts; and CE as a switch marks it (set here by the sender).
    #[test]
    fn each_datagram_carries_the_tos_its_send_asked_for() {
        let mut b = Net::bind(
            Some(Ipv4Addr::LOCALHOST),
            0,
            Offloads::ALL,
            false,
            SoftTransport::Udp,
        )
        .unwrap();
        assert!(b.reads_tos(), "IP_RECVTOS on a configured address");
        b.port = b.sock.local_addr().unwrap().port();
        let a = Net::bind(None, b.port, Offloads::ALL, false, SoftTransport::Udp).unwrap();
        assert!(!a.reads_tos(), "a loopback slot keeps recvfrom");
        let sends: [(usize, u8); 6] = [
            (1052, 26 << 2 | 2),
            (1052, 26 << 2 | 2),
            (1052, 26 << 2 | 3),
            (64, 48 << 2),
            (1052, 0),
            (300, 26 << 2 | 2),
        ];
        send_all(&a, Ipv4Addr::LOCALHOST, 0xc124, 17, &sends);
        let mut got = Vec::new();
        receive_n(&b, sends.len(), |d, p| {
            got.push((p.len(), d.tos, d.ce(), p[12]))
        });
        let want: Vec<_> = sends
            .iter()
            .enumerate()
            .map(|(i, &(len, tos))| (len, tos, tos & 3 == 3, i as u8))
            .collect();
        assert_eq!(got, want);
    }

    /// The first TOS a socket sends with becomes its option (plain sends
    /// from then on); every other TOS, 0 included, rides in a control
    /// message, so the option never changes under a concurrent sender.
    #[test]
    fn a_socket_option_holds_the_first_tos_and_others_go_per_send() {
        let s = TosSocket::new(UdpSocket::bind("127.0.0.1:0").unwrap());
        assert_eq!(s.cmsg_tos(0x6a), None, "the first sets the option");
        assert_eq!(
            rustix::net::sockopt::get_ip_tos(&s).unwrap(),
            0x6a,
            "as the kernel says"
        );
        assert_eq!(s.cmsg_tos(0x6a), None);
        assert_eq!(s.cmsg_tos(48 << 2), Some(48 << 2));
        assert_eq!(s.cmsg_tos(0), Some(0), "an explicit 0, not the option");
        assert_eq!(s.cmsg_tos(0x6a), None);
        assert_eq!(rustix::net::sockopt::get_ip_tos(&s).unwrap(), 0x6a);
    }

    #[test]
    fn the_tos_is_read_from_the_control_messages() {
        let tos = cmsg(libc::IPPROTO_IP, libc::IP_TOS, &[0x6b], None);
        assert_eq!(tos_of(&tos), Some(0x6b));
        let mut two = cmsg(libc::SOL_UDP, UDP_GRO, &4112i32.to_ne_bytes(), None);
        two.extend_from_slice(&tos);
        assert_eq!((tos_of(&two), gro_size(&two)), (Some(0x6b), 4112));
        assert_eq!(tos_of(&[]), None);
        assert_eq!(tos_of(&tos[..5]), None);
        let hdr = std::mem::size_of::<libc::cmsghdr>();
        assert_eq!(
            tos_of(&cmsg(libc::IPPROTO_IP, libc::IP_TOS, &[2], Some(hdr))),
            None,
            "a TOS message with no byte"
        );
    }

    /// Two loopback contexts: `b` receives, `a` sends to its endpoint.
    fn pair() -> (Net, Net) {
        let mut b = Net::bind(None, 0, Offloads::ALL, true, SoftTransport::Udp).unwrap();
        b.port = b.sock.local_addr().unwrap().port();
        let a = Net::bind(None, b.port, Offloads::ALL, true, SoftTransport::Udp).unwrap();
        (a, b)
    }

    #[test]
    fn every_packet_of_a_gso_send_arrives_as_its_own_datagram_with_its_icrc() {
        let (a, b) = pair();
        let mut lens = vec![4128];
        lens.extend([4112; 15]);
        lens.extend([1052, 1052, 300, 64]);
        let want: Vec<(usize, u8)> = lens
            .iter()
            .enumerate()
            .map(|(i, &l)| (l, i as u8))
            .collect();
        // GRO starts off where the kernel can say it has it without
        // turning it on (see `GroSwitch`): the first round then arrives one
        // datagram per packet and its first full-size packet turns it on.
        assert_eq!(round_trip(&a, &b, &lens).0, want);
        let (got, recvs) = round_trip(&a, &b, &lens);
        assert_eq!(got, want);
        if a.offloads().gso && b.offloads().gro {
            // Loopback carries a GSO send whole to a UDP_GRO socket: the
            // 20 packets leave in 4 sends ([4128, 4112], 14 × 4112,
            // [1052, 1052, 300], [64]) and arrive in as many receives.
            assert_eq!(recvs, 4, "{:?}", a.offloads());
        }
        // The same without offloads (an old kernel): one datagram per send.
        let (a, mut b) = pair();
        a.gso_max_seg.store(0, Ordering::Relaxed);
        b.offloads.gro = false;
        assert_eq!(round_trip(&a, &b, &lens), (want, lens.len()));
    }

    #[test]
    fn a_plain_receiver_sees_one_datagram_per_packet() {
        // Without UDP_GRO the kernel segments a GSO send before the socket.
        let plain = UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = plain.local_addr().unwrap().port();
        let a = Net::bind(None, port, Offloads::ALL, true, SoftTransport::Udp).unwrap();
        let (tx, err) = (AtomicU64::new(0), AtomicU64::new(0));
        let (mut cache, mut batch, mut buf) =
            (FlowCache::default(), TxBatch::default(), Vec::new());
        let lens = [1000usize, 1000, 1000, 500];
        for &len in &lens {
            let at = batch.tail();
            buf.resize(at + len, 0);
            buf[at..].copy_from_slice(&packet(9, len, 1));
            a.queue(
                Ipv4Addr::LOCALHOST,
                0xc321,
                0,
                &mut cache,
                &mut batch,
                &mut buf,
                len - 4,
                &tx,
                &err,
            );
        }
        a.flush(&cache, &mut batch, &buf, &tx, &err);
        plain
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut rb = [0u8; 65536];
        for &len in &lens {
            let (n, _) = plain.recv_from(&mut rb).unwrap();
            assert_eq!(n, len);
        }
    }

    #[test]
    fn a_refused_segmentation_is_reported_not_a_panic() {
        // More than the kernel's 64 (or 128) segments in one send: EINVAL.
        let plain = UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = match plain.local_addr().unwrap() {
            SocketAddr::V4(a) => a,
            SocketAddr::V6(_) => unreachable!(),
        };
        let data = vec![0u8; 300 * 20];
        assert!(send_segments(&TosSocket::new(plain), to, &data, 20, 0).is_err());
    }
}
