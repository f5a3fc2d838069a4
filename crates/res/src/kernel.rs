//! The kernel's tracked objects (RDMA netlink, `rdma resource`) as rows: the same
//! keys and values as `rdma -j resource show`, plus `owner-state` (alive / zombie /
//! dead / kernel / orphaned / unknown) so objects leaked by a dead process stand out.

use rdmakit_host::netlink::{self, names, Holder, Liveness, NetlinkFacts, ResKind};
use rdmakit_vocab::exit::Exit;
use serde_json::Value;

use crate::row::Row;

/// Owner fields (pid, comm, owner-state) the way `rdma` prints them, plus the state.
pub fn owner_fields(row: &mut Row, f: &NetlinkFacts, holder: &Holder) {
    let (state, comm) = f.owner_of(holder);
    match holder {
        Holder::Pid(p) => {
            row.num("pid", *p);
            if let Some(c) = &comm {
                row.text("comm", c);
            }
        }
        Holder::Kernel(k) => row.push("comm", Value::from(k.as_str()), Some(format!("[{k}]"))),
        Holder::Unknown => {}
    }
    if state != Liveness::Kernel {
        row.text("owner-state", state.name());
    } else {
        row.json_only("owner-state", Value::from(state.name()));
    }
}

fn link_prefix(dev: &str, port: Option<u32>) -> String {
    match port {
        Some(p) => format!("link {dev}/{p}"),
        None => format!("link {dev}/-"),
    }
}

/// One resource as `rdma resource show KIND` prints it.
pub fn resource_row(f: &NetlinkFacts, r: &netlink::Resource) -> Row {
    let dev_prefix = format!("dev {}", r.dev_name);
    let linked = matches!(r.kind, ResKind::Qp | ResKind::CmId);
    let mut row = Row::new(if linked {
        link_prefix(&r.dev_name, r.port)
    } else {
        dev_prefix
    });
    row.json_only("ifindex", Value::from(r.dev_index));
    row.json_only("ifname", Value::from(r.dev_name.as_str()));
    match r.kind {
        ResKind::Qp => {
            if let Some(p) = r.port {
                row.json_only("port", Value::from(p));
            }
            row.opt("lqpn", r.lqpn);
            row.opt("rqpn", r.rqpn);
            if let Some(t) = r.res_type {
                row.text("type", names::qp_type(t));
            }
            if let Some(s) = r.state {
                row.text("state", names::qp_state(s));
            }
            row.opt("rq-psn", r.rq_psn);
            row.opt("sq-psn", r.sq_psn);
            if let Some(m) = r.path_mig_state {
                row.text("path-mig-state", names::path_mig_state(m));
            }
            row.opt("pdn", r.pdn);
            if let Some(s) = &r.subtype {
                row.text("subtype", s);
            }
        }
        ResKind::Cq => {
            row.opt("cqn", r.cqn);
            row.opt("cqe", r.cqe);
            row.opt("users", r.users);
            if let Some(p) = r.poll_ctx {
                row.text("poll-ctx", names::poll_ctx(p));
            }
            if let Some(d) = r.dim {
                row.push(
                    "adaptive-moderation",
                    Value::from(d),
                    Some(if d { "on" } else { "off" }.into()),
                );
            }
            row.opt("ctxn", r.ctxn);
        }
        ResKind::Mr => {
            row.opt("mrn", r.mrn);
            row.key("rkey", r.rkey);
            row.key("lkey", r.lkey);
            row.key("iova", r.iova);
            row.opt("mrlen", r.mrlen);
            row.opt("pdn", r.pdn);
        }
        ResKind::Pd => {
            row.opt("pdn", r.pdn);
            row.key("local_dma_lkey", r.local_dma_lkey);
            row.opt("users", r.users);
            row.key("unsafe_global_rkey", r.unsafe_global_rkey);
            row.opt("ctxn", r.ctxn);
        }
        ResKind::Ctx => {
            row.opt("ctxn", r.ctxn);
        }
        ResKind::Srq => {
            row.opt("srqn", r.srqn);
            if let Some(t) = r.res_type {
                row.text("type", names::srq_type(t));
            }
            if !r.qps.is_empty() {
                let list: Vec<String> = r
                    .qps
                    .iter()
                    .map(|q| {
                        if q.min == q.max {
                            q.min.to_string()
                        } else {
                            format!("{}-{}", q.min, q.max)
                        }
                    })
                    .collect();
                row.push("lqpn", Value::from(list.clone()), Some(list.join(",")));
            }
            row.opt("pdn", r.pdn);
            row.opt("cqn", r.cqn);
        }
        ResKind::CmId => {
            if let Some(p) = r.port {
                row.json_only("port", Value::from(p));
            }
            row.opt("lqpn", r.lqpn);
            if let Some(t) = r.res_type {
                row.text("qp-type", names::qp_type(t));
            }
            if let Some(s) = r.state {
                row.text("state", names::cm_id_state(s));
            }
            if let Some(p) = r.ps {
                row.text("ps", names::port_space(p));
            }
        }
    }
    owner_fields(&mut row, f, &r.holder);
    if r.kind == ResKind::CmId {
        row.opt("cm-idn", r.cm_idn);
        if let Some(a) = &r.src_addr {
            row.text("src-addr", &a.to_string());
        }
        if let Some(a) = &r.dst_addr {
            row.text("dst-addr", &a.to_string());
        }
    }
    row
}

