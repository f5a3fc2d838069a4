//! `rdmakit devinfo` against a real `ibv_devinfo` from kernel rxe
//! (fixtures/healthy/cmd/ibv_devinfo*.out): same keys in the same
//! order with the same tabs; every value that differs is listed in
//! `DIFFERENCES` with the reason.

mod common;

use common::*;
use std::process::Command;

fn fixture(name: &str) -> String {
    let p = fixtures().join("healthy/cmd").join(name);
    std::fs::read_to_string(&p)
        .unwrap_or_else(|e| panic!("{}: {e} (fixtures/ is part of the repository)", p.display()))
}

/// Where the soft NIC's `-v` values differ from kernel rxe's, and why.
/// Keys are `tabs:name` as [`entries`] makes them.
const DIFFERENCES: &[(&str, &str)] = &[
    ("0:hca_id", "device name: soft0 vs rxe0"),
    ("1:fw_ver", "the soft NIC reports its own version 0.1.0; rxe 0.0.0"),
    ("1:node_guid", "EUI-64 of 02:00:<IPv4 of the device address: the host's first non-loopback address, else 127.0.0.1> (rxe: of the netdev MAC)"),
    ("1:sys_image_guid", "as node_guid"),
    ("1:max_qp", "16384 configurable limit (rxe 1<<20 minus reserved)"),
    ("1:max_qp_wr", "16384 (rxe 1<<20)"),
    ("1:device_cap_flags", "no AUTO_PATH_MIG/CHANGE_PHY_PORT/UD_AV_PORT_ENFORCE/SRQ_RESIZE/MW/MEM_MGT_EXTENSIONS; adds N_NOTIFY_CQ"),
    ("1:max_cq", "16384 (rxe 1<<20)"),
    ("1:max_cqe", "4194303, mlx5's (rxe (1<<15)-1): ofi_rxm asks for 262144; entries are allocated as completions arrive"),
    ("1:max_mr", "65536 (rxe 0x7ffff)"),
    ("1:max_pd", "65536 (rxe 1<<20)"),
    ("1:max_res_rd_atom", "max_qp_rd_atom x max_qp with the smaller max_qp"),
    ("1:max_mw", "memory windows not supported"),
    ("1:max_mcast_grp", "multicast not supported"),
    ("1:max_mcast_qp_attach", "multicast not supported"),
    ("1:max_total_mcast_qp_attach", "multicast not supported"),
    ("1:max_ah", "65536 (rxe 0x7fff)"),
    ("1:max_srq", "16384 (rxe 0xdffff)"),
    ("1:max_srq_wr", "16384 (rxe 1<<20)"),
    ("1:max_pkeys", "one P_Key (0xffff); rxe advertises 64"),
    ("1:device_cap_flags_ex", "as device_cap_flags"),
    ("1:num_comp_vectors", "available CPUs of this machine"),
    ("3:active_mtu", "from the loopback netdev MTU (65536 -> 4096); the fixture's VM had 1500 -> 1024"),
    ("3:max_msg_sz", "2^31 (the engine handles it); rxe 0x800000"),
    ("3:gid_tbl_len", "16 entries; rxe 1024"),
    ("3:port_lid", "1: the loopback device's own port, so InfiniBand-style programs that exchange LIDs (qperf without -cm) reach it; RoCE AVs without a GRH are refused otherwise, as on rxe (lid 0)"),
    ("3:active_speed", "25 Gbps advertised; rxe says 2.5 Gbps"),
    ("3:GID", "one RoCE v2 GID of the device address (the host's first non-loopback address, else 127.0.0.1) at index 0; rxe lists every address of the netdev"),
];

/// (key, value) per logical line: `tabs:name` keys; continuation lines
/// (capability names, `NO SUPPORT`) join the previous key's value; GID
/// lines collapse into one `3:GID` entry holding every GID.
fn entries(text: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        if line.is_empty() || line.starts_with("exit=") {
            continue;
        }
        let tabs = line.len() - line.trim_start_matches('\t').len();
        let body = &line[tabs..];
        if tabs == 5 {
            let last = out.last_mut().expect("continuation after a key");
            last.1.push_str(&format!(" +{body}"));
            continue;
        }
        let (name, value) = match body.split_once(':') {
            Some((k, v)) => (k.to_string(), v.trim_start_matches('\t').to_string()),
            None => (body.to_string(), String::new()),
        };
        if name.starts_with("GID[") {
            let key = format!("{tabs}:GID");
            match out.last_mut() {
                Some(last) if last.0 == key => last.1.push_str(&format!(" | {value}")),
                _ => out.push((key, value)),
            }
            continue;
        }
        // Keep the tabs between key and value: they are part of the format.
        let sep = body
            .split_once(':')
            .map(|(_, v)| v.len() - v.trim_start_matches('\t').len())
            .unwrap_or(0);
        out.push((format!("{tabs}:{name}/{sep}"), value));
    }
    out
}

