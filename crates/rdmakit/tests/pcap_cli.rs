//! `rdmakit pcap` on the real captures: what it prints for the connection
//! manager's exchanges of fixtures/pcap-cm (human and `--json`, snapshots),
//! and its exit status — 1 exactly when a packet fails its ICRC or an
//! exchange failed (unanswered, retried, rejected), 0 for the captures of
//! working connections and traffic (fixtures/pcap).

mod common;

use std::path::PathBuf;

use common::*;

/// Every capture of fixtures/pcap-cm, sorted by name.
fn cm_captures() -> Vec<PathBuf> {
    let dir = fixtures().join("pcap-cm");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e} (the CM captures are missing)", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "pcap"))
        .collect();
    v.sort();
    v
}

fn stem(p: &std::path::Path) -> String {
    p.file_stem().unwrap().to_string_lossy().into_owned()
}

/// `rdmakit pcap ARGS FILE`: its exit code and stdout, checking that it
/// wrote nothing on stderr.
fn pcap(args: &[&str], file: &std::path::Path) -> (i32, String) {
    let mut a = vec!["pcap"];
    a.extend_from_slice(args);
    let f = file.to_str().unwrap();
    a.push(f);
    let o = rdmakit(&a);
    assert!(o.stderr.is_empty(), "{f}: {}", text(&o.stderr));
    (o.status.code().expect("an exit code"), text(&o.stdout))
}

#[test]
fn cm_capture_reports_name_every_message_and_failed_exchange() {
    let files = cm_captures();
    let names: Vec<String> = files.iter().map(|p| stem(p)).collect();
    assert_eq!(
        names,
        [
            "rxe-requests-unanswered",
            "softnic-rping-connect",
            "softnic-rping-dreq-dropped",
            "softnic-rping-refused",
            "softnic-udaddy",
        ],
        "a new capture needs its snapshots (and its exit status below)"
    );
    for f in &files {
        let (code, out) = pcap(&[], f);
        insta::assert_snapshot!(format!("human-{}", stem(f)), format!("exit {code}\n{out}"));
        let (code, out) = pcap(&["--json"], f);
        let v: serde_json::Value = serde_json::from_str(&out).expect("one JSON document");
        insta::assert_json_snapshot!(
            format!("json-{}", stem(f)),
            serde_json::json!({ "exit": code, "report": v })
        );
    }
}

#[test]
fn pcap_exits_1_exactly_when_an_exchange_failed_or_a_packet_is_bad() {
    let mut cases: Vec<(PathBuf, i32)> = cm_captures()
        .into_iter()
        .map(|p| {
            let ok = matches!(
                stem(&p).as_str(),
                "softnic-rping-connect" | "softnic-udaddy"
            );
            (p, if ok { 0 } else { 1 })
        })
        .collect();
    for name in [
        "rc_pingpong-s64",
        "rc_pingpong-s5000-mtu1024",
        "write_bw-s8192",
        "write_bw-s8192-old_post_send",
    ] {
        cases.push((PathBuf::from(fixture(&format!("pcap/{name}.pcap"))), 0));
    }
    for (f, want) in cases {
        let (code, out) = pcap(&[], &f);
        assert_eq!(code, want, "{}:\n{out}", f.display());
        let none = out.contains("\nanomalies: none\n");
        assert_eq!(none, want == 0, "{}:\n{out}", f.display());
    }
}

/// crates/wire/tests/data/cnp: a capture built with wire's Reprs whose
/// CE-marked packets a CNP answers only at first, and scapy's CNPs.
fn cnp_capture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../wire/tests/data/cnp/{name}.pcap"))
}

#[test]
fn pcap_shows_ecn_dscp_and_cnps_and_flags_unanswered_ce() {
    let f = cnp_capture("ce-and-cnp");
    let (code, out) = pcap(&[], &f);
    assert_eq!(code, 1, "{out}");
    for want in [
        ", dscp 26 ECT(0)\n",
        "RC_SEND_ONLY qp 0x000022 psn 101, len 64, icrc ok, dscp 26 CE (congestion experienced)\n",
        "CNP qp 0x000011 psn 0 BECN, icrc ok, dscp 48 Not-ECT\n",
        "\necn: Not-ECT x3, ECT(0) x2, CE x6; dscp: 0 x1, 26 x9, 48 x1\n",
        "\ncnp 10.0.0.2 > 10.0.0.1 qp 0x000011: 1 CNP, frames 3..3\n",
        "\nanomalies: ce_without_cnp x1\n",
        "cannot be judged, the capture holds no packet from fd00::4 to fd00::3\n",
    ] {
        assert!(out.contains(want), "{want:?} not in:\n{out}");
    }
    let (code, out) = pcap(&["--json"], &f);
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(&out).expect("one JSON document");
    assert_eq!(v["anomaly_counts"]["ce_without_cnp"], 1);
    assert_eq!(v["anomalies"][0]["index"], 6);
    assert_eq!(v["ecn_counts"]["ce"], 6);
    assert_eq!(v["ecn_counts"]["ect1"], 0);
    assert_eq!(v["dscp_counts"]["48"], 1);
    assert_eq!(v["packets"][1]["ecn"], "ce");
    assert_eq!(v["packets"][2]["dscp"], 48);
    assert_eq!(v["packets"][2]["opcode_name"], "CNP");
    assert_eq!(
        v["cnp_flows"],
        serde_json::json!([{ "src": "10.0.0.2", "dst": "10.0.0.1", "qpn": 17, "cnps": 1,
                              "first_index": 3, "last_index": 3 }])
    );
    assert_eq!(v["flows"][0]["ce_packets"], 5);
    // scapy's CNPs alone: decoded, counted, nothing to flag.
    let (code, out) = pcap(&[], &cnp_capture("scapy-cnp"));
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("\ncnp fd00::16 > fd00::15 qp 0x0000a3: 1 CNP, frames 2..2\n"),
        "{out}"
    );
}
