#!/bin/sh
# Seed the fuzz corpora from the real rxe captures in fixtures/pcap:
# whole files for `capture`, each frame for `frame`, each UDP payload for `roce`.
# Usage: crates/wire/fuzz/seed.sh [FIXTURES_PCAP_DIR]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=${1:-$here/../../../fixtures/pcap}
mkdir -p "$here/corpus/capture" "$here/corpus/frame" "$here/corpus/roce"
cp "$src"/*.pcap "$here/corpus/capture/"
python3 - "$src" "$here/corpus" <<'PY'
import struct, sys, glob, os
src, out = sys.argv[1], sys.argv[2]
for path in glob.glob(os.path.join(src, "*.pcap")):
    d = open(path, "rb").read()
    off, n = 24, 0
    base = os.path.basename(path)[:-5]
    while off + 16 <= len(d):
        incl = struct.unpack("<I", d[off + 8:off + 12])[0]
        frame = d[off + 16:off + 16 + incl]
        off += 16 + incl
        n += 1
        open(os.path.join(out, "frame", f"{base}-{n}"), "wb").write(frame)
        open(os.path.join(out, "roce", f"{base}-{n}"), "wb").write(frame[42:])
PY
