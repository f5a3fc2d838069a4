//! perftest-shaped text and JSON of a run: the header, the result table, the
//! control-path timings. The binary prints them; tests read them as strings.

use std::fmt::Write as _;

use serde_json::json;

use crate::{ControlTimings, Header, PerfError, Report, Row, Test};

const LINE: &str =
    "---------------------------------------------------------------------------------------";

/// What a finished run prints: its JSON object ([`json`]) or perftest's
/// table ([`results`]); `gbits` reports bandwidth in Gb/sec.
pub fn output(r: &Report, as_json: bool, gbits: bool) -> String {
    match as_json {
        true => format!("{}\n", json(r, gbits)),
        false => results(r, gbits),
    }
}

/// What a server prints while it waits for its client, as perftest does.
pub fn waiting() -> &'static str {
    "\n************************************\n\
     * Waiting for client to connect... *\n\
     ************************************\n"
}

/// What a progress bar says while `test` runs: the test, the message size
/// and, in a sweep, which size of how many (`write-bw 65536 B, size 3 of
/// 23`); the bar and its percentage follow it.
pub fn progress_label(test: Test, step: &crate::Step) -> String {
    if step.sizes > 1 {
        format!(
            "{test} {} B, size {} of {}",
            step.size, step.index, step.sizes
        )
    } else {
        format!("{test} {} B", step.size)
    }
}

/// The header perftest prints before its results: parameters and both QPs.
pub fn header(h: &Header) -> String {
    let mut o = String::new();
    _ = writeln!(o, "{LINE}");
    _ = writeln!(o, "                    {}", h.title);
    _ = writeln!(o, " Dual-port       : OFF\t\tDevice         : {}", h.device);
    _ = writeln!(
        o,
        " Number of qps   : 1\t\tTransport type : {}",
        h.transport
    );
    _ = writeln!(
        o,
        " Connection type : {}\t\tUsing SRQ      : OFF",
        h.connection
    );
    _ = writeln!(o, " TX depth        : {}", h.tx_depth);
    if matches!(h.test.as_str(), "send-bw" | "send-lat") {
        _ = writeln!(o, " RX depth        : {}", h.rx_depth);
    }
    _ = writeln!(o, " CQ Moderation   : {}", h.cq_mod);
    _ = writeln!(o, " Mtu             : {}[B]", h.mtu);
    _ = writeln!(o, " Link type       : {}", h.link_type);
    _ = writeln!(o, " GID index       : {}", h.gid_index);
    _ = writeln!(o, " Max inline data : {}[B]", h.inline);
    _ = writeln!(o, " rdma_cm QPs\t : OFF");
    _ = writeln!(o, " Data ex. method : Ethernet");
    match h.duration {
        Some(d) => _ = writeln!(o, " Duration        : {d} sec per size"),
        None => _ = writeln!(o, " Iterations      : {}", h.iterations),
    }
    if h.validate {
        _ = writeln!(o, " Data validation : ON");
    }
    if h.use_event {
        _ = writeln!(
            o,
            " CQ events       : ON (sleeps on the completion channel)"
        );
    }
    _ = writeln!(o, "{LINE}");
    for (which, q) in [("local", &h.local), ("remote", &h.remote)] {
        _ = writeln!(o, "{}", address_line(which, q));
        _ = writeln!(o, "{}", gid_line(&q.gid));
    }
    _ = writeln!(o, "{LINE}");
    o
}

/// perftest's address line (`BASIC_ADDR_FMT` and `RDMA_FMT` of
/// perftest_communication.h: `" %s address: LID %#04x QPN %#06x PSN %#06x
/// RKey %#08x VAddr %#016Lx"`), printf's `#` flag included: a zero prints
/// without `0x` (`LID 0000`).
pub fn address_line(which: &str, q: &crate::QpInfo) -> String {
    format!(
        " {which} address: LID {} QPN {} PSN {} RKey {} VAddr {}",
        c_alt_hex(q.lid.into(), 4),
        c_alt_hex(q.qpn.into(), 6),
        c_alt_hex(q.psn.into(), 6),
        c_alt_hex(q.rkey.into(), 8),
        c_alt_hex(q.vaddr, 16)
    )
}

/// perftest's GID line (`PERF_GID_FMT`): the 16 bytes in decimal, `%02d`
/// each (`00:00:...:255:255:192:168:100:02`).
pub fn gid_line(g: &[u8; 16]) -> String {
    let bytes: Vec<String> = g.iter().map(|b| format!("{b:02}")).collect();
    format!(" GID: {}", bytes.join(":"))
}

/// printf's `%#0{width}x`: `0x` and the hex digits, zero-padded to `width`
/// characters in all; a zero is all zeros, without `0x`.
fn c_alt_hex(v: u64, width: usize) -> String {
    if v == 0 {
        "0".repeat(width.max(1))
    } else {
        format!("{v:#0width$x}")
    }
}

