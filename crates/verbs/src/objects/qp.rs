//! Queue pairs: the builder (`struct ibv_qp_init_attr`), the QP and its state
//! transitions (RESET → INIT → RTR → RTS as typed steps), posting, and the
//! [`Endpoint`] two processes exchange to connect.

use super::*;

/// Builder of a QP (`struct ibv_qp_init_attr`).
#[derive(Debug)]
pub struct QpBuilder {
    pub(super) pd: Arc<Pd>,
    pub(super) qp_type: QpType,
    pub(super) send_cq: Arc<Cq>,
    pub(super) recv_cq: Arc<Cq>,
    pub(super) srq: Option<Arc<Srq>>,
    pub(super) max_send_wr: u32,
    pub(super) max_recv_wr: u32,
    pub(super) max_send_sge: u32,
    pub(super) max_recv_sge: u32,
    pub(super) max_inline_data: u32,
    pub(super) sq_sig_all: bool,
}

/// Builder methods that set the field of their name.
macro_rules! setters {
    ($($field:ident: $t:ty),* $(,)?) => {
        $(
            pub fn $field(mut self, value: $t) -> Self {
                self.$field = value;
                self
            }
        )*
    };
}

#[allow(missing_docs)]
impl QpBuilder {
    setters! {
        max_send_wr: u32,
        max_recv_wr: u32,
        max_send_sge: u32,
        max_recv_sge: u32,
        max_inline_data: u32,
        sq_sig_all: bool,
    }
    pub fn recv_cq(mut self, cq: &Arc<Cq>) -> Self {
        self.recv_cq = Arc::clone(cq);
        self
    }
    pub fn srq(mut self, srq: &Arc<Srq>) -> Self {
        self.srq = Some(Arc::clone(srq));
        self
    }

    /// `ibv_create_qp`: a QP in RESET.
    ///
    /// # Errors
    /// `EINVAL` for capabilities above the device limits or when `max_qp`
    /// is reached.
    pub fn build(self) -> Result<Qp> {
        let init = QpInit {
            qp_type: self.qp_type,
            pd: self.pd.handle,
            send_cq: self.send_cq.handle,
            recv_cq: self.recv_cq.handle,
            srq: self.srq.as_ref().map(|s| s.handle),
            max_send_wr: self.max_send_wr,
            max_recv_wr: self.max_recv_wr,
            max_send_sge: self.max_send_sge,
            max_recv_sge: self.max_recv_sge,
            max_inline_data: self.max_inline_data,
            sq_sig_all: self.sq_sig_all,
        };
        let qpn = self.pd.ctx.ops.create_qp(&init)?;
        Ok(Qp {
            pd: self.pd,
            _send_cq: self.send_cq,
            _recv_cq: self.recv_cq,
            _srq: self.srq,
            qpn,
            qp_type: self.qp_type,
        })
    }
}

/// A queue pair.
#[derive(Debug)]
pub struct Qp {
    pd: Arc<Pd>,
    _send_cq: Arc<Cq>,
    _recv_cq: Arc<Cq>,
    _srq: Option<Arc<Srq>>,
    qpn: u32,
    qp_type: QpType,
}

impl Drop for Qp {
    fn drop(&mut self) {
        let _ = self.pd.ctx.ops.destroy_qp(self.qpn);
    }
}

/// What a peer needs to connect to a QP (exchanged out of band).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Endpoint {
    /// QP number.
    pub qpn: u32,
    /// Port GID (RoCEv2, IPv4-mapped).
    pub gid: Gid,
    /// First PSN the QP sends.
    pub psn: u32,
}

impl Endpoint {
    /// `qpn:psn:gid` in hex, e.g. `11:abcdef:00000000000000000000ffff7f010203`.
    pub fn to_wire(&self) -> String {
        let g: String = self.gid.0.iter().map(|b| format!("{b:02x}")).collect();
        format!("{:x}:{:x}:{g}", self.qpn, self.psn)
    }

    /// Parses [`Endpoint::to_wire`].
    ///
    /// # Errors
    /// `EINVAL` (application layer) for malformed text.
    pub fn from_wire(s: &str) -> Result<Endpoint> {
        let bad = || {
            Error::application(
                "Endpoint::from_wire",
                Errno::EINVAL,
                format!("malformed endpoint {s:?}"),
            )
        };
        let mut it = s.trim().split(':');
        let qpn = u32::from_str_radix(it.next().ok_or_else(bad)?, 16).map_err(|_| bad())?;
        let psn = u32::from_str_radix(it.next().ok_or_else(bad)?, 16).map_err(|_| bad())?;
        let g = it.next().ok_or_else(bad)?;
        if g.len() != 32 || it.next().is_some() {
            return Err(bad());
        }
        let mut gid = [0u8; 16];
        for (i, b) in gid.iter_mut().enumerate() {
            *b = u8::from_str_radix(g.get(2 * i..2 * i + 2).ok_or_else(bad)?, 16)
                .map_err(|_| bad())?;
        }
        Ok(Endpoint {
            qpn,
            gid: Gid(gid),
            psn,
        })
    }
}

