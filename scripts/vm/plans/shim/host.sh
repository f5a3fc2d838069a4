#!/usr/bin/env bash
# Prints the P4 ratios measured in the guest (plans/shim/guest.sh).
set -euo pipefail
f="$RESULTS/shim/p4.tsv"
[ -f "$f" ] || { echo "shim: no $f (the p4 step failed)"; exit 1; }
python3 - "$f" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
if not rows:
    sys.exit("shim: p4.tsv is empty")
print("P4 ibv_rc_pingpong in the guest (TCG), soft NIC via the drop-in libibverbs vs rxe")
print("(soft: the default transport, same-host rings; udp: RDMAKIT_SOFT_TRANSPORT=udp):")
for r in rows:
    rxe, soft, udp = float(r["rxe_mbit_s"]), float(r["soft_mbit_s"]), float(r["soft_udp_mbit_s"])
    print(f"  {int(r['size']):>6} B x {r['iters']:>4}: rxe {rxe:9.2f} Mbit/s  soft {soft:9.2f}  udp {udp:9.2f}"
          f"  soft/rxe {soft/rxe:5.2f}  udp/rxe {udp/rxe:5.2f}")
PY
