//! Hardware layer: devices, ports, rates, PCIe, RoCE GIDs and MTU, sysfs values.

use super::{kernel_lacks_rdma, netdev, port_netdev, port_subject};
use crate::checks::{Ctx, Outcome};
use crate::codes::{Code, Severity};
use crate::finding::{Evidence, Finding};
use rdmakit_host::model::{Device, DeviceKind, Gid, ModuleState, PcieLink, Port};
use rdmakit_host::parse::sysfs::{self, GidType, LinkLayer};

pub(crate) fn no_devices(cx: &Ctx) -> Option<Outcome> {
    if kernel_lacks_rdma(cx.facts) {
        return Some(Outcome::NotApplicable(
            "the kernel has no RDMA support (RDK-K001)".into(),
        ));
    }
    if cx.facts.devices.is_empty() {
        return Some(Outcome::NotApplicable("no RDMA device".into()));
    }
    None
}

pub fn present(cx: &Ctx) -> Outcome {
    let f = cx.facts;
    if kernel_lacks_rdma(f) {
        return Outcome::NotApplicable("the kernel has no RDMA support (RDK-K001)".into());
    }
    match &f.kernel.ib_class {
        Ok(v) if v.is_empty() => {}
        Ok(_) => return Outcome::pass(),
        Err(_) if !f.covers("sys") => {
            return Outcome::NotChecked("the source holds no /sys".into())
        }
        // Absent although ib_core is loaded: the sources disagree (RDK-K011 says
        // which), so neither answer can be trusted.
        Err(_)
            if matches!(
                f.modules.state("ib_core"),
                rdmakit_host::model::ModuleState::Loaded
                    | rdmakit_host::model::ModuleState::BuiltIn
            ) =>
        {
            return Outcome::NotChecked(
                "/sys/class/infiniband is absent although ib_core is loaded: the sources \
                 disagree (RDK-K011)"
                    .into(),
            )
        }
        // ib_core not loaded: RDK-K002 says so.
        Err(_) => {
            return Outcome::NotApplicable(
                "/sys/class/infiniband is absent (ib_core not loaded)".into(),
            )
        }
    }
    if super::all_devices_hidden(f) {
        return Outcome::NotApplicable(
            "devices are registered, in another network namespace (RDK-K012)".into(),
        );
    }
    let nics: Vec<String> = f
        .netdevs
        .iter()
        .filter(|n| n.name != "lo")
        .map(|n| {
            format!(
                "{} ({})",
                n.name,
                n.driver.as_deref().unwrap_or("driver unknown")
            )
        })
        .collect();
    let mut fd = Finding::new(
        Code::H001,
        "host",
        "the kernel supports RDMA but no RDMA device is registered",
    )
    .evidence(Evidence::new("/sys/class/infiniband", "empty"));
    if !nics.is_empty() {
        fd = fd.evidence(Evidence::new("/sys/class/net", nics.join(", ")));
    }
    // A software RDMA driver loaded without a device: its link was never created
    // (or was deleted); that, not a hardware driver, is the fix.
    let soft = [("rdma_rxe", "rxe"), ("siw", "siw")]
        .into_iter()
        .find(|(m, _)| f.modules.state(m) == ModuleState::Loaded);
    let netdev = f
        .netdevs
        .iter()
        .find(|n| n.name != "lo" && n.operstate.get().is_some_and(|s| s == "up"))
        .map_or("<if>", |n| n.name.as_str());
    if let Some((m, kind)) = soft {
        fd = fd.evidence(Evidence::new(
            f.modules.proc_modules.path.clone(),
            format!("{m}: loaded"),
        ));
        return Outcome::Findings(vec![fd
            .remedy(format!(
                "{m} is loaded but no {kind} device exists: a software RDMA device exists only \
                 after 'rdma link add' (and 'rdma link delete' or a reboot removes it). Create \
                 it on the Ethernet netdev that carries the RDMA traffic: rdma link add \
                 {kind}0 type {kind} netdev {netdev}; make it persistent with a systemd unit \
                 or a network-up hook."
            ))
            .next(format!(
                "rdma link add {kind}0 type {kind} netdev {netdev} && rdma link show"
            ))
            .next("ip -br link; ip -4 -br addr")]);
    }
    Outcome::Findings(vec![fd
        .remedy(format!(
            "Load the RDMA driver of the NIC (mlx5_ib, bnxt_re, irdma, efa, ...) and check \
             dmesg for its probe errors. With no RDMA NIC, create a Soft-RoCE device on an \
             Ethernet netdev: modprobe rdma_rxe; rdma link add rxe0 type rxe netdev {netdev}."
        ))
        .next("rdma link show; lspci -nn | grep -iE 'infiniband|ethernet'")
        .next("dmesg | grep -iE 'mlx5|bnxt|irdma|efa|rxe'")])
}

