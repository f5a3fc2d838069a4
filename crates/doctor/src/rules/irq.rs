//! IRQ allocation: MSI-X vectors, completion vectors per CPU, INTx, affinity, NUMA.
//! Software devices (rxe, siw, the soft NIC) have no IRQs: "not applicable".

use super::kernel_lacks_rdma;
use crate::checks::{Ctx, Outcome};
use crate::codes::Code;
use crate::finding::{Evidence, Finding};
use rdmakit_host::model::{Device, DeviceKind};
use rdmakit_host::parse::proc::{Interrupts, IrqLine};
use rdmakit_host::parse::sysfs::CpuSet;

/// The PCI devices to check and the parsed /proc/interrupts, or why not.
fn pci_devices<'a>(cx: &'a Ctx) -> Result<(Vec<&'a Device>, &'a Interrupts), Outcome> {
    let f = cx.facts;
    if kernel_lacks_rdma(f) {
        return Err(Outcome::NotApplicable(
            "the kernel has no RDMA support (RDK-K001)".into(),
        ));
    }
    if f.devices.is_empty() {
        return Err(Outcome::NotApplicable("no RDMA device".into()));
    }
    let pci: Vec<&Device> = f.devices.iter().filter(|d| d.pci.is_some()).collect();
    if pci.is_empty() {
        let soft: Vec<&str> = f
            .devices
            .iter()
            .filter(|d| d.kind == DeviceKind::Software)
            .map(|d| d.name.as_str())
            .collect();
        return Err(if soft.len() == f.devices.len() {
            Outcome::NotApplicable(format!(
                "software device{} only ({}): no IRQs",
                if soft.len() > 1 { "s" } else { "" },
                soft.join(", ")
            ))
        } else {
            Outcome::NotChecked(
                "no PCI device link in the source, so IRQs cannot be attributed".into(),
            )
        });
    }
    match f.interrupts.get() {
        Some(ints) => Ok((pci, ints)),
        None => Err(Outcome::NotChecked(format!(
            "{} could not be read ({})",
            f.interrupts.path,
            f.interrupts.shown()
        ))),
    }
}

fn is_intx(l: &IrqLine) -> bool {
    l.is_legacy_intx()
}

/// Completion vectors: lines whose handler names say "comp" (mlx5_comp3, bnxt_re
/// "-comp", irdma "CEQ"), else every MSI vector but one (the async/command one).
pub(crate) fn completion_vectors<'a>(lines: &[&'a IrqLine]) -> Vec<&'a IrqLine> {
    let named: Vec<&IrqLine> = lines
        .iter()
        .copied()
        .filter(|l| {
            let a = l.actions.to_ascii_lowercase();
            a.contains("comp") || a.contains("ceq")
        })
        .collect();
    if !named.is_empty() {
        return named;
    }
    let msi: Vec<&IrqLine> = lines.iter().copied().filter(|l| !is_intx(l)).collect();
    msi.into_iter().skip(1).collect()
}

fn irq_list(lines: &[&IrqLine]) -> String {
    let mut s: Vec<String> = lines
        .iter()
        .take(6)
        .map(|l| format!("{} {} {}", l.irq, l.chip, l.actions))
        .collect();
    if lines.len() > 6 {
        s.push(format!("... {} lines in all", lines.len()));
    }
    s.join("; ")
}

pub fn vectors(cx: &Ctx) -> Outcome {
    let (devs, ints) = match pci_devices(cx) {
        Ok(d) => d,
        Err(o) => return o,
    };
    let f = cx.facts;
    let cpus = f
        .cpus_online
        .get()
        .map(CpuSet::len)
        .unwrap_or(ints.cpus.len());
    let mut out = Vec::new();
    for d in devs {
        let Some(pci) = &d.pci else { continue };
        let lines = d.irq_lines(ints);
        let subject = format!("{} ({})", d.name, pci.bdf);
        let msi_text = match &pci.msi_irqs {
            Ok(v) if v.is_empty() => "empty".to_string(),
            Ok(v) => v.iter().map(u32::to_string).collect::<Vec<_>>().join(" "),
            Err(e) => format!("<read failed: {e}>"),
        };
        let msi_ev = Evidence::new(format!("{}/msi_irqs", pci.path), msi_text);
        let msi_lines: Vec<&IrqLine> = lines.iter().copied().filter(|l| !is_intx(l)).collect();
        if msi_lines.is_empty() {
            out.push(
                Finding::new(
                    Code::I001,
                    subject.clone(),
                    format!("{} has no MSI/MSI-X vectors in /proc/interrupts: completions will not be signalled", d.name),
                )
                .evidence(msi_ev.clone())
                .evidence(Evidence::new(f.interrupts.path.clone(), format!("no line for {} or its msi_irqs", pci.bdf)))
                .remedy(
                    "The driver did not get interrupts: check dmesg for MSI-X allocation \
                     failures, that MSI is not disabled (pci=nomsi on the kernel command line), \
                     and for VFs the number of vectors the PF grants.",
                )
                .next(format!("grep -i {} /proc/interrupts; lspci -vvv -s {} | grep -i msi", pci.bdf, pci.bdf))
                .next(format!("dmesg | grep -i {}", pci.bdf)),
            );
        }
        let intx: Vec<&IrqLine> = lines.iter().copied().filter(|l| is_intx(l)).collect();
        if !intx.is_empty() {
            out.push(
                Finding::new(
                    Code::I003,
                    subject.clone(),
                    format!("{} uses legacy INTx interrupts ({})", d.name, intx[0].chip),
                )
                .evidence(Evidence::new(f.interrupts.path.clone(), irq_list(&intx)))
                .remedy("Legacy INTx is shared and slow: enable MSI-X (BIOS, kernel command line without pci=nomsi, driver parameters).")
                .next(format!("lspci -vvv -s {} | grep -iE 'msi|interrupt'", pci.bdf)),
            );
        }
        if !msi_lines.is_empty() {
            let comp = completion_vectors(&msi_lines);
            if comp.len() < cpus {
                out.push(
                    Finding::new(
                        Code::I002,
                        subject.clone(),
                        format!(
                            "{} has {} completion vector{} for {cpus} online CPUs: completion processing cannot spread over every core",
                            d.name,
                            comp.len(),
                            if comp.len() == 1 { "" } else { "s" }
                        ),
                    )
                    .evidence(Evidence::new(f.interrupts.path.clone(), irq_list(&msi_lines)))
                    .attr(&f.cpus_online)
                    .remedy(
                        "Fewer vectors than cores means a limited interrupt mode: check the \
                         driver's channel count (ethtool -l), the firmware/PF MSI-X limit \
                         (for VFs), and dmesg for vector allocation failures.",
                    )
                    .next(format!("grep -c {} /proc/interrupts; nproc", pci.bdf)),
                );
            }
        }
    }
    Outcome::Findings(out)
}

