//! Typed views of NLDEV replies. Each view keeps the attributes it does not know in
//! `unknown` (kernels add attributes every release); a known attribute whose size is
//! wrong makes the whole message [`Malformed`].

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::Serialize;

use super::consts::attr as a;
use super::msg::{Malformed, RawAttr};

/// `rdma dev`: one device (RDMA_NLDEV_CMD_GET).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Dev {
    pub index: u32,
    pub name: String,
    /// PORT_INDEX in a device message: the number of ports.
    pub ports: Option<u32>,
    pub cap_flags: Option<u64>,
    pub fw_version: Option<String>,
    pub node_guid: Option<u64>,
    pub sys_image_guid: Option<u64>,
    /// IB node type (1 CA, 2 switch, 3 router, 4 RNIC, ...).
    pub node_type: Option<u8>,
    /// "roce", "ib", "iw", ...
    pub protocol: Option<String>,
    /// Adaptive interrupt moderation.
    pub dim: Option<bool>,
    pub dev_type: Option<u8>,
    pub parent_name: Option<String>,
    pub unknown: Vec<RawAttr>,
}

/// `rdma link`: one port (RDMA_NLDEV_CMD_PORT_GET).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Port {
    pub dev_index: u32,
    pub dev_name: String,
    pub port: u32,
    pub cap_flags: Option<u64>,
    pub subnet_prefix: Option<u64>,
    pub lid: Option<u32>,
    pub sm_lid: Option<u32>,
    pub lmc: Option<u8>,
    pub state: Option<u8>,
    pub phys_state: Option<u8>,
    pub netdev_index: Option<u32>,
    pub netdev: Option<String>,
    pub unknown: Vec<RawAttr>,
}

/// `rdma resource`: how many objects of each kind a device has.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResSummary {
    pub dev_index: u32,
    pub dev_name: String,
    /// ("qp", 4), ... in the kernel's order.
    pub entries: Vec<(String, u64)>,
    pub unknown: Vec<RawAttr>,
}

impl ResSummary {
    /// The count for one kind ("qp", "cq", "mr", "pd", "ctx", "srq", "cm_id").
    pub fn count(&self, name: &str) -> Option<u64> {
        self.entries
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, c)| *c)
    }
}

/// The kinds of tracked resources.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ResKind {
    Qp,
    Cq,
    Mr,
    Pd,
    Ctx,
    Srq,
    CmId,
}

impl ResKind {
    pub const ALL: [ResKind; 7] = [
        ResKind::Qp,
        ResKind::Cq,
        ResKind::Mr,
        ResKind::Pd,
        ResKind::Ctx,
        ResKind::Srq,
        ResKind::CmId,
    ];

    /// The name `rdma resource` uses ("qp", "cm_id", ...).
    pub fn name(self) -> &'static str {
        match self {
            ResKind::Qp => "qp",
            ResKind::Cq => "cq",
            ResKind::Mr => "mr",
            ResKind::Pd => "pd",
            ResKind::Ctx => "ctx",
            ResKind::Srq => "srq",
            ResKind::CmId => "cm_id",
        }
    }

    pub fn parse(s: &str) -> Option<ResKind> {
        ResKind::ALL.into_iter().find(|k| k.name() == s)
    }

    /// The dump command.
    pub fn command(self) -> u16 {
        use super::consts::cmd;
        match self {
            ResKind::Qp => cmd::RES_QP_GET,
            ResKind::Cq => cmd::RES_CQ_GET,
            ResKind::Mr => cmd::RES_MR_GET,
            ResKind::Pd => cmd::RES_PD_GET,
            ResKind::Ctx => cmd::RES_CTX_GET,
            ResKind::Srq => cmd::RES_SRQ_GET,
            ResKind::CmId => cmd::RES_CM_ID_GET,
        }
    }

    /// (table attribute, entry attribute) of the dump reply.
    pub fn table(self) -> (u16, u16) {
        match self {
            ResKind::Qp => (a::RES_QP, a::RES_QP_ENTRY),
            ResKind::Cq => (a::RES_CQ, a::RES_CQ_ENTRY),
            ResKind::Mr => (a::RES_MR, a::RES_MR_ENTRY),
            ResKind::Pd => (a::RES_PD, a::RES_PD_ENTRY),
            ResKind::Ctx => (a::RES_CTX, a::RES_CTX_ENTRY),
            ResKind::Srq => (a::RES_SRQ, a::RES_SRQ_ENTRY),
            ResKind::CmId => (a::RES_CM_ID, a::RES_CM_ID_ENTRY),
        }
    }
}