/// The per-device summary (`rdma resource`), for the devices `wanted` accepts.
pub fn summary_rows(summary: &[netlink::ResSummary], wanted: impl Fn(&str) -> bool) -> Vec<Row> {
    summary
        .iter()
        .filter(|s| wanted(&s.dev_name))
        .map(|s| {
            let mut row = Row::new(format!("{}: {}:", s.dev_index, s.dev_name));
            row.json_only("ifindex", Value::from(s.dev_index));
            row.json_only("ifname", Value::from(s.dev_name.as_str()));
            for (name, n) in &s.entries {
                row.num(name, *n);
            }
            row
        })
        .collect()
}

/// `rdma dev`: one device's row (`rdma -j dev show` keys).
pub fn dev_row(d: &netlink::Dev) -> Row {
    let mut row = Row::new(format!("{}: {}:", d.index, d.name));
    row.json_only("ifindex", Value::from(d.index));
    row.json_only("ifname", Value::from(d.name.as_str()));
    if let Some(t) = d.node_type {
        row.text("node_type", names::node_type(t));
    }
    if let Some(fw) = d.fw_version.as_deref().filter(|s| !s.is_empty()) {
        row.text("fw", fw);
    }
    if let Some(g) = d.node_guid {
        row.text("node_guid", &names::guid(g));
    }
    if let Some(g) = d.sys_image_guid {
        row.text("sys_image_guid", &names::guid(g));
    }
    row
}

/// `rdma link`: one port's row (`rdma -j link show` keys).
pub fn port_row(p: &netlink::Port) -> Row {
    let mut row = Row::new(format!("link {}/{}", p.dev_name, p.port));
    row.json_only("ifindex", Value::from(p.dev_index));
    row.json_only("ifname", Value::from(p.dev_name.as_str()));
    row.json_only("port", Value::from(p.port));
    if let Some(sp) = p.subnet_prefix {
        row.text("subnet_prefix", &names::guid(sp));
    }
    row.opt("lid", p.lid);
    row.opt("sm_lid", p.sm_lid);
    row.opt("lmc", p.lmc);
    if let Some(s) = p.state {
        row.text("state", names::port_state(s));
    }
    if let Some(s) = p.phys_state {
        row.text("physical_state", names::phys_state(s));
    }
    if let (Some(n), Some(i)) = (&p.netdev, p.netdev_index) {
        row.text("netdev", n);
        row.json_only("netdev_index", Value::from(i));
    }
    row
}

