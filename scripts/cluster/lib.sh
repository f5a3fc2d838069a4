# shellcheck shell=bash
# A real Slurm cluster on this one machine: munge, slurmctld and one slurmd per node,
# every daemon in its own network + UTS namespace on a private bridge.
# Sourced by scripts/cluster/cluster (up / exec / run-plan / down); see README.md.
#
# State of a cluster lives in its directory $CL (made by cl_up):
#   env              shell exports for clients: SLURM_CONF, CL_*  (source it)
#   slurm.conf       the cluster's config; munge/  the key, socket, log
#   ctl/             slurmctld's state, log, pid
#   nodes/NAME/      per node: spool/, slurmd.log, slurmd.pid, root/ (its host tree,
#                    when a plan puts one there), fault (see bin/rdmakit)
#   bin/rdmakit      the rdmakit each node has "installed" (see README.md)
#   netns            the names of the namespaces and the bridge (for cl_down)

cl_say() { printf '==> cluster: %s\n' "$*" >&2; }
cl_die() { printf 'cluster: error: %s\n' "$*" >&2; exit 1; }

# The packages the tier needs, as Debian names (fuse3 and python3-fusepy: the fleet
# plan's read that never returns, scripts/cluster/hangfs.py).
CL_PACKAGES=(munge slurmctld slurmd slurm-client fuse3 python3-fusepy)

cl_have_packages() {
  command -v munged >/dev/null 2>&1 && command -v slurmctld >/dev/null 2>&1 &&
    command -v slurmd >/dev/null 2>&1 && command -v srun >/dev/null 2>&1 &&
    command -v scontrol >/dev/null 2>&1 && command -v sinfo >/dev/null 2>&1 &&
    command -v fusermount3 >/dev/null 2>&1 && [ -f /usr/lib/python3/dist-packages/fusepy.py ]
}