/// Who holds a resource, as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Holder {
    /// A user process (RES_PID).
    Pid(u32),
    /// A kernel module (RES_KERN_NAME, e.g. "ib_core").
    Kernel(String),
    /// Neither attribute was sent.
    Unknown,
}

/// A socket address from RES_SRC_ADDR / RES_DST_ADDR (`struct sockaddr_storage`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SockAddr {
    pub family: u16,
    pub addr: Option<IpAddr>,
    pub port: u16,
}

impl std::fmt::Display for SockAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.addr {
            Some(a) => write!(f, "{a}:{}", self.port),
            None => write!(f, "family{}:{}", self.family, self.port),
        }
    }
}

/// One QP range of an SRQ (a single QPN is a range of one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct QpRange {
    pub min: u32,
    pub max: u32,
}

/// One tracked object (QP, CQ, MR, PD, context, SRQ or CM ID). Which fields appear
/// depends on the kind and the kernel: QP: port lqpn rqpn rq_psn sq_psn
/// path_mig_state qp_type state pdn subtype; CQ: cqe users poll_ctx dim cqn ctxn;
/// MR: rkey lkey iova mrlen mrn pdn; PD: local_dma_lkey unsafe_global_rkey users pdn
/// ctxn; ctx: ctxn; SRQ: srqn srq_type pdn cqn qps; CM ID: port lqpn qp_type state ps
/// src dst cm_idn.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Resource {
    pub kind: ResKind,
    pub dev_index: u32,
    pub dev_name: String,
    pub holder: Holder,
    pub port: Option<u32>,
    pub lqpn: Option<u32>,
    pub rqpn: Option<u32>,
    pub rq_psn: Option<u32>,
    pub sq_psn: Option<u32>,
    pub path_mig_state: Option<u8>,
    /// RES_TYPE: the QP type for QPs and CM IDs, the SRQ type for SRQs.
    pub res_type: Option<u8>,
    /// RES_STATE: QP state or CM ID state.
    pub state: Option<u8>,
    pub pdn: Option<u32>,
    pub cqn: Option<u32>,
    pub mrn: Option<u32>,
    pub ctxn: Option<u32>,
    pub srqn: Option<u32>,
    pub cm_idn: Option<u32>,
    pub cqe: Option<u32>,
    pub users: Option<u64>,
    pub poll_ctx: Option<u8>,
    pub dim: Option<bool>,
    pub rkey: Option<u32>,
    pub lkey: Option<u32>,
    pub iova: Option<u64>,
    pub mrlen: Option<u64>,
    pub local_dma_lkey: Option<u32>,
    pub unsafe_global_rkey: Option<u32>,
    pub ps: Option<u32>,
    pub src_addr: Option<SockAddr>,
    pub dst_addr: Option<SockAddr>,
    pub subtype: Option<String>,
    /// SRQ: the QPs attached.
    pub qps: Vec<QpRange>,
    pub unknown: Vec<RawAttr>,
}

impl Resource {
    /// The object's number within its kind (lqpn, cqn, mrn, pdn, ctxn, srqn, cm_idn).
    pub fn id(&self) -> Option<u32> {
        match self.kind {
            ResKind::Qp => self.lqpn,
            ResKind::Cq => self.cqn,
            ResKind::Mr => self.mrn,
            ResKind::Pd => self.pdn,
            ResKind::Ctx => self.ctxn,
            ResKind::Srq => self.srqn,
            ResKind::CmId => self.cm_idn,
        }
    }

    pub fn pid(&self) -> Option<u32> {
        match self.holder {
            Holder::Pid(p) => Some(p),
            _ => None,
        }
    }
}

