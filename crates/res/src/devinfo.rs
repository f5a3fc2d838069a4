//! `rdmakit devinfo --from BUNDLE`: the device and port attributes a recorded
//! source holds, printed as rdma-core's `ibv_devinfo` prints them (the same
//! field names, order, tabs and value formats; `-v` adds what it can of the
//! verbose fields), and JSON with the keys of `rdmakit devinfo --json`.
//!
//! A bundle records what `rdmakit collect` reads: sysfs (`node_type`,
//! `fw_ver`, the GUIDs, `board_id`, each port's `state`, `phys_state`, `lid`,
//! `sm_lid`, `rate`, `cap_mask`, `link_layer`, the GID table) and, when rdma-core's
//! libibverbs answered on the recorded host, the limits `max_qp`, `max_cq`,
//! `max_mr` and `max_pd`. What `ibv_query_device` and `ibv_query_port` alone
//! answer (`vendor_id`, `vendor_part_id`, `hw_ver`, `max_mtu`, `active_mtu`,
//! `port_lmc`, ...) is not in a bundle: those lines are left out, never
//! guessed, and [`Recorded::not_recorded`] names them per device.
//!
//! Pure: the caller collects the facts.

use std::fmt::Write as _;

use rdmakit_host::model::{Device, HostFacts, Port};
use rdmakit_host::netlink::DevLimits;
use rdmakit_types::{
    guid_str, phys_state_name, port_state_name, transport_name, Gid, Speed, Width,
};
use rdmakit_vocab::exit::Exit;
use serde_json::{json, Map, Value};

/// A recorded source's devices, rendered.
#[derive(Debug, Default)]
pub struct Recorded {
    /// ibv_devinfo's text ("No IB devices found" when the source has none).
    pub text: String,
    /// `{"devices": [...]}`; each device lists its `not_recorded` fields.
    pub json: Value,
    /// Per device, `ibv_devinfo` fields the source does not hold, as one line
    /// for stderr: `mlx5_0: vendor_id, ... (ibv_query_device); ...`.
    pub not_recorded: Vec<String>,
    /// What could not be read at all (the device list), for stderr.
    pub missing: Vec<String>,
}

impl Recorded {
    /// Every field asked for was in the source.
    pub fn complete(&self) -> bool {
        self.not_recorded.is_empty() && self.missing.is_empty()
    }

    /// The exit status: [`Exit::Ok`], or [`Exit::Incomplete`] when a field
    /// asked for was not in the source.
    pub fn exit(&self) -> Exit {
        match self.complete() {
            true => Exit::Ok,
            false => Exit::Incomplete,
        }
    }

    /// What goes to stderr: what could not be read, then per device the
    /// fields the source (called `label`) did not record and why, each line
    /// after `rdmakit: `.
    pub fn stderr(&self, label: &str) -> String {
        let not_recorded = self.not_recorded.iter().map(|n| {
            format!(
                "{n}: not recorded in the {label} (a bundle holds sysfs and, when rdma-core \
                 answered, max_qp, max_cq, max_mr and max_pd; run `rdmakit devinfo` on the \
                 host for the rest)"
            )
        });
        let lines = self.missing.iter().cloned().chain(not_recorded);
        lines.map(|l| format!("rdmakit: {l}\n")).collect()
    }

    /// What goes to stdout: ibv_devinfo's text, or the pretty-printed JSON.
    pub fn stdout(&self, as_json: bool) -> String {
        match as_json {
            true => serde_json::to_string_pretty(&self.json).unwrap_or_default() + "\n",
            false => self.text.clone(),
        }
    }
}

/// Device fields `ibv_query_device` answers and a bundle never holds, in
/// ibv_devinfo's order (the verbose ones after `phys_port_cnt`).
const DEVICE_UNRECORDED: &[&str] = &["vendor_id", "vendor_part_id", "hw_ver"];
const DEVICE_UNRECORDED_VERBOSE: &[&str] = &[
    "max_mr_size",
    "page_size_cap",
    "max_qp_wr",
    "device_cap_flags",
    "max_sge",
    "max_sge_rd",
    "max_cqe",
    "max_qp_rd_atom",
    "max_res_rd_atom",
    "max_qp_init_rd_atom",
    "atomic_cap",
    "max_mw",
    "max_mcast_grp",
    "max_ah",
    "max_srq",
    "max_pkeys",
    "local_ca_ack_delay",
    "num_comp_vectors",
];
/// Port fields only `ibv_query_port` answers.
const PORT_UNRECORDED: &[&str] = &["max_mtu", "active_mtu", "port_lmc"];
const PORT_UNRECORDED_VERBOSE: &[&str] = &[
    "max_msg_sz",
    "port_cap_flags2",
    "max_vl_num",
    "bad_pkey_cntr",
    "qkey_viol_cntr",
    "sm_sl",
    "pkey_tbl_len",
    "subnet_timeout",
    "init_type_reply",
];

