//! Work-completion statuses: the names of rdma-core's `enum ibv_wc_status`
//! (without the `IBV_WC_` prefix) and the text `ibv_wc_status_str()` returns.

use core::ffi::CStr;

/// `(number, name without IBV_WC_, ibv_wc_status_str text)`, indexed by number.
pub const WC_STATUSES: [(u32, &str, &CStr); 24] = [
    (0, "SUCCESS", c"success"),
    (1, "LOC_LEN_ERR", c"local length error"),
    (2, "LOC_QP_OP_ERR", c"local QP operation error"),
    (3, "LOC_EEC_OP_ERR", c"local EE context operation error"),
    (4, "LOC_PROT_ERR", c"local protection error"),
    (5, "WR_FLUSH_ERR", c"Work Request Flushed Error"),
    (6, "MW_BIND_ERR", c"memory management operation error"),
    (7, "BAD_RESP_ERR", c"bad response error"),
    (8, "LOC_ACCESS_ERR", c"local access error"),
    (9, "REM_INV_REQ_ERR", c"remote invalid request error"),
    (10, "REM_ACCESS_ERR", c"remote access error"),
    (11, "REM_OP_ERR", c"remote operation error"),
    (12, "RETRY_EXC_ERR", c"transport retry counter exceeded"),
    (13, "RNR_RETRY_EXC_ERR", c"RNR retry counter exceeded"),
    (14, "LOC_RDD_VIOL_ERR", c"local RDD violation error"),
    (15, "REM_INV_RD_REQ_ERR", c"remote invalid RD request"),
    (16, "REM_ABORT_ERR", c"aborted error"),
    (17, "INV_EECN_ERR", c"invalid EE context number"),
    (18, "INV_EEC_STATE_ERR", c"invalid EE context state"),
    (19, "FATAL_ERR", c"fatal error"),
    (20, "RESP_TIMEOUT_ERR", c"response timeout error"),
    (21, "GENERAL_ERR", c"general error"),
    (22, "TM_ERR", c"TM error"),
    (23, "TM_RNDV_INCOMPLETE", c"TM software rendezvous"),
];

/// What `ibv_wc_status_str()` returns for a number outside the enum.
pub const UNKNOWN: &CStr = c"unknown";

/// The status name without the `IBV_WC_` prefix ("RETRY_EXC_ERR"), or `None`
/// for a number outside `enum ibv_wc_status`.
pub const fn name(status: u32) -> Option<&'static str> {
    let i = status as usize;
    if i < WC_STATUSES.len() {
        Some(WC_STATUSES[i].1)
    } else {
        None
    }
}

/// What `ibv_wc_status_str()` returns for a status of the enum ("transport
/// retry counter exceeded"), or `None` for a number outside it.
pub const fn text(status: u32) -> Option<&'static str> {
    let i = status as usize;
    if i >= WC_STATUSES.len() {
        return None;
    }
    match WC_STATUSES[i].2.to_str() {
        Ok(t) => Some(t),
        Err(_) => None,
    }
}

/// `ibv_wc_status_str(status)` as a C string: "unknown" outside the enum.
pub fn status_cstr(status: u32) -> &'static CStr {
    WC_STATUSES
        .get(status as usize)
        .map_or(UNKNOWN, |(_, _, t)| *t)
}

/// `ibv_wc_status_str(status)`: "transport retry counter exceeded", or
/// "unknown" outside the enum.
pub fn status_str(status: u32) -> &'static str {
    match text(status) {
        Some(t) => t,
        None => "unknown",
    }
}

/// The number of a status named "RETRY_EXC_ERR", "WC_RETRY_EXC_ERR" or
/// "IBV_WC_RETRY_EXC_ERR" (any case), or of the text `ibv_wc_status_str()`
/// returns ("transport retry counter exceeded", any case).
pub fn by_name(s: &str) -> Option<u32> {
    let t = s.trim();
    let upper = t.to_ascii_uppercase();
    let bare = upper
        .strip_prefix("IBV_WC_")
        .or_else(|| upper.strip_prefix("WC_"))
        .unwrap_or(&upper);
    WC_STATUSES
        .iter()
        .find(|(_, n, _)| *n == bare)
        .or_else(|| {
            WC_STATUSES
                .iter()
                .find(|(_, _, x)| x.to_str().is_ok_and(|x| x.eq_ignore_ascii_case(t)))
        })
        .map(|(n, _, _)| *n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexed_by_number_with_unique_ascii_names_and_texts() {
        for (i, (n, name, text)) in WC_STATUSES.iter().enumerate() {
            assert_eq!(*n as usize, i);
            assert!(text.to_str().is_ok_and(|t| t.is_ascii() && !t.is_empty()));
            assert!(name.bytes().all(|b| b.is_ascii_uppercase() || b == b'_'));
            assert_eq!(by_name(name), Some(*n));
            assert_eq!(by_name(&format!("IBV_WC_{name}")), Some(*n));
            assert_eq!(
                by_name(&format!("wc_{}", name.to_ascii_lowercase())),
                Some(*n)
            );
            assert_eq!(by_name(status_str(*n)), Some(*n));
        }
    }

    #[test]
    fn lookups_match_rdma_core() {
        assert_eq!(name(12), Some("RETRY_EXC_ERR"));
        assert_eq!(status_str(12), "transport retry counter exceeded");
        assert_eq!(status_str(5), "Work Request Flushed Error");
        assert_eq!(status_cstr(0), c"success");
        assert_eq!(text(13), Some("RNR retry counter exceeded"));
        assert_eq!(text(24), None);
        const RETRY: Option<&str> = name(12);
        assert_eq!(RETRY, Some("RETRY_EXC_ERR"));
        for n in [24, 99, u32::MAX] {
            assert_eq!(name(n), None);
            assert_eq!(status_str(n), "unknown");
            assert_eq!(status_cstr(n), c"unknown");
        }
        assert_eq!(by_name("no such status"), None);
    }
}
