//! A paced UDP sender that sets the IP TOS byte, and a receiver that reads
//! every datagram's TOS byte (`IP_RECVTOS`): the traffic the dumbbell's own
//! tests put through the bottleneck, and a probe for anyone else's.
//!
//! Each datagram starts with the sender's id and a sequence number (both
//! big-endian u32); the receiver counts, per id, datagrams, bytes, the four
//! ECN codepoints and the DSCPs, and the highest sequence number. A sender's
//! [`Sent::sent`] minus the receiver's [`Flow::received`] is what the network
//! lost (a datagram the kernel refused to send takes no sequence number).
//!
//! Sockets come from [`super::Dumbbell::udp_socket`] (made inside a
//! namespace, used from any thread) or, in a process started in a namespace,
//! from `UdpSocket::bind`; [`SendSpec::to_env`] / [`SendSpec::from_env`]
//! carry a sender's settings to a re-executed test binary.

use std::collections::BTreeMap;
use std::io;
use std::net::{SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// The TOS byte's ECN codepoints (RFC 3168), as indexes of [`Flow::ecn`].
pub const NOT_ECT: u8 = 0;
/// ECT(1).
pub const ECT1: u8 = 1;
/// ECT(0): what RoCE NICs send (and the soft NIC's data packets carry).
pub const ECT0: u8 = 2;
/// Congestion Experienced.
pub const CE: u8 = 3;

/// The largest datagram payload a sender sends (a 1500-byte MTU less the
/// IPv4 and UDP headers).
pub const MAX_PAYLOAD: usize = 1472;

/// Distinct sender ids a receiver keeps apart; datagrams of more are
/// counted in [`Received::foreign`].
pub const MAX_FLOWS: usize = 64;

/// How many datagrams a late sender sends at once to catch up, unless its
/// [`SendSpec::max_burst`] says otherwise: more debt than this is forgiven,
/// so a sender starved of CPU does not push the queue over K by itself.
pub const CATCH_UP: u32 = 4;

/// The environment variable [`SendSpec::to_env`] sets.
pub const SEND_ENV: &str = "RDMAKIT_ECN_SEND";

/// What a sender sends.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SendSpec {
    /// Where to.
    pub dst: SocketAddrV4,
    /// The id each datagram carries.
    pub id: u32,
    /// Offered rate in Mbit/s, counting IP and UDP headers (not Ethernet's).
    pub rate_mbit: f64,
    /// How long.
    pub duration: Duration,
    /// The TOS byte: `(dscp << 2) | ecn`, e.g. `0x02` ECT(0), `0x6a` DSCP 26
    /// with ECT(0).
    pub tos: u8,
    /// Payload bytes per datagram (8 ..= [`MAX_PAYLOAD`]).
    pub size: usize,
    /// The most datagrams sent at once when the sender wakes late (1 ..=
    /// 1024); debt beyond it is forgiven ([`Sent::forgiven`]). Small keeps an
    /// uncongested link uncongested on a busy machine; large keeps the
    /// offered load exact when the point is to overload.
    pub max_burst: u32,
}

impl SendSpec {
    /// ECT(0), 1000-byte payloads (1042 bytes on the wire, as the recipe).
    pub fn ect0(dst: SocketAddrV4, id: u32, rate_mbit: f64, duration: Duration) -> SendSpec {
        SendSpec {
            dst,
            id,
            rate_mbit,
            duration,
            tos: ECT0,
            size: 1000,
            max_burst: CATCH_UP,
        }
    }

