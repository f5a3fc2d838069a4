#!/usr/bin/env bash
# cluster-nodes: 12
#
# The fleet plan: `rdmakit fleet sweep`, `rdmakit doctor --slurm-health-check`
# (HealthCheckProgram and Prolog) on a real Slurm, every node reading its own host
# tree built from fixtures/healthy, with faults injected:
#
#   n3  port 1 DOWN (state 1: DOWN, phys_state 3: Disabled)      → RDK-H002
#   n5  different firmware (fw_ver 20.31.1014 where the rest have none)
#   n6  its HCA is gone (rxe0 and its uverbs device removed)       → RDK-H001
#   n7  its rdmakit output is cut after 200 bytes (died mid-write)  → missing, garbage
#   n8  a sysfs read hangs (fw_ver is a FUSE file that answers nothing for 20 s, as a
#       wedged driver's)                                             → missing, hung
#   n9  rdmakit is not installed (exit 127, nothing on stdout)      → missing
#   n1 n2 n4 n10 n11 n12 healthy; n2 is drained by "the administrator".
#
# For the health check, n10 n11 n12 break too (port 1 DOWN) while an administrator
# holds them: n10 DOWN ("admin: psu swap"), n11 FAIL ("admin: bad dimm"), n12 in
# a maintenance reservation. rdmakit must leave them exactly as set.
#
# Run by `scripts/cluster/cluster run-plan` (scripts/cluster/run): SLURM_CONF, CL_DIR,
# CL_NODES, CL_RDMAKIT (the nodes' rdmakit), CL_RDMAKIT_REAL are set. Prints the
# evidence and exits 1 on the first failed expectation.
set -euo pipefail
# shellcheck source=../lib.sh
. "$CL_LIB"
export CL="$CL_DIR" # lib.sh's functions (cl_exec) use it
REPO="$(cd "$(dirname "$CL_LIB")/../.." && pwd)"
RK="$CL_RDMAKIT_REAL"
OUT="$CL_DIR/out"
mkdir -p "$OUT"
T0=$(date +%s.%N)
BG=()
MOUNTS=()
stop_bg() {
  local p m
  # Mounts first (the bind, then the FUSE file system), or the cluster's removal
  # would stop at them.
  for ((m = ${#MOUNTS[@]} - 1; m >= 0; m--)); do umount -l "${MOUNTS[m]}" 2>/dev/null || true; done
  for p in "${BG[@]}"; do kill "$p" 2>/dev/null || true; done
  # The FUSE daemon may sit in its loop past SIGTERM: gone for good, so that no
  # reader still waits on it.
  [ -z "${HANGFS_PID:-}" ] || kill -9 "$HANGFS_PID" 2>/dev/null || true
}
trap stop_bg EXIT

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", b-a}'; }
step() { printf "==> fleet plan (%ss): %s\n" "$(secs "$T0" "$(now)")" "$*" >&2; }
fail() {
  printf 'FAIL: %s\n' "$*" >&2
  echo "--- sinfo" >&2
  sinfo -N -o '%N %T %E' >&2 || true
  for f in "${EVIDENCE[@]}"; do
    [ -e "$f" ] || continue
    echo "--- $f" >&2
    tail -n 40 "$f" >&2
  done
  exit 1
}
EVIDENCE=()

# --- host trees -----------------------------------------------------------------
step "building 12 host trees from fixtures/healthy"
python3 "$(dirname "$CL_LIB")/hosttree.py" "$REPO/fixtures/healthy" "$OUT/healthy-tree"
for n in $CL_NODES; do
  cp -al "$OUT/healthy-tree" "$CL_DIR/nodes/$n/root"
  # Each host knows its own name (the capture did not record the VM's).
  echo "$n" >"$CL_DIR/nodes/$n/root/proc/sys/kernel/hostname"
done
dev() { echo "$CL_DIR/nodes/$1/root/sys/devices/virtual/infiniband/rxe0"; }
# The trees share unchanged files (hard links): a fault replaces a file, never
# writes into it.
put() { rm -f "$2"; printf '%s\n' "$1" >"$2"; }
port_down() { put '1: DOWN' "$(dev "$1")/ports/1/state"; put '3: Disabled' "$(dev "$1")/ports/1/phys_state"; }
port_up() { put '4: ACTIVE' "$(dev "$1")/ports/1/state"; put '5: LinkUp' "$(dev "$1")/ports/1/phys_state"; }
hca_gone() {
  local r="$CL_DIR/nodes/$1/root"
  mv "$r/sys/devices/virtual/infiniband/rxe0" "$OUT/$1-rxe0"
  rm -f "$r/sys/class/infiniband/rxe0" "$r/sys/class/infiniband_verbs/uverbs0"
  mv "$r/sys/devices/virtual/infiniband_verbs/uverbs0" "$OUT/$1-uverbs0"
}
hca_back() {
  local r="$CL_DIR/nodes/$1/root"
  mv "$OUT/$1-rxe0" "$r/sys/devices/virtual/infiniband/rxe0"
  mv "$OUT/$1-uverbs0" "$r/sys/devices/virtual/infiniband_verbs/uverbs0"
  ln -s ../../devices/virtual/infiniband/rxe0 "$r/sys/class/infiniband/rxe0"
  ln -s ../../devices/virtual/infiniband_verbs/uverbs0 "$r/sys/class/infiniband_verbs/uverbs0"
}
port_down n3
put 20.31.1014 "$(dev n5)/fw_ver"
hca_gone n6
echo truncate >"$CL_DIR/nodes/n7/fault"
# n8: a read that does not return. A FIFO no longer stands in (every reader of a host
# tree refuses FIFOs without opening them): a regular file of a FUSE file
# system whose reads answer nothing for 20 s (longer than every deadline here; see
# hangfs.py for why not forever), bind-mounted over fw_ver.
HANGFS="$OUT/hangfs"
mkdir -p "$HANGFS"
/usr/bin/python3 "$(dirname "$CL_LIB")/hangfs.py" "$HANGFS" >"$OUT/hangfs.log" 2>&1 &
HANGFS_PID=$!
MOUNTS+=("$HANGFS")
for _ in $(seq 50); do [ -f "$HANGFS/hang" ] && break; sleep 0.1; done
[ -f "$HANGFS/hang" ] || { cat "$OUT/hangfs.log" >&2; fail "the FUSE file system of n8's hung read did not come up"; }
rm "$(dev n8)/fw_ver"
: >"$(dev n8)/fw_ver"
mount --bind "$HANGFS/hang" "$(dev n8)/fw_ver"
MOUNTS+=("$(dev n8)/fw_ver")
echo absent >"$CL_DIR/nodes/n9/fault"

# The trees are what we think they are: each node's own doctor, run here.
for n in n1 n3 n6; do
  "$RK" doctor --root "$CL_DIR/nodes/$n/root" --no-probe --json >"$OUT/direct-$n.json" || true
done
grep -q '"code": "RDK-H002"' "$OUT/direct-n3.json" || fail "n3's tree does not show RDK-H002"
grep -q '"code": "RDK-H001"' "$OUT/direct-n6.json" || fail "n6's tree does not show RDK-H001"
grep -q '"error": 0' "$OUT/direct-n1.json" || fail "n1's tree is not healthy"

# --- the sweep -------------------------------------------------------------------
# check_fleet FLEET_JSON EXPECTATIONS: the fleet report flags exactly the nodes listed
# ("NODE STATUS REGEX" per line; REGEX matches one of the node's reasons, written
# "KIND CODE MESSAGE"), and every other node is ok.
check_fleet() {
  python3 - "$1" "$2" <<'EOF'
import json, re, sys
r = json.load(open(sys.argv[1]))
want = {}
for line in open(sys.argv[2]):
    if line.strip():
        node, status, rx = line.strip().split(" ", 2)
        want[node] = (status, rx)
bad = []
for n in r["nodes"]:
    reasons = [" ".join(x for x in (q["kind"], q.get("code"), q["message"]) if x) for q in n["reasons"]]
    if n["name"] not in want:
        if n["status"] != "ok":
            bad.append(f"{n['name']}: {n['status']}, want ok: {reasons}")
        continue
    status, rx = want.pop(n["name"])
    if n["status"] != status:
        bad.append(f"{n['name']}: {n['status']}, want {status}: {reasons}")
    elif not any(re.search(rx, q) for q in reasons):
        bad.append(f"{n['name']}: no reason matches /{rx}/: {reasons}")
bad += [f"{n}: not in the report" for n in want]
for b in bad:
    print("  " + b, file=sys.stderr)
sys.exit(1 if bad else 0)
EOF
}

step "rdmakit fleet sweep over all 12 nodes (timeout 10 s for the hung one)"
t=$(now)
rc=0
"$RK" fleet sweep --partition all --rdmakit "$CL_RDMAKIT" --timeout 10 -o "$OUT/sweep" \
  >"$OUT/sweep.txt" 2>"$OUT/sweep.stderr" || rc=$?
SWEEP_SECS=$(secs "$t" "$(now)")
EVIDENCE=("$OUT/sweep.txt" "$OUT/sweep.stderr" "$OUT/sweep/srun.err" "$OUT/sweep/sweep.json")
cat "$OUT/sweep.txt"
[ "$rc" = 1 ] || fail "fleet sweep exited $rc, want 1 (nodes need attention)"
LAST_REPORT=$(python3 -c 'import json,sys; print("%.2f" % json.load(open(sys.argv[1]))["last_report_seconds"])' "$OUT/sweep/sweep.json")

# Exactly these nodes need attention, for exactly these reasons; n5's firmware is
# drift only the fleet sees (its own doctor finds nothing wrong).
cat >"$OUT/want-sweep.txt" <<'EOF'
n3 error ^finding RDK-H002 rxe0 port 1 is DOWN \(physical state Disabled\)$
n5 warning ^drift fw_ver\[rxe0\] is 20\.31\.1014; cohort c1 has \(empty\) on 7 of 8 nodes$
n6 error ^finding RDK-H001 the kernel supports RDMA but no RDMA device is registered$
n7 missing ^missing garbage: report frame cut off after [0-9]+ lines? \(the process died or its output was truncated\)$
n8 missing ^missing hung: no report within 10 s \(rdmakit started and sent nothing\)$
n9 missing ^missing sent nothing \(exit status 127; stderr: ".*rdmakit: not found"\)$
EOF
check_fleet "$OUT/sweep/fleet.json" "$OUT/want-sweep.txt" || fail "the sweep's fleet report flags the wrong nodes or reasons"
grep -q '^Sweep: 9 of 12 nodes reported in' "$OUT/sweep.txt" || fail "sweep: want 9 of 12 reported"
[ "$(wc -l <"$OUT/sweep/reports.jsonl")" = 9 ] || fail "reports.jsonl: want 9 lines"
grep -q 'rdmakit-frame 1 task node=n8' "$OUT/sweep/srun.out" || fail "srun.out lacks n8's task line"
# The hung task is gone: nothing of the sweep still runs anywhere.
sleep 0.5
if pgrep -f "rdmakit-sweep" >/dev/null; then fail "sweep processes survived: $(pgrep -af rdmakit-sweep)"; fi
[ -z "$(squeue -h -n rdmakit-sweep)" ] || fail "the sweep's job is still queued/running: $(squeue -n rdmakit-sweep)"

# The kept lines are an input of `fleet report`: the same verdicts for the nodes
# that reported.
step "rdmakit fleet report on the sweep's reports.jsonl"
rc=0
"$RK" fleet report --json "$OUT/sweep/reports.jsonl" >"$OUT/report.json" 2>"$OUT/report.stderr" || rc=$?
EVIDENCE=("$OUT/report.json" "$OUT/report.stderr")
[ "$rc" = 1 ] || fail "fleet report exited $rc, want 1"
head -n 3 "$OUT/want-sweep.txt" >"$OUT/want-report.txt"
check_fleet "$OUT/report.json" "$OUT/want-report.txt" || fail "fleet report on reports.jsonl disagrees with the sweep"

# --- the sweep with bundles: the transport keeps every byte ------------------------
step "rdmakit fleet sweep --bundles on n1,n3,n5"
rc=0
"$RK" fleet sweep --nodelist 'n[1,3,5]' --rdmakit "$CL_RDMAKIT" --bundles --json -o "$OUT/bundles" \
  >"$OUT/bundles.json" 2>"$OUT/bundles.stderr" || rc=$?
EVIDENCE=("$OUT/bundles.json" "$OUT/bundles.stderr" "$OUT/bundles/srun.err")
[ "$rc" = 1 ] || fail "fleet sweep --bundles exited $rc, want 1 (n3)"
for n in n1 n3 n5; do
  b="$OUT/bundles/bundles/$n.json.gz"
  [ -s "$b" ] || fail "no bundle from $n"
  # Replayed here, the bundle gives the report the node sent.
  "$RK" doctor --from "$b" --json >"$OUT/replay-$n.json" || true
  python3 - "$OUT/replay-$n.json" "$OUT/bundles/reports.jsonl" "$n" <<'EOF' || fail "$n: the bundle's replay differs from the report it sent"
import json, sys
replay = json.load(open(sys.argv[1]))
sent = [r for r in map(json.loads, open(sys.argv[2])) if r.get("node") == sys.argv[3]]
assert len(sent) == 1, f"{len(sent)} reports from {sys.argv[3]}"
key = lambda r: [(f["code"], f["subject"], f["message"]) for f in r["findings"]]
assert key(replay) == key(sent[0]), (key(replay), key(sent[0]))
assert replay["devices"] == sent[0]["devices"]
EOF
done
grep -q '20.31.1014' <(zcat "$OUT/bundles/bundles/n5.json.gz") || fail "n5's bundle lacks its firmware version"

# --- the health check: HealthCheckProgram ----------------------------------------
step "health check: an administrator drains n2; a job runs on n6; HealthCheckProgram on"
cat >"$CL_DIR/bin/health-check" <<EOF
#!/bin/sh
# What docs/slurm.md tells a site to install as HealthCheckProgram.
exec $CL_RDMAKIT doctor --slurm-health-check --health-timeout 5
EOF
chmod 755 "$CL_DIR/bin/health-check"
scontrol update NodeName=n2 State=DRAIN Reason="admin: replace cable"
srun -w n6 -N1 -n1 --job-name=busy sleep 300 >/dev/null 2>&1 &
BG+=($!)
wait_state() { # NODE STATE-REGEX REASON-REGEX SECONDS
  for _ in $(seq 1 $(($4 * 5))); do
    if sinfo -h -N -n "$1" -o '%T|%E' | grep -Eq "^($2)\|($3)\$"; then return 0; fi
    sleep 0.2
  done
  return 1
}
wait_state n6 'allocated|mixed' '.*' 15 || fail "the job on n6 did not start"
# ReturnToService=1 keeps an administrator's DOWN (2, the cluster's default,
# returns any DOWN node that registers, and reconfigure makes every node register).
sed -i 's/^ReturnToService=.*/ReturnToService=1/' "$SLURM_CONF"
cat >>"$SLURM_CONF" <<EOF
HealthCheckProgram=$CL_DIR/bin/health-check
HealthCheckInterval=5
HealthCheckNodeState=ANY
EOF
t=$(now)
scontrol reconfigure
# An administrator holds n10, n11, n12 (healthy for now; they break below).
scontrol update NodeName=n10 State=DOWN Reason="admin: psu swap"
scontrol update NodeName=n11 State=FAIL Reason="admin: bad dimm"
scontrol create reservation ReservationName=maint12 Nodes=n12 StartTime=now Duration=60 \
  Users=root Flags=MAINT >/dev/null
EVIDENCE=("$CL_DIR/nodes/n3/slurmd.log" "$CL_DIR/nodes/n8/slurmd.log" "$CL_DIR/ctl/slurmctld.log")
wait_state n3 drained 'rdmakit: RDK-H002 rxe0 port 1 is DOWN \(physical state Disabled\)' 30 ||
  fail "n3 not drained by its health check"
HC_SECS=$(secs "$t" "$(now)")
wait_state n6 'draining|drng' 'rdmakit: RDK-H001 the kernel supports RDMA but no RDMA device is registered' 30 ||
  fail "n6 (HCA gone, job running) not draining with rdmakit's reason"
wait_state n8 drained 'rdmakit: doctor hung: no answer in 5 s reading /sys/class/infiniband/rxe0/fw_ver' 30 ||
  fail "n8 (hung read) not drained with the hang's reason"
sleep 6 # one more round for every node
drained=$(sinfo -h -N -t drain,drng -o '%N' | sort -V | tr '\n' ' ')
[ "$drained" = "n2 n3 n6 n8 " ] || fail "drained: [$drained], want [n2 n3 n6 n8 ]"
wait_state n2 drained 'admin: replace cable' 1 || fail "the administrator's drain of n2 was changed"

# What an administrator holds stays as they set it, even once the node is faulty.
# held NODE STATE REASON: scontrol's state and reason for NODE are exactly these.
held() {
  local line got
  line=$(scontrol show node -o "$1")
  got=$(sed -n 's/.* State=\([^ ]*\) .*/\1/p' <<<"$line")
  [ "$got" = "$2" ] || { echo "$1 is $got, want $2"; return 1; }
  got=$(sed -n 's/.* Reason=\(.*\) \[.*/\1/p' <<<"$line")
  [ "$got" = "$3" ] || { echo "$1's reason is [$got], want [$3]"; return 1; }
}
check_held() {
  held n10 DOWN 'admin: psu swap' && held n11 IDLE+FAIL 'admin: bad dimm' &&
    held n12 IDLE+MAINTENANCE+RESERVED ''
}
step "health check: n10 (DOWN), n11 (FAIL), n12 (MAINT) break while held: left alone"
# MAINTENANCE appears when slurmctld next looks at its reservations; only then
# does n12 break (before, nothing held it and a drain would be right).
for _ in $(seq 1 150); do check_held >/dev/null && break; sleep 0.2; done
why=$(check_held) || fail "the administrator's states did not take: $why"
for n in n10 n11 n12; do port_down "$n"; done
sleep 11 # two rounds of every node's health check
why=$(check_held) || fail "a held node changed: $why"
scontrol show node -o "n[10-12]" >"$OUT/held-nodes.txt"
# The check itself, by hand on each (no environment but SLURM_CONF): it sees
# the fault (exit 1) and says why it leaves the node.
for want in "n10|unhealthy, but held by root (\"admin: psu swap\", DOWN): left alone" \
  "n11|unhealthy, but held by root (\"admin: bad dimm\", IDLE+FAIL): left alone" \
  "n12|unhealthy, but IDLE+MAINTENANCE+RESERVED (MAINTENANCE), a state rdmakit does not override: left alone"; do
  n=${want%%|*}
  rc=0
  cl_exec "$n" env -i SLURM_CONF="$SLURM_CONF" "$CL_RDMAKIT" doctor --slurm-health-check --health-timeout 5 \
    >"$OUT/hc-$n.txt" 2>&1 || rc=$?
  [ "$rc" = 1 ] && grep -qF "rdmakit health check $n: ${want#*|}" "$OUT/hc-$n.txt" ||
    fail "$n by hand: exit $rc: $(cat "$OUT/hc-$n.txt")"
done
why=$(check_held) || fail "a held node changed after the checks by hand: $why"
# slurmd ran the check on them too (HealthCheckNodeState=ANY) and logged exit 1.
for n in n10 n11 n12; do
  grep -q "health_check failed: rc:1 output:rdmakit health check $n: unhealthy, but .*: left alone" \
    "$CL_DIR/nodes/$n/slurmd.log" || fail "slurmd on $n did not run the check on the held node"
done

step "health check: n3, n6, n10-n12 repaired; n3 resumes, n6 stays drained while its job runs"
port_up n3
hca_back n6
for n in n10 n11 n12; do port_up "$n"; done
wait_state n3 idle '.*' 20 || fail "n3 not resumed after its port came back"
sleep 6
wait_state n6 'draining|drng' 'rdmakit: .*' 1 || fail "n6 resumed or changed while a job runs on it"
wait_state n2 drained 'admin: replace cable' 1 || fail "the administrator's drain of n2 was lifted"
scancel -n busy
wait_state n6 idle '.*' 25 || fail "n6 not resumed once its job ended"
wait_state n2 drained 'admin: replace cable' 1 || fail "the administrator's drain of n2 was lifted"
wait_state n8 drained 'rdmakit: doctor hung.*' 1 || fail "n8 resumed while its read still hangs"
# Healthy again, the held nodes are still the administrator's: rdmakit resumes
# only its own drains.
why=$(check_held) || fail "a held node was changed once healthy: $why"

# Exit codes, as slurmd saw them (it logs a failing check's status and output; it
# ran the check with an empty environment, so rdmakit found SLURM_CONF itself).
step "health check: exit codes in slurmd's logs; --dry-run by hand"
hc_log() { grep -h 'health_check failed' "$CL_DIR/nodes/$1/slurmd.log" || true; }
hc_log n8 | grep -q 'rc:1 output:rdmakit health check n8: drained: rdmakit: doctor hung: no answer in 5 s' ||
  fail "slurmd on n8 did not log exit 1 with the drain: $(hc_log n8 | head -n 3)"
hc_log n3 | grep -q 'rc:1 output:rdmakit health check n3: drained: rdmakit: RDK-H002' ||
  fail "slurmd on n3 did not log exit 1 with the drain: $(hc_log n3 | head -n 3)"
for n in n1 n2 n4; do
  [ -z "$(hc_log $n)" ] || fail "healthy $n: slurmd logged a failed health check: $(hc_log $n | head -n 3)"
done
rc=0
cl_exec n2 env -i SLURM_CONF="$SLURM_CONF" "$CL_RDMAKIT" doctor --slurm-health-check --dry-run \
  >"$OUT/hc-n2.txt" 2>&1 || rc=$?
[ "$rc" = 0 ] && grep -q "healthy, but drained by root (\"admin: replace cable\"): not rdmakit's drain, left alone" "$OUT/hc-n2.txt" ||
  fail "n2 --dry-run: exit $rc: $(cat "$OUT/hc-n2.txt")"

# --- Prolog: a job is kept off a node that broke since the last health check ------
step "Prolog: n4's port goes down; a job asking for n4 fails, n4 drained by rdmakit"
sed -i '/^HealthCheck/d' "$SLURM_CONF"
echo "Prolog=$CL_DIR/bin/health-check" >>"$SLURM_CONF"
scontrol reconfigure
port_down n4
rc=0
srun -w n4 -N1 true >"$OUT/prolog-job.txt" 2>&1 || rc=$?
[ "$rc" != 0 ] || fail "a job ran on n4 although its Prolog found the port down"
grep -q 'prolog' "$OUT/prolog-job.txt" || fail "srun did not report a prolog failure: $(cat "$OUT/prolog-job.txt")"
wait_state n4 drained 'rdmakit: RDK-H002 rxe0 port 1 is DOWN \(physical state Disabled\)' 10 ||
  fail "n4 not drained with rdmakit's reason by the Prolog"
rc=0
srun -w n1 -N1 true >"$OUT/prolog-ok.txt" 2>&1 || rc=$?
[ "$rc" = 0 ] || fail "a job on healthy n1 failed with the Prolog on: $(cat "$OUT/prolog-ok.txt")"

# With no health check running (it would drain n1 for real): the dry run only says.
port_down n1
rc=0
cl_exec n1 env -i SLURM_CONF="$SLURM_CONF" "$CL_RDMAKIT" doctor --slurm-health-check --dry-run \
  >"$OUT/hc-n1.txt" 2>&1 || rc=$?
port_up n1
[ "$rc" = 1 ] && grep -q "would drain (IDLE): rdmakit: RDK-H002" "$OUT/hc-n1.txt" ||
  fail "n1 --dry-run: exit $rc: $(cat "$OUT/hc-n1.txt")"
wait_state n1 idle '.*' 1 || fail "--dry-run changed n1"

TOTAL=$(secs "$T0" "$(now)")
echo "fleet plan: cluster up ${CL_START_SECONDS} s; sweep of 12 nodes ${SWEEP_SECS} s (last report at ${LAST_REPORT} s, then the 10 s timeout for hung n8); first drain ${HC_SECS} s after HealthCheckProgram was set; plan ${TOTAL} s"
echo "fleet plan: ok"
