#!/usr/bin/env python3
"""replaycompare.py LIVE.json REPLAY.json LIVE_EXIT REPLAY_EXIT

Asserts that `rdmakit doctor --json --from BUNDLE` on the host gives the report
`rdmakit doctor --json` gave live in the guest: every field but `source` equal, and the
same exit status. Prints the differences otherwise and exits 1.
"""
import json
import sys

live, replay = (json.load(open(p)) for p in sys.argv[1:3])
live_exit, replay_exit = sys.argv[3], sys.argv[4]
name = sys.argv[1].rsplit("/", 1)[-1]
for r in (live, replay):
    r.pop("source", None)

diffs = []


def walk(a, b, path):
    if type(a) is not type(b):
        diffs.append(f"{path}: live {a!r} != replay {b!r}")
    elif isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                diffs.append(f"{path}.{k}: only in {'live' if k in a else 'replay'}: {a.get(k, b.get(k))!r}")
            else:
                walk(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        if len(a) != len(b):
            diffs.append(f"{path}: {len(a)} items live, {len(b)} replayed")
        for i, (x, y) in enumerate(zip(a, b)):
            walk(x, y, f"{path}[{i}]")
    elif a != b:
        diffs.append(f"{path}: live {a!r} != replay {b!r}")


walk(live, replay, "")
if live_exit != replay_exit:
    diffs.append(f"exit status: live {live_exit}, replay {replay_exit}")
codes = [f["code"] for f in live.get("findings", [])]
if diffs:
    print(f"{name}: the replayed bundle differs from the live report:")
    for d in diffs[:40]:
        print("  ", d)
    sys.exit(1)
print(f"{name}: replay identical ({len(codes)} findings: {' '.join(codes) or 'none'}; exit {live_exit})")
