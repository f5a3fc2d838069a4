//! The registry of checks: each a pure function of [`HostFacts`] and [`Config`]
//! that yields findings, or says why it did not apply or could not run.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::codes::{Code, Layer, Severity};
use crate::finding::Finding;
use crate::rules;
use rdmakit_host::model::HostFacts;

/// What the user told the doctor to expect.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Config {
    /// The port rate the fabric should run at, in Gb/s (`--expect-rate`).
    pub expect_rate_gbps: Option<f64>,
    /// Below this RLIMIT_MEMLOCK a warning is raised (bytes).
    pub memlock_warn: u64,
    /// Below this RLIMIT_MEMLOCK an error is raised (bytes).
    pub memlock_error: u64,
    /// The netdev RDMA traffic should use (`--netdev`), for the GID recommendation.
    pub netdev: Option<String>,
    /// How many link-down events in the kernel log make a flap.
    pub flap_threshold: usize,
    /// Years between rdma-core's and the kernel's release beyond which they are
    /// reported as skewed.
    pub skew_years: f64,
    /// Per-code severity overrides (`--severity CODE=LEVEL`).
    pub overrides: BTreeMap<Code, Severity>,
    /// Usage of a device limit (percent) that raises a warning (`--usage-warn`).
    pub usage_warn_pct: f64,
    /// Usage of a device limit (percent) that raises an error (`--usage-error`).
    pub usage_error_pct: f64,
    /// CNPs sent or handled above this percent of the port's packets since the
    /// baseline are a CNP storm (RDK-N014, `--cnp-storm-pct`).
    pub cnp_storm_pct: f64,
    /// Port counters of an earlier collection (`--baseline`): counters are then judged
    /// by their growth since it.
    pub baseline: Option<crate::counters::Baseline>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            expect_rate_gbps: None,
            memlock_warn: 64 << 20,
            memlock_error: 1 << 20,
            netdev: None,
            flap_threshold: 3,
            skew_years: 3.0,
            overrides: BTreeMap::new(),
            usage_warn_pct: 80.0,
            usage_error_pct: 95.0,
            cnp_storm_pct: rules::congestion::CNP_STORM_PCT,
            baseline: None,
        }
    }
}

/// What one check concluded.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", content = "reason", rename_all = "snake_case")]
pub enum Status {
    /// Nothing at warning or above.
    Pass,
    /// At least one finding at warning or above.
    Fail,
    /// The check does not apply here (e.g. IRQs of a software device).
    NotApplicable(String),
    /// The check could not run (e.g. the source lacks the files it reads).
    NotChecked(String),
}

impl Status {
    pub fn word(&self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "fail",
            Status::NotApplicable(_) => "n/a",
            Status::NotChecked(_) => "not checked",
        }
    }
}

/// What a rule function returns.
pub enum Outcome {
    Findings(Vec<Finding>),
    NotApplicable(String),
    NotChecked(String),
    /// Could not run, with findings that say why (e.g. the kernel log was unreadable).
    Skipped(String, Vec<Finding>),
}

impl Outcome {
    pub fn pass() -> Outcome {
        Outcome::Findings(Vec::new())
    }
}

/// The inputs every rule sees.
pub struct Ctx<'a> {
    pub facts: &'a HostFacts,
    pub cfg: &'a Config,
}

/// A check: an id, what it verifies, and the codes it can emit.
pub struct Check {
    pub id: &'static str,
    pub title: &'static str,
    pub layer: Layer,
    pub codes: &'static [Code],
    pub run: fn(&Ctx) -> Outcome,
}

/// A check's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckResult {
    pub id: &'static str,
    pub title: &'static str,
    #[serde(serialize_with = "crate::codes::layer_serde::one")]
    pub layer: Layer,
    #[serde(flatten)]
    pub status: Status,
    pub findings: Vec<Finding>,
}