# Installs the packages when missing. Returns 1 (after saying why) when they cannot be.
cl_install_packages() {
  cl_have_packages && return 0
  cl_say "installing Debian packages: ${CL_PACKAGES[*]}"
  local sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  # No daemon may start by itself on install (policy-rc.d 101 = action forbidden).
  local policy=/usr/sbin/policy-rc.d made_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null &&
      "${sudo[@]}" chmod 755 "$policy" && made_policy=1
  fi
  local rc=0
  { "${sudo[@]}" apt-get update -qq &&
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${CL_PACKAGES[@]}"; } \
    >"${TMPDIR:-/tmp}/rdmakit-cluster-apt.log" 2>&1 || rc=$?
  [ "$made_policy" = 1 ] && "${sudo[@]}" rm -f "$policy"
  if [ "$rc" -ne 0 ] || ! cl_have_packages; then
    tail -n 5 "${TMPDIR:-/tmp}/rdmakit-cluster-apt.log" >&2
    return 1
  fi
}

# cl_up DIR NODES RDMAKIT_BIN: starts munge, slurmctld and NODES slurmd, waits until
# every node is idle. On failure it prints the evidence and returns non-zero; the
# caller runs cl_down DIR either way (trap).
cl_up() {
  local dir=$1 nodes=$2 real=$3
  [ "$(id -u)" -eq 0 ] || cl_die "the cluster tier needs root (namespaces, munge user)"
  [ "$nodes" -ge 1 ] 2>/dev/null || cl_die "node count must be >= 1 (got $nodes)"
  [ "$nodes" -le 200 ] || cl_die "node count must be <= 200 (got $nodes)"
  mkdir -p "$dir"
  chmod 755 "$dir"
  CL=$(cd "$dir" && pwd)
  local id
  id=$(printf '%04x' $(( ($$ + RANDOM) % 65536 )))
  CL_ID=$id
  # Names of everything in the kernel's global tables carry the id, so clusters of
  # concurrent runs never meet: bridge rdkc<id>, namespaces rdkc<id>-<node>.
  local br="rdkc$id"
  echo "bridge $br" >"$CL/netns"
  # A /24 no interface on this machine uses yet, picked under a lock.
  local net="" k
  exec 8>/tmp/.rdmakit-cluster.lock
  flock 8
  for k in $(seq 10 250); do
    if ! ip -4 -o addr show | grep -q " 10\.251\.$k\."; then net="10.251.$k"; break; fi
  done
  [ -n "$net" ] || { flock -u 8; cl_die "no free 10.251.x.0/24 subnet"; }
  ip link add "$br" type bridge || { flock -u 8; cl_die "ip link add $br type bridge failed"; }
  ip addr add "$net.1/24" dev "$br"
  ip link set "$br" up
  flock -u 8
  exec 8>&-

  mkdir -p "$CL/munge" "$CL/ctl/state" "$CL/bin" "$CL/nodes"
  # munged: its own key, socket and files, run as the munge user.
  chown munge:munge "$CL/munge"
  chmod 711 "$CL/munge"
  dd if=/dev/urandom of="$CL/munge/munge.key" bs=1024 count=1 status=none
  chown munge:munge "$CL/munge/munge.key"
  chmod 400 "$CL/munge/munge.key"
  runuser -u munge -- /usr/sbin/munged --socket="$CL/munge/munge.sock" \
    --key-file="$CL/munge/munge.key" --pid-file="$CL/munge/munged.pid" \
    --log-file="$CL/munge/munged.log" --seed-file="$CL/munge/munged.seed" ||
    { cat "$CL/munge/munged.log" >&2 2>/dev/null; cl_die "munged did not start"; }

  local node_names=() i
  for i in $(seq 1 "$nodes"); do node_names+=("n$i"); done
  local host_ctl="ctl"
  {
    echo "# rdmakit cluster tier ($CL), written by scripts/cluster/lib.sh"
    echo "ClusterName=rdkc$id"
    echo "SlurmctldHost=$host_ctl($net.2)"
    echo "SlurmUser=root"
    echo "SlurmdUser=root"
    echo "AuthType=auth/munge"
    echo "CredType=cred/munge"
    echo "AuthInfo=socket=$CL/munge/munge.sock"
    echo "StateSaveLocation=$CL/ctl/state"
    echo "SlurmdSpoolDir=$CL/nodes/%n/spool"
    echo "SlurmctldPidFile=$CL/ctl/slurmctld.pid"
    echo "SlurmdPidFile=$CL/nodes/%n/slurmd.pid"
    echo "SlurmctldLogFile=$CL/ctl/slurmctld.log"
    echo "SlurmdLogFile=$CL/nodes/%n/slurmd.log"
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
    echo "MpiDefault=none"
    echo "SwitchType=switch/none"
    echo "ReturnToService=2"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_CPU"
    echo "SlurmdParameters=config_overrides"
    echo "SchedulerType=sched/builtin"
    echo "SlurmctldTimeout=30"
    echo "SlurmdTimeout=30"
    echo "MessageTimeout=10"
    echo "KillWait=2"
    echo "InactiveLimit=0"
    echo "MinJobAge=10"
    echo "AccountingStorageType=accounting_storage/none"
    echo "JobCompType=jobcomp/none"
    echo "JobAcctGatherType=jobacct_gather/none"
    echo "SlurmctldDebug=info"
    echo "SlurmdDebug=info"
    # Extra lines a plan asks for (HealthCheckProgram, Prolog, ...).
    if [ -n "${CL_EXTRA_CONF:-}" ]; then printf '%s\n' "$CL_EXTRA_CONF"; fi
    for i in $(seq 1 "$nodes"); do
      echo "NodeName=n$i NodeAddr=$net.$((10 + i)) CPUs=2 RealMemory=64 State=UNKNOWN"
    done
    echo "PartitionName=all Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
  } >"$CL/slurm.conf"
  # srun, sinfo, scontrol in this shell and in the plans talk to this cluster.
  export SLURM_CONF="$CL/slurm.conf"

  # The controller: its own namespaces (hostname ctl, $net.2).
  cl_netns_add "rdkc$id-ctl" "$br" "$net.2" || cl_die "namespace for the controller"
  cl_spawn "rdkc$id-ctl" "$host_ctl" "$CL/ctl/slurmctld.out" \
    /usr/sbin/slurmctld -D -i -f "$CL/slurm.conf"
  echo $! >"$CL/ctl/launcher.pid"

  # The nodes' rdmakit: reads its node's tree when the plan gave it one.
  cl_write_node_rdmakit "$real"
  for i in $(seq 1 "$nodes"); do
    mkdir -p "$CL/nodes/n$i/spool"
    cl_netns_add "rdkc$id-n$i" "$br" "$net.$((10 + i))" || cl_die "namespace for n$i"
    cl_spawn "rdkc$id-n$i" "n$i" "$CL/nodes/n$i/slurmd.out" \
      /usr/sbin/slurmd -D -N "n$i" -f "$CL/slurm.conf"
  done
  {
    echo "export SLURM_CONF=$CL/slurm.conf"
    echo "export CL=$CL"
    echo "export CL_DIR=$CL"
    echo "export CL_ID=$id"
    echo "export CL_NET=$net"
    echo "export CL_BRIDGE=$br"
    echo "export CL_NODES='${node_names[*]}'"
    echo "export CL_RDMAKIT=$CL/bin/rdmakit"
    echo "export CL_RDMAKIT_REAL=$real"
  } >"$CL/env"
  cl_wait_nodes_idle "$nodes" 60
}

# cl_veth NODE: the bridge-side end of NODE's eth0 (for tc on the bridge side).
cl_veth() {
  local tag="${CL_ID:?}-$1"
  local v="v${tag//-/}"
  echo "${v:0:15}"
}

# cl_netns_add NAME BRIDGE ADDR: a network namespace with lo up and eth0 (a veth on the
# bridge) at ADDR/24.
cl_netns_add() {
  local ns=$1 br=$2 addr=$3
  # veth names: at most 15 characters, unique per cluster and node.
  local v
  v=$(cl_veth "${ns#rdkc"$CL_ID"-}")
  ip netns add "$ns" || return 1
  echo "netns $ns" >>"$CL/netns"
  ip link add "$v" type veth peer name eth0 netns "$ns" || return 1
  ip link set "$v" master "$br"
  ip link set "$v" up
  ip -n "$ns" link set lo up
  ip -n "$ns" addr add "$addr/24" dev eth0
  ip -n "$ns" link set eth0 up
  # No default route: a node reaches its /24 and nothing else.
}

# cl_spawn NETNS HOSTNAME OUTFILE CMD...: runs CMD in the background inside NETNS
# (nsenter --net, not `ip netns exec`, which remounts /sys and breaks slurmd's cgroup
# detection) and a new UTS namespace whose hostname is HOSTNAME. $! is its pid.
cl_spawn() {
  local ns=$1 host=$2 out=$3
  shift 3
  nsenter --net="/run/netns/$ns" unshare --uts -- \
    /bin/sh -c 'hostname "$0" && exec "$@"' "$host" "$@" >"$out" 2>&1 </dev/null &
}

# The pid of the daemon running in a node's namespaces (slurmd; ctl: slurmctld).
cl_node_pid() {
  local node=$1 f
  if [ "$node" = ctl ]; then f="$CL/ctl/slurmctld.pid"; else f="$CL/nodes/$node/slurmd.pid"; fi
  [ -s "$f" ] && cat "$f"
}

# cl_exec NODE CMD...: runs CMD in NODE's network and UTS namespaces (what slurmd's
# children see), with the environment the caller gives it.
cl_exec() {
  local node=$1 pid
  shift
  pid=$(cl_node_pid "$node") || cl_die "no daemon pid for $node"
  nsenter --target "$pid" --net --uts -- "$@"
}

# The rdmakit every node runs: bin/rdmakit. On a node whose directory holds root/,
# `doctor` and `collect` read that tree (--root); a node's `fault` file breaks its
# install on purpose: "absent" (rdmakit not found, exit 127, no output) or
# "truncate" (the report stops after 200 bytes, as if the process died mid-write).
# Which node it is: SLURMD_NODENAME (jobs), else the hostname (the UTS namespace; the
# health check runs with an empty environment). A real deployment installs rdmakit
# itself; nothing here changes how rdmakit finds its host.
cl_write_node_rdmakit() {
  local real=$1
  cat >"$CL/bin/rdmakit" <<EOF
#!/bin/sh
node=\${SLURMD_NODENAME:-\$(hostname -s)}
dir="$CL/nodes/\$node"
fault=\$(cat "\$dir/fault" 2>/dev/null)
case "\$fault" in
  absent) echo "\$0: rdmakit: not found" >&2; exit 127 ;;
esac
if [ -d "\$dir/root" ]; then
  case "\$1" in
    doctor|collect) sub=\$1; shift; set -- "\$sub" --root "\$dir/root" "\$@" ;;
  esac
