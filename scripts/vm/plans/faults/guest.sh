# Plan "faults": the fault catalogue (scripts/vm/catalogue.json, docs/fault-catalogue.md)
# made on the real kernel. Each scenario puts Debian 12's 6.1 kernel and rdma-core 44
# (rxe0 on eth0) into one failure state, runs `rdmakit doctor --json --no-probe` there
# (the live report the catalogue asserts) and `rdmakit collect` (the bundle the host
# replays and crates/doctor/tests/data/vm/ keeps), then undoes the fault. In
# /results/faults/:
#   NAME.json  the live report     NAME.exit   its exit status   NAME.json.gz the bundle
#   NAME.vars  KEY=VALUE the catalogue's {KEY} stand for (PIDs, namespaces, values read)
#   NAME.state what the plan observed (rdma-core's own tools in that state, lsmod, ...)
# --no-probe: with no host device the live doctor would probe rdmakit's soft NIC,
# which a replay cannot; the catalogue is about the host's stack.
D=$R/faults
mkdir -p $D
chmod 777 $D
dpkg-query -W rdma-core libibverbs1 ibverbs-providers > $D/versions.txt 2>&1
CAT=/rdk/catalogue.json
UVERBS_LIB=/usr/lib/x86_64-linux-gnu/libibverbs

# fault_run NAME [WRAPPER...]: live report, bundle, and the catalogue's assertions;
# $DOCTOR_ARGS (e.g. --pid N) goes to both rdmakit runs; the doctor runs with --optics
# because collect always reads the module EEPROMs, so the replay has them
DOCTOR_ARGS=
fault_run() {
  _n=$1; shift
  "$@" rdmakit doctor --json --no-probe --optics $DOCTOR_ARGS > $D/$_n.json 2> $D/$_n.stderr
  echo $? > $D/$_n.exit
  "$@" rdmakit collect $DOCTOR_ARGS -o $D/$_n.json.gz 2>> $D/$_n.stderr \
    || { echo "rdmakit collect failed"; cat $D/$_n.stderr; return 1; }
  dmesg > $D/$_n.dmesg
  touch $D/$_n.vars
  cat $D/$_n.stderr
  python3 /rdk/doctorcheck.py $D/$_n.json --exit "$(cat $D/$_n.exit)" \
    --catalogue $CAT --fault $_n --vars $D/$_n.vars
}

# fault_run_pid NAME PID: fault_run NAME about the process PID (doctor --pid), then
# PID is killed and reaped; fails when fault_run did.
fault_run_pid() {
  DOCTOR_ARGS="--pid $2" fault_run $1; _frc=$?
  kill $2; wait $2 2>/dev/null
  return $_frc
}

# as_user CMD...: uid/gid 1000 (rdmauser, in the image) with an unlimited memlock
# limit; as_user_memlock KIB CMD...: the same with RLIMIT_MEMLOCK = KIB KiB
as_user() { sh -c 'ulimit -l unlimited && exec setpriv --reuid=1000 --regid=1000 --clear-groups "$@"' sh "$@"; }
as_user_memlock() {
  _k=$1; shift
  sh -c 'ulimit -l "$0" && exec setpriv --reuid=1000 --regid=1000 --clear-groups "$@"' "$_k" "$@"
}

# start_user KIB CMD...: CMD in the background as uid 1000 with RLIMIT_MEMLOCK KIB
# ("unlimited" allowed); BG is its PID (sh execs setpriv execs CMD: one PID)
start_user() {
  _k=$1; shift
  sh -c 'ulimit -l "$0" && exec setpriv --reuid=1000 --regid=1000 --clear-groups "$@"' "$_k" "$@" &
  BG=$!
}

# wait_for PID COMM: until /proc/PID/comm is COMM (the exec chain has finished)
wait_for() {
  _i=0
  while [ $_i -lt 50 ]; do
    [ "$(cat /proc/$1/comm 2>/dev/null)" = "$2" ] && return 0
    sleep 0.1; _i=$((_i + 1))
  done
  echo "process $1 never became $2"; return 1
}

port_ready() { wait_port_active rxe0 1 30 && wait_gids rxe0 1 3 20; }

# ------------------------------------------------------------------ kernel modules
sc_rdma_ucm_missing() {
  rmmod rdma_ucm || return 1
  { lsmod; ls -l /dev/infiniband; } > $D/rdma_ucm_missing.state 2>&1
  _rc=0
  fault_run rdma_ucm_missing || _rc=1
  modprobe rdma_ucm || _rc=1
  return $_rc
}

