//! ibv_devinfo's output for a device: line-compatible with rdma-core's
//! `ibv_devinfo` (same field names, order, tabs and value formats; verbose
//! adds every limit, the decoded capability flags and the GID table), and
//! JSON with the same fields. `rdmakit devinfo` queries and prints; this
//! module only renders, so tests read it as strings.

use std::fmt::Write as _;

use serde_json::{json, Value};

use crate::{guid_str, DeviceAttr, GidType, LinkLayer, PortAttr, Speed};

/// What one device reports: the inputs of both renderings.
#[derive(Debug)]
pub struct DevInfo {
    /// The device name (`ibv_get_device_name`).
    pub name: String,
    /// `ibv_query_device`'s answer.
    pub attr: DeviceAttr,
    /// (port number, attributes).
    pub ports: Vec<(u8, PortAttr)>,
    /// The soft NIC's UDP offloads in use (`"gso gro"`, ..., `"none"`);
    /// None for other devices. Only in the verbose JSON: the text keeps
    /// ibv_devinfo's keys.
    pub soft_offloads: Option<&'static str>,
    /// The soft NIC's transport to same-host peers (`"auto"`, `"udp"`;
    /// `RDMAKIT_SOFT_TRANSPORT`); None for other devices. Only in the
    /// verbose JSON, as the offloads: the text keeps ibv_devinfo's keys.
    pub soft_transport: Option<&'static str>,
}

impl DevInfo {
    /// Queries the open device `ctx`: its attributes and its ports (only
    /// `port` when given).
    ///
    /// # Errors
    /// The query verb that failed, or `port` not on the device.
    pub fn query(ctx: &crate::Context, port: Option<u8>) -> Result<DevInfo, String> {
        let name = ctx.name();
        let attr = ctx
            .query_device()
            .map_err(|e| format!("ibv_query_device: {e}"))?;
        let mut ports = Vec::new();
        for p in 1..=attr.phys_port_cnt {
            if port.is_some_and(|want| want != p) {
                continue;
            }
            let a = ctx
                .query_port(p)
                .map_err(|e| format!("ibv_query_port: {e}"))?;
            ports.push((p, a));
        }
        if let Some(p) = port {
            if ports.is_empty() {
                return Err(format!(
                    "{name} has no port {p} (phys_port_cnt {})",
                    attr.phys_port_cnt
                ));
            }
        }
        Ok(DevInfo {
            name,
            attr,
            ports,
            soft_offloads: ctx.soft().map(|d| d.offloads().describe()),
            soft_transport: ctx.soft().map(|d| d.soft_transport().as_str()),
        })
    }
}

/// The devices `rdmakit devinfo` shows: every device `provider` lists, or
/// `dev` alone, each queried ([`DevInfo::query`]; only `port` when given).
///
/// # Errors
/// The devices cannot be listed, `dev` is not one of them, a device does not
/// open or a query fails; each message names which.
pub fn query_all(
    provider: crate::ProviderChoice,
    dev: Option<&str>,
    port: Option<u8>,
) -> Result<Vec<DevInfo>, String> {
    let said = |e: &crate::Error| rdmakit_vocab::errno::said_once(e);
    let names =
        crate::devices(provider).map_err(|e| format!("listing RDMA devices: {}", said(&e)))?;
    let names = match dev {
        Some(d) if !names.iter().any(|n| n == d) => {
            return Err(format!(
                "IB device '{d}' wasn't found (devices: {})",
                names.join(", ")
            ))
        }
        Some(d) => vec![d.to_string()],
        None => names,
    };
    names
        .iter()
        .map(|n| {
            let ctx = crate::open_device(provider, n)
                .map_err(|e| format!("opening {n}: {}", said(&e)))?;
            DevInfo::query(&ctx, port)
        })
        .collect()
}