/// Connection parameters of the typed bring-up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectOpts {
    /// Rights granted to remote peers (RC/UC).
    pub access: Access,
    /// Path MTU (RC/UC).
    pub path_mtu: Mtu,
    /// Local ACK timeout exponent (RC).
    pub timeout: u8,
    /// Transport retries (RC).
    pub retry_cnt: u8,
    /// RNR retries (RC).
    pub rnr_retry: u8,
    /// RNR NAK timer code (RC).
    pub min_rnr_timer: u8,
    /// Outstanding READ/atomics as requester and responder (RC).
    pub rd_atomic: u8,
    /// Q_Key (UD).
    pub qkey: u32,
    /// Traffic class of the primary path (RC/UC, the AV's
    /// `grh.traffic_class`): its DSCP goes on the wire; the ECN bits are
    /// the NIC's.
    pub traffic_class: u8,
}

impl Default for ConnectOpts {
    fn default() -> ConnectOpts {
        ConnectOpts {
            access: Access::all(),
            path_mtu: Mtu::Mtu1024,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 12,
            rd_atomic: 16,
            qkey: 0x1111_1111,
            traffic_class: 0,
        }
    }
}

/// `buf[range]` as the SGE of a one-WR post (an error names WR 0).
fn sge0(buf: &MrBuf, range: Range<usize>) -> Result<Sge> {
    buf.sge(range).map_err(|e| Error {
        bad_wr: Some(0),
        ..e
    })
}

fn random_psn() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0);
    (h.finish() as u32) & 0x00ff_ffff
}

/// A QP in INIT, produced by [`Qp::into_init`]: hand out its
/// [`InitQp::endpoint`], then [`InitQp::connect`].
#[derive(Debug)]
pub struct InitQp {
    qp: Qp,
    psn: u32,
    opts: ConnectOpts,
}

/// A QP in RTR: [`RtrQp::ready_to_send`] completes the bring-up.
#[derive(Debug)]
pub struct RtrQp {
    qp: Qp,
    psn: u32,
    opts: ConnectOpts,
}

impl InitQp {
    /// The QP.
    pub fn qp(&self) -> &Qp {
        &self.qp
    }

    /// What the peer needs: QPN, GID (port 1, index 0), first send PSN.
    ///
    /// # Errors
    /// `ibv_query_gid` errors.
    pub fn endpoint(&self) -> Result<Endpoint> {
        Ok(Endpoint {
            qpn: self.qp.qpn,
            gid: self
                .qp
                .pd
                .ctx
                .query_gid(1, u32::from(rdmakit_soft::ROCEV2_GID_INDEX))?,
            psn: self.psn,
        })
    }

    /// INIT → RTR towards `remote` (RC/UC: AV, path MTU, dest QPN, RQ PSN,
    /// RC: rd_atomic and RNR timer; UD: state only).
    ///
    /// # Errors
    /// `ibv_modify_qp` errors.
    pub fn connect(self, remote: &Endpoint) -> Result<RtrQp> {
        let o = self.opts;
        let mut a = QpAttr {
            qp_state: QpState::Rtr,
            ..QpAttr::default()
        };
        let mask = match self.qp.qp_type {
            QpType::Ud => AttrMask::STATE,
            t => {
                a.path_mtu = o.path_mtu;
                a.dest_qp_num = remote.qpn;
                a.rq_psn = remote.psn;
                let base = AttrMask::STATE
                    | AttrMask::AV
                    | AttrMask::PATH_MTU
                    | AttrMask::DEST_QPN
                    | AttrMask::RQ_PSN;
                if t == QpType::Rc {
                    a.max_dest_rd_atomic = o.rd_atomic;
                    a.min_rnr_timer = o.min_rnr_timer;
                    base | AttrMask::MAX_DEST_RD_ATOMIC | AttrMask::MIN_RNR_TIMER
                } else {
                    base
                }
            }
        };
        let av = (self.qp.qp_type != QpType::Ud).then_some(Av {
            dgid: remote.gid,
            traffic_class: o.traffic_class,
        });
        self.qp.modify(&a, mask, av)?;
        Ok(RtrQp {
            qp: self.qp,
            psn: self.psn,
            opts: self.opts,
        })
    }
}

