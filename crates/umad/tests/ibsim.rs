//! rdmakit-umad against a simulated fabric: ibsim, unmodified opensm, and
//! unmodified infiniband-diags as the reference.
//!
//! The umad2sim preload must be in a process from exec, so each test starts
//! a fabric, then re-executes this test binary under the preload
//! (`fabric.command`) to run [`inner_under_preload`] with a scenario named in
//! `RDMAKIT_UMAD_INNER`. The inner run prints one `UMAD-RESULT {json}` line
//! that the outer test asserts on. The inner test is `#[ignore]`d and fails
//! when run without a scenario, so it never passes on its own.

use std::process::Stdio;
use std::time::{Duration, Instant};

use rdmakit_testkit::ibsim::{dumbbell, line, Fabric};
use rdmakit_umad::{Dest, Layer, Library, MadError, Policy, Port, Request};
use rdmakit_wire::mad::pma::{self, port_counters};
use rdmakit_wire::mad::smp::{self, node_info};
use serde_json::{json, Value};

const INNER: &str = "RDMAKIT_UMAD_INNER";
const ARG: &str = "RDMAKIT_UMAD_ARG";
const TAG: &str = "UMAD-RESULT ";

/// Three switches in a line (S1 - S2 - S3, two cables between neighbours:
/// ports 9 and 10, then 11 and 12) and six hosts, two per switch.
fn line6() -> String {
    line(3, 12, &[[9, 10], [11, 12]])
}

// ---------------------------------------------------------------- requests
// Requests and replies through wire's SMP and PMA views.

const NODE_INFO: u16 = smp::attr::NODE_INFO;

/// A directed-route SMP Get along `path` (the egress port per hop), the
/// permissive LID at both ends.
fn dr_get(attr: u16, path: &[u8]) -> Request {
    let route = smp::Route::directed(path).unwrap();
    Request::new(Dest::Directed, smp::Repr::get(attr, 0, route, 0).to_bytes())
}

fn lid_get(attr: u16, lid: u16) -> Request {
    Request::new(
        Dest::smi(lid),
        smp::Repr::get(attr, 0, smp::Route::Lid, 0).to_bytes(),
    )
}

fn port_counters(lid: u16, port: u8) -> Request {
    let get = pma::Repr::get(pma::attr::PORT_COUNTERS, port, 0);
    Request::new(Dest::gsi(lid), get.to_bytes())
}

fn node_info(reply: &Result<[u8; 256], MadError>) -> Value {
    match reply {
        Ok(m) => {
            let r = smp::Repr::parse(&smp::Packet::new_checked(&m[..]).unwrap()).unwrap();
            assert!(r.is_response() && r.status().is_ok(), "{r}");
            let n = node_info::Repr::parse(&node_info::Packet::new_checked(&r.data[..]).unwrap())
                .unwrap();
            json!({
                "type": n.node_type,
                "ports": n.num_ports,
                "guid": format!("0x{:016x}", n.node_guid),
            })
        }
        Err(e) => {
            json!({ "error": e.to_string(), "timeout": matches!(e, MadError::Timeout { .. }) })
        }
    }
}

// ------------------------------------------------------------------- inner

/// Runs one scenario inside a process started under the preload.
#[test]
#[ignore = "run by the other tests of this file, under the umad2sim preload"]
fn inner_under_preload() {
    let scenario = std::env::var(INNER)
        .expect("RDMAKIT_UMAD_INNER names the scenario: this test runs only from the outer tests");
    let arg: u16 = std::env::var(ARG)
        .ok()
        .and_then(|a| a.parse().ok())
        .unwrap_or(0);
    let result = match scenario.as_str() {
        "open-named" => {
            let text = |r: Result<Port, rdmakit_umad::Error>| match r {
                Ok(p) => json!({ "opened": format!("{} {}", p.info().ca, p.info().port) }),
                Err(e) => json!({ "layer": e.layer.as_str(), "text": e.to_string() }),
            };
            json!({
                "named": text(Port::open(Some("ibsim0"), Some(1))),
                "ca_only": text(Port::open(Some("ibsim0"), None)),
                "no_such_ca": text(Port::open(Some("mlx5_9"), None)),
                "no_such_port": text(Port::open(None, Some(2))),
            })
        }
        "open-error" => match Port::open(None, None) {
            Ok(p) => json!({ "opened": p.info().ca }),
            Err(e) => {
                json!({ "verb": e.verb, "errno": e.errno, "layer": e.layer.as_str(), "text": e.to_string() })
            }
        },
        _ => {
            let mut port = Port::open(None, None).expect("open the simulated port");
            let r = run_scenario(&mut port, &scenario, arg);
            let s = port.stats();
            json!({ "result": r, "stats": { "sent": s.sent, "replies": s.replies, "timeouts": s.timeouts,
                "unmatched": s.unmatched, "invalid": s.invalid } })
        }
    };
    println!("{TAG}{result}");
}