/// What `rdmakit devinfo` prints of `infos`: ibv_devinfo's text of each
/// ("No IB devices found" when there are none), or with `json` every device
/// as `{"devices": [...]}` ([`json_list`]; `{"devices":[]}` when none).
pub fn output(infos: &[DevInfo], verbose: bool, json: bool) -> String {
    match (infos.is_empty(), json) {
        (true, true) => format!("{}\n", json!({ "devices": [] })),
        (true, false) => "No IB devices found\n".to_string(),
        (false, true) => json_list(infos, verbose) + "\n",
        (false, false) => infos.iter().map(|i| text(i, verbose)).collect(),
    }
}

/// `--json`: every device as `{"devices": [...]}`, pretty-printed.
pub fn json_list(infos: &[DevInfo], verbose: bool) -> String {
    let devs: Vec<Value> = infos.iter().map(|i| to_json(i, verbose)).collect();
    serde_json::to_string_pretty(&json!({ "devices": devs })).unwrap_or_default()
}

fn transport_str(t: u32) -> &'static str {
    rdmakit_types::transport_name(t).unwrap_or("invalid transport")
}

fn atomic_str(a: u32) -> &'static str {
    match a {
        0 => "ATOMIC_NONE",
        1 => "ATOMIC_HCA",
        2 => "ATOMIC_GLOB",
        _ => "invalid atomic capability",
    }
}

fn mtu_str(m: crate::Mtu) -> String {
    m.bytes().to_string()
}

/// ibv_devinfo's width: its lanes, or "invalid width".
fn width_str(pa: &PortAttr) -> String {
    pa.width()
        .map_or_else(|| "invalid width".into(), |w| w.lanes().to_string())
}

/// ibv_devinfo's speed: "25.0 Gbps", or "invalid speed".
fn speed_str(pa: &PortAttr) -> &'static str {
    pa.speed().map_or("invalid speed", Speed::devinfo)
}

fn phys_state_str(s: u8) -> &'static str {
    rdmakit_types::phys_state_name(s).unwrap_or("invalid physical state")
}

fn vl_str(v: u8) -> &'static str {
    match v {
        1 => "1",
        2 => "2",
        3 => "4",
        4 => "8",
        5 => "15",
        _ => "invalid value",
    }
}

/// `IBV_DEVICE_*` names in `ibv_devinfo`'s print order.
const CAP_NAMES: &[(u32, &str)] = &[
    (0, "RESIZE_MAX_WR"),
    (1, "BAD_PKEY_CNTR"),
    (2, "BAD_QKEY_CNTR"),
    (3, "RAW_MULTI"),
    (4, "AUTO_PATH_MIG"),
    (5, "CHANGE_PHY_PORT"),
    (6, "UD_AV_PORT_ENFORCE"),
    (7, "CURR_QP_STATE_MOD"),
    (8, "SHUTDOWN_PORT"),
    (9, "INIT_TYPE"),
    (10, "PORT_ACTIVE_EVENT"),
    (11, "SYS_IMAGE_GUID"),
    (12, "RC_RNR_NAK_GEN"),
    (13, "SRQ_RESIZE"),
    (14, "N_NOTIFY_CQ"),
    (17, "MEM_WINDOW"),
    (18, "UD_IP_CSUM"),
    (20, "XRC"),
    (21, "MEM_MGT_EXTENSIONS"),
    (23, "MEM_WINDOW_TYPE_2A"),
    (24, "MEM_WINDOW_TYPE_2B"),
    (25, "RC_IP_CSUM"),
    (26, "RAW_IP_CSUM"),
    (29, "MANAGED_FLOW_STEERING"),
];

/// The capability names set in `flags`, and the bits no name covers.
pub fn cap_names(flags: u64) -> (Vec<&'static str>, u64) {
    let mut rest = flags;
    let mut names = Vec::new();
    for &(bit, name) in CAP_NAMES {
        if flags & (1 << bit) != 0 {
            names.push(name);
            rest &= !(1u64 << bit);
        }
    }
    (names, rest)
}

