//! Addresses and ports: which IPv4 addresses belong to the soft NIC, the
//! rdma_cm port table shared by every process of the device, and where a
//! connection request for an address goes.
//!
//! The kernel's rdma_cm owns one port table per port space for the host and
//! one listen table per device; the soft NIC's processes of one user share
//! them through files in that user's registry directory of the device
//! (`<base>/rdmakit-soft.<uid>/<device>/.cm/`, which no other user can
//! write): one
//! file per bound (port space, port, address), naming the owning process,
//! where its QP1 is reached, its device's address, and whether it listens. A file whose process is
//! gone is stale and taken over.
//!
//! The soft NIC is bound to the host's first non-loopback interface and has
//! its address (or the address it was configured with; 127.0.0.1 on a host
//! without one), and every address in 127.0.0.0/8 reaches it too — as the
//! kernel's rdma_cm binds a loopback address to the first active device.
//! Every process's context has that one GID and is told apart by QPN; QP1 has no
//! QPN of its own, so each process's connection manager is reached at its
//! context's endpoint (127.77.s.t), which the port table records. A
//! connection to a loopback address therefore goes to the device's GID, its
//! MADs to the endpoint of whichever process listens on that port (the
//! listen table), else to our own, whose connection manager rejects it
//! (invalid service ID) as Linux does.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::PathBuf;

use libc::c_int;
use rdmakit_cm::{gid_of, Peer};

/// Ephemeral ports, Linux's default `ip_local_port_range`.
const EPHEMERAL: std::ops::RangeInclusive<u16> = 32768..=60999;

/// The shared port table of a device.
#[derive(Debug, Clone)]
pub(crate) struct PortTable {
    dir: PathBuf,
}

/// A port this process holds (released by [`PortTable::release`]).
#[derive(Debug, Clone)]
pub(crate) struct PortClaim {
    path: PathBuf,
    pub port: u16,
    /// The address of the owner's device (its GID's).
    dev: Ipv4Addr,
}

struct Entry {
    /// Where the owner's QP1 is reached.
    via: Ipv4Addr,
    /// The owner's device address, when it wrote one.
    dev: Option<Ipv4Addr>,
    pid: u32,
    listen: bool,
}

fn parse(text: &str) -> Option<Entry> {
    let mut via = None;
    let mut dev = None;
    let mut pid = None;
    let mut listen = false;
    for kv in text.split_whitespace() {
        match kv.split_once('=') {
            Some(("via", v)) => via = v.parse().ok(),
            Some(("dev", v)) => dev = v.parse().ok(),
            Some(("pid", v)) => pid = v.parse().ok(),
            Some(("listen", v)) => listen = v == "1",
            _ => {}
        }
    }
    Some(Entry {
        via: via?,
        dev,
        pid: pid?,
        listen,
    })
}