/// `rdma statistic`: one port's hardware counters (STAT_GET on a port).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PortStat {
    pub dev_index: u32,
    pub dev_name: String,
    pub port: u32,
    pub counters: Vec<(String, u64)>,
    pub unknown: Vec<RawAttr>,
}

/// `rdma statistic qp`: one bound counter and the QPs it counts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QpCounter {
    pub dev_index: u32,
    pub dev_name: String,
    pub port: Option<u32>,
    pub counter_id: Option<u32>,
    /// STAT_MODE: 0 manual, 1 auto.
    pub mode: Option<u32>,
    pub auto_mode_mask: Option<u32>,
    pub qp_type: Option<u8>,
    pub holder: Holder,
    pub lqpns: Vec<u32>,
    pub counters: Vec<(String, u64)>,
    pub unknown: Vec<RawAttr>,
}

/// `rdma system`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Sys {
    /// 1 shared, 0 exclusive.
    pub netns_mode: Option<u8>,
    pub copy_on_fork: Option<u8>,
    pub privileged_qkey_mode: Option<u8>,
    /// Sent (as 1) only by kernels that announce device events to the
    /// monitor group; absent on older ones (Debian 12's 6.1 among them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub monitor_mode: Option<u8>,
    pub unknown: Vec<RawAttr>,
}

/// The uverbs character device of a device (GET_CHARDEV).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Chardev {
    pub name: Option<String>,
    pub abi: Option<u64>,
    /// dev_t as the kernel encodes it.
    pub dev: Option<u64>,
    pub driver_id: Option<u32>,
    pub unknown: Vec<RawAttr>,
}

/// A monitor event (RDMA_NL_GROUP_NOTIFY).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Event {
    /// 0 register, 1 unregister, 2 netdev attach, 3 netdev detach, 4 rename,
    /// 5 netdev rename.
    pub event: Option<u32>,
    pub dev_index: Option<u32>,
    pub dev_name: Option<String>,
    pub port: Option<u32>,
    pub netdev_index: Option<u32>,
    pub netdev: Option<String>,
    pub unknown: Vec<RawAttr>,
}

// ---- decoding ----

fn require<T>(v: Option<T>, attr: u16) -> Result<T, Malformed> {
    v.ok_or(Malformed::Missing(attr))
}

/// Decodes a device message.
///
/// # Errors
/// DEV_INDEX or DEV_NAME missing, or a known attribute of the wrong size.
pub fn dev(attrs: &[RawAttr]) -> Result<Dev, Malformed> {
    let (mut index, mut name) = (None, None);
    let mut d = Dev {
        index: 0,
        name: String::new(),
        ports: None,
        cap_flags: None,
        fw_version: None,
        node_guid: None,
        sys_image_guid: None,
        node_type: None,
        protocol: None,
        dim: None,
        dev_type: None,
        parent_name: None,
        unknown: Vec::new(),
    };
    for at in attrs {
        match at.kind {
            a::DEV_INDEX => index = Some(at.u32()?),
            a::DEV_NAME => name = Some(at.string()),
            a::PORT_INDEX => d.ports = Some(at.u32()?),
            a::CAP_FLAGS => d.cap_flags = Some(at.u64()?),
            a::FW_VERSION => d.fw_version = Some(at.string()),
            a::NODE_GUID => d.node_guid = Some(at.u64()?),
            a::SYS_IMAGE_GUID => d.sys_image_guid = Some(at.u64()?),
            a::DEV_NODE_TYPE => d.node_type = Some(at.u8()?),
            a::DEV_PROTOCOL => d.protocol = Some(at.string()),
            a::DEV_DIM => d.dim = Some(at.u8()? != 0),
            a::DEV_TYPE => d.dev_type = Some(at.u8()?),
            a::PARENT_NAME => d.parent_name = Some(at.string()),
            _ => d.unknown.push(at.clone()),
        }
    }
    d.index = require(index, a::DEV_INDEX)?;
    d.name = require(name, a::DEV_NAME)?;
    Ok(d)
}

