#!/usr/bin/env python3
"""The fault catalogue's assertions (scripts/vm/catalogue.json) on one doctor report.

The same rules are applied twice: live, in the guest, to `rdmakit doctor --json` right
after the fault was created (doctorcheck.py --catalogue), and on every `cargo test`, to
the report replayed from the bundle kept in crates/doctor/tests/data/vm/
(crates/doctor/tests/vm_catalogue.rs implements the same rules in Rust).

A fault:
  name, plan, bundle   scenario, VM plan that creates it, fixture file name
  how, produced        how the fault was made; "real" (the kernel and rdma-core were put
                       in that state) or "simulated: WHY" (see catalogue.json)
  exit                 rdmakit doctor's exit status (--fail-on error: 1 iff an error)
  findings             each: code, and optionally severity, layer, subject (exact),
                       evidence [{path, value} exact | {path, value_has} substring],
                       message [substrings], remedy [substrings], count (exact number
                       of findings with that code). One finding must satisfy all of it.
  quiet_at             no other finding at or above this severity (codes in findings
                       and allow excepted)
  allow, absent        codes tolerated by quiet_at / codes that must not appear
  status               {check id: pass | fail | not_applicable | not_checked}
Strings may hold {VAR}: replaced by the scenario's variables (NAME.vars, KEY=VALUE
lines: the PIDs and values the plan observed); an unknown {VAR} is an error.
"""
import json
import re
import sys

SEV = {"info": 0, "warning": 1, "error": 2}
VAR = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def load(path):
    with open(path) as f:
        return json.load(f)


def fault(spec, name):
    for f in spec["faults"]:
        if f["name"] == name:
            return f
    raise SystemExit(f"catalogue: no fault named {name!r}")


def read_vars(path):
    out = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                k, _, v = line.partition("=")
                out[k.strip()] = v.strip()
    return out


def subst(s, variables, errors):
    def one(m):
        k = m.group(1)
        if k not in variables:
            errors.append(f"catalogue uses {{{k}}} but the scenario recorded no such variable")
            return m.group(0)
        return variables[k]

    return VAR.sub(one, s)


def finding_problems(want, f, variables, errors):
    """Why finding `f` does not satisfy `want` (empty when it does)."""
    why = []
    for key in ("severity", "layer", "subject"):
        if key in want:
            w = subst(want[key], variables, errors)
            if f.get(key) != w:
                why.append(f"{key} {f.get(key)!r} != {w!r}")
    for ev in want.get("evidence", []):
        path = subst(ev["path"], variables, errors)
        if "value" in ev:
            val = subst(ev["value"], variables, errors)
            ok = any(e["path"] == path and e["value"] == val for e in f.get("evidence", []))
            what = f"= {val!r}"
        else:
            val = subst(ev["value_has"], variables, errors)
            ok = any(e["path"] == path and val in e["value"] for e in f.get("evidence", []))
            what = f"containing {val!r}"
        if not ok:
            have = [f"{e['path']} = {e['value']!r}" for e in f.get("evidence", [])]
            why.append(f"no evidence {path} {what} (has: {have})")
    for key in ("message", "remedy"):
        for part in want.get(key, []):
            p = subst(part, variables, errors)
            if p not in f.get(key, ""):
                why.append(f"{key} lacks {p!r}: {f.get(key)!r}")
    return why


def check(spec_fault, report, exit_status, variables):
    """Every failed assertion of `spec_fault` on `report` (a parsed doctor --json)."""
    errors = []
    findings = report.get("findings", [])
    if exit_status is not None and exit_status != spec_fault["exit"]:
        errors.append(f"exit status {exit_status}, the catalogue says {spec_fault['exit']}")
    want_exit = 1 if any(f["severity"] == "error" for f in findings) else 0
    if want_exit != spec_fault["exit"]:
        errors.append(f"the findings give exit {want_exit}, the catalogue says {spec_fault['exit']}")
    for want in spec_fault.get("findings", []):
        same = [f for f in findings if f["code"] == want["code"]]
        if "count" in want and len(same) != want["count"]:
            errors.append(f"{len(same)} {want['code']} findings, expected {want['count']}")
        if not same:
            errors.append(f"no {want['code']} finding (found: {sorted({f['code'] for f in findings})})")
            continue
        problems = [finding_problems(want, f, variables, errors) for f in same]
        if all(problems):
            errors.append(f"no {want['code']} finding matches the catalogue:")
            for f, p in zip(same, problems):
                errors.append(f"  {f['code']} {f['subject']}: " + "; ".join(p))
    expected = {w["code"] for w in spec_fault.get("findings", [])}
    allowed = expected | set(spec_fault.get("allow", []))
    if "quiet_at" in spec_fault:
        lim = SEV[spec_fault["quiet_at"]]
        for f in findings:
            if SEV[f["severity"]] >= lim and f["code"] not in allowed:
                errors.append(f"unexpected {f['severity']} {f['code']} {f['subject']}: {f['message']}")
    for code in spec_fault.get("absent", []):
        if any(f["code"] == code for f in findings):
            errors.append(f"{code} must not be reported here")
    checks = {c["id"]: c.get("status") for c in report.get("checks", [])}
    for cid, st in spec_fault.get("status", {}).items():
        if checks.get(cid) != st:
            errors.append(f"check {cid} is {checks.get(cid)!r}, the catalogue says {st!r}")
    return errors


def main():
    """catalogue.py CATALOGUE.json FAULT REPORT.json [VARS]: check a report (host side)."""
    spec = load(sys.argv[1])
    f = fault(spec, sys.argv[2])
    with open(sys.argv[3]) as fh:
        report = json.load(fh)
    variables = read_vars(sys.argv[4]) if len(sys.argv) > 4 else {}
    errors = check(f, report, None, variables)
    for e in errors:
        print(f"{sys.argv[2]}: CATALOGUE ASSERTION FAILED: {e}")
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
