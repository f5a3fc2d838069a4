# Plan "doctor": rdmakit doctor against the live Soft-RoCE stack, healthy and with
# faults created for real. Each scenario leaves, in /results/doctor/:
#   NAME.json      rdmakit doctor --json        NAME.exit   its exit status
#   NAME.txt       rdmakit doctor (human)       NAME.json.gz rdmakit collect bundle
#   NAME.dmesg     the kernel log               NAME.state  what the plan observed
# The host replays each bundle and compares with NAME.json (plans/doctor/host.sh).
# Scenarios: healthy, ib_umad_missing, port_down, provider_missing, memlock_user,
# sigkill_holder, orphaned_by_fork, restored (see scripts/vm/README.md).
D=$R/doctor
mkdir -p $D
chmod 777 $D
CHECK="python3 /rdk/doctorcheck.py"
# catalogue NAME: the fault catalogue's assertions for scenario NAME (with NAME.vars)
catalogue() { touch $D/$1.vars; echo "--catalogue /rdk/catalogue.json --fault $1 --vars $D/$1.vars"; }

# doctor_run NAME [WRAPPER...]: doctor (JSON and human) and collect, as WRAPPER runs
# them, with $DOCTOR_ARGS (e.g. --pid N) added to all three. The doctor runs with
# --optics because collect always reads the module EEPROMs: the replay has them.
DOCTOR_ARGS=
doctor_run() {
  _n=$1; shift
  "$@" rdmakit doctor --json --optics $DOCTOR_ARGS > $D/$_n.json 2> $D/$_n.stderr
  echo $? > $D/$_n.exit
  "$@" rdmakit doctor --verbose --color never --optics $DOCTOR_ARGS > $D/$_n.txt 2>&1
  "$@" rdmakit collect $DOCTOR_ARGS -o $D/$_n.json.gz || { echo "rdmakit collect failed"; return 1; }
  dmesg > $D/$_n.dmesg
  cat $D/$_n.stderr
}

# a non-root user (uid 1000, created in the image) with RLIMIT_MEMLOCK = 64 KiB
as_limited_user() {
  sh -c 'ulimit -l 64 && exec setpriv --reuid=1000 --regid=1000 --clear-groups "$@"' sh "$@"
}

port_state() { cat /sys/class/infiniband/rxe0/ports/1/state; }
port_phys() { cat /sys/class/infiniband/rxe0/ports/1/phys_state; }

wait_port_not_active() {
  _i=0
  while [ $_i -lt 50 ]; do
    case "$(port_state)" in *ACTIVE*) ;; *) return 0 ;; esac
    sleep 0.2; _i=$((_i + 1))
  done
  echo "rxe0 port 1 still ACTIVE 10 s after eth0 went down"; return 1
}

sc_healthy() {
  doctor_run healthy
  $CHECK $D/healthy.json --exit "$(cat $D/healthy.exit)" --quiet-at warning $(catalogue healthy) \
    --status kernel.modules=pass --status port.state=pass --status device.present=pass \
    --status library.providers=pass --status app.memlock=pass \
    --status irq.vectors=not_applicable --status irq.affinity=not_applicable \
    --status pcie.link=not_applicable
}

sc_ib_umad_missing() {
  rmmod ib_umad || return 1
  lsmod > $D/ib_umad_missing.state
  doctor_run ib_umad_missing
  _rc=0
  $CHECK $D/ib_umad_missing.json --exit "$(cat $D/ib_umad_missing.exit)" $(catalogue ib_umad_missing) \
    --expect RDK-K003 --quiet-at warning --evidence RDK-K003:/proc/modules=ib_umad || _rc=1
  modprobe ib_umad || _rc=1
  return $_rc
}

sc_port_down() {
  ip link set eth0 down || return 1
  wait_port_not_active
  _s="$(port_state)"; _p="$(port_phys)"
  { echo "state=$_s"; echo "phys_state=$_p"; ip link show eth0; } > $D/port_down.state
  cat $D/port_down.state
  doctor_run port_down
  _rc=0
  $CHECK $D/port_down.json --exit "$(cat $D/port_down.exit)" --expect RDK-H002 $(catalogue port_down) \
    --evidence "RDK-H002:ports/1/state=$_s" --evidence "RDK-H002:ports/1/phys_state=$_p" || _rc=1
  ip link set eth0 up && wait_port_active rxe0 1 30 && wait_gids rxe0 1 3 20 || _rc=1
  return $_rc
}

sc_provider_missing() {
  mv /etc/libibverbs.d/rxe.driver /tmp/rxe.driver || return 1
  ls -l /etc/libibverbs.d > $D/provider_missing.state
  IBV_SHOW_WARNINGS=1 ibv_devinfo >> $D/provider_missing.state 2>&1
  doctor_run provider_missing
  _rc=0
  $CHECK $D/provider_missing.json --exit "$(cat $D/provider_missing.exit)" --expect RDK-L002 $(catalogue provider_missing) \
    --quiet-at error --evidence RDK-L002:libibverbs.d= || _rc=1
  mv /tmp/rxe.driver /etc/libibverbs.d/rxe.driver || _rc=1
  return $_rc
}

sc_memlock_user() {
  as_limited_user sh -c 'id; ulimit -l; grep "locked memory" /proc/self/limits' > $D/memlock_user.state 2>&1
  cat $D/memlock_user.state
  doctor_run memlock_user as_limited_user
  $CHECK $D/memlock_user.json --exit "$(cat $D/memlock_user.exit)" --expect RDK-A001 $(catalogue memlock_user) \
    --evidence RDK-A001:=65536
}

