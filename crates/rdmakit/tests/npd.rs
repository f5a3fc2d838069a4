//! `rdmakit doctor --npd` against node-problem-detector's custom-plugin contract (exit
//! 0 ok / 1 problem / 2 unknown, one line of at most 80 bytes, within the deadline),
//! the state file across restarts, and the example manifests in deploy/kubernetes,
//! validated offline (kubectl is not available): they parse, and the plugin they
//! configure is a command this binary runs.

mod common;

use common::*;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn line(o: &Output) -> String {
    let s = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(s.lines().count(), 1, "exactly one line: {s:?}");
    let l = s.trim_end_matches('\n').to_string();
    assert!(l.len() <= 80, "{} bytes: {l}", l.len());
    l
}

fn npd(
    from_flag: &str,
    from: &str,
    state: &Path,
    extra: &[&str],
) -> (Option<i32>, String, Duration) {
    let t = Instant::now();
    let mut args = vec![
        "doctor",
        "--npd",
        from_flag,
        from,
        "--npd-state",
        state.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let o = rdmakit(&args);
    (o.status.code(), line(&o), t.elapsed())
}

#[test]
fn ok_problem_and_the_state_file() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state/npd.json");
    let (code, l, _) = npd("--from", &fixture("healthy"), &state, &[]);
    assert_eq!(
        (code, l.as_str()),
        (Some(0), "ok: 1 RDMA device, 1/1 ports ACTIVE")
    );
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    assert_eq!(s["schema"], "rdmakit.npd-state/v1");
    assert_eq!(s["exit"], 0);
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    assert_eq!(s["boot_id"], boot.trim());

    // The real kernel's port-down bundle from the VM tier.
    let down = repo().join("crates/doctor/tests/data/vm/port_down.json.gz");
    let (code, l, _) = npd("--from", down.to_str().unwrap(), &state, &[]);
    assert_eq!(code, Some(1), "{l}");
    assert!(l.starts_with("RDK-H002 rxe0 port 1 is DOWN"), "{l}");
    // Warnings are a problem only when asked: the real kernel without ib_umad.
    let noumad = repo().join("crates/doctor/tests/data/vm/ib_umad_missing.json.gz");
    let noumad = noumad.to_str().unwrap();
    let (code, l, _) = npd("--from", noumad, &state, &[]);
    assert_eq!(code, Some(0), "{l}");
    assert!(l.ends_with(", 1 warning"), "{l}");
    let (code, l, _) = npd("--from", noumad, &state, &["--fail-on", "warning"]);
    assert_eq!(code, Some(1), "{l}");
    assert!(l.starts_with("RDK-K003"), "{l}");
}

/// The ConnectX-3 capture with pegged symbol_error and link_downed: the line
/// leads with the code, the HCA and the port, and names both counters in 80 bytes.
#[test]
fn saturated_connectx3_line_names_the_hca_port_and_counters() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("npd.json");
    let (code, l, _) = npd("--from", &fixture("mlx4-saturated-edit"), &state, &[]);
    assert_eq!(
        (code, l.as_str()),
        (
            Some(1),
            "RDK-H010 mlx4_0 port 1: symbol_error 65535 saturated, link_downed 255 saturated"
        )
    );
}

