//! The doctor's report: the four-row verification checklist, every check's
//! status, and the findings, as data. Rendering is in [`crate::render`].

use serde::Serialize;

use crate::checks::{run_all, CheckResult, Config, Status};
use crate::codes::{Code, Layer, Severity};
use crate::finding::{Evidence, Finding};
use crate::probes::{ProbeKind, ProbeReport};
use rdmakit_host::model::{DeviceKind, HostFacts};

/// The JSON schema identifier; bumped when a field changes meaning or disappears.
pub const SCHEMA: &str = "rdmakit.doctor/v1";

/// One row of the verification checklist.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChecklistRow {
    pub check: &'static str,
    pub criterion: &'static str,
    /// "pass", "fail", "n/a" or "not checked": "fail" when one of the row's
    /// checks failed (`failed_checks`), else the status of its first check.
    pub result: &'static str,
    /// A hint: what is commonly left out at this step (not a result of this run).
    pub omission: &'static str,
    /// The codes that failed this row.
    pub codes: Vec<Code>,
    /// The checks (`checks[].id`) whose failure failed this row.
    pub failed_checks: Vec<&'static str>,
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
    /// Active probes, one entry per probed device (absent when none ran).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub probes: Vec<ProbeReport>,
    /// Remarks about what ran (e.g. probes requested on a device without a provider).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Host identity and inventory (absent for a soft NIC checked alone).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inventory: Option<crate::inventory::Inventory>,
}

/// "1: ACTIVE InfiniBand 40 Gb/sec (4X QDR)": the port's state, link layer and
/// rate, what the source lacks left out and named at the end ("1: ACTIVE 40
/// Gb/sec (4X QDR), link layer unknown").
fn port_summary(p: &rdmakit_host::model::Port) -> String {
    let state = p.state.get().map(|s| s.name.clone());
    let parts = [
        ("state", state.as_deref()),
        ("link layer", p.link_layer.text()),
        ("rate", p.rate.text()),
    ];
    let known: Vec<&str> = parts.iter().filter_map(|(_, v)| *v).collect();
    let unknown: Vec<&str> = parts
        .iter()
        .filter(|(_, v)| v.is_none())
        .map(|(n, _)| *n)
        .collect();
    let mut s = format!("{}: {}", p.num, known.join(" "));
    if !unknown.is_empty() {
        if !known.is_empty() {
            s.push(',');
        }
        let list = match unknown.as_slice() {
            [one] => one.to_string(),
            [a, b] => format!("{a} and {b}"),
            _ => "state, link layer and rate".to_string(),
        };
        s.push_str(&format!(" {list} unknown"));
    }
    s
}