/// What [`monitor`] has to say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Said<'a> {
    /// An event's line, for stdout.
    Event(&'a str),
    /// A batch of events has been said: time to flush.
    Batch,
    /// A line for stderr, after `monitor: `.
    Note(&'a str),
}

/// `rdmakit monitor`: subscribes to RDMA device events (register, unregister,
/// netdev attach/detach, rename) on the live host and says each as the kernel
/// announces it ([`event_line`], or with `json` one JSON object per line),
/// until the process is interrupted. Live only.
///
/// Returns how it ended: the kernel has no RDMA netlink to subscribe to
/// ([`Exit::Incomplete`]), or the subscription or a receive failed
/// ([`Exit::Failed`]); each is said first.
///
/// # Errors
/// What `say` returned (stdout gone).
pub fn monitor(
    json: bool,
    say: &mut dyn FnMut(Said) -> std::io::Result<()>,
) -> std::io::Result<Exit> {
    let mut mon = match netlink::monitor::Monitor::open() {
        Ok(m) => m,
        // No RDMA netlink in this kernel: nothing to subscribe to (3); any
        // other refusal is the subscription failing (2).
        Err(e) => {
            say(Said::Note(&format!(
                "kernel layer: cannot subscribe to RDMA events on NETLINK_RDMA: {}; `rdmakit \
                 doctor` checks the kernel layer",
                netlink::describe(e)
            )))?;
            return Ok(if e.0 == 93 {
                Exit::Incomplete
            } else {
                Exit::Failed
            });
        }
    };
    // Kernels that announce events say so in their SYS reply; on others the
    // subscription works but stays silent forever: say so instead of hanging
    // without a word.
    let live = rdmakit_host::source::LiveSource::host();
    if netlink::monitor::announces(&live) == Some(false) {
        say(Said::Note(
            "kernel layer: this kernel does not announce RDMA device events (its \
             RDMA_NLDEV_CMD_SYS_GET reply has no MONITOR_MODE attribute, which kernels with \
             RDMA monitoring send); expect no output. Poll with 'rdmakit dev' and 'rdmakit \
             link' instead.",
        ))?;
    }
    loop {
        let events = match mon.wait_events() {
            Ok(v) => v,
            Err(e) if e.0 == 4 => continue, // EINTR
            Err(e) => {
                say(Said::Note(&format!("recv: {}", netlink::describe(e))))?;
                return Ok(Exit::Failed);
            }
        };
        for ev in events {
            match ev {
                Ok(ev) if json => say(Said::Event(&serde_json::to_string(&ev)?))?,
                Ok(ev) => say(Said::Event(&event_line(&ev)))?,
                Err(e) => say(Said::Note(&format!("skipped an event: {e}")))?,
            }
        }
        say(Said::Batch)?;
    }
}

/// `rdma monitor`: one device event as a line (`[REGISTER] dev 3 mlx5_0`).
pub fn event_line(ev: &netlink::Event) -> String {
    let mut s = format!("[{}]", ev.event.map_or("UNKNOWN", names::event));
    if let Some(i) = ev.dev_index {
        s.push_str(&format!(" dev {i}"));
    }
    if let Some(n) = &ev.dev_name {
        s.push_str(&format!(" {n}"));
    }
    if let Some(p) = ev.port {
        s.push_str(&format!(" port {p}"));
    }
    if let Some(i) = ev.netdev_index {
        s.push_str(&format!(" netdev {i}"));
    }
    if let Some(n) = &ev.netdev {
        s.push_str(&format!(" {n}"));
    }
    s
}

/// `rdma statistic`: one port's hardware counters as a row.
pub fn port_stat_row(s: &netlink::PortStat) -> Row {
    let mut row = Row::new(format!("link {}/{}", s.dev_name, s.port));
    row.json_only("ifname", Value::from(s.dev_name.as_str()));
    row.json_only("port", Value::from(s.port));
    for (n, v) in &s.counters {
        row.num(n, *v);
    }
    row.note = congestion_note(&s.counters);
    row
}

/// The congestion loop's counters (mlx5's names) and the word each is
/// shown by in [`congestion_note`].
pub const CONGESTION: [(&str, &str); 4] = [
    ("np_ecn_marked_roce_packets", "marked"),
    ("np_cnp_sent", "CNPs sent"),
    ("rp_cnp_handled", "handled"),
    ("rp_cnp_ignored", "ignored"),
];

/// `congestion: marked 1500, CNPs sent 1200, handled 0, ignored 0` for a
/// port that has any of [`CONGESTION`] (each that it has, in that order);
/// None for one without (rxe, mlx5 before kernel 4.12).
pub fn congestion_note(counters: &[(String, u64)]) -> Option<String> {
    let parts: Vec<String> = CONGESTION
        .iter()
        .filter_map(|(name, word)| {
            let (_, v) = counters.iter().find(|(n, _)| n == name)?;
            Some(format!("{word} {v}"))
        })
        .collect();
    (!parts.is_empty()).then(|| format!("congestion: {}", parts.join(", ")))
}

/// `rdma statistic qp`: one bound counter, its owner and its QPs as a row.
pub fn qp_counter_row(f: &NetlinkFacts, c: &netlink::QpCounter) -> Row {
    let mut row = Row::new(match c.port {
        Some(p) => format!("link {}/{}", c.dev_name, p),
        None => format!("link {}/-", c.dev_name),
    });
    row.json_only("ifname", Value::from(c.dev_name.as_str()));
    if let Some(p) = c.port {
        row.json_only("port", Value::from(p));
    }
    row.opt("cntn", c.counter_id);
    if let Some(t) = c.qp_type {
        row.text("qp-type", names::qp_type(t));
    }
    owner_fields(&mut row, f, &c.holder);
    for (n, v) in &c.counters {
        row.num(n, *v);
    }
    if !c.lqpns.is_empty() {
        let l: Vec<String> = c.lqpns.iter().map(u32::to_string).collect();
        row.push("lqpn", Value::from(c.lqpns.clone()), Some(l.join(",")));
    }
    row
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json;

    #[test]
    fn dev_and_port_rows_read_as_rdma_prints_them() {
        let d = netlink::Dev {
            index: 3,
            name: "mlx5_0".into(),
            ports: Some(1),
            cap_flags: None,
            fw_version: Some(String::new()),
            node_guid: Some(0x0002_c903_0010_0001),
            sys_image_guid: None,
            node_type: Some(1),
            protocol: None,
            dim: None,
            dev_type: None,
            parent_name: None,
            unknown: vec![],
        };
        let r = dev_row(&d);
        assert_eq!(
            r.human(),
            "3: mlx5_0: node_type ca node_guid 0002:c903:0010:0001"
        );
        let v: serde_json::Value = serde_json::from_str(&json(&[r])).unwrap();
        assert_eq!(v[0]["ifindex"], 3);
        assert_eq!(v[0]["ifname"], "mlx5_0");
        assert!(v[0].get("fw").is_none(), "{v}");
        let p = netlink::Port {
            dev_index: 3,
            dev_name: "mlx5_0".into(),
            port: 1,
            state: Some(4),
            phys_state: Some(5),
            netdev_index: Some(7),
            netdev: Some("eth0".into()),
            ..Default::default()
        };
        let r = port_row(&p);
        assert_eq!(
            r.human(),
            "link mlx5_0/1 state ACTIVE physical_state LINK_UP netdev eth0"
        );
        let v: serde_json::Value = serde_json::from_str(&json(&[r])).unwrap();
        assert_eq!(
            (v[0]["port"].clone(), v[0]["netdev_index"].clone()),
            (1.into(), 7.into())
        );
        let s = netlink::PortStat {
            dev_index: 3,
            dev_name: "mlx5_0".into(),
            port: 1,
            counters: vec![("rx_write_requests".into(), 12)],
            unknown: vec![],
        };
        let ev = netlink::Event {
            event: Some(2),
            dev_index: Some(3),
            dev_name: Some("mlx5_0".into()),
            port: Some(1),
            netdev_index: Some(7),
            netdev: Some("eth0".into()),
            unknown: vec![],
        };
        assert_eq!(
            event_line(&ev),
            format!("[{}] dev 3 mlx5_0 port 1 netdev 7 eth0", names::event(2))
        );
        let bare = netlink::Event::default();
        assert_eq!(event_line(&bare), "[UNKNOWN]");
        assert_eq!(
            port_stat_row(&s).human(),
            "link mlx5_0/1 rx_write_requests 12"
        );
        assert_eq!(port_stat_row(&s).note, None);
    }

    /// mlx5's port counters in the order of the real `rdma statistic show
    /// link` line in the optional-counters patch's log (rocep8s0f0/1),
    /// values set here: the row stays `rdma`'s line (and its JSON), the
    /// congestion counters are grouped under it.
    #[test]
    fn an_mlx5_port_groups_its_congestion_counters_under_the_line() {
        let names = [
            "rx_write_requests",
            "rx_read_requests",
            "rx_atomic_requests",
            "rx_dct_connect",
            "out_of_buffer",
            "out_of_sequence",
            "duplicate_request",
            "rnr_nak_retry_err",
            "packet_seq_err",
            "implied_nak_seq_err",
            "local_ack_timeout_err",
            "resp_local_length_error",
            "resp_cqe_error",
            "req_cqe_error",
            "req_remote_invalid_request",
            "req_remote_access_errors",
            "resp_remote_access_errors",
            "resp_cqe_flush_error",
            "req_cqe_flush_error",
            "roce_adp_retrans",
            "roce_adp_retrans_to",
            "roce_slow_restart",
            "roce_slow_restart_cnps",
            "roce_slow_restart_trans",
            "rp_cnp_ignored",
            "rp_cnp_handled",
            "np_ecn_marked_roce_packets",
            "np_cnp_sent",
            "rx_icrc_encapsulated",
        ];
        let value = |n: &str| match n {
            "np_ecn_marked_roce_packets" => 1500,
            "np_cnp_sent" => 1200,
            "rp_cnp_handled" => 7,
            _ => 0,
        };
        let s = netlink::PortStat {
            dev_index: 3,
            dev_name: "rocep8s0f0".into(),
            port: 1,
            counters: names.iter().map(|n| (n.to_string(), value(n))).collect(),
            unknown: vec![],
        };
        let r = port_stat_row(&s);
        let line = r.human();
        assert!(
            line.starts_with("link rocep8s0f0/1 rx_write_requests 0 ")
                && line.ends_with(
                    "rp_cnp_ignored 0 rp_cnp_handled 7 np_ecn_marked_roce_packets 1500 \
                     np_cnp_sent 1200 rx_icrc_encapsulated 0"
                ),
            "{line}"
        );
        assert_eq!(
            r.human_lines(),
            format!("{line}\n    congestion: marked 1500, CNPs sent 1200, handled 7, ignored 0")
        );
        let v: serde_json::Value = serde_json::from_str(&json(&[r])).unwrap();
        assert_eq!(v[0]["np_cnp_sent"], 1200);
        assert!(v[0].get("congestion").is_none(), "rdma -j's keys only");
        // A driver with only some of them shows those.
        let some = [("rp_cnp_handled".to_string(), 3)];
        assert_eq!(
            congestion_note(&some).as_deref(),
            Some("congestion: handled 3")
        );
    }
}
