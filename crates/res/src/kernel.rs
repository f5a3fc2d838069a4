//! The kernel's tracked objects (RDMA netlink, `rdma resource`) as rows: the same
//! keys and values as `rdma -j resource show`, plus `owner-state` (alive / zombie /
//! dead / kernel / orphaned / unknown) so objects leaked by a dead process stand out.

use rdmakit_host::netlink::{self, names, Holder, Liveness, NetlinkFacts, ResKind};
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
