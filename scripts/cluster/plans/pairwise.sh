#!/usr/bin/env bash
# cluster-nodes: 6
#
# The pairwise plan: `rdmakit fleet pairwise --slurm` on a real Slurm — the agents as
# one job step (srun --ntasks-per-node=1 rdmakit fleet agent), coordinated from the
# submitting host, stopped when done — with faults injected by tc in the nodes'
# namespaces (tbf, htb + u32; no netem in this kernel):
#
#   clean                        → exit 0, no fault, every test measured
#   n3 slow both ways (tbf)      → exit 1, exactly node n3
#   n1 <-> n5 slow (htb + u32)   → exit 1, exactly link n1-n5
#
# The nodes' links are 1500 bytes: the agents report path MTU 1024 and the tests use
# it (a 4096 path MTU would lose every full packet). Faults are shaped to an eighth of
# the clean matrix's median. After each run: no job, no agent left in any namespace.
# Run by `scripts/cluster/cluster run-plan` (scripts/cluster/run). Prints the evidence
# and exits 1 on the first failed expectation.
set -euo pipefail
# shellcheck source=../lib.sh
. "$CL_LIB"
export CL="$CL_DIR" # lib.sh's functions (cl_exec) use it
RK="$CL_RDMAKIT_REAL"
OUT="$CL_DIR/pairwise"
mkdir -p "$OUT"
# Test-speed settings (a debug build's soft NIC), as crates/rdmakit/tests/fleet_pairwise_netns.rs.
QUICK=(--sizes 16384,65536 --seconds 0.25 --lat-seconds 0.1 --tx-depth 8)

fail() {
  echo "pairwise plan: FAILED: $*"
  for f in "$OUT"/*.err; do
    [ -f "$f" ] && { echo "--- $f (last 30 lines)"; tail -n 30 "$f"; }
  done
  exit 1
}

# run NAME WANT_EXIT WANT_FAULTS: one matrix over the 6 nodes; checks the exit status,
# the faults (as "node n3" / "link n1-n5", comma-separated), that no test failed, and
# that the job step and its agents are gone.
run() {
  local name=$1 want_rc=$2 want=$3 rc=0 t0 got
  t0=$(date +%s.%N)
  "$RK" fleet pairwise --slurm -N 6 --agent-program "$CL_RDMAKIT" --json "${QUICK[@]}" \
    >"$OUT/$name.json" 2>"$OUT/$name.err" || rc=$?
  got=$(python3 - "$OUT/$name.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
bad = [f"{c['from']}->{c['to']}: {c['error']}" for c in r["cells"] if c.get("error")]
if bad or r.get("inconclusive") or r["unreachable"] or len(r["nodes"]) != 6:
    print("BAD", r.get("inconclusive"), r["unreachable"], len(r["nodes"]), bad[:3])
    sys.exit()
if any(n.get("mtu") != 1024 for n in r["nodes"]):
    print("BAD mtus", [n.get("mtu") for n in r["nodes"]])
    sys.exit()
f = [f"node {x['node']}" if x["kind"] == "node" else "link " + "-".join(x["nodes"]) for x in r["faults"]]
print(",".join(f))
PY
  ) || fail "$name: unreadable report"
  printf 'pairwise plan: %s: exit %s in %.1f s, faults [%s]\n' "$name" "$rc" \
    "$(echo "$(date +%s.%N) - $t0" | bc)" "$got"
  [ "$rc" = "$want_rc" ] || fail "$name: exit $rc, expected $want_rc"
  [ "$got" = "$want" ] || fail "$name: faults [$got], expected [$want]"
  [ -z "$(squeue -h)" ] || fail "$name: a job is left: $(squeue -h)"
  local i
  for i in 1 2 3 4 5 6; do
    if ip netns pids "rdkc$CL_ID-n$i" | xargs -r ps -o args= -p | grep -q 'fleet agent'; then
      fail "$name: an agent is still running on n$i"
    fi
  done
}

run clean 0 ""
rate=$(python3 -c "import json; print(max(2, int(json.load(open('$OUT/clean.json'))['matrix']['median_mbs'] * 8.388608 / 8)))")
echo "pairwise plan: faults shaped to ${rate} Mbit/s"

cl_exec n3 tc qdisc add dev eth0 root tbf rate "${rate}mbit" burst 32kbit latency 400ms
tc qdisc add dev "$(cl_veth n3)" root tbf rate "${rate}mbit" burst 32kbit latency 400ms
run slow-node 1 "node n3"
cl_exec n3 tc qdisc del dev eth0 root
tc qdisc del dev "$(cl_veth n3)" root

# n1 -> n5 and n5 -> n1 slow at their senders; everything else at full speed.
for pair in "n1 5" "n5 1"; do
  set -- $pair
  cl_exec "$1" tc qdisc add dev eth0 root handle 1: htb default 1
  cl_exec "$1" tc class add dev eth0 parent 1: classid 1:1 htb rate 10gbit
  cl_exec "$1" tc class add dev eth0 parent 1: classid 1:2 htb rate "${rate}mbit" ceil "${rate}mbit"
  cl_exec "$1" tc filter add dev eth0 parent 1: protocol ip u32 \
    match ip dst "$CL_NET.$((10 + $2))/32" flowid 1:2
done
run slow-pair 1 "link n1-n5"
echo "pairwise plan: ok"
