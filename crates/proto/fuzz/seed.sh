#!/bin/sh
# Seed the responder corpus from the real rxe captures in fixtures/pcap:
# one input per captured RoCE packet, framed as the target expects
# (QP type RC, record with flags = our QPN | default P_Key | PSN = expected).
# Usage: crates/proto/fuzz/seed.sh [FIXTURES_PCAP_DIR]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=${1:-$here/../../../fixtures/pcap}
mkdir -p "$here/corpus/responder"
PYTHONPATH="$here/../../../scripts/lib" python3 - "$src" "$here/corpus" <<'PY'
import struct, sys, glob, os
from pcap_frames import frames
src, out = sys.argv[1], sys.argv[2]
for path in glob.glob(os.path.join(src, "*.pcap")):
    base = os.path.basename(path)[:-5]
    prev = b""
    for n, frame in enumerate(frames(path), 1):
        pkt = frame[42:-4]  # Ethernet+IPv4+UDP off, ICRC off
        if len(pkt) < 12:
            continue
        rec = struct.pack("<H", len(pkt)) + bytes([0x07, 0]) + pkt
        open(os.path.join(out, "responder", f"{base}-{n}"), "wb").write(b"\x00" + rec)
        open(os.path.join(out, "responder", f"{base}-{n}-pair"), "wb").write(b"\x00" + prev + rec)
        prev = rec
PY
