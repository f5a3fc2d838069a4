//! An open umad port: discovery (CA and port), agents, and the
//! [`transact::Io`] that moves MADs through libibumad.

use std::ffi::{c_char, c_int, c_void, CString};
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Layer, MadError};
use crate::library::{Library, UmadCa, CA_MAX_PORTS, CA_NAME_LEN, MAX_DEVICES};
use crate::transact::{self, Dest, Policy, Received, Request, Stats, MAD_LEN, PERMISSIVE_LID};

/// The most agents one port registers (the kernel's limit per file).
pub const MAX_AGENTS: usize = 32;

/// What libibumad reports about the opened port (from sysfs when it was
/// opened: under the umad2sim preload that snapshot does not change).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortInfo {
    /// CA name (`mlx5_0`, `ibsim0`).
    pub ca: String,
    /// Port number.
    pub port: u8,
    /// The port's base LID.
    pub lid: u16,
    /// LMC.
    pub lmc: u8,
    /// The SM's LID as the port knows it.
    pub sm_lid: u16,
    /// Logical state (1 Down, 2 Init, 3 Armed, 4 Active).
    pub state: u8,
    /// Physical state (5 LinkUp).
    pub phys_state: u8,
    /// Port GUID (host order).
    pub port_guid: u64,
    /// "InfiniBand" or "Ethernet".
    pub link_layer: String,
}

/// A registered agent: the id libibumad returned for a class and version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Agent {
    /// Agent id.
    pub id: i32,
    /// Management class.
    pub class: u8,
    /// Class version.
    pub class_version: u8,
}

/// An open umad port. Not shared between threads; dropping it unregisters
/// its agents and closes it.
pub struct Port {
    lib: Arc<Library>,
    fd: c_int,
    info: PortInfo,
    agents: Vec<Agent>,
    state: transact::State,
    /// `umad_size()` plus a MAD: one send or receive buffer.
    buf_len: usize,
}

impl std::fmt::Debug for Port {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Port")
            .field("fd", &self.fd)
            .field("info", &self.info)
            .finish()
    }
}

impl Port {
    /// Opens a port through the default libibumad ([`Library::load_default`]):
    /// `ca` and `port` when both are given, otherwise the first Active port
    /// that matches what is given.
    ///
    /// # Errors
    /// libibumad missing (library layer); no umad device or ib_umad not
    /// loaded (kernel layer); permission on `/dev/infiniband/umad*`
    /// (application layer); no Active port (fabric layer).
    pub fn open(ca: Option<&str>, port: Option<u8>) -> Result<Port, Error> {
        Port::open_with(Library::load_default()?, ca, port)
    }

    /// [`Port::open`] through an already loaded libibumad.
    ///
    /// # Errors
    /// As [`Port::open`].
    pub fn open_with(lib: Arc<Library>, ca: Option<&str>, port: Option<u8>) -> Result<Port, Error> {
        // SAFETY: no arguments; libibumad's own initialisation.
        let rc = unsafe { (lib.f.init)() };
        if rc < 0 {
            return Err(Error::new(
                "umad_init",
                19,
                Layer::Kernel,
                "cannot read /sys/class/infiniband_mad/abi_version: the ib_umad kernel module \
                 is not loaded (modprobe ib_umad) or this host has no InfiniBand device",
            ));
        }
        let info = choose(&lib, ca, port)?;
        let name = CString::new(info.ca.as_str()).map_err(|_| {
            Error::new(
                "umad_open_port",
                22,
                Layer::Application,
                "CA name holds NUL",
            )
        })?;
        // SAFETY: `name` is NUL-terminated and outlives the call.
        let fd = unsafe { (lib.f.open_port)(name.as_ptr(), c_int::from(info.port)) };
        if fd < 0 {
            let os = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
            return Err(open_error(fd, os, &info));
        }
        // SAFETY: no arguments; valid after umad_open_port chose the ABI.
        let hdr = unsafe { (lib.f.size)() };
        if hdr == 0 || hdr > 1024 {
            // SAFETY: `fd` is the port just opened.
            unsafe { (lib.f.close_port)(fd) };
            return Err(Error::new(
                "umad_size",
                71,
                Layer::Library,
                format!("implausible umad header size {hdr}"),
            ));
        }
        Ok(Port {
            lib,
            fd,
            info,
            agents: Vec::new(),
            state: transact::State::default(),
            buf_len: hdr + MAD_LEN,
        })
    }

