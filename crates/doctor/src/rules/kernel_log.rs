//! Kernel log evidence: DMA mapping errors, driver health events, link flaps.

use std::collections::BTreeMap;

use crate::checks::{Ctx, Outcome};
use crate::codes::Code;
use crate::finding::{Evidence, Finding};
use rdmakit_host::parse::kmsg::KmsgRecord;

/// Driver and subsystem names whose messages concern RDMA.
const RDMA_DRIVERS: &[&str] = &[
    "mlx5",
    "mlx4",
    "bnxt",
    "irdma",
    "ice",
    "i40e",
    "efa",
    "rxe",
    "siw",
    "hfi1",
    "qedr",
    "qede",
    "hns",
    "erdma",
    "mana",
    "ionic",
    "cxgb4",
    "ocrdma",
    "infiniband",
    "ib_core",
    "ib_uverbs",
    "rdma",
    "roce",
];

fn records<'a>(cx: &'a Ctx) -> Result<&'a [KmsgRecord], Outcome> {
    match &cx.facts.kernel_log.records {
        Ok(r) => Ok(r),
        Err(_) => Err(Outcome::NotChecked(format!(
            "the kernel log ({}) could not be read (RDK-K010)",
            cx.facts.kernel_log.source
        ))),
    }
}

fn line(r: &KmsgRecord) -> String {
    let text: String = r
        .text
        .lines()
        .next()
        .unwrap_or_default()
        .chars()
        .take(200)
        .collect();
    match r.ts_usec {
        Some(t) => format!("[{:>5}.{:06}] {text}", t / 1_000_000, t % 1_000_000),
        None => text,
    }
}

fn matching(recs: &[KmsgRecord], pred: impl Fn(&str) -> bool) -> Vec<&KmsgRecord> {
    recs.iter()
        .filter(|r| pred(&r.text.to_ascii_lowercase()))
        .collect()
}

fn with_lines(mut fd: Finding, source: &str, hits: &[&KmsgRecord]) -> Finding {
    for r in hits.iter().take(5) {
        fd = fd.evidence(Evidence::new(source, line(r)));
    }
    if hits.len() > 5 {
        fd = fd.evidence(Evidence::new(
            source,
            format!("... {} matching lines in all", hits.len()),
        ));
    }
    fd
}

pub fn readable(cx: &Ctx) -> Outcome {
    let log = &cx.facts.kernel_log;
    let Err(e) = &log.records else {
        return Outcome::pass();
    };
    let (why, fix) = if log.source == "/dev/kmsg" {
        (
            if e.0 == 1 || e.0 == 13 {
                "kernel.dmesg_restrict keeps it from unprivileged users"
            } else {
                "the source has no kernel log"
            },
            "Run as root (sudo rdmakit doctor), or save the log and pass it: journalctl -k > k.log; rdmakit doctor --kernel-log k.log.",
        )
    } else {
        (
            "the file given with --kernel-log could not be read",
            "Check the path and its permissions.",
        )
    };
    Outcome::Skipped(
        format!("{} unreadable", log.source),
        vec![Finding::new(
            Code::K010,
            "host",
            format!("kernel log not checked: {} ({why})", log.source),
        )
        .evidence(Evidence::new(
            log.source.clone(),
            format!("<read failed: {e}>"),
        ))
        .remedy(fix)
        .next("sudo dmesg | grep -iE 'rdma|mlx5|infiniband|dma'")],
    )
}

