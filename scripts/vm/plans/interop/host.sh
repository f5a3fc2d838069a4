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
python3 - "$RESULTS/interop/pcap.json" <<'PY' || exit 1
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
# rdma_cm: the MADs between the soft NIC (10.0.3.1) and the kernel's CM
# (10.0.3.2) must hold each side's half of every exchange: REQ/REP/RTU,
# DREQ/DREP and SIDR_REQ/SIDR_REP, sent by both.
cm="$RESULTS/interop/cm.pcap"
[ -s "$cm" ] || { echo "interop: no CM capture at $cm"; exit 1; }
python3 - "$cm" <<'PY' || exit 1
import struct, sys
names = {0x10: "REQ", 0x11: "MRA", 0x12: "REJ", 0x13: "REP", 0x14: "RTU", 0x15: "DREQ",
         0x16: "DREP", 0x17: "SIDR_REQ", 0x18: "SIDR_REP"}
d = open(sys.argv[1], "rb").read()
off, seen = 24, {}
while off + 16 <= len(d):
    incl = struct.unpack("<I", d[off + 8:off + 12])[0]
    pkt = d[off + 16:off + 16 + incl]
    off += 16 + incl
    src = ".".join(str(b) for b in pkt[26:30])
    mad = pkt[14 + 20 + 8 + 12 + 8:]
    if len(mad) < 24 or mad[1] != 0x07:
        continue
    attr = names.get(struct.unpack(">H", mad[16:18])[0], "other")
    seen[(src, attr)] = seen.get((src, attr), 0) + 1
print("interop CM MADs: " + ", ".join(f"{s} {a} x{n}" for (s, a), n in sorted(seen.items())))
missing = [(s, a) for s in ("10.0.3.1", "10.0.3.2")
           for a in ("REQ", "REP", "RTU", "DREQ", "DREP", "SIDR_REQ", "SIDR_REP")
           if (s, a) not in seen]
if missing:
    sys.exit(f"interop: no CM message {missing} in the capture")
PY
# The CNP step's capture: rxe's packets CE-marked by nftables, the soft NIC's
# CNPs back to rxe's QPs, every ICRC valid (the CE mark is outside the ICRC's
# coverage: IP TOS is masked), no CE-marked flow left without a CNP.
ce="$RESULTS/interop/ce.pcap"
[ -s "$ce" ] || { echo "interop: no CNP-step capture at $ce"; exit 1; }
"$RDMAKIT" pcap --json "$ce" > "$RESULTS/interop/ce.json"
rc=$?
[ $rc -le 1 ] || { echo "interop: rdmakit pcap failed on $ce (exit $rc)"; exit 1; }
python3 - "$RESULTS/interop/ce.json" "$RESULTS/interop" <<'PY' || exit 1
import json, os, sys
v = json.load(open(sys.argv[1]))
ecn, cnps = v["ecn_counts"], v["cnp_flows"]
kinds = v.get("anomaly_counts", {})
to_rxe = [f for f in cnps if f["src"] == "10.0.3.1" and f["dst"] == "10.0.3.2"]
sent = sum(f["cnps"] for f in to_rxe)
def counters(name):
    p = os.path.join(sys.argv[2], name)
    return dict(l.split() for l in open(p) if len(l.split()) == 2) if os.path.exists(p) else {}
b, a = counters("ce-rxe-before.txt"), counters("ce-rxe-after.txt")
grew = {k: int(a[k]) - int(b.get(k, 0)) for k in sorted(a) if a[k].isdigit() and int(a[k]) != int(b.get(k, 0))}
print(f"interop CNP step: {v['roce_packets']} RoCEv2 packets, ECN {ecn}, "
      f"CNPs soft NIC -> rxe {sent} to {len(to_rxe)} QPs, ICRC valid {v['icrc_valid']}, "
      f"invalid {v['icrc_invalid']}, unchecked {v['icrc_unchecked']}; anomalies {kinds}; "
      f"rxe1 counters grew {grew}")
if ecn.get("ce", 0) < 100:
    sys.exit("interop: fewer than 100 CE-marked packets: the nftables mark did not apply")
if sent == 0:
    sys.exit("interop: the soft NIC sent no CNP for rxe's CE-marked packets")
if kinds.get("ce_without_cnp", 0):
    sys.exit("interop: CE-marked flows the soft NIC never answered with a CNP")
if v["icrc_invalid"] or v["icrc_unchecked"]:
    sys.exit("interop: not every ICRC in the CNP step is valid")
PY
