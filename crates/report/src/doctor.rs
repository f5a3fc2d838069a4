//! The doctor report: the verification record with pass/fail colors, the
//! findings with their evidence (findings of one cause on several subjects as
//! one card, grouped as the terminal report groups them), the active probes,
//! IRQs per CPU per device (where the vectors land, which CPUs are on the
//! device's NUMA node) and the device topology from the PCIe root port to the
//! netdevs.

use std::fmt::Write as _;

use rdmakit_doctor::checks::Status;
use rdmakit_doctor::codes::Severity;
use rdmakit_doctor::finding::{Evidence, Finding};
use rdmakit_doctor::group::{groups, FindingGroup};
use rdmakit_doctor::health::Checked;
use rdmakit_doctor::probes::ProbeReport;
use rdmakit_doctor::report::Report;
use rdmakit_doctor::views::irq::{DeviceIrqs, IrqView};
use rdmakit_doctor::views::topology::{DeviceTopology, LinkState, TopologyView};
use rdmakit_doctor::views::CheckStatus;
use serde::Serialize;

use crate::html::{esc, Page};
use crate::plot::{self, Bar, BarChart, Column, Diagram, Edge, Node, BLUE, GREEN, GREY, RED};
use crate::{Meta, ReportError};

/// What the doctor page shows: the report and the two host views built from the
/// same facts. Embedded as the page's data, each as its `--json` prints it
/// (`rdmakit doctor --json` with its `groups[]`, `rdmakit irq --json`,
/// `rdmakit irq --json`'s topology).
#[derive(Debug, Clone, Copy)]
pub struct DoctorPage<'a> {
    pub doctor: &'a Report,
    pub irq: &'a IrqView,
    pub topology: &'a TopologyView,
}

/// The page's data: the doctor's report as `--json` prints it (the report and
/// the groups of its findings, `rdmakit_doctor::render::json`), the views.
#[derive(Serialize)]
struct Data<'a> {
    doctor: DoctorJson<'a>,
    irq: &'a IrqView,
    topology: &'a TopologyView,
}

#[derive(Serialize)]
struct DoctorJson<'a> {
    #[serde(flatten)]
    report: &'a Report,
    groups: &'a [FindingGroup],
}

fn result_class(r: &str) -> &'static str {
    match r {
        "pass" => "pass",
        "fail" => "fail",
        _ => "na",
    }
}

fn badge(text: &str, class: &str) -> String {
    format!("<span class=\"badge {class}\">{}</span>", esc(text))
}

/// The page of a check (`rdmakit doctor --html`): its report with the IRQ and
/// topology views built from the facts it judged.
///
/// # Errors
/// As [`render`].
pub fn render_checked(c: &Checked, meta: &Meta) -> Result<String, ReportError> {
    let irq = IrqView::build(&c.facts, &c.report);
    let topology = TopologyView::build(&c.facts, &c.report);
    let page = DoctorPage {
        doctor: &c.report,
        irq: &irq,
        topology: &topology,
    };
    render(&page, meta)
}

/// The page.
///
/// # Errors
/// A plot that could not be drawn, or data that would not serialize.
pub fn render(p: &DoctorPage, meta: &Meta) -> Result<String, ReportError> {
    let r = p.doctor;
    let groups = groups(&r.findings);
    let verdict = match r.worst() {
        Some(Severity::Error) => "errors found",
        Some(Severity::Warning) => "warnings found",
        Some(Severity::Info) => "no problem at warning or above",
        None => "nothing found",
    };
    let title = format!("rdmakit doctor: {verdict}");
    let subtitle = format!(
        "{} · kernel {} · {}",
        r.source,
        r.kernel.as_deref().unwrap_or("unknown"),
        r.tool
    );
    let mut page = Page::new(&title, &subtitle);
    page.push(&summary(r));
    page.push(&checklist(r));
    page.push(&findings(r, &groups));
    if !r.probes.is_empty() {
        page.push(&probes(r));
    }
    let soft = not_host_devices(r);
    page.push(&irqs(p.irq, &soft)?);
    page.push(&topology(p.topology, &soft)?);
    page.push(&checks(r));
    if !r.notes.is_empty() {
        let mut s = String::from("<section id=\"notes\">\n<h2>Notes</h2>\n<ul>\n");
        for n in &r.notes {
            let _ = writeln!(s, "<li>{}</li>", esc(n));
        }
        s.push_str("</ul>\n</section>\n");
        page.push(&s);
    }
    let data = Data {
        doctor: DoctorJson {
            report: r,
            groups: &groups,
        },
        irq: p.irq,
        topology: p.topology,
    };
    page.finish("doctor", serde_json::to_value(data)?, meta)
}

