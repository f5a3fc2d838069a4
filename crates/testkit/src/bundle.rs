//! Recorded hosts to test on: the real captures of fixtures/ imported as
//! bundles ([`import`]), the edits that derive a fault from them (a file's
//! text, a directory entry, a link, a netlink answer), nodes of a test fleet
//! ([`rxe`], [`real_nics`], [`port_down`]), and a PCI RDMA device built on
//! the real mlx5_0 tree ([`pci_host`]). Shared by the doctor's, the fleet's and
//! the report's tests and rdmakit's (feature `bundle`).

use rdmakit_host::bundle::Bundle;
use rdmakit_host::capture::import_capture;
use rdmakit_host::source::{Answer, Entry, Kind, Meta, Op};

use crate::fixtures_dir;

/// The real capture `fixtures/<name>` as a bundle.
pub fn import(name: &str) -> Bundle {
    import_capture(&fixtures_dir().join(name)).expect("fixture imports")
}

/// Names the node: `/proc/sys/kernel/hostname`, as a host holds it.
pub fn set_hostname(b: &mut Bundle, host: &str) {
    set_line(b, "/proc/sys/kernel/hostname", host);
}

/// An rxe node from the healthy (or healthy-busy) VM capture, named `host`.
pub fn rxe(host: &str, busy: bool) -> Bundle {
    let mut b = import(if busy { "healthy-busy" } else { "healthy" });
    set_hostname(&mut b, host);
    b
}

/// A node from the real-nics-procfs tree (hfi1_0, mlx4_0 and mlx5_0 from real
/// hosts) holding only `devices`, named `host`.
pub fn real_nics(host: &str, devices: &[&str]) -> Bundle {
    let mut b = keep_devices(import("real-nics-procfs"), devices);
    set_hostname(&mut b, host);
    b
}

/// The real-nics-procfs tree `b` without the devices not in `devices`.
pub fn keep_devices(mut b: Bundle, devices: &[&str]) -> Bundle {
    for d in ["hfi1_0", "mlx4_0", "mlx5_0"] {
        if !devices.contains(&d) {
            assert!(
                b.remove_tree(&format!("/sys/class/infiniband/{d}")) > 0,
                "{d}"
            );
        }
    }
    b
}

/// Port `port` of `dev` goes down as a pulled cable leaves it. The capture's RDMA
/// netlink answers go too: they still say ACTIVE, and a host whose sysfs and
/// netlink disagree is a different fault (RDK-K011).
pub fn port_down(b: &mut Bundle, dev: &str, port: u32) {
    let p = format!("/sys/class/infiniband/{dev}/ports/{port}");
    set_line(b, &format!("{p}/state"), "1: DOWN");
    set_line(b, &format!("{p}/phys_state"), "3: Disabled");
    drop_netlink(b);
}

/// The text of a file in the bundle (through its links).
pub fn text(b: &Bundle, path: &str) -> String {
    let key = b.canonical(path);
    match b.get(Op::Read, &key) {
        Some(Answer::Data(d)) => String::from_utf8_lossy(d).into_owned(),
        other => panic!("{path} ({key}): {other:?}"),
    }
}

/// Replaces a file's content (through its links), adding it to its directory listing.
pub fn set(b: &mut Bundle, path: &str, content: &str) {
    b.write_file(path, content.as_bytes());
}

/// Replaces a file's content with one line, `value` and its newline, as sysfs
/// and procfs print a value.
pub fn set_line(b: &mut Bundle, path: &str, value: &str) {
    b.write_file(path, format!("{value}\n").as_bytes());
}

/// Edits a file's text (through its links).
pub fn edit(b: &mut Bundle, path: &str, f: impl FnOnce(String) -> String) {
    let t = text(b, path);
    set(b, path, &f(t));
}

pub fn add_entry(b: &mut Bundle, dir: &str, name: &str, kind: Kind) {
    let dir = if dir.is_empty() {
        "/".to_string()
    } else {
        b.canonical(dir)
    };
    let mut v = match b.get(Op::Dir, &dir) {
        Some(Answer::Entries(v)) => v.clone(),
        _ => {
            if let Some((parent, n)) = dir.rsplit_once('/') {
                if !n.is_empty() {
                    add_entry(b, parent, n, Kind::Dir);
                }
            }
            Vec::new()
        }
    };
    if !v.iter().any(|e| e.name == name) {
        v.push(Entry {
            name: name.to_string(),
            kind,
        });
        v.sort();
    }
    b.set(Op::Dir, &dir, Answer::Entries(v));
}

