//! The largest RoCE path MTU an agent's link carries. On a real device it is
//! port 1's active MTU (`ibv_query_port`); on the soft NIC it follows from
//! the MTU of the interface holding the agent's address, as rxe derives its
//! active MTU from its netdev: the largest IB MTU that fits the netdev MTU
//! less 96 bytes of headers (Ethernet, IPv4, UDP, BTH, RETH, ICRC;
//! roce-wire.md). A test asks for `--mtu` and gets the smallest of that and
//! both agents' figures, as perftest lowers `-m` to the active MTU: a 4096
//! path MTU on a 1500-byte link loses every full packet, and every
//! bandwidth test then ends in RETRY_EXC_ERR.

use std::net::Ipv4Addr;

/// The IB path MTUs, largest first.
const PATH_MTUS: [u32; 5] = [4096, 2048, 1024, 512, 256];

/// The largest IB path MTU that fits a netdev MTU of `netdev_mtu` bytes.
pub fn path_mtu_for_netdev(netdev_mtu: u32) -> u32 {
    let room = netdev_mtu.saturating_sub(96);
    PATH_MTUS.into_iter().find(|&m| m <= room).unwrap_or(256)
}

/// The smallest of the requested MTU and the agents' link MTUs (an agent
/// that does not say is not a limit).
pub fn effective(requested: u32, a: Option<u32>, b: Option<u32>) -> u32 {
    [Some(requested), a, b]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(requested)
}

/// The MTU of the interface that holds `ip`, in the caller's network
/// namespace (`getifaddrs`, then `SIOCGIFMTU`; not sysfs, which a process
/// entered into a namespace with nsenter still sees from the host).
///
/// # Errors
/// No interface holds `ip`, or a call failed (its errno).
pub fn interface_mtu(ip: Ipv4Addr) -> Result<u32, String> {
    let name = interface_of(ip)?;
    // SAFETY: a plain socket(2) call; the descriptor is closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(format!(
            "socket for SIOCGIFMTU: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: ifreq is plain data; all zeroes is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(name.as_bytes()) {
        *d = *s as libc::c_char;
    }
    // SAFETY: fd is an open socket; req holds a NUL-terminated interface
    // name (interface_of keeps names under IFNAMSIZ) and room for the MTU.
    let rc = unsafe { libc::ioctl(fd, libc::SIOCGIFMTU, &mut req) };
    let err = std::io::Error::last_os_error();
    // SAFETY: fd was opened above and is closed once.
    unsafe { libc::close(fd) };
    if rc != 0 {
        return Err(format!("SIOCGIFMTU {name}: {err}"));
    }
    // SAFETY: SIOCGIFMTU filled the ifru_mtu member of the union.
    let mtu = unsafe { req.ifr_ifru.ifru_mtu };
    u32::try_from(mtu).map_err(|_| format!("SIOCGIFMTU {name}: MTU {mtu}"))
}

/// The name of the interface holding `ip` (any loopback address: the
/// loopback interface).
fn interface_of(ip: Ipv4Addr) -> Result<String, String> {
    let mut ifa: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills a list that we walk read-only and free once.
    unsafe {
        if libc::getifaddrs(&mut ifa) != 0 {
            return Err(format!("getifaddrs: {}", std::io::Error::last_os_error()));
        }
        let mut found = None;
        let mut cur = ifa;
        while !cur.is_null() {
            let a = (*cur).ifa_addr;
            if !a.is_null() && libc::c_int::from((*a).sa_family) == libc::AF_INET {
                let sin = &*a.cast::<libc::sockaddr_in>();
                let addr = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
                let flags = (*cur).ifa_flags;
                if addr == ip
                    || (ip.is_loopback() && flags & libc::IFF_LOOPBACK as libc::c_uint != 0)
                {
                    let name = std::ffi::CStr::from_ptr((*cur).ifa_name);
                    found = Some(name.to_string_lossy().into_owned());
                    break;
                }
            }
            cur = (*cur).ifa_next;
        }
        libc::freeifaddrs(ifa);
        match found {
            Some(n) if n.len() < libc::IFNAMSIZ => Ok(n),
            Some(n) => Err(format!("interface name {n:?} too long")),
            None => Err(format!("no interface holds {ip}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn netdev_mtus_map_as_rxe_does() {
        assert_eq!(path_mtu_for_netdev(1500), 1024);
        assert_eq!(path_mtu_for_netdev(2144), 2048);
        assert_eq!(path_mtu_for_netdev(4191), 2048);
        assert_eq!(path_mtu_for_netdev(4192), 4096);
        assert_eq!(path_mtu_for_netdev(9000), 4096);
        assert_eq!(path_mtu_for_netdev(65536), 4096);
        assert_eq!(path_mtu_for_netdev(300), 256);
    }

    #[test]
    fn the_smallest_limit_wins() {
        assert_eq!(effective(4096, None, None), 4096);
        assert_eq!(effective(4096, Some(1024), None), 1024);
        assert_eq!(effective(2048, Some(4096), Some(4096)), 2048);
        assert_eq!(effective(4096, Some(4096), Some(512)), 512);
    }

    #[test]
    fn loopback_has_an_mtu_and_a_foreign_address_has_none() {
        let lo = interface_mtu(Ipv4Addr::LOCALHOST).expect("lo's MTU");
        assert!(lo >= 1280, "lo MTU {lo}");
        assert!(interface_mtu(Ipv4Addr::new(192, 0, 2, 201))
            .unwrap_err()
            .contains("no interface holds 192.0.2.201"));
    }
}