fn run_scenario(port: &mut Port, scenario: &str, arg: u16) -> Value {
    let policy = Policy::default();
    match scenario {
        "nodeinfo" => {
            let i = port.info().clone();
            let r = port.transact(
                &[
                    dr_get(NODE_INFO, &[]),
                    dr_get(NODE_INFO, &[1]),
                    lid_get(NODE_INFO, arg),
                ],
                &policy,
            );
            json!({
                "info": { "ca": i.ca, "port": i.port, "lid": i.lid, "sm_lid": i.sm_lid, "state": i.state,
                          "port_guid": format!("0x{:016x}", i.port_guid) },
                "dr_local": node_info(&r[0]), "dr_1": node_info(&r[1]), "lid": node_info(&r[2]),
            })
        }
        "pma" => {
            let r = port.transact1(&port_counters(arg, 7), &policy);
            match r {
                Ok(m) => {
                    let r = pma::Repr::parse(&pma::Packet::new_checked(&m[..]).unwrap()).unwrap();
                    let c = port_counters::Repr::parse(
                        &port_counters::Packet::new_checked(&r.data[..]).unwrap(),
                    )
                    .unwrap();
                    json!({ "symbol_errors": c.symbol_error_counter, "port": c.port_select })
                }
                Err(e) => json!({ "error": e.to_string() }),
            }
        }
        "window" => {
            let reqs: Vec<Request> = (0..200).map(|_| lid_get(NODE_INFO, arg)).collect();
            let r = port.transact(
                &reqs,
                &Policy {
                    window: 16,
                    ..policy
                },
            );
            let tids: std::collections::BTreeSet<u64> = r
                .iter()
                .filter_map(|m| m.as_ref().ok())
                .map(|m| u64::from_be_bytes(m[8..16].try_into().unwrap()))
                .collect();
            json!({
                "ok": r.iter().filter(|m| m.is_ok()).count(),
                "distinct_tids": tids.len(),
                "same_node": r.iter().all(|m| node_info(m) == node_info(&r[0])),
            })
        }
        "timeout" => {
            let p = Policy {
                window: 4,
                timeout: Duration::from_millis(100),
                retries: 2,
            };
            let t = Instant::now();
            let r = port.transact1(&lid_get(NODE_INFO, arg), &p);
            json!({ "ms": t.elapsed().as_millis() as u64, "reply": node_info(&r),
                    "attempts": match r { Err(MadError::Timeout { attempts, .. }) => attempts, _ => 0 } })
        }
        "routes" => {
            // S1 is one hop away; S2 through S1's port 7 and through its port 8.
            let p = Policy {
                window: 4,
                timeout: Duration::from_millis(100),
                retries: 1,
            };
            let r = port.transact(
                &[
                    dr_get(NODE_INFO, &[1]),
                    dr_get(NODE_INFO, &[1, 7]),
                    dr_get(NODE_INFO, &[1, 8]),
                ],
                &p,
            );
            json!({ "s1": node_info(&r[0]), "via7": node_info(&r[1]), "via8": node_info(&r[2]) })
        }
        "rate" => {
            let reqs: Vec<Request> = (0..1000).map(|_| lid_get(NODE_INFO, arg)).collect();
            let mut out = serde_json::Map::new();
            for w in [1usize, 16] {
                let t = Instant::now();
                let r = port.transact(
                    &reqs,
                    &Policy {
                        window: w,
                        ..policy
                    },
                );
                let secs = t.elapsed().as_secs_f64();
                out.insert(
                    format!("w{w}_ok"),
                    json!(r.iter().filter(|m| m.is_ok()).count()),
                );
                out.insert(format!("w{w}_per_s"), json!(1000.0 / secs));
            }
            Value::Object(out)
        }
        other => panic!("unknown scenario {other}"),
    }
}

// ------------------------------------------------------------------- outer