impl RtrQp {
    /// The QP.
    pub fn qp(&self) -> &Qp {
        &self.qp
    }

    /// RTR → RTS: the QP can send.
    ///
    /// # Errors
    /// `ibv_modify_qp` errors.
    pub fn ready_to_send(self) -> Result<Qp> {
        let o = self.opts;
        let mut a = QpAttr {
            qp_state: QpState::Rts,
            sq_psn: self.psn,
            ..QpAttr::default()
        };
        let mut mask = AttrMask::STATE | AttrMask::SQ_PSN;
        if self.qp.qp_type == QpType::Rc {
            a.timeout = o.timeout;
            a.retry_cnt = o.retry_cnt;
            a.rnr_retry = o.rnr_retry;
            a.max_rd_atomic = o.rd_atomic;
            mask = mask
                | AttrMask::TIMEOUT
                | AttrMask::RETRY_CNT
                | AttrMask::RNR_RETRY
                | AttrMask::MAX_QP_RD_ATOMIC;
        }
        self.qp.modify(&a, mask, None)?;
        Ok(self.qp)
    }
}

impl Qp {
    /// QP number.
    pub fn qpn(&self) -> u32 {
        self.qpn
    }

    /// Transport.
    pub fn qp_type(&self) -> QpType {
        self.qp_type
    }

    /// The PD.
    pub fn pd(&self) -> &Arc<Pd> {
        &self.pd
    }

    /// RESET → INIT with `opts` (access flags for RC/UC, Q_Key for UD);
    /// starts the typed bring-up.
    ///
    /// # Errors
    /// `ibv_modify_qp` errors (the QP is destroyed with `self`).
    pub fn into_init(self, opts: ConnectOpts) -> Result<InitQp> {
        let a = QpAttr {
            qp_state: QpState::Init,
            qp_access_flags: opts.access,
            qkey: opts.qkey,
            port_num: 1,
            pkey_index: 0,
            ..QpAttr::default()
        };
        let mask = AttrMask::STATE
            | AttrMask::PKEY_INDEX
            | AttrMask::PORT
            | if self.qp_type == QpType::Ud {
                AttrMask::QKEY
            } else {
                AttrMask::ACCESS_FLAGS
            };
        self.modify(&a, mask, None)?;
        Ok(InitQp {
            qp: self,
            psn: random_psn(),
            opts,
        })
    }

    /// `ibv_modify_qp`, validated like `ib_modify_qp_is_ok` first. `av` is
    /// the primary path for `AttrMask::AV`: the destination GID and the
    /// traffic class (a [`Gid`] converts with class 0).
    ///
    /// # Errors
    /// `EINVAL` (kernel layer) for a transition or mask the table refuses,
    /// or the provider's error.
    pub fn modify(&self, attr: &QpAttr, mask: AttrMask, av: Option<Av>) -> Result<()> {
        let (cur_attr, _) = self.pd.ctx.ops.query_qp(self.qpn)?;
        let cur = cur_attr.qp_state;
        let next = if mask.contains(AttrMask::STATE) {
            attr.qp_state
        } else {
            cur
        };
        if !modify_is_ok(cur, next, self.qp_type, mask) {
            return Err(Error {
                verb: "ibv_modify_qp",
                errno: Errno::EINVAL,
                layer: Layer::Kernel,
                detail: format!(
                    "ib_modify_qp_is_ok refused {:?} QP {cur:?} -> {next:?} with mask {mask:?}",
                    self.qp_type
                ),
                bad_wr: None,
            });
        }
        if mask.contains(AttrMask::AV) && av.is_none() {
            return Err(Error::application(
                "ibv_modify_qp",
                Errno::EINVAL,
                "AttrMask::AV without a destination GID",
            ));
        }
        self.pd.ctx.ops.modify_qp(self.qpn, attr, mask, av)
    }

    /// `ibv_query_qp`.
    ///
    /// # Errors
    /// Provider errors.
    pub fn query(&self) -> Result<(QpAttr, QpInit)> {
        self.pd.ctx.ops.query_qp(self.qpn)
    }

    /// Current state.
    ///
    /// # Errors
    /// Provider errors.
    pub fn state(&self) -> Result<QpState> {
        Ok(self.query()?.0.qp_state)
    }

