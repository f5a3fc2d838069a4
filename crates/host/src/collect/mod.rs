//! Collectors: read a [`Source`] into [`HostFacts`].
//!
//! Collection never writes to the host: the only calls it makes are reads, directory
//! listings, readlink, lstat, getrlimit, access(2), a non-blocking read of /dev/kmsg,
//! opening (then closing) a NETLINK_RDMA socket and, through what the CLI supplies,
//! libibverbs' device limits and the soft NIC's published counters. Of the processes
//! it reads (`--pid`, the collecting process's ancestors) it keeps no argument and no
//! environment variable but the ones [`crate::secrets`] allows.

mod device;
mod process;
mod soft;
mod system;

use std::cell::RefCell;

use serde::{Deserialize, Serialize};

use crate::model::{Attr, HostFacts, Node, Raw, Unrecognized};
use crate::parse::ParseError;
use crate::source::Source;

/// What to collect beyond the defaults. Stored in bundles so a replay asks the same
/// questions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CollectOptions {
    /// Also check as this process sees the host: its /proc/<pid>/limits (memlock),
    /// credentials (/proc/<pid>/status), network namespace, /dev/infiniband through
    /// /proc/<pid>/root, and its RDMA cgroup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// Read the kernel log from this file instead of /dev/kmsg.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_log: Option<String>,
    /// Also read each Ethernet link's module EEPROM (`ethtool -m`). The kernel
    /// answers every ethtool request under its one RTNL lock and a module read
    /// crosses the module's I2C bus (tens of ms), so on a live host with many
    /// NICs these reads add up and cannot overlap: the live doctor asks only
    /// when told (`--optics`). A bundle recorded before this option existed
    /// had them read, hence the default.
    #[serde(default = "optics_default")]
    pub optics: bool,
}

fn optics_default() -> bool {
    true
}

/// Everything, optics included: only the live doctor leaves them out.
impl Default for CollectOptions {
    fn default() -> CollectOptions {
        CollectOptions {
            pid: None,
            kernel_log: None,
            optics: true,
        }
    }
}

/// Reads everything the doctor needs through `src`.
pub fn collect(src: &dyn Source, opts: &CollectOptions) -> HostFacts {
    let cx = Cx {
        src,
        unrecognized: RefCell::new(Vec::new()),
    };
    let mut kernel = system::kernel(&cx);
    let modules = system::modules(&cx, kernel.release.get());
    let ask_netlink = netlink_allowed(&modules);
    if ask_netlink {
        kernel.netlink_rdma = system::netlink_probe(&cx);
    }
    let uverbs = system::uverbs(&cx);
    let mad = system::mad(&cx);
    let dev_nodes = system::dev_nodes(&cx);
    let devices = device::devices(&cx, &kernel.ib_class);
    let soft_devices = soft::devices(&cx);
    let netdevs = system::netdevs(&cx);
    let ethernet = crate::ethernet::facts::collect(&cx, &devices, &netdevs, opts.optics);
    let cpus_online = cx.attr(
        "/sys/devices/system/cpu/online",
        crate::parse::sysfs::cpulist,
    );
    let interrupts = cx.attr_bytes("/proc/interrupts", crate::parse::proc::interrupts);
    let irq_affinity = system::irq_affinity(&cx, &devices, interrupts.get());
    let memlock = system::memlock(&cx, opts.pid);
    let identity = system::identity(&cx);
    let node = node_in(&cx);
    let rdma_core = system::rdma_core(&cx);
    let kernel_log = system::kernel_log(&cx, opts.kernel_log.as_deref());
    let netlink = if ask_netlink {
        crate::netlink::rdma_netlink(src)
    } else {
        crate::netlink::NetlinkFacts::unavailable(crate::netlink::NlError::NotAsked)
    };
    let namespaces = process::namespaces(&cx);
    let subject = opts.pid.map(|p| process::subject(&cx, p));
    let mut holders: std::collections::BTreeSet<u32> = netlink.owners.keys().copied().collect();
    holders.extend(netlink.file_holders.iter().map(|h| h.pid));
    holders.extend(opts.pid);
    let rdma_cgroups = process::rdma_cgroups(&cx, &holders);
    HostFacts {
        top_dirs: src.read_dir("/"),
        kernel,
        modules,
        uverbs,
        mad,
        dev_nodes,
        devices,
        soft_devices,
        netdevs,
        cpus_online,
        interrupts,
        irq_affinity,
        memlock,
        identity,
        node,
        rdma_core,
        kernel_log,
        netlink,
        ethernet,
        namespaces,
        subject,
        rdma_cgroups,
        unrecognized: cx
            .unrecognized
            .into_inner()
            .into_iter()
            .map(|(path, e)| Unrecognized {
                path,
                what: e.what.to_string(),
                value: e.value,
            })
            .collect(),
    }
}

/// The most ancestors [`node`] reads (the health check's slurmd is within a few
/// levels: slurmd → the health check, slurmd → slurmstepd → prolog).
pub const MAX_ANCESTORS: usize = 6;