/// Removes an entry from a directory listing and the file itself.
pub fn remove(b: &mut Bundle, path: &str) {
    // Resolve links in the directory part only: removing a link removes the link.
    let (parent, name) = path.rsplit_once('/').expect("absolute path");
    let key = format!("{}/{name}", b.canonical(parent));
    b.remove(Op::Read, &key);
    b.remove(Op::Link, &key);
    b.remove(Op::Stat, &key);
    b.remove(Op::Dir, &key);
    let (dir, name) = key.rsplit_once('/').expect("absolute path");
    let dir = if dir.is_empty() { "/" } else { dir };
    if let Some(Answer::Entries(v)) = b.get(Op::Dir, dir) {
        let v: Vec<Entry> = v.iter().filter(|e| e.name != name).cloned().collect();
        b.set(Op::Dir, dir, Answer::Entries(v));
    }
}

pub fn link(b: &mut Bundle, path: &str, target: &str) {
    b.set(Op::Link, path, Answer::Link(target.to_string()));
    let (dir, name) = path.rsplit_once('/').expect("absolute path");
    add_entry(b, dir, name, Kind::Symlink);
}

pub fn set_probe(b: &mut Bundle, key: &str, content: &str) {
    b.set(Op::Probe, key, Answer::Data(content.as_bytes().to_vec()));
}

pub fn set_stat(b: &mut Bundle, path: &str, meta: Meta) {
    b.set(Op::Stat, path, Answer::Meta(meta));
}

/// The synthetic PCI device's shape.
#[derive(Clone)]
pub struct PciSpec {
    pub cpus: usize,
    /// Completion vectors (an async vector is added).
    pub vectors: usize,
    /// CPU list each vector's affinity is set to, by vector index.
    pub affinity: fn(usize, usize) -> String,
    pub intx: bool,
    pub numa_node: i32,
    pub local_cpulist: String,
    pub link: (&'static str, &'static str, &'static str, &'static str),
    pub bridge: (&'static str, &'static str),
}

impl Default for PciSpec {
    fn default() -> PciSpec {
        PciSpec {
            cpus: 4,
            vectors: 4,
            affinity: |i, _| i.to_string(),
            intx: false,
            numa_node: 0,
            local_cpulist: "0-3".into(),
            link: ("8.0 GT/s PCIe", "16", "8.0 GT/s PCIe", "16"),
            bridge: ("8.0 GT/s PCIe", "16"),
        }
    }
}

pub const BDF: &str = "0000:3b:00.0";
pub const BRIDGE: &str = "/sys/devices/pci0000:00/0000:00:02.0";

/// Removes every recorded RDMA netlink answer: the bundle then says what a capture of
/// files alone says ("not recorded"), instead of a netlink view that no longer
/// matches its edited sysfs.
pub fn drop_netlink(b: &mut Bundle) {
    for (op, key) in b.keys() {
        if op == Op::Probe && key.starts_with("netlink:") {
            b.remove(op, &key);
        }
    }
}

