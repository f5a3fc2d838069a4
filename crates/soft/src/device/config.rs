//! How a soft device is set up ([`DeviceConfig`]), and the one place that
//! reads it from the environment ([`DeviceConfig::from_env`]); everything
//! below the edge takes the configuration.

use std::net::Ipv4Addr;
use std::path::PathBuf;

use rdmakit_proto::cc::Params;

use super::err;
use crate::attr::Limits;
use crate::cma::SoftTransport;
use crate::errno::{Errno, Origin, Result};
use crate::faults::{self, Plan};
use crate::net;

/// How a soft device is set up.
#[derive(Clone, Debug)]
pub struct DeviceConfig {
    /// Device name; default `"soft0"` ([`DeviceConfig::from_env`]:
    /// `RDMAKIT_SOFT_NAME`).
    pub name: Option<String>,
    /// The device's IPv4 address (its GID); default the host device: the
    /// host's first non-loopback address (or 127.0.0.1), shared by every
    /// context on the host (see [`crate::net`]) ([`DeviceConfig::from_env`]:
    /// `RDMAKIT_SOFT_ADDR`).
    pub addr: Option<Ipv4Addr>,
    /// UDP port; default 4791 (RoCEv2) ([`DeviceConfig::from_env`]:
    /// `RDMAKIT_SOFT_UDP_PORT`). Both
    /// ends must use the same port. A host whose kernel runs RoCE (rdma_rxe,
    /// a RoCE NIC) already listens on 0.0.0.0:4791.
    pub udp_port: u16,
    /// Resource limits.
    pub limits: Limits,
    /// MTU of the (virtual) netdev; the active path MTU follows from it.
    /// Default 4192 (active MTU 4096) ([`DeviceConfig::from_env`]:
    /// `RDMAKIT_SOFT_NETDEV_MTU`); on a
    /// real 1500-byte link use 1500 (active MTU 1024), as rxe derives it.
    pub netdev_mtu: u32,
    /// Faults to inject (packets, verb failures, the errno of an
    /// exhausted limit): none by default ([`DeviceConfig::from_env`]:
    /// `RDMAKIT_SOFT_FAULTS`, see [`crate::faults`]).
    pub faults: Plan,
    /// Busy-poll mode: `poll_cq` on an empty CQ also processes datagrams
    /// waiting on the socket in the caller's thread (lower latency); with
    /// `false` only the progress thread receives (event mode).
    pub busy_poll: bool,
    /// Share the device-wide resource registry with every process that
    /// opens a device of this name (see [`crate::registry`]); limits then
    /// count across processes. Default `true`.
    pub shared_registry: bool,
    /// A leaky driver: objects of a process that exits or dies without
    /// destroying them stay (counting against the limits: this user's own,
    /// for this user; every user's, for everyone, while root's option is on)
    /// until `rdmakit soft reclaim`, instead of going with the last holder
    /// of the context as the kernel's do — the exhausted-device case,
    /// for demonstrations and the doctor's tests. Default the device's
    /// option (`rdmakit soft leaky on`: root's for every user, else this
    /// user's own), else off ([`DeviceConfig::from_env`]:
    /// `RDMAKIT_SOFT_LEAKY=1` turns it on).
    pub leaky: Option<bool>,
    /// UDP segmentation offload (UDP_SEGMENT) when the kernel offers it.
    /// Default on ([`DeviceConfig::from_env`]: `RDMAKIT_SOFT_GSO=0` turns it
    /// off, so a capture on `lo` sees one datagram per packet).
    pub gso: bool,
    /// UDP receive coalescing (UDP_GRO) when the kernel offers it. Default
    /// on ([`DeviceConfig::from_env`]: `RDMAKIT_SOFT_GRO=0` turns it off).
    pub gro: bool,
    /// Send through a raw IPv4 socket when the process has CAP_NET_RAW.
    /// Default on ([`DeviceConfig::from_env`]: `RDMAKIT_SOFT_RAW_TX=0`
    /// turns it off).
    pub raw_tx: bool,
    /// The directory holding every user's registry directory
    /// (`rdmakit-soft.<uid>`, [`crate::userdir`]); None: the default
    /// base ([`crate::userdir::base`]) ([`DeviceConfig::from_env`]:
    /// `RDMAKIT_SOFT_REGISTRY_DIR`).
    pub registry_dir: Option<PathBuf>,
    /// How packets and RC data reach a peer on this host:
    /// [`SoftTransport::Auto`] (default) moves every packet to another soft
    /// context of this user on this host through a shared-memory ring and a
    /// large WRITE/SEND/READ on it with one cross-memory copy
    /// ([`crate::cma`]), [`SoftTransport::Udp`] sends every byte as
    /// datagrams ([`DeviceConfig::from_env`]: `RDMAKIT_SOFT_TRANSPORT`,
    /// `auto`/`udp`; `shm` and `cma` mean `auto`).
    pub transport: SoftTransport,
    /// Congestion control (DCQCN): mlx5's `rp_*`/`np_*` parameters and
    /// per-priority enables, mlx5's firmware defaults unless set
    /// ([`DeviceConfig::from_env`]: `RDMAKIT_SOFT_CC`, see
    /// [`parse_cc`]). Every QP of the device reads them.
    pub cc: Params,
}

