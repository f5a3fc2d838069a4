//! The raw UDP baseline of `scripts/bench-perf`: a sender/receiver pair and
//! a ping-pong pair, one process per side, moving datagrams one
//! `sendto`/`recvfrom` each (4 MiB SO_RCVBUF) — or, with `gso`, with the
//! kernel's offloads: the sender hands each message to as few sends as the
//! 64 KiB datagram limit allows, UDP_SEGMENT cutting them into `DGRAM`-byte
//! datagrams, and the receiver takes them coalesced (UDP_GRO).
//!
//! ```text
//! rdmakit-rawudp recv PORT TOTAL_BYTES [gso]      # prints one JSON line
//! rdmakit-rawudp send HOST:PORT MSGS MSG_SIZE DGRAM [gso]
//! rdmakit-rawudp pong PORT ITERS [spin]
//! rdmakit-rawudp ping HOST:PORT ITERS SIZE [spin] # prints one JSON line
//! rdmakit-rawudp memcpy TOTAL_BYTES CHUNK [BUF_BYTES]  # prints one JSON line
//! ```
//!
//! `memcpy`: the same-host baseline, one copy of `TOTAL_BYTES` in `CHUNK`
//! pieces between two buffers of `BUF_BYTES` each (default: twice the
//! last-level cache, at least 64 MiB, at most 1 GiB), walked in order so
//! every chunk comes from memory rather than the cache; both buffers are
//! written first, so no page fault is timed.
//!
//! `spin`: the ping-pong side polls a non-blocking socket instead of
//! sleeping in `recvfrom` (as `rdmakit perf`'s busy poll does): no wake-up
//! on the critical path.

use std::net::UdpSocket;
use std::process::ExitCode;
use std::time::{Duration, Instant};

fn arg<T: std::str::FromStr>(a: &[String], i: usize, what: &str) -> Result<T, String> {
    a.get(i)
        .ok_or_else(|| format!("missing {what}"))?
        .parse()
        .map_err(|_| format!("bad {what}: {:?}", a[i]))
}

fn bind(port: u16) -> Result<UdpSocket, String> {
    let s = UdpSocket::bind(("127.0.0.1", port)).map_err(|e| format!("bind: {e}"))?;
    // As the soft NIC: a 4 MiB receive buffer (best effort).
    let _ = rustix::net::sockopt::set_socket_recv_buffer_size(&s, 4 << 20);
    Ok(s)
}

/// `setsockopt(SOL_UDP, UDP_SEGMENT | UDP_GRO, v)`.
fn udp_opt(s: &UdpSocket, opt: libc::c_int, v: libc::c_int) -> Result<(), String> {
    use std::os::fd::AsRawFd;
    // SAFETY: a valid fd and a c_int option value of its size.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_UDP,
            opt,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(format!(
            "UDP offload {opt}: {}",
            std::io::Error::last_os_error()
        ))
    }
}
const UDP_SEGMENT: libc::c_int = 103;
const UDP_GRO: libc::c_int = 104;

/// One datagram: blocks, or spins on a non-blocking socket (10 s limit).
fn recv(s: &UdpSocket, buf: &mut [u8]) -> Result<(usize, std::net::SocketAddr), String> {
    let t = Instant::now();
    loop {
        match s.recv_from(buf) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if t.elapsed() > Duration::from_secs(10) {
                    return Err("no datagram for 10 s".into());
                }
            }
            r => return r.map_err(|e| e.to_string()),
        }
    }
}

/// The size of the last-level cache (sysfs; 32 MiB when unknown).
fn llc_bytes() -> usize {
    let mut best = 0;
    for i in 0..8 {
        let p = format!("/sys/devices/system/cpu/cpu0/cache/index{i}/size");
        let Ok(v) = std::fs::read_to_string(p) else {
            continue;
        };
        let v = v.trim();
        let (num, mul) = match v.strip_suffix('K') {
            Some(n) => (n, 1 << 10),
            None => match v.strip_suffix('M') {
                Some(n) => (n, 1 << 20),
                None => (v, 1),
            },
        };
        if let Ok(n) = num.parse::<usize>() {
            best = best.max(n * mul);
        }
    }
    if best == 0 {
        32 << 20
    } else {
        best
    }
}

