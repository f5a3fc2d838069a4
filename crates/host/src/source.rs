//! The one interface every host fact is read through.
//!
//! A [`Source`] answers five kinds of question, each keyed by an absolute host path
//! (or, for [`Source::probe`], a probe name): read a file, list a directory, read a
//! symlink, stat a path, and run a probe (facts that are not files: the collecting
//! process's RLIMIT_MEMLOCK, whether a NETLINK_RDMA socket can be opened, access(2)
//! for the current user, the kernel log ring).
//!
//! Three implementations exist: [`LiveSource`] (the running host, rooted at `/` or at
//! a captured tree), [`Recorder`] (wraps any source and keeps every answer), and
//! [`crate::bundle::Bundle`] (replays what a recorder kept). Collectors only ever see
//! `&dyn Source`, so a replay runs exactly the code a live run did.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::bounded::{self, Cap};
use crate::errno;

/// Files larger than this are truncated when read (sysfs attributes are < 4 KiB;
/// the largest thing collected is a kernel log).
pub const MAX_READ: usize = 8 << 20;

/// A failed read, as the kernel reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Errno(pub i32);

impl Errno {
    pub const ENOENT: Errno = Errno(2);
    pub const EIO: Errno = Errno(5);
    pub const EACCES: Errno = Errno(13);
    pub const EINVAL: Errno = Errno(22);
    pub const EPERM: Errno = Errno(1);
    pub const ENOTDIR: Errno = Errno(20);
    pub const EAGAIN: Errno = Errno(11);
    pub const EPROTONOSUPPORT: Errno = Errno(93);
    /// The driver has no such operation (ethtool, DCB).
    pub const EOPNOTSUPP: Errno = Errno(95);
    pub const ENODEV: Errno = Errno(19);
    /// A file over its cap ([`crate::bounded`]).
    pub const EFBIG: Errno = Errno(27);
    /// A pipe that did not end in time ([`crate::bounded`]).
    pub const ETIMEDOUT: Errno = Errno(110);

    /// "EINVAL", or "errno N" for numbers this crate does not name.
    pub fn name(self) -> String {
        errno::display(self.0)
    }

    pub(crate) fn from_io(e: &io::Error) -> Errno {
        match e.raw_os_error() {
            Some(n) => Errno(n),
            None => match e.kind() {
                io::ErrorKind::NotFound => Errno::ENOENT,
                io::ErrorKind::PermissionDenied => Errno::EACCES,
                io::ErrorKind::InvalidInput | io::ErrorKind::InvalidData => Errno::EINVAL,
                _ => Errno::EIO,
            },
        }
    }
}

impl std::fmt::Display for Errno {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

/// What a directory entry is, as `readdir` + `lstat` tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    File,
    Dir,
    Symlink,
    Char,
    Block,
    Other,
}

/// One directory entry.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Entry {
    pub name: String,
    pub kind: Kind,
}

/// What `lstat` says about a path (device nodes and PCI resource files need this).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meta {
    pub kind: Kind,
    /// Permission bits (`st_mode & 0o7777`).
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    /// `(major, minor)` for device nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdev: Option<(u32, u32)>,
    pub size: u64,
}

/// Facts that are not files. Each has a stable name, which is its key in a bundle.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Probe {
    /// getrlimit(RLIMIT_MEMLOCK) of the collecting process: "SOFT HARD" in bytes,
    /// each "unlimited" when infinite.
    RlimitMemlock,
    /// The collecting process's identity: "uid=U euid=E gid=G egid=H groups=A,B".
    Identity,
    /// socket(AF_NETLINK, SOCK_RAW, NETLINK_RDMA): empty answer on success.
    NetlinkRdma,
    /// access(path, R_OK|W_OK) for the collecting process: empty answer on success.
    AccessRw(String),
    /// The kernel log ring read from /dev/kmsg without blocking (its records, one
    /// per line, in /dev/kmsg's own format).
    Kmsg,
    /// One NETLINK_RDMA request (a whole `nlmsghdr` + attributes): the answer is
    /// every reply datagram concatenated, up to and including NLMSG_DONE or
    /// NLMSG_ERROR (the layout of the fixtures' netlink/*.bin files).
    Netlink(Vec<u8>),
    /// A device's limits from `ibv_query_device` through rdma-core's libibverbs
    /// (the CLI supplies them; the host crate does not load libibverbs): lines
    /// "max_qp N", "max_cq N", "max_mr N", "max_pd N".
    DeviceLimits(String),
    /// An Ethernet fact of a netdev that is not a file (ethtool, DCB), in the
    /// text the matching command prints ([`crate::ethernet`]).
    Ethernet(crate::ethernet::EthQuery),
    /// The soft NIC's device-wide counters, every user's summed, of each soft
    /// device that published some (the CLI supplies them from the soft NIC's
    /// registry; the host crate does not depend on the soft NIC): lines
    /// "DEVICE NAME VALUE", read by [`crate::parse::soft::counters`].
    SoftCounters,
}

