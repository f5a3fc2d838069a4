//! QP states, attributes and the modify-QP validation table.
//!
//! [`modify_is_ok`] mirrors the Linux kernel's `ib_modify_qp_is_ok`
//! (drivers/infiniband/core/verbs.c): a transition is valid when the table
//! has an entry for (current, next), the attribute mask holds every required
//! bit for the QP type, and nothing outside required ∪ optional ∪ STATE.

use core::fmt;

/// QP state (values are `enum ibv_qp_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QpState {
    /// 0: freshly created or reset.
    Reset = 0,
    /// 1: initialised; receives may be posted.
    Init = 1,
    /// 2: ready to receive.
    Rtr = 2,
    /// 3: ready to send.
    Rts = 3,
    /// 4: send queue drained / draining.
    Sqd = 4,
    /// 5: send queue error (UC/UD only).
    Sqe = 5,
    /// 6: error; every outstanding work request is flushed.
    Err = 6,
}

impl QpState {
    /// All states, in numeric order.
    pub const ALL: [QpState; 7] = [
        QpState::Reset,
        QpState::Init,
        QpState::Rtr,
        QpState::Rts,
        QpState::Sqd,
        QpState::Sqe,
        QpState::Err,
    ];
}

/// Transport service of a QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QpType {
    /// Reliable connected.
    Rc,
    /// Unreliable connected.
    Uc,
    /// Unreliable datagram.
    Ud,
}

/// `enum ibv_qp_attr_mask` bits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AttrMask(pub u32);

#[allow(missing_docs)]
impl AttrMask {
    pub const STATE: AttrMask = AttrMask(1 << 0);
    pub const CUR_STATE: AttrMask = AttrMask(1 << 1);
    pub const EN_SQD_ASYNC_NOTIFY: AttrMask = AttrMask(1 << 2);
    pub const ACCESS_FLAGS: AttrMask = AttrMask(1 << 3);
    pub const PKEY_INDEX: AttrMask = AttrMask(1 << 4);
    pub const PORT: AttrMask = AttrMask(1 << 5);
    pub const QKEY: AttrMask = AttrMask(1 << 6);
    pub const AV: AttrMask = AttrMask(1 << 7);
    pub const PATH_MTU: AttrMask = AttrMask(1 << 8);
    pub const TIMEOUT: AttrMask = AttrMask(1 << 9);
    pub const RETRY_CNT: AttrMask = AttrMask(1 << 10);
    pub const RNR_RETRY: AttrMask = AttrMask(1 << 11);
    pub const RQ_PSN: AttrMask = AttrMask(1 << 12);
    pub const MAX_QP_RD_ATOMIC: AttrMask = AttrMask(1 << 13);
    pub const ALT_PATH: AttrMask = AttrMask(1 << 14);
    pub const MIN_RNR_TIMER: AttrMask = AttrMask(1 << 15);
    pub const SQ_PSN: AttrMask = AttrMask(1 << 16);
    pub const MAX_DEST_RD_ATOMIC: AttrMask = AttrMask(1 << 17);
    pub const PATH_MIG_STATE: AttrMask = AttrMask(1 << 18);
    pub const CAP: AttrMask = AttrMask(1 << 19);
    pub const DEST_QPN: AttrMask = AttrMask(1 << 20);
    pub const RATE_LIMIT: AttrMask = AttrMask(1 << 25);

    /// What RC's RESET→INIT requires (IBTA table 91, `ib_modify_qp_is_ok`).
    pub const RC_INIT: AttrMask =
        AttrMask(Self::STATE.0 | Self::PKEY_INDEX.0 | Self::PORT.0 | Self::ACCESS_FLAGS.0);
    /// What RC's INIT→RTR requires.
    pub const RC_RTR: AttrMask = AttrMask(
        Self::STATE.0
            | Self::AV.0
            | Self::PATH_MTU.0
            | Self::DEST_QPN.0
            | Self::RQ_PSN.0
            | Self::MAX_DEST_RD_ATOMIC.0
            | Self::MIN_RNR_TIMER.0,
    );
    /// What RC's RTR→RTS requires.
    pub const RC_RTS: AttrMask = AttrMask(
        Self::STATE.0
            | Self::TIMEOUT.0
            | Self::RETRY_CNT.0
            | Self::RNR_RETRY.0
            | Self::SQ_PSN.0
            | Self::MAX_QP_RD_ATOMIC.0,
    );