pub fn dma(cx: &Ctx) -> Outcome {
    let recs = match records(cx) {
        Ok(r) => r,
        Err(o) => return o,
    };
    let hits = matching(recs, |t| {
        t.contains("dma mapping error")
            || t.contains("dma-api: ") && t.contains("mapping error")
            || (t.contains("dma_map") && (t.contains("fail") || t.contains("error")))
            || t.contains("swiotlb buffer is full")
            || t.contains("io_page_fault")
            || (t.contains("dmar") && t.contains("fault"))
    });
    if hits.is_empty() {
        return Outcome::pass();
    }
    let fd = Finding::new(
        Code::K007,
        "host",
        format!(
            "{} DMA mapping error{} in the kernel log",
            hits.len(),
            if hits.len() == 1 { "" } else { "s" }
        ),
    );
    Outcome::Findings(vec![with_lines(fd, &cx.facts.kernel_log.source, &hits)
        .remedy(
            "The device could not map a buffer (IOMMU fault, exhausted swiotlb bounce buffers, \
             or a DMA mask it cannot address): memory registration and posted work requests \
             fail. Check the IOMMU mode (iommu=pt or intel_iommu=on,sm_off for RDMA hosts), \
             swiotlb size, and that the driver and firmware match; then re-run the MR test.",
        )
        .next("dmesg -T | grep -iE 'dma|iommu|dmar|swiotlb'")
        .next("cat /proc/cmdline")])
}

pub fn health(cx: &Ctx) -> Outcome {
    let recs = match records(cx) {
        Ok(r) => r,
        Err(o) => return o,
    };
    const PATTERNS: &[&str] = &[
        "health compromised",
        "fatal error",
        "fw fatal",
        "firmware fatal",
        "fw_fatal",
        "syndrome",
        "firmware error",
        "hw error",
        "hardware error",
        "internal error",
        "assert_var",
        "pci channel offline",
        "pci channel io_frozen",
        "device reset",
        "fw reset",
        "firmware reset",
        "cmd exec timeout",
        "command timeout",
    ];
    let hits = matching(recs, |t| {
        RDMA_DRIVERS.iter().any(|d| t.contains(d)) && PATTERNS.iter().any(|p| t.contains(p))
    });
    if hits.is_empty() {
        return Outcome::pass();
    }
    let fd = Finding::new(
        Code::K008,
        "host",
        format!(
            "{} driver/firmware health event{} in the kernel log",
            hits.len(),
            if hits.len() == 1 { "" } else { "s" }
        ),
    );
    Outcome::Findings(vec![with_lines(fd, &cx.facts.kernel_log.source, &hits)
        .remedy(
            "The NIC or its firmware reported a fatal condition or reset: collect the \
             firmware dump (devlink health show; devlink health dump show), check the \
             firmware version against the driver's release notes, and the PCIe AER \
             counters. Repeated events call for a firmware update or an RMA.",
        )
        .next("devlink health show")
        .next("dmesg -T | grep -iE 'health|fatal|syndrome|reset'")])
}

pub fn flaps(cx: &Ctx) -> Outcome {
    let recs = match records(cx) {
        Ok(r) => r,
        Err(o) => return o,
    };
    // Link-down events per interface: the word before "link down"/"lost carrier",
    // or the text up to the colon.
    let mut downs: BTreeMap<String, Vec<&KmsgRecord>> = BTreeMap::new();
    for r in recs {
        let t = r.text.to_ascii_lowercase();
        let pos = [
            "link is down",
            "link down",
            "lost carrier",
            "nic link is down",
            "active->down",
            "port_err",
        ]
        .iter()
        .find_map(|p| t.find(p));
        let Some(pos) = pos else { continue };
        let head = r.text[..pos.min(r.text.len())].trim_end_matches([':', ' ']);
        let key = head
            .rsplit(|c: char| c.is_whitespace())
            .find(|w| !w.is_empty())
            .unwrap_or("link")
            .trim_end_matches(':')
            .to_string();
        downs.entry(key).or_default().push(r);
    }
    let out = downs
        .into_iter()
        .filter(|(_, v)| v.len() >= cx.cfg.flap_threshold)
        .map(|(k, v)| {
            let fd = Finding::new(
                Code::K009,
                k.clone(),
                format!(
                    "{k} went down {} times within the kernel log window",
                    v.len()
                ),
            );
            with_lines(fd, &cx.facts.kernel_log.source, &v)
                .remedy(
                    "A flapping link resets every QP's path: check the cable and transceiver \
                     (ethtool -m), the switch port's error counters, and the port's \
                     link_downed / symbol_error counters; replace the cable if they grow.",
                )
                .next(format!(
                    "ethtool -S {k} | grep -iE 'down|err'; ethtool -m {k}"
                ))
        })
        .collect();
    Outcome::Findings(out)
}