/// Runs [`inner_under_preload`] with `scenario` under the fabric's preload,
/// attached at `sim_host` (the topology's first node when `None`).
fn inner(f: &Fabric, scenario: &str, arg: u16, sim_host: Option<&str>) -> Value {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = f.command(&exe);
    cmd.args(INNER_ARGS)
        .env(INNER, scenario)
        .env(ARG, arg.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(h) = sim_host {
        cmd.env("SIM_HOST", h);
    }
    let out = rdmakit_testkit::wait(cmd.spawn().unwrap(), Duration::from_secs(60), scenario);
    parse_inner(&out, scenario)
}

/// The arguments that make this test binary run [`inner_under_preload`] alone.
const INNER_ARGS: [&str; 5] = [
    "--exact",
    "inner_under_preload",
    "--ignored",
    "--nocapture",
    "--test-threads=1",
];

/// Runs [`inner_under_preload`]'s `open-error` scenario outside any fabric,
/// its environment changed by `env`.
fn open_error(env: impl FnOnce(&mut std::process::Command) -> &mut std::process::Command) -> Value {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = std::process::Command::new(exe);
    cmd.args(INNER_ARGS).env(INNER, "open-error");
    env(&mut cmd);
    parse_inner(&cmd.output().unwrap(), "open-error")
}

fn parse_inner(out: &std::process::Output, scenario: &str) -> Value {
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find_map(|l| l.split_once(TAG).map(|(_, r)| r))
        .unwrap_or_else(|| {
            panic!(
                "inner scenario {scenario} printed no result ({})\n{}",
                out.status,
                rdmakit_testkit::text(out)
            )
        });
    assert!(
        out.status.success(),
        "inner scenario {scenario} failed\n{}",
        rdmakit_testkit::text(out)
    );
    serde_json::from_str(line).unwrap()
}

/// `name` → base LID, from unmodified `ibswitches`
/// (`Switch : 0x... ports 8 "S1" base port 0 lid 2 lmc 0`).
fn switch_lids(f: &mut Fabric) -> Vec<(String, u16)> {
    let out = f.tool("ibswitches", &[]);
    assert!(
        out.status.success(),
        "ibswitches: {}",
        rdmakit_testkit::text(&out)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let name = l.split('"').nth(1)?.to_string();
            let lid = l
                .split(" lid ")
                .nth(1)?
                .split_whitespace()
                .next()?
                .parse()
                .ok()?;
            Some((name, lid))
        })
        .collect()
}

fn lid_of(f: &mut Fabric, switch: &str) -> u16 {
    let lids = switch_lids(f);
    lids.iter()
        .find(|(n, _)| n == switch)
        .unwrap_or_else(|| panic!("{switch} not in ibswitches: {lids:?}"))
        .1
}

/// NodeInfo as unmodified `smpquery nodeinfo` prints it, in the inner
/// run's terms.
fn smpquery_nodeinfo(f: &mut Fabric, sim_host: Option<&str>, args: &[&str]) -> Value {
    let mut a = vec!["nodeinfo"];
    a.extend_from_slice(args);
    let out = f.tool_at(sim_host, "smpquery", &a);
    let text = rdmakit_testkit::text(&out);
    assert!(out.status.success(), "smpquery {args:?}: {text}");
    let field = |name: &str| -> String {
        text.lines()
            .find_map(|l| {
                l.strip_prefix(name)
                    .map(|v| v.trim_start_matches('.').trim().to_string())
            })
            .unwrap_or_else(|| panic!("no {name} in smpquery output: {text}"))
    };
    let node_type = match field("NodeType:").as_str() {
        "Channel Adapter" => 1,
        "Switch" => 2,
        "Router" => 3,
        other => panic!("node type {other}"),
    };
    json!({ "type": node_type, "ports": field("NumPorts:").parse::<u8>().unwrap(), "guid": field("Guid:") })
}