    /// Checks the bounds: rate in (0, 10000] Mbit/s, duration at most 60 s,
    /// size 8 ..= [`MAX_PAYLOAD`], burst 1 ..= 1024.
    ///
    /// # Errors
    /// Which bound is broken.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.rate_mbit > 0.0 && self.rate_mbit <= 10_000.0) {
            return Err(format!(
                "rate {} Mbit/s is not in (0, 10000]",
                self.rate_mbit
            ));
        }
        if self.duration > Duration::from_secs(60) {
            return Err(format!("duration {:?} is over 60 s", self.duration));
        }
        if !(8..=MAX_PAYLOAD).contains(&self.size) {
            return Err(format!("size {} is not in 8..={MAX_PAYLOAD}", self.size));
        }
        if !(1..=1024).contains(&self.max_burst) {
            return Err(format!("burst {} is not in 1..=1024", self.max_burst));
        }
        Ok(())
    }

    /// `(SEND_ENV, value)` for a child that calls [`SendSpec::from_env`].
    pub fn to_env(&self) -> (&'static str, String) {
        (
            SEND_ENV,
            format!(
                "{} {} {} {} {} {} {}",
                self.dst,
                self.id,
                self.rate_mbit,
                self.duration.as_millis(),
                self.tos,
                self.size,
                self.max_burst
            ),
        )
    }

    /// The spec [`SendSpec::to_env`] put in the environment.
    ///
    /// # Errors
    /// When [`SEND_ENV`] is unset or does not read as seven fields in bounds.
    pub fn from_env() -> Result<SendSpec, String> {
        let v = std::env::var(SEND_ENV).map_err(|_| format!("{SEND_ENV} is not set"))?;
        SendSpec::parse(&v)
    }

    fn parse(v: &str) -> Result<SendSpec, String> {
        let bad = || format!("{SEND_ENV}={v:?}: want DST:PORT ID MBIT MS TOS SIZE BURST");
        let w: Vec<&str> = v.split_whitespace().collect();
        if w.len() != 7 {
            return Err(bad());
        }
        let ms: u64 = w[3].parse().map_err(|_| bad())?;
        let s = SendSpec {
            dst: w[0].parse().map_err(|_| bad())?,
            id: w[1].parse().map_err(|_| bad())?,
            rate_mbit: w[2].parse().map_err(|_| bad())?,
            duration: Duration::from_millis(ms.min(3_600_000)),
            tos: w[4].parse().map_err(|_| bad())?,
            size: w[5].parse().map_err(|_| bad())?,
            max_burst: w[6].parse().map_err(|_| bad())?,
        };
        s.validate()?;
        Ok(s)
    }
}

/// What a sender did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sent {
    /// Its id.
    pub id: u32,
    /// Datagrams the kernel took (sequence numbers 0 .. sent).
    pub sent: u64,
    /// Sends the kernel refused (no sequence number spent).
    pub send_errors: u64,
    /// Datagrams skipped because the sender fell behind by more than
    /// [`SendSpec::max_burst`].
    pub forgiven: u64,
}

impl Sent {
    /// The line a child prints for its parent ([`Sent::from_output`]).
    pub fn line(&self) -> String {
        format!(
            "@@ECN-SENT {} {} {} {}",
            self.id, self.sent, self.send_errors, self.forgiven
        )
    }

    /// The [`Sent::line`] in a child's output.
    pub fn from_output(text: &str) -> Option<Sent> {
        let rest = text
            .lines()
            .find_map(|l| l.split_once("@@ECN-SENT ").map(|(_, r)| r))?;
        let n: Vec<u64> = rest
            .split_whitespace()
            .map(str::parse)
            .collect::<Result<_, _>>()
            .ok()?;
        match n[..] {
            [id, sent, send_errors, forgiven] => Some(Sent {
                id: u32::try_from(id).ok()?,
                sent,
                send_errors,
                forgiven,
            }),
            _ => None,
        }
    }
}

