#!/usr/bin/env python3
"""jsoncmp.py THEIRS OURS KEY[,KEY...]: every object of iproute2's `rdma -j` output
(THEIRS) must have a counterpart in rdmakit's --json output (OURS) with the same
identifying KEYs, and every key iproute2 prints must have the same value in ours
(ours may add keys, e.g. owner-state). Exit 1 listing every difference."""
import json
import sys

theirs = json.load(open(sys.argv[1]))
ours = json.load(open(sys.argv[2]))
keys = sys.argv[3].split(",")
if isinstance(theirs, dict):
    theirs = [theirs]
if isinstance(ours, dict):
    ours = [ours]


def ident(o):
    return tuple(o.get(k) for k in keys)


by = {ident(o): o for o in ours}
bad = []
for t in theirs:
    o = by.get(ident(t))
    if o is None:
        bad.append(f"missing in rdmakit: {dict(zip(keys, ident(t)))}")
        continue
    for k, v in t.items():
        if o.get(k) != v:
            bad.append(f"{dict(zip(keys, ident(t)))} {k}: rdma {v!r} rdmakit {o.get(k)!r}")
print(f"{len(theirs)} objects, {sum(len(t) for t in theirs)} fields compared, {len(bad)} differences")
for b in bad:
    print("  " + b)
sys.exit(1 if bad or not theirs else 0)