#[test]
fn node_info_directed_and_lid_routed_match_smpquery() {
    let mut f = Fabric::start(&dumbbell());
    let s1 = lid_of(&mut f, "S1");
    let got = inner(&f, "nodeinfo", s1, None);
    let r = &got["result"];
    assert_eq!(r["info"]["ca"], "ibsim0", "{got}");
    assert_eq!(r["info"]["state"], 4, "{got}");
    // Port::info says what unmodified ibstat says.
    let ibstat = rdmakit_testkit::text(&f.tool("ibstat", &[]));
    let field = |name: &str| {
        ibstat
            .lines()
            .find_map(|l| l.trim().strip_prefix(name).map(|v| v.trim().to_string()))
            .unwrap_or_else(|| panic!("no {name} in ibstat: {ibstat}"))
    };
    assert_eq!(r["info"]["lid"].to_string(), field("Base lid:"), "{got}");
    assert_eq!(r["info"]["sm_lid"].to_string(), field("SM lid:"), "{got}");
    assert_eq!(r["info"]["port_guid"], field("Port GUID:"), "{got}");
    assert_eq!(r["info"]["port"], 1, "{got}");
    assert_eq!(
        r["dr_local"],
        smpquery_nodeinfo(&mut f, None, &["-D", "0"]),
        "{got}"
    );
    assert_eq!(
        r["dr_1"],
        smpquery_nodeinfo(&mut f, None, &["-D", "0,1"]),
        "{got}"
    );
    assert_eq!(
        r["lid"],
        smpquery_nodeinfo(&mut f, None, &[&s1.to_string()]),
        "{got}"
    );
    assert_eq!(r["dr_local"]["type"], 1, "H1 is a channel adapter: {got}");
    assert_eq!(r["dr_1"]["type"], 2, "S1 is a switch: {got}");
    assert_eq!(r["dr_1"]["ports"], 8, "{got}");
    assert_eq!(r["lid"], r["dr_1"], "S1 by LID and by route: {got}");
    assert_eq!(got["stats"]["unmatched"], 0, "{got}");
}

#[test]
fn node_info_on_three_switches_six_hosts_from_another_host_matches_smpquery() {
    let mut f = Fabric::start(&line6());
    let lids = switch_lids(&mut f);
    assert_eq!(lids.len(), 3, "{lids:?}");
    let s3 = lids.iter().find(|(n, _)| n == "S3").unwrap().1;
    // Attached at H5: the local node is H5 and path [1] is S3.
    let got = inner(&f, "nodeinfo", s3, Some("H5"));
    let r = &got["result"];
    assert_eq!(
        r["dr_local"],
        smpquery_nodeinfo(&mut f, Some("H5"), &["-D", "0"]),
        "{got}"
    );
    assert_eq!(
        r["dr_1"],
        smpquery_nodeinfo(&mut f, Some("H5"), &["-D", "0,1"]),
        "{got}"
    );
    assert_eq!(
        r["lid"],
        smpquery_nodeinfo(&mut f, Some("H5"), &[&s3.to_string()]),
        "{got}"
    );
    assert_eq!(r["dr_1"]["ports"], 12, "{got}");
    assert_eq!(r["lid"], r["dr_1"], "{got}");
    assert_ne!(
        r["dr_local"],
        smpquery_nodeinfo(&mut f, None, &["-D", "0"]),
        "H5 is not H1: {got}"
    );
}

#[test]
fn pma_port_counters_read_what_performance_set_wrote_and_perfquery_reads() {
    let mut f = Fabric::start(&dumbbell());
    let s1 = lid_of(&mut f, "S1");
    let reply = f.console("PerformanceSet \"S1\"[7] PortCounters.SymbolErrorCounter=42");
    assert!(reply.contains("has been set to 42"), "{reply}");
    let got = inner(&f, "pma", s1, None);
    assert_eq!(got["result"]["symbol_errors"], 42, "{got}");
    assert_eq!(got["result"]["port"], 7, "{got}");
    let out = f.tool("perfquery", &[&s1.to_string(), "7"]);
    let text = rdmakit_testkit::text(&out);
    let pq = text
        .lines()
        .find_map(|l| l.strip_prefix("SymbolErrorCounter:"))
        .map(|v| v.trim_start_matches('.').trim().to_string())
        .unwrap_or_else(|| panic!("perfquery: {text}"));
    assert_eq!(pq, "42", "{text}");
}

#[test]
fn two_hundred_requests_through_a_window_of_sixteen_all_match() {
    let mut f = Fabric::start(&dumbbell());
    let s2 = lid_of(&mut f, "S2");
    let got = inner(&f, "window", s2, None);
    assert_eq!(got["result"]["ok"], 200, "{got}");
    assert_eq!(
        got["result"]["distinct_tids"], 200,
        "each reply carries its own request's TID: {got}"
    );
    assert_eq!(got["result"]["same_node"], true, "{got}");
    assert_eq!(got["stats"]["sent"], 200, "{got}");
    assert_eq!(got["stats"]["unmatched"], 0, "{got}");
    assert_eq!(got["stats"]["invalid"], 0, "{got}");
}

