//! Kernel layer: the sources of host facts agree (RDK-K011).
//!
//! On one running kernel, `/proc/modules`, sysfs, RDMA netlink, `/dev/infiniband` and
//! the kernel config describe the same state. Each comparison here runs only when the
//! source holds both sides; a disagreement is a finding that names both sources and
//! their values, because the other checks cannot be trusted on such evidence.

use std::collections::BTreeSet;

use crate::checks::{Ctx, Outcome};
use crate::codes::Code;
use crate::finding::{Evidence, Finding};
use rdmakit_host::model::{HostFacts, ModuleState};
use rdmakit_host::source::{Entry, Errno};

/// What a disagreement most likely means, for the messages.
const NOT_ONE_VIEW: &str = "the two were not read from one kernel view (a /sys or /dev \
                            from another network namespace or host, or a change between the \
                            reads)";

fn loaded(f: &HostFacts, m: &str) -> bool {
    matches!(
        f.modules.state(m),
        ModuleState::Loaded | ModuleState::BuiltIn
    )
}

/// Whether the module list was read and `m` is in neither it nor the built-ins.
fn absent(f: &HostFacts, m: &str) -> bool {
    f.modules.proc_modules.get().is_some() && f.modules.state(m) == ModuleState::Absent
}

fn names(v: &[Entry]) -> String {
    if v.is_empty() {
        return "<empty>".into();
    }
    v.iter()
        .map(|e| e.name.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

fn listing(r: &Result<Vec<Entry>, Errno>) -> String {
    match r {
        Ok(v) => names(v),
        Err(e) if *e == Errno::ENOENT => "<absent>".into(),
        Err(e) => format!("<read failed: {e}>"),
    }
}

/// The sysfs device names, when the source says what /sys/class/infiniband holds:
/// its listing, or "absent" in a source that holds /sys/class (its netdevs were read).
fn sysfs_devices(f: &HostFacts) -> Option<BTreeSet<String>> {
    match &f.kernel.ib_class {
        Ok(v) => Some(v.iter().map(|e| e.name.clone()).collect()),
        Err(e) if *e == Errno::ENOENT && f.covers("sys") && !f.netdevs.is_empty() => {
            Some(BTreeSet::new())
        }
        Err(_) => None,
    }
}

fn module_evidence(f: &HostFacts, m: &str, state: &str) -> Evidence {
    let path = if f.modules.proc_modules.get().is_some() {
        f.modules.proc_modules.path.clone()
    } else {
        "/sys/module".to_string()
    };
    Evidence::new(path, format!("{m}: {state}"))
}

pub fn consistency(cx: &Ctx) -> Outcome {
    let f = cx.facts;
    let mut out = Vec::new();
    let mut compared = 0usize;
    let sysfs = sysfs_devices(f);
    let class_path = "/sys/class/infiniband";

    // Modules and the classes they create.
    if let Some(devs) = &sysfs {
        if f.modules.state("ib_core") != ModuleState::Unknown {
            compared += 1;
        }
        if loaded(f, "ib_core") && f.kernel.ib_class.is_err() && devs.is_empty() {
            out.push(
                Finding::new(
                    Code::K011,
                    "host",
                    format!(
                        "ib_core is loaded but {class_path} does not exist; ib_core creates it \
                         when it loads, so {NOT_ONE_VIEW}"
                    ),
                )
                .evidence(module_evidence(f, "ib_core", "loaded"))
                .evidence(Evidence::new(class_path, listing(&f.kernel.ib_class))),
            );
        }
    }
    for (module, class, prefix) in [
        ("ib_uverbs", "/sys/class/infiniband_verbs", "uverbs"),
        ("ib_umad", "/sys/class/infiniband_mad", "umad"),
    ] {
        let list = if module == "ib_uverbs" {
            &f.uverbs.listing
        } else {
            &f.mad.listing
        };
        let Ok(entries) = list else { continue };
        if f.modules.proc_modules.get().is_none() {
            continue;
        }
        compared += 1;
        let devs: Vec<&Entry> = entries
            .iter()
            .filter(|e| e.name.starts_with(prefix))
            .collect();
        if absent(f, module) && !devs.is_empty() {
            out.push(
                Finding::new(
                    Code::K011,
                    "host",
                    format!(
                        "{module} is not loaded but {class} has {} device(s); only {module} \
                         creates them, so {NOT_ONE_VIEW}",
                        devs.len()
                    ),
                )
                .evidence(module_evidence(f, module, "not listed"))
                .evidence(Evidence::new(class, names(entries))),
            );
        }
    }

    // The kernel config against what runs.
    if let Some(c) = &f.kernel.config {
        let set = c.options.get("CONFIG_INFINIBAND").map(String::as_str);
        let runs = loaded(f, "ib_core") || f.kernel.ib_class.is_ok();
        compared += 1;
        if matches!(set, None | Some("n")) && runs {
            let mut fd = Finding::new(
                Code::K011,
                "host",
                format!(
                    "{} says CONFIG_INFINIBAND is not set, yet the RDMA core runs; the config \
                     is not the running kernel's",
                    c.path
                ),
            )
            .evidence(Evidence::new(
                format!("{}: CONFIG_INFINIBAND", c.path),
                "not set",
            ));
            if loaded(f, "ib_core") {
                fd = fd.evidence(module_evidence(f, "ib_core", "loaded"));
            }
            if let Ok(v) = &f.kernel.ib_class {
                fd = fd.evidence(Evidence::new(class_path, names(v)));
            }
            out.push(fd.evidence(Evidence::of(&f.kernel.release)));
        }
    }

    // The NETLINK_RDMA socket against what the rest says.
    if let Some(Err(e)) = &f.kernel.netlink_rdma {
        if *e == Errno::EPROTONOSUPPORT {
            compared += 1;
            let mut other = Vec::new();
            if loaded(f, "ib_core") {
                other.push(module_evidence(f, "ib_core", "loaded"));
            }
            if let Ok(v) = &f.kernel.ib_class {
                other.push(Evidence::new(class_path, names(v)));
            }
            if let Ok(v) = &f.netlink.devs {
                other.push(Evidence::new(
                    "RDMA netlink device dump (rdma dev)",
                    dev_list(v),
                ));
            }
            if !other.is_empty() {
                let mut fd = Finding::new(
                    Code::K011,
                    "host",
                    format!(
                        "the kernel refused a NETLINK_RDMA socket (EPROTONOSUPPORT: no RDMA \
                         core), yet the RDMA core is there; ib_core registers NETLINK_RDMA in \
                         every network namespace, so {NOT_ONE_VIEW}"
                    ),
                )
                .evidence(Evidence::new(
                    "socket(AF_NETLINK, SOCK_RAW, NETLINK_RDMA)",
                    e.name(),
                ));
                fd.evidence.extend(other);
                out.push(fd);
            }
        }
    }

    // Devices and ports: sysfs against netlink.
    if let (Some(sys), Ok(nl)) = (&sysfs, &f.netlink.devs) {
        compared += 1;
        let nl_names: BTreeSet<String> = nl.iter().map(|d| d.name.clone()).collect();
        for d in nl.iter().filter(|d| !sys.contains(&d.name)) {
            out.push(
                Finding::new(
                    Code::K011,
                    d.name.clone(),
                    format!(
                        "{} is in RDMA netlink's device list but not in {class_path}: {NOT_ONE_VIEW}",
                        d.name
                    ),
                )
                .evidence(Evidence::new(class_path, listing(&f.kernel.ib_class)))
                .evidence(Evidence::new(
                    "RDMA netlink device dump (rdma dev)",
                    dev_list(nl),
                )),
            );
        }
        for name in sys.iter().filter(|n| !nl_names.contains(*n)) {
            out.push(
                Finding::new(
                    Code::K011,
                    name.clone(),
                    format!(
                        "{name} is in {class_path} but not in RDMA netlink's device list: \
                         {NOT_ONE_VIEW}"
                    ),
                )
                .evidence(Evidence::new(class_path, listing(&f.kernel.ib_class)))
                .evidence(Evidence::new(
                    "RDMA netlink device dump (rdma dev)",
                    dev_list(nl),
                )),
            );
        }
    }
    for nd in &f.netlink.devices {
        let Some(d) = f.devices.iter().find(|d| d.name == nd.name) else {
            continue;
        };
        if let Ok(ports) = &nd.ports {
            for np in ports {
                let Some(sp) = d.ports.iter().find(|p| p.num == np.port) else {
                    continue;
                };
                let (Some(s), Some(n)) = (sp.state.get(), np.state) else {
                    continue;
                };
                compared += 1;
                if s.code != n {
                    out.push(
                        Finding::new(
                            Code::K011,
                            format!("{} port {}", d.name, sp.num),
                            format!(
                                "{} port {} is {} in sysfs but state {} ({}) in RDMA netlink; \
                                 both come from the same query to the driver, so the port \
                                 changed state between the reads or {NOT_ONE_VIEW}",
                                d.name,
                                sp.num,
                                s.name,
                                n,
                                rdmakit_host::netlink::names::port_state(n)
                            ),
                        )
                        .attr(&sp.state)
                        .evidence(Evidence::new(
                            format!("RDMA netlink port dump (rdma link) {}/{}", d.name, np.port),
                            format!(
                                "state {n} ({})",
                                rdmakit_host::netlink::names::port_state(n)
                            ),
                        )),
                    );
                }
            }
        }
        if let (Ok(cd), Ok(_)) = (&nd.chardev, &f.uverbs.listing) {
            if let Some(name) = &cd.name {
                compared += 1;
                if !f.uverbs.devs.iter().any(|u| &u.name == name) {
                    out.push(
                        Finding::new(
                            Code::K011,
                            d.name.clone(),
                            format!(
                                "RDMA netlink names {name} as {}'s uverbs device but \
                                 /sys/class/infiniband_verbs has no {name}: {NOT_ONE_VIEW}",
                                d.name
                            ),
                        )
                        .evidence(Evidence::new(
                            format!("RDMA netlink chardev query {} uverbs", d.name),
                            name.clone(),
                        ))
                        .evidence(Evidence::new(
                            "/sys/class/infiniband_verbs",
                            listing(&f.uverbs.listing),
                        )),
                    );
                }
            }
        }
    }

    // uverbs devices whose ib device sysfs lacks. Only in shared netns mode: in
    // exclusive mode a device of another namespace keeps its (unnamespaced) uverbs
    // entry while /sys/class/infiniband hides it.
    let shared = matches!(&f.netlink.sys, Ok(s) if s.netns_mode == Some(1));
    if let (Some(sys), true) = (&sysfs, shared) {
        for u in &f.uverbs.devs {
            let Some(ib) = u.ibdev.get() else { continue };
            compared += 1;
            if !sys.contains(ib) {
                out.push(
                    Finding::new(
                        Code::K011,
                        u.name.clone(),
                        format!(
                            "{} belongs to {ib}, which is not in {class_path} (netns mode \
                             shared): {NOT_ONE_VIEW}",
                            u.name
                        ),
                    )
                    .attr(&u.ibdev)
                    .evidence(Evidence::new(class_path, listing(&f.kernel.ib_class))),
                );
            }
        }
    }

    // /dev/infiniband nodes the kernel has no object for.
    if let Ok(nodes) = &f.dev_nodes.listing {
        for n in nodes {
            let node = format!("/dev/infiniband/{}", n.name);
            let (module, what) = if n.name.starts_with("umad") || n.name.starts_with("issm") {
                ("ib_umad", "a MAD device")
            } else if n.name == "rdma_cm" {
                ("rdma_ucm", "the RDMA CM device")
            } else if n.name.starts_with("uverbs") {
                ("", "a uverbs device")
            } else {
                continue;
            };
            if module.is_empty() {
                let known = match &f.uverbs.listing {
                    Ok(_) => true,
                    Err(e) => *e == Errno::ENOENT && sysfs.is_some(),
                };
                if !known {
                    continue;
                }
                compared += 1;
                if !f.uverbs.devs.iter().any(|u| u.name == n.name) {
                    out.push(
                        Finding::new(
                            Code::K011,
                            node.clone(),
                            format!(
                                "{node} exists but /sys/class/infiniband_verbs has no {}: a \
                                 stale node from a static /dev, or {NOT_ONE_VIEW}",
                                n.name
                            ),
                        )
                        .evidence(Evidence::new(&node, "present"))
                        .evidence(Evidence::new(
                            "/sys/class/infiniband_verbs",
                            listing(&f.uverbs.listing),
                        )),
                    );
                }
                continue;
            }
            if f.modules.proc_modules.get().is_none() {
                continue;
            }
            compared += 1;
            if absent(f, module) {
                out.push(
                    Finding::new(
                        Code::K011,
                        node.clone(),
                        format!(
                            "{node} ({what}) exists but {module}, which creates it, is not \
                             loaded: a stale node from a static /dev, or {NOT_ONE_VIEW}"
                        ),
                    )
                    .evidence(Evidence::new(&node, "present"))
                    .evidence(module_evidence(f, module, "not listed")),
                );
            }
        }
    }

    if compared == 0 {
        return Outcome::NotChecked(
            "the source holds no two views of the same fact (modules, sysfs, netlink, /dev)".into(),
        );
    }
    Outcome::Findings(
        out.into_iter()
            .map(|fd| {
                fd.remedy(
                    "Read the evidence from one view: run the doctor on the host itself (not in \
                     a container with the host's /sys or /dev), or collect a fresh bundle in one \
                     run; remove stale static /dev/infiniband nodes.",
                )
                .next("rdma dev; rdma link; ls /sys/class/infiniband /sys/class/infiniband_verbs")
                .next("ls -l /dev/infiniband; lsmod | grep -E '^(ib_|rdma_)'")
            })
            .collect(),
    )
}

fn dev_list(v: &[rdmakit_host::netlink::Dev]) -> String {
    if v.is_empty() {
        return "<no device>".into();
    }
    v.iter()
        .map(|d| format!("{} (index {})", d.name, d.index))
        .collect::<Vec<_>>()
        .join(", ")
}