    /// The empty mask.
    pub const fn empty() -> AttrMask {
        AttrMask(0)
    }
    /// Every bit of `other` is set in `self`.
    pub const fn contains(self, other: AttrMask) -> bool {
        self.0 & other.0 == other.0
    }
    /// Some bit of `other` is set in `self`.
    pub const fn intersects(self, other: AttrMask) -> bool {
        self.0 & other.0 != 0
    }
    /// Union.
    pub const fn or(self, other: AttrMask) -> AttrMask {
        AttrMask(self.0 | other.0)
    }
}

impl core::ops::BitOr for AttrMask {
    type Output = AttrMask;
    fn bitor(self, rhs: AttrMask) -> AttrMask {
        AttrMask(self.0 | rhs.0)
    }
}

impl fmt::Debug for AttrMask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AttrMask({:#x})", self.0)
    }
}

/// IB path MTU (`enum ibv_mtu`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mtu {
    /// 256 bytes.
    Mtu256 = 1,
    /// 512 bytes.
    Mtu512 = 2,
    /// 1024 bytes.
    Mtu1024 = 3,
    /// 2048 bytes.
    Mtu2048 = 4,
    /// 4096 bytes.
    Mtu4096 = 5,
}

impl Mtu {
    /// Payload bytes per packet.
    pub const fn bytes(self) -> u32 {
        128 << (self as u32)
    }
}

/// Access flags (`enum ibv_access_flags`) of a memory region or of a QP.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Access(pub u32);

#[allow(missing_docs)]
impl Access {
    pub const LOCAL_WRITE: Access = Access(1 << 0);
    pub const REMOTE_WRITE: Access = Access(1 << 1);
    pub const REMOTE_READ: Access = Access(1 << 2);
    pub const REMOTE_ATOMIC: Access = Access(1 << 3);
    /// An MR's permission to have memory windows bound onto it.
    pub const MW_BIND: Access = Access(1 << 4);
    /// No rights beyond local read.
    pub const fn empty() -> Access {
        Access(0)
    }
    /// Every remote right plus local write.
    pub const fn all() -> Access {
        Access(0xf)
    }
    /// Every bit of `other` is set in `self`.
    pub const fn contains(self, other: Access) -> bool {
        self.0 & other.0 == other.0
    }
}

impl core::ops::BitOr for Access {
    type Output = Access;
    fn bitor(self, rhs: Access) -> Access {
        Access(self.0 | rhs.0)
    }
}

impl fmt::Debug for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Access({:#x})", self.0)
    }
}

/// Opaque address handle: where the caller should send a packet (for RC/UC
/// the QP's primary path set with [`AttrMask::AV`]; for UD the WR's AH).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct AddressHandle(pub u32);

/// Attributes for `ibv_modify_qp` (`rdmakit_proto::Qp::modify`) (`struct ibv_qp_attr`); only the
/// fields selected by the mask are read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QpAttr {
    /// Target state (`STATE`).
    pub qp_state: QpState,
    /// Asserted current state (`CUR_STATE`).
    pub cur_qp_state: QpState,
    /// Path MTU (`PATH_MTU`).
    pub path_mtu: Mtu,
    /// Q_Key (`QKEY`).
    pub qkey: u32,
    /// Expected receive PSN (`RQ_PSN`).
    pub rq_psn: u32,
    /// First send PSN (`SQ_PSN`).
    pub sq_psn: u32,
    /// Remote QPN (`DEST_QPN`).
    pub dest_qp_num: u32,
    /// Remote rights this QP accepts (`ACCESS_FLAGS`).
    pub qp_access_flags: Access,
    /// P_Key table index (`PKEY_INDEX`).
    pub pkey_index: u16,
    /// Port (`PORT`).
    pub port_num: u8,
    /// Primary path (`AV`).
    pub ah: AddressHandle,
    /// Local ACK timeout exponent, 0..=31 (`TIMEOUT`).
    pub timeout: u8,
    /// Transport retries, 0..=7 with 7 = infinite (`RETRY_CNT`).
    pub retry_cnt: u8,
    /// RNR retries, 0..=7 with 7 = infinite (`RNR_RETRY`).
    pub rnr_retry: u8,
    /// RNR NAK timer code sent by this responder, 0..=31 (`MIN_RNR_TIMER`).
    pub min_rnr_timer: u8,
    /// Outstanding READ/atomic this requester may have (`MAX_QP_RD_ATOMIC`).
    pub max_rd_atomic: u8,
    /// READ/atomic resources of this responder (`MAX_DEST_RD_ATOMIC`).
    pub max_dest_rd_atomic: u8,
    /// `EN_SQD_ASYNC_NOTIFY`.
    pub en_sqd_async_notify: bool,
}