pub fn affinity(cx: &Ctx) -> Outcome {
    let (devs, ints) = match pci_devices(cx) {
        Ok(d) => d,
        Err(o) => return o,
    };
    let f = cx.facts;
    let mut out = Vec::new();
    for d in devs {
        let Some(pci) = &d.pci else { continue };
        let lines: Vec<&IrqLine> = d
            .irq_lines(ints)
            .into_iter()
            .filter(|l| !is_intx(l))
            .collect();
        let subject = format!("{} ({})", d.name, pci.bdf);
        let affs: Vec<(u32, &rdmakit_host::model::Attr<CpuSet>)> = lines
            .iter()
            .filter_map(|l| l.number)
            .filter_map(|n| f.irq_affinity.get(&n).map(|a| (n, a)))
            .collect();
        let online = f
            .cpus_online
            .get()
            .map(CpuSet::len)
            .unwrap_or(ints.cpus.len());
        // All vectors on one CPU, by configured affinity or by where counts landed.
        if lines.len() >= 2 && online > 1 {
            let sets: Vec<&CpuSet> = affs.iter().filter_map(|(_, a)| a.get()).collect();
            let one_cpu_affinity = !sets.is_empty()
                && sets.len() == affs.len()
                && sets.iter().all(|s| s.len() == 1 && *s == sets[0]);
            let mut busy_cols = std::collections::BTreeSet::new();
            for l in &lines {
                for (i, c) in l.counts.iter().enumerate() {
                    if *c > 0 {
                        busy_cols.insert(i);
                    }
                }
            }
            let one_cpu_counts =
                busy_cols.len() == 1 && lines.iter().map(|l| l.total()).sum::<u64>() > 0;
            if one_cpu_affinity || one_cpu_counts {
                let cpu = if one_cpu_affinity {
                    sets[0].to_string()
                } else {
                    busy_cols.iter().next().map_or_else(String::new, |c| {
                        ints.cpus
                            .get(*c)
                            .cloned()
                            .unwrap_or_else(|| format!("CPU{c}"))
                    })
                };
                let mut fd = Finding::new(
                    Code::I004,
                    subject.clone(),
                    format!(
                        "all {} interrupt vectors of {} land on CPU {cpu}",
                        lines.len(),
                        d.name
                    ),
                );
                for (n, a) in affs.iter().take(4) {
                    let _ = n;
                    fd = fd.attr(a);
                }
                if one_cpu_counts {
                    fd = fd.evidence(Evidence::new(
                        f.interrupts.path.clone(),
                        format!("counts non-zero only in {cpu}"),
                    ));
                }
                out.push(
                    fd.remedy(
                        "Spread the vectors over the device's NUMA-local CPUs: run irqbalance, \
                         or pin them (the NIC vendors' set_irq_affinity scripts, or echo <cpu> > \
                         /proc/irq/<n>/smp_affinity_list per vector); check that irqbalance does \
                         not ban them.",
                    )
                    .next("systemctl status irqbalance")
                    .next(format!("for i in $(ls {}/msi_irqs); do echo $i $(cat /proc/irq/$i/smp_affinity_list); done", pci.path)),
                );
            }
        }
        // Vectors on CPUs of another NUMA node.
        let (Some(node), Some(local)) = (pci.numa_node.get(), pci.local_cpulist.get()) else {
            continue;
        };
        if *node < 0 || local.is_empty() {
            continue;
        }
        let remote: Vec<(u32, &rdmakit_host::model::Attr<CpuSet>)> = affs
            .iter()
            .filter(|(_, a)| {
                a.get()
                    .is_some_and(|s| !s.is_empty() && s.intersection(local).is_empty())
            })
            .map(|(n, a)| (*n, *a))
            .collect();
        if !remote.is_empty() {
            let mut fd = Finding::new(
                Code::I005,
                subject.clone(),
                format!(
                    "{} of {} vectors of {} run on CPUs outside NUMA node {node} (local CPUs {local})",
                    remote.len(),
                    affs.len(),
                    d.name
                ),
            )
            .attr(&pci.numa_node)
            .attr(&pci.local_cpulist);
            for (_, a) in remote.iter().take(4) {
                fd = fd.attr(a);
            }
            out.push(
                fd.remedy(format!(
                    "Pin the vectors to node {node}'s CPUs ({local}) and run the application \
                     there too (numactl --cpunodebind={node} --membind={node}); cross-node \
                     interrupts and buffers can cost half the bandwidth."
                ))
                .next(format!("cat {}/local_cpulist; numactl -H", pci.path)),
            );
        }
    }
    Outcome::Findings(out)
}
