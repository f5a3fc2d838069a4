//! Addresses: which one the agent tests from, which one it announces, and
//! its host's name.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};

use super::AgentConfig;

/// The address this agent tests from toward `peer`: the listen address
/// when it is specific, else the source of the route toward `peer`.
pub(super) fn test_ip(cfg: &AgentConfig, peer: IpAddr) -> Result<Ipv4Addr, String> {
    if let IpAddr::V4(a) = cfg.listen.ip() {
        if !a.is_unspecified() {
            return Ok(a);
        }
    }
    route_source(peer)
}

/// The address an agent announces: `advertise` when given, else its own
/// listen address when specific, else the source of the route toward the
/// Slurm launch node (`launch_node`: SLURM_LAUNCH_NODE_IPADDR, read by the
/// caller).
///
/// # Errors
/// A wildcard listen address with neither, a launch node that is not an
/// address, or no route toward it.
pub fn advertised(
    advertise: Option<Ipv4Addr>,
    local: SocketAddr,
    launch_node: Option<&str>,
) -> Result<Ipv4Addr, String> {
    if let Some(ip) = advertise {
        return Ok(ip);
    }
    if let IpAddr::V4(ip) = local.ip() {
        if !ip.is_unspecified() {
            return Ok(ip);
        }
    }
    let toward = launch_node.ok_or_else(|| {
        "--announce with --listen 0.0.0.0 needs --advertise IP (or SLURM_LAUNCH_NODE_IPADDR)"
            .to_string()
    })?;
    let toward: IpAddr = toward
        .trim()
        .parse()
        .map_err(|_| format!("SLURM_LAUNCH_NODE_IPADDR={toward:?} is not an address"))?;
    route_source(toward)
}

/// The source address of the route toward `peer` (nothing is sent: a UDP
/// `connect` only picks the route).
///
/// # Errors
/// No route, or an IPv6 source.
pub fn route_source(peer: IpAddr) -> Result<Ipv4Addr, String> {
    let u = UdpSocket::bind("0.0.0.0:0").map_err(|e| format!("bind a UDP socket: {e}"))?;
    u.connect((peer, 9))
        .map_err(|e| format!("no route toward {peer}: {e}"))?;
    match u.local_addr() {
        Ok(SocketAddr::V4(a)) => Ok(*a.ip()),
        Ok(a) => Err(format!("route toward {peer} leaves from {a}, not IPv4")),
        Err(e) => Err(format!("getsockname: {e}")),
    }
}

/// This host's name (`uname -n`): an agent's default name.
pub fn hostname() -> String {
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_announced_address_is_the_flag_the_listen_address_or_the_route() {
        let any: SocketAddr = "0.0.0.0:1".parse().unwrap();
        let ip = Ipv4Addr::new(10, 0, 0, 7);
        assert_eq!(advertised(Some(ip), any, None), Ok(ip));
        assert_eq!(
            advertised(None, "10.0.0.8:1".parse().unwrap(), None),
            Ok(Ipv4Addr::new(10, 0, 0, 8))
        );
        assert!(advertised(None, any, None)
            .unwrap_err()
            .contains("needs --advertise"));
        assert_eq!(
            advertised(None, any, Some("x")).unwrap_err(),
            "SLURM_LAUNCH_NODE_IPADDR=\"x\" is not an address"
        );
        assert_eq!(
            advertised(None, any, Some("127.0.0.1")),
            Ok(Ipv4Addr::LOCALHOST)
        );
    }
}