/// Sends `spec` from `sock` (its TOS set first), paced in 1 ms steps.
///
/// # Errors
/// A spec out of bounds, or setting IP_TOS failed.
pub fn send(sock: &UdpSocket, spec: &SendSpec) -> io::Result<Sent> {
    spec.validate()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    set_int(sock, libc::IPPROTO_IP, libc::IP_TOS, i32::from(spec.tos))?;
    let pps = spec.rate_mbit * 1e6 / 8.0 / (spec.size + 28) as f64;
    let mut buf = vec![0u8; spec.size];
    buf[..4].copy_from_slice(&spec.id.to_be_bytes());
    let mut out = Sent {
        id: spec.id,
        ..Sent::default()
    };
    let mut due_done = 0u64;
    let t0 = Instant::now();
    loop {
        let elapsed = t0.elapsed();
        if elapsed >= spec.duration {
            break;
        }
        let due = (elapsed.as_secs_f64() * pps) as u64;
        let burst = u64::from(spec.max_burst);
        if due > due_done + burst {
            out.forgiven += due - due_done - burst;
            due_done = due - burst;
        }
        while due_done < due {
            // The sequence number is the count of datagrams sent: at most
            // 10 Gbit/s for 60 s of 36-byte datagrams fits in u32.
            buf[4..8].copy_from_slice(&(out.sent as u32).to_be_bytes());
            match sock.send_to(&buf, spec.dst) {
                Ok(_) => out.sent += 1,
                Err(_) => out.send_errors += 1,
            }
            due_done += 1;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(out)
}

/// One sender's datagrams as the receiver saw them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Flow {
    /// Datagrams received.
    pub received: u64,
    /// Their payload bytes.
    pub bytes: u64,
    /// Counts by ECN codepoint: `[NOT_ECT, ECT1, ECT0, CE]`.
    pub ecn: [u64; 4],
    /// Counts by DSCP.
    pub dscp: BTreeMap<u8, u64>,
    /// The highest sequence number seen.
    pub max_seq: Option<u32>,
    /// Datagrams whose sequence number was below one seen before.
    pub reordered: u64,
}

impl Flow {
    /// The fraction of received datagrams that arrived CE (0 when none came).
    pub fn ce_fraction(&self) -> f64 {
        if self.received == 0 {
            0.0
        } else {
            self.ecn[usize::from(CE)] as f64 / self.received as f64
        }
    }

    /// Datagrams sent but not received, given the sender's count.
    pub fn lost(&self, sent: &Sent) -> u64 {
        sent.sent.saturating_sub(self.received)
    }
}

/// What a receiver saw.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Received {
    /// Per sender id.
    pub flows: BTreeMap<u32, Flow>,
    /// Datagrams too short to carry an id, of more than [`MAX_FLOWS`]
    /// senders, or without a TOS control message.
    pub foreign: u64,
    /// Datagrams the receiving socket itself dropped (`SO_RXQ_OVFL`): not
    /// the network's loss.
    pub socket_drops: u64,
}

/// Receives on `sock` until `limit` has passed, or `idle` has passed with
/// nothing after the first datagram.
///
/// # Errors
/// Setting the socket's options failed, or receiving failed other than by
/// timing out.
pub fn receive(sock: &UdpSocket, limit: Duration, idle: Duration) -> io::Result<Received> {
    set_int(sock, libc::IPPROTO_IP, libc::IP_RECVTOS, 1)?;
    set_int(sock, libc::SOL_SOCKET, libc::SO_RXQ_OVFL, 1)?;
    // Best effort: a large buffer rides out a slow wake-up of this thread.
    let _ = set_int(sock, libc::SOL_SOCKET, libc::SO_RCVBUF, 4 << 20);
    sock.set_read_timeout(Some(Duration::from_millis(20)))?;
    let end = Instant::now() + limit;
    let mut last: Option<Instant> = None;
    let mut out = Received::default();
    let mut buf = [0u8; 2048];
    while Instant::now() < end && last.map_or(true, |t| t.elapsed() < idle) {
        let (n, tos, ovfl) = match recv_tos(sock, &mut buf) {
            Ok(r) => r,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        last = Some(Instant::now());
        if let Some(d) = ovfl {
            out.socket_drops = u64::from(d);
        }
        let (Some(tos), true) = (tos, n >= 8) else {
            out.foreign += 1;
            continue;
        };
        let id = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
        let seq = u32::from_be_bytes([buf[4], buf[5], buf[6], buf[7]]);
        if !out.flows.contains_key(&id) && out.flows.len() >= MAX_FLOWS {
            out.foreign += 1;
            continue;
        }
        let f = out.flows.entry(id).or_default();
        f.received += 1;
        f.bytes += n as u64;
        f.ecn[usize::from(tos & 3)] += 1;
        *f.dscp.entry(tos >> 2).or_default() += 1;
        match f.max_seq {
            Some(m) if seq < m => f.reordered += 1,
            _ => f.max_seq = Some(seq),
        }
    }
    Ok(out)
}

/// One datagram into `buf`: its length, its TOS byte, and the socket's
/// overflow count when the kernel attached them.
fn recv_tos(sock: &UdpSocket, buf: &mut [u8]) -> io::Result<(usize, Option<u8>, Option<u32>)> {
    // u64s: aligned for cmsghdr.
    let mut control = [0u64; 16];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: an all-zero msghdr is valid (no name, no iov, no control).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control);
    // SAFETY: msg points at iov (over buf) and control, both alive and
    // writable for the call; the kernel writes within their lengths.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let (mut tos, mut ovfl) = (None, None);
    // SAFETY: msg was filled by recvmsg; the CMSG_* macros walk its control
    // buffer within msg_controllen, and each data read is within the
    // cmsg's length (checked against the size read).
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            let len = (*c).cmsg_len as usize;
            let data = libc::CMSG_DATA(c);
            let room = len.saturating_sub(libc::CMSG_LEN(0) as usize);
            match ((*c).cmsg_level, (*c).cmsg_type) {
                (libc::IPPROTO_IP, libc::IP_TOS) if room >= 1 => tos = Some(*data),
                (libc::SOL_SOCKET, libc::SO_RXQ_OVFL) if room >= 4 => {
                    ovfl = Some(std::ptr::read_unaligned(data.cast::<u32>()))
                }
                _ => {}
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n as usize, tos, ovfl))
}

