//! `rdmakit irq`: per RDMA device, its interrupt vectors, the CPUs they land on,
//! the device's NUMA node and its local CPUs, and what the doctor concludes (the
//! checklist's "IRQ allocation" row as a table).

use std::fmt::Write as _;

use comfy_table::{presets, Cell, ContentArrangement, Table};
use serde::Serialize;

use super::{findings_about, verdicts, CheckStatus};
use crate::finding::Finding;
use crate::report::Report;
use crate::rules::irq::completion_vectors;
use rdmakit_host::model::{DeviceKind, HostFacts};
use rdmakit_host::parse::proc::IrqLine;
use rdmakit_host::parse::sysfs::CpuSet;
use rdmakit_vocab::exit::Exit;

/// The JSON schema of [`IrqView`].
pub const SCHEMA: &str = "rdmakit.irq/v1";

const CHECKS: [&str; 2] = ["irq.vectors", "irq.affinity"];

/// Every RDMA device's interrupts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IrqView {
    pub schema: &'static str,
    /// Where the facts came from (as the doctor's report says).
    pub source: String,
    /// The CPU columns of /proc/interrupts (`CPU0`, `CPU1`, ...).
    pub cpus: Vec<String>,
    /// /sys/devices/system/cpu/online as read.
    pub cpus_online: String,
    /// The file the lines came from.
    pub interrupts_path: String,
    /// The doctor's IRQ checks (`irq.vectors`, `irq.affinity`).
    pub verdicts: Vec<CheckStatus>,
    pub devices: Vec<DeviceIrqs>,
}

/// One device's vectors.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceIrqs {
    pub device: String,
    pub kind: DeviceKind,
    /// The PCI function (`0000:3b:00.0`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bdf: Option<String>,
    /// The device's NUMA node (`-1` when the platform has none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub numa_node: Option<i32>,
    /// Its NUMA-local CPUs as the kernel lists them (`0-15,32-47`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_cpus: Option<String>,
    /// Per CPU column: on the device's NUMA node (`None` when unknown).
    pub cpu_local: Vec<Option<bool>>,
    pub vectors: Vec<Vector>,
    /// Per CPU column: how many of the device's vectors land there.
    pub vectors_per_cpu: Vec<u32>,
    /// Per CPU column: the device's interrupts counted there.
    pub interrupts_per_cpu: Vec<u64>,
    /// Why the device has no vectors to show (a software device, no PCI link).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The doctor's IRQ findings about this device.
    pub findings: Vec<Finding>,
}

/// One interrupt vector (a line of /proc/interrupts).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Vector {
    /// The IRQ number.
    pub irq: u32,
    /// The handler name (`mlx5_comp3@pci:0000:3b:00.0`).
    pub name: String,
    /// The interrupt chip (`IR-PCI-MSIX-0000:3b:00.0`, `IO-APIC`).
    pub chip: String,
    /// `msi` (MSI or MSI-X) or `intx` (legacy, shared).
    pub mode: &'static str,
    /// A completion vector (the others are async/command vectors).
    pub completion: bool,
    /// Interrupts per CPU column.
    pub counts: Vec<u64>,
    pub total: u64,
    /// /proc/irq/N/smp_affinity_list as read (`<absent>` when it could not be read).
    pub affinity: String,
    pub affinity_path: String,
    /// The CPU columns the vector lands on: its affinity when readable, else the
    /// columns whose count is non-zero.
    pub lands_on: Vec<usize>,
    /// Where `lands_on` came from: `affinity` or `counts`.
    pub lands_by: &'static str,
    /// Every CPU it lands on is on the device's NUMA node (`None` when unknown).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub numa_local: Option<bool>,
}