impl Default for QpAttr {
    fn default() -> QpAttr {
        QpAttr {
            qp_state: QpState::Reset,
            cur_qp_state: QpState::Reset,
            path_mtu: Mtu::Mtu1024,
            qkey: 0,
            rq_psn: 0,
            sq_psn: 0,
            dest_qp_num: 0,
            qp_access_flags: Access::empty(),
            pkey_index: 0,
            port_num: 1,
            ah: AddressHandle(0),
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 12,
            max_rd_atomic: 1,
            max_dest_rd_atomic: 1,
            en_sqd_async_notify: false,
        }
    }
}

/// Required and optional masks of one transition, per QP type.
struct Rule {
    req: [u32; 3],
    opt: [u32; 3],
}

const fn idx(t: QpType) -> usize {
    match t {
        QpType::Rc => 0,
        QpType::Uc => 1,
        QpType::Ud => 2,
    }
}

const NONE: Rule = Rule {
    req: [0; 3],
    opt: [0; 3],
};

// Short names for the table below.
const ST: u32 = AttrMask::CUR_STATE.0;
const SQD_N: u32 = AttrMask::EN_SQD_ASYNC_NOTIFY.0;
const ACC: u32 = AttrMask::ACCESS_FLAGS.0;
const PKI: u32 = AttrMask::PKEY_INDEX.0;
const PORT: u32 = AttrMask::PORT.0;
const QKEY: u32 = AttrMask::QKEY.0;
const AV: u32 = AttrMask::AV.0;
const MTU: u32 = AttrMask::PATH_MTU.0;
const TMO: u32 = AttrMask::TIMEOUT.0;
const RTY: u32 = AttrMask::RETRY_CNT.0;
const RNR: u32 = AttrMask::RNR_RETRY.0;
const RQPSN: u32 = AttrMask::RQ_PSN.0;
const MAXRD: u32 = AttrMask::MAX_QP_RD_ATOMIC.0;
const ALT: u32 = AttrMask::ALT_PATH.0;
const MINRNR: u32 = AttrMask::MIN_RNR_TIMER.0;
const SQPSN: u32 = AttrMask::SQ_PSN.0;
const MAXDRD: u32 = AttrMask::MAX_DEST_RD_ATOMIC.0;
const MIG: u32 = AttrMask::PATH_MIG_STATE.0;
const DQPN: u32 = AttrMask::DEST_QPN.0;

/// The transition rule for (cur, next), `None` when the transition is invalid.
fn rule(cur: QpState, next: QpState) -> Option<Rule> {
    use QpState::*;
    Some(match (cur, next) {
        (_, Reset) => NONE,
        (Reset, Err) => return None,
        (_, Err) => NONE,
        (Reset, Init) => Rule {
            req: [PKI | PORT | ACC, PKI | PORT | ACC, PKI | PORT | QKEY],
            opt: [0; 3],
        },
        (Init, Init) => Rule {
            req: [0; 3],
            opt: [PKI | PORT | ACC, PKI | PORT | ACC, PKI | PORT | QKEY],
        },
        (Init, Rtr) => Rule {
            req: [
                AV | MTU | DQPN | RQPSN | MAXDRD | MINRNR,
                AV | MTU | DQPN | RQPSN,
                0,
            ],
            opt: [ALT | ACC | PKI, ALT | ACC | PKI, PKI | QKEY],
        },
        (Rtr, Rts) => Rule {
            req: [TMO | RTY | RNR | SQPSN | MAXRD, SQPSN, SQPSN],
            opt: [
                ST | ALT | ACC | MINRNR | MIG,
                ST | ALT | ACC | MIG,
                ST | QKEY,
            ],
        },
        (Rts, Rts) | (Sqd, Rts) => Rule {
            req: [0; 3],
            opt: [
                ST | ACC | ALT | MIG | MINRNR,
                ST | ACC | ALT | MIG,
                ST | QKEY,
            ],
        },
        (Rts, Sqd) => Rule {
            req: [0; 3],
            opt: [SQD_N; 3],
        },
        (Sqd, Sqd) => Rule {
            req: [0; 3],
            opt: [
                PORT | AV | TMO | RTY | RNR | MAXRD | MAXDRD | ALT | ACC | PKI | MINRNR | MIG,
                AV | ALT | ACC | PKI | MIG,
                PKI | QKEY,
            ],
        },
        (Sqe, Rts) => Rule {
            // RC never enters SQE; a zero "valid" marker is handled below.
            req: [u32::MAX, 0, 0],
            opt: [0, ST | ACC, ST | QKEY],
        },
        _ => return None,
    })
}