/// The only variables read from an ancestor's environment: where slurm.conf is.
pub const ANCESTOR_ENV: &[&str] = &["SLURM_CONF"];

/// Who the host is ([`Node`]): its names, its boot id and the collecting process's
/// ancestors. [`collect`] reads the same; the node-health check reads this first,
/// on its own, so that it knows the node even when the rest of a collection hangs.
pub fn node(src: &dyn Source) -> Node {
    let cx = Cx {
        src,
        unrecognized: RefCell::new(Vec::new()),
    };
    node_in(&cx)
}

fn node_in(cx: &Cx) -> Node {
    Node {
        hostname: system::hostname(cx),
        boot_id: cx.attr(
            "/proc/sys/kernel/random/boot_id",
            crate::parse::proc::boot_id,
        ),
        ancestors: process::ancestors(cx),
    }
}

/// Whether RDMA netlink may be asked: not when the modules say ib_core is not loaded
/// although its module file is installed (opening NETLINK_RDMA would load it). When
/// the module file is not found either (a kernel without RDMA, or a source without
/// /lib/modules), asking loads nothing and tells whether the kernel has RDMA at all.
fn netlink_allowed(m: &crate::model::Modules) -> bool {
    use crate::model::ModuleState;
    !(m.state("ib_core") == ModuleState::Absent && m.installed("ib_core"))
}

/// Collection context: the source, and the parse failures met so far.
pub(crate) struct Cx<'a> {
    pub src: &'a dyn Source,
    pub unrecognized: RefCell<Vec<(String, ParseError)>>,
}

/// Strips the trailing newline (and NULs) sysfs puts after a value.
pub(crate) fn strip_value(bytes: &[u8]) -> String {
    let s = String::from_utf8_lossy(bytes);
    s.trim_end_matches(['\n', '\0', '\r']).to_string()
}

impl Cx<'_> {
    /// Reads a file and parses its (stripped) text.
    pub fn attr<T>(&self, path: &str, parse: impl Fn(&str) -> Result<T, ParseError>) -> Attr<T> {
        match self.src.read(path) {
            Ok(bytes) => {
                let text = strip_value(&bytes);
                let value = match parse(&text) {
                    Ok(v) => Some(v),
                    Err(e) => {
                        self.unrecognized.borrow_mut().push((path.to_string(), e));
                        None
                    }
                };
                Attr {
                    path: path.to_string(),
                    raw: Raw::Text(text),
                    value,
                }
            }
            Err(e) => Attr {
                path: path.to_string(),
                raw: Raw::Err(e),
                value: None,
            },
        }
    }

    /// Reads a file and parses its bytes; the raw text kept is only its first line
    /// (these are large files like /proc/interrupts, cited by path).
    pub fn attr_bytes<T>(
        &self,
        path: &str,
        parse: impl Fn(&[u8]) -> Result<T, ParseError>,
    ) -> Attr<T> {
        match self.src.read(path) {
            Ok(bytes) => {
                let value = match parse(&bytes) {
                    Ok(v) => Some(v),
                    Err(e) => {
                        self.unrecognized.borrow_mut().push((path.to_string(), e));
                        None
                    }
                };
                let first = bytes.split(|b| *b == b'\n').next().unwrap_or_default();
                Attr {
                    path: path.to_string(),
                    raw: Raw::Text(format!(
                        "{} bytes, first line: {}",
                        bytes.len(),
                        strip_value(first)
                    )),
                    value,
                }
            }
            Err(e) => Attr {
                path: path.to_string(),
                raw: Raw::Err(e),
                value: None,
            },
        }
    }

    /// A string attribute: any text is a valid value.
    pub fn string(&self, path: &str) -> Attr<String> {
        self.attr(path, |s| Ok(s.to_string()))
    }

    /// The entries of a directory, or none when it cannot be listed.
    pub fn names(&self, path: &str) -> Vec<String> {
        self.src
            .read_dir(path)
            .map(|v| v.into_iter().map(|e| e.name).collect())
            .unwrap_or_default()
    }

    /// Whether `path` exists, judged by listing each directory on the way
    /// from `/` (so a replay asks nothing its capture could not answer: a
    /// directory a capture did not take is absent, not a miss).
    pub fn listed(&self, path: &str) -> bool {
        let mut dir = String::new();
        for part in path.split('/').filter(|p| !p.is_empty()) {
            let shown = if dir.is_empty() { "/" } else { dir.as_str() };
            match self.src.read_dir(shown) {
                Ok(v) if v.iter().any(|e| e.name == part) => {}
                _ => return false,
            }
            dir.push('/');
            dir.push_str(part);
        }
        true
    }

    /// The basename of where a symlink points ("mlx5_core" for device/driver).
    pub fn link_basename(&self, path: &str) -> Option<String> {
        let t = self.src.read_link(path).ok()?;
        t.rsplit('/').find(|s| !s.is_empty()).map(str::to_string)
    }
}