# ------------------------------------------------------------------ /dev/infiniband
# (rdma-core 44 then skips rxe0: ibv_devinfo -d rxe0 says "IB device 'rxe0' wasn't found")
sc_dev_node_missing() {
  _dev=$(cat /sys/class/infiniband_verbs/uverbs0/dev) || return 1
  rm /dev/infiniband/uverbs0 || return 1
  { ls -l /dev/infiniband; echo "uverbs0 dev=$_dev"; ibv_devinfo -d rxe0; echo "ibv_devinfo exit $?"; } \
    > $D/dev_node_missing.state 2>&1
  echo "dev=$_dev" > $D/dev_node_missing.vars
  cat $D/dev_node_missing.state
  _rc=0
  fault_run dev_node_missing || _rc=1
  # A node made by hand would outlive the device (devtmpfs removes only its own):
  # registering rxe0 again makes devtmpfs create it.
  rdma link delete rxe0 && rdma link add rxe0 type rxe netdev eth0 && port_ready || _rc=1
  [ -c /dev/infiniband/uverbs0 ] || { echo "FAIL: uverbs0 not recreated"; _rc=1; }
  return $_rc
}

# A site rule made uverbs0 root-only; an application of rdmauser (uid 1000) is asked
# about with --pid by root.
sc_uverbs_not_accessible_pid() {
  chmod 600 /dev/infiniband/uverbs0 || return 1
  start_user unlimited sleep 600
  _p=$BG
  wait_for $_p sleep || return 1
  { ls -l /dev/infiniband; echo "as uid 1000:"; as_user ibv_devinfo -d rxe0; echo "ibv_devinfo exit $?"; } \
    > $D/uverbs_not_accessible_pid.state 2>&1
  echo "pid=$_p" > $D/uverbs_not_accessible_pid.vars
  _rc=0
  fault_run_pid uverbs_not_accessible_pid $_p || _rc=1
  chmod 666 /dev/infiniband/uverbs0 || _rc=1
  return $_rc
}

# rdmakit itself run by rdmauser while uverbs0 is root-only: access(2) answers.
sc_uverbs_not_accessible_user() {
  chmod 600 /dev/infiniband/uverbs0 || return 1
  { ls -l /dev/infiniband; as_user ibv_devinfo -d rxe0; echo "ibv_devinfo exit $?"; } \
    > $D/uverbs_not_accessible_user.state 2>&1
  _rc=0
  fault_run uverbs_not_accessible_user as_user || _rc=1
  chmod 666 /dev/infiniband/uverbs0 || _rc=1
  return $_rc
}

# A process in its own mount namespace whose /dev/infiniband is an empty tmpfs (a
# container started without the RDMA devices).
sc_dev_nodes_hidden_pid() {
  unshare -m sh -c 'mount -t tmpfs none /dev/infiniband && ulimit -l unlimited && exec setpriv --reuid=1000 --regid=1000 --clear-groups sleep 600' &
  _p=$!
  wait_for $_p sleep || return 1
  { ls -la /proc/$_p/root/dev/infiniband; echo "host:"; ls -l /dev/infiniband
    echo "inside its mount namespace, as uid 1000:"
    nsenter -t $_p -m setpriv --reuid=1000 --regid=1000 --clear-groups ibv_devinfo -d rxe0
    echo "ibv_devinfo exit $?"; } > $D/dev_nodes_hidden_pid.state 2>&1
  echo "pid=$_p" > $D/dev_nodes_hidden_pid.vars
  _rc=0
  fault_run_pid dev_nodes_hidden_pid $_p || _rc=1
  return $_rc
}

# ------------------------------------------------------------------ memlock
sc_memlock_pid() {
  start_user 64 sleep 600
  _p=$BG
  wait_for $_p sleep || return 1
  { grep "locked memory" /proc/$_p/limits
    echo "ibv_rc_pingpong -s 1 MiB as uid 1000 with ulimit -l 64:"
    as_user_memlock 64 timeout 20 ibv_rc_pingpong -d rxe0 -g 1 -s 1048576 -p 18720
    echo "ibv_rc_pingpong exit $?"; } > $D/memlock_pid.state 2>&1
  cat $D/memlock_pid.state
  grep -q "Couldn't register MR" $D/memlock_pid.state \
    || { echo "FAIL: ibv_reg_mr of 1 MiB did not fail under a 64 KiB memlock limit"; kill $_p; return 1; }
  echo "pid=$_p" > $D/memlock_pid.vars
  _rc=0
  fault_run_pid memlock_pid $_p || _rc=1
  return $_rc
}