    /// `ibv_post_send` of a list (for UD, `wr.ud.ah` is an [`Ah::handle`]).
    ///
    /// # Safety
    /// For `inline` requests each SGE's `[addr, addr + length)` must be
    /// readable for the duration of the call. For the others the SGEs name
    /// registered memory, whose lifetime the registration already covers;
    /// the application must not read bytes a READ/atomic/receive is still
    /// writing (wait for the completion).
    ///
    /// # Errors
    /// [`Error`] with `bad_wr` naming the first WR not posted.
    pub unsafe fn post_send(&self, reqs: &[SendRequest]) -> Result<()> {
        // SAFETY: forwarded from this function's contract.
        unsafe { self.pd.ctx.ops.post_send(self.qpn, reqs) }
    }

    /// `ibv_post_send` of non-inline WRs (safe: every byte they touch is in
    /// registered memory, validated by the NIC).
    ///
    /// # Errors
    /// [`Error`] with `bad_wr` naming the first WR not posted.
    pub fn post_send_wrs(&self, wrs: &[SendWr]) -> Result<()> {
        let reqs: Vec<SendRequest> = wrs
            .iter()
            .map(|w| SendRequest {
                wr: w.clone(),
                inline: false,
            })
            .collect();
        // SAFETY: no request is inline.
        unsafe { self.post_send(&reqs) }
    }

    /// `ibv_post_recv` of a list.
    ///
    /// # Errors
    /// [`Error`] with `bad_wr` naming the first WR not posted.
    pub fn post_recv(&self, wrs: &[RecvWr]) -> Result<()> {
        self.pd.ctx.ops.post_recv(self.qpn, wrs)
    }

    fn one(&self, wr_id: u64, op: SendOp, sges: Vec<Sge>, ud: Option<UdDest>) -> Result<()> {
        let mut wr = SendWr::new(wr_id, op, sges);
        wr.ud = ud;
        self.post_send_wrs(&[wr])
    }

    /// Posts a signaled SEND of `buf[range]`.
    ///
    /// # Errors
    /// As [`Qp::post_send`].
    pub fn send(&self, wr_id: u64, buf: &MrBuf, range: Range<usize>) -> Result<()> {
        let s = sge0(buf, range)?;
        self.one(wr_id, SendOp::Send, vec![s], None)
    }

    /// Posts a signaled inline SEND of `data` (copied during the call).
    ///
    /// # Errors
    /// `EINVAL` when `data` exceeds `max_inline_data`.
    pub fn send_inline(&self, wr_id: u64, data: &[u8]) -> Result<()> {
        let sge = Sge {
            addr: data.as_ptr() as u64,
            length: u32::try_from(data.len()).unwrap_or(u32::MAX),
            lkey: 0,
        };
        let req = SendRequest {
            wr: SendWr::new(wr_id, SendOp::Send, vec![sge]),
            inline: true,
        };
        // SAFETY: the SGE covers exactly `data`, borrowed for this call.
        unsafe { self.post_send(&[req]) }
    }

    /// Posts a signaled UD SEND of `buf[range]` to `remote_qpn` via `ah`.
    ///
    /// # Errors
    /// As [`Qp::post_send`].
    pub fn send_ud(
        &self,
        wr_id: u64,
        ah: &Ah,
        remote_qpn: u32,
        qkey: u32,
        buf: &MrBuf,
        range: Range<usize>,
    ) -> Result<()> {
        let s = sge0(buf, range)?;
        let ud = UdDest {
            ah: AddressHandle(ah.handle),
            remote_qpn,
            remote_qkey: qkey,
        };
        self.one(wr_id, SendOp::Send, vec![s], Some(ud))
    }

    /// Posts a signaled RDMA WRITE of `buf[range]` to `remote`.
    ///
    /// # Errors
    /// As [`Qp::post_send`].
    pub fn write(
        &self,
        wr_id: u64,
        buf: &MrBuf,
        range: Range<usize>,
        remote: RemoteBuf,
    ) -> Result<()> {
        let s = sge0(buf, range)?;
        self.one(
            wr_id,
            SendOp::Write {
                remote_addr: remote.addr,
                rkey: remote.rkey,
            },
            vec![s],
            None,
        )
    }

    /// Posts a signaled RDMA READ of `remote` into `buf[range]`.
    ///
    /// # Errors
    /// As [`Qp::post_send`].
    pub fn read(
        &self,
        wr_id: u64,
        buf: &MrBuf,
        range: Range<usize>,
        remote: RemoteBuf,
    ) -> Result<()> {
        let s = sge0(buf, range)?;
        self.one(
            wr_id,
            SendOp::Read {
                remote_addr: remote.addr,
                rkey: remote.rkey,
            },
            vec![s],
            None,
        )
    }

