//! Every finding code the doctor can emit, with its layer, default severity, title,
//! the commonly omitted check it catches (a hint) where one applies, and its
//! explanation page.
//!
//! Codes are stable: a code is never reused for another meaning. The page of each
//! code is `findings/<CODE>.md` in this crate (docs/findings points there),
//! compiled in here, so `rdmakit explain RDK-K001` and the docs are one source of
//! truth.

use serde::{Deserialize, Serialize};

/// The stack layer a finding points at (layered fault localization):
/// the one [`rdmakit_vocab::Layer`] of the whole stack.
pub use rdmakit_vocab::Layer;

/// Serializes a [`Layer`] as its lowercase name ("kernel"), for
/// `#[serde(serialize_with = "crate::codes::layer_serde::one")]` (rdmakit-vocab
/// has no dependencies, so no serde).
pub mod layer_serde {
    use super::Layer;

    /// A layer as "hardware", "kernel", "library" or "application".
    pub fn one<S: serde::Serializer>(l: &Layer, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(l.as_str())
    }

    /// An optional layer as its name or null.
    pub fn opt<S: serde::Serializer>(l: &Option<Layer>, s: S) -> Result<S::Ok, S::Error> {
        match l {
            Some(l) => s.serialize_some(l.as_str()),
            None => s.serialize_none(),
        }
    }
}

/// How bad a finding is. Ordered: `Info < Warning < Error`. Reports and the
/// fleet read it back from JSON, hence `Deserialize`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }

    /// Parses "info", "warning"/"warn", "error".
    pub fn parse(s: &str) -> Option<Severity> {
        match s.to_ascii_lowercase().as_str() {
            "info" => Some(Severity::Info),
            "warning" | "warn" => Some(Severity::Warning),
            "error" => Some(Severity::Error),
            _ => None,
        }
    }
}

impl std::fmt::Display for Severity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Static facts about one code.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct CodeInfo {
    pub code: &'static str,
    /// Short kebab-case name, usable instead of the code on the command line.
    pub name: &'static str,
    #[serde(serialize_with = "layer_serde::one")]
    pub layer: Layer,
    pub severity: Severity,
    pub title: &'static str,
    /// The commonly omitted check this code catches, as a hint, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub omission: Option<&'static str>,
    /// The explanation page (markdown: What it means / Why it matters / How to fix /
    /// Example).
    #[serde(skip)]
    pub page: &'static str,
}