/// MB/sec (2^20) → Gb/sec (10^9 bits), as perftest's `--report_gbits`.
pub fn to_gbits(mb: f64) -> f64 {
    mb * 1_048_576.0 * 8.0 / 1e9
}

/// perftest's result table (bandwidth or latency), validation, the control-path
/// timings and the soft NIC's QP counters; MB/sec, or Gb/sec with `gbits`.
pub fn results(r: &Report, gbits: bool) -> String {
    let mut o = String::new();
    if !r.results.is_empty() {
        let unit = if gbits { "Gb/sec" } else { "MB/sec" };
        let conv = |x: f64| if gbits { to_gbits(x) } else { x };
        match &r.results[0] {
            Row::Bw(_) => _ = writeln!(o,
                " #bytes     #iterations    BW peak[{unit}]    BW average[{unit}]   MsgRate[Mpps]"
            ),
            Row::Lat(_) => _ = writeln!(o,
                " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] "
            ),
        }
        for row in &r.results {
            match row {
                Row::Bw(b) => _ = writeln!(o,
                    " {:<10} {:<10}       {:<10.2}         {:<10.2}           {:.6}",
                    b.size,
                    b.iters,
                    conv(b.bw_peak),
                    conv(b.bw_avg),
                    b.msg_rate
                ),
                Row::Lat(l) => _ = writeln!(o,
                    " {:<7} {:<10}     {:<7.2}        {:<7.2}      {:<7.2}          {:<7.2}        {:<7.2}         {:<7.2}                {:<7.2}",
                    l.size, l.iters, l.t_min, l.t_max, l.t_typical, l.t_avg, l.t_stdev, l.p99, l.p999
                ),
            }
        }
        _ = writeln!(o, "{LINE}");
    }
    match r.validated {
        Some(true) => _ = writeln!(o, " Data validation : passed"),
        Some(false) => _ = writeln!(o, " Data validation : FAILED"),
        None => {}
    }
    control(&mut o, &r.control);
    if let Some(c) = &r.qp_counters {
        _ = writeln!(o,
            " QP counters (soft NIC, this side): tx {} rx {} retransmitted {} timeouts {} ACK probes {} ACKs/NAKs sent {} NAKs received {} duplicates {} dropped {}",
            c.tx_packets, c.rx_packets, c.retransmitted, c.timeouts, c.ack_probes, c.acks_sent, c.naks_received, c.duplicates, c.dropped
        );
        _ = writeln!(o, " Data path : {}", c.data_path());
    }
    _ = writeln!(o, "{LINE}");
    o
}

fn control(o: &mut String, c: &ControlTimings) {
    _ = writeln!(o, " Control path [usec] (this side):");
    _ = writeln!(
        o,
        "   reg_mr {:.1} ({} B)  create_cq {:.1}  create_qp {:.1}",
        c.reg_mr, c.mr_bytes, c.create_cq, c.create_qp
    );
    _ = writeln!(
        o,
        "   modify_qp RESET->INIT {:.1}  INIT->RTR {:.1}  RTR->RTS {:.1}",
        c.modify_qp_init, c.modify_qp_rtr, c.modify_qp_rts
    );
    _ = writeln!(
        o,
        "   destroy_qp {:.1}  dereg_mr {:.1}",
        c.destroy_qp, c.dereg_mr
    );
}

/// The JSON report, with `bw_unit` saying which unit the bandwidth figures are in.
pub fn json(r: &Report, gbits: bool) -> serde_json::Value {
    let mut v = serde_json::to_value(r).unwrap_or_else(|e| json!({ "error": e.to_string() }));
    if gbits {
        if let Some(rows) = v.get_mut("results").and_then(|x| x.as_array_mut()) {
            for row in rows {
                for k in ["BW_peak", "BW_average"] {
                    if let Some(x) = row.get(k).and_then(serde_json::Value::as_f64) {
                        row[k] = json!(to_gbits(x));
                    }
                }
            }
        }
        v["bw_unit"] = json!("Gb/sec");
    } else {
        v["bw_unit"] = json!("MB/sec");
    }
    v
}