impl IrqView {
    /// The view of `facts`, with the conclusions of `report` (built from the same facts).
    pub fn build(facts: &HostFacts, report: &Report) -> IrqView {
        let ints = facts.interrupts.get();
        let cpus: Vec<String> = ints.map(|i| i.cpus.clone()).unwrap_or_default();
        let numbers: Vec<Option<u32>> = ints.map(|i| i.cpu_numbers()).unwrap_or_default();
        let devices = facts
            .devices
            .iter()
            .map(|d| {
                let findings = findings_about(report, &CHECKS, &d.name);
                let Some(pci) = &d.pci else {
                    let note = match d.kind {
                        DeviceKind::Software => {
                            "a software device: no interrupts of its own".to_string()
                        }
                        _ => "no PCI device link in the source: IRQs cannot be attributed"
                            .to_string(),
                    };
                    return DeviceIrqs {
                        device: d.name.clone(),
                        kind: d.kind,
                        bdf: None,
                        numa_node: None,
                        local_cpus: None,
                        cpu_local: vec![None; cpus.len()],
                        vectors: Vec::new(),
                        vectors_per_cpu: vec![0; cpus.len()],
                        interrupts_per_cpu: vec![0; cpus.len()],
                        note: Some(note),
                        findings,
                    };
                };
                let local = pci.local_cpulist.get();
                let numa_node = pci.numa_node.get().copied();
                let cpu_local: Vec<Option<bool>> = numbers
                    .iter()
                    .map(|n| Some(local?.contains((*n)?)))
                    .collect();
                let lines = ints.map(|i| d.irq_lines(i)).unwrap_or_default();
                let msi: Vec<&IrqLine> = lines
                    .iter()
                    .copied()
                    .filter(|l| !l.is_legacy_intx())
                    .collect();
                let comp: Vec<u32> = completion_vectors(&msi)
                    .iter()
                    .filter_map(|l| l.number)
                    .collect();
                let vectors: Vec<Vector> = lines
                    .iter()
                    .filter_map(|l| {
                        let n = l.number?;
                        Some(vector(facts, l, n, comp.contains(&n), &numbers, local))
                    })
                    .collect();
                let mut per_cpu = vec![0u32; cpus.len()];
                let mut ints_per_cpu = vec![0u64; cpus.len()];
                for v in &vectors {
                    for c in &v.lands_on {
                        if let Some(x) = per_cpu.get_mut(*c) {
                            *x += 1;
                        }
                    }
                    for (i, c) in v.counts.iter().enumerate() {
                        if let Some(x) = ints_per_cpu.get_mut(i) {
                            *x = x.saturating_add(*c);
                        }
                    }
                }
                let note = if ints.is_none() {
                    Some(format!(
                        "{} could not be read ({})",
                        facts.interrupts.path,
                        facts.interrupts.shown()
                    ))
                } else if vectors.is_empty() {
                    Some(format!(
                        "no line of {} belongs to {}",
                        facts.interrupts.path, pci.bdf
                    ))
                } else {
                    None
                };
                DeviceIrqs {
                    device: d.name.clone(),
                    kind: d.kind,
                    bdf: Some(pci.bdf.clone()),
                    numa_node,
                    local_cpus: local.map(CpuSet::to_string),
                    cpu_local,
                    vectors,
                    vectors_per_cpu: per_cpu,
                    interrupts_per_cpu: ints_per_cpu,
                    note,
                    findings,
                }
            })
            .collect();
        IrqView {
            schema: SCHEMA,
            source: report.source.clone(),
            cpus,
            cpus_online: facts.cpus_online.shown(),
            interrupts_path: facts.interrupts.path.clone(),
            verdicts: verdicts(report, &CHECKS),
            devices,
        }
    }

    /// The view `rdmakit irq` shows of `facts` (from the source labelled
    /// `label`): the doctor's report on them with the default configuration
    /// gives the IRQ checks' conclusions.
    pub fn of_facts(facts: &HostFacts, tool: &str, label: &str) -> IrqView {
        let report = Report::build(facts, &crate::checks::Config::default(), tool, label);
        IrqView::build(facts, &report)
    }

    /// The worst thing the IRQ checks found: true when a check failed.
    pub fn failed(&self) -> bool {
        self.verdicts.iter().any(|v| v.result == "fail")
    }

    /// `rdmakit irq`'s exit status: [`Exit::Found`] when the IRQ checks fail
    /// (no vectors, too few, INTx, all on one CPU, on another NUMA node),
    /// else [`Exit::Ok`].
    pub fn exit(&self) -> Exit {
        match self.failed() {
            true => Exit::Found,
            false => Exit::Ok,
        }
    }

    /// What `rdmakit irq` prints: the view as JSON (schema [`SCHEMA`]) or as
    /// the text [`render`] makes.
    pub fn output(&self, json: bool) -> String {
        match json {
            true => serde_json::to_string_pretty(self).unwrap_or_default() + "\n",
            false => render(self),
        }
    }
}

