#!/bin/sh
# Seed the fuzz corpora from the real rxe captures in fixtures/pcap:
# whole files for `capture`, each frame for `frame`, each UDP payload for `roce`.
# Usage: crates/wire/fuzz/seed.sh [FIXTURES_PCAP_DIR]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=${1:-$here/../../../fixtures/pcap}
mkdir -p "$here/corpus/capture" "$here/corpus/frame" "$here/corpus/roce"
cp "$src"/*.pcap "$here/corpus/capture/"
PYTHONPATH="$here/../../../scripts/lib" python3 - "$src" "$here/corpus" <<'PY'
import sys, glob, os
from pcap_frames import frames
src, out = sys.argv[1], sys.argv[2]
for path in glob.glob(os.path.join(src, "*.pcap")):
    base = os.path.basename(path)[:-5]
    for n, frame in enumerate(frames(path), 1):
        open(os.path.join(out, "frame", f"{base}-{n}"), "wb").write(frame)
        open(os.path.join(out, "roce", f"{base}-{n}"), "wb").write(frame[42:])
PY
