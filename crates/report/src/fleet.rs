//! The fleet report (`rdmakit fleet report`, `fleet sweep`): the nodes needing
//! attention first with their reasons, the findings by code, the cohorts, and per
//! cohort its drift table and a dot plot of each numeric metric the outliers are
//! judged on (link rates, error counters; `FleetReport::metric_samples`), the
//! outliers red and named. The fleet report (schema `rdmakit.fleet/v1`) is the
//! embedded data, as `fleet report --json` prints it.

use std::fmt::Write as _;

use rdmakit_fleet::node::Severity;
use rdmakit_fleet::report::{natural_cmp, FleetReport, MetricSamples, Status};

use crate::html::{esc, num, Page};
use crate::plot::{self, Dot, DotPlot};
use crate::{Meta, ReportError};

fn status_class(s: Status) -> &'static str {
    match s {
        Status::Ok => "pass",
        Status::Warning => "warning",
        Status::Error => "error",
        Status::Missing => "missing",
    }
}

fn severity_class(s: Severity) -> &'static str {
    match s {
        Severity::Info => "info",
        Severity::Warning => "warning",
        Severity::Error => "error",
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A metric's name as people read it: `link rate`, `symbol_error (port counter)`.
fn metric_title(metric: &str) -> String {
    match metric.split_once('/') {
        _ if metric == "rate_gbps" => "link rate".to_string(),
        Some(("counters", c)) => format!("{c} (port counter)"),
        Some(("hw_counters", c)) => format!("{c} (hw counter)"),
        _ => metric.to_string(),
    }
}

/// An id fragment: letters, digits and `-` only.
fn slug(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// The page of a fleet report.
///
/// # Errors
/// A plot that could not be drawn, or data that would not serialize.
pub fn render(r: &FleetReport, meta: &Meta) -> Result<String, ReportError> {
    let s = &r.summary;
    let title = format!("rdmakit fleet: {}", plural(s.nodes, "node", "nodes"));
    let mut subtitle = format!(
        "{} ok, {} warning, {} error, {} missing in {}",
        s.ok,
        s.warning,
        s.error,
        s.missing,
        plural(s.cohorts, "cohort", "cohorts")
    );
    if s.bad_inputs > 0 {
        let _ = write!(
            subtitle,
            "; {} unreadable",
            plural(s.bad_inputs, "input", "inputs")
        );
    }
    if let Some(b) = &r.baseline {
        let _ = write!(subtitle, "; compared with the previous sweep {b}");
    }
    if let Some(e) = &r.expect {
        let _ = write!(subtitle, "; checked against {e}");
    }
    let mut page = Page::new(&title, &subtitle);
    page.push(&attention(r));
    page.push(&findings(r));
    page.push(&cohorts(r));
    let samples = r.metric_samples();
    for (ci, c) in r.cohorts.iter().enumerate() {
        page.push(&cohort(r, ci, &c.id, &samples)?);
    }
    page.push(&changes(r));
    page.push(&inputs(r));
    page.finish("fleet", serde_json::to_value(r)?, meta)
}

fn attention(r: &FleetReport) -> String {
    let mut s = String::from("<section id=\"attention\">\n<h2>Needs attention</h2>\n");
    let mut nodes: Vec<_> = r.nodes.iter().filter(|n| n.status != Status::Ok).collect();
    nodes.sort_by(|a, b| {
        a.status
            .rank()
            .cmp(&b.status.rank())
            .then_with(|| natural_cmp(&a.name, &b.name))
    });
    if nodes.is_empty() {
        let _ = writeln!(
            s,
            "<p><span class=\"badge pass\">ok</span>Every node ({}) is ok.</p>",
            r.nodes.len()
        );
    } else {
        s.push_str(
            "<table class=\"attention\">\n<tr><th>status</th><th>node</th><th>cohort</th>\
             <th>reasons, most severe first</th></tr>\n",
        );
        for n in nodes {
            let _ = write!(
                s,
                "<tr class=\"row-{}\"><td><span class=\"badge {}\">{}</span></td>\
                 <td><b>{}</b><div class=\"note\">{}</div></td><td>{}</td><td><ul class=\"reasons\">",
                status_class(n.status),
                status_class(n.status),
                n.status.as_str(),
                esc(&n.name),
                esc(&n.origin),
                n.cohort.as_deref().map(esc).unwrap_or_else(|| "-".into()),
            );
            for reason in &n.reasons {
                let what = match &reason.code {
                    Some(c) => format!("<b>{}</b>", esc(c)),
                    None => format!("<i>{}</i>", reason.kind.word()),
                };
                let subject = match &reason.subject {
                    Some(sub) => format!("<code>{}</code>: ", esc(sub)),
                    None => String::new(),
                };
                let _ = write!(
                    s,
                    "<li><span class=\"badge {}\">{}</span>{what} {subject}{}</li>",
                    severity_class(reason.severity),
                    reason.severity.as_str(),
                    esc(&reason.message)
                );
            }
            for a in &n.fabric {
                let _ = write!(
                    s,
                    "<li><i>fabric</i> <span class=\"note\">{}</span></li>",
                    esc(&a.describe(&n.name))
                );
            }
            s.push_str("</ul></td></tr>\n");
        }
        s.push_str("</table>\n");
    }
    let ok: Vec<String> = r
        .nodes
        .iter()
        .filter(|n| n.status == Status::Ok)
        .map(|n| esc(&n.name))
        .collect();
    if !ok.is_empty() && ok.len() < r.nodes.len() {
        let _ = writeln!(
            s,
            "<p class=\"note\"><span class=\"badge pass\">ok</span>{}</p>",
            ok.join(", ")
        );
    }
    s.push_str("</section>\n");
    s
}

fn findings(r: &FleetReport) -> String {
    if r.findings.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "<section id=\"findings\">\n<h2>Findings by code</h2>\n<table>\n<tr><th>code</th>\
         <th>severity</th><th class=\"num\">nodes</th><th class=\"num\">findings</th>\
         <th>which nodes</th><th>one instance</th></tr>\n",
    );
    for g in &r.findings {
        let _ = writeln!(
            s,
            "<tr><td><b>{}</b></td><td><span class=\"badge {}\">{}</span></td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td><td>{}</td></tr>",
            esc(&g.code),
            severity_class(g.severity),
            g.severity.as_str(),
            g.nodes.len(),
            g.count,
            esc(&g.nodes.join(", ")),
            esc(&g.example)
        );
    }
    s.push_str("</table>\n</section>\n");
    s
}

fn cohorts(r: &FleetReport) -> String {
    let mut s = String::from("<section id=\"cohorts\">\n<h2>Cohorts</h2>\n");
    if r.cohorts.is_empty() {
        s.push_str("<p class=\"note\">No node carries an inventory: no cohort.</p>\n");
    } else {
        s.push_str(
            "<p class=\"note\">Nodes of the same hardware, compared with each other.</p>\n\
             <table>\n<tr><th>cohort</th><th>hardware</th><th class=\"num\">nodes</th>\
             <th>members</th></tr>\n",
        );
        for c in &r.cohorts {
            let members: Vec<String> = c
                .nodes
                .iter()
                .map(|name| {
                    let st = r
                        .nodes
                        .iter()
                        .find(|n| &n.name == name)
                        .map_or(Status::Ok, |n| n.status);
                    if st == Status::Ok {
                        esc(name)
                    } else {
                        format!(
                            "<span class=\"badge {}\">{}</span>",
                            status_class(st),
                            esc(name)
                        )
                    }
                })
                .collect();
            let _ = writeln!(
                s,
                "<tr><td><a href=\"#cohort-{}\">{}</a></td><td>{}</td><td class=\"num\">{}</td>\
                 <td>{}</td></tr>",
                slug(&c.id),
                esc(&c.id),
                esc(&c.label),
                c.nodes.len(),
                members.join(", ")
            );
        }
        s.push_str("</table>\n");
    }
    for note in &r.notes {
        let _ = writeln!(s, "<p class=\"note\">{}</p>", esc(note));
    }
    s.push_str("</section>\n");
    s
}

fn cohort(
    r: &FleetReport,
    ci: usize,
    id: &str,
    samples: &[MetricSamples],
) -> Result<String, ReportError> {
    let c = &r.cohorts[ci];
    let mut s = String::new();
    let _ = writeln!(
        s,
        "<section id=\"cohort-{}\" class=\"cohort\">\n<h2>Cohort {} — {} ({})</h2>",
        slug(id),
        esc(id),
        esc(&c.label),
        plural(c.nodes.len(), "node", "nodes")
    );
    // Drift.
    let drift: Vec<_> = r.drift.iter().filter(|d| d.cohort == id).collect();
    s.push_str("<h3>Drift</h3>\n");
    if drift.is_empty() {
        s.push_str(
            "<p class=\"note\">No drift: every compared field (kernel, rdma-core, memlock, \
             devices, drivers, firmware, PCIe links, port rates, widths and MTUs) agrees.</p>\n",
        );
    } else {
        s.push_str(
            "<table class=\"drift\">\n<tr><th>field</th><th>majority</th>\
             <th>differing values: nodes</th></tr>\n",
        );
        for d in drift {
            let majority = match &d.majority {
                Some(m) => format!(
                    "<code>{}</code> <span class=\"note\">({} of {})</span>",
                    esc(m),
                    d.majority_nodes,
                    d.nodes
                ),
                None => format!(
                    "<i>none</i> <span class=\"note\">({} nodes)</span>",
                    d.nodes
                ),
            };
            let minority: Vec<String> = d
                .minority
                .iter()
                .map(|v| {
                    format!(
                        "<span class=\"badge warning\">{}</span>{}",
                        esc(&v.value),
                        esc(&v.nodes.join(", "))
                    )
                })
                .collect();
            let _ = writeln!(
                s,
                "<tr><td><code>{}</code></td><td>{majority}</td><td>{}</td></tr>",
                esc(&d.field),
                minority.join("<br>")
            );
        }
        s.push_str("</table>\n");
    }
    // Numeric metrics: one dot plot per metric, a row per subject.
    let mine: Vec<&MetricSamples> = samples.iter().filter(|m| m.cohort == id).collect();
    let mut metrics: Vec<&str> = Vec::new();
    for m in &mine {
        if !metrics.contains(&m.metric.as_str()) {
            metrics.push(&m.metric);
        }
    }
    s.push_str("<h3>Numeric metrics</h3>\n");
    if mine.is_empty() {
        s.push_str(
            "<p class=\"note\">No ACTIVE port with a rate and no error counter in this \
             cohort: nothing numeric to compare.</p>\n",
        );
    }
    let mut quiet: Vec<String> = Vec::new();
    let mut figures = String::new();
    for metric in metrics {
        let rows: Vec<&&MetricSamples> = mine.iter().filter(|m| m.metric == metric).collect();
        let outliers: Vec<_> = r
            .outliers
            .iter()
            .filter(|o| o.cohort == id && o.metric == metric)
            .collect();
        // Error counters at zero on every node draw nothing worth seeing.
        let all_zero = rows.iter().all(|m| m.values.iter().all(|v| v.value == 0.0));
        if metric != "rate_gbps" && all_zero && outliers.is_empty() {
            quiet.push(metric_title(metric));
            continue;
        }
        let mut dots = Vec::new();
        for (ri, m) in rows.iter().enumerate() {
            for v in &m.values {
                let outlier = outliers
                    .iter()
                    .any(|o| o.subject == m.subject && o.node == v.node);
                dots.push(Dot {
                    row: ri,
                    value: v.value,
                    outlier,
                    label: v.node.clone(),
                });
            }
        }
        let medians = rows
            .iter()
            .map(|m| {
                let v: Vec<f64> = m.values.iter().map(|v| v.value).collect();
                rdmakit_fleet::stats::median(&v).unwrap_or(0.0)
            })
            .collect();
        let plot_id = format!("fleet-{}-{}", slug(id), slug(metric));
        let title = metric_title(metric);
        let svg = plot::dot_plot(&DotPlot {
            id: &plot_id,
            title: &title,
            x_desc: if metric == "rate_gbps" {
                "Gb/s"
            } else {
                "count"
            },
            rows: rows.iter().map(|m| m.subject.clone()).collect(),
            medians,
            dots,
        })?;
        let mut caption = format!(
            "{} — each dot a node, the grey tick the cohort's median",
            esc(metric)
        );
        if outliers.is_empty() {
            caption.push_str("; no outlier");
        } else {
            for o in &outliers {
                let _ = write!(
                    caption,
                    "; <b class=\"bad\">{}</b> {} = {} (median {}, {})",
                    esc(&o.node),
                    esc(&o.subject),
                    num(o.value, if o.value.fract() == 0.0 { 0 } else { 2 }),
                    num(o.median, if o.median.fract() == 0.0 { 0 } else { 2 }),
                    match o.rule {
                        rdmakit_fleet::outlier::Rule::ModifiedZ =>
                            format!("modified z {}", num(o.z, 1)),
                        rdmakit_fleet::outlier::Rule::BelowMedianRate =>
                            "below 90 % of the median".to_string(),
                        rdmakit_fleet::outlier::Rule::FarAboveCohort =>
                            "far above the cohort".to_string(),
                    }
                );
            }
        }
        let _ = writeln!(
            figures,
            "<figure>{svg}<figcaption>{caption}</figcaption></figure>"
        );
    }
    if !figures.is_empty() {
        let _ = write!(s, "<div class=\"plots\">\n{figures}</div>\n");
    }
    if !quiet.is_empty() {
        let _ = writeln!(
            s,
            "<p class=\"note\">Zero on every node (not drawn): {}.</p>",
            esc(&quiet.join(", "))
        );
    }
    s.push_str("</section>\n");
    Ok(s)
}

fn changes(r: &FleetReport) -> String {
    if r.changes.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "<section id=\"changes\">\n<h2>Changes since the previous sweep</h2>\n<table>\n\
         <tr><th>node</th><th>severity</th><th>subject</th><th>before</th><th>after</th>\
         <th>what</th></tr>\n",
    );
    for c in &r.changes {
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td><span class=\"badge {}\">{}</span></td><td>{}</td>\
             <td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&c.node),
            severity_class(c.severity),
            c.severity.as_str(),
            esc(&c.subject),
            esc(c.before.as_deref().unwrap_or("-")),
            esc(c.after.as_deref().unwrap_or("-")),
            esc(&c.message)
        );
    }
    s.push_str("</table>\n</section>\n");
    s
}

