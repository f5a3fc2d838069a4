//! Host facts: what a collection found, each value with the path it came from.
//!
//! Every attribute is an [`Attr`]: the path read, the raw text (or the errno the read
//! failed with), and the parsed value when the text made sense. Rules cite `Attr`s as
//! evidence, so a report always shows the file and the value it was based on.

use std::collections::BTreeMap;
use std::net::Ipv6Addr;

use serde::Serialize;

use crate::parse::cgroup::RdmaValues;
use crate::parse::kmsg::KmsgRecord;
use crate::parse::pkg::Package;
use crate::parse::proc::{Identity, Interrupts, KernelRelease, Limit, Module};
use crate::parse::sysfs::{
    Counter, CpuSet, GidType, LinkLayer, NodeType, PcieSpeed, PhysState, PortState, Rate,
};
use crate::source::{Entry, Errno, Meta};

/// The raw outcome of reading one file.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Raw {
    /// The file's text, trailing newline removed.
    Text(String),
    /// The read failed.
    Err(Errno),
}

/// One attribute: where it was read, what was there, and what it means.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Attr<T> {
    pub path: String,
    pub raw: Raw,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<T>,
}

impl<T> Attr<T> {
    /// An attribute that was never read (for facts the source cannot have).
    pub fn absent(path: &str) -> Attr<T> {
        Attr {
            path: path.to_string(),
            raw: Raw::Err(Errno::ENOENT),
            value: None,
        }
    }

    /// The parsed value, if the read worked and the text made sense.
    pub fn get(&self) -> Option<&T> {
        self.value.as_ref()
    }

    /// The raw text if the read worked.
    pub fn text(&self) -> Option<&str> {
        match &self.raw {
            Raw::Text(t) => Some(t),
            Raw::Err(_) => None,
        }
    }

    /// The errno if the read failed.
    pub fn errno(&self) -> Option<Errno> {
        match &self.raw {
            Raw::Err(e) => Some(*e),
            Raw::Text(_) => None,
        }
    }

    /// True when the file was read but its text could not be understood.
    ///
    /// (A value that parses to a name not known, such as the link layer
    /// `Unknown`, is understood: see [`Attr::known`].)
    pub fn is_garbage(&self) -> bool {
        matches!(self.raw, Raw::Text(_)) && self.value.is_none()
    }

    /// True when the file does not exist.
    pub fn is_missing(&self) -> bool {
        self.raw == Raw::Err(Errno::ENOENT)
    }

    /// How the value is shown as evidence: the raw text, or "<read failed: EINVAL>".
    pub fn shown(&self) -> String {
        match &self.raw {
            Raw::Text(t) if t.is_empty() => "\"\"".into(),
            Raw::Text(t) => t.clone(),
            Raw::Err(e) if *e == Errno::ENOENT => "<absent>".into(),
            Raw::Err(e) => format!("<read failed: {e}>"),
        }
    }
}

impl<T> Attr<Option<T>> {
    /// The value when the text named one that is known (None also when the
    /// read failed or the text was garbage).
    pub fn known(&self) -> Option<&T> {
        self.value.as_ref()?.as_ref()
    }
}

/// A name for a value of `rdmakit_types` (which has no serde).
trait Named: Copy {
    fn name(self) -> &'static str;
}

impl Named for LinkLayer {
    fn name(self) -> &'static str {
        LinkLayer::name(self)
    }
}

impl Named for GidType {
    fn name(self) -> &'static str {
        GidType::name(self)
    }
}

/// Serializes an attribute whose value is a `rdmakit_types` name: the value as
/// that name, `null` when the text named none known.
fn named<T: Named, S: serde::Serializer>(a: &Attr<Option<T>>, s: S) -> Result<S::Ok, S::Error> {
    Attr {
        path: a.path.clone(),
        raw: a.raw.clone(),
        value: a.value.map(|v| v.map(Named::name)),
    }
    .serialize(s)
}