/// The healthy rxe capture plus mlx5_0 (the real procfs tree) as a PCI function at
/// 0000:3b:00.0 behind bridge 0000:00:02.0, with mlx5 modules, a uverbs node, MSI-X
/// vectors in /proc/interrupts and their affinity as `spec` says.
///
/// The capture's netlink answers are dropped: they list only rxe0, and a host whose
/// sysfs has mlx5_0 while its netlink does not cannot exist (RDK-K011).
pub fn pci_host(spec: &PciSpec) -> Bundle {
    let mut b = import("healthy");
    drop_netlink(&mut b);
    let nics = import("real-nics-procfs");
    let pci = format!("{BRIDGE}/{BDF}");
    let real = format!("{pci}/infiniband/mlx5_0");
    for (op, path) in nics.keys() {
        let Some(rest) = path.strip_prefix("/sys/class/infiniband/mlx5_0") else {
            continue;
        };
        let ans = nics.get(op, &path).cloned().expect("key exists");
        b.set(op, &format!("{real}{rest}"), ans);
    }
    link(
        &mut b,
        "/sys/class/infiniband/mlx5_0",
        &format!("../../devices/pci0000:00/0000:00:02.0/{BDF}/infiniband/mlx5_0"),
    );
    add_entry(&mut b, &format!("{pci}/infiniband"), "mlx5_0", Kind::Dir);
    set(
        &mut b,
        &format!("{real}/ports/1/rate"),
        "100 Gb/sec (4X EDR)\n",
    );
    link(
        &mut b,
        &format!("{real}/device"),
        &format!("../../../{BDF}"),
    );
    link(
        &mut b,
        &format!("{pci}/driver"),
        "../../../../bus/pci/drivers/mlx5_core",
    );
    set(
        &mut b,
        &format!("{pci}/numa_node"),
        &format!("{}\n", spec.numa_node),
    );
    set(
        &mut b,
        &format!("{pci}/local_cpulist"),
        &format!("{}\n", spec.local_cpulist),
    );
    set(
        &mut b,
        &format!("{pci}/current_link_speed"),
        &format!("{}\n", spec.link.0),
    );
    set(
        &mut b,
        &format!("{pci}/current_link_width"),
        &format!("{}\n", spec.link.1),
    );
    set(
        &mut b,
        &format!("{pci}/max_link_speed"),
        &format!("{}\n", spec.link.2),
    );
    set(
        &mut b,
        &format!("{pci}/max_link_width"),
        &format!("{}\n", spec.link.3),
    );
    set(
        &mut b,
        &format!("{BRIDGE}/current_link_speed"),
        &format!("{}\n", spec.bridge.0),
    );
    set(
        &mut b,
        &format!("{BRIDGE}/current_link_width"),
        &format!("{}\n", spec.bridge.1),
    );
    set(
        &mut b,
        &format!("{BRIDGE}/max_link_speed"),
        "16.0 GT/s PCIe\n",
    );
    set(&mut b, &format!("{BRIDGE}/max_link_width"), "16\n");
    set(
        &mut b,
        &format!("{pci}/irq"),
        if spec.intx { "16\n" } else { "0\n" },
    );
    set(
        &mut b,
        "/sys/devices/system/cpu/online",
        &format!("0-{}\n", spec.cpus - 1),
    );

    // /proc/interrupts: the capture's lines re-laid for spec.cpus columns, then mlx5's.
    let old = text(&b, "/proc/interrupts");
    let mut ints = String::from("    ");
    for c in 0..spec.cpus {
        ints += &format!("      CPU{c}");
    }
    ints.push('\n');
    let mut irqs = Vec::new();
    if spec.intx {
        let mut counts = String::new();
        for c in 0..spec.cpus {
            counts += &format!(" {:>10}", if c == 0 { 500 } else { 0 });
        }
        ints += &format!(" 16:{counts}   IO-APIC  16-fasteoi   mlx5_core\n");
    } else {
        for v in 0..=spec.vectors {
            let irq = 40 + v as u32;
            irqs.push(irq);
            let aff = if v == 0 {
                "0".to_string()
            } else {
                (spec.affinity)(v - 1, spec.cpus)
            };
            let mut counts = String::new();
            let first: usize = aff
                .split([',', '-'])
                .next()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            for c in 0..spec.cpus {
                counts += &format!(" {:>10}", if c == first { 1000 + v } else { 0 });
            }
            let name = if v == 0 {
                "mlx5_async0".to_string()
            } else {
                format!("mlx5_comp{}", v - 1)
            };
            ints += &format!(
                "{irq:>4}:{counts}  IR-PCI-MSIX-{BDF} {v:>4}-edge      {name}@pci:{BDF}\n"
            );
            set(
                &mut b,
                &format!("/proc/irq/{irq}/smp_affinity_list"),
                &format!("{aff}\n"),
            );
        }
    }
    for l in old.lines().skip(1) {
        let Some((label, rest)) = l.split_once(':') else {
            continue;
        };
        if label.trim().parse::<u32>().is_err() {
            continue;
        }
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let (counts, tail) = fields.split_at(2.min(fields.len()));
        let mut c = counts.to_vec();
        while c.len() < spec.cpus {
            c.push("0");
        }
        ints += &format!(
            "{:>4}:{}   {}\n",
            label.trim(),
            c.iter().map(|x| format!(" {x:>10}")).collect::<String>(),
            tail.join(" ")
        );
    }
    set(&mut b, "/proc/interrupts", &ints);
    b.set(
        Op::Dir,
        &format!("{pci}/msi_irqs"),
        Answer::Entries(
            irqs.iter()
                .map(|i| Entry {
                    name: i.to_string(),
                    kind: Kind::File,
                })
                .collect(),
        ),
    );
    add_entry(&mut b, &pci, "msi_irqs", Kind::Dir);

    edit(&mut b, "/proc/modules", |m| {
        format!(
            "mlx5_ib 409600 0 - Live 0xffffffffc0800000\nmlx5_core 2105344 1 mlx5_ib, Live 0xffffffffc0a00000\n{m}"
        )
    });
    set(
        &mut b,
        "/sys/class/infiniband_verbs/uverbs1/ibdev",
        "mlx5_0\n",
    );
    set(
        &mut b,
        "/sys/class/infiniband_verbs/uverbs1/abi_version",
        "1\n",
    );
    set(
        &mut b,
        "/sys/class/infiniband_verbs/uverbs1/dev",
        "231:193\n",
    );
    add_entry(
        &mut b,
        "/sys/class/infiniband_verbs",
        "uverbs1",
        Kind::Symlink,
    );
    add_entry(&mut b, "/dev/infiniband", "uverbs1", Kind::Char);
    set_stat(
        &mut b,
        "/dev/infiniband/uverbs1",
        Meta {
            kind: Kind::Char,
            mode: 0o666,
            uid: 0,
            gid: 0,
            rdev: Some((231, 193)),
            size: 0,
        },
    );
    b
}