/// The text `ibv_devinfo [-v]` prints for one device.
pub fn text(i: &DevInfo, verbose: bool) -> String {
    let a = &i.attr;
    let mut s = String::new();
    // `write!` to a String cannot fail; results are ignored on purpose.
    let _ = writeln!(s, "hca_id:\t{}", i.name);
    let _ = writeln!(
        s,
        "\ttransport:\t\t\t{} ({})",
        transport_str(a.transport),
        a.transport
    );
    if !a.fw_ver.is_empty() {
        let _ = writeln!(s, "\tfw_ver:\t\t\t\t{}", a.fw_ver);
    }
    let _ = writeln!(s, "\tnode_guid:\t\t\t{}", guid_str(a.node_guid));
    let _ = writeln!(s, "\tsys_image_guid:\t\t\t{}", guid_str(a.sys_image_guid));
    let _ = writeln!(s, "\tvendor_id:\t\t\t0x{:04x}", a.vendor_id);
    let _ = writeln!(s, "\tvendor_part_id:\t\t\t{}", a.vendor_part_id);
    let _ = writeln!(s, "\thw_ver:\t\t\t\t0x{:X}", a.hw_ver);
    let _ = writeln!(s, "\tphys_port_cnt:\t\t\t{}", a.phys_port_cnt);
    if verbose {
        verbose_device(&mut s, a);
    }
    for (p, pa) in &i.ports {
        port_text(&mut s, *p, pa, verbose);
    }
    s.push('\n');
    s
}