/// Everything one collection found.
#[derive(Debug, Clone, Serialize)]
pub struct HostFacts {
    /// The listing of `/` in the source: a captured tree may hold only part of a
    /// host (e.g. only /sys), and checks whose files live elsewhere say "not checked".
    pub top_dirs: Result<Vec<Entry>, Errno>,
    pub kernel: Kernel,
    pub modules: Modules,
    pub uverbs: UverbsClass,
    pub mad: MadClass,
    pub dev_nodes: DevNodes,
    pub devices: Vec<Device>,
    /// The soft NIC's devices that published device-wide counters (any user),
    /// each a software device whose port 1 holds them and nothing else
    /// ([`crate::source::Probe::SoftCounters`]). Apart from `devices`: they
    /// have no sysfs; the counter checks read both.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub soft_devices: Vec<Device>,
    pub netdevs: Vec<Netdev>,
    pub cpus_online: Attr<CpuSet>,
    pub interrupts: Attr<Interrupts>,
    /// smp_affinity_list of every IRQ that belongs to an RDMA device.
    pub irq_affinity: BTreeMap<u32, Attr<CpuSet>>,
    pub memlock: Memlock,
    pub identity: Option<Identity>,
    /// Which node and which boot of it, and the processes the collection ran under.
    pub node: Node,
    /// The network namespaces of the collecting process and of init.
    pub namespaces: Namespaces,
    /// The process asked about with `--pid`, as it sees the host.
    pub subject: Option<Subject>,
    /// The RDMA cgroups of the processes that hold RDMA objects (and of `--pid`).
    pub rdma_cgroups: Vec<RdmaCgroup>,
    pub rdma_core: RdmaCore,
    pub kernel_log: KernelLog,
    /// What NETLINK_RDMA answered (devices, ports, resources, counters, owners).
    pub netlink: crate::netlink::NetlinkFacts,
    /// The Ethernet layer beneath RoCE ports (QoS, ECN, counters, optics).
    pub ethernet: crate::ethernet::Ethernet,
    /// Values met while collecting that their parser did not understand.
    pub unrecognized: Vec<Unrecognized>,
}

/// A value its parser did not understand.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Unrecognized {
    pub path: String,
    /// What the value should have been ("port state", "rate", ...).
    pub what: String,
    /// The value as read (at most 80 characters).
    pub value: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Kernel {
    pub release: Attr<KernelRelease>,
    /// socket(AF_NETLINK, SOCK_RAW, NETLINK_RDMA): Ok, or the errno (EPROTONOSUPPORT
    /// when the kernel has no RDMA). `None` when the source cannot tell (a captured
    /// tree without a recorded probe).
    pub netlink_rdma: Option<Result<(), Errno>>,
    /// The listing of /sys/class/infiniband.
    pub ib_class: Result<Vec<Entry>, Errno>,
    /// Kernel config options that matter (CONFIG_INFINIBAND*, CONFIG_RDMA_*), and
    /// where they were read; `None` when no config was readable.
    pub config: Option<KernelConfig>,
}

#[derive(Debug, Clone, Serialize)]
pub struct KernelConfig {
    pub path: String,
    pub options: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Modules {
    /// /proc/modules.
    pub proc_modules: Attr<Vec<Module>>,
    /// Modules found as directories under /sys/module (loaded or built in).
    pub sys_module: BTreeMap<String, bool>,
    /// Modules listed in /lib/modules/<release>/modules.builtin.
    pub builtin: Vec<String>,
    /// The listing of /lib/modules/<release>/kernel/drivers/infiniband/core (the
    /// distribution's ib_core, ib_uverbs, ib_umad, rdma_ucm ... files).
    pub core_files: Result<Vec<Entry>, Errno>,
}

/// Where a module was seen, if anywhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ModuleState {
    Loaded,
    BuiltIn,
    Absent,
    /// Neither /proc/modules nor /sys/module could be read.
    Unknown,
}

