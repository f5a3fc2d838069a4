#!/usr/bin/env bash
# Prints rdmakit perf / perftest wall-clock message-rate ratios on rxe0 (plans/perfcmp).
set -euo pipefail
f="$RESULTS/perfcmp/rates.tsv"
[ -f "$f" ] || { echo "perfcmp: no $f"; exit 1; }
python3 - "$f" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
if not rows:
    sys.exit("perfcmp: no measurements")
print("rdmakit perf vs perftest on rxe0 (TCG guest; wall-clock message rate of the client):")
for r in rows:
    pt, rk = float(r["perftest_msg_s"]), float(r["rdmakit_msg_s"])
    print(f"  {r['test']:<9} {int(r['size']):>5} B x {r['iters']:>5}: perftest {pt:9.1f}/s  rdmakit {rk:9.1f}/s  rdmakit/perftest {rk/pt:5.2f}")
PY
