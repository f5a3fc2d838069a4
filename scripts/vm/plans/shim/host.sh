#!/usr/bin/env bash
# Prints the P4 ratios measured in the guest (plans/shim/guest.sh): per size,
# the median of the per-round soft/rxe and udp/rxe ratios (each round runs
# the three back to back) with their range, and the Mbit/s medians.
set -euo pipefail
f="$RESULTS/shim/p4_rounds.tsv"
[ -f "$f" ] || { echo "shim: no $f (the p4 step failed)"; exit 1; }
python3 - "$f" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
if not rows:
    sys.exit("shim: p4_rounds.tsv is empty")
by = {}
for r in rows:
    by.setdefault(int(r["size"]), []).append(r)
print("P4 ibv_rc_pingpong in the guest (TCG), soft NIC via the drop-in libibverbs vs rxe")
print("(soft: the default transport, same-host rings; udp: RDMAKIT_SOFT_TRANSPORT=udp;")
print(" ratios: the median of the per-round ratios, [min-max]):")
for size, rs in sorted(by.items()):
    col = lambda k: [float(r[k]) for r in rs]
    rxe, soft, udp = col("rxe_mbit_s"), col("soft_mbit_s"), col("soft_udp_mbit_s")
    if min(rxe) <= 0:
        sys.exit(f"shim: size {size}: rxe measured 0 Mbit/s")
    sr = [s / x for s, x in zip(soft, rxe)]
    ur = [u / x for u, x in zip(udp, rxe)]
    med = statistics.median
    print(f"  {size:>6} B x {rs[0]['iters']:>4}, {len(rs)} rounds: rxe {med(rxe):8.2f} Mbit/s"
          f"  soft {med(soft):8.2f}  udp {med(udp):8.2f}"
          f"  soft/rxe {med(sr):5.2f} [{min(sr):.2f}-{max(sr):.2f}]"
          f"  udp/rxe {med(ur):5.2f} [{min(ur):.2f}-{max(ur):.2f}]")
PY