    /// Posts a fetch-and-add of `add` at `remote`; the original value lands
    /// in `buf[off..off + 8]`.
    ///
    /// # Errors
    /// As [`Qp::post_send`].
    pub fn fetch_add(
        &self,
        wr_id: u64,
        buf: &MrBuf,
        off: usize,
        remote: RemoteBuf,
        add: u64,
    ) -> Result<()> {
        let s = sge0(buf, off..off + 8)?;
        self.one(
            wr_id,
            SendOp::FetchAdd {
                remote_addr: remote.addr,
                rkey: remote.rkey,
                add,
            },
            vec![s],
            None,
        )
    }

    /// Posts a compare-and-swap at `remote`; the original value lands in
    /// `buf[off..off + 8]`.
    ///
    /// # Errors
    /// As [`Qp::post_send`].
    pub fn compare_swap(
        &self,
        wr_id: u64,
        buf: &MrBuf,
        off: usize,
        remote: RemoteBuf,
        compare: u64,
        swap: u64,
    ) -> Result<()> {
        let s = sge0(buf, off..off + 8)?;
        self.one(
            wr_id,
            SendOp::CompareSwap {
                remote_addr: remote.addr,
                rkey: remote.rkey,
                compare,
                swap,
            },
            vec![s],
            None,
        )
    }

    /// Posts a receive into `buf[range]`.
    ///
    /// # Errors
    /// As [`Qp::post_send`].
    pub fn recv(&self, wr_id: u64, buf: &MrBuf, range: Range<usize>) -> Result<()> {
        let s = sge0(buf, range)?;
        self.post_recv(&[RecvWr {
            wr_id,
            sg_list: vec![s],
        }])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_wire_round_trip_and_malformed_text() {
        let e = Endpoint {
            qpn: 0x11,
            gid: Gid::from_ipv4(std::net::Ipv4Addr::new(127, 1, 2, 3)),
            psn: 0xabcdef,
        };
        assert_eq!(e.to_wire(), "11:abcdef:00000000000000000000ffff7f010203");
        assert_eq!(Endpoint::from_wire(&e.to_wire()).unwrap(), e);
        for bad in [
            "",
            "11",
            "11:zz:00",
            "11:1:0000",
            "11:1:00000000000000000000ffff7f010203:9",
        ] {
            let err = Endpoint::from_wire(bad).unwrap_err();
            assert_eq!(
                (err.errno, err.layer),
                (Errno::EINVAL, Layer::Application),
                "{bad}"
            );
        }
    }

    /// A buffer whose deregistration fails must not be freed: the device
    /// may still DMA into it (issue 17). The MR is deregistered behind the
    /// buffer's back, so its own `ibv_dereg_mr` fails with EINVAL.
    #[test]
    fn mrbuf_close_reports_a_failed_dereg_and_leaks_the_memory() {
        let ctx = Context::open_soft(DeviceConfig::default()).unwrap();
        let pd = ctx.alloc_pd().unwrap();
        let mut buf = pd.alloc_buf(8192, Access::LOCAL_WRITE).unwrap();
        ctx.ops.dereg_mr(buf.mr().lkey()).unwrap();
        let err = buf.release().unwrap_err();
        assert_eq!((err.verb, err.errno), ("ibv_dereg_mr", Errno::EINVAL));
        assert!(err.detail.contains("8192 bytes"), "{}", err.detail);
        assert!(buf.mem.is_leaked(), "the memory must be kept, not freed");
        // Dropping afterwards neither deregisters again nor frees.
        drop(buf);

        let ok = pd.alloc_buf(4096, Access::LOCAL_WRITE).unwrap();
        ok.close().unwrap();
    }

    #[test]
    fn mr_close_reports_the_error_of_ibv_dereg_mr() {
        let ctx = Context::open_soft(DeviceConfig::default()).unwrap();
        let pd = ctx.alloc_pd().unwrap();
        let mut mem = vec![0u8; 4096];
        // SAFETY: `mem` outlives the MR and no reference to it is used
        // while it is registered.
        let mr = unsafe { pd.reg_mr(mem.as_mut_ptr(), mem.len(), Access::LOCAL_WRITE) }.unwrap();
        ctx.ops.dereg_mr(mr.lkey()).unwrap();
        assert_eq!(mr.close().unwrap_err().errno, Errno::EINVAL);
    }
}