fn phys_hint(port: &Port, dev: &Device, cx: &Ctx) -> String {
    let state = port.state.get();
    let phys = port.phys_state.get();
    let roce = port.is_roce();
    let nd = port_netdev(dev, port);
    let nd_state = nd
        .as_deref()
        .and_then(|n| netdev(cx.facts, n))
        .and_then(|n| n.operstate.get().cloned());
    if roce {
        if let (Some(n), Some(s)) = (&nd, &nd_state) {
            if s != "up" {
                return format!(
                    "Its netdev {n} is {s}: bring it up (ip link set dev {n} up) and check the \
                     cable/switch port; a RoCE port follows its netdev."
                );
            }
        }
    }
    match (state.map(|s| s.code), phys.map(|p| p.code)) {
        (Some(2), Some(5)) if !roce => "The physical link is up but no subnet manager has \
            configured the port (INIT): start opensm on a host of this fabric (systemctl start \
            opensm) or enable the switch's SM; sm_lid 0 confirms no SM was seen."
            .into(),
        (Some(3), _) => "The port is ARMED: the subnet manager is still bringing it up; if it \
            stays ARMED, check the SM log."
            .into(),
        (_, Some(3)) => "The port is disabled: enable it (ibportstate <lid> <port> enable on IB, \
            ip link set dev <if> up on RoCE)."
            .into(),
        (_, Some(2)) => "The port is polling for a link partner: check the cable, transceiver \
            and the switch port (ibstat shows the same; the link LEDs tell which end is off)."
            .into(),
        (_, Some(6)) => "The link is in error recovery: check the cable and transceiver, and \
            the symbol_error / link_error_recovery counters."
            .into(),
        _ => "Check the cable, transceiver and switch port, then the driver's messages in dmesg."
            .into(),
    }
}

pub fn port_state(cx: &Ctx) -> Outcome {
    if let Some(o) = no_devices(cx) {
        return o;
    }
    let mut out = Vec::new();
    let mut unknown = 0;
    let mut total = 0;
    for d in &cx.facts.devices {
        for p in &d.ports {
            total += 1;
            let Some(state) = p.state.get() else {
                unknown += 1;
                continue;
            };
            // Some captures print "4: ACTIVE" as phys_state (no such physical state;
            // the name still says the link is up).
            let phys_up = p
                .phys_state
                .get()
                .is_none_or(|ps| ps.is_link_up() || ps.name.eq_ignore_ascii_case("active"));
            if state.is_active() && phys_up {
                continue;
            }
            let phys = p
                .phys_state
                .get()
                .map_or_else(|| p.phys_state.shown(), |ps| ps.name.clone());
            let mut fd = Finding::new(
                Code::H002,
                port_subject(d, p),
                if state.is_active() {
                    format!(
                        "{} port {} is {} but its physical state is {phys}",
                        d.name, p.num, state.name
                    )
                } else {
                    format!(
                        "{} port {} is {} (physical state {phys})",
                        d.name, p.num, state.name
                    )
                },
            )
            .attr(&p.state)
            .attr(&p.phys_state)
            .attr(&p.link_layer);
            if p.is_roce() {
                if let Some(n) = port_netdev(d, p).and_then(|n| netdev(cx.facts, &n)) {
                    fd = fd.attr(&n.operstate);
                }
            } else if !p.sm_lid.is_missing() {
                fd = fd.attr(&p.sm_lid);
            }
            out.push(
                fd.remedy(phys_hint(p, d, cx))
                    .next(format!("rdma link show {}/{}", d.name, p.num))
                    .next(format!("ibv_devinfo -d {} -i {}", d.name, p.num)),
            );
        }
    }
    if unknown > 0 && unknown == total {
        return Outcome::NotChecked("no port state could be read".into());
    }
    Outcome::Findings(out)
}