impl Probe {
    /// The key under which the probe is stored in a bundle.
    pub fn key(&self) -> String {
        match self {
            Probe::RlimitMemlock => "rlimit_memlock".into(),
            Probe::Identity => "identity".into(),
            Probe::NetlinkRdma => "netlink_rdma".into(),
            Probe::AccessRw(p) => format!("access_rw:{p}"),
            Probe::Kmsg => "kmsg".into(),
            Probe::Netlink(req) => netlink_key(req),
            Probe::DeviceLimits(dev) => format!("device_limits:{dev}"),
            Probe::Ethernet(q) => q.key(),
            Probe::SoftCounters => "soft_counters".into(),
        }
    }
}

/// The bundle key of a netlink request: "netlink:" and the request's hex bytes with
/// the sequence number and port id zeroed (they differ on every run; the rest is
/// what was asked).
pub fn netlink_key(req: &[u8]) -> String {
    let mut r = req.to_vec();
    for b in r.iter_mut().skip(8).take(8) {
        *b = 0;
    }
    let mut key = String::with_capacity(8 + r.len() * 2);
    key.push_str("netlink:");
    for b in r {
        key.push_str(&format!("{b:02x}"));
    }
    key
}

/// Everything a collector may ask of a host. Paths are absolute host paths.
pub trait Source {
    /// The whole content of a file (at most [`MAX_READ`] bytes).
    fn read(&self, path: &str) -> Result<Vec<u8>, Errno>;
    /// The entries of a directory, sorted by name, without `.` and `..`.
    fn read_dir(&self, path: &str) -> Result<Vec<Entry>, Errno>;
    /// The target text of a symlink, as stored (often relative).
    fn read_link(&self, path: &str) -> Result<String, Errno>;
    /// `lstat` of a path.
    fn stat(&self, path: &str) -> Result<Meta, Errno>;
    /// A fact that is not a file.
    fn probe(&self, probe: &Probe) -> Result<Vec<u8>, Errno>;
}

/// The running host, with every path re-rooted under `root` (`/` for the host itself;
/// a captured tree otherwise, like libibverbs' SYSFS_PATH). Probes always describe the
/// running process and kernel, except [`Probe::Kmsg`] and [`Probe::AccessRw`], which
/// look under the root too.
#[derive(Clone)]
pub struct LiveSource {
    root: PathBuf,
    limits: Option<LimitsFn>,
    soft: Option<SoftCountersFn>,
    /// Paths the user named (`--kernel-log`), read as [`bounded::read_named`]
    /// reads them: a pipe may be read (with a deadline), within its cap.
    named: Vec<(String, Cap)>,
}

/// Answers [`Probe::DeviceLimits`] for a device name (None: not known).
pub type LimitsFn = std::sync::Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// Answers [`Probe::SoftCounters`] (None: no soft device published counters).
pub type SoftCountersFn = std::sync::Arc<dyn Fn() -> Option<String> + Send + Sync>;

impl std::fmt::Debug for LiveSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveSource")
            .field("root", &self.root)
            .field("limits", &self.limits.is_some())
            .field("soft", &self.soft.is_some())
            .field("named", &self.named)
            .finish()
    }
}

impl LiveSource {
    pub fn new(root: impl Into<PathBuf>) -> LiveSource {
        LiveSource {
            root: root.into(),
            limits: None,
            soft: None,
            named: Vec::new(),
        }
    }

    /// Reads `path` as a file the user named (`--kernel-log FILE`): where the
    /// user's shell sees it, not under the root; a pipe such as
    /// `<(journalctl -k)` may be read, within [`bounded::PIPE_DEADLINE`], and at
    /// most `cap`. Every other path is read as a host file: a regular file only,
    /// never blocking, at most [`MAX_READ`] bytes.
    pub fn with_named_file(mut self, path: &str, cap: Cap) -> LiveSource {
        self.named.push((path.to_string(), cap));
        self
    }