/// The JSON object of a failed run of `test` (what `--json` prints instead of
/// the report): the test's name, the error, its kind and its errno's name
/// (`ECONNREFUSED`; null when it has none).
pub fn error_json(test: Test, e: &PerfError) -> serde_json::Value {
    json!({
        "test": test.name(),
        "error": e.to_string(),
        "kind": e.kind(),
        "errno": e.errno_name(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_run_is_one_json_object() {
        let e = PerfError::Params("-s 0".into());
        let v = error_json(Test::WriteBw, &e);
        assert_eq!(
            v.to_string(),
            format!(
                "{{\"errno\":null,\"error\":{},\"kind\":\"params\",\"test\":\"write-bw\"}}",
                serde_json::Value::from(e.to_string())
            )
        );
    }

    #[test]
    fn the_waiting_banner_is_perftests() {
        let lines: Vec<&str> = waiting().lines().collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[0], "");
        assert_eq!(lines[2], "* Waiting for client to connect... *");
        assert_eq!(lines[1], "*".repeat(36));
        assert_eq!(lines[3], lines[1]);
    }

    /// A recorded `rdmakit perf write-bw -a --json` run (crates/report/tests/data).
    fn recorded() -> Report {
        let text = include_str!("../../report/tests/data/perf-write-bw-a.json");
        let v: serde_json::Value = serde_json::from_str(text).unwrap();
        serde_json::from_value(v).unwrap()
    }

    /// The address and GID lines of Debian's ib_write_bw (perftest 4.5) on
    /// rxe, fixtures/pcap/write_bw-s8192.client.out: the same QPs print the
    /// same four lines byte for byte.
    #[test]
    fn address_and_gid_lines_are_perftests() {
        let out = include_str!("../../../fixtures/pcap/write_bw-s8192.client.out");
        let want: Vec<&str> = out
            .lines()
            .filter(|l| l.contains(" address: LID ") || l.starts_with(" GID: "))
            .collect();
        let gid = |last| {
            let mut g = [0u8; 16];
            g[10..12].copy_from_slice(&[0xff, 0xff]);
            g[12..].copy_from_slice(&[192, 168, 100, last]);
            g
        };
        let local = crate::QpInfo {
            lid: 0,
            qpn: 0x13,
            psn: 0x14a923,
            rkey: 0x42f,
            vaddr: 0x5593_5599_6000,
            gid: gid(2),
        };
        let remote = crate::QpInfo {
            psn: 0xa171,
            rkey: 0x4d6,
            vaddr: 0x5576_8b60_0000,
            gid: gid(1),
            ..local
        };
        let got = [
            address_line("local", &local),
            gid_line(&local.gid),
            address_line("remote", &remote),
            gid_line(&remote.gid),
        ];
        assert_eq!(want, got);
    }

    #[test]
    fn the_progress_label_names_the_test_and_the_size() {
        let step = |size, index, sizes| crate::Step {
            size,
            index,
            sizes,
            done: 0.5,
        };
        assert_eq!(
            progress_label(Test::WriteBw, &step(65536, 1, 1)),
            "write-bw 65536 B"
        );
        assert_eq!(
            progress_label(Test::SendLat, &step(8, 3, 23)),
            "send-lat 8 B, size 3 of 23"
        );
    }

    /// Only a side that sleeps on CQ events says so; its JSON header
    /// carries the field either way.
    #[test]
    fn the_header_says_when_this_side_sleeps_on_cq_events() {
        let mut h = recorded().header;
        assert!(
            !h.use_event,
            "a report from before -e reads as busy polling"
        );
        assert!(!header(&h).contains("CQ events"));
        h.use_event = true;
        let text = header(&h);
        let line = text.lines().find(|l| l.contains("CQ events")).unwrap();
        assert_eq!(
            line,
            " CQ events       : ON (sleeps on the completion channel)"
        );
        assert_eq!(serde_json::to_value(&h).unwrap()["use_event"], true);
    }

    #[test]
    fn gbits_is_perftests_conversion() {
        assert!((to_gbits(1000.0) - 8.388_608).abs() < 1e-9);
    }

    #[test]
    fn results_table_has_a_row_per_size_in_the_chosen_unit() {
        let r = recorded();
        let mb = results(&r, false);
        assert!(mb.contains("BW peak[MB/sec]"), "{mb}");
        assert!(results(&r, true).contains("BW average[Gb/sec]"));
        let rows = mb
            .lines()
            .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
            .count();
        assert_eq!(rows, r.results.len(), "{mb}");
        assert!(mb.contains(" Control path [usec] (this side):"), "{mb}");
    }

    #[test]
    fn json_names_its_unit_and_converts_only_bandwidth() {
        let r = recorded();
        let (mb, gb) = (json(&r, false), json(&r, true));
        assert_eq!(
            (mb["bw_unit"].as_str(), gb["bw_unit"].as_str()),
            (Some("MB/sec"), Some("Gb/sec"))
        );
        let (a, b) = (&mb["results"][0], &gb["results"][0]);
        let peak = a["BW_peak"].as_f64().unwrap();
        assert!((b["BW_peak"].as_f64().unwrap() - to_gbits(peak)).abs() < 1e-9);
        assert!(a["MsgRate"].as_f64().is_some_and(|m| m > 0.0), "{a}");
        assert_eq!(a["MsgRate"], b["MsgRate"]);
    }
}