/// Every check, in report order (bottom of the stack first).
pub const CHECKS: &[Check] = &[
    Check {
        id: "kernel.rdma-support",
        title: "Kernel has RDMA support",
        layer: Layer::Kernel,
        codes: &[Code::K001],
        run: rules::kernel::rdma_support,
    },
    Check {
        id: "kernel.modules",
        title: "RDMA core modules loaded (ib_core, ib_uverbs, rdma_ucm, ib_umad)",
        layer: Layer::Kernel,
        codes: &[Code::K002, Code::K003],
        run: rules::kernel::modules,
    },
    Check {
        id: "kernel.vendor-driver",
        title: "Each RDMA-capable NIC driver has its RDMA driver loaded",
        layer: Layer::Kernel,
        codes: &[Code::K004],
        run: rules::kernel::vendor_driver,
    },
    Check {
        id: "kernel.uverbs",
        title: "uverbs ABI supported and a uverbs device per RDMA device",
        layer: Layer::Kernel,
        codes: &[Code::K005, Code::K006],
        run: rules::kernel::uverbs,
    },
    Check {
        id: "kernel.consistency",
        title: "Modules, sysfs, RDMA netlink, /dev and the kernel config agree",
        layer: Layer::Kernel,
        codes: &[Code::K011],
        run: rules::consistency::consistency,
    },
    Check {
        id: "kernel.netns",
        title: "RDMA devices visible in this network namespace (and the --pid process's)",
        layer: Layer::Kernel,
        codes: &[Code::K012],
        run: rules::namespaces::netns,
    },
    Check {
        id: "device.present",
        title: "At least one RDMA device registered",
        layer: Layer::Hardware,
        codes: &[Code::H001],
        run: rules::hardware::present,
    },
    Check {
        id: "port.state",
        title: "Every port ACTIVE with the physical link up",
        layer: Layer::Hardware,
        codes: &[Code::H002],
        run: rules::hardware::port_state,
    },
    Check {
        id: "port.rate",
        title: "Port rate at the expected speed and width",
        layer: Layer::Hardware,
        codes: &[Code::H003],
        run: rules::hardware::port_rate,
    },
    Check {
        id: "port.errors",
        title: "Port error counters below ibqueryerrors' thresholds, none saturated",
        layer: Layer::Hardware,
        codes: &[Code::H010],
        run: rules::counters::errors,
    },
    Check {
        id: "port.transport",
        title: "No growing transport retries, timeouts or failed QPs (hw_counters)",
        layer: Layer::Hardware,
        codes: &[Code::H011],
        run: rules::counters::transport,
    },
    Check {
        id: "pcie.link",
        title: "PCIe link at full speed and width along the path",
        layer: Layer::Hardware,
        codes: &[Code::H004],
        run: rules::hardware::pcie,
    },
    Check {
        id: "roce.gid",
        title: "RoCE ports have a RoCE v2 IPv4 GID (and which index to use)",
        layer: Layer::Hardware,
        codes: &[Code::H005, Code::H006, Code::H007],
        run: rules::hardware::roce_gids,
    },
    Check {
        id: "roce.mtu",
        title: "RoCE active MTU at 4096",
        layer: Layer::Hardware,
        codes: &[Code::H008],
        run: rules::hardware::roce_mtu,
    },
    Check {
        id: "roce.lossless",
        title: "RoCE traffic's ToS lands on a PFC-enabled priority",
        layer: Layer::Hardware,
        codes: &[Code::N001, Code::N006],
        run: rules::ethernet::lossless_chain,
    },
    Check {
        id: "roce.ecn",
        title: "ECN enabled at both ends on RoCE traffic's priority",
        layer: Layer::Hardware,
        codes: &[Code::N002, Code::N003],
        run: rules::ethernet::ecn,
    },
    Check {
        id: "roce.cnp",
        title: "CNPs go out on a lossless or strict priority",
        layer: Layer::Hardware,
        codes: &[Code::N004],
        run: rules::ethernet::cnp_priority,
    },
    Check {
        id: "ethernet.pause",
        title: "No global (802.3x) pause beside PFC",
        layer: Layer::Hardware,
        codes: &[Code::N005],
        run: rules::ethernet::global_pause,
    },
    Check {
        id: "ethernet.pause-time",
        title: "Pause frames do not hold the link (since the baseline)",
        layer: Layer::Hardware,
        codes: &[Code::N007],
        run: rules::ethernet_counters::pause,
    },
    Check {
        id: "ethernet.drops",
        title: "No discards, buffer drops or CRC errors on the Ethernet port",
        layer: Layer::Hardware,
        codes: &[Code::N008],
        run: rules::ethernet_counters::drops,
    },
    Check {
        id: "roce.congestion",
        title: "Congestion notifications sent, handled, not ignored (since the baseline)",
        layer: Layer::Hardware,
        codes: &[Code::N009],
        run: rules::ethernet_counters::congestion,
    },
    Check {
        id: "roce.cnp-storm",
        title: "CNPs below the storm threshold's share of the port's packets (since the baseline)",
        layer: Layer::Hardware,
        codes: &[Code::N014],
        run: rules::congestion::storm,
    },
    Check {
        id: "roce.loss-without-ecn",
        title: "No retransmissions the congestion loop never saw (no CNP sent or handled)",
        layer: Layer::Hardware,
        codes: &[Code::N015],
        run: rules::congestion::loss_without_ecn,
    },
    Check {
        id: "ethernet.fec",
        title: "FEC corrects every block",
        layer: Layer::Hardware,
        codes: &[Code::N012],
        run: rules::ethernet_counters::fec,
    },
    Check {
        id: "ethernet.link-down",
        title: "The Ethernet link stays up",
        layer: Layer::Hardware,
        codes: &[Code::N013],
        run: rules::ethernet_counters::link_down,
    },
    Check {
        id: "ethernet.optics",
        title: "Modules within their own thresholds",
        layer: Layer::Hardware,
        codes: &[Code::N010],
        run: rules::optics::thresholds,
    },
    Check {
        id: "ethernet.optics-lanes",
        title: "No module lane far below its siblings",
        layer: Layer::Hardware,
        codes: &[Code::N011],
        run: rules::optics::weak_lane,
    },
    Check {
        id: "sysfs.values",
        title: "Every sysfs value understood",
        layer: Layer::Hardware,
        codes: &[Code::H009],
        run: rules::hardware::values,
    },
    Check {
        id: "irq.vectors",
        title: "MSI-X vectors allocated, one completion vector per CPU",
        layer: Layer::Kernel,
        codes: &[Code::I001, Code::I002, Code::I003],
        run: rules::irq::vectors,
    },
    Check {
        id: "irq.affinity",
        title: "IRQ affinity spread over the device's NUMA-local CPUs",
        layer: Layer::Kernel,
        codes: &[Code::I004, Code::I005],
        run: rules::irq::affinity,
    },
    Check {
        id: "library.libibverbs",
        title: "libibverbs installed",
        layer: Layer::Library,
        codes: &[Code::L001],
        run: rules::library::libibverbs,
    },
    Check {
        id: "library.providers",
        title: "A libibverbs provider for every RDMA device",
        layer: Layer::Library,
        codes: &[Code::L002],
        run: rules::library::providers,
    },
    Check {
        id: "library.versions",
        title: "rdma-core version known and close to the kernel's",
        layer: Layer::Library,
        codes: &[Code::L003, Code::L004],
        run: rules::library::versions,
    },
    Check {
        id: "app.memlock",
        title: "RLIMIT_MEMLOCK large enough to register memory",
        layer: Layer::Application,
        codes: &[Code::A001],
        run: rules::application::memlock,
    },
    Check {
        id: "app.device-access",
        title: "/dev/infiniband nodes present and accessible",
        layer: Layer::Application,
        codes: &[Code::A002, Code::A004],
        run: rules::application::device_access,
    },
    Check {
        id: "app.resource-files",
        title: "Device PCI resource files accessible",
        layer: Layer::Application,
        codes: &[Code::A003],
        run: rules::application::resource_files,
    },
    Check {
        id: "resources.owners",
        title: "No RDMA resources held by dead or zombie processes",
        layer: Layer::Application,
        codes: &[Code::R001],
        run: rules::resources::dead_owners,
    },
    Check {
        id: "resources.headroom",
        title: "RDMA object usage below the device limits",
        layer: Layer::Application,
        codes: &[Code::R002],
        run: rules::resources::headroom,
    },
    Check {
        id: "log.readable",
        title: "Kernel log readable",
        layer: Layer::Kernel,
        codes: &[Code::K010],
        run: rules::kernel_log::readable,
    },
    Check {
        id: "log.dma",
        title: "No DMA mapping errors in the kernel log",
        layer: Layer::Kernel,
        codes: &[Code::K007],
        run: rules::kernel_log::dma,
    },
    Check {
        id: "log.health",
        title: "No driver or firmware health events in the kernel log",
        layer: Layer::Kernel,
        codes: &[Code::K008],
        run: rules::kernel_log::health,
    },
    Check {
        id: "log.flaps",
        title: "No repeated link down/up in the kernel log",
        layer: Layer::Kernel,
        codes: &[Code::K009],
        run: rules::kernel_log::flaps,
    },
];

