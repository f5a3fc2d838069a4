//! One rtnetlink (NETLINK_ROUTE) GET request and its answer, in the calling
//! thread's network namespace: bounded to [`MAX_REPLY`] bytes and a 5 s
//! silence.

use crate::netlink::msg::{self, Body, Message};
use crate::source::{netlink_exchange, Errno};

const NETLINK_ROUTE: isize = 0;
/// The most bytes of answer taken from the kernel for one request.
pub const MAX_REPLY: usize = 1 << 20;

const RTM_GETLINK: u16 = 18;
const IFLA_IFNAME: u16 = 3;
const IFLA_EXT_MASK: u16 = 29;
/// RTEXT_FILTER_SKIP_STATS: the link's counters are not wanted here.
const RTEXT_FILTER_SKIP_STATS: u32 = 1 << 3;

/// Sends `req` and returns the data messages of the answer.
///
/// # Errors
/// The kernel's errno from NLMSG_ERROR; ETIMEDOUT after 5 s of silence;
/// EFBIG past [`MAX_REPLY`]; EBADMSG for bytes that are not netlink or an
/// answer that ends without its ACK.
pub fn exchange(req: &[u8]) -> Result<Vec<Vec<u8>>, Errno> {
    let raw = netlink_exchange(NETLINK_ROUTE, req, MAX_REPLY)?;
    if raw.len() > MAX_REPLY {
        return Err(Errno::EFBIG);
    }
    answer_of(&raw)
}

/// The data messages of a raw answer (one or more datagrams, concatenated)
/// to a request sent with NLM_F_ACK: they end at the NLMSG_ERROR that is the
/// ACK (0) or the request's error (negative errno).
///
/// # Errors
/// The error's errno; EBADMSG when the bytes are not netlink or there is no
/// NLMSG_ERROR at all.
pub fn answer_of(raw: &[u8]) -> Result<Vec<Vec<u8>>, Errno> {
    let msgs = msg::parse_messages(raw).map_err(|_| Errno(libc::EBADMSG))?;
    let mut data = Vec::new();
    for Message { body, .. } in msgs {
        match body {
            Body::Data(d) => data.push(d),
            Body::Error(0) | Body::Done(0) => return Ok(data),
            Body::Error(e) | Body::Done(e) => return Err(Errno(e.saturating_neg())),
            Body::Other => {}
        }
    }
    Err(Errno(libc::EBADMSG))
}

/// Ok when the calling thread's network namespace has a netdev `ifname`
/// (RTM_GETLINK by name). Asked before any SIOCETHTOOL: the ioctl, given a
/// name no netdev has, makes the kernel try to load a module of that name
/// (`dev_load`), and reading must not change the host.
///
/// # Errors
/// ENODEV when there is none; the kernel's errno otherwise.
pub fn netdev_exists(ifname: &str) -> Result<(), Errno> {
    // struct ifinfomsg { u8 family, pad; u16 type; i32 index; u32 flags, change; }
    let req = msg::Request::new(RTM_GETLINK, msg::NLM_F_REQUEST | msg::NLM_F_ACK, 1)
        .family_header(&[0u8; 16])
        .u32(IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS)
        .string(IFLA_IFNAME, ifname)
        .build();
    exchange(&req).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nlmsg(kind: u16, payload: &[u8]) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&((16 + payload.len()) as u32).to_ne_bytes());
        m.extend_from_slice(&kind.to_ne_bytes());
        m.extend_from_slice(&[0; 10]);
        m.extend_from_slice(payload);
        m
    }

    #[test]
    fn an_error_reply_is_its_errno() {
        let err = nlmsg(2, &(-95i32).to_ne_bytes());
        assert_eq!(answer_of(&err), Err(Errno::EOPNOTSUPP));
        let mut ok = nlmsg(78, &[0, 21, 0, 0]);
        ok.extend(nlmsg(2, &0i32.to_ne_bytes()));
        assert_eq!(answer_of(&ok), Ok(vec![vec![0, 21, 0, 0]]));
    }

    #[test]
    fn short_or_unterminated_replies_are_ebadmsg() {
        let ok = nlmsg(78, &[0, 21, 0, 0]);
        assert_eq!(answer_of(&ok), Err(Errno(libc::EBADMSG)));
        assert_eq!(answer_of(&ok[..10]), Err(Errno(libc::EBADMSG)));
        let err = nlmsg(2, &[0xff]);
        assert_eq!(answer_of(&err), Err(Errno(libc::EBADMSG)));
        assert_eq!(answer_of(&[]), Err(Errno(libc::EBADMSG)));
    }

    #[test]
    fn a_netdev_that_does_not_exist_is_enodev_and_lo_exists() {
        assert_eq!(netdev_exists("rdmakitnonexis"), Err(Errno::ENODEV));
        assert_eq!(netdev_exists("lo"), Ok(()));
    }
}