pub fn port_rate(cx: &Ctx) -> Outcome {
    if let Some(o) = no_devices(cx) {
        return o;
    }
    let mut out = Vec::new();
    for d in &cx.facts.devices {
        for p in &d.ports {
            let Some(rate) = p.rate.get() else { continue };
            if !p.state.get().is_some_and(|s| s.is_active()) {
                continue; // a down port's rate means nothing; RDK-H002 covers it
            }
            let subject = port_subject(d, p);
            if let Some(want) = cx.cfg.expect_rate_gbps {
                if rate.gbps < want * 0.95 {
                    out.push(
                        Finding::new(
                            Code::H003,
                            subject.clone(),
                            format!(
                                "{subject} runs at {} Gb/s; {want} Gb/s was expected",
                                rate.gbps
                            ),
                        )
                        .attr(&p.rate)
                        .remedy(
                            "Check the cable and transceiver rating, the switch port's \
                             configured speed, and the link width (a lane down halves or \
                             quarters the rate); reseat or replace the cable.",
                        )
                        .next(format!(
                            "ibv_devinfo -v -d {} -i {} | grep -E 'active_(width|speed)'",
                            d.name, p.num
                        )),
                    );
                    continue;
                }
            }
            if rate.gbps == 0.0 {
                out.push(
                    Finding::new(Code::H003, subject.clone(), format!("{subject} is ACTIVE with rate 0"))
                        .attr(&p.rate)
                        .remedy("The driver reports no speed for an active link: check the netdev speed (ethtool) and the driver's messages.")
                        .next("ethtool <netdev>"),
                );
                continue;
            }
            if matches!(p.link_layer.known(), Some(LinkLayer::InfiniBand))
                && rate.width == Some(1)
                && d.kind != DeviceKind::Software
            {
                out.push(
                    Finding::new(
                        Code::H003,
                        subject.clone(),
                        format!(
                            "{subject} trained at 1X width ({}); InfiniBand ports and cables are \
                             normally 4X (2X for HDR100/NDR200), so lanes may be down",
                            rate.raw
                        ),
                    )
                    .attr(&p.rate)
                    .attr(&p.link_layer)
                    .remedy(
                        "Unless this is a 1X split port by design, reseat or replace the cable \
                         and check the switch port; compare active_width with the port's \
                         supported widths.",
                    )
                    .next(format!(
                        "ibv_devinfo -v -d {} -i {} | grep -E 'active_(width|speed)'",
                        d.name, p.num
                    ))
                    .next("iblinkinfo (needs ib_umad)"),
                );
                continue;
            }
            if p.is_roce() {
                let nd = port_netdev(d, p).and_then(|n| netdev(cx.facts, &n));
                if let Some(n) = nd {
                    if let Some(speed) = n.speed.get().filter(|s| **s > 0) {
                        let net_gbps = *speed as f64 / 1000.0;
                        if rate.gbps < net_gbps * 0.95 {
                            out.push(
                                Finding::new(
                                    Code::H003,
                                    subject.clone(),
                                    format!(
                                        "{subject} reports {} Gb/s but its netdev {} runs at {net_gbps} Gb/s",
                                        rate.gbps, n.name
                                    ),
                                )
                                .attr(&p.rate)
                                .attr(&n.speed)
                                .remedy("The RDMA rate should follow the Ethernet link: reload the RDMA driver after the link settles, and check for a driver/firmware mismatch.")
                                .next(format!("ethtool {}", n.name)),
                            );
                        }
                    }
                }
            }
        }
    }
    Outcome::Findings(out)
}

