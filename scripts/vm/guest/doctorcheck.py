#!/usr/bin/env python3
"""Assert on an `rdmakit doctor --json` report (schema rdmakit.doctor/v1).

doctorcheck.py REPORT.json --exit N [--expect CODE]... [--allow CODE]...
               [--quiet-at warning] [--status CHECK=STATUS]...
               [--evidence CODE:PATH_SUBSTRING=VALUE_SUBSTRING]...
               [--catalogue FILE --fault NAME [--vars FILE]]

--exit N         rdmakit's exit status that was observed (checked against --fail-on error:
                 1 iff an error finding, else 0)
--expect CODE    CODE must be among the findings
--quiet-at SEV   no finding at SEV or above except the expected and --allow'ed codes
--status C=S     check C has status S (pass / fail / not_applicable / not_checked)
--evidence       a finding CODE whose evidence has a path containing PATH_SUBSTRING and
                 a value containing VALUE_SUBSTRING (the value as read)
--catalogue F    also assert fault NAME of the fault catalogue F (scripts/vm/catalogue.json:
--fault NAME     exit status, findings with severity, layer, subject, evidence, message
                 and remedy; see catalogue.py), with {VAR} taken from --vars (KEY=VALUE
                 lines the scenario wrote)
Prints the findings; exits 1 with every failed assertion listed.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import catalogue  # noqa: E402

SEV = {"info": 0, "warning": 1, "error": 2}

ap = argparse.ArgumentParser()
ap.add_argument("report")
ap.add_argument("--exit", type=int, required=True)
ap.add_argument("--expect", action="append", default=[])
ap.add_argument("--allow", action="append", default=[])
ap.add_argument("--quiet-at")
ap.add_argument("--status", action="append", default=[])
ap.add_argument("--evidence", action="append", default=[])
ap.add_argument("--catalogue")
ap.add_argument("--fault")
ap.add_argument("--vars")
a = ap.parse_args()
if bool(a.catalogue) != bool(a.fault):
    ap.error("--catalogue and --fault go together")

errors = []
try:
    r = json.load(open(a.report))
except Exception as e:  # noqa: BLE001
    print(f"report {a.report} is not JSON: {e}")
    sys.exit(1)

if r.get("schema") != "rdmakit.doctor/v1":
    errors.append(f"schema is {r.get('schema')!r}")
findings = r.get("findings", [])
print(f"source: {r.get('source')}  kernel: {r.get('kernel')}  counts: {r.get('counts')}")
for d in r.get("devices", []):
    print(f"device {d['name']} kind={d['kind']} driver={d['driver']} ports={d['ports']}")
for f in findings:
    print(f"finding {f['code']} {f['severity']:<7} {f['subject']}: {f['message']}")
    for ev in f.get("evidence", []):
        print(f"    evidence {ev['path']} = {ev['value']!r}")
for c in r.get("checks", []):
    print(f"check {c['id']:<22} {c['status']:<15} {c.get('reason') or ''}")

codes = {f["code"] for f in findings}
want_exit = 1 if any(f["severity"] == "error" for f in findings) else 0
if a.exit != want_exit:
    errors.append(f"rdmakit exited {a.exit}, expected {want_exit} for these findings")
for c in a.expect:
    if c not in codes:
        errors.append(f"expected finding {c} is missing (found: {sorted(codes)})")
if a.quiet_at:
    lim = SEV[a.quiet_at]
    for f in findings:
        if SEV[f["severity"]] >= lim and f["code"] not in a.expect and f["code"] not in a.allow:
            errors.append(f"unexpected {f['severity']} {f['code']}: {f['message']}")
checks = {c["id"]: c for c in r.get("checks", [])}
for s in a.status:
    cid, _, st = s.partition("=")
    got = checks.get(cid, {}).get("status")
    if got != st:
        errors.append(f"check {cid} is {got!r}, expected {st!r}")
for e in a.evidence:
    code, _, rest = e.partition(":")
    path, _, val = rest.partition("=")
    ok = any(
        path in ev["path"] and val in str(ev["value"])
        for f in findings if f["code"] == code for ev in f.get("evidence", [])
    )
    if not ok:
        errors.append(f"no {code} evidence with path ~ {path!r} and value ~ {val!r}")
if a.catalogue:
    spec = catalogue.load(a.catalogue)
    fault = catalogue.fault(spec, a.fault)
    variables = catalogue.read_vars(a.vars) if a.vars else {}
    errors += catalogue.check(fault, r, a.exit, variables)
for e in errors:
    print("ASSERTION FAILED:", e)
sys.exit(1 if errors else 0)