    /// Answers [`Probe::DeviceLimits`] with `f` (the CLI's libibverbs query).
    pub fn with_device_limits(mut self, f: LimitsFn) -> LiveSource {
        self.limits = Some(f);
        self
    }

    /// Answers [`Probe::SoftCounters`] with `f` (the CLI's read of the soft
    /// NIC's registry).
    pub fn with_soft_counters(mut self, f: SoftCountersFn) -> LiveSource {
        self.soft = Some(f);
        self
    }

    /// The running host (root `/`).
    pub fn host() -> LiveSource {
        LiveSource::new("/")
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn host_path(&self, path: &str) -> PathBuf {
        self.root.join(path.trim_start_matches('/'))
    }

    fn is_host_root(&self) -> bool {
        self.root == Path::new("/")
    }
}

fn kind_of(ft: fs::FileType) -> Kind {
    use std::os::unix::fs::FileTypeExt;
    if ft.is_symlink() {
        Kind::Symlink
    } else if ft.is_dir() {
        Kind::Dir
    } else if ft.is_file() {
        Kind::File
    } else if ft.is_char_device() {
        Kind::Char
    } else if ft.is_block_device() {
        Kind::Block
    } else {
        Kind::Other
    }
}

impl Source for LiveSource {
    fn read(&self, path: &str) -> Result<Vec<u8>, Errno> {
        let r = match self.named.iter().find(|(n, _)| n == path) {
            // A file the user named (--kernel-log), where the user's shell sees
            // it (not under the root): a pipe is fine, with a deadline.
            Some((_, cap)) => bounded::read_named(Path::new(path), *cap),
            // Anything else is a host file: regular files only, never blocking.
            None => bounded::read_tree_file(&self.host_path(path), MAX_READ as u64),
        };
        r.map_err(|e| e.errno())
    }

    fn read_dir(&self, path: &str) -> Result<Vec<Entry>, Errno> {
        let rd = fs::read_dir(self.host_path(path)).map_err(|e| Errno::from_io(&e))?;
        let mut out = Vec::new();
        for ent in rd {
            let ent = ent.map_err(|e| Errno::from_io(&e))?;
            let kind = ent.file_type().map(kind_of).unwrap_or(Kind::Other);
            out.push(Entry {
                name: ent.file_name().to_string_lossy().into_owned(),
                kind,
            });
        }
        out.sort();
        Ok(out)
    }

    fn read_link(&self, path: &str) -> Result<String, Errno> {
        fs::read_link(self.host_path(path))
            .map(|p| p.to_string_lossy().into_owned())
            .map_err(|e| Errno::from_io(&e))
    }

    fn stat(&self, path: &str) -> Result<Meta, Errno> {
        use std::os::unix::fs::MetadataExt;
        let md = fs::symlink_metadata(self.host_path(path)).map_err(|e| Errno::from_io(&e))?;
        let kind = kind_of(md.file_type());
        let rdev = matches!(kind, Kind::Char | Kind::Block).then(|| {
            let r = md.rdev();
            (rustix::fs::major(r), rustix::fs::minor(r))
        });
        Ok(Meta {
            kind,
            mode: md.mode() & 0o7777,
            uid: md.uid(),
            gid: md.gid(),
            rdev,
            size: md.size(),
        })
    }

