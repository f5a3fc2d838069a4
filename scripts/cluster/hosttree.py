#!/usr/bin/env python3
"""hosttree.py CAPTURE_DIR OUT_DIR: a live host tree from a capture directory.

Copies CAPTURE_DIR/root/ to OUT_DIR so that `rdmakit doctor --root OUT_DIR` reads it
like a host: files stay files and symlinks that the repository stores flattened (a
file holding the target text, no trailing newline; the rule of
crates/host/src/capture.rs is_flattened_link) become symlinks again.
"""
import os
import shutil
import sys


def flattened_link(b: bytes) -> bool:
    return (0 < len(b) < 4096 and not b.endswith(b"\n")
            and (b.startswith(b"../") or b.startswith(b"./") or b.startswith(b"/"))
            and not any(c in b for c in b" \t\n\r\x0b\x0c\x00"))


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    src = os.path.join(sys.argv[1], "root")
    out = sys.argv[2]
    if not os.path.isdir(src):
        print(f"hosttree.py: {src}: not a capture directory (no root/)", file=sys.stderr)
        return 1
    shutil.copytree(src, out, symlinks=True)
    links = 0
    for d, _, files in os.walk(out):
        for f in files:
            p = os.path.join(d, f)
            if os.path.islink(p):
                continue
            with open(p, "rb") as fh:
                b = fh.read(4096)
            if flattened_link(b):
                os.unlink(p)
                os.symlink(b.decode(), p)
                links += 1
    if links == 0:
        print(f"hosttree.py: no symlinks restored in {out}: is {src} a capture?", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