# Debian's default for a user without limits.d: 8 MiB (a warning, not an error).
sc_memlock_default_user() {
  as_user_memlock 8192 sh -c 'id; ulimit -l' > $D/memlock_default_user.state 2>&1
  fault_run memlock_default_user as_user_memlock 8192
}

# ------------------------------------------------------------------ netdev: MTU, IPv4
active_mtu() { ibv_devinfo -d rxe0 | sed -n 's/.*active_mtu:[[:space:]]*\([0-9]*\).*/\1/p'; }

sc_mtu() {
  # $1 scenario, $2 netdev MTU
  ip link set eth0 mtu $2 || return 1
  sleep 1
  _m=$(active_mtu)
  { ip link show eth0; ibv_devinfo -d rxe0; } > $D/$1.state 2>&1
  printf 'netdev_mtu=%s\nactive_mtu=%s\n' "$2" "$_m" > $D/$1.vars
  _rc=0
  fault_run $1 || _rc=1
  ip link set eth0 mtu 1500 || _rc=1
  port_ready || _rc=1
  return $_rc
}

gid_v4() { grep -l '0000:0000:0000:0000:0000:ffff:' /sys/class/infiniband/rxe0/ports/1/gids/* 2>/dev/null; }

sc_no_ipv4() {
  ip addr del 10.0.2.15/24 dev eth0 || return 1
  _i=0
  while [ -n "$(gid_v4)" ] && [ $_i -lt 50 ]; do sleep 0.2; _i=$((_i + 1)); done
  [ -z "$(gid_v4)" ] || { echo "FAIL: the IPv4 GID stayed after the address went"; return 1; }
  { ip addr show eth0; grep . /sys/class/infiniband/rxe0/ports/1/gids/[0-3]; } > $D/no_ipv4.state 2>&1
  cat $D/no_ipv4.state
  # the table is not compacted: where fec0:: sits depends on the order GIDs came
  _g=$(grep -l '^fec0:' /sys/class/infiniband/rxe0/ports/1/gids/* | head -1)
  echo "fec0_index=${_g##*/}" > $D/no_ipv4.vars
  _rc=0
  fault_run no_ipv4 || _rc=1
  ip addr add 10.0.2.15/24 dev eth0 || _rc=1
  port_ready || _rc=1
  return $_rc
}

# ------------------------------------------------------------------ uverbs ABI
# Simulated: no kernel reports anything but 6 in /sys/class/infiniband_verbs/abi_version,
# and no other rdma-core is reachable offline; "7" is bind-mounted over the file. The
# real part: what Debian's rdma-core 44 then does (it still finds rxe0: it asks netlink).
sc_abi_file_bind_mount() {
  echo 7 > /tmp/abi7
  mount --bind /tmp/abi7 /sys/class/infiniband_verbs/abi_version || return 1
  { echo "abi_version: $(cat /sys/class/infiniband_verbs/abi_version)"; ibv_devices; echo "ibv_devices exit $?"; } \
    > $D/abi_file_bind_mount.state 2>&1
  cat $D/abi_file_bind_mount.state
  _rc=0
  grep -q rxe0 $D/abi_file_bind_mount.state || { echo "FAIL: rdma-core 44 lost rxe0"; _rc=1; }
  fault_run abi_file_bind_mount || _rc=1
  umount /sys/class/infiniband_verbs/abi_version || _rc=1
  return $_rc
}

# ------------------------------------------------------------------ provider library
sc_provider_lib_missing() {
  mv $UVERBS_LIB/librxe-rdmav34.so /tmp/ || return 1
  { ls -l /etc/libibverbs.d/rxe.driver; IBV_SHOW_WARNINGS=1 ibv_devinfo; echo "ibv_devinfo exit $?"; } \
    > $D/provider_lib_missing.state 2>&1
  cat $D/provider_lib_missing.state
  _rc=0
  fault_run provider_lib_missing || _rc=1
  mv /tmp/librxe-rdmav34.so $UVERBS_LIB/ || _rc=1
  return $_rc
}

