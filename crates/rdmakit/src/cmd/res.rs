//! `rdmakit res [qp|cq|mr|pd|ctx|srq|cm_id]`: the kernel's tracked RDMA objects, as
//! `rdma resource show` prints them, plus whether each owner is still alive.
//!
//! Also what `dev`, `link` and `stat` share: loading the netlink facts from a
//! source, rows rendered both as `rdma`-style lines and as `rdma -j` JSON objects.

use std::io::Write as _;
use std::process::ExitCode;

use anyhow::bail;
use rdmakit_host::netlink::{self, names, Holder, Liveness, NetlinkFacts, NlError, ResKind};
use serde_json::Value;

use super::SourceArgs;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// qp, cq, mr, pd, ctx, srq or cm_id; without it, the per-device summary.
    #[arg(value_name = "KIND")]
    kind: Option<String>,
    /// Only this device.
    #[arg(value_name = "DEV")]
    dev: Option<String>,
    /// JSON with the keys of `rdma -j resource show`, plus "owner-state".
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    source: SourceArgs,
}

/// One field of a row: its JSON key and value, and how the human line shows it
/// (`None`: JSON only).
pub(crate) struct Field {
    pub key: String,
    pub json: Value,
    pub human: Option<String>,
}

/// One object: the human line's leading words and the fields.
pub(crate) struct Row {
    pub prefix: String,
    pub fields: Vec<Field>,
}

impl Row {
    pub fn new(prefix: String) -> Row {
        Row {
            prefix,
            fields: Vec::new(),
        }
    }

    /// A field shown the same way in both outputs.
    pub fn num(&mut self, key: &str, v: impl Into<u64>) {
        let v = v.into();
        self.push(key, Value::from(v), Some(v.to_string()));
    }

    pub fn opt(&mut self, key: &str, v: Option<impl Into<u64>>) {
        if let Some(v) = v {
            self.num(key, v);
        }
    }

    pub fn text(&mut self, key: &str, v: &str) {
        self.push(key, Value::from(v), Some(v.to_string()));
    }

    /// A key: hex without 0x in JSON, with 0x in the human line.
    pub fn key(&mut self, key: &str, v: Option<impl Into<u64>>) {
        if let Some(v) = v {
            let v = v.into();
            self.push(key, Value::from(format!("{v:x}")), Some(format!("{v:#x}")));
        }
    }

    pub fn json_only(&mut self, key: &str, v: Value) {
        self.push(key, v, None);
    }

    pub fn push(&mut self, key: &str, json: Value, human: Option<String>) {
        self.fields.push(Field {
            key: key.to_string(),
            json,
            human,
        });
    }

    pub fn human(&self) -> String {
        let mut s = self.prefix.clone();
        for f in &self.fields {
            if let Some(h) = &f.human {
                if !s.is_empty() {
                    s.push(' ');
                }
                s.push_str(&f.key);
                s.push(' ');
                s.push_str(h);
            }
        }
        s
    }
}

/// The rows as a JSON array of objects, keys in `rdma -j` order.
pub(crate) fn json(rows: &[Row]) -> String {
    if rows.is_empty() {
        return "[]\n".into();
    }
    let mut s = String::from("[");
    for (i, r) in rows.iter().enumerate() {
        s.push_str(if i == 0 { " {\n" } else { ",{\n" });
        for (j, f) in r.fields.iter().enumerate() {
            let v = serde_json::to_string(&f.json).unwrap_or_else(|_| "null".into());
            let k = serde_json::to_string(&f.key).unwrap_or_else(|_| "\"?\"".into());
            s.push_str(&format!("    {k}: {v}"));
            s.push_str(if j + 1 < r.fields.len() { ",\n" } else { "\n" });
        }
        s.push_str("  }");
    }
    s.push_str(" ]\n");
    s
}

/// Prints rows (JSON or human) and returns the exit code: 0, or 1 when some
/// answers are missing (already reported on stderr).
pub(crate) fn emit(rows: &[Row], as_json: bool, partial: bool) -> anyhow::Result<ExitCode> {
    let mut out = anstream::stdout();
    if as_json {
        out.write_all(json(rows).as_bytes())?;
    } else {
        for r in rows {
            writeln!(out, "{}", r.human())?;
        }
    }
    Ok(if partial {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Loads the netlink facts from the source. Fails (exit 2) when nothing could be
/// asked: no RDMA netlink in the kernel, or a source that recorded none.
pub(crate) fn load(source: &SourceArgs) -> anyhow::Result<NetlinkFacts> {
    let (opened, _) = source.open()?;
    let f = netlink::rdma_netlink(opened.source());
    if let Err(e) = &f.devs {
        match e {
            NlError::Socket(_) => bail!(
                "kernel layer: {e}; check that ib_core is loaded \
                 (rdmakit doctor)"
            ),
            NlError::NotRecorded => bail!(
                "{} holds no RDMA netlink answers (recorded without them, or a tree with no \
                 kernel behind it)",
                opened.label()
            ),
            _ => bail!("kernel layer: the device dump failed: {e}"),
        }
    }
    Ok(f)
}

/// Reports an answer that is missing on stderr.
pub(crate) fn warn(what: &str, e: &NlError) {
    eprintln!("rdmakit: {what}: {e}");
}

/// Owner fields (pid, comm, owner-state) the way `rdma` prints them, plus the state.
pub(crate) fn owner_fields(row: &mut Row, f: &NetlinkFacts, holder: &Holder) {
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
pub(crate) fn resource_row(f: &NetlinkFacts, r: &netlink::Resource) -> Row {
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

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let kind = match a.kind.as_deref() {
        None | Some("show") => None,
        Some(k) => match ResKind::parse(k) {
            Some(k) => Some(k),
            None => bail!("unknown resource {k:?}: expected qp, cq, mr, pd, ctx, srq or cm_id"),
        },
    };
    let f = load(&a.source)?;
    let wanted = |name: &str| a.dev.as_deref().map(|d| d == name).unwrap_or(true);
    let mut rows = Vec::new();
    let mut partial = false;
    match kind {
        None => match &f.summary {
            Ok(list) => {
                for s in list.iter().filter(|s| wanted(&s.dev_name)) {
                    let mut row = Row::new(format!("{}: {}:", s.dev_index, s.dev_name));
                    row.json_only("ifindex", Value::from(s.dev_index));
                    row.json_only("ifname", Value::from(s.dev_name.as_str()));
                    for (name, n) in &s.entries {
                        row.num(name, *n);
                    }
                    rows.push(row);
                }
            }
            Err(e) => {
                warn("resource summary", e);
                partial = true;
            }
        },
        Some(kind) => {
            for d in f.devices.iter().filter(|d| wanted(&d.name)) {
                match d.resources.get(&kind) {
                    Some(Ok(list)) => rows.extend(list.iter().map(|r| resource_row(&f, r))),
                    Some(Err(e)) => {
                        warn(&format!("{}: {}", d.name, kind.name()), e);
                        partial = true;
                    }
                    None => {}
                }
            }
        }
    }
    if let Some(d) = &a.dev {
        if !f.devices.iter().any(|x| &x.name == d) {
            bail!("no RDMA device {d:?}");
        }
    }
    emit(&rows, a.json, partial)
}