/// The variable that sets congestion control parameters.
pub const CC_VAR: &str = "RDMAKIT_SOFT_CC";

/// Applies `spec` to `params`: parameters as `name=value` separated by
/// commas, spaces or newlines, in mlx5's names and units (`rp_ai_rate=0.5`,
/// `np_min_time_between_cnps=50`, `rp_enable_3=0`); `bottleneck=RATE`
/// (Mb/s, up to three decimals): every parameter from
/// [`Params::for_bottleneck`], the profile for a link that slow; and two
/// words: `off` (reaction and notification points off on every priority:
/// data leaves Not-ECT, no CNP is sent, CNPs are ignored) and `on` (both
/// on, on every priority). Applied in order; at most 64 items.
///
/// # Errors
/// A message naming the item and why ([`rdmakit_proto::cc::ParamError`]:
/// an unknown name, a value out of range with the range); `params` may be
/// partly changed.
pub fn parse_cc(params: &mut Params, spec: &str) -> std::result::Result<(), String> {
    let items: Vec<&str> = spec
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|t| !t.is_empty())
        .collect();
    if items.len() > 64 {
        return Err(format!("{} items; at most 64", items.len()));
    }
    for item in items {
        match item {
            "off" | "on" => {
                let v = if item == "on" { "1" } else { "0" };
                for p in 0..8 {
                    for side in ["rp", "np"] {
                        params
                            .set(&format!("{side}_enable_{p}"), v)
                            .map_err(|e| e.to_string())?;
                    }
                }
            }
            _ if item.starts_with("bottleneck=") => {
                let v = &item["bottleneck=".len()..];
                // Read as a rate parameter reads it (Mb/s, three decimals).
                let mut probe = Params::mlx5();
                probe
                    .set("rp_max_rate", v)
                    .ok()
                    .filter(|()| probe.rp_max_rate.kbps() > 0)
                    .ok_or_else(|| format!("bottleneck={v:?} is not a rate in Mb/s above 0"))?;
                *params = Params::for_bottleneck(probe.rp_max_rate);
            }
            _ => {
                let Some((name, value)) = item.split_once('=') else {
                    return Err(format!("{item:?} is not name=value, \"on\" or \"off\""));
                };
                params.set(name, value).map_err(|e| e.to_string())?;
            }
        }
    }
    Ok(())
}

impl DeviceConfig {
    /// The defaults with what the environment sets, read here once: the
    /// edges (the CLI, the shims, a program's `main`) call it and pass the
    /// configuration down. See [`DeviceConfig::from_vars`] for the variables.
    ///
    /// # Errors
    /// As [`DeviceConfig::from_vars`].
    pub fn from_env() -> Result<DeviceConfig> {
        DeviceConfig::from_vars(|k| std::env::var(k).ok())
    }