/// The devices of `facts` (recorded by `label`) as `rdmakit devinfo [-d DEV]
/// [-i PORT] [-v]` prints them.
///
/// # Errors
/// `dev` names no recorded device, or `port` is not on it — the messages
/// `rdmakit devinfo` gives on a live host.
pub fn recorded(
    facts: &HostFacts,
    label: &str,
    dev: Option<&str>,
    port: Option<u8>,
    verbose: bool,
) -> Result<Recorded, String> {
    let mut out = Recorded::default();
    if let Err(e) = &facts.kernel.ib_class {
        if e.0 != 2 {
            out.missing.push(format!(
                "{label}: /sys/class/infiniband: {}: the device list was not read",
                e.name()
            ));
        }
    }
    let names: Vec<&str> = facts.devices.iter().map(|d| d.name.as_str()).collect();
    let devices: Vec<&Device> = match dev {
        Some(d) => match facts.devices.iter().find(|x| x.name == d) {
            Some(x) => vec![x],
            None => {
                return Err(format!(
                    "IB device '{d}' wasn't found in the {label} (devices: {})",
                    names.join(", ")
                ))
            }
        },
        None => facts.devices.iter().collect(),
    };
    if devices.is_empty() {
        out.text = "No IB devices found\n".into();
        out.json = json!({ "devices": [] });
        return Ok(out);
    }
    let mut list = Vec::new();
    for d in devices {
        let ports: Vec<&Port> = d
            .ports
            .iter()
            .filter(|p| port.is_none_or(|want| u32::from(want) == p.num))
            .collect();
        if let (Some(p), true) = (port, ports.is_empty()) {
            return Err(format!(
                "{} has no port {p} (phys_port_cnt {})",
                d.name,
                d.ports.len()
            ));
        }
        let limits = facts
            .netlink
            .devices
            .iter()
            .find(|x| x.name == d.name)
            .and_then(|x| x.limits.as_ref().ok().copied());
        let r = device(d, &ports, limits, verbose);
        out.text.push_str(&r.text);
        if !r.not_recorded.is_empty() {
            out.not_recorded
                .push(format!("{}: {}", d.name, r.not_recorded.join("; ")));
        }
        list.push(r.json);
    }
    out.json = json!({ "devices": list });
    Ok(out)
}

/// One device's text, JSON and the fields it lacks.
struct One {
    text: String,
    json: Value,
    not_recorded: Vec<String>,
}

/// The fields a device lacks: the device's, then its ports' (each once).
struct Gaps {
    device: Vec<String>,
    port: Vec<String>,
}

impl Gaps {
    /// `vendor_id, ... (ibv_query_device)` and `max_mtu, ... (ibv_query_port)`.
    fn lines(mut self) -> Vec<String> {
        let mut seen = std::collections::HashSet::new();
        self.port.retain(|f| seen.insert(f.clone()));
        let mut out = Vec::new();
        if !self.device.is_empty() {
            out.push(format!("{} (ibv_query_device)", self.device.join(", ")));
        }
        if !self.port.is_empty() {
            out.push(format!("{} (ibv_query_port)", self.port.join(", ")));
        }
        out
    }
}