/// Decodes a port message.
///
/// # Errors
/// DEV_INDEX, DEV_NAME or PORT_INDEX missing, or a known attribute of the wrong size.
pub fn port(attrs: &[RawAttr]) -> Result<Port, Malformed> {
    let (mut index, mut name, mut num) = (None, None, None);
    let mut p = Port {
        dev_index: 0,
        dev_name: String::new(),
        port: 0,
        cap_flags: None,
        subnet_prefix: None,
        lid: None,
        sm_lid: None,
        lmc: None,
        state: None,
        phys_state: None,
        netdev_index: None,
        netdev: None,
        unknown: Vec::new(),
    };
    for at in attrs {
        match at.kind {
            a::DEV_INDEX => index = Some(at.u32()?),
            a::DEV_NAME => name = Some(at.string()),
            a::PORT_INDEX => num = Some(at.u32()?),
            a::CAP_FLAGS => p.cap_flags = Some(at.u64()?),
            a::SUBNET_PREFIX => p.subnet_prefix = Some(at.u64()?),
            a::LID => p.lid = Some(at.u32()?),
            a::SM_LID => p.sm_lid = Some(at.u32()?),
            a::LMC => p.lmc = Some(at.u8()?),
            a::PORT_STATE => p.state = Some(at.u8()?),
            a::PORT_PHYS_STATE => p.phys_state = Some(at.u8()?),
            a::NDEV_INDEX => p.netdev_index = Some(at.u32()?),
            a::NDEV_NAME => p.netdev = Some(at.string()),
            _ => p.unknown.push(at.clone()),
        }
    }
    p.dev_index = require(index, a::DEV_INDEX)?;
    p.dev_name = require(name, a::DEV_NAME)?;
    p.port = require(num, a::PORT_INDEX)?;
    Ok(p)
}

fn dev_id(attrs: &[RawAttr]) -> Result<(u32, String), Malformed> {
    let mut index = None;
    let mut name = None;
    for at in attrs {
        match at.kind {
            a::DEV_INDEX => index = Some(at.u32()?),
            a::DEV_NAME => name = Some(at.string()),
            _ => {}
        }
    }
    Ok((require(index, a::DEV_INDEX)?, require(name, a::DEV_NAME)?))
}

/// Decodes a resource summary message.
///
/// # Errors
/// DEV_INDEX / DEV_NAME missing, an entry without name or count, bad sizes.
pub fn res_summary(attrs: &[RawAttr]) -> Result<ResSummary, Malformed> {
    let (dev_index, dev_name) = dev_id(attrs)?;
    let mut s = ResSummary {
        dev_index,
        dev_name,
        entries: Vec::new(),
        unknown: Vec::new(),
    };
    for at in attrs {
        match at.kind {
            a::DEV_INDEX | a::DEV_NAME => {}
            a::RES_SUMMARY => {
                for e in at.nested()? {
                    if e.kind != a::RES_SUMMARY_ENTRY {
                        continue;
                    }
                    let (mut n, mut c) = (None, None);
                    for f in e.nested()? {
                        match f.kind {
                            a::RES_SUMMARY_ENTRY_NAME => n = Some(f.string()),
                            a::RES_SUMMARY_ENTRY_CURR => c = Some(f.u64()?),
                            _ => {}
                        }
                    }
                    s.entries.push((
                        require(n, a::RES_SUMMARY_ENTRY_NAME)?,
                        require(c, a::RES_SUMMARY_ENTRY_CURR)?,
                    ));
                }
            }
            _ => s.unknown.push(at.clone()),
        }
    }
    Ok(s)
}

/// Decodes the resource table of one dump message into its entries.
///
/// # Errors
/// DEV_INDEX / DEV_NAME missing, a malformed nest, bad sizes.
pub fn resources(kind: ResKind, attrs: &[RawAttr]) -> Result<Vec<Resource>, Malformed> {
    let (dev_index, dev_name) = dev_id(attrs)?;
    let (table, entry) = kind.table();
    let mut out = Vec::new();
    for at in attrs.iter().filter(|at| at.kind == table) {
        for e in at.nested()? {
            if e.kind != entry {
                continue;
            }
            out.push(resource(kind, dev_index, &dev_name, &e.nested()?)?);
        }
    }
    Ok(out)
}