    fn probe(&self, probe: &Probe) -> Result<Vec<u8>, Errno> {
        match probe {
            Probe::RlimitMemlock => {
                let l = rustix::process::getrlimit(rustix::process::Resource::Memlock);
                let show = |v: Option<u64>| v.map_or("unlimited".to_string(), |b| b.to_string());
                Ok(format!("{} {}", show(l.current), show(l.maximum)).into_bytes())
            }
            Probe::Identity => {
                let groups = rustix::process::getgroups()
                    .unwrap_or_default()
                    .iter()
                    .map(|g| g.as_raw().to_string())
                    .collect::<Vec<_>>()
                    .join(",");
                Ok(format!(
                    "uid={} euid={} gid={} egid={} groups={}",
                    rustix::process::getuid().as_raw(),
                    rustix::process::geteuid().as_raw(),
                    rustix::process::getgid().as_raw(),
                    rustix::process::getegid().as_raw(),
                    groups
                )
                .into_bytes())
            }
            Probe::NetlinkRdma => {
                if !self.is_host_root() {
                    // A captured tree has no kernel behind it.
                    return Err(Errno::ENOENT);
                }
                match netlink_sys::Socket::new(NETLINK_RDMA) {
                    Ok(_) => Ok(Vec::new()),
                    Err(e) => Err(Errno::from_io(&e)),
                }
            }
            Probe::AccessRw(path) => {
                let p = self.host_path(path);
                rustix::fs::access(
                    &p,
                    rustix::fs::Access::READ_OK | rustix::fs::Access::WRITE_OK,
                )
                .map(|()| Vec::new())
                .map_err(|e| Errno(e.raw_os_error()))
            }
            Probe::Kmsg => read_kmsg(&self.host_path("/dev/kmsg")),
            Probe::DeviceLimits(dev) => match &self.limits {
                Some(f) => f(dev).map(String::into_bytes).ok_or(Errno(19)),
                None => Err(Errno(38)),
            },
            // No soft device published counters: ENOENT, as a bundle without
            // them answers; a source nobody gave the registry to: ENOSYS.
            Probe::SoftCounters => match &self.soft {
                Some(f) => f().map(String::into_bytes).ok_or(Errno::ENOENT),
                None => Err(Errno(38)),
            },
            Probe::Netlink(req) => {
                if !self.is_host_root() {
                    return Err(Errno::ENOENT);
                }
                netlink_exchange(NETLINK_RDMA, req, 64 << 20)
            }
            Probe::Ethernet(q) => {
                if !self.is_host_root() {
                    // A captured tree has no netdev behind it.
                    return Err(Errno::ENOENT);
                }
                crate::ethernet::live::answer(q)
            }
        }
    }
}

const NETLINK_RDMA: isize = 20;

/// Sends one request on a fresh netlink socket of `protocol` (in the calling
/// thread's network namespace) and returns every reply datagram until
/// NLMSG_DONE (3) or NLMSG_ERROR (2, an error or the ACK that NLM_F_ACK asks
/// for), or until more than `max` bytes came (the answer then stops there),
/// or a 5 s silence (ETIMEDOUT).
pub(crate) fn netlink_exchange(protocol: isize, req: &[u8], max: usize) -> Result<Vec<u8>, Errno> {
    const NLMSG_ERROR: u16 = 2;
    const NLMSG_DONE: u16 = 3;
    let io = |e: std::io::Error| Errno::from_io(&e);
    let mut sock = netlink_sys::Socket::new(protocol).map_err(io)?;
    sock.bind_auto().map_err(io)?;
    sock.connect(&netlink_sys::SocketAddr::new(0, 0))
        .map_err(io)?;
    sock.set_rx_buf_sz(1 << 20).map_err(io)?;
    sock.send(req, 0).map_err(io)?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = recv_timeout(&sock, &mut buf)?;
        let dgram = &buf[..n];
        out.extend_from_slice(dgram);
        // Walk the messages of this datagram looking for the end of the answer.
        let mut off = 0;
        let mut done = n == 0;
        while off + 16 <= n {
            let len =
                u32::from_ne_bytes([dgram[off], dgram[off + 1], dgram[off + 2], dgram[off + 3]])
                    as usize;
            let ty = u16::from_ne_bytes([dgram[off + 4], dgram[off + 5]]);
            if ty == NLMSG_DONE || ty == NLMSG_ERROR {
                done = true;
            }
            if len < 16 {
                break;
            }
            off += (len + 3) & !3;
        }
        if done || out.len() > max {
            return Ok(out);
        }
    }
}

fn recv_timeout(sock: &netlink_sys::Socket, buf: &mut [u8]) -> Result<usize, Errno> {
    use std::os::fd::AsFd;
    let fd = sock.as_fd();
    let mut fds = [rustix::event::PollFd::new(
        &fd,
        rustix::event::PollFlags::IN,
    )];
    let ready = rustix::event::poll(&mut fds, 5000).map_err(|e| Errno(e.raw_os_error()))?;
    if ready == 0 {
        return Err(Errno(110)); // ETIMEDOUT: the kernel never finished its answer
    }
    sock.recv(&mut &mut buf[..], 0)
        .map_err(|e| Errno::from_io(&e))
}