fn alive(pid: u32) -> bool {
    let Ok(p) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks existence and permission.
    let r = unsafe { libc::kill(p, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

fn random_u32() -> u32 {
    let mut b = [0u8; 4];
    // SAFETY: getrandom into a 4-byte local buffer.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), 4, 0) };
    if n != 4 {
        return std::process::id().wrapping_mul(2_654_435_761);
    }
    u32::from_ne_bytes(b)
}

impl PortTable {
    pub(crate) fn new(dir: PathBuf) -> PortTable {
        PortTable { dir }
    }

    fn lock(&self) -> io::Result<File> {
        // Inside this user's own registry directory of the device: no other
        // user can write there, so it is never made world-writable.
        fs::create_dir_all(&self.dir)?;
        let f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.dir.join(".lock"))?;
        // SAFETY: flock on an fd we own; released when the File closes.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(f)
    }

    fn name(ps: u32, port: u16, bound: Ipv4Addr) -> String {
        format!("{ps:04x}-{port}-{bound}")
    }

    /// Live entries for (ps, port), with their bound addresses; stale ones
    /// are removed.
    fn entries(&self, ps: u32, port: u16) -> Vec<(Ipv4Addr, Entry)> {
        let prefix = format!("{ps:04x}-{port}-");
        let mut out = Vec::new();
        let Ok(rd) = fs::read_dir(&self.dir) else {
            return out;
        };
        for e in rd.flatten() {
            let name = e.file_name();
            let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(&prefix)) else {
                continue;
            };
            let Ok(bound) = rest.parse::<Ipv4Addr>() else {
                continue;
            };
            let mut text = String::new();
            if File::open(e.path())
                .and_then(|mut f| f.read_to_string(&mut text))
                .is_err()
            {
                continue;
            }
            match parse(&text) {
                Some(en) if alive(en.pid) => out.push((bound, en)),
                _ => {
                    let _ = fs::remove_file(e.path());
                }
            }
        }
        out
    }

    fn conflicts(&self, ps: u32, port: u16, bound: Ipv4Addr) -> bool {
        self.entries(ps, port)
            .iter()
            .any(|(b, _)| *b == bound || b.is_unspecified() || bound.is_unspecified())
    }

    /// Claims `port` (0: a free ephemeral port) on `bound` in port space
    /// `ps` for this process, whose QP1 is reached at `via` and whose
    /// device has the address `dev`.
    ///
    /// # Errors
    /// `EADDRINUSE` when taken (or no ephemeral port is free); the errno of
    /// a shared directory that cannot be written.
    pub(crate) fn claim(
        &self,
        ps: u32,
        bound: Ipv4Addr,
        port: u16,
        via: Ipv4Addr,
        dev: Ipv4Addr,
    ) -> Result<PortClaim, c_int> {
        let _g = self
            .lock()
            .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))?;
        let port = if port != 0 {
            if self.conflicts(ps, port, bound) {
                return Err(libc::EADDRINUSE);
            }
            port
        } else {
            let span = u32::from(EPHEMERAL.end() - EPHEMERAL.start()) + 1;
            let start = random_u32() % span;
            let found = (0..span)
                .map(|i| EPHEMERAL.start() + ((start + i) % span) as u16)
                .find(|&p| !self.conflicts(ps, p, bound));
            found.ok_or(libc::EADDRINUSE)?
        };
        let path = self.dir.join(Self::name(ps, port, bound));
        let mut f = File::create(&path).map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))?;
        writeln!(f, "via={via} dev={dev} pid={} listen=0", std::process::id())
            .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))?;
        Ok(PortClaim { path, port, dev })
    }

    /// Marks a claim as listening.
    pub(crate) fn set_listening(&self, c: &PortClaim, via: Ipv4Addr) {
        if let Ok(_g) = self.lock() {
            let _ = fs::write(
                &c.path,
                format!(
                    "via={via} dev={} pid={} listen=1\n",
                    c.dev,
                    std::process::id()
                ),
            );
        }
    }

    /// Gives a port back.
    pub(crate) fn release(&self, c: &PortClaim) {
        if let Ok(_g) = self.lock() {
            let _ = fs::remove_file(&c.path);
        }
    }

    /// Where the QP1 of the process that owns (ps, port) for `dst` is, and
    /// its device's address if it wrote one: a listener bound to exactly
    /// `dst`, else one on the wildcard address, else a process that bound
    /// the port but does not listen (yet) — its connection manager
    /// answers, as the kernel's would for the host.
    pub(crate) fn listener(
        &self,
        ps: u32,
        port: u16,
        dst: Ipv4Addr,
    ) -> Option<(Ipv4Addr, Option<Ipv4Addr>)> {
        let _g = self.lock().ok()?;
        let es = self.entries(ps, port);
        let pick = |listen: bool| {
            es.iter()
                .find(|(b, e)| e.listen == listen && *b == dst)
                .or_else(|| {
                    es.iter()
                        .find(|(b, e)| e.listen == listen && b.is_unspecified())
                })
                .map(|(_, e)| (e.via, e.dev))
        };
        pick(true).or_else(|| pick(false))
    }
}

/// Whether `a` is an address of this host (some interface has it).
pub(crate) fn host_has(a: Ipv4Addr) -> bool {
    UdpSocket::bind(SocketAddrV4::new(a, 0)).is_ok()
}

/// Whether `a` is one of the soft NIC's addresses: its own, or loopback
/// (which the kernel's rdma_cm binds to the first active device).
pub(crate) fn is_soft(a: Ipv4Addr, dev: Ipv4Addr) -> bool {
    a == dev || a.is_loopback()
}

/// Where a connection to `dst` (port space `ps`, port `port`) goes: the
/// peer's GID and where its connection manager gets the request, or the
/// errno of `ADDR_ERROR`. `dev` is the device's address, `me` where our own
/// QP1 is reached.
pub(crate) fn route(
    table: &PortTable,
    dev: Ipv4Addr,
    me: Ipv4Addr,
    ps: u32,
    dst: Ipv4Addr,
    port: u16,
) -> Result<Peer, c_int> {
    if dst.is_unspecified() || is_soft(dst, dev) {
        // This device: its one GID; the MADs to the owner of the port. A
        // soft NIC configured with another address than ours on this host
        // (another process's) owns the port: its GID, as the connection
        // then runs between the two devices.
        let (via, owner) = table.listener(ps, port, dst).unwrap_or((me, None));
        return Ok(Peer {
            gid: gid_of(owner.unwrap_or(dev)),
            via: gid_of(via),
        });
    }
    if dev.is_loopback() || me != dev {
        // The soft NIC as it comes (its contexts reached at private
        // loopback endpoints, not at its address) keeps its packets on this
        // host: nothing else reaches it, and nothing it sends leaves.
        return Err(crate::guard::why(
            libc::ENETUNREACH,
            format_args!(
                "{dst} is not reachable from the soft NIC on {dev}: as it comes, its traffic \
                 stays on this host; set RDMAKIT_SOFT_ADDR to this host's address on the way \
                 to {dst}"
            ),
        ));
    }
    if host_has(dst) {
        // Another interface of this host, without an RDMA device on it.
        return Err(crate::guard::why(
            libc::ENODEV,
            format_args!("{dst} belongs to an interface without an RDMA device"),
        ));
    }
    Ok(Peer::at(gid_of(dst)))
}