    /// The port that was opened.
    pub fn info(&self) -> &PortInfo {
        &self.info
    }

    /// What this port counted (sent, replies, timeouts, dropped replies).
    pub fn stats(&self) -> Stats {
        self.state.stats
    }

    /// The agent for `class` / `class_version`, registered on first use
    /// (SMI classes 0x01 and 0x81 on QP0, the others on QP1).
    ///
    /// # Errors
    /// `umad_register` failing (kernel layer), or more than [`MAX_AGENTS`]
    /// (application layer).
    pub fn agent(&mut self, class: u8, class_version: u8) -> Result<Agent, Error> {
        if let Some(a) = self
            .agents
            .iter()
            .find(|a| a.class == class && a.class_version == class_version)
        {
            return Ok(*a);
        }
        if self.agents.len() >= MAX_AGENTS {
            return Err(Error::new(
                "umad_register",
                28,
                Layer::Application,
                format!("more than {MAX_AGENTS} agents on one port"),
            ));
        }
        // SAFETY: `fd` is open; a null method mask registers no unsolicited
        // methods (a client agent).
        let id = unsafe {
            (self.lib.f.register)(
                self.fd,
                c_int::from(class),
                c_int::from(class_version),
                0,
                std::ptr::null_mut(),
            )
        };
        if id < 0 {
            return Err(Error::new(
                "umad_register",
                id,
                Layer::Kernel,
                format!("cannot register an agent for class 0x{class:02x} version {class_version} on {}", self.where_()),
            ));
        }
        let a = Agent {
            id,
            class,
            class_version,
        };
        self.agents.push(a);
        Ok(a)
    }

    /// Sends every request and waits for its reply under `policy` (see
    /// [`crate::transact`] for the window, TID, timeout and retry rules).
    /// The result at index `i` is the reply to `reqs[i]`.
    pub fn transact(
        &mut self,
        reqs: &[Request],
        policy: &Policy,
    ) -> Vec<Result<[u8; MAD_LEN], MadError>> {
        let mut state = std::mem::take(&mut self.state);
        let out = transact::run(self, &mut state, reqs, policy);
        self.state = state;
        out
    }

    /// One request under `policy`.
    ///
    /// # Errors
    /// As the elements of [`Port::transact`].
    pub fn transact1(&mut self, req: &Request, policy: &Policy) -> Result<[u8; MAD_LEN], MadError> {
        self.transact(std::slice::from_ref(req), policy)
            .pop()
            .unwrap_or(Err(MadError::Invalid("no result")))
    }

    fn where_(&self) -> String {
        format!("{} port {}", self.info.ca, self.info.port)
    }
}

impl transact::Io for Port {
    fn send(&mut self, req: &Request, mad: &[u8; MAD_LEN], timeout_ms: u64) -> Result<(), Error> {
        let agent = self.agent(req.class, mad[2])?;
        let (lid, qp, qkey, sl) = match req.dest {
            Dest::Lid { lid, qp, qkey, sl } => (lid, qp, qkey, sl),
            Dest::Directed => (PERMISSIVE_LID, 0, 0, 0),
        };
        let mut buf = vec![0u8; self.buf_len];
        let p = buf.as_mut_ptr().cast::<c_void>();
        let off = self.mad_offset(p)?;
        buf[off..off + MAD_LEN].copy_from_slice(mad);
        let p = buf.as_mut_ptr().cast::<c_void>();
        // SAFETY: `p` is a zeroed umad buffer of umad_size() + 256 bytes.
        unsafe {
            (self.lib.f.set_addr)(
                p,
                c_int::from(lid),
                qp as c_int,
                c_int::from(sl),
                qkey as c_int,
            )
        };
        let t = timeout_ms.min(c_int::MAX as u64) as c_int;
        // SAFETY: as above; libibumad writes umad_size() + 256 bytes of it.
        let rc = unsafe { (self.lib.f.send)(self.fd, agent.id, p, MAD_LEN as c_int, t, 0) };
        if rc < 0 {
            let os = std::io::Error::last_os_error()
                .raw_os_error()
                .filter(|e| *e != 0)
                .unwrap_or(-rc);
            return Err(Error::new(
                "umad_send",
                os,
                Layer::Kernel,
                format!("cannot send a MAD on {}", self.where_()),
            ));
        }
        Ok(())
    }

