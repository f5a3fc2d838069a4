//! A proven coordinator's session: its requests, one at a time, until it
//! hangs up, breaks the protocol, or the agent stops.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use rdmakit_verbs::{Speed, Width};

use super::super::link;
use super::super::protocol::{AgentInfo, Conn, ProtoError, Reply, Request};
use super::measure::{run as run_test, serve};
use super::{AgentConfig, Event, Exit, Shared};

/// How often an idle session wakes to notice the agent stopping.
const SESSION_TICK: Duration = Duration::from_millis(250);

/// Serves `conn`, whose peer proved the token, until it ends; with
/// `once`, the agent then exits.
pub(super) fn run(mut conn: Conn, from: SocketAddr, sh: &Arc<Shared>) {
    let cfg = &sh.cfg;
    // The address the coordinator reached us on: the interface whose MTU
    // bounds the soft NIC's path MTU when we listen on 0.0.0.0.
    let local = conn.socket().local_addr().ok().map(|a| a.ip());
    (sh.log)(&Event::Coordinator {
        peer: from.to_string(),
    });
    sh.touch();
    loop {
        if sh.stopping.load(Ordering::SeqCst) {
            break;
        }
        let req: Request = match conn.recv(Some(SESSION_TICK), "a request") {
            Ok(r) => r,
            Err(ProtoError::Timeout { .. }) => continue,
            Err(ProtoError::Closed { .. }) => break,
            Err(e) => {
                (sh.log)(&Event::Refused {
                    peer: from.to_string(),
                    why: e.to_string(),
                });
                break;
            }
        };
        sh.touch();
        let r = match req {
            Request::Info => conn.send(&Reply::Info {
                info: info(cfg, local),
            }),
            Request::Shutdown => {
                let _ = conn.send(&Reply::Bye);
                sh.exit(Exit::Shutdown);
                break;
            }
            Request::Serve { id, spec, peer } => serve(&mut conn, sh, id, &spec, peer),
            Request::Run {
                id,
                spec,
                peer,
                server,
                ticket,
            } => run_test(&mut conn, sh, id, &spec, peer, server, &ticket),
        };
        sh.touch();
        if let Err(e) = r {
            if !matches!(e, ProtoError::Closed { .. }) {
                (sh.log)(&Event::Refused {
                    peer: from.to_string(),
                    why: e.to_string(),
                });
            }
            break;
        }
    }
    if cfg.once {
        sh.exit(Exit::CoordinatorGone);
    }
}

fn info(cfg: &AgentConfig, local: Option<IpAddr>) -> AgentInfo {
    let (device, port_rate_mbs, mtu) = match &cfg.device {
        None => ("soft0".to_string(), None, soft_mtu(cfg, local)),
        Some(d) => {
            let (rate, mtu) = port_rate_mtu(cfg.provider, d);
            (d.clone(), rate, mtu)
        }
    };
    AgentInfo {
        name: cfg.name.clone(),
        version: cfg.version.clone(),
        device,
        port_rate_mbs,
        mtu,
        max_size: cfg.max_size,
        max_test_seconds: cfg.max_test_seconds,
    }
}

/// Port 1's data rate in MB/s (2^20 bytes) from `ibv_query_port`'s active
/// width and speed, when the device reports them, and its active MTU.
fn port_rate_mtu(provider: rdmakit_verbs::ProviderChoice, dev: &str) -> (Option<f64>, Option<u32>) {
    let Ok(ctx) = rdmakit_verbs::open_device(provider, dev) else {
        return (None, None);
    };
    let Ok(p) = ctx.query_port(1) else {
        return (None, None);
    };
    let rate = port_gbps(p.active_width, p.active_speed).map(|g| g * 1e9 / 8.0 / 1_048_576.0);
    (rate, Some(p.active_mtu.bytes()))
}

/// The soft NIC's path MTU: what the interface holding the agent's address
/// carries (the listen address, else the one the coordinator reached);
/// unknown (no limit) when that cannot be read.
fn soft_mtu(cfg: &AgentConfig, local: Option<IpAddr>) -> Option<u32> {
    let ip = match (cfg.listen.ip(), local) {
        (IpAddr::V4(a), _) if !a.is_unspecified() => a,
        (_, Some(IpAddr::V4(a))) => a,
        _ => return None,
    };
    link::interface_mtu(ip).ok().map(link::path_mtu_for_netdev)
}

/// Data rate in Gb/s of an IB width × speed (the verbs encodings), after
/// line coding ([`Speed::data_gbps`]); None when either code is unknown.
pub fn port_gbps(width: u8, speed: u8) -> Option<f64> {
    let lanes = Width::from_code(width)?.lanes();
    Some(f64::from(lanes) * Speed::from_code(speed.into())?.data_gbps())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_rates() {
        // 4X EDR: 100 Gb/s of data; 4X QDR: 32 Gb/s after 8b/10b.
        assert_eq!(port_gbps(2, 32), Some(100.0));
        assert_eq!(port_gbps(2, 4), Some(32.0));
        assert_eq!(port_gbps(3, 4), None);
    }
}
