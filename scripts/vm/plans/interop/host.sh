#!/usr/bin/env bash
# Plan interop, host side: rdmakit pcap over the capture of soft NIC <-> rxe
# traffic must decode every RoCE packet and find every ICRC valid, with packets
# from both ends (10.0.3.1 built by the soft NIC, 10.0.3.2 by rxe).
# `rdmakit pcap` exits 1 when it flags anomalies: retransmissions and NAKs are
# expected under TCG, so exit 1 is accepted and only the ICRC verdict counts.
set -uo pipefail
[ -s "$RESULTS/interop/retries.txt" ] && { echo "interop: retried after a failure (TCG timing):"; sed 's/^/  /' "$RESULTS/interop/retries.txt"; }
pcap="$RESULTS/interop/interop.pcap"
[ -s "$pcap" ] || { echo "interop: no capture at $pcap"; exit 1; }
"$RDMAKIT" pcap --json "$pcap" > "$RESULTS/interop/pcap.json"
rc=$?
[ $rc -le 1 ] || { echo "interop: rdmakit pcap failed (exit $rc)"; exit 1; }
python3 - "$RESULTS/interop/pcap.json" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
n, ok, bad, unk = v["roce_packets"], v["icrc_valid"], v["icrc_invalid"], v["icrc_unchecked"]
by_src = {}
for f in v.get("flows", []):
    by_src[f["src"]] = by_src.get(f["src"], 0) + f["packets"]
print(f"interop capture: {n} RoCEv2 packets ({', '.join(f'{k}: {c}' for k, c in sorted(by_src.items()))}), "
      f"ICRC valid {ok}, invalid {bad}, unchecked {unk}; anomalies {v.get('anomaly_counts', {})}")
if n < 100:
    sys.exit("interop: too few RoCE packets captured")
if not {"10.0.3.1", "10.0.3.2"} <= set(by_src):
    sys.exit(f"interop: packets from only {sorted(by_src)}")
if bad or unk:
    sys.exit("interop: not every ICRC is valid")
PY
