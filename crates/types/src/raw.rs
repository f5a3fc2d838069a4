//! The numbers of libibverbs' enums: each enum here whose discriminants are
//! the C values (`enum ibv_qp_state`, `enum ibv_mtu`, `enum ibv_wc_status`,
//! `enum ibv_wc_opcode`) converts back from its `u32` with `TryFrom`, and
//! to it with `as u32`.

use crate::qp::{Mtu, QpState};
use crate::wr::{WcOpcode, WcStatus};

/// A number that is not a value of the C enum it was read as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvalidValue {
    /// The C enum or field (`"ibv_qp_state"`, `"path_mtu"` ...).
    pub what: &'static str,
    /// The number read.
    pub value: u32,
}

impl core::fmt::Display for InvalidValue {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{} is not a valid {}", self.value, self.what)
    }
}

impl std::error::Error for InvalidValue {}

impl WcStatus {
    /// Every status, in numeric order (0..=23).
    pub const ALL: [WcStatus; 24] = {
        use WcStatus::*;
        [
            Success,
            LocLenErr,
            LocQpOpErr,
            LocEecOpErr,
            LocProtErr,
            WrFlushErr,
            MwBindErr,
            BadRespErr,
            LocAccessErr,
            RemInvReqErr,
            RemAccessErr,
            RemOpErr,
            RetryExcErr,
            RnrRetryExcErr,
            LocRddViolErr,
            RemInvRdReqErr,
            RemAbortErr,
            InvEecnErr,
            InvEecStateErr,
            FatalErr,
            RespTimeoutErr,
            GeneralErr,
            TmErr,
            TmRndvIncomplete,
        ]
    };
}

impl WcOpcode {
    /// Every opcode this crate has a variant for, in numeric order.
    pub const ALL: [WcOpcode; 9] = {
        use WcOpcode::*;
        [
            Send,
            RdmaWrite,
            RdmaRead,
            CompSwap,
            FetchAdd,
            BindMw,
            LocalInv,
            Recv,
            RecvRdmaWithImm,
        ]
    };
}

const MTU: [Mtu; 5] = [
    Mtu::Mtu256,
    Mtu::Mtu512,
    Mtu::Mtu1024,
    Mtu::Mtu2048,
    Mtu::Mtu4096,
];

fn find<T: Copy>(
    all: &[T],
    value: u32,
    num: fn(T) -> u32,
    what: &'static str,
) -> Result<T, InvalidValue> {
    all.iter()
        .copied()
        .find(|v| num(*v) == value)
        .ok_or(InvalidValue { what, value })
}

/// `TryFrom<u32>` for C enums: the member of the list whose discriminant is
/// the number, else [`InvalidValue`] naming the C enum.
macro_rules! try_from_u32 {
    ($($(#[$doc:meta])* $t:ident in $all:expr, $what:literal;)*) => {
        $(
            impl TryFrom<u32> for $t {
                type Error = InvalidValue;
                $(#[$doc])*
                fn try_from(v: u32) -> Result<$t, InvalidValue> {
                    find(&$all, v, |x| x as u32, $what)
                }
            }
        )*
    };
}

try_from_u32! {
    /// `IBV_QPS_*` → state; UNKNOWN (7) and anything else is an error.
    QpState in QpState::ALL, "ibv_qp_state";
    /// `IBV_MTU_*` (1..=5) → MTU.
    Mtu in MTU, "ibv_mtu";
    /// `IBV_WC_*` status (0..=23) → status.
    WcStatus in WcStatus::ALL, "ibv_wc_status";
    /// `IBV_WC_*` opcode → opcode; TSO (7), ATOMIC_WRITE (9) and anything
    /// this crate has no variant for are errors.
    WcOpcode in WcOpcode::ALL, "ibv_wc_opcode";
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every value converts back to itself; the numbers around and
    /// between the valid ones are errors naming the enum.
    #[test]
    fn enums_round_trip_through_their_c_numbers() {
        for s in QpState::ALL {
            assert_eq!(QpState::try_from(s as u32), Ok(s));
        }
        for m in MTU {
            assert_eq!(Mtu::try_from(m as u32), Ok(m));
        }
        for (i, s) in WcStatus::ALL.iter().enumerate() {
            assert_eq!(*s as usize, i, "WcStatus::ALL is in numeric order");
            assert_eq!(WcStatus::try_from(*s as u32), Ok(*s));
        }
        for o in WcOpcode::ALL {
            assert_eq!(WcOpcode::try_from(o as u32), Ok(o));
        }
        let bad = |what, value| InvalidValue { what, value };
        assert_eq!(QpState::try_from(7).unwrap_err(), bad("ibv_qp_state", 7));
        assert_eq!(Mtu::try_from(0).unwrap_err(), bad("ibv_mtu", 0));
        assert_eq!(Mtu::try_from(6).unwrap_err(), bad("ibv_mtu", 6));
        assert_eq!(
            WcStatus::try_from(24).unwrap_err(),
            bad("ibv_wc_status", 24)
        );
        assert_eq!(WcOpcode::try_from(7).unwrap_err(), bad("ibv_wc_opcode", 7));
        assert_eq!(
            WcOpcode::try_from(127).unwrap_err(),
            bad("ibv_wc_opcode", 127)
        );
        assert_eq!(
            WcOpcode::try_from(130).unwrap_err(),
            bad("ibv_wc_opcode", 130)
        );
        assert_eq!(
            InvalidValue {
                what: "ibv_mtu",
                value: 9
            }
            .to_string(),
            "9 is not a valid ibv_mtu"
        );
    }
}