fn sockaddr(at: &RawAttr) -> Result<SockAddr, Malformed> {
    let d = &at.data;
    if d.len() < 4 {
        return Err(Malformed::BadAttr {
            attr: at.kind,
            len: d.len(),
            expected: "sockaddr",
        });
    }
    let family = u16::from_ne_bytes([d[0], d[1]]);
    let port = u16::from_be_bytes([d[2], d[3]]);
    let addr = match family {
        2 if d.len() >= 8 => Some(IpAddr::V4(Ipv4Addr::new(d[4], d[5], d[6], d[7]))),
        10 if d.len() >= 24 => {
            let mut o = [0u8; 16];
            o.copy_from_slice(&d[8..24]);
            Some(IpAddr::V6(Ipv6Addr::from(o)))
        }
        _ => None,
    };
    Ok(SockAddr { family, addr, port })
}

fn resource(
    kind: ResKind,
    dev_index: u32,
    dev_name: &str,
    attrs: &[RawAttr],
) -> Result<Resource, Malformed> {
    let mut r = Resource {
        kind,
        dev_index,
        dev_name: dev_name.to_string(),
        holder: Holder::Unknown,
        port: None,
        lqpn: None,
        rqpn: None,
        rq_psn: None,
        sq_psn: None,
        path_mig_state: None,
        res_type: None,
        state: None,
        pdn: None,
        cqn: None,
        mrn: None,
        ctxn: None,
        srqn: None,
        cm_idn: None,
        cqe: None,
        users: None,
        poll_ctx: None,
        dim: None,
        rkey: None,
        lkey: None,
        iova: None,
        mrlen: None,
        local_dma_lkey: None,
        unsafe_global_rkey: None,
        ps: None,
        src_addr: None,
        dst_addr: None,
        subtype: None,
        qps: Vec::new(),
        unknown: Vec::new(),
    };
    for at in attrs {
        match at.kind {
            a::PORT_INDEX => r.port = Some(at.u32()?),
            a::RES_LQPN => r.lqpn = Some(at.u32()?),
            a::RES_RQPN => r.rqpn = Some(at.u32()?),
            a::RES_RQ_PSN => r.rq_psn = Some(at.u32()?),
            a::RES_SQ_PSN => r.sq_psn = Some(at.u32()?),
            a::RES_PATH_MIG_STATE => r.path_mig_state = Some(at.u8()?),
            a::RES_TYPE => r.res_type = Some(at.u8()?),
            a::RES_STATE => r.state = Some(at.u8()?),
            a::RES_PID => r.holder = Holder::Pid(at.u32()?),
            a::RES_KERN_NAME => r.holder = Holder::Kernel(at.string()),
            a::RES_PDN => r.pdn = Some(at.u32()?),
            a::RES_CQN => r.cqn = Some(at.u32()?),
            a::RES_MRN => r.mrn = Some(at.u32()?),
            a::RES_CTXN => r.ctxn = Some(at.u32()?),
            a::RES_SRQN => r.srqn = Some(at.u32()?),
            a::RES_CM_IDN => r.cm_idn = Some(at.u32()?),
            a::RES_CQE => r.cqe = Some(at.u32()?),
            a::RES_USECNT => r.users = Some(at.u64()?),
            a::RES_POLL_CTX => r.poll_ctx = Some(at.u8()?),
            a::DEV_DIM => r.dim = Some(at.u8()? != 0),
            a::RES_RKEY => r.rkey = Some(at.u32()?),
            a::RES_LKEY => r.lkey = Some(at.u32()?),
            a::RES_IOVA => r.iova = Some(at.u64()?),
            a::RES_MRLEN => r.mrlen = Some(at.u64()?),
            a::RES_LOCAL_DMA_LKEY => r.local_dma_lkey = Some(at.u32()?),
            a::RES_UNSAFE_GLOBAL_RKEY => r.unsafe_global_rkey = Some(at.u32()?),
            a::RES_PS => r.ps = Some(at.u32()?),
            a::RES_SRC_ADDR => r.src_addr = Some(sockaddr(at)?),
            a::RES_DST_ADDR => r.dst_addr = Some(sockaddr(at)?),
            a::RES_SUBTYPE => r.subtype = Some(at.string()),
            a::RES_QP if kind == ResKind::Srq => {
                for e in at.nested()? {
                    let (mut lqpn, mut min, mut max) = (None, None, None);
                    for f in e.nested()? {
                        match f.kind {
                            a::RES_LQPN => lqpn = Some(f.u32()?),
                            a::MIN_RANGE => min = Some(f.u32()?),
                            a::MAX_RANGE => max = Some(f.u32()?),
                            _ => {}
                        }
                    }
                    if let Some(q) = lqpn {
                        r.qps.push(QpRange { min: q, max: q });
                    } else if let (Some(min), Some(max)) = (min, max) {
                        r.qps.push(QpRange { min, max });
                    }
                }
            }
            _ => r.unknown.push(at.clone()),
        }
    }
    Ok(r)
}

