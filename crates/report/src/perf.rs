//! The perf report: bandwidth and message rate against message size (log axis),
//! latency percentiles against size, the rows, the control-path timings and the
//! soft NIC's QP counters of each run of `rdmakit perf`.

use std::fmt::Write as _;

use rdmakit_perf::{BwResult, LatResult, Report, Row};

use crate::html::{esc, num, Page};
use crate::plot::{self, Series, SizeChart, BLUE, GREEN, ORANGE, RED};
use crate::{Meta, ReportError};

/// MB/sec (2^20 bytes, perftest's unit) → Gb/sec.
fn gbits(mb: f64) -> f64 {
    mb * 1_048_576.0 * 8.0 / 1e9
}

/// The page for one or more runs (one section each); the runs are embedded as
/// the data (an array of `rdmakit perf --json` reports, MB/sec).
///
/// # Errors
/// A plot that could not be drawn, or data that would not serialize.
pub fn render(runs: &[Report], meta: &Meta) -> Result<String, ReportError> {
    let title = match runs {
        [r] => format!("rdmakit perf: {} on {}", r.header.test, r.header.device),
        _ => format!("rdmakit perf: {} runs", runs.len()),
    };
    let subtitle = runs
        .iter()
        .map(|r| {
            let h = &r.header;
            let amount = match h.duration {
                Some(d) => format!("{} s per size", num(d, 1)),
                None => format!("{} iterations per size", h.iterations),
            };
            format!(
                "{} ({}), {} {}, MTU {}, {} size{}, {amount}",
                h.title,
                h.role,
                h.connection,
                h.link_type,
                h.mtu,
                r.results.len(),
                if r.results.len() == 1 { "" } else { "s" }
            )
        })
        .collect::<Vec<_>>()
        .join(" · ");
    let mut page = Page::new(&title, &subtitle);
    if runs.is_empty() {
        page.push("<p class=\"note\">No run.</p>\n");
    }
    for (i, r) in runs.iter().enumerate() {
        page.push(&run(i, r)?);
    }
    page.finish("perf", serde_json::to_value(runs)?, meta)
}