fn verbose_device(s: &mut String, a: &DeviceAttr) {
    let _ = writeln!(s, "\tmax_mr_size:\t\t\t0x{:x}", a.max_mr_size);
    let _ = writeln!(s, "\tpage_size_cap:\t\t\t0x{:x}", a.page_size_cap);
    let _ = writeln!(s, "\tmax_qp:\t\t\t\t{}", a.max_qp);
    let _ = writeln!(s, "\tmax_qp_wr:\t\t\t{}", a.max_qp_wr);
    let _ = writeln!(s, "\tdevice_cap_flags:\t\t0x{:08x}", a.device_cap_flags);
    let (names, rest) = cap_names(a.device_cap_flags);
    for n in names {
        let _ = writeln!(s, "\t\t\t\t\t{n}");
    }
    if rest != 0 {
        let _ = writeln!(s, "\t\t\t\t\tUnknown flags: 0x{rest:X}");
    }
    let _ = writeln!(s, "\tmax_sge:\t\t\t{}", a.max_sge);
    let _ = writeln!(s, "\tmax_sge_rd:\t\t\t{}", a.max_sge_rd);
    let _ = writeln!(s, "\tmax_cq:\t\t\t\t{}", a.max_cq);
    let _ = writeln!(s, "\tmax_cqe:\t\t\t{}", a.max_cqe);
    let _ = writeln!(s, "\tmax_mr:\t\t\t\t{}", a.max_mr);
    let _ = writeln!(s, "\tmax_pd:\t\t\t\t{}", a.max_pd);
    let _ = writeln!(s, "\tmax_qp_rd_atom:\t\t\t{}", a.max_qp_rd_atom);
    let _ = writeln!(s, "\tmax_ee_rd_atom:\t\t\t{}", a.max_ee_rd_atom);
    let _ = writeln!(s, "\tmax_res_rd_atom:\t\t{}", a.max_res_rd_atom);
    let _ = writeln!(s, "\tmax_qp_init_rd_atom:\t\t{}", a.max_qp_init_rd_atom);
    let _ = writeln!(s, "\tmax_ee_init_rd_atom:\t\t{}", a.max_ee_init_rd_atom);
    let _ = writeln!(
        s,
        "\tatomic_cap:\t\t\t{} ({})",
        atomic_str(a.atomic_cap),
        a.atomic_cap
    );
    let _ = writeln!(s, "\tmax_ee:\t\t\t\t{}", a.max_ee);
    let _ = writeln!(s, "\tmax_rdd:\t\t\t{}", a.max_rdd);
    let _ = writeln!(s, "\tmax_mw:\t\t\t\t{}", a.max_mw);
    let _ = writeln!(s, "\tmax_raw_ipv6_qp:\t\t{}", a.max_raw_ipv6_qp);
    let _ = writeln!(s, "\tmax_raw_ethy_qp:\t\t{}", a.max_raw_ethy_qp);
    let _ = writeln!(s, "\tmax_mcast_grp:\t\t\t{}", a.max_mcast_grp);
    let _ = writeln!(s, "\tmax_mcast_qp_attach:\t\t{}", a.max_mcast_qp_attach);
    let _ = writeln!(
        s,
        "\tmax_total_mcast_qp_attach:\t{}",
        a.max_total_mcast_qp_attach
    );
    let _ = writeln!(s, "\tmax_ah:\t\t\t\t{}", a.max_ah);
    let _ = writeln!(s, "\tmax_fmr:\t\t\t{}", a.max_fmr);
    if a.max_fmr > 0 {
        let _ = writeln!(s, "\tmax_map_per_fmr:\t\t{}", a.max_map_per_fmr);
    }
    let _ = writeln!(s, "\tmax_srq:\t\t\t{}", a.max_srq);
    if a.max_srq > 0 {
        let _ = writeln!(s, "\tmax_srq_wr:\t\t\t{}", a.max_srq_wr);
        let _ = writeln!(s, "\tmax_srq_sge:\t\t\t{}", a.max_srq_sge);
    }
    let _ = writeln!(s, "\tmax_pkeys:\t\t\t{}", a.max_pkeys);
    let _ = writeln!(s, "\tlocal_ca_ack_delay:\t\t{}", a.local_ca_ack_delay);
    // ibv_query_device_ex: the verbs API has no extended attributes yet, and
    // no provider supports ODP, timestamps, TSO, RSS, pacing or tag matching,
    // so these print what ibv_devinfo prints for a device without them.
    s.push_str("\tgeneral_odp_caps:\n");
    for t in ["rc", "uc", "ud", "xrc"] {
        let _ = writeln!(s, "\t{t}_odp_caps:\n\t\t\t\t\tNO SUPPORT");
    }
    s.push_str("\tcompletion_timestamp_mask not supported\n");
    s.push_str("\tcore clock not supported\n");
    let _ = writeln!(s, "\tdevice_cap_flags_ex:\t\t0x{:X}", a.device_cap_flags);
    s.push_str("\ttso_caps:\n\t\tmax_tso:\t\t\t0\n");
    s.push_str("\trss_caps:\n");
    s.push_str("\t\tmax_rwq_indirection_tables:\t\t\t0\n");
    s.push_str("\t\tmax_rwq_indirection_table_size:\t\t\t0\n");
    s.push_str("\t\trx_hash_function:\t\t\t\t0x0\n");
    s.push_str("\t\trx_hash_fields_mask:\t\t\t\t0x0\n");
    s.push_str("\tmax_wq_type_rq:\t\t\t0\n");
    s.push_str("\tpacket_pacing_caps:\n");
    s.push_str("\t\tqp_rate_limit_min:\t0kbps\n");
    s.push_str("\t\tqp_rate_limit_max:\t0kbps\n");
    s.push_str("\ttag matching not supported\n");
    let _ = writeln!(s, "\tnum_comp_vectors:\t\t{}", a.num_comp_vectors);
}

