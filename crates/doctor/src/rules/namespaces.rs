//! Kernel layer: RDMA devices and network namespaces (RDK-K012).
//!
//! In `rdma system` exclusive netns mode, an RDMA device is visible (sysfs
//! `/sys/class/infiniband`, RDMA netlink, `ibv_get_device_list`) only in the network
//! namespace it belongs to; the uverbs class (`/sys/class/infiniband_verbs`) and
//! `/dev/infiniband` are not namespaced, so a device of another namespace still
//! leaves its uverbs entry behind. Found on Debian 12's 6.1 kernel with rxe (VM tier,
//! plan `faults`, scenarios `netns_exclusive_*`): rxe cannot move (`rdma dev set rxe0
//! netns NAME` answers EOPNOTSUPP: it has no disassociate support), so a process in
//! any other namespace sees no device at all.

use super::{hidden_devices, listing};
use crate::checks::{Ctx, Outcome};
use crate::codes::Code;
use crate::finding::{Evidence, Finding};
use rdmakit_host::model::HostFacts;

/// The netns mode RDMA netlink reported: Some(true) exclusive, Some(false) shared.
fn exclusive(f: &HostFacts) -> Option<bool> {
    f.netlink.sys.as_ref().ok()?.netns_mode.map(|m| m == 0)
}

fn mode_evidence(f: &HostFacts) -> Evidence {
    Evidence::new(
        "netlink RDMA_NLDEV_CMD_SYS_GET netns mode",
        match exclusive(f) {
            Some(true) => "exclusive",
            Some(false) => "shared",
            None => "<unknown>",
        },
    )
}

const MOVE: &str = "rdma dev set <dev> netns <name> (from the namespace the device is in; \
                    only drivers that can disassociate user contexts allow it, e.g. mlx5, \
                    mlx4, hns: rxe and siw answer EOPNOTSUPP)";

pub fn netns(cx: &Ctx) -> Outcome {
    let f = cx.facts;
    let hidden = hidden_devices(f);
    let mode = exclusive(f);
    let own = f.namespaces.own_net.get();
    let init = f.namespaces.init_net.get();
    let mut out = Vec::new();
    if !hidden.is_empty() {
        match mode {
            None => {
                return Outcome::NotChecked(format!(
                    "{} named by /sys/class/infiniband_verbs but absent from \
                     /sys/class/infiniband, and RDMA netlink gave no netns mode",
                    hidden
                        .iter()
                        .map(|(_, d)| *d)
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            }
            // Shared mode: every namespace sees every device; a disagreement is not
            // a namespace matter (RDK-K011 compares the sources).
            Some(false) => {}
            Some(true) => {
                let names: Vec<&str> = hidden.iter().map(|(_, d)| *d).collect();
                let away = own.is_some() && init.is_some() && own != init;
                let whose = if away {
                    format!(
                        "this process runs in network namespace {} (not the initial one, {})",
                        own.map_or("?", String::as_str),
                        init.map_or("?", String::as_str)
                    )
                } else {
                    "they were moved to another network namespace".to_string()
                };
                let mut fd = Finding::new(
                    Code::K012,
                    "host",
                    format!(
                        "{} {} registered with the kernel but not visible here: the kernel is \
                         in exclusive RDMA netns mode and {whose}; ibv_get_device_list, sysfs \
                         and RDMA netlink show a device only in its own namespace",
                        names.join(", "),
                        if names.len() == 1 { "is" } else { "are" }
                    ),
                )
                .evidence(mode_evidence(f))
                .evidence(Evidence::new(
                    "/sys/class/infiniband",
                    match &f.kernel.ib_class {
                        Ok(v) if v.is_empty() => "empty".to_string(),
                        r => listing(r),
                    },
                ));
                for (u, d) in &hidden {
                    fd = fd.evidence(Evidence::new(
                        format!("/sys/class/infiniband_verbs/{u}/ibdev"),
                        *d,
                    ));
                }
                fd = fd.attr(&f.namespaces.own_net).attr(&f.namespaces.init_net);
                let remedy = if away {
                    format!(
                        "Run the application in the namespace the device belongs to (for a \
                         device never moved, the host's: host networking for a container), \
                         or give this namespace a device: {MOVE}; or switch the host to \
                         shared mode, where every namespace sees every device: rdma system \
                         set netns shared (refused with EBUSY while other network namespaces \
                         exist)."
                    )
                } else {
                    format!(
                        "Find the namespace that holds them (ip netns list; ip netns exec \
                         <name> rdma dev) and run the application there, or move them back: \
                         {MOVE}."
                    )
                };
                out.push(
                    fd.remedy(remedy)
                        .next("rdma system show; rdma dev show")
                        .next("readlink /proc/self/ns/net /proc/1/ns/net; ip netns list"),
                );
            }
        }
    }
    if let (Some(s), Some(true)) = (&f.subject, mode) {
        let theirs = s.net_ns.get();
        if theirs.is_some() && own.is_some() && theirs != own && !f.devices.is_empty() {
            let devs: Vec<&str> = f.devices.iter().map(|d| d.name.as_str()).collect();
            out.push(
                Finding::new(
                    Code::K012,
                    format!("pid {}", s.pid),
                    format!(
                        "pid {} runs in network namespace {}, not in {} where rdmakit sees \
                         {}: in exclusive RDMA netns mode it can open none of them \
                         (ibv_get_device_list returns no device there)",
                        s.pid,
                        theirs.map_or("?", String::as_str),
                        own.map_or("?", String::as_str),
                        devs.join(", ")
                    ),
                )
                .evidence(mode_evidence(f))
                .attr(&s.net_ns)
                .attr(&f.namespaces.own_net)
                .remedy(format!(
                    "Start pid {} in the namespace of the device ({} here: host networking \
                     for a container), or give its namespace a device: {MOVE}; or switch \
                     the host to shared mode: rdma system set netns shared (refused with \
                     EBUSY while other network namespaces exist).",
                    s.pid,
                    own.map_or("?", String::as_str)
                ))
                .next(format!(
                    "readlink /proc/{}/ns/net /proc/self/ns/net; rdma system show",
                    s.pid
                )),
            );
        }
    }
    Outcome::Findings(out)
}