fn set_int(sock: &UdpSocket, level: i32, name: i32, v: i32) -> io::Result<()> {
    // SAFETY: v lives for the call; the kernel reads size_of::<i32>() bytes.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            level,
            name,
            (&v as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> SendSpec {
        SendSpec::ect0(
            "10.77.100.2:5000".parse().unwrap(),
            3,
            6.0,
            Duration::from_secs(2),
        )
    }

    #[test]
    fn a_spec_survives_the_environment() {
        let s = SendSpec {
            tos: 0x6a,
            ..spec()
        };
        let (k, v) = s.to_env();
        assert_eq!(k, SEND_ENV);
        assert_eq!(SendSpec::parse(&v), Ok(s));
    }

    #[test]
    fn a_bad_spec_is_an_error() {
        for v in [
            "",
            "10.77.100.2:5000 3 6 2000 2 1000",
            "10.77.100.2:5000 3 6 2000 2 1000 0",
            "10.77.100.2:5000 3 6 2000 2 1000 1025",
            "10.77.100.2 3 6 2000 2 1000 4",
            "10.77.100.2:5000 3 0 2000 2 1000 4",
            "10.77.100.2:5000 3 NaN 2000 2 1000 4",
            "10.77.100.2:5000 3 6 2000 256 1000 4",
            "10.77.100.2:5000 3 6 2000 2 7 4",
            "10.77.100.2:5000 3 6 2000 2 1473 4",
            "10.77.100.2:5000 3 6 99999999 2 1000 4",
        ] {
            assert!(SendSpec::parse(v).is_err(), "{v:?}");
        }
    }

    #[test]
    fn a_sent_line_is_read_back() {
        let s = Sent {
            id: 2,
            sent: 1459,
            send_errors: 1,
            forgiven: 7,
        };
        let out = format!("running 1 test\n{}\ntest ok\n", s.line());
        assert_eq!(Sent::from_output(&out), Some(s));
        assert_eq!(Sent::from_output("@@ECN-SENT 1 2"), None);
        assert_eq!(Sent::from_output("nothing"), None);
    }

    /// On loopback (no namespace needed): the pacing gives the rate asked
    /// for, and the receiver reads the TOS byte of each datagram.
    #[test]
    fn loopback_datagrams_keep_their_tos_and_pace() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let dst = match rx.local_addr().unwrap() {
            std::net::SocketAddr::V4(a) => a,
            other => panic!("{other}"),
        };
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let s = SendSpec {
            tos: 0x6a,
            duration: Duration::from_millis(500),
            ..SendSpec::ect0(dst, 9, 2.0, Duration::ZERO)
        };
        let r = std::thread::scope(|sc| {
            let r = sc.spawn(|| receive(&rx, Duration::from_secs(5), Duration::from_millis(300)));
            let sent = send(&tx, &s).unwrap();
            (sent, r.join().unwrap().unwrap())
        });
        let (sent, got) = r;
        // 2 Mbit/s of 1028-byte datagrams for 0.5 s: 121.
        assert!((110..=122).contains(&sent.sent), "{sent:?}");
        let f = &got.flows[&9];
        assert_eq!(f.received, sent.sent, "{got:?}");
        assert_eq!(f.ecn, [0, 0, sent.sent, 0]);
        assert_eq!(f.dscp, BTreeMap::from([(26, sent.sent)]));
        assert_eq!(f.max_seq, Some(sent.sent as u32 - 1));
        assert_eq!((got.foreign, got.socket_drops), (0, 0));
    }
}