    /// The defaults with what `var` (a variable's value by name) sets:
    /// `RDMAKIT_SOFT_NAME`, `RDMAKIT_SOFT_ADDR`, `RDMAKIT_SOFT_UDP_PORT`,
    /// `RDMAKIT_SOFT_NETDEV_MTU`, `RDMAKIT_SOFT_FAULTS` (a fault plan:
    /// [`Plan::parse`]), `RDMAKIT_SOFT_LEAKY=1`, `RDMAKIT_SOFT_GSO=0`, `RDMAKIT_SOFT_GRO=0`,
    /// `RDMAKIT_SOFT_RAW_TX=0`, `RDMAKIT_SOFT_REGISTRY_DIR`,
    /// `RDMAKIT_SOFT_TRANSPORT` (`auto` or `udp`; `shm` and `cma`, old
    /// names, mean `auto`), `RDMAKIT_SOFT_CC` (congestion control
    /// parameters: [`parse_cc`]). An unset,
    /// empty or unusable value leaves the default: a port of 0 or not a
    /// number, an MTU below 352; an offload or
    /// raw-send switch is off only for exactly `0`.
    ///
    /// # Errors
    /// `EINVAL` for a malformed `RDMAKIT_SOFT_ADDR` (the error opening the
    /// device reported before), an unknown `RDMAKIT_SOFT_TRANSPORT`, or a
    /// `RDMAKIT_SOFT_CC` [`parse_cc`] refuses (its message names the
    /// parameter and the range), or a `RDMAKIT_SOFT_FAULTS` [`Plan::parse`]
    /// refuses (its message names the item and the column).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<DeviceConfig> {
        let d = DeviceConfig::default();
        let addr = match var("RDMAKIT_SOFT_ADDR") {
            Some(s) if !s.is_empty() => Some(s.trim().parse::<Ipv4Addr>().map_err(|_| {
                err(
                    "ibv_open_device",
                    Errno::EINVAL,
                    Origin::Library,
                    format!("RDMAKIT_SOFT_ADDR={s:?} is not an IPv4 address"),
                )
            })?),
            _ => None,
        };
        let transport = match var("RDMAKIT_SOFT_TRANSPORT") {
            Some(s) if !s.trim().is_empty() => SoftTransport::parse(&s).ok_or_else(|| {
                err(
                    "ibv_open_device",
                    Errno::EINVAL,
                    Origin::Library,
                    format!("RDMAKIT_SOFT_TRANSPORT={s:?} is not \"auto\" or \"udp\""),
                )
            })?,
            _ => SoftTransport::default(),
        };
        let mut cc = d.cc.clone();
        if let Some(spec) = var(CC_VAR) {
            parse_cc(&mut cc, &spec).map_err(|m| {
                err(
                    "ibv_open_device",
                    Errno::EINVAL,
                    Origin::Library,
                    format!("{CC_VAR}: {m}"),
                )
            })?;
        }
        let faults = match var(faults::VAR) {
            Some(spec) => Plan::parse(&spec).map_err(|e| {
                err(
                    "ibv_open_device",
                    Errno::EINVAL,
                    Origin::Library,
                    format!("{}: {e}", faults::VAR),
                )
            })?,
            None => Plan::default(),
        };
        let switch = |k: &str| var(k).map_or(true, |v| v != "0");
        Ok(DeviceConfig {
            transport,
            cc,
            name: var("RDMAKIT_SOFT_NAME"),
            addr,
            udp_port: var("RDMAKIT_SOFT_UDP_PORT")
                .and_then(|p| p.trim().parse().ok())
                .filter(|&p| p != 0)
                .unwrap_or(d.udp_port),
            netdev_mtu: var("RDMAKIT_SOFT_NETDEV_MTU")
                .and_then(|m| m.trim().parse().ok())
                .filter(|&m: &u32| m >= 256 + 96)
                .unwrap_or(d.netdev_mtu),
            faults,
            leaky: var("RDMAKIT_SOFT_LEAKY")
                .is_some_and(|v| matches!(v.trim(), "1" | "on" | "yes"))
                .then_some(true),
            gso: switch("RDMAKIT_SOFT_GSO"),
            gro: switch("RDMAKIT_SOFT_GRO"),
            raw_tx: switch("RDMAKIT_SOFT_RAW_TX"),
            registry_dir: var("RDMAKIT_SOFT_REGISTRY_DIR")
                .filter(|d| !d.is_empty())
                .map(PathBuf::from),
            ..d
        })
    }

    /// The configured device address: `addr`; None for the loopback device.
    ///
    /// # Errors
    /// None today (the address is parsed by [`DeviceConfig::from_env`]).
    pub fn configured_addr(&self) -> Result<Option<Ipv4Addr>> {
        Ok(self.addr)
    }

    /// The directory holding every user's registry directory:
    /// `registry_dir`, else the default base ([`crate::userdir::base`]).
    pub fn registry_root(&self) -> PathBuf {
        self.registry_dir
            .clone()
            .unwrap_or_else(crate::userdir::base)
    }

    /// The address the device will have (its GID's): the configured one,
    /// else the host device's ([`net::host_device_addr`]). Known before any
    /// open, like a netdev's address.
    ///
    /// # Errors
    /// As [`DeviceConfig::configured_addr`].
    pub fn device_addr(&self) -> Result<Ipv4Addr> {
        Ok(self
            .configured_addr()?
            .unwrap_or_else(net::host_device_addr))
    }
}