fn device(d: &Device, ports: &[&Port], limits: Option<DevLimits>, verbose: bool) -> One {
    let mut s = String::new();
    let mut j = Map::new();
    let mut gaps = Gaps {
        device: Vec::new(),
        port: Vec::new(),
    };
    let mut put = |k: &str, v: Value| {
        j.insert(k.to_string(), v);
    };
    // `write!` to a String cannot fail; results are ignored on purpose.
    let _ = writeln!(s, "hca_id:\t{}", d.name);
    put("hca_id", json!(d.name));
    match &d.node_type.value {
        Some(t) => {
            let transport = transport_of(t.code);
            let _ = writeln!(
                s,
                "\ttransport:\t\t\t{} ({transport})",
                transport_str(transport)
            );
            put("transport", json!(transport_str(transport)));
            put("transport_type", json!(transport));
        }
        None => gaps.device.push("transport".into()),
    }
    // sysfs fw_ver is the driver's string; a driver without one (rxe) leaves
    // it empty while ibv_query_device still answers ("0.0.0"): not recorded.
    match d.fw_ver.value.as_deref().filter(|fw| !fw.is_empty()) {
        Some(fw) => {
            let _ = writeln!(s, "\tfw_ver:\t\t\t\t{fw}");
            put("fw_ver", json!(fw));
        }
        None => gaps.device.push("fw_ver".into()),
    }
    for (key, attr, tabs) in [
        ("node_guid", &d.node_guid, "\t\t\t"),
        ("sys_image_guid", &d.sys_image_guid, "\t\t\t"),
    ] {
        match attr.value {
            Some(g) => {
                let _ = writeln!(s, "\t{key}:{tabs}{}", guid_str(g));
                put(key, json!(guid_str(g)));
            }
            None => gaps.device.push(key.into()),
        }
    }
    gaps.device
        .extend(DEVICE_UNRECORDED.iter().map(|f| f.to_string()));
    if let Some(b) = d.board_id.value.as_deref().filter(|b| !b.is_empty()) {
        let _ = writeln!(s, "\tboard_id:\t\t\t{b}");
        put("board_id", json!(b));
    }
    let _ = writeln!(s, "\tphys_port_cnt:\t\t\t{}", d.ports.len());
    put("phys_port_cnt", json!(d.ports.len()));
    if verbose {
        match limits {
            Some(l) => {
                // ibv_devinfo's order: max_qp ... max_cq, max_mr, max_pd.
                let _ = writeln!(s, "\tmax_qp:\t\t\t\t{}", l.max_qp);
                let _ = writeln!(s, "\tmax_cq:\t\t\t\t{}", l.max_cq);
                let _ = writeln!(s, "\tmax_mr:\t\t\t\t{}", l.max_mr);
                let _ = writeln!(s, "\tmax_pd:\t\t\t\t{}", l.max_pd);
                put("max_qp", json!(l.max_qp));
                put("max_cq", json!(l.max_cq));
                put("max_mr", json!(l.max_mr));
                put("max_pd", json!(l.max_pd));
            }
            None => gaps.device.extend(
                ["max_qp", "max_cq", "max_mr", "max_pd"]
                    .iter()
                    .map(|f| f.to_string()),
            ),
        }
        gaps.device
            .extend(DEVICE_UNRECORDED_VERBOSE.iter().map(|f| f.to_string()));
    }
    let mut pj = Vec::new();
    for p in ports {
        pj.push(port_lines(&mut s, p, verbose, &mut gaps.port));
    }
    s.push('\n');
    j.insert("ports".into(), Value::Array(pj));
    let not_recorded = gaps.lines();
    j.insert(
        "not_recorded".into(),
        json!(not_recorded_fields(&not_recorded)),
    );
    One {
        text: s,
        json: Value::Object(j),
        not_recorded,
    }
}

/// The field names of the stderr lines, flat, for JSON.
fn not_recorded_fields(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .filter_map(|l| l.split(" (").next())
        .flat_map(|l| l.split(", ").map(str::to_string))
        .collect()
}