fn vector(
    facts: &HostFacts,
    l: &IrqLine,
    n: u32,
    completion: bool,
    numbers: &[Option<u32>],
    local: Option<&CpuSet>,
) -> Vector {
    let aff = facts.irq_affinity.get(&n);
    let set = aff.and_then(|a| a.get()).filter(|s| !s.is_empty());
    let (lands_on, lands_by): (Vec<usize>, &'static str) = match set {
        Some(s) => (
            numbers
                .iter()
                .enumerate()
                .filter(|(_, c)| c.is_some_and(|c| s.contains(c)))
                .map(|(i, _)| i)
                .collect(),
            "affinity",
        ),
        None => (
            l.counts
                .iter()
                .enumerate()
                .filter(|(_, c)| **c > 0)
                .map(|(i, _)| i)
                .collect(),
            "counts",
        ),
    };
    let numa_local = local.filter(|s| !s.is_empty()).and_then(|local| {
        if lands_on.is_empty() {
            return None;
        }
        let mut all = true;
        for i in &lands_on {
            all &= local.contains((*numbers.get(*i)?)?);
        }
        Some(all)
    });
    Vector {
        irq: n,
        name: l.actions.clone(),
        chip: l.chip.clone(),
        mode: if l.is_legacy_intx() { "intx" } else { "msi" },
        completion,
        counts: l.counts.clone(),
        total: l.total(),
        affinity: aff.map_or_else(|| "<absent>".to_string(), |a| a.shown()),
        affinity_path: aff.map_or_else(
            || format!("/proc/irq/{n}/smp_affinity_list"),
            |a| a.path.clone(),
        ),
        lands_on,
        lands_by,
        numa_local,
    }
}

/// `rdmakit irq` as text: one table per device, then the doctor's conclusion.
pub fn render(v: &IrqView) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "IRQs of RDMA devices ({}; {} CPU columns, online {})",
        v.source,
        v.cpus.len(),
        v.cpus_online
    );
    if v.devices.is_empty() {
        out.push_str("no RDMA device\n");
    }
    for d in &v.devices {
        out.push('\n');
        let _ = write!(out, "{}", d.device);
        if let Some(b) = &d.bdf {
            let _ = write!(out, " ({b})");
        }
        match (d.numa_node, &d.local_cpus) {
            (Some(n), Some(c)) => {
                let _ = write!(out, ": NUMA node {n}, local CPUs {c}");
            }
            (Some(n), None) => {
                let _ = write!(out, ": NUMA node {n}");
            }
            _ => {}
        }
        out.push('\n');
        if let Some(n) = &d.note {
            let _ = writeln!(out, "  {n}");
        }
        if !d.vectors.is_empty() {
            let mut t = Table::new();
            t.load_preset(presets::UTF8_FULL_CONDENSED)
                .set_content_arrangement(ContentArrangement::Dynamic)
                .set_width(110)
                .set_header(vec![
                    "IRQ",
                    "vector",
                    "mode",
                    "affinity",
                    "lands on",
                    "NUMA",
                    "interrupts",
                ]);
            for x in &d.vectors {
                let on: Vec<&str> = x
                    .lands_on
                    .iter()
                    .filter_map(|i| v.cpus.get(*i).map(String::as_str))
                    .collect();
                let numa = match x.numa_local {
                    Some(true) => "local",
                    Some(false) => "REMOTE",
                    None => "?",
                };
                t.add_row(vec![
                    Cell::new(x.irq),
                    Cell::new(&x.name),
                    Cell::new(if x.completion {
                        format!("{} comp", x.mode)
                    } else {
                        x.mode.to_string()
                    }),
                    Cell::new(&x.affinity),
                    Cell::new(if x.lands_by == "counts" {
                        format!("{} (by counts)", on.join(","))
                    } else {
                        on.join(",")
                    }),
                    Cell::new(numa),
                    Cell::new(x.total),
                ]);
            }
            let _ = writeln!(out, "{t}");
            let per: Vec<String> = v
                .cpus
                .iter()
                .zip(&d.vectors_per_cpu)
                .zip(&d.cpu_local)
                .map(|((c, n), l)| format!("{c}:{n}{}", if *l == Some(true) { "*" } else { "" }))
                .collect();
            let _ = writeln!(out, "  vectors per CPU (* = NUMA-local): {}", per.join(" "));
        }
        for f in &d.findings {
            let _ = writeln!(
                out,
                "  {} {}: {}",
                f.severity.as_str().to_ascii_uppercase(),
                f.code.as_str(),
                f.message
            );
        }
    }
    out.push('\n');
    for x in &v.verdicts {
        let _ = write!(out, "doctor {}: {}", x.check, x.result);
        if let Some(r) = &x.reason {
            let _ = write!(out, " ({r})");
        }
        out.push('\n');
    }
    out
}