fn hwcounters(at: &RawAttr) -> Result<Vec<(String, u64)>, Malformed> {
    let mut out = Vec::new();
    for e in at.nested()? {
        if e.kind != a::STAT_HWCOUNTER_ENTRY {
            continue;
        }
        let (mut n, mut v) = (None, None);
        for f in e.nested()? {
            match f.kind {
                a::STAT_HWCOUNTER_ENTRY_NAME => n = Some(f.string()),
                a::STAT_HWCOUNTER_ENTRY_VALUE => v = Some(f.u64()?),
                _ => {}
            }
        }
        out.push((
            require(n, a::STAT_HWCOUNTER_ENTRY_NAME)?,
            require(v, a::STAT_HWCOUNTER_ENTRY_VALUE)?,
        ));
    }
    Ok(out)
}

/// Decodes a port statistics message.
///
/// # Errors
/// DEV_INDEX, DEV_NAME or PORT_INDEX missing, a malformed counter table.
pub fn port_stat(attrs: &[RawAttr]) -> Result<PortStat, Malformed> {
    let (dev_index, dev_name) = dev_id(attrs)?;
    let mut port = None;
    let mut s = PortStat {
        dev_index,
        dev_name,
        port: 0,
        counters: Vec::new(),
        unknown: Vec::new(),
    };
    for at in attrs {
        match at.kind {
            a::DEV_INDEX | a::DEV_NAME => {}
            a::PORT_INDEX => port = Some(at.u32()?),
            a::STAT_HWCOUNTERS => s.counters.extend(hwcounters(at)?),
            _ => s.unknown.push(at.clone()),
        }
    }
    s.port = require(port, a::PORT_INDEX)?;
    Ok(s)
}