/// A check that stalls, as one reading a wedged device's sysfs does: the plugin
/// answers "unknown" within its deadline instead of hanging until NPD kills it,
/// and never reports a previous boot's verdict as current. The stall is a kernel
/// log that is a pipe no one writes (read for up to 5 s, then given up); a FIFO
/// in the host tree no longer stalls anything, as rdmakit refuses to open one
/// there.
#[test]
fn a_hung_check_is_unknown_never_healthy() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let port = root.join("sys/class/infiniband/mlx5_0/ports/1");
    std::fs::create_dir_all(&port).unwrap();
    std::fs::write(
        root.join("sys/class/infiniband/mlx5_0/fw_ver"),
        "20.31.1014\n",
    )
    .unwrap();
    std::fs::write(port.join("state"), "4: ACTIVE\n").unwrap();
    let fifo = dir.path().join("kernel.log");
    let made = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    let state = dir.path().join("npd.json");
    let root_s = root.to_str().unwrap();
    let stalls = [
        "--npd-deadline",
        "1",
        "--kernel-log",
        fifo.to_str().unwrap(),
    ];

    // No state: nothing has completed since boot.
    let (code, l, took) = npd("--root", root_s, &state, &stalls);
    assert_eq!(code, Some(2), "{l}");
    assert_eq!(
        l,
        "unknown: check not done in 1s; no check completed since boot"
    );
    assert!(took < Duration::from_secs(10), "{took:?}");

    // A healthy verdict from another boot (before a reboot) is not reused.
    std::fs::write(
        &state,
        r#"{"schema":"rdmakit.npd-state/v1","boot_id":"another-boot","checked_unix":1,"exit":0,"message":"ok: 1 RDMA device, 1/1 ports ACTIVE"}"#,
    )
    .unwrap();
    let (code, l, _) = npd("--root", root_s, &state, &stalls);
    assert_eq!(
        (code, l.as_str()),
        (
            Some(2),
            "unknown: check not done in 1s; no check completed since boot"
        )
    );

    // This boot's last completed check is named, still as unknown.
    let (code, _, _) = npd("--from", &fixture("healthy"), &state, &[]);
    assert_eq!(code, Some(0));
    let (code, l, _) = npd("--root", root_s, &state, &stalls);
    assert_eq!(code, Some(2), "{l}");
    assert!(
        l.starts_with("unknown: check not done in 1s; last check "),
        "{l}"
    );
    assert!(l.contains(" ago: ok: 1 RDMA device"), "{l}");
}

/// A source that cannot be read at all is still judged on this host's boot:
/// the line names this boot's last completed check.
#[test]
fn an_unreadable_source_still_names_this_boots_last_check() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("npd.json");
    let (code, _, _) = npd("--from", &fixture("healthy"), &state, &[]);
    assert_eq!(code, Some(0));
    let gone = dir.path().join("gone");
    let (code, l, _) = npd("--root", gone.to_str().unwrap(), &state, &[]);
    assert_eq!(code, Some(2), "{l}");
    assert!(l.starts_with("unknown: cannot read the host"), "{l}");
    assert!(l.contains("; last check "), "{l}");
}

fn yaml_docs(path: &Path) -> Vec<serde_yaml::Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.split("\n---\n")
        .map(|d| serde_yaml::from_str(d).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .collect()
}

fn s<'a>(v: &'a serde_yaml::Value, path: &[&str]) -> &'a serde_yaml::Value {
    let mut v = v;
    for k in path {
        v = &v[*k];
    }
    v
}