fi
case "\$fault" in
  truncate) "$real" "\$@" | head -c 200; exit 0 ;;
esac
exec "$real" "\$@"
EOF
  chmod 755 "$CL/bin/rdmakit"
}

# cl_wait_nodes_idle COUNT SECONDS: until COUNT nodes are idle, or print why not.
cl_wait_nodes_idle() {
  local want=$1 secs=$2 t=0 n
  while [ "$t" -lt $((secs * 10)) ]; do
    n=$(sinfo -h -N -t idle -o '%N' 2>/dev/null | sort -u | wc -l)
    [ "$n" -ge "$want" ] && return 0
    sleep 0.1
    t=$((t + 1))
  done
  cl_say "only $n of $want nodes idle after ${secs}s"
  sinfo -N -l >&2 || true
  tail -n 20 "$CL/ctl/slurmctld.log" "$CL/ctl/slurmctld.out" >&2 2>/dev/null || true
  tail -n 5 "$CL"/nodes/n1/slurmd.log "$CL"/nodes/n1/slurmd.out >&2 2>/dev/null || true
  return 1
}

# cl_down DIR: stops every process of the cluster, removes its namespaces, veths and
# bridge. Safe to call twice and on a half-started cluster.
cl_down() {
  local dir=$1 f pid kind name
  [ -d "$dir" ] || return 0
  # Daemons first (slurmd, slurmctld), then munged: TERM, then KILL after 5 s.
  local pids=()
  for f in "$dir"/nodes/*/slurmd.pid "$dir"/ctl/slurmctld.pid "$dir"/munge/munged.pid; do
    [ -s "$f" ] && pids+=("$(cat "$f")")
  done
  # Anything still running inside the namespaces (job steps, health checks).
  if [ -f "$dir/netns" ]; then
    while read -r kind name; do
      [ "$kind" = netns ] || continue
      for pid in $(ip netns pids "$name" 2>/dev/null); do pids+=("$pid"); done
    done <"$dir/netns"
  fi
  if [ ${#pids[@]} -gt 0 ]; then
    kill "${pids[@]}" 2>/dev/null || true
    local t
    for t in $(seq 1 50); do
      local alive=0
      for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
      [ "$alive" = 0 ] && break
      sleep 0.1
    done
    kill -9 "${pids[@]}" 2>/dev/null || true
  fi
  if [ -f "$dir/netns" ]; then
    while read -r kind name; do
      case "$kind" in
        netns) ip netns del "$name" 2>/dev/null || true ;;
        bridge) ip link del "$name" 2>/dev/null || true ;;
      esac
    done <"$dir/netns"
  fi
}