fn link_bw(l: &PcieLink, current: bool) -> Option<(f64, u8)> {
    let (s, w) = if current {
        (&l.current_speed, &l.current_width)
    } else {
        (&l.max_speed, &l.max_width)
    };
    let gts = s.get()?.gts?;
    let width = *w.get()?;
    (width > 0).then_some((gts, width))
}

fn link_text(l: &PcieLink, current: bool) -> String {
    match link_bw(l, current) {
        Some((gts, w)) => format!("{gts} GT/s x{w}"),
        None => "unknown".into(),
    }
}

pub fn pcie(cx: &Ctx) -> Outcome {
    if let Some(o) = no_devices(cx) {
        return o;
    }
    let f = cx.facts;
    let pci: Vec<&Device> = f.devices.iter().filter(|d| d.pci.is_some()).collect();
    if pci.is_empty() {
        return if f.devices.iter().all(|d| d.kind == DeviceKind::Software) {
            Outcome::NotApplicable("software devices only: no PCIe link".into())
        } else {
            Outcome::NotChecked("no PCI device link in the source".into())
        };
    }
    let mut out = Vec::new();
    for d in pci {
        let Some(p) = &d.pci else { continue };
        let (Some(cur), Some(max)) = (link_bw(&p.link, true), link_bw(&p.link, false)) else {
            continue;
        };
        let mut fd: Option<Finding> = None;
        if cur.0 < max.0 - 0.01 || cur.1 < max.1 {
            fd = Some(
                Finding::new(
                    Code::H004,
                    format!("{} ({})", d.name, p.bdf),
                    format!(
                        "{} PCIe link runs at {} but the device supports {}",
                        d.name,
                        link_text(&p.link, true),
                        link_text(&p.link, false)
                    ),
                )
                .attr(&p.link.current_speed)
                .attr(&p.link.current_width)
                .attr(&p.link.max_speed)
                .attr(&p.link.max_width),
            );
        }
        // The path is only as fast as its slowest hop.
        for hop in &p.upstream {
            let Some(hc) = link_bw(&hop.link, true) else {
                continue;
            };
            if hc.0 * f64::from(hc.1) < max.0 * f64::from(max.1) - 0.01
                && (hc.0 < cur.0 - 0.01 || hc.1 < cur.1)
            {
                let f0 = fd.take().unwrap_or_else(|| {
                    Finding::new(
                        Code::H004,
                        format!("{} ({})", d.name, p.bdf),
                        format!(
                            "{} sits behind {} whose link runs at {}, below the device's {}",
                            d.name,
                            hop.bdf,
                            link_text(&hop.link, true),
                            link_text(&p.link, false)
                        ),
                    )
                });
                fd = Some(
                    f0.attr(&hop.link.current_speed)
                        .attr(&hop.link.current_width),
                );
            }
        }
        if let Some(fd) = fd {
            out.push(
                fd.remedy(
                    "Move the card to a slot wired for its full width and generation, check \
                     BIOS PCIe settings (link speed forced to a lower Gen, bifurcation), and \
                     reseat it; a link that trained down after an error recovers only on reset.",
                )
                .next(format!("lspci -vvv -s {} | grep -E 'LnkCap|LnkSta'", p.bdf)),
            );
        }
    }
    Outcome::Findings(out)
}

/// The RoCE ports to check, or why there are none.
fn roce_ports<'a>(cx: &Ctx<'a>) -> Result<Vec<(&'a Device, &'a Port)>, Outcome> {
    if let Some(o) = no_devices(cx) {
        return Err(o);
    }
    let ports: Vec<_> = cx
        .facts
        .devices
        .iter()
        .flat_map(|d| d.ports.iter().map(move |p| (d, p)))
        .filter(|(_, p)| p.is_roce())
        .collect();
    if ports.is_empty() {
        return Err(Outcome::NotApplicable(
            "no RoCE (Ethernet link layer) port".into(),
        ));
    }
    Ok(ports)
}