impl Modules {
    /// True when the kernel's own module file for `name` is installed (so modprobe
    /// can load it); false says nothing: vendor stacks install elsewhere.
    pub fn installed(&self, name: &str) -> bool {
        self.core_files.as_ref().is_ok_and(|v| {
            v.iter().any(|e| {
                e.name
                    .strip_prefix(name)
                    .is_some_and(|rest| rest.starts_with(".ko"))
            })
        })
    }

    /// Whether a module is loaded, built in, or absent.
    pub fn state(&self, name: &str) -> ModuleState {
        if let Some(list) = self.proc_modules.get() {
            if list.iter().any(|m| m.name == name) {
                return ModuleState::Loaded;
            }
        }
        if self.builtin.iter().any(|b| b == name) {
            return ModuleState::BuiltIn;
        }
        if self.sys_module.get(name) == Some(&true) {
            // In /sys/module but not in /proc/modules: built in with parameters.
            return if self.proc_modules.get().is_some() {
                ModuleState::BuiltIn
            } else {
                ModuleState::Loaded
            };
        }
        if self.proc_modules.get().is_none() && self.sys_module.is_empty() {
            return ModuleState::Unknown;
        }
        ModuleState::Absent
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct UverbsClass {
    pub listing: Result<Vec<Entry>, Errno>,
    pub abi_version: Attr<u32>,
    pub devs: Vec<UverbsDev>,
}

#[derive(Debug, Clone, Serialize)]
pub struct UverbsDev {
    /// "uverbs0".
    pub name: String,
    pub ibdev: Attr<String>,
    pub abi_version: Attr<u32>,
    /// "231:192".
    pub dev: Attr<String>,
}

/// The network namespaces that decide which RDMA devices a process sees (in
/// exclusive `rdma system` netns mode).
#[derive(Debug, Clone, Serialize)]
pub struct Namespaces {
    /// readlink /proc/self/ns/net: the collecting process's, e.g. "net:[4026531840]".
    pub own_net: Attr<String>,
    /// readlink /proc/1/ns/net: the initial namespace (EACCES for non-root).
    pub init_net: Attr<String>,
}

/// The process asked about with `--pid`: its credentials, its network namespace and
/// `/dev/infiniband` as it sees it (through `/proc/<pid>/root`).
#[derive(Debug, Clone, Serialize)]
pub struct Subject {
    pub pid: u32,
    /// "/proc/<pid>/root".
    pub root: String,
    /// From /proc/<pid>/status (Uid, Gid, Groups).
    pub identity: Attr<Identity>,
    /// readlink /proc/<pid>/ns/net.
    pub net_ns: Attr<String>,
    /// /proc/<pid>/root/dev/infiniband (access(2) not asked: it would answer for the
    /// collector); `None` when /proc/<pid>/root/dev itself could not be listed (the
    /// process is gone, or a source that did not record it).
    pub dev_nodes: Option<DevNodes>,
}

/// One cgroup with the RDMA controller enabled, holding (or above) a process that
/// owns RDMA objects.
#[derive(Debug, Clone, Serialize)]
pub struct RdmaCgroup {
    /// The cgroup as /proc/<pid>/cgroup names it, e.g. "/leak".
    pub name: String,
    /// Its directory, e.g. "/sys/fs/cgroup/leak".
    pub dir: String,
    /// The processes looked at that are in it or below it.
    pub pids: Vec<u32>,
    /// rdma.max: per device, the limits (None = "max").
    pub max: Attr<Vec<RdmaValues>>,
    /// rdma.current: per device, what is charged now.
    pub current: Attr<Vec<RdmaValues>>,
    /// cgroup.procs: the processes directly in it.
    pub procs: Attr<Vec<u32>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct MadClass {
    pub listing: Result<Vec<Entry>, Errno>,
    pub abi_version: Attr<u32>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DevNodes {
    /// "/dev/infiniband" (or "/proc/<pid>/root/dev/infiniband").
    pub path: String,
    /// The listing of the directory.
    pub listing: Result<Vec<Entry>, Errno>,
    pub nodes: Vec<DevNode>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DevNode {
    pub path: String,
    pub meta: Result<Meta, Errno>,
    /// access(R_OK|W_OK) for the collecting user; `None` when not recorded.
    pub access_rw: Option<Result<(), Errno>>,
}

/// Whether a device is backed by hardware.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceKind {
    /// A PCI function (mlx5, bnxt_re, irdma, efa, ...).
    Pci,
    /// A software device (rxe, siw): no IRQs, no PCIe.
    Software,
    /// Neither could be established (e.g. a capture without the device link).
    Unknown,
}

#[derive(Debug, Clone, Serialize)]
pub struct Device {
    /// "mlx5_0".
    pub name: String,
    /// "/sys/class/infiniband/mlx5_0".
    pub path: String,
    /// Where the class link points, e.g. "/sys/devices/pci0000:00/.../infiniband/mlx5_0".
    pub real_path: String,
    pub kind: DeviceKind,
    /// The kernel driver that owns the device: the PCI driver (mlx5_core) or the
    /// software driver inferred from the name (rdma_rxe, siw); `None` when unknown.
    pub driver: Option<String>,
    /// The libibverbs provider the device needs ("mlx5", "rxe"), when known.
    pub provider: Option<String>,
    pub node_type: Attr<NodeType>,
    pub node_guid: Attr<u64>,
    pub sys_image_guid: Attr<u64>,
    pub fw_ver: Attr<String>,
    pub hw_rev: Attr<String>,
    pub hca_type: Attr<String>,
    pub board_id: Attr<String>,
    pub node_desc: Attr<String>,
    /// Software devices: the netdev they are bound to.
    pub parent: Attr<String>,
    pub pci: Option<Pci>,
    pub ports: Vec<Port>,
    pub hw_counters: BTreeMap<String, Attr<Counter>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Pci {
    /// "0000:3b:00.0".
    pub bdf: String,
    pub path: String,
    pub driver: Option<String>,
    pub numa_node: Attr<i32>,
    pub local_cpulist: Attr<CpuSet>,
    pub link: PcieLink,
    /// Bridges between the device and the root complex, nearest first.
    pub upstream: Vec<PcieHop>,
    /// IRQ numbers from msi_irqs/.
    pub msi_irqs: Result<Vec<u32>, Errno>,
    /// The legacy INTx line from `irq`.
    pub irq: Attr<u32>,
    pub resources: Vec<ResourceFile>,
    /// Netdevs of the PCI function (device/net/*).
    pub netdevs: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PcieLink {
    pub current_speed: Attr<PcieSpeed>,
    pub current_width: Attr<u8>,
    pub max_speed: Attr<PcieSpeed>,
    pub max_width: Attr<u8>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PcieHop {
    pub bdf: String,
    pub path: String,
    pub link: PcieLink,
}

#[derive(Debug, Clone, Serialize)]
pub struct ResourceFile {
    pub path: String,
    pub meta: Result<Meta, Errno>,
    pub access_rw: Option<Result<(), Errno>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Port {
    pub num: u32,
    pub path: String,
    pub state: Attr<PortState>,
    pub phys_state: Attr<PhysState>,
    pub rate: Attr<Rate>,
    /// None inside: the kernel's `Unknown` or a name not known (kept as text).
    #[serde(serialize_with = "named")]
    pub link_layer: Attr<Option<LinkLayer>>,
    pub lid: Attr<u32>,
    pub sm_lid: Attr<u32>,
    pub cap_mask: Attr<u32>,
    /// Every non-zero GID.
    pub gids: Vec<Gid>,
    /// How many GID slots the port has.
    pub gid_slots: usize,
    pub counters: BTreeMap<String, Attr<Counter>>,
    pub hw_counters: BTreeMap<String, Attr<Counter>>,
}

impl Port {
    /// True when the link layer is Ethernet (RoCE).
    pub fn is_roce(&self) -> bool {
        matches!(self.link_layer.known(), Some(LinkLayer::Ethernet))
    }

    /// The link layer's name: a known one's (`InfiniBand`), else the text the
    /// kernel printed (`Unknown`); None when it could not be read.
    pub fn link_layer_name(&self) -> Option<String> {
        match self.link_layer.get()? {
            Some(l) => Some(l.name().to_string()),
            None => self.link_layer.text().map(|t| t.trim().to_string()),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Gid {
    pub index: u32,
    pub path: String,
    pub gid: Ipv6Addr,
    /// None inside: a type not known (kept as text).
    #[serde(serialize_with = "named")]
    pub gid_type: Attr<Option<GidType>>,
    pub ndev: Attr<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Netdev {
    pub name: String,
    pub path: String,
    pub mtu: Attr<u32>,
    pub operstate: Attr<String>,
    pub speed: Attr<i64>,
    pub carrier_down_count: Attr<u64>,
    /// The netdev's driver (basename of device/driver), e.g. "mlx5_core".
    pub driver: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Memlock {
    /// getrlimit(RLIMIT_MEMLOCK) of the collecting process: (soft, hard).
    pub probe: Option<Result<(Limit, Limit), Errno>>,
    /// /proc/self/limits "Max locked memory" (soft, hard).
    pub self_limits: Attr<(Limit, Limit)>,
    /// /proc/<pid>/limits of the process asked about with --pid.
    pub pid: Option<(u32, Attr<(Limit, Limit)>)>,
    /// Whether the --pid process may lock memory regardless of RLIMIT_MEMLOCK (euid
    /// 0 or CAP_IPC_LOCK in its effective set), from /proc/<pid>/status.
    pub pid_ipc_lock: Option<Attr<bool>>,
}

impl Memlock {
    /// The soft limit that applies to the subject (the --pid process if given, else
    /// the collecting process), with the path or probe it came from.
    pub fn effective(&self) -> Option<(Limit, String)> {
        if let Some((_, a)) = &self.pid {
            return a.get().map(|(s, _)| (*s, a.path.clone()));
        }
        if let Some(Ok((s, _))) = &self.probe {
            return Some((*s, "getrlimit(RLIMIT_MEMLOCK)".into()));
        }
        self.self_limits
            .get()
            .map(|(s, _)| (*s, self.self_limits.path.clone()))
    }
}

/// Who the host is: its name (for telling nodes apart in a fleet), which boot of
/// it the facts are from, and the processes the collection ran under. The
/// node-health check ([`crate::collect::node`]) reads these first, so a check
/// that hangs later still knows which node and boot it was judging.
#[derive(Debug, Clone, Serialize)]
pub struct Node {
    pub hostname: Hostname,
    /// `/proc/sys/kernel/random/boot_id`: drawn anew by the kernel at every boot
    /// (node-problem-detector's state is kept per boot).
    pub boot_id: Attr<String>,
    /// The collecting process's ancestors, parent first, up to
    /// [`crate::collect::MAX_ANCESTORS`]; stops at pid 1 or the first process
    /// that cannot be read.
    pub ancestors: Vec<Ancestor>,
}

impl Node {
    /// The boot id, when the source had a sensible one.
    pub fn boot(&self) -> Option<&str> {
        self.boot_id.get().map(String::as_str)
    }
}

/// A process above the collecting one: only what the Slurm health check needs of
/// its command line and environment ([`crate::secrets::kept_argv`],
/// [`crate::secrets::kept_environ`] with [`crate::collect::ANCESTOR_ENV`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Ancestor {
    pub pid: u32,
    /// The program (argv\[0\]), and a Slurm daemon's `-f FILE`.
    pub argv: Vec<String>,
    /// `NAME=value` entries of [`crate::collect::ANCESTOR_ENV`] only (empty when
    /// unreadable).
    pub environ: Vec<String>,
}

/// Where a host's name is read: the kernel's UTS name first (what `hostname`
/// prints), then the configured name.
#[derive(Debug, Clone, Serialize)]
pub struct Hostname {
    /// /proc/sys/kernel/hostname.
    pub kernel: Attr<String>,
    /// /etc/hostname.
    pub etc: Attr<String>,
}

impl Hostname {
    /// The name and the path it was read from: the kernel's, else /etc/hostname's;
    /// `None` when neither was readable and sensible (a capture of /sys alone).
    pub fn best(&self) -> Option<(&str, &str)> {
        [&self.kernel, &self.etc]
            .into_iter()
            .find_map(|a| a.get().map(|v| (v.as_str(), a.path.as_str())))
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct RdmaCore {
    /// RDMA packages from the dpkg status database.
    pub packages: Attr<Vec<Package>>,
    /// libibverbs.so.1 as found in the library directories.
    pub libibverbs: Option<LibFile>,
    /// Library directories that were searched.
    pub lib_dirs: Vec<String>,
    /// /etc/libibverbs.d/*.driver: (file, providers named in it).
    pub driver_files: Result<Vec<(String, Vec<String>)>, Errno>,
    /// Provider libraries found: (path, provider, rdmav ABI).
    pub provider_libs: Vec<(String, String, u32)>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LibFile {
    /// ".../libibverbs.so.1".
    pub path: String,
    /// The file the link resolves to, e.g. "libibverbs.so.1.14.44.0".
    pub real_name: String,
    /// The rdma-core release encoded in the real file name (44).
    pub rdma_core: Option<u32>,
}

impl RdmaCore {
    /// The installed rdma-core major version and where it was read.
    pub fn version(&self) -> Option<(u32, String)> {
        if let Some(pkgs) = self.packages.get() {
            for name in ["rdma-core", "libibverbs1", "libibverbs"] {
                if let Some(p) = pkgs.iter().find(|p| p.name == name && p.installed()) {
                    if let Some(v) = crate::parse::pkg::rdma_core_major(&p.version) {
                        return Some((
                            v,
                            format!("{} (package {} {})", self.packages.path, p.name, p.version),
                        ));
                    }
                }
            }
        }
        let lib = self.libibverbs.as_ref()?;
        lib.rdma_core
            .map(|v| (v, format!("{} -> {}", lib.path, lib.real_name)))
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct KernelLog {
    /// "/dev/kmsg" or the file given with --kernel-log.
    pub source: String,
    pub records: Result<Vec<KmsgRecord>, Errno>,
}

impl HostFacts {
    /// Whether the source holds the top-level directory `dir` ("proc", "etc", ...).
    /// A source whose root cannot be listed is assumed to hold everything.
    pub fn covers(&self, dir: &str) -> bool {
        match &self.top_dirs {
            Ok(v) => v.iter().any(|e| e.name == dir),
            Err(_) => true,
        }
    }
}

impl Device {
    /// The lines of /proc/interrupts that belong to this device: its MSI/MSI-X
    /// vectors (from msi_irqs/), lines naming its PCI address (mlx5_comp0@pci:...),
    /// and, when it has no MSI vectors, its legacy INTx line.
    pub fn irq_lines<'a>(&self, ints: &'a Interrupts) -> Vec<&'a crate::parse::proc::IrqLine> {
        let Some(pci) = &self.pci else {
            return Vec::new();
        };
        let msi: &[u32] = match &pci.msi_irqs {
            Ok(v) => v,
            Err(_) => &[],
        };
        let intx = pci.irq.get().copied().filter(|n| *n != 0);
        ints.lines
            .iter()
            .filter(|l| match l.number {
                Some(n) => {
                    msi.contains(&n)
                        || l.actions.contains(pci.bdf.as_str())
                        || (msi.is_empty() && intx == Some(n) && l.is_legacy_intx())
                }
                None => false,
            })
            .collect()
    }
}
