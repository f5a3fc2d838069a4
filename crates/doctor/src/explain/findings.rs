//! Likely causes (most likely first) and next commands for each finding code.
//! The full text is the code's page (`crates/doctor/findings/<CODE>.md`); this is its
//! digest for `--json` consumers and the one-screen summary.

use crate::codes::Code::{self, *};

/// `(causes, checks)` for a code.
pub fn digest(c: Code) -> (&'static [&'static str], &'static [&'static str]) {
    match c {
        K001 => (
            &["Kernel built without CONFIG_INFINIBAND (minimal cloud/VM/container-host kernels)", "RDMA modules not installed for this kernel (e.g. Ubuntu linux-modules-extra missing)", "Running in a container on such a host"],
            &["zcat /proc/config.gz | grep CONFIG_INFINIBAND", "modinfo ib_core ib_uverbs", "ls /lib/modules/$(uname -r)/kernel/drivers/infiniband", "rdma link show"],
        ),
        K002 => (
            &["Modules never loaded: rdma-core's rdma-load-modules service absent or masked", "Loaded modules list does not include ib_uverbs/rdma_ucm (only the vendor driver loaded)", "Modules unloaded by hand or blacklisted"],
            &["lsmod | grep -E '^(ib_core|ib_uverbs|rdma_ucm)'", "modprobe ib_core ib_uverbs rdma_ucm", "systemctl status 'rdma-load-modules@*'"],
        ),
        K003 => (
            &["rdma-core loads ib_umad only for InfiniBand devices (/etc/rdma/modules/infiniband.conf), so RoCE hosts lack it", "Module checklist stopped at ib_core/ib_uverbs (the omission most often made)"],
            &["ls /sys/class/infiniband_mad /dev/infiniband/umad*", "modprobe ib_umad", "sminfo"],
        ),
        K004 => (
            &["RDMA module not auto-loaded (udev rule missing, initramfs without it)", "Module blacklisted in /etc/modprobe.d", "Module not installed for this kernel (extra modules package)", "RDMA disabled in the NIC's firmware/devlink settings"],
            &["lsmod | grep -E 'mlx5|bnxt|irdma|ice|qed|cxgb|hns|efa'", "modprobe <rdma driver>", "dmesg | tail -20", "grep -r <rdma driver> /etc/modprobe.d/"],
        ),
        K005 => (
            &["Out-of-tree uverbs module (old vendor OFED) with another ABI", "Corrupted or relocated sysfs tree", "Provider too old for the device's driver ABI (per-device warning)"],
            &["cat /sys/class/infiniband_verbs/abi_version", "modinfo ib_uverbs | grep -E 'filename|version'", "dpkg -l rdma-core libibverbs1 ibverbs-providers"],
        ),
        K006 => (
            &["ib_uverbs not loaded", "uverbs registration failed (kernel log)", "Device in another network namespace (rdma system exclusive)"],
            &["cat /sys/class/infiniband_verbs/*/ibdev", "modprobe ib_uverbs", "rdma system show", "dmesg | grep -i uverbs"],
        ),
        K007 => (
            &["swiotlb bounce buffer full (no IOMMU, confidential VMs, devices with limited DMA masks)", "IOMMU faults or missing mappings", "Driver leaking DMA descriptors after a failed mapping"],
            &["dmesg -T | grep -iE 'dma|swiotlb|DMAR|AMD-Vi' | tail -50", "cat /proc/cmdline", "ulimit -l   # rule out memlock first"],
        ),
        K008 => (
            &["Firmware fatal error or health-poll failure", "PCIe errors (AER) or thermal trouble", "Firmware/driver bug hit by the workload"],
            &["dmesg -T | grep -iE 'health|fatal|synd|firmware|reset' | tail -50", "devlink health show", "ethtool -i <if>"],
        ),
        K009 => (
            &["Bad or marginal cable/transceiver", "Switch port problems (errors, error-disable, speed/FEC mismatch)", "Power management (ASPM/EEE) on idle"],
            &["dmesg -T | grep -iE 'link (is )?(down|up)|carrier' | tail", "cat /sys/class/net/<if>/carrier_down_count", "ethtool -m <if>", "cat /sys/class/infiniband/<dev>/ports/1/counters/link_downed"],
        ),
        K010 => (
            &["kernel.dmesg_restrict = 1 and rdmakit not run as root / without CAP_SYSLOG", "Container without the host's kernel log"],
            &["sysctl kernel.dmesg_restrict", "journalctl -k -b > kern.log && rdmakit doctor --kernel-log kern.log", "sudo rdmakit doctor"],
        ),
        K011 => (
            &["A container whose /sys or /dev is the host's while netlink answers for its own network namespace", "A bundle or captured tree assembled from two hosts or two moments (device added/removed, port changed state in between)", "A kernel config of another release, or a stale static /dev/infiniband node"],
            &["rdmakit doctor --verbose", "rdma dev; rdma link; ls /sys/class/infiniband /sys/class/infiniband_verbs", "ls -l /dev/infiniband; lsmod | grep -E '^(ib_|rdma_)'", "readlink /proc/self/ns/net /proc/1/ns/net"],
        ),
        K012 => (
            &["Kernel in exclusive RDMA netns mode and the process in a namespace (container) without a device", "Device moved to another namespace with rdma dev set <dev> netns <name>", "Software device (rxe, siw): it cannot move, so only the initial namespace sees it"],
            &["rdma system show", "readlink /proc/self/ns/net /proc/1/ns/net", "cat /sys/class/infiniband_verbs/*/ibdev", "ip netns list"],
        ),
        H001 => (
            &["Vendor RDMA driver not loaded", "No RDMA-capable NIC, or RDMA disabled in its firmware", "Soft-RoCE/SoftiWARP link never created (rdma link add)", "Device in another network namespace"],
            &["lspci -nn | grep -iE 'infiniband|ethernet'", "lspci -k -s <BDF>", "rdma link show", "rdma link add rxe0 type rxe netdev <if>"],
        ),
        H002 => (
            &["DOWN/Polling: no link partner (cable, peer, switch port)", "INIT/LinkUp on InfiniBand: no subnet manager", "DOWN/Disabled: port or RoCE netdev administratively down", "LinkErrorRecovery: link errors"],
            &["ibv_devinfo | grep -E 'state|link_layer'", "cat /sys/class/infiniband/<dev>/ports/<n>/{state,phys_state}", "ip link show <if>", "sminfo"],
        ),
        H003 => (
            &["Lanes down: link trained at reduced width (1X instead of 4X)", "Speed negotiated down: cable rating, switch port config, FEC/autoneg", "Port split or configured slower on purpose"],
            &["ibv_devinfo -v | grep -E 'active_width|active_speed'", "cat /sys/class/infiniband/<dev>/ports/<n>/rate", "ethtool <if>", "iblinkinfo"],
        ),
        H004 => (
            &["Card in an electrically narrower slot, riser or bifurcated slot", "Older-generation root port/switch on the path, or BIOS speed cap", "Signal-integrity downtrain (reseat; check AER)", "Idle power-saving downshift (re-check under load)"],
            &["lspci -s <BDF> -vvv | grep -E 'LnkCap:|LnkSta:'", "lspci -tv", "cat /sys/bus/pci/devices/<BDF>/{current,max}_link_{speed,width}"],
        ),
        H005 => (
            &["No IP address on the netdev and IPv6 disabled", "Addresses on an upper device (bond/VLAN/bridge) not tied to the port", "Device/kernel without RoCE v2 support"],
            &["ip addr show dev <if>", "ibv_devinfo -v | grep GID", "sysctl net.ipv6.conf.<if>.disable_ipv6"],
        ),
        H006 => (
            &["No IPv4 address on the intended netdev", "IPv4 address on another interface (VLAN, bond, other port)", "Address added after the application chose its GID index"],
            &["ip -4 addr show dev <if>", "ibv_devinfo -v | grep GID", "cat /sys/class/infiniband/<dev>/ports/1/gid_attrs/ndevs/<i>"],
        ),
        H007 => (
            &["Applications default to GID index 0, usually the RoCE v1 link-local entry", "GID indexes move when addresses or VLANs change"],
            &["ibv_devinfo -v | grep GID", "ib_write_bw -x <index> ...   /   NCCL_IB_GID_INDEX=<index>"],
        ),
        H008 => (
            &["Netdev MTU 1500 (standard Ethernet) caps the RDMA MTU at 1024", "Jumbo frames not configured end to end"],
            &["ip link show <if>", "ibv_devinfo | grep -E 'max_mtu|active_mtu'", "ip link set dev <if> mtu 9000   # and on switches and peers"],
        ),
        H009 => (
            &["Value newer than this rdmakit (new link speed or width)", "Placeholder from the driver (N/A (no PMA), fw_ver)", "Truncated or vendor-specific value"],
            &["cat <path from the finding>", "ibv_devinfo -v"],
        ),
        H010 => (
            &["Marginal or failing cable, transceiver or connector (symbol errors, link recoveries, link downed)", "A bad switch port on the other end of the link", "Congestion or credit trouble (discards, buffer overruns), subnet manager trouble (VL15 dropped)", "Partition (P_Key) configuration (constraint errors)"],
            &["perfquery -x <lid> <port>", "ibqueryerrors", "iblinkinfo", "ethtool -m <if>", "rdmakit collect -o before.json.gz; rdmakit doctor --baseline before.json.gz"],
        ),
        H011 => (
            &["Packet loss on RoCE without end-to-end PFC/ECN", "Link errors on the path (RDK-H010)", "A receiver that does not post receives in time (RNR)", "A peer that went away (timeouts until retries are exhausted)"],
            &["rdmakit collect -o before.json.gz; rdmakit doctor --baseline before.json.gz", "ethtool -S <if> | grep -iE 'pause|pfc|discard|out_of_buffer'", "rdmakit explain wc:RETRY_EXC_ERR"],
        ),
        N001 => (
            &["The connection's ToS was never set: rdma_cm's default is 0 (DSCP 0, priority 0)", "ToS arithmetic: DSCP 26 is ToS 104/106, not 26", "The DSCP → priority map (APP table) differs from the PFC priority", "Applications set their own class (NCCL_IB_TC, UCX_IB_TRAFFIC_CLASS) that differs"],
            &["cat /sys/kernel/config/rdma_cm/<dev>/ports/1/default_roce_tos", "dcb app show dev <if>; dcb pfc show dev <if>", "mlnx_qos -i <if>", "ethtool -S <if> | grep -E 'prio[0-9]_(pause|packets)'"],
        ),
        N002 => (
            &["ECN left at the driver default for that priority", "ECN settings not persisted across reboot or driver reload", "Firmware congestion control mask (ROCE_CC_PRIO_MASK) excludes the priority"],
            &["grep . /sys/class/net/<if>/ecn/roce_np/enable/* /sys/class/net/<if>/ecn/roce_rp/enable/*", "mlxconfig -d <BDF> q | grep -i ROCE_CC", "rdma statistic show link <dev>/1 | grep -E 'cnp|ecn'"],
        ),
        N003 => (
            &["Only one of roce_np/roce_rp was set by the configuration script", "Settings applied by hand on some hosts"],
            &["grep . /sys/class/net/<if>/ecn/roce_*/enable/*", "rdmakit fleet report <reports>"],
        ),
        N004 => (
            &["CNP DSCP (default 48) not mapped to the strict or lossless class", "ETS configured without a strict class for CNPs"],
            &["cat /sys/class/net/<if>/ecn/roce_np/cnp_dscp /sys/class/net/<if>/ecn/roce_np/cnp_802p_prio", "dcb ets show dev <if>; dcb app show dev <if>"],
        ),
        N005 => (
            &["Global pause left at the NIC's default (on) when PFC was configured", "A network configuration that re-enables pause on link up"],
            &["ethtool -a <if>", "ethtool -A <if> rx off tx off", "dcb pfc show dev <if>"],
        ),
        N006 => (
            &["mlx5 starts in trust pcp; no DSCP APP entry was ever added", "A layer-3 (untagged) design with a switch or host still trusting 802.1p", "A VLAN design whose egress map sets the PCP but whose DSCP maps elsewhere"],
            &["mlnx_qos -i <if> | grep -i trust", "dcb app show dev <if>", "cat /proc/net/vlan/<vlan-if>"],
        ),
        N007 => (
            &["A receiver that cannot drain its buffers (slow application, few receive WQEs, PCIe back-pressure): tx pauses", "Congestion in the switch (incast) with ECN not slowing senders: rx pauses", "A stuck peer or a PFC deadlock"],
            &["ethtool -S <if> | grep -E 'prio[0-9]_pause|pause_storm'", "rdmakit collect -o before.json.gz; sleep 10; rdmakit doctor --baseline before.json.gz", "mlnx_qos -i <if>"],
        ),
        N008 => (
            &["Buffers exhausted on a lossy priority, or PFC not protecting the traffic", "Receivers posting too few receive WQEs (out_of_buffer)", "A bad cable or module (CRC errors)", "An MTU mismatch with the peer (oversize frames)"],
            &["ethtool -S <if> | grep -E 'discard|out_of_buffer|crc|oversize'", "rdma statistic show link <dev>/1 | grep out_of_buffer", "ip link show <if>"],
        ),
        N009 => (
            &["Congestion on the fabric (normal in moderation)", "Reaction point disabled: CNPs ignored", "Notification point disabled: marked packets but no CNPs"],
            &["rdma statistic show link <dev>/1 | grep -E 'cnp|ecn'", "grep . /sys/class/net/<if>/ecn/roce_*/enable/*"],
        ),
        N010 => (
            &["Dirty or damaged connector or fibre", "A failing laser at this or the far end", "Overheating (airflow, a module beyond its rating)"],
            &["ethtool -m <if>", "ethtool -S <if> | grep -E 'corrected|symbol|crc'"],
        ),
        N011 => (
            &["One dirty or damaged fibre of the cable", "One failing laser of the far-end module"],
            &["ethtool -m <if>", "swap the cable and see whether the weak lane follows it"],
        ),
        N012 => (
            &["Optics or cable degraded beyond what FEC can correct", "FEC mode mismatch with the switch port"],
            &["ethtool --show-fec <if>", "ethtool -I --show-fec <if>", "ethtool -m <if>", "ethtool -S <if> | grep -iE 'fec|symbol'"],
        ),
        N013 => (
            &["A dirty, damaged or loose cable or module", "Optics at the end of their life (RDK-N010)", "The switch port flapping or being reset", "Auto-negotiation or FEC mismatch with the switch port"],
            &["ip -s link show <if>", "ethtool -S <if> | grep link_down", "ethtool -m <if>", "dmesg -T | grep -iE 'link (is )?(down|up)'"],
        ),
        N014 => (
            &["Incast: many senders into one receiver", "Switch ECN thresholds (Kmin) too low for the link speed", "A slow receiver (receive buffers, PCIe, pauses it sends)", "An oversubscribed uplink on the path"],
            &["rdma statistic show link <dev>/1 | grep -E 'cnp|ecn'", "ethtool -S <if> | grep -E 'prio[0-9]_(marked|pause)|out_of_buffer'", "cat /sys/class/net/<if>/ecn/roce_np/min_time_between_cnps", "rdmakit fleet pairwise"],
        ),
        N015 => (
            &["ECN marking off on the switch queue of the RoCE class", "Notification or reaction point disabled on RoCE's priority (RDK-N002, RDK-N003)", "RoCE traffic on a lossy class (RDK-N001, RDK-N006)", "Loss that is not congestion: link errors, FEC (RDK-H010, RDK-N012)"],
            &["rdma statistic show link <dev>/1 | grep -E 'cnp|ecn|seq|timeout|duplicate'", "grep . /sys/class/net/<if>/ecn/roce_*/enable/*", "mlxconfig -d <BDF> q | grep ROCE_CC"],
        ),
        I001 => (
            &["MSI/MSI-X disabled (pci=nomsi)", "Driver probe incomplete or failed", "Hypervisor does not expose MSI-X for the device"],
            &["grep <BDF> /proc/interrupts", "ls /sys/bus/pci/devices/<BDF>/msi_irqs/", "lspci -s <BDF> -vvv | grep MSI-X", "cat /proc/cmdline"],
        ),
        I002 => (
            &["Firmware/PF grants few vectors (SR-IOV VFs, cloud VMs)", "Host has more CPUs than the device's EQ limit (normal on very large hosts)", "Driver fell back to fewer vectors"],
            &["ibv_devinfo -v | grep num_comp_vectors", "nproc", "ethtool -l <if>"],
        ),
        I003 => (
            &["pci=nomsi on the kernel command line", "Driver option disabling MSI-X", "MSI-X allocation failed at probe", "Platform/hypervisor without MSI-X"],
            &["grep IO-APIC /proc/interrupts", "cat /proc/cmdline", "lspci -s <BDF> -vvv | grep -E 'MSI-X|Interrupt:'"],
        ),
        I004 => (
            &["irqbalance not running", "irqbalance bans the CPUs/IRQs or ignores hints", "A tuning script pinned everything to one CPU", "isolcpus/nohz_full leave one housekeeping CPU"],
            &["systemctl status irqbalance", "for i in $(grep <BDF> /proc/interrupts | cut -d: -f1); do cat /proc/irq/$i/effective_affinity_list; done"],
        ),
        I005 => (
            &["irqbalance or a script spread vectors over all nodes", "Vectors pinned for another NIC's node", "NIC in a slot of the other socket"],
            &["cat /sys/bus/pci/devices/<BDF>/{numa_node,local_cpulist}", "cat /proc/irq/<n>/effective_affinity_list", "numactl --hardware"],
        ),
        L001 => (
            &["rdma-core/libibverbs packages not installed", "Container image without them", "Source build not in the linker path"],
            &["ldconfig -p | grep libibverbs", "apt install libibverbs1 ibverbs-providers   # or: dnf install rdma-core libibverbs"],
        ),
        L002 => (
            &["ibverbs-providers (Debian) / providers not installed, or the .driver file missing", "Provider from another rdma-core build (vendor OFED mixed with distro)", "rdma-core too old for the device"],
            &["IBV_SHOW_WARNINGS=1 ibv_devinfo", "ls /etc/libibverbs.d", "ls /usr/lib/x86_64-linux-gnu/libibverbs/ /usr/lib64/libibverbs/"],
        ),
        L003 => (
            &["Vendor stack left behind after a kernel update", "Container image's rdma-core far from the host kernel", "Distribution rdma-core on a much newer mainline kernel"],
            &["uname -r", "dpkg -l rdma-core libibverbs1   # or: rpm -q rdma-core", "readlink -f /usr/lib/x86_64-linux-gnu/libibverbs.so.1"],
        ),
        L004 => (
            &["Source build in /usr/local", "Minimal container without a package database", "Statically linked application"],
            &["ldconfig -p | grep libibverbs", "readlink -f <path of libibverbs.so.1>"],
        ),
        A001 => (
            &["Distribution/PAM default memlock (64 KiB or 8 MiB)", "systemd service without LimitMEMLOCK", "Container runtime default ulimit", "Batch scheduler not propagating limits"],
            &["ulimit -l", "grep 'locked memory' /proc/<pid>/limits", "systemctl show <svc> -p LimitMEMLOCK"],
        ),
        A002 => (
            &["Site udev rule restricting /dev/infiniband/uverbs*", "User not in the group the rule grants", "Container/LSM policy"],
            &["ls -l /dev/infiniband/", "id", "grep -rE 'uverbs|infiniband' /etc/udev/rules.d/"],
        ),
        A003 => (
            &["Resource files are root-only by design", "Container with read-only /sys", "Kernel lockdown"],
            &["ls -l /sys/bus/pci/devices/<BDF>/resource*"],
        ),
        A004 => (
            &["Container without --device /dev/infiniband/... or the RDMA device plugin", "chroot/initramfs without devtmpfs or udev", "udev rule removed/renamed the nodes"],
            &["ls -l /dev/infiniband/", "cat /sys/class/infiniband_verbs/uverbs*/dev"],
        ),
        R001 => (
            &[
                "A process was SIGKILLed or crashed while a child kept its uverbs file descriptor open",
                "A zombie whose parent never calls wait()",
                "A driver stuck tearing down the objects",
            ],
            &["rdmakit res qp", "fuser -v /dev/infiniband/uverbs*", "ps -eo pid,ppid,stat,comm"],
        ),
        R002 => (
            &[
                "An application leaking QPs/CQs/MRs (count grows with its uptime)",
                "Objects left by dead or zombie processes (RDK-R001)",
                "A workload sized for a device with larger limits",
            ],
            &["rdmakit res qp --json", "rdma resource", "rdmakit devinfo -v | grep -E 'max_(qp|cq|mr|pd):'"],
        ),
        F001 => (
            &["Lanes lost in the cable or a transceiver (one bad lane makes the link fall back to 1X)", "A cable or connector not fully seated", "A port's enabled widths restricted (ibportstate ... width)"],
            &["iblinkinfo", "ibportstate <lid> <port>", "perfquery -x <lid> <port>"],
        ),
        F002 => (
            &["A cable not rated for the speed (a QDR cable on an EDR link)", "Signal trouble making the link train down (dirty connector, failing transceiver)", "A port's enabled speeds restricted, or firmware too old for the speed"],
            &["iblinkinfo", "ibportstate <lid> <port>", "perfquery -x <lid> <port>"],
        ),
        F003 => (
            &["The cable is unplugged or broken (Polling: no signal from the other end)", "The port was disabled (ibportstate ... disable) or by the switch's management", "The peer is powered off or its port is down"],
            &["ibportstate <lid> <port>", "iblinkinfo", "ibnetdiscover"],
        ),
        F004 => (
            &["A marginal cable or transceiver that drops the link", "The peer rebooted or its port was reset", "A switch port flapping (power, firmware, overheating)"],
            &["perfquery -x <lid> <port>", "iblinkinfo", "ibqueryerrors"],
        ),
        F005 => (
            &["A marginal or dirty cable, transceiver or connector (symbol errors, recoveries)", "A bad port at the other end of the link", "Electrical noise or a cable beyond its length rating"],
            &["perfquery -x <lid> <port>", "ibqueryerrors", "iblinkinfo", "rdmakit fabric check --baseline counters.json"],
        ),
        F006 => (
            &["Congestion: packets held (PortXmitWait) and discarded when a destination is oversubscribed", "Routes that lead nowhere (switch relay errors) after a topology change", "Partition (P_Key) membership that does not match (constraint errors)", "Subnet management packets dropped (VL15Dropped) on a busy or stuck port"],
            &["perfquery -x <lid> <port>", "ibqueryerrors --details", "ibroute <lid>"],
        ),
        F007 => (
            &["Counters never cleared on a port that has been counting for a long time", "A burst of errors large enough to fill a narrow counter (LinkDowned is 8 bits, LocalLinkIntegrityErrors 4)"],
            &["perfquery -x <lid> <port>", "perfquery -R <lid> <port>", "rdmakit fabric check --baseline counters.json"],
        ),
        F008 => (
            &["No subnet manager runs (opensm stopped, the switch's SM disabled)", "The SM's host or its port is down", "The SM runs on another subnet (a split fabric)"],
            &["sminfo", "systemctl status opensm", "ibnetdiscover"],
        ),
        F009 => (
            &["The fabric is split in two, each half with its own SM", "Two SMs with different subnet prefixes or SM keys that ignore each other"],
            &["sminfo <lid>", "ibnetdiscover", "saquery -s"],
        ),
        F010 => (
            &["The intended master came up after the other and handover did not happen", "Priorities set differently than intended (opensm -p, sm_priority)"],
            &["sminfo <lid>", "grep -i priority /etc/opensm/opensm.conf"],
        ),
        F011 => (
            &["Ports swept by a second or a former SM that were not swept again", "An SM handover that did not reach every port"],
            &["sminfo", "smpquery portinfo <lid> <port>", "ibnetdiscover"],
        ),
        F012 => (
            &["The SM is hung or stopped sweeping", "The SM's process is alive but its port lost its link"],
            &["sminfo <lid>", "journalctl -u opensm", "tail /var/log/opensm.log"],
        ),
        F013 => (
            &["A cloned virtual machine or SR-IOV function with a copied GUID", "An adapter or switch reflashed with another device's GUID", "Firmware that lost its GUID and fell back to a default"],
            &["ibnetdiscover", "ibstat", "smpquery nodeinfo <lid>"],
        ),
        F014 => (
            &["No subnet manager, or it has not swept since the port came up", "The SM cannot reach the port (a route, an M_Key mismatch)", "The port is stuck in Init"],
            &["sminfo", "ibstat", "ibportstate <lid> <port>"],
        ),
        F015 => (
            &["Two SMs assigned LIDs on one fabric", "An SM restarted without its guid2lid cache while old assignments lived on", "A LID set by hand (ibportstate ... lid)"],
            &["sminfo", "ibnetdiscover", "smpquery portinfo <lid> <port>"],
        ),
        F016 => (
            &["A cable unplugged, broken or never installed", "A node powered off or failed (its cables all missing at once)", "An uplink down that hides everything behind it"],
            &["iblinkinfo", "ibnetdiscover", "ibportstate <lid> <port>"],
        ),
        F017 => (
            &["A cable added without updating the expected topology", "A cable plugged into a port that should stay empty"],
            &["iblinkinfo", "ibnetdiscover"],
        ),
        F018 => (
            &["Two cables exchanged during installation or maintenance", "A cable moved to the neighbouring port", "An expected topology that is out of date"],
            &["iblinkinfo", "ibnetdiscover", "ibportstate <lid> <port>"],
        ),
        P001 => (
            &["RLIMIT_MEMLOCK below the buffer size (ENOMEM)", "Device out of MRs or the size above max_mr_size (EINVAL)", "Bad access flags (REMOTE_WRITE without LOCAL_WRITE)"],
            &["ulimit -l", "rdmakit devinfo -v | grep -E 'max_mr|max_mr_size'", "rdmakit explain ibv_reg_mr:ENOMEM"],
        ),
        P002 => (
            &["Device limits reached (max_qp, max_cq) by leaked or running resources", "Attributes refused by modify_qp (path MTU above active_mtu, rd_atomic above limits)", "Port not ACTIVE or no RoCE v2 GID"],
            &["rdmakit devinfo -v", "rdmakit explain ibv_modify_qp:EINVAL", "rdmakit doctor --verbose"],
        ),
        P003 => (
            &["Packets lost: the device's UDP port 4791 blocked or taken (kernel rxe bound to it)", "Completion with an error status (REM_ACCESS_ERR, RETRY_EXC_ERR)", "Data corruption between registration and DMA"],
            &["ss -uanp | grep 4791", "rdmakit explain wc:RETRY_EXC_ERR", "rdmakit doctor --json | jq '.probes'"],
        ),
    }
}