#[test]
fn a_lid_that_does_not_exist_times_out_within_the_policy() {
    let f = Fabric::start(&dumbbell());
    let got = inner(&f, "timeout", 77, None);
    let r = &got["result"];
    assert_eq!(r["reply"]["timeout"], true, "{got}");
    assert_eq!(r["attempts"], 3, "{got}");
    assert!(
        r["reply"]["error"]
            .as_str()
            .unwrap()
            .contains("timed out: no reply after 3 attempt"),
        "{got}"
    );
    // ibsim hands an unroutable MAD straight back with ETIMEDOUT (a real
    // port does so after the send's timeout): every attempt ends, is retried
    // and counted, and the whole stays within 3 attempts of 100 ms.
    assert_eq!(got["stats"]["sent"], 3, "{got}");
    assert_eq!(got["stats"]["timeouts"], 3, "{got}");
    let ms = r["ms"].as_u64().unwrap();
    assert!(ms < 300 + 700, "took {ms} ms: {got}");
}

#[test]
fn error_injection_drops_mads_on_that_route_but_not_on_others() {
    let mut f = Fabric::start(&dumbbell());
    let before = inner(&f, "routes", 0, None);
    for k in ["s1", "via7", "via8"] {
        assert!(
            before["result"][k]["guid"].is_string(),
            "{k} before the fault: {before}"
        );
    }
    let reply = f.console("Error \"S1\"[7] 100");
    assert!(!reply.contains("cannot"), "{reply}");
    let after = inner(&f, "routes", 0, None);
    let r = &after["result"];
    assert_eq!(
        r["via7"]["timeout"], true,
        "S1 port 7 drops everything: {after}"
    );
    assert_eq!(r["s1"], before["result"]["s1"], "{after}");
    assert_eq!(r["via8"], before["result"]["via8"], "{after}");
    assert_eq!(r["via8"]["type"], 2, "{after}");
}

#[test]
fn without_a_umad_device_the_error_is_at_the_kernel_layer() {
    // No preload, and this machine has no ib_umad.
    let got = open_error(|cmd| cmd.env_remove("LD_PRELOAD"));
    if std::path::Path::new("/sys/class/infiniband_mad/abi_version").exists() {
        panic!("this host has ib_umad loaded; the test needs a host without it: {got}");
    }
    assert_eq!(got["layer"], "kernel", "{got}");
    assert!(
        got["text"].as_str().unwrap().contains("modprobe ib_umad"),
        "{got}"
    );
}

#[test]
fn a_missing_libibumad_is_a_library_layer_error() {
    let e = Library::load("/nonexistent/libibumad.so.3").unwrap_err();
    assert_eq!((e.verb, e.layer), ("dlopen", Layer::Library), "{e}");
    assert!(e.to_string().contains("install libibumad3"), "{e}");
    // Through the environment hook, in a process of its own.
    let got = open_error(|cmd| cmd.env(rdmakit_umad::LIBRARY_ENV, "/nonexistent/libibumad.so.3"));
    assert_eq!(got["layer"], "library", "{got}");
    assert_eq!(got["verb"], "dlopen", "{got}");
}

#[test]
fn window_sixteen_beats_window_one_for_a_thousand_node_info_gets() {
    let _one = rdmakit_testkit::serial();
    let mut f = Fabric::start(&dumbbell());
    let s1 = lid_of(&mut f, "S1");
    let got = inner(&f, "rate", s1, None);
    let r = &got["result"];
    assert_eq!(r["w1_ok"], 1000, "{got}");
    assert_eq!(r["w16_ok"], 1000, "{got}");
    let (w1, w16) = (
        r["w1_per_s"].as_f64().unwrap(),
        r["w16_per_s"].as_f64().unwrap(),
    );
    eprintln!(
        "NodeInfo Gets: window 1 {w1:.0}/s, window 16 {w16:.0}/s, ratio {:.2}",
        w16 / w1
    );
    assert!(
        w16 > w1,
        "window 16 ({w16:.0}/s) is no faster than window 1 ({w1:.0}/s)"
    );
}

#[test]
fn a_named_ca_and_port_open_and_unknown_ones_are_refused() {
    let f = Fabric::start(&dumbbell());
    let got = inner(&f, "open-named", 0, None);
    assert_eq!(got["named"]["opened"], "ibsim0 1", "{got}");
    assert_eq!(got["ca_only"]["opened"], "ibsim0 1", "{got}");
    // Asked for what the host does not have: the caller's mistake, and the
    // error says what there is.
    assert_eq!(got["no_such_ca"]["layer"], "application", "{got}");
    let t = got["no_such_ca"]["text"].as_str().unwrap();
    assert!(
        t.contains("found no Active port of mlx5_9: this host has ibsim0 port 1"),
        "{got}"
    );
    assert_eq!(got["no_such_port"]["layer"], "application", "{got}");
}