fn port_text(s: &mut String, p: u8, pa: &PortAttr, verbose: bool) {
    let _ = writeln!(s, "\t\tport:\t{p}");
    let _ = writeln!(
        s,
        "\t\t\tstate:\t\t\t{} ({})",
        pa.state.name(),
        pa.state as u8
    );
    let _ = writeln!(
        s,
        "\t\t\tmax_mtu:\t\t{} ({})",
        mtu_str(pa.max_mtu),
        pa.max_mtu as u8
    );
    let _ = writeln!(
        s,
        "\t\t\tactive_mtu:\t\t{} ({})",
        mtu_str(pa.active_mtu),
        pa.active_mtu as u8
    );
    let _ = writeln!(s, "\t\t\tsm_lid:\t\t\t{}", pa.sm_lid);
    let _ = writeln!(s, "\t\t\tport_lid:\t\t{}", pa.lid);
    let _ = writeln!(s, "\t\t\tport_lmc:\t\t0x{:02x}", pa.lmc);
    let _ = writeln!(s, "\t\t\tlink_layer:\t\t{}", pa.link_layer.name());
    if !verbose {
        return;
    }
    let _ = writeln!(s, "\t\t\tmax_msg_sz:\t\t0x{:x}", pa.max_msg_sz);
    let _ = writeln!(s, "\t\t\tport_cap_flags:\t\t0x{:08x}", pa.port_cap_flags);
    let _ = writeln!(s, "\t\t\tport_cap_flags2:\t0x{:04x}", 0);
    let _ = writeln!(
        s,
        "\t\t\tmax_vl_num:\t\t{} ({})",
        vl_str(pa.max_vl_num),
        pa.max_vl_num
    );
    let _ = writeln!(s, "\t\t\tbad_pkey_cntr:\t\t0x{:x}", pa.bad_pkey_cntr);
    let _ = writeln!(s, "\t\t\tqkey_viol_cntr:\t\t0x{:x}", pa.qkey_viol_cntr);
    let _ = writeln!(s, "\t\t\tsm_sl:\t\t\t{}", pa.sm_sl);
    let _ = writeln!(s, "\t\t\tpkey_tbl_len:\t\t{}", pa.pkey_tbl_len);
    let _ = writeln!(s, "\t\t\tgid_tbl_len:\t\t{}", pa.gid_tbl_len);
    let _ = writeln!(s, "\t\t\tsubnet_timeout:\t\t{}", pa.subnet_timeout);
    let _ = writeln!(s, "\t\t\tinit_type_reply:\t{}", pa.init_type_reply);
    let _ = writeln!(
        s,
        "\t\t\tactive_width:\t\t{}X ({})",
        width_str(pa),
        pa.active_width
    );
    let _ = writeln!(
        s,
        "\t\t\tactive_speed:\t\t{} ({})",
        speed_str(pa),
        pa.active_speed
    );
    let _ = writeln!(
        s,
        "\t\t\tphys_state:\t\t{} ({})",
        phys_state_str(pa.phys_state),
        pa.phys_state
    );
    for (idx, g) in pa.gids.iter().enumerate() {
        if g.gid.is_zero() {
            continue;
        }
        let _ = writeln!(
            s,
            "\t\t\tGID[{idx:3}]:\t\t{}{}",
            gid_text(g.gid, pa.link_layer),
            gid_type_suffix(g.gid_type, pa.link_layer)
        );
    }
}

fn gid_text(g: crate::Gid, ll: LinkLayer) -> String {
    match ll {
        // ibv_devinfo prints RoCE GIDs with inet_ntop, IB GIDs in groups.
        LinkLayer::Ethernet => g.to_ipv6().to_string(),
        LinkLayer::InfiniBand => g.to_string(),
    }
}

fn gid_type_suffix(t: GidType, ll: LinkLayer) -> String {
    match ll {
        LinkLayer::InfiniBand => String::new(),
        LinkLayer::Ethernet => format!(", {}", t.name()),
    }
}

