#!/usr/bin/env bash
# The sweep's cost against Slurm's own: on a cluster of healthy nodes (each its own
# tree from fixtures/healthy), alternating rounds of
#   baseline: srun -N<all> --ntasks-per-node=1 --label /bin/sh -c 'echo x'  (one step, nothing in it)
#   sweep:    rdmakit fleet sweep --partition all                           (one step, a doctor per node)
# Prints each round, the medians and their ratio. Run by scripts/bench-sweep.
set -euo pipefail
. "$CL_LIB"
REPO="$(cd "$(dirname "$CL_LIB")/../.." && pwd)"
ROUNDS=${BENCH_ROUNDS:-5}
OUT="$CL_DIR/out"
mkdir -p "$OUT"
python3 "$(dirname "$CL_LIB")/hosttree.py" "$REPO/fixtures/healthy" "$OUT/tree"
n=0
for node in $CL_NODES; do
  cp -al "$OUT/tree" "$CL_DIR/nodes/$node/root"
  echo "$node" >"$CL_DIR/nodes/$node/root/proc/sys/kernel/hostname"
  n=$((n + 1))
done
t() { local a b; a=$(date +%s%N); "$@" >/dev/null 2>&1 || true; b=$(date +%s%N); echo $(( (b - a) / 1000000 )); }
base=(); sweep=()
for r in $(seq 1 "$ROUNDS"); do
  b=$(t srun -N"$n" --ntasks-per-node=1 --label /bin/sh -c 'echo x')
  s=$(t "$CL_RDMAKIT_REAL" fleet sweep --partition all --rdmakit "$CL_RDMAKIT" -o "$OUT/sweep-$r")
  grep -q '"status": "missing"' "$OUT/sweep-$r/sweep.json" && { echo "round $r: a node is missing" >&2; exit 1; }
  echo "round $r: srun step ${b} ms, sweep ${s} ms"
  base+=("$b"); sweep+=("$s")
done
med() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
mb=$(med "${base[@]}"); ms=$(med "${sweep[@]}")
echo "bench-sweep: $n nodes, $ROUNDS rounds: median srun step ${mb} ms, median sweep ${ms} ms, ratio $(awk -v a="$ms" -v b="$mb" 'BEGIN{printf "%.2f", a/b}') (cluster up in ${CL_START_SECONDS} s)"