fn inputs(r: &FleetReport) -> String {
    let mut s = String::from("<section id=\"inputs\">\n<h2>Inputs</h2>\n");
    if !r.errors.is_empty() {
        s.push_str("<table>\n<tr><th>unreadable input</th><th>why</th></tr>\n");
        for e in &r.errors {
            let _ = writeln!(
                s,
                "<tr class=\"row-fail\"><td><code>{}</code></td><td>{}</td></tr>",
                esc(&e.input),
                esc(&e.message)
            );
        }
        s.push_str("</table>\n");
    }
    for d in &r.duplicates {
        let _ = writeln!(
            s,
            "<p><span class=\"badge warning\">duplicate</span>{}</p>",
            esc(&d.message())
        );
    }
    if !r.inputs.is_empty() {
        s.push_str(
            "<table>\n<tr><th>input</th><th>kind</th><th class=\"num\">nodes</th>\
             <th class=\"num\">errors</th></tr>\n",
        );
        for i in &r.inputs {
            let kind = serde_json::to_value(i.kind)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            let _ = writeln!(
                s,
                "<tr><td><code>{}</code></td><td>{}</td><td class=\"num\">{}</td>\
                 <td class=\"num\">{}</td></tr>",
                esc(&i.path),
                esc(&kind),
                i.nodes,
                i.errors
            );
        }
        s.push_str("</table>\n");
    }
    s.push_str("</section>\n");
    s
}