/// The JSON of one device: the text's fields, values as numbers where
/// ibv_devinfo prints a number, strings where it prints a decoded name.
pub fn to_json(i: &DevInfo, verbose: bool) -> Value {
    let a = &i.attr;
    let mut d = serde_json::Map::new();
    let mut put = |k: &str, v: Value| {
        d.insert(k.to_string(), v);
    };
    put("hca_id", json!(i.name));
    put("transport", json!(transport_str(a.transport)));
    put("transport_type", json!(a.transport));
    put("fw_ver", json!(a.fw_ver));
    put("node_guid", json!(guid_str(a.node_guid)));
    put("sys_image_guid", json!(guid_str(a.sys_image_guid)));
    put("vendor_id", json!(a.vendor_id));
    put("vendor_part_id", json!(a.vendor_part_id));
    put("hw_ver", json!(a.hw_ver));
    put("phys_port_cnt", json!(a.phys_port_cnt));
    if verbose {
        put("max_mr_size", json!(a.max_mr_size));
        put("page_size_cap", json!(a.page_size_cap));
        put("max_qp", json!(a.max_qp));
        put("max_qp_wr", json!(a.max_qp_wr));
        put("device_cap_flags", json!(a.device_cap_flags));
        let (names, rest) = cap_names(a.device_cap_flags);
        put("device_cap_flags_names", json!(names));
        put("device_cap_flags_unknown", json!(rest));
        put("max_sge", json!(a.max_sge));
        put("max_sge_rd", json!(a.max_sge_rd));
        put("max_cq", json!(a.max_cq));
        put("max_cqe", json!(a.max_cqe));
        put("max_mr", json!(a.max_mr));
        put("max_pd", json!(a.max_pd));
        put("max_qp_rd_atom", json!(a.max_qp_rd_atom));
        put("max_ee_rd_atom", json!(a.max_ee_rd_atom));
        put("max_res_rd_atom", json!(a.max_res_rd_atom));
        put("max_qp_init_rd_atom", json!(a.max_qp_init_rd_atom));
        put("max_ee_init_rd_atom", json!(a.max_ee_init_rd_atom));
        put("atomic_cap", json!(atomic_str(a.atomic_cap)));
        put("atomic_cap_value", json!(a.atomic_cap));
        put("max_ee", json!(a.max_ee));
        put("max_rdd", json!(a.max_rdd));
        put("max_mw", json!(a.max_mw));
        put("max_raw_ipv6_qp", json!(a.max_raw_ipv6_qp));
        put("max_raw_ethy_qp", json!(a.max_raw_ethy_qp));
        put("max_mcast_grp", json!(a.max_mcast_grp));
        put("max_mcast_qp_attach", json!(a.max_mcast_qp_attach));
        put(
            "max_total_mcast_qp_attach",
            json!(a.max_total_mcast_qp_attach),
        );
        put("max_ah", json!(a.max_ah));
        put("max_fmr", json!(a.max_fmr));
        put("max_map_per_fmr", json!(a.max_map_per_fmr));
        put("max_srq", json!(a.max_srq));
        put("max_srq_wr", json!(a.max_srq_wr));
        put("max_srq_sge", json!(a.max_srq_sge));
        put("max_pkeys", json!(a.max_pkeys));
        put("local_ca_ack_delay", json!(a.local_ca_ack_delay));
        put("device_cap_flags_ex", json!(a.device_cap_flags));
        put("max_inline", json!(a.max_inline));
        put("num_comp_vectors", json!(a.num_comp_vectors));
        if let Some(o) = i.soft_offloads {
            put("soft_udp_offloads", json!(o));
        }
        if let Some(t) = i.soft_transport {
            put("soft_transport", json!(t));
        }
    }
    let ports: Vec<Value> = i
        .ports
        .iter()
        .map(|(p, pa)| port_json(*p, pa, verbose))
        .collect();
    d.insert("ports".into(), Value::Array(ports));
    Value::Object(d)
}