fn gid_line(g: &Gid) -> String {
    let t = match g.gid_type.known() {
        Some(t) => t.name().to_string(),
        None => g.gid_type.shown(),
    };
    format!(
        "[{}] {} {} {}",
        g.index,
        g.gid,
        t,
        g.ndev.text().unwrap_or("-")
    )
}

pub fn roce_gids(cx: &Ctx) -> Outcome {
    let ports = match roce_ports(cx) {
        Ok(p) => p,
        Err(o) => return o,
    };
    let mut out = Vec::new();
    let mut read = 0;
    for (d, p) in ports {
        // A source without the port's gids/ (a partial capture) says nothing about it.
        if p.gid_slots == 0 {
            continue;
        }
        read += 1;
        let subject = port_subject(d, p);
        let table = Evidence::new(
            format!("{}/gids + gid_attrs", p.path),
            if p.gids.is_empty() {
                "no non-zero GID".to_string()
            } else {
                p.gids.iter().map(gid_line).collect::<Vec<_>>().join("; ")
            },
        );
        let v2: Vec<&Gid> = p
            .gids
            .iter()
            .filter(|g| matches!(g.gid_type.known(), Some(GidType::RoceV2)))
            .collect();
        if v2.is_empty() {
            out.push(
                Finding::new(
                    Code::H005,
                    subject.clone(),
                    format!(
                        "{subject} has no RoCE v2 GID: routable RoCE (UDP 4791) cannot be used"
                    ),
                )
                .evidence(table)
                .remedy(
                    "RoCE v2 GIDs appear when the netdev has an IP address: assign one \
                         (ip addr add <ip>/<len> dev <if>); check the default RoCE mode in \
                         /sys/kernel/config/rdma_cm/<dev>/ports/<n>/default_roce_mode.",
                )
                .next(format!("rdma link show {}/{}; ip addr show", d.name, p.num)),
            );
            continue;
        }
        let wanted = cx.cfg.netdev.as_deref();
        let on_wanted = |g: &&Gid| wanted.is_none_or(|w| g.ndev.get().is_some_and(|n| n == w));
        let v4: Vec<&Gid> = v2
            .iter()
            .copied()
            .filter(|g| sysfs::gid_ipv4(&g.gid).is_some())
            .filter(on_wanted)
            .collect();
        if v4.is_empty() {
            let on = wanted.map_or(String::new(), |w| format!(" on {w}"));
            let nd = wanted
                .map(str::to_string)
                .or_else(|| port_netdev(d, p))
                .unwrap_or_else(|| "<if>".into());
            out.push(
                Finding::new(
                    Code::H006,
                    subject.clone(),
                    format!("{subject} has no IPv4-mapped RoCE v2 GID{on}"),
                )
                .evidence(table.clone())
                .remedy(format!(
                    "Assign an IPv4 address to the netdev{on} (ip addr add <ip>/<len> dev {nd}); \
                     the kernel adds the IPv4-mapped GIDs (::ffff:<ip>) at once. Most RoCE \
                     deployments (and NCCL/perftest defaults) address peers by IPv4."
                ))
                .next(format!("ip -4 addr show dev {nd}")),
            );
        }
        let pick = v4.first().copied().or_else(|| {
            v2.iter()
                .copied()
                .find(|g| !sysfs::gid_is_link_local(&g.gid) && on_wanted(g))
        });
        if let Some(g) = pick {
            out.push(
                Finding::new(
                    Code::H007,
                    subject.clone(),
                    format!(
                        "use GID index {} ({}, RoCE v2, {})",
                        g.index,
                        sysfs::gid_ipv4(&g.gid).map_or(g.gid.to_string(), |a| a.to_string()),
                        g.ndev.text().unwrap_or("netdev unknown")
                    ),
                )
                .evidence(table)
                .remedy(format!(
                    "Pass it explicitly: ib_write_bw -x {i}, ibv_rc_pingpong -g {i}, \
                     NCCL_IB_GID_INDEX={i}, UCX_IB_GID_INDEX={i}. A wrong index shows up later as \
                     timeouts and RETRY_EXC_ERR (work completion status 12).",
                    i = g.index
                ))
                .next(format!(
                    "ibv_devinfo -v -d {} -i {} | grep GID",
                    d.name, p.num
                )),
            );
        }
    }
    if read == 0 {
        return Outcome::NotChecked("no RoCE port's GID table (gids/) is in the source".into());
    }
    Outcome::Findings(out)
}