fn run(a: &[String]) -> Result<(), String> {
    match a.first().map(String::as_str) {
        Some("recv") => {
            let s = bind(arg(a, 1, "port")?)?;
            let total: u64 = arg(a, 2, "total bytes")?;
            if a.get(3).is_some_and(|m| m == "gso") {
                udp_opt(&s, UDP_GRO, 1)?;
            }
            let mut buf = vec![0u8; 65536];
            let (mut got, mut first, mut last) = (0u64, None, Instant::now());
            s.set_read_timeout(Some(Duration::from_secs(10)))
                .map_err(|e| e.to_string())?;
            while got < total {
                match s.recv_from(&mut buf) {
                    Ok((n, _)) => {
                        if first.is_none() {
                            first = Some(Instant::now());
                            // Once: not a syscall per datagram.
                            let _ = s.set_read_timeout(Some(Duration::from_millis(300)));
                        }
                        got += n as u64;
                        last = Instant::now();
                    }
                    Err(_) => break, // idle: the sender is done (losses counted)
                }
            }
            let secs = first.map(|f| (last - f).as_secs_f64()).unwrap_or(0.0);
            println!(
                "{{\"bytes\":{got},\"expected\":{total},\"seconds\":{secs},\"MBps\":{}}}",
                if secs > 0.0 {
                    got as f64 / secs / 1_048_576.0
                } else {
                    0.0
                }
            );
            Ok(())
        }
        Some("send") => {
            let to: std::net::SocketAddr = arg(a, 1, "HOST:PORT")?;
            let msgs: u64 = arg(a, 2, "messages")?;
            let size: usize = arg(a, 3, "message size")?;
            let dgram: usize = arg(a, 4, "datagram size")?;
            let s = bind(0)?;
            // With GSO a send carries whole datagrams up to the 65507-byte
            // limit (at most 64 of them); without, one.
            let per_send = if a.get(5).is_some_and(|m| m == "gso") {
                udp_opt(&s, UDP_SEGMENT, i32::try_from(dgram).unwrap_or(0))?;
                (65507 / dgram.max(1)).clamp(1, 64) * dgram
            } else {
                dgram
            };
            let d = vec![1u8; per_send.max(1)];
            for _ in 0..msgs {
                let mut left = size;
                while left > 0 {
                    let n = left.min(per_send);
                    s.send_to(&d[..n], to).map_err(|e| e.to_string())?;
                    left -= n;
                }
            }
            Ok(())
        }
        Some("pong") => {
            let s = bind(arg(a, 1, "port")?)?;
            let iters: u64 = arg(a, 2, "iterations")?;
            let mut buf = vec![0u8; 65536];
            s.set_read_timeout(Some(Duration::from_secs(10)))
                .map_err(|e| e.to_string())?;
            let spin = a.get(3).is_some_and(|m| m == "spin");
            s.set_nonblocking(spin).map_err(|e| e.to_string())?;
            for _ in 0..iters {
                let (n, from) = recv(&s, &mut buf)?;
                s.send_to(&buf[..n], from).map_err(|e| e.to_string())?;
            }
            Ok(())
        }
        Some("ping") => {
            let to: std::net::SocketAddr = arg(a, 1, "HOST:PORT")?;
            let iters: usize = arg(a, 2, "iterations")?;
            let size: usize = arg(a, 3, "size")?;
            let s = bind(0)?;
            s.set_read_timeout(Some(Duration::from_secs(5)))
                .map_err(|e| e.to_string())?;
            let d = vec![7u8; size];
            let mut buf = vec![0u8; 65536];
            let mut rtts = Vec::with_capacity(iters);
            s.set_nonblocking(a.get(4).is_some_and(|m| m == "spin"))
                .map_err(|e| e.to_string())?;
            for _ in 0..iters {
                let t = Instant::now();
                s.send_to(&d, to).map_err(|e| e.to_string())?;
                recv(&s, &mut buf)?;
                rtts.push(t.elapsed().as_secs_f64() * 1e6);
            }
            rtts.sort_by(f64::total_cmp);
            let med = rtts.get(rtts.len() / 2).copied().unwrap_or(0.0);
            println!("{{\"iters\":{iters},\"size\":{size},\"rtt_median_usec\":{med}}}");
            Ok(())
        }
        Some("memcpy") => {
            let total: usize = arg(a, 1, "total bytes")?;
            let chunk: usize = arg(a, 2, "chunk size")?;
            let len = match a.get(3) {
                Some(_) => arg(a, 3, "buffer bytes")?,
                None => (2 * llc_bytes()).clamp(64 << 20, 1 << 30),
            };
            if chunk == 0 || chunk > len {
                return Err(format!("chunk {chunk} must be 1..={len} bytes"));
            }
            let src = vec![1u8; len];
            let mut dst = vec![2u8; len];
            let slots = len / chunk;
            let t = Instant::now();
            let (mut done, mut i) = (0usize, 0usize);
            while done < total {
                let n = chunk.min(total - done);
                let at = (i % slots) * chunk;
                dst[at..at + n].copy_from_slice(&src[at..at + n]);
                std::hint::black_box(&mut dst);
                done += n;
                i += 1;
            }
            let secs = t.elapsed().as_secs_f64();
            println!(
                "{{\"bytes\":{done},\"chunk\":{chunk},\"buffer\":{len},\"seconds\":{secs},\"MBps\":{}}}",
                done as f64 / secs.max(1e-9) / 1_048_576.0
            );
            Ok(())
        }
        _ => Err(
            "usage: rdmakit-rawudp recv|send|pong|ping|memcpy ... (see the source's docs)".into(),
        ),
    }
}

fn main() -> ExitCode {
    let a: Vec<String> = std::env::args().skip(1).collect();
    match run(&a) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rdmakit-rawudp: {e}");
            ExitCode::from(2)
        }
    }
}