/// Reads every record currently in the kernel's ring without blocking and without
/// consuming anything (each open of /dev/kmsg has its own read position).
fn read_kmsg(path: &Path) -> Result<Vec<u8>, Errno> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
    let md = fs::metadata(path).map_err(|e| Errno::from_io(&e))?;
    if !md.file_type().is_char_device() {
        // A plain file standing in for /dev/kmsg (a captured tree): a regular
        // file only, at most MAX_READ bytes.
        return bounded::read_tree_file(path, MAX_READ as u64).map_err(|e| e.errno());
    }
    // Only the kmsg device itself (char 1:11) is opened: another device under
    // that name (a tree's /dev) could do anything when opened.
    let rdev = md.rdev();
    if (rustix::fs::major(rdev), rustix::fs::minor(rdev)) != (1, 11) {
        return Err(Errno::EINVAL);
    }
    let mut f = fs::OpenOptions::new()
        .read(true)
        .custom_flags((rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOCTTY).bits() as i32)
        .open(path)
        .map_err(|e| Errno::from_io(&e))?;
    let mut out = Vec::new();
    let mut rec = vec![0u8; 8192];
    loop {
        match f.read(&mut rec) {
            Ok(0) => break,
            Ok(n) => {
                out.extend_from_slice(&rec[..n]);
                if !rec[..n].ends_with(b"\n") {
                    out.push(b'\n');
                }
                if out.len() > MAX_READ {
                    break;
                }
            }
            // EPIPE: the record we were about to read was overwritten; go on.
            Err(e) if e.raw_os_error() == Some(32) => continue,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                if out.is_empty() {
                    return Err(Errno::from_io(&e));
                }
                break;
            }
        }
    }
    Ok(out)
}

/// One recorded answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Answer {
    Data(Vec<u8>),
    Entries(Vec<Entry>),
    Link(String),
    Meta(Meta),
    Err(Errno),
}

/// The five kinds of question, as bundle keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Read,
    Dir,
    Link,
    Stat,
    Probe,
}

/// Wraps a source and keeps every question and answer, in order of first asking.
pub struct Recorder<'a> {
    inner: &'a dyn Source,
    log: Mutex<BTreeMap<(Op, String), Answer>>,
}

impl<'a> Recorder<'a> {
    pub fn new(inner: &'a dyn Source) -> Recorder<'a> {
        Recorder {
            inner,
            log: Mutex::new(BTreeMap::new()),
        }
    }

    /// Everything asked so far.
    pub fn into_records(self) -> BTreeMap<(Op, String), Answer> {
        self.log.into_inner().unwrap_or_else(|p| p.into_inner())
    }

    /// The keys of the questions of kind `op` asked so far (paths, or
    /// [`Probe::key`]s), sorted.
    pub fn keys(&self, op: Op) -> Vec<String> {
        let log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        log.keys()
            .filter(|(o, _)| *o == op)
            .map(|(_, key)| key.clone())
            .collect()
    }

    fn keep(&self, op: Op, key: &str, answer: Answer) {
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        log.entry((op, key.to_string())).or_insert(answer);
    }
}

impl Source for Recorder<'_> {
    fn read(&self, path: &str) -> Result<Vec<u8>, Errno> {
        let r = self.inner.read(path);
        self.keep(
            Op::Read,
            path,
            r.clone().map_or_else(Answer::Err, Answer::Data),
        );
        r
    }

    fn read_dir(&self, path: &str) -> Result<Vec<Entry>, Errno> {
        let r = self.inner.read_dir(path);
        self.keep(
            Op::Dir,
            path,
            r.clone().map_or_else(Answer::Err, Answer::Entries),
        );
        r
    }

    fn read_link(&self, path: &str) -> Result<String, Errno> {
        let r = self.inner.read_link(path);
        self.keep(
            Op::Link,
            path,
            r.clone().map_or_else(Answer::Err, Answer::Link),
        );
        r
    }

    fn stat(&self, path: &str) -> Result<Meta, Errno> {
        let r = self.inner.stat(path);
        self.keep(Op::Stat, path, r.map_or_else(Answer::Err, Answer::Meta));
        r
    }

    fn probe(&self, probe: &Probe) -> Result<Vec<u8>, Errno> {
        let r = self.inner.probe(probe);
        self.keep(
            Op::Probe,
            &probe.key(),
            r.clone().map_or_else(Answer::Err, Answer::Data),
        );
        r
    }
}