    fn recv(&mut self, wait: Duration) -> Result<Received, Error> {
        let mut buf = vec![0u8; self.buf_len];
        let p = buf.as_mut_ptr().cast::<c_void>();
        let mut len: c_int = MAD_LEN as c_int;
        let ms = (wait.as_millis() as u64).clamp(1, c_int::MAX as u64) as c_int;
        // SAFETY: `p` has umad_size() + `len` bytes; libibumad reads at most that.
        let rc = unsafe { (self.lib.f.recv)(self.fd, p, &mut len, ms) };
        match rc {
            // ETIMEDOUT: nothing within the wait. EWOULDBLOCK: woken with
            // nothing queued (umad2sim's read returns -11 on an empty queue).
            -110 | -11 => return Ok(Received::Nothing),
            rc if rc < 0 => {
                return Err(Error::new(
                    "umad_recv",
                    rc,
                    Layer::Kernel,
                    format!("cannot receive on {}", self.where_()),
                ))
            }
            _ => {}
        }
        // SAFETY: `p` is the umad buffer libibumad just filled.
        let status = unsafe { (self.lib.f.status)(p) };
        let off = self.mad_offset(p)?;
        let mut mad = Box::new([0u8; MAD_LEN]);
        mad.copy_from_slice(&buf[off..off + MAD_LEN]);
        let len = usize::try_from(len).unwrap_or(0).min(MAD_LEN);
        Ok(Received::Mad { status, len, mad })
    }
}

impl Port {
    /// Where libibumad puts the MAD in a umad buffer, checked to leave 256
    /// bytes inside it.
    fn mad_offset(&self, p: *mut c_void) -> Result<usize, Error> {
        // SAFETY: `p` points at a umad buffer; umad_get_mad only computes.
        let m = unsafe { (self.lib.f.get_mad)(p) };
        let off = (m as usize).wrapping_sub(p as usize);
        if off + MAD_LEN > self.buf_len {
            return Err(Error::new(
                "umad_get_mad",
                71,
                Layer::Library,
                format!("MAD offset {off} outside the buffer"),
            ));
        }
        Ok(off)
    }
}

impl Drop for Port {
    fn drop(&mut self) {
        for a in self.agents.drain(..) {
            // SAFETY: `fd` is open and `a.id` was registered on it.
            unsafe { (self.lib.f.unregister)(self.fd, a.id) };
        }
        // SAFETY: `fd` is open and not used after this.
        unsafe { (self.lib.f.close_port)(self.fd) };
    }
}

/// Picks the CA and port: both given → that one; otherwise the first
/// Active port matching what is given, CAs in libibumad's (sorted) order.
fn choose(lib: &Library, ca: Option<&str>, port: Option<u8>) -> Result<PortInfo, Error> {
    let mut names = [[0 as c_char; CA_NAME_LEN]; MAX_DEVICES];
    // SAFETY: `names` has MAX_DEVICES entries of CA_NAME_LEN bytes.
    let n = unsafe { (lib.f.get_cas_names)(names.as_mut_ptr(), MAX_DEVICES as c_int) };
    let n = usize::try_from(n).unwrap_or(0).min(MAX_DEVICES);
    let mut seen = Vec::new();
    let mut present = Vec::new();
    for raw in names.iter().take(n) {
        let name = c_text(raw);
        // libibumad answers "mthca0" when it finds no CA at all: a CA it
        // cannot read is skipped, and if none is left, that is the error.
        let Ok(ports) = ca_ports(lib, &name) else {
            continue;
        };
        present.extend(ports.iter().map(|p| format!("{} port {}", p.ca, p.port)));
        if ca.is_some_and(|c| c != name) {
            continue;
        }
        for p in ports {
            if port.is_some_and(|want| want != p.port) {
                continue;
            }
            if (ca.is_some() && port.is_some()) || p.state == 4 {
                return Ok(p);
            }
            seen.push(format!("{} port {} state {}", p.ca, p.port, p.state));
        }
    }
    let wanted = match (ca, port) {
        (Some(c), Some(p)) => format!("{c} port {p}"),
        (Some(c), None) => format!("Active port of {c}"),
        (None, Some(p)) => format!("Active port {p}"),
        (None, None) => "Active port".to_string(),
    };
    Err(if present.is_empty() {
        Error::new(
            "umad_get_ca",
            19,
            Layer::Kernel,
            "no InfiniBand CA under /sys/class/infiniband: no RDMA device, or its driver \
             or ib_umad is not loaded (modprobe ib_umad)",
        )
    } else if seen.is_empty() {
        Error::new(
            "umad_get_ca",
            19,
            Layer::Application,
            format!("found no {wanted}: this host has {}", present.join(", ")),
        )
    } else {
        Error::new(
            "umad_get_ca",
            100,
            Layer::Fabric,
            format!(
                "found no {wanted}: {} (state 2 Init means no subnet manager has configured the port)",
                seen.join(", ")
            ),
        )
    })
}