/// Runs every check over the facts.
pub fn run_all(facts: &HostFacts, cfg: &Config) -> Vec<CheckResult> {
    let cx = Ctx { facts, cfg };
    CHECKS
        .iter()
        .map(|c| {
            let (status, mut findings) = match (c.run)(&cx) {
                Outcome::Findings(f) => (Status::Pass, f),
                Outcome::NotApplicable(r) => (Status::NotApplicable(r), Vec::new()),
                Outcome::NotChecked(r) => (Status::NotChecked(r), Vec::new()),
                Outcome::Skipped(r, f) => (Status::NotChecked(r), f),
            };
            for f in &mut findings {
                debug_assert!(c.codes.contains(&f.code), "{} emitted {:?}", c.id, f.code);
                if let Some(s) = cfg.overrides.get(&f.code) {
                    f.severity = *s;
                }
            }
            let status = if status == Status::Pass
                && findings.iter().any(|f| f.severity >= Severity::Warning)
            {
                Status::Fail
            } else {
                status
            };
            CheckResult {
                id: c.id,
                title: c.title,
                layer: c.layer,
                status,
                findings,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_ids_unique_and_every_code_owned_once() {
        for (i, a) in CHECKS.iter().enumerate() {
            for b in &CHECKS[i + 1..] {
                assert_ne!(a.id, b.id);
            }
        }
        for code in crate::codes::ALL {
            let owners = CHECKS.iter().filter(|c| c.codes.contains(code)).count();
            // Probe codes come from active probes, fabric codes from the fabric
            // check (rdmakit-fabric), not from a host check.
            let want = usize::from(!crate::codes::PROBE_CODES.contains(code) && !code.is_fabric());
            assert_eq!(owners, want, "{code:?} must belong to exactly {want} check");
        }
    }
}