impl Default for DeviceConfig {
    fn default() -> DeviceConfig {
        DeviceConfig {
            name: None,
            addr: None,
            udp_port: net::ROCE_PORT,
            limits: Limits::default(),
            netdev_mtu: 4096 + 96,
            faults: Plan::default(),
            busy_poll: true,
            shared_registry: true,
            leaky: None,
            gso: true,
            gro: true,
            raw_tx: true,
            registry_dir: None,
            transport: SoftTransport::default(),
            cc: Params::mlx5(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(name, _)| *name == k)
                .map(|(_, v)| v.to_string())
        }
    }

    /// Every setting but the name is at its default.
    fn assert_defaults(c: &DeviceConfig) {
        assert_eq!(c.addr, None);
        assert_eq!(c.udp_port, net::ROCE_PORT);
        assert_eq!(c.netdev_mtu, 4096 + 96);
        assert!(c.faults.is_empty());
        assert_eq!(c.leaky, None);
        assert!(c.gso && c.gro && c.raw_tx);
        assert_eq!(c.registry_dir, None);
        assert_eq!(c.cc, Params::mlx5());
    }

    #[test]
    fn no_variables_give_the_defaults() {
        let c = DeviceConfig::from_vars(|_| None).unwrap();
        let d = DeviceConfig::default();
        assert_eq!(c.name, d.name);
        assert_defaults(&c);
    }

    #[test]
    fn every_variable_is_read() {
        let c = DeviceConfig::from_vars(vars(&[
            ("RDMAKIT_SOFT_NAME", "soft7"),
            ("RDMAKIT_SOFT_ADDR", " 10.0.0.2 "),
            ("RDMAKIT_SOFT_UDP_PORT", "4792"),
            ("RDMAKIT_SOFT_NETDEV_MTU", "1500"),
            ("RDMAKIT_SOFT_FAULTS", "exhaust errno=enospc; drop p=0.1"),
            ("RDMAKIT_SOFT_LEAKY", "1"),
            ("RDMAKIT_SOFT_GSO", "0"),
            ("RDMAKIT_SOFT_GRO", "0"),
            ("RDMAKIT_SOFT_RAW_TX", "0"),
            ("RDMAKIT_SOFT_REGISTRY_DIR", "/tmp/reg"),
            (
                "RDMAKIT_SOFT_CC",
                "rp_ai_rate=0.5, np_min_time_between_cnps=50\nrp_enable_3=0",
            ),
        ]))
        .unwrap();
        assert_eq!(c.cc.value("rp_ai_rate").as_deref(), Some("0.5"));
        assert_eq!(c.cc.np_min_time_between_cnps, 50);
        assert!(!c.cc.rp_enabled(3) && c.cc.rp_enabled(2) && c.cc.np_enabled(3));
        assert_eq!(c.name.as_deref(), Some("soft7"));
        assert_eq!(c.addr, Some(Ipv4Addr::new(10, 0, 0, 2)));
        assert_eq!(c.udp_port, 4792);
        assert_eq!(c.netdev_mtu, 1500);
        assert_eq!(c.faults.exhaust, Some(Errno::ENOSPC));
        assert_eq!(c.faults.packets.len(), 1);
        assert_eq!(c.leaky, Some(true));
        assert!(!c.gso && !c.gro && !c.raw_tx);
        assert_eq!(c.registry_dir, Some(PathBuf::from("/tmp/reg")));
    }

    #[test]
    fn congestion_control_off_and_on_cover_every_priority() {
        let off = DeviceConfig::from_vars(vars(&[("RDMAKIT_SOFT_CC", "off")])).unwrap();
        assert!((0..8).all(|p| !off.cc.rp_enabled(p) && !off.cc.np_enabled(p)));
        let mut p = off.cc.clone();
        parse_cc(&mut p, "on rp_enable_6=0").unwrap();
        assert!((0..8).all(|q| p.np_enabled(q) && p.rp_enabled(q) == (q != 6)));
        // A profile, then an override of one of its values.
        let mut p = Params::mlx5();
        parse_cc(&mut p, "bottleneck=10,rp_threshold=3").unwrap();
        let want = Params {
            rp_threshold: 3,
            ..Params::for_bottleneck(rdmakit_proto::cc::Rate::from_mbps(10))
        };
        assert_eq!(p, want);
        for bad in ["bottleneck=0", "bottleneck=fast", "bottleneck="] {
            let e = parse_cc(&mut Params::mlx5(), bad).unwrap_err();
            assert!(e.contains("not a rate"), "{bad}: {e}");
        }
    }