impl Report {
    /// Runs every check over the facts and assembles the report.
    pub fn build(facts: &HostFacts, cfg: &Config, tool: &str, source: &str) -> Report {
        let checks = run_all(facts, cfg);
        let mut findings: Vec<Finding> = checks.iter().flat_map(|c| c.findings.clone()).collect();
        sort_findings(&mut findings);
        let counts = count(&findings);
        let devices = facts
            .devices
            .iter()
            .map(|d| DeviceSummary {
                name: d.name.clone(),
                kind: d.kind,
                driver: d.driver.clone(),
                ports: d.ports.iter().map(port_summary).collect(),
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
            probes: Vec::new(),
            notes: Vec::new(),
            inventory: Some(crate::inventory::Inventory::build(facts)),
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

const MR_PROBE_CRITERION: &str =
    "ibv_reg_mr succeeds at 4 KiB to 64 MiB within memlock (active probe, see probes); \
     uverbs and resource files accessible";

/// The finding code of a failed probe.
fn probe_code(k: ProbeKind) -> Code {
    match k {
        ProbeKind::MemoryRegistration => Code::P001,
        ProbeKind::QpBringup | ProbeKind::Cleanup => Code::P002,
        ProbeKind::Traffic | ProbeKind::Performance => Code::P003,
    }
}

/// Findings for the failed probes of `p`.
pub fn probe_findings(p: &ProbeReport, cfg: &Config) -> Vec<Finding> {
    p.results
        .iter()
        .filter(|r| !r.passed)
        .map(|r| {
            let code = probe_code(r.kind);
            let mut f = Finding::new(
                code,
                p.device.clone(),
                format!("probe {} failed: {}", r.name, r.detail),
            )
            .evidence(Evidence::new(
                format!("probe {} on {} ({})", r.name, p.device, p.label),
                match (&r.verb, &r.errno) {
                    (Some(v), Some(e)) => format!(
                        "{v} {e} ({} layer)",
                        r.layer.as_deref().unwrap_or("unknown")
                    ),
                    _ => r.detail.clone(),
                },
            ))
            .remedy(match code {
                Code::P001 => {
                    "Check RLIMIT_MEMLOCK (ulimit -l) and the device's max_mr / max_mr_size"
                }
                Code::P002 => {
                    "Check device limits and leaked resources, the port state and the GID table"
                }
                _ => {
                    "Check that UDP port 4791 is free and reachable; explain the completion status"
                }
            })
            .next(format!("rdmakit explain {}", code.as_str()));
            f.layer = r
                .layer
                .as_deref()
                .and_then(Layer::parse)
                .unwrap_or(Layer::Application);
            if let Some(s) = cfg.overrides.get(&code) {
                f.severity = *s;
            }
            f
        })
        .collect()
}

fn count(findings: &[Finding]) -> Counts {
    let n = |s| findings.iter().filter(|f| f.severity == s).count();
    Counts {
        error: n(Severity::Error),
        warning: n(Severity::Warning),
        info: n(Severity::Info),
    }
}

fn sort_findings(findings: &mut [Finding]) {
    findings.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then(a.layer.cmp(&b.layer))
            .then(a.code.cmp(&b.code))
            .then(a.subject.cmp(&b.subject))
    });
}

/// A check result made from probe results of some kinds.
fn probe_check(
    p: &ProbeReport,
    findings: &[Finding],
    id: &'static str,
    title: &'static str,
    kinds: &[ProbeKind],
) -> CheckResult {
    let codes: Vec<Code> = kinds.iter().map(|k| probe_code(*k)).collect();
    let ran = p.results.iter().any(|r| kinds.contains(&r.kind));
    let f: Vec<Finding> = findings
        .iter()
        .filter(|f| codes.contains(&f.code))
        .filter(|f| {
            p.results
                .iter()
                .any(|r| !r.passed && kinds.contains(&r.kind) && f.message.contains(&r.name))
        })
        .cloned()
        .collect();
    let status = if !ran {
        Status::NotChecked("the probe did not run".into())
    } else if f.iter().any(|f| f.severity >= Severity::Warning) {
        Status::Fail
    } else {
        Status::Pass
    };
    CheckResult {
        id,
        title,
        layer: Layer::Application,
        status,
        findings: f,
    }
}

impl Report {
    /// Adds `new` findings, keeping the order (severity, layer, code,
    /// subject) and the counts right.
    pub fn add_findings(&mut self, new: impl IntoIterator<Item = Finding>) {
        self.findings.extend(new);
        sort_findings(&mut self.findings);
        self.counts = count(&self.findings);
    }

    /// Adds the results of active probes ([`crate::probes::run`]): a failed
    /// probe becomes a finding (RDK-P001..P003). When the probed device is one of
    /// the host's own, the checklist's "Memory registration and mapping" row
    /// reflects the MR probe; the soft NIC's probes never change the host's
    /// verdict. Pure: the probes ran before.
    pub fn with_probes(mut self, p: ProbeReport, cfg: &Config) -> Report {
        let new = probe_findings(&p, cfg);
        self.add_findings(new.iter().cloned());
        let host_device = self.devices.iter().any(|d| d.name == p.device);
        let mr_ran = host_device && p.of(ProbeKind::MemoryRegistration).any(|r| !r.skipped);
        if mr_ran {
            // The probe is a check of its own, listed with the others, so the
            // checklist row and the check list say the same.
            let check = probe_check(
                &p,
                &self.findings,
                "probe.mr",
                "Memory registration 4 KiB to 64 MiB (active probe)",
                &[ProbeKind::MemoryRegistration],
            );
            let failed = check.status == Status::Fail;
            self.checks.push(check);
            if let Some(row) = self
                .checklist
                .iter_mut()
                .find(|r| r.check == "Memory registration and mapping")
            {
                row.criterion = "ibv_reg_mr succeeds at 4 KiB to 64 MiB within memlock (active \
                                 probe on the device under Active probes); uverbs and resource \
                                 files accessible";
                if failed {
                    row.result = "fail";
                    row.codes.push(Code::P001);
                    row.failed_checks.push("probe.mr");
                } else if row.codes.is_empty() {
                    row.result = "pass";
                }
            }
        }
        self.probes.push(p);
        self
    }

    /// The report of one probed device alone (`rdmakit doctor --device
    /// soft0`): the verification checklist answered from the probes, for a
    /// userspace device with no kernel modules or IRQs of its own.
    pub fn for_probed_device(
        p: ProbeReport,
        cfg: &Config,
        tool: &str,
        kernel: Option<String>,
    ) -> Report {
        let mut findings = probe_findings(&p, cfg);
        sort_findings(&mut findings);
        let active = !p.ports.is_empty() && p.ports.iter().all(|s| s.contains("ACTIVE"));
        let userspace = "a userspace device: no kernel modules, uverbs node or IRQs of its own";
        let na = |id, title, layer| CheckResult {
            id,
            title,
            layer,
            status: Status::NotApplicable(userspace.into()),
            findings: Vec::new(),
        };
        let checks = vec![
            na("kernel.modules", "RDMA kernel modules loaded", Layer::Kernel),
            CheckResult {
                id: "device.present",
                title: "The device opens and its ports are ACTIVE",
                layer: Layer::Hardware,
                status: if active {
                    Status::Pass
                } else {
                    Status::Fail
                },
                findings: Vec::new(),
            },
            probe_check(
                &p,
                &findings,
                "probe.mr",
                "Memory registration 4 KiB to 64 MiB (active probe)",
                &[ProbeKind::MemoryRegistration],
            ),
            probe_check(
                &p,
                &findings,
                "probe.qp",
                "RC and UD QP bring-up RESET to RTS, resources restored (active probe)",
                &[ProbeKind::QpBringup, ProbeKind::Cleanup],
            ),
            probe_check(
                &p,
                &findings,
                "probe.traffic",
                "Loopback RC SEND/WRITE/READ/atomics, UD SEND, latency and bandwidth (active probe)",
                &[ProbeKind::Traffic, ProbeKind::Performance],
            ),
            na("irq.vectors", "MSI-X vectors and affinity", Layer::Kernel),
        ];
        let word = |id: &str| {
            checks
                .iter()
                .find(|c| c.id == id)
                .map_or("not checked", |c| c.status.word())
        };
        let codes_of = |id: &str| -> Vec<Code> {
            checks
                .iter()
                .filter(|c| c.id == id)
                .flat_map(|c| c.findings.iter().map(|f| f.code))
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect()
        };
        let mut checklist = checklist(&[]);
        for row in &mut checklist {
            match row.check {
                "Kernel modules loaded" => row.result = "n/a",
                "Device visible" => {
                    row.criterion = "the device opens (ibv_open_device) with its port PORT_ACTIVE";
                    row.result = word("device.present");
                    if row.result == "fail" {
                        row.failed_checks = vec!["device.present"];
                    }
                }
                "Memory registration and mapping" => {
                    row.criterion = MR_PROBE_CRITERION;
                    row.result = word("probe.mr");
                    row.codes = codes_of("probe.mr");
                    if row.result == "fail" {
                        row.failed_checks = vec!["probe.mr"];
                    }
                }
                _ => row.result = "n/a",
            }
        }
        let device = DeviceSummary {
            name: p.device.clone(),
            kind: DeviceKind::Software,
            driver: Some(p.label.clone()),
            ports: p.ports.clone(),
        };
        Report {
            schema: SCHEMA,
            tool: tool.to_string(),
            source: format!("{} ({})", p.device, p.label),
            kernel,
            devices: vec![device],
            checklist,
            checks,
            counts: count(&findings),
            findings,
            probes: vec![p],
            notes: Vec::new(),
            inventory: None,
        }
    }
}

/// Builds the checklist's four rows from the check results: a row fails when
/// one of its checks failed (and names them), is "n/a" when it needs a device
/// and none is present, and otherwise takes the status of its first check —
/// so the table and the list of checks never disagree.
fn checklist(checks: &[CheckResult]) -> Vec<ChecklistRow> {
    let device_ok = checks
        .iter()
        .any(|c| c.id == "device.present" && c.status == Status::Pass);
    let row = |check, criterion, omission, ids: &[&'static str], needs_device: bool| {
        let failed: Vec<&CheckResult> = ids
            .iter()
            .filter_map(|id| checks.iter().find(|c| c.id == *id))
            .filter(|c| c.status == Status::Fail)
            .collect();
        let codes: Vec<Code> = failed
            .iter()
            .flat_map(|c| c.findings.iter())
            .filter(|f| f.severity >= Severity::Warning)
            .map(|f| f.code)
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let primary = checks.iter().find(|c| c.id == ids[0]).map(|c| &c.status);
        let result = if !failed.is_empty() {
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
            failed_checks: failed.iter().map(|c| c.id).collect(),
        }
    };
    vec![
        row(
            "Kernel modules loaded",
            "ib_core, ib_uverbs, rdma_ucm and ib_umad loaded (lsmod)",
            "ib_umad is the module most often left out; without it MAD tools (sminfo, \
             perfquery) and opensm cannot reach the fabric",
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
            "ibstat listing the device is not enough; its port must be PORT_ACTIVE",
            &[
                "port.state",
                "kernel.rdma-support",
                "device.present",
                "kernel.netns",
            ],
            false,
        ),
        row(
            "Memory registration and mapping",
            "ibv_reg_mr can succeed (memlock); uverbs and resource files accessible",
            "check the device's resource file permissions too, or mmap fails",
            &["app.memlock", "app.device-access", "app.resource-files"],
            true,
        ),
        row(
            "IRQ allocation",
            "/proc/interrupts shows MSI-X vectors, one per CPU, spread out",
            "check the interrupt affinity too, or all interrupts may land on CPU0",
            &["irq.vectors", "irq.affinity"],
            true,
        ),
    ]
}
