//! The doctor's report: the seed's four-row verification table, every check's
//! status, and the findings, as data. Rendering is in [`crate::render`].

use serde::Serialize;

use crate::checks::{run_all, CheckResult, Config, Status};
use crate::codes::{Code, Severity};
use crate::finding::Finding;
use rdmakit_host::model::{DeviceKind, HostFacts};

/// The JSON schema identifier; bumped when a field changes meaning or disappears.
pub const SCHEMA: &str = "rdmakit.doctor/v1";

/// One row of the seed's verification record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChecklistRow {
    pub check: &'static str,
    pub criterion: &'static str,
    /// "pass", "fail", "n/a" or "not checked".
    pub result: &'static str,
    pub omission: &'static str,
    /// The codes that failed this row.
    pub codes: Vec<Code>,
}

/// A one-line summary of a device, for the report header.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceSummary {
    pub name: String,
    pub kind: DeviceKind,
    pub driver: Option<String>,
    pub ports: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Counts {
    pub error: usize,
    pub warning: usize,
    pub info: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub schema: &'static str,
    pub tool: String,
    /// Where the facts came from: "live host", "root DIR", "bundle FILE".
    pub source: String,
    pub kernel: Option<String>,
    pub devices: Vec<DeviceSummary>,
    pub checklist: Vec<ChecklistRow>,
    pub checks: Vec<CheckResult>,
    /// Every finding, most severe first, then by layer from hardware up.
    pub findings: Vec<Finding>,
    pub counts: Counts,
}

impl Report {
    /// Runs every check over the facts and assembles the report.
    pub fn build(facts: &HostFacts, cfg: &Config, tool: &str, source: &str) -> Report {
        let checks = run_all(facts, cfg);
        let mut findings: Vec<Finding> = checks.iter().flat_map(|c| c.findings.clone()).collect();
        findings.sort_by(|a, b| {
            b.severity
                .cmp(&a.severity)
                .then(a.layer.cmp(&b.layer))
                .then(a.code.cmp(&b.code))
                .then(a.subject.cmp(&b.subject))
        });
        let counts = Counts {
            error: findings
                .iter()
                .filter(|f| f.severity == Severity::Error)
                .count(),
            warning: findings
                .iter()
                .filter(|f| f.severity == Severity::Warning)
                .count(),
            info: findings
                .iter()
                .filter(|f| f.severity == Severity::Info)
                .count(),
        };
        let devices = facts
            .devices
            .iter()
            .map(|d| DeviceSummary {
                name: d.name.clone(),
                kind: d.kind,
                driver: d.driver.clone(),
                ports: d
                    .ports
                    .iter()
                    .map(|p| {
                        format!(
                            "{}: {} {} {}",
                            p.num,
                            p.state.get().map_or("?".into(), |s| s.name.clone()),
                            p.link_layer.text().unwrap_or("?"),
                            p.rate.text().unwrap_or("?")
                        )
                    })
                    .collect(),
            })
            .collect();
        Report {
            schema: SCHEMA,
            tool: tool.to_string(),
            source: source.to_string(),
            kernel: facts.kernel.release.text().map(str::to_string),
            devices,
            checklist: checklist(&checks),
            checks,
            findings,
            counts,
        }
    }

    /// The highest severity found, if any.
    pub fn worst(&self) -> Option<Severity> {
        self.findings.iter().map(|f| f.severity).max()
    }

    /// Whether anything at or above `level` was found (the exit status of doctor).
    pub fn fails(&self, level: Severity) -> bool {
        self.worst().is_some_and(|w| w >= level)
    }
}

/// Builds the seed's four rows from the check results.
fn checklist(checks: &[CheckResult]) -> Vec<ChecklistRow> {
    let device_ok = checks
        .iter()
        .any(|c| c.id == "device.present" && c.status == Status::Pass);
    // A row fails on any warning or error from its checks; otherwise it takes the
    // status of its primary check (the first id).
    let row = |check, criterion, omission, ids: &[&str], needs_device: bool| {
        let rel: Vec<&CheckResult> = checks.iter().filter(|c| ids.contains(&c.id)).collect();
        let codes: Vec<Code> = rel
            .iter()
            .flat_map(|c| c.findings.iter())
            .filter(|f| f.severity >= Severity::Warning)
            .map(|f| f.code)
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let primary = checks.iter().find(|c| c.id == ids[0]).map(|c| &c.status);
        let result = if !codes.is_empty() {
            "fail"
        } else if needs_device && !device_ok {
            "n/a"
        } else {
            primary.map_or("not checked", Status::word)
        };
        ChecklistRow {
            check,
            criterion,
            result,
            omission,
            codes,
        }
    };
    vec![
        row(
            "Kernel modules loaded",
            "ib_core, ib_uverbs, rdma_ucm and ib_umad loaded (lsmod)",
            "ib_umad not checked: user space cannot reach the device (MAD)",
            &[
                "kernel.modules",
                "kernel.rdma-support",
                "kernel.vendor-driver",
                "kernel.uverbs",
            ],
            false,
        ),
        row(
            "Device visible",
            "ibv_devinfo shows the device with its port PORT_ACTIVE",
            "only ibstat checked, not that the port is ACTIVE",
            &["port.state", "kernel.rdma-support", "device.present"],
            false,
        ),
        row(
            "Memory registration and mapping",
            "ibv_reg_mr can succeed (memlock); uverbs and resource files accessible",
            "resource file permissions not checked: mmap fails",
            &["app.memlock", "app.device-access", "app.resource-files"],
            true,
        ),
        row(
            "IRQ allocation",
            "/proc/interrupts shows MSI-X vectors, one per CPU, spread out",
            "interrupt affinity not checked: all interrupts land on CPU0",
            &["irq.vectors", "irq.affinity"],
            true,
        ),
    ]
}