    /// A parameter written out of range, an unknown one, or an item that is
    /// not name=value fails the open with EINVAL naming the variable, the
    /// item and (from the parameter table) the range.
    #[test]
    fn a_bad_congestion_parameter_is_refused_by_name() {
        for (spec, says) in [
            ("rp_gd=16", "rp_gd"),
            ("rp_min_dec_fac=0", "rp_min_dec_fac"),
            ("np_cnp_dscp=64", "np_cnp_dscp"),
            ("rp_ai_rate=fast", "rp_ai_rate"),
            ("rp_nonsense=1", "rp_nonsense"),
            ("rp_ai_rate", "not name=value"),
        ] {
            let e = DeviceConfig::from_vars(vars(&[("RDMAKIT_SOFT_CC", spec)])).unwrap_err();
            assert_eq!(e.errno, Errno::EINVAL, "{spec}");
            let m = e.to_string();
            assert!(
                m.contains("RDMAKIT_SOFT_CC") && m.contains(says),
                "{spec}: {m}"
            );
        }
        let many = vec!["on"; 65].join(",");
        let e = DeviceConfig::from_vars(vars(&[("RDMAKIT_SOFT_CC", &many)])).unwrap_err();
        assert!(e.to_string().contains("at most 64"), "{e}");
    }

    /// A plan the grammar refuses fails the open with EINVAL naming the
    /// variable, the item and the column.
    #[test]
    fn a_bad_fault_plan_is_refused_by_item_and_column() {
        let e =
            DeviceConfig::from_vars(vars(&[("RDMAKIT_SOFT_FAULTS", "dup; drop p=7")])).unwrap_err();
        assert_eq!(e.errno, Errno::EINVAL);
        let m = e.to_string();
        assert!(m.contains("RDMAKIT_SOFT_FAULTS: item 2, column 11"), "{m}");
    }

    #[test]
    fn garbage_address_is_a_clear_error() {
        let e = DeviceConfig::from_vars(vars(&[("RDMAKIT_SOFT_ADDR", "10.0.0.300")])).unwrap_err();
        assert_eq!(e.errno, Errno::EINVAL);
        let text = e.to_string();
        assert!(text.contains("ibv_open_device"), "{text}");
        assert!(text.contains("RDMAKIT_SOFT_ADDR=\"10.0.0.300\""), "{text}");
    }

    #[test]
    fn the_transport_is_auto_udp_or_a_clear_error() {
        assert_eq!(
            DeviceConfig::from_vars(|_| None).unwrap().transport,
            SoftTransport::Auto
        );
        let udp = DeviceConfig::from_vars(vars(&[("RDMAKIT_SOFT_TRANSPORT", "udp")])).unwrap();
        assert_eq!(udp.transport, SoftTransport::Udp);
        let cma = DeviceConfig::from_vars(vars(&[("RDMAKIT_SOFT_TRANSPORT", "cma")])).unwrap();
        assert_eq!(
            cma.transport,
            SoftTransport::Auto,
            "the copy over UDP is gone: a copy takes the rings' channel"
        );
        let shm = DeviceConfig::from_vars(vars(&[("RDMAKIT_SOFT_TRANSPORT", "shm")])).unwrap();
        assert_eq!(shm.transport, SoftTransport::Auto, "the rings' old name");
        let e = DeviceConfig::from_vars(vars(&[("RDMAKIT_SOFT_TRANSPORT", "ring")])).unwrap_err();
        assert_eq!(e.errno, Errno::EINVAL);
        assert!(
            e.to_string().contains("RDMAKIT_SOFT_TRANSPORT=\"ring\""),
            "{e}"
        );
    }

    #[test]
    fn garbage_values_leave_the_documented_defaults() {
        let c = DeviceConfig::from_vars(vars(&[
            ("RDMAKIT_SOFT_ADDR", ""),
            ("RDMAKIT_SOFT_UDP_PORT", "0"),
            ("RDMAKIT_SOFT_NETDEV_MTU", "100"),
            ("RDMAKIT_SOFT_LEAKY", "maybe"),
            ("RDMAKIT_SOFT_GSO", "off?"),
            ("RDMAKIT_SOFT_GRO", ""),
            ("RDMAKIT_SOFT_RAW_TX", "00"),
            ("RDMAKIT_SOFT_REGISTRY_DIR", ""),
        ]))
        .unwrap();
        assert_defaults(&c);
        let c = DeviceConfig::from_vars(vars(&[("RDMAKIT_SOFT_UDP_PORT", "port")])).unwrap();
        assert_eq!(c.udp_port, net::ROCE_PORT);
    }
}