# libibverbs.so.1 gone (the package still says installed: a broken install or a
# container image without it)
sc_libibverbs_missing() {
  _l=$(readlink /usr/lib/x86_64-linux-gnu/libibverbs.so.1) || return 1
  mv /usr/lib/x86_64-linux-gnu/libibverbs.so.1 /tmp/ || return 1
  { ls -l /usr/lib/x86_64-linux-gnu/ | grep ibverbs; ibv_devices; echo "ibv_devices exit $?"; } \
    > $D/libibverbs_missing.state 2>&1
  cat $D/libibverbs_missing.state
  _rc=0
  fault_run libibverbs_missing || _rc=1
  mv /tmp/libibverbs.so.1 /usr/lib/x86_64-linux-gnu/ || _rc=1
  return $_rc
}

# ------------------------------------------------------------------ network namespaces
sc_netns_exclusive() {
  rdma system set netns exclusive || return 1
  ip netns add blue && ip netns exec blue ip link set lo up || return 1
  ip netns exec blue sh -c 'ulimit -l unlimited && exec setpriv --reuid=1000 --regid=1000 --clear-groups sleep 600' &
  _p=$!
  wait_for $_p sleep || return 1
  _own=$(readlink /proc/self/ns/net) _blue=$(readlink /proc/$_p/ns/net)
  { rdma system; echo "rdma dev set rxe0 netns blue:"; rdma dev set rxe0 netns blue; echo "exit $?"
    echo "rdma system set netns shared while blue exists:"; rdma system set netns shared; echo "exit $?"
    rdma system; echo "inside blue:"; ip netns exec blue ibv_devices
    ip netns exec blue ls /sys/class/infiniband /sys/class/infiniband_verbs
    ip netns exec blue cat /sys/class/infiniband_verbs/uverbs0/ibdev
    echo "init $_own blue $_blue"; } > $D/netns_exclusive.state 2>&1
  cat $D/netns_exclusive.state
  printf 'init_ns=%s\nblue_ns=%s\n' "$_own" "$_blue" > $D/netns_exclusive_inside.vars
  printf 'pid=%s\ninit_ns=%s\nblue_ns=%s\n' "$_p" "$_own" "$_blue" > $D/netns_exclusive_pid.vars
  _rc=0
  fault_run netns_exclusive_inside ip netns exec blue || _rc=1
  fault_run_pid netns_exclusive_pid $_p || _rc=1
  ip netns del blue || _rc=1
  rdma system set netns shared || _rc=1
  return $_rc
}

# ------------------------------------------------------------------ QPs leaked at a limit
# rxe's own max_qp is 1,048,560 (out of reach in a 2 GiB guest); the limit a real host
# hits first is the RDMA cgroup controller's (containers): a cgroup may hold 12
# objects on rxe0. qpholder.py creates QPs until ibv_create_qp fails, forks a child
# that keeps the device file, and holds; then the parent is killed.
CG=/sys/fs/cgroup
sc_qp_leak() {
  grep -q "^[^ ]* $CG cgroup2 " /proc/mounts || mount -t cgroup2 none $CG || return 1
  echo +rdma > $CG/cgroup.subtree_control || return 1
  mkdir -p $CG/leak && echo "rxe0 hca_handle=2 hca_object=12" > $CG/leak/rdma.max || return 1
  _h=$D/qp_leak.holder
  sh -c 'echo $$ > '$CG'/leak/cgroup.procs && exec python3 /rdk/qpholder.py rxe0 64' > $_h 2>&1 &
  _i=0
  while [ $_i -lt 100 ] && ! grep -q '^HOLDER' $_h; do sleep 0.2; _i=$((_i + 1)); done
  grep -q '^HOLDER' $_h || { echo "qpholder did not start:"; cat $_h; return 1; }
  eval "$(sed -n 's/^HOLDER //p' $_h)"   # parent= child= qps= stop=
  { cat $_h; cat $CG/leak/rdma.max $CG/leak/rdma.current $CG/leak/cgroup.procs
    echo "another process of the cgroup:"
    sh -c 'echo $$ > '$CG'/leak/cgroup.procs && exec timeout 10 ibv_rc_pingpong -d rxe0 -g 1 -p 18730'
    echo "ibv_rc_pingpong exit $?"; rdma resource; } > $D/qp_leak.state 2>&1
  cat $D/qp_leak.state
  _rc=0
  [ "$stop" = EAGAIN ] || { echo "FAIL: ibv_create_qp stopped with $stop, not EAGAIN"; _rc=1; }
  printf 'holder=%s\nchild=%s\nqps=%s\n' "$parent" "$child" "$qps" > $D/qp_leak_cgroup.vars
  cp $D/qp_leak_cgroup.vars $D/qp_leak_orphaned.vars
  fault_run qp_leak_cgroup || _rc=1
  kill -9 $parent
  sleep 1
  { echo "after SIGKILL of $parent:"; cat $CG/leak/rdma.current $CG/leak/cgroup.procs
    rdma resource show qp; ls -l /proc/$child/fd; } >> $D/qp_leak.state 2>&1
  _fd=$(ls -l /proc/$child/fd | sed -n 's|.* \([0-9][0-9]*\) -> /dev/infiniband/uverbs0|\1|p' | head -1)
  echo "child_fd=$_fd" >> $D/qp_leak_orphaned.vars
  fault_run qp_leak_orphaned || _rc=1
  kill -9 $child
  sleep 1
  { echo "after SIGKILL of $child:"; cat $CG/leak/rdma.current; } >> $D/qp_leak.state 2>&1
  grep -q "rxe0 hca_handle=0 hca_object=0" $CG/leak/rdma.current \
    || { echo "FAIL: the cgroup is still charged after the last holder exited"; cat $CG/leak/rdma.current; _rc=1; }
  rmdir $CG/leak || _rc=1
  return $_rc
}

