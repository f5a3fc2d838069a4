# Plan "verbs": the rdma-core provider of crates/verbs (libibverbs.so.1 loaded with
# dlopen, data path through ibv_context.ops) against the kernel's rxe and Debian's
# rdma-core 44. Leaves in /results/verbs/:
#   suite.txt / suite.json          rdmakit --provider ibverbs verbs-test -d rxe0
#   ibv_devinfo[-v].txt             Debian's ibv_devinfo [-v]
#   rdmakit_devinfo[-v].txt         rdmakit --provider ibverbs devinfo [-v]
#   devinfo[-v].cmp                 line-by-line comparison (devinfocmp.py)
#   probe.json / probe.txt          rdmakit doctor --probe on rxe0 (active probes)
#   nolib.json                      the same with RDMAKIT_IBVERBS_LIB=/nonexistent
V=$R/verbs
mkdir -p $V
CMP="python3 $PLAN_DIR/devinfocmp.py"
CHECK="python3 /rdk/doctorcheck.py"

verbs_ready() {
  wait_port_active rxe0 1 30 || return 1
  # The GID table must be complete before two tools read it a second apart.
  wait_gids rxe0 1 3 30
  ls -l /dev/infiniband/
  cat /etc/libibverbs.d/rxe.driver
}

verbs_suite() {
  rdmakit --provider ibverbs verbs-test -d rxe0 --timeout 30 > $V/suite.txt 2>&1
  _rc=$?
  cat $V/suite.txt
  rdmakit --provider ibverbs verbs-test -d rxe0 --timeout 30 --json > $V/suite.json 2>&1 || _rc=1
  return $_rc
}

devinfo_cmp() {
  # $1: "" or "-v"
  _s=${1:+-v}
  ibv_devinfo -d rxe0 $1 > $V/ibv_devinfo$_s.txt 2>&1 || { cat $V/ibv_devinfo$_s.txt; return 1; }
  rdmakit --provider ibverbs devinfo -d rxe0 $1 > $V/rdmakit_devinfo$_s.txt 2>&1 || {
    cat $V/rdmakit_devinfo$_s.txt; return 1; }
  $CMP $V/ibv_devinfo$_s.txt $V/rdmakit_devinfo$_s.txt > $V/devinfo$_s.cmp 2>&1
  _rc=$?
  cat $V/devinfo$_s.cmp
  return $_rc
}

probe_rxe() {
  rdmakit doctor --probe --json > $V/probe.json 2> $V/probe.stderr
  echo $? > $V/probe.exit
  rdmakit doctor --probe --verbose --color never > $V/probe.txt 2>&1
  cat $V/probe.stderr
  python3 - $V/probe.json <<'PY' || return 1
import json, sys
r = json.load(open(sys.argv[1]))
probes = r.get("probes") or []
devs = [p["device"] for p in probes]
assert devs == ["rxe0"], f"probed {devs}, want [rxe0]"
p = probes[0]
assert p["label"] == "host device", p["label"]
names = [x["name"] for x in p["results"]]
for want in ("mr.reg 64 MiB", "qp.rc RESET->INIT->RTR->RTS", "qp.ud RESET->INIT->RTR->RTS",
             "rc.send", "rc.write", "rc.read", "rc.atomic", "ud.send", "sample.latency",
             "sample.bandwidth", "resources.restored"):
    assert want in names, f"probe {want} missing: {names}"
bad = [f"{x['name']}: {x['detail']}" for x in p["results"] if not x["passed"]]
assert not bad, "failed probes:\n" + "\n".join(bad)
for x in p["results"]:
    print(f"{x['name']}: {x['detail']}")
PY
  $CHECK $V/probe.json --exit "$(cat $V/probe.exit)" --quiet-at warning
}

probe_without_library() {
  RDMAKIT_IBVERBS_LIB=/nonexistent/libibverbs.so.1 rdmakit doctor --probe --json \
    > $V/nolib.json 2> $V/nolib.stderr
  echo $? > $V/nolib.exit
  cat $V/nolib.stderr
  $CHECK $V/nolib.json --exit "$(cat $V/nolib.exit)" --expect RDK-L001 --quiet-at warning \
    --evidence "RDK-L001:dlopen(/nonexistent/libibverbs.so.1)=cannot open shared object file"
}

provider_errors() {
  # The library layer says what it looked for; a bad device is ENODEV.
  _o=$(RDMAKIT_IBVERBS_LIB=/nonexistent/libibverbs.so.1 rdmakit --provider ibverbs devinfo 2>&1)
  _rc=$?
  echo "$_o"
  [ $_rc -eq 2 ] || { echo "exit $_rc, want 2"; return 1; }
  case "$_o" in *"dlopen failed with ENOENT"*"/nonexistent/libibverbs.so.1"*) ;;
    *) echo "missing the library-layer error"; return 1 ;; esac
  _o=$(rdmakit --provider ibverbs verbs-test -d mlx5_9 2>&1)
  echo "$_o"
  case "$_o" in *ENODEV*rxe0*) ;; *) echo "missing ENODEV naming rxe0"; return 1 ;; esac
}

step verbs_ready verbs_ready
step verbs_suite_rxe verbs_suite
step verbs_devinfo devinfo_cmp ""
step verbs_devinfo_v devinfo_cmp -v
step verbs_doctor_probe_rxe probe_rxe
step verbs_doctor_no_library probe_without_library
step verbs_provider_errors provider_errors