/// `ib_modify_qp_is_ok`: may a QP of type `qp_type` in state `cur` go to
/// `next` with attribute `mask`? (`STATE` must be in the mask for a change of
/// state; a mask without `STATE` modifies attributes in place, `cur == next`.)
pub fn modify_is_ok(cur: QpState, next: QpState, qp_type: QpType, mask: AttrMask) -> bool {
    if mask.contains(AttrMask::CUR_STATE)
        && !matches!(
            cur,
            QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe
        )
    {
        return false;
    }
    let Some(r) = rule(cur, next) else {
        return false;
    };
    let t = idx(qp_type);
    let req = r.req[t];
    if req == u32::MAX {
        return false;
    }
    let opt = r.opt[t];
    let m = mask.0 & !AttrMask::STATE.0;
    m & req == req && m & !(req | opt) == 0
}

/// The mask a bring-up passes for `cur → next` on a QP of `qp_type`: STATE
/// and every attribute the table requires (RESET→INIT, INIT→RTR, RTR→RTS);
/// `None` when the transition is invalid for the type.
pub fn required_mask(cur: QpState, next: QpState, qp_type: QpType) -> Option<AttrMask> {
    let req = rule(cur, next)?.req[idx(qp_type)];
    (req != u32::MAX).then_some(AttrMask(req | AttrMask::STATE.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn required_masks_pass_and_every_bit_is_needed() {
        use QpState::*;
        for t in [QpType::Rc, QpType::Uc, QpType::Ud] {
            for (cur, next) in [(Reset, Init), (Init, Rtr), (Rtr, Rts)] {
                let m = required_mask(cur, next, t).unwrap();
                assert!(modify_is_ok(cur, next, t, m), "{t:?} {cur:?}->{next:?}");
                for bit in 1..32 {
                    let b = AttrMask(1 << bit);
                    if m.contains(b) {
                        let without = AttrMask(m.0 & !b.0);
                        assert!(!modify_is_ok(cur, next, t, without), "{t:?} {b:?}");
                    }
                }
            }
        }
        assert_eq!(
            required_mask(Rtr, Rts, QpType::Uc),
            Some(AttrMask::STATE | AttrMask::SQ_PSN)
        );
        assert_eq!(required_mask(Sqe, Rts, QpType::Rc), None);
        assert_eq!(required_mask(Reset, Rts, QpType::Rc), None);
    }

    #[test]
    fn mtu_bytes() {
        assert_eq!(Mtu::Mtu256.bytes(), 256);
        assert_eq!(Mtu::Mtu4096.bytes(), 4096);
    }

    #[test]
    fn rc_bring_up_masks() {
        let s = AttrMask::STATE;
        let init = s | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::ACCESS_FLAGS;
        assert!(modify_is_ok(
            QpState::Reset,
            QpState::Init,
            QpType::Rc,
            init
        ));
        assert!(!modify_is_ok(
            QpState::Reset,
            QpState::Init,
            QpType::Ud,
            init
        ));
        let rtr = s
            | AttrMask::AV
            | AttrMask::PATH_MTU
            | AttrMask::DEST_QPN
            | AttrMask::RQ_PSN
            | AttrMask::MAX_DEST_RD_ATOMIC
            | AttrMask::MIN_RNR_TIMER;
        assert!(modify_is_ok(QpState::Init, QpState::Rtr, QpType::Rc, rtr));
        // UC does not accept the RC-only attributes.
        assert!(!modify_is_ok(QpState::Init, QpState::Rtr, QpType::Uc, rtr));
        assert!(!modify_is_ok(QpState::Sqe, QpState::Rts, QpType::Rc, s));
        assert!(modify_is_ok(QpState::Sqe, QpState::Rts, QpType::Uc, s));
        assert!(!modify_is_ok(QpState::Reset, QpState::Err, QpType::Rc, s));
        assert!(modify_is_ok(QpState::Rts, QpState::Err, QpType::Rc, s));
        assert!(!modify_is_ok(
            QpState::Rts,
            QpState::Err,
            QpType::Rc,
            s | AttrMask::QKEY
        ));
    }
}
