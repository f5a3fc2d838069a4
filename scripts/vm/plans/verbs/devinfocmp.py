#!/usr/bin/env python3
"""Compare `ibv_devinfo [-v]` with `rdmakit devinfo [-v]` line by line.

devinfocmp.py IBV_DEVINFO.txt RDMAKIT.txt

Every line must be identical, except lines matching a rule in ALLOWED, each of which
is documented and justified in docs/ibverbs-provider.md ("devinfo against
ibv_devinfo on rxe"). Prints every difference and whether a rule covers it; exits 1
on an unexplained one or a different line count.
"""
import re
import sys

# (field regex on the ibv_devinfo line, reason). Empty until a run on rxe shows a
# difference that is the tool's choice and not a bug (see the doc).
ALLOWED = []


def main():
    a = open(sys.argv[1]).read().splitlines()
    b = open(sys.argv[2]).read().splitlines()
    bad = 0
    for i in range(max(len(a), len(b))):
        la = a[i] if i < len(a) else "<missing>"
        lb = b[i] if i < len(b) else "<missing>"
        if la == lb:
            continue
        rule = next((r for r in ALLOWED if re.search(r[0], la)), None)
        tag = f"allowed ({rule[1]})" if rule else "UNEXPLAINED"
        if not rule:
            bad += 1
        print(f"line {i + 1}: {tag}\n  ibv_devinfo: {la!r}\n  rdmakit:     {lb!r}")
    print(f"{len(a)} lines from ibv_devinfo, {len(b)} from rdmakit, {bad} unexplained differences")
    return 1 if bad else 0


sys.exit(main())