/// Decodes one message of a QP-counter dump (STAT_GET with STAT_RES = RES_QP).
///
/// # Errors
/// DEV_INDEX / DEV_NAME missing, a malformed nest.
pub fn qp_counters(attrs: &[RawAttr]) -> Result<Vec<QpCounter>, Malformed> {
    let (dev_index, dev_name) = dev_id(attrs)?;
    let blank = || QpCounter {
        dev_index,
        dev_name: dev_name.clone(),
        port: None,
        counter_id: None,
        mode: None,
        auto_mode_mask: None,
        qp_type: None,
        holder: Holder::Unknown,
        lqpns: Vec::new(),
        counters: Vec::new(),
        unknown: Vec::new(),
    };
    // Fields may sit at the message level or inside STAT_COUNTER entries.
    let fill = |c: &mut QpCounter, at: &RawAttr| -> Result<bool, Malformed> {
        match at.kind {
            a::DEV_INDEX | a::DEV_NAME => {}
            a::PORT_INDEX => c.port = Some(at.u32()?),
            a::STAT_COUNTER_ID => c.counter_id = Some(at.u32()?),
            a::STAT_MODE => c.mode = Some(at.u32()?),
            a::STAT_AUTO_MODE_MASK => c.auto_mode_mask = Some(at.u32()?),
            a::RES_TYPE => c.qp_type = Some(at.u8()?),
            a::RES_PID => c.holder = Holder::Pid(at.u32()?),
            a::RES_KERN_NAME => c.holder = Holder::Kernel(at.string()),
            a::STAT_HWCOUNTERS => c.counters.extend(hwcounters(at)?),
            a::RES_QP => {
                for e in at.nested()? {
                    for f in e.nested()? {
                        if f.kind == a::RES_LQPN {
                            c.lqpns.push(f.u32()?);
                        }
                    }
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    };
    let mut top = blank();
    let mut out = Vec::new();
    for at in attrs {
        if at.kind == a::STAT_COUNTER {
            for e in at.nested()? {
                if e.kind != a::STAT_COUNTER_ENTRY {
                    continue;
                }
                let mut c = blank();
                for f in e.nested()? {
                    if !fill(&mut c, &f)? {
                        c.unknown.push(f.clone());
                    }
                }
                out.push(c);
            }
        } else if !fill(&mut top, at)? {
            top.unknown.push(at.clone());
        }
    }
    for c in &mut out {
        if c.port.is_none() {
            c.port = top.port;
        }
        if c.mode.is_none() {
            c.mode = top.mode;
        }
    }
    if out.is_empty() && top.counter_id.is_some() {
        out.push(top);
    }
    Ok(out)
}

/// Decodes a SYS_GET reply.
///
/// # Errors
/// A known attribute of the wrong size.
pub fn sys(attrs: &[RawAttr]) -> Result<Sys, Malformed> {
    let mut s = Sys::default();
    for at in attrs {
        match at.kind {
            a::SYS_ATTR_NETNS_MODE => s.netns_mode = Some(at.u8()?),
            a::SYS_ATTR_COPY_ON_FORK => s.copy_on_fork = Some(at.u8()?),
            a::SYS_ATTR_PRIVILEGED_QKEY_MODE => s.privileged_qkey_mode = Some(at.u8()?),
            a::SYS_ATTR_MONITOR_MODE => s.monitor_mode = Some(at.u8()?),
            _ => s.unknown.push(at.clone()),
        }
    }
    Ok(s)
}

/// Decodes a GET_CHARDEV reply.
///
/// # Errors
/// A known attribute of the wrong size.
pub fn chardev(attrs: &[RawAttr]) -> Result<Chardev, Malformed> {
    let mut c = Chardev {
        name: None,
        abi: None,
        dev: None,
        driver_id: None,
        unknown: Vec::new(),
    };
    for at in attrs {
        match at.kind {
            a::CHARDEV_NAME => c.name = Some(at.string()),
            a::CHARDEV_ABI => c.abi = Some(at.u64()?),
            a::CHARDEV => c.dev = Some(at.u64()?),
            a::UVERBS_DRIVER_ID => c.driver_id = Some(at.u32()?),
            _ => c.unknown.push(at.clone()),
        }
    }
    Ok(c)
}

/// Decodes a monitor event.
///
/// # Errors
/// A known attribute of the wrong size.
pub fn event(attrs: &[RawAttr]) -> Result<Event, Malformed> {
    let mut e = Event::default();
    for at in attrs {
        match at.kind {
            a::EVENT_TYPE => {
                e.event = Some(match at.data.len() {
                    1 => u32::from(at.u8()?),
                    _ => at.u32()?,
                })
            }
            a::DEV_INDEX => e.dev_index = Some(at.u32()?),
            a::DEV_NAME => e.dev_name = Some(at.string()),
            a::PORT_INDEX => e.port = Some(at.u32()?),
            a::NDEV_INDEX => e.netdev_index = Some(at.u32()?),
            a::NDEV_NAME => e.netdev = Some(at.string()),
            _ => e.unknown.push(at.clone()),
        }
    }
    Ok(e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netlink::msg::Request;

    fn attrs_of(r: Request) -> Vec<RawAttr> {
        let b = r.build();
        crate::netlink::msg::parse_attrs(&b[16..]).unwrap()
    }

    #[test]
    fn sys_reports_whether_the_kernel_announces_events() {
        let old_kernel = Request::new(0, 0, 0)
            .attr(a::SYS_ATTR_NETNS_MODE, &[1])
            .attr(a::SYS_ATTR_COPY_ON_FORK, &[1]);
        let s = sys(&attrs_of(old_kernel)).unwrap();
        assert_eq!((s.netns_mode, s.monitor_mode), (Some(1), None));
        let new_kernel = Request::new(0, 0, 0)
            .attr(a::SYS_ATTR_NETNS_MODE, &[1])
            .attr(a::SYS_ATTR_MONITOR_MODE, &[1]);
        let s = sys(&attrs_of(new_kernel)).unwrap();
        assert_eq!(s.monitor_mode, Some(1));
        assert!(s.unknown.is_empty());
    }

    fn nest(kind: u16, inner: Request) -> Vec<u8> {
        let b = inner.build();
        let mut v = ((b.len() - 16 + 4) as u16).to_ne_bytes().to_vec();
        v.extend_from_slice(&kind.to_ne_bytes());
        v.extend_from_slice(&b[16..]);
        v
    }

    /// A QP counter dump message as kernels since 5.3 send it: device, port, and a
    /// STAT_COUNTER table with one bound counter (synthetic: the fixtures' kernel had
    /// no counter bound).
    #[test]
    fn qp_counter_entry() {
        let hw_entry = nest(
            a::STAT_HWCOUNTER_ENTRY,
            Request::new(0, 0, 0)
                .string(a::STAT_HWCOUNTER_ENTRY_NAME, "rx_write_requests")
                .attr(a::STAT_HWCOUNTER_ENTRY_VALUE, &7u64.to_ne_bytes()),
        );
        let qp_entry = nest(a::RES_QP_ENTRY, Request::new(0, 0, 0).u32(a::RES_LQPN, 18));
        let entry = Request::new(0, 0, 0)
            .u32(a::STAT_COUNTER_ID, 4)
            .attr(a::RES_TYPE, &[2])
            .u32(a::RES_PID, 345)
            .attr(a::STAT_HWCOUNTERS, &hw_entry)
            .attr(a::RES_QP, &qp_entry);
        let table = nest(a::STAT_COUNTER_ENTRY, entry);
        let msg = Request::new(0, 0, 0)
            .u32(a::DEV_INDEX, 0)
            .string(a::DEV_NAME, "rxe0")
            .u32(a::PORT_INDEX, 1)
            .u32(a::STAT_MODE, 1)
            .attr(a::STAT_COUNTER, &table);
        let c = qp_counters(&attrs_of(msg)).unwrap();
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].port, Some(1));
        assert_eq!(c[0].mode, Some(1));
        assert_eq!(c[0].counter_id, Some(4));
        assert_eq!(c[0].holder, Holder::Pid(345));
        assert_eq!(c[0].lqpns, [18]);
        assert_eq!(c[0].counters, [("rx_write_requests".to_string(), 7)]);
    }

    #[test]
    fn monitor_event_and_cm_id_address() {
        let e = event(&attrs_of(
            Request::new(0, 0, 0)
                .u32(a::EVENT_TYPE, 2)
                .u32(a::DEV_INDEX, 3)
                .u32(a::PORT_INDEX, 1)
                .u32(a::NDEV_INDEX, 2),
        ))
        .unwrap();
        assert_eq!(
            (e.event, e.dev_index, e.netdev_index),
            (Some(2), Some(3), Some(2))
        );
        // struct sockaddr_in 10.0.2.15:18515 inside a sockaddr_storage.
        let mut ss = vec![0u8; 128];
        ss[..2].copy_from_slice(&2u16.to_ne_bytes());
        ss[2..4].copy_from_slice(&18515u16.to_be_bytes());
        ss[4..8].copy_from_slice(&[10, 0, 2, 15]);
        let at = RawAttr {
            kind: a::RES_SRC_ADDR,
            nested: false,
            data: ss,
        };
        assert_eq!(sockaddr(&at).unwrap().to_string(), "10.0.2.15:18515");
    }
}