/// Joins a symlink's target text to the directory holding the link and normalizes
/// `.` and `..` lexically (sysfs links are relative and never cross mount points).
pub fn resolve_link(link_path: &str, target: &str) -> String {
    let mut parts: Vec<&str> = if target.starts_with('/') {
        Vec::new()
    } else {
        let mut p: Vec<&str> = link_path.split('/').filter(|s| !s.is_empty()).collect();
        p.pop();
        p
    };
    for comp in target.split('/') {
        match comp {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    format!("/{}", parts.join("/"))
}

/// Follows symlinks in every component of `path` through `src` (at most 40 hops, like
/// the kernel), returning the canonical path.
pub fn canonicalize(src: &dyn Source, path: &str) -> Result<String, Errno> {
    let mut done = String::new();
    let mut rest: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .rev()
        .map(str::to_string)
        .collect();
    let mut hops = 0;
    while let Some(comp) = rest.pop() {
        let candidate = format!("{done}/{comp}");
        match src.read_link(&candidate) {
            Ok(target) => {
                hops += 1;
                if hops > 40 {
                    return Err(Errno(40));
                }
                let resolved = resolve_link(&candidate, &target);
                done.clear();
                for c in resolved.split('/').filter(|s| !s.is_empty()).rev() {
                    rest.push(c.to_string());
                }
            }
            Err(_) => done = candidate,
        }
    }
    if done.is_empty() {
        done.push('/');
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_relative_sysfs_link() {
        assert_eq!(
            resolve_link(
                "/sys/class/infiniband/rxe0",
                "../../devices/virtual/infiniband/rxe0"
            ),
            "/sys/devices/virtual/infiniband/rxe0"
        );
        assert_eq!(resolve_link("/a/b", "/x/../y"), "/y");
    }

    #[test]
    fn netlink_key_ignores_seq_and_port() {
        // The fixtures' op10-res-qp-get request, and the same with another seq/pid.
        let a = [
            0x18, 0, 0, 0, 0x0a, 0x14, 0x01, 0x03, 0xf2, 3, 0, 0, 0, 0, 0, 0, 8, 0, 1, 0, 0, 0, 0,
            0,
        ];
        let mut b = a;
        b[8] = 0x77;
        b[12] = 0x42;
        assert_eq!(netlink_key(&a), netlink_key(&b));
        assert_eq!(
            netlink_key(&a),
            "netlink:180000000a14010300000000000000000800010000000000"
        );
    }

    #[test]
    fn live_source_reports_errno_with_name() {
        let src = LiveSource::host();
        let e = src.read("/nonexistent/rdmakit").unwrap_err();
        assert_eq!(e, Errno::ENOENT);
        assert_eq!(e.name(), "ENOENT");
    }

    #[test]
    fn live_source_rerooted_and_canonicalize() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(root.join("sys/devices/virtual/infiniband/rxe0")).unwrap();
        fs::create_dir_all(root.join("sys/class/infiniband")).unwrap();
        fs::write(
            root.join("sys/devices/virtual/infiniband/rxe0/node_type"),
            "1: CA\n",
        )
        .unwrap();
        std::os::unix::fs::symlink(
            "../../devices/virtual/infiniband/rxe0",
            root.join("sys/class/infiniband/rxe0"),
        )
        .unwrap();
        let src = LiveSource::new(root);
        assert_eq!(
            src.read("/sys/class/infiniband/rxe0/node_type").unwrap(),
            b"1: CA\n"
        );
        let ents = src.read_dir("/sys/class/infiniband").unwrap();
        assert_eq!(
            ents,
            vec![Entry {
                name: "rxe0".into(),
                kind: Kind::Symlink
            }]
        );
        assert_eq!(
            canonicalize(&src, "/sys/class/infiniband/rxe0/node_type").unwrap(),
            "/sys/devices/virtual/infiniband/rxe0/node_type"
        );
        let rec = Recorder::new(&src);
        let _ = rec.read("/sys/class/infiniband/rxe0/node_type");
        let _ = rec.read("/missing");
        let recs = rec.into_records();
        assert_eq!(
            recs[&(Op::Read, "/missing".to_string())],
            Answer::Err(Errno::ENOENT)
        );
    }
}