/// The ports of CA `name`, released before returning.
fn ca_ports(lib: &Library, name: &str) -> Result<Vec<PortInfo>, i32> {
    let c = CString::new(name).map_err(|_| 22)?;
    // SAFETY: UmadCa is plain old data; all-zero is a valid value.
    let mut ca: UmadCa = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is NUL-terminated, `ca` is a umad_ca_t for libibumad to fill.
    let rc = unsafe { (lib.f.get_ca)(c.as_ptr(), &mut ca) };
    if rc < 0 {
        return Err(-rc);
    }
    let mut out = Vec::new();
    for (i, &p) in ca.ports.iter().enumerate().take(CA_MAX_PORTS) {
        if p.is_null() {
            continue;
        }
        // SAFETY: umad_get_ca filled non-null entries with ports it owns
        // until umad_release_ca below.
        let p = unsafe { &*p };
        let portnum = u8::try_from(p.portnum).unwrap_or(i as u8);
        out.push(PortInfo {
            ca: c_text(&ca.ca_name),
            port: portnum,
            lid: p.base_lid as u16,
            lmc: p.lmc as u8,
            sm_lid: p.sm_lid as u16,
            state: p.state.min(255) as u8,
            phys_state: p.phys_state.min(255) as u8,
            port_guid: u64::from_be(p.port_guid),
            link_layer: c_text(&p.link_layer),
        });
    }
    // SAFETY: `ca` was filled by umad_get_ca and is released once.
    unsafe { (lib.f.release_ca)(&mut ca) };
    Ok(out)
}

fn open_error(rc: c_int, os: i32, info: &PortInfo) -> Error {
    let at = format!("{} port {}", info.ca, info.port);
    match (rc, os) {
        (_, 13) | (_, 1) => Error::new(
            "umad_open_port",
            os,
            Layer::Application,
            format!("no permission on /dev/infiniband/umad* for {at}: run as root or add a udev rule giving this user the umad devices"),
        ),
        (_, 2) | (-19, _) | (-22, _) => Error::new(
            "umad_open_port",
            if os != 0 { os } else { -rc },
            Layer::Kernel,
            format!("no umad device for {at}: the ib_umad kernel module is not loaded (modprobe ib_umad)"),
        ),
        _ => Error::new(
            "umad_open_port",
            if os != 0 { os } else { -rc },
            Layer::Kernel,
            format!("cannot open the umad device of {at}"),
        ),
    }
}

fn c_text(raw: &[c_char]) -> String {
    let bytes: Vec<u8> = raw
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> PortInfo {
        PortInfo {
            ca: "mlx5_0".into(),
            port: 1,
            lid: 0,
            lmc: 0,
            sm_lid: 0,
            state: 4,
            phys_state: 5,
            port_guid: 0,
            link_layer: "InfiniBand".into(),
        }
    }

    #[test]
    fn open_failures_name_their_layer_and_remedy() {
        // umad_open_port returns -EIO and leaves open()'s errno.
        let e = open_error(-5, 13, &info());
        assert_eq!(
            (e.verb, e.errno, e.layer),
            ("umad_open_port", 13, Layer::Application)
        );
        assert!(e.detail.contains("run as root or add a udev rule"), "{e}");
        let e = open_error(-5, 2, &info());
        assert_eq!((e.errno, e.layer), (2, Layer::Kernel));
        assert!(e.to_string().contains("modprobe ib_umad"), "{e}");
        let e = open_error(-19, 0, &info());
        assert_eq!((e.errno, e.layer), (19, Layer::Kernel));
        let e = open_error(-5, 16, &info());
        assert_eq!((e.errno, e.layer), (16, Layer::Kernel));
        assert!(e.to_string().contains("mlx5_0 port 1"), "{e}");
    }

    #[test]
    fn c_text_stops_at_nul_and_at_the_end() {
        let raw: Vec<c_char> = b"ibsim0\0junk".iter().map(|&b| b as c_char).collect();
        assert_eq!(c_text(&raw), "ibsim0");
        let full: Vec<c_char> = b"abc".iter().map(|&b| b as c_char).collect();
        assert_eq!(c_text(&full), "abc");
    }
}
