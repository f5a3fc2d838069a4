// Every parser of `rdmakit_host::parse` applied to one input; results are
// thrown away, only panics and broken round trips fail. Shared by
// tests/parse_props.rs (proptest) and fuzz/fuzz_targets/parsers.rs
// (libFuzzer, through `include!`), so both drive the same entry points.

use rdmakit_host::ethernet::{optics, parse as eth};
use rdmakit_host::parse::{cgroup, kmsg, pkg, proc, soft, sysfs};

/// Every string parser, applied to `s`; results are thrown away, only panics count.
pub fn all_str_parsers(s: &str) {
    let _ = sysfs::strip(s);
    let _ = sysfs::port_state(s);
    let _ = sysfs::phys_state(s);
    if let Ok(rate) = sysfs::rate(s) {
        assert!(rate.gbps.is_finite() && rate.gbps >= 0.0);
        let _ = rate.signaling_gbps();
    }
    let _ = sysfs::Speed::from_name(s);
    let _ = sysfs::link_layer(s);
    let _ = sysfs::node_type(s);
    let _ = sysfs::guid(s);
    if let Ok(gid) = sysfs::gid(s) {
        let _ = (
            sysfs::gid_is_zero(&gid),
            sysfs::gid_ipv4(&gid),
            sysfs::gid_is_link_local(&gid),
        );
    }
    let _ = sysfs::gid_type(s);
    let _ = sysfs::counter(s);
    let _ = soft::counters(s);
    let _ = sysfs::u64_value(s);
    let _ = sysfs::u32_value(s);
    let _ = sysfs::i64_value(s);
    let _ = sysfs::hex_u32(s);
    if let Ok(set) = sysfs::cpulist(s) {
        assert_eq!(sysfs::cpulist(&set.to_string()), Ok(set));
    }
    if let Ok(set) = sysfs::cpumask(s) {
        assert_eq!(sysfs::cpulist(&set.to_string()), Ok(set));
    }
    if let Ok(speed) = sysfs::pcie_speed(s) {
        let _ = speed.generation();
    }
    let _ = sysfs::pcie_width(s);
    let _ = sysfs::numa_node(s);
    let _ = proc::affinity_list(s);
    let _ = proc::rlimit_probe(s);
    let _ = proc::kernel_release(s);
    let _ = proc::cmdline(s);
    let _ = proc::identity(s);
    let _ = proc::hostname(s);
    let _ = cgroup::rdma_values(s);
    let _ = pkg::rdma_core_major(s);
    let _ = pkg::libibverbs_soname_version(s);
    let _ = pkg::provider_lib_name(s);
    let _ = eth::ethtool::stats(s);
    let _ = eth::ethtool::pause(s);
    let _ = eth::ethtool::fec(s);
    let _ = eth::dcb::dcb(s);
    let _ = eth::dcb::mlnx_qos(s);
}

/// Every byte parser, applied to `b`.
pub fn all_byte_parsers(b: &[u8]) {
    let _ = optics::parse_module(b);
    let _ = sysfs::driver_file(b);
    let _ = proc::modules_checked(b);
    if let Ok(irqs) = proc::interrupts(b) {
        for line in &irqs.lines {
            assert!(line.counts.len() <= irqs.cpus.len());
            let _ = (
                line.total(),
                line.trigger(),
                line.hwirq_number(),
                line.is_msi(),
                line.is_io_apic(),
                line.pci_address(),
                line.action_names(),
            );
        }
        let _ = irqs.cpu_numbers();
    }
    let _ = proc::limits(b);
    let _ = cgroup::proc_cgroup(b);
    let _ = cgroup::cgroup_mounts(b);
    let _ = cgroup::status_identity(b);
    let _ = proc::kernel_config(b);
    for p in pkg::dpkg_status(b) {
        let _ = p.installed();
    }
    for r in kmsg::kmsg(b) {
        let _ = kmsg::ts_seconds(&r);
    }
    all_str_parsers(&String::from_utf8_lossy(b));
}