/// The probed devices that are not the host's own (rdmakit's soft NIC on a host
/// without RDMA): the terminal report names them under Active probes, with what
/// they are.
fn not_host_devices(r: &Report) -> Vec<&ProbeReport> {
    r.probes
        .iter()
        .filter(|p| !r.devices.iter().any(|d| d.name == p.device))
        .collect()
}

/// "soft0" or "soft0 and soft1": the devices' names, for a sentence.
fn device_names(soft: &[&ProbeReport]) -> String {
    let names: Vec<&str> = soft.iter().map(|p| p.device.as_str()).collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => names.join(""),
    }
}

fn summary(r: &Report) -> String {
    let mut s = String::from("<section id=\"summary\">\n<h2>Summary</h2>\n<p>");
    s.push_str(&badge(
        &format!("{} error", r.counts.error),
        if r.counts.error > 0 { "error" } else { "na" },
    ));
    s.push_str(&badge(
        &format!("{} warning", r.counts.warning),
        if r.counts.warning > 0 {
            "warning"
        } else {
            "na"
        },
    ));
    s.push_str(&badge(
        &format!("{} info", r.counts.info),
        if r.counts.info > 0 { "info" } else { "na" },
    ));
    s.push_str("</p>\n");
    let soft = not_host_devices(r);
    if r.devices.is_empty() {
        s.push_str("<p class=\"note\" id=\"host-devices\">RDMA devices on the host: none.</p>\n");
    }
    if !r.devices.is_empty() || !soft.is_empty() {
        s.push_str("<table>\n<tr><th>device</th><th>kind</th><th>driver</th><th>ports</th></tr>\n");
    }
    for d in &r.devices {
        let kind = serde_json::to_value(d.kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "<tr><td><b>{}</b></td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&d.name),
            esc(&kind),
            esc(d.driver.as_deref().unwrap_or("?")),
            d.ports
                .iter()
                .map(|p| esc(p))
                .collect::<Vec<_>>()
                .join("<br>")
        );
    }
    // A probed device that is not the host's: said what it is, as the terminal does.
    for p in &soft {
        let _ = writeln!(
            s,
            "<tr class=\"probed-only\"><td><b>{}</b></td><td>{}</td><td>-</td><td>{}</td></tr>",
            esc(&p.device),
            esc(&p.label),
            p.ports
                .iter()
                .map(|x| esc(x))
                .collect::<Vec<_>>()
                .join("<br>")
        );
    }
    if !r.devices.is_empty() || !soft.is_empty() {
        s.push_str("</table>\n");
    }
    if !soft.is_empty() {
        let _ = writeln!(
            s,
            "<p class=\"note\">{} ran the <a href=\"#probes\">active probes</a>; {} not a \
             device of this host and {} nothing about its kernel or hardware.</p>",
            esc(&device_names(&soft)),
            if soft.len() == 1 { "it is" } else { "they are" },
            if soft.len() == 1 { "says" } else { "say" },
        );
    }
    s.push_str("</section>\n");
    s
}

