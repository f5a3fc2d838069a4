//! A capture of the RoCEv2 datagrams on the loopback interface, for tests
//! that assert what a soft NIC puts on the wire: each packet's IP TOS byte
//! (DSCP and ECN), its UDP ports and its BTH opcode. An `AF_PACKET` socket
//! on `lo` (CAP_NET_RAW; without it the test skips unless
//! `RDMAKIT_REQUIRE_ROOT` is set) read by a thread until [`LoCapture::finish`].
//! Every test on the host that sends RoCEv2 over `lo` shows up here: a test
//! picks its own packets by a DSCP nothing else uses.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The RoCEv2 UDP port.
const ROCE_PORT: u16 = 4791;
/// Packets kept at most; the rest are not recorded.
const MAX_PACKETS: usize = 500_000;
/// How long [`LoCapture::finish`] reads what was queued before it.
const DRAIN: Duration = Duration::from_secs(1);

/// One RoCEv2 datagram seen on `lo`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet {
    /// The IPv4 TOS byte.
    pub tos: u8,
    /// Source address and UDP port.
    pub src: SocketAddrV4,
    /// Destination address and UDP port (4791).
    pub dst: SocketAddrV4,
    /// The BTH opcode.
    pub opcode: u8,
}

impl Packet {
    /// The DSCP (the TOS byte's high six bits).
    pub fn dscp(&self) -> u8 {
        self.tos >> 2
    }

    /// The ECN bits (the low two).
    pub fn ecn(&self) -> u8 {
        self.tos & 0b11
    }
}

/// A running capture.
#[derive(Debug)]
pub struct LoCapture {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Vec<Packet>>>,
}

impl LoCapture {
    /// Starts capturing on `lo`. None when the process may not open a packet
    /// socket (the test skips, saying so on stderr), unless
    /// `RDMAKIT_REQUIRE_ROOT` is set: then it panics.
    pub fn start() -> Option<LoCapture> {
        let fd = match open_lo() {
            Ok(fd) => fd,
            Err(e) => {
                assert!(
                    std::env::var_os("RDMAKIT_REQUIRE_ROOT").is_none(),
                    "a packet socket on lo: {e}; RDMAKIT_REQUIRE_ROOT is set"
                );
                eprintln!("SKIP: no packet socket on lo ({e}): needs CAP_NET_RAW");
                return None;
            }
        };
        let stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&stop);
        let thread = std::thread::spawn(move || read_until(&fd, &s));
        Some(LoCapture {
            stop,
            thread: Some(thread),
        })
    }

    /// Stops the capture and returns what it saw, oldest first (at most
    /// 500,000 packets).
    pub fn finish(mut self) -> Vec<Packet> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .map(|t| t.join().unwrap_or_default())
            .unwrap_or_default()
    }
}

impl Drop for LoCapture {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A packet socket for IPv4 on `lo`, reads timing out every 50 ms.
fn open_lo() -> std::io::Result<OwnedFd> {
    let proto = (libc::ETH_P_IP as u16).to_be();
    // SAFETY: plain socket(2).
    let raw = unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            libc::c_int::from(proto),
        )
    };
    if raw < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: a NUL-terminated name.
    let ifindex = unsafe { libc::if_nametoindex(c"lo".as_ptr()) };
    if ifindex == 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: sockaddr_ll is plain data; zero is its empty value.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = proto;
    sll.sll_ifindex = ifindex as i32;
    // SAFETY: `sll` is a sockaddr_ll of its size.
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sll as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let tv = libc::timeval {
        tv_sec: 0,
        tv_usec: 50_000,
    };
    let buf: libc::c_int = 8 << 20;
    // SAFETY: options of their sizes on a live socket.
    unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        );
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&buf as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
    Ok(fd)
}

/// Reads packets until `stop`, then what is still queued (a loopback
/// packet is queued here as it is sent, so nothing sent before `stop` is
/// missed), keeping the RoCEv2 ones (each once: a loopback packet is seen
/// leaving and arriving; the leaving copy is skipped).
fn read_until(fd: &OwnedFd, stop: &AtomicBool) -> Vec<Packet> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 65536];
    // Other tests' traffic may keep coming: the drain stops after a second.
    let mut drain_until = None;
    loop {
        let flags = if stop.load(Ordering::Relaxed) {
            let until = *drain_until.get_or_insert_with(|| Instant::now() + DRAIN);
            if Instant::now() >= until {
                break;
            }
            libc::MSG_DONTWAIT
        } else {
            0
        };
        // SAFETY: sockaddr_ll is plain data.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        // SAFETY: `buf` and `sll` are writable for the sizes given.
        let n = unsafe {
            libc::recvfrom(
                fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                flags,
                (&mut sll as *mut libc::sockaddr_ll).cast(),
                &mut len,
            )
        };
        let Ok(n) = usize::try_from(n) else {
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EAGAIN) if flags == 0 => continue,
                Some(libc::EINTR) => continue,
                _ => break,
            }
        };
        if sll.sll_pkttype == libc::PACKET_OUTGOING || out.len() >= MAX_PACKETS {
            continue;
        }
        if let Some(p) = parse(&buf[..n]) {
            out.push(p);
        }
    }
    out
}

/// A RoCEv2 datagram from an IPv4 header on: None for anything else.
fn parse(ip: &[u8]) -> Option<Packet> {
    if ip.len() < 20 || ip[0] >> 4 != 4 || ip[9] != libc::IPPROTO_UDP as u8 {
        return None;
    }
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    let udp = ip.get(ihl..)?;
    let port = |at: usize| u16::from_be_bytes([udp[at], udp[at + 1]]);
    if udp.len() < 9 || port(2) != ROCE_PORT {
        return None;
    }
    let addr = |at: usize| Ipv4Addr::new(ip[at], ip[at + 1], ip[at + 2], ip[at + 3]);
    Some(Packet {
        tos: ip[1],
        src: SocketAddrV4::new(addr(12), port(0)),
        dst: SocketAddrV4::new(addr(16), port(2)),
        opcode: udp[8],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_takes_tos_ports_and_opcode_of_a_rocev2_datagram() {
        let mut p = [0u8; 40];
        p[0] = 0x45;
        p[1] = 0x6a;
        p[9] = 17;
        p[12..16].copy_from_slice(&[127, 0, 0, 1]);
        p[16..20].copy_from_slice(&[127, 0, 0, 2]);
        p[20..22].copy_from_slice(&0xc123u16.to_be_bytes());
        p[22..24].copy_from_slice(&ROCE_PORT.to_be_bytes());
        p[28] = 0x0a;
        let got = parse(&p).unwrap();
        assert_eq!((got.dscp(), got.ecn(), got.opcode), (26, 0b10, 0x0a));
        assert_eq!(got.src, "127.0.0.1:49443".parse().unwrap());
        p[22..24].copy_from_slice(&53u16.to_be_bytes());
        assert_eq!(parse(&p), None, "not RoCEv2");
        assert_eq!(parse(&p[..25]), None, "truncated");
    }
}
