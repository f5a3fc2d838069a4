//! Feeds the input to every parser of `rdmakit_host::parse`, as bytes and (lossily)
//! as text. Run with `RUSTC_BOOTSTRAP=1 cargo fuzz run parsers` from crates/host.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rdmakit_host::parse::{cgroup, kmsg, pkg, proc, sysfs};

fuzz_target!(|data: &[u8]| {
    // Byte parsers (whole files).
    let _ = sysfs::driver_file(data);
    let _ = proc::modules_checked(data);
    if let Ok(irqs) = proc::interrupts(data) {
        for line in &irqs.lines {
            assert!(line.counts.len() <= irqs.cpus.len());
            let _ = (line.total(), line.trigger(), line.hwirq_number());
            let _ = (line.is_msi(), line.is_io_apic(), line.pci_address());
            let _ = line.action_names();
        }
        let _ = irqs.cpu_numbers();
    }
    let _ = proc::limits(data);
    let _ = cgroup::proc_cgroup(data);
    let _ = cgroup::cgroup_mounts(data);
    let _ = cgroup::status_identity(data);
    let _ = proc::kernel_config(data);
    for p in pkg::dpkg_status(data) {
        let _ = p.installed();
    }
    for r in kmsg::kmsg(data) {
        let _ = kmsg::ts_seconds(&r);
    }

    // Value parsers (one sysfs / procfs value).
    let s = String::from_utf8_lossy(data);
    let s = s.as_ref();
    let _ = sysfs::strip(s);
    let _ = sysfs::port_state(s);
    let _ = sysfs::phys_state(s);
    if let Ok(rate) = sysfs::rate(s) {
        assert!(rate.gbps.is_finite() && rate.gbps >= 0.0);
        let _ = rate.signaling_gbps();
    }
    let _ = sysfs::lane_gbps(s);
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
    let _ = sysfs::u64_value(s);
    let _ = sysfs::u32_value(s);
    let _ = sysfs::i64_value(s);
    let _ = sysfs::hex_u32(s);
    if let Ok(set) = sysfs::cpulist(s) {
        assert_eq!(sysfs::cpulist(&set.to_string()).as_ref(), Ok(&set));
    }
    if let Ok(set) = sysfs::cpumask(s) {
        assert_eq!(sysfs::cpulist(&set.to_string()).as_ref(), Ok(&set));
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
    let _ = cgroup::rdma_values(s);
    let _ = pkg::rdma_core_major(s);
    let _ = pkg::libibverbs_soname_version(s);
    let _ = pkg::provider_lib_name(s);
});