fn checklist(r: &Report) -> String {
    let mut s = String::from(
        "<section id=\"checklist\">\n<h2>Verification record</h2>\n<table>\n<tr><th>check</th>\
         <th>criterion</th><th>result</th><th>common omission</th><th>codes</th></tr>\n",
    );
    for row in &r.checklist {
        let class = result_class(row.result);
        let _ = writeln!(
            s,
            "<tr class=\"row-{class}\"><td><b>{}</b></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(row.check),
            esc(row.criterion),
            badge(row.result, class),
            esc(row.omission),
            row.codes
                .iter()
                .map(|c| format!("<a href=\"#{0}\">{0}</a>", esc(c.as_str())))
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    s.push_str("</table>\n</section>\n");
    s
}

fn finding_card(f: &Finding, anchor: bool) -> String {
    let sev = f.severity.as_str();
    let mut s = String::new();
    let id = if anchor {
        format!(" id=\"{}\"", esc(f.code.as_str()))
    } else {
        String::new()
    };
    let _ = writeln!(
        s,
        "<div class=\"finding sev-{sev}\"{id}>\n<div>{}<code>{}</code> <span class=\"meta\">{} layer · {}</span></div>\n<div class=\"msg\">{}</div>",
        badge(sev, sev),
        esc(f.code.as_str()),
        esc(f.layer.as_str()),
        esc(&f.subject),
        esc(&f.message)
    );
    if !f.evidence.is_empty() {
        s.push_str("<table><tr><th>evidence (file or probe)</th><th>value read</th></tr>\n");
        for e in &f.evidence {
            let _ = writeln!(
                s,
                "<tr><td class=\"mono\">{}</td><td class=\"mono\">{}</td></tr>",
                esc(&e.path),
                esc(&e.value)
            );
        }
        s.push_str("</table>\n");
    }
    if let Some(o) = f.omission {
        let _ = writeln!(s, "<div class=\"meta\">common omission: {}</div>", esc(o));
    }
    if !f.remedy.is_empty() {
        let _ = writeln!(s, "<div><b>Fix:</b> {}</div>", esc(&f.remedy));
    }
    if !f.next.is_empty() {
        s.push_str("<div><b>Next:</b> ");
        s.push_str(
            &f.next
                .iter()
                .map(|n| format!("<code>{}</code>", esc(n)))
                .collect::<Vec<_>>()
                .join(" · "),
        );
        s.push_str("</div>\n");
    }
    s.push_str("</div>\n");
    s
}

/// The findings, in the report's order: a group of findings with one cause
/// (`rdmakit_doctor::group`, what the terminal prints as one entry "… (N alike)")
/// as one card where its first member stands; the others one card each.
fn findings(r: &Report, groups: &[FindingGroup]) -> String {
    let mut s = String::from("<section id=\"findings\">\n<h2>Findings</h2>\n");
    if r.findings.is_empty() {
        s.push_str("<p class=\"note\">None.</p>\n");
    }
    let mut member = vec![false; r.findings.len()];
    for g in groups {
        for i in &g.findings {
            if let Some(m) = member.get_mut(*i) {
                *m = true;
            }
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    for (i, f) in r.findings.iter().enumerate() {
        if let Some(g) = groups.iter().find(|g| g.findings.first() == Some(&i)) {
            s.push_str(&group_card(g, &r.findings, seen.insert(g.code)));
        } else if !member[i] {
            s.push_str(&finding_card(f, seen.insert(f.code)));
        }
    }
    s.push_str("</section>\n");
    s
}

/// One card for a group: its subjects in the head, the shared message, every
/// subject and the members' evidence behind a `<details>` (opens without script),
/// the fix and the next commands once.
fn group_card(g: &FindingGroup, all: &[Finding], anchor: bool) -> String {
    let members: Vec<&Finding> = g.findings.iter().filter_map(|i| all.get(*i)).collect();
    let sev = g.severity.as_str();
    let id = if anchor {
        format!(" id=\"{}\"", esc(g.code.as_str()))
    } else {
        String::new()
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        "<div class=\"finding group sev-{sev}\"{id} data-alike=\"{}\">\n<div>{}<code>{}</code> \
         <span class=\"meta\">{} layer · {} ({} alike)</span></div>\n<div class=\"msg\">{}</div>",
        g.subjects.len(),
        badge(sev, sev),
        esc(g.code.as_str()),
        esc(g.layer.as_str()),
        esc(&g.subjects_inline()),
        g.subjects.len(),
        esc(&g.message)
    );
    let mut evidence: Vec<&Evidence> = Vec::new();
    for f in &members {
        for e in &f.evidence {
            if !evidence.contains(&e) {
                evidence.push(e);
            }
        }
    }
    // The next commands: the first two under the fix (as the terminal shows
    // them), the rest, one per subject mostly, in the details.
    let mut next: Vec<&String> = Vec::new();
    for f in &members {
        for n in &f.next {
            if !next.contains(&n) {
                next.push(n);
            }
        }
    }
    let codes = |v: &[&String]| {
        v.iter()
            .map(|n| format!("<code>{}</code>", esc(n)))
            .collect::<Vec<_>>()
            .join(" · ")
    };
    let (first, rest) = next.split_at(next.len().min(2));
    let _ = writeln!(
        s,
        "<details><summary>the {} {}{}{}</summary>\n<ul class=\"subjects\">",
        g.subjects.len(),
        if g.subjects.len() == 1 {
            "subject"
        } else {
            "subjects"
        },
        if evidence.is_empty() {
            String::new()
        } else {
            format!(", their evidence ({} values read)", evidence.len())
        },
        if rest.is_empty() {
            ""
        } else {
            ", every next command"
        }
    );
    for subject in &g.subjects {
        let _ = writeln!(s, "<li>{}</li>", esc(subject));
    }
    s.push_str("</ul>\n");
    if !evidence.is_empty() {
        s.push_str("<table><tr><th>evidence (file or probe)</th><th>value read</th></tr>\n");
        for e in &evidence {
            let _ = writeln!(
                s,
                "<tr><td class=\"mono\">{}</td><td class=\"mono\">{}</td></tr>",
                esc(&e.path),
                esc(&e.value)
            );
        }
        s.push_str("</table>\n");
    }
    if !rest.is_empty() {
        let _ = writeln!(s, "<div><b>Next, also:</b> {}</div>", codes(rest));
    }
    s.push_str("</details>\n");
    if let Some(o) = members.first().and_then(|f| f.omission) {
        let _ = writeln!(s, "<div class=\"meta\">common omission: {}</div>", esc(o));
    }
    let mut remedies: Vec<&Finding> = Vec::new();
    for f in &members {
        if !f.remedy.is_empty() && !remedies.iter().any(|r| r.remedy == f.remedy) {
            remedies.push(f);
        }
    }
    for f in &remedies {
        let whose = if remedies.len() > 1 {
            format!(" <span class=\"meta\">(for {})</span>", esc(&f.subject))
        } else {
            String::new()
        };
        let _ = writeln!(s, "<div><b>Fix:</b> {}{whose}</div>", esc(&f.remedy));
    }
    if !first.is_empty() {
        let _ = writeln!(s, "<div><b>Next:</b> {}</div>", codes(first));
    }
    s.push_str("</div>\n");
    s
}

fn probes(r: &Report) -> String {
    let mut s = String::from("<section id=\"probes\">\n<h2>Active probes</h2>\n");
    for p in &r.probes {
        let _ = writeln!(
            s,
            "<h3>{} <span class=\"note\">({})</span></h3>\n<p class=\"note\">ports: {}; memlock honoured: {}</p>",
            esc(&p.device),
            esc(&p.label),
            esc(&p.ports.join(", ")),
            p.memlock_limit
                .map_or_else(|| "unlimited".to_string(), |b| format!("{b} bytes"))
        );
        s.push_str("<table>\n<tr><th>probe</th><th>result</th><th class=\"num\">usec</th><th>detail</th></tr>\n");
        for x in &p.results {
            let (word, class) = if x.skipped {
                ("skipped", "na")
            } else if x.passed {
                ("pass", "pass")
            } else {
                ("fail", "fail")
            };
            let mut detail = esc(&x.detail);
            if let (Some(v), Some(e)) = (&x.verb, &x.errno) {
                let _ = write!(detail, " <code>{} {}</code>", esc(v), esc(e));
            }
            let _ = writeln!(
                s,
                "<tr class=\"row-{class}\"><td class=\"mono\">{}</td><td>{}</td><td class=\"num\">{}</td><td>{detail}</td></tr>",
                esc(&x.name),
                badge(word, class),
                x.duration_us
            );
        }
        s.push_str("</table>\n");
    }
    s.push_str("</section>\n");
    s
}

fn verdict_line(vs: &[CheckStatus]) -> String {
    let mut s = String::from("<p>The doctor: ");
    let parts: Vec<String> = vs
        .iter()
        .map(|v| {
            format!(
                "<code>{}</code> {}{}",
                esc(v.check),
                badge(v.result, result_class(v.result)),
                v.reason.as_ref().map_or_else(String::new, |r| format!(
                    "<span class=\"note\">({})</span>",
                    esc(r)
                ))
            )
        })
        .collect();
    s.push_str(&parts.join(" · "));
    s.push_str("</p>\n");
    s
}

/// The note of a view without a device: none on the host, and what the soft NIC
/// probed instead lacks (`what`), when it was.
fn no_device(soft: &[&ProbeReport], what: &str) -> String {
    let nic: Vec<&ProbeReport> = soft
        .iter()
        .copied()
        .filter(|p| p.label == rdmakit_doctor::probes::SOFT_LABEL)
        .collect();
    if nic.is_empty() {
        "<p class=\"note\">No RDMA device on the host.</p>\n".to_string()
    } else {
        format!(
            "<p class=\"note\">No RDMA device on the host. {}, rdmakit's soft NIC, runs in \
             userspace: {what}.</p>\n",
            esc(&device_names(&nic))
        )
    }
}

fn irqs(v: &IrqView, soft: &[&ProbeReport]) -> Result<String, ReportError> {
    let mut s = String::from("<section id=\"irqs\">\n<h2>IRQs per CPU per device</h2>\n");
    s.push_str(&verdict_line(&v.verdicts));
    let _ = writeln!(
        s,
        "<p class=\"note\">{} CPU columns in <code>{}</code>; online CPUs {}.</p>",
        v.cpus.len(),
        esc(&v.interrupts_path),
        esc(&v.cpus_online)
    );
    if v.devices.is_empty() {
        s.push_str(&no_device(soft, "no interrupts of its own"));
    }
    for (i, d) in v.devices.iter().enumerate() {
        s.push_str(&device_irqs(v, i, d)?);
    }
    s.push_str("</section>\n");
    Ok(s)
}

fn device_irqs(v: &IrqView, i: usize, d: &DeviceIrqs) -> Result<String, ReportError> {
    let mut s = String::new();
    let mut head = esc(&d.device);
    if let Some(b) = &d.bdf {
        let _ = write!(head, " <span class=\"note\">{}</span>", esc(b));
    }
    match (d.numa_node, &d.local_cpus) {
        (Some(n), Some(c)) => {
            let _ = write!(head, " · NUMA node {n}, local CPUs {}", esc(c));
        }
        (Some(n), None) => {
            let _ = write!(head, " · NUMA node {n}");
        }
        _ => {}
    }
    let _ = writeln!(s, "<h3>{head}</h3>");
    if let Some(n) = &d.note {
        let _ = writeln!(s, "<p class=\"note\">{}</p>", esc(n));
    }
    if !d.vectors.is_empty() {
        let bars = v
            .cpus
            .iter()
            .enumerate()
            .map(|(c, label)| Bar {
                label: label.trim_start_matches("CPU").to_string(),
                value: f64::from(d.vectors_per_cpu.get(c).copied().unwrap_or(0)),
                color: match d.cpu_local.get(c).copied().flatten() {
                    Some(true) => BLUE,
                    Some(false) => GREY,
                    None => GREEN,
                },
            })
            .collect();
        let known = d.cpu_local.iter().any(Option::is_some);
        let legend = if known {
            vec![
                (
                    format!("CPU on NUMA node {}", d.numa_node.unwrap_or(-1)),
                    BLUE,
                ),
                ("CPU on another node".to_string(), GREY),
            ]
        } else {
            vec![("NUMA locality unknown".to_string(), GREEN)]
        };
        let chart = plot::bar_chart(&BarChart {
            id: &format!("irq-{i}"),
            title: &format!("{}: vectors landing on each CPU", d.device),
            y_desc: "vectors",
            bars,
            legend,
        })?;
        let _ = writeln!(
            s,
            "<div class=\"plots\"><figure>{chart}<figcaption>Vectors whose affinity (or, when it \
             is unreadable, whose counts) include each CPU; x axis: CPU number</figcaption></figure></div>"
        );
        s.push_str("<table>\n<tr><th class=\"num\">IRQ</th><th>vector</th><th>mode</th><th>affinity</th><th>lands on</th><th>NUMA</th><th class=\"num\">interrupts</th></tr>\n");
        for x in &d.vectors {
            let on: Vec<&str> = x
                .lands_on
                .iter()
                .filter_map(|c| v.cpus.get(*c).map(String::as_str))
                .collect();
            let numa = match x.numa_local {
                Some(true) => badge("local", "pass"),
                Some(false) => badge("remote", "fail"),
                None => badge("?", "na"),
            };
            let _ = writeln!(
                s,
                "<tr><td class=\"num\">{}</td><td class=\"mono\">{}</td><td>{}{}</td><td class=\"mono\">{}</td><td>{}{}</td><td>{numa}</td><td class=\"num\">{}</td></tr>",
                x.irq,
                esc(&x.name),
                esc(x.mode),
                if x.completion { " completion" } else { "" },
                esc(&x.affinity),
                esc(&on.join(" ")),
                if x.lands_by == "counts" { " <span class=\"note\">(by counts)</span>" } else { "" },
                x.total
            );
        }
        s.push_str("</table>\n");
    }
    for f in &d.findings {
        s.push_str(&finding_card(f, false));
    }
    Ok(s)
}

fn link_label(l: &LinkState) -> Vec<String> {
    let now = match (l.gts, l.lanes) {
        (Some(g), Some(w)) => format!("{g} GT/s x{w}"),
        _ => format!("{} x{}", l.speed, l.width),
    };
    let max = match (l.max_gts, l.max_lanes) {
        (Some(g), Some(w)) => format!("{g} GT/s x{w}"),
        _ => format!("{} x{}", l.max_speed, l.max_width),
    };
    let tag = match l.below_capability {
        Some(true) => " BELOW",
        _ => "",
    };
    vec![format!("{now}{tag}"), format!("of {max}")]
}

fn link_color(l: &LinkState) -> plotters::style::RGBColor {
    match l.below_capability {
        Some(true) => RED,
        Some(false) => GREEN,
        None => GREY,
    }
}

fn topology(t: &TopologyView, soft: &[&ProbeReport]) -> Result<String, ReportError> {
    let mut s = String::from("<section id=\"topology\">\n<h2>Device topology</h2>\n");
    s.push_str(&verdict_line(&t.verdicts));
    if t.devices.is_empty() {
        s.push_str(&no_device(soft, "no PCIe path, port or netdev of its own"));
    }
    for (i, d) in t.devices.iter().enumerate() {
        s.push_str(&device_topology(i, d)?);
    }
    s.push_str("</section>\n");
    Ok(s)
}

fn device_topology(i: usize, d: &DeviceTopology) -> Result<String, ReportError> {
    let white = plotters::style::WHITE;
    let soft = plotters::style::RGBColor(244, 246, 248);
    let mut columns = Vec::new();
    let mut edges = Vec::new();
    if let Some(rc) = &d.root_complex {
        columns.push(Column {
            nodes: vec![Node {
                lines: vec![rc.clone(), "root complex".into()],
                border: GREY,
                fill: soft,
            }],
        });
    }
    for (k, hop) in d.path.iter().enumerate() {
        let is_dev = k + 1 == d.path.len();
        let mut lines = vec![hop.bdf.clone()];
        if is_dev {
            lines[0] = d.device.clone();
            lines.push(hop.bdf.clone());
            if let Some(drv) = &d.driver {
                lines.push(format!("driver {drv}"));
            }
            if let Some(n) = d.numa_node {
                lines.push(format!("NUMA node {n}"));
            }
        } else {
            lines.push(hop.role.to_string());
        }
        if !columns.is_empty() {
            edges.push(match &hop.uplink {
                Some(l) => Edge {
                    column: columns.len() - 1,
                    from: 0,
                    to: 0,
                    label: link_label(l),
                    color: link_color(l),
                    dashed: false,
                },
                // The root port hangs off the root complex: no PCIe link between them.
                None => Edge {
                    column: columns.len() - 1,
                    from: 0,
                    to: 0,
                    label: vec![],
                    color: GREY,
                    dashed: true,
                },
            });
        }
        columns.push(Column {
            nodes: vec![Node {
                lines,
                border: BLUE,
                fill: white,
            }],
        });
    }
    if d.path.is_empty() {
        let mut lines = vec![d.device.clone()];
        if let Some(drv) = &d.driver {
            lines.push(format!("driver {drv}"));
        }
        lines.push("no PCIe path".into());
        columns.push(Column {
            nodes: vec![Node {
                lines,
                border: BLUE,
                fill: white,
            }],
        });
    }
    let dev_col = columns.len() - 1;
    if !d.ports.is_empty() {
        let mut ports = Vec::new();
        let mut netdevs = Vec::new();
        for (pi, p) in d.ports.iter().enumerate() {
            edges.push(Edge {
                column: dev_col,
                from: 0,
                to: pi,
                label: vec![],
                color: GREY,
                dashed: true,
            });
            ports.push(Node {
                lines: vec![
                    format!("port {}", p.num),
                    p.state.clone(),
                    p.phys_state.clone(),
                    p.rate.clone(),
                    p.link_layer.clone(),
                ],
                border: if p.up { GREEN } else { RED },
                fill: white,
            });
            for n in &p.netdevs {
                edges.push(Edge {
                    column: dev_col + 1,
                    from: pi,
                    to: netdevs.len(),
                    label: vec![],
                    color: if n.operstate == "up" { GREEN } else { GREY },
                    dashed: false,
                });
                netdevs.push(Node {
                    lines: vec![
                        n.name.clone(),
                        format!("operstate {}", n.operstate),
                        format!("MTU {}", n.mtu),
                        format!("speed {} Mb/s", n.speed),
                    ],
                    border: if n.operstate == "up" { GREEN } else { RED },
                    fill: white,
                });
            }
        }
        columns.push(Column { nodes: ports });
        if !netdevs.is_empty() {
            columns.push(Column { nodes: netdevs });
        }
    }
    let svg = plot::diagram(&Diagram {
        id: &format!("topology-{i}"),
        title: &format!("{}: PCIe path, ports and netdevs", d.device),
        columns,
        edges,
    })?;
    let mut s = String::new();
    let _ = writeln!(s, "<h3>{}</h3>", esc(&d.device));
    if let Some(n) = &d.note {
        let _ = writeln!(s, "<p class=\"note\">{}</p>", esc(n));
    }
    let _ = writeln!(
        s,
        "<div class=\"plots\"><figure>{svg}<figcaption>Each PCIe link: trained speed and width \
         over what it can do (red: below capability); ports green when ACTIVE and LinkUp</figcaption></figure></div>"
    );
    if !d.path.is_empty() {
        s.push_str(
            "<table>\n<tr><th>function</th><th>role</th><th>its link status (now / max)</th>\
             <th>link to the function above (now / capability)</th><th>sysfs</th></tr>\n",
        );
        for hop in &d.path {
            let up = match &hop.uplink {
                Some(l) => {
                    let below = match l.below_capability {
                        Some(true) => format!(" {}", badge("below capability", "fail")),
                        Some(false) => format!(" {}", badge("full", "pass")),
                        None => String::new(),
                    };
                    format!(
                        "{} x{} / {} x{}{below}",
                        esc(&l.speed),
                        esc(&l.width),
                        esc(&l.max_speed),
                        esc(&l.max_width)
                    )
                }
                None => "<span class=\"note\">(root complex)</span>".to_string(),
            };
            let _ = writeln!(
                s,
                "<tr><td class=\"mono\">{}</td><td>{}</td><td>{} x{} / {} x{}</td><td>{up}</td><td class=\"mono\">{}</td></tr>",
                esc(&hop.bdf),
                esc(hop.role),
                esc(&hop.status.speed),
                esc(&hop.status.width),
                esc(&hop.status.max_speed),
                esc(&hop.status.max_width),
                esc(&hop.path)
            );
        }
        s.push_str("</table>\n");
    }
    for f in &d.findings {
        s.push_str(&finding_card(f, false));
    }
    Ok(s)
}

fn checks(r: &Report) -> String {
    let mut s = String::from(
        "<section id=\"checks\">\n<h2>Every check</h2>\n<table>\n<tr><th>check</th><th>layer</th>\
         <th>what it verifies</th><th>status</th></tr>\n",
    );
    for c in &r.checks {
        let word = c.status.word();
        let class = result_class(word);
        let reason = match &c.status {
            Status::NotApplicable(w) | Status::NotChecked(w) => {
                format!(" <span class=\"note\">{}</span>", esc(w))
            }
            _ => String::new(),
        };
        let _ = writeln!(
            s,
            "<tr class=\"row-{class}\"><td class=\"mono\">{}</td><td>{}</td><td>{}</td><td>{}{reason}</td></tr>",
            esc(c.id),
            esc(c.layer.as_str()),
            esc(c.title),
            badge(word, class)
        );
    }
    s.push_str("</table>\n</section>\n");
    s
}