# ------------------------------------------------------------------ devices and core modules
sc_no_device() {
  rdma link delete rxe0 || return 1
  { rdma link; ibv_devinfo; echo "ibv_devinfo exit $?"; lsmod; } > $D/no_device.state 2>&1
  fault_run no_device
}

# ib_uverbs is used by rdma_rxe (ib_umem) and rdma_ucm: it goes only after them.
sc_ib_uverbs_missing() {
  { echo "rmmod ib_uverbs:"; rmmod ib_uverbs; echo "exit $?"; } > $D/ib_uverbs_missing.state 2>&1
  rmmod rdma_ucm rdma_rxe ib_uverbs || return 1
  { lsmod; ls -l /sys/class/infiniband_verbs /dev/infiniband; ibv_devinfo; echo "ibv_devinfo exit $?"; } \
    >> $D/ib_uverbs_missing.state 2>&1
  cat $D/ib_uverbs_missing.state
  fault_run ib_uverbs_missing
}

# ib_core goes last, after everything that uses it. Opening a NETLINK_RDMA socket
# makes the kernel load it again (request_module), so rdmakit must not.
sc_ib_core_missing() {
  rmmod ib_umad rdma_cm iw_cm ib_cm ib_core || return 1
  { lsmod; ls /sys/class/infiniband; } > $D/ib_core_missing.state 2>&1
  _rc=0
  fault_run ib_core_missing || _rc=1
  if grep -q '^ib_core ' /proc/modules; then
    echo "FAIL: ib_core is loaded again after rdmakit doctor and collect ran"; _rc=1
  fi
  return $_rc
}

sc_modules_restored() {
  modprobe -a ib_uverbs ib_umad rdma_ucm rdma_rxe || return 1
  rdma link add rxe0 type rxe netdev eth0 || return 1
  port_ready || return 1
  fault_run modules_restored
}

step faults/rdma_ucm_missing sc_rdma_ucm_missing
step faults/dev_node_missing sc_dev_node_missing
step faults/uverbs_not_accessible_pid sc_uverbs_not_accessible_pid
step faults/uverbs_not_accessible_user sc_uverbs_not_accessible_user
step faults/dev_nodes_hidden_pid sc_dev_nodes_hidden_pid
step faults/memlock_pid sc_memlock_pid
step faults/memlock_default_user sc_memlock_default_user
step faults/mtu_small sc_mtu mtu_small 1000
step faults/mtu_jumbo sc_mtu mtu_jumbo 9000
step faults/no_ipv4 sc_no_ipv4
step faults/abi_file_bind_mount sc_abi_file_bind_mount
step faults/provider_lib_missing sc_provider_lib_missing
step faults/libibverbs_missing sc_libibverbs_missing
step faults/netns_exclusive sc_netns_exclusive
step faults/qp_leak sc_qp_leak
step faults/no_device sc_no_device
step faults/ib_uverbs_missing sc_ib_uverbs_missing
step faults/ib_core_missing sc_ib_core_missing
step faults/modules_restored sc_modules_restored