macro_rules! codes {
    ($( $id:ident = $code:literal, $name:literal, $layer:ident, $sev:ident, $title:literal, $omission:expr; )*) => {
        /// A finding code.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
        pub enum Code { $( #[serde(rename = $code)] $id, )* }

        /// Every code, in report order.
        pub const ALL: &[Code] = &[ $( Code::$id, )* ];

        impl Code {
            pub fn info(self) -> &'static CodeInfo {
                match self { $( Code::$id => &CodeInfo {
                    code: $code,
                    name: $name,
                    layer: Layer::$layer,
                    severity: Severity::$sev,
                    title: $title,
                    omission: $omission,
                    page: include_str!(concat!("../findings/", $code, ".md")),
                }, )* }
            }
        }
    };
}

codes! {
    K001 = "RDK-K001", "kernel-rdma-absent", Kernel, Error,
        "The kernel has no RDMA support", None;
    K002 = "RDK-K002", "core-modules-missing", Kernel, Error,
        "RDMA core kernel modules are not loaded", None;
    K003 = "RDK-K003", "ib-umad-missing", Kernel, Warning,
        "ib_umad is not loaded",
        Some("ib_umad is the module most often left out; without it MAD tools (sminfo, ibnetdiscover, perfquery) and opensm cannot reach the fabric");
    K004 = "RDK-K004", "vendor-rdma-driver-missing", Kernel, Error,
        "A NIC's Ethernet driver is loaded but its RDMA driver is not", None;
    K005 = "RDK-K005", "uverbs-abi-unsupported", Kernel, Error,
        "The kernel's uverbs ABI version is not one libibverbs supports", None;
    K006 = "RDK-K006", "uverbs-device-missing", Kernel, Error,
        "An RDMA device has no uverbs character device", None;
    K007 = "RDK-K007", "dma-mapping-error", Kernel, Error,
        "The kernel log reports DMA mapping errors",
        Some("read dmesg when ibv_reg_mr fails: DMA mapping errors look like ENOMEM and leak descriptors until the queue runs dry");
    K008 = "RDK-K008", "driver-health-event", Kernel, Error,
        "The kernel log reports a driver or firmware health event", None;
    K009 = "RDK-K009", "link-flaps", Kernel, Warning,
        "The kernel log shows the link going down and up repeatedly", None;
    K010 = "RDK-K010", "kernel-log-unread", Kernel, Info,
        "The kernel log could not be read, so its checks did not run", None;
    K011 = "RDK-K011", "evidence-disagrees", Kernel, Warning,
        "Two sources of host facts disagree (modules, sysfs, netlink, /dev)", None;
    K012 = "RDK-K012", "rdma-device-in-other-netns", Kernel, Error,
        "RDMA devices are hidden by exclusive RDMA network namespace mode", None;
    H001 = "RDK-H001", "no-rdma-device", Hardware, Error,
        "No RDMA device is registered with the kernel", None;
    H002 = "RDK-H002", "port-not-active", Hardware, Error,
        "A port is not ACTIVE",
        Some("ibstat listing the device is not enough; its port must be PORT_ACTIVE");
    H003 = "RDK-H003", "port-rate-low", Hardware, Warning,
        "A port runs below its expected rate", None;
    H004 = "RDK-H004", "pcie-link-degraded", Hardware, Warning,
        "The PCIe link runs below its capability", None;
    H005 = "RDK-H005", "roce-no-v2-gid", Hardware, Error,
        "A RoCE port has no RoCE v2 GID", None;
    H006 = "RDK-H006", "roce-no-ipv4-gid", Hardware, Warning,
        "A RoCE port has no IPv4-mapped RoCE v2 GID", None;
    H007 = "RDK-H007", "roce-gid-index", Hardware, Info,
        "The GID index to use on a RoCE port", None;
    H008 = "RDK-H008", "mtu-below-max", Hardware, Info,
        "The active RDMA MTU is below 4096 because of the netdev MTU", None;
    H009 = "RDK-H009", "unrecognized-value", Hardware, Info,
        "A sysfs attribute holds a value rdmakit does not recognize", None;
    H010 = "RDK-H010", "port-error-counters", Hardware, Warning,
        "A port's error counters show link or receive errors (or are saturated)", None;
    H011 = "RDK-H011", "transport-retries", Hardware, Info,
        "A port's transport counters show retransmissions, timeouts or failed QPs", None;
    I001 = "RDK-I001", "no-msix-vectors", Kernel, Error,
        "An RDMA device has no MSI-X interrupt vectors",
        Some("check /proc/interrupts after install: with no vectors, completions are never signalled and DMA appears to hang");
    I002 = "RDK-I002", "fewer-vectors-than-cpus", Kernel, Warning,
        "An RDMA device has fewer completion vectors than online CPUs", None;
    I003 = "RDK-I003", "legacy-intx", Kernel, Warning,
        "An RDMA device uses legacy INTx interrupts", None;
    I004 = "RDK-I004", "irq-affinity-one-cpu", Kernel, Warning,
        "An RDMA device's interrupts all land on one CPU",
        Some("check the interrupt affinity too, or all interrupts may land on CPU0");
    I005 = "RDK-I005", "irq-remote-numa", Kernel, Warning,
        "An RDMA device's interrupts run on CPUs of another NUMA node", None;
    L001 = "RDK-L001", "libibverbs-missing", Library, Error,
        "libibverbs is not installed", None;
    L002 = "RDK-L002", "provider-missing", Library, Error,
        "No libibverbs provider for an RDMA device", None;
    L003 = "RDK-L003", "rdma-core-kernel-skew", Library, Warning,
        "rdma-core and the kernel are far apart in age", None;
    L004 = "RDK-L004", "rdma-core-version-unknown", Library, Info,
        "The rdma-core version could not be determined", None;
    A001 = "RDK-A001", "memlock-too-small", Application, Error,
        "RLIMIT_MEMLOCK is too small for memory registration",
        Some("check ulimit -l: ibv_reg_mr fails with ENOMEM although ibv_devinfo looks fine");
    A002 = "RDK-A002", "uverbs-not-accessible", Application, Error,
        "The uverbs device node is not accessible to this user", None;
    A003 = "RDK-A003", "resource-files-not-accessible", Application, Warning,
        "The device's PCI resource files are not accessible",
        Some("check the device's resource file permissions too, or mmap fails");
    A004 = "RDK-A004", "dev-nodes-missing", Application, Error,
        "/dev/infiniband lacks the device nodes the kernel created", None;
    R001 = "RDK-R001", "resources-held-by-dead-process", Application, Error,
        "RDMA resources are held by a dead or zombie process", None;
    R002 = "RDK-R002", "resource-usage-near-limit", Application, Warning,
        "RDMA object usage is near a device limit (max_qp, max_cq, max_mr, max_pd)", None;
    N001 = "RDK-N001", "roce-priority-not-lossless", Hardware, Error,
        "RoCE traffic lands on a priority PFC does not protect",
        Some("check where the ToS lands, not only that PFC is on: ToS >> 2 is the DSCP, the DSCP maps to a priority, and PFC must be enabled on that priority");
    N002 = "RDK-N002", "roce-ecn-disabled", Hardware, Warning,
        "ECN is disabled on the priority RoCE traffic lands on", None;
    N003 = "RDK-N003", "roce-ecn-one-sided", Hardware, Warning,
        "ECN is enabled at only one end of the congestion loop (NP or RP)", None;
    N004 = "RDK-N004", "cnp-priority-unprotected", Hardware, Info,
        "Congestion notifications go out on a priority that is neither lossless nor strict", None;
    N005 = "RDK-N005", "global-pause-with-pfc", Hardware, Warning,
        "Global (802.3x) pause is on together with PFC", None;
    N006 = "RDK-N006", "trust-marking-mismatch", Hardware, Error,
        "The port trusts a marking RoCE traffic does not carry (PCP vs DSCP)", None;
    N007 = "RDK-N007", "pause-storm", Hardware, Error,
        "Pause frames hold the link for a large share of the time", None;
    N008 = "RDK-N008", "ethernet-drops", Hardware, Warning,
        "The Ethernet port drops packets (discards, buffer exhaustion, CRC errors)", None;
    N009 = "RDK-N009", "congestion-notifications", Hardware, Info,
        "Congestion notifications (CNPs) sent, handled and ignored since the baseline", None;
    N010 = "RDK-N010", "optics-threshold", Hardware, Warning,
        "A module reads beyond its own warning or alarm thresholds", None;
    N011 = "RDK-N011", "optics-weak-lane", Hardware, Warning,
        "One lane of a module receives far less light than its siblings", None;
    N012 = "RDK-N012", "fec-uncorrectable", Hardware, Warning,
        "FEC could not correct blocks on the link", None;
    N013 = "RDK-N013", "ethernet-link-down", Hardware, Warning,
        "The Ethernet link beneath RoCE went down", None;
    N014 = "RDK-N014", "cnp-storm", Hardware, Warning,
        "CNPs are sent or handled on a large share of the port's packets (a CNP storm)", None;
    N015 = "RDK-N015", "loss-without-ecn", Hardware, Warning,
        "Retransmissions grow while no CNP is sent or handled: loss the congestion loop never saw", None;
    F001 = "RDK-F001", "link-width-degraded", Fabric, Warning,
        "A link runs narrower than both its ends support and enable", None;
    F002 = "RDK-F002", "link-speed-degraded", Fabric, Warning,
        "A link runs slower than both its ends support and enable", None;
    F003 = "RDK-F003", "port-down-cable-expected", Fabric, Error,
        "A port has no link where the expected topology has a cable", None;
    F004 = "RDK-F004", "link-downed", Fabric, Warning,
        "A fabric link went down (LinkDownedCounter)", None;
    F005 = "RDK-F005", "link-errors", Fabric, Warning,
        "A fabric port counts physical link errors (symbol errors, recoveries, bad packets)", None;
    F006 = "RDK-F006", "forwarding-errors", Fabric, Warning,
        "A fabric port discards or holds packets (discards, relay and constraint errors, VL15 drops, waits)", None;
    F007 = "RDK-F007", "counter-saturated", Fabric, Warning,
        "A fabric port's counter stopped counting at its maximum", None;
    F008 = "RDK-F008", "sm-none", Fabric, Error,
        "No subnet manager answers as MASTER", None;
    F009 = "RDK-F009", "sm-multiple-masters", Fabric, Error,
        "More than one subnet manager answers as MASTER", None;
    F010 = "RDK-F010", "sm-priority-inverted", Fabric, Warning,
        "The MASTER subnet manager has a lower priority than a STANDBY", None;
    F011 = "RDK-F011", "sm-lid-disagrees", Fabric, Error,
        "Ports disagree on the subnet manager's LID", None;
    F012 = "RDK-F012", "sm-not-sweeping", Fabric, Warning,
        "The MASTER subnet manager's activity count does not move", None;
    F013 = "RDK-F013", "guid-duplicate", Fabric, Error,
        "Two nodes or ports share a GUID", None;
    F014 = "RDK-F014", "lid-unassigned", Fabric, Error,
        "A port that is up has no LID (LID 0)", None;
    F015 = "RDK-F015", "lid-duplicate", Fabric, Error,
        "Two ports answer at one LID", None;
    F016 = "RDK-F016", "cable-missing", Fabric, Error,
        "An expected cable (or a whole node) is not in the fabric", None;
    F017 = "RDK-F017", "cable-extra", Fabric, Warning,
        "A cable the expected topology does not name", None;
    F018 = "RDK-F018", "cable-miswired", Fabric, Error,
        "A port is cabled to another peer than expected (or two cables are swapped)", None;
    P001 = "RDK-P001", "probe-mr-registration-failed", Application, Error,
        "Active probe: memory registration failed", None;
    P002 = "RDK-P002", "probe-qp-bringup-failed", Application, Error,
        "Active probe: QP bring-up (RESET to RTS) failed", None;
    P003 = "RDK-P003", "probe-traffic-failed", Application, Error,
        "Active probe: loopback traffic failed or delivered wrong data", None;
}

/// Codes of the active probes ([`crate::probes`]): findings attached by
/// [`crate::report::Report::with_probes`], not emitted by any check.
pub const PROBE_CODES: &[Code] = &[Code::P001, Code::P002, Code::P003];

impl Code {
    /// True for the InfiniBand fabric's codes (`RDK-F…`, layer fabric): the
    /// fabric check (`rdmakit fabric check`, crate rdmakit-fabric) emits them,
    /// no host check does.
    pub fn is_fabric(self) -> bool {
        self.info().layer == Layer::Fabric
    }

    pub fn as_str(self) -> &'static str {
        self.info().code
    }

    /// Finds a code by its code ("RDK-K001", case-insensitive, "K001" also accepted)
    /// or its name ("kernel-rdma-absent").
    pub fn lookup(s: &str) -> Option<Code> {
        let s = s.trim();
        ALL.iter().copied().find(|c| {
            let i = c.info();
            i.code.eq_ignore_ascii_case(s)
                || i.code[4..].eq_ignore_ascii_case(s)
                || i.name.eq_ignore_ascii_case(s)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_names_are_unique() {
        for (i, a) in ALL.iter().enumerate() {
            for b in &ALL[i + 1..] {
                assert_ne!(a.info().code, b.info().code);
                assert_ne!(a.info().name, b.info().name);
            }
        }
    }

    #[test]
    fn every_code_has_a_complete_page() {
        for c in ALL {
            let page = c.info().page;
            assert!(
                page.starts_with(&format!("# {}", c.as_str())),
                "{}: page title",
                c.as_str()
            );
            for section in [
                "## What it means",
                "## Why it matters",
                "## How to fix",
                "## Example",
            ] {
                assert!(page.contains(section), "{}: missing {section}", c.as_str());
            }
        }
    }

    #[test]
    fn lookup_by_code_short_code_and_name() {
        assert_eq!(Code::lookup("rdk-k003"), Some(Code::K003));
        assert_eq!(Code::lookup("K003"), Some(Code::K003));
        assert_eq!(Code::lookup("ib-umad-missing"), Some(Code::K003));
        assert_eq!(Code::lookup("nope"), None);
    }
}