#[test]
fn deploy_kubernetes_manifests_are_consistent_and_run() {
    let dir = repo().join("deploy/kubernetes");
    let cm = &yaml_docs(&dir.join("rdmakit-npd-config.yaml"))[0];
    assert_eq!(cm["kind"], "ConfigMap");
    let docs = yaml_docs(&dir.join("rdmakit-npd-daemonset.yaml"));
    let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "DaemonSet"
        ]
    );
    let ds = &docs[3];
    assert_eq!(ds["apiVersion"], "apps/v1");
    assert_eq!(
        s(ds, &["spec", "selector", "matchLabels"]),
        s(ds, &["spec", "template", "metadata", "labels"])
    );
    let pod = s(ds, &["spec", "template", "spec"]);
    assert_eq!(pod["serviceAccountName"], docs[0]["metadata"]["name"]);
    let role_rules = docs[1]["rules"].as_sequence().unwrap();
    assert!(role_rules
        .iter()
        .any(|r| r["resources"][0] == "nodes/status" && r["verbs"][0] == "patch"));

    // The container's command names the config file the ConfigMap provides, mounted
    // where the command looks.
    let c = &pod["containers"][0];
    let cmd: Vec<&str> = c["command"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let cfg_path = cmd
        .iter()
        .find_map(|a| a.strip_prefix("--config.custom-plugin-monitor="))
        .expect("custom plugin monitor flag");
    let mounts = c["volumeMounts"].as_sequence().unwrap();
    let volumes = pod["volumes"].as_sequence().unwrap();
    let mount_of = |path: &str| {
        mounts
            .iter()
            .filter(|m| path.starts_with(m["mountPath"].as_str().unwrap()))
            .max_by_key(|m| m["mountPath"].as_str().unwrap().len())
            .unwrap_or_else(|| panic!("nothing mounted at {path}"))
    };
    let volume =
        |name: &serde_yaml::Value| volumes.iter().find(|v| &v["name"] == name).expect("volume");
    let cfg_mount = mount_of(cfg_path);
    assert_eq!(
        volume(&cfg_mount["name"])["configMap"]["name"],
        cm["metadata"]["name"]
    );
    let key = cfg_path.rsplit('/').next().unwrap();
    let plugin: serde_json::Value = serde_json::from_str(
        cm["data"][key]
            .as_str()
            .expect("the ConfigMap holds the plugin config"),
    )
    .unwrap();

    // NPD's custom plugin config: the rule's condition is declared, NPD publishes no
    // default (healthy) condition at start, output fits NPD's limit, the plugin's own
    // deadline is below the rule's timeout, which is within the global one.
    assert_eq!(plugin["plugin"], "custom");
    let pc = &plugin["pluginConfig"];
    assert_eq!(pc["skip_initial_status"], true);
    assert_eq!(pc["max_output_length"], 80);
    let rule = &plugin["rules"][0];
    assert_eq!(rule["type"], "permanent");
    assert_eq!(rule["condition"], plugin["conditions"][0]["type"]);
    let secs = |v: &serde_json::Value| {
        v.as_str()
            .unwrap()
            .trim_end_matches('s')
            .parse::<f64>()
            .unwrap()
    };
    let args: Vec<String> = rule["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    let deadline: f64 = args[args.iter().position(|a| a == "--npd-deadline").unwrap() + 1]
        .parse()
        .unwrap();
    assert!(deadline < secs(&rule["timeout"]) && secs(&rule["timeout"]) <= secs(&pc["timeout"]));

    // The plugin binary and the state directory are mounted from the host; the host
    // tree it reads is mounted where --root points.
    let bin = rule["path"].as_str().unwrap();
    assert!(volume(&mount_of(bin)["name"])["hostPath"]["path"].is_string());
    let state = &args[args.iter().position(|a| a == "--npd-state").unwrap() + 1];
    let state_mount = mount_of(state);
    assert_ne!(state_mount["readOnly"], true);
    assert_eq!(
        volume(&state_mount["name"])["hostPath"]["type"],
        "DirectoryOrCreate"
    );
    let root = &args[args.iter().position(|a| a == "--root").unwrap() + 1];
    assert_eq!(mount_of(root)["mountPath"].as_str(), Some(root.as_str()));

    // And this binary runs those exact arguments (the host tree swapped for the
    // real-nics hosts' tree, the state for a temporary file).
    let tmp = tempfile::tempdir().unwrap();
    let st = tmp.path().join("npd.json").display().to_string();
    let healthy_root = fixture("real-nics-procfs/root");
    let run_args: Vec<&str> = args
        .iter()
        .map(|a| match a.as_str() {
            a if a == root => healthy_root.as_str(),
            a if a == state => st.as_str(),
            a => a,
        })
        .collect();
    let o = rdmakit(&run_args);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(line(&o), "ok: 3 RDMA devices, 4/4 ports ACTIVE");
}