/// The largest IB MTU a RoCE port gets from a netdev MTU (96 bytes of worst-case
/// headers are subtracted).
pub fn roce_active_mtu(netdev_mtu: u32) -> u32 {
    let room = netdev_mtu.saturating_sub(96);
    [4096, 2048, 1024, 512, 256]
        .into_iter()
        .find(|m| *m <= room)
        .unwrap_or(0)
}

pub fn roce_mtu(cx: &Ctx) -> Outcome {
    let ports = match roce_ports(cx) {
        Ok(p) => p,
        Err(o) => return o,
    };
    let mut out = Vec::new();
    let mut checked = 0;
    for (d, p) in ports {
        let Some(n) = port_netdev(d, p).and_then(|n| netdev(cx.facts, &n)) else {
            continue;
        };
        let Some(mtu) = n.mtu.get() else { continue };
        checked += 1;
        let active = roce_active_mtu(*mtu);
        if active >= 4096 {
            continue;
        }
        let subject = port_subject(d, p);
        let mut fd = Finding::new(
            Code::H008,
            subject.clone(),
            format!(
                "{subject} active MTU is {active} because {} has MTU {mtu}",
                n.name
            ),
        )
        .attr(&n.mtu)
        .remedy(format!(
            "For 4096-byte RDMA MTU, set the netdev MTU to at least 4200 (9000 is usual) on {} \
             and on every switch port in the path: ip link set dev {} mtu 9000. rdmakit sees \
             only this host: a connection runs at the smaller active MTU of its two ends, so \
             check the peer's netdev MTU too (ibv_devinfo there shows its active_mtu).",
            n.name, n.name
        ))
        .next(format!(
            "ip link show {}; ibv_devinfo -d {} -i {} | grep mtu",
            n.name, d.name, p.num
        ));
        if active < 1024 {
            fd = fd.severity(Severity::Warning);
        }
        out.push(fd);
    }
    if checked == 0 {
        return Outcome::NotChecked("no RoCE port's netdev MTU could be read".into());
    }
    Outcome::Findings(out)
}

pub fn values(cx: &Ctx) -> Outcome {
    let out = cx
        .facts
        .unrecognized
        .iter()
        .map(|u| {
            Finding::new(
                Code::H009,
                u.path.clone(),
                format!(
                    "unrecognized {} \"{}\"; checks that need it treat it as unknown",
                    u.what,
                    u.value.escape_default()
                ),
            )
            .evidence(Evidence::new(u.path.clone(), u.value.clone()))
            .remedy(
                "Usually a driver printing a placeholder or a format newer than rdmakit \
                 knows; report it with the bundle from rdmakit collect.",
            )
            .next(format!("cat {}", u.path))
        })
        .collect();
    Outcome::Findings(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roce_mtu_from_netdev_mtu() {
        assert_eq!(roce_active_mtu(1500), 1024);
        assert_eq!(roce_active_mtu(9000), 4096);
        assert_eq!(roce_active_mtu(4200), 4096);
        assert_eq!(roce_active_mtu(2200), 2048);
        assert_eq!(roce_active_mtu(68), 0);
    }
}