fn port_json(p: u8, pa: &PortAttr, verbose: bool) -> Value {
    let mut v = json!({
        "port": p,
        "state": pa.state.name(),
        "state_value": pa.state as u8,
        "max_mtu": pa.max_mtu.bytes(),
        "max_mtu_value": pa.max_mtu as u8,
        "active_mtu": pa.active_mtu.bytes(),
        "active_mtu_value": pa.active_mtu as u8,
        "sm_lid": pa.sm_lid,
        "port_lid": pa.lid,
        "port_lmc": pa.lmc,
        "link_layer": pa.link_layer.name(),
    });
    if verbose {
        let gids: Vec<Value> = pa
            .gids
            .iter()
            .enumerate()
            .filter(|(_, g)| !g.gid.is_zero())
            .map(|(idx, g)| {
                json!({
                    "index": idx,
                    "gid": gid_text(g.gid, pa.link_layer),
                    "type": g.gid_type.name(),
                })
            })
            .collect();
        let extra = json!({
            "max_msg_sz": pa.max_msg_sz,
            "port_cap_flags": pa.port_cap_flags,
            "port_cap_flags2": 0,
            "max_vl_num": vl_str(pa.max_vl_num),
            "max_vl_num_value": pa.max_vl_num,
            "bad_pkey_cntr": pa.bad_pkey_cntr,
            "qkey_viol_cntr": pa.qkey_viol_cntr,
            "sm_sl": pa.sm_sl,
            "pkey_tbl_len": pa.pkey_tbl_len,
            "gid_tbl_len": pa.gid_tbl_len,
            "subnet_timeout": pa.subnet_timeout,
            "init_type_reply": pa.init_type_reply,
            "active_width": format!("{}X", width_str(pa)),
            "active_width_value": pa.active_width,
            "active_speed": speed_str(pa),
            "active_speed_value": pa.active_speed,
            "phys_state": phys_state_str(pa.phys_state),
            "phys_state_value": pa.phys_state,
            "gids": gids,
        });
        if let (Value::Object(m), Value::Object(e)) = (&mut v, extra) {
            m.extend(e);
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guid_and_caps() {
        assert_eq!(guid_str(0x5054_00ff_fe12_3456), "5054:00ff:fe12:3456");
        let (names, rest) = cap_names(0x01223c76);
        assert_eq!(names.len(), 12);
        assert_eq!(names[0], "BAD_PKEY_CNTR");
        assert_eq!(names[11], "MEM_WINDOW_TYPE_2B");
        assert_eq!(rest, 0);
        assert_eq!(cap_names(1 << 40).1, 1 << 40);
    }

    /// A soft device's attributes, rendered both ways: ibv_devinfo's first
    /// lines and keys, and JSON with the same values.
    #[test]
    fn soft_device_text_and_json_agree() {
        let dev = rdmakit_soft::Device::open(rdmakit_soft::DeviceConfig {
            shared_registry: false,
            ..rdmakit_soft::DeviceConfig::default()
        })
        .unwrap();
        let i = DevInfo {
            name: "soft0".into(),
            attr: dev.attr().clone(),
            ports: vec![(1, dev.port_attr(1).unwrap())],
            soft_offloads: Some(dev.offloads().describe()),
            soft_transport: Some(dev.soft_transport().as_str()),
        };
        let ctx = crate::Context::open_soft(rdmakit_soft::DeviceConfig {
            shared_registry: false,
            ..rdmakit_soft::DeviceConfig::default()
        })
        .unwrap();
        let q = DevInfo::query(&ctx, Some(1)).unwrap();
        assert_eq!((q.ports.len(), q.soft_offloads.is_some()), (1, true));
        assert_eq!(
            DevInfo::query(&ctx, Some(2)).unwrap_err(),
            format!("{} has no port 2 (phys_port_cnt 1)", q.name)
        );
        let list: Value = serde_json::from_str(&json_list(&[q], false)).unwrap();
        assert_eq!(list["devices"][0]["phys_port_cnt"], 1, "{list:#}");
        let t = text(&i, false);
        assert!(t.starts_with("hca_id:\tsoft0\n"), "{t}");
        assert!(t.contains("\t\tport:\t1\n"), "{t}");
        assert!(t.contains("link_layer:\t\tEthernet"), "{t}");
        let v = to_json(&i, true);
        assert_eq!(v["hca_id"], "soft0", "{v:#}");
        assert_eq!(v["node_guid"], guid_str(i.attr.node_guid), "{v:#}");
        assert!(v["soft_udp_offloads"].is_string(), "{v:#}");
        assert!(!text(&i, true).contains("soft_udp_offloads"));
        assert_eq!(v["soft_transport"], "auto", "{v:#}");
        assert!(!text(&i, true).contains("soft_transport"));
    }
}