qp_pids() { rdma resource show qp 2>/dev/null | sed -n 's/.* pid \([0-9][0-9]*\) .*/\1/p' | sort -u | xargs; }

# Two processes hold QPs (ibv_rc_pingpong servers waiting for a client); one is killed
# with SIGKILL. The kernel must release its resources at once and keep the other's;
# doctor (with --pid on the survivor) must stay clean.
sc_sigkill_holder() {
  ibv_rc_pingpong -d rxe0 -g 1 -p 18601 > $D/sigkill_holder.victim.out 2>&1 &
  _victim=$!
  ibv_rc_pingpong -d rxe0 -g 1 -p 18602 > $D/sigkill_holder.survivor.out 2>&1 &
  _surv=$!
  _i=0
  while [ $_i -lt 100 ]; do
    _now=" $(qp_pids) "
    case "$_now" in *" $_victim "*) case "$_now" in *" $_surv "*) break ;; esac ;; esac
    sleep 0.2; _i=$((_i + 1))
  done
  { echo "before: victim=$_victim survivor=$_surv"; rdma resource show qp; rdma resource; } > $D/sigkill_holder.state 2>&1
  kill -9 $_victim
  wait $_victim 2>/dev/null
  sleep 1
  { echo "after SIGKILL of $_victim:"; rdma resource show qp; rdma resource show pd; rdma resource; } >> $D/sigkill_holder.state 2>&1
  cat $D/sigkill_holder.state
  _rc=0
  _after=" $(qp_pids) "
  case "$_after" in *" $_victim "*) echo "FAIL: the killed process $_victim still owns a QP"; _rc=1 ;; esac
  case "$_after" in *" $_surv "*) ;; *) echo "FAIL: the survivor $_surv lost its QP"; _rc=1 ;; esac
  DOCTOR_ARGS="--pid $_surv" doctor_run sigkill_holder
  # The survivor runs as root with CAP_IPC_LOCK: --pid reads its credentials from
  # /proc/<pid>/status, so its 8 MiB memlock limit does not raise RDK-A001.
  $CHECK $D/sigkill_holder.json --exit "$(cat $D/sigkill_holder.exit)" --quiet-at warning $(catalogue sigkill_holder) \
    --status resources.owners=pass || _rc=1
  kill -9 $_surv; wait $_surv 2>/dev/null
  return $_rc
}

# The leaked-QP ENOSPC case as it happens on a real kernel: a process creates 4 RC
# QPs and forks a child that inherits its uverbs descriptor (guest/qpholder.py, ctypes
# over libibverbs); the process is killed with SIGKILL. The kernel keeps the
# objects (the file is still open in the child) and stops naming an owner PID.
# doctor must report them (RDK-R001) naming the child and the descriptor; once the
# child exits, the kernel frees everything.
sc_orphaned_by_fork() {
  _h=$D/orphaned_by_fork.holder
  python3 /rdk/qpholder.py rxe0 4 > $_h 2>&1 &
  _i=0
  while [ $_i -lt 100 ] && ! grep -q '^HOLDER' $_h; do sleep 0.2; _i=$((_i + 1)); done
  grep -q '^HOLDER' $_h || { echo "qpholder did not start:"; cat $_h; return 1; }
  eval "$(sed -n 's/^HOLDER //p' $_h)"   # parent= child= qps= stop=
  [ "$qps" = 4 ] || { echo "qpholder made $qps of 4 QPs (stopped by $stop)"; cat $_h; return 1; }
  _parent=$parent _child=$child
  { echo "parent=$_parent child=$_child"; rdma resource show qp; } > $D/orphaned_by_fork.state 2>&1
  kill -9 $_parent
  wait $_parent 2>/dev/null
  sleep 1
  { echo "after SIGKILL of $_parent:"; rdma resource show qp; rdma resource
    ls -l /proc/$_child/fd; } >> $D/orphaned_by_fork.state 2>&1
  cat $D/orphaned_by_fork.state
  _fd=$(ls -l /proc/$_child/fd | sed -n 's|.* \([0-9][0-9]*\) -> /dev/infiniband/uverbs0|\1|p' | head -1)
  printf 'child=%s\nchild_fd=%s\n' "$_child" "$_fd" > $D/orphaned_by_fork.vars
  doctor_run orphaned_by_fork
  _rc=0
  $CHECK $D/orphaned_by_fork.json --exit "$(cat $D/orphaned_by_fork.exit)" $(catalogue orphaned_by_fork) \
    --quiet-at warning --expect RDK-R001 \
    --evidence "RDK-R001:/proc/$_child/fd/=/dev/infiniband/uverbs0" || _rc=1
  kill -9 $_child
  sleep 1
  if rdma resource show qp | grep -q 'type RC'; then
    echo "FAIL: RC QPs remain after the last holder of the device file exited"
    rdma resource show qp
    _rc=1
  fi
  return $_rc
}

sc_restored() {
  # every fault above was undone: the host is healthy again
  wait_port_active rxe0 1 30 && wait_gids rxe0 1 3 20
  doctor_run restored
  $CHECK $D/restored.json --exit "$(cat $D/restored.exit)" --quiet-at warning
}

step doctor/healthy sc_healthy
step doctor/ib_umad_missing sc_ib_umad_missing
step doctor/port_down sc_port_down
step doctor/provider_missing sc_provider_missing
step doctor/memlock_user sc_memlock_user
step doctor/sigkill_holder sc_sigkill_holder
step doctor/orphaned_by_fork sc_orphaned_by_fork
step doctor/restored sc_restored