fn bare(k: &str) -> &str {
    k.split('/').next().unwrap_or(k)
}

#[test]
fn verbose_matches_ibv_devinfo_structure_and_documents_differences() {
    let want = fixture("ibv_devinfo-v.out");
    let out = rdmakit(&["devinfo", "-v"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = String::from_utf8(out.stdout).unwrap();
    let (w, g) = (entries(&want), entries(&got));
    let wk: Vec<&str> = w.iter().map(|e| e.0.as_str()).collect();
    let gk: Vec<&str> = g.iter().map(|e| e.0.as_str()).collect();
    assert_eq!(
        gk, wk,
        "keys (with tabs) in the same order as ibv_devinfo -v"
    );
    let mut differ = Vec::new();
    for ((k, wv), (_, gv)) in w.iter().zip(&g) {
        if wv != gv {
            let doc = DIFFERENCES.iter().find(|d| d.0 == bare(k));
            assert!(
                doc.is_some(),
                "{k}: soft NIC {gv:?} vs rxe {wv:?} is not documented in DIFFERENCES"
            );
            differ.push(bare(k).to_string());
        }
    }
    for (k, why) in DIFFERENCES {
        assert!(
            w.iter().any(|e| bare(&e.0) == *k),
            "DIFFERENCES names {k}, which ibv_devinfo does not print"
        );
        // num_comp_vectors may well match (2 CPUs here and in the VM).
        if *k != "1:num_comp_vectors" {
            assert!(
                differ.iter().any(|d| d == k),
                "{k} ({why}) no longer differs"
            );
        }
    }
}

#[test]
fn brief_matches_ibv_devinfo_structure() {
    let want = fixture("ibv_devinfo.out");
    let out = rdmakit(&["devinfo"]);
    assert!(out.status.success());
    let got = String::from_utf8(out.stdout).unwrap();
    let wk: Vec<String> = entries(&want).into_iter().map(|e| e.0).collect();
    let gk: Vec<String> = entries(&got).into_iter().map(|e| e.0).collect();
    assert_eq!(gk, wk);
    assert!(got.ends_with("link_layer:\t\tEthernet\n\n"));
}

#[test]
fn json_has_the_same_fields() {
    let out = rdmakit(&["devinfo", "-v", "--json"]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    let d = &v["devices"][0];
    let text = String::from_utf8(rdmakit(&["devinfo", "-v"]).stdout).unwrap();
    for (k, _) in entries(&text) {
        let name = bare(&k).split_once(':').map(|x| x.1).unwrap_or("");
        let is_port = k.starts_with("3:") || k.starts_with("2:port");
        let obj = if is_port { &d["ports"][0] } else { d };
        let field = match name {
            "GID" => "gids",
            "port" => "port",
            n if n.ends_with("_odp_caps")
                || n.contains("not supported")
                || n.ends_with("_caps")
                || [
                    "max_tso",
                    "max_rwq_indirection_tables",
                    "max_rwq_indirection_table_size",
                    "rx_hash_function",
                    "rx_hash_fields_mask",
                    "max_wq_type_rq",
                    "qp_rate_limit_min",
                    "qp_rate_limit_max",
                ]
                .contains(&n) =>
            {
                continue; // extended caps the verbs API does not model yet
            }
            n => n,
        };
        assert!(!obj[field].is_null(), "JSON lacks {field} ({k})");
    }
    assert_eq!(d["ports"][0]["gids"][0]["type"], "RoCE v2");
    assert_eq!(d["ports"][0]["state"], "PORT_ACTIVE");
    // The soft NIC's UDP offloads, probed at open; off when asked.
    let o = d["soft_udp_offloads"].as_str().expect("soft_udp_offloads");
    assert!(["gso gro", "gso", "gro", "none"].contains(&o), "{o}");
    let out = Command::new(env!("CARGO_BIN_EXE_rdmakit"))
        .args(["devinfo", "-v", "--json"])
        .env_remove("RDMAKIT_SOFT_NAME")
        .env_remove("RDMAKIT_SOFT_ADDR")
        .env("RDMAKIT_SOFT_GSO", "0")
        .env("RDMAKIT_SOFT_GRO", "0")
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    assert_eq!(v["devices"][0]["soft_udp_offloads"], "none");
    // The same-host data path: auto (rings and the copy) by default or udp
    // when asked; shm and cma (the copy over UDP, gone since a copy
    // takes the rings' authenticated channel) mean auto; an unknown value is
    // refused naming the variable.
    assert_eq!(d["soft_transport"], "auto");
    let run = |t: &str| {
        Command::new(env!("CARGO_BIN_EXE_rdmakit"))
            .args(["devinfo", "-v", "--json"])
            .env_remove("RDMAKIT_SOFT_NAME")
            .env_remove("RDMAKIT_SOFT_ADDR")
            .env("RDMAKIT_SOFT_TRANSPORT", t)
            .output()
            .unwrap()
    };
    let v: serde_json::Value = serde_json::from_slice(&run("udp").stdout).expect("valid JSON");
    assert_eq!(v["devices"][0]["soft_transport"], "udp");
    let v: serde_json::Value = serde_json::from_slice(&run("cma").stdout).expect("valid JSON");
    assert_eq!(v["devices"][0]["soft_transport"], "auto");
    let v: serde_json::Value = serde_json::from_slice(&run("shm").stdout).expect("valid JSON");
    assert_eq!(v["devices"][0]["soft_transport"], "auto");
    let out = run("ring");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("RDMAKIT_SOFT_TRANSPORT") && err.contains("EINVAL"),
        "{err}"
    );
}

#[test]
fn bad_device_and_port_are_errors() {
    let out = rdmakit(&["devinfo", "-d", "nosuch0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("wasn't found"));
    let out = rdmakit(&["devinfo", "-i", "2"]);
    assert_eq!(out.status.code(), Some(2));
    let out = rdmakit(&["devinfo", "-d", "soft0", "-i", "1"]);
    assert!(out.status.success());
}

/// `devinfo --from`: replaying the real captures, every line rdmakit prints is
/// the line the real `ibv_devinfo [-v]` printed on that host, in its order;
/// what a bundle cannot hold is left out and named on stderr (exit 3).
#[test]
fn replay_prints_ibv_devinfo_lines_of_the_capture_and_names_the_rest() {
    for scn in ["healthy", "healthy-busy"] {
        let dir = fixtures().join(scn);
        for (flag, file) in [(None, "ibv_devinfo.out"), (Some("-v"), "ibv_devinfo-v.out")] {
            let real = std::fs::read_to_string(dir.join("cmd").join(file)).unwrap();
            let real: Vec<&str> = real.lines().filter(|l| !l.starts_with("exit=")).collect();
            let mut args = vec!["devinfo", "--from", dir.to_str().unwrap()];
            args.extend(flag);
            let o = rdmakit(&args);
            assert_eq!(o.status.code(), Some(3), "{scn} {args:?}");
            let ours = text(&o.stdout);
            // A subsequence of the real output, line for line.
            let mut at = 0;
            for l in ours.lines() {
                let found = real[at..].iter().position(|r| *r == l);
                let Some(i) = found else {
                    panic!("{scn} {file}: {l:?} is not ibv_devinfo's (or not in its order)")
                };
                at += i + 1;
            }
            assert!(ours.lines().count() >= 10, "{ours}");
            let err = text(&o.stderr);
            assert!(
                err.starts_with("rdmakit: rxe0: fw_ver, vendor_id, vendor_part_id, hw_ver")
                    && err.contains("max_mtu, active_mtu, port_lmc")
                    && err.contains(&format!(
                        "not recorded in the capture directory {}",
                        dir.display()
                    )),
                "{err}"
            );
        }
    }
    // JSON: the same fields, and the ones not recorded.
    let o = rdmakit(&["devinfo", "--json", "--from", &fixture_path("healthy")]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let d = &v["devices"][0];
    assert_eq!(d["hca_id"], "rxe0");
    assert_eq!(d["node_guid"], "5054:00ff:fe12:3456");
    assert_eq!(d["ports"][0]["state"], "PORT_ACTIVE");
    assert_eq!(d["ports"][0]["link_layer"], "Ethernet");
    let missing: Vec<&str> = d["not_recorded"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap())
        .collect();
    assert_eq!(
        missing,
        [
            "fw_ver",
            "vendor_id",
            "vendor_part_id",
            "hw_ver",
            "max_mtu",
            "active_mtu",
            "port_lmc"
        ]
    );
    // A bundle recorded where rdma-core answered holds the four limits.
    let vm = format!(
        "{}/../doctor/tests/data/vm/healthy.json.gz",
        env!("CARGO_MANIFEST_DIR")
    );
    let o = rdmakit(&["devinfo", "-v", "--from", &vm]);
    assert!(
        text(&o.stdout).contains("\tmax_qp:\t\t\t\t1048560\n"),
        "{}",
        text(&o.stdout)
    );
}

fn fixture_path(name: &str) -> String {
    fixtures().join(name).display().to_string()
}