fn run(i: usize, r: &Report) -> Result<String, ReportError> {
    let h = &r.header;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "<section id=\"run-{i}\">\n<h2>{} — {} on {}</h2>",
        esc(&h.title),
        esc(&h.role),
        esc(&h.device)
    );
    let bw: Vec<&BwResult> = r
        .results
        .iter()
        .filter_map(|x| match x {
            Row::Bw(b) => Some(b),
            Row::Lat(_) => None,
        })
        .collect();
    let lat: Vec<&LatResult> = r
        .results
        .iter()
        .filter_map(|x| match x {
            Row::Lat(l) => Some(l),
            Row::Bw(_) => None,
        })
        .collect();
    if r.results.is_empty() {
        s.push_str(
            "<p class=\"note\">No rows: the server side measures nothing (the client does; \
             run it with <code>--html</code>).</p>\n",
        );
    }
    if !bw.is_empty() {
        s.push_str("<div class=\"plots\">\n");
        let bw_plot = plot::size_chart(&SizeChart {
            id: &format!("perf-{i}-bandwidth"),
            title: "Bandwidth",
            y_desc: "Gb/s",
            y_log: false,
            series: vec![
                Series {
                    name: "BW average".into(),
                    color: BLUE,
                    points: bw
                        .iter()
                        .map(|b| (b.size as f64, gbits(b.bw_avg)))
                        .collect(),
                },
                Series {
                    name: "BW peak".into(),
                    color: ORANGE,
                    points: bw
                        .iter()
                        .map(|b| (b.size as f64, gbits(b.bw_peak)))
                        .collect(),
                },
            ],
        })?;
        let rate_plot = plot::size_chart(&SizeChart {
            id: &format!("perf-{i}-msgrate"),
            title: "Message rate",
            y_desc: "Mpps",
            y_log: false,
            series: vec![Series {
                name: "MsgRate".into(),
                color: GREEN,
                points: bw.iter().map(|b| (b.size as f64, b.msg_rate)).collect(),
            }],
        })?;
        let _ = writeln!(
            s,
            "<figure>{bw_plot}<figcaption>BW average and peak in Gb/s (10^9 bits; the \
             table also gives perftest's MB/sec of 2^20 bytes)</figcaption></figure>"
        );
        let _ = writeln!(
            s,
            "<figure>{rate_plot}<figcaption>Messages per second, millions</figcaption></figure>"
        );
        s.push_str("</div>\n");
        s.push_str(
            "<table>\n<tr><th class=\"num\">#bytes</th><th class=\"num\">#iterations</th>\
             <th class=\"num\">BW peak [MB/sec]</th><th class=\"num\">BW average [MB/sec]</th>\
             <th class=\"num\">BW average [Gb/sec]</th><th class=\"num\">MsgRate [Mpps]</th>\
             <th class=\"num\">seconds</th></tr>\n",
        );
        for b in &bw {
            let _ = writeln!(
                s,
                "<tr><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
                 <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
                 <td class=\"num\">{}</td></tr>",
                b.size,
                b.iters,
                num(b.bw_peak, 2),
                num(b.bw_avg, 2),
                num(gbits(b.bw_avg), 3),
                num(b.msg_rate, 6),
                num(b.seconds, 3)
            );
        }
        s.push_str("</table>\n");
    }
    if !lat.is_empty() {
        let pts = |f: fn(&LatResult) -> f64| lat.iter().map(|l| (l.size as f64, f(l))).collect();
        let lat_plot = plot::size_chart(&SizeChart {
            id: &format!("perf-{i}-latency"),
            title: "Latency percentiles",
            y_desc: "usec",
            y_log: true,
            series: vec![
                Series {
                    name: "min".into(),
                    color: GREEN,
                    points: pts(|l| l.t_min),
                },
                Series {
                    name: "typical (median)".into(),
                    color: BLUE,
                    points: pts(|l| l.t_typical),
                },
                Series {
                    name: "99 %".into(),
                    color: ORANGE,
                    points: pts(|l| l.p99),
                },
                Series {
                    name: "99.9 %".into(),
                    color: RED,
                    points: pts(|l| l.p999),
                },
            ],
        })?;
        let half = if matches!(h.test.as_str(), "send-lat" | "write-lat") {
            "half the round trip, as perftest"
        } else {
            "the full operation"
        };
        let _ = writeln!(
            s,
            "<div class=\"plots\"><figure>{lat_plot}<figcaption>Latency in usec ({half})\
             </figcaption></figure></div>"
        );
        s.push_str(
            "<table>\n<tr><th class=\"num\">#bytes</th><th class=\"num\">#iterations</th>\
             <th class=\"num\">t_min</th><th class=\"num\">t_typical</th><th class=\"num\">t_avg</th>\
             <th class=\"num\">t_stdev</th><th class=\"num\">99%</th><th class=\"num\">99.9%</th>\
             <th class=\"num\">t_max</th></tr>\n",
        );
        for l in &lat {
            let _ = writeln!(
                s,
                "<tr><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
                 <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
                 <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
                l.size,
                l.iters,
                num(l.t_min, 2),
                num(l.t_typical, 2),
                num(l.t_avg, 2),
                num(l.t_stdev, 2),
                num(l.p99, 2),
                num(l.p999, 2),
                num(l.t_max, 2)
            );
        }
        s.push_str("</table>\n");
    }
    s.push_str("<h3>Parameters</h3>\n<table class=\"kv\">\n");
    let amount = match h.duration {
        Some(d) => ("Duration per size", format!("{} s", num(d, 1))),
        None => ("Iterations per size", h.iterations.to_string()),
    };
    for (k, v) in [
        ("Device", h.device.clone()),
        (
            "Transport / connection",
            format!("{} / {}", h.transport, h.connection),
        ),
        ("Link type", h.link_type.clone()),
        ("MTU", format!("{} B", h.mtu)),
        ("GID index", h.gid_index.to_string()),
        ("TX depth", h.tx_depth.to_string()),
        ("RX depth", h.rx_depth.to_string()),
        ("CQ moderation", h.cq_mod.to_string()),
        ("Max inline data", format!("{} B", h.inline)),
        (amount.0, amount.1),
        (
            "Data validation",
            match r.validated {
                Some(true) => "passed".into(),
                Some(false) => "FAILED".into(),
                None => "off".into(),
            },
        ),
    ] {
        let _ = writeln!(s, "<tr><td>{}</td><td>{}</td></tr>", esc(k), esc(&v));
    }
    s.push_str("</table>\n");
    let c = &r.control;
    s.push_str("<h3>Control path (this side, usec)</h3>\n<table>\n<tr>");
    for k in [
        "reg_mr",
        "create_cq",
        "create_qp",
        "RESET→INIT",
        "INIT→RTR",
        "RTR→RTS",
        "destroy_qp",
        "dereg_mr",
    ] {
        let _ = write!(s, "<th class=\"num\">{}</th>", esc(k));
    }
    s.push_str("</tr>\n<tr>");
    for v in [
        c.reg_mr,
        c.create_cq,
        c.create_qp,
        c.modify_qp_init,
        c.modify_qp_rtr,
        c.modify_qp_rts,
        c.destroy_qp,
        c.dereg_mr,
    ] {
        let _ = write!(s, "<td class=\"num\">{}</td>", num(v, 1));
    }
    let _ = writeln!(
        s,
        "</tr>\n</table>\n<p class=\"note\">reg_mr registered {} bytes.</p>",
        c.mr_bytes
    );
    if let Some(q) = &r.qp_counters {
        s.push_str("<h3>QP counters (soft NIC, this side)</h3>\n<table>\n<tr>");
        let cells = [
            ("tx packets", q.tx_packets),
            ("rx packets", q.rx_packets),
            ("retransmitted", q.retransmitted),
            ("timeouts", q.timeouts),
            ("ACK probes", q.ack_probes),
            ("ACKs/NAKs sent", q.acks_sent),
            ("NAKs received", q.naks_received),
            ("duplicates", q.duplicates),
            ("dropped", q.dropped),
        ];
        for (k, _) in &cells {
            let _ = write!(s, "<th class=\"num\">{}</th>", esc(k));
        }
        s.push_str("</tr>\n<tr>");
        for (k, v) in &cells {
            let bad = *v > 0 && matches!(*k, "retransmitted" | "timeouts" | "dropped");
            let _ = write!(
                s,
                "<td class=\"num{}\">{v}</td>",
                if bad { " warning" } else { "" }
            );
        }
        s.push_str("</tr>\n</table>\n");
    }
    s.push_str("</section>\n");
    Ok(s)
}