fn port_lines(s: &mut String, p: &Port, verbose: bool, gaps: &mut Vec<String>) -> Value {
    let mut j = Map::new();
    let mut put = |k: &str, v: Value| {
        j.insert(k.to_string(), v);
    };
    let _ = writeln!(s, "\t\tport:\t{}", p.num);
    put("port", json!(p.num));
    match &p.state.value {
        Some(st) => {
            let _ = writeln!(
                s,
                "\t\t\tstate:\t\t\t{} ({})",
                port_state_str(st.code),
                st.code
            );
            put("state", json!(port_state_str(st.code)));
            put("state_value", json!(st.code));
        }
        None => gaps.push("state".into()),
    }
    gaps.extend(PORT_UNRECORDED[..2].iter().map(|f| f.to_string()));
    for (key, attr) in [("sm_lid", &p.sm_lid), ("port_lid", &p.lid)] {
        match attr.value {
            Some(v) => {
                let tabs = if key == "sm_lid" { "\t\t\t" } else { "\t\t" };
                let _ = writeln!(s, "\t\t\t{key}:{tabs}{v}");
                put(key, json!(v));
            }
            None => gaps.push(key.into()),
        }
    }
    gaps.push(PORT_UNRECORDED[2].into());
    match p.link_layer_name() {
        Some(l) => {
            let _ = writeln!(s, "\t\t\tlink_layer:\t\t{l}");
            put("link_layer", json!(l));
        }
        None => gaps.push("link_layer".into()),
    }
    if !verbose {
        return Value::Object(j);
    }
    gaps.extend(PORT_UNRECORDED_VERBOSE.iter().map(|f| f.to_string()));
    match p.cap_mask.value {
        Some(c) => {
            let _ = writeln!(s, "\t\t\tport_cap_flags:\t\t0x{c:08x}");
            put("port_cap_flags", json!(c));
        }
        None => gaps.push("port_cap_flags".into()),
    }
    let _ = writeln!(s, "\t\t\tgid_tbl_len:\t\t{}", p.gid_slots);
    put("gid_tbl_len", json!(p.gid_slots));
    let rate = p.rate.value.as_ref();
    match rate.and_then(|r| r.width).and_then(Width::from_lanes) {
        Some(w) => {
            let (lanes, code) = (w.lanes(), w.code());
            let _ = writeln!(s, "\t\t\tactive_width:\t\t{lanes}X ({code})");
            put("active_width", json!(format!("{lanes}X")));
            put("active_width_value", json!(code));
        }
        None => gaps.push("active_width".into()),
    }
    match rate.and_then(|r| r.speed.as_deref()).and_then(active_speed) {
        Some(sp) => {
            let (text, code) = (sp.devinfo(), sp.code());
            let _ = writeln!(s, "\t\t\tactive_speed:\t\t{text} ({code})");
            put("active_speed", json!(text));
            put("active_speed_value", json!(code));
        }
        None => gaps.push("active_speed".into()),
    }
    match &p.phys_state.value {
        Some(ps) => {
            let _ = writeln!(
                s,
                "\t\t\tphys_state:\t\t{} ({})",
                phys_state_str(ps.code),
                ps.code
            );
            put("phys_state", json!(phys_state_str(ps.code)));
            put("phys_state_value", json!(ps.code));
        }
        None => gaps.push("phys_state".into()),
    }
    let ethernet = p.is_roce();
    let mut gids = Vec::new();
    for g in &p.gids {
        if g.gid.is_unspecified() {
            continue;
        }
        let text = if ethernet {
            g.gid.to_string()
        } else {
            Gid(g.gid.octets()).to_string()
        };
        let kind = g.gid_type.known().filter(|_| ethernet).map(|t| t.name());
        let suffix = kind.map(|k| format!(", {k}")).unwrap_or_default();
        let _ = writeln!(s, "\t\t\tGID[{:3}]:\t\t{text}{suffix}", g.index);
        let mut o = json!({ "index": g.index, "gid": text });
        if let (Some(k), Value::Object(m)) = (kind, &mut o) {
            m.insert("type".into(), json!(k));
        }
        gids.push(o);
    }
    put("gids", Value::Array(gids));
    Value::Object(j)
}

/// libibverbs' transport for a node type (`ibv_node_type` → `ibv_transport_type`).
fn transport_of(node_type: u8) -> u32 {
    match node_type {
        1..=3 => 0,
        4 => 1,
        5 => 2,
        6 => 3,
        _ => 4,
    }
}

fn transport_str(t: u32) -> &'static str {
    transport_name(t).unwrap_or("unspecified")
}

fn port_state_str(code: u8) -> &'static str {
    port_state_name(code).unwrap_or("invalid state")
}

fn phys_state_str(code: u8) -> &'static str {
    phys_state_name(code).unwrap_or("invalid physical state")
}

/// The `active_speed` of a speed name (sysfs `rate`'s `EDR`): one that fits its
/// byte (XDR's code is `active_speed_ex`'s alone).
fn active_speed(name: &str) -> Option<Speed> {
    Speed::from_name(name).filter(|s| s.code() <= 0xff)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_names_map_to_ibv_devinfo_codes() {
        for (name, code, text) in [
            ("SDR", 1, "2.5 Gbps"),
            ("QDR", 4, "10.0 Gbps"),
            ("FDR10", 8, "10.0 Gbps"),
            ("EDR", 32, "25.0 Gbps"),
            ("NDR", 128, "100.0 Gbps"),
        ] {
            let sp = active_speed(name).unwrap();
            assert_eq!((sp.code(), sp.devinfo()), (code, text));
        }
        assert_eq!(active_speed("XDR"), None);
        assert_eq!(active_speed("XYZ"), None);
        assert_eq!(transport_of(1), 0);
        assert_eq!(transport_of(4), 1);
        let gid: std::net::Ipv6Addr = "fe80::2:c903:10:1".parse().unwrap();
        assert_eq!(
            Gid(gid.octets()).to_string(),
            "fe80:0000:0000:0000:0002:c903:0010:0001"
        );
    }
}
